//! The project's Wireshark dissector for both Version Two drafts (`wireshark/rpcrdma2.lua`)
//! checked with tshark, field by field, against our own views of the same bytes (issue 27).
//!
//! Every -07 header type is written with `rpcrdma_v2::draft07::marshal` (chunks, error arms
//! and properties included) and every -00 procedure by hand or with `rpcrdma_v2::options`;
//! each becomes a RoCEv2 frame in one pcap ([`interop_tests::pcap`]). tshark reads it once with
//! the plugin loaded, and each row must show what `draft07::header::Header` (or, for -00,
//! `rpcrdma_v1::header::Header` at version 2 and `OptionalMessage`) says was sent. Two more
//! frames: a Version One message, still decoded by tshark's own dissector with the plugin
//! loaded, and a -07 header cut inside its Read list, which the plugin flags as malformed.
//!
//! Without tshark this prints `SKIP: ...` and passes, except under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use interop_tests::oracle::tshark_present;
use interop_tests::pcap::{flow_of, roce_frame, PcapWriter};
use rpcrdma_v1::header::{ChunkLists, HeaderLimits, MessageKind};
use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use rpcrdma_v2::draft07::header::Header;
use rpcrdma_v2::draft07::marshal::*;
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::options::{encode_optional, OptionalMessage};
use rpcrdma_v2::rt::{List, Seq};

/// The fields asked of tshark, in column order.
const FIELDS: [&str; 24] = [
    "frame.number",
    "rpcrdma2.xid",
    "rpcrdma2.vers",
    "rpcrdma2.credit",
    "rpcrdma2.dialect",
    "rpcrdma2.htype",
    "rpcrdma2.proc",
    "rpcrdma2.inv_handle",
    "rpcrdma2.remaining",
    "rpcrdma2.call_count",
    "rpcrdma2.reads_count",
    "rpcrdma2.writes_count",
    "rpcrdma2.reply_count",
    "rpcrdma2.position",
    "rpcrdma2.handle",
    "rpcrdma2.err",
    "rpcrdma2.vers_low",
    "rpcrdma2.vers_high",
    "rpcrdma2.props_count",
    "rpcrdma2.prop_which",
    "rpcrdma2.opttype",
    "rpcrdma2.payload_len",
    "rpcrdma2.malformed",
    "rpcordma.version",
];

fn plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wireshark/rpcrdma2.lua")
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn seg(handle: u32, length: u32) -> XdrRdmaSegment {
    XdrRdmaSegment { handle, length, offset: 0x1_0000_2000 }
}

fn joined<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(";")
}

fn hex(v: u32) -> String {
    format!("0x{v:08x}")
}

/// Columns 1.. as the plugin must show a -07 message, from `draft07::header::Header`.
fn expected_07(bytes: &[u8]) -> Vec<String> {
    let h = Header::parse(bytes, &HeaderLimits::default()).expect("a valid -07 header");
    let mut e = vec![String::new(); FIELDS.len() - 1];
    e[0] = hex(h.xid());
    e[1] = "2".into();
    e[2] = h.credit().to_string();
    e[3] = "-07".into();
    e[4] = h.header_type().wire().to_string();
    e[6] = h.inv_handle().map(hex).unwrap_or_default();
    e[7] = h.remaining().map(|r| r.to_string()).unwrap_or_default();
    let lists = h.chunk_lists();
    let (call, reads) = (h.call_chunk(), lists.reads);
    let has_lists = matches!(h.header_type().wire(), 8 | 10 | 11 | 13);
    if h.header_type().wire() == 8 {
        e[8] = call.len().to_string();
    }
    if matches!(h.header_type().wire(), 8 | 10) {
        e[9] = reads.len().to_string();
    }
    if has_lists {
        e[10] = lists.writes.len().to_string();
    }
    if matches!(h.header_type().wire(), 8 | 10 | 11) {
        e[11] = u32::from(lists.reply.is_some()).to_string();
    }
    let positions = call.iter().chain(reads.iter()).map(|r| r.position);
    e[12] = joined(positions);
    let handles = call
        .iter()
        .chain(reads.iter())
        .map(|r| r.target.handle)
        .chain(lists.writes.iter().flat_map(|w| w.target.iter().map(|s| s.handle).collect::<Vec<_>>()))
        .chain(lists.reply.iter().flat_map(|r| r.target.iter().map(|s| s.handle).collect::<Vec<_>>()));
    e[13] = joined(handles.map(hex));
    if let Some(err) = h.error() {
        let (code, range) = match err {
            Rpcrdma2HdrError::Rdma2ErrVers(r) => (RDMA2_ERR_VERS, Some((r.rdma_vers_low, r.rdma_vers_high))),
            Rpcrdma2HdrError::RdmaMaxChunks { discriminant, .. } => (discriminant, None),
            Rpcrdma2HdrError::Rdma2ErrSegments(_) => (RDMA2_ERR_SEGMENTS, None),
            Rpcrdma2HdrError::Rdma2ErrWriteResource(_) => (RDMA2_ERR_WRITE_RESOURCE, None),
            Rpcrdma2HdrError::Rdma2ErrReplyResource(_) => (RDMA2_ERR_REPLY_RESOURCE, None),
            Rpcrdma2HdrError::Default { discriminant } => (discriminant, None),
        };
        e[14] = code.to_string();
        if let Some((low, high)) = range {
            (e[15], e[16]) = (low.to_string(), high.to_string());
        }
        // Codes 1 to 3 mean the same layout in both drafts (ERR_VERS; BAD_HEADER or BAD_XDR;
        // INVAL_OPTION or BAD_PROPVAL): the plugin cannot tell the dialect, and says so.
        if code <= 3 {
            e[3] = "-00 or -07".into();
            (e[4], e[5]) = (String::new(), RDMA2_ERROR.to_string());
        }
    }
    if let Some(props) = h.properties() {
        e[17] = props.0.len().to_string();
        e[18] = joined(props.0.iter().map(|p| p.rdma_which));
    }
    if !h.payload().is_empty() {
        e[20] = h.payload().len().to_string();
    }
    e
}

/// Columns 1.. as the plugin must show a -00 RDMA_MSG, RDMA_NOMSG or RDMA_OPTIONAL, from
/// Version One's header view at version 2 (the same chunk lists) or `OptionalMessage`.
fn expected_00(bytes: &[u8]) -> Vec<String> {
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut e = vec![String::new(); FIELDS.len() - 1];
    e[0] = hex(word(0));
    e[1] = "2".into();
    e[2] = word(8).to_string();
    e[3] = "-00".into();
    e[5] = word(12).to_string();
    match word(12) {
        p @ (0 | 1) => {
            let kind = if p == 0 { MessageKind::Msg } else { MessageKind::NoMsg };
            let h = rpcrdma_v1::header::Header::parse_chunk_lists(bytes, kind, &HeaderLimits::default()).unwrap();
            let lists = h.chunk_lists();
            e[9] = lists.reads.len().to_string();
            e[10] = lists.writes.len().to_string();
            e[11] = u32::from(lists.reply.is_some()).to_string();
            e[12] = joined(lists.reads.iter().map(|r| r.position));
            let handles = lists
                .reads
                .iter()
                .map(|r| r.target.handle)
                .chain(lists.writes.iter().flat_map(|w| w.target.iter().map(|s| s.handle).collect::<Vec<_>>()))
                .chain(lists.reply.iter().flat_map(|r| r.target.iter().map(|s| s.handle).collect::<Vec<_>>()));
            e[13] = joined(handles.map(hex));
            if !h.payload().is_empty() {
                e[20] = h.payload().len().to_string();
            }
        }
        5 => {
            let m = OptionalMessage::decode(bytes, word(0), word(8)).unwrap();
            e[19] = m.opttype.to_string();
        }
        other => panic!("no -00 expectation for rdma_proc {other}"),
    }
    e
}

/// The -07 messages: every header type, with chunks, error arms and properties.
fn messages_07() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut put = |f: &dyn Fn(&mut [u8]) -> Result<usize, MarshalError>| {
        let mut buf = vec![0u8; 1024];
        let n = f(&mut buf).unwrap();
        buf.truncate(n);
        out.push(buf);
    };
    let reads =
        [XdrReadChunk { position: 8, target: seg(0x11, 100) }, XdrReadChunk { position: 8, target: seg(0x12, 28) }];
    let targets = [seg(0x21, 512), seg(0x22, 512)];
    let write = XdrWriteChunk { target: Seq::from_slice(&targets) };
    let writes = [write];
    let chunks = ChunkLists { reads: List::from_slice(&reads), writes: List::from_slice(&writes), reply: Some(write) };
    let call = [XdrReadChunk { position: 0, target: seg(0x31, 4096) }];
    let rpc = words(&[0x0701, 0, 2, 100_003, 3, 0]);
    put(&|b| call_inline(b, 0x0701, 32, 0x55, &chunks, &rpc));
    put(&|b| call_inline(b, 0x0702, 31, 0, &NO_CHUNKS, &rpc));
    put(&|b| call_external(b, 0x0703, 30, 0x66, List::from_slice(&call), &chunks));
    put(&|b| middle(b, 0x0704, 29, MessageType::Call, 4000, &rpc));
    put(&|b| middle(b, 0x0705, 28, MessageType::Reply, 12, &rpc));
    put(&|b| reply_inline(b, 0x0706, 27, List::from_slice(&writes), &rpc));
    put(&|b| reply_external(b, 0x0707, 26, List::from_slice(&writes), write));
    put(&|b| grant(b, 25));
    let errors = [
        Rpcrdma2HdrError::Rdma2ErrVers(Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 }),
        Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_INVAL_HTYPE },
        Rpcrdma2HdrError::RdmaMaxChunks { discriminant: RDMA2_ERR_READ_CHUNKS, value: 2 },
        Rpcrdma2HdrError::Rdma2ErrSegments(16),
        Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 900 }),
        Rpcrdma2HdrError::Rdma2ErrReplyResource(9000),
        Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_SYSTEM },
    ];
    for (i, e) in errors.iter().enumerate() {
        put(&|b| error(b, 0x0710 + i as u32, 24, e));
    }
    let ours = Properties {
        receive_buffer_size: 8192,
        reverse_direction: ReverseDirection::General,
        host_auth: Some(b"challenge".to_vec()),
        ..Properties::default()
    };
    for m in ours.connprop_messages(0, 23, 48).unwrap() {
        out.push(m);
    }
    out
}

/// The -00 messages: RDMA_MSG with chunks, RDMA_NOMSG, RDMA_OPTIONAL.
fn messages_00() -> Vec<Vec<u8>> {
    let mut optional = [0u8; 64];
    let n = encode_optional(0x0803, 20, 7, b"optinfo!", &mut optional).unwrap();
    vec![
        // RDMA_MSG: a Read chunk at 8, a Write chunk of one segment, a Reply chunk; then an
        // RPC call.
        words(&[
            0x0801, 2, 22, 0, 1, 8, 0x41, 64, 0, 0x1000, 0, 1, 1, 0x42, 64, 0, 0x2000, 0, 1, 1, 0x43, 64, 0, 0x3000,
            0x0801, 0, 2,
        ]),
        // RDMA_NOMSG, a Long call's Position-zero chunk.
        words(&[0x0802, 2, 21, 1, 1, 0, 0x44, 4096, 0, 0x4000, 0, 0, 0]),
        optional[..n].to_vec(),
    ]
}

#[test]
fn the_plugin_shows_both_version_two_drafts_field_by_field() {
    if !tshark_present() {
        return;
    }
    let (m07, m00) = (messages_07(), messages_00());
    let v1 = words(&[0x0901, 1, 32, 0, 0, 0, 0, 0x0901, 0, 2, 100_003, 3, 0]);
    // A -07 CALL_INLINE cut inside its Read list: 16 prefix bytes, the handle, a list entry's
    // discriminant and position, then the message ends.
    let cut = m07[0][..28].to_vec();
    let dir = std::env::temp_dir().join(format!("tshark_v2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap_path = dir.join("v2.pcap");
    let mut pcap = PcapWriter::new(std::fs::File::create(&pcap_path).unwrap()).unwrap();
    let flow = flow_of(0, true);
    let all: Vec<&Vec<u8>> = m07.iter().chain(&m00).chain([&v1, &cut]).collect();
    for (i, m) in all.iter().enumerate() {
        pcap.frame(Duration::from_millis(i as u64), &roce_frame(&flow, i as u32, m)).unwrap();
    }
    drop(pcap);

    let mut cmd = Command::new("tshark");
    cmd.arg("-X").arg(format!("lua_script:{}", plugin().display()));
    cmd.arg("-r").arg(&pcap_path).args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("running tshark");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), all.len(), "one row per frame:\n{text}");
    for (i, (row, m)) in rows.iter().zip(&all).enumerate() {
        assert_eq!(row.len(), FIELDS.len(), "row {i}: {row:?}");
        let want = if i < m07.len() {
            expected_07(m)
        } else if i < m07.len() + m00.len() {
            expected_00(m)
        } else {
            continue;
        };
        for (col, (got, want)) in row[1..].iter().zip(&want).enumerate() {
            assert_eq!(
                got,
                want,
                "frame {} ({}), field {}: tshark {got:?}, ours {want:?}",
                i + 1,
                hex_head(m),
                FIELDS[col + 1]
            );
        }
    }
    // Version One, with the plugin loaded: tshark's own dissector, untouched by ours.
    let v1_row = &rows[m07.len() + m00.len()];
    assert_eq!((v1_row[1], v1_row[23]), ("", "1"), "Version One: {v1_row:?}");
    // The cut header: its prefix shown, flagged malformed.
    let cut_row = &rows[all.len() - 1];
    assert_eq!((cut_row[1], cut_row[4], cut_row[22]), ("0x00000701", "-07", "the header ends early"), "{cut_row:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn hex_head(m: &[u8]) -> String {
    m.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
