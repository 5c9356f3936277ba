//! Decoding: the bounds-checked [`Reader`] and the caller's [`Limits`].

use core::marker::PhantomData;

use crate::{Error, List, Result, Seq, SeqRepr, Xdr};

/// Caller-set ceilings, checked during decoding in addition to the input's
/// own size. The defaults only bound by the input.
///
/// ```
/// let lim = xdr_spec_rt::Limits::default().max_list_entries(16);
/// assert_eq!((lim.max_list_entries, lim.max_array_len), (16, u32::MAX));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most entries accepted in one optional-data list.
    pub max_list_entries: u32,
    /// Most elements accepted in one variable-length array.
    pub max_array_len: u32,
}

impl Limits {
    /// No limit but the input's own length (the default). A `const fn`, for limits in constants.
    pub const fn unlimited() -> Self {
        Limits { max_list_entries: u32::MAX, max_array_len: u32::MAX }
    }

    /// Sets [`max_list_entries`](Self::max_list_entries).
    pub const fn max_list_entries(mut self, value: u32) -> Self {
        self.max_list_entries = value;
        self
    }

    /// Sets [`max_array_len`](Self::max_array_len).
    pub const fn max_array_len(mut self, value: u32) -> Self {
        self.max_array_len = value;
        self
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::unlimited()
    }
}

/// A bounds-checked cursor over the bytes being decoded.
///
/// ```
/// use xdr_spec_rt::{Error, Limits, Reader};
/// // A uint, a bool, then a string<8> of three bytes and its padding.
/// let buf = [0, 0, 0, 42, 0, 0, 0, 1, 0, 0, 0, 3, b'a', b'b', b'c', 0];
/// let mut r = Reader::new(&buf);
/// assert_eq!(r.u32(), Ok(42));
/// assert_eq!(r.bool(), Ok(true));
/// assert_eq!(r.string(Some(8), "name"), Ok("abc"));
/// assert_eq!((r.position(), r.remaining()), (16, 0));
/// assert_eq!(r.u32(), Err(Error::Truncated { at: 16, need: 4 }));
///
/// // A declared bound, and a caller's limit, are checked before the body is read.
/// let mut r = Reader::new(&buf[8..]);
/// assert!(matches!(r.opaque_var(Some(2), "name"), Err(Error::OverBound { len: 3, max: 2, .. })));
/// let mut r = Reader::with_limits(&buf[8..], Limits::default().max_array_len(2));
/// assert!(matches!(r.var_seq::<u32>(None, "ids"), Err(Error::LimitExceeded { limit: 2, .. })));
/// ```
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    /// The length of the whole input, for positions.
    len: usize,
    /// What has not been consumed yet.
    rest: &'a [u8],
    limits: Limits,
}

/// Bytes of padding after `n` bytes of opaque data (RFC 4506 section 4.9).
#[inline]
pub const fn pad(n: usize) -> usize {
    (4 - (n & 3)) & 3
}

/// [`Error::Truncated`], out of line so the hot paths stay small.
#[cold]
#[inline(never)]
fn truncated(at: usize, n: usize, remaining: usize) -> Error {
    Error::Truncated { at, need: n.saturating_sub(remaining) }
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf` with default limits.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { len: buf.len(), rest: buf, limits: Limits::default() }
    }

    /// A reader at the start of `buf` with the given limits.
    pub fn with_limits(buf: &'a [u8], limits: Limits) -> Self {
        Reader { len: buf.len(), rest: buf, limits }
    }

    /// Bytes consumed so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    /// Bytes not yet consumed.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The error for an item of `n` bytes that does not fit in what remains.
    /// It passes the reader's state by value to the out-of-line constructor:
    /// a reference to the reader would make its cursor live in memory, stored
    /// on every read, rather than in registers.
    #[inline(always)]
    fn truncated(&self, n: usize) -> Error {
        truncated(self.position(), n, self.remaining())
    }

    /// Take `n` bytes.
    #[inline(always)]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.rest.len() {
            return Err(self.truncated(n));
        }
        let (bytes, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(bytes)
    }

    /// Take `N` bytes as an array reference.
    #[inline(always)]
    pub fn take_array<const N: usize>(&mut self) -> Result<&'a [u8; N]> {
        match self.rest.split_first_chunk::<N>() {
            Some((bytes, rest)) => {
                self.rest = rest;
                Ok(bytes)
            }
            None => Err(self.truncated(N)),
        }
    }

    /// One unsigned 32-bit word.
    #[inline(always)]
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(*self.take_array::<4>()?))
    }

    /// One signed 32-bit word.
    #[inline(always)]
    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(*self.take_array::<4>()?))
    }

    /// One unsigned 64-bit hyper.
    #[inline(always)]
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(*self.take_array::<8>()?))
    }

    /// One signed 64-bit hyper.
    #[inline(always)]
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(*self.take_array::<8>()?))
    }

    /// One boolean word: exactly 0 or 1.
    #[inline(always)]
    pub fn bool(&mut self) -> Result<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            // The word's offset, worked out only on this path so that the
            // loop over a list does not carry it.
            value => Err(Error::BadBool { value, at: self.position() - 4 }),
        }
    }

    /// Fixed-length opaque data of `N` bytes and its padding.
    #[inline]
    pub fn opaque_fixed<const N: usize>(&mut self) -> Result<&'a [u8; N]> {
        let at = self.position();
        let bytes = self.padded(N)?;
        bytes.try_into().map_err(|_| Error::Truncated { at, need: N })
    }

    /// `n` bytes followed by their padding, which must be zero.
    #[inline]
    fn padded(&mut self, n: usize) -> Result<&'a [u8]> {
        let bytes = self.take(n + pad(n))?;
        let (data, padding) = bytes.split_at(n);
        if padding.iter().any(|&b| b != 0) {
            return Err(Error::NonZeroPadding { at: self.position() - padding.len() });
        }
        Ok(data)
    }

    /// Variable-length opaque data (RFC 4506 section 4.10), at most `max`
    /// bytes when the specification declares a bound.
    #[inline]
    pub fn opaque_var(&mut self, max: Option<u32>, what: &'static str) -> Result<&'a [u8]> {
        let at = self.position();
        let len = self.u32()?;
        if let Some(max) = max {
            if len > max {
                return Err(Error::OverBound { what, len: len as usize, max: max as usize, at });
            }
        }
        let len = len as usize;
        // The bytes needed include the padding to a multiple of four: what
        // the item takes, not only its data (saturating: on a 32-bit target
        // a length near `u32::MAX` plus padding would wrap).
        let padded_len = len.saturating_add(pad(len));
        if padded_len > self.remaining() {
            return Err(self.truncated(padded_len));
        }
        self.padded(len)
    }

    /// A string (RFC 4506 section 4.11), which must be UTF-8 here.
    pub fn string(&mut self, max: Option<u32>, what: &'static str) -> Result<&'a str> {
        let at = self.position();
        let bytes = self.opaque_var(max, what)?;
        core::str::from_utf8(bytes).map_err(|_| Error::BadUtf8 { at })
    }

    /// A fixed-length array of `n` elements (RFC 4506 section 4.12).
    pub fn fixed_seq<T: Xdr<'a>>(&mut self, n: u32, what: &'static str) -> Result<Seq<'a, T>> {
        let at = self.position();
        self.seq_body(n, at, what)
    }

    /// A variable-length array (RFC 4506 section 4.13): a count, checked
    /// against `max`, the limits and the bytes remaining before anything is
    /// walked, then the elements.
    #[inline(always)]
    pub fn var_seq<T: Xdr<'a>>(&mut self, max: Option<u32>, what: &'static str) -> Result<Seq<'a, T>> {
        let count = self.u32()?;
        let at = self.position() - 4;
        if let Some(max) = max {
            if count > max {
                return Err(Error::OverBound { what, len: count as usize, max: max as usize, at });
            }
        }
        if count > self.limits.max_array_len {
            return Err(Error::LimitExceeded { what, limit: self.limits.max_array_len, at });
        }
        self.seq_body(count, at, what)
    }

    #[inline(always)]
    fn seq_body<T: Xdr<'a>>(&mut self, count: u32, at: usize, what: &'static str) -> Result<Seq<'a, T>> {
        let remaining = self.remaining();
        // Every element takes at least MIN_LEN bytes, so a count that cannot
        // fit is refused before it drives any loop.
        if (count as usize).saturating_mul(T::MIN_LEN) > remaining {
            return Err(Error::CountExceedsInput { what, count, remaining, at });
        }
        let start = self.rest;
        match T::FIXED_LEN {
            Some(len) if T::PLAIN => {
                self.take(count as usize * len)?;
            }
            _ => {
                for _ in 0..count {
                    T::decode_from(self)?;
                }
            }
        }
        Ok(Seq { repr: SeqRepr::Wire { bytes: &start[..start.len() - self.rest.len()], len: count }, _t: PhantomData })
    }

    /// An optional-data list (RFC 4506 section 4.19): `TRUE element` pairs
    /// ended by `FALSE`, walked in a loop, never by recursion.
    #[inline(always)]
    pub fn list<T: Xdr<'a>>(&mut self, what: &'static str) -> Result<List<'a, T>> {
        let start = self.rest;
        let mut len: u32 = 0;
        while self.bool()? {
            if len >= self.limits.max_list_entries {
                return Err(Error::LimitExceeded { what, limit: self.limits.max_list_entries, at: self.position() });
            }
            match T::FIXED_LEN {
                Some(n) if T::PLAIN => {
                    self.take(n)?;
                }
                _ => {
                    T::decode_from(self)?;
                }
            }
            len += 1;
        }
        Ok(List { repr: SeqRepr::Wire { bytes: &start[..start.len() - self.rest.len()], len }, _t: PhantomData })
    }
}
