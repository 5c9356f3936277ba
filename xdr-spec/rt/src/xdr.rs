//! The [`Xdr`] trait every generated type implements.

use alloc::vec;
use alloc::vec::Vec;

use crate::{fixed_add, Error, Limits, Reader, Result, Writer};

/// A type with an XDR encoding. Generated types implement it; so do the
/// primitive types, `Option<T>` (optional-data), and [`Quadruple`](crate::Quadruple).
///
/// ```
/// use xdr_spec_rt::Xdr;
/// let mut buf = [0u8; 8];
/// assert_eq!(Some(5u32).encode(&mut buf).unwrap(), 8);
/// assert_eq!(buf, [0, 0, 0, 1, 0, 0, 0, 5]);
/// assert_eq!(Option::<u32>::decode(&buf).unwrap(), (Some(5), 8));
/// ```
pub trait Xdr<'a>: Sized + Copy {
    /// The smallest encoding of a value, in bytes.
    const MIN_LEN: usize;
    /// `Some(n)` when every value encodes to exactly `n` bytes.
    const FIXED_LEN: Option<usize>;
    /// Whether every byte string of `FIXED_LEN` bytes is a valid encoding,
    /// so validation is only a length check.
    const PLAIN: bool;
    /// Whether a value built by a caller can break a bound of the
    /// specification (a `<N>` maximum or a fixed array length), so
    /// [`Xdr::validate`] has work to do before encoding.
    const BOUNDED: bool = false;

    /// Check the specification's bounds on a value about to be encoded.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// Decode one value at the reader's position.
    fn decode_from(r: &mut Reader<'a>) -> Result<Self>;

    /// The exact number of bytes [`Xdr::encode`] writes. A length too large
    /// for `usize` saturates at `usize::MAX` (and fails [`Xdr::encode`])
    /// rather than wrapping to a small one.
    fn encoded_len(&self) -> usize;

    /// Write the encoding; the caller has checked there is room.
    fn encode_to(&self, w: &mut Writer<'_>);

    /// Write the word `lead` (the TRUE before an optional-data value or a
    /// list entry), then the encoding: one run with the value's own when its
    /// length is fixed. Generated types whose encoding starts with a counted
    /// array override it to write the lead, the count and the elements under
    /// one bounds check.
    #[inline(always)]
    fn encode_led(&self, lead: u32, w: &mut Writer<'_>) {
        w.fixed(fixed_add(Some(4), Self::FIXED_LEN), |w| {
            w.put_u32(lead);
            self.encode_to(w);
        });
    }

    /// Decode a value from the start of `buf` with default limits, returning
    /// it and the bytes it took (what follows, such as an RPC message after a
    /// transport header, is the caller's).
    fn decode(buf: &'a [u8]) -> Result<(Self, usize)> {
        Self::decode_with_limits(buf, Limits::default())
    }

    /// [`Xdr::decode`] with caller-set limits.
    fn decode_with_limits(buf: &'a [u8], limits: Limits) -> Result<(Self, usize)> {
        let mut r = Reader::with_limits(buf, limits);
        let v = Self::decode_from(&mut r)?;
        Ok((v, r.position()))
    }

    /// Encode into the start of `out`, returning the bytes written. Fails,
    /// writing nothing, when `out` is shorter than [`Xdr::encoded_len`].
    #[inline]
    fn encode(&self, out: &mut [u8]) -> Result<usize> {
        let need = valid_len(self)?;
        if out.len() < need {
            return Err(Error::BufferTooSmall { need, have: out.len() });
        }
        fits_wire(need)?;
        let mut w = Writer::new(&mut out[..need]);
        self.encode_to(&mut w);
        if w.overflowed() || w.position() != need {
            // Only a hand-written `Xdr` implementation gets here: generated
            // code's `encoded_len` and `encode_to` come from one declaration.
            return Err(Error::WrongLength {
                what: "encoding (encode_to disagrees with encoded_len)",
                len: w.position(),
                expected: need,
            });
        }
        Ok(need)
    }

    /// Encode into the start of `out` in one pass, returning the bytes
    /// written: each write is checked as it goes and the first that does not
    /// fit fails the call, so nothing is written past `out`, but on an error
    /// `out` holds part of the encoding. No [`Xdr::encoded_len`] walk comes
    /// first, which is what makes it cheaper than [`Xdr::encode`]: use it
    /// where the bytes are discarded on error, such as a transport header
    /// encoded into a Send buffer of the inline threshold's size.
    ///
    /// ```
    /// use xdr_spec_rt::{Error, Xdr};
    /// let mut out = [0u8; 8];
    /// assert_eq!(7u32.encode_into(&mut out), Ok(4));
    /// assert_eq!(&out[..4], &[0, 0, 0, 7]);
    /// assert!(matches!(7u64.encode_into(&mut out[..4]), Err(Error::BufferTooSmall { need: 8, have: 4 })));
    /// ```
    #[inline]
    fn encode_into(&self, out: &mut [u8]) -> Result<usize> {
        if Self::BOUNDED {
            self.validate()?;
        }
        let have = out.len();
        // Counts and lengths are 32-bit on the wire: a buffer this large
        // could hold a message that does not fit them (rare: the full check).
        if have > u32::MAX as usize {
            return self.encode(out);
        }
        let mut w = Writer::new(out);
        self.encode_to(&mut w);
        if w.overflowed() {
            return Err(cold_too_small(self.encoded_len(), have));
        }
        Ok(w.position())
    }

    /// Encode into a new vector (allocates; for tests and tools, not hot
    /// paths). Fails as [`Xdr::encode`] does, before allocating: a value
    /// that breaks a bound of the specification has no encoding, and an
    /// empty vector would read as a valid one.
    ///
    /// ```
    /// use xdr_spec_rt::Xdr;
    /// assert_eq!(Some(5u32).to_vec(), Ok(vec![0, 0, 0, 1, 0, 0, 0, 5]));
    /// ```
    fn to_vec(&self) -> Result<Vec<u8>> {
        let need = valid_len(self)?;
        fits_wire(need)?;
        let mut v = vec![0u8; need];
        let n = self.encode(&mut v)?;
        v.truncate(n);
        Ok(v)
    }
}

/// The length `value` encodes to, once it has passed its specification's
/// bounds: what [`Xdr::encode`] and [`Xdr::to_vec`] check before they write
/// or allocate anything.
#[inline(always)]
fn valid_len<'a, T: Xdr<'a>>(value: &T) -> Result<usize> {
    if T::BOUNDED {
        value.validate()?;
    }
    Ok(value.encoded_len())
}

/// Counts and lengths are 32-bit on the wire: a message of more than
/// `u32::MAX` bytes could hold one that does not fit.
#[inline(always)]
fn fits_wire(need: usize) -> Result<()> {
    if need > u32::MAX as usize {
        return Err(Error::OverBound { what: "encoded message", len: need, max: u32::MAX as usize, at: 0 });
    }
    Ok(())
}

/// [`Error::BufferTooSmall`], out of the hot path of [`Xdr::encode_into`].
#[cold]
#[inline(never)]
fn cold_too_small(need: usize, have: usize) -> Error {
    Error::BufferTooSmall { need, have }
}
