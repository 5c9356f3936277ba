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
            self.out.line(format!("pub type {rust}{lt} = {target};"));
            self.out.blank();
            return Ok(());
        }
        let Some(c) = self.codec(d, &xdr)? else { return Ok(()) };
        self.derives(&rust, true);
        self.out.line(format!("pub struct {rust}{lt}(pub {});", c.ty));
        self.out.blank();
        let decode = |code: &mut Code| code.line(format!("Ok({rust}({}))", c.decode.flat()));
        let len = |code: &mut Code| sum_len(code, vec![c.len.at("self.0")], 0);
        let encode = |code: &mut Code| code.expr("", &c.encode.at("self.0"), ";");
        let validate = |code: &mut Code| {
            if let Some(v) = &c.validate {
                code.expr("", &v.at("self.0"), ";");
            }
        };
        let led = |code: &mut Code| code.line("self.0.encode_counted_led(lead, w);");
        let bodies = Bodies {
            decode: &decode,
            len: &len,
            encode: &encode,
            validate: &validate,
            led: if c.counted { Some(&led) } else { None },
        };
        self.emit_xdr_impl(&rust, c.layout, c.reference.clone(), bodies);
        Ok(())
    }
}
