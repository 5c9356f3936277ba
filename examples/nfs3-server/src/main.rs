//! `nfs3-server --root DIR --listen ADDR --mount-port PORT [--backend tcp|inproc|rdma]`:
//! serves DIR as an NFSv3 export over RPC-over-RDMA on ADDR (the `rdma` backend only when
//! built with `--features rdma`; ADDR is then the RDMA device's IPv4 address and a port), and
//! the MOUNT program over TCP on PORT of the same host. Prints where it listens, then serves
//! until killed; `--verbose` logs every NFS call and the server's counters on stderr;
//! `--timeout SECS` is how long one RDMA Read, Write or Send may take (default 5 s);
//! `--receive BYTES` the Receive size its RFC 8797 private data advertises (default 4096).
//!
//! Each call acts as its caller's AUTH_SYS identity (file-system uid, gid and groups), an
//! AUTH_NONE caller and uid 0 as the anonymous id 65534 (`--no-root-squash`: uid 0 as root,
//! for a client whose root is trusted); this needs the server to run as root, and without
//! root every call acts as the server's user. AUTH_SYS is the caller's claim: serve only a
//! network whose hosts are trusted to say who their users are (`nfs3_server::identity`).
//!
//! The Linux client mounts it with
//! `mount -t nfs -o vers=3,proto=rdma,port=P,mountport=PORT,mountproto=tcp,nolock HOST:/ MNT`.

use std::process::ExitCode;
use std::sync::Arc;

use negotiate::server::{Server, ServerConfig};
use negotiate::service::Bindings;
use nfs3_server::handles::Handles;
use nfs3_server::mount::{Mount, MountServer};
use nfs3_server::nfs::Nfs3;
use rpcrdma_verbs::Backend;

const USAGE: &str =
    "usage: nfs3-server --root DIR --listen ADDR --mount-port PORT [--backend tcp|inproc|rdma] [--verbose] [--timeout SECS] [--receive BYTES] [--no-root-squash]";

/// The credits granted: the 128 the Linux client asks for (see `start`).
const CREDITS: u32 = 128;

struct Options {
    root: String,
    listen: String,
    mount_port: u16,
    backend: String,
    verbose: bool,
    /// Whether uid 0 acts as root (`--no-root-squash`) rather than the anonymous id.
    no_root_squash: bool,
    /// `ServerConfig::timeout`: how long one RDMA Read, Write or Send may take to complete.
    timeout: Option<std::time::Duration>,
    /// The Receive size the private data advertises (RFC 8797 section 4.1): the requester's
    /// call threshold is at most this, so a small one makes it send Long calls.
    receive: u32,
}

fn options() -> Result<Options, String> {
    let (mut root, mut listen, mut mount_port, mut backend) = (None, None, None, "tcp".to_string());
    let (mut verbose, mut timeout, mut receive, mut no_root_squash) = (false, None, 4096, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--root" => root = Some(value()?),
            "--listen" => listen = Some(value()?),
            "--mount-port" => {
                let v = value()?;
                mount_port = Some(v.parse::<u16>().map_err(|e| format!("--mount-port {v}: {e}"))?);
            }
            "--backend" => backend = value()?,
            "--verbose" => verbose = true,
            "--no-root-squash" => no_root_squash = true,
            "--timeout" => {
                let v = value()?;
                let secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or(format!("--timeout {v}: not a positive number of seconds"))?;
                timeout = Some(std::time::Duration::from_secs_f64(secs));
            }
            "--receive" => {
                let v = value()?;
                // RFC 8166 section 3.3.2: no inline threshold is below 1024 bytes; RFC 8797's
                // private data states sizes in 1 KiB units up to 256 KiB.
                receive = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1024..=256 << 10).contains(n) && n % 1024 == 0)
                    .ok_or(format!("--receive {v}: not a multiple of 1024 from 1024 to 262144"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Options {
        root: root.ok_or("--root is required")?,
        listen: listen.ok_or("--listen is required")?,
        mount_port: mount_port.ok_or("--mount-port is required")?,
        backend,
        verbose,
        no_root_squash,
        timeout,
        receive,
    })
}

/// Starts the NFS server on `backend` and returns it with a description of where it is.
fn start<B: Backend + Clone>(backend: B, o: &Options, nfs: Nfs3, binding: Arc<Bindings>) -> Result<Server, String> {
    let defaults = ServerConfig::default();
    // Grant the 128 credits the Linux client asks for (xprtrdma's RPCRDMA_MAX_SLOT_TABLE
    // default; RFC 8166 section 3.3.1), with a Receive for each and the backward slots.
    let credits = CREDITS;
    let recv = credits + negotiate::backchannel::SLOTS as u32;
    let caps = defaults.caps.max_recv_wr(recv).max_send_wr(recv.max(defaults.caps.max_send_wr));
    // Advertise the R flag (RFC 8797 section 4.1): the kernel sets it too, so replies to calls
    // with chunks may be sent with Invalidate (RFC 8797 section 4.2), and the kernel's trace
    // shows its MRs invalidated remotely.
    let private_data =
        Some(cm_private_data::PrivateData::new(cm_private_data::Flags::REMOTE_INVALIDATE, 4096, o.receive));
    let timeout = o.timeout.unwrap_or(defaults.timeout);
    let cfg = defaults.credits(credits).caps(caps).private_data(private_data).timeout(timeout);
    Server::start(backend, o.listen.as_str(), cfg, binding, nfs)
        .map_err(|e| format!("listening on {} ({}): {e}", o.listen, o.backend))
}

fn run(o: &Options) -> Result<(), String> {
    let handles = Arc::new(
        Handles::new(o.root.as_ref(), nfs3_server::boot_verifier()).map_err(|e| format!("--root {}: {e}", o.root))?,
    );
    let binding = Arc::new(nfs3_server::binding::nfs3());
    let nfs = Nfs3::new(handles.clone()).logging(o.verbose).root_squash(!o.no_root_squash);
    let server = match o.backend.as_str() {
        "tcp" => start(rpcrdma_verbs::Tcp, o, nfs, binding)?,
        "inproc" => start(rpcrdma_verbs::InProcess, o, nfs, binding)?,
        #[cfg(feature = "rdma")]
        "rdma" => {
            let host = o.listen.parse::<std::net::SocketAddrV4>().map_err(|e| format!("--listen {}: {e}", o.listen))?;
            start(rpcrdma_verbs::Rdma::new(*host.ip()), o, nfs, binding)?
        }
        #[cfg(not(feature = "rdma"))]
        "rdma" => return Err("--backend rdma: built without the `rdma` feature".into()),
        other => return Err(format!("--backend {other}: expected tcp, inproc or rdma")),
    };
    // MOUNT listens on the same host as NFS (every interface for the in-process backend).
    let host = o.listen.rsplit_once(':').map_or("0.0.0.0", |(h, _)| h);
    let host = if host.parse::<std::net::IpAddr>().is_ok() { host } else { "0.0.0.0" };
    let mount_addr = format!("{host}:{}", o.mount_port);
    let mount = MountServer::start(&mount_addr, Mount::new(handles.clone()))
        .map_err(|e| format!("MOUNT on tcp {mount_addr}: {e}"))?;
    println!(
        "nfs3-server: exporting {} ; NFSv3 on {} {} ; MOUNTv3 on tcp {}",
        handles.root().display(),
        o.backend,
        server.local_addr(),
        mount.local_addr()
    );
    // With --verbose, the server's counters whenever they change, and how connections ended.
    let mut shown = None;
    loop {
        std::thread::sleep(std::time::Duration::from_secs(2));
        if !o.verbose {
            continue;
        }
        let peers = server.peers();
        let now = (server.stats(), peers.iter().map(|p| p.ended.clone()).collect::<Vec<_>>());
        if shown.as_ref() != Some(&now) {
            eprintln!("nfs3-server: {:?}; connections ended: {:?}", now.0, now.1);
            // One line per peer, for guest/kernel-nfs3.sh to check the R flag and credits.
            for (i, p) in peers.iter().enumerate() {
                let theirs = p.advertised.requester;
                eprintln!(
                    "nfs3-server: peer {i}: credits asked {} granted {}; requester R flag {}; remote invalidation {}",
                    p.credits_requested,
                    CREDITS,
                    theirs.is_some_and(|d| d.flags().contains(cm_private_data::Flags::REMOTE_INVALIDATE)),
                    p.advertised.remote_invalidation()
                );
            }
            shown = Some(now);
        }
    }
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("nfs3-server: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfs3-server: {e}");
            ExitCode::FAILURE
        }
    }
}
