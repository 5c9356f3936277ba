//! When the rdma-core tests run and when they skip (`rpcrdma_verbs::test_env::rdma_test_host`,
//! behind `Rdma::from_test_env`): each case runs this test binary again as a child with the
//! environment it names, and the child's one test reads the address the way those tests do.
//!
//! Outside the Soft-RoCE guest (no `RDMA_TEST_ADDR`) they print `SKIP: ...` and pass, except
//! under `CI=true` (as the oracle tests) or `RDMA_TEST_REQUIRED=1` (set by `guest/test-rdma` and
//! `guest/test-hostile`), where a missing address fails rather than skipping everything.

use std::process::{Command, Output};

/// The child's side: active only when the parent ran it, otherwise it passes at once. It
/// checks that the address read is the one in `EXPECT_RDMA_TEST_HOST` (`none`: no address).
#[test]
fn child_reads_the_test_env() {
    let Ok(expect) = std::env::var("EXPECT_RDMA_TEST_HOST") else { return };
    let got = rpcrdma_verbs::test_env::rdma_test_host().map(|h| h.to_string());
    assert_eq!(got.as_deref().unwrap_or("none"), expect);
}

/// Runs [`child_reads_the_test_env`] with `CI`, `RDMA_TEST_ADDR` and `RDMA_TEST_REQUIRED` as
/// given (`None`: unset), expecting the host `expect`.
fn child(ci: Option<&str>, addr: Option<&str>, required: Option<&str>, expect: &str) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_reads_the_test_env", "--nocapture", "--test-threads=1"])
        .env("EXPECT_RDMA_TEST_HOST", expect)
        .env_remove("CI")
        .env_remove("RDMA_TEST_ADDR")
        .env_remove("RDMA_TEST_REQUIRED");
    if let Some(c) = ci {
        cmd.env("CI", c);
    }
    if let Some(a) = addr {
        cmd.env("RDMA_TEST_ADDR", a);
    }
    if let Some(r) = required {
        cmd.env("RDMA_TEST_REQUIRED", r);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout)
}

#[test]
fn rdma_tests_skip_and_pass_without_rdma_test_addr_outside_ci() {
    for ci in [None, Some("false")] {
        let o = child(ci, None, None, "none");
        assert!(o.status.success(), "CI={ci:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("SKIP: RDMA_TEST_ADDR not set"), "CI={ci:?}: {}", stderr(&o));
    }
}

#[test]
fn rdma_tests_fail_without_rdma_test_addr_under_ci() {
    let o = child(Some("true"), None, None, "none");
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("RDMA_TEST_ADDR not set, and CI=true"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("SKIP"), "{}", stderr(&o));
}

#[test]
fn rdma_tests_run_on_the_address_the_guest_sets() {
    for (addr, host) in [("10.0.2.15", "10.0.2.15"), ("10.0.2.15:20049", "10.0.2.15")] {
        let o = child(Some("true"), Some(addr), Some("1"), host);
        assert!(o.status.success(), "{addr}: {}", stderr(&o));
        assert!(!stderr(&o).contains("SKIP"), "{addr}: {}", stderr(&o));
    }
}

#[test]
fn rdma_tests_fail_without_rdma_test_addr_when_the_guest_requires_it() {
    let o = child(None, None, Some("1"), "none");
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("RDMA_TEST_REQUIRED=1"), "{}", stderr(&o));
}

#[test]
fn a_malformed_rdma_test_addr_fails() {
    let o = child(None, Some("rxe0"), None, "none");
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not an IPv4 address"), "{}", stderr(&o));
}
