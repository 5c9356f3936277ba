//! `enum`: a `#[repr(i32)]` Rust enum and a constant per enumerator.

use super::*;

impl<'s> Gen<'s> {
    pub(super) fn emit_enum(&mut self, i: usize, b: &'s EnumBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        self.doc(i, "enum");
        let _ =
            write!(self.out, "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\n#[repr(i32)]\npub enum {rust} {{\n");
        let mut members = Vec::new();
        for (id, v) in &b.members {
            let value = self.value(v)?;
            let value = i32::try_from(value)
                .map_err(|_| self.err(v.span(), format!("enum value {value} does not fit a signed 32-bit int")))?;
            let variant = camel(&id.name);
            let _ = writeln!(self.out, "    /// XDR `{} = {value}`.\n    {variant} = {value},", id.name);
            members.push((id.name.clone(), variant, value));
        }
        self.out.push_str("}\n\n");
        let arms: String = members.iter().map(|(_, v, n)| format!("            {n} => Some(Self::{v}),\n")).collect();
        let _ = write!(
            self.out,
            "impl {rust} {{
    /// The value on the wire.
    pub const fn value(self) -> i32 {{
        self as i32
    }}

    /// The member with wire value `v`, if any.
    pub const fn from_value(v: i32) -> Option<Self> {{
        match v {{
{arms}            _ => None,
        }}
    }}
}}

"
        );
        for (x, v, n) in &members {
            let _ = writeln!(self.out, "/// XDR enumerator `{x}` of `enum {xdr}` ([`{rust}::{v}`]), as a wire value.\npub const {}: i32 = {n};", screaming(x));
        }
        self.out.push('\n');
        let decode = format!(
            "let v = r.i32()?;\n        Self::from_value(v).ok_or_else(|| xdr_spec_rt::Error::BadEnum {{ type_name: \"{xdr}\", value: v, at: r.position() - 4 }})"
        );
        self.emit_xdr_impl(
            &rust,
            "4",
            "Some(4)",
            &Flag::Known(false),
            &Flag::Known(false),
            &decode,
            "4",
            "        w.put_i32(*self as i32);\n",
            "",
            None,
        );
        Ok(())
    }
}
