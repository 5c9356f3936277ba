//! `struct`, and the optional-data list struct (RFC 4506 section 4.19).

use super::*;

impl<'s> Gen<'s> {
    pub(super) fn emit_struct(
        &mut self,
        i: usize,
        fields: &[&'s Declaration],
        rename: Option<String>,
    ) -> Result<(), GenError> {
        if rename.is_none() {
            self.doc(i, "struct");
        }
        let rust = rename.unwrap_or_else(|| self.items[i].rust.clone());
        let xdr = self.items[i].xdr.clone();
        let mut codecs = Vec::new();
        for f in fields {
            let Some(name) = f.name() else { return Err(self.err(f.span(), "`void` is not a struct field")) };
            let Some(c) = self.codec(f, &format!("{xdr}.{}", name.name))? else { continue };
            codecs.push((snake(&name.name), name.name.clone(), c));
        }
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        let _ = writeln!(self.out, "{}pub struct {rust}{lt} {{", self.derives(&rust, true));
        for (f, xf, c) in &codecs {
            let _ = writeln!(self.out, "    /// XDR field `{xf}`.\n    pub {f}: {},", c.ty);
        }
        self.out.push_str("}\n\n");
        let min = sum_terms(codecs.iter().map(|(_, _, c)| c.min.as_str()));
        let fixed = fixed_terms(codecs.iter().map(|(_, _, c)| c.fixed.as_str()));
        let plain = Flag::all(codecs.iter().map(|(_, _, c)| &c.plain));
        let bounded = Flag::any(codecs.iter().map(|(_, _, c)| &c.bounded));
        let decode: String =
            codecs.iter().map(|(f, _, c)| format!("            {f}: {},\n", c.decode)).collect::<String>();
        // `a.saturating_add(b).saturating_add(c)`: a length that would not fit
        // saturates rather than wraps. Only the first term receives a method
        // call, so only there does a sum need parentheses.
        let mut terms = codecs.iter().map(|(f, _, c)| c.len.at(&format!("self.{f}")));
        let first = terms.next().map(|t| if t.contains(" + ") { format!("({t})") } else { t }).unwrap_or_default();
        let len = terms.fold(first, |acc, t| format!("{acc}\n            .saturating_add({t})"));
        let encode = struct_encode(&codecs, &fixed);
        let validate: String = codecs
            .iter()
            .filter(|(_, _, c)| c.bounded.may_hold())
            .filter_map(|(f, _, c)| c.validate.as_ref().map(|v| format!("        {}\n", v.at(&format!("self.{f}")))))
            .collect();
        self.emit_xdr_impl(
            &rust,
            &min,
            &fixed,
            &plain,
            &bounded,
            &format!("Ok({rust} {{\n{decode}        }})"),
            &len,
            &encode,
            &validate,
            codecs.split_first().and_then(|((f, _, c), rest)| led_encode(&format!("self.{f}"), c, rest)),
        );
        Ok(())
    }

    pub(super) fn emit_list(&mut self, i: usize, b: &'s StructBody) -> Result<(), GenError> {
        let xdr = self.items[i].xdr.clone();
        let rust = self.items[i].rust.clone();
        let elem = self.list_elem(&xdr)?;
        self.doc(i, "struct");
        let link = self.syms.type_def(&xdr).and_then(list_link).map_or("next".to_string(), |l| l.name.clone());
        let _ = write!(
            self.out,
            "///\n/// An optional-data list (RFC 4506 section 4.19): `{xdr} *` is decoded as a\n\
             /// sequence of entries, walked in a loop rather than through `{link}`.\n\
             pub type {rust}<'a> = xdr_spec_rt::List<'a, {elem}>;\n\n"
        );
        if b.fields.len() != 2 {
            let entry = list_names(&camel(&xdr)).1;
            let _ =
                writeln!(self.out, "/// One entry of [`{rust}`]: the fields of XDR `struct {xdr}` before `{link}`.");
            let fields: Vec<&Declaration> = b.fields[..b.fields.len() - 1].iter().collect();
            self.emit_struct(i, &fields, Some(entry))?;
        }
        Ok(())
    }
}
