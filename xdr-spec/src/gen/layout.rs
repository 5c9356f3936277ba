//! Laying out long generated expressions as rustfmt would: the constant
//! expressions of `MIN_LEN`, `FIXED_LEN`, `PLAIN` and `BOUNDED` grow with the
//! fields and arms of a type, and one 300-column line reads badly. An
//! expression that does not fit is broken at its top-level operators
//! (`+`, `&&`, `||`, each continuation line starting with the operator),
//! else between the arguments of its outermost call, one per line, and so
//! on inside each part. Only white space is added, at places where Rust
//! allows it.

/// The line width of the workspace's `rustfmt.toml`.
const WIDTH: usize = 120;

/// `const NAME: TYPE = EXPR;` at `indent` spaces: one line if it fits,
/// else the expression on the lines below, four spaces further in.
pub(super) fn const_item(indent: usize, head: &str, expr: &str) -> String {
    let pad = " ".repeat(indent);
    if indent + head.len() + expr.len() + 4 <= WIDTH {
        return format!("{pad}const {head} = {expr};\n");
    }
    let inner = indent + 4;
    format!("{pad}const {head} =\n{}{};\n", " ".repeat(inner), expr_at(expr, inner, 1))
}

/// `expr` laid out starting at column `indent`, with `tail` more characters
/// to follow it on its last line.
fn expr_at(expr: &str, indent: usize, tail: usize) -> String {
    if indent + expr.len() + tail <= WIDTH {
        return expr.to_string();
    }
    let pad = " ".repeat(indent);
    for op in [" || ", " && ", " + "] {
        let parts = split_top(expr, op);
        if parts.len() > 1 {
            let mut out = expr_at(parts[0], indent, 0);
            for part in &parts[1..] {
                let op = op.trim();
                out.push_str(&format!("\n{pad}{op} {}", expr_at(part, indent + op.len() + 1, 0)));
            }
            return out;
        }
    }
    // `f(a, b, ...)` with the call's parenthesis closing the expression.
    if let Some(open) = expr.find('(').filter(|_| expr.ends_with(')')) {
        if matching_close(expr, open) == Some(expr.len() - 1) {
            let inner = indent + 4;
            let args: String = split_top(&expr[open + 1..expr.len() - 1], ", ")
                .iter()
                .map(|a| format!("{}{},\n", " ".repeat(inner), expr_at(a, inner, 1)))
                .collect();
            return format!("{}(\n{args}{pad})", &expr[..open]);
        }
    }
    expr.to_string()
}

/// `expr` split at each `sep` outside any brackets (`()`, `<>`, `[]`).
fn split_top<'e>(expr: &'e str, sep: &str) -> Vec<&'e str> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let bytes = expr.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'<' | b'[' => depth += 1,
            b')' | b'>' | b']' => depth -= 1,
            _ if depth == 0 && expr[i..].starts_with(sep) => {
                parts.push(&expr[start..i]);
                i += sep.len();
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&expr[start..]);
    parts
}

/// The index of the bracket closing the one at `open`.
fn matching_close(expr: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, b) in expr.bytes().enumerate().skip(open) {
        match b {
            b'(' | b'<' | b'[' => depth += 1,
            b')' | b'>' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_constants_stay_on_one_line() {
        assert_eq!(const_item(4, "MIN_LEN: usize", "4 + 8"), "    const MIN_LEN: usize = 4 + 8;\n");
    }

    #[test]
    fn long_constants_break_at_operators_then_arguments() {
        let t = "<xdr_spec_rt::List<'a, SomeRatherLongEntryTypeName<'a>> as xdr_spec_rt::Xdr>";
        let sum = format!("{t}::MIN_LEN + {t}::MIN_LEN + 4");
        let out = const_item(4, "MIN_LEN: usize", &sum);
        assert_eq!(
            out,
            format!("    const MIN_LEN: usize =\n        {t}::MIN_LEN\n        + {t}::MIN_LEN\n        + 4;\n")
        );
        let call = format!("xdr_spec_rt::fixed_add(xdr_spec_rt::fixed_add(Some(4), {t}::FIXED_LEN), {t}::FIXED_LEN)");
        let out = const_item(4, "FIXED_LEN: Option<usize>", &call);
        assert!(out.lines().all(|l| l.len() <= WIDTH), "{out}");
        assert_eq!(
            out.replace(['\n', ' ', ','], ""),
            format!("constFIXED_LEN:Option<usize>={call};").replace([' ', ','], "")
        );
        // `==` and `::` are no operators to break at.
        let flag = format!("{t}::BOUNDED || {t}::MIN_LEN == 0");
        let out = const_item(4, "BOUNDED: bool", &flag);
        assert!(out.contains(&format!("\n        || {t}::MIN_LEN == 0;")), "{out}");
    }
}
