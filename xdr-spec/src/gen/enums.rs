//! `enum`: a `#[repr(i32)]` Rust enum and a constant per enumerator.

use super::layout::{Layout, Reference};
use super::*;

impl<'s> Gen<'s> {
    pub(super) fn emit_enum(&mut self, i: usize, b: &'s EnumBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        self.doc(i, "enum");
        let mut members = Vec::new();
        for (id, v) in &b.members {
            let value = self.value(v)?;
            let value = i32::try_from(value)
                .map_err(|_| self.err(v.span(), format!("enum value {value} does not fit a signed 32-bit int")))?;
            members.push((id.name.clone(), camel(&id.name), value));
        }
        let c = &mut self.out;
        c.line("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]");
        c.line("#[repr(i32)]");
        c.block(&format!("pub enum {rust}"), "", |c| {
            for (x, v, n) in &members {
                c.line(format!("/// XDR `{x} = {n}`."));
                c.line(format!("{v} = {n},"));
            }
        });
        c.blank();
        c.block(&format!("impl {rust}"), "", |c| {
            c.line("/// The value on the wire.");
            c.block("pub const fn value(self) -> i32", "", |c| c.line("self as i32"));
            c.blank();
            c.line("/// The member with wire value `v`, if any.");
            c.block("pub const fn from_value(v: i32) -> Option<Self>", "", |c| {
                // By the enumerators' constants, so the match reads as the
                // specification does; `self::` makes each a path, which
                // cannot quietly become a catch-all binding.
                c.block("match v", "", |c| {
                    for (x, v, n) in &members {
                        c.arm(&const_pattern(x).unwrap_or_else(|| n.to_string()), &format!("Some(Self::{v})"));
                    }
                    c.line("_ => None,");
                });
            });
        });
        c.blank();
        for (x, v, n) in &members {
            c.line(format!("/// XDR enumerator `{x}` of `enum {xdr}` ([`{rust}::{v}`]), as a wire value."));
            c.line(format!("pub const {}: i32 = {n};", screaming(x)));
        }
        c.blank();
        let decode = |c: &mut Code| {
            c.line("let v = r.i32()?;");
            c.block("Self::from_value(v).ok_or_else(|| xdr_spec_rt::Error::BadEnum", ")", |c| {
                c.line(format!("type_name: \"{xdr}\","));
                c.line("value: v,");
                c.line("at: r.position() - 4,");
            });
        };
        let bodies = Bodies {
            decode: &decode,
            len: &|_| {},
            encode: &|c| c.line("w.put_i32(*self as i32);"),
            validate: &|_| {},
            led: None,
        };
        // A word, not every value of which is a member: as the runtime's `bool`.
        self.emit_xdr_impl(&rust, Layout::WORD, Reference::of_type("bool"), bodies);
        Ok(())
    }
}
