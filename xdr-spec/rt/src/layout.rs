//! Length arithmetic for generated code: `const fn`s, so a generated type's
//! `MIN_LEN` and `FIXED_LEN` are computed by the compiler from its fields'.

use crate::{pad, Error, Result};

/// Sum of two fixed lengths, for generated `FIXED_LEN` constants.
pub const fn fixed_add(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    }
}

/// The common fixed length of two union arms, if they have one.
pub const fn fixed_same(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    }
}

/// The smaller of two minimum lengths.
pub const fn min_len(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}

/// `FIXED_LEN` of a fixed array of `n` elements.
pub const fn fixed_mul(a: Option<usize>, n: usize) -> Option<usize> {
    match a {
        Some(a) => Some(a * n),
        None => None,
    }
}

/// Check a caller's opaque data or string length against its `<max>`.
pub fn check_max(len: usize, max: u32, what: &'static str) -> Result<()> {
    if len > max as usize {
        return Err(Error::OverBound { what, len, max: max as usize, at: 0 });
    }
    Ok(())
}

/// Encoded length of opaque data of `n` bytes, padding included.
pub const fn opaque_len(n: usize) -> usize {
    n + pad(n)
}
