//! The main job's matrix inside `cargo test`: every cell on the in-process and the TCP
//! backends must pass (a failing cell prints why).

use interop_tests::matrix::{all_cells, run_cell, table};
use rpcrdma_v1::Version;

fn all_pass<B: verbs::Backend + Clone>(backend: &B) {
    let outcomes: Vec<_> = all_cells().into_iter().map(|c| run_cell(backend, c)).collect();
    assert_eq!(outcomes.len(), 96);
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
    // Both versions were negotiated somewhere, and both fell back where they had to.
    assert!(outcomes.iter().any(|o| o.version == Some(Version::TWO)));
    assert!(outcomes.iter().any(|o| o.version == Some(Version::ONE)));
}

#[test]
fn every_cell_passes_in_process() {
    all_pass(&verbs::InProcess);
}

#[test]
fn every_cell_passes_over_tcp() {
    all_pass(&verbs::Tcp);
}

#[test]
fn every_cell_passes_across_two_processes() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_interop-tests"));
    let outcomes: Vec<_> =
        all_cells().into_iter().map(|c| interop_tests::remote::run_cell_two_processes(exe, c)).collect();
    let failed: Vec<_> = outcomes.iter().filter(|o| o.verdict.is_err()).cloned().collect();
    assert!(failed.is_empty(), "{} cells failed:\n{}", failed.len(), table(&failed));
}
