//! How one declaration is typed, decoded, measured and encoded: its
//! [`Codec`], and the folding of the constant expressions generated
//! `MIN_LEN`, `FIXED_LEN`, `PLAIN` and `BOUNDED` are built from.

use super::*;

/// How one declared value is typed, decoded, measured and encoded. The
/// code uses `r`/`w` for the reader/writer; what is about a value already
/// held is an [`OfValue`], given the place that holds it.
pub(super) struct Codec {
    pub(super) ty: String,
    pub(super) decode: String,
    pub(super) len: OfValue,
    pub(super) encode: OfValue,
    pub(super) validate: Option<OfValue>,
    /// Whether `encode` writes a count and the elements of a [`Seq`](crate::rt::Seq)
    /// (`Seq::encode_counted`), so that a lead word can share their claim.
    pub(super) counted: bool,
    pub(super) min: String,
    pub(super) fixed: String,
    pub(super) plain: Flag,
    pub(super) bounded: Flag,
}

/// Rust code about one value, written for the place that holds it
/// (`self.field`, `self.0`, a match binding `v`).
pub(super) struct OfValue(Box<dyn Fn(&str) -> String>);

impl OfValue {
    pub(super) fn new(code: impl Fn(&str) -> String + 'static) -> Self {
        OfValue(Box::new(code))
    }

    /// The code for the value at `place`.
    pub(super) fn at(&self, place: &str) -> String {
        (self.0)(place)
    }
}

/// A `bool` property of a generated type (`PLAIN`, `BOUNDED`): known while
/// generating, or an expression over other types' constants that the
/// compiler folds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Flag {
    Known(bool),
    Expr(String),
}

impl Flag {
    /// Whether the property can hold: it is not known to be false.
    pub(super) fn may_hold(&self) -> bool {
        *self != Flag::Known(false)
    }

    /// `a && b && ...`: known values folded, repeated expressions written once.
    pub(super) fn all<'f>(flags: impl Iterator<Item = &'f Flag>) -> Flag {
        Self::fold(flags, true)
    }

    /// `a || b || ...`: known values folded, repeated expressions written once.
    pub(super) fn any<'f>(flags: impl Iterator<Item = &'f Flag>) -> Flag {
        Self::fold(flags, false)
    }

    /// `unit` is the value of no terms: `true` for [`Flag::all`], `false`
    /// for [`Flag::any`]; its opposite decides the whole.
    fn fold<'f>(flags: impl Iterator<Item = &'f Flag>, unit: bool) -> Flag {
        let mut exprs: Vec<&str> = Vec::new();
        for f in flags {
            match f {
                Flag::Known(b) if *b != unit => return Flag::Known(*b),
                Flag::Known(_) => {}
                Flag::Expr(e) if !exprs.contains(&e.as_str()) => exprs.push(e),
                Flag::Expr(_) => {}
            }
        }
        if exprs.is_empty() {
            Flag::Known(unit)
        } else {
            Flag::Expr(exprs.join(if unit { " && " } else { " || " }))
        }
    }
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flag::Known(b) => write!(f, "{b}"),
            Flag::Expr(e) => f.write_str(e),
        }
    }
}

impl<'s> Gen<'s> {
    /// The Rust type of a type specifier used as a plain value.
    pub(super) fn scalar_type(&self, ty: &TypeSpec, at: Span) -> Result<String, GenError> {
        Ok(match self.syms.resolve_alias(ty) {
            TypeSpec::Int => "i32".into(),
            TypeSpec::UnsignedInt => "u32".into(),
            TypeSpec::Hyper => "i64".into(),
            TypeSpec::UnsignedHyper => "u64".into(),
            TypeSpec::Float => "f32".into(),
            TypeSpec::Double => "f64".into(),
            TypeSpec::Quadruple => "xdr_spec_rt::Quadruple".into(),
            TypeSpec::Bool => "bool".into(),
            TypeSpec::Named { name, .. } => {
                let Some(def) = self.syms.type_def(&name.name) else {
                    return Err(self.err(name.span, format!("undefined type `{}`", name.name)));
                };
                if is_list_struct(def) {
                    return Err(self.err(
                        name.span,
                        format!(
                            "`{}` is an optional-data list; the generator supports it only through a pointer \
                             (`{} *name`), which is how RFC 4506 section 4.19 uses it",
                            name.name, name.name
                        ),
                    ));
                }
                self.with_lt(&self.named_rust(&name.name))
            }
            t @ (TypeSpec::InlineStruct(_) | TypeSpec::InlineUnion(_) | TypeSpec::InlineEnum(_)) => {
                let rust = self.inline_names.get(&(t as *const TypeSpec as usize)).cloned().unwrap_or_default();
                self.with_lt(&rust)
            }
            TypeSpec::Opaque | TypeSpec::String => {
                return Err(self.err(at, "`opaque` and `string` need a length (`[n]` or `<n>`)"))
            }
            TypeSpec::NonStandard { spelling, span } => {
                return Err(self.err(*span, format!("`{spelling}` is not an RFC 4506 type")))
            }
        })
    }

    pub(super) fn trait_codec(ty: String) -> Codec {
        // Primitives have known sizes: write them as literals so the
        // generated constants stay readable (and clippy sees no `x && x`).
        let known = match ty.as_str() {
            "i32" | "u32" | "f32" => Some(4),
            "i64" | "u64" | "f64" => Some(8),
            "xdr_spec_rt::Quadruple" => Some(16),
            _ => None,
        };
        let t = format!("<{ty} as xdr_spec_rt::Xdr>");
        let (min, fixed, plain, bounded, validate) = match known {
            Some(n) => (n.to_string(), format!("Some({n})"), Flag::Known(true), Flag::Known(false), None),
            None => (
                format!("{t}::MIN_LEN"),
                format!("{t}::FIXED_LEN"),
                Flag::Expr(format!("{t}::PLAIN")),
                Flag::Expr(format!("{t}::BOUNDED")),
                Some({
                    let t = t.clone();
                    OfValue::new(move |v| format!("{t}::validate(&{v})?;"))
                }),
            ),
        };
        let bool_ty = ty == "bool";
        Codec {
            decode: format!("{t}::decode_from(r)?"),
            len: {
                let t = t.clone();
                OfValue::new(move |v| format!("{t}::encoded_len(&{v})"))
            },
            encode: {
                let t = t.clone();
                OfValue::new(move |v| format!("{t}::encode_to(&{v}, w)"))
            },
            counted: false,
            validate: if bool_ty { None } else { validate },
            min: if bool_ty { "4".into() } else { min },
            fixed: if bool_ty { "Some(4)".into() } else { fixed },
            plain: if bool_ty { Flag::Known(false) } else { plain },
            bounded: if bool_ty { Flag::Known(false) } else { bounded },
            ty,
        }
    }

    pub(super) fn codec(&self, decl: &Declaration, what: &str) -> Result<Option<Codec>, GenError> {
        let Declaration::Named { name, ty, shape } = decl else { return Ok(None) };
        let what = format!("\"{what}\"");
        let base = self.syms.resolve_alias(ty);
        let c = match (shape, base) {
            (Shape::Scalar, _) => match self.list_behind_typedef(base) {
                // `typedef l *l_ptr;` used as `l_ptr x`: the list, decoded
                // under this field's name as a pointer to it would be.
                Some(target) => self.list_codec(target, &what)?,
                None => Self::trait_codec(self.scalar_type(ty, name.span)?),
            },
            (Shape::Optional, TypeSpec::Named { name: target, .. })
                if self.syms.type_def(&target.name).is_some_and(is_list_struct) =>
            {
                self.list_codec(&target.name, &what)?
            }
            (Shape::Optional, _) => Self::trait_codec(format!("Option<{}>", self.scalar_type(ty, name.span)?)),
            (Shape::FixedArray(n), TypeSpec::Opaque) => {
                let n = self.bound(n)?;
                Codec {
                    ty: format!("&'a [u8; {n}]"),
                    decode: format!("r.opaque_fixed::<{n}>()?"),
                    len: OfValue::new(move |_| format!("xdr_spec_rt::opaque_len({n})")),
                    encode: OfValue::new(|v| format!("w.put_opaque_fixed(&{v}[..])")),
                    counted: false,
                    validate: None,
                    min: format!("xdr_spec_rt::opaque_len({n})"),
                    fixed: format!("Some(xdr_spec_rt::opaque_len({n}))"),
                    plain: Flag::Known(true),
                    bounded: Flag::Known(false),
                }
            }
            (Shape::VarArray(max), TypeSpec::Opaque | TypeSpec::String) => {
                let string = matches!(base, TypeSpec::String);
                let max_v = max.as_ref().map(|m| self.bound(m)).transpose()?;
                let max_s = max_v.map_or("None".to_string(), |m| format!("Some({m})"));
                Codec {
                    ty: if string { "&'a str".into() } else { "&'a [u8]".into() },
                    decode: if string {
                        format!("r.string({max_s}, {what})?")
                    } else {
                        format!("r.opaque_var({max_s}, {what})?")
                    },
                    len: OfValue::new(|v| format!("4 + xdr_spec_rt::opaque_len({v}.len())")),
                    encode: if string {
                        OfValue::new(|v| format!("w.put_opaque_var({v}.as_bytes())"))
                    } else {
                        OfValue::new(|v| format!("w.put_opaque_var({v})"))
                    },
                    validate: max_v.map(|m| {
                        let what = what.clone();
                        OfValue::new(move |v| format!("xdr_spec_rt::check_max({v}.len(), {m}, {what})?;"))
                    }),
                    counted: false,
                    min: "4".into(),
                    fixed: "None".into(),
                    plain: Flag::Known(false),
                    // Without a `<max>` the only bound is the 32-bit length,
                    // which `Xdr::encode` checks for the whole message.
                    bounded: Flag::Known(max_v.is_some()),
                }
            }
            (Shape::FixedArray(_), TypeSpec::String) => {
                return Err(self.err(name.span, "`string` takes a variable length (`<n>`), not `[n]`"))
            }
            (Shape::FixedArray(n), _) => {
                let n = self.bound(n)?;
                let elem = self.scalar_type(ty, name.span)?;
                let t = format!("<{elem} as xdr_spec_rt::Xdr>");
                Codec {
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    decode: format!("r.fixed_seq::<{elem}>({n}, {what})?"),
                    len: OfValue::new(|v| format!("{v}.elements_len()")),
                    encode: OfValue::new(|v| format!("{v}.encode_elements(w)")),
                    validate: Some({
                        let what = what.clone();
                        OfValue::new(move |v| format!("{v}.validate_bounds(None, Some({n}), {what})?;"))
                    }),
                    counted: false,
                    min: format!("{n} * {t}::MIN_LEN"),
                    fixed: format!("xdr_spec_rt::fixed_mul({t}::FIXED_LEN, {n})"),
                    plain: Flag::Expr(format!("{t}::PLAIN")),
                    bounded: Flag::Known(true),
                }
            }
            (Shape::VarArray(max), _) => {
                let max_s = match max {
                    Some(m) => format!("Some({})", self.bound(m)?),
                    None => "None".into(),
                };
                let elem = self.scalar_type(ty, name.span)?;
                Codec {
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    decode: format!("r.var_seq::<{elem}>({max_s}, {what})?"),
                    len: OfValue::new(|v| format!("{v}.elements_len().saturating_add(4)")),
                    encode: OfValue::new(|v| format!("{v}.encode_counted(w)")),
                    validate: Some({
                        let (max_s, what) = (max_s.clone(), what.clone());
                        OfValue::new(move |v| format!("{v}.validate_bounds({max_s}, None, {what})?;"))
                    }),
                    counted: true,
                    min: "4".into(),
                    fixed: "None".into(),
                    plain: Flag::Known(false),
                    // An unbounded array of elements that take room needs no
                    // check of its own: `Xdr::encode` refuses a message over
                    // 4 GiB, which any count over 2^32 would make.
                    bounded: if max.is_some() {
                        Flag::Known(true)
                    } else {
                        Flag::Expr(format!(
                            "<{elem} as xdr_spec_rt::Xdr>::BOUNDED || <{elem} as xdr_spec_rt::Xdr>::MIN_LEN == 0"
                        ))
                    },
                }
            }
        };
        Ok(Some(c))
    }

    /// The codec of a pointer to the optional-data list struct `list`: the
    /// runtime's [`List`](crate::rt::List), read with the field's name
    /// (`what`, quoted) so that a limit error names the field, not only "a
    /// list".
    pub(super) fn list_codec(&self, list: &str, what: &str) -> Result<Codec, GenError> {
        let elem = self.list_elem(list)?;
        let mut c = Self::trait_codec(format!("xdr_spec_rt::List<'a, {elem}>"));
        c.decode = format!("r.list::<{elem}>({what})?");
        Ok(c)
    }

    /// The list struct that `ty` points to when it names a typedef of a
    /// pointer to one (`typedef l *l_ptr;`).
    pub(super) fn list_behind_typedef(&self, ty: &TypeSpec) -> Option<&'s str> {
        let TypeSpec::Named { name, .. } = ty else { return None };
        let Definition {
            kind:
                DefinitionKind::Typedef(Declaration::Named {
                    ty: TypeSpec::Named { name: target, .. },
                    shape: Shape::Optional,
                    ..
                }),
            ..
        } = self.syms.type_def(&name.name)?
        else {
            return None;
        };
        self.syms.type_def(&target.name).is_some_and(is_list_struct).then_some(target.name.as_str())
    }

    /// The element type of the optional-data list struct `xdr`: the type of
    /// its one entry field, or the generated struct of its fields (named by
    /// [`list_names`]).
    pub(super) fn list_elem(&self, xdr: &str) -> Result<String, GenError> {
        let def = self.syms.type_def(xdr).ok_or_else(|| self.err(Span::default(), format!("undefined `{xdr}`")))?;
        let DefinitionKind::Struct(b) = &def.kind else {
            return Err(self.err(def.name.span, format!("`{xdr}` is not an optional-data list struct")));
        };
        if b.fields.len() == 2 {
            if let Some(c) = self.codec(&b.fields[0], "")? {
                return Ok(c.ty);
            }
        }
        Ok(self.with_lt(&list_names(&camel(xdr)).1))
    }
}

/// `a + b + ...` with literal terms added up.
pub(super) fn sum_terms<'t>(terms: impl Iterator<Item = &'t str>) -> String {
    let mut total = 0usize;
    let mut exprs: Vec<&str> = Vec::new();
    for t in terms {
        match t.parse::<usize>() {
            Ok(n) => total += n,
            Err(_) => exprs.push(t),
        }
    }
    let mut parts: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    if total > 0 || parts.is_empty() {
        parts.push(total.to_string());
    }
    parts.join(" + ")
}

/// The fixed length of a concatenation: `None` if any part varies.
pub(super) fn fixed_terms<'t>(terms: impl Iterator<Item = &'t str>) -> String {
    let mut total = 0usize;
    let mut exprs: Vec<&str> = Vec::new();
    for t in terms {
        if t == "None" {
            return "None".into();
        }
        match literal_fixed(t) {
            Some(n) => total += n,
            None => exprs.push(t),
        }
    }
    exprs.iter().fold(format!("Some({total})"), |acc, e| format!("xdr_spec_rt::fixed_add({acc}, {e})"))
}

/// `n` for a fixed length written as the literal `Some(n)`.
pub(super) fn literal_fixed(fixed: &str) -> Option<usize> {
    fixed.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok()
}
