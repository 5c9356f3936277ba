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
//!    allocate, using the runtime in [`rt`].
//!
//! [`pipeline`] strings the steps together for build scripts.

pub mod ast;
pub mod check;
pub mod errata;
pub mod extract;
pub mod gen;
pub mod parse;
pub mod pipeline;
pub mod rt;
pub mod symbols;
