//! The main job's matrix inside `cargo test`: every cell on the in-process and the TCP
//! backends, and across two processes over TCP, must pass (a failing cell prints why), and
//! each run must have made every cell and covered every outcome.
//!
//! A cell passes only when each of its two calls was made the exact number of times it should
//! have been, in its form: the client's transmissions by form (two for a Version Two
//! requester's first call to a Version One responder, the refused probe and the call again;
//! one otherwise) and the responder's one call served, by call form and reply form
//! (`interop_tests::matrix`'s `form_used`).

use interop_tests::matrix::{all_cells, run_cell, table, Outcome, CELLS};
use negotiate::connection::PeerProperties;
use rpcrdma_v1::Version;

/// Every cell ran and passed, and the run covered what the matrix is for.
fn all_pass(outcomes: &[Outcome]) {
    // 3 pairs x 4 private data x 6 forms, and the Version Two pair x 4 extensions on top.
    assert_eq!((outcomes.len(), CELLS), (168, 168));
    let mut cells: Vec<_> = outcomes.iter().map(|o| o.cell).collect();
    cells.dedup();
    assert_eq!(cells, all_cells(), "each cell once, in table order");
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
    // Both versions were negotiated: Version Two only where both sides speak it (one pair of
    // four: 4 private data x 4 extensions x 6 forms), Version One everywhere else.
    let v2 = outcomes.iter().filter(|o| o.version == Some(Version::TWO)).count();
    let v1 = outcomes.iter().filter(|o| o.version == Some(Version::ONE)).count();
    assert_eq!((v2, v1), (4 * 4 * 6, 3 * 4 * 6));
    // Every outcome of the properties exchange happened, as often as the cells ask, and a
    // completed one took effect (12 KiB stated by both sides, above anything private data
    // gives).
    let with = |p: PeerProperties| outcomes.iter().filter(|o| o.properties == Some(p)).count();
    assert_eq!(with(PeerProperties::Refused), 4 * 6, "the Version Two pair with the requester's extension only");
    assert_eq!(with(PeerProperties::NotExchanged), 168 - 2 * 4 * 6);
    let stated: Vec<_> = outcomes.iter().filter(|o| matches!(o.properties, Some(PeerProperties::Stated(_)))).collect();
    assert_eq!(stated.len(), 4 * 6, "the Version Two pair with both extensions, each private data and form");
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
