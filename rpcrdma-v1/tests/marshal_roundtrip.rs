//! Marshal -> simulated RDMA transfer -> reassemble, on the call path
//! (Requester marshals, Responder fetches Read chunks and reassembles) and
//! the reply path (Responder marshals into the provided Write and Reply
//! chunks, Requester reassembles), plus one test per rule of RFC 8166
//! sections 3.4 and 3.5 (and draft sections 5.2.4, 5.3.2, 5.3.3).

use std::collections::BTreeMap;
use std::convert::Infallible;

use proptest::prelude::*;
use rpcrdma_v1::marshal_call::*;
use rpcrdma_v1::marshal_reply::*;
use rpcrdma_v1::reassemble::*;
use rpcrdma_v1::rt::{List, Seq, Xdr};
use rpcrdma_v1::ulb::*;
use rpcrdma_v1::xdr::*;

// ---- the Requester's memory and its registrar ------------------------------

/// Registered memory: handle -> (base address, bytes).
#[derive(Default)]
struct Memory {
    regions: BTreeMap<u32, (u64, Vec<u8>)>,
}

impl Memory {
    fn region(&mut self, handle: u32, offset: u64, len: usize) -> &mut [u8] {
        let (base, bytes) = self.regions.get_mut(&handle).expect("unknown handle");
        let start = (offset - *base) as usize;
        &mut bytes[start..start + len]
    }

    /// An RDMA Read by the Responder.
    fn rdma_read(&mut self, f: &Fetch, landing: &mut [u8]) {
        let src = self.region(f.handle, f.offset, f.length as usize);
        landing[f.landing..f.landing + f.length as usize].copy_from_slice(src);
    }

    /// The bytes behind a registration (its first segment's handle).
    fn buffer(&self, segs: &[XdrRdmaSegment]) -> &[u8] {
        segs.first().map_or(&[], |s| &self.regions[&s.handle].1)
    }
}

/// Registers by copying (Read sources) or allocating (receive buffers) into
/// [`Memory`]: one handle per registration, segments of at most `max_seg`
/// bytes at consecutive addresses.
struct TestRegistrar {
    call: Vec<u8>,
    mem: Memory,
    next_handle: u32,
    max_seg: usize,
    registered: Vec<ChunkPurpose>,
    released: Vec<ChunkPurpose>,
}

impl TestRegistrar {
    fn new(call: &[u8], max_seg: usize) -> Self {
        TestRegistrar {
            call: call.to_vec(),
            mem: Memory::default(),
            next_handle: 0x100,
            max_seg,
            registered: vec![],
            released: vec![],
        }
    }
}

impl Registrar for TestRegistrar {
    type Error = Infallible;

    fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
        assert!(!p.is_empty(), "registrar asked for zero bytes");
        let handle = self.next_handle;
        self.next_handle += 1;
        let base = 0x7f00_0000_0000 + (u64::from(handle) << 24) + 0x10;
        let bytes = match p.call_range() {
            Some(r) => self.call[r].to_vec(),
            None => vec![0xA5; p.len()], // receive buffers start dirty
        };
        let mut at = 0;
        while at < bytes.len() {
            let n = self.max_seg.min(bytes.len() - at);
            out.push(XdrRdmaSegment { handle, length: n as u32, offset: base + at as u64 });
            at += n;
        }
        self.mem.regions.insert(handle, (base, bytes));
        self.registered.push(p);
        Ok(())
    }

    fn release(&mut self, p: ChunkPurpose, _segments: &[XdrRdmaSegment]) {
        self.released.push(p);
    }
}

// ---- a ULB described by a layout ------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// `n` bytes of non-eligible XDR.
    Fixed(usize),
    /// A DDP-eligible `opaque<>`.
    Opaque,
    /// DDP-eligible optional-data of `n` fixed bytes, `opaque[n] *` (RFC
    /// 8166 section 3.4.4.2): the "is present" word, then (if TRUE) the
    /// data and its padding.
    OptFixed(usize),
    /// DDP-eligible optional-data `opaque<> *`: the "is present" word, then
    /// (if TRUE) a length word, the data and its padding.
    OptOpaque,
}

#[derive(Debug, Clone)]
enum Field {
    Fixed(Vec<u8>),
    Opaque(Vec<u8>),
    /// `opaque[n] *`: absent, or present with these `n` bytes.
    OptFixed(Option<Vec<u8>>),
    /// `opaque<> *`: absent, or present with these bytes.
    OptOpaque(Option<Vec<u8>>),
}

/// A ULB that parses messages laid out as `call` / `reply` say.
#[derive(Debug, Clone)]
struct LayoutUlb {
    call: Vec<Kind>,
    reply: Vec<Kind>,
    maxima: Vec<usize>,
    max_reply: usize,
}

fn parse(layout: &[Kind], stream: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
    let word = |pos: usize| stream.get(pos..pos + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()) as usize);
    let mut pos = 0;
    let mut found = 0;
    // An item of `len` bytes at `at`: in the stream unless already reduced.
    let mut item = |at: usize, len: usize, out: &mut Vec<DdpItem>| {
        out.push(DdpItem::new(at, len));
        found += 1;
        at + if found <= reduced { 0 } else { roundup(len) }
    };
    for k in layout {
        match *k {
            Kind::Fixed(n) => pos += n,
            Kind::Opaque => {
                let Some(len) = word(pos) else { return };
                pos = item(pos + 4, len, out);
            }
            // The "is present" word stays in the stream either way (3.4.4.2).
            Kind::OptFixed(n) => match word(pos) {
                None => return,
                Some(0) => pos += 4,
                Some(_) => pos = item(pos + 4, n, out),
            },
            Kind::OptOpaque => match word(pos) {
                None => return,
                Some(0) => pos += 4,
                Some(_) => {
                    let Some(len) = word(pos + 4) else { return };
                    pos = item(pos + 8, len, out);
                }
            },
        }
    }
}

impl UpperLayerBinding for LayoutUlb {
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
        parse(&self.call, call, 0, out)
    }
    fn reply_ddp_maxima(&self, _call: &[u8], out: &mut Vec<usize>) {
        out.extend_from_slice(&self.maxima)
    }
    fn max_reply_size(&self, _call: &[u8]) -> usize {
        self.max_reply
    }
    fn reply_ddp_items(&self, _call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        parse(&self.reply, reply, reduced, out)
    }
}

/// Build a message from fields (the first four bytes are the XID), and its
/// layout.
fn build(xid: u32, fields: &[Field]) -> (Vec<u8>, Vec<Kind>) {
    let mut m = xid.to_be_bytes().to_vec();
    let mut layout = vec![Kind::Fixed(4)];
    for f in fields {
        match f {
            Field::Fixed(b) => {
                m.extend_from_slice(b);
                layout.push(Kind::Fixed(b.len()));
            }
            Field::Opaque(d) => {
                m.extend_from_slice(&(d.len() as u32).to_be_bytes());
                m.extend_from_slice(d);
                m.resize(roundup(m.len()), 0);
                layout.push(Kind::Opaque);
            }
            Field::OptFixed(d) => {
                m.extend_from_slice(&u32::from(d.is_some()).to_be_bytes());
                m.extend_from_slice(d.as_deref().unwrap_or_default());
                m.resize(roundup(m.len()), 0);
                layout.push(Kind::OptFixed(d.as_ref().map_or(0, Vec::len)));
            }
            Field::OptOpaque(d) => {
                m.extend_from_slice(&u32::from(d.is_some()).to_be_bytes());
                if let Some(d) = d {
                    m.extend_from_slice(&(d.len() as u32).to_be_bytes());
                    m.extend_from_slice(d);
                    m.resize(roundup(m.len()), 0);
                }
                layout.push(Kind::OptOpaque);
            }
        }
    }
    (m, layout)
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        prop_oneof![0usize..48, 0usize..400]
            .prop_flat_map(|words| proptest::collection::vec(any::<u8>(), words * 4))
            .prop_map(Field::Fixed),
        prop_oneof![0usize..16, 0usize..3000]
            .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n))
            .prop_map(Field::Opaque),
        proptest::option::of(
            prop_oneof![0usize..16, 0usize..3000].prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n))
        )
        .prop_map(Field::OptFixed),
        proptest::option::of(
            prop_oneof![0usize..16, 0usize..3000].prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n))
        )
        .prop_map(Field::OptOpaque),
    ]
}

// ---- helpers ----------------------------------------------------------------

type Lists<'a> = (List<'a, XdrReadChunk>, List<'a, XdrWriteChunk<'a>>, Option<XdrWriteChunk<'a>>);

fn lists<'a>(m: &RdmaMsg<'a>) -> Lists<'a> {
    match m.rdma_body {
        RdmaBody::RdmaMsg(h) => (h.rdma_reads, h.rdma_writes, h.rdma_reply),
        RdmaBody::RdmaNomsg(h) => (h.rdma_reads, h.rdma_writes, h.rdma_reply),
        other => panic!("not a message with chunks: {other:?}"),
    }
}

fn is_nomsg(m: &RdmaMsg<'_>) -> bool {
    matches!(m.rdma_body, RdmaBody::RdmaNomsg(_))
}

/// Everything a Requester keeps about a call in flight.
struct SentCall {
    /// The RPC call message, which a binding reads to locate its reply's results.
    call: Vec<u8>,
    send: Vec<u8>,
    marshaled: MarshaledCall,
    reg: TestRegistrar,
}

fn send_call<U: UpperLayerBinding>(
    call: &[u8],
    ulb: &U,
    thresholds: InlineThresholds,
    max_seg: usize,
) -> Result<SentCall, CallError<Infallible>> {
    let mut desc = CallDescription::default();
    desc.describe(ulb, call);
    let req = desc.request(16, thresholds);
    let mut reg = TestRegistrar::new(call, max_seg);
    let mut header = vec![0u8; 64 * 1024];
    let mut marshaled = MarshaledCall::new();
    marshal_call(call, &req, &mut reg, &mut header, &mut marshaled)?;
    let mut send = Vec::new();
    marshaled.gather_into(&header, call, &mut send);
    Ok(SentCall { call: call.to_vec(), send, marshaled, reg })
}

/// The Responder's side of a call: decode, fetch, reassemble.
fn receive_call(sent: &mut SentCall) -> Vec<u8> {
    let (msg, hlen) = RdmaMsg::decode(&sent.send).unwrap();
    let (reads, _, _) = lists(&msg);
    let mut landing = vec![0u8; fetch_len(reads) as usize];
    for f in read_list_fetches(reads) {
        sent.reg.mem.rdma_read(&f, &mut landing);
    }
    let mut out = Vec::new();
    reassemble_call(&msg, &sent.send[hlen..], &landing, &mut out).unwrap();
    out
}

/// The Responder marshals `reply` for the call in `sent`, performs its RDMA
/// Writes into the Requester's memory and returns the Send.
fn send_reply<U: UpperLayerBinding>(
    sent: &mut SentCall,
    reply: &[u8],
    ulb: &U,
    reply_threshold: usize,
) -> Result<(Vec<u8>, MarshaledReply), ReplyError> {
    let (msg, _) = RdmaMsg::decode(&sent.send).unwrap();
    let provided = ProvidedChunks::from_call(&msg).unwrap();
    let mut results = Vec::new();
    ulb.reply_ddp_items(&sent.call, reply, 0, &mut results);
    let req = ReplyRequest { credits: 8, reply_inline_threshold: reply_threshold, ddp_results: &results };
    let mut header = vec![0u8; 64 * 1024];
    let mut out = MarshaledReply::new();
    marshal_reply(reply, provided, &req, &mut header, &mut out)?;
    // Every write lands inside a segment the Requester provided.
    let provided_segs: Vec<XdrRdmaSegment> = provided
        .writes
        .iter()
        .flat_map(|c| c.target.iter().collect::<Vec<_>>())
        .chain(provided.reply.iter().flat_map(|c| c.target.iter().collect::<Vec<_>>()))
        .collect();
    for w in out.writes() {
        assert!(
            provided_segs.iter().any(|s| s.handle == w.handle
                && w.offset >= s.offset
                && w.offset + w.src.len() as u64 <= s.offset + u64::from(s.length)),
            "write {w:?} outside the provided segments"
        );
        sent.reg.mem.region(w.handle, w.offset, w.src.len()).copy_from_slice(&reply[w.src.clone()]);
    }
    let mut send = Vec::new();
    out.gather_into(&header, reply, &mut send);
    Ok((send, out))
}

/// The Requester's side of a reply: decode and reassemble.
fn receive_reply<U: UpperLayerBinding>(sent: &SentCall, send: &[u8], ulb: &U) -> Vec<u8> {
    let (msg, hlen) = RdmaMsg::decode(send).unwrap();
    let bufs: Vec<&[u8]> = sent.marshaled.writes().iter().map(|c| sent.reg.mem.buffer(c)).collect();
    let reply_buf = sent.marshaled.reply_chunk().map_or(&[][..], |c| sent.reg.mem.buffer(c));
    let (mut results, mut out) = (Vec::new(), Vec::new());
    reassemble_reply_with_ulb(&sent.call, &msg, &send[hlen..], reply_buf, &bufs, ulb, &mut results, &mut out).unwrap();
    out
}

fn seg_lengths(chunk: XdrWriteChunk<'_>) -> Vec<u32> {
    chunk.target.iter().map(|s| s.length).collect()
}

fn chunk_total(chunk: XdrWriteChunk<'_>) -> u64 {
    chunk.target.iter().map(|s| u64::from(s.length)).sum()
}

/// An NFS-WRITE-like call: `pre` bytes of header (XID first), then an
/// `opaque<>` of `data` bytes at offset `pre`, then `post` bytes.
fn write_call(pre: usize, data: usize, post: usize) -> (Vec<u8>, OpaqueAtUlb) {
    let mut m: Vec<u8> = (0..pre).map(|i| (i as u8).wrapping_add(1)).collect();
    m.extend_from_slice(&(data as u32).to_be_bytes());
    m.extend((0..data).map(|i| (i % 251) as u8 | 1));
    m.resize(roundup(m.len()), 0);
    m.extend(std::iter::repeat_n(0xEE, post));
    let ulb = OpaqueAtUlb { call_opaque: Some(pre), reply_opaque: None, max_result: 0, max_reply: 100 };
    (m, ulb)
}

/// An NFS-READ-like reply with the given XID: `pre` bytes, an `opaque<>` of
/// `data` bytes, `post` bytes.
fn read_reply(xid: u32, pre: usize, data: usize, post: usize) -> Vec<u8> {
    let (mut m, _) = write_call(pre, data, post);
    m[..4].copy_from_slice(&xid.to_be_bytes());
    m
}

fn xid_of(m: &[u8]) -> u32 {
    u32::from_be_bytes(m[..4].try_into().unwrap())
}

// ---- the property ----------------------------------------------------------

#[derive(Debug, Clone)]
struct Case {
    call_fields: Vec<Field>,
    reply_fields: Vec<Field>,
    extra_chunks: Vec<usize>,
    fewer_chunks: usize,
    slack: Vec<usize>,
    reply_slack: usize,
    call_threshold: usize,
    reply_threshold: usize,
    max_seg: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(field(), 0..6),
        proptest::collection::vec(field(), 0..6),
        proptest::collection::vec(0usize..600, 0..3),
        0usize..3,
        proptest::collection::vec(0usize..64, 6),
        0usize..200,
        prop_oneof![2 => 100usize..1200, 1 => 1024usize..9000],
        prop_oneof![2 => 100usize..1200, 1 => 1024usize..9000],
        prop_oneof![3 => Just(1usize << 30), 2 => 16usize..4096],
    )
        .prop_map(
            |(
                call_fields,
                reply_fields,
                extra_chunks,
                fewer_chunks,
                slack,
                reply_slack,
                call_threshold,
                reply_threshold,
                max_seg,
            )| Case {
                call_fields,
                reply_fields,
                extra_chunks,
                fewer_chunks,
                slack,
                reply_slack,
                call_threshold,
                reply_threshold,
                max_seg,
            },
        )
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let xid = 0x5eed_0001;
    let (call, call_layout) = build(xid, &c.call_fields);
    let (reply, reply_layout) = build(xid, &c.reply_fields);
    let mut results = Vec::new();
    parse(&reply_layout, &reply, 0, &mut results);
    // Write chunks: one per result (large enough), except that sometimes the
    // last few results get none; sometimes extra chunks that will go unused.
    let chunked = results.len().saturating_sub(c.fewer_chunks);
    let mut maxima: Vec<usize> = results[..chunked].iter().zip(&c.slack).map(|(r, s)| r.len + s).collect();
    if chunked == results.len() {
        maxima.extend_from_slice(&c.extra_chunks);
    }
    let reduced_reply = reduced_len(reply.len(), &results[..chunked.min(maxima.len())]);
    let ulb = LayoutUlb { call: call_layout, reply: reply_layout, maxima, max_reply: reduced_reply + c.reply_slack };
    let thresholds = InlineThresholds { call: c.call_threshold, reply: c.reply_threshold };

    // Call path.
    let mut sent = match send_call(&call, &ulb, thresholds, c.max_seg) {
        Ok(sent) => sent,
        Err(CallError::HeaderExceedsThreshold { header, threshold }) => {
            prop_assert!(header > threshold);
            return Ok(());
        }
        Err(CallError::ReplyHeaderExceedsThreshold { header, threshold }) => {
            prop_assert!(header > threshold);
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("marshal_call: {e}"))),
    };
    // Nothing registered is leaked, nothing advertised was released.
    prop_assert_eq!(
        sent.reg.registered.len() - sent.reg.released.len(),
        sent.marshaled.writes().iter().filter(|c| !c.is_empty()).count()
            + usize::from(sent.marshaled.reply_chunk().is_some())
            + {
                let reads = sent.marshaled.reads();
                (0..reads.len()).filter(|&i| i == 0 || reads[i].position != reads[i - 1].position).count()
            }
    );
    prop_assert!(sent.send.len() <= c.call_threshold, "gather rule: {} > {}", sent.send.len(), c.call_threshold);
    let call_send = sent.send.clone();
    let (msg, hlen) = RdmaMsg::decode(&call_send).unwrap();
    prop_assert_eq!((msg.rdma_xid, msg.rdma_vers), (xid, 1));
    let (reads, writes, reply_chunk) = lists(&msg);
    let mut args = Vec::new();
    ulb.call_ddp_items(&call, &mut args);
    match sent.marshaled.form() {
        CallForm::Short => {
            prop_assert!(!is_nomsg(&msg) && reads.is_empty());
            prop_assert_eq!(&call_send[hlen..], &call[..]);
        }
        CallForm::Chunked => {
            prop_assert!(!is_nomsg(&msg));
            let mut fetched = read_list_fetches(reads).peekable();
            for item in args.iter().filter(|i| i.len > 0) {
                let mut total = 0u64;
                while let Some(f) = fetched.next_if(|f| f.position as usize == item.offset) {
                    total += u64::from(f.length);
                }
                prop_assert_eq!(total, item.len as u64, "Read chunk length excludes padding (3.4.5.2)");
            }
            prop_assert!(fetched.next().is_none());
            prop_assert_eq!(call_send.len() - hlen, reduced_len(call.len(), &args));
        }
        CallForm::Long => {
            prop_assert!(is_nomsg(&msg));
            prop_assert_eq!(hlen, call_send.len());
            prop_assert!(reads.iter().all(|r| r.position == 0));
            prop_assert_eq!(fetch_len(reads), call.len() as u64);
        }
    }
    prop_assert_eq!(writes.len(), ulb.maxima.len());
    for (w, &max) in writes.iter().zip(&ulb.maxima) {
        prop_assert_eq!(chunk_total(w), max as u64, "Write chunk sized to the result, no padding (3.4.6.2)");
    }
    let reply_header_without = 16 + 4 + sent.marshaled.writes().encoded_list_len() + 4;
    prop_assert_eq!(reply_chunk.is_some(), reply_header_without + roundup(ulb.max_reply) > c.reply_threshold);
    let back = receive_call(&mut sent);
    prop_assert_eq!(&back, &call);
    // Every Read chunk our Requester forms passes the Responder's
    // DDP-eligibility check (RFC 8166 section 6.1.1).
    prop_assert_eq!(check_call_ddp_eligibility(&msg, &back, &ulb, &mut Vec::new()), Ok(()));

    // Reply path: the provisioned chunks always suffice.
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, c.reply_threshold)
        .map_err(|e| TestCaseError::fail(format!("marshal_reply: {e}")))?;
    prop_assert!(send.len() <= c.reply_threshold, "gather rule: {} > {}", send.len(), c.reply_threshold);
    let (rmsg, rhlen) = RdmaMsg::decode(&send).unwrap();
    prop_assert_eq!(rmsg.rdma_xid, xid);
    let (rreads, rwrites, rreply) = lists(&rmsg);
    prop_assert!(rreads.is_empty());
    prop_assert_eq!(rwrites.len(), writes.len());
    for (i, (got, sent_chunk)) in rwrites.iter().zip(writes.iter()).enumerate() {
        prop_assert_eq!(got.target.len(), sent_chunk.target.len(), "segment counts copied");
        let expect = results.get(i).filter(|_| i < marshaled.reduced_results()).map_or(0, |r| r.len as u64);
        prop_assert_eq!(chunk_total(got), expect, "returned length = result length, no padding");
    }
    prop_assert_eq!(rreply.map(|c| c.target.len()), reply_chunk.map(|c| c.target.len()));
    match marshaled.form() {
        ReplyForm::Inline => {
            prop_assert!(!is_nomsg(&rmsg));
            prop_assert!(rreply.is_none_or(|c| chunk_total(c) == 0));
        }
        ReplyForm::ReplyChunk => {
            prop_assert!(is_nomsg(&rmsg) && rhlen == send.len());
            prop_assert!(rhlen + reduced_len(reply.len(), &results[..marshaled.reduced_results()]) > c.reply_threshold);
        }
    }
    prop_assert_eq!(receive_reply(&sent, &send, &ulb), reply);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// For random messages, DDP-eligible items, thresholds and segment
    /// sizes: marshal -> simulated transfer -> reassemble gives back the
    /// original bytes, on the call path and on the reply path.
    #[test]
    fn marshal_transfer_reassemble_round_trips(c in case()) {
        run_case(&c)?;
    }
}

// ---- one test per rule -----------------------------------------------------

#[test]
fn read_chunk_excludes_roundup_padding_rfc8166_3_4_5_2() {
    // A 2001-byte argument: 3 bytes of padding in the unreduced stream.
    let (call, ulb) = write_call(40, 2001, 8);
    assert_eq!(call.len(), 40 + 4 + 2004 + 8);
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Chunked);
    let reads = sent.marshaled.reads();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].position, 44);
    assert_eq!(reads[0].target.length, 2001, "the chunk's length is the item's, not padded");
    // Neither the data nor its padding is inline: length word, then what followed.
    assert_eq!(sent.marshaled.inline(), [0..44, 2048..2056]);
    assert_eq!(sent.registered_purposes(), [ChunkPurpose::Read { offset: 44, len: 2001 }]);
    // The Responder restores the padding.
    let back = receive_call(&mut sent);
    assert_eq!(&back[44 + 2001..44 + 2004], [0, 0, 0]);
    assert_eq!(back, call);
}

impl SentCall {
    fn registered_purposes(&self) -> Vec<ChunkPurpose> {
        self.reg.registered.clone()
    }
}

#[test]
fn chunk_position_counts_in_unreduced_stream_rfc8166_3_4_5() {
    // Two 1001-byte arguments; the second's Position counts the first one's
    // data and padding, though they are not in the reduced stream.
    let (call, layout) = build(
        7,
        &[
            Field::Fixed(vec![1; 8]),
            Field::Opaque(vec![2; 1001]),
            Field::Fixed(vec![3; 4]),
            Field::Opaque(vec![4; 1001]),
        ],
    );
    let ulb = LayoutUlb { call: layout, reply: vec![], maxima: vec![], max_reply: 64 };
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Chunked);
    let positions: Vec<u32> = sent.marshaled.reads().iter().map(|r| r.position).collect();
    assert_eq!(positions, [16, 16 + 1004 + 4 + 4]);
    assert!(positions.iter().all(|p| p % 4 == 0));
    assert_eq!(receive_call(&mut sent), call);
}

/// The bytes of `m` in `ranges`, concatenated.
fn gather(m: &[u8], ranges: &[std::ops::Range<usize>]) -> Vec<u8> {
    ranges.iter().flat_map(|r| m[r.clone()].iter().copied()).collect()
}

fn be(word: u32) -> [u8; 4] {
    word.to_be_bytes()
}

#[test]
fn optional_data_present_word_stays_inline_data_moves_to_chunk_rfc8166_3_4_4_2() {
    // Three DDP-eligible optional-data arguments: an `opaque<> *` and an
    // `opaque[1200] *`, both present, and an absent `opaque<> *`.
    let (call, layout) = build(
        0x0de7a,
        &[
            Field::Fixed(vec![1; 8]),                 // 4..12
            Field::OptOpaque(Some(vec![0x5A; 1501])), // present 12..16, length 16..20, data 20..1521 + 3 padding
            Field::Fixed(vec![2; 4]),                 // 1524..1528
            Field::OptFixed(Some(vec![0x6B; 1201])),  // present 1528..1532, data 1532..2733 + 3 padding
            Field::Fixed(vec![3; 4]),                 // 2736..2740
            Field::OptOpaque(None),                   // FALSE 2740..2744, nothing else
            Field::Fixed(vec![4; 4]),                 // 2744..2748
        ],
    );
    assert_eq!(call.len(), 2748);
    let ulb = LayoutUlb { call: layout, reply: vec![], maxima: vec![], max_reply: 64 };
    let mut items = Vec::new();
    ulb.call_ddp_items(&call, &mut items);
    assert_eq!(items, [DdpItem::new(20, 1501), DdpItem::new(1532, 1201)], "the absent one is no item");

    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Chunked);
    // Only the data moves: each Read chunk is exactly one item's data, at
    // the Position just past its "is present" word (and length word).
    let chunks: Vec<(u32, u32)> = sent.marshaled.reads().iter().map(|r| (r.position, r.target.length)).collect();
    assert_eq!(chunks, [(20, 1501), (1532, 1201)]);
    assert_eq!(
        sent.registered_purposes(),
        [ChunkPurpose::Read { offset: 20, len: 1501 }, ChunkPurpose::Read { offset: 1532, len: 1201 }]
    );
    // The "is present" words (TRUE, TRUE, FALSE) and the length word stay
    // in the reduced Payload stream; the data and its padding do not.
    assert_eq!(sent.marshaled.inline(), [0..20, 1524..1532, 2736..2748]);
    let (msg, hlen) = RdmaMsg::decode(&sent.send).unwrap();
    assert!(!is_nomsg(&msg));
    let inline = &sent.send[hlen..];
    assert_eq!(inline, gather(&call, &[0..20, 1524..1532, 2736..2748]));
    assert_eq!(inline.len(), 40);
    assert_eq!(&inline[12..16], be(1), "opaque<> *: is present, inline");
    assert_eq!(&inline[16..20], be(1501), "opaque<> *: its length word, inline");
    assert_eq!(&inline[20..24], [2; 4]);
    assert_eq!(&inline[24..28], be(1), "opaque[1201] *: is present, inline");
    assert_eq!(&inline[28..32], [3; 4]);
    assert_eq!(&inline[32..36], be(0), "absent opaque<> *: is present (FALSE), inline");
    assert_eq!(&inline[36..40], [4; 4]);
    assert!(!inline.contains(&0x5A) && !inline.contains(&0x6B), "no data inline");
    // Marshal -> transfer -> reassemble gives the call back.
    assert_eq!(receive_call(&mut sent), call);
}

#[test]
fn optional_data_result_present_word_stays_inline_data_moves_to_write_chunk_rfc8166_3_4_4_2() {
    // A reply with an `opaque<> *` result and an `opaque[n] *` result, both
    // present; the Requester provided a Write chunk for each.
    let call = write_call(40, 0, 0).0;
    let reply_layout = vec![Kind::Fixed(4), Kind::Fixed(8), Kind::OptOpaque, Kind::Fixed(4), Kind::OptFixed(700)];
    let ulb = LayoutUlb { call: vec![], reply: reply_layout, maxima: vec![3000, 700], max_reply: 512 };
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    let (reply, layout) = build(
        xid_of(&call),
        &[
            Field::Fixed(vec![1; 8]),                 // 4..12
            Field::OptOpaque(Some(vec![0x5A; 2999])), // present 12..16, length 16..20, data 20..3019 + 1 padding
            Field::Fixed(vec![2; 4]),                 // 3020..3024
            Field::OptFixed(Some(vec![0x6B; 700])),   // present 3024..3028, data 3028..3728
        ],
    );
    assert_eq!(layout, ulb.reply);
    assert_eq!(reply.len(), 3728);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    assert_eq!(marshaled.form(), ReplyForm::Inline);
    // Only the data goes into the Write chunks ...
    let written: Vec<std::ops::Range<usize>> = marshaled.writes().iter().map(|w| w.src.clone()).collect();
    assert_eq!(written, [20..3019, 3028..3728]);
    let (rmsg, rhlen) = RdmaMsg::decode(&send).unwrap();
    let totals: Vec<u64> = lists(&rmsg).1.iter().map(chunk_total).collect();
    assert_eq!(totals, [2999, 700]);
    // ... the "is present" words and the length word stay inline.
    assert_eq!(marshaled.inline(), [0..20, 3020..3028]);
    let inline = &send[rhlen..];
    assert_eq!(inline, gather(&reply, &[0..20, 3020..3028]));
    assert_eq!((&inline[12..16], &inline[16..20], &inline[24..28]), (&be(1)[..], &be(2999)[..], &be(1)[..]));
    assert_eq!(receive_reply(&sent, &send, &ulb), reply);
}

#[test]
fn absent_optional_data_moves_nothing_rfc8166_3_4_4_2() {
    // A large call whose only DDP-eligible field, optional-data, is absent:
    // nothing is reduced, no Read chunk conveys it (the call goes Long, as
    // any call too large with nothing to reduce does).
    let (call, layout) = build(7, &[Field::Fixed(vec![1; 2000]), Field::OptOpaque(None), Field::Fixed(vec![2; 8])]);
    let ulb = LayoutUlb { call: layout, reply: vec![], maxima: vec![], max_reply: 64 };
    let mut items = Vec::new();
    ulb.call_ddp_items(&call, &mut items);
    assert!(items.is_empty());
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Long);
    assert!(sent.marshaled.reads().iter().all(|r| r.position == 0), "only the Position-Zero chunk");
    assert_eq!(receive_call(&mut sent), call);
    // A small one goes whole, the FALSE word inline.
    let (call, layout) = build(8, &[Field::Fixed(vec![1; 8]), Field::OptFixed(None), Field::Fixed(vec![2; 8])]);
    let ulb = LayoutUlb { call: layout, reply: vec![], maxima: vec![], max_reply: 64 };
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Short);
    assert!(sent.marshaled.reads().is_empty());
    assert_eq!(&sent.send[sent.marshaled.header_len()..][12..16], be(0));
    assert_eq!(receive_call(&mut sent), call);

    // A reply whose optional result is absent: the Write chunk provided for
    // it returns nothing, the FALSE word stays inline.
    let call = write_call(40, 0, 0).0;
    let ulb = LayoutUlb {
        call: vec![],
        reply: vec![Kind::Fixed(4), Kind::Fixed(8), Kind::OptOpaque, Kind::Fixed(4)],
        maxima: vec![3000],
        max_reply: 512,
    };
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1000).unwrap();
    let (reply, _) =
        build(xid_of(&call), &[Field::Fixed(vec![1; 8]), Field::OptOpaque(None), Field::Fixed(vec![2; 4])]);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    assert!(marshaled.writes().is_empty());
    assert_eq!(marshaled.reduced_results(), 0);
    let (rmsg, rhlen) = RdmaMsg::decode(&send).unwrap();
    let chunks: Vec<Vec<u32>> = lists(&rmsg).1.iter().map(seg_lengths).collect();
    assert_eq!(chunks, [vec![0, 0, 0]]);
    assert_eq!(&send[rhlen..], reply);
    assert_eq!(&send[rhlen + 12..rhlen + 16], be(0));
    assert_eq!(receive_reply(&sent, &send, &ulb), reply);
}

#[test]
fn read_chunk_segments_share_position_and_may_be_unaligned_rfc8166_3_4_5() {
    let (call, ulb) = write_call(40, 3001, 0);
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1000).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Chunked);
    let lens: Vec<u32> = sent.marshaled.reads().iter().map(|r| r.target.length).collect();
    assert_eq!(lens, [1000, 1000, 1000, 1]);
    assert!(sent.marshaled.reads().iter().all(|r| r.position == 44));
    assert_eq!(receive_call(&mut sent), call);
}

#[test]
fn gather_rule_whole_send_fits_peer_threshold() {
    let thresholds = InlineThresholds { call: 1024, reply: 1024 };
    let header = 28; // RDMA_MSG, no chunks
                     // The payload alone fits, but not with the header: not Short.
    let (call, ulb) = write_call(40, 900, 1024 - header - 944 + 4);
    assert_eq!(call.len(), 1024 - header + 4);
    assert!(call.len() <= 1024);
    let sent = send_call(&call, &ulb, thresholds, 1 << 30).unwrap();
    assert_ne!(sent.marshaled.form(), CallForm::Short);
    assert!(sent.send.len() <= 1024);
    // Exactly at the threshold, header included: Short.
    let (call, ulb) = write_call(40, 900, 1024 - header - 944);
    assert_eq!(header + call.len(), 1024);
    let sent = send_call(&call, &ulb, thresholds, 1 << 30).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Short);
    assert_eq!(sent.send.len(), 1024);
    // A Chunked call whose read segments make the header too large goes Long,
    // and the Read chunk registrations are released.
    let (call, ulb) = write_call(40, 1200, 800);
    let sent = send_call(&call, &ulb, thresholds, 64).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Long);
    assert!(sent.send.len() <= 1024);
    assert_eq!(sent.reg.released, [ChunkPurpose::Read { offset: 44, len: 1200 }]);
}

#[test]
fn long_call_uses_position_zero_read_chunk() {
    // No DDP-eligible argument and too large to send inline.
    let (call, mut ulb) = write_call(2000, 10, 0);
    ulb.call_opaque = None;
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 512).unwrap();
    assert_eq!(sent.marshaled.form(), CallForm::Long);
    let (msg, hlen) = RdmaMsg::decode(&sent.send).unwrap();
    assert!(is_nomsg(&msg));
    assert_eq!(hlen, sent.send.len(), "nothing inline");
    let (reads, _, _) = lists(&msg);
    assert_eq!(reads.len(), 4);
    assert!(reads.iter().all(|r| r.position == 0));
    assert_eq!(fetch_len(reads), call.len() as u64, "the whole message, padding included");
    assert_eq!(sent.registered_purposes(), [ChunkPurpose::PositionZero { len: call.len() }]);
    assert_eq!(receive_call(&mut sent), call);
}

#[test]
fn reply_chunk_provisioned_when_reply_may_exceed_own_threshold_rfc8166_3_5_3() {
    let call = write_call(40, 0, 0).0;
    let ulb = |max_reply| OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply };
    let thresholds = InlineThresholds { call: 1024, reply: 1024 };
    // A reply header is 28 bytes without chunks: 996 bytes of reply fit.
    let sent = send_call(&call, &ulb(996), thresholds, 1 << 30).unwrap();
    assert!(sent.marshaled.reply_chunk().is_none());
    let sent = send_call(&call, &ulb(997), thresholds, 1 << 30).unwrap();
    let chunk = sent.marshaled.reply_chunk().expect("a Reply chunk");
    assert_eq!(chunk.iter().map(|s| s.length).sum::<u32>(), 1000, "sized for the largest reply, rounded up");
    let (msg, _) = RdmaMsg::decode(&sent.send).unwrap();
    assert!(lists(&msg).2.is_some());

    // A reply that exceeds the threshold then goes in the Reply chunk ...
    let mut sent = send_call(&call, &ulb(4096), thresholds, 1 << 30).unwrap();
    let reply = read_reply(xid_of(&call), 2000, 0, 0);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb(4096), 1024).unwrap();
    assert_eq!(marshaled.form(), ReplyForm::ReplyChunk);
    let (rmsg, rhlen) = RdmaMsg::decode(&send).unwrap();
    assert!(is_nomsg(&rmsg) && rhlen == send.len());
    assert_eq!(lists(&rmsg).2.map(chunk_total), Some(reply.len() as u64));
    assert_eq!(receive_reply(&sent, &send, &ulb(4096)), reply);

    // ... and one that fits goes inline, the Reply chunk copied unused (draft 5.3.3).
    let reply = read_reply(xid_of(&call), 100, 0, 0);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb(4096), 1024).unwrap();
    assert_eq!(marshaled.form(), ReplyForm::Inline);
    let (rmsg, _) = RdmaMsg::decode(&send).unwrap();
    let copied = lists(&rmsg).2.unwrap();
    assert_eq!(copied.target.len(), sent.marshaled.reply_chunk().unwrap().len());
    assert_eq!(chunk_total(copied), 0);
    assert_eq!(receive_reply(&sent, &send, &ulb(4096)), reply);
}

#[test]
fn reply_header_that_cannot_fit_own_threshold_is_refused() {
    let call = write_call(40, 0, 0).0;
    let ulb = LayoutUlb { call: vec![], reply: vec![], maxima: vec![8192; 4], max_reply: 4096 };
    let err = send_call(&call, &ulb, InlineThresholds { call: 4096, reply: 200 }, 100).err().unwrap();
    assert!(matches!(err, CallError::ReplyHeaderExceedsThreshold { threshold: 200, .. }), "{err}");
}

/// One call with the given Write chunk maxima (NFS-READ-like reply at 24).
fn read_call(maxima: Vec<usize>, max_seg: usize) -> (SentCall, LayoutUlb) {
    let call = write_call(40, 0, 0).0;
    let ulb = LayoutUlb {
        call: vec![],
        reply: vec![Kind::Fixed(24), Kind::Opaque, Kind::Fixed(8), Kind::Opaque],
        maxima,
        max_reply: 512,
    };
    let sent = send_call(&call, &ulb, InlineThresholds::default(), max_seg).unwrap();
    (sent, ulb)
}

/// A reply matching `read_call`'s layout with results of `a` and `b` bytes.
fn two_result_reply(xid: u32, a: usize, b: usize) -> Vec<u8> {
    let (mut m, _) = build(
        xid,
        &[
            Field::Fixed(vec![9; 20]),
            Field::Opaque(vec![0xAB; a]),
            Field::Fixed(vec![8; 8]),
            Field::Opaque(vec![0xCD; b]),
        ],
    );
    m[..4].copy_from_slice(&xid.to_be_bytes());
    m
}

#[test]
fn responder_never_writes_padding_into_write_chunk_rfc8166_3_4_6_2() {
    // The Requester made room for padding (4100 bytes); the result is 4097.
    let (mut sent, ulb) = read_call(vec![4100, 4100], 1 << 30);
    let xid = xid_of(&sent.reg.call);
    let reply = two_result_reply(xid, 4097, 5);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    let written: Vec<usize> = marshaled.writes().iter().map(|w| w.src.len()).collect();
    assert_eq!(written, [4097, 5], "data only, no padding");
    let (rmsg, _) = RdmaMsg::decode(&send).unwrap();
    let totals: Vec<u64> = lists(&rmsg).1.iter().map(chunk_total).collect();
    assert_eq!(totals, [4097, 5], "returned length = the result's encoded length");
    // The Requester's buffer past the data is untouched (still 0xA5).
    let buf = sent.reg.mem.buffer(sent.marshaled.writes().chunk(0));
    assert_eq!(&buf[4097..4100], [0xA5; 3]);
    // Reassembly restores zero padding.
    let back = receive_reply(&sent, &send, &ulb);
    assert_eq!(&back[28 + 4097..28 + 4100], [0, 0, 0]);
    assert_eq!(back, reply);
}

#[test]
fn unused_write_chunk_is_all_zero_lengths() {
    // Three chunks, two of them multi-segment; the reply has two results,
    // then a reply with none (an error reply, say).
    let (mut sent, ulb) = read_call(vec![3000, 3000, 3000], 1024);
    let xid = xid_of(&sent.reg.call);
    let reply = two_result_reply(xid, 10, 2500);
    let (send, _) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    let (rmsg, _) = RdmaMsg::decode(&send).unwrap();
    let chunks: Vec<Vec<u32>> = lists(&rmsg).1.iter().map(seg_lengths).collect();
    assert_eq!(chunks, [vec![10, 0, 0], vec![1024, 1024, 452], vec![0, 0, 0]]);
    assert_eq!(receive_reply(&sent, &send, &ulb), reply);

    let short = read_reply(xid, 16, 0, 0)[..20].to_vec();
    let ulb_none = LayoutUlb { reply: vec![Kind::Fixed(20)], ..ulb.clone() };
    let (send, marshaled) = send_reply(&mut sent, &short, &ulb_none, 1024).unwrap();
    assert!(marshaled.writes().is_empty());
    let (rmsg, _) = RdmaMsg::decode(&send).unwrap();
    let chunks: Vec<Vec<u32>> = lists(&rmsg).1.iter().map(seg_lengths).collect();
    assert_eq!(chunks, [vec![0; 3], vec![0; 3], vec![0; 3]]);
    assert_eq!(receive_reply(&sent, &send, &ulb_none), short);
}

#[test]
fn reply_copies_write_list_segment_counts() {
    let (mut sent, ulb) = read_call(vec![5000, 700], 1000);
    let xid = xid_of(&sent.reg.call);
    let reply = two_result_reply(xid, 1, 0);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    let (rmsg, _) = RdmaMsg::decode(&send).unwrap();
    let returned: Vec<Vec<XdrRdmaSegment>> = lists(&rmsg).1.iter().map(|c| c.target.iter().collect()).collect();
    let provided: Vec<&[XdrRdmaSegment]> = sent.marshaled.writes().iter().collect();
    assert_eq!(returned.len(), provided.len());
    for (r, p) in returned.iter().zip(&provided) {
        assert_eq!(r.len(), p.len(), "segment count unchanged");
        for (rs, ps) in r.iter().zip(p.iter()) {
            assert_eq!((rs.handle, rs.offset), (ps.handle, ps.offset), "handle and offset unchanged");
        }
    }
    assert_eq!(returned[0].iter().map(|s| s.length).collect::<Vec<_>>(), [1, 0, 0, 0, 0]);
    assert_eq!(returned[1].iter().map(|s| s.length).collect::<Vec<_>>(), [0]);
    assert_eq!(marshaled.write_list().len(), 2);
    assert_eq!(receive_reply(&sent, &send, &ulb), reply);
}

#[test]
fn write_chunk_too_small_is_err_chunk() {
    let (mut sent, ulb) = read_call(vec![4096], 1 << 30);
    let xid = xid_of(&sent.reg.call);
    let reply = two_result_reply(xid, 4097, 0);
    let err = send_reply(&mut sent, &reply, &ulb, 1024).err().unwrap();
    assert_eq!(err, ReplyError::WriteChunkTooSmall { chunk: 0, need: 4097, have: 4096 });
    assert_eq!(err.errcode(), Some(RpcRdmaErrcode::ErrChunk));
    // The caller turns it into RDMA_ERROR / ERR_CHUNK.
    let (call_hdr, _) = RdmaMsg::decode(&sent.send).unwrap();
    let error = RdmaMsg {
        rdma_xid: call_hdr.rdma_xid,
        rdma_vers: call_hdr.rdma_vers,
        rdma_credit: 8,
        rdma_body: RdmaBody::RdmaError(RpcRdmaError::ErrChunk),
    };
    assert_eq!(error.to_vec().unwrap().len(), 20);
}

#[test]
fn reply_chunk_too_small_or_missing_is_err_chunk() {
    // max_reply promised 512 but the reply is larger: no Reply chunk at all
    // (512 + 28 <= 1024) ...
    let (mut sent, ulb) = read_call(vec![], 1 << 30);
    let ulb = LayoutUlb { reply: vec![], ..ulb };
    let reply = read_reply(xid_of(&sent.reg.call), 2000, 0, 0);
    let err = send_reply(&mut sent, &reply, &ulb, 1024).err().unwrap();
    assert!(matches!(err, ReplyError::NoReplyChunk { .. }), "{err}");
    assert_eq!(err.errcode(), Some(RpcRdmaErrcode::ErrChunk));
    // ... or one too small.
    let call = write_call(40, 0, 0).0;
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1500 };
    let mut sent = send_call(&call, &ulb, InlineThresholds::default(), 1 << 30).unwrap();
    let err = send_reply(&mut sent, &reply, &ulb, 1024).err().unwrap();
    assert_eq!(err, ReplyError::ReplyChunkTooSmall { need: reply.len(), have: 1500 });
    assert_eq!(err.errcode(), Some(RpcRdmaErrcode::ErrChunk));
}

#[test]
fn results_beyond_the_write_list_stay_inline() {
    // One Write chunk, two results: the second stays in the Payload stream.
    let (mut sent, ulb) = read_call(vec![100], 1 << 30);
    let reply = two_result_reply(xid_of(&sent.reg.call), 7, 9);
    let (send, marshaled) = send_reply(&mut sent, &reply, &ulb, 1024).unwrap();
    assert_eq!(marshaled.reduced_results(), 1);
    assert_eq!(marshaled.inline_len(), reply.len() - 8);
    assert_eq!(receive_reply(&sent, &send, &ulb), reply);
}

// ---- reassembly refuses what does not add up -------------------------------

fn msg_with_reads<'a>(nomsg: bool, reads: &'a [XdrReadChunk]) -> RdmaMsg<'a> {
    let lists = (List::from_slice(reads), List::default(), None);
    let rdma_body = if nomsg {
        RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads: lists.0, rdma_writes: lists.1, rdma_reply: lists.2 })
    } else {
        RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads: lists.0, rdma_writes: lists.1, rdma_reply: lists.2 })
    };
    RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 1, rdma_body }
}

fn rc(position: u32, length: u32) -> XdrReadChunk {
    XdrReadChunk { position, target: XdrRdmaSegment { handle: 1, length, offset: 0 } }
}

#[test]
fn reassembly_rejects_inconsistent_read_lists() {
    let mut out = Vec::new();
    let inline = [0u8; 16];
    let landing = [7u8; 64];
    let err = |nomsg, reads: &[XdrReadChunk], landing: &[u8]| {
        reassemble_call(&msg_with_reads(nomsg, reads), &inline, landing, &mut Vec::new()).unwrap_err()
    };
    assert_eq!(err(false, &[rc(6, 4)], &landing), ReassemblyError::PositionMisaligned { position: 6 });
    assert_eq!(err(false, &[rc(20, 4)], &landing), ReassemblyError::PositionBeyondPayload { position: 20, end: 16 });
    assert_eq!(err(false, &[rc(8, 5), rc(4, 4)], &landing), ReassemblyError::OutOfOrder { position: 4, placed: 16 });
    assert_eq!(err(false, &[rc(8, 65)], &landing), ReassemblyError::LandingTooShort { need: 65, have: 64 });
    assert_eq!(err(true, &[rc(8, 4)], &landing), ReassemblyError::NoPositionZeroChunk);
    // At the very end of the payload is fine; padding restored.
    reassemble_call(&msg_with_reads(false, &[rc(16, 5)]), &inline, &landing, &mut out).unwrap();
    assert_eq!(out.len(), 24);
    assert_eq!(&out[16..], [7, 7, 7, 7, 7, 0, 0, 0]);
    // A Requester that included the padding (3.4.5.2 allows it) is handled too.
    reassemble_call(&msg_with_reads(false, &[rc(16, 8)]), &inline, &landing, &mut out).unwrap();
    assert_eq!(out.len(), 24);
    // Long call with a further Read chunk inside the Position-Zero stream.
    let reads = [rc(0, 8), rc(0, 4), rc(4, 3)];
    reassemble_call(&msg_with_reads(true, &reads), &[], &(0u8..15).collect::<Vec<_>>(), &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 3, 12, 13, 14, 0, 4, 5, 6, 7, 8, 9, 10, 11]);
}

#[test]
fn reassembly_rejects_write_chunk_length_mismatch_rfc8166_3_4_6_2() {
    let seg = [XdrRdmaSegment { handle: 1, length: 6, offset: 0 }];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
    let reduced = [0u8, 0, 0, 1, 0, 0, 0, 5];
    let buf = [1u8; 8];
    let items = [DdpItem::new(8, 5)];
    let mut out = Vec::new();
    let e = reassemble_reply(&reduced, List::from_slice(&writes), &items, &[&buf[..]], &mut out).unwrap_err();
    assert_eq!(e, ReassemblyError::WriteChunkLengthMismatch { chunk: 0, returned: 6, result: 5 });
    let e = reassemble_reply(&reduced, List::from_slice(&writes), &[], &[&buf[..]], &mut out).unwrap_err();
    assert_eq!(e, ReassemblyError::UnclaimedWriteChunk { chunk: 0, returned: 6 });
    let items = [DdpItem::new(8, 6)];
    let e = reassemble_reply(&reduced, List::from_slice(&writes), &items, &[], &mut out).unwrap_err();
    assert_eq!(e, ReassemblyError::WriteBufferTooShort { chunk: 0, need: 6, have: 0 });
    reassemble_reply(&reduced, List::from_slice(&writes), &items, &[&buf[..]], &mut out).unwrap();
    assert_eq!(out, [0, 0, 0, 1, 0, 0, 0, 5, 1, 1, 1, 1, 1, 1, 0, 0]);
}

#[test]
fn marshal_call_rejects_bad_items_and_releases_registrations() {
    let (call, _) = write_call(40, 100, 0);
    let items = [DdpItem::new(44, 100), DdpItem::new(46, 4)];
    let req = CallRequest {
        credits: 1,
        thresholds: InlineThresholds::default(),
        ddp_args: &items,
        ddp_result_maxima: &[],
        max_reply: 0,
    };
    let mut reg = TestRegistrar::new(&call, 1 << 30);
    let mut out = MarshaledCall::new();
    let err = marshal_call(&call, &req, &mut reg, &mut [0u8; 1024], &mut out).unwrap_err();
    assert!(matches!(err, CallError::Items(ItemError::Misaligned { index: 1, offset: 46 })), "{err}");
    // A failure after registering gives everything back.
    let req = CallRequest { ddp_result_maxima: &[100, 200], max_reply: 5000, ddp_args: &[], ..req };
    let err = marshal_call(&call, &req, &mut reg, &mut [0u8; 20], &mut out).unwrap_err();
    assert!(matches!(err, CallError::HeaderBufferTooSmall { have: 20, .. }), "{err}");
    assert_eq!(reg.registered, reg.released);
    assert_eq!(out, MarshaledCall::new());
    let err = marshal_call(&call[..5], &req, &mut reg, &mut [0u8; 1024], &mut out).unwrap_err();
    assert!(matches!(err, CallError::NotXdr { len: 5 }));
}

/// RFC 8166 section 3.5.3: a Reply chunk's segment addresses are the requester's; one whose
/// offset and length run past 2^64 is the requester's to get wrong (its RDMA Write fails at the
/// requester's end, as for any address outside its registration), never a panic of the
/// responder's marshaling: the Writes' offsets follow the segment as the hardware's addresses
/// would, wrapping. Before: `at += n` overflowed (a panic in debug builds) for a payload split
/// across the segment's end.
#[test]
fn a_reply_chunk_segment_past_the_end_of_the_address_space_marshals_without_overflow() {
    let offset = u64::MAX - 99;
    let segments = [XdrRdmaSegment { handle: 7, length: 300, offset }];
    let chunk = XdrWriteChunk { target: Seq::from_slice(&segments) };
    let mut out = MarshaledReply::default();
    // Two pieces of payload, so that the second Write starts past the first's end.
    rpcrdma_v1::marshal_reply::encode_reply_chunk(&mut out, chunk, Some(&[0..200, 300..400]))
        .expect("the chunk holds 300 bytes");
    let writes: Vec<(u64, std::ops::Range<usize>)> = out.writes().iter().map(|w| (w.offset, w.src.clone())).collect();
    assert_eq!(writes, [(offset, 0..200), (offset.wrapping_add(200), 300..400)]);
    assert_eq!(out.reply_chunk().map(|s| s[0].length), Some(300), "every byte written");
}
