//! Each call acts as its caller (issue 26: every operation ran as the server process, so an
//! anonymous caller of a server run as root created a root-owned mode 06755 file, made an
//! existing file 04777 and removed a root-owned file). The NFS service is called directly on
//! this thread with AUTH_NONE and AUTH_SYS credentials; the kernel's own permission checks
//! decide, under the caller's file-system uid, gid and groups (`nfs3_server::identity`).
//!
//! Changing a thread's identity needs root: run as another user, these tests say SKIP and
//! pass, except under `CI=true`, where they fail.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use negotiate::onc::{self, Auth, AuthSys, CallHeader};
use negotiate::server::Handler;
use nfs3_server::handles::Handles;
use nfs3_server::identity::ANONYMOUS;
use nfs3_server::nfs::Nfs3;
use nfs3_server::rt::Xdr;
use nfs3_server::xdr::*;

fn is_root() -> bool {
    // SAFETY: reading this process's effective uid.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: these tests need root");
        eprintln!("SKIP: acting as a caller needs root");
    }
    root
}

fn sys(uid: u32, gid: u32, gids: &[u32]) -> Auth {
    Auth::Sys(AuthSys { stamp: 1, machine_name: "test".into(), uid, gid, gids: gids.to_vec() })
}

/// An export (removed when dropped) served by `nfs`, called on this thread.
struct Rig {
    dir: PathBuf,
    handles: Arc<Handles>,
    nfs: Nfs3,
}

impl Rig {
    fn new(name: &str, squash_root: bool) -> Rig {
        let dir = std::env::temp_dir().join(format!("nfs3-identity-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let handles = Arc::new(Handles::new(&dir, nfs3_server::boot_verifier()).unwrap());
        let nfs = Nfs3::new(handles.clone()).root_squash(squash_root);
        Rig { dir, handles, nfs }
    }

    fn handle(&self, relative: &str) -> Vec<u8> {
        let meta = std::fs::symlink_metadata(self.dir.join(relative)).unwrap();
        self.handles.remember(Path::new(relative), &meta).to_vec()
    }

    /// Calls `proc` as `cred`; the results' status.
    fn call<'a, A: Xdr<'a>>(&self, cred: &Auth, proc: u32, args: &A) -> Nfsstat3 {
        let msg =
            CallHeader::new(9, NFS_PROGRAM, NFS_V3, proc).with_cred(cred.clone()).message(&args.to_vec().unwrap());
        let mut reply = Vec::new();
        self.nfs.handle(&msg.unwrap(), &mut reply);
        Nfsstat3::decode(onc::results(&reply, 9).unwrap()).unwrap().0
    }

    fn create(&self, cred: &Auth, dir: &str, name: &str, mode: u32) -> Nfsstat3 {
        let dir = self.handle(dir);
        let how = Createhow3::ObjAttributes { discriminant: Createmode3::Guarded, value: mode_only(mode) };
        let args = CREATE3args { r#where: Diropargs3 { dir: NfsFh3 { data: &dir }, name: Filename3(name) }, how };
        self.call(cred, NFSPROC3_CREATE, &args)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn mode_only(mode: u32) -> Sattr3 {
    Sattr3 {
        mode: SetMode3::True(mode),
        uid: SetUid3::Default { discriminant: false },
        gid: SetGid3::Default { discriminant: false },
        size: SetSize3::Default { discriminant: false },
        atime: SetAtime::Default { discriminant: TimeHow::DontChange },
        mtime: SetMtime::Default { discriminant: TimeHow::DontChange },
    }
}

/// The file-system uid of this thread now (setfsuid with an invalid id changes nothing and
/// returns the current one).
fn fsuid() -> i64 {
    // SAFETY: a query: an invalid id changes nothing.
    unsafe { libc::syscall(libc::SYS_setfsuid, -1i32) }
}

#[test]
fn an_anonymous_caller_cannot_write_where_only_root_may() {
    if !is_root() {
        return;
    }
    let rig = Rig::new("anonymous", true);
    std::fs::write(rig.dir.join("roots"), b"root's").unwrap();
    for cred in [Auth::None, sys(0, 0, &[])] {
        // A setuid file in the root-owned export root (0755): not for nobody.
        assert_eq!(rig.create(&cred, "", "setuid", 0o6755), Nfsstat3::Nfs3errAcces, "{cred:?}");
        assert!(!rig.dir.join("setuid").exists());
        // Making root's file setuid and world-writable: only its owner may.
        let roots = rig.handle("roots");
        let args = SETATTR3args {
            object: NfsFh3 { data: &roots },
            new_attributes: mode_only(0o4777),
            guard: Sattrguard3::False,
        };
        assert_eq!(rig.call(&cred, NFSPROC3_SETATTR, &args), Nfsstat3::Nfs3errPerm, "{cred:?}");
        assert_eq!(std::fs::metadata(rig.dir.join("roots")).unwrap().mode() & 0o7777, 0o644);
        // Removing root's file from root's directory.
        let root = rig.handle("");
        let args = REMOVE3args { object: Diropargs3 { dir: NfsFh3 { data: &root }, name: Filename3("roots") } };
        assert_eq!(rig.call(&cred, NFSPROC3_REMOVE, &args), Nfsstat3::Nfs3errAcces, "{cred:?}");
        assert!(rig.dir.join("roots").exists());
    }
    assert_eq!(fsuid(), 0, "the thread is root again after each call");
}

#[test]
fn a_caller_acts_as_its_uid_gid_and_groups() {
    if !is_root() {
        return;
    }
    let rig = Rig::new("user", true);
    std::fs::create_dir(rig.dir.join("open")).unwrap();
    std::fs::set_permissions(rig.dir.join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
    // What a user creates is the user's.
    assert_eq!(rig.create(&sys(1000, 1000, &[]), "open", "mine", 0o644), Nfsstat3::Nfs3Ok);
    let m = std::fs::metadata(rig.dir.join("open/mine")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1000, 1000));
    // A group directory: writable through a supplementary group, not without it.
    std::fs::create_dir(rig.dir.join("team")).unwrap();
    std::os::unix::fs::chown(rig.dir.join("team"), Some(0), Some(4242)).unwrap();
    std::fs::set_permissions(rig.dir.join("team"), std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_eq!(rig.create(&sys(1000, 1000, &[4242]), "team", "ours", 0o644), Nfsstat3::Nfs3Ok);
    assert_eq!(rig.create(&sys(1001, 1001, &[7]), "team", "theirs", 0o644), Nfsstat3::Nfs3errAcces);
    // Root's group is squashed as root is: claiming gid 0 (primary or supplementary) opens
    // no root-group directory.
    std::fs::create_dir(rig.dir.join("wheel")).unwrap();
    std::fs::set_permissions(rig.dir.join("wheel"), std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_eq!(rig.create(&sys(1000, 0, &[0]), "wheel", "in", 0o2755), Nfsstat3::Nfs3errAcces);
    assert!(!rig.dir.join("wheel/in").exists());
    // An anonymous caller is the anonymous id.
    assert_eq!(rig.create(&Auth::None, "open", "anon", 0o644), Nfsstat3::Nfs3Ok);
    assert_eq!(std::fs::metadata(rig.dir.join("open/anon")).unwrap().uid(), ANONYMOUS);
    assert_eq!(fsuid(), 0);
}

#[test]
fn without_root_squash_uid_0_is_root() {
    if !is_root() {
        return;
    }
    let squashed = Rig::new("squashed", true);
    assert_eq!(squashed.create(&sys(0, 0, &[]), "", "f", 0o644), Nfsstat3::Nfs3errAcces);
    let trusted = Rig::new("trusted", false);
    assert_eq!(trusted.create(&sys(0, 0, &[]), "", "f", 0o644), Nfsstat3::Nfs3Ok);
    assert_eq!(std::fs::metadata(trusted.dir.join("f")).unwrap().uid(), 0);
}

/// Issue 25: no thread is made per call. Each call acts on one of the acting pool's long-lived
/// threads (before, a thread was spawned and joined per call): 200 calls from 8 threads run on
/// at most `ACTING_THREADS` threads, each as its own caller, never on the calling thread.
#[test]
fn calls_act_on_a_few_long_lived_threads_not_one_each() {
    if !is_root() {
        return;
    }
    use nfs3_server::identity::{Identity, ACTING_THREADS};
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = || unsafe { libc::syscall(libc::SYS_gettid) };
    let seen = std::sync::Mutex::new(std::collections::HashSet::new());
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let seen = &seen;
            s.spawn(move || {
                for i in 0..25u32 {
                    let uid = 2000 + t * 100 + i;
                    let caller = tid();
                    let (acting, as_uid) = Identity::new(uid, uid, &[], true).run(|| (tid(), fsuid())).unwrap();
                    assert_ne!(acting, caller, "a call acted on the thread serving it");
                    assert_eq!(as_uid, i64::from(uid), "the call did not act as its caller");
                    seen.lock().unwrap().insert(acting);
                }
            });
        }
    });
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() <= ACTING_THREADS, "200 calls acted on {} threads", seen.len());
    // Each of those threads lives on, and has its own identity back between calls: its fsuid
    // and fsgid (the fourth ids of /proc's Uid and Gid lines) are root's again.
    for tid in seen {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        for line in ["Uid:", "Gid:"] {
            let ids: Vec<&str> = status.lines().find(|l| l.starts_with(line)).unwrap().split_whitespace().collect();
            assert_eq!(ids[4], "0", "thread {tid} kept a caller's identity: {ids:?}");
        }
    }
}

/// A call that itself runs work as another caller (nested `Identity::run`) is served on a
/// thread of its own, so that sixteen of them cannot wait for ever on the pool they occupy, and
/// the outer call keeps its own identity around the inner one.
#[test]
fn a_call_acting_inside_a_call_completes_and_keeps_the_outer_identity() {
    if !is_root() {
        return;
    }
    use nfs3_server::identity::{Identity, ACTING_THREADS};
    std::thread::scope(|s| {
        for t in 0..2 * ACTING_THREADS as u32 {
            s.spawn(move || {
                let (outer, inner) = (3000 + t, 4000 + t);
                let seen = Identity::new(outer, outer, &[], true)
                    .run(|| {
                        let inside = Identity::new(inner, inner, &[], true).run(fsuid).unwrap();
                        (fsuid(), inside, fsuid())
                    })
                    .unwrap();
                assert_eq!(seen, (i64::from(outer), i64::from(inner), i64::from(outer)));
            });
        }
    });
}

/// A call whose caller is who the server already is (root's uid, gid and groups, root
/// squashing off) runs on the thread serving it: its identity would not change, so it is not
/// handed to the acting pool and back (two thread switches a call). One whose groups differ
/// acts on the pool as before.
#[test]
fn a_call_as_the_servers_own_identity_runs_on_the_thread_serving_it() {
    if !is_root() {
        return;
    }
    use nfs3_server::identity::Identity;
    // SAFETY: gettid has no arguments and cannot fail; getgroups fills at most `n` entries.
    let tid = || unsafe { libc::syscall(libc::SYS_gettid) };
    let mut groups = vec![0; 64];
    let n = unsafe { libc::getgroups(64, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).unwrap());
    let own = Identity::new(0, 0, &groups, false);
    assert_eq!(own.run(|| (tid(), fsuid())).unwrap(), (tid(), 0), "the server's own identity was handed on");
    // The primary group listed among the supplementary ones or not: the same group set.
    let with_primary = Identity::new(0, 0, &[groups.as_slice(), &[0]].concat(), false);
    assert_eq!(with_primary.run(tid).unwrap(), tid());
    let other_groups = Identity::new(0, 0, &[groups.as_slice(), &[54321]].concat(), false);
    assert_ne!(other_groups.run(tid).unwrap(), tid(), "a call with another group acted as the server");
    let (acting, as_uid) = Identity::new(1234, 0, &groups, false).run(|| (tid(), fsuid())).unwrap();
    assert_ne!(acting, tid(), "a call as another uid acted on the thread serving it");
    assert_eq!(as_uid, 1234);
    // Inside a call acting as someone else, a call as the server's own identity is root's,
    // not the outer caller's: it is not run on the acting thread.
    let inner = Identity::new(1234, 1234, &[], true).run(|| own.run(fsuid).unwrap()).unwrap();
    assert_eq!(inner, 0, "the server's own identity, run inside another caller's call");
    // The same on a thread holding an `act` guard.
    let guard = Identity::new(1235, 1235, &[], true).act().unwrap();
    assert_eq!(fsuid(), 1235);
    assert_eq!(own.run(fsuid).unwrap(), 0);
    drop(guard);
    assert_eq!(fsuid(), 0);
}
