//! The syntax tree of an XDR specification (RFC 4506 section 6, RFC 5531
//! section 12), as the parser produces it and the checker and generator read it.
//!
//! Every node that a diagnostic may point at carries a [`Span`]: the byte
//! offset in the source text, turned into `line:column` only when reported.

/// A byte offset into the XDR source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// Offset of the first byte of the construct.
    pub offset: usize,
}

/// An identifier together with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The identifier exactly as written.
    pub name: String,
    /// Where it was written.
    pub span: Span,
}

/// A whole XDR specification: definitions in source order.
///
/// ```
/// use xdr_spec::ast::DefinitionKind;
/// let src = "const MAX = 8;\n/* A point. */\nstruct point { int x; int y; };\n";
/// let spec = xdr_spec::parse::parse(src).unwrap();
/// let names: Vec<&str> = spec.definitions.iter().map(|d| d.name.name.as_str()).collect();
/// assert_eq!(names, ["MAX", "point"]);
/// assert!(matches!(spec.definitions[1].kind, DefinitionKind::Struct(_)));
/// assert_eq!(spec.definitions[1].doc, ["A point."]);
/// assert!(xdr_spec::check::check(&spec).is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spec {
    /// Definitions in the order they appear.
    pub definitions: Vec<Definition>,
}

/// One top-level definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The name being defined.
    pub name: Ident,
    /// The text of the comments directly before the definition, with comment
    /// markers removed, used as documentation by the generator.
    pub doc: Vec<String>,
    /// What is being defined.
    pub kind: DefinitionKind,
}

/// The kinds of top-level definition.
#[derive(Debug, Clone, PartialEq)]
pub enum DefinitionKind {
    /// `const NAME = value;`
    Const(Value),
    /// `typedef declaration;` (the declaration's name is the definition's name).
    Typedef(Declaration),
    /// `enum NAME { ... };`
    Enum(EnumBody),
    /// `struct NAME { ... };`
    Struct(StructBody),
    /// `union NAME switch (...) { ... };`
    Union(UnionBody),
    /// RFC 5531 `program NAME { version ... } = number;`
    Program(Program),
}

/// A constant or a reference to a named constant (array bounds, enum values,
/// case labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A literal integer (decimal, hexadecimal or octal in the source).
    Literal {
        /// The value.
        value: i64,
        /// Where it was written.
        span: Span,
    },
    /// A named constant or enumerator.
    Named(Ident),
}

impl Value {
    /// Where the value was written.
    pub fn span(&self) -> Span {
        match self {
            Value::Literal { span, .. } => *span,
            Value::Named(id) => id.span,
        }
    }
}

/// The members of an enum, in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumBody {
    /// `NAME = value` pairs.
    pub members: Vec<(Ident, Value)>,
}

/// The fields of a struct, in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct StructBody {
    /// The fields; never `void`.
    pub fields: Vec<Declaration>,
}

/// A discriminated union.
#[derive(Debug, Clone, PartialEq)]
pub struct UnionBody {
    /// The discriminant declaration (`int`, `unsigned int`, `bool` or an enum).
    pub discriminant: Declaration,
    /// The arms, in source order.
    pub arms: Vec<UnionArm>,
    /// The `default:` arm, if any.
    pub default: Option<Box<Declaration>>,
}

/// One arm of a union: one or more case labels sharing one declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct UnionArm {
    /// The case labels.
    pub cases: Vec<Value>,
    /// The arm's declaration (`void` allowed).
    pub decl: Declaration,
}

/// A declaration: a type with a name and a shape (RFC 4506 section 6.3,
/// "declaration").
#[derive(Debug, Clone, PartialEq)]
pub enum Declaration {
    /// `void`
    Void(Span),
    /// A named field of some shape.
    Named {
        /// The field (or typedef) name.
        name: Ident,
        /// The element type.
        ty: TypeSpec,
        /// Scalar, array, opaque, string or optional.
        shape: Shape,
    },
}

impl Declaration {
    /// The declared name, unless this is `void`.
    pub fn name(&self) -> Option<&Ident> {
        match self {
            Declaration::Void(_) => None,
            Declaration::Named { name, .. } => Some(name),
        }
    }

    /// Where the declaration was written.
    pub fn span(&self) -> Span {
        match self {
            Declaration::Void(s) => *s,
            Declaration::Named { name, .. } => name.span,
        }
    }
}

/// How a declared item is laid out around its element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `T name;`
    Scalar,
    /// `T name[N];` (for `opaque`, N bytes)
    FixedArray(Value),
    /// `T name<N>;` or `T name<>;` (for `opaque` and `string`, bytes)
    VarArray(Option<Value>),
    /// `T *name;` (optional-data, RFC 4506 section 4.19)
    Optional,
}

/// A type specifier (RFC 4506 section 6.3, "type-specifier").
#[derive(Debug, Clone, PartialEq)]
pub enum TypeSpec {
    /// `int`
    Int,
    /// `unsigned int` (also written `unsigned`)
    UnsignedInt,
    /// `hyper`
    Hyper,
    /// `unsigned hyper`
    UnsignedHyper,
    /// `float`
    Float,
    /// `double`
    Double,
    /// `quadruple`
    Quadruple,
    /// `bool`
    Bool,
    /// `opaque` (only with a fixed or variable array shape)
    Opaque,
    /// `string` (only with a variable array shape)
    String,
    /// A type outside RFC 4506 that rpcgen tolerates (`unsigned short`,
    /// `unsigned long`, `u_int`, `short`, `long`, `char`, ...), kept so the
    /// checker can report it where it was written.
    NonStandard {
        /// The words as written, e.g. `unsigned short`.
        spelling: String,
        /// Where it was written.
        span: Span,
    },
    /// A named type; `struct X`, `union X` and `enum X` references are
    /// recorded with their keyword so the checker can verify the kind.
    Named {
        /// The referenced name.
        name: Ident,
        /// The keyword written before it, if any.
        keyword: Option<TypeKeyword>,
    },
    /// An anonymous `enum { ... }` written in place.
    InlineEnum(EnumBody),
    /// An anonymous `struct { ... }` written in place.
    InlineStruct(StructBody),
    /// An anonymous `union switch (...) { ... }` written in place.
    InlineUnion(Box<UnionBody>),
}

/// The keyword before a type name in `struct X`, `union X`, `enum X`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKeyword {
    /// `struct X`
    Struct,
    /// `union X`
    Union,
    /// `enum X`
    Enum,
}

/// An RFC 5531 program definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The program number.
    pub number: Value,
    /// Its versions.
    pub versions: Vec<Version>,
}

/// One version of a program.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    /// The version's name.
    pub name: Ident,
    /// The version number.
    pub number: Value,
    /// Its procedures.
    pub procedures: Vec<Procedure>,
}

/// One procedure of a program version.
#[derive(Debug, Clone, PartialEq)]
pub struct Procedure {
    /// The procedure's name.
    pub name: Ident,
    /// The result type (`None` for `void`).
    pub result: Option<TypeSpec>,
    /// The argument types (empty for `void`).
    pub args: Vec<TypeSpec>,
    /// The procedure number.
    pub number: Value,
}

/// Convert a byte offset in `source` to a 1-based `(line, column)`; the
/// column counts bytes. Scans `source` up to `offset`: to convert many
/// offsets into one text, build a [`LineIndex`] once instead.
///
/// ```
/// assert_eq!(xdr_spec::ast::line_col("ab\ncd", 4), (2, 2));
/// ```
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(source).line_col(offset)
}

/// Where each line of a text starts, so that an offset becomes a
/// `(line, column)` by binary search rather than by scanning the text from
/// its start: the generator turns an offset into a line for every item it
/// documents, and a scan each time made it quadratic in the number of
/// definitions.
///
/// ```
/// let index = xdr_spec::ast::LineIndex::new("ab\ncd\n");
/// assert_eq!(index.line_col(0), (1, 1));
/// assert_eq!(index.line_col(4), (2, 2));
/// assert_eq!(index.line_col(99), (3, 1)); // past the end: the end
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// Offset of the first byte of each line; `starts[0]` is 0.
    starts: Vec<usize>,
    /// Length of the text, where offsets past the end are clamped.
    len: usize,
}

impl LineIndex {
    /// Index the line starts of `source` (one pass).
    pub fn new(source: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(source.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts, len: source.len() }
    }

    /// The 1-based `(line, column)` of byte `offset` (clamped to the end of
    /// the text), as [`line_col`] computes it.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.len);
        // The number of lines starting at or before `offset`: at least one,
        // as the first starts at 0.
        let line = self.starts.partition_point(|&s| s <= offset);
        (line, offset - self.starts[line - 1] + 1)
    }
}

/// Source bytes that are not UTF-8: where the first invalid byte is, so that
/// the message points into the file like every other diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: invalid UTF-8 (byte 0x{byte:02x}): a specification must be UTF-8 text")]
pub struct InvalidUtf8 {
    /// 1-based line of the first invalid byte.
    pub line: usize,
    /// 1-based column (in bytes) of the first invalid byte.
    pub column: usize,
    /// Byte offset of the first invalid byte.
    pub offset: usize,
    /// The first invalid byte.
    pub byte: u8,
}

/// The bytes of a specification as text, or where they stop being UTF-8.
///
/// ```
/// let e = xdr_spec::ast::source_text(b"const A = 1;\nconst \xff").unwrap_err();
/// assert_eq!((e.line, e.column, e.byte), (2, 7, 0xff));
/// assert_eq!(xdr_spec::ast::source_text(b"ok"), Ok("ok"));
/// ```
pub fn source_text(bytes: &[u8]) -> Result<&str, InvalidUtf8> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        // The prefix up to the error is valid by definition.
        let valid = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
        let (line, column) = line_col(valid, offset);
        InvalidUtf8 { line, column, offset, byte: bytes[offset] }
    })
}
