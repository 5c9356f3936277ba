//! [`Code`]: the indenting writer every construct's generator writes
//! through, and the few layouts of long expressions the generated code uses,
//! laid out as rustfmt's default configuration would (`max_width` 100 and its
//! "small heuristics"), so that the generated files read as formatted Rust
//! and pass `rustfmt --check`. What is written is kept to these shapes: a
//! call, a method chain, a struct literal or pattern, a match arm.

/// rustfmt's default `max_width`.
pub(super) const WIDTH: usize = 100;
/// rustfmt's default `fn_call_width`: wider arguments go one per line.
const CALL_WIDTH: usize = 60;
/// rustfmt's default `chain_width`: a longer chain of two or more calls goes
/// one call per line.
const CHAIN_WIDTH: usize = 60;
/// rustfmt's default `struct_lit_width`: wider fields go one per line.
const STRUCT_LIT_WIDTH: usize = 18;

/// Rust source written line by line at the current indentation.
#[derive(Default)]
pub(super) struct Code {
    out: String,
    depth: usize,
}

impl Code {
    pub(super) fn into_string(self) -> String {
        self.out
    }

    /// One line at the current indentation (an empty one has no spaces).
    pub(super) fn line(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        if !text.is_empty() {
            for _ in 0..self.depth {
                self.out.push_str("    ");
            }
            self.out.push_str(text);
        }
        self.out.push('\n');
    }

    pub(super) fn blank(&mut self) {
        self.out.push('\n');
    }

    /// Drop the blank lines at the end: before a closing brace, or at the
    /// end of the file.
    pub(super) fn trim_blank(&mut self) {
        while self.out.ends_with("\n\n") {
            self.out.pop();
        }
    }

    pub(super) fn indent(&mut self) {
        self.depth += 1;
    }

    pub(super) fn dedent(&mut self) {
        self.depth -= 1;
    }

    /// `head {`, what `body` writes one level in, then `}` and `tail`.
    pub(super) fn block(&mut self, head: &str, tail: &str, body: impl FnOnce(&mut Code)) {
        self.line(if head.is_empty() { "{".to_string() } else { format!("{head} {{") });
        self.indent();
        body(self);
        self.dedent();
        self.line(format!("}}{tail}"));
    }

    /// Whether `text` fits on a line at the current indentation.
    pub(super) fn fits(&self, text: &str) -> bool {
        self.depth * 4 + text.len() <= WIDTH
    }

    /// `head(args)tail`: on one line if it fits, else one argument per line.
    pub(super) fn call(&mut self, head: &str, args: &[String], tail: &str) {
        self.arguments(head, args, tail, true);
    }

    /// `head!(args)tail`: as [`Code::call`], but a macro's last argument
    /// takes no trailing comma when they go one per line.
    pub(super) fn macro_call(&mut self, head: &str, args: &[String], tail: &str) {
        self.arguments(head, args, tail, false);
    }

    /// The layout [`Code::call`] and [`Code::macro_call`] share; `last_comma`:
    /// whether the last argument, one per line, takes a comma too.
    fn arguments(&mut self, head: &str, args: &[String], tail: &str, last_comma: bool) {
        let joined = args.join(", ");
        let one = format!("{head}({joined}){tail}");
        if joined.len() <= CALL_WIDTH && self.fits(&one) {
            return self.line(one);
        }
        self.line(format!("{head}("));
        self.indent();
        for (i, a) in args.iter().enumerate() {
            self.line(if i + 1 < args.len() || last_comma { format!("{a},") } else { a.clone() });
        }
        self.dedent();
        self.line(format!("){tail}"));
    }

    /// `head root.a().b()tail` (each of `calls` starts with `.`): on one line
    /// if it fits (and, for more than one call, is no wider than rustfmt's
    /// chain width), else a call per line below the root. As rustfmt does,
    /// measured with `head` and `tail` left out. A root that is a
    /// field (`self.x`) counts as one call more, as rustfmt counts it.
    pub(super) fn chain(&mut self, head: &str, root: &str, calls: &[String], tail: &str) {
        let chain = format!("{root}{}", calls.concat());
        let links = calls.len() + usize::from(root.starts_with("self."));
        let one = format!("{head}{chain}{tail}");
        // rustfmt counts a closing `?` twice against the chain width.
        let width = chain.len() + usize::from(chain.ends_with('?'));
        if (links <= 1 || width <= CHAIN_WIDTH) && self.fits(&one) {
            return self.line(one);
        }
        self.line(format!("{head}{root}"));
        self.indent();
        for (i, c) in calls.iter().enumerate() {
            self.line(if i + 1 == calls.len() { format!("{c}{tail}") } else { c.clone() });
        }
        self.dedent();
    }

    /// `head Path { fields }tail`, a literal or a pattern: on one line if
    /// the fields are short, else one per line.
    pub(super) fn struct_lit(&mut self, head: &str, path: &str, fields: &[String], tail: &str) {
        let joined = fields.join(", ");
        let one = if fields.is_empty() {
            format!("{head}{path} {{}}{tail}")
        } else {
            format!("{head}{path} {{ {joined} }}{tail}")
        };
        if joined.len() <= STRUCT_LIT_WIDTH && self.fits(&one) {
            return self.line(one);
        }
        self.block(&format!("{head}{path}"), tail, |c| {
            for f in fields {
                c.line(format!("{f},"));
            }
        });
    }

    /// A match arm whose body is one expression: `pat => body,` if it fits,
    /// else the body in a block of its own.
    pub(super) fn arm(&mut self, pat: &str, body: &str) {
        let one = format!("{pat} => {body},");
        if self.fits(&one) {
            return self.line(one);
        }
        self.block(&format!("{pat} =>"), "", |c| c.line(body));
    }

    /// Alternatives of a pattern, `a | b | c`, followed by `tail`: on one
    /// line if it fits, else one per line, each after the first led by `|`.
    pub(super) fn alternatives(&mut self, alts: &[String], tail: &str) {
        let one = format!("{}{tail}", alts.join(" | "));
        if self.fits(&one) {
            return self.line(one);
        }
        for (i, a) in alts.iter().enumerate() {
            let lead = if i == 0 { "" } else { "| " };
            self.line(if i + 1 == alts.len() { format!("{lead}{a}{tail}") } else { format!("{lead}{a}") });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_indent_and_empty_lines_have_no_spaces() {
        let mut c = Code::default();
        c.block("fn f()", "", |c| {
            c.line("let x = 1;");
            c.blank();
            c.line("x");
        });
        assert_eq!(c.into_string(), "fn f() {\n    let x = 1;\n\n    x\n}\n");
    }

    #[test]
    fn calls_go_vertical_past_the_call_width() {
        let mut c = Code::default();
        let args: Vec<String> = ["a", "b"].map(String::from).into();
        c.call("f", &args, ";");
        let long: Vec<String> = (0..8).map(|i| format!("argument_{i}")).collect();
        c.call("g", &long, "?;");
        let out = c.into_string();
        assert!(out.starts_with("f(a, b);\ng(\n    argument_0,\n"), "{out}");
        assert!(out.ends_with("    argument_7,\n)?;\n"), "{out}");
    }

    #[test]
    fn struct_literals_go_vertical_past_their_width() {
        let mut c = Code::default();
        c.struct_lit("", "Self::A", &["discriminant: d".into()], ",");
        c.struct_lit("", "Self::B", &["discriminant".into(), "value: v".into()], " => 0,");
        let out = c.into_string();
        assert_eq!(out, "Self::A { discriminant: d },\nSelf::B {\n    discriminant,\n    value: v,\n} => 0,\n");
    }
}
