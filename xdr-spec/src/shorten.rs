//! Diagnostics and errors name what a specification declares, and a hostile one can declare a
//! megabyte-long name: every message is cut to a bounded size as it is made, by the checker
//! ([`crate::check`]) and the generator ([`crate::gen`]) alike.

use std::fmt::Write as _;

/// Names longer than this many bytes are cut short in messages.
pub(crate) const MAX_SHOWN_NAME: usize = 64;

/// `message` with every run of identifier characters longer than
/// [`MAX_SHOWN_NAME`] bytes cut to its first [`MAX_SHOWN_NAME`] and
/// `... (N bytes)`: a hostile specification's megabyte-long name would
/// otherwise be echoed whole, once per diagnostic that names it. Applied to
/// every message as it is made, so no message can forget it.
pub(crate) fn shorten_names(message: String) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if message.len() <= MAX_SHOWN_NAME {
        return message;
    }
    let mut out = String::new();
    let mut rest = message.as_str();
    while let Some(start) = rest.find(is_name) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(|c: char| !is_name(c)).unwrap_or(rest.len());
        // Identifier characters are ASCII: any byte index is a boundary.
        let word = &rest[..end];
        if word.len() > MAX_SHOWN_NAME {
            out.push_str(&word[..MAX_SHOWN_NAME]);
            let _ = write!(out, "... ({} bytes)", word.len());
        } else {
            out.push_str(word);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
