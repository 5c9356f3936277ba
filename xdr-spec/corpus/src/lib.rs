//! The XDR corpus of `xdr-spec`: one module per file in `xdr/`, generated at
//! build time. The tests in `tests/` round-trip every type.

/// `xdr/scalars.x`: every scalar type and constant form.
pub mod scalars {
    include!(concat!(env!("OUT_DIR"), "/scalars.rs"));
}

/// `xdr/arrays.x`: fixed and variable arrays, opaque data and strings.
pub mod arrays {
    include!(concat!(env!("OUT_DIR"), "/arrays.rs"));
}

/// `xdr/unions.x`: unions over every discriminant kind, inline types.
pub mod unions {
    include!(concat!(env!("OUT_DIR"), "/unions.rs"));
}

/// `xdr/lists.x`: optional data and optional-data lists.
pub mod lists {
    include!(concat!(env!("OUT_DIR"), "/lists.rs"));
}

/// `xdr/program.x`: RFC 5531 programs and Rust keywords as names.
pub mod program {
    include!(concat!(env!("OUT_DIR"), "/program.rs"));
}
