//! The main job's matrix inside `cargo test`: every cell on the in-process and the TCP
//! backends must pass (a failing cell prints why).

use interop_tests::matrix::{all_cells, run_cell, table, CELLS};
use negotiate::client_core::PeerProperties;
use rpcrdma_v1::Version;

fn all_pass<B: rpcrdma_verbs::Backend + Clone>(backend: &B) {
    let outcomes: Vec<_> = all_cells().into_iter().map(|c| run_cell(backend, c)).collect();
    // 3 pairs x 4 private data x 6 forms, and the Version Two pair x 4 extensions on top.
    assert_eq!((outcomes.len(), CELLS), (168, 168));
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
    // Both versions were negotiated somewhere, and both fell back where they had to.
    assert!(outcomes.iter().any(|o| o.version == Some(Version::TWO)));
    assert!(outcomes.iter().any(|o| o.version == Some(Version::ONE)));
    // Every outcome of the properties exchange happened, and a completed one took effect
    // (12 KiB stated by both sides, above anything private data gives).
    assert!(outcomes.iter().any(|o| o.properties == Some(PeerProperties::Refused)));
    assert!(outcomes.iter().any(|o| o.properties == Some(PeerProperties::NotExchanged)));
    let stated: Vec<_> = outcomes.iter().filter(|o| matches!(o.properties, Some(PeerProperties::Stated(_)))).collect();
    assert_eq!(stated.len(), 4 * 6, "the Version Two pair with both extensions, each private data and form");
    assert!(stated.iter().all(|o| o.thresholds.is_some_and(|t| (t.call, t.reply) == (12288, 12288))));
}

#[test]
fn every_cell_passes_in_process() {
    all_pass(&rpcrdma_verbs::InProcess);
}

#[test]
fn every_cell_passes_over_tcp() {
    all_pass(&rpcrdma_verbs::Tcp);
}

#[test]
fn every_cell_passes_across_two_processes() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_interop-tests"));
    let outcomes: Vec<_> =
        all_cells().into_iter().map(|c| interop_tests::remote::run_cell_two_processes(exe, c)).collect();
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
}
