//! [`Seq`]: the borrowed view of an XDR array, and the traits it shares with
//! [`List`].

use core::fmt;
use core::marker::PhantomData;

use crate::{Error, IterRepr, List, Reader, Result, SeqIter, Writer, Xdr};

pub(crate) enum SeqRepr<'a, T> {
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

/// What [`Seq`] and [`List`] share: the count, the wire bytes, and iteration
/// (a list's wire form has a boolean before each entry: `linked`).
impl<'a, T> SeqRepr<'a, T> {
    pub(crate) fn len(self) -> usize {
        match self {
            SeqRepr::Wire { len, .. } => len as usize,
            SeqRepr::Slice(s) => s.len(),
        }
    }

    pub(crate) fn wire_bytes(self) -> Option<&'a [u8]> {
        match self {
            SeqRepr::Wire { bytes, .. } => Some(bytes),
            SeqRepr::Slice(_) => None,
        }
    }

    pub(crate) fn iter(self, linked: bool) -> SeqIter<'a, T> {
        match self {
            SeqRepr::Wire { bytes, len } => {
                SeqIter { repr: IterRepr::Wire(Reader::new(bytes)), left: len as usize, linked }
            }
            SeqRepr::Slice(s) => SeqIter { repr: IterRepr::Slice(s.iter()), left: s.len(), linked: false },
        }
    }
}

/// The elements of an XDR array: either validated bytes from the wire,
/// decoded one element at a time as they are iterated, or a caller's slice to
/// encode. Both compare equal when their elements do.
///
/// ```
/// use xdr_spec_rt::{Reader, Seq, Writer};
/// let mut buf = [0u8; 16];
/// let mut w = Writer::new(&mut buf);
/// Seq::from_slice(&[10u32, 20, 30]).encode_counted(&mut w); // uint<>: count, elements
/// let n = w.position();
///
/// let seq: Seq<u32> = Reader::new(&buf[..n]).var_seq(Some(4), "values").unwrap();
/// assert_eq!((seq.len(), seq.get(1), seq.get(3)), (3, Some(20), None));
/// assert_eq!(seq.iter().sum::<u32>(), 60);
/// assert_eq!(seq.wire_bytes(), Some(&buf[4..n])); // borrowed, not copied
/// assert_eq!(seq, Seq::from_slice(&[10, 20, 30]));
/// assert!(Seq::from_slice(&[1u32, 2]).validate_bounds(Some(1), None, "values").is_err());
/// ```
pub struct Seq<'a, T> {
    pub(crate) repr: SeqRepr<'a, T>,
    pub(crate) _t: PhantomData<T>,
}

impl<'a, T: Xdr<'a>> Seq<'a, T> {
    /// A sequence to encode, borrowing the caller's elements.
    pub const fn from_slice(items: &'a [T]) -> Self {
        Seq { repr: SeqRepr::Slice(items), _t: PhantomData }
    }

    /// A sequence decoded earlier, laid over its bytes again without decoding them: `bytes`
    /// is what [`Seq::wire_bytes`] gave and `len` what [`Seq::len`] gave. For a validated
    /// view kept as offsets and rebuilt over the same bytes later, on another thread. Other
    /// bytes are not checked here: iterating them ends at the first element that does not
    /// decode.
    ///
    /// ```
    /// use xdr_spec_rt::Seq;
    /// let bytes = [0u8, 0, 0, 10, 0, 0, 0, 20];
    /// let seq = Seq::<u32>::from_wire_bytes(&bytes, 2);
    /// assert_eq!((seq.get(1), seq.wire_bytes()), (Some(20), Some(&bytes[..])));
    /// ```
    pub const fn from_wire_bytes(bytes: &'a [u8], len: u32) -> Self {
        Seq { repr: SeqRepr::Wire { bytes, len }, _t: PhantomData }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.repr.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded elements, when this sequence was decoded.
    pub fn wire_bytes(&self) -> Option<&'a [u8]> {
        self.repr.wire_bytes()
    }

    /// The elements, in order.
    pub fn iter(&self) -> SeqIter<'a, T> {
        self.repr.iter(false)
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
