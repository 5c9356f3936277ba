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
//! process), on one of a pool of long-lived threads that take a caller's identity for one call
//! at a time ([`Identity::run`]; a caller who is the server's own identity needs no change,
//! and its call runs where it is served), never on the thread serving the connection: the kernel
//! refuses (EACCES) a uverbs command written from a thread whose credentials are not the very
//! ones that opened the device (`ib_safe_file_access` compares them by address), and
//! credentials changed and changed back are new ones, so a serving thread that had acted as a
//! caller could post nothing more on rdma-core (seen in the guest: `ibv_post_send failed:
//! Permission denied`). Changing it needs `CAP_SETUID` and `CAP_SETGID`: a server not run as
//! root cannot, and every call then acts as the server's own user (logged once). AUTH_SYS is a claim, not a
//! proof: whoever can reach the server can claim any uid but 0 (squashed). Serve only networks
//! whose hosts are trusted to say who their users are, as with any AUTH_SYS NFS server.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

// The 32-bit-id system calls: on x86 and arm the plain ones take 16-bit ids.
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SETGROUPS: libc::c_long = libc::SYS_setgroups32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SETFSUID: libc::c_long = libc::SYS_setfsuid32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SETFSGID: libc::c_long = libc::SYS_setfsgid32;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SETGROUPS: libc::c_long = libc::SYS_setgroups;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SETFSUID: libc::c_long = libc::SYS_setfsuid;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SETFSGID: libc::c_long = libc::SYS_setfsgid;

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
/// let claims_root_group = Identity::new(1000, 0, &[0], true);
/// assert!(!claims_root_group.in_group(0) && claims_root_group.gid() == ANONYMOUS);
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
    /// The identity of an AUTH_SYS caller (groups beyond 16 ignored). With `squash_root`, as
    /// nfsd's `root_squash`: uid 0 becomes the anonymous id with no groups, and gid 0, primary
    /// or supplementary, the anonymous gid (a caller claiming group 0 would otherwise reach
    /// root's group's files, and could make a setgid-root file of its own).
    pub fn new(uid: u32, gid: u32, gids: &[u32], squash_root: bool) -> Self {
        if uid == 0 && squash_root {
            return Identity::anonymous();
        }
        let squash = |g: u32| if g == 0 && squash_root { ANONYMOUS } else { g };
        let mut groups = [0; MAX_GROUPS];
        let ngroups = gids.len().min(MAX_GROUPS);
        for (to, &from) in groups.iter_mut().zip(&gids[..ngroups]) {
            *to = squash(from);
        }
        Identity { uid, gid: squash(gid), groups, ngroups }
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

    /// Runs `f` as this identity: on a thread of the acting pool, whose file-system identity
    /// is this one for the call (see the [module documentation](self)) and its own again
    /// after it; or here when this process is not root (it then has only its own user's rights
    /// to lend), or when this is the process's own identity (root's uid and gid, and its group
    /// set), which the pool thread would only take again. `Err` when the identity could not be taken (a root without
    /// `CAP_SETUID`/`CAP_SETGID`, a uid a user namespace does not map): `f` is not run,
    /// rather than run as root. A panic in `f` is this thread's again. Each call sets and
    /// reads back its identity, so a pool thread whose own identity did not come back after
    /// an earlier call acts as nobody else's for the next one. At most [`ACTING_THREADS`]
    /// calls act at once; more wait for a thread.
    ///
    /// ```
    /// use nfs3_server::identity::Identity;
    /// let user = Identity::new(1000, 1000, &[], true);
    /// assert_eq!(user.run(|| 6 * 7).unwrap(), 42);
    /// ```
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> std::io::Result<R> {
        match own() {
            // Not root: nobody else's rights to take. The process's own identity: the pool
            // thread would take just what this thread has (the same fsuid, fsgid and group
            // set), so the call runs here, without a hand-off to another thread and back.
            None => return Ok(f()),
            Some(own) if self.is(own) && ACTING.with(std::cell::Cell::get) == 0 => return Ok(f()),
            Some(_) => {}
        }
        let me = *self;
        if ON_POOL.with(std::cell::Cell::get) {
            // Called from a call acting already: on a thread of its own, as a pool thread
            // waiting for another could, sixteen deep, wait for ever. (Not here: the guard
            // would give this thread root's identity back, not the outer caller's.)
            return std::thread::scope(|s| {
                match std::thread::Builder::new()
                    .name("nfs3-as-caller".into())
                    .spawn_scoped(s, move || me.act().map(|_acting| f()))
                {
                    Ok(t) => t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    Err(e) => Err(e),
                }
            });
        }
        // (Its credentials are the pool thread's alone; the guard gives its own back.)
        ActingPool::get()?.run(move || me.act().map(|_acting| f()))
    }

    /// Whether this is the process's own identity, as the kernel's permission checks see it:
    /// the same fsuid and fsgid, and the same groups with the primary one among them (a check
    /// asks whether a gid is the fsgid or a supplementary group: `in_group_p`).
    fn is(&self, own: &Own) -> bool {
        let ours = |g: &u32| *g == self.gid || self.groups[..self.ngroups].contains(g);
        let own_has = |g: &u32| *g == own.gid || own.groups.contains(g);
        self.uid == own.uid
            && self.gid == own.gid
            && own.groups.iter().all(ours)
            && self.groups[..self.ngroups].iter().all(own_has)
    }

    /// Makes this the calling thread's file-system identity until the guard drops, when the
    /// process's own comes back; `Ok(None)` when this process is not root. Each change is read
    /// back: an identity that did not take is an error, never root's rights. Only on a
    /// thread that never posts to a verbs device ([`Identity::run`]).
    pub fn act(&self) -> std::io::Result<Option<Acting>> {
        let Some(own) = own() else { return Ok(None) };
        // (Counted from here: its drop, on the error below too, gives the identity back.)
        ACTING.with(|n| n.set(n.get() + 1));
        let acting = Acting { own };
        // SAFETY: plain system calls on this thread's credentials, with valid arguments; the
        // group list outlives the call. setfs[ug]id(-1) changes nothing and returns the id in
        // effect.
        let (groups, fsgid, fsuid) = unsafe {
            let groups = libc::syscall(SETGROUPS, self.ngroups, self.groups.as_ptr());
            libc::syscall(SETFSGID, self.gid);
            libc::syscall(SETFSUID, self.uid);
            (groups, libc::syscall(SETFSGID, -1i32), libc::syscall(SETFSUID, -1i32))
        };
        if groups != 0 || fsgid != i64::from(self.gid) || fsuid != i64::from(self.uid) {
            return Err(std::io::Error::other(format!(
                "could not act as uid {} gid {} (setgroups {groups}, fsgid now {fsgid}, fsuid now {fsuid})",
                self.uid, self.gid
            )));
        }
        Ok(Some(acting))
    }
}

thread_local! {
    /// This thread is one of the acting pool's.
    static ON_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How many [`Acting`] guards this thread holds: while one does, its identity is a
    /// caller's, not the process's own, and a call as the process's own identity is not run
    /// here (`Identity::run`).
    static ACTING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most calls that act as their callers at once: the acting pool's threads (Linux's nfsd
/// starts 8 threads by default; calls here also wait on the RDMA beneath them).
pub const ACTING_THREADS: usize = 16;

/// The threads that act as callers ([`Identity::run`]): long-lived, each waiting on the one
/// queue for a call's work, which its caller waits for. Made on first use; a thread that could
/// not start is tried again at the next call (while none runs, calls fail).
struct ActingPool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

/// One call's work for the pool: `run` borrows from its caller's stack, which waits until
/// `done` says it has run (see [`ActingPool::run`]).
struct Job {
    run: Box<dyn FnOnce() + Send + 'static>,
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl ActingPool {
    /// The pool, its missing threads started (all of them on first use; again later, should
    /// a start have failed). `Err` only while none runs.
    fn get() -> std::io::Result<&'static ActingPool> {
        static POOL: OnceLock<ActingPool> = OnceLock::new();
        static STARTED: Mutex<usize> = Mutex::new(0);
        static ALL_STARTED: AtomicBool = AtomicBool::new(false);
        let pool = POOL.get_or_init(|| ActingPool { queue: Mutex::new(VecDeque::new()), ready: Condvar::new() });
        if ALL_STARTED.load(Ordering::Acquire) {
            return Ok(pool);
        }
        let mut started = STARTED.lock().unwrap_or_else(PoisonError::into_inner);
        while *started < ACTING_THREADS {
            let spawned = std::thread::Builder::new().name("nfs3-as-caller".into()).spawn(|| pool.serve());
            match spawned {
                Ok(_) => *started += 1,
                Err(e) if *started == 0 => {
                    return Err(std::io::Error::other(format!("no thread to act as callers could start: {e}")))
                }
                Err(_) => break,
            }
        }
        ALL_STARTED.store(*started == ACTING_THREADS, Ordering::Release);
        Ok(pool)
    }

    /// A pool thread's life: the next job, run, said done.
    fn serve(&self) {
        ON_POOL.with(|on| on.set(true));
        loop {
            let job = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    match queue.pop_front() {
                        Some(job) => break job,
                        None => queue = self.ready.wait(queue).unwrap_or_else(PoisonError::into_inner),
                    }
                }
            };
            (job.run)();
            let (lock, cv) = &*job.done;
            *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
            cv.notify_one();
        }
    }

    /// Runs `f` on a pool thread and waits for it; a panic in `f` is the caller's again.
    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let mut out: Option<std::thread::Result<R>> = None;
        let slot = &mut out;
        let job: Box<dyn FnOnce() + Send + '_> =
            Box::new(move || *slot = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))));
        // SAFETY: the job borrows `f`'s captures and `out` from this frame, and this frame does
        // not return (nor unwind: locks ignore poisoning, and an allocation failure aborts)
        // until the pool thread has run the job and said so under `done`'s lock; the job itself
        // cannot unwind (`catch_unwind`), and the pool's threads never end. So nothing it
        // borrows is gone while it runs. (A pool taking borrowed work and waiting for it is what
        // `std::thread::scope` does per spawned thread; this keeps the threads.)
        let run: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(job) };
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).push_back(Job { run, done: done.clone() });
        self.ready.notify_one();
        let (lock, cv) = &*done;
        let mut finished = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !*finished {
            finished = cv.wait(finished).unwrap_or_else(PoisonError::into_inner);
        }
        drop(finished);
        match out.expect("the job ran") {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
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
        ACTING.with(|n| n.set(n.get().saturating_sub(1)));
        let own = self.own;
        // SAFETY: as in `Identity::act`.
        unsafe {
            libc::syscall(SETFSUID, own.uid);
            libc::syscall(SETFSGID, own.gid);
            libc::syscall(SETGROUPS, own.groups.len(), own.groups.as_ptr());
        }
    }
}
