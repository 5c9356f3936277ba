//! NFSv3's Upper-Layer Binding generated from `specs/nfs3-mount3.binding` finds exactly what
//! the hand-written binding it replaced found (kept here, `reference/hand_binding.rs`): the
//! same DDP-eligible items of every call and reply, the same Write chunk sizes and the same
//! largest replies, on every procedure, on truncated messages, on reduced READ replies and
//! on calls of other programs; and so the Payload streams both reduce to are the same bytes.

use negotiate::onc::{self, Auth, AuthSys, CallHeader};
use nfs3_server::xdr::*;
use rpcrdma_v1::ulb::{reduce_payload, DdpItem, UpperLayerBinding};
use xdr_spec_rt::Xdr;

/// The crate's generated types, where the reference binding names them (`crate::xdr`).
mod xdr {
    pub use nfs3_server::xdr::*;
}

#[path = "reference/hand_binding.rs"]
#[allow(dead_code)]
mod hand;

fn call(proc: u32, args: &[u8]) -> Vec<u8> {
    let cred = Auth::Sys(AuthSys { stamp: 1, machine_name: "test".into(), uid: 0, gid: 0, gids: vec![] });
    CallHeader::new(7, NFS_PROGRAM, NFS_V3, proc).with_cred(cred).message(args).unwrap()
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

const FH: NfsFh3<'static> = NfsFh3 { data: &[9; 32] };

/// Calls of every shape the binding treats differently.
fn calls() -> Vec<Vec<u8>> {
    let mut calls = Vec::new();
    for len in [0usize, 1, 3, 4, 5, 1000, 4097, 9000] {
        let data = vec![0xab; len];
        for stable in [StableHow::Unstable, StableHow::FileSync] {
            let args = WRITE3args { file: FH, offset: 8192, count: len as u32, stable, data: &data };
            calls.push(call(NFSPROC3_WRITE, &args.to_vec().unwrap()));
        }
    }
    for len in [1usize, 100, 4000] {
        let path = "p".repeat(len);
        let dir = Diropargs3 { dir: FH, name: Filename3("link") };
        let args = SYMLINK3args {
            r#where: dir,
            symlink: Symlinkdata3 { symlink_attributes: no_attrs(), symlink_data: Nfspath3(&path) },
        };
        calls.push(call(NFSPROC3_SYMLINK, &args.to_vec().unwrap()));
    }
    for count in [0u32, 1, 4096, 1 << 20, u32::MAX] {
        calls.push(call(NFSPROC3_READ, &READ3args { file: FH, offset: 0, count }.to_vec().unwrap()));
        let verf = Cookieverf3(&[0; 8]);
        let readdir = READDIR3args { dir: FH, cookie: 0, cookieverf: verf, count };
        calls.push(call(NFSPROC3_READDIR, &readdir.to_vec().unwrap()));
        let plus = READDIRPLUS3args { dir: FH, cookie: 0, cookieverf: verf, dircount: 512, maxcount: count };
        calls.push(call(NFSPROC3_READDIRPLUS, &plus.to_vec().unwrap()));
    }
    calls.push(call(NFSPROC3_READLINK, &READLINK3args { symlink: FH }.to_vec().unwrap()));
    calls.push(call(NFSPROC3_GETATTR, &FH.to_vec().unwrap()));
    calls.push(call(NFSPROC3_NULL, &[]));
    // Another program, another version of NFS: nothing DDP-eligible, the default reply.
    let write = WRITE3args { file: FH, offset: 0, count: 8, stable: StableHow::Unstable, data: &[1; 8] };
    calls.push(CallHeader::new(8, MOUNT_PROGRAM, MOUNT_V3, 1).message(&write.to_vec().unwrap()).unwrap());
    calls.push(CallHeader::new(9, NFS_PROGRAM, 2, NFSPROC3_WRITE).message(&write.to_vec().unwrap()).unwrap());
    // Every cut of a WRITE and a SYMLINK: short messages hold no item.
    let whole = calls[10].clone();
    calls.extend((0..whole.len()).map(|n| whole[..n].to_vec()));
    let symlink = calls[16].clone();
    calls.extend((0..symlink.len()).map(|n| symlink[..n].to_vec()));
    calls
}

/// The same items, maxima and largest reply from both bindings, for every call.
#[test]
fn rfc8267_the_generated_binding_finds_what_the_hand_written_one_found_in_every_call() {
    let (generated, hand) = (nfs3_server::binding::nfs3(), hand::Nfs3Binding::new());
    let mut items_seen = 0;
    for (i, msg) in calls().iter().enumerate() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        generated.call_ddp_items(msg, &mut a);
        hand.call_ddp_items(msg, &mut b);
        assert_eq!(a, b, "call {i}: DDP-eligible items");
        items_seen += a.len();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        generated.reply_ddp_maxima(msg, &mut a);
        hand.reply_ddp_maxima(msg, &mut b);
        assert_eq!(a, b, "call {i}: Write chunk sizes");
        assert_eq!(generated.max_reply_size(msg), hand.max_reply_size(msg), "call {i}: largest reply");
        // So both reduce the call to the same Payload stream.
        let reduced = |items: &[DdpItem]| {
            let mut ranges = Vec::new();
            reduce_payload(msg.len(), items, &mut ranges)
                .map(|_| ranges.iter().flat_map(|r| msg[r.clone()].to_vec()).collect::<Vec<u8>>())
        };
        let mut items = Vec::new();
        generated.call_ddp_items(msg, &mut items);
        let mut hand_items = Vec::new();
        hand.call_ddp_items(msg, &mut hand_items);
        assert_eq!(reduced(&items).ok(), reduced(&hand_items).ok(), "call {i}: the reduced stream");
    }
    assert!(items_seen >= 19, "the corpus has WRITE and SYMLINK items: {items_seen}");
}

/// READ replies, whole and reduced (their data gone to the Write chunk), successful and
/// failed, and replies to other calls: the same result items from both bindings.
#[test]
fn rfc8267_the_generated_binding_finds_the_read_data_the_hand_written_one_found() {
    let (generated, hand) = (nfs3_server::binding::nfs3(), hand::Nfs3Binding::new());
    let read = call(NFSPROC3_READ, &READ3args { file: FH, offset: 0, count: 8192 }.to_vec().unwrap());
    let getattr = call(NFSPROC3_GETATTR, &FH.to_vec().unwrap());
    let mut checked = 0;
    for len in [0usize, 5, 4096, 8192] {
        let data = vec![0x5a; len];
        let ok = READ3res::Nfs3Ok(READ3resok {
            file_attributes: PostOpAttr::False,
            count: len as u32,
            eof: true,
            data: &data,
        });
        let fail = READ3res::Default {
            discriminant: Nfsstat3::Nfs3errIo,
            value: READ3resfail { file_attributes: PostOpAttr::False },
        };
        for (results, succeeded) in [(ok.to_vec().unwrap(), true), (fail.to_vec().unwrap(), false)] {
            let mut reply = Vec::new();
            onc::reply_success(7, &results, &mut reply);
            let mut cases = vec![(&read, reply.clone(), 0), (&getattr, reply.clone(), 0)];
            if succeeded {
                // The reduced reply: the data and its padding gone, the length word kept.
                let cut = reply.len() - (len + rpcrdma_v1::ulb::roundup_pad(len));
                cases.push((&read, reply[..cut].to_vec(), 1));
            }
            for (call, msg, reduced) in cases {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                generated.reply_ddp_items(call, &msg, reduced, &mut a);
                hand.reply_ddp_items(call, &msg, reduced, &mut b);
                assert_eq!(a, b, "{len}-byte READ reply, reduced {reduced}, succeeded {succeeded}");
                checked += a.len();
            }
        }
    }
    assert_eq!(checked, 8, "each successful READ reply's data, whole and reduced");
}
