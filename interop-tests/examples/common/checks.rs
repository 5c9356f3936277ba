//! The `ok:`/`FAIL:` lines the guest examples print, and the names of the failed checks for
//! their summary and exit status: one home for kernel_client, kernel_nfs and kernel_nfs3_data.

/// The checks' verdicts so far.
#[derive(Default)]
pub struct Checks {
    failed: Vec<String>,
}

impl Checks {
    /// Prints `ok:   NAME: WHAT` or `FAIL: NAME: WHAT`, and remembers a failure by its name.
    pub fn check(&mut self, name: &str, ok: bool, what: impl std::fmt::Display) {
        if ok {
            println!("ok:   {name}: {what}");
        } else {
            println!("FAIL: {name}: {what}");
            self.failed.push(name.to_string());
        }
    }

    /// Prints the summary line of the example `who` and returns its exit status: 0 when every
    /// check passed, 1 otherwise.
    pub fn summary(&self, who: &str) -> i32 {
        if self.failed.is_empty() {
            println!("{who}: all checks passed");
            0
        } else {
            println!("{who}: {} check(s) FAILED: {}", self.failed.len(), self.failed.join("; "));
            1
        }
    }
}
