//! A program with two procedures, only one of which has a DDP-eligible result: the Upper-Layer
//! Binding learns which procedure a reply answers from the call it is handed with the reply
//! (`UpperLayerBinding::reply_ddp_items`), as RFC 8166 section 6.1 makes DDP-eligibility a
//! property of each procedure, and an RPC reply does not name its procedure (RFC 5531 section
//! 9). Issue 16.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig, ServerStats};
use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use rpcrdma_verbs::InProcess;

/// READ's result (an `opaque<>` after the accepted reply's 24 bytes) is DDP-eligible.
const READ: u32 = 1;
/// LOOKUP's result (an `opaque<>` at the same place) is not.
const LOOKUP: u32 = 2;
/// XID, CALL, rpcvers, prog, vers, proc, AUTH_NONE credential and verifier (RFC 5531).
const CALL_HEADER: usize = 40;
/// XID, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS.
const REPLY_HEADER: usize = 24;
const MAX_RESULT: usize = 64 << 10;

/// The binding: it reads the procedure from the call, and counts the replies it was handed
/// with a call of another XID (which would make the procedure it read wrong).
#[derive(Default)]
struct TwoProcedures {
    mismatched: AtomicU32,
}

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()))
}

impl TwoProcedures {
    fn procedure(call: &[u8]) -> Option<u32> {
        word(call, 20)
    }
}

impl UpperLayerBinding for TwoProcedures {
    fn call_ddp_items(&self, _call: &[u8], _out: &mut Vec<DdpItem>) {}

    fn reply_ddp_maxima(&self, call: &[u8], out: &mut Vec<usize>) {
        if Self::procedure(call) == Some(READ) {
            out.push(MAX_RESULT);
        }
    }

    fn max_reply_size(&self, _call: &[u8]) -> usize {
        // LOOKUP's result stays in the reply: room for the largest one.
        REPLY_HEADER + 4 + MAX_RESULT
    }

    fn reply_ddp_items(&self, call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        if word(call, 0) != word(reply, 0) {
            self.mismatched.fetch_add(1, Ordering::Relaxed);
        }
        if Self::procedure(call) != Some(READ) {
            return;
        }
        let Some(len) = word(reply, REPLY_HEADER) else { return };
        let item = DdpItem::new(REPLY_HEADER + 4, len as usize);
        if reduced > 0 || item.padded_end() <= reply.len() {
            out.push(item);
        }
    }
}

fn call(xid: u32, procedure: u32, len: u32) -> Vec<u8> {
    [xid, 0, 2, 400_000, 1, procedure, 0, 0, 0, 0, len].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Either procedure answers with `len` bytes (the call's last word) of a pattern, as an
/// `opaque<>`.
fn serve(call: &[u8]) -> Vec<u8> {
    let len = word(call, CALL_HEADER).unwrap() as usize;
    let mut reply: Vec<u8> = [0, 1, 0, 0, 0, 0].iter().flat_map(|w: &u32| w.to_be_bytes()).collect();
    reply[..4].copy_from_slice(&call[..4]);
    reply.extend((len as u32).to_be_bytes());
    reply.extend((0..len).map(|i| (i % 253) as u8));
    reply.resize(reply.len().next_multiple_of(4), 0);
    reply
}

#[test]
fn issue_16_only_the_procedure_with_a_ddp_eligible_result_uses_a_write_chunk() {
    let ulb = Arc::new(TwoProcedures::default());
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), ulb.clone(), serve).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    // A LOOKUP result as large as a READ's, so that only the procedure tells them apart.
    for (xid, procedure, writes_after) in [(1, READ, 1), (2, LOOKUP, 1), (3, READ, 2), (4, LOOKUP, 2)] {
        let message = call(xid, procedure, 8192);
        let reply = client.call(&message, &*ulb).unwrap();
        assert_eq!(reply, serve(&message), "call {xid}: its reply, whole");
        // The server counts a reply once its Send completed, which may be after the client
        // has it.
        let deadline = Instant::now() + Duration::from_secs(5);
        let replies = |s: ServerStats| s.inline_replies + s.reply_chunk_replies;
        while replies(server.stats()) < u64::from(xid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(server.stats().write_chunk_results, writes_after, "after call {xid} (procedure {procedure})");
    }
    // Every reply the binding parsed, on either side, came with its own call.
    assert_eq!(ulb.mismatched.load(Ordering::Relaxed), 0);
    assert_eq!(server.stats().reply_chunk_replies, 2, "each LOOKUP result went whole, in the Reply chunk");
}
