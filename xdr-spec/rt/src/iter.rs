//! [`SeqIter`]: iterating a [`Seq`](crate::Seq) or [`List`](crate::List).

use crate::{Reader, Xdr};

pub(crate) enum IterRepr<'a, T> {
    Wire(Reader<'a>),
    Slice(core::slice::Iter<'a, T>),
}

/// Iterator over a [`Seq`](crate::Seq) or [`List`](crate::List), yielding elements by value.
pub struct SeqIter<'a, T> {
    pub(crate) repr: IterRepr<'a, T>,
    pub(crate) left: usize,
    /// Whether each element is preceded by an optional-data boolean.
    pub(crate) linked: bool,
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
