//! The NFS program, version 3 (RFC 1813 section 3), served from a directory: a
//! [`Handler`] for [`negotiate::server::Server`] that takes whole RPC call messages and
//! writes whole RPC replies.
//!
//! Served: NULL, GETATTR, SETATTR, LOOKUP, ACCESS, READLINK, READ, WRITE, CREATE (UNCHECKED,
//! GUARDED and EXCLUSIVE, the verifier kept in the file's times), MKDIR, SYMLINK, REMOVE,
//! RMDIR, RENAME, LINK, READDIR, READDIRPLUS, FSSTAT, FSINFO, PATHCONF, COMMIT: what `mount`,
//! `ls -l`, `stat`, `cat`, `cp`, `mkdir`, `rm`, `mv`, `ln`, `ln -s`, `readlink` and `dd`
//! need. MKNOD answers NFS3ERR_NOTSUPP (devices need privileges, and FIFOs and sockets are
//! not worth serving here); a procedure number above 21 is PROC_UNAVAIL. Arguments that do not decode
//! are GARBAGE_ARGS; a handle that does not resolve is NFS3ERR_BADHANDLE or NFS3ERR_STALE
//! ([`crate::handles`]); nothing a client sends panics the server or reaches outside the
//! export root.

mod dir;
mod file;

use std::sync::Arc;

use crate::identity::Identity;
use negotiate::onc::{self, Auth, AuthStat, CallHeader, OncError};
use negotiate::server::Handler;
use xdr_spec_rt::Xdr;

use crate::attrs::{fattr, post_op, NO_WCC};
use crate::handles::{Handles, Resolved, NAME_MAX};
use crate::xdr::*;

/// Largest READ and WRITE this server offers (FSINFO's `rtmax` and `wtmax`), in bytes.
pub const MAX_IO: u32 = 1 << 20;

/// The directory listing size this server prefers (FSINFO's `dtpref`), in bytes.
pub const DIR_PREF: u32 = 32 * 1024;

/// The NFSv3 service over one export root.
#[derive(Debug)]
pub struct Nfs3 {
    handles: Arc<Handles>,
    /// The write verifier (RFC 1813 section 3.3.7): changes when the server restarts, so that
    /// a client sends again what it wrote UNSTABLE and had not committed.
    write_verifier: [u8; 8],
    /// Whether each call is logged on stderr ([`Nfs3::logging`]).
    log: bool,
    /// Whether a caller claiming uid 0 acts as the anonymous id ([`Nfs3::root_squash`]).
    squash_root: bool,
}

/// Where one reply goes: the call's XID and the reply buffer.
pub(crate) struct Out<'r> {
    xid: u32,
    buf: &'r mut Vec<u8>,
}

impl Out<'_> {
    /// Writes an accepted SUCCESS reply carrying `results`.
    pub(crate) fn results<'a, T: Xdr<'a>>(&mut self, results: &T) -> Served {
        self.begin_success();
        self.append(results);
        Ok(())
    }

    /// Starts the reply over as an accepted SUCCESS reply with no results yet; where its
    /// results start.
    fn begin_success(&mut self) -> usize {
        self.buf.clear();
        onc::reply_success(self.xid, &[], self.buf);
        self.buf.len()
    }

    /// Writes an accepted SUCCESS reply carrying a failed procedure's results: `status`, then
    /// `body` (the procedure's `resfail`: its attributes, often none).
    pub(crate) fn fail<'a, F: Xdr<'a>>(&mut self, status: Nfsstat3, body: &F) -> Served {
        self.results(&status)?;
        self.append(body);
        Ok(())
    }

    /// Writes an accepted SUCCESS reply whose results end with an opaque that `read` fills in
    /// place, up to `max` bytes, without a buffer of its own (a READ's data: read from the file
    /// straight into the reply). `read` fills the opaque's room and returns how many bytes it
    /// wrote and the results to write before them, whose last field must be an empty opaque
    /// and whose length must be that of `placeholder`'s (attributes of a fixed size): they are
    /// written over the placeholder once the data is in. Its error is returned, the reply
    /// cleared.
    pub(crate) fn results_read_in_place<'a, T: Xdr<'a>, E>(
        &mut self,
        placeholder: &T,
        max: usize,
        read: impl FnOnce(&mut [u8]) -> Result<(usize, T), E>,
    ) -> Result<(), E> {
        let start = self.begin_success();
        self.append(placeholder);
        let head = start + placeholder.encoded_len();
        if self.buf.len() != head {
            return Ok(()); // `append` answered SYSTEM_ERR instead
        }
        self.buf.resize(head + max, 0);
        let (n, results) = match read(&mut self.buf[head..]) {
            Ok(done) => done,
            Err(e) => {
                self.buf.clear();
                return Err(e);
            }
        };
        let n = n.min(max);
        // The opaque's bytes, padded to a multiple of four with zeros (RFC 4506 section 4.10).
        self.buf.truncate(head + n);
        self.buf.resize(head + n.next_multiple_of(4), 0);
        let written =
            (results.encoded_len() == head - start).then(|| results.encode(&mut self.buf[start..head]).ok()).flatten();
        match (written, u32::try_from(n)) {
            (Some(_), Ok(len)) => self.buf[head - 4..head].copy_from_slice(&len.to_be_bytes()),
            // A server bug (results of another length than the placeholder's): SYSTEM_ERR.
            _ => {
                self.buf.clear();
                onc::reply_system_err(self.xid, self.buf);
            }
        }
        Ok(())
    }

    fn append<'a, T: Xdr<'a>>(&mut self, value: &T) {
        let at = self.buf.len();
        self.buf.resize(at + value.encoded_len(), 0);
        if value.encode(&mut self.buf[at..]).is_err() {
            // Only a result that breaks its own XDR bounds gets here: a server bug, which the
            // client hears of as SYSTEM_ERR rather than as garbage.
            self.buf.clear();
            onc::reply_system_err(self.xid, self.buf);
        }
    }
}

/// Arguments that did not decode: answered GARBAGE_ARGS.
pub(crate) struct Garbage;

impl From<xdr_spec_rt::Error> for Garbage {
    fn from(_: xdr_spec_rt::Error) -> Self {
        Garbage
    }
}

/// What a procedure returns: `Err` only for arguments that do not decode.
pub(crate) type Served = Result<(), Garbage>;

/// Decodes a procedure's arguments (bytes after them are ignored).
pub(crate) fn args<'a, T: Xdr<'a>>(bytes: &'a [u8]) -> Result<T, Garbage> {
    Ok(T::decode(bytes)?.0)
}

impl Nfs3 {
    /// The service over the files `handles` maps.
    pub fn new(handles: Arc<Handles>) -> Self {
        Nfs3 { handles, write_verifier: crate::boot_verifier(), log: false, squash_root: true }
    }

    /// Whether a caller whose AUTH_SYS credential claims uid 0 acts as the anonymous id (true,
    /// the default, as nfsd's `root_squash`) or as root (false: `no_root_squash`, for a
    /// client whose root is trusted, such as a test's). Every call acts as its caller
    /// ([`crate::identity`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use nfs3_server::nfs::Nfs3;
    /// # let dir = std::env::temp_dir();
    /// # let handles = Arc::new(nfs3_server::handles::Handles::new(&dir, [0; 8]).unwrap());
    /// let trusting = Nfs3::new(handles).root_squash(false);
    /// # drop(trusting);
    /// ```
    pub fn root_squash(self, squash_root: bool) -> Self {
        Nfs3 { squash_root, ..self }
    }

    /// The same service, logging each call on stderr (XID, procedure, and the status or RPC
    /// error it was answered with): for watching a client such as the kernel's.
    pub fn logging(self, log: bool) -> Self {
        Nfs3 { log, ..self }
    }

    fn dispatch(&self, proc: u32, caller: &Identity, a: &[u8], out: &mut Out<'_>) -> Served {
        match proc {
            NFSPROC3_NULL => {
                out.buf.clear();
                onc::reply_success(out.xid, &[], out.buf);
                Ok(())
            }
            NFSPROC3_GETATTR => self.getattr(a, out),
            NFSPROC3_SETATTR => self.setattr(a, out),
            NFSPROC3_LOOKUP => self.lookup(a, out),
            NFSPROC3_ACCESS => self.access(a, caller, out),
            NFSPROC3_READ => self.read(a, out),
            NFSPROC3_WRITE => self.write(a, out),
            NFSPROC3_CREATE => self.create(a, out),
            NFSPROC3_MKDIR => self.mkdir(a, out),
            NFSPROC3_REMOVE => self.remove(a, out, false),
            NFSPROC3_RMDIR => self.remove(a, out, true),
            NFSPROC3_READDIR => self.readdir(a, out),
            NFSPROC3_READDIRPLUS => self.readdirplus(a, out),
            NFSPROC3_FSSTAT => self.fsstat(a, out),
            NFSPROC3_FSINFO => self.fsinfo(a, out),
            NFSPROC3_PATHCONF => self.pathconf(a, out),
            NFSPROC3_COMMIT => self.commit(a, out),
            NFSPROC3_READLINK => self.readlink(a, out),
            NFSPROC3_SYMLINK => self.symlink(a, out),
            NFSPROC3_RENAME => self.rename(a, out),
            NFSPROC3_LINK => self.link(a, out),
            // MKNOD: NFS3ERR_NOTSUPP with its failure body, no attributes (the status alone
            // would be short of it).
            NFSPROC3_MKNOD => out.fail(Nfsstat3::Nfs3errNotsupp, &NO_WCC),
            _ => {
                out.buf.clear();
                onc::reply_proc_unavail(out.xid, out.buf);
                Ok(())
            }
        }
    }

    /// The file `handle` names, or the reply for a handle that does not resolve: the status
    /// and `fail` (the procedure's failure body with no attributes).
    pub(crate) fn file<'a, F: Xdr<'a>>(&self, handle: &[u8], out: &mut Out<'_>, fail: F) -> Option<Resolved> {
        match self.handles.resolve(handle) {
            Ok(r) => Some(r),
            Err(status) => {
                let _ = out.fail(status, &fail);
                None
            }
        }
    }

    fn getattr(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: GETATTR3args = args(a)?;
        let res = match self.handles.resolve(a.object.data) {
            Ok(f) => GETATTR3res::Nfs3Ok(GETATTR3resok { obj_attributes: fattr(&f.meta) }),
            Err(discriminant) => GETATTR3res::Default { discriminant },
        };
        out.results(&res)
    }

    fn access(&self, a: &[u8], caller: &Identity, out: &mut Out<'_>) -> Served {
        let a: ACCESS3args = args(a)?;
        let Some(f) = self.file(a.object.data, out, PostOpAttr::False) else { return Ok(()) };
        let res =
            ACCESS3resok { obj_attributes: PostOpAttr::True(fattr(&f.meta)), access: a.access & allowed(&f, caller) };
        out.results(&ACCESS3res::Nfs3Ok(res))
    }

    fn fsstat(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: FSSTAT3args = args(a)?;
        let Some(f) = self.file(a.fsroot.data, out, PostOpAttr::False) else { return Ok(()) };
        let res = match crate::fsat::statvfs(std::os::fd::AsFd::as_fd(&f.fd)) {
            Ok(s) => {
                let bsize = s.f_frsize;
                FSSTAT3res::Nfs3Ok(FSSTAT3resok {
                    obj_attributes: PostOpAttr::True(fattr(&f.meta)),
                    tbytes: s.f_blocks.saturating_mul(bsize),
                    fbytes: s.f_bfree.saturating_mul(bsize),
                    abytes: s.f_bavail.saturating_mul(bsize),
                    tfiles: s.f_files,
                    ffiles: s.f_ffree,
                    afiles: s.f_favail,
                    invarsec: 0,
                })
            }
            Err(e) => FSSTAT3res::Default {
                discriminant: crate::attrs::status(&e),
                value: FSSTAT3resfail { obj_attributes: post_op(&f.fd) },
            },
        };
        out.results(&res)
    }

    fn fsinfo(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: FSINFO3args = args(a)?;
        let Some(f) = self.file(a.fsroot.data, out, PostOpAttr::False) else { return Ok(()) };
        let res = FSINFO3resok {
            obj_attributes: PostOpAttr::True(fattr(&f.meta)),
            rtmax: MAX_IO,
            rtpref: MAX_IO,
            rtmult: 4096,
            wtmax: MAX_IO,
            wtpref: MAX_IO,
            wtmult: 4096,
            dtpref: DIR_PREF,
            maxfilesize: i64::MAX as u64,
            time_delta: Nfstime3 { seconds: 0, nseconds: 1 },
            // Hard and symbolic links; SETATTR sets times.
            properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
        };
        out.results(&FSINFO3res::Nfs3Ok(res))
    }

    fn pathconf(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: PATHCONF3args = args(a)?;
        let Some(f) = self.file(a.object.data, out, PostOpAttr::False) else { return Ok(()) };
        let res = PATHCONF3resok {
            obj_attributes: PostOpAttr::True(fattr(&f.meta)),
            linkmax: 32000,
            name_max: NAME_MAX as u32,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        };
        out.results(&PATHCONF3res::Nfs3Ok(res))
    }
}

/// The ACCESS3 bits the mode of `f` allows `caller` (RFC 1813 section 3.3.4), from the owner,
/// group (its primary or a supplementary one) or other permission bits; uid 0 (not squashed)
/// may do anything but execute a file nobody may.
fn allowed(f: &Resolved, caller: &Identity) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let mode = f.meta.mode();
    let bits = if caller.uid() == 0 {
        0o7 & if mode & 0o111 != 0 || f.meta.is_dir() { 0o7 } else { 0o6 }
    } else if caller.uid() == f.meta.uid() {
        (mode >> 6) & 0o7
    } else if caller.in_group(f.meta.gid()) {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    };
    let (r, w, x) = (bits & 0o4 != 0, bits & 0o2 != 0, bits & 0o1 != 0);
    let mut access = 0;
    if r {
        access |= ACCESS3_READ;
    }
    if w {
        access |= ACCESS3_MODIFY | ACCESS3_EXTEND | if f.meta.is_dir() { ACCESS3_DELETE } else { 0 };
    }
    if x {
        access |= if f.meta.is_dir() { ACCESS3_LOOKUP } else { ACCESS3_EXECUTE };
    }
    access
}

impl Handler for Nfs3 {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        let (h, at) = match CallHeader::decode(call) {
            Ok(decoded) => decoded,
            Err(OncError::RpcVersion { xid, .. }) => return onc::reply_rpc_mismatch(xid, 2, 2, reply),
            Err(e) if e.in_auth() => {
                if let Some(xid) = onc::peek_xid(call) {
                    onc::reply_auth_error(xid, AuthStat::BADCRED, reply);
                }
                return;
            }
            Err(_) => return onc::reply_garbage_args(onc::peek_xid(call).unwrap_or(0), reply),
        };
        if h.prog != NFS_PROGRAM {
            return onc::reply_prog_unavail(h.xid, reply);
        }
        if h.vers != NFS_V3 {
            return onc::reply_prog_mismatch(h.xid, NFS_V3, NFS_V3, reply);
        }
        let caller = match &h.cred {
            Auth::Sys(sys) => Identity::new(sys.uid, sys.gid, &sys.gids, self.squash_root),
            Auth::None => Identity::anonymous(),
            // MOUNT offered AUTH_SYS and AUTH_NONE only (RFC 1813 section 5.2.1).
            Auth::Other { .. } => return onc::reply_auth_error(h.xid, AuthStat::TOOWEAK, reply),
        };
        let mut out = Out { xid: h.xid, buf: reply };
        // The call acts as its caller: the kernel's permission checks apply, and what it
        // creates is the caller's. On a thread of the acting pool (`Identity::run`): the serving
        // thread's credentials must not change, or rdma-core refuses its next post.
        let served = match caller.run(|| self.dispatch(h.proc, &caller, &call[at..], &mut out)) {
            Ok(served) => served,
            // Not run as root instead: refused whole.
            Err(e) => {
                eprintln!("nfs3-server: xid {:#010x}: {e}", h.xid);
                reply.clear();
                return onc::reply_system_err(h.xid, reply);
            }
        };
        if served.is_err() {
            reply.clear();
            onc::reply_garbage_args(h.xid, reply);
        }
        if self.log {
            let answer = match onc::results(reply, h.xid) {
                Ok(results) => Nfsstat3::decode(results).map_or("no status".into(), |(s, _)| format!("{s:?}")),
                Err(e) => e.to_string(),
            };
            eprintln!(
                "nfs3: xid {:#010x} proc {} ({} bytes) -> {answer} ({} bytes)",
                h.xid,
                h.proc,
                call.len(),
                reply.len()
            );
        }
    }
}
