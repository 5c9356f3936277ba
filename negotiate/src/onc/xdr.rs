//! A bounded XDR reader over received bytes: every length a peer states is checked against
//! its limit and against what is left of the input before anything is sliced or allocated.

use super::OncError;

/// Reads XDR items from `buf`, starting at `at`.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    /// What is left of the input.
    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// One big-endian word, `field` naming it in the error if the input ends first.
    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, OncError> {
        let w = self.take(4, field)?;
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    }

    /// `len` bytes and their XDR padding; returns the `len` bytes.
    pub(super) fn padded(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], OncError> {
        let padded = len.next_multiple_of(4);
        let bytes = self.take(padded, field)?;
        Ok(&bytes[..len])
    }

    /// A variable-length opaque (or string) of at most `max` bytes: the length word, checked
    /// against `max` and against the input, then the bytes.
    pub(super) fn opaque(
        &mut self,
        max: u32,
        len_field: &'static str,
        field: &'static str,
    ) -> Result<&'a [u8], OncError> {
        let len = self.u32(len_field)?;
        if len > max {
            return Err(OncError::TooLong { field, len, max });
        }
        self.padded(len as usize, field)
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], OncError> {
        if n > self.remaining() {
            return Err(OncError::Truncated { field, at: self.at, need: n, have: self.remaining() });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
}

/// Appends `w` as one big-endian word.
pub(super) fn put_u32(out: &mut Vec<u8>, w: u32) {
    out.extend_from_slice(&w.to_be_bytes());
}

/// Appends a variable-length opaque: its length, its bytes, and zero padding to a word.
pub(super) fn put_opaque(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
    out.resize(out.len().next_multiple_of(4), 0);
}
