//! `union`: a Rust enum with a variant per arm.
//!
//! The union is first described ([`Discriminant`], one [`Arm`] per case and
//! the default), then each part of the Rust is written from that
//! description: the enum, `decode_from`, `encode_to` with `encoded_len`, and
//! `validate`.

use super::layout::Reference;
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
    fn read(&self, c: &mut Code) {
        match self.kind {
            DiscKind::Int | DiscKind::Enum { .. } => c.line("let d = r.i32()?;"),
            DiscKind::Unsigned => c.line("let d = r.u32()?;"),
            DiscKind::Bool => {
                c.line("let d = r.u32()?;");
                c.block("if d > 1", "", |c| {
                    c.block("return Err(xdr_spec_rt::Error::BadBool", ");", |c| {
                        c.line("value: d,");
                        c.line("at: r.position() - 4,");
                    });
                });
            }
        }
    }

    /// A label's value as a literal of the raw word's type.
    fn literal(&self, v: i64) -> String {
        match self.kind {
            DiscKind::Unsigned | DiscKind::Bool => format!("{}", v as u32),
            DiscKind::Int | DiscKind::Enum { .. } => format!("{}", v as i32),
        }
    }

    /// The XDR name of the enum switched on, if it is one.
    fn enum_name(&self) -> Option<&str> {
        match &self.kind {
            DiscKind::Enum { xdr, .. } => Some(xdr),
            _ => None,
        }
    }

    /// The raw word `d` as the value a variant holds, for a discriminant
    /// that is not an enum (an enum's is checked first: [`union_decode`]).
    fn value_of_word(&self) -> &'static str {
        match &self.kind {
            DiscKind::Bool => "d != 0",
            _ => "d",
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

    /// The pattern binding the arm's value as `v` and the discriminant
    /// the variant holds, if it holds one, as `discriminant`: a path and,
    /// for a variant with named fields, the fields.
    fn pattern(&self) -> (String, Option<Vec<String>>) {
        let v = format!("Self::{}", self.variant);
        match (&self.codec, self.holds_disc) {
            (None, false) => (v, None),
            (Some(_), false) => (format!("{v}(v)"), None),
            (None, true) => (v, Some(vec!["discriminant".into()])),
            (Some(_), true) => (v, Some(vec!["discriminant".into(), "value: v".into()])),
        }
    }

    /// The pattern binding the arm's value, if any and if `bind`, as `v`.
    fn binding(&self, bind: bool) -> String {
        let v = &self.variant;
        match (&self.codec, self.holds_disc, bind) {
            (None, false, _) => format!("Self::{v}"),
            (Some(_), false, true) => format!("Self::{v}(v)"),
            (Some(_), false, false) => format!("Self::{v}(_)"),
            (_, true, true) if self.codec.is_some() => format!("Self::{v} {{ value: v, .. }}"),
            (_, true, _) => format!("Self::{v} {{ .. }}"),
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
        let layout = self.item_layout(i)?;
        let references: Vec<Option<&Reference>> = arms.iter().map(|a| a.codec.as_ref().map(|c| &c.reference)).collect();
        let reference = Reference::union(&references, arms.iter().any(|a| a.holds_disc));
        let bodies = Bodies {
            decode: &|c| union_decode(c, &xdr, &disc, &arms),
            len: &|c| union_len(c, &arms),
            encode: &|c| union_encode(c, &disc, &arms),
            validate: &|c| union_validate(c, &xdr, &disc, &arms),
            led: None,
        };
        self.emit_xdr_impl(&rust, layout, reference, bodies);
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
        match const_pattern(&id.name) {
            Some(path) if by_name => path,
            _ => disc.literal(v),
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
        self.derives(rust, true);
        let dty = disc.rust_type();
        self.out.block(&format!("pub enum {rust}{lt}"), "", |c| {
            for a in arms {
                let cases = if a.is_default() {
                    "default".to_string()
                } else {
                    a.values.iter().map(|v| format!("case {v}")).collect::<Vec<_>>().join(", ")
                };
                let field = a.xdr_field.as_deref().map_or("void".to_string(), |f| format!("`{f}`"));
                c.line(format!("/// XDR {cases}: {field}."));
                match (&a.codec, a.holds_disc) {
                    (None, false) => c.line(format!("{},", a.variant)),
                    (Some(codec), false) => c.line(format!("{}({}),", a.variant, codec.ty)),
                    (codec, true) => c.block(&a.variant, ",", |c| {
                        c.line("/// The discriminant received.");
                        c.line(format!("discriminant: {dty},"));
                        if let Some(codec) = codec {
                            c.line("/// The arm's value.");
                            c.line(format!("value: {},", codec.ty));
                        }
                    }),
                }
            }
        });
        self.out.blank();
    }
}

/// `decode_from`'s body: read the raw word, dispatch on its value. Errors
/// name the discriminant's offset, worked out on the error path only:
/// nothing has been read after the word when they are built.
fn union_decode(c: &mut Code, xdr: &str, disc: &Discriminant, arms: &[Arm]) {
    disc.read(c);
    c.block("Ok(match d", ")", |c| {
        for a in arms {
            let pats = if a.is_default() { vec!["_".to_string()] } else { a.labels.clone() };
            let v = &a.variant;
            match (&a.codec, a.holds_disc, disc.enum_name()) {
                (None, false, _) => arm_expr(c, &pats, &format!("Self::{v}")),
                (Some(codec), false, _) => arm_expr(c, &pats, &format!("Self::{v}({})", codec.decode.flat())),
                // The word must be a member of the enum the variant holds.
                (codec, true, Some(e)) => arm_block(c, &pats, |c| {
                    c.block(&format!("let Some(discriminant) = {}::from_value(d) else", disc.rust_type()), ";", |c| {
                        bad_word(c, "return Err(", "BadEnum", e, "d", ");");
                    });
                    let mut fields = vec!["discriminant".to_string()];
                    fields.extend(codec.iter().map(|codec| format!("value: {}", codec.decode.flat())));
                    c.struct_lit("", &format!("Self::{v}"), &fields, "");
                }),
                (None, true, None) => {
                    let fields = [format!("discriminant: {}", disc.value_of_word())];
                    arm_lit(c, &pats, &format!("Self::{v}"), &fields);
                }
                (Some(codec), true, None) => {
                    let fields =
                        [format!("discriminant: {}", disc.value_of_word()), format!("value: {}", codec.decode.flat())];
                    arm_lit(c, &pats, &format!("Self::{v}"), &fields);
                }
            }
        }
        if !arms.iter().any(Arm::is_default) {
            c.block("_ =>", "", |c| bad_word(c, "return Err(", "BadDiscriminant", xdr, disc.widened(), ")"));
        }
    });
}

/// `xdr_spec_rt::Error::KIND { type_name, value, at }` for the word just
/// read, after `head` and before `tail`.
fn bad_word(c: &mut Code, head: &str, kind: &str, type_name: &str, value: &str, tail: &str) {
    c.block(&format!("{head}xdr_spec_rt::Error::{kind}"), tail, |c| {
        c.line(format!("type_name: \"{type_name}\","));
        c.line(if value == "value" { "value,".to_string() } else { format!("value: {value},") });
        c.line("at: r.position() - 4,");
    });
}

/// A match arm `pats => body,`; the body in a block if it does not fit.
fn arm_expr(c: &mut Code, pats: &[String], body: &str) {
    let one = format!("{} => {body},", pats.join(" | "));
    if c.fits(&one) {
        return c.line(one);
    }
    arm_block(c, pats, |c| c.line(body));
}

/// A match arm whose body is a struct literal: `pats => Path { fields },`.
fn arm_lit(c: &mut Code, pats: &[String], path: &str, fields: &[String]) {
    let pat = pats.join(" | ");
    c.struct_lit(&format!("{pat} => "), path, fields, ",");
}

/// A match arm whose body is a block of statements.
fn arm_block(c: &mut Code, pats: &[String], body: impl FnOnce(&mut Code)) {
    c.alternatives(pats, " => {");
    c.indent();
    body(c);
    c.dedent();
    c.line("}");
}

/// `encoded_len`'s body, for a union without a fixed length: the
/// discriminant's word and the arm's length.
fn union_len(c: &mut Code, arms: &[Arm]) {
    c.block("4usize.saturating_add(match *self", ")", |c| {
        for a in arms {
            // A fixed length is known here: the arm's value is not needed.
            let (len, bind) = match a.codec.as_ref().map(|codec| (codec, codec.layout.fixed)) {
                None => ("0".to_string(), false),
                Some((_, Some(n))) => (n.to_string(), false),
                Some((codec, None)) => (codec.len.at("v").flat(), true),
            };
            arm_expr(c, &[a.binding(bind)], &len);
        }
    });
}

/// `encode_to`'s body: write the discriminant (a held one, or the arm's
/// first label), then the arm; the discriminant and a fixed-length arm are
/// one run. Every generated type is `Copy`: arms bind their values by copy.
fn union_encode(c: &mut Code, disc: &Discriminant, arms: &[Arm]) {
    c.block("match *self", "", |c| {
        for a in arms {
            let write_disc = if a.holds_disc {
                disc.write(disc.held())
            } else {
                disc.write(a.labels.first().map_or("", String::as_str))
            };
            let (path, fields) = a.pattern();
            let Some(codec) = &a.codec else {
                match fields {
                    Some(f) => c.struct_lit("", &path, &f, &format!(" => {write_disc},")),
                    None => c.line(format!("{path} => {write_disc},")),
                }
                continue;
            };
            match fields {
                Some(f) => c.struct_lit("", &path, &f, " => {"),
                None => c.line(format!("{path} => {{")),
            }
            c.indent();
            let writes = |c: &mut Code| {
                c.line(format!("{write_disc};"));
                c.expr("", &codec.encode.at("v"), ";");
            };
            match codec.layout.fixed {
                Some(n) => fixed_run(c, n + 4, writes),
                None => writes(c),
            }
            c.dedent();
            c.line("}");
        }
    });
}

/// `validate`'s body: each arm's bounds, then that a held discriminant
/// selects the arm it is stored in (a default arm's must have no arm of its
/// own; a multi-label arm's must be one of its labels).
fn union_validate(c: &mut Code, xdr: &str, disc: &Discriminant, arms: &[Arm]) {
    for a in arms {
        let Some(codec) = a.codec.as_ref().filter(|codec| codec.layout.bounded) else { continue };
        if let Some(v) = &codec.validate {
            c.block(&format!("if let {} = *self", a.binding(true)), "", |c| c.expr("", &v.at("v"), ";"));
        }
    }
    let all_labels: Vec<String> = arms.iter().flat_map(|a| a.labels.iter().cloned()).collect();
    let held_raw = disc.held_raw();
    for a in arms.iter().filter(|a| a.holds_disc) {
        let (labels, want) = if a.is_default() { (&all_labels, "") } else { (&a.labels, "!") };
        if labels.is_empty() {
            continue;
        }
        c.block(&format!("if let Self::{} {{ discriminant, .. }} = *self", a.variant), "", |c| {
            c.macro_call(&format!("if {want}matches!"), &[held_raw.to_string(), labels.join(" | ")], " {");
            c.indent();
            c.block("return Err(xdr_spec_rt::Error::BadDiscriminant", ");", |c| {
                c.line(format!("type_name: \"{xdr}\","));
                c.line(format!("value: {held_raw} as i64,"));
                c.line("at: 0,");
            });
            c.dedent();
            c.line("}");
        });
    }
}
