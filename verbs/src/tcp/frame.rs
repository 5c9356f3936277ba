//! The TCP backend's frames after the handshake: one [`Head`] per work request or answer,
//! followed on the wire by [`Head::payload_len`] bytes of data. Integers are little-endian.
//!
//! | frame | tag | fields after the tag |
//! |---|---|---|
//! | [`Head::Send`] | 1 | len u32, then len bytes |
//! | [`Head::SendInv`] | 2 | rkey u32, len u32, then len bytes |
//! | [`Head::Write`] | 3 | addr u64, rkey u32, len u32, then len bytes |
//! | [`Head::ReadReq`] | 4 | addr u64, rkey u32, len u32 |
//! | [`Head::Ack`] | 5 | — (answers a Send, Send with Invalidate or Write) |
//! | [`Head::ReadResp`] | 6 | len u32, then len bytes (answers a ReadReq) |
//! | [`Head::Nak`] | 7 | code u8 ([`NakCode`]; answers any request; fatal) |
//! | [`Head::Offer`] | 8 | addr u64, rkey u32, len u32, then len bytes (no answer) |
//!
//! Decoding reads exactly the head: what a length announces is never allocated here. The
//! reader lands payloads straight into registered memory that the rules allow, after checking
//! the length against it, so a peer that lies about a length gets a refusal, not an allocation.
//!
//! ```
//! use rpcrdma_verbs::tcp::frame::{Head, NakCode};
//! let mut wire = Vec::new();
//! Head::Write { addr: 0x1000, rkey: 7, len: 3 }.encode(&mut wire);
//! Head::Nak(NakCode::RemoteAccess).encode(&mut wire);
//! let (first, used) = Head::decode(&wire).unwrap();
//! assert_eq!((first, used, first.payload_len()), (Head::Write { addr: 0x1000, rkey: 7, len: 3 }, 17, 3));
//! assert_eq!(Head::decode(&wire[used..]).unwrap(), (Head::Nak(NakCode::RemoteAccess), 2));
//! ```

use std::io::{self, Read, Write};

use crate::Status;

const SEND: u8 = 1;
const SEND_INV: u8 = 2;
const WRITE: u8 = 3;
const READ_REQ: u8 = 4;
const ACK: u8 = 5;
const READ_RESP: u8 = 6;
const NAK: u8 = 7;
const OFFER: u8 = 8;

/// The longest head: a Write, ReadReq or Offer (tag, addr, rkey, len).
pub const MAX_HEAD_LEN: usize = 17;

/// The head of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Head {
    /// A Send of `len` bytes, which land in the receiver's oldest posted Receive.
    Send {
        /// Payload bytes that follow.
        len: u32,
    },
    /// A Send with Invalidate of `rkey` in the receiver's protection domain.
    SendInv {
        /// The key to invalidate.
        rkey: u32,
        /// Payload bytes that follow.
        len: u32,
    },
    /// An RDMA Write of `len` bytes to `addr` under `rkey`.
    Write {
        /// Target address.
        addr: u64,
        /// Target key.
        rkey: u32,
        /// Payload bytes that follow.
        len: u32,
    },
    /// An RDMA Read request for `len` bytes at `addr` under `rkey`.
    ReadReq {
        /// Source address.
        addr: u64,
        /// Source key.
        rkey: u32,
        /// Bytes asked for.
        len: u32,
    },
    /// The target carried out a Send, Send with Invalidate or Write.
    Ack,
    /// The data of the oldest outstanding Read request.
    ReadResp {
        /// Payload bytes that follow.
        len: u32,
    },
    /// The target refused the oldest outstanding request; the connection is over.
    Nak(NakCode),
    /// The sender's own `len` bytes at `addr` under `rkey`, which the receiver would RDMA Read
    /// next: it may take them instead (`QueuePair::offer_read`, `QueuePair::take_offered`). Not
    /// a work request: nothing answers it, and no RDMA Read is answered from it.
    Offer {
        /// The bytes' address on the sender.
        addr: u64,
        /// The sender's key they are read under.
        rkey: u32,
        /// Payload bytes that follow.
        len: u32,
    },
}

/// Why a target refused a request, as the initiator's completion reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// Unknown or invalidated rkey, range outside the region, or a right not granted.
    RemoteAccess = 1,
    /// A Send larger than the Receive it would consume, or more outstanding requests than the
    /// target holds answers for.
    RemoteInvalidRequest = 2,
    /// The target's Receive was unusable, or a Send with Invalidate named a key it could not
    /// invalidate.
    RemoteOperation = 3,
    /// No Receive was posted (as with `rnr_retry_count` 0).
    RnrRetry = 4,
}

impl NakCode {
    /// The code for a refusal that fails the initiator's work request with `status`.
    pub fn for_status(status: Status) -> NakCode {
        match status {
            Status::RemoteAccessError => NakCode::RemoteAccess,
            Status::RemoteInvalidRequest => NakCode::RemoteInvalidRequest,
            Status::RnrRetryExceeded => NakCode::RnrRetry,
            _ => NakCode::RemoteOperation,
        }
    }

    /// The status the initiator's work request completes with.
    pub fn status(self) -> Status {
        match self {
            NakCode::RemoteAccess => Status::RemoteAccessError,
            NakCode::RemoteInvalidRequest => Status::RemoteInvalidRequest,
            NakCode::RemoteOperation => Status::RemoteOperationError,
            NakCode::RnrRetry => Status::RnrRetryExceeded,
        }
    }

    fn from_byte(b: u8) -> Option<NakCode> {
        Some(match b {
            1 => NakCode::RemoteAccess,
            2 => NakCode::RemoteInvalidRequest,
            3 => NakCode::RemoteOperation,
            4 => NakCode::RnrRetry,
            _ => return None,
        })
    }
}

/// Why bytes are not a frame head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The input ends inside the head; `need` more bytes would complete it.
    #[error("frame head incomplete: {need} more bytes needed")]
    Incomplete {
        /// Bytes missing.
        need: usize,
    },
    /// The first byte is no frame's tag.
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    /// A NAK's code is none of [`NakCode`]'s.
    #[error("unknown NAK code {0}")]
    UnknownNak(u8),
}

/// How many bytes the head with this tag takes, tag included.
fn head_len(tag: u8) -> Result<usize, FrameError> {
    Ok(match tag {
        ACK => 1,
        NAK => 2,
        SEND | READ_RESP => 5,
        SEND_INV => 9,
        WRITE | READ_REQ | OFFER => MAX_HEAD_LEN,
        t => return Err(FrameError::UnknownTag(t)),
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Head {
    /// Decodes the head at the start of `bytes`; returns it and how many bytes it took.
    pub fn decode(bytes: &[u8]) -> Result<(Head, usize), FrameError> {
        let Some(&tag) = bytes.first() else { return Err(FrameError::Incomplete { need: 1 }) };
        let n = head_len(tag)?;
        if bytes.len() < n {
            return Err(FrameError::Incomplete { need: n - bytes.len() });
        }
        let b = &bytes[..n];
        let head = match tag {
            SEND => Head::Send { len: u32_at(b, 1) },
            SEND_INV => Head::SendInv { rkey: u32_at(b, 1), len: u32_at(b, 5) },
            WRITE | READ_REQ | OFFER => {
                let addr = u64::from(u32_at(b, 1)) | u64::from(u32_at(b, 5)) << 32;
                let (rkey, len) = (u32_at(b, 9), u32_at(b, 13));
                match tag {
                    WRITE => Head::Write { addr, rkey, len },
                    READ_REQ => Head::ReadReq { addr, rkey, len },
                    _ => Head::Offer { addr, rkey, len },
                }
            }
            ACK => Head::Ack,
            READ_RESP => Head::ReadResp { len: u32_at(b, 1) },
            _ => Head::Nak(NakCode::from_byte(b[1]).ok_or(FrameError::UnknownNak(b[1]))?),
        };
        Ok((head, n))
    }

    /// Reads one head from a stream: exactly its bytes, nothing of its payload. A stream that
    /// is no frame ends with [`io::ErrorKind::InvalidData`].
    pub fn read(r: &mut impl Read) -> io::Result<Head> {
        let mut buf = [0u8; MAX_HEAD_LEN];
        r.read_exact(&mut buf[..1])?;
        let n = head_len(buf[0]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        r.read_exact(&mut buf[1..n])?;
        Head::decode(&buf[..n]).map(|(h, _)| h).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Appends the head's bytes to `out` (its payload, if any, is the caller's to append).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Head::Send { len } => {
                out.push(SEND);
                out.extend_from_slice(&len.to_le_bytes());
            }
            Head::SendInv { rkey, len } => {
                out.push(SEND_INV);
                out.extend_from_slice(&rkey.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
            }
            Head::Write { addr, rkey, len } | Head::ReadReq { addr, rkey, len } | Head::Offer { addr, rkey, len } => {
                out.push(match self {
                    Head::Write { .. } => WRITE,
                    Head::ReadReq { .. } => READ_REQ,
                    _ => OFFER,
                });
                out.extend_from_slice(&addr.to_le_bytes());
                out.extend_from_slice(&rkey.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
            }
            Head::Ack => out.push(ACK),
            Head::ReadResp { len } => {
                out.push(READ_RESP);
                out.extend_from_slice(&len.to_le_bytes());
            }
            Head::Nak(code) => out.extend_from_slice(&[NAK, code as u8]),
        }
    }

    /// Writes `n` [`Head::Ack`] frames in a row (one byte each), as a run of answers is sent.
    ///
    /// ```
    /// use rpcrdma_verbs::tcp::frame::Head;
    /// let mut wire = Vec::new();
    /// Head::write_acks(&mut wire, 100).unwrap();
    /// assert_eq!(wire.len(), 100);
    /// assert_eq!(Head::decode(&wire[99..]).unwrap(), (Head::Ack, 1));
    /// ```
    pub fn write_acks(w: &mut impl Write, n: u32) -> io::Result<()> {
        const RUN: [u8; 64] = [ACK; 64];
        let mut left = n as usize;
        while left > 0 {
            let k = left.min(RUN.len());
            w.write_all(&RUN[..k])?;
            left -= k;
        }
        Ok(())
    }

    /// The bytes of data that follow this head on the wire.
    pub fn payload_len(&self) -> usize {
        match *self {
            Head::Send { len }
            | Head::SendInv { len, .. }
            | Head::Write { len, .. }
            | Head::ReadResp { len }
            | Head::Offer { len, .. } => len as usize,
            Head::ReadReq { .. } | Head::Ack | Head::Nak(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_head_round_trips_and_reads_from_a_stream() {
        let heads = [
            Head::Send { len: 0 },
            Head::SendInv { rkey: 0xdead_beef, len: 9 },
            Head::Write { addr: u64::MAX - 1, rkey: 1, len: u32::MAX },
            Head::ReadReq { addr: 1 << 40, rkey: 2, len: 4096 },
            Head::Ack,
            Head::ReadResp { len: 12 },
            Head::Nak(NakCode::RnrRetry),
            Head::Offer { addr: 0x1234_5678_9abc, rkey: 3, len: 4200 },
        ];
        let mut wire = Vec::new();
        for h in heads {
            let start = wire.len();
            h.encode(&mut wire);
            assert_eq!(Head::decode(&wire[start..]), Ok((h, wire.len() - start)));
        }
        let mut r = &wire[..];
        for h in heads {
            assert_eq!(Head::read(&mut r).unwrap(), h);
        }
        assert!(r.is_empty());
    }

    #[test]
    fn a_short_or_foreign_head_is_refused_without_reading_past_it() {
        assert_eq!(Head::decode(&[]), Err(FrameError::Incomplete { need: 1 }));
        assert_eq!(Head::decode(&[WRITE, 0, 0]), Err(FrameError::Incomplete { need: 14 }));
        assert_eq!(Head::decode(&[0x47, 0x45, 0x54]), Err(FrameError::UnknownTag(0x47)));
        assert_eq!(Head::decode(&[NAK, 9]), Err(FrameError::UnknownNak(9)));
        let e = Head::read(&mut &[0x47u8, 1, 2, 3][..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn nak_codes_carry_the_refused_work_requests_status() {
        for s in [
            Status::RemoteAccessError,
            Status::RemoteInvalidRequest,
            Status::RemoteOperationError,
            Status::RnrRetryExceeded,
        ] {
            assert_eq!(NakCode::for_status(s).status(), s);
        }
    }
}
