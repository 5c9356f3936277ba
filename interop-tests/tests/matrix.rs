//! The main job's matrix inside `cargo test`: every cell on the in-process and the TCP
//! backends, and across two processes over TCP, must pass (a failing cell prints why), and
//! each run must have made every cell and covered every outcome.
//!
//! A cell passes only when each of its two calls was made the exact number of times it should
//! have been, in its form: the client's transmissions by form (two for a Version Two
//! requester's first call where the pair does not settle in its preferred dialect, the refused
//! first message and the call again; one otherwise) and the responder's one call served, by call form and reply form
//! (`interop_tests::matrix`'s `form_used`).

use interop_tests::matrix::{all_cells, run_cell, table, Outcome, Speaks, CELLS};
use negotiate::connection::PeerProperties;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::Dialect;

/// Every cell ran and passed, and the run covered what the matrix is for.
fn all_pass(outcomes: &[Outcome]) {
    // 13 pairs x 4 private data x 6 forms, the three -00 pairs x 4 extensions on top, less the
    // backward form of the four -07 pairs.
    assert_eq!((outcomes.len(), CELLS), (616, 616));
    let mut cells: Vec<_> = outcomes.iter().map(|o| o.cell).collect();
    cells.dedup();
    assert_eq!(cells, all_cells(), "each cell once, in table order");
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
    // Every ending of docs/design.md's table of dialects happened, as often as the pairs ask:
    // -00 for three pairs (-00 with -00 or both, both-preferring-07 with -00 after a refusal)
    // with 4 extensions each; -07 for four (-07 or both with -07 or both), without the
    // backward form and with the two continued ones; Version One for the other nine.
    let settled =
        |v: Version, d: Option<Dialect>| outcomes.iter().filter(|o| (o.version, o.dialect) == (Some(v), d)).count();
    assert_eq!(settled(Version::TWO, Some(Dialect::Cel00)), 3 * 4 * 4 * 6);
    assert_eq!(settled(Version::TWO, Some(Dialect::Ietf07)), 4 * 4 * 7);
    assert_eq!(settled(Version::ONE, None), 9 * 4 * 6);
    // The pairs that settle away from the requester's first choice did so after a refusal:
    // -07 with -00 (to Version One) and both with -00 (to -00), besides Version Two requesters
    // with a Version One responder.
    let pair = |r: Speaks, s: Speaks| outcomes.iter().filter(move |o| (o.cell.requester, o.cell.responder) == (r, s));
    assert!(pair(Speaks::Draft07, Speaks::V2Capable).all(|o| o.version == Some(Version::ONE)));
    assert!(pair(Speaks::BothDrafts, Speaks::V2Capable).all(|o| o.dialect == Some(Dialect::Cel00)));
    // -00 with -07 only: RDMA2_ERR_INVAL_HTYPE, then Version One on the same connection.
    assert!(pair(Speaks::V2Capable, Speaks::Draft07).all(|o| o.version == Some(Version::ONE)));
    // Every outcome of the properties exchange happened, as often as the cells ask, and a
    // completed one took effect (12 KiB stated by both sides, above anything private data
    // gives).
    let with = |p: PeerProperties| outcomes.iter().filter(|o| o.properties == Some(p)).count();
    assert_eq!(with(PeerProperties::Refused), 3 * 4 * 6, "the -00 pairs with the requester's extension only");
    assert_eq!(with(PeerProperties::NotExchanged), CELLS - 2 * 3 * 4 * 6);
    let stated: Vec<_> = outcomes.iter().filter(|o| matches!(o.properties, Some(PeerProperties::Stated(_)))).collect();
    assert_eq!(stated.len(), 3 * 4 * 6, "the -00 pairs with both extensions, each private data and form");
    assert!(stated.iter().all(|o| o.thresholds.is_some_and(|t| (t.call, t.reply) == (12288, 12288))));
}

#[test]
fn every_cell_passes_in_process() {
    let outcomes: Vec<_> = all_cells().into_iter().map(|c| run_cell(&rpcrdma_verbs::InProcess, c)).collect();
    all_pass(&outcomes);
}

#[test]
fn every_cell_passes_over_tcp() {
    let outcomes: Vec<_> = all_cells().into_iter().map(|c| run_cell(&rpcrdma_verbs::Tcp, c)).collect();
    all_pass(&outcomes);
}

#[test]
fn every_cell_passes_across_two_processes() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_interop-tests"));
    let outcomes: Vec<_> =
        all_cells().into_iter().map(|c| interop_tests::remote::run_cell_two_processes(exe, c)).collect();
    all_pass(&outcomes);
}
