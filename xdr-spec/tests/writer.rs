//! The writer's bounds hold even when a type's lengths are wrong: the
//! encoder checks a run once and then trusts the lengths `FIXED_LEN` and
//! `encoded_len` give, so a type that lies about them must still never write
//! outside the buffer, and a short buffer must be refused untouched.

use xdr_spec::rt::{Error, List, Reader, Result, Seq, Writer, Xdr};

/// Claims 4 bytes and writes `N`: a liar unless `N` is 4. Zero-sized, so a slice of it can
/// be as long as `usize` allows without taking any memory.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Writes<const N: usize>;

/// Claims 4 bytes, writes 8.
type Liar = Writes<8>;
/// An honest one-word type.
type Word = Writes<4>;

impl<'a, const N: usize> Xdr<'a> for Writes<N> {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = Some(4);
    const PLAIN: bool = false;
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        r.u32().map(|_| Writes)
    }
    fn encoded_len(&self) -> usize {
        4
    }
    fn encode_to(&self, w: &mut Writer<'_>) {
        w.put(&[0xFF; N]);
    }
}

#[test]
fn a_type_writing_more_than_it_claims_stays_inside_its_slot() {
    let items: [Liar; 2] = [Writes, Writes];
    let mut buf = [0xAAu8; 32];
    // Room for the list as claimed: two TRUE words, two 4-byte slots, FALSE.
    let mut w = Writer::new(&mut buf[..20]);
    List::from_slice(&items).encode_to(&mut w);
    assert!(w.overflowed());
    // Each 8-byte write into a 4-byte slot is refused; the list's own words
    // are written and nothing lands past the writer's 20 bytes.
    assert_eq!(&buf[..4], &[0, 0, 0, 1]);
    assert_eq!(&buf[16..20], &[0, 0, 0, 0]);
    assert!(buf[20..].iter().all(|&b| b == 0xAA));

    let mut buf = [0xAAu8; 16];
    let mut w = Writer::new(&mut buf[..8]);
    w.fixed(Some(4), |w| Liar {}.encode_to(w));
    assert!(w.overflowed());
    assert!(buf[8..].iter().all(|&b| b == 0xAA));
}

#[test]
fn a_short_buffer_is_refused_and_left_untouched() {
    let words = [1u32, 2, 3];
    let list = List::from_slice(&words);
    let need = list.encoded_len();
    assert_eq!(need, 3 * 8 + 4);
    let mut buf = [0xAAu8; 64];
    assert_eq!(list.encode(&mut buf[..need - 1]), Err(Error::BufferTooSmall { need, have: need - 1 }));
    assert!(buf.iter().all(|&b| b == 0xAA));
    assert_eq!(list.encode(&mut buf), Ok(need));
    assert_eq!(&buf[..need], &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0]);
}

#[test]
fn a_run_short_of_its_length_is_reported() {
    let mut buf = [0u8; 8];
    let mut w = Writer::new(&mut buf);
    w.fixed(Some(8), |w| w.put_u32(7));
    assert!(w.overflowed(), "a run that fills less than it claimed means a wrong FIXED_LEN");
    let mut w = Writer::new(&mut buf);
    w.fixed(Some(8), |w| w.put_u64(7));
    assert!(!w.overflowed());
    assert_eq!(w.position(), 8);
}

#[test]
fn counted_arrays_write_their_count_once() {
    let words = [7u32, 8];
    let mut buf = [0u8; 12];
    let mut w = Writer::new(&mut buf);
    Seq::from_slice(&words).encode_counted(&mut w);
    assert!(!w.overflowed());
    assert_eq!(buf, [0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 8]);
}

/// `encode_into` is one pass: on a short buffer it fails without writing past it, and the
/// bytes it wrote are whatever fitted; on a buffer that fits it writes what `encode` writes.
#[test]
fn encode_into_fails_inside_a_short_buffer_and_matches_encode_otherwise() {
    let items = [7u32, 8, 9];
    let list = List::from_slice(&items);
    let want = list.to_vec().expect("no bounds to break");
    assert_eq!(want.len(), 3 * 8 + 4);
    for short in 0..want.len() {
        let mut buf = [0xAAu8; 64];
        let err = list.encode_into(&mut buf[..short]).unwrap_err();
        assert_eq!(err, Error::BufferTooSmall { need: want.len(), have: short });
        assert!(buf[short..].iter().all(|&b| b == 0xAA), "wrote past {short} bytes");
    }
    let mut buf = [0u8; 64];
    assert_eq!(list.encode_into(&mut buf), Ok(want.len()));
    assert_eq!(&buf[..want.len()], &want[..]);
}

/// `encode` checks the buffer against `encoded_len` once; a type whose `encode_to` disagrees
/// with it is an error, never a success with fewer bytes than claimed.
#[test]
fn encode_reports_a_type_whose_length_disagrees_with_its_bytes() {
    let items: [Liar; 1] = [Writes];
    let list = List::from_slice(&items);
    let mut buf = [0xAAu8; 64];
    let need = list.encoded_len();
    assert_eq!(need, 12);
    assert!(matches!(list.encode(&mut buf), Err(Error::WrongLength { expected: 12, .. })));
    assert!(buf[need..].iter().all(|&b| b == 0xAA), "wrote past the length it checked");
}

/// Lengths saturate: a sequence whose encoding would not fit in `usize` reports `usize::MAX`
/// (which `encode` then refuses) instead of wrapping to a small length a buffer could pass.
#[test]
fn encoded_lengths_saturate_instead_of_wrapping() {
    const N: usize = usize::MAX / 4 + 2;
    let words: [Word; N] = [Writes; N];
    let list = List::from_slice(&words[..]);
    assert_eq!(list.encoded_len(), usize::MAX);
    assert_eq!(Seq::from_slice(&words[..]).elements_len(), usize::MAX);
    assert_eq!(Some(list).encoded_len(), usize::MAX);
    let mut buf = [0xAAu8; 64];
    assert!(list.encode(&mut buf).is_err());
    assert!(buf.iter().all(|&b| b == 0xAA));
}
