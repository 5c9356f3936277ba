//! RPC-over-RDMA messages as RoCEv2 frames in a pcap file, for Wireshark and tshark.
//!
//! Our verbs backends carry no InfiniBand headers, so a capture is synthesized: each message
//! becomes the frame a RoCEv2 adapter would put on the wire for an RC SEND Only, the way
//! Wireshark's RPC-over-RDMA dissector (`rpcordma`) finds it (/work/shared/ORACLES.md, tshark):
//!
//! ```text
//! Ethernet (14) | IPv4 (20) | UDP, destination port 4791 (8) | BTH (12) | message | pad | ICRC (4)
//! ```
//!
//! [`Recorder`] (or [`record`]) runs matrix cells on a backend wrapped in
//! [`rpcrdma_verbs::capture::Captured`] and hands back every Send with the connection and direction it
//! belongs to; [`write_capture`] writes them.
//!
//! ```
//! use interop_tests::pcap::{roce_frame, Flow, PcapWriter};
//! let flow = Flow { src: [10, 1, 0, 1], dst: [10, 2, 0, 1], udp_src: 49152, dest_qp: 0x100 };
//! let message = [0u8; 28];
//! let frame = roce_frame(&flow, 0, &message);
//! assert_eq!(frame.len(), 14 + 20 + 8 + 12 + 28 + 4);
//! let mut pcap = PcapWriter::new(Vec::new()).unwrap();
//! pcap.frame(std::time::Duration::ZERO, &frame).unwrap();
//! assert_eq!(pcap.into_inner().len(), 24 + 16 + frame.len());
//! ```

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rpcrdma_verbs::capture::{Captured, CapturedMessage, Sink};
use rpcrdma_verbs::Backend;

use crate::matrix::{Cell, Outcome};

/// pcap's link type for Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The UDP destination port that marks RoCEv2 (IBTA Annex A17).
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// The BTH opcode of an RC SEND Only (IBTA 9.2: RC class 000, SEND Only 00100).
pub const BTH_RC_SEND_ONLY: u8 = 0x04;
/// The largest frame a record holds.
const SNAPLEN: u32 = 262_144;

/// A pcap (not pcapng) file being written: the 24-byte global header at once, then one
/// record per [`PcapWriter::frame`]. Little-endian, microsecond timestamps.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header: magic `a1b2c3d4`, version 2.4, UTC, snaplen 256 KiB,
    /// [`LINKTYPE_ETHERNET`].
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&[0; 8]); // thiszone, sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Writes one record: `frame`, captured whole, at `ts` after the epoch.
    pub fn frame(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).ok().filter(|&l| l <= SNAPLEN);
        let len = len.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame longer than the snaplen"))?;
        let ts_sec = u32::try_from(ts.as_secs()).unwrap_or(u32::MAX);
        for w in [ts_sec, ts.subsec_micros(), len, len] {
            self.out.write_all(&w.to_le_bytes())?;
        }
        self.out.write_all(frame)
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One direction of one reliable connection, as its frames show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Sender's IPv4 address.
    pub src: [u8; 4],
    /// Receiver's IPv4 address.
    pub dst: [u8; 4],
    /// UDP source port (RoCEv2 uses it for flow entropy).
    pub udp_src: u16,
    /// The receiver's queue pair (24 bits; 0 and 1 are the management QPs, which the
    /// dissector does not hand to RPC-over-RDMA).
    pub dest_qp: u32,
}

/// The RoCEv2 frame of `message` sent as an RC SEND Only with packet sequence number `psn`.
///
/// The BTH's pad count makes the payload a multiple of four (IBTA 9.2); the ICRC is zero
/// (Wireshark does not check it, but always strips four bytes for it).
pub fn roce_frame(flow: &Flow, psn: u32, message: &[u8]) -> Vec<u8> {
    let pad = (4 - message.len() % 4) % 4;
    let udp_len = 8 + 12 + message.len() + pad + 4;
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + ip_len);
    // Ethernet: locally administered MACs derived from the addresses, type IPv4.
    f.extend_from_slice(&[0x02, 0, flow.dst[0], flow.dst[1], flow.dst[2], flow.dst[3]]);
    f.extend_from_slice(&[0x02, 0, flow.src[0], flow.src[1], flow.src[2], flow.src[3]]);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    // IPv4: no options, Don't Fragment, TTL 64, UDP.
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&flow.src);
    ip[16..20].copy_from_slice(&flow.dst);
    let sum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    // UDP: checksum 0, "no checksum", which IPv4 allows (RFC 768).
    f.extend_from_slice(&flow.udp_src.to_be_bytes());
    f.extend_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    // BTH: opcode, SE=0 M=0 PadCnt TVer=0, P_Key default, reserved, DestQP, AckReq=0, PSN.
    f.extend_from_slice(&[BTH_RC_SEND_ONLY, (pad as u8) << 4, 0xff, 0xff]);
    f.extend_from_slice(&(flow.dest_qp & 0x00ff_ffff).to_be_bytes());
    f.extend_from_slice(&(psn & 0x00ff_ffff).to_be_bytes());
    f.extend_from_slice(message);
    f.resize(f.len() + pad + 4, 0); // pad, ICRC
    f
}

/// The one's-complement sum of the header's 16-bit words, complemented (RFC 791).
fn ipv4_checksum(header: &[u8; 20]) -> u16 {
    let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One Send captured while [`record`] ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The connection: numbered from 0 in the order connections first sent.
    pub connection: usize,
    /// Whether the requester sent it (a call, a probe, a backward-direction reply) rather
    /// than the responder.
    pub from_requester: bool,
    /// When, after recording started.
    pub at: Duration,
    /// The message.
    pub bytes: Vec<u8>,
}

/// A Send as the capture sink handed it over: endpoint, time since recording started, bytes.
type Taken = (u64, Duration, Vec<u8>);

/// Records every Send posted through the backend [`Recorder::capture`] wraps:
/// [`Recorder::close_group`] after each matrix cell attributes what the cell's endpoints sent
/// to connections, and [`Recorder::finish`] hands it all back. Within a group, endpoints in the
/// order they first sent pair up into connections, requester first (a responder only answers),
/// so a group's connections must all be made through the wrapped backend, both ends in this
/// process. Nothing is global: Sends on other backends' queue pairs are not recorded.
///
/// ```
/// use interop_tests::pcap::Recorder;
/// let recorder = Recorder::start();
/// let backend = recorder.capture(rpcrdma_verbs::InProcess);
/// // ... run both ends of some connections on `backend`, closing a group after each ...
/// # let _ = backend;
/// recorder.close_group();
/// assert!(recorder.finish().is_empty());
/// ```
pub struct Recorder {
    start: Instant,
    taken: Arc<Mutex<Vec<Taken>>>,
    /// Hands each captured Send to `taken`.
    sink: Sink,
    /// The messages attributed so far, and the connections numbered so far.
    done: Mutex<(Vec<Sent>, usize)>,
}

impl Recorder {
    /// Starts the clock; nothing is recorded until a backend is wrapped with
    /// [`Recorder::capture`].
    pub fn start() -> Recorder {
        let (start, taken) = (Instant::now(), Arc::<Mutex<Vec<_>>>::default());
        let t = taken.clone();
        let sink: Sink = Arc::new(move |m: &CapturedMessage<'_>| {
            t.lock().unwrap_or_else(PoisonError::into_inner).push((m.endpoint, start.elapsed(), m.bytes.to_vec()));
        });
        Recorder { start, taken, sink, done: Mutex::default() }
    }

    /// `backend`, wrapped so that every Send posted on the queue pairs it makes is recorded
    /// here. Wrap one backend per recorder (clone the wrapper for more threads): each wrapper
    /// numbers its endpoints from 1, so two would mix their endpoints up.
    pub fn capture<B: Backend>(&self, backend: B) -> Captured<B> {
        Captured::new(backend, self.sink.clone())
    }

    /// Attributes the messages sent since the last call: a group of connections is over.
    pub fn close_group(&self) {
        let batch = std::mem::take(&mut *self.taken.lock().unwrap_or_else(PoisonError::into_inner));
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let (sent, connections) = &mut *done;
        let mut endpoints: Vec<u64> = Vec::new();
        for (endpoint, at, bytes) in batch {
            let i = endpoints.iter().position(|&e| e == endpoint).unwrap_or_else(|| {
                endpoints.push(endpoint);
                endpoints.len() - 1
            });
            sent.push(Sent { connection: *connections + i / 2, from_requester: i % 2 == 0, at, bytes });
        }
        *connections += endpoints.len().div_ceil(2);
    }

    /// Closes the last group and returns every message, in the order sent.
    pub fn finish(self) -> Vec<Sent> {
        self.close_group();
        std::mem::take(&mut self.done.lock().unwrap_or_else(PoisonError::into_inner).0)
    }

    /// How long it has been recording.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// Runs `run` on each cell, one after the other, with `backend` wrapped by a [`Recorder`];
/// returns the outcomes and every message sent, each cell's connections numbered after the
/// previous cell's.
///
/// ```
/// use interop_tests::pcap::record;
/// let (outcomes, sent) = record(rpcrdma_verbs::InProcess, &[], |_backend, _cell| unreachable!());
/// assert!(outcomes.is_empty() && sent.is_empty());
/// ```
pub fn record<B: Backend>(
    backend: B,
    cells: &[Cell],
    mut run: impl FnMut(&Captured<B>, Cell) -> Outcome,
) -> (Vec<Outcome>, Vec<Sent>) {
    let recorder = Recorder::start();
    let backend = recorder.capture(backend);
    let outcomes = cells
        .iter()
        .map(|&cell| {
            let o = run(&backend, cell);
            recorder.close_group();
            o
        })
        .collect();
    (outcomes, recorder.finish())
}

/// The flow of a recorded message: connection `n`'s requester is 10.1.x.y and its responder
/// 10.2.x.y (x.y = n + 1); the destination QP is 0x100 + 2n toward the responder and
/// 0x101 + 2n toward the requester, so each connection and direction has its own.
pub fn flow_of(connection: usize, from_requester: bool) -> Flow {
    let [_, _, x, y] = ((connection + 1) as u32).to_be_bytes();
    let (requester, responder) = ([10, 1, x, y], [10, 2, x, y]);
    let qp = 0x100 + 2 * connection as u32;
    if from_requester {
        Flow { src: requester, dst: responder, udp_src: 49152 + (connection as u16 & 0x3fff), dest_qp: qp }
    } else {
        Flow { src: responder, dst: requester, udp_src: 49152 + (connection as u16 & 0x3fff), dest_qp: qp + 1 }
    }
}

/// Writes `sent` into a new pcap on `out`, one frame each (see [`flow_of`]), PSNs counting
/// up per flow; returns the writer for more frames.
pub fn write_capture<W: Write>(out: W, sent: &[Sent]) -> io::Result<PcapWriter<W>> {
    let mut pcap = PcapWriter::new(out)?;
    let mut psn = std::collections::HashMap::new();
    for s in sent {
        let n = psn.entry((s.connection, s.from_requester)).or_insert(0u32);
        pcap.frame(s.at, &roce_frame(&flow_of(s.connection, s.from_requester), *n, &s.bytes))?;
        *n += 1;
    }
    Ok(pcap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn global_header() {
        let h = PcapWriter::new(Vec::new()).unwrap().into_inner();
        assert_eq!(h.len(), 24);
        assert_eq!(&h[..8], [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
        assert_eq!((le32(&h, 8), le32(&h, 12), le32(&h, 16), le32(&h, 20)), (0, 0, SNAPLEN, 1));
    }

    #[test]
    fn record_header() {
        let mut p = PcapWriter::new(Vec::new()).unwrap();
        p.frame(Duration::new(3, 456_789_000), &[9; 60]).unwrap();
        let b = p.into_inner();
        assert_eq!((le32(&b, 24), le32(&b, 28), le32(&b, 32), le32(&b, 36)), (3, 456_789, 60, 60));
        assert_eq!(&b[40..], [9; 60]);
        assert!(PcapWriter::new(Vec::new()).unwrap().frame(Duration::ZERO, &vec![0; SNAPLEN as usize + 1]).is_err());
    }

    #[test]
    fn frame_layout() {
        let flow = Flow { src: [10, 1, 0, 7], dst: [10, 2, 0, 7], udp_src: 49158, dest_qp: 0x10c };
        let msg: Vec<u8> = (1..=30).collect(); // not a multiple of four: two pad bytes
        let f = roce_frame(&flow, 0x0102_0304, &msg);
        assert_eq!(f.len(), 14 + 20 + 8 + 12 + 30 + 2 + 4);
        assert_eq!(&f[..14], [2, 0, 10, 2, 0, 7, 2, 0, 10, 1, 0, 7, 0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!((ip[0], ip[8], ip[9]), (0x45, 64, 17));
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, f.len() - 14);
        assert_eq!((&ip[12..16], &ip[16..20]), (&[10, 1, 0, 7][..], &[10, 2, 0, 7][..]));
        // A header whose checksum is right sums to 0xffff, so checksums to 0.
        assert_eq!(ipv4_checksum(ip.try_into().unwrap()), 0);
        let udp = &f[34..42];
        assert_eq!(udp, [0xc0, 0x06, 0x12, 0xb7, 0, (f.len() - 34) as u8, 0, 0]);
        let bth = &f[42..54];
        assert_eq!(bth, [0x04, 0x20, 0xff, 0xff, 0, 0, 0x01, 0x0c, 0, 0x02, 0x03, 0x04]);
        assert_eq!(&f[54..84], &msg[..]);
        assert_eq!(&f[84..], [0; 6]);
    }

    #[test]
    fn flows_differ_per_connection_and_direction() {
        let qps: Vec<u32> = (0..300).flat_map(|c| [flow_of(c, true).dest_qp, flow_of(c, false).dest_qp]).collect();
        let mut unique = qps.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), qps.len());
        assert!(qps.iter().all(|&q| q > 1));
        assert_eq!((flow_of(256, true).src, flow_of(256, false).src), ([10, 1, 1, 1], [10, 2, 1, 1]));
    }

    #[test]
    fn capture_writes_one_frame_per_message_with_per_flow_psns() {
        let sent: Vec<Sent> = [(0, true), (0, false), (0, true), (1, true)]
            .iter()
            .map(|&(connection, from_requester)| Sent {
                connection,
                from_requester,
                at: Duration::from_millis(1),
                bytes: vec![7; 28],
            })
            .collect();
        let b = write_capture(Vec::new(), &sent).unwrap().into_inner();
        let frame = 14 + 20 + 8 + 12 + 28 + 4;
        assert_eq!(b.len(), 24 + 4 * (16 + frame));
        let psn = |i: usize| u32::from_be_bytes(b[24 + i * (16 + frame) + 16 + 50..][..4].try_into().unwrap());
        assert_eq!([psn(0), psn(1), psn(2), psn(3)], [0, 0, 1, 0]);
    }
}
