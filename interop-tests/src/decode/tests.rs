//! [`decode`](super::decode) on one header of each kind the verdicts distinguish.

use super::*;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn num(j: &Json, key: &str) -> u64 {
    j.get(key).and_then(Json::num).unwrap_or_else(|| panic!("{key} in {j}"))
}

fn text<'a>(j: &'a Json, key: &str) -> &'a str {
    j.get(key).and_then(Json::as_str).unwrap_or_else(|| panic!("{key} in {j}"))
}

fn verdict_of(bytes: &[u8]) -> (Json, Json) {
    let r = decode(bytes);
    let v = r.get("verdict").unwrap().clone();
    (r, v)
}

#[test]
fn v1_chunked_header_shows_every_segment() {
    // RDMA_MSG: a Read chunk at position 8, one Write chunk of two segments, a Reply chunk;
    // then the RPC message: XID 5, a call, one more word.
    let mut b = words(&[5, 1, 7, 0, 1, 8, 0x11, 100, 0, 0x1000, 0]);
    b.extend(words(&[1, 2, 0x21, 400, 0, 0x4000, 0x22, 500, 1, 0, 0]));
    b.extend(words(&[1, 1, 0x31, 700, 0, 0x7000]));
    let header_len = b.len();
    b.extend(words(&[5, 0, 9]));
    let (r, v) = verdict_of(&b);
    assert_eq!((num(&r, "xid"), num(&r, "vers"), num(&r, "credit"), num(&r, "proc")), (5, 1, 7, 0));
    assert_eq!(text(&r, "proc_name"), "RDMA_MSG");
    let read = r.get("read_list").unwrap().at(0).unwrap();
    assert_eq!(num(read, "position"), 8);
    assert_eq!(read.get("segment").unwrap().to_string(), r#"{"handle": 17, "length": 100, "offset": 4096}"#);
    let writes = r.get("write_list").unwrap();
    assert_eq!(num(writes.at(0).unwrap().at(1).unwrap(), "offset"), 1 << 32);
    assert_eq!(num(r.get("reply_chunk").unwrap().at(0).unwrap(), "handle"), 0x31);
    assert_eq!((num(&r, "header_len"), num(&r, "payload_len")), (header_len as u64, 12));
    assert_eq!((text(&v, "action"), text(&v, "rules")), ("accept", "RFC 8166 (Version One)"));
    assert_eq!((num(&v, "read_chunks"), num(&v, "rpc_message_len")), (1, 12));
    assert_eq!(text(&v, "receiver"), "versions 1..=2");
}

#[test]
fn unknown_version_gets_err_vers_with_both_versions() {
    let (r, v) = verdict_of(&words(&[9, 3, 1, 0]));
    assert!(text(&r, "decode_error").contains("version 3"));
    assert_eq!((text(&v, "action"), text(&v, "reply")), ("reply", "RDMA_ERROR ERR_VERS 1..2"));
    assert_eq!(text(&v, "reply_hex"), crate::hex(&words(&[9, 3, 32, 4, 1, 1, 2])));
}

#[test]
fn v1_truncated_chunk_list_gets_err_chunk() {
    let (r, v) = verdict_of(&words(&[9, 1, 1, 0, 1]));
    assert!(text(&r, "decode_error").contains("truncated"));
    assert_eq!(text(&v, "reply"), "RDMA_ERROR ERR_CHUNK");
    assert_eq!(text(&v, "reply_hex"), crate::hex(&words(&[9, 1, 32, 4, 2])));
    assert!(text(&v, "reason").starts_with("malformed header"));
}

#[test]
fn v2_message_is_accepted_by_version_two_rules() {
    let (r, v) = verdict_of(&words(&[7, 2, 1, 0, 0, 0, 0, 7, 0]));
    assert_eq!(r.get("read_list"), Some(&Json::Arr(vec![])));
    assert_eq!(r.get("reply_chunk"), Some(&Json::Null));
    assert_eq!((text(&v, "action"), text(&v, "rules")), ("accept", V2_RULES));
}

#[test]
fn v2_bad_header_and_invalid_option() {
    // RDMA_MSGP is reserved in Version Two: a bad header.
    let (_, v) = verdict_of(&words(&[7, 2, 1, 2]));
    assert_eq!(text(&v, "reply"), "RDMA_ERROR RDMA_ERR_BAD_HEADER");
    // RDMA_OPTIONAL with an opttype nobody registered.
    let mut b = words(&[8, 2, 1, 5, 42, 3]);
    b.extend_from_slice(b"abc\0");
    let (r, v) = verdict_of(&b);
    assert_eq!((text(&r, "proc_name"), num(&r, "opttype")), ("RDMA_OPTIONAL", 42));
    assert_eq!((text(&r, "optinfo"), num(&r, "optinfo_len")), ("616263", 3));
    assert_eq!(text(&v, "reply"), "RDMA_ERROR RDMA_ERR_INVAL_OPTION");
    assert!(text(&v, "reason").contains("opttype 42"));
}

#[test]
fn received_errors_complete_the_transaction_or_are_dropped() {
    // ERR_VERS with rdma_vers 2, as Linux answers a Version Two probe.
    let (r, v) = verdict_of(&words(&[3, 2, 32, 4, 1, 1, 1]));
    assert_eq!((num(&r, "errcode"), num(&r, "vers_low"), num(&r, "vers_high")), (1, 1, 1));
    assert_eq!(
        (text(&v, "action"), num(&v, "xid"), text(&v, "error")),
        ("complete_with_peer_error", 3, "ERR_VERS 1..1")
    );
    let (r, v) = verdict_of(&words(&[3, 1, 32, 4, 2]));
    assert_eq!((text(&r, "error"), text(&v, "error")), ("ERR_CHUNK", "ERR_CHUNK"));
    let (_, v) = verdict_of(&words(&[3, 2, 32, 4, 2]));
    assert_eq!(text(&v, "error"), "RDMA_ERR_BAD_HEADER");
    // An error code Version One does not have: discarded (RFC 8166 section 4.5).
    let (_, v) = verdict_of(&words(&[3, 1, 32, 4, 9]));
    assert_eq!(text(&v, "action"), "discard");
    assert!(text(&v, "reason").contains("cannot be decoded"));
}

#[test]
fn too_short_is_discarded() {
    let (r, v) = verdict_of(&[0, 0, 0, 1, 0, 0]);
    assert_eq!((r.get("xid"), r.get("vers")), (Some(&Json::Num(1)), Some(&Json::Null)));
    assert_eq!((text(&v, "action"), text(&v, "reason")), ("discard", "6 bytes: too short to hold the XID and version"));
}

#[test]
fn hex_input() {
    assert_eq!(parse_hex(" 0X0a0B\n0c ").unwrap(), [10, 11, 12]);
    assert_eq!(parse_hex("00:01-02").unwrap(), [0, 1, 2]);
    assert!(parse_hex("abc").unwrap_err().contains("odd"));
    assert!(parse_hex("0x").unwrap_err().contains("no hex"));
    assert!(parse_hex("12 xy").unwrap_err().contains("not a hex digit"));
}

#[test]
fn pretty_output_is_the_compact_json_reindented() {
    let r = decode(&words(&[7, 1, 32, 0, 0, 0, 0, 7, 0]));
    let squeezed: String = r.pretty().split_whitespace().collect();
    let compact: String = r.to_string().split_whitespace().collect();
    assert_eq!(squeezed, compact);
    assert!(r.pretty().starts_with("{\n  \"length\": 36,\n  \"xid\": 7,"));
}

#[test]
fn transport_properties_optional_shows_the_stated_properties() {
    // The matrix's own properties request (a side stating 12288/12288), as captured: an
    // RDMA_OPTIONAL of type 0xf0000001 whose optinfo is the request with two properties.
    let b = parse_hex(
        "4f500000 00000002 00000020 00000005 f0000001 00000020 \
         00000000 00000002 00000001 00000004 00003000 00000002 00000004 00003000",
    )
    .unwrap();
    let (r, v) = verdict_of(&b);
    assert_eq!(text(&r, "proc_name"), "RDMA_OPTIONAL");
    let p = r.get("properties").unwrap();
    assert_eq!(text(p, "exchange"), "request");
    assert_eq!((num(p, "max_send_size"), num(p, "max_recv_size")), (12288, 12288));
    assert_eq!((p.get("remote_invalidation"), p.get("backward_credits")), (Some(&Json::Null), Some(&Json::Null)));
    // The decoder's receiver lacks the extension: it answers RDMA_ERR_INVAL_OPTION (section 2.3).
    assert_eq!(text(&v, "reply"), "RDMA_ERROR RDMA_ERR_INVAL_OPTION");
    // Trailing bytes in the optinfo are malformed (section 2.5).
    let mut bad = b.clone();
    bad[23] = 0x24;
    bad.extend([0; 4]);
    assert!(text(&decode(&bad), "properties_error").contains("after the rpcrdma2_properties"));
}
