//! The `ok:`/`FAIL:` lines the guest examples print, and the count of failures for their exit
//! status. (kernel_nfs.rs and kernel_client.rs still have their own copies, with methods of
//! their own on top.)

/// The checks' verdicts so far.
#[derive(Default)]
pub struct Checks {
    /// How many failed.
    pub failed: u32,
}

impl Checks {
    /// Prints `ok:   NAME: WHAT` or `FAIL: NAME: WHAT`, and counts a failure.
    pub fn check(&mut self, name: &str, ok: bool, what: impl std::fmt::Display) {
        if ok {
            println!("ok:   {name}: {what}");
        } else {
            println!("FAIL: {name}: {what}");
            self.failed += 1;
        }
    }
}
