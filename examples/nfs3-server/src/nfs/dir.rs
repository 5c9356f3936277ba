//! The procedures on directories: LOOKUP, CREATE, MKDIR, SYMLINK, REMOVE, RMDIR, RENAME,
//! LINK, READDIR and READDIRPLUS (RFC 1813 sections 3.3.3, 3.3.8, 3.3.9, 3.3.10, 3.3.12,
//! 3.3.13, 3.3.14, 3.3.15, 3.3.16, 3.3.17).
//!
//! Every name is checked by [`check_name`] before it is used, and a directory handle is used
//! as one only when it names a directory itself (attributes read without following a symbolic
//! link; a link to a directory is NFS3ERR_NOTDIR), so a client names only entries of the
//! directories it holds handles for. Each procedure works in the directory through the
//! descriptor its handle resolved to (`mkdirat`, `unlinkat`, `renameat`, ... with that one
//! name, [`crate::fsat`]), never through its path again. A SYMLINK's target is the
//! client's text, stored as given and never followed by this server.
//!
//! An EXCLUSIVE CREATE stores its verifier in the new file's times as Linux's nfsd does (the
//! first four bytes, high bit cleared, as the mtime's seconds; the last four as the atime's),
//! so that a retransmitted CREATE with the same verifier finds the file it made (still empty,
//! with those times) and succeeds with the same handle; the client then sets the file's real
//! attributes with SETATTR (RFC 1813 section 3.3.8).
//!
//! Directory cookies are the directory's own positions (`seekdir(3)`'s, each entry's `d_off`,
//! as Linux's nfsd hands out), so a READDIR resumes where its cookie says and reads only the
//! entries its reply has room for: what one call costs is bounded by what it asks, not by the
//! directory's size (issue 26: a listing read and sorted whole cost 29 MB and 18 ms per
//! one-entry call at 100,000 entries). A listing that takes several calls returns each name
//! once while the directory does not change; the cookie verifier is always zero (RFC 1813
//! section 3.3.16 lets a server not use it). `.` and `..` are not listed, nor names that are
//! not UTF-8 (`filename3` is a string).

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::file::set_attributes;
use super::{args, Nfs3, Out, Served};
use crate::attrs::{fattr, post_op, status, wcc, NO_WCC};
use crate::binding::MAX_DIR_REPLY;
use crate::fsat;
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

/// Directory entries read for one reply: each UTF-8 name with its inode number and its cookie.
type Entries = Vec<(String, u64, u64)>;

/// Entries of a directory from a cookie on, as many as `fits` takes ([`Entries`]), and whether
/// the listing reached the directory's end.
fn entries_from(
    dir: BorrowedFd<'_>,
    cookie: u64,
    mut fits: impl FnMut(&str) -> bool,
) -> std::io::Result<(Entries, bool)> {
    let mut found = Vec::new();
    let eof = fsat::read_dir_from(dir, cookie, |name, ino, next| {
        // (Not a filename3: passed over.)
        let Ok(name) = std::str::from_utf8(name) else { return true };
        if !fits(name) {
            return false;
        }
        found.push((name.to_string(), ino, next));
        true
    })?;
    Ok((found, eof))
}

impl Nfs3 {
    /// The directory `dir_fh` names and the path of its entry `name` relative to the root, or
    /// the failure's reply written (with `fail` given the directory's attributes).
    fn entry<'a, F: xdr_spec_rt::Xdr<'a>>(
        &self,
        dir_fh: &[u8],
        name: &str,
        out: &mut Out<'_>,
        fail: impl Fn(&Resolved) -> F,
        no_dir: F,
    ) -> Option<(Resolved, PathBuf)> {
        let d = self.file(dir_fh, out, no_dir)?;
        let refused = if d.meta.is_dir() { check_name(name).err() } else { Some(Nfsstat3::Nfs3errNotdir) };
        if let Some(why) = refused {
            let _ = out.fail(why, &fail(&d));
            return None;
        }
        let relative = d.relative.join(name);
        Some((d, relative))
    }

    pub(super) fn lookup(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: LOOKUP3args = args(a)?;
        let dir_attrs = |d: &Resolved| LOOKUP3resfail { dir_attributes: PostOpAttr::True(fattr(&d.meta)) };
        let no_dir = LOOKUP3resfail { dir_attributes: PostOpAttr::False };
        // "." is the directory itself: harmless, and clients do look it up.
        let (d, relative, found) = if a.what.name.0 == "." {
            let Some(d) = self.file(a.what.dir.data, out, no_dir) else { return Ok(()) };
            let (r, m) = (d.relative.clone(), fsat::metadata(d.fd.as_fd()));
            (d, r, m)
        } else {
            let Some((d, r)) = self.entry(a.what.dir.data, a.what.name.0, out, dir_attrs, no_dir) else {
                return Ok(());
            };
            let m = fsat::stat_at(d.fd.as_fd(), a.what.name.0);
            (d, r, m)
        };
        match found {
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

    /// What CREATE, MKDIR and SYMLINK do once the object exists (held by `fd`; `file` when
    /// it was opened for writing): set the attributes the client gave, and make its handle.
    fn created(
        &self,
        relative: &Path,
        fd: BorrowedFd<'_>,
        file: Option<&File>,
        attrs: Option<&Sattr3>,
    ) -> Result<FileHandle, Nfsstat3> {
        let meta = fsat::metadata(fd).map_err(|e| status(&e))?;
        if let Some(attrs) = attrs {
            let truncate = |size| match file {
                Some(f) => f.set_len(size),
                None => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            };
            set_attributes(fd, &meta, attrs, truncate)?;
        }
        Ok(self.handles.remember(relative, &meta))
    }

    pub(super) fn create(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: CREATE3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.fd);
        let no_dir = crate::attrs::NO_WCC;
        let name = a.r#where.name.0;
        let Some((d, relative)) = self.entry(a.r#where.dir.data, name, out, fail, no_dir) else {
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
        let flags = libc::O_WRONLY | libc::O_CREAT | if new_only { libc::O_EXCL } else { 0 };
        let opened = fsat::open_at(d.fd.as_fd(), name, flags, mode).map(File::from);
        let made = match (opened, verifier) {
            (Ok(file), None) => {
                self.created(&relative, file.as_fd(), Some(&file), attrs.as_ref()).map(|fh| (fh, post_op(&file)))
            }
            (Ok(file), Some(times)) => {
                self.created(&relative, file.as_fd(), Some(&file), Some(&times)).map(|fh| (fh, post_op(&file)))
            }
            (Err(e), Some(times)) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match fsat::stat_at(d.fd.as_fd(), name) {
                    Ok(m) if holds_verifier(&m, &times) => {
                        Ok((self.handles.remember(&relative, &m), PostOpAttr::True(fattr(&m))))
                    }
                    _ => Err(Nfsstat3::Nfs3errExist),
                }
            }
            (Err(e), _) => Err(status(&e)),
        };
        match made {
            Ok((fh, obj_attributes)) => out.results(&CREATE3res::Nfs3Ok(CREATE3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes,
                dir_wcc: wcc(Some(&d.meta), &d.fd),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    pub(super) fn mkdir(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: MKDIR3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.fd);
        let no_dir = crate::attrs::NO_WCC;
        let name = a.r#where.name.0;
        let Some((d, relative)) = self.entry(a.r#where.dir.data, name, out, fail, no_dir) else {
            return Ok(());
        };
        let mode = match a.attributes.mode {
            SetMode3::True(m) => m & 0o7777,
            _ => 0o755,
        };
        // The new directory is opened by its name (O_DIRECTORY | O_NOFOLLOW: not a symbolic
        // link put in its place since), and its attributes set through that descriptor.
        let made = fsat::mkdir_at(d.fd.as_fd(), name, mode)
            .and_then(|()| fsat::open_at(d.fd.as_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0))
            .map_err(|e| status(&e))
            .and_then(|fd| Ok((self.created(&relative, fd.as_fd(), None, Some(&a.attributes))?, post_op(&fd))));
        match made {
            Ok((fh, obj_attributes)) => out.results(&MKDIR3res::Nfs3Ok(MKDIR3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes,
                dir_wcc: wcc(Some(&d.meta), &d.fd),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    pub(super) fn symlink(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: SYMLINK3args = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.fd);
        let no_dir = crate::attrs::NO_WCC;
        let name = a.r#where.name.0;
        let Some((d, relative)) = self.entry(a.r#where.dir.data, name, out, fail, no_dir) else {
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
            fsat::symlink_at(target, d.fd.as_fd(), name)
                .and_then(|()| fsat::open_at(d.fd.as_fd(), name, libc::O_PATH, 0))
                .map_err(|e| status(&e))
                .and_then(|fd| Ok((self.created(&relative, fd.as_fd(), None, None)?, post_op(&fd))))
        };
        match made {
            Ok((fh, obj_attributes)) => out.results(&SYMLINK3res::Nfs3Ok(SYMLINK3resok {
                obj: PostOpFh3::True(NfsFh3 { data: &fh }),
                obj_attributes,
                dir_wcc: wcc(Some(&d.meta), &d.fd),
            })),
            Err(why) => out.fail(why, &fail(&d)),
        }
    }

    /// REMOVE (`directory` false) and RMDIR (true); their arguments and results have one shape.
    pub(super) fn remove(&self, a: &[u8], out: &mut Out<'_>, directory: bool) -> Served {
        let a: Diropargs3 = args(a)?;
        let fail = |d: &Resolved| wcc(Some(&d.meta), &d.fd);
        let Some((d, relative)) = self.entry(a.dir.data, a.name.0, out, fail, crate::attrs::NO_WCC) else {
            return Ok(());
        };
        let removed = fsat::stat_at(d.fd.as_fd(), a.name.0).and_then(|meta| {
            // unlink(2) refuses a directory (EISDIR) and rmdir(2) anything else (ENOTDIR).
            fsat::unlink_at(d.fd.as_fd(), a.name.0, directory)?;
            self.handles.forget(&relative, &meta);
            Ok(())
        });
        let dir_wcc = wcc(Some(&d.meta), &d.fd);
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
        let from_fail = |d: &Resolved| RENAME3resfail { fromdir_wcc: wcc(Some(&d.meta), &d.fd), todir_wcc: NO_WCC };
        let Some((from_d, from_rel)) = self.entry(a.from.dir.data, a.from.name.0, out, from_fail, no_dirs) else {
            return Ok(());
        };
        let from_wcc = || wcc(Some(&from_d.meta), &from_d.fd);
        let to_fail = |d: &Resolved| RENAME3resfail { fromdir_wcc: from_wcc(), todir_wcc: wcc(Some(&d.meta), &d.fd) };
        let no_to = RENAME3resfail { fromdir_wcc: from_wcc(), todir_wcc: NO_WCC };
        let Some((to_d, to_rel)) = self.entry(a.to.dir.data, a.to.name.0, out, to_fail, no_to) else {
            return Ok(());
        };
        let (from, to) = ((from_d.fd.as_fd(), a.from.name.0), (to_d.fd.as_fd(), a.to.name.0));
        let renamed = fsat::stat_at(from.0, from.1).and_then(|from_meta| {
            let replaced = fsat::stat_at(to.0, to.1).ok();
            fsat::rename_at(from.0, from.1, to.0, to.1)?;
            // Two links of one file: rename(2) leaves both (POSIX), and so does the table.
            if replaced.is_none_or(|r| (r.dev(), r.ino()) != (from_meta.dev(), from_meta.ino())) {
                self.handles.renamed(&from_rel, &to_rel);
            }
            Ok(())
        });
        let (fromdir_wcc, todir_wcc) = (from_wcc(), wcc(Some(&to_d.meta), &to_d.fd));
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
        let fail = |d: &Resolved| LINK3resfail { file_attributes: attrs(), linkdir_wcc: wcc(Some(&d.meta), &d.fd) };
        let no_dir = LINK3resfail { file_attributes: attrs(), linkdir_wcc: NO_WCC };
        let Some((d, relative)) = self.entry(a.link.dir.data, a.link.name.0, out, fail, no_dir) else {
            return Ok(());
        };
        if f.meta.is_dir() {
            return out.fail(Nfsstat3::Nfs3errIsdir, &fail(&d));
        }
        // The file the handle resolved to, by its descriptor: a symbolic link is linked itself.
        let linked = fsat::link_at(f.fd.as_fd(), d.fd.as_fd(), a.link.name.0)
            .and_then(|()| fsat::stat_at(d.fd.as_fd(), a.link.name.0));
        match linked {
            Ok(meta) => {
                self.handles.remember(&relative, &meta);
                out.results(&LINK3res::Nfs3Ok(LINK3resok {
                    file_attributes: PostOpAttr::True(fattr(&meta)),
                    linkdir_wcc: wcc(Some(&d.meta), &d.fd),
                }))
            }
            Err(e) => out.fail(status(&e), &fail(&d)),
        }
    }

    /// The directory `dir_fh` names, or the failure's reply written.
    fn directory(&self, dir_fh: &[u8], out: &mut Out<'_>) -> Option<Resolved> {
        let d = self.file(dir_fh, out, PostOpAttr::False)?;
        if !d.meta.is_dir() {
            let _ = out.fail(Nfsstat3::Nfs3errNotdir, &PostOpAttr::True(fattr(&d.meta)));
            return None;
        }
        Some(d)
    }

    pub(super) fn readdir(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READDIR3args = args(a)?;
        let Some(d) = self.directory(a.dir.data, out) else { return Ok(()) };
        // `count` bounds the whole READDIR3resok (RFC 1813 section 3.3.16).
        let count = (a.count as usize).min(MAX_DIR_REPLY);
        let mut used = LISTING_OVERHEAD;
        let (found, eof) = match entries_from(d.fd.as_fd(), a.cookie, |name| {
            used += entry_len(name);
            used <= count
        }) {
            Ok(listed) => listed,
            Err(e) => return out.fail(status(&e), &PostOpAttr::True(fattr(&d.meta))),
        };
        if found.is_empty() && !eof {
            return out.fail(Nfsstat3::Nfs3errToosmall, &PostOpAttr::True(fattr(&d.meta)));
        }
        let list: Vec<Entry3Entry> = found
            .iter()
            .map(|(name, ino, cookie)| Entry3Entry { fileid: *ino, name: Filename3(name), cookie: *cookie })
            .collect();
        out.results(&READDIR3res::Nfs3Ok(READDIR3resok {
            dir_attributes: post_op(&d.fd),
            cookieverf: Cookieverf3(&COOKIEVERF),
            reply: Dirlist3 { entries: List::from_slice(&list), eof },
        }))
    }

    pub(super) fn readdirplus(&self, a: &[u8], out: &mut Out<'_>) -> Served {
        let a: READDIRPLUS3args = args(a)?;
        let Some(d) = self.directory(a.dir.data, out) else { return Ok(()) };
        // `maxcount` bounds the whole READDIRPLUS3resok; `dircount` the entries' fileids,
        // names and cookies alone (RFC 1813 section 3.3.17). A dircount of 0 bounds nothing.
        let maxcount = (a.maxcount as usize).min(MAX_DIR_REPLY);
        let dircount = if a.dircount == 0 { usize::MAX } else { a.dircount as usize };
        let (mut used, mut dir_used) = (LISTING_OVERHEAD, 0);
        let (entries, eof) = match entries_from(d.fd.as_fd(), a.cookie, |name| {
            used += entry_len(name) + PLUS_LEN;
            dir_used += entry_len(name) - 4;
            used <= maxcount && dir_used <= dircount
        }) {
            Ok(listed) => listed,
            Err(e) => return out.fail(status(&e), &PostOpAttr::True(fattr(&d.meta))),
        };
        if entries.is_empty() && !eof {
            return out.fail(Nfsstat3::Nfs3errToosmall, &PostOpAttr::True(fattr(&d.meta)));
        }
        let mut found = Vec::with_capacity(entries.len());
        for (name, ino, cookie) in &entries {
            let relative = d.relative.join(name);
            // An entry removed since it was read keeps its place, without attributes.
            let meta = fsat::stat_at(d.fd.as_fd(), name).ok();
            let fh = meta.as_ref().map(|m| self.handles.remember(&relative, m));
            found.push((*cookie, name.as_str(), *ino, meta, fh));
        }
        let list: Vec<Entryplus3Entry> = found
            .iter()
            .map(|(cookie, name, ino, meta, fh)| Entryplus3Entry {
                fileid: meta.as_ref().map_or(*ino, MetadataExt::ino),
                name: Filename3(name),
                cookie: *cookie,
                name_attributes: meta.as_ref().map_or(PostOpAttr::False, |m| PostOpAttr::True(fattr(m))),
                name_handle: fh.as_ref().map_or(PostOpFh3::False, |fh| PostOpFh3::True(NfsFh3 { data: fh })),
            })
            .collect();
        out.results(&READDIRPLUS3res::Nfs3Ok(READDIRPLUS3resok {
            dir_attributes: post_op(&d.fd),
            cookieverf: Cookieverf3(&COOKIEVERF),
            reply: Dirlistplus3 { entries: List::from_slice(&list), eof },
        }))
    }
}
