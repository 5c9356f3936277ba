//! `struct`, and the optional-data list struct (RFC 4506 section 4.19).

use super::layout::Reference;
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
        self.derives(&rust, true);
        self.out.block(&format!("pub struct {rust}{lt}"), "", |c| {
            for (f, xf, codec) in &codecs {
                c.line(format!("/// XDR field `{xf}`."));
                c.line(format!("pub {f}: {},", codec.ty));
            }
        });
        self.out.blank();
        let layout = self.concat(self.items[i].span, codecs.iter().map(|(_, _, c)| c.layout))?;
        let reference = Reference::concat(codecs.iter().map(|(_, _, c)| &c.reference));
        let places: Vec<(String, &Codec)> = codecs.iter().map(|(f, _, c)| (format!("self.{f}"), c)).collect();
        let decode = |c: &mut Code| {
            if codecs.is_empty() {
                return c.line(format!("Ok({rust} {{}})"));
            }
            c.block(&format!("Ok({rust}"), ")", |c| {
                for (f, _, codec) in &codecs {
                    c.expr(&format!("{f}: "), &codec.decode, ",");
                }
            });
        };
        let len = |c: &mut Code| {
            let known = places.iter().filter_map(|(_, c)| c.layout.fixed).sum();
            let terms = places.iter().filter(|(_, c)| c.layout.fixed.is_none()).map(|(p, c)| c.len.at(p)).collect();
            sum_len(c, terms, known);
        };
        let encode = |c: &mut Code| encode_fields(c, &places);
        let validate = |c: &mut Code| {
            for (place, codec) in places.iter().filter(|(_, c)| c.layout.bounded) {
                if let Some(v) = &codec.validate {
                    c.expr("", &v.at(place), ";");
                }
            }
        };
        let led = |c: &mut Code| {
            c.line(format!("{}.encode_counted_led(lead, w);", places[0].0));
            encode_fields(c, &places[1..]);
        };
        let counted = places.first().is_some_and(|(_, c)| c.counted);
        let bodies = Bodies {
            decode: &decode,
            len: &len,
            encode: &encode,
            validate: &validate,
            led: if counted { Some(&led) } else { None },
        };
        self.emit_xdr_impl(&rust, layout, reference, bodies);
        Ok(())
    }

    pub(super) fn emit_list(&mut self, i: usize, b: &'s StructBody) -> Result<(), GenError> {
        let xdr = self.items[i].xdr.clone();
        let rust = self.items[i].rust.clone();
        let elem = self.list_elem(&xdr)?;
        self.doc(i, "struct");
        let link = self.syms.type_def(&xdr).and_then(list_link).map_or("next".to_string(), |l| l.name.clone());
        let c = &mut self.out;
        c.line("///");
        c.line(format!("/// An optional-data list (RFC 4506 section 4.19): `{xdr} *` is decoded as a"));
        c.line(format!("/// sequence of entries, walked in a loop rather than through `{link}`."));
        c.line(format!("pub type {rust}<'a> = xdr_spec_rt::List<'a, {elem}>;"));
        c.blank();
        if b.fields.len() != 2 {
            let entry = list_names(&camel(&xdr)).1;
            self.out.line(format!("/// One entry of [`{rust}`]: the fields of XDR `struct {xdr}` before `{link}`."));
            let fields: Vec<&Declaration> = b.fields[..b.fields.len() - 1].iter().collect();
            self.emit_struct(i, &fields, Some(entry))?;
        }
        Ok(())
    }
}
