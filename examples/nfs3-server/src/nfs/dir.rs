//! The procedures on directories: LOOKUP, CREATE, MKDIR, REMOVE, RMDIR, READDIR and
//! READDIRPLUS (RFC 1813 sections 3.3.3, 3.3.8, 3.3.9, 3.3.12, 3.3.13, 3.3.16, 3.3.17).
//!
//! Every name is checked by [`check_name`] before it is joined to a directory's path, so a
//! client names only entries of the directories it holds handles for.
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
use crate::attrs::{fattr, post_op, status, wcc};
use crate::binding::MAX_DIR_REPLY;
use crate::handles::{check_name, FileHandle, Resolved, HANDLE_LEN};
use crate::xdr::*;
use xdr_spec_rt::List;

/// The cookie verifier of every listing: unused (see the module's documentation).
const COOKIEVERF: [u8; 8] = [0; 8];

/// XDR bytes of a READDIR3res or READDIRPLUS3res before and after its entries: status,
/// `post_op_attr` with attributes, cookie verifier, the list's final FALSE, `eof`.
const LISTING_OVERHEAD: usize = 4 + 4 + 84 + 8 + 4 + 4;

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
        // UNCHECKED creates or reuses; GUARDED and EXCLUSIVE fail on an existing name. The
        // EXCLUSIVE verifier is not stored, so a retransmitted EXCLUSIVE CREATE fails with
        // NFS3ERR_EXIST (the Linux client uses EXCLUSIVE only for O_EXCL opens).
        let (new_only, attrs) = match a.how {
            Createhow3::ObjAttributes { discriminant, value } => (discriminant != Createmode3::Unchecked, Some(value)),
            Createhow3::Exclusive(_) => (true, None),
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
        let made = opened.map_err(|e| status(&e)).and_then(|_| self.created(&relative, &path, attrs.as_ref()));
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
