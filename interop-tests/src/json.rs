//! The crate's one JSON writer, for [`crate::decode`]'s reports and the matrix's `--json`:
//! objects keep their keys in the order written, so a report reads like the header it
//! describes (xid, vers, credit, proc, ...). Every control character in a string is escaped
//! (RFC 8259 section 7), so an error text holding a tab or a CR still makes valid JSON.

use std::fmt;

/// A JSON value.
///
/// ```
/// use interop_tests::decode::Json;
/// let v = Json::Obj(vec![("a", 1u32.into()), ("b", Json::Arr(vec![Json::str("x\"y"), Json::Null]))]);
/// assert_eq!(v.to_string(), r#"{"a": 1, "b": ["x\"y", null]}"#);
/// assert_eq!(v.get("a"), Some(&Json::Num(1)));
/// assert_eq!(Json::str("tab\there\r").to_string(), r#""tab\u0009here\u000d""#);
/// assert_eq!((Json::Float(1.5).to_string(), Json::Float(2.0).to_string()), ("1.5".into(), "2.0".into()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// A whole number (every field of an RPC-over-RDMA header is one).
    Num(u64),
    /// A number with a fraction (a time); not finite prints as `null`.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in order.
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// An object's member `key`.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An array's element `i`.
    pub fn at(&self, i: usize) -> Option<&Json> {
        match self {
            Json::Arr(items) => items.get(i),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn num(&self) -> Option<u64> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Pretty-printed, two spaces an indent level; arrays of numbers and segments stay on one
    /// line.
    pub fn pretty(&self) -> String {
        let mut s = String::new();
        self.write_pretty(&mut s, 0);
        s
    }

    fn write_pretty(&self, s: &mut String, depth: usize) {
        match self {
            Json::Obj(members) if depth < 2 && !members.is_empty() => {
                s.push_str("{\n");
                for (i, (k, v)) in members.iter().enumerate() {
                    s.push_str(&"  ".repeat(depth + 1));
                    s.push_str(&format!("{}: ", Json::str(*k)));
                    v.write_pretty(s, depth + 1);
                    s.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
                }
                s.push_str(&"  ".repeat(depth));
                s.push('}');
            }
            other => s.push_str(&other.to_string()),
        }
    }
}

impl fmt::Display for Json {
    /// Compact, one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Num(n) => write!(f, "{n}"),
            // Debug keeps a fraction on whole numbers (`2.0`, not `2`), so a reader sees a
            // float every time; its exponent form (`1e-7`) is JSON too.
            Json::Float(x) if x.is_finite() => write!(f, "{x:?}"),
            Json::Float(_) => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Str(s) => {
                f.write_str("\"")?;
                for c in s.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("\"")
            }
            Json::Arr(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    write!(f, "{}{v}", if i > 0 { ", " } else { "" })?;
                }
                f.write_str("]")
            }
            Json::Obj(members) => {
                f.write_str("{")?;
                for (i, (k, v)) in members.iter().enumerate() {
                    write!(f, "{}{}: {v}", if i > 0 { ", " } else { "" }, Json::str(*k))?;
                }
                f.write_str("}")
            }
        }
    }
}

impl From<u32> for Json {
    fn from(n: u32) -> Json {
        Json::Num(n.into())
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::Num(n)
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Json {
        Json::Num(n as u64)
    }
}
