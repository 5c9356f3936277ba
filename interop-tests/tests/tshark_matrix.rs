//! Wireshark's RPC-over-RDMA dissector as an oracle on the matrix's own traffic.
//!
//! The matrix's cells whose requester writes Version One or -00 headers (288 of its 616) run in process on a backend wrapped in `rpcrdma_verbs::capture::Captured`; every message sent
//! becomes a RoCEv2 frame in one pcap ([`interop_tests::pcap`]), followed by a few frames made
//! here: Version One RDMA_ERRORs (the matrix sends none: a Version One responder answers a
//! Version Two probe with `rdma_vers` 2) and Version One headers truncated inside their chunk
//! lists. tshark reads the file once (it takes ~0.3 s a run), and every Version One frame is
//! compared field by field with what our own `rpcrdma_v1` header view says was sent.
//!
//! What tshark 4.0.17 does, observed here (and where it differs from ORACLES.md):
//!
//! * Version One: every field agrees. `reads_count` counts read segments (one position each),
//!   `writes_count` Write chunks, `reply_count` is 0 or 1 (the Reply chunk's presence), and
//!   `segment_count` has one value per Write chunk, then one for the Reply chunk.
//! * The matrix's RPC messages are not real ONC RPC (XID, message type, then the matrix's own
//!   form word and opaque), so the RPC dissector above RPC-over-RDMA sometimes reports
//!   `[Malformed Packet: RPC]`; that is the RPC layer's verdict, never RPC-over-RDMA's.
//! * `rdma_vers` 2 (and any other version but 1): the heuristic claims the frame (no `data`
//!   layer follows `infiniband`) and adds no `rpcordma` tree at all: the protocols end at
//!   `infiniband` and every `rpcordma` field is empty, as ORACLES.md says. Except Version
//!   Two's RDMA_OPTIONAL (`rdma_proc` 5, the transport-properties exchange of the matrix's
//!   extension axis): the heuristic does not claim it (a procedure beyond RDMA_ERROR), so it
//!   is plain `data`, nothing malformed. Every Version Two message is also run through our
//!   own decoder ([`interop_tests::decode`]), which must decode it whole; a properties
//!   RDMA_OPTIONAL must show the 12 KiB sizes the matrix states.
//! * Truncated chunk lists do not always show `_ws.malformed`, unlike ORACLES.md's one line:
//!   an RDMA_NOMSG is claimed whatever follows its fixed words and shows its XID and
//!   `[Malformed Packet: RPCoRDMA]`; an RDMA_MSG cut inside a Read or Write segment shows
//!   `[Malformed Packet: RPCoRDMA]` with no field at all (the heuristic itself runs off the
//!   end); an RDMA_MSG cut inside its Reply chunk's segment, or just after a read position,
//!   fails the heuristic and is shown as plain `data`, not malformed.
//!
//! Without tshark this prints `SKIP: ...` and passes, except under `CI=true`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use interop_tests::matrix::{all_cells, run_cell, Speaks};
use interop_tests::oracle::tshark_present;
use interop_tests::pcap::{flow_of, record, roce_frame, write_capture, Sent};
use rpcrdma_v1::header::{Header, HeaderLimits, MessageKind};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaError};
use rpcrdma_v1::Version;

/// The fields asked of tshark, in column order.
const FIELDS: [&str; 18] = [
    "frame.number",
    "rpcordma.xid",
    "rpcordma.version",
    "rpcordma.flow_control",
    "rpcordma.msg_type",
    "rpcordma.reads_count",
    "rpcordma.writes_count",
    "rpcordma.reply_count",
    "rpcordma.position",
    "rpcordma.segment_count",
    "rpcordma.rdma_handle",
    "rpcordma.rdma_length",
    "rpcordma.rdma_offset",
    "rpcordma.errcode",
    "rpcordma.vers_low",
    "rpcordma.vers_high",
    "_ws.malformed",
    "frame.protocols",
];
/// The `rpcordma` columns: 1..=15.
const RPCORDMA: std::ops::RangeInclusive<usize> = 1..=15;
const MALFORMED: usize = 16;
const PROTOCOLS: usize = 17;
/// Version Two's RDMA_OPTIONAL `rdma_proc` (draft section 4.2).
const RDMA_OPTIONAL: u32 = 5;
/// The layers below RPC-over-RDMA in every frame.
const BELOW: &str = "eth:ethertype:ip:udp:infiniband";

/// One tshark row per frame, split into [`FIELDS`].
fn tshark_rows(pcap: &Path) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("running tshark");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<String>> = text.lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), FIELDS.len(), "row {i}: {r:?}");
        assert_eq!(r[0], (i + 1).to_string(), "frames out of order");
    }
    rows
}

fn joined<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(";")
}

/// Columns 1..=15 as tshark shows a Version One message, from our decoding of it: the
/// header view for RDMA_MSG and RDMA_NOMSG, the generated codec for RDMA_ERROR.
fn expected_v1(bytes: &[u8]) -> Vec<String> {
    let mut e = vec![String::new(); 15];
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    e[0] = format!("0x{:08x}", word(0));
    e[1] = word(4).to_string();
    e[2] = word(8).to_string();
    e[3] = word(12).to_string();
    if let Ok(h) = Header::parse(bytes, &HeaderLimits::default()) {
        assert_eq!(e[3], if h.kind() == MessageKind::Msg { "0" } else { "1" });
        let reads: Vec<_> = h.read_list().iter().collect();
        let writes: Vec<_> = h.write_list().iter().collect();
        let chunks: Vec<_> = writes.iter().copied().chain(h.reply_chunk()).collect();
        let segs: Vec<_> = reads.iter().map(|r| r.target).chain(chunks.iter().flat_map(|c| c.target.iter())).collect();
        e[4] = reads.len().to_string();
        e[5] = writes.len().to_string();
        e[6] = u8::from(h.reply_chunk().is_some()).to_string();
        e[7] = joined(reads.iter().map(|r| r.position));
        e[8] = joined(chunks.iter().map(|c| c.target.len()));
        e[9] = joined(segs.iter().map(|s| format!("0x{:08x}", s.handle)));
        e[10] = joined(segs.iter().map(|s| s.length));
        e[11] = joined(segs.iter().map(|s| format!("0x{:016x}", s.offset)));
        return e;
    }
    let (msg, _) = RdmaMsg::decode(bytes).expect("a Version One message we sent decodes");
    match msg.rdma_body {
        RdmaBody::RdmaError(RpcRdmaError::ErrVers(r)) => {
            e[12] = "1".into();
            e[13] = r.rdma_vers_low.to_string();
            e[14] = r.rdma_vers_high.to_string();
        }
        RdmaBody::RdmaError(RpcRdmaError::ErrChunk) => e[12] = "2".into(),
        other => panic!("not expected from the matrix: {other:?}"),
    }
    e
}

/// A frame made here, and what tshark is expected to make of it.
struct Extra {
    what: &'static str,
    bytes: Vec<u8>,
    expect: Expect,
}

enum Expect {
    /// A valid Version One message: compared like the matrix's.
    Fields,
    /// Claimed, with an XID, then `[Malformed Packet: RPCoRDMA]`.
    MalformedWithXid,
    /// `[Malformed Packet: RPCoRDMA]` and no `rpcordma` field.
    MalformedBare,
    /// Not claimed: `data` after `infiniband`, nothing malformed.
    Data,
}

/// The first recorded message sent by `side` that our header view accepts and `pick` likes,
/// with its header length.
fn first(sent: &[Sent], from_requester: bool, pick: impl Fn(&Header<'_>) -> bool) -> (&[u8], usize) {
    sent.iter()
        .filter(|s| s.from_requester == from_requester)
        .find_map(|s| {
            Header::parse(&s.bytes, &HeaderLimits::default()).ok().filter(&pick).map(|h| (&s.bytes[..], h.header_len()))
        })
        .expect("the matrix sends one")
}

/// The frames appended after the matrix's: Version One RDMA_ERRORs as our responders build
/// them, and real matrix calls cut short inside their chunk lists.
fn extras(sent: &[Sent]) -> Vec<Extra> {
    let long_call = first(sent, true, |h| h.kind() == MessageKind::NoMsg && h.position_zero_chunk().is_some());
    let read_call = first(sent, true, |h| h.kind() == MessageKind::Msg && h.read_list().iter().count() == 1);
    let write_call = first(sent, true, |h| h.write_list().iter().count() == 1);
    let reply_call = first(sent, true, |h| h.kind() == MessageKind::Msg && h.reply_chunk().is_some());
    // Eight bytes before the header's end: inside the last segment's offset.
    let cut = |(bytes, len): (&[u8], usize)| bytes[..len - 8].to_vec();
    vec![
        Extra {
            what: "ERR_VERS 1..1",
            bytes: ErrorReply::err_vers(0x77, Version::ONE, 32, Version::ONE, Version::ONE).as_bytes().to_vec(),
            expect: Expect::Fields,
        },
        Extra {
            what: "ERR_CHUNK",
            bytes: ErrorReply::err_chunk(0x78, Version::ONE, 32).as_bytes().to_vec(),
            expect: Expect::Fields,
        },
        Extra { what: "RDMA_NOMSG cut in its Read segment", bytes: cut(long_call), expect: Expect::MalformedWithXid },
        Extra { what: "RDMA_MSG cut in its Read segment", bytes: cut(read_call), expect: Expect::MalformedBare },
        Extra { what: "RDMA_MSG cut in its Write segment", bytes: cut(write_call), expect: Expect::MalformedBare },
        Extra { what: "RDMA_MSG cut in its Reply segment", bytes: cut(reply_call), expect: Expect::Data },
        // The fixed words, the read list's discriminant and one position, nothing more.
        Extra { what: "RDMA_MSG cut after a read position", bytes: read_call.0[..24].to_vec(), expect: Expect::Data },
    ]
}

#[test]
fn tshark_agrees_with_every_message_of_the_matrix() {
    if !tshark_present() {
        return;
    }
    // tshark 4.0 knows Version One and reads no Version Two; the cells where either side writes
    // draft-ietf-07 headers are the Lua dissector's (tests/tshark_v2.rs), not this test's,
    // whose expectations for Version Two frames are those of -00.
    let cells: Vec<_> = all_cells()
        .into_iter()
        .filter(|c| !matches!(c.requester, Speaks::Draft07 | Speaks::BothDrafts) && c.responder != Speaks::Draft07)
        .collect();
    let (outcomes, sent) = record(rpcrdma_verbs::InProcess, &cells, run_cell);
    assert!(outcomes.iter().all(|o| o.verdict.is_ok()), "matrix cells failed: {outcomes:?}");
    let extras = extras(&sent);
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tshark_matrix.pcap");
    let mut pcap = write_capture(std::fs::File::create(&path).unwrap(), &sent).unwrap();
    let extra_connection = sent.iter().map(|s| s.connection + 1).max().unwrap_or(0);
    let last = sent.last().map_or_else(Default::default, |s| s.at);
    for (i, x) in extras.iter().enumerate() {
        pcap.frame(last, &roce_frame(&flow_of(extra_connection + i, true), 0, &x.bytes)).unwrap();
    }
    drop(pcap);
    let rows = tshark_rows(&path);
    assert_eq!(rows.len(), sent.len() + extras.len());

    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (s, row) in sent.iter().zip(&rows) {
        let vers = u32::from_be_bytes(s.bytes[4..8].try_into().unwrap());
        let frame = &row[0];
        match vers {
            1 => {
                assert_eq!(
                    row[RPCORDMA].to_vec(),
                    expected_v1(&s.bytes),
                    "frame {frame}: {}",
                    interop_tests::hex(&s.bytes)
                );
                let protocols = &row[PROTOCOLS];
                assert!(protocols.starts_with(&format!("{BELOW}:rpcordma")), "frame {frame}: {protocols}");
                assert!(!row[MALFORMED].contains("RPCoRDMA"), "frame {frame}: {}", row[MALFORMED]);
                *counts.entry("v1").or_default() += 1;
                if row[MALFORMED].contains("Malformed Packet: RPC]") {
                    *counts.entry("v1, RPC layer malformed").or_default() += 1;
                }
            }
            2 => {
                let proc = u32::from_be_bytes(s.bytes[12..16].try_into().unwrap());
                if proc == RDMA_OPTIONAL {
                    // Not claimed: plain data, nothing malformed.
                    assert_eq!(row[PROTOCOLS], format!("{BELOW}:data"), "frame {frame}");
                    *counts.entry("v2 RDMA_OPTIONAL").or_default() += 1;
                } else {
                    // Claimed (no `data` layer) and shown with no tree.
                    assert_eq!(row[PROTOCOLS], BELOW, "frame {frame}");
                }
                assert!(row[1..PROTOCOLS].iter().all(String::is_empty), "frame {frame}: {row:?}");
                // Our decoder reads it whole, the properties included.
                let report = interop_tests::decode::decode(&s.bytes);
                let hex = interop_tests::hex(&s.bytes);
                assert_eq!(report.get("decode_error"), None, "frame {frame}: {hex}");
                assert!(report.get("payload_len").and_then(|n| n.num()).is_some(), "frame {frame}: {hex}");
                if let Some(p) = report.get("properties") {
                    let size = |k| p.get(k).and_then(|n| n.num());
                    assert_eq!((size("max_send_size"), size("max_recv_size")), (Some(12288), Some(12288)), "{hex}");
                    *counts.entry("v2 properties").or_default() += 1;
                }
                *counts.entry("v2").or_default() += 1;
            }
            v => panic!("frame {frame}: the matrix sent version {v}"),
        }
    }
    for (x, row) in extras.iter().zip(&rows[sent.len()..]) {
        let (frame, what) = (&row[0], x.what);
        let bare = row[RPCORDMA].iter().all(String::is_empty);
        match x.expect {
            Expect::Fields => {
                assert_eq!(row[RPCORDMA].to_vec(), expected_v1(&x.bytes), "frame {frame} ({what})");
                assert!(row[MALFORMED].is_empty(), "frame {frame} ({what})");
            }
            Expect::MalformedWithXid => {
                let xid = format!("0x{:08x}", u32::from_be_bytes(x.bytes[..4].try_into().unwrap()));
                assert_eq!(row[1], xid, "frame {frame} ({what})");
                assert!(row[MALFORMED].starts_with("[Malformed Packet: RPCoRDMA]"), "frame {frame} ({what}): {row:?}");
            }
            Expect::MalformedBare => {
                assert!(bare, "frame {frame} ({what}): {row:?}");
                assert!(row[MALFORMED].starts_with("[Malformed Packet: RPCoRDMA]"), "frame {frame} ({what}): {row:?}");
                assert_eq!(row[PROTOCOLS], format!("{BELOW}:rpcordma"), "frame {frame} ({what})");
            }
            Expect::Data => {
                assert!(bare && row[MALFORMED].is_empty(), "frame {frame} ({what}): {row:?}");
                assert_eq!(row[PROTOCOLS], format!("{BELOW}:data"), "frame {frame} ({what})");
            }
        }
    }
    // The extension axis's exchanges, in the two -00 pairs run here (v2-capable with
    // v2-capable and with v2-both): a request in each cell where the requester has the
    // extension (requester only, both), a reply where both have it; 24 cells each.
    assert_eq!(counts.get("v2 RDMA_OPTIONAL"), Some(&(2 * 3 * 24)), "{counts:?}");
    assert_eq!(counts.get("v2 properties"), Some(&(2 * 3 * 24)), "{counts:?}");
    println!(
        "tshark agreed on {} frames: {} Version One messages compared field by field ({} with the RPC layer above \
         malformed), {} Version Two shown without a tree ({} of them RDMA_OPTIONAL shown as data, decoded by us), \
         {} made here ({} malformed or truncated)",
        rows.len(),
        counts["v1"],
        counts.get("v1, RPC layer malformed").unwrap_or(&0),
        counts["v2"],
        counts["v2 RDMA_OPTIONAL"],
        extras.len(),
        extras.iter().filter(|x| !matches!(x.expect, Expect::Fields)).count()
    );
}
