//! `interop-tests decode HEX`: any Version One or Version Two transport header, decoded to
//! JSON with the verdict a receiver would reach on it.
//!
//! The version comes from the `rdma_vers` word, which sits in the second word in every
//! version (RFC 8166 section 4.2; draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). The
//! fields come from the generated XDR codecs (Version One's `rdma_msg`, Version Two's
//! `rpcrdma2_xprt_hdr`) with no rule applied, so that a header a receiver rejects still shows
//! what it says. The verdict is [`rpcrdma_v2::verdict::receive`] under [`policy`], a receiver
//! of versions 1..=2, which hands Version One messages to [`rpcrdma_v1::verdict::receive`]:
//! no rule is re-implemented here.
//!
//! ```
//! use interop_tests::decode::{decode, parse_hex};
//! // RDMA_MSG, xid 7, version 1, 32 credits, no chunks, then an RPC call with XID 7.
//! let bytes = parse_hex("00000007 00000001 00000020 00000000 00000000 00000000 00000000 00000007").unwrap();
//! let report = decode(&bytes);
//! assert_eq!(report.get("credit").unwrap().to_string(), "32");
//! assert_eq!(report.get("verdict").unwrap().get("action").unwrap().to_string(), "\"accept\"");
//! ```

use rpcrdma_v1::header::Header;
use rpcrdma_v1::verdict::{DiscardReason, ErrorReply, PeerError as V1PeerError, ReceivePolicy, Verdict as V1Verdict};
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaError, XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::Registry;
use rpcrdma_v2::properties::{Exchange, TransportProperties, RPCRDMA2_OPT_PROPERTIES};
use rpcrdma_v2::rt::{List, Xdr};
use rpcrdma_v2::verdict::{PeerError, Verdict};
use rpcrdma_v2::xdr::{Rpcrdma2Body, Rpcrdma2Error, Rpcrdma2Segment, Rpcrdma2WriteChunk, Rpcrdma2XprtHdr};

pub use crate::json::Json;

/// The receiver the verdict is reached for: versions 1..=2, Version One's default limits,
/// credit 32 in the RDMA_ERRORs it would send.
///
/// ```
/// use rpcrdma_v1::Version;
/// assert_eq!(interop_tests::decode::policy().versions, (Version::ONE, Version::TWO));
/// ```
pub fn policy() -> ReceivePolicy {
    ReceivePolicy { versions: (Version::ONE, Version::TWO), ..ReceivePolicy::default() }
}

/// Hex digits to bytes. Whitespace, `:` and `-` separators and a leading `0x` are ignored;
/// anything else that is not a hex digit, or an odd number of digits, is an error.
///
/// ```
/// use interop_tests::decode::parse_hex;
/// assert_eq!(parse_hex("0x0001 02:ff").unwrap(), [0, 1, 2, 255]);
/// assert!(parse_hex("0g").is_err());
/// ```
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    let digits: String = s.chars().filter(|c| !c.is_whitespace() && *c != ':' && *c != '-').collect();
    if digits.is_empty() {
        return Err("no hex digits".into());
    }
    crate::unhex(&digits)
}

/// The report on `bytes`: the header's fields, `header_len` and `payload_len` (the bytes after
/// the transport header), or `decode_error` where the XDR does not decode, and the `verdict`.
pub fn decode(bytes: &[u8]) -> Json {
    let word = |at: usize| bytes.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()));
    let mut out = vec![("length", Json::from(bytes.len()))];
    let fixed = ["xid", "vers", "credit", "proc"];
    for (i, name) in fixed.into_iter().enumerate() {
        out.push((name, word(4 * i).map_or(Json::Null, Json::from)));
    }
    let vers = word(4);
    out.push(("proc_name", word(12).map_or(Json::Null, |p| Json::str(proc_name(vers == Some(2), p)))));
    let body = match vers {
        None => Err("fewer than 8 bytes: no version".to_string()),
        Some(1) => RdmaMsg::decode(bytes).map(|(m, n)| (v1_body(&m.rdma_body), n)).map_err(|e| e.to_string()),
        Some(2) => Rpcrdma2XprtHdr::decode(bytes).map(|(h, n)| (v2_body(&h.rdma_body), n)).map_err(|e| e.to_string()),
        Some(v) => Err(format!("version {v} has no known layout after the fixed words")),
    };
    match body {
        Ok((fields, n)) => {
            out.extend(fields);
            out.push(("header_len", Json::from(n)));
            out.push(("payload_len", Json::from(bytes.len() - n)));
        }
        Err(e) => out.push(("decode_error", Json::str(e))),
    }
    out.push(("verdict", verdict(bytes)));
    Json::Obj(out)
}

fn proc_name(v2: bool, p: u32) -> &'static str {
    match p {
        0 => "RDMA_MSG",
        1 => "RDMA_NOMSG",
        2 => "RDMA_MSGP",
        3 => "RDMA_DONE",
        4 => "RDMA_ERROR",
        5 if v2 => "RDMA_OPTIONAL",
        _ => "unknown",
    }
}

/// An RDMA_ERROR's meaning, named as the version that sent it names it.
fn error_name(v2: bool, code: u32, range: Option<(u32, u32)>) -> String {
    match (code, range) {
        (1, Some((low, high))) => format!("ERR_VERS {low}..{high}"),
        (2, _) if v2 => "RDMA_ERR_BAD_HEADER".into(),
        (2, _) => "ERR_CHUNK".into(),
        (3, _) if v2 => "RDMA_ERR_INVAL_OPTION".into(),
        (c, _) => format!("unknown error code {c}"),
    }
}

fn segment(handle: u32, length: u32, offset: u64) -> Json {
    Json::Obj(vec![("handle", handle.into()), ("length", length.into()), ("offset", offset.into())])
}

fn read_list(reads: impl Iterator<Item = (u32, Json)>) -> Json {
    Json::Arr(reads.map(|(position, seg)| Json::Obj(vec![("position", position.into()), ("segment", seg)])).collect())
}

/// The three chunk lists, whichever codec decoded them.
fn chunk_lists(reads: Json, writes: Vec<Json>, reply: Option<Json>) -> Vec<(&'static str, Json)> {
    vec![("read_list", reads), ("write_list", Json::Arr(writes)), ("reply_chunk", reply.unwrap_or(Json::Null))]
}

fn v1_chunk_lists<'a>(
    reads: List<'a, XdrReadChunk>,
    writes: List<'a, XdrWriteChunk<'a>>,
    reply: Option<XdrWriteChunk<'a>>,
) -> Vec<(&'static str, Json)> {
    let seg = |s: XdrRdmaSegment| segment(s.handle, s.length, s.offset);
    let chunk = |c: XdrWriteChunk<'_>| Json::Arr(c.target.iter().map(seg).collect());
    let reads = read_list(reads.iter().map(|r| (r.position, seg(r.target))));
    chunk_lists(reads, writes.iter().map(chunk).collect(), reply.map(chunk))
}

fn v1_body(body: &RdmaBody<'_>) -> Vec<(&'static str, Json)> {
    match *body {
        RdmaBody::RdmaMsg(h) => v1_chunk_lists(h.rdma_reads, h.rdma_writes, h.rdma_reply),
        RdmaBody::RdmaNomsg(h) => v1_chunk_lists(h.rdma_reads, h.rdma_writes, h.rdma_reply),
        RdmaBody::RdmaMsgp(h) => {
            let mut f = vec![("align", h.rdma_align.into()), ("thresh", h.rdma_thresh.into())];
            f.extend(v1_chunk_lists(h.rdma_reads, h.rdma_writes, h.rdma_reply));
            f
        }
        RdmaBody::RdmaDone => vec![],
        RdmaBody::RdmaError(RpcRdmaError::ErrVers(r)) => {
            error_fields(false, 1, Some((r.rdma_vers_low, r.rdma_vers_high)))
        }
        RdmaBody::RdmaError(RpcRdmaError::ErrChunk) => error_fields(false, 2, None),
    }
}

fn v2_body(body: &Rpcrdma2Body<'_>) -> Vec<(&'static str, Json)> {
    let seg = |s: Rpcrdma2Segment| segment(s.rdma_handle, s.rdma_length, s.rdma_offset);
    let chunk = |c: Rpcrdma2WriteChunk<'_>| Json::Arr(c.rdma_target.iter().map(seg).collect());
    match *body {
        Rpcrdma2Body::RdmaMsg(c) | Rpcrdma2Body::RdmaNomsg(c) => {
            let reads = read_list(c.rdma_reads.iter().map(|r| (r.rdma_position, seg(r.rdma_target))));
            chunk_lists(reads, c.rdma_writes.iter().map(chunk).collect(), c.rdma_reply.map(chunk))
        }
        Rpcrdma2Body::RdmaMsgp | Rpcrdma2Body::RdmaDone => vec![],
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrVers(r)) => {
            error_fields(true, 1, Some((r.rdma_vers_low, r.rdma_vers_high)))
        }
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrBadHeader) => error_fields(true, 2, None),
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrInvalOption) => error_fields(true, 3, None),
        Rpcrdma2Body::RdmaOptional(o) => {
            let mut f = vec![
                ("opttype", o.rdma_opttype.into()),
                ("optinfo", Json::str(crate::hex(o.rdma_optinfo))),
                ("optinfo_len", o.rdma_optinfo.len().into()),
            ];
            if o.rdma_opttype == RPCRDMA2_OPT_PROPERTIES {
                f.push(properties(o.rdma_optinfo));
            }
            f
        }
    }
}

/// The `rdma_optinfo` of a transport-properties RDMA_OPTIONAL
/// (`specs/rpcrdma2-transport-properties.txt` section 2.2) as `properties`: request or reply,
/// and each property as [`TransportProperties::decode`] keeps it (unknown or ill-typed ones
/// ignored, section 2.4; `null` when not stated; the boolean as its XDR word, 0 or 1); or
/// `properties_error` where it is malformed (section 2.5). Only the fields: the verdict is
/// still [`policy`]'s receiver's, which lacks the extension.
fn properties(optinfo: &[u8]) -> (&'static str, Json) {
    let size = |v: Option<u32>| v.map_or(Json::Null, Json::from);
    match TransportProperties::decode(optinfo) {
        Ok((kind, p)) => (
            "properties",
            Json::Obj(vec![
                ("exchange", Json::str(if kind == Exchange::Reply { "reply" } else { "request" })),
                ("max_send_size", size(p.max_send_size)),
                ("max_recv_size", size(p.max_recv_size)),
                ("remote_invalidation", size(p.remote_invalidation.map(u32::from))),
                ("backward_credits", size(p.backward_credits)),
            ]),
        ),
        Err(e) => ("properties_error", Json::str(e.to_string())),
    }
}

fn error_fields(v2: bool, code: u32, range: Option<(u32, u32)>) -> Vec<(&'static str, Json)> {
    let mut f = vec![("errcode", code.into()), ("error", Json::str(error_name(v2, code, range)))];
    if let Some((low, high)) = range {
        f.extend([("vers_low", low.into()), ("vers_high", high.into())]);
    }
    f
}

/// What [`policy`]'s receiver does with `bytes`, by the crates' own rules.
fn verdict(bytes: &[u8]) -> Json {
    let p = policy();
    let mut out = vec![("receiver", Json::str(format!("versions {}..={}", p.versions.0.wire(), p.versions.1.wire())))];
    let (rules, fields) = match rpcrdma_v2::verdict::receive(bytes, &p, &mut Registry::new()) {
        Verdict::Version1(v) => ("RFC 8166 (Version One)", v1_verdict(v)),
        Verdict::Accept(h) => (V2_RULES, accept(&h)),
        Verdict::Reply { reply, reason } => (V2_RULES, error_reply(&reply, &reason)),
        Verdict::PeerError { xid, error } => {
            let name = match error {
                // Named as the error's own version names it: a Version One ERR_CHUNK is
                // RDMA_ERR_BAD_HEADER's value 2 (draft section 4.2).
                PeerError::Common(e) => v1_peer_error(e, bytes.get(4..8) == Some(&[0, 0, 0, 2])),
                PeerError::InvalOption => "RDMA_ERR_INVAL_OPTION".into(),
                // Never from the -00 dispatch, which reads -00's error union.
                PeerError::Draft07(e) => format!("RDMA2_ERROR {e:?}"),
            };
            (V2_RULES, peer_error(xid, name))
        }
        Verdict::Handled { xid, opttype, .. } => {
            (V2_RULES, vec![("action", Json::str("handled")), ("xid", xid.into()), ("opttype", opttype.into())])
        }
        // Never produced here: this decoder awaits no answer of its own.
        Verdict::Answer(m) => {
            (V2_RULES, vec![("action", Json::str("answer")), ("xid", m.xid.into()), ("opttype", m.opttype.into())])
        }
        Verdict::Discard(r) => (V2_RULES, discard(r)),
    };
    out.push(("rules", Json::str(rules)));
    out.extend(fields);
    Json::Obj(out)
}

const V2_RULES: &str = "draft-cel-nfsv4-rpcrdma-version-two-00 (Version Two)";

fn v1_verdict(v: V1Verdict<'_>) -> Vec<(&'static str, Json)> {
    match v {
        V1Verdict::Accept(h) => accept(&h),
        V1Verdict::Reply { reply, reason } => error_reply(&reply, &reason),
        V1Verdict::PeerError { xid, error } => peer_error(xid, v1_peer_error(error, false)),
        V1Verdict::Discard(r) => discard(r),
    }
}

fn accept(h: &Header<'_>) -> Vec<(&'static str, Json)> {
    vec![
        ("action", Json::str("accept")),
        ("read_chunks", h.read_chunks().count().into()),
        ("rpc_message_len", h.payload().len().into()),
    ]
}

/// The RDMA_ERROR to send, in hex, and what it says (decoded back by [`decode`]'s codecs).
fn error_reply(reply: &ErrorReply, reason: &dyn std::fmt::Display) -> Vec<(&'static str, Json)> {
    let b = reply.as_bytes();
    let word = |at: usize| b.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()));
    let range = word(20).zip(word(24));
    let meaning = match word(16) {
        Some(code) => format!("RDMA_ERROR {}", error_name(word(4) == Some(2), code, range)),
        None => "RDMA_ERROR".into(),
    };
    vec![
        ("action", Json::str("reply")),
        ("reason", Json::str(reason.to_string())),
        ("reply", Json::str(meaning)),
        ("reply_hex", Json::str(crate::hex(b))),
    ]
}

fn v1_peer_error(e: V1PeerError, v2: bool) -> String {
    match e {
        V1PeerError::Vers { low, high, .. } => error_name(v2, 1, Some((low, high))),
        V1PeerError::Chunk => error_name(v2, 2, None),
    }
}

fn peer_error(xid: u32, error: String) -> Vec<(&'static str, Json)> {
    vec![("action", Json::str("complete_with_peer_error")), ("xid", xid.into()), ("error", Json::str(error))]
}

fn discard(r: DiscardReason) -> Vec<(&'static str, Json)> {
    let why = match r {
        DiscardReason::TooShort(n) => format!("{n} bytes: too short to hold the XID and version"),
        DiscardReason::UndecodableError => {
            "an RDMA_ERROR that cannot be decoded (RFC 8166 section 4.5: discard silently)".into()
        }
    };
    vec![("action", Json::str("discard")), ("reason", Json::str(why))]
}

#[cfg(test)]
mod tests;
