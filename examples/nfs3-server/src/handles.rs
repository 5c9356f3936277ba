//! File handles (RFC 1813 section 2.3.3: "opaque data<NFS3_FHSIZE>", at most 64 bytes that
//! only the server interprets) and the table that maps them to paths under the export root.
//!
//! A handle is 24 bytes: this server run's 8-byte generation, then the file's device and
//! inode numbers. The table maps (device, inode) to the path, relative to the root, where the
//! file was last seen: it learns a path on LOOKUP, CREATE, MKDIR and READDIRPLUS, and forgets
//! it on REMOVE and RMDIR. It only ever holds files that exist under the root, so a client
//! cannot grow it beyond the export's own size.
//!
//! Resolving a handle checks everything a client could get wrong or forge: a handle of the
//! wrong length is NFS3ERR_BADHANDLE ("failed internal consistency checks"); one from an
//! earlier run (another generation), of a file never seen, or whose path now holds another
//! file (removed, renamed behind the server's back) is NFS3ERR_STALE. Paths are only ever
//! built from the root and names checked by [`check_name`], so no handle or name reaches
//! outside the root.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::xdr::Nfsstat3;

/// Bytes in every handle this server makes.
pub const HANDLE_LEN: usize = 24;

/// One file handle as it goes on the wire.
pub type FileHandle = [u8; HANDLE_LEN];

/// The longest name a directory entry may have (PATHCONF's `name_max`).
pub const NAME_MAX: usize = 255;

/// A file, identified as the kernel does: device and inode number.
type FileId = (u64, u64);

/// A handle resolved to a file that exists now.
#[derive(Debug)]
pub struct Resolved {
    /// The path relative to the export root (empty for the root itself).
    pub relative: PathBuf,
    /// The absolute path.
    pub path: PathBuf,
    /// Its attributes, not following a final symbolic link.
    pub meta: Metadata,
}

/// The export root and the handles of the files seen under it.
#[derive(Debug)]
pub struct Handles {
    root: PathBuf,
    generation: [u8; 8],
    known: Mutex<HashMap<FileId, PathBuf>>,
}

impl Handles {
    /// The table for the directory `root` (made absolute and free of symbolic links first),
    /// with handles of generation `generation` ([`crate::boot_verifier`]).
    ///
    /// # Errors
    ///
    /// `root` cannot be canonicalized or is not a directory.
    pub fn new(root: &Path, generation: [u8; 8]) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let meta = std::fs::metadata(&root)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the export root {} is not a directory", root.display()),
            ));
        }
        let known = Mutex::new(HashMap::from([(id(&meta), PathBuf::new())]));
        Ok(Handles { root, generation, known })
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
        Ok(self.make(&std::fs::symlink_metadata(&self.root)?))
    }

    /// The handle of the file at `relative` (relative to the root) whose attributes are
    /// `meta`, remembered so that it resolves.
    pub fn remember(&self, relative: &Path, meta: &Metadata) -> FileHandle {
        self.known.lock().unwrap_or_else(PoisonError::into_inner).insert(id(meta), relative.to_path_buf());
        self.make(meta)
    }

    /// Forgets the file `meta` describes, if it was last seen at `relative` (another hard
    /// link to it may have been seen since).
    pub fn forget(&self, relative: &Path, meta: &Metadata) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.get(&id(meta)).is_some_and(|p| p == relative) {
            known.remove(&id(meta));
        }
    }

    /// The file `handle` names, if it still exists where it was seen.
    ///
    /// # Errors
    ///
    /// NFS3ERR_BADHANDLE for a handle this server cannot have made; NFS3ERR_STALE for one of
    /// another run, of a file never seen, or of a file no longer at its path.
    pub fn resolve(&self, handle: &[u8]) -> Result<Resolved, Nfsstat3> {
        let handle: &FileHandle = handle.try_into().map_err(|_| Nfsstat3::Nfs3errBadhandle)?;
        if handle[..8] != self.generation {
            return Err(Nfsstat3::Nfs3errStale);
        }
        let word = |at: usize| u64::from_be_bytes(handle[at..at + 8].try_into().expect("8 bytes"));
        let wanted = (word(8), word(16));
        let relative = self
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&wanted)
            .cloned()
            .ok_or(Nfsstat3::Nfs3errStale)?;
        let path = self.root.join(&relative);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if id(&meta) == wanted => Ok(Resolved { relative, path, meta }),
            _ => {
                self.known.lock().unwrap_or_else(PoisonError::into_inner).remove(&wanted);
                Err(Nfsstat3::Nfs3errStale)
            }
        }
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
}
