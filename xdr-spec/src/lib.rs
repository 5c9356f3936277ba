//! `xdr-spec`: from the text of a specification to typed, zero-copy Rust.
//!
//! The pipeline, one module per step:
//!
//! 1. [`extract`]: find the XDR inside a spec document (the `///` convention of
//!    RFC 8166 and its successors, markdown fences, `<CODE BEGINS>` blocks), and
//!    with `repair` recover it from degraded renderings, reporting every repair.
//! 2. [`errata`]: apply explicit, reasoned corrections to the extracted XDR.
//! 3. [`parse`]: the RFC 4506 language plus RFC 5531 program definitions, into
//!    the [`ast`].
//! 4. [`check`]: names, duplicates, case labels, non-standard types, recursion.
//! 5. [`gen`]: Rust source whose decoders borrow from the input and never
//!    allocate, using the runtime crate `xdr-spec-rt` (re-exported here as
//!    [`rt`]). Generated code names it `xdr_spec_rt`, so a crate that includes
//!    it depends on `xdr-spec-rt`, and on `xdr-spec` only to build.
//!
//! [`pipeline`] strings the steps together for build scripts.
//!
//! # Extension documents
//!
//! RPC-over-RDMA Version Two grows by extension documents
//! (draft-cel-nfsv4-rpcrdma-version-two-00, section 3.1: optional message
//! types), whose XDR uses the base draft's types and values. Such a document
//! is compiled together with its base by [`pipeline::Build`]:
//!
//! 1. Write it as the base is written: an RFC-style text whose XDR lines
//!    start with `///` (RFC 8166 §5.1). It may use every name the base
//!    defines (types, constants, enumerators, typedefs the base's errata
//!    add), and must define no name the base or another extension defines.
//! 2. If its text has defects, give it an errata file of its own
//!    ([`errata`]): its lines are traced separately, so diagnostics keep
//!    pointing at the extension's own lines.
//! 3. Add it to the build: `.extension(path, errata)` in `build.rs`, or
//!    `--extension [MODULE=]FILE[:ERRATA]` with `xdr-spec spec`, `check` or
//!    `gen`. Its types are generated into `pub mod MODULE` (named after the
//!    file unless given) at the end of the same `generated.rs`, after the
//!    base's items, which are unchanged to the byte.
//!
//! ```
//! use xdr_spec::pipeline::Build;
//! # let dir = std::env::temp_dir().join(format!("xdr-spec-lib-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let base = dir.join("base.txt");
//! std::fs::write(&base, "4.  XDR\n\n   /// const BASE_MAX = 4;\n   /// struct base_item { unsigned int id; };\n")
//!     .unwrap();
//! let ext = dir.join("my-ext.txt");
//! std::fs::write(&ext, "3.  Extension XDR\n\n   /// struct ext_batch { base_item items<BASE_MAX>; };\n").unwrap();
//!
//! // In build.rs, `.out` defaults to OUT_DIR; the crate then has
//! // `pub mod xdr { include!(concat!(env!("OUT_DIR"), "/generated.rs")); }`
//! // and names the extension's types `xdr::my_ext::ExtBatch`.
//! let out = Build::new(&base).extension(&ext, None).out(&dir).run().unwrap();
//! assert!(out.rust.contains("pub mod my_ext {") && out.rust.contains("use super::*;"));
//! assert!(out.rust.contains("pub struct ExtBatch<'a>"));
//!
//! // A mistake in the extension is reported at its own line and column.
//! std::fs::write(&ext, "3.  Extension XDR\n\n   /// struct ext_batch { base_itme items<BASE_MAX>; };\n").unwrap();
//! let err = Build::new(&base).extension(&ext, None).generate().unwrap_err().to_string();
//! assert!(err.contains("my-ext.txt:3:27: error: undefined name `base_itme`"), "{err}");
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

#![warn(missing_docs)]

pub mod ast;
pub mod binding;
pub mod check;
pub mod errata;
pub mod extract;
pub mod gen;
pub mod parse;
pub mod pipeline;
mod shorten;
/// The runtime generated code uses: the `xdr-spec-rt` crate, re-exported.
pub use xdr_spec_rt as rt;
pub mod symbols;
