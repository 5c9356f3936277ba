//! Encoding: the [`Writer`] cursor over a caller's buffer.

use crate::{pad, Xdr};

/// A cursor writing into a caller's buffer. Encoders check the buffer against
/// [`Xdr::encoded_len`] before writing; the writer still refuses to write past
/// the end and remembers that it had to.
///
/// Every write is bounds-checked, because `encoded_len` is a safe method any
/// implementation can get wrong. What keeps that cheap is [`Writer::fixed`]:
/// a run of writes whose total length is a constant is checked once, and the
/// writes inside check against a length the compiler knows, so it drops them.
///
/// ```
/// use xdr_spec_rt::Writer;
/// let mut buf = [0u8; 16];
/// let mut w = Writer::new(&mut buf);
/// w.put_u32(42);
/// w.put_bool(true);
/// w.put_opaque_var(b"abc"); // length, bytes, one byte of zero padding
/// assert_eq!((w.position(), w.overflowed()), (16, false));
/// assert_eq!(buf, [0, 0, 0, 42, 0, 0, 0, 1, 0, 0, 0, 3, b'a', b'b', b'c', 0]);
///
/// // A write that does not fit is refused, and remembered.
/// let mut small = [0u8; 6];
/// let mut w = Writer::new(&mut small);
/// w.put_u32(1);
/// w.put_u32(2);
/// assert_eq!((w.position(), w.overflowed()), (4, true));
/// ```
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
    /// use xdr_spec_rt::Writer;
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
    pub(crate) fn put_fixed_items<'a, T: Xdr<'a>>(
        &mut self,
        head: &[u8],
        items: &[T],
        n: usize,
        lead: &[u8],
        tail: &[u8],
    ) {
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
