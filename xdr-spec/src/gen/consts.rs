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
        let _ = writeln!(self.out, "/// XDR `const {}` ({origin}).", def.name.name);
        for line in &def.doc {
            let _ = writeln!(self.out, "///\n/// {line}");
        }
        let _ = write!(self.out, "pub const {}: {ty} = {value};\n\n", screaming(&def.name.name));
        Ok(())
    }

    pub(super) fn emit_program(&mut self, def: &Definition, p: &Program) -> Result<(), GenError> {
        let origin = self.origin(def.name.span);
        let number = self.bound(&p.number)?;
        let _ = write!(
            self.out,
            "/// RPC program `{}` (RFC 5531 section 12; {origin}).\npub const {}: u32 = {number};\n\n",
            def.name.name,
            screaming(&def.name.name)
        );
        let mut procs = HashSet::new();
        for v in &p.versions {
            let n = self.bound(&v.number)?;
            let _ = write!(
                self.out,
                "/// Version `{}` of program `{}`.\npub const {}: u32 = {n};\n\n",
                v.name.name,
                def.name.name,
                screaming(&v.name.name)
            );
            // A procedure that a later version repeats (with the same number,
            // which the checker requires) is one constant, not two.
            for proc in new_procedures(&v.procedures, &mut procs) {
                let n = self.bound(&proc.number)?;
                let _ = write!(
                    self.out,
                    "/// Procedure `{}` of version `{}` of program `{}`.\npub const {}: u32 = {n};\n\n",
                    proc.name.name,
                    v.name.name,
                    def.name.name,
                    screaming(&proc.name.name)
                );
            }
        }
        Ok(())
    }
}

/// The procedures of a version not already seen (by name) in an earlier
/// version of the same program: a procedure that a later version repeats is
/// one constant.
pub(super) fn new_procedures<'p>(procedures: &'p [Procedure], seen: &mut HashSet<&'p str>) -> Vec<&'p Procedure> {
    procedures.iter().filter(|p| seen.insert(p.name.name.as_str())).collect()
}
