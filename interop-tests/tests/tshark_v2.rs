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
//! A second test does the same with the matrix's own -07 traffic, recorded as the `pcap`
//! subcommand records it.
//!
//! Without tshark this prints `SKIP: ...` and passes, except under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use interop_tests::matrix::{all_cells, run_cell};
use interop_tests::oracle::tshark_present;
use interop_tests::pcap::{flow_of, record, roce_frame, write_capture, PcapWriter};
use rpcrdma_v1::header::{ChunkLists, HeaderLimits, MessageKind};
use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use rpcrdma_v2::dialect::Dialect;
use rpcrdma_v2::draft07::header::Header;
use rpcrdma_v2::draft07::marshal::*;
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::options::{encode_optional, OptionalMessage};
use rpcrdma_v2::rt::{List, Seq};

/// The fields asked of tshark, in column order.
const FIELDS: [&str; 32] = [
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
    "rpcrdma2.length",
    "rpcrdma2.offset",
    "rpcrdma2.err",
    "rpcrdma2.vers_low",
    "rpcrdma2.vers_high",
    "rpcrdma2.max_chunks",
    "rpcrdma2.max_segments",
    "rpcrdma2.chunk_index",
    "rpcrdma2.length_needed",
    "rpcrdma2.props_count",
    "rpcrdma2.prop_which",
    "rpcrdma2.prop_data",
    "rpcrdma2.opttype",
    "rpcrdma2.optinfo",
    "rpcrdma2.payload_len",
    "rpcrdma2.malformed",
    "rpcordma.version",
];

/// The column of field `name` in a row.
fn col<'a>(row: &[&'a str], name: &str) -> &'a str {
    row[FIELDS.iter().position(|f| *f == name).expect("a field asked for")]
}

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

/// What the plugin must show of a message, by field name (the rest empty).
type Row = std::collections::HashMap<&'static str, String>;

/// The row's columns 1.. in [`FIELDS`] order.
fn columns(row: &Row) -> Vec<String> {
    FIELDS[1..].iter().map(|f| row.get(f).cloned().unwrap_or_default()).collect()
}

/// The segments' handles, lengths and offsets, in the order the plugin lists them.
fn segments(row: &mut Row, segs: impl Iterator<Item = XdrRdmaSegment> + Clone) {
    row.insert("rpcrdma2.handle", joined(segs.clone().map(|s| hex(s.handle))));
    row.insert("rpcrdma2.length", joined(segs.clone().map(|s| s.length)));
    row.insert("rpcrdma2.offset", joined(segs.map(|s| format!("0x{:016x}", s.offset))));
}

/// The segments of `lists` after `reads_first` (a Call chunk), as the plugin walks them.
fn all_segments(reads_first: &[XdrReadChunk], lists: &ChunkLists<'_>) -> Vec<XdrRdmaSegment> {
    let mut v: Vec<XdrRdmaSegment> = reads_first.iter().map(|r| r.target).collect();
    v.extend(lists.reads.iter().map(|r| r.target));
    for w in lists.writes.iter() {
        v.extend(w.target.iter());
    }
    if let Some(r) = lists.reply {
        v.extend(r.target.iter());
    }
    v
}

/// What the plugin must show of a -07 message, from `draft07::header::Header`.
fn expected_07(bytes: &[u8]) -> Vec<String> {
    let h = Header::parse(bytes, &HeaderLimits::default()).expect("a valid -07 header");
    let mut e = Row::new();
    let htype = h.header_type().wire();
    e.insert("rpcrdma2.xid", hex(h.xid()));
    e.insert("rpcrdma2.vers", "2".into());
    e.insert("rpcrdma2.credit", h.credit().to_string());
    e.insert("rpcrdma2.dialect", "-07".into());
    e.insert("rpcrdma2.htype", htype.to_string());
    if let Some(i) = h.inv_handle() {
        e.insert("rpcrdma2.inv_handle", hex(i));
    }
    if let Some(r) = h.remaining() {
        e.insert("rpcrdma2.remaining", r.to_string());
    }
    let lists = h.chunk_lists();
    let call: Vec<XdrReadChunk> = h.call_chunk().iter().collect();
    if htype == RDMA2_CALL_EXTERNAL {
        e.insert("rpcrdma2.call_count", call.len().to_string());
    }
    if htype == RDMA2_CALL_EXTERNAL || htype == RDMA2_CALL_INLINE {
        e.insert("rpcrdma2.reads_count", lists.reads.len().to_string());
    }
    if matches!(htype, RDMA2_CALL_EXTERNAL | RDMA2_CALL_INLINE | RDMA2_REPLY_EXTERNAL | RDMA2_REPLY_INLINE) {
        e.insert("rpcrdma2.writes_count", lists.writes.len().to_string());
    }
    if matches!(htype, RDMA2_CALL_EXTERNAL | RDMA2_CALL_INLINE | RDMA2_REPLY_EXTERNAL) {
        e.insert("rpcrdma2.reply_count", u32::from(lists.reply.is_some()).to_string());
    }
    e.insert(
        "rpcrdma2.position",
        joined(call.iter().chain(lists.reads.iter().collect::<Vec<_>>().iter()).map(|r| r.position)),
    );
    segments(&mut e, all_segments(&call, &lists).into_iter());
    if let Some(err) = h.error() {
        let (code, arms): (u32, Vec<(&str, u32)>) = match err {
            Rpcrdma2HdrError::Rdma2ErrVers(r) => {
                (RDMA2_ERR_VERS, vec![("rpcrdma2.vers_low", r.rdma_vers_low), ("rpcrdma2.vers_high", r.rdma_vers_high)])
            }
            Rpcrdma2HdrError::RdmaMaxChunks { discriminant, value } => {
                (discriminant, vec![("rpcrdma2.max_chunks", value)])
            }
            Rpcrdma2HdrError::Rdma2ErrSegments(n) => (RDMA2_ERR_SEGMENTS, vec![("rpcrdma2.max_segments", n)]),
            Rpcrdma2HdrError::Rdma2ErrWriteResource(w) => (
                RDMA2_ERR_WRITE_RESOURCE,
                vec![("rpcrdma2.chunk_index", w.rdma_chunk_index), ("rpcrdma2.length_needed", w.rdma_length_needed)],
            ),
            Rpcrdma2HdrError::Rdma2ErrReplyResource(n) => {
                (RDMA2_ERR_REPLY_RESOURCE, vec![("rpcrdma2.length_needed", n)])
            }
            Rpcrdma2HdrError::Default { discriminant } => (discriminant, vec![]),
        };
        e.insert("rpcrdma2.err", code.to_string());
        for (field, value) in arms {
            e.insert(field, value.to_string());
        }
        // Codes 1 to 3 mean the same layout in both drafts (ERR_VERS; BAD_HEADER or BAD_XDR;
        // INVAL_OPTION or BAD_PROPVAL): the plugin cannot tell the dialect, and says so.
        if code <= 3 {
            e.insert("rpcrdma2.dialect", "-00 or -07".into());
            e.remove("rpcrdma2.htype");
            e.insert("rpcrdma2.proc", RDMA2_ERROR.to_string());
        }
    }
    if let Some(props) = h.properties() {
        e.insert("rpcrdma2.props_count", props.0.len().to_string());
        e.insert("rpcrdma2.prop_which", joined(props.0.iter().map(|p| p.rdma_which)));
        e.insert("rpcrdma2.prop_data", joined(props.0.iter().map(|p| hex_bytes(p.rdma_data))));
    }
    if !h.payload().is_empty() {
        e.insert("rpcrdma2.payload_len", h.payload().len().to_string());
    }
    columns(&e)
}

/// tshark's rendering of a bytes field in `-T fields`: hex pairs, and `<MISSING>` for a field
/// present with no bytes (an empty `rdma_data` or `rdma_optinfo`, shown, not an error).
fn hex_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "<MISSING>".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the plugin must show of a -00 RDMA_MSG, RDMA_NOMSG or RDMA_OPTIONAL, from Version
/// One's header view at version 2 (the same chunk lists) or `OptionalMessage`.
fn expected_00(bytes: &[u8]) -> Vec<String> {
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut e = Row::new();
    e.insert("rpcrdma2.xid", hex(word(0)));
    e.insert("rpcrdma2.vers", "2".into());
    e.insert("rpcrdma2.credit", word(8).to_string());
    e.insert("rpcrdma2.dialect", "-00".into());
    e.insert("rpcrdma2.proc", word(12).to_string());
    match word(12) {
        p @ (0 | 1) => {
            let kind = if p == 0 { MessageKind::Msg } else { MessageKind::NoMsg };
            let h = rpcrdma_v1::header::Header::parse_chunk_lists(bytes, kind, &HeaderLimits::default()).unwrap();
            let lists = h.chunk_lists();
            e.insert("rpcrdma2.reads_count", lists.reads.len().to_string());
            e.insert("rpcrdma2.writes_count", lists.writes.len().to_string());
            e.insert("rpcrdma2.reply_count", u32::from(lists.reply.is_some()).to_string());
            e.insert("rpcrdma2.position", joined(lists.reads.iter().map(|r| r.position)));
            segments(&mut e, all_segments(&[], &lists).into_iter());
            if !h.payload().is_empty() {
                e.insert("rpcrdma2.payload_len", h.payload().len().to_string());
            }
        }
        5 => {
            let m = OptionalMessage::decode(bytes, word(0), word(8)).unwrap();
            e.insert("rpcrdma2.opttype", m.opttype.to_string());
            e.insert("rpcrdma2.optinfo", hex_bytes(m.optinfo));
        }
        other => panic!("no -00 expectation for rdma_proc {other}"),
    }
    columns(&e)
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
    // A property stated with an empty rdma_data (its default, section 5.1).
    out.push(words(&[0, 2, 22, RDMA2_CONNPROP_FINAL, 1, RDMA2_PROPID_RBSIZ, 0]));
    out
}

/// The -00 messages: RDMA_MSG with chunks, RDMA_NOMSG, RDMA_OPTIONAL.
fn messages_00() -> Vec<Vec<u8>> {
    let mut optional = [0u8; 64];
    let n = encode_optional(0x0803, 20, 7, b"optinfo!", &mut optional).unwrap();
    let mut empty = [0u8; 64];
    let e = encode_optional(0x0804, 19, 8, b"", &mut empty).unwrap();
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
        empty[..e].to_vec(),
    ]
}

#[test]
fn the_plugin_shows_both_version_two_drafts_field_by_field() {
    if !tshark_present() {
        return;
    }
    let (m07, m00) = (messages_07(), messages_00());
    let v1 = words(&[0x0901, 1, 32, 0, 0, 0, 0, 0x0901, 0, 2, 100_003, 3, 0]);
    // Hostile frames, each with what the plugin must make of it:
    // a -07 CALL_INLINE cut inside its Read list (prefix, handle, a list entry's discriminant
    // and position, then the end);
    let cut = m07[0][..28].to_vec();
    // a list discriminant of 2, which is not XDR;
    let not_xdr = words(&[0x0a01, 2, 1, RDMA2_CALL_INLINE, 0, 2, 0, 0, 0x0a01, 0]);
    // bytes after an RDMA2_ERROR, which carries no RPC message;
    let trailing = words(&[0x0a02, 2, 1, RDMA2_ERROR, RDMA2_ERR_INVAL_CONT, 7, 7]);
    // a fourth word neither draft defines: not claimed;
    let unknown = words(&[0x0a03, 2, 1, 0xdead_beef, 0, 0]);
    // and a valid-looking header carried by an RDMA Write (opcode 0x0a), not a Send: not
    // claimed (its bytes are data, not a message).
    let in_a_write = m07[1].clone();
    let dir = std::env::temp_dir().join(format!("tshark_v2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap_path = dir.join("v2.pcap");
    let mut pcap = PcapWriter::new(std::fs::File::create(&pcap_path).unwrap()).unwrap();
    let flow = flow_of(0, true);
    let all: Vec<&Vec<u8>> =
        m07.iter().chain(&m00).chain([&v1, &cut, &not_xdr, &trailing, &unknown, &in_a_write]).collect();
    for (i, m) in all.iter().enumerate() {
        let mut frame = roce_frame(&flow, i as u32, m);
        if std::ptr::eq(*m, &in_a_write) {
            // The BTH opcode, after Ethernet (14), IPv4 (20) and UDP (8): RC RDMA WRITE ONLY.
            frame[42] = 0x0a;
        }
        pcap.frame(Duration::from_millis(i as u64), &frame).unwrap();
    }
    drop(pcap);

    let text = tshark_fields(&pcap_path);
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
        for (c, (got, want)) in row[1..].iter().zip(&want).enumerate() {
            assert_eq!(
                got,
                want,
                "frame {} ({}), field {}: tshark {got:?}, ours {want:?}",
                i + 1,
                hex_head(m),
                FIELDS[c + 1]
            );
        }
    }
    let special = &rows[m07.len() + m00.len()..];
    // Version One, with the plugin loaded: tshark's own dissector, untouched by ours.
    assert_eq!((col(&special[0], "rpcrdma2.xid"), col(&special[0], "rpcordma.version")), ("", "1"), "{:?}", special[0]);
    // The cut header: its prefix shown, flagged malformed.
    let cut_row = &special[1];
    assert_eq!(
        (col(cut_row, "rpcrdma2.xid"), col(cut_row, "rpcrdma2.dialect"), col(cut_row, "rpcrdma2.malformed")),
        ("0x00000701", "-07", "the header ends early"),
        "{cut_row:?}"
    );
    assert!(col(&special[2], "rpcrdma2.malformed").contains("not 0 or 1"), "{:?}", special[2]);
    assert!(col(&special[3], "rpcrdma2.malformed").contains("carries no RPC message"), "{:?}", special[3]);
    for (row, what) in [(&special[4], "an undefined fourth word"), (&special[5], "an RDMA Write's payload")] {
        assert_eq!(col(row, "rpcrdma2.xid"), "", "{what} claimed: {row:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// tshark's [`FIELDS`] for every frame of `pcap_path`, the plugin loaded: one line a frame,
/// tab-separated, several values of a field joined by `;`.
fn tshark_fields(pcap_path: &Path) -> String {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X").arg(format!("lua_script:{}", plugin().display()));
    cmd.arg("-r").arg(pcap_path).args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("running tshark");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The matrix's own -07 traffic (issue 27: "pcap output carries -07 frames"): the cells whose
/// pair settles on -07 run in this process with every Send recorded, the recording is written
/// as the `pcap` subcommand writes it, and the plugin must show every frame, calls and replies
/// of every form, field by field as `draft07::header::Header` reads the same bytes.
#[test]
fn the_plugin_reads_every_draft07_message_of_the_matrix() {
    if !tshark_present() {
        return;
    }
    let cells: Vec<_> = all_cells().into_iter().filter(|c| c.settles().1 == Some(Dialect::Ietf07)).collect();
    assert_eq!(cells.len(), 4 * 4 * 7, "the four -07 pairs x private data x forms");
    let (outcomes, sent) = record(rpcrdma_verbs::InProcess, &cells, run_cell);
    assert!(outcomes.iter().all(|o| o.verdict.is_ok()), "matrix cells failed: {outcomes:?}");
    let dir = std::env::temp_dir().join(format!("tshark_v2-matrix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap_path = dir.join("matrix07.pcap");
    drop(write_capture(std::fs::File::create(&pcap_path).unwrap(), &sent).unwrap());
    let text = tshark_fields(&pcap_path);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), sent.len(), "one row per frame");
    let mut types = std::collections::BTreeSet::new();
    for (i, (row, s)) in rows.iter().zip(&sent).enumerate() {
        let want = expected_07(&s.bytes);
        for (c, (got, want)) in row[1..].iter().zip(&want).enumerate() {
            assert_eq!(got, want, "frame {} ({}), field {}", i + 1, hex_head(&s.bytes), FIELDS[c + 1]);
        }
        types.insert(col(row, "rpcrdma2.htype").to_string());
    }
    // Every call and reply type went by, MIDDLE parts included (every form of the matrix but
    // backward, the continued ones too), and each side's RDMA2_CONNPROP_FINAL.
    assert_eq!(types.len(), 7, "{types:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn hex_head(m: &[u8]) -> String {
    m.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
