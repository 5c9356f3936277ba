//! An NFS Version 3 server (RFC 1813) over a directory, built on the workspace's
//! RPC-over-RDMA [`Server`](negotiate::server::Server): the Linux kernel's NFS client
//! mounts it with `-o vers=3,proto=rdma` and moves real files through it (issue 17).
//!
//! An example and a test bed, not part of the library API (`publish = false`). The pieces:
//!
//! - [`xdr`]: the NFSv3 and MOUNTv3 types, generated at build time from
//!   `specs/nfs3-mount3.txt`.
//! - [`handles`]: file handles (opaque, at most 64 bytes) to paths under the export root,
//!   opened beneath it with [`fsat`] (`openat2(2)`, `*at` calls on descriptors).
//! - [`attrs`]: `fattr3` and `wcc_data` from `std::fs::Metadata`; `std::io::Error` to `nfsstat3`.
//! - [`nfs`]: the NFS program's procedures, as a [`Handler`](negotiate::server::Handler).
//! - [`binding`]: the RPC-over-RDMA Upper-Layer Binding for NFSv3 (RFC 8267 section 3).
//! - [`mount`]: the MOUNT program (RFC 1813 section 5), served over TCP with ONC RPC
//!   record marking ([`record`], RFC 5531 section 11).

pub mod attrs;
pub mod binding;
pub mod fsat;
pub mod handles;
pub mod identity;
pub mod mount;
pub mod nfs;
pub mod record;

/// The NFSv3 and MOUNTv3 types (RFC 1813), generated from `specs/nfs3-mount3.txt`; each
/// item's documentation names the section and line it came from.
#[allow(missing_docs, clippy::all)]
pub mod xdr {
    include!(concat!(env!("OUT_DIR"), "/generated.rs"));
}

/// The runtime the generated types use (`Xdr::decode`, `Xdr::encode`, ...).
pub use xdr_spec_rt as rt;

/// Eight bytes that differ from one server run to the next: the generation in every file
/// handle (so that a handle from an earlier run is stale, RFC 1813 section 2.3.3) and the
/// write verifier (which changes when uncommitted data may have been lost, section 3.3.7).
/// From `/dev/urandom`, or from the clock and the process ID where it cannot be read.
pub fn boot_verifier() -> [u8; 8] {
    use std::io::Read;
    let mut v = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut v)).is_ok() {
        return v;
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    ((nanos ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes()
}
