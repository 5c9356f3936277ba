//! The NFSv3 service end to end on the host, no guest: the server on the in-process backend
//! (and one test on TCP), called by the workspace's own `negotiate::client::Client` with the
//! generated types, MOUNT over real TCP with record marking.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::onc::{self, AcceptStat, Auth, AuthSys, CallHeader, OncError, Reply, XidSource};
use negotiate::server::{Server, ServerConfig};
use nfs3_server::binding::Nfs3Binding;
use nfs3_server::handles::Handles;
use nfs3_server::mount::{Mount, MountServer};
use nfs3_server::nfs::Nfs3;
use nfs3_server::record::{read_record, write_record, MAX_RECORD};
use nfs3_server::rt::{List, Xdr};
use nfs3_server::xdr::*;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// A fresh export directory, removed when dropped.
struct Export(PathBuf);

impl Export {
    fn new(name: &str) -> Export {
        let dir = std::env::temp_dir().join(format!("nfs3-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Export(dir)
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server (NFS on `backend`, MOUNT on TCP loopback) and a client of both.
struct Rig<B: Backend> {
    export: Export,
    server: Server,
    mount: MountServer,
    client: Client<B>,
    binding: Nfs3Binding,
    xids: XidSource,
}

fn rig<B: Backend + Clone>(backend: B, name: &str) -> Rig<B> {
    let export = Export::new(name);
    let handles = Arc::new(Handles::new(&export.0, nfs3_server::boot_verifier()).unwrap());
    let server_binding = Arc::new(Nfs3Binding::new());
    let nfs = Nfs3::new(handles.clone());
    let server =
        Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), server_binding, nfs).unwrap();
    let mount = MountServer::start("127.0.0.1:0", Mount::new(handles)).unwrap();
    let client = Client::new(backend, server.local_addr(), ClientConfig::default());
    Rig { export, server, mount, client, binding: Nfs3Binding::new(), xids: XidSource::new(1) }
}

fn root_cred() -> Auth {
    Auth::Sys(AuthSys { stamp: 1, machine_name: "test".into(), uid: 0, gid: 0, gids: vec![] })
}

impl<B: Backend> Rig<B> {
    /// Calls NFSv3 procedure `proc` with encoded `args`; the whole reply.
    fn call_raw(&self, proc: u32, args: &[u8]) -> (u32, Vec<u8>) {
        let xid = self.xids.next();
        let msg = CallHeader::new(xid, NFS_PROGRAM, NFS_V3, proc).with_cred(root_cred()).message(args).unwrap();
        (xid, self.client.call(&msg, &self.binding).unwrap())
    }

    /// Calls `proc` with `args`; the results of a SUCCESS reply.
    fn call<'a, A: Xdr<'a>>(&self, proc: u32, args: &A) -> Vec<u8> {
        let (xid, reply) = self.call_raw(proc, &args.to_vec().unwrap());
        onc::results(&reply, xid).unwrap().to_vec()
    }

    /// MNT over TCP: the export root's handle and the auth flavors offered.
    fn mnt(&self, path: &str) -> (Vec<u8>, Vec<i32>) {
        let mut s = TcpStream::connect(self.mount.local_addr()).unwrap();
        let xid = self.xids.next();
        let msg = CallHeader::new(xid, MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC3_MNT)
            .message(&Dirpath(path).to_vec().unwrap())
            .unwrap();
        write_record(&mut s, &msg).unwrap();
        let mut reply = Vec::new();
        assert!(read_record(&mut s, MAX_RECORD, &mut reply).unwrap());
        let results = onc::results(&reply, xid).unwrap();
        match Mountres3::decode(results).unwrap().0 {
            Mountres3::Mnt3Ok(ok) => (ok.fhandle.0.to_vec(), ok.auth_flavors.iter().collect()),
            Mountres3::Default { discriminant } => panic!("MNT {path}: {discriminant:?}"),
        }
    }

    fn lookup(&self, dir: &[u8], name: &str) -> Result<Vec<u8>, Nfsstat3> {
        let r = self.call(
            NFSPROC3_LOOKUP,
            &LOOKUP3args { what: Diropargs3 { dir: NfsFh3 { data: dir }, name: Filename3(name) } },
        );
        match LOOKUP3res::decode(&r).unwrap().0 {
            LOOKUP3res::Nfs3Ok(ok) => Ok(ok.object.data.to_vec()),
            LOOKUP3res::Default { discriminant, .. } => Err(discriminant),
        }
    }

    fn create(&self, dir: &[u8], name: &str) -> Result<Vec<u8>, Nfsstat3> {
        let attrs = no_attrs();
        let how = Createhow3::ObjAttributes { discriminant: Createmode3::Guarded, value: attrs };
        let r = self.call(NFSPROC3_CREATE, &CREATE3args { r#where: dirop(dir, name), how });
        match CREATE3res::decode(&r).unwrap().0 {
            CREATE3res::Nfs3Ok(CREATE3resok { obj: PostOpFh3::True(fh), .. }) => Ok(fh.data.to_vec()),
            CREATE3res::Nfs3Ok(_) => panic!("CREATE {name}: no handle"),
            CREATE3res::Default { discriminant, .. } => Err(discriminant),
        }
    }

    fn mkdir(&self, dir: &[u8], name: &str) -> Result<Vec<u8>, Nfsstat3> {
        let r = self.call(NFSPROC3_MKDIR, &MKDIR3args { r#where: dirop(dir, name), attributes: no_attrs() });
        match MKDIR3res::decode(&r).unwrap().0 {
            MKDIR3res::Nfs3Ok(MKDIR3resok { obj: PostOpFh3::True(fh), .. }) => Ok(fh.data.to_vec()),
            MKDIR3res::Nfs3Ok(_) => panic!("MKDIR {name}: no handle"),
            MKDIR3res::Default { discriminant, .. } => Err(discriminant),
        }
    }

    /// REMOVE (or RMDIR): the status.
    fn remove(&self, dir: &[u8], name: &str, rmdir: bool) -> Nfsstat3 {
        let proc = if rmdir { NFSPROC3_RMDIR } else { NFSPROC3_REMOVE };
        let r = self.call(proc, &REMOVE3args { object: dirop(dir, name) });
        Nfsstat3::decode(&r).unwrap().0
    }

    fn getattr(&self, fh: &[u8]) -> Result<Fattr3, Nfsstat3> {
        match GETATTR3res::decode(&self.call(NFSPROC3_GETATTR, &GETATTR3args { object: NfsFh3 { data: fh } }))
            .unwrap()
            .0
        {
            GETATTR3res::Nfs3Ok(ok) => Ok(ok.obj_attributes),
            GETATTR3res::Default { discriminant } => Err(discriminant),
        }
    }
}

fn dirop<'a>(dir: &'a [u8], name: &'a str) -> Diropargs3<'a> {
    Diropargs3 { dir: NfsFh3 { data: dir }, name: Filename3(name) }
}

fn no_attrs() -> Sattr3 {
    Sattr3 {
        mode: SetMode3::True(0o644),
        uid: SetUid3::Default { discriminant: false },
        gid: SetGid3::Default { discriminant: false },
        size: SetSize3::Default { discriminant: false },
        atime: SetAtime::Default { discriminant: TimeHow::DontChange },
        mtime: SetMtime::Default { discriminant: TimeHow::DontChange },
    }
}

#[test]
fn mount_gives_the_root_handle_and_the_auth_flavors() {
    let rig = rig(InProcess, "mnt");
    let (root, flavors) = rig.mnt("/");
    assert_eq!(flavors, [1, 0], "AUTH_UNIX, then AUTH_NONE");
    let attrs = rig.getattr(&root).unwrap();
    assert_eq!(attrs.r#type, Ftype3::Nf3dir);
    // The export's absolute path names it too.
    let canonical = rig.export.0.canonicalize().unwrap();
    assert_eq!(rig.mnt(canonical.to_str().unwrap()).0, root);
}

/// WRITE 1 MiB (its data through a Read chunk), READ it back (through a Write chunk), byte
/// for byte.
fn one_mebibyte_through_chunks<B: Backend + Clone>(backend: B, name: &str) {
    let rig = rig(backend, name);
    let (root, _) = rig.mnt("/");
    let fh = rig.create(&root, "big").unwrap();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let before = rig.client.stats();
    let r = rig.call(
        NFSPROC3_WRITE,
        &WRITE3args {
            file: NfsFh3 { data: &fh },
            offset: 0,
            count: data.len() as u32,
            stable: StableHow::FileSync,
            data: &data,
        },
    );
    match WRITE3res::decode(&r).unwrap().0 {
        WRITE3res::Nfs3Ok(ok) => assert_eq!((ok.count, ok.committed), (data.len() as u32, StableHow::FileSync)),
        WRITE3res::Default { discriminant, .. } => panic!("WRITE: {discriminant:?}"),
    }
    assert_eq!(rig.client.stats().chunked, before.chunked + 1, "the WRITE's data went in a Read chunk");
    assert_eq!(std::fs::read(rig.export.0.join("big")).unwrap(), data, "the file holds what was written");

    let r = rig.call(NFSPROC3_READ, &READ3args { file: NfsFh3 { data: &fh }, offset: 0, count: data.len() as u32 });
    match READ3res::decode(&r).unwrap().0 {
        READ3res::Nfs3Ok(ok) => {
            assert!(ok.eof);
            assert_eq!(ok.count as usize, data.len());
            assert!(ok.data == &data[..], "READ returned other bytes than were written");
        }
        READ3res::Default { discriminant, .. } => panic!("READ: {discriminant:?}"),
    }
    // The server counts a reply once it is sent: the client may see the reply first.
    let counted = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        rig.server.stats().write_chunk_results == 1
    });
    assert!(counted, "the READ's data went through the Write chunk: {:?}", rig.server.stats());

    // A READ past the end: no data, eof.
    let r = rig.call(NFSPROC3_READ, &READ3args { file: NfsFh3 { data: &fh }, offset: 2 << 20, count: 4096 });
    assert!(matches!(READ3res::decode(&r).unwrap().0, READ3res::Nfs3Ok(READ3resok { count: 0, eof: true, .. })));
}

#[test]
fn one_mebibyte_written_and_read_back_inproc() {
    one_mebibyte_through_chunks(InProcess, "mib-inproc");
}

#[test]
fn one_mebibyte_written_and_read_back_tcp() {
    one_mebibyte_through_chunks(Tcp, "mib-tcp");
}

#[test]
fn a_thousand_entry_directory_is_listed_across_several_calls() {
    let rig = rig(InProcess, "readdir");
    let (root, _) = rig.mnt("/");
    let dir = rig.mkdir(&root, "many").unwrap();
    let expected: HashSet<String> = (0..1000).map(|i| format!("file-{i:04}-{}", "x".repeat(i % 37))).collect();
    for name in &expected {
        std::fs::write(rig.export.0.join("many").join(name), b"").unwrap();
    }

    // READDIR, 4 KiB at a time.
    let (mut seen, mut cookie, mut calls) = (Vec::new(), 0, 0);
    loop {
        calls += 1;
        let args = READDIR3args { dir: NfsFh3 { data: &dir }, cookie, cookieverf: Cookieverf3(&[0; 8]), count: 4096 };
        let r = rig.call(NFSPROC3_READDIR, &args);
        assert!(r.len() <= 4096, "a reply of {} bytes for a count of 4096", r.len());
        let READDIR3res::Nfs3Ok(ok) = READDIR3res::decode(&r).unwrap().0 else { panic!("READDIR failed") };
        for e in ok.reply.entries.iter() {
            seen.push(e.name.0.to_string());
            cookie = e.cookie;
        }
        if ok.reply.eof {
            break;
        }
    }
    assert!(calls > 5, "{calls} calls");
    assert_eq!(seen.len(), 1000, "every name once");
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), expected);

    // READDIRPLUS, 16 KiB at a time: every entry with its attributes and a handle that works.
    let (mut seen, mut cookie, mut calls) = (0, 0, 0);
    loop {
        calls += 1;
        let args = READDIRPLUS3args {
            dir: NfsFh3 { data: &dir },
            cookie,
            cookieverf: Cookieverf3(&[0; 8]),
            dircount: 2048,
            maxcount: 16384,
        };
        let r = rig.call(NFSPROC3_READDIRPLUS, &args);
        assert!(r.len() <= 16384);
        let READDIRPLUS3res::Nfs3Ok(ok) = READDIRPLUS3res::decode(&r).unwrap().0 else { panic!("READDIRPLUS failed") };
        for e in ok.reply.entries.iter() {
            assert!(expected.contains(e.name.0));
            let (PostOpAttr::True(a), PostOpFh3::True(fh)) = (e.name_attributes, e.name_handle) else {
                panic!("{} without attributes or handle", e.name.0)
            };
            if seen % 97 == 0 {
                assert_eq!(rig.getattr(fh.data).unwrap().fileid, a.fileid);
            }
            seen += 1;
            cookie = e.cookie;
        }
        if ok.reply.eof {
            break;
        }
    }
    assert!(calls > 5, "{calls} READDIRPLUS calls");
    assert_eq!(seen, 1000);

    // A count too small for even one entry.
    let args = READDIR3args { dir: NfsFh3 { data: &dir }, cookie: 0, cookieverf: Cookieverf3(&[0; 8]), count: 64 };
    assert!(matches!(
        READDIR3res::decode(&rig.call(NFSPROC3_READDIR, &args)).unwrap().0,
        READDIR3res::Default { discriminant: Nfsstat3::Nfs3errToosmall, .. }
    ));
}

#[test]
fn remove_and_rmdir_and_what_is_refused() {
    let rig = rig(InProcess, "remove");
    let (root, _) = rig.mnt("/");
    let dir = rig.mkdir(&root, "d").unwrap();
    let file = rig.create(&dir, "f").unwrap();
    assert_eq!(rig.create(&dir, "f"), Err(Nfsstat3::Nfs3errExist), "GUARDED on an existing name");
    assert_eq!(rig.lookup(&dir, "f").unwrap(), file);
    assert_eq!(rig.remove(&root, "d", true), Nfsstat3::Nfs3errNotempty);
    assert_eq!(rig.remove(&dir, "f", true), Nfsstat3::Nfs3errNotdir, "RMDIR of a file");
    assert_eq!(rig.remove(&root, "d", false), Nfsstat3::Nfs3errIsdir, "REMOVE of a directory");
    assert_eq!(rig.remove(&dir, "f", false), Nfsstat3::Nfs3Ok);
    assert_eq!(rig.lookup(&dir, "f"), Err(Nfsstat3::Nfs3errNoent));
    // The removed file's handle is stale.
    assert_eq!(rig.getattr(&file).unwrap_err(), Nfsstat3::Nfs3errStale);
    assert_eq!(rig.remove(&root, "d", true), Nfsstat3::Nfs3Ok);
    assert_eq!(rig.getattr(&dir).unwrap_err(), Nfsstat3::Nfs3errStale);

    // Nothing leaves the export: "..", names with "/", at the root and below it.
    std::fs::write(rig.export.0.parent().unwrap().join("nfs3-test-outside"), b"secret").unwrap();
    let sub = rig.mkdir(&root, "sub").unwrap();
    for (at, name) in [(&root, ".."), (&sub, ".."), (&root, "../nfs3-test-outside"), (&sub, "../sub"), (&root, "a/b")] {
        assert_eq!(rig.lookup(at, name), Err(Nfsstat3::Nfs3errAcces), "LOOKUP {name:?}");
        assert_eq!(rig.create(at, name), Err(Nfsstat3::Nfs3errAcces), "CREATE {name:?}");
        assert_eq!(rig.remove(at, name, false), Nfsstat3::Nfs3errAcces, "REMOVE {name:?}");
    }
    assert_eq!(rig.lookup(&sub, ".").unwrap(), sub, "\".\" is the directory itself");
    let _ = std::fs::remove_file(rig.export.0.parent().unwrap().join("nfs3-test-outside"));

    // Handles this server did not make: forged, truncated, empty.
    let mut forged = root.clone();
    forged[0] ^= 0xff;
    assert_eq!(rig.getattr(&forged).unwrap_err(), Nfsstat3::Nfs3errStale, "another generation");
    assert_eq!(rig.getattr(&root[..5]).unwrap_err(), Nfsstat3::Nfs3errBadhandle);
    assert_eq!(rig.getattr(&[]).unwrap_err(), Nfsstat3::Nfs3errBadhandle);
    assert_eq!(rig.lookup(&forged, "x"), Err(Nfsstat3::Nfs3errStale));
}

#[test]
fn bad_arguments_and_unknown_procedures_are_answered_not_fatal() {
    let rig = rig(InProcess, "garbage");
    let (root, _) = rig.mnt("/");
    let stat = |proc: u32, args: &[u8]| {
        let (xid, reply) = rig.call_raw(proc, args);
        match onc::results(&reply, xid) {
            Ok(_) => AcceptStat::Success,
            Err(OncError::NotSuccess(Reply::Accepted { stat, .. })) => stat,
            Err(e) => panic!("{e}"),
        }
    };
    // Truncated, a handle length beyond the input, a name that is not UTF-8, a bad enum.
    assert_eq!(stat(NFSPROC3_GETATTR, &[0, 0, 0, 8]), AcceptStat::GarbageArgs);
    assert_eq!(stat(NFSPROC3_GETATTR, &[0xff, 0xff, 0xff, 0xff]), AcceptStat::GarbageArgs);
    let mut lookup = LOOKUP3args { what: dirop(&root, "ab") }.to_vec().unwrap();
    let at = lookup.len() - 4;
    lookup[at] = 0xff;
    assert_eq!(stat(NFSPROC3_LOOKUP, &lookup), AcceptStat::GarbageArgs);
    let mut write =
        WRITE3args { file: NfsFh3 { data: &root }, offset: 0, count: 0, stable: StableHow::Unstable, data: &[] }
            .to_vec()
            .unwrap();
    let at = write.len() - 8;
    write[at..at + 4].copy_from_slice(&7u32.to_be_bytes());
    assert_eq!(stat(NFSPROC3_WRITE, &write), AcceptStat::GarbageArgs);
    assert_eq!(stat(99, &[]), AcceptStat::ProcUnavail);
    assert_eq!(stat(NFSPROC3_NULL, &[]), AcceptStat::Success);
    // A procedure not served: NFS3ERR_NOTSUPP, in a reply that decodes as its result type.
    let r = rig.call(NFSPROC3_RENAME, &RENAME3args { from: dirop(&root, "a"), to: dirop(&root, "b") });
    assert!(matches!(
        RENAME3res::decode(&r).unwrap().0,
        RENAME3res::Default { discriminant: Nfsstat3::Nfs3errNotsupp, .. }
    ));
    // WRITE to a directory, READ of one.
    let r = rig.call(
        NFSPROC3_WRITE,
        &WRITE3args { file: NfsFh3 { data: &root }, offset: 0, count: 1, stable: StableHow::Unstable, data: b"x" },
    );
    assert!(matches!(
        WRITE3res::decode(&r).unwrap().0,
        WRITE3res::Default { discriminant: Nfsstat3::Nfs3errIsdir, .. }
    ));
    // The server is still there.
    assert!(rig.getattr(&root).is_ok());
    assert_eq!(rig.server.stats().handler_panics, 0);
}

#[test]
fn setattr_and_the_small_procedures() {
    let rig = rig(InProcess, "setattr");
    let (root, _) = rig.mnt("/");
    let fh = rig.create(&root, "f").unwrap();
    let mut attrs = no_attrs();
    attrs.mode = SetMode3::True(0o600);
    attrs.size = SetSize3::True(12345);
    attrs.mtime = SetMtime::SetToClientTime(Nfstime3 { seconds: 1_000_000_000, nseconds: 5 });
    let r = rig.call(
        NFSPROC3_SETATTR,
        &SETATTR3args { object: NfsFh3 { data: &fh }, new_attributes: attrs, guard: Sattrguard3::False },
    );
    assert!(matches!(SETATTR3res::decode(&r).unwrap().0, SETATTR3res::Nfs3Ok(_)));
    let a = rig.getattr(&fh).unwrap();
    assert_eq!((a.mode, a.size, a.mtime.seconds, a.mtime.nseconds), (0o600, 12345, 1_000_000_000, 5));
    // A guard with the wrong ctime changes nothing.
    let guard = Sattrguard3::True(Nfstime3 { seconds: 1, nseconds: 0 });
    let r =
        rig.call(NFSPROC3_SETATTR, &SETATTR3args { object: NfsFh3 { data: &fh }, new_attributes: no_attrs(), guard });
    assert!(matches!(
        SETATTR3res::decode(&r).unwrap().0,
        SETATTR3res::Default { discriminant: Nfsstat3::Nfs3errNotSync, .. }
    ));

    let r = rig.call(NFSPROC3_ACCESS, &ACCESS3args { object: NfsFh3 { data: &fh }, access: 0x3f });
    let ACCESS3res::Nfs3Ok(ok) = ACCESS3res::decode(&r).unwrap().0 else { panic!("ACCESS failed") };
    assert_eq!(ok.access & (ACCESS3_READ | ACCESS3_MODIFY), ACCESS3_READ | ACCESS3_MODIFY, "root may read and write");
    let r = rig.call(NFSPROC3_FSINFO, &FSINFO3args { fsroot: NfsFh3 { data: &root } });
    let FSINFO3res::Nfs3Ok(info) = FSINFO3res::decode(&r).unwrap().0 else { panic!("FSINFO failed") };
    assert_eq!((info.rtmax, info.wtmax), (1 << 20, 1 << 20));
    let r = rig.call(NFSPROC3_FSSTAT, &FSSTAT3args { fsroot: NfsFh3 { data: &root } });
    assert!(matches!(FSSTAT3res::decode(&r).unwrap().0, FSSTAT3res::Nfs3Ok(s) if s.tbytes > 0));
    let r = rig.call(NFSPROC3_PATHCONF, &PATHCONF3args { object: NfsFh3 { data: &root } });
    assert!(matches!(PATHCONF3res::decode(&r).unwrap().0, PATHCONF3res::Nfs3Ok(p) if p.name_max == 255));
    let r = rig.call(NFSPROC3_COMMIT, &COMMIT3args { file: NfsFh3 { data: &fh }, offset: 0, count: 0 });
    assert!(matches!(COMMIT3res::decode(&r).unwrap().0, COMMIT3res::Nfs3Ok(_)));
}

#[test]
fn mount_program_over_tcp_survives_a_hostile_record() {
    let rig = rig(InProcess, "hostile");
    // A fragment header claiming 2 GiB - 1 (the most 31 bits say), twice: 4 GiB in all.
    let mut s = TcpStream::connect(rig.mount.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).unwrap();
    let mut buf = [0u8; 16];
    // The server closes the connection rather than wait for (or allocate) the bytes.
    let closed = match s.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted),
    };
    assert!(closed, "the connection is closed at once, not left waiting for 4 GiB");
    // Every procedure of the program, then the server is still serving.
    let mut s = TcpStream::connect(rig.mount.local_addr()).unwrap();
    for proc in [MOUNTPROC3_NULL, MOUNTPROC3_DUMP, MOUNTPROC3_EXPORT, MOUNTPROC3_UMNTALL] {
        let msg = CallHeader::new(proc + 100, MOUNT_PROGRAM, MOUNT_V3, proc).message(&[]).unwrap();
        write_record(&mut s, &msg).unwrap();
        let mut reply = Vec::new();
        assert!(read_record(&mut s, MAX_RECORD, &mut reply).unwrap());
        let results = onc::results(&reply, proc + 100).unwrap();
        match proc {
            MOUNTPROC3_DUMP => assert!(Mountlist::decode(results).unwrap().0.is_empty()),
            MOUNTPROC3_EXPORT => {
                let exports: Exports = List::decode(results).unwrap().0;
                assert_eq!(exports.iter().map(|e| e.ex_dir.0).collect::<Vec<_>>(), ["/"]);
            }
            _ => assert!(results.is_empty()),
        }
    }
    let (root, _) = rig.mnt("/");
    assert!(!root.is_empty());
    // A path that is not the export.
    let mut s = TcpStream::connect(rig.mount.local_addr()).unwrap();
    let msg = CallHeader::new(7, MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC3_MNT)
        .message(&Dirpath("/etc").to_vec().unwrap())
        .unwrap();
    write_record(&mut s, &msg).unwrap();
    let mut reply = Vec::new();
    read_record(&mut s, MAX_RECORD, &mut reply).unwrap();
    assert!(matches!(
        Mountres3::decode(onc::results(&reply, 7).unwrap()).unwrap().0,
        Mountres3::Default { discriminant: Mountstat3::Mnt3errNoent }
    ));
}

/// The Linux client sends a SYMLINK's path through a Read chunk (RFC 8267 section 3.1.1 makes
/// it DDP-eligible): the binding must locate it, or the server answers GARBAGE_ARGS instead of
/// NFS3ERR_NOTSUPP (seen with the kernel client in guest/test-kernel-nfs3).
#[test]
fn a_long_symlink_path_is_ddp_eligible_and_answered_notsupp() {
    let rig = rig(InProcess, "symlink");
    let (root, _) = rig.mnt("/");
    let path = "p".repeat(4000);
    let mut args = dirop(&root, "link").to_vec().unwrap();
    args.extend(no_attrs().to_vec().unwrap());
    args.extend(Nfspath3(&path).to_vec().unwrap());
    let xid = rig.xids.next();
    let msg =
        CallHeader::new(xid, NFS_PROGRAM, NFS_V3, NFSPROC3_SYMLINK).with_cred(root_cred()).message(&args).unwrap();
    let item = nfs3_server::binding::symlink_path(&msg).expect("the SYMLINK's path");
    assert_eq!(&msg[item.offset..item.offset + item.len], path.as_bytes());
    let reply = rig.client.call(&msg, &rig.binding).unwrap();
    let results = onc::results(&reply, xid).unwrap();
    assert_eq!(i32::from_be_bytes(results[..4].try_into().unwrap()), Nfsstat3::Nfs3errNotsupp as i32);
}
