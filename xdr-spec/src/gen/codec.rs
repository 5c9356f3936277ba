//! How one declaration is typed, decoded, measured and encoded: its
//! [`Codec`], with its [`Layout`] worked out from the types it names.

use super::layout::{option, Layout, Reference};
use super::*;

/// How one declared value is typed, decoded, measured and encoded. The
/// code uses `r`/`w` for the reader/writer; what is about a value already
/// held is an [`OfValue`], given the place that holds it.
pub(super) struct Codec {
    pub(super) ty: String,
    pub(super) decode: Expr,
    pub(super) len: OfValue,
    /// A statement, without its `;`.
    pub(super) encode: OfValue,
    /// A statement ending in `?`, without its `;`.
    pub(super) validate: Option<OfValue>,
    /// Whether `encode` writes a count and the elements of a [`Seq`](crate::rt::Seq)
    /// (`Seq::encode_counted`), so that a lead word can share their claim.
    pub(super) counted: bool,
    pub(super) layout: Layout,
    pub(super) reference: Reference,
}

/// An expression in one of the shapes [`Code`] lays out: a method chain
/// (`root.a().b()`, `calls` each starting with `.`) or a call with
/// arguments (`head(args)` and what follows it, `tail`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expr {
    Chain { root: String, calls: Vec<String> },
    Call { head: String, args: Vec<String>, tail: String },
}

impl Expr {
    pub(super) fn text(t: impl Into<String>) -> Expr {
        Expr::Chain { root: t.into(), calls: Vec::new() }
    }

    pub(super) fn chain(root: impl Into<String>, calls: &[&str]) -> Expr {
        Expr::Chain { root: root.into(), calls: calls.iter().map(|c| c.to_string()).collect() }
    }

    pub(super) fn call(head: impl Into<String>, args: &[&str], tail: &str) -> Expr {
        Expr::Call { head: head.into(), args: args.iter().map(|a| a.to_string()).collect(), tail: tail.into() }
    }

    /// On one line.
    pub(super) fn flat(&self) -> String {
        match self {
            Expr::Chain { root, calls } => format!("{root}{}", calls.concat()),
            Expr::Call { head, args, tail } => format!("{head}({}){tail}", args.join(", ")),
        }
    }

    /// This expression followed by `.call`.
    pub(super) fn then(mut self, call: String) -> Expr {
        match &mut self {
            Expr::Chain { calls, .. } => calls.push(call),
            Expr::Call { .. } => return Expr::Chain { root: self.flat(), calls: vec![call] },
        }
        self
    }

    /// Whether `self.then(..)` needs parentheses around this expression.
    pub(super) fn is_sum(&self) -> bool {
        matches!(self, Expr::Chain { root, calls } if calls.is_empty() && root.contains(" + "))
    }
}

impl Code {
    /// `head expr tail`, laid out as its shape is.
    pub(super) fn expr(&mut self, head: &str, e: &Expr, tail: &str) {
        match e {
            Expr::Chain { root, calls } => self.chain(head, root, calls, tail),
            Expr::Call { head: h, args, tail: t } => self.call(&format!("{head}{h}"), args, &format!("{t}{tail}")),
        }
    }
}

/// Rust code about one value, written for the place that holds it
/// (`self.field`, `self.0`, a match binding `v`).
pub(super) struct OfValue(Box<dyn Fn(&str) -> Expr>);

impl OfValue {
    pub(super) fn new(code: impl Fn(&str) -> Expr + 'static) -> Self {
        OfValue(Box::new(code))
    }

    /// The code for the value at `place`.
    pub(super) fn at(&self, place: &str) -> Expr {
        (self.0)(place)
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

    /// The layout of a type specifier used as a plain value (as
    /// [`Gen::scalar_type`] types it).
    pub(super) fn scalar_layout(&self, ty: &TypeSpec, at: Span) -> Result<Layout, GenError> {
        Ok(match self.syms.resolve_alias(ty) {
            TypeSpec::Int | TypeSpec::UnsignedInt | TypeSpec::Float => Layout::plain(4),
            TypeSpec::Hyper | TypeSpec::UnsignedHyper | TypeSpec::Double => Layout::plain(8),
            TypeSpec::Quadruple => Layout::plain(16),
            TypeSpec::Bool => Layout::WORD,
            TypeSpec::Named { name, .. } => match self.item_index.get(&name.name) {
                Some(&i) => self.item_layout(i)?,
                None => return Err(self.err(name.span, format!("undefined type `{}`", name.name))),
            },
            t @ (TypeSpec::InlineStruct(_) | TypeSpec::InlineUnion(_) | TypeSpec::InlineEnum(_)) => {
                let rust = self.inline_names.get(&(t as *const TypeSpec as usize));
                match rust.and_then(|r| self.inline_index.get(r)) {
                    Some(&i) => self.item_layout(i)?,
                    None => return Err(self.err(at, "an inline type the generator did not name")),
                }
            }
            // Refused by `scalar_type`, which every caller asks first.
            _ => return Err(self.err(at, "not a plain value")),
        })
    }

    /// A type the runtime or another generated type implements `Xdr` for:
    /// encoded through the trait.
    pub(super) fn trait_codec(ty: String, layout: Layout) -> Codec {
        let (bounded, reference) = (layout.bounded, Reference::of_type(&ty));
        Codec {
            decode: Expr::text("xdr_spec_rt::Xdr::decode_from(r)?"),
            len: OfValue::new(|v| Expr::text(format!("xdr_spec_rt::Xdr::encoded_len(&{v})"))),
            encode: OfValue::new(|v| Expr::text(format!("xdr_spec_rt::Xdr::encode_to(&{v}, w)"))),
            counted: false,
            validate: bounded.then(|| OfValue::new(|v| Expr::text(format!("xdr_spec_rt::Xdr::validate(&{v})?")))),
            layout,
            reference,
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
                None => Self::trait_codec(self.scalar_type(ty, name.span)?, self.scalar_layout(ty, name.span)?),
            },
            (Shape::Optional, TypeSpec::Named { name: target, .. })
                if self.syms.type_def(&target.name).is_some_and(is_list_struct) =>
            {
                self.list_codec(&target.name, &what)?
            }
            (Shape::Optional, _) => {
                let inner = self.scalar_type(ty, name.span)?;
                Self::trait_codec(format!("Option<{inner}>"), Layout::optional(self.scalar_layout(ty, name.span)?))
            }
            (Shape::FixedArray(n), TypeSpec::Opaque) => {
                let n = self.bound(n)?;
                let len = self.checked(name.span, (n as usize).checked_add(xdr_spec_rt::pad(n as usize)))?;
                let expr = format!("xdr_spec_rt::opaque_len({n})");
                Codec {
                    ty: format!("&'a [u8; {n}]"),
                    decode: Expr::chain("r", &[&format!(".opaque_fixed::<{n}>()?")]),
                    len: OfValue::new(move |_| Expr::text(len.to_string())),
                    encode: OfValue::new(|v| Expr::chain("w", &[&format!(".put_opaque_fixed(&{v}[..])")])),
                    counted: false,
                    validate: None,
                    layout: Layout::plain(len),
                    reference: Reference::exprs(expr.clone(), format!("Some({expr})"), "true".into(), "false".into()),
                }
            }
            (Shape::VarArray(max), TypeSpec::Opaque | TypeSpec::String) => {
                let string = matches!(base, TypeSpec::String);
                let max_v = max.as_ref().map(|m| self.bound(m)).transpose()?;
                let max_s = option(max_v.map(|m| m as usize));
                let read = if string { "string" } else { "opaque_var" };
                Codec {
                    ty: if string { "&'a str".into() } else { "&'a [u8]".into() },
                    decode: Expr::chain("r", &[&format!(".{read}({max_s}, {what})?")]),
                    len: OfValue::new(|v| Expr::text(format!("4 + xdr_spec_rt::opaque_len({v}.len())"))),
                    encode: if string {
                        OfValue::new(|v| Expr::chain("w", &[&format!(".put_opaque_var({v}.as_bytes())")]))
                    } else {
                        OfValue::new(|v| Expr::chain("w", &[&format!(".put_opaque_var({v})")]))
                    },
                    validate: max_v.map(|m| {
                        let what = what.clone();
                        OfValue::new(move |v| {
                            Expr::call("xdr_spec_rt::check_max", &[&format!("{v}.len()"), &m.to_string(), &what], "?")
                        })
                    }),
                    counted: false,
                    // Without a `<max>` the only bound is the 32-bit length,
                    // which `Xdr::encode` checks for the whole message.
                    layout: Layout { min: 4, fixed: None, plain: false, bounded: max_v.is_some() },
                    reference: Reference::exprs("4".into(), "None".into(), "false".into(), max_v.is_some().to_string()),
                }
            }
            (Shape::FixedArray(_), TypeSpec::String) => {
                return Err(self.err(name.span, "`string` takes a variable length (`<n>`), not `[n]`"))
            }
            (Shape::FixedArray(n), _) => {
                let n = self.bound(n)?;
                let elem = self.scalar_type(ty, name.span)?;
                let e = self.scalar_layout(ty, name.span)?;
                let t = format!("<{elem} as xdr_spec_rt::Xdr>");
                let min = self.checked(name.span, e.min.checked_mul(n as usize))?;
                let fixed = e.fixed.map(|f| self.checked(name.span, f.checked_mul(n as usize))).transpose()?;
                Codec {
                    decode: Expr::chain("r", &[&format!(".fixed_seq::<{elem}>({n}, {what})?")]),
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    len: OfValue::new(|v| Expr::chain(v, &[".elements_len()"])),
                    encode: OfValue::new(|v| Expr::chain(v, &[".encode_elements(w)"])),
                    validate: Some({
                        let what = what.clone();
                        OfValue::new(move |v| Expr::chain(v, &[&format!(".validate_bounds(None, Some({n}), {what})?")]))
                    }),
                    counted: false,
                    layout: Layout { min, fixed, plain: e.plain, bounded: true },
                    reference: Reference::exprs(
                        format!("{n} * {t}::MIN_LEN"),
                        format!("xdr_spec_rt::fixed_mul({t}::FIXED_LEN, {n})"),
                        format!("{t}::PLAIN"),
                        "true".into(),
                    ),
                }
            }
            (Shape::VarArray(max), _) => {
                let max_s = match max {
                    Some(m) => format!("Some({})", self.bound(m)?),
                    None => "None".into(),
                };
                let elem = self.scalar_type(ty, name.span)?;
                let e = self.scalar_layout(ty, name.span)?;
                let t = format!("<{elem} as xdr_spec_rt::Xdr>");
                Codec {
                    decode: Expr::chain("r", &[&format!(".var_seq::<{elem}>({max_s}, {what})?")]),
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    len: OfValue::new(|v| Expr::chain(v, &[".elements_len()", ".saturating_add(4)"])),
                    encode: OfValue::new(|v| Expr::chain(v, &[".encode_counted(w)"])),
                    validate: Some({
                        let (max_s, what) = (max_s.clone(), what.clone());
                        OfValue::new(move |v| Expr::chain(v, &[&format!(".validate_bounds({max_s}, None, {what})?")]))
                    }),
                    counted: true,
                    // An unbounded array of elements that take room needs no
                    // check of its own: `Xdr::encode` refuses a message over
                    // 4 GiB, which any count over 2^32 would make.
                    layout: Layout {
                        min: 4,
                        fixed: None,
                        plain: false,
                        bounded: max.is_some() || e.bounded || e.min == 0,
                    },
                    reference: Reference::exprs(
                        "4".into(),
                        "None".into(),
                        "false".into(),
                        if max.is_some() { "true".into() } else { format!("{t}::BOUNDED || {t}::MIN_LEN == 0") },
                    ),
                }
            }
        };
        Ok(Some(c))
    }

    /// A length the generated code states, or an error where the
    /// specification's sizes overflow it.
    fn checked(&self, at: Span, n: Option<usize>) -> Result<usize, GenError> {
        n.ok_or_else(|| self.err(at, "the encoded length of this declaration does not fit a usize"))
    }

    /// The codec of a pointer to the optional-data list struct `list`: the
    /// runtime's [`List`](crate::rt::List), read with the field's name
    /// (`what`, quoted) so that a limit error names the field, not only "a
    /// list".
    pub(super) fn list_codec(&self, list: &str, what: &str) -> Result<Codec, GenError> {
        let elem = self.list_elem(list)?;
        let layout = Layout::optional(self.list_elem_layout(list)?);
        let mut c = Self::trait_codec(format!("xdr_spec_rt::List<'a, {elem}>"), layout);
        c.decode = Expr::chain("r", &[&format!(".list::<{elem}>({what})?")]);
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

    /// The body of the optional-data list struct `xdr`.
    fn list_body(&self, xdr: &str) -> Result<&'s StructBody, GenError> {
        let def = self.syms.type_def(xdr).ok_or_else(|| self.err(Span::default(), format!("undefined `{xdr}`")))?;
        let DefinitionKind::Struct(b) = &def.kind else {
            return Err(self.err(def.name.span, format!("`{xdr}` is not an optional-data list struct")));
        };
        Ok(b)
    }

    /// The element type of the optional-data list struct `xdr`: the type of
    /// its one entry field, or the generated struct of its fields (named by
    /// [`list_names`]).
    pub(super) fn list_elem(&self, xdr: &str) -> Result<String, GenError> {
        let b = self.list_body(xdr)?;
        if b.fields.len() == 2 {
            if let Some(c) = self.codec(&b.fields[0], "")? {
                return Ok(c.ty);
            }
        }
        Ok(self.with_lt(&list_names(&camel(xdr)).1))
    }

    /// The layout of [`Gen::list_elem`].
    fn list_elem_layout(&self, xdr: &str) -> Result<Layout, GenError> {
        let b = self.list_body(xdr)?;
        if b.fields.len() == 2 {
            if let Some(c) = self.codec(&b.fields[0], "")? {
                return Ok(c.layout);
            }
        }
        let fields = b.fields[..b.fields.len() - 1].iter().map(|f| self.codec(f, "")).collect::<Result<Vec<_>, _>>()?;
        self.concat(b.fields.first().map_or(Span::default(), |f| f.span()), fields.iter().flatten().map(|c| c.layout))
    }

    /// [`Layout::concat`], or an error where the lengths overflow.
    pub(super) fn concat(&self, at: Span, fields: impl Iterator<Item = Layout>) -> Result<Layout, GenError> {
        Layout::concat(fields).ok_or_else(|| self.err(at, "the encoded length of this type does not fit a usize"))
    }

    /// The layout of the type item `i` describes, worked out once (and
    /// refused for a type that contains itself, which the checker reports).
    pub(super) fn item_layout(&self, i: usize) -> Result<Layout, GenError> {
        match self.layouts.borrow().get(&i) {
            Some(Some(l)) => return Ok(*l),
            Some(None) => return Err(self.err(self.items[i].span, "a type that contains itself has no layout")),
            None => {}
        }
        self.layouts.borrow_mut().insert(i, None);
        let item = &self.items[i];
        let layout = match item.kind {
            ItemKind::Struct(b) => {
                let fields = b.fields.iter().map(|f| self.codec(f, "")).collect::<Result<Vec<_>, _>>()?;
                self.concat(item.span, fields.iter().flatten().map(|c| c.layout))?
            }
            ItemKind::List(_) => Layout::optional(self.list_elem_layout(&item.xdr)?),
            ItemKind::Enum(_) => Layout::WORD,
            ItemKind::Union(u) => {
                let mut arms = Vec::new();
                for d in union_decls(u) {
                    arms.push(self.codec(d, "")?.map_or(Layout::VOID, |c| c.layout));
                }
                let holds = u.default.is_some() || u.arms.iter().any(|a| a.cases.len() > 1);
                Layout::union(&arms, holds)
                    .ok_or_else(|| self.err(item.span, "the encoded length of this type does not fit a usize"))?
            }
            ItemKind::Typedef(d) => match self.codec(d, "")? {
                Some(c) => c.layout,
                None => Layout::VOID,
            },
        };
        self.layouts.borrow_mut().insert(i, Some(layout));
        Ok(layout)
    }
}
