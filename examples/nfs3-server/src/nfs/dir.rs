//! The procedures on directories: LOOKUP, CREATE, MKDIR, SYMLINK, REMOVE, RMDIR, RENAME,
//! LINK, READDIR and READDIRPLUS (RFC 1813 sections 3.3.3, 3.3.8, 3.3.9, 3.3.10, 3.3.12,
//! 3.3.13, 3.3.14, 3.3.15, 3.3.16, 3.3.17).
//!
//! Every name is checked by [`check_name`] before it is joined to a directory's path, and a
//! directory handle is used as one only when it names a directory itself (attributes read
//! without following a symbolic link; a link to a directory is NFS3ERR_NOTDIR), so a client
//! names only entries of the directories it holds handles for. A SYMLINK's target is the
//! client's text, stored as given and never followed by this server.
//!
//! An EXCLUSIVE CREATE stores its verifier in the new file's times as Linux's nfsd does (the
//! first four bytes, high bit cleared, as the mtime's seconds; the last four as the atime's),
//! so that a retransmitted CREATE with the same verifier finds the file it made (still empty,
//! with those times) and succeeds with the same handle; the client then sets the file's real
//! attributes with SETATTR (RFC 1813 section 3.3.8).
//!
//! Directory cookies are positions in the directory's entries sorted by name (a cookie `c`
//! resumes after the `c`-th entry), so a listing that takes several calls returns each name
//! once while the directory does not change; the cookie verifier is always zero (RFC 1813
//! section 3.3.16 lets a server not use it). `.` and `..` are not listed.

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::file::set_attributes;
use super::{args, Nfs3, Out, Served};
use crate::attrs::{fattr, post_op, status, wcc, NO_WCC};
use crate::binding::MAX_DIR_REPLY;
use crate::handles::{check_name, FileHandle, Resolved, HANDLE_LEN};
use crate::xdr::*;
use xdr_spec_rt::List;

/// The cookie verifier of every listing: unused (see the module's documentation).
const COOKIEVERF: [u8; 8] = [0; 8];

/// XDR bytes of a READDIR3res or READDIRPLUS3res before and after its entries: status,
/// `post_op_attr` with attributes, cookie verifier, the list's final FALSE, `eof`.
const LISTING_OVERHEAD: usize = 4 + 4 + 84 + 8 + 4 + 4;

/// The longest symbolic link target Linux stores: PATH_MAX less its NUL.
pub(crate) const PATH_MAX: usize = libc::PATH_MAX as usize;

/// The times an EXCLUSIVE CREATE stores its verifier in, as Linux's nfsd does: the first four
/// bytes (big-endian, high bit cleared, as some file systems keep 31-bit times) are the
/// mtime's seconds, the last four the atime's; nanoseconds zero.
fn verifier_times(v: &[u8; 8]) -> Sattr3 {
    let word = |at: usize| u32::from_be_bytes(v[at..at + 4].try_into().expect("4 bytes")) & 0x7fff_ffff;
    Sattr3 {
        mode: SetMode3::Default { discriminant: false },
        uid: SetUid3::Default { discriminant: false },
        gid: SetGid3::Default { discriminant: false },
        size: SetSize3::Default { discriminant: false },
        atime: SetAtime::SetToClientTime(Nfstime3 { seconds: word(4), nseconds: 0 }),
        mtime: SetMtime::SetToClientTime(Nfstime3 { seconds: word(0), nseconds: 0 }),
    }
}

/// Whether `m` is the file an EXCLUSIVE CREATE with the verifier stored as `times` made: a
/// regular file, still empty, with exactly those times.
fn holds_verifier(m: &std::fs::Metadata, times: &Sattr3) -> bool {
    let (SetAtime::SetToClientTime(at), SetMtime::SetToClientTime(mt)) = (times.atime, times.mtime) else {
        return false;
    };
    m.is_file()
        && m.size() == 0
        && (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec())
            == (i64::from(at.seconds), 0, i64::from(mt.seconds), 0)
}

/// The bytes an `entry3` takes in a READDIR reply: the "next" word, fileid, name, cookie.
fn entry_len(name: &str) -> usize {
    4 + 8 + 4 + name.len().next_multiple_of(4) + 8
}

/// What READDIRPLUS adds to an entry: `post_op_attr` with attributes, `post_op_fh3` with a
/// handle.
const PLUS_LEN: usize = 4 + 84 + 4 + 4 + HANDLE_LEN;

/// The entries of directory `dir` (names that are UTF-8, as `filename3` is a string), sorted
/// by name, with their inode numbers.
fn listing(dir: &Path) -> std::io::Result<Vec<(String, u64)>> {
    use std::os::unix::fs::DirEntryExt;
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if let Ok(name) = e.file_name().into_string() {
            entries.push((name, e.ino()));
        }
    }
    entries.sort_unstable();
    Ok(entries)
}

/// A directory to list and where the listing resumes.
struct Listing {
    dir: Resolved,
    /// Its entries, sorted by name, with their inode numbers ([`listing`]).
    entries: Vec<(String, u64)>,
    /// The first entry to return: the number of entries the client's cookie says it has.
    start: usize,
}

impl Nfs3 {
    /// The directory `dir_fh` names and the path of its entry `name` (relative and absolute),
    /// or the failure's reply written (with `fail` given the directory's attributes).
    fn entry<'a, F: xdr_spec_rt::Xdr<'a>>(
        &self,
        dir_fh: &[u8],
        name: &str,
        out: &mut Out<'_>,
        fail: impl Fn(&Resolved) -> F,
        no_dir: F,
    ) -> Option<(Resolved, PathBuf, PathBuf)> {
        let d = self.file(dir_fh, out, no_dir)?;
        let refused = if d.meta.is_dir() { check_name(name).err() } else { Some(Nfsstat3::Nfs3errNotdir) };
        if let Some(why) = refused {
            let _ = out.fail(why, &fail(&d));
            return None;
        }
        let (relative, path) = (d.relative.join(name), d.path.join(name));
        Some((d, relative, path))
    }

    pub(super) fn lookup(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: LOOKUP3args = args(a)?;
        let dir_attrs = |d: &Resolved| LOOKUP3resfail { dir_attributes: PostOpAttr::True(fattr(&d.meta)) };
        let no_dir = LOOKUP3resfail { dir_attributes: PostOpAttr::False };
        // "." is the directory itself: harmless, and clients do look it up.
        let (d, relative, path) = if a.what.name.0 == "." {
            let Some(d) = self.file(a.what.dir.data, out, no_dir) else { return Ok(()) };
            let (r, p) = (d.relative.clone(), d.path.clone());
            (d, r, p)
        } else {
            let Some(found) = self.entry(a.what.dir.data, a.what.name.0, out, dir_attrs, no_dir) else { return Ok(()) };
            found
        };
        match std::fs::symlink_metadata(&path) {
            Ok(m) => {
                let fh = self.handles.remember(&relative, &m);
                out.results(&LOOKUP3res::Nfs3Ok(LOOKUP3resok {
                    object: NfsFh3 { data: &fh },
                    obj_attributes: PostOpAttr::True(fattr(&m)),
                    dir_attributes: PostOpAttr::True(fattr(&d.meta)),
                }))
            }
            Err(e) => out.fail(status(&e), &dir_attrs(&d)),
        }
    }

    /// What CREATE and MKDIR do once the object exists at `path`: set the attributes the
    /// client gave, and make its handle.
    fn created(&self, relative: &Path, path: &Path, attrs: Option<&Sattr3>) -> Result<FileHandle, Nfsstat3> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| status(&e))?;
        if let Some(attrs) = attrs {
            set_attributes(path, &meta, attrs)?;
        }
        Ok(self.handles.remember(relative, &meta))
    }

    pub(super) fn create(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: CREATE3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.path);
        let no_dir = crate::attrs::NO_WCC;
        let Some((d, relative, path)) = self.entry(a.r#where.dir.data, a.r#where.name.0, out, fail, no_dir) else {
            return Ok(());
        };
        // UNCHECKED creates or reuses; GUARDED and EXCLUSIVE fail on an existing name, unless
        // an EXCLUSIVE CREATE's verifier is the one stored in it (a retransmission).
        let (new_only, attrs, verifier) = match a.how {
            Createhow3::ObjAttributes { discriminant, value } => {
                (discriminant != Createmode3::Unchecked, Some(value), None)
            }
            Createhow3::Exclusive(v) => (true, None, Some(verifier_times(v.0))),
        };
        let mode = match attrs.map(|s| s.mode) {
            Some(SetMode3::True(m)) => m & 0o7777,
            _ => 0o644,
        };
        let opened = OpenOptions::new()
            .write(true)
            .create(!new_only)
            .create_new(new_only)
            .truncate(false)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        let made = match (opened, verifier) {
            (Ok(_), None) => self.created(&relative, &path, attrs.as_ref()),
            (Ok(_), Some(times)) => self.created(&relative, &path, Some(&times)),
            (Err(e), Some(times)) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if holds_verifier(&m, &times) => Ok(self.handles.remember(&relative, &m)),
                    _ => Err(Nfsstat3::Nfs3errExist),
                }
            }
            (Err(e), _) => Err(status(&e)),
        };
        match made {
            Ok(fh) => out.results(&CREATE3res::Nfs3Ok(CREATE3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes: post_op(&path),
                dir_wcc: wcc(Some(&d.meta), &d.path),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    pub(super) fn mkdir(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: MKDIR3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.path);
        let no_dir = crate::attrs::NO_WCC;
        let Some((d, relative, path)) = self.entry(a.r#where.dir.data, a.r#where.name.0, out, fail, no_dir) else {
            return Ok(());
        };
        let mode = match a.attributes.mode {
            SetMode3::True(m) => m & 0o7777,
            _ => 0o755,
        };
        let made = DirBuilder::new()
            .mode(mode)
            .create(&path)
            .map_err(|e| status(&e))
            .and_then(|()| self.created(&relative, &path, Some(&a.attributes)));
        match made {
            Ok(fh) => out.results(&MKDIR3res::Nfs3Ok(MKDIR3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes: post_op(&path),
                dir_wcc: wcc(Some(&d.meta), &d.path),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    pub(super) fn symlink(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: SYMLINK3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.path);
        let no_dir = crate::attrs::NO_WCC;
        let Some((d, relative, path)) = self.entry(a.r#where.dir.data, a.r#where.name.0, out, fail, no_dir) else {
            return Ok(());
        };
        // The target is stored as the client's text: never resolved, checked only for what
        // symlink(2) cannot store. `symlink_attributes` are not applied (a Linux symbolic
        // link's mode is always 0777 and its times follow its creation).
        let target = a.symlink.symlink_data.0;
        let made = if target.len() >= PATH_MAX {
            Err(Nfsstat3::Nfs3errNametoolong)
        } else if target.is_empty() || target.contains('\0') {
            Err(Nfsstat3::Nfs3errInval)
        } else {
            std::os::unix::fs::symlink(target, &path)
                .map_err(|e| status(&e))
                .and_then(|()| self.created(&relative, &path, None))
        };
        match made {
            Ok(fh) => out.results(&SYMLINK3res::Nfs3Ok(SYMLINK3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes: post_op(&path),
                dir_wcc: wcc(Some(&d.meta), &d.path),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    /// REMOVE (`directory` false) and RMDIR (true); their arguments and results have one shape.
    pub(super) fn remove(&self, a: &[u8], out: &mut Out<'_>, directory: bool) -> Served {
        let a: Diropargs3 = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.path);
        let Some((d, relative, path)) = self.entry(a.dir.data, a.name.0, out, fail, crate::attrs::NO_WCC) else {
            return Ok(());
        };
        let removed = std::fs::symlink_metadata(&path).and_then(|meta| {
            // unlink(2) refuses a directory (EISDIR) and rmdir(2) anything else (ENOTDIR).
            if directory { std::fs::remove_dir(&path) } else { std::fs::remove_file(&path) }?;
            self.handles.forget(&relative, &meta);
            Ok(())
        });
        let dir_wcc = wcc(Some(&d.meta), &d.path);
        match (removed, directory) {
            (Ok(()), false) => out.results(&REMOVE3res::Nfs3Ok(REMOVE3resok { dir_wcc })),
            (Ok(()), true) => out.results(&RMDIR3res::Nfs3Ok(RMDIR3resok { dir_wcc })),
            (Err(e), _) => out.fail(status(&e), &dir_wcc),
        }
    }

    /// RENAME (RFC 1813 section 3.3.14) with `rename(2)`'s semantics: a file or empty
    /// directory at the target is replaced (its path forgotten), a directory cannot move into
    /// its own subtree (EINVAL, NFS3ERR_INVAL), and renaming a name onto another link of the
    /// same file changes nothing. The handles of the renamed file and of everything under it
    /// stay valid ([`crate::handles::Handles::renamed`]).
    pub(super) fn rename(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: RENAME3args = args(a)?;
        let no_dirs = RENAME3resfail { fromdir_wcc: NO_WCC, todir_wcc: NO_WCC };
        let from_fail = |d: &Resolved| RENAME3resfail { fromdir_wcc: wcc(Some(&d.meta), &d.path), todir_wcc: NO_WCC };
        let Some((from_d, from_rel, from_path)) = self.entry(a.from.dir.data, a.from.name.0, out, from_fail, no_dirs)
        else {
            return Ok(());
        };
        let from_wcc = || wcc(Some(&from_d.meta), &from_d.path);
        let to_fail = |d: &Resolved| RENAME3resfail { fromdir_wcc: from_wcc(), todir_wcc: wcc(Some(&d.meta), &d.path) };
        let no_to = RENAME3resfail { fromdir_wcc: from_wcc(), todir_wcc: NO_WCC };
        let Some((to_d, to_rel, to_path)) = self.entry(a.to.dir.data, a.to.name.0, out, to_fail, no_to) else {
            return Ok(());
        };
        let renamed = std::fs::symlink_metadata(&from_path).and_then(|from_meta| {
            let replaced = std::fs::symlink_metadata(&to_path).ok();
            std::fs::rename(&from_path, &to_path)?;
            // Two links of one file: rename(2) leaves both (POSIX), and so does the table.
            if replaced.is_none_or(|r| (r.dev(), r.ino()) != (from_meta.dev(), from_meta.ino())) {
                self.handles.renamed(&from_rel, &to_rel);
            }
            Ok(())
        });
        let (fromdir_wcc, todir_wcc) = (from_wcc(), wcc(Some(&to_d.meta), &to_d.path));
        match renamed {
            Ok(()) => out.results(&RENAME3res::Nfs3Ok(RENAME3resok { fromdir_wcc, todir_wcc })),
            Err(e) => out.fail(status(&e), &RENAME3resfail { fromdir_wcc, todir_wcc }),
        }
    }

    /// LINK (RFC 1813 section 3.3.15): a new hard link to a file that is not a directory (a
    /// symbolic link is linked itself, never what it points to). The file's handle stays the
    /// same and resolves through either name.
    pub(super) fn link(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: LINK3args = args(a)?;
        let no_file = LINK3resfail { file_attributes: PostOpAttr::False, linkdir_wcc: NO_WCC };
        let Some(f) = self.file(a.file.data, out, no_file) else { return Ok(()) };
        let attrs = || PostOpAttr::True(fattr(&f.meta));
        let fail = |d: &Resolved| LINK3resfail { file_attributes: attrs(), linkdir_wcc: wcc(Some(&d.meta), &d.path) };
        let no_dir = LINK3resfail { file_attributes: attrs(), linkdir_wcc: NO_WCC };
        let Some((d, relative, path)) = self.entry(a.link.dir.data, a.link.name.0, out, fail, no_dir) else {
            return Ok(());
        };
        if f.meta.is_dir() {
            return out.fail(Nfsstat3::Nfs3errIsdir, &fail(&d));
        }
        // linkat(2) without AT_SYMLINK_FOLLOW: a symbolic link is not followed.
        let linked = std::fs::hard_link(&f.path, &path).and_then(|()| std::fs::symlink_metadata(&path));
        match linked {
            Ok(meta) => {
                self.handles.remember(&relative, &meta);
                out.results(&LINK3res::Nfs3Ok(LINK3resok {
                    file_attributes: PostOpAttr::True(fattr(&meta)),
                    linkdir_wcc: wcc(Some(&d.meta), &d.path),
                }))
            }
            Err(e) => out.fail(status(&e), &fail(&d)),
        }
    }

    /// The directory `dir_fh` names and its entries from `cookie` on, or the failure's reply
    /// written.
    fn list_from(&self, dir_fh: &[u8], cookie: u64, out: &mut Out<'_>) -> Option<Listing> {
        let d = self.file(dir_fh, out, PostOpAttr::False)?;
        if !d.meta.is_dir() {
            let _ = out.fail(Nfsstat3::Nfs3errNotdir, &PostOpAttr::True(fattr(&d.meta)));
            return None;
        }
        match listing(&d.path) {
            Ok(entries) => {
                let start = usize::try_from(cookie).unwrap_or(usize::MAX).min(entries.len());
                Some(Listing { dir: d, entries, start })
            }
            Err(e) => {
                let _ = out.fail(status(&e), &PostOpAttr::True(fattr(&d.meta)));
                None
            }
        }
    }

    pub(super) fn readdir(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READDIR3args = args(a)?;
        let Some(Listing { dir: d, entries, start }) = self.list_from(a.dir.data, a.cookie, out) else {
            return Ok(());
        };
        // `count` bounds the whole READDIR3resok (RFC 1813 section 3.3.16).
        let count = (a.count as usize).min(MAX_DIR_REPLY);
        let mut used = LISTING_OVERHEAD;
        let mut list = Vec::new();
        for (i, (name, ino)) in entries.iter().enumerate().skip(start) {
            used += entry_len(name);
            if used > count {
                break;
            }
            list.push(Entry3Entry { fileid: *ino, name: Filename3(name), cookie: i as u64 + 1 });
        }
        if list.is_empty() && start < entries.len() {
            return out.fail(Nfsstat3::Nfs3errToosmall, &PostOpAttr::True(fattr(&d.meta)));
        }
        let eof = start + list.len() == entries.len();
        out.results(&READDIR3res::Nfs3Ok(READDIR3resok {
            dir_attributes: post_op(&d.path),
            cookieverf: Cookieverf3(&COOKIEVERF),
            reply: Dirlist3 { entries: List::from_slice(&list), eof },
        }))
    }

    pub(super) fn readdirplus(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READDIRPLUS3args = args(a)?;
        let Some(Listing { dir: d, entries, start }) = self.list_from(a.dir.data, a.cookie, out) else {
            return Ok(());
        };
        // `maxcount` bounds the whole READDIRPLUS3resok; `dircount` the entries' fileids,
        // names and cookies alone (RFC 1813 section 3.3.17). A dircount of 0 bounds nothing.
        let maxcount = (a.maxcount as usize).min(MAX_DIR_REPLY);
        let dircount = if a.dircount == 0 { usize::MAX } else { a.dircount as usize };
        let (mut used, mut dir_used) = (LISTING_OVERHEAD, 0);
        let mut found = Vec::new();
        for (i, (name, ino)) in entries.iter().enumerate().skip(start) {
            used += entry_len(name) + PLUS_LEN;
            dir_used += entry_len(name) - 4;
            if used > maxcount || dir_used > dircount {
                break;
            }
            let relative = d.relative.join(name);
            // An entry removed since the listing keeps its place, without attributes.
            let meta = std::fs::symlink_metadata(d.path.join(name)).ok();
            let fh = meta.as_ref().map(|m| self.handles.remember(&relative, m));
            found.push((i, name.as_str(), *ino, meta, fh));
        }
        if found.is_empty() && start < entries.len() {
            return out.fail(Nfsstat3::Nfs3errToosmall, &PostOpAttr::True(fattr(&d.meta)));
        }
        let list: Vec<Entryplus3Entry> = found
            .iter()
            .map(|(i, name, ino, meta, fh)| Entryplus3Entry {
                fileid: meta.as_ref().map_or(*ino, MetadataExt::ino),
                name: Filename3(name),
                cookie: *i as u64 + 1,
                name_attributes: meta.as_ref().map_or(PostOpAttr::False, |m| PostOpAttr::True(fattr(m))),
                name_handle: fh.as_ref().map_or(PostOpFh3::False, |fh| PostOpFh3::True(NfsFh3 { data: fh })),
            })
            .collect();
        let eof = start + list.len() == entries.len();
        out.results(&READDIRPLUS3res::Nfs3Ok(READDIRPLUS3resok {
            dir_attributes: post_op(&d.path),
            cookieverf: Cookieverf3(&COOKIEVERF),
            reply: Dirlistplus3 { entries: List::from_slice(&list), eof },
        }))
    }
}
