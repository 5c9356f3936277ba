//! A server's responder on a -07 connection (issue 27), fed arbitrary message sequences: the
//! input is cut into messages (each a 2-byte length, then that many bytes), each judged by
//! `negotiate::responder::Responder` with `ResponderConfig::draft07` set, as a server's
//! connection judges what it receives. A call in flight has its reply parameters taken (its
//! reply's Send counted); a call written into a buffer of its own (`Asked::Rewritten`: a
//! continued call, a CALL_EXTERNAL) is taken and judged from there. Whatever the peer sends:
//! nothing panics, no allocation exceeds what the input brings and the configured continuation
//! limit (`bounded_alloc`), every error answer is an RDMA_ERROR of at most 28 bytes (once the
//! connection speaks -07, written in -07's error header), and the only other answers are this
//! side's RDMA2_CONNPROP_FINAL within the default inline threshold and its RDMA2_GRANT.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;
#[path = "length_prefixed.rs"]
mod length_prefixed;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;

use negotiate::responder::{Asked, Behind, Responder, ResponderConfig};
use rpcrdma_v2::dialect::Dialect;

/// What a connection holds of a continued call at most.
const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let mut r = Responder::new(ResponderConfig::default().draft07(true).max_continued(LIMIT));
    r.handle_connected(&[], None);
    for message in length_prefixed::messages(data) {
        let xid = match r.handle_receive(message) {
            Asked::Call(h) => Some(h.xid()),
            Asked::Rewritten => {
                let bytes = r.take_rewritten().expect("a rewritten call is there to take");
                assert!(bytes.len() <= LIMIT + 4096, "{} bytes rewritten", bytes.len());
                match r.handle_rewritten(&bytes, Behind::default()) {
                    Asked::Call(h) => Some(h.xid()),
                    Asked::SendError(e) => {
                        assert!(e.as_bytes().len() <= 28);
                        None
                    }
                    other => panic!("a rewritten call judged {other:?}"),
                }
            }
            Asked::SendError(e) => {
                assert!(e.as_bytes().len() <= 28);
                if r.dialect() == Some(Dialect::Ietf07) {
                    // -07's error header: RDMA2_ERROR (4) in the fourth word.
                    assert_eq!(&e.as_bytes()[12..16], &[0, 0, 0, 4], "{e:?}");
                }
                None
            }
            Asked::SendBack(m) => {
                // This side's RDMA2_CONNPROP_FINAL (type 7) within the default threshold, or an
                // RDMA2_GRANT (type 5: the prefix alone, XID zero).
                let connprop = m.len() <= 4096 && m.get(12..16) == Some(&[0, 0, 0, 7][..]);
                let grant = m.len() == 16 && m[..4] == [0; 4] && m[12..16] == [0, 0, 0, 5];
                assert!(connprop || grant, "{m:?}");
                None
            }
            _ => None,
        };
        if let Some(xid) = xid {
            let params = r.reply_params(xid).expect("a call judged is in flight");
            assert_eq!(params.draft07, r.dialect() == Some(Dialect::Ietf07) && params.version.wire() == 2);
        }
    }
});
