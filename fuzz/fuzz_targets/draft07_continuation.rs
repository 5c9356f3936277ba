//! A -07 receiver's message continuation on arbitrary message sequences (issue 27): the input
//! is cut into messages (each a 2-byte length, then that many bytes), each judged by
//! `draft07::header::Header` and, when valid, handed to `draft07::continuation::Reassembly`
//! with a 4 KiB limit. Whatever the peer sends: nothing panics, no more than the limit is ever
//! held, a whole message never exceeds it, and every refusal is answered with an error body.

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

use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::header::Header;
use rpcrdma_v2::HeaderLimits;

const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let limits = HeaderLimits::default();
    let mut r = Reassembly::new(LIMIT);
    for message in length_prefixed::messages(data) {
        let Ok(header) = Header::parse(message, &limits) else { continue };
        match r.receive(header) {
            Step::Whole { message, header: h } => {
                assert!(message.len() <= LIMIT.max(h.payload().len()), "{} bytes whole", message.len());
            }
            Step::Refused { reason, answer, .. } => assert_eq!(answer, reason.answer()),
            Step::Held | Step::Other(_) | Step::Dropped { .. } => {}
        }
        assert!(r.held() <= LIMIT, "{} bytes held", r.held());
    }
});
