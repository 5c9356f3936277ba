//! [`Xdr`] for the primitive types of RFC 4506 (integers, booleans, floats),
//! [`Quadruple`], and optional-data (`Option<T>`).

use crate::{Reader, Result, Writer, Xdr};

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
