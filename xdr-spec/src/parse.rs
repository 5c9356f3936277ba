//! The XDR language of RFC 4506 section 6, with the program definitions of
//! RFC 5531 section 12, parsed with `nom` into the [`ast`](crate::ast).
//!
//! Beyond RFC 4506 the parser accepts what real specifications use and what
//! rpcgen tolerates, recording it so the checker can report it: `struct X`,
//! `union X` and `enum X` as type names, and non-standard integer spellings
//! (`unsigned short`, `long`, bare `unsigned`, ...). Comments directly before a
//! definition become its documentation.
//!
//! The parser is iterative over definitions and recursion is bounded by the
//! nesting written in the source (inline struct/union bodies), never by data.

use std::cell::Cell;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_until, take_while, take_while1};
use nom::character::complete::{char, digit1, hex_digit1, oct_digit1};
use nom::combinator::{cut, map, opt, recognize, value};
use nom::error::{context, VerboseError, VerboseErrorKind};
use nom::multi::separated_list1;
use nom::sequence::{delimited, pair, preceded, terminated};
use nom::IResult;

use crate::ast::*;

type Res<'a, T> = IResult<&'a str, T, VerboseError<&'a str>>;

/// Inline bodies nested deeper than this are refused rather than recursed
/// into (an XDR file is trusted less than it seems: it may come from a
/// degraded rendering).
const MAX_NESTING: usize = 64;

thread_local! {
    static SOURCE_LEN: Cell<usize> = const { Cell::new(0) };
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// A syntax error, with where it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What was expected, and what was found.
    pub message: String,
}

/// Parse a whole XDR specification.
///
/// ```
/// let spec = xdr_spec::parse::parse("struct point { int x; int y; };").unwrap();
/// assert_eq!(spec.definitions[0].name.name, "point");
/// ```
pub fn parse(source: &str) -> Result<Spec, ParseError> {
    SOURCE_LEN.with(|c| c.set(source.len()));
    NESTING.with(|c| c.set(0));
    let mut definitions = Vec::new();
    let mut rest = source;
    loop {
        let (after_doc, doc) = doc_comments(rest).map_err(|e| to_error(source, e))?;
        if after_doc.is_empty() {
            break;
        }
        match definition(after_doc) {
            Ok((r, mut def)) => {
                def.doc = doc;
                definitions.push(def);
                rest = r;
            }
            Err(e) => return Err(to_error(source, e)),
        }
    }
    Ok(Spec { definitions })
}

fn to_error(source: &str, e: nom::Err<VerboseError<&str>>) -> ParseError {
    let (at, message) = match e {
        nom::Err::Incomplete(_) => (source.len(), "unexpected end of input".to_string()),
        nom::Err::Error(v) | nom::Err::Failure(v) => describe(source, &v),
    };
    let (line, column) = line_col(source, at);
    ParseError { line, column, message }
}

fn describe(source: &str, v: &VerboseError<&str>) -> (usize, String) {
    let Some((first_at, _)) = v.errors.first() else {
        return (0, "syntax error".to_string());
    };
    let offset = source.len() - first_at.len();
    let found: String = first_at.trim_start().chars().take(24).take_while(|&c| c != '\n').collect();
    let found = if found.is_empty() { "end of input".to_string() } else { format!("`{found}`") };
    let mut expected = None;
    for (_, kind) in &v.errors {
        match kind {
            VerboseErrorKind::Char(c) if expected.is_none() => expected = Some(format!("`{c}`")),
            VerboseErrorKind::Context(ctx) => {
                let what = match expected.take() {
                    Some(e) => format!("expected {e} in {ctx}"),
                    None => format!("expected {ctx}"),
                };
                let skipped = first_at.len() - first_at.trim_start().len();
                return (offset + skipped, format!("{what}, found {found}"));
            }
            _ => {}
        }
    }
    let skipped = first_at.len() - first_at.trim_start().len();
    let what = expected.map_or("syntax error".to_string(), |e| format!("expected {e}"));
    (offset + skipped, format!("{what}, found {found}"))
}

fn span(input: &str) -> Span {
    Span { offset: SOURCE_LEN.with(|c| c.get()).saturating_sub(input.len()) }
}

// ---- lexical layer -------------------------------------------------------

/// Whitespace and comments, discarded.
fn ws(input: &str) -> Res<'_, ()> {
    let mut rest = input;
    loop {
        let trimmed = rest.trim_start();
        if let Some(body) = trimmed.strip_prefix("/*") {
            let (r, _) = take_until("*/")(body).map_err(|_: nom::Err<VerboseError<&str>>| {
                nom::Err::Failure(VerboseError {
                    errors: vec![(trimmed, VerboseErrorKind::Context("a closing `*/` for this comment"))],
                })
            })?;
            rest = &r[2..];
        } else if trimmed.starts_with('%') {
            // rpcgen pass-through lines carry C, not XDR: skip the line.
            rest = trimmed.find('\n').map_or("", |i| &trimmed[i..]);
        } else {
            return Ok((trimmed, ()));
        }
    }
}

/// Comments before a definition, kept as documentation lines.
fn doc_comments(input: &str) -> Res<'_, Vec<String>> {
    let mut rest = input;
    let mut doc = Vec::new();
    loop {
        let trimmed = rest.trim_start();
        if trimmed.starts_with('%') {
            rest = trimmed.find('\n').map_or("", |i| &trimmed[i..]);
            continue;
        }
        let Some(body) = trimmed.strip_prefix("/*") else {
            return Ok((trimmed, doc));
        };
        let Some(end) = body.find("*/") else {
            return Err(nom::Err::Failure(VerboseError {
                errors: vec![(trimmed, VerboseErrorKind::Context("a closing `*/` for this comment"))],
            }));
        };
        // Only the comment nearest the definition documents it; earlier ones
        // (a licence block, say) belong to the file.
        doc.clear();
        let text: Vec<&str> =
            body[..end].lines().map(|l| l.trim().trim_start_matches('*').trim()).filter(|l| !l.is_empty()).collect();
        if !text.is_empty() {
            doc.push(text.join(" "));
        }
        rest = &body[end + 2..];
    }
}

fn tok<'a, O>(mut p: impl FnMut(&'a str) -> Res<'a, O>) -> impl FnMut(&'a str) -> Res<'a, O> {
    move |input| {
        let (input, _) = ws(input)?;
        p(input)
    }
}

fn sym<'a>(c: char) -> impl FnMut(&'a str) -> Res<'a, char> {
    tok(char(c))
}

fn raw_ident(input: &str) -> Res<'_, &str> {
    recognize(pair(
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(|c: char| c.is_ascii_alphanumeric() || c == '_'),
    ))(input)
}

/// A keyword: the word, not followed by an identifier character.
fn kw<'a>(word: &'static str) -> impl FnMut(&'a str) -> Res<'a, &'a str> {
    tok(move |input: &'a str| {
        let (rest, w) = raw_ident(input)?;
        if w == word {
            Ok((rest, w))
        } else {
            Err(nom::Err::Error(VerboseError { errors: vec![(input, VerboseErrorKind::Context(word))] }))
        }
    })
}

/// The reserved words of RFC 4506 section 6.4: never identifiers.
pub const KEYWORDS: &[&str] = &[
    "bool",
    "case",
    "const",
    "default",
    "double",
    "quadruple",
    "enum",
    "float",
    "hyper",
    "int",
    "opaque",
    "string",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
];

fn ident(input: &str) -> Res<'_, Ident> {
    let (input, _) = ws(input)?;
    let sp = span(input);
    let (rest, w) = context("an identifier", raw_ident)(input)?;
    if KEYWORDS.contains(&w) {
        return Err(nom::Err::Error(VerboseError {
            errors: vec![(input, VerboseErrorKind::Context("an identifier (not a keyword)"))],
        }));
    }
    Ok((rest, Ident { name: w.to_string(), span: sp }))
}

/// What a literal too large for the syntax tree's `i64` is told, instead of
/// the parser's "expected an identifier" (the digits parse as no integer,
/// so the value parser falls back to a name). The range named is the one the
/// checker accepts for every use of a constant.
const OUT_OF_RANGE: &str =
    "an integer constant from -2147483648 to 4294967295 (XDR constants are 32-bit; this one does not fit even 64 bits)";

fn constant(input: &str) -> Res<'_, i64> {
    let (input, _) = ws(input)?;
    let (input, neg) = opt(char('-'))(input)?;
    let (rest, (radix, digits)) = context(
        "an integer constant",
        alt((
            map(preceded(alt((tag("0x"), tag("0X"))), hex_digit1), |h| (16, h)),
            map(preceded(char('0'), oct_digit1), |o| (8, o)),
            map(digit1, |d| (10, d)),
        )),
    )(input)?;
    let Ok(v) = i64::from_str_radix(digits, radix) else {
        // Digits of the radix always parse unless they overflow.
        return Err(nom::Err::Failure(VerboseError { errors: vec![(input, VerboseErrorKind::Context(OUT_OF_RANGE))] }));
    };
    if let Some(c) = rest.chars().next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            return Err(nom::Err::Failure(VerboseError {
                errors: vec![(input, VerboseErrorKind::Context("an integer constant"))],
            }));
        }
    }
    Ok((rest, if neg.is_some() { -v } else { v }))
}

fn xvalue(input: &str) -> Res<'_, Value> {
    let (input, _) = ws(input)?;
    let sp = span(input);
    alt((map(constant, move |value| Value::Literal { value, span: sp }), map(ident, Value::Named)))(input)
}

// ---- types and declarations ----------------------------------------------

fn nested<'a, O>(input: &'a str, p: impl FnOnce(&'a str) -> Res<'a, O>) -> Res<'a, O> {
    let depth = NESTING.with(|c| c.get());
    if depth >= MAX_NESTING {
        return Err(nom::Err::Failure(VerboseError {
            errors: vec![(input, VerboseErrorKind::Context("less deeply nested inline types"))],
        }));
    }
    NESTING.with(|c| c.set(depth + 1));
    let r = p(input);
    NESTING.with(|c| c.set(depth));
    r
}

fn type_spec(input: &str) -> Res<'_, TypeSpec> {
    let (input, _) = ws(input)?;
    let sp = span(input);
    let (after, word) = context("a type", raw_ident)(input)?;
    let simple = match word {
        "int" => Some(TypeSpec::Int),
        "hyper" => Some(TypeSpec::Hyper),
        "float" => Some(TypeSpec::Float),
        "double" => Some(TypeSpec::Double),
        "quadruple" => Some(TypeSpec::Quadruple),
        "bool" => Some(TypeSpec::Bool),
        "short" | "long" | "char" => Some(TypeSpec::NonStandard { spelling: word.to_string(), span: sp }),
        _ => None,
    };
    if let Some(t) = simple {
        return Ok((after, t));
    }
    match word {
        "unsigned" => {
            let (_, next) = opt(tok(raw_ident))(after)?;
            match next {
                Some("int") => map(kw("int"), |_| TypeSpec::UnsignedInt)(after),
                Some("hyper") => map(kw("hyper"), |_| TypeSpec::UnsignedHyper)(after),
                Some(w @ ("short" | "long" | "char")) => {
                    let (r, _) = tok(raw_ident)(after)?;
                    Ok((r, TypeSpec::NonStandard { spelling: format!("unsigned {w}"), span: sp }))
                }
                _ => Ok((after, TypeSpec::NonStandard { spelling: "unsigned".to_string(), span: sp })),
            }
        }
        "enum" | "struct" | "union" => {
            let keyword = match word {
                "enum" => TypeKeyword::Enum,
                "struct" => TypeKeyword::Struct,
                _ => TypeKeyword::Union,
            };
            let (peek, _) = ws(after)?;
            if peek.starts_with('{') || (keyword == TypeKeyword::Union && kw("switch")(peek).is_ok()) {
                nested(after, |i| match keyword {
                    TypeKeyword::Enum => map(enum_body, TypeSpec::InlineEnum)(i),
                    TypeKeyword::Struct => map(struct_body, TypeSpec::InlineStruct)(i),
                    TypeKeyword::Union => map(union_body, |u| TypeSpec::InlineUnion(Box::new(u)))(i),
                })
            } else {
                map(cut(ident), move |name| TypeSpec::Named { name, keyword: Some(keyword) })(after)
            }
        }
        _ => map(ident, |name| TypeSpec::Named { name, keyword: None })(input),
    }
}

fn shape_suffix(input: &str) -> Res<'_, Shape> {
    alt((
        map(delimited(sym('['), cut(xvalue), cut(sym(']'))), Shape::FixedArray),
        map(delimited(sym('<'), opt(xvalue), cut(sym('>'))), Shape::VarArray),
        value(Shape::Scalar, ws),
    ))(input)
}

fn declaration(input: &str) -> Res<'_, Declaration> {
    let (input, _) = ws(input)?;
    let sp = span(input);
    if let Ok((r, _)) = kw("void")(input) {
        return Ok((r, Declaration::Void(sp)));
    }
    let (after, word) = context("a declaration", raw_ident)(input)?;
    if word == "opaque" || word == "string" {
        let ty = if word == "opaque" { TypeSpec::Opaque } else { TypeSpec::String };
        let (r, name) = cut(ident)(after)?;
        let (r, shape) = context(
            if word == "opaque" { "opaque `[n]` or `<n>`" } else { "string `<n>`" },
            cut(alt((
                map(delimited(sym('['), cut(xvalue), cut(sym(']'))), Shape::FixedArray),
                map(delimited(sym('<'), opt(xvalue), cut(sym('>'))), Shape::VarArray),
            ))),
        )(r)?;
        return Ok((r, Declaration::Named { name, ty, shape }));
    }
    let (r, ty) = type_spec(input)?;
    if let Ok((r2, _)) = sym('*')(r) {
        let (r2, name) = cut(ident)(r2)?;
        return Ok((r2, Declaration::Named { name, ty, shape: Shape::Optional }));
    }
    let (r, name) = context("a name for the declaration", cut(ident))(r)?;
    let (r, shape) = shape_suffix(r)?;
    Ok((r, Declaration::Named { name, ty, shape }))
}

fn enum_body(input: &str) -> Res<'_, EnumBody> {
    let member = pair(ident, preceded(cut(sym('=')), cut(xvalue)));
    map(
        delimited(
            sym('{'),
            cut(separated_list1(sym(','), member)),
            context("`,` or `}` in an enum body", cut(sym('}'))),
        ),
        |members| EnumBody { members },
    )(input)
}

fn struct_body(input: &str) -> Res<'_, StructBody> {
    let (mut r, _) = sym('{')(input)?;
    let mut fields = Vec::new();
    loop {
        if let Ok((r2, _)) = sym('}')(r) {
            if fields.is_empty() {
                return Err(nom::Err::Failure(VerboseError {
                    errors: vec![(r, VerboseErrorKind::Context("at least one field in a struct"))],
                }));
            }
            return Ok((r2, StructBody { fields }));
        }
        let (r2, d) = context("a struct field", cut(terminated(declaration, cut(sym(';')))))(r)?;
        fields.push(d);
        r = r2;
    }
}

fn union_body(input: &str) -> Res<'_, UnionBody> {
    let (r, _) = kw("switch")(input)?;
    let (r, discriminant) = cut(delimited(sym('('), declaration, sym(')')))(r)?;
    let (mut r, _) = cut(sym('{'))(r)?;
    let mut arms = Vec::new();
    let mut default = None;
    loop {
        if let Ok((r2, _)) = sym('}')(r) {
            if arms.is_empty() && default.is_none() {
                return Err(nom::Err::Failure(VerboseError {
                    errors: vec![(r, VerboseErrorKind::Context("at least one `case` in a union"))],
                }));
            }
            return Ok((r2, UnionBody { discriminant, arms, default }));
        }
        if default.is_some() {
            return Err(nom::Err::Failure(VerboseError {
                errors: vec![(r, VerboseErrorKind::Context("`}` after the `default` arm"))],
            }));
        }
        if let Ok((r2, _)) = kw("default")(r) {
            let (r2, d) = cut(preceded(sym(':'), terminated(declaration, sym(';'))))(r2)?;
            default = Some(Box::new(d));
            r = r2;
            continue;
        }
        let case_label = preceded(kw("case"), cut(terminated(xvalue, sym(':'))));
        let (r2, cases) = context("`case`, `default` or `}` in a union body", cut(nom::multi::many1(case_label)))(r)?;
        let (r2, decl) = cut(terminated(declaration, sym(';')))(r2)?;
        arms.push(UnionArm { cases, decl });
        r = r2;
    }
}

// ---- definitions ---------------------------------------------------------

fn definition(input: &str) -> Res<'_, Definition> {
    let (input, _) = ws(input)?;
    let (after, word) = context("a definition (const, typedef, enum, struct, union or program)", raw_ident)(input)?;
    let def = |name, kind| Definition { name, doc: Vec::new(), kind };
    match word {
        "const" => {
            let (r, name) = cut(ident)(after)?;
            let (r, _) = cut(sym('='))(r)?;
            let (r, v) = cut(xvalue)(r)?;
            let (r, _) = context("`;` after a constant", cut(sym(';')))(r)?;
            Ok((r, def(name, DefinitionKind::Const(v))))
        }
        "typedef" => {
            let (r, d) = cut(declaration)(after)?;
            let (r, _) = context("`;` after a typedef", cut(sym(';')))(r)?;
            match d.name().cloned() {
                Some(name) => Ok((r, def(name, DefinitionKind::Typedef(d)))),
                None => Err(nom::Err::Failure(VerboseError {
                    errors: vec![(after, VerboseErrorKind::Context("a named declaration (typedef void is not XDR)"))],
                })),
            }
        }
        "enum" => {
            let (r, name) = cut(ident)(after)?;
            let (r, body) = cut(enum_body)(r)?;
            let (r, _) = context("`;` after an enum definition", cut(sym(';')))(r)?;
            Ok((r, def(name, DefinitionKind::Enum(body))))
        }
        "struct" => {
            let (r, name) = cut(ident)(after)?;
            let (r, body) = cut(struct_body)(r)?;
            let (r, _) = context("`;` after a struct definition", cut(sym(';')))(r)?;
            Ok((r, def(name, DefinitionKind::Struct(body))))
        }
        "union" => {
            let (r, name) = cut(ident)(after)?;
            let (r, body) = cut(union_body)(r)?;
            let (r, _) = context("`;` after a union definition", cut(sym(';')))(r)?;
            Ok((r, def(name, DefinitionKind::Union(body))))
        }
        "program" => {
            let (r, name) = cut(ident)(after)?;
            let (r, versions) = cut(delimited(sym('{'), nom::multi::many1(version_def), sym('}')))(r)?;
            let (r, number) = cut(preceded(sym('='), xvalue))(r)?;
            let (r, _) = context("`;` after a program definition", cut(sym(';')))(r)?;
            Ok((r, def(name, DefinitionKind::Program(Program { number, versions }))))
        }
        _ => Err(nom::Err::Failure(VerboseError {
            errors: vec![(
                input,
                VerboseErrorKind::Context("a definition (const, typedef, enum, struct, union or program)"),
            )],
        })),
    }
}

fn version_def(input: &str) -> Res<'_, Version> {
    let (r, _) = kw("version")(input)?;
    let (r, name) = cut(ident)(r)?;
    let (r, procedures) = cut(delimited(sym('{'), nom::multi::many1(procedure_def), sym('}')))(r)?;
    let (r, number) = cut(preceded(sym('='), xvalue))(r)?;
    let (r, _) = cut(sym(';'))(r)?;
    Ok((r, Version { name, number, procedures }))
}

fn void_or_type(input: &str) -> Res<'_, Option<TypeSpec>> {
    alt((value(None, kw("void")), map(type_spec, Some)))(input)
}

fn procedure_def(input: &str) -> Res<'_, Procedure> {
    let (r, result) = void_or_type(input)?;
    let (r, name) = cut(ident)(r)?;
    let (r, args) = cut(delimited(
        sym('('),
        map(separated_list1(sym(','), void_or_type), |v| v.into_iter().flatten().collect::<Vec<_>>()),
        sym(')'),
    ))(r)?;
    let (r, number) = cut(preceded(sym('='), xvalue))(r)?;
    let (r, _) = cut(sym(';'))(r)?;
    Ok((r, Procedure { name, result, args, number }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_construct() {
        let src = r#"
            const MAXLEN = 0x10;
            typedef unsigned int uint32;
            typedef opaque blob<MAXLEN>;
            typedef string name<>;
            enum color { RED = 0, GREEN = 1, BLUE = 02 };
            /* A node. */
            struct node { int v; struct node *next; hyper h[3]; unsigned hyper u<>; };
            union u switch (color c) { case RED: case GREEN: int x; case BLUE: void; default: float f; };
            struct anon { struct { int a; } inner; union switch (int d) { case 1: double q; } un; enum { A = 1 } e; };
            program P { version V { void NULL(void) = 0; int ADD(int, int) = 1; } = 1; } = 0x20000001;
        "#;
        let spec = parse(src).unwrap();
        assert_eq!(spec.definitions.len(), 9);
        assert_eq!(spec.definitions[5].doc, vec!["A node.".to_string()]);
    }

    #[test]
    fn reports_line_and_column() {
        let err = parse("struct a {\n  int x\n};").unwrap_err();
        assert_eq!((err.line, err.column), (3, 1), "{err}");
        assert!(err.message.contains("`;`"), "{err}");
    }

    #[test]
    fn non_standard_types_are_kept() {
        let spec = parse("struct s { unsigned short a; long b; unsigned c; };").unwrap();
        let DefinitionKind::Struct(body) = &spec.definitions[0].kind else { panic!() };
        let spellings: Vec<_> = body
            .fields
            .iter()
            .map(|d| match d {
                Declaration::Named { ty: TypeSpec::NonStandard { spelling, .. }, .. } => spelling.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(spellings, ["unsigned short", "long", "unsigned"]);
    }

    #[test]
    fn deep_inline_nesting_is_refused_not_overflowed() {
        let mut src = String::from("typedef ");
        for _ in 0..10_000 {
            src.push_str("struct { ");
        }
        src.push_str("int x;");
        let e = parse(&src).unwrap_err();
        assert!(e.message.contains("nested"), "{e}");
    }
}
