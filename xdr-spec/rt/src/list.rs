//! [`List`]: the borrowed view of an optional-data list.

use core::marker::PhantomData;

use crate::{Reader, Result, SeqIter, SeqRepr, Writer, Xdr};

/// The entries of an optional-data list (RFC 4506 section 4.19), the XDR
/// idiom `struct S { ... S *next; }`: validated bytes from the wire, decoded
/// as iterated, or a caller's slice to encode.
///
/// ```
/// use xdr_spec_rt::{List, Reader, Xdr};
/// // Each entry follows a TRUE word; FALSE ends the list.
/// let bytes = List::from_slice(&[7u32, 8]).to_vec().unwrap();
/// assert_eq!(bytes, [0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0]);
///
/// let list: List<u32> = Reader::new(&bytes).list("entries").unwrap();
/// assert_eq!(list.len(), 2);
/// assert_eq!(list.iter().collect::<Vec<_>>(), [7, 8]);
/// assert_eq!(list, List::from_slice(&[7, 8]));
/// ```
pub struct List<'a, T> {
    pub(crate) repr: SeqRepr<'a, T>,
    pub(crate) _t: PhantomData<T>,
}

impl<'a, T: Xdr<'a>> List<'a, T> {
    /// A list to encode, borrowing the caller's entries.
    pub const fn from_slice(items: &'a [T]) -> Self {
        List { repr: SeqRepr::Slice(items), _t: PhantomData }
    }

    /// A list decoded earlier, laid over its bytes again without decoding them: `bytes` is
    /// what [`List::wire_bytes`] gave and `len` what [`List::len`] gave. For a validated view
    /// kept as offsets and rebuilt over the same bytes later, on another thread. Other bytes
    /// are not checked here: iterating them ends at the first entry that does not decode.
    ///
    /// ```
    /// use xdr_spec_rt::{List, Reader, Xdr};
    /// let bytes = List::from_slice(&[7u32, 8]).to_vec().unwrap();
    /// let list: List<u32> = Reader::new(&bytes).list("entries").unwrap();
    /// let (wire, len) = (list.wire_bytes().unwrap(), list.len() as u32);
    /// assert_eq!(List::<u32>::from_wire_bytes(wire, len), list);
    /// ```
    pub const fn from_wire_bytes(bytes: &'a [u8], len: u32) -> Self {
        List { repr: SeqRepr::Wire { bytes, len }, _t: PhantomData }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.repr.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, in order.
    pub fn iter(&self) -> SeqIter<'a, T> {
        self.repr.iter(true)
    }

    /// The encoded list, when it was decoded.
    pub fn wire_bytes(&self) -> Option<&'a [u8]> {
        self.repr.wire_bytes()
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
