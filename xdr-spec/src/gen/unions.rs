//! `union`: a Rust enum with a variant per arm.

use super::*;
use crate::symbols::Symbol;

impl<'s> Gen<'s> {
    pub(super) fn emit_union(&mut self, i: usize, u: &'s UnionBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        let Declaration::Named { ty: dty, shape: Shape::Scalar, name: dname } = &u.discriminant else {
            return Err(self
                .err(u.discriminant.span(), "a union discriminant is a plain `int`, `unsigned int`, `bool` or enum"));
        };
        // The discriminant's Rust type, how to read it raw, and how to write a
        // known value.
        let dbase = self.syms.resolve_alias(dty);
        let (dty_rust, read, enum_ty) = match dbase {
            TypeSpec::Int => ("i32".to_string(), "r.i32()?", None),
            TypeSpec::UnsignedInt => ("u32".to_string(), "r.u32()?", None),
            TypeSpec::Bool => ("bool".to_string(), "r.u32()?", None),
            TypeSpec::Named { .. } | TypeSpec::InlineEnum(_) => {
                let t = self.scalar_type(dty, dname.span)?;
                (t.clone(), "r.i32()?", Some(t))
            }
            _ => return Err(self.err(dname.span, "a union discriminant is `int`, `unsigned int`, `bool` or an enum")),
        };
        let lit = |v: i64| -> String {
            match dbase {
                TypeSpec::UnsignedInt | TypeSpec::Bool => format!("{}", v as u32),
                _ => format!("{}", v as i32),
            }
        };
        // A label written as a name is matched and written by that name, so
        // the code reads as the specification does (`self::RDMA_MSG =>`, not
        // `0 =>`): an enumerator of the discriminant's enum, or for an
        // `unsigned int` discriminant a constant (both are generated as
        // constants of the discriminant's Rust type). `self::` makes the
        // pattern a path, which fails to compile rather than quietly becoming
        // a catch-all binding if the name were ever missing.
        let members: &[(Ident, Value)] = match dbase {
            TypeSpec::InlineEnum(b) => &b.members,
            TypeSpec::Named { name, .. } => match self.syms.type_def(&name.name).map(|d| &d.kind) {
                Some(DefinitionKind::Enum(b)) => &b.members,
                _ => &[],
            },
            _ => &[],
        };
        let label = |case: &Value, v: i64| -> String {
            let Value::Named(id) = case else { return lit(v) };
            let by_name = match dbase {
                TypeSpec::Named { .. } | TypeSpec::InlineEnum(_) => members.iter().any(|(m, _)| m.name == id.name),
                TypeSpec::UnsignedInt => {
                    matches!(
                        self.syms.get(&id.name),
                        Some(Symbol::Definition(Definition { kind: DefinitionKind::Const(_), .. }))
                    ) && u32::try_from(v).is_ok()
                }
                _ => false,
            };
            if by_name {
                format!("self::{}", screaming(&id.name))
            } else {
                lit(v)
            }
        };
        struct Arm {
            variant: String,
            values: Vec<i64>,
            /// The Rust pattern of each label, in the order of `values`.
            labels: Vec<String>,
            codec: Option<Codec>,
            xdr_field: Option<String>,
            holds_disc: bool,
        }
        let mut arms = Vec::new();
        let mut used = HashSet::new();
        for arm in &u.arms {
            let values = arm.cases.iter().map(|c| self.value(c)).collect::<Result<Vec<_>, _>>()?;
            let mut variant = if arm.cases.len() == 1 {
                match &arm.cases[0] {
                    Value::Named(id) => camel(&id.name),
                    Value::Literal { value, .. } if *value < 0 => format!("CaseMinus{}", value.unsigned_abs()),
                    Value::Literal { value, .. } => format!("Case{value}"),
                }
            } else {
                arm.decl.name().map_or_else(|| "Void".to_string(), |n| camel(&n.name))
            };
            while !used.insert(variant.clone()) {
                variant.push('_');
            }
            let field = arm.decl.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(&arm.decl, field.as_deref().unwrap_or(""))?;
            let labels = arm.cases.iter().zip(&values).map(|(c, v)| label(c, *v)).collect();
            arms.push(Arm { variant, values, labels, codec, xdr_field: field, holds_disc: arm.cases.len() > 1 });
        }
        if let Some(d) = &u.default {
            let field = d.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(d, field.as_deref().unwrap_or(""))?;
            let mut variant = "Default".to_string();
            while !used.insert(variant.clone()) {
                variant.push('_');
            }
            arms.push(Arm {
                variant,
                values: Vec::new(),
                labels: Vec::new(),
                codec,
                xdr_field: field,
                holds_disc: true,
            });
        }

        self.doc(i, "union");
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        let _ = writeln!(self.out, "{}pub enum {rust}{lt} {{", self.derives(&rust, true));
        for a in &arms {
            let cases = if a.values.is_empty() {
                "default".to_string()
            } else {
                a.values.iter().map(|v| format!("case {v}")).collect::<Vec<_>>().join(", ")
            };
            let field = a.xdr_field.as_deref().map_or("void".to_string(), |f| format!("`{f}`"));
            let _ = writeln!(self.out, "    /// XDR {cases}: {field}.");
            match (&a.codec, a.holds_disc) {
                (None, false) => {
                    let _ = writeln!(self.out, "    {},", a.variant);
                }
                (Some(c), false) => {
                    let _ = writeln!(self.out, "    {}({}),", a.variant, c.ty);
                }
                (None, true) => {
                    let _ = writeln!(
                        self.out,
                        "    {} {{\n        /// The discriminant received.\n        discriminant: {dty_rust},\n    }},",
                        a.variant
                    );
                }
                (Some(c), true) => {
                    let _ = writeln!(
                        self.out,
                        "    {} {{\n        /// The discriminant received.\n        discriminant: {dty_rust},\n        /// The arm's value.\n        value: {},\n    }},",
                        a.variant, c.ty
                    );
                }
            }
        }
        self.out.push_str("}\n\n");

        // Decoding: read the raw word, dispatch on its value.
        let mut dec = format!("let d = {read};\n        Ok(match d {{\n");
        // Errors name the discriminant's offset, worked out on the error path
        // only: nothing has been read after the word when they are built.
        let at = "at: r.position() - 4";
        // A word that is not a value of the discriminant's enum is an error of
        // that enum, and names it (an inline enum by the name it is given).
        let enum_xdr = match dbase {
            TypeSpec::Named { name, .. } => name.name.clone(),
            _ => format!("{xdr}.{}", dname.name),
        };
        let disc_expr = match (&enum_ty, dbase) {
            (Some(t), _) => format!(
                "{t}::from_value(d).ok_or_else(|| xdr_spec_rt::Error::BadEnum {{ type_name: \"{enum_xdr}\", value: d, {at} }})?"
            ),
            (None, TypeSpec::Bool) => "d != 0".to_string(),
            _ => "d".to_string(),
        };
        let mut has_default = false;
        for a in &arms {
            let pat = if a.values.is_empty() {
                has_default = true;
                "_".to_string()
            } else {
                a.labels.join(" | ")
            };
            let body = match (&a.codec, a.holds_disc) {
                (None, false) => format!("Self::{}", a.variant),
                (Some(c), false) => format!("Self::{}({})", a.variant, c.decode),
                (None, true) => format!("Self::{} {{ discriminant: {disc_expr} }}", a.variant),
                (Some(c), true) => format!(
                    "{{\n                let discriminant = {disc_expr};\n                Self::{} {{ discriminant, value: {} }}\n            }}",
                    a.variant, c.decode
                ),
            };
            let _ = writeln!(dec, "            {pat} => {body},");
        }
        if !has_default {
            let widen =
                if matches!(dbase, TypeSpec::UnsignedInt | TypeSpec::Bool) { "d as i64" } else { "i64::from(d)" };
            let _ = writeln!(
                dec,
                "            _ => return Err(xdr_spec_rt::Error::BadDiscriminant {{ type_name: \"{xdr}\", value: {widen}, {at} }}),"
            );
        }
        dec.push_str("        })");
        if matches!(dbase, TypeSpec::Bool) {
            dec = dec.replace(
                "let d = r.u32()?;",
                &format!("let d = r.u32()?;\n        if d > 1 {{\n            return Err(xdr_spec_rt::Error::BadBool {{ value: d, {at} }});\n        }}"),
            );
        }

        // Encoding: write the discriminant (a held one, or the arm's first
        // label), then the arm.
        let write_disc = |v: &str| -> String {
            match (&enum_ty, dbase) {
                (Some(_), _) => format!("w.put_i32({v})"),
                (None, TypeSpec::UnsignedInt) => format!("w.put_u32({v})"),
                (None, TypeSpec::Bool) if v.parse::<u32>().is_ok() => format!("w.put_u32({v})"),
                (None, TypeSpec::Bool) => format!("w.put_bool({v})"),
                _ => format!("w.put_i32({v})"),
            }
        };
        let held = match (&enum_ty, dbase) {
            (Some(_), _) => "discriminant.value()".to_string(),
            _ => "discriminant".to_string(),
        };
        // Every generated type is `Copy`: arms bind their values by copy.
        let mut enc = "        match *self {\n".to_string();
        let mut len = "4usize.saturating_add(match *self {\n".to_string();
        let mut validate = String::new();
        for a in &arms {
            let first = a.labels.first().cloned().unwrap_or_default();
            let (pat, disc) = match (&a.codec, a.holds_disc) {
                (None, false) => (format!("Self::{}", a.variant), write_disc(&first)),
                (Some(_), false) => (format!("Self::{}(v)", a.variant), write_disc(&first)),
                (None, true) => (format!("Self::{} {{ discriminant }}", a.variant), write_disc(&held)),
                (Some(_), true) => (format!("Self::{} {{ discriminant, value: v }}", a.variant), write_disc(&held)),
            };
            let pat_len = pat.replace("{ discriminant }", "{ .. }").replace("discriminant, value: v", "value: v, ..");
            match &a.codec {
                Some(c) => {
                    // The discriminant and a fixed-length arm are one run.
                    let run_len = format!("xdr_spec_rt::fixed_add(Some(4), {})", c.fixed);
                    let run = fixed_run(&run_len, [disc, sub(&c.encode, "v")].into_iter());
                    let _ = writeln!(enc, "            {pat} => {},", run.replace('\n', "\n            "));
                    let _ = writeln!(len, "            {pat_len} => {},", sub(&c.len, "v"));
                    if let (Some(vd), true) = (&c.validate, c.bounded.may_hold()) {
                        let _ = writeln!(
                            validate,
                            "        if let {pat_len} = *self {{\n            {}\n        }}",
                            sub(vd, "v")
                        );
                    }
                }
                None => {
                    let _ = writeln!(enc, "            {pat} => {disc},");
                    let _ = writeln!(len, "            {pat_len} => 0,");
                }
            }
        }
        enc.push_str("        }\n");
        len.push_str("        })");
        // A held discriminant must select the arm it is stored in.
        let all_labels: Vec<String> = arms.iter().flat_map(|a| a.labels.iter().cloned()).collect();
        for a in arms.iter().filter(|a| a.holds_disc) {
            let held_raw = match (&enum_ty, dbase) {
                (Some(_), _) => "discriminant.value()".to_string(),
                (None, TypeSpec::Bool) => "discriminant as u32".to_string(),
                _ => "discriminant".to_string(),
            };
            // A default arm's discriminant must have no arm of its own; a
            // multi-label arm's must be one of its labels.
            let (labels, want) = if a.values.is_empty() { (all_labels.clone(), "") } else { (a.labels.clone(), "!") };
            if labels.is_empty() {
                continue;
            }
            let _ = writeln!(
                validate,
                "        if let Self::{} {{ discriminant, .. }} = *self {{\n            if {want}matches!({held_raw}, {}) {{\n                return Err(xdr_spec_rt::Error::BadDiscriminant {{ type_name: \"{xdr}\", value: {held_raw} as i64, at: 0 }});\n            }}\n        }}",
                a.variant,
                labels.join(" | ")
            );
        }
        // A held discriminant is a bound of its own: it must select its arm.
        let holds = Flag::Known(arms.iter().any(|a| a.holds_disc));
        let bounded = Flag::any(arms.iter().filter_map(|a| a.codec.as_ref().map(|c| &c.bounded)).chain([&holds]));
        let min_arms = arms.iter().map(|a| a.codec.as_ref().map_or("0".to_string(), |c| c.min.clone()));
        let min =
            min_arms.fold(
                String::new(),
                |acc, m| if acc.is_empty() { m } else { format!("xdr_spec_rt::min_len({acc}, {m})") },
            );
        let fixed_arms = arms.iter().map(|a| a.codec.as_ref().map_or("Some(0)".to_string(), |c| c.fixed.clone()));
        let fixed = fixed_arms.fold(String::new(), |acc, f| {
            if acc.is_empty() {
                f
            } else {
                format!("xdr_spec_rt::fixed_same({acc}, {f})")
            }
        });
        self.emit_xdr_impl(
            &rust,
            &format!("4 + {min}"),
            &format!("xdr_spec_rt::fixed_add(Some(4), {fixed})"),
            &Flag::Known(false),
            &bounded,
            &dec,
            &len,
            &enc,
            &validate,
            None,
        );
        Ok(())
    }
}
