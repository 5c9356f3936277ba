//! Our requester moves 16 MiB each way through the Linux kernel's nfsd over RPC-over-RDMA,
//! inside the Soft-RoCE guest: `guest/test-kernel-nfs3-data` starts the kernel NFS server
//! there (`guest/kernel-nfsd.sh`: an export of the tmpfs /srv/nfs, rpc.mountd on TCP 20048,
//! RDMA port 20049) and runs this program against it.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 kernel_nfs3_data [PORT [MOUNT_PORT]]   # 20049 20048
//! ```
//!
//! The NFSv3 and MOUNTv3 messages are the types generated from `specs/nfs3-mount3.txt` (the
//! nfs3-server crate), the ULB is its binding (`nfs3_server::binding::nfs3`, generated from
//! `specs/nfs3-mount3.binding`; RFC 8267: WRITE data in Read chunks, READ data in Write
//! chunks). Checks, each an `ok:` or `FAIL:` line; exit 1 when one failed:
//!
//! - the first call (NFSv3 NULL) is the Version Two probe; the kernel answers RDMA_ERR_VERS
//!   and the client goes on in Version One on the same connection;
//! - MNT over TCP gives the export's root handle; LOOKUP finds the file this program created
//!   in the export (it runs in the guest, beside the server);
//! - 16 MiB of WRITEs (FILE_SYNC), each call's data in a Read chunk, and the file on the
//!   server's disk is byte-equal to what was written;
//! - 16 MiB of READs, each reply's data RDMA-Written by the kernel into our Write chunk, and
//!   byte-equal to the file;
//! - from the kernel's rpcrdma tracepoints: svcrdma posted the RDMA Reads of each WRITE's Read
//!   chunk and the RDMA Writes of each READ's Write chunk.

use std::net::TcpStream;
use std::time::Instant;

use negotiate::client::{Client, ClientConfig};
use negotiate::memory::NoV2Reason;
use negotiate::onc::{self, Auth, AuthSys, CallHeader, XidSource};
use negotiate::service::Bindings;
use nfs3_server::record::{read_record, write_record, MAX_RECORD};
use nfs3_server::rt::Xdr;
use nfs3_server::xdr::*;
use rpcrdma_v1::Version;
use rpcrdma_verbs::Rdma;

/// The file moved, and how much of it.
const FILE: &str = "data16m";
const EXPORT: &str = "/srv/nfs";
const SIZE: usize = 16 << 20;
/// Bytes per READ or WRITE: below any nfsd's largest (its max_block_size is at least 32 KiB
/// only on tiny machines; each call is repeated from where the last one stopped anyway).
const STEP: usize = 256 << 10;

#[path = "common/checks.rs"]
mod checks;
use checks::Checks;

const TRACE: &str = "/sys/kernel/tracing";

/// Enables the kernel's rpcrdma tracepoints, with the trace emptied; false when there are none.
fn enable_trace() -> bool {
    if !std::path::Path::new(&format!("{TRACE}/events/rpcrdma")).exists() {
        let _ = std::process::Command::new("mount").args(["-t", "tracefs", "nodev", TRACE]).status();
    }
    let _ = std::fs::write(format!("{TRACE}/buffer_size_kb"), "8192");
    let _ = std::fs::write(format!("{TRACE}/trace"), "");
    std::fs::write(format!("{TRACE}/events/rpcrdma/enable"), "1").is_ok()
}

/// The svcrdma events in the trace since [`enable_trace`], by name, and their count.
fn trace_events() -> std::collections::BTreeMap<String, usize> {
    let _ = std::fs::write(format!("{TRACE}/events/rpcrdma/enable"), "0");
    let trace = std::fs::read_to_string(format!("{TRACE}/trace")).unwrap_or_default();
    let mut events = std::collections::BTreeMap::new();
    for l in trace.lines().filter(|l| !l.starts_with('#')) {
        if let Some(name) = l.split(": ").nth(1).filter(|n| n.starts_with("svcrdma_")) {
            *events.entry(name.to_string()).or_default() += 1;
        }
    }
    events
}

fn root_cred() -> Auth {
    Auth::Sys(AuthSys { stamp: 1, machine_name: "kernel-nfs3-data".into(), uid: 0, gid: 0, gids: vec![] })
}

/// MNT over TCP (RFC 1813 section 5.2.1): the root handle of `path`.
fn mnt(addr: &str, path: &str) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("MOUNT on tcp {addr}: {e}"))?;
    let msg = CallHeader::new(0x6d6e_7401, MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC3_MNT)
        .with_cred(root_cred())
        .message(&Dirpath(path).to_vec().unwrap())
        .map_err(|e| format!("MNT call: {e}"))?;
    write_record(&mut s, &msg).map_err(|e| format!("MNT to {addr}: {e}"))?;
    let mut reply = Vec::new();
    read_record(&mut s, MAX_RECORD, &mut reply).map_err(|e| format!("MNT reply from {addr}: {e}"))?;
    let results = onc::results(&reply, 0x6d6e_7401).map_err(|e| format!("MNT reply: {e}"))?;
    match Mountres3::decode(results).map_err(|e| format!("MNT results: {e}"))?.0 {
        Mountres3::Mnt3Ok(ok) => Ok(ok.fhandle.0.to_vec()),
        Mountres3::Default { discriminant } => Err(format!("MNT {path}: {discriminant:?}")),
    }
}

struct Nfs {
    client: Client<Rdma>,
    binding: Bindings,
    xids: XidSource,
}

impl Nfs {
    /// Calls NFSv3 `proc` with encoded `args`; the results of an accepted, successful reply.
    fn call(&self, proc: u32, args: &[u8]) -> Result<Vec<u8>, String> {
        let xid = self.xids.next();
        let msg = CallHeader::new(xid, NFS_PROGRAM, NFS_V3, proc)
            .with_cred(root_cred())
            .message(args)
            .map_err(|e| format!("procedure {proc}: {e}"))?;
        let reply = self.client.call(&msg, &self.binding).map_err(|e| format!("procedure {proc}: {e}"))?;
        onc::results(&reply, xid).map(<[u8]>::to_vec).map_err(|e| format!("procedure {proc}: {e}"))
    }
}

fn main() {
    let Some(rdma) = Rdma::from_test_env() else { std::process::exit(2) };
    let host = rdma.host();
    let mut args = std::env::args().skip(1);
    let port = args.next().unwrap_or_else(|| "20049".into());
    let mount_port = args.next().unwrap_or_else(|| "20048".into());
    let addr = format!("{host}:{port}");
    let mut r = Checks::default();

    // The file, made here (this program runs beside the server): NFSv3 has no need of CREATE
    // to show WRITE, and the server's disk is then read directly to compare.
    let path = format!("{EXPORT}/{FILE}");
    if let Err(e) = std::fs::write(&path, b"") {
        println!("FAIL: create {path}: {e}");
        std::process::exit(1);
    }
    let data: Vec<u8> = (0..SIZE as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();

    let nfs = Nfs {
        client: Client::new(rdma, &addr, ClientConfig::default()),
        binding: nfs3_server::binding::nfs3(),
        xids: XidSource::new(0x4e33_0001),
    };
    // The Version Two probe (draft section 4.2): the kernel answers RDMA_ERR_VERS and the
    // client sends the call again in Version One on the same connection.
    let null = nfs.call(NFSPROC3_NULL, &[]);
    r.check("NFSv3 NULL (the Version Two probe, then Version One)", null.is_ok(), format!("{:?}", null.err()));
    let memory = nfs.client.memory().no_v2(&addr);
    r.check(
        "fallback to Version One",
        nfs.client.version() == Some(Version::ONE) && matches!(memory, Some(NoV2Reason::ErrVers { high: 1 })),
        format!("version {:?}; remembered {memory:?}", nfs.client.version()),
    );

    let root = match mnt(&format!("{host}:{mount_port}"), EXPORT) {
        Ok(fh) => fh,
        Err(e) => {
            r.check("MNT", false, e);
            std::process::exit(1);
        }
    };
    let fh = match nfs.call(
        NFSPROC3_LOOKUP,
        &LOOKUP3args { what: Diropargs3 { dir: NfsFh3 { data: &root }, name: Filename3(FILE) } }.to_vec().unwrap(),
    ) {
        Ok(res) => match LOOKUP3res::decode(&res) {
            Ok((LOOKUP3res::Nfs3Ok(ok), _)) => ok.object.data.to_vec(),
            other => {
                r.check("LOOKUP", false, format!("{FILE}: {:?}", other.map(|o| o.0)));
                std::process::exit(1);
            }
        },
        Err(e) => {
            r.check("LOOKUP", false, e);
            std::process::exit(1);
        }
    };
    println!("       root handle {} bytes, {FILE} handle {} bytes", root.len(), fh.len());

    let traced = enable_trace();
    // 16 MiB of WRITEs: the data of each is DDP-eligible (RFC 8267 section 3.1.1), so it goes
    // in a Read chunk that the kernel RDMA-Reads.
    let before = nfs.client.stats();
    let start = Instant::now();
    let (mut at, mut calls, mut error) = (0usize, 0u32, None);
    while at < SIZE && error.is_none() {
        let end = (at + STEP).min(SIZE);
        let args = WRITE3args {
            file: NfsFh3 { data: &fh },
            offset: at as u64,
            count: (end - at) as u32,
            stable: StableHow::FileSync,
            data: &data[at..end],
        };
        calls += 1;
        match nfs.call(NFSPROC3_WRITE, &args.to_vec().unwrap()) {
            Ok(res) => match WRITE3res::decode(&res) {
                Ok((WRITE3res::Nfs3Ok(ok), _)) if ok.count > 0 => at += ok.count as usize,
                other => error = Some(format!("at {at}: {:?}", other.map(|o| o.0))),
            },
            Err(e) => error = Some(format!("at {at}: {e}")),
        }
    }
    let took = start.elapsed();
    let chunked = nfs.client.stats().chunked - before.chunked;
    r.check(
        "WRITE 16 MiB",
        error.is_none(),
        error.unwrap_or_else(|| format!("{calls} calls in {took:.2?}, {chunked} with a Read chunk")),
    );
    r.check("WRITEs went through Read chunks", chunked == u64::from(calls), format!("{chunked} of {calls}"));
    let disk = std::fs::read(&path).unwrap_or_default();
    r.check(
        "the server's file equals what was written",
        disk == data,
        format!("{} bytes on disk, {} written", disk.len(), data.len()),
    );

    // 16 MiB of READs: each reply's data goes into the Write chunk the call offers (RFC 8267
    // section 3.1.1; the binding sized it from the READ's count).
    let start = Instant::now();
    let (mut back, mut calls, mut error) = (Vec::with_capacity(SIZE), 0u32, None);
    while back.len() < SIZE && error.is_none() {
        let args = READ3args { file: NfsFh3 { data: &fh }, offset: back.len() as u64, count: STEP as u32 };
        calls += 1;
        match nfs.call(NFSPROC3_READ, &args.to_vec().unwrap()) {
            Ok(res) => match READ3res::decode(&res) {
                Ok((READ3res::Nfs3Ok(ok), _)) if !ok.data.is_empty() => back.extend_from_slice(ok.data),
                other => error = Some(format!("at {}: {:?}", back.len(), other.map(|o| o.0))),
            },
            Err(e) => error = Some(e),
        }
    }
    let took = start.elapsed();
    r.check(
        "READ 16 MiB",
        error.is_none(),
        error.unwrap_or_else(|| format!("{calls} calls in {took:.2?} (Write chunks)")),
    );
    r.check("READ data equals the file", back == data, format!("{} bytes read", back.len()));
    // What svcrdma did, from its tracepoints: it RDMA-Read the WRITEs' Read chunks and
    // RDMA-Wrote the READs' data into our Write chunks.
    if traced {
        let events = trace_events();
        println!("       svcrdma events: {events:?}");
        let count = |name: &str| events.get(name).copied().unwrap_or(0);
        // 6.1's names: svcrdma_post_read_chunk when it posts the RDMA Reads of a Read chunk,
        // svcrdma_post_write_chunk the RDMA Writes of a Write chunk.
        let (reads, writes) = (count("svcrdma_post_read_chunk"), count("svcrdma_post_write_chunk"));
        r.check(
            "kernel: RDMA Reads of our Read chunks (trace)",
            reads >= SIZE / STEP,
            format!("{reads} svcrdma_post_read_chunk"),
        );
        r.check(
            "kernel: RDMA Writes into our Write chunks (trace)",
            writes >= SIZE / STEP,
            format!("{writes} svcrdma_post_write_chunk"),
        );
    } else {
        println!("       no rpcrdma tracepoints: the chunk forms are not checked from the kernel's side");
    }
    println!("       client stats: {:?}", nfs.client.stats());
    let _ = std::fs::remove_file(&path);
    drop(nfs);
    std::process::exit(r.summary("kernel_nfs3_data"));
}
