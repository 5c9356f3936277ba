//! The `impl Xdr` block every generated type gets, and the encoders'
//! bounds-checked runs.

use super::layout::const_item;
use super::*;

impl<'s> Gen<'s> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_xdr_impl(
        &mut self,
        rust: &str,
        min: &str,
        fixed: &str,
        plain: &Flag,
        bounded: &Flag,
        decode: &str,
        len: &str,
        encode: &str,
        validate: &str,
        encode_led: Option<String>,
    ) {
        let ty = self.with_lt(rust);
        // A value whose encoding starts with a counted array takes the word
        // before it (a list's or an optional's TRUE) into the array's one
        // bounds check.
        let led = encode_led.map_or(String::new(), |body| {
            format!(
                "    #[inline(always)]\n    fn encode_led(&self, lead: u32, w: &mut xdr_spec_rt::Writer<'_>) {{\n{body}    }}\n"
            )
        });
        let validate = if validate.trim().is_empty() {
            String::new()
        } else {
            format!(
                "{}    fn validate(&self) -> xdr_spec_rt::Result<()> {{\n{validate}        Ok(())\n    }}\n",
                const_item(4, "BOUNDED: bool", &bounded.to_string())
            )
        };
        // A fixed length known here is the whole answer; a length known to
        // vary is worked out; only a fixed length that depends on other
        // types (an expression the compiler folds) needs the check, whose
        // fallback is then dead code exactly when the check succeeds.
        let len_body = match (fixed, literal_fixed(fixed)) {
            (_, Some(0)) | ("None", _) => len.to_string(),
            (_, Some(n)) => n.to_string(),
            _ => format!("if let Some(n) = Self::FIXED_LEN {{\n            return n;\n        }}\n        {len}"),
        };
        let consts = [
            ("MIN_LEN: usize", min.to_string()),
            ("FIXED_LEN: Option<usize>", fixed.to_string()),
            ("PLAIN: bool", plain.to_string()),
        ]
        .iter()
        .map(|(head, expr)| const_item(4, head, expr))
        .collect::<String>();
        let _ = write!(
            self.out,
            "impl<'a> xdr_spec_rt::Xdr<'a> for {ty} {{
{consts}{validate}    #[inline(always)]
    fn decode_from(r: &mut xdr_spec_rt::Reader<'a>) -> xdr_spec_rt::Result<Self> {{
        {decode}
    }}
    #[inline(always)]
    fn encoded_len(&self) -> usize {{
        {len_body}
    }}
    #[inline(always)]
    fn encode_to(&self, w: &mut xdr_spec_rt::Writer<'_>) {{
{encode}    }}
{led}}}

"
        );
    }
}

/// A struct's `encode_to` body: each run of two or more fields of literal
/// fixed length is one [`Writer::fixed`](crate::rt::Writer::fixed) run, and
/// so is the whole struct when it has a fixed length: one bounds check per
/// run instead of one per field.
pub(super) fn struct_encode(codecs: &[(String, String, Codec)], fixed: &str) -> String {
    let field = |(f, _, c): &(String, String, Codec)| c.encode.at(&format!("self.{f}"));
    let mut statements = Vec::new();
    let mut rest = codecs;
    while let Some(first) = rest.first() {
        let run = rest.iter().take_while(|(_, _, c)| literal_fixed(&c.fixed).is_some()).count();
        if run < 2 {
            statements.push(field(first));
            rest = &rest[1..];
            continue;
        }
        let len: usize = rest[..run].iter().filter_map(|(_, _, c)| literal_fixed(&c.fixed)).sum();
        statements.push(fixed_run(&format!("Some({len})"), rest[..run].iter().map(field)));
        rest = &rest[run..];
    }
    if fixed != "None" && statements.len() > 1 {
        statements = vec![fixed_run("Self::FIXED_LEN", statements.into_iter())];
    }
    statements.iter().map(|st| format!("        {};\n", indent_continuation(st, 8))).collect()
}

/// The body of `encode_led` for a struct (or newtype) whose first field,
/// `first` at `place`, is a counted array: the lead word and the count share
/// one claim, and the `rest` of the fields follow as in `encode_to`.
pub(super) fn led_encode(place: &str, first: &Codec, rest: &[(String, String, Codec)]) -> Option<String> {
    if !first.counted {
        return None;
    }
    Some(format!("        {place}.encode_counted_led(lead, w);\n{}", struct_encode(rest, "None")))
}

/// A run of writes of length `len` (`Writer::fixed` spelled out, without a
/// closure, so inlining does not depend on how the compiler weighs one),
/// unindented.
pub(super) fn fixed_run(len: &str, writes: impl Iterator<Item = String>) -> String {
    let body: String = writes.map(|e| format!("        {};\n", indent_continuation(&e, 8))).collect();
    format!("{{\n    let mut run = w.begin_run({len});\n    {{\n        let w = &mut run;\n{body}    }}\n    w.end_run({len}, run);\n}}")
}

/// `text` with every line after the first indented by `spaces` more: a
/// multi-line statement or expression written where its first line already
/// has its indentation.
pub(super) fn indent_continuation(text: &str, spaces: usize) -> String {
    text.replace('\n', &format!("\n{}", " ".repeat(spaces)))
}
