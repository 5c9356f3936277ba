//! File handles (RFC 1813 section 2.3.3: "opaque data<NFS3_FHSIZE>", at most 64 bytes that
//! only the server interprets) and the table that maps them to paths under the export root.
//!
//! A handle is 24 bytes: this server run's 8-byte generation, then the file's device and
//! inode numbers. The table maps (device, inode) to the paths, relative to the root, where the
//! file was seen (a file with several hard links may be known by several, the latest first, at
//! most [`MAX_PATHS`]): it learns a path on LOOKUP, CREATE, MKDIR, SYMLINK, LINK and
//! READDIRPLUS, and forgets it on REMOVE and RMDIR. RENAME moves the path of the renamed file
//! and rewrites the paths of everything known under a renamed directory
//! ([`Handles::renamed`]); the paths of a file a RENAME replaced are forgotten. It only ever
//! holds files that exist under the root, so a client cannot grow it beyond the export's own
//! size.
//!
//! Hard links: a REMOVE of one link forgets that path only. While another path of the file
//! is known (made by LINK, or seen by LOOKUP or READDIRPLUS), its handle keeps resolving
//! through it. If none is known, the handle is NFS3ERR_STALE until a LOOKUP (or READDIRPLUS)
//! of a remaining link relearns a path: the Linux client does that itself on ESTALE, so `cat`
//! of the other link works.
//!
//! Resolving a handle checks everything a client could get wrong or forge: a handle of the
//! wrong length is NFS3ERR_BADHANDLE ("failed internal consistency checks"); one from an
//! earlier run (another generation), of a file never seen, or whose paths now all hold other
//! files (removed, renamed behind the server's back) is NFS3ERR_STALE. Paths are only ever
//! built from the root and names checked by [`check_name`], and a handle only names a
//! directory to look in when it is one (not a symbolic link to one), so no handle or name
//! reaches outside the root.
//!
//! No path is resolved twice. The table holds one `O_PATH` descriptor of the export root, and
//! a handle resolves by opening its path beneath it with `openat2(2)` (`RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, [`crate::fsat`]): a symbolic link anywhere on
//! the path, or a way out of the root, fails the open instead of being followed. The
//! descriptor's own (device, inode) is then compared with the handle's, and every procedure
//! works through that descriptor ([`Resolved::fd`]): `*at` calls with one checked name in a
//! directory, or the opened file itself. A client that renames a checked directory away and
//! puts a symbolic link to `/etc` in its place (two calls racing, on one connection or
//! several) changes nothing for a call already past the check: the descriptor still holds the
//! directory that was checked, wherever it now is. Without `openat2` (Linux before 5.6) the
//! table cannot be made ([`Handles::new`] fails) rather than falling back to paths.
//!
//! The paths themselves are remembered, not descriptors: descriptors for every file seen
//! would hold open what a client removed and could exhaust the process's descriptor limit.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::fsat;
use crate::xdr::Nfsstat3;

/// Bytes in every handle this server makes.
pub const HANDLE_LEN: usize = 24;

/// One file handle as it goes on the wire.
pub type FileHandle = [u8; HANDLE_LEN];

/// The longest name a directory entry may have (PATHCONF's `name_max`).
pub const NAME_MAX: usize = 255;

/// The most paths (hard links) remembered for one file; beyond it the oldest is forgotten.
pub const MAX_PATHS: usize = 8;

/// A file, identified as the kernel does: device and inode number.
type FileId = (u64, u64);

/// A handle resolved to a file that exists now.
#[derive(Debug)]
pub struct Resolved {
    /// The path relative to the export root (empty for the root itself) where it was found.
    pub relative: PathBuf,
    /// Its attributes, not following a final symbolic link.
    pub meta: Metadata,
    /// An `O_PATH` descriptor of the file itself (of a symbolic link, the link): what every
    /// operation on it goes through, so that it reaches this file even if its path changes.
    pub fd: OwnedFd,
}

/// The export root and the handles of the files seen under it.
#[derive(Debug)]
pub struct Handles {
    root: PathBuf,
    /// An `O_PATH` descriptor of the root: every path is opened beneath it.
    root_fd: OwnedFd,
    generation: [u8; 8],
    known: Mutex<HashMap<FileId, Vec<PathBuf>>>,
}

impl Handles {
    /// The table for the directory `root` (made absolute and free of symbolic links first),
    /// with handles of generation `generation` ([`crate::boot_verifier`]).
    ///
    /// # Errors
    ///
    /// `root` cannot be canonicalized or opened, or is not a directory; the kernel has no
    /// `openat2(2)` (Linux before 5.6: [`crate::fsat::check_openat2`]).
    pub fn new(root: &Path, generation: [u8; 8]) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let meta = std::fs::metadata(&root)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the export root {} is not a directory", root.display()),
            ));
        }
        let root_fd = fsat::open_dir(&root)?;
        fsat::check_openat2(root_fd.as_fd())?;
        let meta = fsat::metadata(root_fd.as_fd())?;
        let known = Mutex::new(HashMap::from([(id(&meta), vec![PathBuf::new()])]));
        Ok(Handles { root, root_fd, generation, known })
    }

    /// The export root, absolute.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root's handle (what MOUNT's MNT answers).
    ///
    /// # Errors
    ///
    /// The root can no longer be read.
    pub fn root_handle(&self) -> std::io::Result<FileHandle> {
        Ok(self.make(&fsat::metadata(self.root_fd.as_fd())?))
    }

    /// The handle of the file at `relative` (relative to the root) whose attributes are
    /// `meta`, remembered (as its latest path) so that it resolves.
    pub fn remember(&self, relative: &Path, meta: &Metadata) -> FileHandle {
        let mut known = self.lock();
        let paths = known.entry(id(meta)).or_default();
        paths.retain(|p| p != relative);
        paths.insert(0, relative.to_path_buf());
        paths.truncate(MAX_PATHS);
        drop(known);
        self.make(meta)
    }

    /// Forgets the path `relative` of the file `meta` describes (its other hard links, if
    /// known, stay).
    pub fn forget(&self, relative: &Path, meta: &Metadata) {
        let mut known = self.lock();
        if let Some(paths) = known.get_mut(&id(meta)) {
            paths.retain(|p| p != relative);
            if paths.is_empty() {
                known.remove(&id(meta));
            }
        }
    }

    /// What a successful `rename(from, to)` (paths relative to the root) changes: the path
    /// `from`, and every known path under it (the entries of a renamed directory, at any
    /// depth), now starts with `to`; whatever was known at `to` or under it (a file or empty
    /// directory the rename replaced) is forgotten there. `from` and `to` must differ.
    ///
    /// This walks the whole table: a rename costs time in the number of files known.
    pub fn renamed(&self, from: &Path, to: &Path) {
        if from.as_os_str().is_empty() || to.as_os_str().is_empty() || from == to {
            return; // the root is never renamed; every path starts with its empty path
        }
        let mut known = self.lock();
        known.retain(|_, paths| {
            paths.retain(|p| !p.starts_with(to));
            for p in paths.iter_mut() {
                if let Ok(rest) = p.strip_prefix(from) {
                    *p = if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) };
                }
            }
            !paths.is_empty()
        });
    }

    /// The file `handle` names, if it still exists where it was seen.
    ///
    /// # Errors
    ///
    /// NFS3ERR_BADHANDLE for a handle this server cannot have made; NFS3ERR_STALE for one of
    /// another run, of a file never seen, or of a file at none of its known paths.
    pub fn resolve(&self, handle: &[u8]) -> Result<Resolved, Nfsstat3> {
        let handle: &FileHandle = handle.try_into().map_err(|_| Nfsstat3::Nfs3errBadhandle)?;
        if handle[..8] != self.generation {
            return Err(Nfsstat3::Nfs3errStale);
        }
        let word = |at: usize| u64::from_be_bytes(handle[at..at + 8].try_into().expect("8 bytes"));
        let wanted = (word(8), word(16));
        let paths = self.lock().get(&wanted).cloned().ok_or(Nfsstat3::Nfs3errStale)?;
        let mut gone = Vec::new();
        let mut found = None;
        for relative in paths {
            // O_PATH | O_NOFOLLOW: a symbolic link's handle resolves to the link itself; a link
            // on the way to it fails the open (ELOOP), as does any path out of the root.
            let opened = fsat::open_beneath(self.root_fd.as_fd(), &relative, libc::O_PATH | libc::O_NOFOLLOW, 0)
                .and_then(|fd| Ok((fsat::metadata(fd.as_fd())?, fd)));
            match opened {
                Ok((meta, fd)) if id(&meta) == wanted => {
                    found = Some(Resolved { relative, meta, fd });
                    break;
                }
                _ => gone.push(relative),
            }
        }
        if !gone.is_empty() {
            let mut known = self.lock();
            if let Some(paths) = known.get_mut(&wanted) {
                paths.retain(|p| !gone.contains(p));
                if paths.is_empty() {
                    known.remove(&wanted);
                }
            }
        }
        found.ok_or(Nfsstat3::Nfs3errStale)
    }

    /// Opens the file `r` resolved to with `flags` (`O_RDONLY`, `O_RDWR`, ...; `O_NOFOLLOW`
    /// added) beneath the root, as [`Handles::resolve`] does, and checks that it is still the
    /// same file.
    ///
    /// # Errors
    ///
    /// ESTALE if another file is at its path now; the open's errors (ELOOP for a symbolic
    /// link, among them that of a directory swapped for one since it was resolved).
    pub fn reopen(&self, r: &Resolved, flags: libc::c_int) -> std::io::Result<File> {
        let fd = fsat::open_beneath(self.root_fd.as_fd(), &r.relative, flags | libc::O_NOFOLLOW, 0)?;
        if id(&fsat::metadata(fd.as_fd())?) != id(&r.meta) {
            return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
        }
        Ok(File::from(fd))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<FileId, Vec<PathBuf>>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn make(&self, meta: &Metadata) -> FileHandle {
        let mut h = [0u8; HANDLE_LEN];
        h[..8].copy_from_slice(&self.generation);
        h[8..16].copy_from_slice(&meta.dev().to_be_bytes());
        h[16..].copy_from_slice(&meta.ino().to_be_bytes());
        h
    }
}

fn id(meta: &Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// Checks a name a client gives for an entry of a directory: one path component, never the
/// parent (RFC 1813 section 3.3.3 leaves `..` to the server; this one does not let a client
/// leave the export root through it, nor through a `/` inside a name).
///
/// # Errors
///
/// NFS3ERR_ACCES for `..`, `.`, an empty name or one holding `/` or NUL;
/// NFS3ERR_NAMETOOLONG beyond [`NAME_MAX`] bytes.
pub fn check_name(name: &str) -> Result<(), Nfsstat3> {
    if name.len() > NAME_MAX {
        return Err(Nfsstat3::Nfs3errNametoolong);
    }
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Nfsstat3::Nfs3errAcces);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_leave_the_directory_are_refused() {
        for bad in ["..", ".", "", "a/b", "../x", "a\0b"] {
            assert_eq!(check_name(bad), Err(Nfsstat3::Nfs3errAcces), "{bad:?}");
        }
        assert_eq!(check_name(&"x".repeat(256)), Err(Nfsstat3::Nfs3errNametoolong));
        assert_eq!(check_name("ok.txt"), Ok(()));
    }

    #[test]
    fn forged_and_foreign_handles_do_not_resolve() {
        let dir = std::env::temp_dir().join(format!("nfs3-handles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let handles = Handles::new(&dir, [7; 8]).unwrap();
        let root = handles.root_handle().unwrap();
        assert_eq!(handles.resolve(&root).unwrap().relative, PathBuf::new());
        assert_eq!(handles.resolve(&root[..10]).unwrap_err(), Nfsstat3::Nfs3errBadhandle);
        let mut other_run = root;
        other_run[0] ^= 1;
        assert_eq!(handles.resolve(&other_run).unwrap_err(), Nfsstat3::Nfs3errStale);
        let mut never_seen = root;
        never_seen[23] ^= 1;
        assert_eq!(handles.resolve(&never_seen).unwrap_err(), Nfsstat3::Nfs3errStale);
        // A file seen, then removed behind the server's back: stale.
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let h = handles.remember(Path::new("f"), &std::fs::symlink_metadata(&file).unwrap());
        assert!(handles.resolve(&h).is_ok());
        // Another file renamed over it (a new inode at the same path): stale, not the new file.
        std::fs::write(dir.join("g"), b"y").unwrap();
        std::fs::rename(dir.join("g"), &file).unwrap();
        assert_eq!(handles.resolve(&h).unwrap_err(), Nfsstat3::Nfs3errStale);
        let h = handles.remember(Path::new("f"), &std::fs::symlink_metadata(&file).unwrap());
        std::fs::remove_file(&file).unwrap();
        assert_eq!(handles.resolve(&h).unwrap_err(), Nfsstat3::Nfs3errStale);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn renamed_moves_paths_under_the_directory_and_forgets_the_replaced() {
        let dir = std::env::temp_dir().join(format!("nfs3-handles-renamed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["a/sub", "ab", "t"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("a/sub/f"), b"x").unwrap();
        let handles = Handles::new(&dir, [7; 8]).unwrap();
        let meta = |p: &str| std::fs::symlink_metadata(dir.join(p)).unwrap();
        let known: Vec<_> =
            ["a", "a/sub", "a/sub/f", "ab", "t"].iter().map(|p| handles.remember(Path::new(p), &meta(p))).collect();
        // The empty directory "t" is replaced by "a" (as rename(2) would).
        std::fs::remove_dir(dir.join("t")).unwrap();
        std::fs::rename(dir.join("a"), dir.join("t")).unwrap();
        handles.renamed(Path::new("a"), Path::new("t"));
        let at = |h: &FileHandle| handles.resolve(h).map(|r| r.relative);
        assert_eq!(at(&known[0]), Ok(PathBuf::from("t")));
        assert_eq!(at(&known[1]), Ok(PathBuf::from("t/sub")));
        assert_eq!(at(&known[2]), Ok(PathBuf::from("t/sub/f")));
        assert_eq!(at(&known[3]), Ok(PathBuf::from("ab")), "a sibling whose name starts alike");
        assert_eq!(at(&known[4]), Err(Nfsstat3::Nfs3errStale), "the replaced directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
