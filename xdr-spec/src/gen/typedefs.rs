//! `typedef`: a type alias, or a newtype where the typedef carries a bound.

use super::*;

impl<'s> Gen<'s> {
    pub(super) fn emit_typedef(&mut self, i: usize, d: &'s Declaration) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        let Declaration::Named { name, ty, shape } = d else { return Ok(()) };
        self.doc(i, "typedef");
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        // A typedef without a bound of its own renames a type: an alias.
        let alias = match (shape, ty) {
            (Shape::Scalar, _) => Some(self.scalar_type(ty, name.span)?),
            (Shape::Optional, _) => self.codec(d, &xdr)?.map(|c| c.ty),
            _ => None,
        };
        if let Some(target) = alias {
            let _ = write!(self.out, "pub type {rust}{lt} = {target};\n\n");
            return Ok(());
        }
        let Some(c) = self.codec(d, &xdr)? else { return Ok(()) };
        let _ = write!(self.out, "{}pub struct {rust}{lt}(pub {});\n\n", self.derives(&rust, true), c.ty);
        let validate = c.validate.as_ref().map(|v| format!("        {}\n", v.at("self.0"))).unwrap_or_default();
        let led = led_encode("self.0", &c, &[]);
        self.emit_xdr_impl(
            &rust,
            &c.min,
            &c.fixed,
            &c.plain,
            &c.bounded,
            &format!("Ok({rust}({}))", c.decode),
            &c.len.at("self.0"),
            &format!("        {};\n", c.encode.at("self.0")),
            &validate,
            led,
        );
        Ok(())
    }
}
