//! Scratch files for tests that run the pipeline on files of their own
//! (included with `#[path]`).

use std::path::{Path, PathBuf};

/// A fresh directory of this test's own: `group` names the test file,
/// `test` the test (tests run in parallel).
pub fn scratch(group: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdr-spec-{group}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Write `text` to `dir/name`, returning the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path
}
