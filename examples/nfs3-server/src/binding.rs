//! The Upper-Layer Binding of NFS Version 3 to RPC-over-RDMA (RFC 8267 section 3): which XDR
//! items of NFSv3 calls and replies are DDP-eligible, and how large a reply may be.
//!
//! It is declared in `specs/nfs3-mount3.binding`, beside the specification, and generated
//! from that by `build.rs` (`xdr_spec::pipeline::Build::binding`) as
//! [`crate::xdr::nfs_v3::Binding`]: WRITE3args' `data` and the path of SYMLINK move by Read
//! chunk, a successful READ3res's `data` by Write chunk (as large as the READ's `count`), and
//! READDIR, READDIRPLUS and READLINK replies, which may be large, through the Reply chunk.
//! `tests/binding.rs` checks that it finds what the hand-written binding it replaced found,
//! item for item, on every procedure.

use negotiate::service::Bindings;

/// The largest reply other than READDIR's, READDIRPLUS's and READLINK's (the binding file's
/// `reply at most 1024`).
pub const MAX_SMALL_REPLY: usize = 1024;

/// The largest directory listing a client may ask for in one READDIR or READDIRPLUS (the
/// binding file's `capped 1049600`, less [`MAX_SMALL_REPLY`]).
pub const MAX_DIR_REPLY: usize = 1 << 20;

/// NFSv3's binding, for a client and a server alike (MOUNT has nothing DDP-eligible).
pub fn nfs3() -> Bindings {
    Bindings::new().with(crate::xdr::nfs_v3::Binding)
}
