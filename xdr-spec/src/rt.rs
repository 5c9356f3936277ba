//! The runtime that generated code uses: a bounds-checked [`Reader`] and
//! [`Writer`], the [`Xdr`] trait, and the two borrowed sequence views
//! ([`Seq`] for arrays, [`List`] for optional-data lists).
//!
//! Decoding borrows from the input and never allocates: opaque data and
//! strings are slices of the input, and arrays and lists are validated once,
//! then kept as the byte range they occupy and decoded again, cheaply, when
//! iterated. Every count read from the wire is checked against the bytes that
//! remain (and against the caller's [`Limits`]) before it is used, and lists
//! are walked in a loop, so neither memory nor stack depth depends on what a
//! peer claims.
//!
//! ```
//! use xdr_spec::rt::{Reader, Seq, Writer, Xdr};
//! let words: [u32; 3] = [7, 8, 9];
//! let seq = Seq::from_slice(&words);
//! let mut buf = [0u8; 16];
//! let n = xdr_spec::rt::encode_var_seq(&seq, &mut buf).unwrap();
//! assert_eq!(&buf[..n], &[0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0, 9]);
//! let mut r = Reader::new(&buf[..n]);
//! let back: Seq<u32> = r.var_seq(None, "words").unwrap();
//! assert_eq!(back, seq);
//! ```

use core::fmt;
use core::marker::PhantomData;

/// Why decoding or encoding failed. Small and `Copy`: producing one never
/// allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input ended before the item at `at` was complete.
    #[error("truncated at byte {at}: {need} more bytes needed")]
    Truncated {
        /// Offset where the incomplete item starts.
        at: usize,
        /// Bytes the item needed beyond what remained.
        need: usize,
    },
    /// An enum word that is not one of the enum's values.
    #[error("byte {at}: {value} is not a value of enum {type_name}")]
    BadEnum {
        /// The XDR enum.
        type_name: &'static str,
        /// The word received.
        value: i32,
        /// Its offset.
        at: usize,
    },
    /// A union discriminant with no arm and no `default`.
    #[error("byte {at}: no arm of union {type_name} for discriminant {value}")]
    BadDiscriminant {
        /// The XDR union.
        type_name: &'static str,
        /// The discriminant received.
        value: i64,
        /// Its offset.
        at: usize,
    },
    /// A boolean word other than 0 or 1 (RFC 4506 section 4.4).
    #[error("byte {at}: {value} is not a boolean")]
    BadBool {
        /// The word received.
        value: u32,
        /// Its offset.
        at: usize,
    },
    /// A length above the bound the specification declares (`<N>`), or a
    /// fixed-length array given the wrong number of elements to encode.
    #[error("byte {at}: {what} has {len} elements, more than its bound {max}")]
    OverBound {
        /// The field.
        what: &'static str,
        /// The length received or given.
        len: usize,
        /// The declared bound.
        max: usize,
        /// Its offset (0 when encoding).
        at: usize,
    },
    /// A count that cannot fit in the bytes that remain: refused before any
    /// work proportional to it is done.
    #[error("byte {at}: {what} claims {count} elements but only {remaining} bytes remain")]
    CountExceedsInput {
        /// The field.
        what: &'static str,
        /// The count received.
        count: u32,
        /// Bytes remaining after the count.
        remaining: usize,
        /// Offset of the count.
        at: usize,
    },
    /// A count or list length above a caller-set [`Limits`] value.
    #[error("byte {at}: {what} has more than {limit} elements (a configured limit)")]
    LimitExceeded {
        /// The field.
        what: &'static str,
        /// The limit in force.
        limit: u32,
        /// Where the offending element starts.
        at: usize,
    },
    /// Padding after opaque data or a string that is not zero (RFC 4506
    /// section 4.9: the residual bytes are zero).
    #[error("byte {at}: padding is not zero")]
    NonZeroPadding {
        /// Offset of the padding.
        at: usize,
    },
    /// A string that is not UTF-8.
    #[error("byte {at}: string is not UTF-8")]
    BadUtf8 {
        /// Its offset.
        at: usize,
    },
    /// A fixed-length array given the wrong number of elements to encode.
    #[error("{what} must have exactly {expected} elements, has {len}")]
    WrongLength {
        /// The field.
        what: &'static str,
        /// Elements given.
        len: usize,
        /// Elements the specification fixes.
        expected: usize,
    },
    /// The output buffer is smaller than [`Xdr::encoded_len`].
    #[error("output buffer holds {have} bytes, encoding needs {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// A specialised result for XDR decoding and encoding.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Caller-set ceilings, checked during decoding in addition to the input's
/// own size. The defaults only bound by the input.
///
/// ```
/// let lim = xdr_spec::rt::Limits { max_list_entries: 16, ..Default::default() };
/// assert_eq!(lim.max_array_len, u32::MAX);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries accepted in one optional-data list.
    pub max_list_entries: u32,
    /// Most elements accepted in one variable-length array.
    pub max_array_len: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_list_entries: u32::MAX, max_array_len: u32::MAX }
    }
}

/// A bounds-checked cursor over the bytes being decoded.
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
        if len > self.remaining() {
            return Err(self.truncated(len));
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

/// A cursor writing into a caller's buffer. Encoders check the buffer against
/// [`Xdr::encoded_len`] before writing; the writer still refuses to write past
/// the end and remembers that it had to.
///
/// Every write is bounds-checked, because `encoded_len` is a safe method any
/// implementation can get wrong. What keeps that cheap is [`Writer::fixed`]:
/// a run of writes whose total length is a constant is checked once, and the
/// writes inside check against a length the compiler knows, so it drops them.
#[derive(Debug)]
pub struct Writer<'b> {
    /// The space not written yet.
    rest: &'b mut [u8],
    /// The length the writer started with: the position is derived from it
    /// rather than counted on every write.
    cap: usize,
    overflow: bool,
}

impl<'b> Writer<'b> {
    /// A writer at the start of `buf`.
    #[inline(always)]
    pub fn new(buf: &'b mut [u8]) -> Self {
        Writer { cap: buf.len(), rest: buf, overflow: false }
    }

    /// Bytes written so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.cap - self.rest.len()
    }

    /// Whether a write was refused for lack of room.
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// Take the next `n` bytes, or record an overflow and take nothing, so
    /// the position still says what was written.
    #[inline(always)]
    fn claim(&mut self, n: usize) -> Option<&'b mut [u8]> {
        if n > self.rest.len() {
            self.overflow = true;
            return None;
        }
        let (dst, rest) = core::mem::take(&mut self.rest).split_at_mut(n);
        self.rest = rest;
        Some(dst)
    }

    /// Append raw bytes.
    #[inline(always)]
    pub fn put(&mut self, bytes: &[u8]) {
        if let Some(dst) = self.claim(bytes.len()) {
            dst.copy_from_slice(bytes);
        }
    }

    /// Append a fixed number of bytes.
    #[inline(always)]
    pub fn put_array<const N: usize>(&mut self, bytes: [u8; N]) {
        self.put(&bytes);
    }

    /// Run `f` on a writer over the next `len` bytes when `len` is known
    /// (`Some`: a fixed-length type or run of fields), so the run costs one
    /// bounds check however many writes it makes; otherwise run `f` here.
    /// A run that writes more or less than `len` is reported as an overflow:
    /// it means an `encoded_len` or `FIXED_LEN` that does not match `f`.
    #[inline(always)]
    pub fn fixed(&mut self, len: Option<usize>, f: impl FnOnce(&mut Writer<'b>)) {
        let mut run = self.begin_run(len);
        f(&mut run);
        self.end_run(len, run);
    }

    /// [`Writer::fixed`] without a closure, for generated code: the writer
    /// for a run of `len` bytes (`Some`: claimed now, with one bounds check;
    /// `None`: the rest of this writer's buffer, to be handed back). Give it
    /// back with [`Writer::end_run`] and the same `len`.
    ///
    /// ```
    /// use xdr_spec::rt::Writer;
    /// let mut buf = [0u8; 8];
    /// let mut w = Writer::new(&mut buf);
    /// let mut run = w.begin_run(Some(8));
    /// run.put_u32(1);
    /// run.put_u32(2);
    /// w.end_run(Some(8), run);
    /// assert_eq!((w.position(), w.overflowed()), (8, false));
    /// ```
    #[inline(always)]
    pub fn begin_run(&mut self, len: Option<usize>) -> Writer<'b> {
        match len {
            Some(n) => match self.claim(n) {
                Some(dst) => Writer::new(dst),
                // Already recorded as an overflow: the run writes nothing.
                None => Writer::new(&mut []),
            },
            None => Writer::new(core::mem::take(&mut self.rest)),
        }
    }

    /// Take back the writer [`Writer::begin_run`] gave for `len`. A fixed run
    /// that wrote less or more than `len` is an overflow: it means an
    /// `encoded_len` or `FIXED_LEN` that does not match the writes.
    #[inline(always)]
    pub fn end_run(&mut self, len: Option<usize>, run: Writer<'b>) {
        match len {
            Some(_) => self.overflow |= run.overflow | !run.rest.is_empty(),
            None => {
                self.rest = run.rest;
                self.overflow |= run.overflow;
            }
        }
    }

    /// Write `head`, then each of `items` preceded by `lead`, then `tail`,
    /// where every item encodes to `n` bytes: one bounds check for the whole
    /// array or list, and none per item, since each is written into a slot
    /// of constant length.
    #[inline(always)]
    fn put_fixed_items<'a, T: Xdr<'a>>(&mut self, head: &[u8], items: &[T], n: usize, lead: &[u8], tail: &[u8]) {
        let stride = n + lead.len();
        // Saturating: an impossible length fails the check instead of
        // wrapping into one that passes.
        let total = items.len().saturating_mul(stride).saturating_add(head.len() + tail.len());
        let Some(dst) = self.claim(total) else { return };
        let (h, dst) = dst.split_at_mut(head.len());
        h.copy_from_slice(head);
        let (body, t) = dst.split_at_mut(dst.len() - tail.len());
        t.copy_from_slice(tail);
        if stride == 0 {
            // Items of no bytes: nothing to write, and no slots to cut.
            return;
        }
        for (slot, v) in body.chunks_exact_mut(stride).zip(items) {
            let (l, e) = slot.split_at_mut(lead.len());
            l.copy_from_slice(lead);
            let mut item = Writer::new(e);
            v.encode_to(&mut item);
            self.overflow |= item.overflow | !item.rest.is_empty();
        }
    }

    /// Append one 32-bit word.
    #[inline(always)]
    pub fn put_u32(&mut self, v: u32) {
        self.put_array(v.to_be_bytes());
    }

    /// Append one signed 32-bit word.
    #[inline(always)]
    pub fn put_i32(&mut self, v: i32) {
        self.put_array(v.to_be_bytes());
    }

    /// Append one 64-bit hyper.
    #[inline(always)]
    pub fn put_u64(&mut self, v: u64) {
        self.put_array(v.to_be_bytes());
    }

    /// Append one signed 64-bit hyper.
    #[inline(always)]
    pub fn put_i64(&mut self, v: i64) {
        self.put_array(v.to_be_bytes());
    }

    /// Append a boolean word.
    #[inline(always)]
    pub fn put_bool(&mut self, v: bool) {
        self.put_u32(v as u32);
    }

    /// Append `n` zero bytes of padding.
    #[inline]
    pub fn put_pad(&mut self, n: usize) {
        self.put(&[0u8; 3][..n.min(3)]);
    }

    /// Append fixed-length opaque data and its padding.
    #[inline]
    pub fn put_opaque_fixed(&mut self, bytes: &[u8]) {
        self.put(bytes);
        self.put_pad(pad(bytes.len()));
    }

    /// Append variable-length opaque data: length, bytes, padding.
    #[inline]
    pub fn put_opaque_var(&mut self, bytes: &[u8]) {
        self.put_u32(bytes.len() as u32);
        self.put_opaque_fixed(bytes);
    }
}

/// A type with an XDR encoding. Generated types implement it; so do the
/// primitive types, `Option<T>` (optional-data), and [`Quadruple`].
///
/// ```
/// use xdr_spec::rt::Xdr;
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
        if Self::BOUNDED {
            self.validate()?;
        }
        let need = self.encoded_len();
        if out.len() < need {
            return Err(Error::BufferTooSmall { need, have: out.len() });
        }
        // Counts and lengths are 32-bit on the wire: a message this large
        // could hold one that does not fit.
        if need > u32::MAX as usize {
            return Err(Error::OverBound { what: "encoded message", len: need, max: u32::MAX as usize, at: 0 });
        }
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
    /// use xdr_spec::rt::{Error, Xdr};
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
    /// paths).
    fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.encoded_len()];
        let n = self.encode(&mut v).unwrap_or(0);
        v.truncate(n);
        v
    }
}

/// [`Error::BufferTooSmall`], out of the hot path of [`Xdr::encode_into`].
#[cold]
#[inline(never)]
fn cold_too_small(need: usize, have: usize) -> Error {
    Error::BufferTooSmall { need, have }
}

macro_rules! primitive {
    ($t:ty, $len:expr, $read:ident, $write:ident) => {
        impl<'a> Xdr<'a> for $t {
            const MIN_LEN: usize = $len;
            const FIXED_LEN: Option<usize> = Some($len);
            const PLAIN: bool = true;
            #[inline]
            fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
                r.$read()
            }
            #[inline]
            fn encoded_len(&self) -> usize {
                $len
            }
            #[inline]
            fn encode_to(&self, w: &mut Writer<'_>) {
                w.$write(*self)
            }
        }
    };
}

primitive!(u32, 4, u32, put_u32);
primitive!(i32, 4, i32, put_i32);
primitive!(u64, 8, u64, put_u64);
primitive!(i64, 8, i64, put_i64);

impl<'a> Xdr<'a> for bool {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = Some(4);
    const PLAIN: bool = false;
    #[inline]
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        r.bool()
    }
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        4
    }
    #[inline]
    fn encode_to(&self, w: &mut Writer<'_>) {
        w.put_bool(*self)
    }
}

impl<'a> Xdr<'a> for f32 {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = Some(4);
    const PLAIN: bool = true;
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        Ok(f32::from_bits(r.u32()?))
    }
    fn encoded_len(&self) -> usize {
        4
    }
    fn encode_to(&self, w: &mut Writer<'_>) {
        w.put_u32(self.to_bits())
    }
}

impl<'a> Xdr<'a> for f64 {
    const MIN_LEN: usize = 8;
    const FIXED_LEN: Option<usize> = Some(8);
    const PLAIN: bool = true;
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        Ok(f64::from_bits(r.u64()?))
    }
    fn encoded_len(&self) -> usize {
        8
    }
    fn encode_to(&self, w: &mut Writer<'_>) {
        w.put_u64(self.to_bits())
    }
}

/// An IEEE quadruple-precision float (RFC 4506 section 4.8), kept as its 16
/// big-endian bytes: Rust has no stable 128-bit float.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Quadruple(pub [u8; 16]);

impl<'a> Xdr<'a> for Quadruple {
    const MIN_LEN: usize = 16;
    const FIXED_LEN: Option<usize> = Some(16);
    const PLAIN: bool = true;
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        Ok(Quadruple(*r.take_array::<16>()?))
    }
    fn encoded_len(&self) -> usize {
        16
    }
    fn encode_to(&self, w: &mut Writer<'_>) {
        w.put(&self.0)
    }
}

/// Optional-data (RFC 4506 section 4.19): a boolean, then the value if TRUE.
impl<'a, T: Xdr<'a>> Xdr<'a> for Option<T> {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = None;
    const PLAIN: bool = false;
    const BOUNDED: bool = T::BOUNDED;
    fn validate(&self) -> Result<()> {
        self.as_ref().map_or(Ok(()), Xdr::validate)
    }
    #[inline(always)]
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        if r.bool()? {
            Ok(Some(T::decode_from(r)?))
        } else {
            Ok(None)
        }
    }
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        self.as_ref().map_or(0, Xdr::encoded_len).saturating_add(4)
    }
    #[inline]
    fn encode_to(&self, w: &mut Writer<'_>) {
        match self {
            None => w.put_bool(false),
            Some(v) => v.encode_led(1, w),
        }
    }
}

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

// ---- borrowed sequences --------------------------------------------------

enum SeqRepr<'a, T> {
    /// Validated bytes from the wire and the element count.
    Wire { bytes: &'a [u8], len: u32 },
    /// Elements supplied by the caller, to be encoded.
    Slice(&'a [T]),
}

impl<T> Clone for SeqRepr<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SeqRepr<'_, T> {}

/// The elements of an XDR array: either validated bytes from the wire,
/// decoded one element at a time as they are iterated, or a caller's slice to
/// encode. Both compare equal when their elements do.
pub struct Seq<'a, T> {
    repr: SeqRepr<'a, T>,
    _t: PhantomData<T>,
}

impl<'a, T: Xdr<'a>> Seq<'a, T> {
    /// A sequence to encode, borrowing the caller's elements.
    pub const fn from_slice(items: &'a [T]) -> Self {
        Seq { repr: SeqRepr::Slice(items), _t: PhantomData }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self.repr {
            SeqRepr::Wire { len, .. } => len as usize,
            SeqRepr::Slice(s) => s.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded elements, when this sequence was decoded.
    pub fn wire_bytes(&self) -> Option<&'a [u8]> {
        match self.repr {
            SeqRepr::Wire { bytes, .. } => Some(bytes),
            SeqRepr::Slice(_) => None,
        }
    }

    /// The elements, in order.
    pub fn iter(&self) -> SeqIter<'a, T> {
        match self.repr {
            SeqRepr::Wire { bytes, len } => {
                SeqIter { repr: IterRepr::Wire(Reader::new(bytes)), left: len as usize, linked: false }
            }
            SeqRepr::Slice(s) => SeqIter { repr: IterRepr::Slice(s.iter()), left: s.len(), linked: false },
        }
    }

    /// The element at `index`: constant time for fixed-length elements
    /// decoded from the wire.
    pub fn get(&self, index: usize) -> Option<T> {
        match (self.repr, T::FIXED_LEN) {
            (SeqRepr::Slice(s), _) => s.get(index).copied(),
            (SeqRepr::Wire { bytes, len }, Some(n)) if index < len as usize => {
                T::decode_from(&mut Reader::new(bytes.get(index * n..)?)).ok()
            }
            _ => self.iter().nth(index),
        }
    }

    /// Encoded length of the elements (no count word).
    #[inline(always)]
    pub fn elements_len(&self) -> usize {
        match (self.repr, T::FIXED_LEN) {
            (SeqRepr::Wire { bytes, .. }, _) => bytes.len(),
            (SeqRepr::Slice(s), Some(n)) => s.len().saturating_mul(n),
            (SeqRepr::Slice(s), None) => s.iter().fold(0, |sum, v| sum.saturating_add(v.encoded_len())),
        }
    }

    /// Check a caller's elements against the specification: at most `max`
    /// elements, or exactly `exact`, and each element's own bounds.
    /// Decoded sequences were checked when decoded.
    pub fn validate_bounds(&self, max: Option<u32>, exact: Option<u32>, what: &'static str) -> Result<()> {
        let SeqRepr::Slice(s) = self.repr else { return Ok(()) };
        if let Some(max) = max {
            if s.len() > max as usize {
                return Err(Error::OverBound { what, len: s.len(), max: max as usize, at: 0 });
            }
        }
        if let Some(expected) = exact {
            if s.len() != expected as usize {
                return Err(Error::WrongLength { what, len: s.len(), expected: expected as usize });
            }
        }
        if s.len() > u32::MAX as usize {
            return Err(Error::OverBound { what, len: s.len(), max: u32::MAX as usize, at: 0 });
        }
        if T::BOUNDED {
            s.iter().try_for_each(Xdr::validate)?;
        }
        Ok(())
    }

    /// Write the elements (no count word).
    #[inline]
    pub fn encode_elements(&self, w: &mut Writer<'_>) {
        self.encode_with_head(&[], w);
    }

    /// Write the count word, then the elements: a variable-length array.
    #[inline]
    pub fn encode_counted(&self, w: &mut Writer<'_>) {
        self.encode_with_head(&(self.len() as u32).to_be_bytes(), w);
    }

    /// Write the word `lead`, then the array as [`Seq::encode_counted`]
    /// does, the two words and the elements with one bounds check.
    #[inline(always)]
    pub fn encode_counted_led(&self, lead: u32, w: &mut Writer<'_>) {
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&lead.to_be_bytes());
        head[4..].copy_from_slice(&(self.len() as u32).to_be_bytes());
        self.encode_with_head(&head, w);
    }

    #[inline(always)]
    fn encode_with_head(&self, head: &[u8], w: &mut Writer<'_>) {
        match (self.repr, T::FIXED_LEN) {
            (SeqRepr::Wire { bytes, .. }, _) => {
                w.put(head);
                w.put(bytes);
            }
            (SeqRepr::Slice(s), Some(n)) => w.put_fixed_items(head, s, n, &[], &[]),
            (SeqRepr::Slice(s), None) => {
                w.put(head);
                s.iter().for_each(|v| v.encode_to(w));
            }
        }
    }
}

/// The traits [`Seq`] and [`List`] share: both are `Copy` views whatever
/// their element, compare and hash by their elements (a decoded view equals
/// the caller's slice it was encoded from), print as lists, and iterate.
macro_rules! sequence_traits {
    ($ty:ident) => {
        impl<T> Clone for $ty<'_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<T> Copy for $ty<'_, T> {}

        impl<'a, T: Xdr<'a>> Default for $ty<'a, T> {
            fn default() -> Self {
                $ty::from_slice(&[])
            }
        }

        impl<'a, T: Xdr<'a> + PartialEq> PartialEq for $ty<'a, T> {
            fn eq(&self, other: &Self) -> bool {
                self.len() == other.len() && self.iter().eq(other.iter())
            }
        }

        impl<'a, T: Xdr<'a> + Eq> Eq for $ty<'a, T> {}

        impl<'a, T: Xdr<'a> + core::hash::Hash> core::hash::Hash for $ty<'a, T> {
            fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
                state.write_usize(self.len());
                self.iter().for_each(|v| v.hash(state));
            }
        }

        impl<'a, T: Xdr<'a> + fmt::Debug> fmt::Debug for $ty<'a, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.iter()).finish()
            }
        }

        impl<'a, T: Xdr<'a>> IntoIterator for $ty<'a, T> {
            type Item = T;
            type IntoIter = SeqIter<'a, T>;
            fn into_iter(self) -> SeqIter<'a, T> {
                self.iter()
            }
        }
    };
}

sequence_traits!(Seq);
sequence_traits!(List);

/// Encode a variable-length array (count word, then elements) into `out`.
pub fn encode_var_seq<'a, T: Xdr<'a>>(seq: &Seq<'a, T>, out: &mut [u8]) -> Result<usize> {
    let need = seq.elements_len().saturating_add(4);
    if out.len() < need {
        return Err(Error::BufferTooSmall { need, have: out.len() });
    }
    let mut w = Writer::new(out);
    seq.encode_counted(&mut w);
    Ok(w.position())
}

/// The entries of an optional-data list (RFC 4506 section 4.19), the XDR
/// idiom `struct S { ... S *next; }`: validated bytes from the wire, decoded
/// as iterated, or a caller's slice to encode.
pub struct List<'a, T> {
    repr: SeqRepr<'a, T>,
    _t: PhantomData<T>,
}

impl<'a, T: Xdr<'a>> List<'a, T> {
    /// A list to encode, borrowing the caller's entries.
    pub const fn from_slice(items: &'a [T]) -> Self {
        List { repr: SeqRepr::Slice(items), _t: PhantomData }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        match self.repr {
            SeqRepr::Wire { len, .. } => len as usize,
            SeqRepr::Slice(s) => s.len(),
        }
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, in order.
    pub fn iter(&self) -> SeqIter<'a, T> {
        match self.repr {
            SeqRepr::Wire { bytes, len } => {
                SeqIter { repr: IterRepr::Wire(Reader::new(bytes)), left: len as usize, linked: true }
            }
            SeqRepr::Slice(s) => SeqIter { repr: IterRepr::Slice(s.iter()), left: s.len(), linked: false },
        }
    }

    /// The encoded list, when it was decoded.
    pub fn wire_bytes(&self) -> Option<&'a [u8]> {
        match self.repr {
            SeqRepr::Wire { bytes, .. } => Some(bytes),
            SeqRepr::Slice(_) => None,
        }
    }
}

/// A list used through a pointer (`S *field`) is a [`List`] whose wire form
/// starts with a boolean for every entry.
impl<'a, T: Xdr<'a>> Xdr<'a> for List<'a, T> {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = None;
    const PLAIN: bool = false;
    const BOUNDED: bool = T::BOUNDED;
    fn validate(&self) -> Result<()> {
        match self.repr {
            SeqRepr::Slice(s) if T::BOUNDED => s.iter().try_for_each(Xdr::validate),
            _ => Ok(()),
        }
    }
    #[inline]
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        r.list("optional-data list")
    }
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        match (self.repr, T::FIXED_LEN) {
            (SeqRepr::Wire { bytes, .. }, _) => bytes.len(),
            (SeqRepr::Slice(s), Some(n)) => s.len().saturating_mul(n + 4).saturating_add(4),
            (SeqRepr::Slice(s), None) => {
                s.iter().fold(4, |sum, v| sum.saturating_add(v.encoded_len()).saturating_add(4))
            }
        }
    }
    #[inline]
    fn encode_to(&self, w: &mut Writer<'_>) {
        const TRUE: [u8; 4] = 1u32.to_be_bytes();
        const FALSE: [u8; 4] = 0u32.to_be_bytes();
        match (self.repr, T::FIXED_LEN) {
            (SeqRepr::Wire { bytes, .. }, _) => w.put(bytes),
            (SeqRepr::Slice(s), Some(n)) => w.put_fixed_items(&[], s, n, &TRUE, &FALSE),
            (SeqRepr::Slice(s), None) => {
                for v in s {
                    v.encode_led(1, w);
                }
                w.put(&FALSE);
            }
        }
    }
}

enum IterRepr<'a, T> {
    Wire(Reader<'a>),
    Slice(core::slice::Iter<'a, T>),
}

/// Iterator over a [`Seq`] or [`List`], yielding elements by value.
pub struct SeqIter<'a, T> {
    repr: IterRepr<'a, T>,
    left: usize,
    /// Whether each element is preceded by an optional-data boolean.
    linked: bool,
}

impl<'a, T: Xdr<'a>> Iterator for SeqIter<'a, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match &mut self.repr {
            IterRepr::Slice(it) => it.next().copied(),
            IterRepr::Wire(r) => {
                if self.linked {
                    r.u32().ok()?;
                }
                // The bytes were validated when the sequence was decoded, so
                // this cannot fail; if it somehow did, the iteration ends.
                T::decode_from(r).ok()
            }
        }
    }

    /// Skips in constant time over fixed-length elements decoded from the
    /// wire, so indexing into a long sequence is not quadratic.
    fn nth(&mut self, n: usize) -> Option<T> {
        if let (IterRepr::Wire(r), Some(len)) = (&mut self.repr, T::FIXED_LEN) {
            if n >= self.left {
                self.left = 0;
                return None;
            }
            let stride = len + if self.linked { 4 } else { 0 };
            r.take(n * stride).ok()?;
            self.left -= n;
            return self.next();
        }
        for _ in 0..n {
            self.next()?;
        }
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a, T: Xdr<'a>> ExactSizeIterator for SeqIter<'a, T> {}
