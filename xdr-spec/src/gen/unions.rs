//! `union`: a Rust enum with a variant per arm.
//!
//! The union is first described ([`Discriminant`], one [`Arm`] per case and
//! the default), then each part of the Rust is written from that
//! description: the enum, `decode_from`, `encode_to` with `encoded_len`, and
//! `validate`.

use super::*;
use crate::symbols::Symbol;

/// What a union switches on, as the generated code reads and writes it.
enum DiscKind {
    Int,
    Unsigned,
    Bool,
    /// An enum: its Rust type, and its XDR name for errors.
    Enum {
        rust: String,
        xdr: String,
    },
}

/// A union's discriminant.
struct Discriminant {
    kind: DiscKind,
}

impl Discriminant {
    /// The Rust type a variant that holds the discriminant stores.
    fn rust_type(&self) -> &str {
        match &self.kind {
            DiscKind::Int => "i32",
            DiscKind::Unsigned => "u32",
            DiscKind::Bool => "bool",
            DiscKind::Enum { rust, .. } => rust,
        }
    }

    /// The statements reading the raw word into `d`. A boolean must be 0 or
    /// 1 (RFC 4506 section 4.4) before it selects an arm.
    fn read(&self, at: &str) -> String {
        match self.kind {
            DiscKind::Int | DiscKind::Enum { .. } => "let d = r.i32()?;".into(),
            DiscKind::Unsigned => "let d = r.u32()?;".into(),
            DiscKind::Bool => format!(
                "let d = r.u32()?;\n        if d > 1 {{\n            return Err(xdr_spec_rt::Error::BadBool {{ value: d, {at} }});\n        }}"
            ),
        }
    }

    /// A label's value as a literal of the raw word's type.
    fn literal(&self, v: i64) -> String {
        match self.kind {
            DiscKind::Unsigned | DiscKind::Bool => format!("{}", v as u32),
            DiscKind::Int | DiscKind::Enum { .. } => format!("{}", v as i32),
        }
    }

    /// The raw word `d` as the value a variant holds.
    fn value_of_word(&self, at: &str) -> String {
        match &self.kind {
            DiscKind::Enum { rust, xdr } => format!(
                "{rust}::from_value(d).ok_or_else(|| xdr_spec_rt::Error::BadEnum {{ type_name: \"{xdr}\", value: d, {at} }})?"
            ),
            DiscKind::Bool => "d != 0".into(),
            DiscKind::Int | DiscKind::Unsigned => "d".into(),
        }
    }

    /// The raw word `d` as the `i64` of [`xdr_spec_rt::Error::BadDiscriminant`].
    fn widened(&self) -> &'static str {
        match self.kind {
            DiscKind::Unsigned | DiscKind::Bool => "d as i64",
            DiscKind::Int | DiscKind::Enum { .. } => "i64::from(d)",
        }
    }

    /// The statement writing `v`: a label (literal or constant) or the held
    /// discriminant's wire value.
    fn write(&self, v: &str) -> String {
        match self.kind {
            DiscKind::Enum { .. } | DiscKind::Int => format!("w.put_i32({v})"),
            DiscKind::Unsigned => format!("w.put_u32({v})"),
            DiscKind::Bool if v.parse::<u32>().is_ok() => format!("w.put_u32({v})"),
            DiscKind::Bool => format!("w.put_bool({v})"),
        }
    }

    /// The held discriminant (bound as `discriminant`) as `write` takes it.
    fn held(&self) -> &'static str {
        match self.kind {
            DiscKind::Enum { .. } => "discriminant.value()",
            _ => "discriminant",
        }
    }

    /// The held discriminant as the raw word's type, to compare with labels.
    fn held_raw(&self) -> &'static str {
        match self.kind {
            DiscKind::Enum { .. } => "discriminant.value()",
            DiscKind::Bool => "discriminant as u32",
            DiscKind::Int | DiscKind::Unsigned => "discriminant",
        }
    }
}

/// One arm of a union: a `case` (or several) or the `default`.
struct Arm {
    variant: String,
    /// The labels' values; none for `default`.
    values: Vec<i64>,
    /// The Rust pattern of each label, in the order of `values`.
    labels: Vec<String>,
    codec: Option<Codec>,
    xdr_field: Option<String>,
    /// Whether the variant stores the discriminant: when more than one value
    /// selects it (several labels, or `default`).
    holds_disc: bool,
}

impl Arm {
    fn is_default(&self) -> bool {
        self.values.is_empty()
    }

    /// The pattern binding the arm's value as `v` and, where the variant
    /// holds it and `discriminant` is asked for, the discriminant as
    /// `discriminant`.
    fn binding(&self, discriminant: bool) -> String {
        let v = &self.variant;
        match (&self.codec, self.holds_disc, discriminant) {
            (None, false, _) => format!("Self::{v}"),
            (Some(_), false, _) => format!("Self::{v}(v)"),
            (None, true, true) => format!("Self::{v} {{ discriminant }}"),
            (None, true, false) => format!("Self::{v} {{ .. }}"),
            (Some(_), true, true) => format!("Self::{v} {{ discriminant, value: v }}"),
            (Some(_), true, false) => format!("Self::{v} {{ value: v, .. }}"),
        }
    }
}

impl<'s> Gen<'s> {
    pub(super) fn emit_union(&mut self, i: usize, u: &'s UnionBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        let disc = self.discriminant(u, &xdr)?;
        let arms = self.union_arms(u, &xdr, &disc)?;
        self.doc(i, "union");
        self.emit_union_type(&rust, &disc, &arms);

        let decode = union_decode(&xdr, &disc, &arms);
        let (encode, len) = union_encode(&disc, &arms);
        let validate = union_validate(&xdr, &disc, &arms);
        // A held discriminant is a bound of its own: it must select its arm.
        let holds = Flag::Known(arms.iter().any(|a| a.holds_disc));
        let bounded = Flag::any(arms.iter().filter_map(|a| a.codec.as_ref().map(|c| &c.bounded)).chain([&holds]));
        let min = arms
            .iter()
            .map(|a| a.codec.as_ref().map_or("0".to_string(), |c| c.min.clone()))
            .reduce(|acc, m| format!("xdr_spec_rt::min_len({acc}, {m})"))
            .unwrap_or_default();
        let fixed = arms
            .iter()
            .map(|a| a.codec.as_ref().map_or("Some(0)".to_string(), |c| c.fixed.clone()))
            .reduce(|acc, f| format!("xdr_spec_rt::fixed_same({acc}, {f})"))
            .unwrap_or_default();
        self.emit_xdr_impl(
            &rust,
            &format!("4 + {min}"),
            &format!("xdr_spec_rt::fixed_add(Some(4), {fixed})"),
            &Flag::Known(false),
            &bounded,
            &decode,
            &len,
            &encode,
            &validate,
            None,
        );
        Ok(())
    }

    /// The discriminant of `u`, a union named `xdr`.
    fn discriminant(&self, u: &'s UnionBody, xdr: &str) -> Result<Discriminant, GenError> {
        let Declaration::Named { ty, shape: Shape::Scalar, name } = &u.discriminant else {
            return Err(self
                .err(u.discriminant.span(), "a union discriminant is a plain `int`, `unsigned int`, `bool` or enum"));
        };
        let kind = match self.syms.resolve_alias(ty) {
            TypeSpec::Int => DiscKind::Int,
            TypeSpec::UnsignedInt => DiscKind::Unsigned,
            TypeSpec::Bool => DiscKind::Bool,
            base @ (TypeSpec::Named { .. } | TypeSpec::InlineEnum(_)) => DiscKind::Enum {
                rust: self.scalar_type(ty, name.span)?,
                // A word that is not a value of the enum is an error of that
                // enum, and names it (an inline enum by the name it is given).
                xdr: match base {
                    TypeSpec::Named { name: e, .. } => e.name.clone(),
                    _ => format!("{xdr}.{}", name.name),
                },
            },
            _ => return Err(self.err(name.span, "a union discriminant is `int`, `unsigned int`, `bool` or an enum")),
        };
        Ok(Discriminant { kind })
    }

    /// The arms of `u`, the default last, each with a distinct variant name.
    fn union_arms(&self, u: &'s UnionBody, xdr: &str, disc: &Discriminant) -> Result<Vec<Arm>, GenError> {
        let mut arms = Vec::new();
        let mut used = HashSet::new();
        let mut unique = |mut variant: String| {
            while !used.insert(variant.clone()) {
                variant.push('_');
            }
            variant
        };
        for arm in &u.arms {
            let values = arm.cases.iter().map(|c| self.value(c)).collect::<Result<Vec<_>, _>>()?;
            let variant = if arm.cases.len() == 1 {
                match &arm.cases[0] {
                    Value::Named(id) => camel(&id.name),
                    Value::Literal { value, .. } if *value < 0 => format!("CaseMinus{}", value.unsigned_abs()),
                    Value::Literal { value, .. } => format!("Case{value}"),
                }
            } else {
                arm.decl.name().map_or_else(|| "Void".to_string(), |n| camel(&n.name))
            };
            let field = arm.decl.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(&arm.decl, field.as_deref().unwrap_or(""))?;
            let labels = arm.cases.iter().zip(&values).map(|(c, v)| self.label(u, disc, c, *v)).collect();
            let holds_disc = arm.cases.len() > 1;
            arms.push(Arm { variant: unique(variant), values, labels, codec, xdr_field: field, holds_disc });
        }
        if let Some(d) = &u.default {
            let field = d.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(d, field.as_deref().unwrap_or(""))?;
            let variant = unique("Default".to_string());
            arms.push(Arm {
                variant,
                values: Vec::new(),
                labels: Vec::new(),
                codec,
                xdr_field: field,
                holds_disc: true,
            });
        }
        Ok(arms)
    }

    /// The Rust pattern of the label `case`, of value `v`. A label written as
    /// a name is matched and written by that name, so the code reads as the
    /// specification does (`self::RDMA_MSG =>`, not `0 =>`): an enumerator of
    /// the discriminant's enum, or for an `unsigned int` discriminant a
    /// constant (both are generated as constants of the discriminant's Rust
    /// type). `self::` makes the pattern a path, which fails to compile
    /// rather than quietly becoming a catch-all binding if the name were ever
    /// missing.
    fn label(&self, u: &UnionBody, disc: &Discriminant, case: &Value, v: i64) -> String {
        let Value::Named(id) = case else { return disc.literal(v) };
        let by_name = match disc.kind {
            DiscKind::Enum { .. } => self.enum_members(u).iter().any(|(m, _)| m.name == id.name),
            DiscKind::Unsigned => {
                matches!(
                    self.syms.get(&id.name),
                    Some(Symbol::Definition(Definition { kind: DefinitionKind::Const(_), .. }))
                ) && u32::try_from(v).is_ok()
            }
            DiscKind::Int | DiscKind::Bool => false,
        };
        if by_name {
            format!("self::{}", screaming(&id.name))
        } else {
            disc.literal(v)
        }
    }

    /// The enumerators of the enum `u` switches on, if it switches on one.
    fn enum_members(&self, u: &'s UnionBody) -> &'s [(Ident, Value)] {
        let Declaration::Named { ty, .. } = &u.discriminant else { return &[] };
        match self.syms.resolve_alias(ty) {
            TypeSpec::InlineEnum(b) => &b.members,
            TypeSpec::Named { name, .. } => match self.syms.type_def(&name.name).map(|d| &d.kind) {
                Some(DefinitionKind::Enum(b)) => &b.members,
                _ => &[],
            },
            _ => &[],
        }
    }

    /// `pub enum RUST { ... }`: a variant per arm.
    fn emit_union_type(&mut self, rust: &str, disc: &Discriminant, arms: &[Arm]) {
        let lt = if self.lifetime.contains(rust) { "<'a>" } else { "" };
        let _ = writeln!(self.out, "{}pub enum {rust}{lt} {{", self.derives(rust, true));
        let dty = disc.rust_type();
        for a in arms {
            let cases = if a.is_default() {
                "default".to_string()
            } else {
                a.values.iter().map(|v| format!("case {v}")).collect::<Vec<_>>().join(", ")
            };
            let field = a.xdr_field.as_deref().map_or("void".to_string(), |f| format!("`{f}`"));
            let _ = writeln!(self.out, "    /// XDR {cases}: {field}.");
            let held = "        /// The discriminant received.\n";
            let _ = match (&a.codec, a.holds_disc) {
                (None, false) => writeln!(self.out, "    {},", a.variant),
                (Some(c), false) => writeln!(self.out, "    {}({}),", a.variant, c.ty),
                (None, true) => writeln!(self.out, "    {} {{\n{held}        discriminant: {dty},\n    }},", a.variant),
                (Some(c), true) => writeln!(
                    self.out,
                    "    {} {{\n{held}        discriminant: {dty},\n        /// The arm's value.\n        value: {},\n    }},",
                    a.variant, c.ty
                ),
            };
        }
        self.out.push_str("}\n\n");
    }
}

/// `decode_from`'s body: read the raw word, dispatch on its value. Errors
/// name the discriminant's offset, worked out on the error path only:
/// nothing has been read after the word when they are built.
fn union_decode(xdr: &str, disc: &Discriminant, arms: &[Arm]) -> String {
    let at = "at: r.position() - 4";
    let value = disc.value_of_word(at);
    let mut dec = format!("{}\n        Ok(match d {{\n", disc.read(at));
    for a in arms {
        let pat = if a.is_default() { "_".to_string() } else { a.labels.join(" | ") };
        let body = match (&a.codec, a.holds_disc) {
            (None, false) => format!("Self::{}", a.variant),
            (Some(c), false) => format!("Self::{}({})", a.variant, c.decode),
            (None, true) => format!("Self::{} {{ discriminant: {value} }}", a.variant),
            (Some(c), true) => format!(
                "{{\n                let discriminant = {value};\n                Self::{} {{ discriminant, value: {} }}\n            }}",
                a.variant, c.decode
            ),
        };
        let _ = writeln!(dec, "            {pat} => {body},");
    }
    if !arms.iter().any(Arm::is_default) {
        let _ = writeln!(
            dec,
            "            _ => return Err(xdr_spec_rt::Error::BadDiscriminant {{ type_name: \"{xdr}\", value: {}, {at} }}),",
            disc.widened()
        );
    }
    dec.push_str("        })");
    dec
}

/// `encode_to`'s and `encoded_len`'s bodies: write the discriminant (a held
/// one, or the arm's first label), then the arm; the discriminant and a
/// fixed-length arm are one run. Every generated type is `Copy`: arms bind
/// their values by copy.
fn union_encode(disc: &Discriminant, arms: &[Arm]) -> (String, String) {
    let mut enc = "        match *self {\n".to_string();
    let mut len = "4usize.saturating_add(match *self {\n".to_string();
    for a in arms {
        let (pat, pat_len) = (a.binding(true), a.binding(false));
        let write_disc = if a.holds_disc {
            disc.write(disc.held())
        } else {
            disc.write(a.labels.first().map_or("", String::as_str))
        };
        match &a.codec {
            Some(c) => {
                let run_len = format!("xdr_spec_rt::fixed_add(Some(4), {})", c.fixed);
                let run = fixed_run(&run_len, [write_disc, c.encode.at("v")].into_iter());
                let _ = writeln!(enc, "            {pat} => {},", indent_continuation(&run, 12));
                let _ = writeln!(len, "            {pat_len} => {},", c.len.at("v"));
            }
            None => {
                let _ = writeln!(enc, "            {pat} => {write_disc},");
                let _ = writeln!(len, "            {pat_len} => 0,");
            }
        }
    }
    enc.push_str("        }\n");
    len.push_str("        })");
    (enc, len)
}

/// `validate`'s body: each arm's bounds, then that a held discriminant
/// selects the arm it is stored in (a default arm's must have no arm of its
/// own; a multi-label arm's must be one of its labels).
fn union_validate(xdr: &str, disc: &Discriminant, arms: &[Arm]) -> String {
    let mut validate = String::new();
    for a in arms {
        if let Some((c, vd)) = a.codec.as_ref().and_then(|c| c.validate.as_ref().map(|vd| (c, vd))) {
            if c.bounded.may_hold() {
                let _ = writeln!(
                    validate,
                    "        if let {} = *self {{\n            {}\n        }}",
                    a.binding(false),
                    vd.at("v")
                );
            }
        }
    }
    let all_labels: Vec<String> = arms.iter().flat_map(|a| a.labels.iter().cloned()).collect();
    let held_raw = disc.held_raw();
    for a in arms.iter().filter(|a| a.holds_disc) {
        let (labels, want) = if a.is_default() { (&all_labels, "") } else { (&a.labels, "!") };
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
    validate
}
