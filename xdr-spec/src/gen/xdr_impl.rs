//! The `impl Xdr` block every generated type gets, the encoders'
//! bounds-checked runs, and the layout checks of
//! [`GenOptions::layout_checks`].

use super::layout::{option, Layout, Reference};
use super::*;

/// Writes part of a method body.
pub(super) type Body<'b> = &'b dyn Fn(&mut Code);

/// The method bodies of one `impl Xdr`.
pub(super) struct Bodies<'b> {
    pub(super) decode: Body<'b>,
    /// `encoded_len`'s, for a type without a fixed length.
    pub(super) len: Body<'b>,
    pub(super) encode: Body<'b>,
    /// `validate`'s checks, for a type with bounds (`Ok(())` follows them).
    pub(super) validate: Body<'b>,
    /// `encode_led`'s, for a value whose encoding starts with a counted
    /// array: it takes the word before it (a list's or an optional's TRUE)
    /// into the array's one bounds check.
    pub(super) led: Option<Body<'b>>,
}

impl<'s> Gen<'s> {
    pub(super) fn emit_xdr_impl(&mut self, rust: &str, layout: Layout, reference: Reference, b: Bodies<'_>) {
        let ty = self.with_lt(rust);
        self.checks.push((ty.clone(), layout, reference));
        let c = &mut self.out;
        c.block(&format!("impl<'a> xdr_spec_rt::Xdr<'a> for {ty}"), "", |c| {
            c.line(format!("const MIN_LEN: usize = {};", layout.min));
            c.line(format!("const FIXED_LEN: Option<usize> = {};", option(layout.fixed)));
            c.line(format!("const PLAIN: bool = {};", layout.plain));
            // Without bounds, the trait's defaults: `false`, and nothing to check.
            if layout.bounded {
                c.line("const BOUNDED: bool = true;");
                c.block("fn validate(&self) -> xdr_spec_rt::Result<()>", "", |c| {
                    (b.validate)(c);
                    c.line("Ok(())");
                });
            }
            c.line("#[inline(always)]");
            c.block("fn decode_from(r: &mut xdr_spec_rt::Reader<'a>) -> xdr_spec_rt::Result<Self>", "", b.decode);
            c.line("#[inline(always)]");
            c.block("fn encoded_len(&self) -> usize", "", |c| match layout.fixed {
                Some(n) => c.line(n.to_string()),
                None => (b.len)(c),
            });
            c.line("#[inline(always)]");
            c.block("fn encode_to(&self, w: &mut xdr_spec_rt::Writer<'_>)", "", b.encode);
            if let Some(led) = b.led {
                c.line("#[inline(always)]");
                c.block("fn encode_led(&self, lead: u32, w: &mut xdr_spec_rt::Writer<'_>)", "", led);
            }
        });
        c.blank();
    }

    /// With [`GenOptions::layout_checks`], a constant the compiler evaluates
    /// that asserts each type's literal layout constants equal the runtime's
    /// composition of its parts' constants (its [`Reference`]); each part's
    /// own are checked where that part is generated, so every level of
    /// nesting is checked once.
    pub(super) fn emit_layout_checks(&mut self) {
        let checks = std::mem::take(&mut self.checks);
        if !self.opts.layout_checks || checks.is_empty() {
            return;
        }
        let c = &mut self.out;
        c.line("/// Layout checks: each literal against the runtime's composition.");
        c.block("const _: () =", ";", |c| {
            c.block("const fn same(a: Option<usize>, b: Option<usize>) -> bool", "", |c| {
                c.block("match (a, b)", "", |c| {
                    c.line("(Some(a), Some(b)) => a == b,");
                    c.line("(None, None) => true,");
                    c.line("_ => false,");
                });
            });
            c.block("const fn check<'a>()", "", |c| {
                for (ty, l, r) in &checks {
                    let t = format!("<{ty} as xdr_spec_rt::Xdr>");
                    c.line(format!("assert!({t}::MIN_LEN == {} && {} == {}, \"{ty} MIN_LEN\");", l.min, l.min, r.min));
                    let fixed = option(l.fixed);
                    c.line(format!(
                        "assert!(same({t}::FIXED_LEN, {fixed}) && same({fixed}, {}), \"{ty} FIXED_LEN\");",
                        r.fixed
                    ));
                    c.line(format!(
                        "assert!({t}::PLAIN == {} && {} == ({}), \"{ty} PLAIN\");",
                        l.plain, l.plain, r.plain
                    ));
                    c.line(format!(
                        "assert!({t}::BOUNDED == {} && {} == ({}), \"{ty} BOUNDED\");",
                        l.bounded, l.bounded, r.bounded
                    ));
                }
            });
            c.line("check()");
        });
        c.blank();
    }
}

/// The statements of an `encode_to` body writing `fields` (a place and its
/// codec each): each run of two or more fields of fixed length is one run
/// ([`fixed_run`]), with one bounds check instead of one per field.
pub(super) fn encode_fields(c: &mut Code, fields: &[(String, &Codec)]) {
    let mut rest = fields;
    while let Some(first) = rest.first() {
        let run = rest.iter().take_while(|(_, codec)| codec.layout.fixed.is_some()).count();
        if run < 2 {
            c.expr("", &first.1.encode.at(&first.0), ";");
            rest = &rest[1..];
            continue;
        }
        let len: usize = rest[..run].iter().filter_map(|(_, codec)| codec.layout.fixed).sum();
        fixed_run(c, len, |c| rest[..run].iter().for_each(|(place, codec)| c.expr("", &codec.encode.at(place), ";")));
        rest = &rest[run..];
    }
}

/// A run of writes of `len` bytes: `Writer::fixed` spelled out, without a
/// closure, so inlining does not depend on how the compiler weighs one.
pub(super) fn fixed_run(c: &mut Code, len: usize, writes: impl FnOnce(&mut Code)) {
    c.line(format!("let mut run = w.begin_run(Some({len}));"));
    c.block("", "", |c| {
        c.line("let w = &mut run;");
        writes(c);
    });
    c.line(format!("w.end_run(Some({len}), run);"));
}

/// `a.saturating_add(b)...`: the encoded length of `terms` (expressions
/// of lengths that vary) and `known` bytes more. A length that would not
/// fit saturates rather than wraps.
pub(super) fn sum_len(c: &mut Code, terms: Vec<Expr>, known: usize) {
    let mut terms = terms.into_iter();
    let Some(first) = terms.next() else { return c.line(known.to_string()) };
    let more: Vec<String> = terms.map(|t| format!(".saturating_add({})", t.flat())).collect();
    let mut sum = if first.is_sum() && (!more.is_empty() || known > 0) {
        Expr::text(format!("({})", first.flat()))
    } else {
        first
    };
    for m in more {
        sum = sum.then(m);
    }
    if known > 0 {
        sum = sum.then(format!(".saturating_add({known})"));
    }
    c.expr("", &sum, "");
}
