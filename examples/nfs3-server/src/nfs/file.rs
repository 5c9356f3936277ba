//! The procedures on a file's data and attributes: SETATTR, READLINK, READ, WRITE, COMMIT
//! (RFC 1813 sections 3.3.2, 3.3.5, 3.3.6, 3.3.7 and 3.3.21).
//!
//! Files are opened with O_NOFOLLOW beneath the export root ([`crate::handles::Handles::reopen`])
//! and attributes are set on the resolved descriptor itself, never through a symbolic link: a
//! link inside the export may point outside it, and following it would let a client reach
//! there.
//! READ, WRITE and COMMIT of a symbolic link's handle are NFS3ERR_INVAL, any attribute
//! change to one is NFS3ERR_INVAL, and READLINK only reads the link's own text.

use std::fs::Metadata;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileExt, MetadataExt};

use super::{args, Nfs3, Out, Served, MAX_IO};
use crate::attrs::{fattr, status, time, wcc, NO_WCC};
use crate::fsat;
use crate::xdr::*;

/// The flags a file is opened with for reading, or for writing too.
fn access(write: bool) -> libc::c_int {
    if write {
        libc::O_RDWR
    } else {
        libc::O_RDONLY
    }
}

/// Why a file's data cannot be read or written: it is a directory, or not a regular file
/// (RFC 1813 section 3.3.6: NFS3ERR_ISDIR, NFS3ERR_INVAL).
fn not_regular(meta: &Metadata) -> Option<Nfsstat3> {
    if meta.is_dir() {
        Some(Nfsstat3::Nfs3errIsdir)
    } else if !meta.is_file() {
        Some(Nfsstat3::Nfs3errInval)
    } else {
        None
    }
}

/// Sets the attributes `s` asks for on the file `fd` holds, whose attributes were `meta`
/// (SETATTR, and the initial attributes of CREATE and MKDIR); `truncate` sets a regular
/// file's size (through a descriptor open for writing).
///
/// # Errors
///
/// The status of the first change that failed; NFS3ERR_INVAL for any change to a symbolic
/// link (it would apply to what the link points to).
pub(crate) fn set_attributes(
    fd: BorrowedFd<'_>,
    meta: &Metadata,
    s: &Sattr3,
    truncate: impl FnOnce(u64) -> std::io::Result<()>,
) -> Result<(), Nfsstat3> {
    let times = !matches!(s.atime, SetAtime::Default { discriminant: TimeHow::DontChange })
        || !matches!(s.mtime, SetMtime::Default { discriminant: TimeHow::DontChange });
    let any = matches!(s.mode, SetMode3::True(_))
        || matches!(s.uid, SetUid3::True(_))
        || matches!(s.gid, SetGid3::True(_))
        || matches!(s.size, SetSize3::True(_))
        || times;
    if !any {
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        return Err(Nfsstat3::Nfs3errInval);
    }
    let io = |e: std::io::Error| status(&e);
    if let SetMode3::True(mode) = s.mode {
        fsat::chmod(fd, mode).map_err(io)?;
    }
    let uid = if let SetUid3::True(uid) = s.uid { Some(uid) } else { None };
    let gid = if let SetGid3::True(gid) = s.gid { Some(gid) } else { None };
    if uid.is_some() || gid.is_some() {
        fsat::chown(fd, uid, gid).map_err(io)?;
    }
    if let SetSize3::True(size) = s.size {
        if let Some(why) = not_regular(meta) {
            return Err(why);
        }
        truncate(size).map_err(io)?;
    }
    if times {
        set_times(fd, s.atime, s.mtime).map_err(io)?;
    }
    Ok(())
}

/// `utimensat(2)` on the file `fd` holds (never a symbolic link: [`set_attributes`] refuses).
fn set_times(fd: BorrowedFd<'_>, atime: SetAtime, mtime: SetMtime) -> std::io::Result<()> {
    let spec = |t: Option<Nfstime3>, server: bool| match (t, server) {
        (Some(t), _) => libc::timespec { tv_sec: t.seconds.into(), tv_nsec: t.nseconds.min(999_999_999).into() },
        (None, true) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        (None, false) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
    };
    let a = match atime {
        SetAtime::SetToClientTime(t) => spec(Some(t), false),
        SetAtime::Default { discriminant } => spec(None, discriminant == TimeHow::SetToServerTime),
    };
    let m = match mtime {
        SetMtime::SetToClientTime(t) => spec(Some(t), false),
        SetMtime::Default { discriminant } => spec(None, discriminant == TimeHow::SetToServerTime),
    };
    fsat::set_times(fd, &[a, m])
}

impl Nfs3 {
    pub(super) fn setattr(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: SETATTR3args = args(a)?;
        let Some(f) = self.file(a.object.data, out, NO_WCC) else { return Ok(()) };
        // The guard (RFC 1813 section 3.3.2): change nothing unless the ctime is the client's.
        if let Sattrguard3::True(ctime) = a.guard {
            if ctime != time(f.meta.ctime(), f.meta.ctime_nsec()) {
                return out.fail(Nfsstat3::Nfs3errNotSync, &wcc(Some(&f.meta), &f.fd));
            }
        }
        let truncate = |size| self.handles.reopen(&f, access(true))?.set_len(size);
        match set_attributes(f.fd.as_fd(), &f.meta, &a.new_attributes, truncate) {
            Ok(()) => out.results(&SETATTR3res::Nfs3Ok(SETATTR3resok { obj_wcc: wcc(Some(&f.meta), &f.fd) })),
            Err(why) => out.fail(why, &wcc(Some(&f.meta), &f.fd)),
        }
    }

    /// READLINK (RFC 1813 section 3.3.5): the text of a symbolic link, as stored. Anything
    /// else is NFS3ERR_INVAL; a target that is not UTF-8 (`nfspath3` is a string; only made
    /// behind the server's back) is NFS3ERR_IO.
    pub(super) fn readlink(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READLINK3args = args(a)?;
        let Some(f) = self.file(a.symlink.data, out, PostOpAttr::False) else { return Ok(()) };
        let attrs = PostOpAttr::True(fattr(&f.meta));
        if !f.meta.file_type().is_symlink() {
            return out.fail(Nfsstat3::Nfs3errInval, &attrs);
        }
        match fsat::readlink(f.fd.as_fd()) {
            Ok(target) => match target.into_string() {
                Ok(text) => out.results(&READLINK3res::Nfs3Ok(READLINK3resok {
                    symlink_attributes: attrs,
                    data: Nfspath3(&text),
                })),
                Err(_) => out.fail(Nfsstat3::Nfs3errIo, &attrs),
            },
            Err(e) => out.fail(status(&e), &attrs),
        }
    }

    pub(super) fn read(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READ3args = args(a)?;
        let Some(f) = self.file(a.file.data, out, PostOpAttr::False) else { return Ok(()) };
        if let Some(why) = not_regular(&f.meta) {
            return out.fail(why, &PostOpAttr::True(fattr(&f.meta)));
        }
        let resok = |meta: &Metadata, n: usize| {
            READ3res::Nfs3Ok(READ3resok {
                file_attributes: PostOpAttr::True(fattr(meta)),
                count: n as u32,
                eof: a.offset.saturating_add(n as u64) >= meta.size(),
                data: &[],
            })
        };
        // Read straight into the reply (no buffer of the data's own, no copy of it).
        let max = a.count.min(MAX_IO) as usize;
        let read = out.results_read_in_place(&resok(&f.meta, 0), max, |data| {
            let file = self.handles.reopen(&f, access(false))?;
            let mut n = 0;
            while n < data.len() {
                match file.read_at(&mut data[n..], a.offset.saturating_add(n as u64)) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let meta = file.metadata()?;
            Ok((n, resok(&meta, n)))
        });
        match read {
            Ok(()) => Ok(()),
            Err(e) => out.fail(status(&e), &PostOpAttr::True(fattr(&f.meta))),
        }
    }

    pub(super) fn write(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: WRITE3args = args(a)?;
        let Some(f) = self.file(a.file.data, out, NO_WCC) else { return Ok(()) };
        let before = Some(&f.meta);
        if let Some(why) = not_regular(&f.meta) {
            return out.fail(why, &wcc(before, &f.fd));
        }
        // RFC 1813 section 3.3.7: `count` bytes of `data` are written; data shorter than the
        // count is an invalid argument, not garbage (it decoded).
        let Some(data) = a.data.get(..a.count as usize) else {
            return out.fail(Nfsstat3::Nfs3errInval, &wcc(before, &f.fd));
        };
        match a.offset.checked_add(data.len() as u64) {
            Some(end) if end <= i64::MAX as u64 => {}
            _ => return out.fail(Nfsstat3::Nfs3errFbig, &wcc(before, &f.fd)),
        }
        let stable = a.stable != StableHow::Unstable;
        let written = self.handles.reopen(&f, access(true)).and_then(|file| {
            file.write_all_at(data, a.offset)?;
            if stable {
                file.sync_data()?;
            }
            Ok(())
        });
        match written {
            Ok(()) => out.results(&WRITE3res::Nfs3Ok(WRITE3resok {
                file_wcc: wcc(before, &f.fd),
                count: a.count,
                committed: if stable { StableHow::FileSync } else { StableHow::Unstable },
                verf: Writeverf3(&self.write_verifier),
            })),
            Err(e) => out.fail(status(&e), &wcc(before, &f.fd)),
        }
    }

    pub(super) fn commit(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: COMMIT3args = args(a)?;
        let Some(f) = self.file(a.file.data, out, NO_WCC) else { return Ok(()) };
        if let Some(why) = not_regular(&f.meta) {
            return out.fail(why, &wcc(Some(&f.meta), &f.fd));
        }
        match self.handles.reopen(&f, access(false)).and_then(|file| file.sync_all()) {
            Ok(()) => out.results(&COMMIT3res::Nfs3Ok(COMMIT3resok {
                file_wcc: wcc(Some(&f.meta), &f.fd),
                verf: Writeverf3(&self.write_verifier),
            })),
            Err(e) => out.fail(status(&e), &wcc(Some(&f.meta), &f.fd)),
        }
    }
}
