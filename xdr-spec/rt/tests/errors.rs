//! The errors the runtime reports: what they count and when they come.

use xdr_spec_rt::{Error, Reader, Result, Seq, Writer, Xdr};

/// `unsigned int pair<2>`, written by hand as the generator would: a value
/// a caller builds can break its bound.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pair<'a>(Seq<'a, u32>);

impl<'a> Xdr<'a> for Pair<'a> {
    const MIN_LEN: usize = 4;
    const FIXED_LEN: Option<usize> = None;
    const PLAIN: bool = false;
    const BOUNDED: bool = true;
    fn validate(&self) -> Result<()> {
        self.0.validate_bounds(Some(2), None, "pair")
    }
    fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
        Ok(Pair(r.var_seq(Some(2), "pair")?))
    }
    fn encoded_len(&self) -> usize {
        self.0.elements_len().saturating_add(4)
    }
    fn encode_to(&self, w: &mut Writer<'_>) {
        self.0.encode_counted(w)
    }
}

#[test]
fn to_vec_refuses_a_value_over_its_bound() {
    let ok = Pair(Seq::from_slice(&[1, 2]));
    assert_eq!(ok.to_vec(), Ok(vec![0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]));
    // Three elements where the specification allows two: an error, not an
    // empty vector that would read as an encoding.
    let over = Pair(Seq::from_slice(&[1, 2, 3]));
    assert_eq!(over.to_vec(), Err(Error::OverBound { what: "pair", len: 3, max: 2, at: 0 }));
}

#[test]
fn truncated_opaque_counts_its_padding() {
    // A length of 3 and no data: the item needs 3 bytes and 1 of padding.
    let bytes = [0, 0, 0, 3];
    assert_eq!(Reader::new(&bytes).opaque_var(None, "o"), Err(Error::Truncated { at: 4, need: 4 }));
    // A length of 5 and 2 bytes: 5 + 3 of padding, 2 present, 6 missing.
    let bytes = [0, 0, 0, 5, b'a', b'b'];
    assert_eq!(Reader::new(&bytes).string(None, "s"), Err(Error::Truncated { at: 4, need: 6 }));
    // The data present but not its padding: 1 byte of padding missing.
    let bytes = [0, 0, 0, 3, b'a', b'b', b'c'];
    assert_eq!(Reader::new(&bytes).opaque_var(None, "o"), Err(Error::Truncated { at: 4, need: 1 }));
    // Fixed-length opaque counts its padding as well.
    assert_eq!(Reader::new(&[1, 2]).opaque_fixed::<3>(), Err(Error::Truncated { at: 0, need: 2 }));
}
