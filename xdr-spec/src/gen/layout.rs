//! The four layout constants of every generated type (`MIN_LEN`,
//! `FIXED_LEN`, `PLAIN`, `BOUNDED`), computed here from the typed model of
//! the specification so that the generated code states them as literals.
//!
//! The rules are the runtime's (`xdr_spec_rt`): what its implementations for
//! primitives, `Option` and `List` declare, and what its `const fn`s
//! (`fixed_add`, `fixed_same`, `min_len`, `fixed_mul`) compose. Every type is
//! also described by that composition, a [`Reference`] over its parts' own
//! constants, which the layout-check build ([`super::GenOptions::layout_checks`])
//! has the compiler evaluate against the literals.

/// A type's layout constants, as the runtime's `Xdr` trait defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// The smallest encoding, in bytes.
    pub(super) min: usize,
    /// The length of every encoding, when they all have one.
    pub(super) fixed: Option<usize>,
    /// Whether every byte string of `fixed` bytes is a valid encoding.
    pub(super) plain: bool,
    /// Whether a caller's value can break a bound of the specification.
    pub(super) bounded: bool,
}

impl Layout {
    /// Integers, floats and quadruples: every bit pattern is a value.
    pub(super) const fn plain(len: usize) -> Layout {
        Layout { min: len, fixed: Some(len), plain: true, bounded: false }
    }

    /// A word with invalid values: `bool` and enums.
    pub(super) const WORD: Layout = Layout { min: 4, fixed: Some(4), plain: false, bounded: false };

    /// What a `void` arm contributes to a union.
    pub(super) const VOID: Layout = Layout { min: 0, fixed: Some(0), plain: true, bounded: false };

    /// Optional-data (`Option<T>`) and lists (`List<T>`): a boolean first,
    /// and the bounds of the element.
    pub(super) const fn optional(of: Layout) -> Layout {
        Layout { min: 4, fixed: None, plain: false, bounded: of.bounded }
    }

    /// A struct: its fields one after another (no fields: zero bytes, plain).
    pub(super) fn concat(fields: impl IntoIterator<Item = Layout>) -> Option<Layout> {
        let mut all = Layout { min: 0, fixed: Some(0), plain: true, bounded: false };
        for f in fields {
            all.min = all.min.checked_add(f.min)?;
            all.fixed = match (all.fixed, f.fixed) {
                (Some(a), Some(b)) => Some(a.checked_add(b)?),
                _ => None,
            };
            all.plain &= f.plain;
            all.bounded |= f.bounded;
        }
        Some(all)
    }

    /// A union: the discriminant, then one of `arms` (`void` is
    /// [`Layout::VOID`]). A variant that holds the discriminant is a bound
    /// of its own (`holds`): the value must select its arm.
    pub(super) fn union(arms: &[Layout], holds: bool) -> Option<Layout> {
        let min = arms.iter().map(|a| a.min).min().unwrap_or(0).checked_add(4)?;
        let first = arms.first().and_then(|a| a.fixed);
        let same = arms.iter().all(|a| a.fixed == first);
        let fixed = match first {
            Some(n) if same => Some(n.checked_add(4)?),
            _ => None,
        };
        let bounded = holds || arms.iter().any(|a| a.bounded);
        Some(Layout { min, fixed, plain: false, bounded })
    }
}

/// A type's layout constants as Rust constant expressions over its parts'
/// constants: the runtime's composition, for the compiler to check the
/// literals against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reference {
    pub(super) min: String,
    pub(super) fixed: String,
    pub(super) plain: String,
    pub(super) bounded: String,
}

impl Reference {
    /// What a type declares through its `Xdr` implementation.
    pub(super) fn of_type(ty: &str) -> Reference {
        let t = format!("<{ty} as xdr_spec_rt::Xdr>");
        Reference {
            min: format!("{t}::MIN_LEN"),
            fixed: format!("{t}::FIXED_LEN"),
            plain: format!("{t}::PLAIN"),
            bounded: format!("{t}::BOUNDED"),
        }
    }

    pub(super) fn concat<'r>(fields: impl IntoIterator<Item = &'r Reference>) -> Reference {
        let mut all =
            Reference { min: "0".into(), fixed: "Some(0)".into(), plain: "true".into(), bounded: "false".into() };
        for f in fields {
            all.min = format!("{} + {}", all.min, f.min);
            all.fixed = format!("xdr_spec_rt::fixed_add({}, {})", all.fixed, f.fixed);
            all.plain = format!("{} && {}", all.plain, f.plain);
            all.bounded = format!("{} || {}", all.bounded, f.bounded);
        }
        all
    }

    /// `arms` with `None` for `void`.
    pub(super) fn union(arms: &[Option<&Reference>], holds: bool) -> Reference {
        let void =
            Reference { min: "0".into(), fixed: "Some(0)".into(), plain: "true".into(), bounded: "false".into() };
        let arms: Vec<&Reference> = arms.iter().map(|a| a.unwrap_or(&void)).collect();
        let min = arms.iter().map(|a| a.min.clone()).reduce(|a, b| format!("xdr_spec_rt::min_len({a}, {b})"));
        let fixed = arms.iter().map(|a| a.fixed.clone()).reduce(|a, b| format!("xdr_spec_rt::fixed_same({a}, {b})"));
        let bounded = arms.iter().map(|a| a.bounded.as_str()).fold(holds.to_string(), |a, b| format!("{a} || {b}"));
        Reference {
            min: format!("4 + {}", min.unwrap_or_else(|| "0".into())),
            fixed: format!("xdr_spec_rt::fixed_add(Some(4), {})", fixed.unwrap_or_else(|| "Some(0)".into())),
            plain: "false".into(),
            bounded,
        }
    }

    /// A literal layout, for parts that have no type of their own (opaque
    /// data, arrays), written as the runtime would compute it.
    pub(super) fn exprs(min: String, fixed: String, plain: String, bounded: String) -> Reference {
        Reference { min, fixed, plain, bounded }
    }
}

/// `Some(n)` or `None`, as Rust.
pub(super) fn option(fixed: Option<usize>) -> String {
    fixed.map_or_else(|| "None".to_string(), |n| format!("Some({n})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_add_up_and_vary_with_any_field() {
        let s = Layout::concat([Layout::plain(4), Layout::plain(8)]).unwrap();
        assert_eq!(s, Layout { min: 12, fixed: Some(12), plain: true, bounded: false });
        let v = Layout::concat([Layout::WORD, Layout::optional(Layout::plain(4))]).unwrap();
        assert_eq!(v, Layout { min: 8, fixed: None, plain: false, bounded: false });
        assert_eq!(Layout::concat([]).unwrap(), Layout::VOID);
    }

    #[test]
    fn unions_take_the_smallest_arm_and_a_common_length() {
        let u = Layout::union(&[Layout::plain(8), Layout::VOID], false).unwrap();
        assert_eq!(u, Layout { min: 4, fixed: None, plain: false, bounded: false });
        let same = Layout::union(&[Layout::plain(4), Layout::WORD], true).unwrap();
        assert_eq!(same, Layout { min: 8, fixed: Some(8), plain: false, bounded: true });
    }
}
