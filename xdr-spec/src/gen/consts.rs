//! `const` and RPC `program` definitions: constants.

use super::*;

impl<'s> Gen<'s> {
    pub(super) fn emit_const(&mut self, def: &Definition, v: &Value) -> Result<(), GenError> {
        let value = self.value(v)?;
        let ty = if u32::try_from(value).is_ok() {
            "u32"
        } else if i32::try_from(value).is_ok() {
            "i32"
        } else {
            "i64"
        };
        let origin = self.origin(def.name.span);
        let c = &mut self.out;
        c.line(format!("/// XDR `const {}` ({origin}).", def.name.name));
        for line in &def.doc {
            c.line("///");
            c.line(doc_line(line));
        }
        c.line(format!("pub const {}: {ty} = {value};", screaming(&def.name.name)));
        c.blank();
        Ok(())
    }

    pub(super) fn emit_program(&mut self, def: &Definition, p: &Program) -> Result<(), GenError> {
        let origin = self.origin(def.name.span);
        let number = self.bound(&p.number)?;
        let program = &def.name.name;
        self.constant(&format!("RPC program `{program}` (RFC 5531 section 12; {origin})."), program, number);
        let mut procs = HashSet::new();
        for v in &p.versions {
            let n = self.bound(&v.number)?;
            self.constant(&format!("Version `{}` of program `{program}`.", v.name.name), &v.name.name, n);
            // A procedure that a later version repeats (with the same number,
            // which the checker requires) is one constant, not two.
            for proc in new_procedures(&v.procedures, &mut procs) {
                let n = self.bound(&proc.number)?;
                let doc =
                    format!("Procedure `{}` of version `{}` of program `{program}`.", proc.name.name, v.name.name);
                self.constant(&doc, &proc.name.name, n);
            }
        }
        if self.opts.services {
            self.emit_services(def, p)?;
        }
        Ok(())
    }

    /// `pub const NAME: u32 = n;` with its one line of documentation.
    fn constant(&mut self, doc: &str, xdr: &str, n: u32) {
        self.out.line(format!("/// {doc}"));
        self.out.line(format!("pub const {}: u32 = {n};", screaming(xdr)));
        self.out.blank();
    }
}

/// The procedures of a version not already seen (by name) in an earlier
/// version of the same program: a procedure that a later version repeats is
/// one constant.
pub(super) fn new_procedures<'p>(procedures: &'p [Procedure], seen: &mut HashSet<&'p str>) -> Vec<&'p Procedure> {
    procedures.iter().filter(|p| seen.insert(p.name.name.as_str())).collect()
}
