//! Where tests find the RDMA device they run on: [`rdma_test_host`], behind
//! `Rdma::from_test_env` (cargo feature `rdma`). It is compiled without the feature too, so
//! that the host's test suite checks when the rdma-core tests run and when they skip.

use std::net::{Ipv4Addr, SocketAddrV4};

/// The device address for tests, from the environment variable `RDMA_TEST_ADDR`
/// (`"a.b.c.d"` or `"a.b.c.d:port"`, the port ignored), which the Soft-RoCE guest sets
/// (`guest/init`, for every command `guest/run-in-guest` runs).
///
/// When it is unset this prints `SKIP: RDMA_TEST_ADDR not set ...` on stderr and returns
/// `None`, and the test returns as passed, **also under `CI=true`**: unlike the oracles, real
/// verbs are not installed on the host CI runs on, which runs these tests inside the guest
/// instead (`guest/test-rdma`, `guest/test-hostile`). Those scripts set
/// `RDMA_TEST_REQUIRED=1`, under which a missing `RDMA_TEST_ADDR` panics instead, so that a
/// guest that lost the address fails rather than skipping everything. A malformed address
/// panics.
///
/// ```
/// // Outside the guest (as when the documentation is tested on the host), nothing to run on.
/// if std::env::var_os("RDMA_TEST_ADDR").is_none() && std::env::var_os("RDMA_TEST_REQUIRED").is_none() {
///     assert_eq!(rpcrdma_verbs::test_env::rdma_test_host(), None);
/// }
/// ```
pub fn rdma_test_host() -> Option<Ipv4Addr> {
    let Ok(v) = std::env::var("RDMA_TEST_ADDR") else {
        if std::env::var("RDMA_TEST_REQUIRED").is_ok_and(|r| r == "1") {
            panic!("RDMA_TEST_ADDR not set, and RDMA_TEST_REQUIRED=1: the Soft-RoCE guest sets it (guest/init)");
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
