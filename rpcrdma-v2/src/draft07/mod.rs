//! RPC-over-RDMA Version 2 as the working group left it: the types of
//! draft-ietf-nfsv4-rpcrdma-version-two-07 (March 2022), generated at build time from the
//! XDR of its sections 8.3 and 8.4 (`specs/draft-ietf-nfsv4-rpcrdma-version-two-07.txt`).
//!
//! It is not wire-compatible with the -00 draft this crate's [`crate::xdr`] comes from,
//! although both put 2 in `rdma_vers`: every -07 header starts with [`xdr::RpcrdmaCommon`]
//! (xid, vers, credit, htype), and header types 4 to 13 ([`xdr::RDMA2_ERROR`] to
//! [`xdr::RDMA2_REPLY_INLINE`]) replace RDMA_MSG, RDMA_NOMSG and RDMA_OPTIONAL; the body
//! after the prefix is the structure its `rdma_htype` names.
//!
//! As published the XDR does not pass a strict check; the errata beside the spec
//! (`specs/draft-ietf-nfsv4-rpcrdma-version-two-07.errata`) say what was wrong and why,
//! and [`GENERATION_REPORT`] lists each as applied:
//! - `uint32` and `uint64` are never defined (they are XDR's `unsigned int` and
//!   `unsigned hyper`);
//! - `typedef rpcrdma2_propid uint32;` is written backwards (meant
//!   `typedef uint32 rpcrdma2_propid;`);
//! - the error union's discriminant type `rpcrdma2_errcode` is never defined (`uint32`, as
//!   its values are plain constants so that extensions can add codes);
//! - two of its arms declare the same field (`rdma_max_chunks`), which RFC 4506 section 6.4
//!   does not allow and rpcgen's C does not compile: one arm serves both case labels.
//!
//! ```
//! use rpcrdma_v2::draft07::xdr::*;
//! use rpcrdma_v2::rt::{List, Xdr};
//! // A short call's header: the prefix, then RDMA2_CALL_INLINE's body with no chunks; the
//! // body's last word is the RPC message's first (its XID).
//! let prefix = RpcrdmaCommon { rdma_xid: 7, rdma_vers: 2, rdma_credit: 32, rdma_htype: RDMA2_CALL_INLINE };
//! let body = Rpcrdma2HdrCallInline {
//!     rdma_inv_handle: 0,
//!     rdma_reads: List::from_slice(&[]),
//!     rdma_provisional_writes: List::from_slice(&[]),
//!     rdma_provisional_reply: None,
//!     rdma_rpc_first_word: 7,
//! };
//! let mut wire = prefix.to_vec().unwrap();
//! wire.extend(body.to_vec().unwrap());
//! assert_eq!(wire.len(), 16 + 20);
//! let (p, used) = RpcrdmaCommon::decode(&wire).unwrap();
//! assert_eq!((p.rdma_htype, used), (10, 16));
//! let (b, _) = Rpcrdma2HdrCallInline::decode(&wire[used..]).unwrap();
//! assert_eq!(b.rdma_rpc_first_word, 7);
//! ```

pub mod continuation;
pub mod credits;
pub mod extension;
pub mod header;
pub mod marshal;
pub mod properties;
pub mod verdict;

/// The generated types (draft sections 8.3 and 8.4), one per XDR definition; each item's
/// documentation names the spec section and line it came from.
pub mod xdr {
    include!(concat!(env!("OUT_DIR"), "/draft07.rs"));
}

/// The inline threshold -07 peers assume in both directions until transport properties say
/// otherwise (section 4.2.2: "connection peers MUST assume both inline thresholds are 4096
/// octets"): the value the earlier draft gives too, [`crate::DEFAULT_INLINE_THRESHOLD`].
///
/// ```
/// assert_eq!(rpcrdma_v2::draft07::DEFAULT_INLINE_THRESHOLD, 4096);
/// ```
pub const DEFAULT_INLINE_THRESHOLD: usize = crate::DEFAULT_INLINE_THRESHOLD;

/// The XDR the types were generated from, with the errata applied.
pub const XDR: &str = include_str!(concat!(env!("OUT_DIR"), "/draft07.x"));

/// Every erratum applied, and the checker's notes, one per line.
pub const GENERATION_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/draft07.report.txt"));

#[cfg(test)]
mod tests {
    use super::xdr::*;
    use crate::rt::{List, Xdr};

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    /// Every erratum of the errata file was applied, each reported with its reason.
    #[test]
    fn each_erratum_is_applied_and_reported() {
        for id in [
            "v2-07-integer-typedefs",
            "v2-07-propid-backwards",
            "v2-07-errcode-typedef",
            "v2-07-error-arms-share-a-name",
        ] {
            assert!(super::GENERATION_REPORT.contains(&format!("erratum {id}: ")), "{id} not applied");
        }
        assert!(super::XDR.contains("typedef uint32 rpcrdma2_propid;"));
        assert!(!super::XDR.contains("typedef rpcrdma2_propid uint32;"));
    }

    /// Section 4.1.1 (and 8.3): the prefix is four 32-bit words, xid, vers, credit, htype.
    #[test]
    fn draft07_8_3_the_prefix_is_xid_vers_credit_htype() {
        let (p, used) = RpcrdmaCommon::decode(&words(&[0xabcd, 2, 31, RDMA2_GRANT])).unwrap();
        assert_eq!(used, 16);
        assert_eq!(p, RpcrdmaCommon { rdma_xid: 0xabcd, rdma_vers: 2, rdma_credit: 31, rdma_htype: 5 });
    }

    /// Section 8.4: the header type codes and error codes as the text numbers them.
    #[test]
    fn draft07_8_4_header_types_and_error_codes_are_numbered_as_the_text_says() {
        let htypes = [
            RDMA2_ERROR,
            RDMA2_GRANT,
            RDMA2_CONNPROP_MIDDLE,
            RDMA2_CONNPROP_FINAL,
            RDMA2_CALL_EXTERNAL,
            RDMA2_CALL_MIDDLE,
            RDMA2_CALL_INLINE,
            RDMA2_REPLY_EXTERNAL,
            RDMA2_REPLY_MIDDLE,
            RDMA2_REPLY_INLINE,
        ];
        assert_eq!(htypes, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        let errs = [
            RDMA2_ERR_VERS,
            RDMA2_ERR_BAD_XDR,
            RDMA2_ERR_BAD_PROPVAL,
            RDMA2_ERR_INVAL_HTYPE,
            RDMA2_ERR_INVAL_CONT,
            RDMA2_ERR_READ_CHUNKS,
            RDMA2_ERR_WRITE_CHUNKS,
            RDMA2_ERR_SEGMENTS,
            RDMA2_ERR_WRITE_RESOURCE,
            RDMA2_ERR_REPLY_RESOURCE,
            RDMA2_ERR_VERS_MISMATCH,
            RDMA2_ERR_SYSTEM,
        ];
        assert_eq!(errs, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 100]);
    }

    /// Section 7.1.1: RDMA2_ERR_VERS carries the lowest and highest versions the responder
    /// supports; an error code without a body (here RDMA2_ERR_INVAL_CONT) is the default arm.
    #[test]
    fn draft07_7_1_1_err_vers_carries_the_supported_range() {
        let (e, used) = Rpcrdma2HdrError::decode(&words(&[RDMA2_ERR_VERS, 1, 2])).unwrap();
        assert_eq!(e, Rpcrdma2HdrError::Rdma2ErrVers(Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 }));
        assert_eq!(used, 12);
        let (e, used) = Rpcrdma2HdrError::decode(&words(&[RDMA2_ERR_INVAL_CONT])).unwrap();
        assert_eq!((e, used), (Rpcrdma2HdrError::Default { discriminant: 5 }, 4));
        // Section 7.3: both chunk-count errors carry the most chunks the responder accepts (one
        // arm for both, erratum v2-07-error-arms-share-a-name).
        for code in [RDMA2_ERR_READ_CHUNKS, RDMA2_ERR_WRITE_CHUNKS] {
            let (e, _) = Rpcrdma2HdrError::decode(&words(&[code, 8])).unwrap();
            assert_eq!(e, Rpcrdma2HdrError::RdmaMaxChunks { discriminant: code, value: 8 });
        }
        let (e, _) = Rpcrdma2HdrError::decode(&words(&[RDMA2_ERR_WRITE_RESOURCE, 3, 4096])).unwrap();
        let want = Rpcrdma2ErrWrite { rdma_chunk_index: 3, rdma_length_needed: 4096 };
        assert_eq!(e, Rpcrdma2HdrError::Rdma2ErrWriteResource(want));
    }

    /// Sections 4.1 and 8.4: a MIDDLE message's body is the bytes still to come
    /// (`rdma_remaining`), then the RPC message.
    #[test]
    fn draft07_4_1_a_middle_message_says_how_much_remains() {
        let (m, used) = Rpcrdma2HdrCallMiddle::decode(&words(&[8192, 0x1234])).unwrap();
        assert_eq!((m.rdma_remaining, m.rdma_rpc_first_word, used), (8192, 0x1234, 8));
    }

    /// Section 8.4: an external call names the Position-Zero Read chunk that carries the
    /// whole RPC message (`rdma_call`), then the other chunk lists; each round-trips.
    #[test]
    fn draft07_8_4_call_external_round_trips_with_its_chunks() {
        let seg = Rpcrdma2Segment { rdma_handle: 0x11, rdma_length: 8192, rdma_offset: 0x1000 };
        let call = [Rpcrdma2ReadSegment { rdma_position: 0, rdma_target: seg }];
        let reply = [seg];
        let h = Rpcrdma2HdrCallExternal {
            rdma_inv_handle: 0x22,
            rdma_call: List::from_slice(&call),
            rdma_reads: List::from_slice(&[]),
            rdma_provisional_writes: List::from_slice(&[]),
            rdma_provisional_reply: Some(Rpcrdma2WriteChunk { rdma_target: crate::rt::Seq::from_slice(&reply) }),
        };
        let bytes = h.to_vec().unwrap();
        let want = words(&[0x22, 1, 0, 0x11, 8192, 0, 0x1000, 0, 0, 0, 1, 1, 0x11, 8192, 0, 0x1000]);
        assert_eq!(bytes, want);
        assert_eq!(Rpcrdma2HdrCallExternal::decode(&bytes).unwrap(), (h, bytes.len()));
    }

    /// Section 5.1: a property is its id and an opaque holding its XDR encoding.
    #[test]
    fn draft07_5_1_a_property_is_an_id_and_its_encoded_value() {
        let value = 8192u32.to_be_bytes();
        let props = [Rpcrdma2Propval { rdma_which: RDMA2_PROPID_RBSIZ, rdma_data: &value }];
        let set = Rpcrdma2HdrConnprop { rdma_props: Rpcrdma2Propset(crate::rt::Seq::from_slice(&props)) };
        let bytes = set.to_vec().unwrap();
        assert_eq!(bytes, words(&[1, 2, 4, 8192]));
        assert_eq!(Rpcrdma2HdrConnprop::decode(&bytes).unwrap(), (set, 16));
    }
}
