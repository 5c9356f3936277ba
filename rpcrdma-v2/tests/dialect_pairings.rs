//! Issue 27, item 2: every pairing of a requester and a responder among Version One only,
//! draft-cel-00, draft-ietf-07 and both, driven by bytes. The requester's first message is
//! encoded in its preferred dialect; the responder judges it with the real verdict of the
//! dialect it takes (`rpcrdma_v1::verdict`, `rpcrdma_v2::verdict`, `draft07::verdict`, chosen
//! by `dialect::first_message_dialect` when it speaks both); a refusal goes back to the
//! requester, whose `dialect::after_refusal` says where it goes next, on the same connection.
//! Each pairing must end on a version both speak after at most one refused first message, as
//! the table in docs/design.md ("Version Two's two dialects") decides. Every responder speaks
//! Version One too, as every requester does.

use rpcrdma_v1::verdict::{ReceivePolicy, Verdict as V1Verdict};
use rpcrdma_v2::dialect::{after_refusal, first_message_dialect, Dialect, Next, Speaks, VersionTwo};
use rpcrdma_v2::draft07::marshal::{call_inline, NO_CHUNKS};
use rpcrdma_v2::draft07::verdict::{self as verdict07, Verdict as Verdict07};
use rpcrdma_v2::draft07::xdr::Rpcrdma2ErrVers;
use rpcrdma_v2::options::Registry;
use rpcrdma_v2::verdict::{self as verdict00, Verdict as Verdict00};
use rpcrdma_v2::Version;

/// Where a connection settled: Version One, or a Version Two dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    V1,
    V2(Dialect),
}

const XID: u32 = 0x77;
/// An RPC call: XID, CALL, RPC version 2, program 100003.
const RPC: [u32; 4] = [XID, 0, 2, 100_003];

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The first message of a call, in Version One (`None`) or a dialect.
fn first_message(dialect: Option<Dialect>) -> Vec<u8> {
    let rpc = words(&RPC);
    match dialect {
        None => [words(&[XID, 1, 32, 0, 0, 0, 0]), rpc].concat(),
        Some(Dialect::Cel00) => [words(&[XID, 2, 32, 0, 0, 0, 0]), rpc].concat(),
        Some(Dialect::Ietf07) => {
            let mut out = vec![0u8; 64];
            let n = call_inline(&mut out, XID, 32, 0, &NO_CHUNKS, &rpc).unwrap();
            out.truncate(n);
            out
        }
    }
}

/// A responder that speaks `speaks` and has settled `dialect` on this connection, if any.
struct Responder {
    speaks: Speaks,
    dialect: Option<Dialect>,
}

impl Responder {
    /// Judges `bytes` with the real verdict of the version and dialect it takes: `Ok` with what
    /// it served, or `Err` with the RDMA_ERROR it answered.
    fn judge(&mut self, bytes: &[u8]) -> Result<Settled, Vec<u8>> {
        let vers = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
        let (low, high) = (1, if self.speaks.first().is_none() { 1 } else { 2 });
        if vers != 2 || self.speaks.first().is_none() {
            let policy =
                ReceivePolicy { versions: (Version::from_wire(low), Version::from_wire(high)), ..Default::default() };
            return match rpcrdma_v1::verdict::receive(bytes, &policy) {
                V1Verdict::Accept(_) => Ok(Settled::V1),
                V1Verdict::Reply { reply, .. } => Err(reply.as_bytes().to_vec()),
                other => panic!("a first message judged {other:?}"),
            };
        }
        // A dialect taken stays (-07 section 4.3.3); else the one it speaks, or, speaking
        // both, the first Version Two message's, kept whatever that message's fate.
        let dialect = self.dialect.unwrap_or_else(|| match self.speaks.v2 {
            VersionTwo::Both { preferred } => first_message_dialect(bytes).unwrap_or(preferred),
            v2 => v2.first().expect("a Version Two responder"),
        });
        if matches!(self.speaks.v2, VersionTwo::Both { .. }) {
            self.dialect = Some(dialect);
        }
        let served = match dialect {
            Dialect::Cel00 => {
                let policy = ReceivePolicy { versions: (Version::ONE, Version::TWO), ..Default::default() };
                match verdict00::receive(bytes, &policy, &mut Registry::new()) {
                    Verdict00::Accept(_) => Ok(Settled::V2(Dialect::Cel00)),
                    Verdict00::Reply { reply, .. } => Err(reply.as_bytes().to_vec()),
                    other => panic!("a first message judged {other:?}"),
                }
            }
            Dialect::Ietf07 => {
                let policy = verdict07::Policy {
                    supported: Rpcrdma2ErrVers { rdma_vers_low: low, rdma_vers_high: high },
                    ..Default::default()
                };
                match verdict07::receive(bytes, &policy) {
                    Verdict07::Accept(_) => Ok(Settled::V2(Dialect::Ietf07)),
                    Verdict07::Reply { reply, .. } => Err(reply.as_bytes().to_vec()),
                    other => panic!("a first message judged {other:?}"),
                }
            }
        };
        served
    }
}

/// Runs one call's first message between `requester` and `responder` on one connection:
/// where it settled, and how many first messages were refused on the way.
fn pair(requester: Speaks, responder: Speaks) -> (Settled, usize) {
    pair_with(requester, responder, first_message, 1)
}

/// [`pair`] with the first messages `encode` makes, allowing `most` refusals.
fn pair_with(
    requester: Speaks,
    responder: Speaks,
    encode: fn(Option<Dialect>) -> Vec<u8>,
    most: usize,
) -> (Settled, usize) {
    let mut r = Responder { speaks: responder, dialect: None };
    let mut dialect = requester.first();
    let mut tried = Vec::new();
    loop {
        match r.judge(&encode(dialect)) {
            Ok(settled) => return (settled, tried.len()),
            Err(answer) => {
                let sent = dialect.expect("a Version One first message is refused only by a responder without it");
                tried.push(sent);
                assert!(tried.len() <= most, "refusal {}: {answer:?}", tried.len());
                match after_refusal(&requester, sent, &tried, XID, &answer) {
                    Next::Retry(next) => dialect = next,
                    other => panic!("{other:?} after {answer:?}"),
                }
            }
        }
    }
}

use Dialect::{Cel00 as D00, Ietf07 as D07};

// One test per cell of docs/design.md's table: (where it settles, first messages refused).

#[test]
fn v1_requester_with_v1_responder() {
    assert_eq!(pair(Speaks::v1_only(), Speaks::v1_only()), (Settled::V1, 0));
}

#[test]
fn v1_requester_with_cel00_responder() {
    assert_eq!(pair(Speaks::v1_only(), Speaks::one(D00)), (Settled::V1, 0));
}

#[test]
fn v1_requester_with_ietf07_responder() {
    assert_eq!(pair(Speaks::v1_only(), Speaks::one(D07)), (Settled::V1, 0));
}

#[test]
fn v1_requester_with_both_responder() {
    assert_eq!(pair(Speaks::v1_only(), Speaks::both(D07)), (Settled::V1, 0));
}

#[test]
fn cel00_requester_with_v1_responder() {
    assert_eq!(pair(Speaks::one(D00), Speaks::v1_only()), (Settled::V1, 1));
}

#[test]
fn cel00_requester_with_cel00_responder() {
    assert_eq!(pair(Speaks::one(D00), Speaks::one(D00)), (Settled::V2(D00), 0));
}

#[test]
fn cel00_requester_with_ietf07_responder() {
    assert_eq!(pair(Speaks::one(D00), Speaks::one(D07)), (Settled::V1, 1));
}

#[test]
fn cel00_requester_with_both_responder() {
    assert_eq!(pair(Speaks::one(D00), Speaks::both(D07)), (Settled::V2(D00), 0));
}

#[test]
fn ietf07_requester_with_v1_responder() {
    assert_eq!(pair(Speaks::one(D07), Speaks::v1_only()), (Settled::V1, 1));
}

#[test]
fn ietf07_requester_with_cel00_responder() {
    assert_eq!(pair(Speaks::one(D07), Speaks::one(D00)), (Settled::V1, 1));
}

#[test]
fn ietf07_requester_with_ietf07_responder() {
    assert_eq!(pair(Speaks::one(D07), Speaks::one(D07)), (Settled::V2(D07), 0));
}

#[test]
fn ietf07_requester_with_both_responder() {
    assert_eq!(pair(Speaks::one(D07), Speaks::both(D00)), (Settled::V2(D07), 0));
}

#[test]
fn both_preferring_ietf07_with_v1_responder() {
    assert_eq!(pair(Speaks::both(D07), Speaks::v1_only()), (Settled::V1, 1));
}

#[test]
fn both_preferring_ietf07_with_cel00_responder() {
    assert_eq!(pair(Speaks::both(D07), Speaks::one(D00)), (Settled::V2(D00), 1));
}

#[test]
fn both_preferring_ietf07_with_ietf07_responder() {
    assert_eq!(pair(Speaks::both(D07), Speaks::one(D07)), (Settled::V2(D07), 0));
}

#[test]
fn both_preferring_ietf07_with_both_responder() {
    assert_eq!(pair(Speaks::both(D07), Speaks::both(D00)), (Settled::V2(D07), 0));
}

#[test]
fn both_preferring_cel00_with_v1_responder() {
    assert_eq!(pair(Speaks::both(D00), Speaks::v1_only()), (Settled::V1, 1));
}

#[test]
fn both_preferring_cel00_with_cel00_responder() {
    assert_eq!(pair(Speaks::both(D00), Speaks::one(D00)), (Settled::V2(D00), 0));
}

#[test]
fn both_preferring_cel00_with_ietf07_responder() {
    assert_eq!(pair(Speaks::both(D00), Speaks::one(D07)), (Settled::V2(D07), 1));
}

#[test]
fn both_preferring_cel00_with_both_responder() {
    assert_eq!(pair(Speaks::both(D00), Speaks::both(D07)), (Settled::V2(D00), 0));
}

/// The one dead end: a requester without Version One whose dialect the responder lacks, and
/// whose other dialect it does not speak, is told so instead of trying on.
#[test]
fn a_requester_without_version_one_and_no_shared_dialect_fails_the_connection() {
    let requester = Speaks { v1: false, v2: VersionTwo::One(D07) };
    let mut r = Responder { speaks: Speaks::one(D00), dialect: None };
    let answer = r.judge(&first_message(Some(D07))).unwrap_err();
    assert_eq!(after_refusal(&requester, D07, &[D07], XID, &answer), Next::NoCommonVersion);
}

/// A first message refused for its own sake (a malformed -07 message to a responder that
/// speaks both and keeps the first message's dialect, -07 section 4.3.3) draws BAD_XDR, which
/// reads like -00's BAD_HEADER: the requester tries -00 once, is refused in it (INVAL_HTYPE:
/// the responder kept -07), and goes on in Version One instead of switching back and forth.
#[test]
fn a_responder_refusing_both_dialects_ends_the_switching_after_two_refusals() {
    fn misaligned(dialect: Option<Dialect>) -> Vec<u8> {
        match dialect {
            // A Read chunk at position 2: not a multiple of four (RFC 8166 3.4.5's rule).
            Some(Dialect::Ietf07) => words(&[XID, 2, 32, 10, 0, 1, 2, 9, 4, 0, 0, 0, 0, 0, XID, 0]),
            other => first_message(other),
        }
    }
    assert_eq!(pair_with(Speaks::both(D07), Speaks::both(D00), misaligned, 2), (Settled::V1, 2));
}

fn err(code: u32, arm: &[u32]) -> Vec<u8> {
    [words(&[XID, 2, 32, 4, code]), words(arm)].concat()
}

/// Section 7.1.1: after ERR_VERS the requester "MUST NOT subsequently send a message that uses
/// a version that the Responder has indicated it does not support": Version One only when the
/// range holds it; a range without 1 or 2 leaves nothing to speak; a range that holds 2, or an
/// ERR_VERS without its range, fails the call.
#[test]
fn section_7_1_1_err_vers_goes_only_where_its_range_allows() {
    let both = Speaks::both(D07);
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &err(1, &[1, 1])), Next::Retry(None));
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &err(1, &[3, 3])), Next::NoCommonVersion);
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &err(1, &[3, 1])), Next::NoCommonVersion);
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &err(1, &[1, 2])), Next::CallFails);
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &err(1, &[])), Next::CallFails);
}

/// An error about the call, not the version, fails the call: the responder understood it.
/// And an answer that is not an RDMA_ERROR for the first message's XID is no refusal.
#[test]
fn errors_about_the_call_fail_it_and_other_answers_are_no_refusal() {
    let both = Speaks::both(D07);
    for (sent, code, arm) in
        [(D07, 8u32, vec![16u32]), (D07, 100, vec![]), (D07, 4, vec![]), (D00, 2, vec![]), (D00, 3, vec![])]
    {
        assert_eq!(after_refusal(&both, sent, &[sent], XID, &err(code, &arm)), Next::CallFails, "{sent:?} code {code}");
    }
    let reply_inline = words(&[XID, 2, 32, 13, 1, 1, 9, 64, 0, 0, 0, XID, 1]);
    assert_eq!(after_refusal(&both, D07, &[D07], XID, &reply_inline), Next::NotARefusal);
    assert_eq!(after_refusal(&both, D07, &[D07], XID + 1, &err(2, &[])), Next::NotARefusal);
}
