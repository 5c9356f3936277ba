//! File system calls relative to directory file descriptors, so that no path is resolved
//! again by the kernel after this server checked it (see [`crate::handles`]).
//!
//! Every path below the export root is opened with `openat2(2)` and `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (Linux 5.6 or later): no component may be a
//! symbolic link (ELOOP), `..` may not climb above the directory it starts from (EXDEV), and
//! `/proc`'s magic links are refused. The other calls take a directory's descriptor and one
//! name that [`crate::handles::check_name`] passed (never `..`, never a `/`), and follow no
//! symbolic link at the name, or they act on an open descriptor itself.
//!
//! Two calls have no descriptor-only form that every supported kernel has: `chmod` of an
//! `O_PATH` descriptor and, without `CAP_DAC_READ_SEARCH`, `linkat` of one. They go through
//! `/proc/self/fd/N`, which the kernel resolves to the very file the descriptor holds (not to
//! a path that could have changed): what glibc's `fchmodat(AT_SYMLINK_NOFOLLOW)` does too.

use std::ffi::{CString, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// What every `openat2` here resolves with.
const RESOLVE: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// A path or name as a C string; one holding a NUL is EINVAL.
fn cstr(p: impl AsRef<std::ffi::OsStr>) -> io::Result<CString> {
    CString::new(p.as_ref().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A libc return value: -1 is the error in `errno`.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The `/proc/self/fd/N` path of a descriptor.
fn proc_path(fd: BorrowedFd<'_>) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a formatted number")
}

/// Opens the directory at `path` (absolute, resolved normally: the export root given on the
/// command line) as an `O_PATH` descriptor.
///
/// # Errors
///
/// `open(2)`'s: the path does not exist or is not a directory.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: `c` is NUL-terminated; open has no other pointer argument.
    let fd = cvt(unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) })?;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `relative` beneath the directory `dir` with `openat2(2)`: no symbolic link in any
/// component (the last one included, unless `flags` holds `O_PATH | O_NOFOLLOW`: then a final
/// symbolic link is opened itself), no `..` above `dir`, no magic link. An empty path is
/// `dir` itself. `mode` is used only with `O_CREAT`. `O_CLOEXEC` is always added.
///
/// # Errors
///
/// ELOOP for a symbolic link on the way, EXDEV for a path leaving `dir`, ENOSYS where the
/// kernel has no `openat2` (before 5.6), and `open(2)`'s own.
pub fn open_beneath(dir: BorrowedFd<'_>, relative: &Path, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let c = if relative.as_os_str().is_empty() { cstr(".")? } else { cstr(relative)? };
    let mut how: libc::open_how = {
        // SAFETY: open_how is plain integers, for which all zeroes is a valid value.
        unsafe { std::mem::zeroed() }
    };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 { u64::from(mode & 0o7777) } else { 0 };
    how.resolve = RESOLVE;
    for _ in 0..8 {
        // SAFETY: `c` is NUL-terminated and `how` a valid open_how whose size is passed with
        // it; the kernel reads both and writes nothing.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if r >= 0 {
            let fd = libc::c_int::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
            // SAFETY: the kernel just returned this descriptor; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        // EAGAIN: a rename raced the resolution (openat2(2) says to retry); EINTR likewise.
        if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return Err(e);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// Checks that the kernel has `openat2` with the resolve flags this module uses, by opening
/// `dir` through it.
///
/// # Errors
///
/// Unsupported, with a message naming the kernel version needed, where it has none (ENOSYS)
/// or refuses the flags (EINVAL); `openat2`'s other errors as they are.
pub fn check_openat2(dir: BorrowedFd<'_>) -> io::Result<()> {
    match open_beneath(dir, Path::new(""), libc::O_PATH | libc::O_DIRECTORY, 0) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "openat2(2) with RESOLVE_BENEATH is unavailable ({e}): this server needs Linux 5.6 or later \
                 to keep every file operation beneath the export root"
            ),
        )),
        Err(e) => Err(e),
    }
}

/// Opens the entry `name` of the directory `dir` without following a symbolic link at it
/// (`O_NOFOLLOW` added: with `O_PATH` a symbolic link is opened itself, otherwise it is
/// ELOOP).
///
/// # Errors
///
/// As [`open_beneath`].
pub fn open_at(dir: BorrowedFd<'_>, name: &str, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    if name.is_empty() || name == ".." || name.contains('/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    open_beneath(dir, Path::new(name), flags | libc::O_NOFOLLOW, mode)
}

/// The attributes of the file `fd` holds (`fstat`; an `O_PATH` descriptor of a symbolic link
/// gives the link's own).
///
/// # Errors
///
/// `fstat(2)`'s.
pub fn metadata(fd: BorrowedFd<'_>) -> io::Result<Metadata> {
    // SAFETY: `fd` is open for the borrow's lifetime; ManuallyDrop keeps the File from closing
    // it, so ownership stays with the borrowed descriptor.
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd.as_raw_fd()) });
    file.metadata()
}

/// The attributes of the entry `name` of `dir`, not following a symbolic link at it.
///
/// # Errors
///
/// As [`open_at`] and [`metadata`].
pub fn stat_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<Metadata> {
    metadata(open_at(dir, name, libc::O_PATH, 0)?.as_fd())
}

/// `mkdirat(2)`: a directory `name` in `dir`.
///
/// # Errors
///
/// `mkdirat(2)`'s.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &str, mode: u32) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: `c` is NUL-terminated; `dir` is an open descriptor.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), (mode & 0o7777) as libc::mode_t) }).map(drop)
}

/// `symlinkat(2)`: a symbolic link `name` in `dir` holding `target` (stored, not resolved).
///
/// # Errors
///
/// `symlinkat(2)`'s; EINVAL for a NUL in either.
pub fn symlink_at(target: &str, dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let (t, n) = (cstr(target)?, cstr(name)?);
    // SAFETY: both strings are NUL-terminated; `dir` is an open descriptor.
    cvt(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) }).map(drop)
}

/// `unlinkat(2)`: removes the entry `name` of `dir`, a directory (`AT_REMOVEDIR`, ENOTDIR
/// for anything else) or not (EISDIR for a directory).
///
/// # Errors
///
/// `unlinkat(2)`'s.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &str, directory: bool) -> io::Result<()> {
    let c = cstr(name)?;
    let flags = if directory { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `c` is NUL-terminated; `dir` is an open descriptor.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
}

/// `renameat(2)`: the entry `from` of `from_dir` becomes the entry `to` of `to_dir`.
///
/// # Errors
///
/// `renameat(2)`'s.
pub fn rename_at(from_dir: BorrowedFd<'_>, from: &str, to_dir: BorrowedFd<'_>, to: &str) -> io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: both names are NUL-terminated; both descriptors are open.
    cvt(unsafe { libc::renameat(from_dir.as_raw_fd(), f.as_ptr(), to_dir.as_raw_fd(), t.as_ptr()) }).map(drop)
}

/// A new hard link `name` in `dir` to the file `file` holds (a symbolic link is linked
/// itself): `linkat(file, "", AT_EMPTY_PATH)`, or, where that needs a capability this process
/// lacks (ENOENT), `linkat` of `/proc/self/fd/N`.
///
/// # Errors
///
/// `linkat(2)`'s.
pub fn link_at(file: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let n = cstr(name)?;
    // SAFETY: the names are NUL-terminated; the descriptors are open.
    let r =
        cvt(unsafe { libc::linkat(file.as_raw_fd(), c"".as_ptr(), dir.as_raw_fd(), n.as_ptr(), libc::AT_EMPTY_PATH) });
    match r {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let p = proc_path(file);
            // SAFETY: as above; the magic link names the descriptor's own file.
            let r = unsafe {
                libc::linkat(libc::AT_FDCWD, p.as_ptr(), dir.as_raw_fd(), n.as_ptr(), libc::AT_SYMLINK_FOLLOW)
            };
            cvt(r).map(drop)
        }
        r => r.map(drop),
    }
}

/// The text of the symbolic link `fd` holds (an `O_PATH` descriptor of it).
///
/// # Errors
///
/// EINVAL if it is not a symbolic link; `readlinkat(2)`'s.
pub fn readlink(fd: BorrowedFd<'_>) -> io::Result<OsString> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `buf` is writable for its length, which is passed; the name is NUL-terminated.
    let n = unsafe { libc::readlinkat(fd.as_raw_fd(), c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    buf.truncate(n);
    Ok(OsString::from_vec(buf))
}

/// Sets the permission bits of the file `fd` holds: `fchmod`, or for an `O_PATH` descriptor
/// (EBADF) `chmod` of `/proc/self/fd/N`. Never call it for a symbolic link.
///
/// # Errors
///
/// `chmod(2)`'s.
pub fn chmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let mode = (mode & 0o7777) as libc::mode_t;
    // SAFETY: `fd` is an open descriptor.
    match cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }) {
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
            let p = proc_path(fd);
            // SAFETY: `p` is NUL-terminated; it names the descriptor's own file.
            cvt(unsafe { libc::chmod(p.as_ptr(), mode) }).map(drop)
        }
        r => r.map(drop),
    }
}

/// Sets the owner and/or group of the file `fd` holds (`fchownat(fd, "", AT_EMPTY_PATH)`; a
/// symbolic link itself).
///
/// # Errors
///
/// `fchownat(2)`'s.
pub fn chown(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
    let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
    // SAFETY: the name is NUL-terminated; `fd` is an open descriptor.
    cvt(unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), u, g, flags) }).map(drop)
}

/// Sets the access and modification times of the file `fd` holds (`utimensat(fd, "",
/// AT_EMPTY_PATH)`, or of `/proc/self/fd/N` where the kernel refuses that: EINVAL). Never call
/// it for a symbolic link.
///
/// # Errors
///
/// `utimensat(2)`'s.
pub fn set_times(fd: BorrowedFd<'_>, times: &[libc::timespec; 2]) -> io::Result<()> {
    // SAFETY: the name is NUL-terminated, `times` holds the two timespecs utimensat reads.
    let r = cvt(unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), times.as_ptr(), libc::AT_EMPTY_PATH) });
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let p = proc_path(fd);
            // SAFETY: as above; `p` names the descriptor's own file.
            cvt(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), 0) }).map(drop)
        }
        r => r.map(drop),
    }
}

/// `fstatvfs(3)` of the file system holding the file `fd` holds.
///
/// # Errors
///
/// `fstatvfs(3)`'s.
pub fn statvfs(fd: BorrowedFd<'_>) -> io::Result<libc::statvfs> {
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `s` points to writable memory of the struct's size; fstatvfs fills it entirely
    // when it returns 0.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), s.as_mut_ptr()) })?;
    // SAFETY: initialized by the successful call above.
    Ok(unsafe { s.assume_init() })
}

/// The entries of the directory `dir` (an `O_PATH` descriptor is reopened for reading
/// through `.`), without `.` and `..`, with their inode numbers, in directory order.
///
/// # Errors
///
/// `openat2`'s, `fdopendir(3)`'s and `readdir(3)`'s.
pub fn read_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<(OsString, u64)>> {
    let mut entries = Vec::new();
    read_dir_from(dir, 0, |name, ino, _| {
        entries.push((OsString::from_vec(name.to_vec()), ino));
        true
    })?;
    Ok(entries)
}

/// Reads the entries of the directory `dir` (as [`read_dir`]) from the position `cookie`
/// (0: the start; otherwise a cookie an earlier call handed out), handing each to `each` with
/// its inode number and its own cookie (the position after it: `seekdir(3)`'s, the directory's
/// `d_off`, as Linux's nfsd hands out) until `each` returns false. Returns whether the end was
/// reached. What it costs is the entries it hands out, not the directory's size: a listing
/// resumes where its cookie says, without reading what comes before.
///
/// # Errors
///
/// `openat2`'s, `fdopendir(3)`'s and `readdir(3)`'s (a cookie that names no position can fail
/// with EINVAL, or resume at the next position: the file system's choice).
pub fn read_dir_from(
    dir: BorrowedFd<'_>,
    cookie: u64,
    mut each: impl FnMut(&[u8], u64, u64) -> bool,
) -> io::Result<bool> {
    let fd = open_beneath(dir, Path::new("."), libc::O_RDONLY | libc::O_DIRECTORY, 0)?.into_raw_fd();
    // SAFETY: `fd` is an open directory descriptor; on success the DIR owns it.
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `fd` is still ours to close.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        return Err(e);
    }
    if cookie != 0 {
        // SAFETY: `stream` is an open DIR used by this thread alone; any position is accepted
        // (a meaningless one makes the next readdir fail or resume at the next entry).
        unsafe { libc::seekdir(stream, cookie as libc::c_long) };
    }
    let result = loop {
        // SAFETY: errno is this thread's; readdir sets it only on error, so it is cleared first.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `stream` is an open DIR used by this thread alone.
        let e = unsafe { libc::readdir(stream) };
        if e.is_null() {
            let err = io::Error::last_os_error();
            break if err.raw_os_error() == Some(0) { Ok(true) } else { Err(err) };
        }
        // SAFETY: a non-null entry is valid until the next readdir on `stream`; d_name is
        // NUL-terminated within it.
        let (name, ino, next) = unsafe { (std::ffi::CStr::from_ptr((*e).d_name.as_ptr()), (*e).d_ino, (*e).d_off) };
        let name = name.to_bytes();
        if name != b"." && name != b".." && !each(name, ino, next as u64) {
            break Ok(false);
        }
    };
    // SAFETY: `stream` is open and not used after this; closedir closes `fd` with it.
    unsafe { libc::closedir(stream) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::status;
    use crate::xdr::Nfsstat3;
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("nfs3-fsat-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("export/sub")).unwrap();
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        std::fs::write(dir.join("export/sub/f"), b"in").unwrap();
        std::fs::write(dir.join("outside/f"), b"out").unwrap();
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("export/abs")).unwrap();
        std::os::unix::fs::symlink("sub", dir.join("export/rel")).unwrap();
        dir
    }

    #[test]
    fn a_normal_path_opens_and_is_the_file() {
        let dir = scratch("normal");
        let root = open_dir(&dir.join("export")).unwrap();
        check_openat2(root.as_fd()).unwrap();
        let fd = open_beneath(root.as_fd(), Path::new("sub/f"), libc::O_RDONLY, 0).unwrap();
        let want = std::fs::metadata(dir.join("export/sub/f")).unwrap();
        let got = metadata(fd.as_fd()).unwrap();
        assert_eq!((got.dev(), got.ino()), (want.dev(), want.ino()));
        let sub = open_beneath(root.as_fd(), Path::new("sub"), libc::O_PATH | libc::O_DIRECTORY, 0).unwrap();
        assert_eq!(stat_at(sub.as_fd(), "f").unwrap().ino(), want.ino());
        let names: Vec<_> = read_dir(sub.as_fd()).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["f"]);
        // The root itself, as the empty path.
        let r = open_beneath(root.as_fd(), Path::new(""), libc::O_PATH, 0).unwrap();
        assert!(metadata(r.as_fd()).unwrap().is_dir());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_component_is_refused() {
        let dir = scratch("symlink");
        let root = open_dir(&dir.join("export")).unwrap();
        for path in ["abs/f", "rel/f", "abs", "rel"] {
            let e = open_beneath(root.as_fd(), Path::new(path), libc::O_RDONLY, 0).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{path}");
            assert_eq!(status(&e), Nfsstat3::Nfs3errInval, "{path}");
        }
        // O_PATH | O_NOFOLLOW opens a final symbolic link itself, never what it points to.
        let l = open_at(root.as_fd(), "abs", libc::O_PATH, 0).unwrap();
        assert!(metadata(l.as_fd()).unwrap().file_type().is_symlink());
        assert_eq!(readlink(l.as_fd()).unwrap(), dir.join("outside").into_os_string());
        // A creation through a link in the directory's place fails, and nothing is made.
        let e = open_beneath(root.as_fd(), Path::new("abs/new"), libc::O_WRONLY | libc::O_CREAT, 0o644).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(!dir.join("outside/new").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dot_dot_and_absolute_paths_are_refused() {
        let dir = scratch("dotdot");
        let root = open_dir(&dir.join("export")).unwrap();
        for path in ["..", "../outside/f", "sub/../../outside/f", "/etc/passwd"] {
            let e = open_beneath(root.as_fd(), Path::new(path), libc::O_RDONLY, 0).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{path}");
            assert_eq!(status(&e), Nfsstat3::Nfs3errXdev, "{path}");
        }
        // One name only, for the *at wrappers.
        for name in ["..", "", "sub/f"] {
            assert_eq!(open_at(root.as_fd(), name, libc::O_PATH, 0).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
