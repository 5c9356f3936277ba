//! Serving each call as its caller: the file-system identity (fsuid, fsgid and supplementary
//! groups) of the thread serving a call is the caller's for the length of the call, as Linux's
//! nfsd serves, so that the kernel's own permission checks apply to what the call does and what
//! it creates is owned by the caller.
//!
//! Who the caller is comes from its AUTH_SYS credential (RFC 5531 appendix A); an AUTH_NONE
//! caller is the anonymous id, and so is uid 0 unless root squashing is off
//! ([`Nfs3::root_squash`](crate::nfs::Nfs3::root_squash)), as nfsd's default `root_squash`.
//!
//! The identity is set with the raw `setfsuid`, `setfsgid` and `setgroups` system calls,
//! which change the calling thread alone (glibc's `setgroups` changes every thread of the
//! process), on a short-lived thread of the call's own ([`Identity::run`]), never on the
//! thread serving the connection: the kernel refuses (EACCES) a uverbs command written from a
//! thread whose credentials are not the very ones that opened the device
//! (`ib_safe_file_access` compares them by address), and credentials changed and changed back
//! are new ones, so a serving thread that had acted as a caller could post nothing more on
//! rdma-core (seen in the guest: `ibv_post_send failed: Permission denied`). Changing it needs `CAP_SETUID` and `CAP_SETGID`: a server not run as root cannot,
//! and every call then acts as the server's own user (logged once). AUTH_SYS is a claim, not a
//! proof: whoever can reach the server can claim any uid but 0 (squashed). Serve only networks
//! whose hosts are trusted to say who their users are, as with any AUTH_SYS NFS server.

use std::sync::OnceLock;

/// The uid and gid of an anonymous caller (AUTH_NONE, or uid 0 squashed): "nobody".
pub const ANONYMOUS: u32 = 65534;

/// The most supplementary groups an AUTH_SYS credential carries (RFC 5531 appendix A).
const MAX_GROUPS: usize = 16;

/// Who a call acts as.
///
/// ```
/// use nfs3_server::identity::{Identity, ANONYMOUS};
/// let squashed = Identity::new(0, 0, &[0, 10], true);
/// assert_eq!((squashed.uid(), squashed.gid()), (ANONYMOUS, ANONYMOUS));
/// let user = Identity::new(1000, 100, &[10, 20], true);
/// assert!(user.in_group(20) && user.in_group(100) && !user.in_group(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    uid: u32,
    gid: u32,
    groups: [u32; MAX_GROUPS],
    ngroups: usize,
}

impl Identity {
    /// The identity of an AUTH_SYS caller (groups beyond 16 ignored); uid 0 becomes the
    /// anonymous id, with no groups, when `squash_root`.
    pub fn new(uid: u32, gid: u32, gids: &[u32], squash_root: bool) -> Self {
        if uid == 0 && squash_root {
            return Identity::anonymous();
        }
        let mut groups = [0; MAX_GROUPS];
        let ngroups = gids.len().min(MAX_GROUPS);
        groups[..ngroups].copy_from_slice(&gids[..ngroups]);
        Identity { uid, gid, groups, ngroups }
    }

    /// The anonymous identity: an AUTH_NONE caller.
    pub fn anonymous() -> Self {
        Identity { uid: ANONYMOUS, gid: ANONYMOUS, groups: [0; MAX_GROUPS], ngroups: 0 }
    }

    /// Its uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Its primary gid.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// Whether `gid` is its primary group or one of its supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups[..self.ngroups].contains(&gid)
    }

    /// Runs `f` as this identity: on a thread of its own, whose file-system identity is this
    /// one (see the [module documentation](self)), or here when this process cannot change
    /// identities (not root). A panic in `f` is this thread's again.
    ///
    /// ```
    /// use nfs3_server::identity::Identity;
    /// let user = Identity::new(1000, 1000, &[], true);
    /// assert_eq!(user.run(|| 6 * 7), 42);
    /// ```
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if own().is_none() {
            return f();
        }
        let me = *self;
        std::thread::scope(|s| {
            let acting = std::thread::Builder::new().name("nfs3-as-caller".into()).spawn_scoped(s, move || {
                let _acting = me.act();
                f()
            });
            match acting {
                Ok(t) => t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to be had: the call is not run as anyone else.
                Err(e) => panic!("no thread to act as the caller on: {e}"),
            }
        })
    }

    /// Makes this the calling thread's file-system identity until the guard drops, when the
    /// process's own comes back; `None` when this process cannot change it (not root). Only
    /// on a thread that never posts to a verbs device ([`Identity::run`]).
    pub fn act(&self) -> Option<Acting> {
        let own = own()?;
        // SAFETY: plain system calls on this thread's credentials, with valid arguments; the
        // group list outlives the call.
        unsafe {
            libc::syscall(libc::SYS_setgroups, self.ngroups, self.groups.as_ptr());
            libc::syscall(libc::SYS_setfsgid, self.gid);
            libc::syscall(libc::SYS_setfsuid, self.uid);
        }
        Some(Acting { own })
    }
}

/// The process's own identity, to come back to, if it may change its threads' identities.
struct Own {
    uid: u32,
    gid: u32,
    groups: Vec<libc::gid_t>,
}

fn own() -> Option<&'static Own> {
    static OWN: OnceLock<Option<Own>> = OnceLock::new();
    OWN.get_or_init(|| {
        // SAFETY: reading this process's credentials.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid != 0 {
            eprintln!("nfs3-server: not running as root: every call acts as uid {uid}, whoever its caller");
            return None;
        }
        // SAFETY: a first call with no buffer returns the count; the second fills `groups`.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut groups = vec![0; usize::try_from(n).unwrap_or(0)];
        let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(n).unwrap_or(0));
        Some(Own { uid, gid, groups })
    })
    .as_ref()
}

/// A thread acting as a caller ([`Identity::act`]); its drop gives the thread back the
/// process's own identity, panics included.
pub struct Acting {
    own: &'static Own,
}

impl Drop for Acting {
    fn drop(&mut self) {
        let own = self.own;
        // SAFETY: as in `Identity::act`.
        unsafe {
            libc::syscall(libc::SYS_setfsuid, own.uid);
            libc::syscall(libc::SYS_setfsgid, own.gid);
            libc::syscall(libc::SYS_setgroups, own.groups.len(), own.groups.as_ptr());
        }
    }
}
