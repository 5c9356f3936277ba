//! Why decoding or encoding failed: one variant per rule of RFC 4506 that an
//! input or a caller's value can break.

/// Why decoding or encoding failed. Small and `Copy`: producing one never
/// allocates.
///
/// ```
/// use xdr_spec_rt::{Error, Reader, Xdr};
/// let err = Reader::new(&[0, 0, 0, 2]).bool().unwrap_err();
/// assert_eq!(err, Error::BadBool { value: 2, at: 0 });
/// assert_eq!(err.to_string(), "byte 0: 2 is not a boolean");
///
/// // A count that could not fit in the input is refused before any work.
/// match Reader::new(&[0xff, 0xff, 0xff, 0xff]).var_seq::<u32>(None, "ids") {
///     Err(Error::CountExceedsInput { what, count, remaining, .. }) => {
///         assert_eq!((what, count, remaining), ("ids", u32::MAX, 0));
///     }
///     other => panic!("{other:?}"),
/// }
/// assert_eq!(7u32.encode(&mut [0u8; 2]), Err(Error::BufferTooSmall { need: 4, have: 2 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// A count or list length above a caller-set [`Limits`](crate::Limits) value.
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
    /// The output buffer is smaller than [`Xdr::encoded_len`](crate::Xdr::encoded_len).
    #[error("output buffer holds {have} bytes, encoding needs {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// Bytes left after a value that must take all of its input, such as a procedure's
    /// arguments in a call message ([`crate::rpc::decode_args`]).
    #[error("{len} bytes left after the {what}")]
    Trailing {
        /// What was decoded.
        what: &'static str,
        /// The bytes left.
        len: usize,
    },
}

/// A specialised result for XDR decoding and encoding.
pub type Result<T, E = Error> = core::result::Result<T, E>;
