//! ONC RPC over TCP: record marking (RFC 5531 section 11), for the MOUNT program.
//!
//! A record is a sequence of fragments, each behind a 4-byte header: the high bit says
//! whether it is the record's last fragment, the other 31 bits its length. A peer states
//! those lengths, so [`read_record`] bounds both the record's total size and the number of
//! its fragments, and checks a fragment's length against what is left of the bound *before*
//! it allocates or reads anything: a header claiming 2 GiB costs nothing.

use std::io::{self, Read, Write};

/// The largest record the MOUNT server accepts: a MOUNT call is at most an RPC header with
/// its credential (under 1 KiB) and a 1024-byte path.
pub const MAX_RECORD: usize = 64 * 1024;

/// The most fragments one record may have (empty ones included).
pub const MAX_FRAGMENTS: usize = 64;

const LAST_FRAGMENT: u32 = 1 << 31;

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The stream failed or ended within a record.
    #[error("reading an RPC record: {0}")]
    Io(#[from] io::Error),
    /// The fragments' lengths add up to more than the bound.
    #[error("RPC record of at least {len} bytes, more than the {max} accepted")]
    TooLarge {
        /// The length the fragments read so far and the next one's header add up to.
        len: u64,
        /// The bound.
        max: usize,
    },
    /// More fragments than [`MAX_FRAGMENTS`] without a last one.
    #[error("RPC record of more than {max} fragments")]
    TooManyFragments {
        /// The bound.
        max: usize,
    },
}

/// Reads one record from `r` into `buf` (cleared first), of at most `max` bytes and
/// [`MAX_FRAGMENTS`] fragments. `Ok(false)` when the stream ends cleanly before a record.
///
/// # Errors
///
/// [`RecordError::TooLarge`] or [`RecordError::TooManyFragments`] for a record beyond the
/// bounds, nothing of the offending fragment having been read or allocated;
/// [`RecordError::Io`] when the stream fails or ends inside a record.
pub fn read_record(r: &mut impl Read, max: usize, buf: &mut Vec<u8>) -> Result<bool, RecordError> {
    buf.clear();
    for fragment in 0..MAX_FRAGMENTS {
        let mut header = [0u8; 4];
        if fragment == 0 {
            // A clean end of stream is only one before the first header byte.
            let n = read_full(r, &mut header)?;
            if n == 0 {
                return Ok(false);
            }
            if n < 4 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
        } else {
            r.read_exact(&mut header)?;
        }
        let header = u32::from_be_bytes(header);
        let len = (header & !LAST_FRAGMENT) as usize;
        let total = buf.len() as u64 + len as u64;
        if total > max as u64 {
            return Err(RecordError::TooLarge { len: total, max });
        }
        let at = buf.len();
        buf.resize(at + len, 0);
        r.read_exact(&mut buf[at..])?;
        if header & LAST_FRAGMENT != 0 {
            return Ok(true);
        }
    }
    Err(RecordError::TooManyFragments { max: MAX_FRAGMENTS })
}

/// Reads into `buf` until it is full or the stream ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Writes `msg` as one record of one fragment.
///
/// # Errors
///
/// The stream's, or `InvalidInput` for a message longer than a fragment can say (2^31 - 1).
pub fn write_record(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let len = u32::try_from(msg.len())
        .ok()
        .filter(|&n| n < LAST_FRAGMENT)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "RPC message too long for one fragment"))?;
    let mut record = Vec::with_capacity(4 + msg.len());
    record.extend_from_slice(&(len | LAST_FRAGMENT).to_be_bytes());
    record.extend_from_slice(msg);
    w.write_all(&record)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(last: bool, data: &[u8]) -> Vec<u8> {
        let mut v = (data.len() as u32 | if last { LAST_FRAGMENT } else { 0 }).to_be_bytes().to_vec();
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn fragments_make_one_record() {
        let stream = [fragment(false, b"abcd"), fragment(false, b""), fragment(true, b"efgh")].concat();
        let mut buf = Vec::new();
        assert!(read_record(&mut &stream[..], MAX_RECORD, &mut buf).unwrap());
        assert_eq!(buf, b"abcdefgh");
        let mut out = Vec::new();
        write_record(&mut out, b"xy").unwrap();
        assert_eq!(out, fragment(true, b"xy"));
        assert!(!read_record(&mut &[][..], MAX_RECORD, &mut buf).unwrap(), "a clean end");
    }

    #[test]
    fn a_huge_fragment_length_is_refused_before_anything_is_allocated() {
        // 0x7fffffff: the largest a fragment header can claim, with nothing behind it.
        let stream = 0x7fff_ffffu32.to_be_bytes();
        let mut buf = Vec::new();
        let e = read_record(&mut &stream[..], MAX_RECORD, &mut buf).unwrap_err();
        assert!(matches!(e, RecordError::TooLarge { len: 0x7fff_ffff, .. }), "{e}");
        assert_eq!(buf.capacity(), 0, "nothing allocated for the claimed length");
        // Several fragments adding up past the bound are refused too.
        let half = vec![0u8; MAX_RECORD / 2 + 4];
        let stream = [fragment(false, &half), fragment(true, &half)].concat();
        assert!(matches!(read_record(&mut &stream[..], MAX_RECORD, &mut buf), Err(RecordError::TooLarge { .. })));
    }

    #[test]
    fn endless_empty_fragments_are_refused() {
        let stream: Vec<u8> = (0..MAX_FRAGMENTS + 1).flat_map(|_| fragment(false, b"")).collect();
        let e = read_record(&mut &stream[..], MAX_RECORD, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, RecordError::TooManyFragments { .. }), "{e}");
    }

    #[test]
    fn a_stream_ending_inside_a_record_is_an_error() {
        let stream = fragment(true, b"abcd");
        let e = read_record(&mut &stream[..6], MAX_RECORD, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, RecordError::Io(ref io) if io.kind() == io::ErrorKind::UnexpectedEof), "{e}");
    }
}
