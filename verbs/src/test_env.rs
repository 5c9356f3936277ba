//! Where tests find the RDMA device they run on: [`rdma_test_host`], behind
//! `Rdma::from_test_env` (cargo feature `rdma`). It is compiled without the feature too, so
//! that the host's test suite checks when the rdma-core tests run and when they skip.

use std::net::{Ipv4Addr, SocketAddrV4};

/// The device address for tests, from the environment variable `RDMA_TEST_ADDR`
/// (`"a.b.c.d"` or `"a.b.c.d:port"`, the port ignored), which the Soft-RoCE guest sets
/// (`guest/init`, for every command `guest/run-in-guest` runs).
///
/// When it is unset this prints `SKIP: RDMA_TEST_ADDR not set ...` on stderr and returns
/// `None`, and the test returns as passed, except under `CI=true` (as the oracle tests) or
/// `RDMA_TEST_REQUIRED=1` (which the guest's scripts set, `guest/test-rdma`,
/// `guest/test-hostile`), where a missing address panics instead: a run that is meant to
/// exercise real verbs must not pass by skipping them. The host's CI builds these tests
/// (`cargo clippy --features rdma`) but runs them only inside the guest, where the address is
/// set. A malformed address panics.
///
/// ```
/// // Outside the guest (as when the documentation is tested on the host), nothing to run on.
/// let required = |v: &str, want: &str| std::env::var(v).is_ok_and(|x| x == want);
/// if std::env::var_os("RDMA_TEST_ADDR").is_none() && !required("CI", "true") && !required("RDMA_TEST_REQUIRED", "1") {
///     assert_eq!(rpcrdma_verbs::test_env::rdma_test_host(), None);
/// }
/// ```
pub fn rdma_test_host() -> Option<Ipv4Addr> {
    let Ok(v) = std::env::var("RDMA_TEST_ADDR") else {
        for (var, value) in [("CI", "true"), ("RDMA_TEST_REQUIRED", "1")] {
            if std::env::var(var).is_ok_and(|v| v == value) {
                panic!(
                    "RDMA_TEST_ADDR not set, and {var}={value}: the rdma-core tests need the Soft-RoCE \
                     guest's device, whose address the guest sets (guest/init; guest/run-in-guest)"
                );
            }
        }
        eprintln!("SKIP: RDMA_TEST_ADDR not set (run inside the Soft-RoCE guest: guest/run-in-guest)");
        return None;
    };
    let host = v
        .parse::<SocketAddrV4>()
        .map(|a| *a.ip())
        .or_else(|_| v.parse::<Ipv4Addr>())
        .unwrap_or_else(|_| panic!("RDMA_TEST_ADDR={v:?} is not an IPv4 address"));
    Some(host)
}
