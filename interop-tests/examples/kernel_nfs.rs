//! Our requester against the Linux kernel's own RPC-over-RDMA server (nfsd + svcrdma), inside
//! the Soft-RoCE guest: `guest/test-kernel` starts the kernel NFS server there
//! (`guest/kernel-nfsd.sh`: an export of a tmpfs folder holding the file `hello`, RDMA port
//! 20049) and runs this program against it.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 kernel_nfs [PORT]     # PORT defaults to 20049
//! ```
//!
//! Each check prints one `ok:` or `FAIL:` line with what the kernel answered; the exit status
//! is 1 when any check failed. The checks:
//!
//! - (a) negotiation: the first call goes out as the Version Two probe; the kernel answers
//!   RDMA_ERR_VERS and the client sends the call again in Version One on the same connection
//!   (one CM connect; the probe and the resend leave from the same endpoint);
//! - (b) NFSv3 and NFSv4 NULL calls (RFC 5531 by hand, AUTH_NONE) as Short calls;
//! - (c) thresholds, credits and both sides' RFC 8797 private data;
//! - (d) a Long call (RDMA_NOMSG, the call in a position-zero Read chunk): an NFSv4 SETCLIENTID
//!   whose 1000-byte client id exceeds the 1024-byte call threshold a second client sets by
//!   advertising a 1024-byte Send size;
//! - (e) a call that provides a Reply chunk (the ULB's largest reply exceeds the reply
//!   threshold): NFSv4 NULL;
//! - (f) an NFSv3 NULL that provides a Write chunk the reply cannot use, and an NFSv4
//!   COMPOUND {PUTROOTFH, LOOKUP "hello", READ} whose READ data the kernel RDMA-Writes into the
//!   Write chunk;
//! - (g) the same chunked calls from a client whose private data sets the R flag (remote
//!   invalidation: the kernel then answers with Send With Invalidate of our chunks' rkeys;
//!   our chunks are memory windows);
//! - (h) a client that speaks draft-ietf-nfsv4-rpcrdma-version-two-07 (issue 27): its first
//!   call leaves as an RDMA2_CALL_INLINE, the kernel (Version One only) answers RDMA_ERR_VERS,
//!   and the call goes again in Version One on the same connection (-07 section 4.3.2), and
//!   so do the calls after it.

use std::sync::{Arc, Mutex};

use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use std::time::Duration;

use cm_private_data::{Flags, PrivateData};
use negotiate::client::{Client, ClientConfig};
use negotiate::memory::NoV2Reason;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::{Backend, QpCaps, Rdma};

/// Per CM connect: the private data sent, and the private data the passive side accepted with.
type Connects = Vec<(Vec<u8>, Vec<u8>)>;

/// The rdma-core backend with every Send captured, recording each connect: the private data
/// sent and the private data the passive side accepted with.
#[derive(Clone)]
struct Recorded {
    inner: Captured<Rdma>,
    connects: Arc<Mutex<Connects>>,
}

impl Backend for Recorded {
    type Pd = <Captured<Rdma> as Backend>::Pd;
    type Region = <Captured<Rdma> as Backend>::Region;
    type Qp = <Captured<Rdma> as Backend>::Qp;
    type Listener = <Captured<Rdma> as Backend>::Listener;
    type Request = <Captured<Rdma> as Backend>::Request;

    fn any_address(&self) -> String {
        self.inner.any_address()
    }

    fn alloc_pd(&self) -> rpcrdma_verbs::Result<Self::Pd> {
        self.inner.alloc_pd()
    }

    fn listen_with(&self, addr: &str, opts: &rpcrdma_verbs::ListenOptions) -> rpcrdma_verbs::Result<Self::Listener> {
        self.inner.listen_with(addr, opts)
    }

    fn connect(
        &self,
        pd: &Self::Pd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> rpcrdma_verbs::Result<(Self::Qp, Vec<u8>)> {
        let r = self.inner.connect(pd, addr, private_data, caps, timeout)?;
        self.connects.lock().unwrap().push((private_data.to_vec(), r.1.clone()));
        Ok(r)
    }
}

impl Recorded {
    fn connects(&self) -> Connects {
        self.connects.lock().unwrap().clone()
    }
}

#[path = "common/checks.rs"]
mod checks;
use checks::Checks;
#[path = "common/onc_rpc.rs"]
mod onc_rpc;
use interop_tests::hex;
use onc_rpc::{accepted_success, rpc_call, word, NFS_PROGRAM};
use rpcrdma_v1::Version;

// NFS constants.
const NFSPROC4_COMPOUND: u32 = 1;
const OP_LOOKUP: u32 = 15;
const OP_PUTROOTFH: u32 = 24;
const OP_READ: u32 = 25;
const OP_SETCLIENTID: u32 = 35;

/// The checks' verdicts, with the NFS-shaped checks on top of the plain ones.
#[derive(Default)]
struct Report(Checks);

impl std::ops::Deref for Report {
    type Target = Checks;
    fn deref(&self) -> &Checks {
        &self.0
    }
}

impl std::ops::DerefMut for Report {
    fn deref_mut(&mut self) -> &mut Checks {
        &mut self.0
    }
}

impl Report {
    /// A call expected to come back MSG_ACCEPTED/SUCCESS with its own XID.
    fn call_ok(
        &mut self,
        name: &str,
        client: &Client<Recorded>,
        call: &[u8],
        ulb: &OpaqueAtUlb,
    ) -> Option<(Vec<u8>, usize)> {
        let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
        match client.call(call, ulb) {
            Ok(reply) => match accepted_success(&reply, xid) {
                Ok(at) => {
                    self.check(
                        name,
                        true,
                        format!(
                            "{} call bytes -> MSG_ACCEPTED/SUCCESS, XID {xid:#010x}, {} reply bytes",
                            call.len(),
                            reply.len()
                        ),
                    );
                    Some((reply, at))
                }
                Err(e) => {
                    self.check(name, false, format!("reply {}: {e}", hex(&reply[..reply.len().min(64)])));
                    None
                }
            },
            Err(e) => {
                self.check(name, false, format!("call failed: {e}"));
                None
            }
        }
    }
}

/// Which version each captured Send carried (header word 1), with its endpoint and form.
#[derive(Debug, Clone)]
struct Sent {
    endpoint: u64,
    xid: u32,
    vers: u32,
    credits: u32,
    proc_: u32,
}

fn main() {
    let Some(rdma) = Rdma::from_test_env() else { std::process::exit(2) };
    let host = rdma.host();
    let port = std::env::args().nth(1).unwrap_or_else(|| "20049".into());
    let addr = format!("{host}:{port}");
    let mut r = Report::default();

    let sent = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let s = sent.clone();
    // Every client below runs on a clone of this backend, so their endpoints are numbered
    // together.
    let rdma = Captured::new(
        rdma,
        Arc::new(move |m: &CapturedMessage<'_>| {
            let w = |i: usize| word(m.bytes, i * 4).unwrap_or(u32::MAX);
            s.lock().unwrap().push(Sent { endpoint: m.endpoint, xid: w(0), vers: w(1), credits: w(2), proc_: w(3) });
        }),
    );

    // ---- The main client: versions 1..=2, 100 credits asked (more than the kernel's 64),
    // RFC 8797 private data 4096/4096 with the R flag clear.
    let backend = Recorded { inner: rdma.clone(), connects: Arc::default() };
    let mut cfg = ClientConfig::default();
    // (The default sets the R flag; (g) below is the client that sets it.)
    cfg.private_data = Some(PrivateData::new(Flags::empty(), 4096, 4096));
    cfg.requester.credits = 100;
    cfg.caps = QpCaps::default().max_recv_wr(128);
    let ours = cfg.private_data.unwrap();
    println!(
        "client: {addr}, versions {:?}, credits asked {}, private data {}",
        cfg.requester.versions,
        cfg.requester.credits,
        hex(&ours.encode())
    );
    let client = Client::new(backend.clone(), &addr, cfg);
    let small = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };

    // (a) + (b): the first call is the probe.
    let v3_null = rpc_call(0x4b4e_0001, NFS_PROGRAM, 3, 0, false).0;
    let probe = r.call_ok("(b) NFSv3 NULL (the first call: the Version Two probe)", &client, &v3_null, &small);
    let sends = sent.lock().unwrap().clone();
    let of_probe: Vec<&Sent> = sends.iter().filter(|s| s.xid == 0x4b4e_0001).collect();
    r.check(
        "(a) probe then resend",
        of_probe.len() == 2 && of_probe[0].vers == 2 && of_probe[1].vers == 1,
        format!(
            "the NULL left {} times, rdma_vers {:?}",
            of_probe.len(),
            of_probe.iter().map(|s| s.vers).collect::<Vec<_>>()
        ),
    );
    r.check(
        "(a) same connection",
        of_probe.len() == 2 && of_probe[0].endpoint == of_probe[1].endpoint && backend.connects().len() == 1,
        format!(
            "endpoints {:?}, CM connects {}",
            of_probe.iter().map(|s| s.endpoint).collect::<Vec<_>>(),
            backend.connects().len()
        ),
    );
    r.check(
        "(a) version",
        client.version() == Some(Version::ONE),
        format!("client.version() = {:?}", client.version()),
    );
    let memory = client.memory().no_v2(&addr);
    r.check(
        "(a) memory",
        matches!(memory, Some(NoV2Reason::ErrVers { high: 1 })),
        format!("the kernel answered RDMA_ERR_VERS: remembered {memory:?}"),
    );
    let _ = probe;

    let v4_null = rpc_call(0x4b4e_0002, NFS_PROGRAM, 4, 0, false).0;
    r.call_ok("(b) NFSv4 NULL", &client, &v4_null, &small);
    let stats = client.stats();
    r.check(
        "(b) Short",
        stats.short == 3 && stats.long == 0 && stats.chunked == 0,
        format!("{stats:?} (the probe counts)"),
    );

    // (c) thresholds, credits, private data.
    let connects = backend.connects();
    let (sent_pd, accepted) = connects.first().cloned().unwrap_or_default();
    let peer = PrivateData::decode(&accepted);
    println!(
        "       private data sent {} ({:?}); accepted with {} bytes, first 8: {} ({:?})",
        hex(&sent_pd),
        PrivateData::decode(&sent_pd),
        accepted.len(),
        hex(&accepted[..accepted.len().min(8)]),
        peer
    );
    r.check(
        "(c) our private data",
        sent_pd == ours.encode() && !ours.flags().contains(Flags::REMOTE_INVALIDATE),
        format!("{} (R flag off)", hex(&sent_pd)),
    );
    r.check(
        "(c) the kernel's private data",
        peer.is_some_and(|p| p.flags().is_empty() && p.send_size() == 4096 && p.receive_size() == 4096),
        format!("{peer:?}"),
    );
    let t = client.thresholds();
    r.check(
        "(c) thresholds",
        t == Some(InlineThresholds { call: 4096, reply: 4096 }),
        format!("{t:?}: min(our Send 4096, its Receive 4096), min(its Send 4096, our Receive 4096)"),
    );
    let window = client.credits();
    r.check("(c) credits", window == 64, format!("window {window} = min(asked 100, granted 64)"));
    let sends = sent.lock().unwrap().clone();
    r.check(
        "(c) credits asked",
        sends.iter().all(|s| s.credits == 100),
        format!(
            "rdma_credit in our headers: {:?}",
            sends.iter().map(|s| s.credits).collect::<std::collections::BTreeSet<_>>()
        ),
    );

    // (e) a Reply chunk: the ULB says the reply may reach 8192 bytes, beyond the 4096 reply
    // threshold, so the call provides a Reply chunk; the kernel may answer RDMA_NOMSG into it.
    let big_reply = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 8192 };
    let v4_null_rc = rpc_call(0x4b4e_0003, NFS_PROGRAM, 4, 0, false).0;
    r.call_ok("(e) NFSv4 NULL with a Reply chunk", &client, &v4_null_rc, &big_reply);

    // (f) an unused Write chunk: the NULL reply has no result where the ULB would look.
    let write = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 4096, max_reply: 1024 };
    let v3_null_wc = rpc_call(0x4b4e_0004, NFS_PROGRAM, 3, 0, false).0;
    r.call_ok("(f) NFSv3 NULL with an unused Write chunk", &client, &v3_null_wc, &write);

    // (f) a used Write chunk: READ of /srv/nfs/hello; its data<> length word sits at a fixed
    // offset of the reply (24-byte RPC header; status, empty tag, 3 results; PUTROOTFH and
    // LOOKUP results are op + status; READ's is op, status, eof).
    let read_ulb =
        OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24 + 12 + 8 + 8 + 12), max_result: 4096, max_reply: 1024 };
    let read = |xid: u32| {
        rpc_call(xid, NFS_PROGRAM, 4, NFSPROC4_COMPOUND, true)
            .opaque(b"")
            .u32(0)
            .u32(3)
            .u32(OP_PUTROOTFH)
            .u32(OP_LOOKUP)
            .opaque(b"hello")
            .u32(OP_READ)
            .u32(0)
            .fixed(&[0; 12])
            .u64(0)
            .u32(4096)
            .0
    };
    let expect = b"hello from the kernel NFS server over RPC-over-RDMA\n";
    // NFS4ERR_GRACE: the server's NFSv4 grace period is not over (kernel-nfsd.sh ends it
    // early); a client waits and sends the call again with a new XID.
    let read_call = |r: &mut Report, name: &str, client: &Client<Recorded>, xid: u32| {
        for attempt in 0..20u32 {
            let got = r.call_ok(name, client, &read(xid + (attempt << 8)), &read_ulb);
            match &got {
                Some((reply, at)) if word(reply, *at) == Some(10013) => {
                    println!("       NFS4ERR_GRACE: the grace period is not over; again in 1 s");
                    std::thread::sleep(Duration::from_secs(1));
                }
                _ => return got,
            }
        }
        None
    };
    let check_read = |r: &mut Report, name: &str, got: Option<(Vec<u8>, usize)>| {
        let Some((reply, at)) = got else { return };
        let status = word(&reply, at);
        let data_len = word(&reply, 64).unwrap_or(0) as usize;
        let data = reply.get(68..68 + data_len).unwrap_or_default();
        r.check(
            name,
            status == Some(0) && data == expect,
            format!("NFS4 status {status:?}, READ data {:?}", String::from_utf8_lossy(data)),
        );
    };
    let before = client.stats();
    let got = read_call(&mut r, "(f) NFSv4 COMPOUND PUTROOTFH+LOOKUP+READ with a Write chunk", &client, 0x4b4e_0005);
    check_read(&mut r, "(f) READ data through the Write chunk", got);
    let after = client.stats();
    println!("       forms so far: {after:?} (before the READ: {before:?})");

    // (d) a Long call: a second client advertising a 1024-byte Send size, so its call threshold
    // is 1024, sends SETCLIENTID with a 1000-byte client id; it cannot go inline.
    let long_backend = Recorded { inner: rdma.clone(), connects: Arc::default() };
    let mut long_cfg = ClientConfig::default();
    long_cfg.requester.versions = (Version::ONE, Version::ONE);
    long_cfg.private_data = Some(PrivateData::new(Flags::empty(), 1024, 4096));
    let long_client = Client::new(long_backend.clone(), &addr, long_cfg);
    r.call_ok(
        "(d) warm-up NFSv4 NULL (Version One only)",
        &long_client,
        &rpc_call(0x4b4e_0010, NFS_PROGRAM, 4, 0, false).0,
        &small,
    );
    println!("       thresholds of the 1024-byte-Send client: {:?}", long_client.thresholds());
    let id: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let setclientid = rpc_call(0x4b4e_0011, NFS_PROGRAM, 4, NFSPROC4_COMPOUND, true)
        .opaque(b"")
        .u32(0)
        .u32(1)
        .u32(OP_SETCLIENTID)
        .fixed(&0x0102_0304_0506_0708u64.to_be_bytes())
        .opaque(&id)
        .u32(0x4000_0000)
        .opaque(b"tcp")
        .opaque(b"10.0.2.15.3.232")
        .u32(1)
        .0;
    let before = long_client.stats();
    if let Some((reply, at)) = r.call_ok("(d) NFSv4 SETCLIENTID, 1000-byte id", &long_client, &setclientid, &small) {
        let after = long_client.stats();
        let status = word(&reply, at);
        let op_status = word(&reply, at + 16);
        r.check(
            "(d) went Long and was answered",
            after.long == before.long + 1 && status == Some(0) && op_status == Some(0),
            format!(
                "{} call bytes as {} Long call(s); COMPOUND status {status:?}, SETCLIENTID status {op_status:?}, clientid {}",
                setclientid.len(),
                after.long - before.long,
                reply.get(at + 20..at + 28).map(hex).unwrap_or_default()
            ),
        );
    }
    drop(long_client);

    // (g) remote invalidation: the R flag set, then the chunked calls again.
    let ri_backend = Recorded { inner: rdma.clone(), connects: Arc::default() };
    let mut ri_cfg = ClientConfig::default();
    ri_cfg.requester.versions = (Version::ONE, Version::ONE);
    ri_cfg.private_data = Some(PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096));
    let ri = Client::new(ri_backend.clone(), &addr, ri_cfg);
    r.call_ok("(g) R flag: NFSv3 NULL", &ri, &rpc_call(0x4b4e_0020, NFS_PROGRAM, 3, 0, false).0, &small);
    r.call_ok(
        "(g) R flag: NFSv4 NULL with a Reply chunk",
        &ri,
        &rpc_call(0x4b4e_0021, NFS_PROGRAM, 4, 0, false).0,
        &big_reply,
    );
    r.call_ok(
        "(g) R flag: NFSv3 NULL with an unused Write chunk",
        &ri,
        &rpc_call(0x4b4e_0022, NFS_PROGRAM, 3, 0, false).0,
        &write,
    );
    let got = read_call(&mut r, "(g) R flag: READ with a Write chunk", &ri, 0x4b4e_0023);
    check_read(&mut r, "(g) R flag: READ data", got);
    r.call_ok(
        "(g) R flag: NFSv3 NULL after the chunked calls",
        &ri,
        &rpc_call(0x4b4e_0024, NFS_PROGRAM, 3, 0, false).0,
        &small,
    );
    r.check(
        "(g) R flag: one connection",
        ri_backend.connects().len() == 1,
        format!("CM connects {}", ri_backend.connects().len()),
    );
    drop(ri);

    // (h) draft-ietf-07: the first message in -07, ERR_VERS, then Version One.
    let d07_backend = Recorded { inner: rdma.clone(), connects: Arc::default() };
    let d07_cfg = ClientConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    let d07 = Client::new(d07_backend.clone(), &addr, d07_cfg);
    let before = sent.lock().unwrap().len();
    r.call_ok("(h) -07: NFSv3 NULL (the first call)", &d07, &rpc_call(0x4b4e_0040, NFS_PROGRAM, 3, 0, false).0, &small);
    r.call_ok("(h) -07: NFSv4 NULL", &d07, &rpc_call(0x4b4e_0041, NFS_PROGRAM, 4, 0, false).0, &small);
    let of_d07: Vec<Sent> = sent.lock().unwrap()[before..].to_vec();
    let shape: Vec<(u32, u32, u32)> = of_d07.iter().map(|s| (s.xid, s.vers, s.proc_)).collect();
    r.check(
        "(h) -07: RDMA2_CALL_INLINE, then Version One",
        shape == [(0x4b4e_0040, 2, 10), (0x4b4e_0040, 1, 0), (0x4b4e_0041, 1, 0)],
        format!("(xid, rdma_vers, fourth word) of each Send: {shape:x?}"),
    );
    r.check(
        "(h) -07: same connection",
        d07_backend.connects().len() == 1 && of_d07.windows(2).all(|w| w[0].endpoint == w[1].endpoint),
        format!("CM connects {}", d07_backend.connects().len()),
    );
    r.check(
        "(h) -07: version",
        (d07.version(), d07.dialect()) == (Some(Version::ONE), None),
        format!("client.version() = {:?}, dialect {:?}", d07.version(), d07.dialect()),
    );
    drop(d07);

    // The main client is still on its first connection.
    r.call_ok("(b) NFSv3 NULL at the end", &client, &rpc_call(0x4b4e_0030, NFS_PROGRAM, 3, 0, false).0, &small);
    r.check(
        "one connection in all",
        backend.connects().len() == 1,
        format!("main client CM connects {}", backend.connects().len()),
    );
    drop(client);

    let sends = sent.lock().unwrap().clone();
    println!(
        "sends: {}",
        sends
            .iter()
            .map(|s| format!("{}:{:#x}/v{}/p{}", s.endpoint, s.xid, s.vers, s.proc_))
            .collect::<Vec<_>>()
            .join(" ")
    );
    std::process::exit(r.summary("kernel_nfs"));
}
