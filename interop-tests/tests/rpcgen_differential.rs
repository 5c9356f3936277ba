//! Differential test of OUR generated v1 codec (`rpcrdma_v1::xdr`) against
//! the rpcgen + libtirpc oracle, both generated from the same XDR (the one our
//! extractor pulls out of `specs/rfc5666bis-draft-rpcrdma-v1.txt`; checked by
//! [`the_oracle_is_built_from_the_xdr_our_codec_came_from`]).
//!
//! - [`random_headers_agree_with_rpcgen`]: 10,000 seeded random headers (every
//!   procedure, chunk lists up to Linux's 16-segment cap, zero-segment chunks,
//!   full-range and edge values).  For each: our encoding equals rpcgen's
//!   encoding of the same canonical text, rpcgen decodes our bytes to that
//!   text, and we decode rpcgen's bytes to the model, consuming all of them.
//!   `RPCGEN_DIFF_SEED` (decimal or `0x` hex) and `RPCGEN_DIFF_CASES` override
//!   the seed and the number of headers; a failure prints both.
//! - [`malformed_inputs_are_rejected_alike`]: truncations, unknown procedure and
//!   error codes, hostile counts and non-0/1 booleans, fed to both decoders.
//!
//! Without rpcgen/libtirpc the oracle tests print a SKIP line and pass, except
//! under `CI=true` (`Harness::v1_or_skip`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use interop_tests::oracle::{build_rpcgen_harness, canonical_from_ours, Harness};
use interop_tests::v1_model::{BodyModel, ChunksModel, HeaderModel};
use interop_tests::{hex, V1_XDR};
use rpcrdma_v1::rt::{Error, Xdr};
use rpcrdma_v1::xdr::{RdmaMsg, XdrRdmaSegment, XdrReadChunk};

/// The default seed: fixed, so every run checks the same headers.
const DEFAULT_SEED: u64 = 0x8166_5666_0001_0001;
/// Headers checked by default.
const DEFAULT_CASES: usize = 10_000;
/// Linux's cap on the segments one header may carry (all lists together).
const MAX_SEGMENTS: usize = 16;
/// Most entries in a read list / chunks in a write list.
const MAX_LIST: usize = 16;

fn scratch() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

// ---------------------------------------------------------------------------
// A seeded generator (SplitMix64: tiny, no dependency, reproducible).
// ---------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn upto(&mut self, max: usize) -> usize {
        (self.next() % (max as u64 + 1)) as usize
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }

    /// Full range, with the edges 0 and MAX (and small values) often.
    fn u32(&mut self) -> u32 {
        match self.next() % 8 {
            0 => 0,
            1 => u32::MAX,
            2 => self.upto(16) as u32,
            _ => self.next() as u32,
        }
    }

    /// Full range, with the edges 0, MAX and the 32-bit boundary often.
    fn u64(&mut self) -> u64 {
        match self.next() % 10 {
            0 => 0,
            1 => u64::MAX,
            2 => u64::from(u32::MAX),
            3 => u64::from(u32::MAX) + 1,
            4 => self.upto(16) as u64,
            _ => self.next(),
        }
    }

    fn segment(&mut self) -> XdrRdmaSegment {
        XdrRdmaSegment { handle: self.u32(), length: self.u32(), offset: self.u64() }
    }

    /// Chunk lists with at most [`MAX_SEGMENTS`] segments in all.
    fn chunks(&mut self) -> ChunksModel {
        let total = self.upto(MAX_SEGMENTS);
        let reply_present = self.chance(2);
        // Where the segments go: spread over the lists, or all into one of
        // them (so 16-entry read lists and 16-segment chunks turn up).
        let (mut n_reads, mut n_writes, mut n_reply) = (0, 0, 0);
        match self.next() % 8 {
            0 => n_reads = total,
            1 => n_writes = total,
            2 if reply_present => n_reply = total,
            _ => {
                for _ in 0..total {
                    match self.next() % 3 {
                        0 => n_reads += 1,
                        2 if reply_present => n_reply += 1,
                        _ => n_writes += 1,
                    }
                }
            }
        }
        // Write chunks: at least one to hold the segments, up to MAX_LIST;
        // segments land at random, so zero-segment chunks are common.
        let n_chunks = if self.chance(4) { usize::from(n_writes > 0) } else { self.upto(MAX_LIST).max(1) };
        let mut writes = vec![Vec::new(); n_chunks];
        for _ in 0..n_writes {
            let k = self.upto(n_chunks - 1);
            let seg = self.segment();
            writes[k].push(seg);
        }
        ChunksModel {
            reads: (0..n_reads).map(|_| XdrReadChunk { position: self.u32(), target: self.segment() }).collect(),
            writes,
            reply: reply_present.then(|| (0..n_reply).map(|_| self.segment()).collect()),
        }
    }

    fn header(&mut self) -> HeaderModel {
        let body = match self.next() % 6 {
            0 => BodyModel::Msg(self.chunks()),
            1 => BodyModel::Nomsg(self.chunks()),
            2 => BodyModel::Msgp { align: self.u32(), thresh: self.u32(), chunks: self.chunks() },
            3 => BodyModel::Done,
            4 => BodyModel::ErrVers { low: self.u32(), high: self.u32() },
            _ => BodyModel::ErrChunk,
        };
        let vers = if self.chance(2) { 1 } else { self.u32() };
        HeaderModel { xid: self.u32(), vers, credit: self.u32(), body }
    }
}

fn env_or<T>(name: &str, default: T, parse: impl Fn(&str) -> Option<T>) -> T {
    match std::env::var(name) {
        Ok(v) => parse(v.trim()).unwrap_or_else(|| panic!("{name}={v:?}: not a number")),
        Err(_) => default,
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16).ok(),
        None => s.replace('_', "").parse().ok(),
    }
}

// ---------------------------------------------------------------------------
// Pipelined oracle traffic.
// ---------------------------------------------------------------------------

/// Sends every request line to a fresh harness process at once (a writer
/// thread, so neither pipe can fill up and stall the other side), reads one
/// reply line per request, and returns `Ok(text after "OK ")` or
/// `Err(text after "ERR ")` for each, in order.
///
/// `Harness` speaks one request per round trip; this pipelines the same line
/// protocol through the executable `build_rpcgen_harness` produces.
fn oracle_batch(exe: &Path, requests: &[String]) -> Vec<Result<String, String>> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut text = String::with_capacity(requests.iter().map(|r| r.len() + 1).sum());
    for r in requests {
        assert!(!r.contains('\n'), "a request is one line: {r:?}");
        text.push_str(r);
        text.push('\n');
    }
    let writer = std::thread::spawn(move || {
        // Dropping stdin at the end is the harness's EOF: it exits.
        stdin.write_all(text.as_bytes())
    });
    let mut replies = Vec::with_capacity(requests.len());
    for line in stdout.lines() {
        let line = line.expect("reading the harness's replies");
        replies.push(if let Some(ok) = line.strip_prefix("OK ") {
            Ok(ok.to_string())
        } else if let Some(err) = line.strip_prefix("ERR ") {
            Err(err.to_string())
        } else {
            panic!("rpcgen harness: unexpected reply {line:?}")
        });
    }
    let written = writer.join().expect("writer thread");
    let status = child.wait().expect("waiting for the harness");
    assert!(status.success(), "rpcgen harness exited with {status}");
    assert_eq!(replies.len(), requests.len(), "the harness answered {} of {} requests", replies.len(), requests.len());
    written.expect("writing requests to the harness");
    replies
}

/// The harness executable, built in `dir` from [`V1_XDR`] once the oracle
/// is known to be installed (which `Harness::v1_or_skip` decides).
fn pipelined_exe(dir: &Path) -> PathBuf {
    build_rpcgen_harness(V1_XDR, dir).unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

/// The C oracle is built from `interop_tests::V1_XDR` (`Harness::build_v1`,
/// and [`pipelined_exe`] here), which interop-tests/build.rs obtains with
/// `xdr_spec::pipeline::spec_to_xdr` from the spec text and its errata; our
/// codec's types are generated by `spec_to_rust` from the same files, and
/// `rpcrdma_v1::XDR` is the XDR they were generated from.  The two must be the
/// same text, so that the oracle and our codec implement one definition.
#[test]
fn the_oracle_is_built_from_the_xdr_our_codec_came_from() {
    assert_eq!(V1_XDR, rpcrdma_v1::XDR);
    for needle in ["struct rdma_msg", "union rdma_body", "struct xdr_write_chunk", "typedef unsigned hyper uint64"] {
        assert!(V1_XDR.contains(needle), "V1_XDR lacks {needle:?}");
    }
}

/// What the random headers covered (checked after a full run, so a change to
/// the generator cannot quietly stop exercising a shape).
#[derive(Default, Debug)]
struct Coverage {
    bodies: [usize; 6],
    max_reads: usize,
    max_write_chunks: usize,
    zero_segment_write_chunks: usize,
    reply_none: usize,
    reply_empty: usize,
    max_reply: usize,
    max_segments: usize,
    max_u32: usize,
    max_u64: usize,
}

impl Coverage {
    fn add(&mut self, m: &HeaderModel) {
        let i = match m.body {
            BodyModel::Msg(_) => 0,
            BodyModel::Nomsg(_) => 1,
            BodyModel::Msgp { .. } => 2,
            BodyModel::Done => 3,
            BodyModel::ErrVers { .. } => 4,
            BodyModel::ErrChunk => 5,
        };
        self.bodies[i] += 1;
        if let Some(c) = m.chunks() {
            self.max_reads = self.max_reads.max(c.reads.len());
            self.max_write_chunks = self.max_write_chunks.max(c.writes.len());
            self.zero_segment_write_chunks += c.writes.iter().filter(|w| w.is_empty()).count();
            match &c.reply {
                None => self.reply_none += 1,
                Some(r) if r.is_empty() => self.reply_empty += 1,
                Some(r) => self.max_reply = self.max_reply.max(r.len()),
            }
            self.max_segments = self.max_segments.max(c.segments());
            let segs = c.reads.iter().map(|r| r.target).chain(c.writes.iter().flatten().copied());
            for s in segs.chain(c.reply.iter().flatten().copied()) {
                self.max_u32 += usize::from(s.handle == u32::MAX || s.length == u32::MAX);
                self.max_u64 += usize::from(s.offset == u64::MAX);
            }
        }
    }
}

#[test]
fn random_headers_agree_with_rpcgen() {
    let Some(mut one_by_one) = Harness::v1_or_skip(scratch()) else { return };
    let seed = env_or("RPCGEN_DIFF_SEED", DEFAULT_SEED, parse_u64);
    let cases = env_or("RPCGEN_DIFF_CASES", DEFAULT_CASES, |s| s.parse().ok());
    println!("rpcgen differential: seed {seed:#x}, {cases} headers (RPCGEN_DIFF_SEED / RPCGEN_DIFF_CASES to change)");

    // Generate, and encode with OUR encoder (bytes A).
    let start = Instant::now();
    let mut rng = Rng(seed);
    let mut coverage = Coverage::default();
    let mut models = Vec::with_capacity(cases);
    let mut ours = Vec::with_capacity(cases);
    let mut trailers = Vec::with_capacity(cases);
    for _ in 0..cases {
        let m = rng.header();
        assert!(m.chunks().map_or(0, ChunksModel::segments) <= MAX_SEGMENTS);
        coverage.add(&m);
        let a = m.with_msg(|msg| {
            let mut buf = vec![0u8; msg.encoded_len()];
            let n = msg.encode(&mut buf).expect("our encoder refused a header");
            assert_eq!(n, buf.len(), "encode wrote other than encoded_len() bytes");
            buf
        });
        // Some bytes after the header (the RPC message, on the wire), which
        // both decoders must leave alone.
        let trailer: Vec<u8> = (0..rng.upto(8)).map(|_| rng.next() as u8).collect();
        models.push(m);
        ours.push(a);
        trailers.push(trailer);
    }
    let generated = start.elapsed();

    // One pipelined batch: for each header, rpcgen encodes its canonical
    // text (bytes B) and decodes A (+ trailer), saying how much it took.
    let dir = scratch().join(format!("rpcgen-differential-{}", std::process::id()));
    let exe = pipelined_exe(&dir);
    let t_oracle = Instant::now();
    let texts: Vec<String> = models.iter().map(HeaderModel::canonical).collect();
    let mut requests = Vec::with_capacity(2 * cases);
    for i in 0..cases {
        requests.push(format!("E {}", texts[i]));
        let mut a = ours[i].clone();
        a.extend_from_slice(&trailers[i]);
        requests.push(format!("P {}", hex(&a)));
    }
    let replies = oracle_batch(&exe, &requests);
    let oracle_took = t_oracle.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    // The pipelined replies are the ones `Harness` gets a request at a time.
    for i in 0..cases.min(20) {
        assert_eq!(one_by_one.encode(&texts[i]).map(|b| hex(&b)), replies[2 * i], "case {i}");
    }

    // Compare.
    let t_cmp = Instant::now();
    let mut failures = Vec::new();
    for i in 0..cases {
        let (m, t, a) = (&models[i], &texts[i], &ours[i]);
        let mut problems = Vec::new();
        // 1. A == B.
        let b = match &replies[2 * i] {
            Ok(h) => interop_tests::unhex(h).expect("harness hex"),
            Err(e) => {
                problems.push(format!("rpcgen refused to encode T: {e}"));
                Vec::new()
            }
        };
        if !b.is_empty() && *a != b {
            problems.push(format!("ours A != rpcgen B\n    A = {}\n    B = {}", hex(a), hex(&b)));
        }
        // 2. rpcgen decodes A (+ trailer) to T, taking exactly A.
        match &replies[2 * i + 1] {
            Ok(r) => match r.split_once(' ') {
                Some((n, t2)) => {
                    if t2 != t {
                        problems.push(format!("rpcgen decoded A to T' != T\n    T' = {t2}"));
                    }
                    if n.parse::<usize>().ok() != Some(a.len()) {
                        problems.push(format!("rpcgen took {n} bytes of A ({} bytes)", a.len()));
                    }
                }
                None => problems.push(format!("bad P reply {r:?}")),
            },
            Err(e) => problems.push(format!("rpcgen refused to decode A: {e}")),
        }
        // 3. We decode B (alone, and followed by the trailer) to the model.
        if !b.is_empty() {
            let mut b_trailer = b.clone();
            b_trailer.extend_from_slice(&trailers[i]);
            for (what, input) in [("B", &b), ("B + trailer", &b_trailer)] {
                match RdmaMsg::decode(input) {
                    Ok((d, n)) => {
                        let t3 = canonical_from_ours(&d);
                        if t3 != *t {
                            problems.push(format!("we decoded {what} to {t3}"));
                        }
                        if HeaderModel::from_ours(&d) != *m {
                            problems.push(format!("we decoded {what} to a value other than the model: {d:?}"));
                        }
                        if n != b.len() {
                            problems.push(format!("we took {n} bytes of {what} ({} bytes of header)", b.len()));
                        }
                    }
                    Err(e) => problems.push(format!("we refused to decode {what}: {e}")),
                }
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "case {i} (seed {seed:#x}):\n  model {m:?}\n  T = {t}\n  A = {}\n  trailer = {}\n  {}",
                hex(a),
                hex(&trailers[i]),
                problems.join("\n  ")
            ));
        }
    }
    let compared = t_cmp.elapsed();
    let bytes: usize = ours.iter().map(Vec::len).sum();
    println!(
        "{cases} headers ({bytes} bytes, {} oracle requests): generate+encode {generated:?}, \
         rpcgen batch {oracle_took:?}, compare {compared:?}, total {:?}",
        requests.len(),
        start.elapsed()
    );
    println!("coverage: {coverage:?}");
    for f in failures.iter().take(5) {
        println!("{f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} headers differ between our codec and rpcgen (seed {seed:#x}; first ones printed above)",
        failures.len()
    );

    if cases >= DEFAULT_CASES {
        let c = &coverage;
        assert!(c.bodies.iter().all(|&n| n > 0), "{c:?}");
        assert_eq!((c.max_reads, c.max_write_chunks, c.max_reply, c.max_segments), (16, 16, 16, 16), "{c:?}");
        assert!(c.zero_segment_write_chunks > 0 && c.reply_none > 0 && c.reply_empty > 0, "{c:?}");
        assert!(c.max_u32 > 0 && c.max_u64 > 0, "{c:?}");
    }
}

/// Words to bytes, big-endian.
fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// What one decoder made of some bytes: the canonical text and length, or why not.
type Verdict = Result<(usize, String), String>;

fn ours_decode(bytes: &[u8]) -> Verdict {
    RdmaMsg::decode(bytes).map(|(m, n)| (n, canonical_from_ours(&m))).map_err(|e| format!("{e} ({e:?})"))
}

/// Malformed inputs both decoders must reject, and what each said.
struct Tally<'h> {
    h: &'h mut Harness,
    report: Vec<String>,
    rejected: usize,
}

impl Tally<'_> {
    fn both_reject(&mut self, what: &str, bytes: &[u8], log: bool) {
        let (o, c) = (ours_decode(bytes), self.h.decode_prefix(bytes));
        if log {
            self.report.push(format!("{what}: ours {o:?} | rpcgen {c:?}"));
        }
        assert!(o.is_err() && c.is_err(), "{what}: both must reject {}\n  ours {o:?}\n  rpcgen {c:?}", hex(bytes));
        self.rejected += 1;
    }
}

/// The disagreements `malformed_inputs_are_rejected_alike` found, and why.
///
/// **A boolean word other than 0 and 1** (the "more data follows" word of
/// the optional-data lists, and the reply chunk's presence word).  RFC 4506
/// section 4.4 encodes TRUE as 1 and FALSE as 0; our runtime
/// (`xdr_spec_rt::Reader::bool`) rejects anything else with
/// `Error::BadBool`.  libtirpc's `xdr_bool` decodes with
/// `*bp = (lb == XDR_FALSE) ? FALSE : TRUE`, so any non-zero word is TRUE,
/// and rpcgen's `xdr_pointer`/`xdr_reference` then decodes the element that
/// follows.  So for such a header rpcgen ACCEPTS what we reject, and reads it
/// as if the word were 1.  The test checks exactly that (whatever libtirpc
/// does, the reading must be the 1-word one or a rejection) and prints the
/// difference; ours must reject.
#[test]
fn malformed_inputs_are_rejected_alike() {
    let Some(mut h) = Harness::v1_or_skip(scratch()) else { return };
    const XID: u32 = 0x0102_0304;
    let seg = |handle, offset| XdrRdmaSegment { handle, length: 4096, offset };
    let chunked = HeaderModel {
        xid: XID,
        vers: 1,
        credit: 32,
        body: BodyModel::Msgp {
            align: 4,
            thresh: 1024,
            chunks: ChunksModel {
                reads: vec![XdrReadChunk { position: 96, target: seg(0x11, 0x1000) }],
                writes: vec![vec![seg(0x21, 0x2000), seg(0x22, 0x3000)], vec![]],
                reply: Some(vec![seg(0x31, 0x4000)]),
            },
        },
    };
    let valid: Vec<Vec<u8>> = vec![
        chunked.with_msg(|m| m.to_vec()).expect("the chunked header is in bounds"),
        words(&[XID, 1, 32, 0, 0, 0, 0]),
        words(&[XID, 1, 32, 3]),
        words(&[XID, 1, 32, 4, 1, 1, 1]),
        words(&[XID, 1, 32, 4, 2]),
    ];

    let mut t = Tally { h: &mut h, report: Vec::new(), rejected: 0 };
    // Truncated headers: every proper prefix of valid headers.
    for v in &valid {
        assert_eq!(ours_decode(v).map(|x| x.0), Ok(v.len()));
        assert_eq!(t.h.decode_prefix(v).map(|x| x.0), Ok(v.len()));
        for len in 0..v.len() {
            t.both_reject(&format!("{len}-byte prefix of {}", hex(v)), &v[..len], false);
        }
        t.report.push(format!("all {} proper prefixes of {}: both reject", v.len(), hex(v)));
    }
    // Procedures and error codes with no union arm.
    for proc in [5, 6, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
        t.both_reject(&format!("proc {proc:#x}"), &words(&[XID, 1, 32, proc, 0, 0, 0, 0, 0]), true);
    }
    for err in [0, 3, u32::MAX] {
        t.both_reject(&format!("ERR code {err:#x}"), &words(&[XID, 1, 32, 4, err, 1, 1]), true);
    }
    // Counts that cannot fit: a write chunk / reply chunk claiming 2^32-1
    // segments, a write chunk claiming 2 segments with 1 there.
    t.both_reject("2^32-1 write segments", &words(&[XID, 1, 32, 0, 0, 1, u32::MAX, 0, 0]), true);
    t.both_reject("2^32-1 reply segments", &words(&[XID, 1, 32, 0, 0, 0, 1, u32::MAX]), true);
    t.both_reject("2 write segments, 1 there", &words(&[XID, 1, 32, 0, 0, 1, 2, 1, 2, 0, 3, 0]), true);
    let Tally { mut report, rejected, .. } = t;
    let mut disagreements = 0;

    // Boolean words other than 0/1, each where 1 would make a valid header,
    // so that only the boolean's value is at issue.
    let seg_words = [0x11, 4096, 0, 0x1000];
    let mut bool_cases = Vec::new();
    for bad in [2u32, 0x8000_0000, u32::MAX] {
        // [reads more?] [position, seg]... [0]  [writes more?] ... [reply present?]
        let read_entry = [96].iter().chain(&seg_words).copied().collect::<Vec<_>>();
        let mk = |reads_first: u32, reads_next: u32, writes_first: u32, reply: u32| {
            let mut w = vec![XID, 1, 32, 0, reads_first];
            w.extend(&read_entry);
            w.push(reads_next);
            w.extend(&read_entry);
            w.push(0); // end of the read list
            w.push(writes_first);
            w.push(1); // one segment
            w.extend(&seg_words[..]);
            w.push(0); // end of the write list
            w.push(reply);
            w.push(0); // reply chunk with no segments
            words(&w)
        };
        bool_cases.push((format!("read list's first bool = {bad:#x}"), mk(bad, 1, 1, 1), mk(1, 1, 1, 1)));
        bool_cases.push((format!("read list's second bool = {bad:#x}"), mk(1, bad, 1, 1), mk(1, 1, 1, 1)));
        bool_cases.push((format!("write list's bool = {bad:#x}"), mk(1, 1, bad, 1), mk(1, 1, 1, 1)));
        bool_cases.push((format!("reply chunk's presence bool = {bad:#x}"), mk(1, 1, 1, bad), mk(1, 1, 1, 1)));
    }
    for (what, bytes, as_one) in &bool_cases {
        let (o, c) = (ours_decode(bytes), h.decode_prefix(bytes));
        let one = ours_decode(as_one).expect("the same header with 1 decodes");
        assert_eq!(h.decode_prefix(as_one).as_ref(), Ok(&one), "{what}: the 1-word header");
        assert!(matches!(RdmaMsg::decode(bytes), Err(Error::BadBool { .. })), "{what}: ours must reject: {o:?}");
        match &c {
            // rpcgen rejects too: agreement.
            Err(_) => report.push(format!("{what}: ours {o:?} | rpcgen {c:?}")),
            Ok(got) => {
                disagreements += 1;
                assert_eq!(got, &one, "{what}: rpcgen accepted, but not as if the word were 1");
                report.push(format!(
                    "DISAGREEMENT, {what}: ours rejects: {}; rpcgen reads the word as TRUE: {} bytes, {}",
                    o.unwrap_err(),
                    got.0,
                    got.1
                ));
            }
        }
    }

    for line in &report {
        println!("{line}");
    }
    println!(
        "{rejected} malformed inputs rejected by both; {} with a non-0/1 boolean, {disagreements} of them \
         accepted by rpcgen and rejected by us (see the note on this test); none accepted by us and rejected by rpcgen",
        bool_cases.len()
    );
    // Still alive.
    assert_eq!(h.decode(&valid[1]).unwrap(), "xid=16909060 vers=1 credit=32 proc=0 reads=[] writes=[] reply=none");
}
