//! File attributes (RFC 1813 section 2.6: `fattr3`, `wcc_data`) from `std::fs::Metadata`,
//! and `nfsstat3` from the `std::io::Error` of a failed file system call.

use std::fs::{FileType, Metadata};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use crate::xdr::{Fattr3, Ftype3, Nfsstat3, Nfstime3, PostOpAttr, PreOpAttr, Specdata3, WccAttr, WccData};

/// The NFS type of a file (RFC 1813 section 2.6, `ftype3`).
pub fn ftype(t: FileType) -> Ftype3 {
    if t.is_dir() {
        Ftype3::Nf3dir
    } else if t.is_symlink() {
        Ftype3::Nf3lnk
    } else if t.is_block_device() {
        Ftype3::Nf3blk
    } else if t.is_char_device() {
        Ftype3::Nf3chr
    } else if t.is_socket() {
        Ftype3::Nf3sock
    } else if t.is_fifo() {
        Ftype3::Nf3fifo
    } else {
        Ftype3::Nf3reg
    }
}

/// A time as `nfstime3`: seconds since the epoch as an unsigned 32-bit count (RFC 1813
/// section 2.5), so times before 1970 or after 2106 are clamped.
pub fn time(seconds: i64, nanos: i64) -> Nfstime3 {
    Nfstime3 { seconds: seconds.clamp(0, i64::from(u32::MAX)) as u32, nseconds: nanos.clamp(0, 999_999_999) as u32 }
}

/// The `fattr3` of a file.
pub fn fattr(m: &Metadata) -> Fattr3 {
    // Linux's dev_t: the major number in bits 8-19 and 32-43, the minor in 0-7 and 20-31.
    let rdev = m.rdev();
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    Fattr3 {
        r#type: ftype(m.file_type()),
        mode: m.mode() & 0o7777,
        nlink: u32::try_from(m.nlink()).unwrap_or(u32::MAX),
        uid: m.uid(),
        gid: m.gid(),
        size: m.size(),
        used: m.blocks().saturating_mul(512),
        rdev: Specdata3 { specdata1: major as u32, specdata2: minor as u32 },
        fsid: m.dev(),
        fileid: m.ino(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
    }
}

/// The attributes of the file `fd` holds now, if they can be read (`post_op_attr`).
pub fn post_op(fd: impl AsFd) -> PostOpAttr {
    match crate::fsat::metadata(fd.as_fd()) {
        Ok(m) => PostOpAttr::True(fattr(&m)),
        Err(_) => PostOpAttr::False,
    }
}

/// The `pre_op_attr` of a file before an operation.
pub fn pre_op(m: Option<&Metadata>) -> PreOpAttr {
    match m {
        Some(m) => PreOpAttr::True(WccAttr {
            size: m.size(),
            mtime: time(m.mtime(), m.mtime_nsec()),
            ctime: time(m.ctime(), m.ctime_nsec()),
        }),
        None => PreOpAttr::False,
    }
}

/// Weak cache consistency data (RFC 1813 section 2.6, `wcc_data`): the attributes `before`
/// an operation and those of the file `fd` holds after it.
pub fn wcc(before: Option<&Metadata>, fd: impl AsFd) -> WccData {
    WccData { before: pre_op(before), after: post_op(fd) }
}

/// No attributes either side (for a handle that did not resolve).
pub const NO_WCC: WccData = WccData { before: PreOpAttr::False, after: PostOpAttr::False };

/// The `nfsstat3` closest to why a file system call failed (RFC 1813 section 2.6); anything
/// without a closer match is NFS3ERR_IO.
pub fn status(e: &std::io::Error) -> Nfsstat3 {
    match e.raw_os_error() {
        Some(libc::EPERM) => Nfsstat3::Nfs3errPerm,
        Some(libc::ENOENT) => Nfsstat3::Nfs3errNoent,
        Some(libc::ENXIO) => Nfsstat3::Nfs3errNxio,
        Some(libc::EACCES) => Nfsstat3::Nfs3errAcces,
        Some(libc::EEXIST) => Nfsstat3::Nfs3errExist,
        Some(libc::EXDEV) => Nfsstat3::Nfs3errXdev,
        Some(libc::ENODEV) => Nfsstat3::Nfs3errNodev,
        Some(libc::ENOTDIR) => Nfsstat3::Nfs3errNotdir,
        Some(libc::EISDIR) => Nfsstat3::Nfs3errIsdir,
        Some(libc::EINVAL | libc::ELOOP) => Nfsstat3::Nfs3errInval,
        Some(libc::EFBIG) => Nfsstat3::Nfs3errFbig,
        Some(libc::ENOSPC) => Nfsstat3::Nfs3errNospc,
        Some(libc::EROFS) => Nfsstat3::Nfs3errRofs,
        Some(libc::EMLINK) => Nfsstat3::Nfs3errMlink,
        Some(libc::ENAMETOOLONG) => Nfsstat3::Nfs3errNametoolong,
        Some(libc::ENOTEMPTY) => Nfsstat3::Nfs3errNotempty,
        Some(libc::EDQUOT) => Nfsstat3::Nfs3errDquot,
        Some(libc::ESTALE) => Nfsstat3::Nfs3errStale,
        _ => Nfsstat3::Nfs3errIo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_their_nfs_status() {
        let e = std::fs::symlink_metadata("/nonexistent/nfs3-server").unwrap_err();
        assert_eq!(status(&e), Nfsstat3::Nfs3errNoent);
        assert_eq!(status(&std::io::Error::from_raw_os_error(libc::ENOTEMPTY)), Nfsstat3::Nfs3errNotempty);
        assert_eq!(status(&std::io::Error::other("no errno")), Nfsstat3::Nfs3errIo);
    }

    #[test]
    fn a_directory_has_directory_attributes() {
        let m = std::fs::symlink_metadata(std::env::temp_dir()).unwrap();
        let a = fattr(&m);
        assert_eq!((a.r#type, a.fileid, a.fsid), (Ftype3::Nf3dir, m.ino(), m.dev()));
    }
}
