//! The cross-version interop matrix, the workspace's main job: every combination of
//! requester {Version One only, Version Two in draft-cel-00, in draft-ietf-07, in both with -07
//! preferred} x responder {Version One only, -00, -07, both dialects} x RFC 8797 private data
//! {none, both, requester only, garbage} x transport-properties extension {none, requester
//! only, responder only, both} x message form {short, chunked read, chunked write, long call,
//! long reply, backward-direction call, and on -07 continued call and continued reply}, each cell a fresh `Server` and `Client` pair from
//! `negotiate` over one verbs backend. Each pair settles where docs/design.md's table of
//! dialects says ([`settles`]). The extension axis exists only where a pair settles on -00:
//! Version One never exchanges properties (`specs/rpcrdma2-transport-properties.txt` section
//! 2.1) and -07 states its own in CONNPROP, so the other pairs have only [`Extension::None`];
//! a pair settled on -07 has no backward-direction form (the server's backchannel speaks -00),
//! and only a pair settled on -07 continues messages across Sends (section 4.1). That makes
//! 9 pairs x 4 x 6 + 3 pairs x 4 x 4 x 6 + 4 pairs on -07 x 4 x 7: 616 cells ([`CELLS`]).
//!
//! A cell makes its form's call twice: the first settles the version (and, when the requester
//! has the extension on a Version Two connection, is followed by the properties exchange), the
//! second runs under the thresholds that exchange gave. It checks the reply bytes, the form
//! really used by each call, the negotiated version, what the exchange gave
//! ([`PeerProperties`]), both inline thresholds against what [`Stated::thresholds`] predicts
//! from the cell's configuration, and the RDMA_ERRORs the responder sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::client::{Client, ClientConfig, ClientStats};
use negotiate::connection::PeerProperties;
use negotiate::requester;
use negotiate::responder;
use negotiate::server::{Server, ServerConfig, ServerStats};
use negotiate::thresholds::{Advertised, Stated};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_v2::properties::TransportProperties;
use rpcrdma_verbs::Backend;

use crate::json::Json;

/// Which versions, and which dialects of Version Two, a side speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// Version One only.
    V1Only,
    /// Versions One and Two, Version Two as draft-cel-nfsv4-rpcrdma-version-two-00.
    V2Capable,
    /// Versions One and Two, Version Two as draft-ietf-nfsv4-rpcrdma-version-two-07 (a
    /// responder with `ResponderConfig::draft07` set and `draft00` cleared).
    Draft07,
    /// Versions One and Two in both dialects: a requester prefers -07; a responder takes the
    /// dialect of each connection's first message (`ResponderConfig::draft07`).
    BothDrafts,
}

impl Speaks {
    /// Every kind, in table order: the requesters.
    pub const ALL: [Speaks; 4] = [Speaks::V1Only, Speaks::V2Capable, Speaks::Draft07, Speaks::BothDrafts];
    /// The responders, in table order.
    pub const RESPONDERS: [Speaks; 4] = [Speaks::V1Only, Speaks::V2Capable, Speaks::Draft07, Speaks::BothDrafts];

    fn versions(self) -> (Version, Version) {
        match self {
            Speaks::V1Only => (Version::ONE, Version::ONE),
            _ => (Version::ONE, Version::TWO),
        }
    }

    /// Its Version Two dialects.
    fn version_two(self) -> VersionTwo {
        match self {
            Speaks::V1Only => VersionTwo::None,
            Speaks::V2Capable => VersionTwo::One(Dialect::Cel00),
            Speaks::Draft07 => VersionTwo::One(Dialect::Ietf07),
            Speaks::BothDrafts => VersionTwo::Both { preferred: Dialect::Ietf07 },
        }
    }

    /// Whether a responder of this kind answers Version Two in dialect `d`.
    fn answers(self, d: Dialect) -> bool {
        match self {
            Speaks::V1Only => false,
            Speaks::V2Capable => d == Dialect::Cel00,
            Speaks::Draft07 => d == Dialect::Ietf07,
            Speaks::BothDrafts => true,
        }
    }

    /// The column label.
    pub fn label(self) -> &'static str {
        match self {
            Speaks::V1Only => "v1-only",
            Speaks::V2Capable => "v2-capable",
            Speaks::Draft07 => "v2-ietf-07",
            Speaks::BothDrafts => "v2-both",
        }
    }
}

/// Where a requester and a responder settle, by docs/design.md's table of dialects: the
/// requester's first message goes in its preferred dialect; a responder that answers it
/// settles there; one that speaks the other dialect refuses it in a way that names it, and a
/// requester that speaks that one too goes on in it; everything else ends on Version One.
pub fn settles(requester: Speaks, responder: Speaks) -> (Version, Option<Dialect>) {
    let v2 = requester.version_two();
    match v2.first() {
        Some(d) if responder.answers(d) => (Version::TWO, Some(d)),
        Some(d) if v2.speaks(d.other()) && responder.answers(d.other()) => (Version::TWO, Some(d.other())),
        _ => (Version::ONE, None),
    }
}

/// Who sends RFC 8797 private data at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pdata {
    /// Neither side.
    None,
    /// Both: the requester 8192/8192 with the R flag, the responder 4096/2048 with it.
    Both,
    /// The requester only (4096/4096).
    RequesterOnly,
    /// Both sides send eight bytes that are not RFC 8797 private data.
    Garbage,
}

impl Pdata {
    fn advertised(self) -> (Option<PrivateData>, Option<PrivateData>) {
        let r = Flags::REMOTE_INVALIDATE;
        match self {
            Pdata::None | Pdata::Garbage => (None, None),
            Pdata::Both => (Some(PrivateData::new(r, 8192, 8192)), Some(PrivateData::new(r, 4096, 2048))),
            Pdata::RequesterOnly => (Some(PrivateData::new(Flags::empty(), 4096, 4096)), None),
        }
    }

    /// Every case, in table order.
    pub const ALL: [Pdata; 4] = [Pdata::None, Pdata::Both, Pdata::RequesterOnly, Pdata::Garbage];

    /// The column label.
    pub fn label(self) -> &'static str {
        match self {
            Pdata::None => "none",
            Pdata::Both => "both",
            Pdata::RequesterOnly => "requester only",
            Pdata::Garbage => "garbage",
        }
    }
}

/// Which sides have the transport-properties extension
/// (`specs/rpcrdma2-transport-properties.txt`); a side that has it states [`STATED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extension {
    /// Neither side: no exchange.
    None,
    /// The requester only: it asks, the responder answers RDMA_ERR_INVAL_OPTION and both keep
    /// what private data or the defaults give (section 2.3).
    RequesterOnly,
    /// The responder only: the requester never asks (section 2.1), nothing changes.
    ResponderOnly,
    /// Both: the exchange happens and each side's stated sizes replace its private data's
    /// (section 2.4).
    Both,
}

/// What a side with the extension states: Send and Receive sizes of 12 KiB. That is above
/// every threshold private data gives a cell (8192 at most) and at least Version Two's 4096
/// (a smaller size is ignored, section 2.4), so the exchange visibly changes the thresholds
/// where both sides have it; and it is below the 16 KiB payloads (`BIG`), so the Long and
/// chunked forms stay what they are.
pub const STATED: TransportProperties = TransportProperties {
    max_send_size: Some(12 * 1024),
    max_recv_size: Some(12 * 1024),
    remote_invalidation: None,
    backward_credits: None,
};

impl Extension {
    /// Every case, in table order.
    pub const ALL: [Extension; 4] =
        [Extension::None, Extension::RequesterOnly, Extension::ResponderOnly, Extension::Both];

    /// What the requester and the responder state (`None`: the side lacks the extension).
    fn stated(self) -> (Option<TransportProperties>, Option<TransportProperties>) {
        match self {
            Extension::None => (None, None),
            Extension::RequesterOnly => (Some(STATED), None),
            Extension::ResponderOnly => (None, Some(STATED)),
            Extension::Both => (Some(STATED), Some(STATED)),
        }
    }

    /// The column label.
    pub fn label(self) -> &'static str {
        match self {
            Extension::None => "none",
            Extension::RequesterOnly => "requester only",
            Extension::ResponderOnly => "responder only",
            Extension::Both => "both",
        }
    }
}

/// What a cell's call looks like on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A small call and reply, inline (RDMA_MSG).
    Short,
    /// A large DDP-eligible argument reduced into a Read chunk.
    ChunkedRead,
    /// A large DDP-eligible result written into a Write chunk.
    ChunkedWrite,
    /// A large call with nothing DDP-eligible: RDMA_NOMSG, position-zero Read chunk.
    LongCall,
    /// A large reply with nothing DDP-eligible: through the Reply chunk.
    LongReply,
    /// The responder calls the requester on the same connection (RFC 8167).
    Backward,
    /// -07 only: a call too large for the responder's Receive, with nothing DDP-eligible,
    /// continued across Sends (RDMA2_CALL_MIDDLE parts, draft-ietf-07 section 4.1) once the
    /// connection is settled; the first call, the probe, goes in a Call chunk.
    ContinuedCall,
    /// -07 only: a reply too large for the requester's Receive, with no Reply chunk provided,
    /// continued across Sends (RDMA2_REPLY_MIDDLE parts, section 6.6.4).
    ContinuedReply,
}

impl Form {
    /// Every form, in table order.
    pub const ALL: [Form; 8] = [
        Form::Short,
        Form::ChunkedRead,
        Form::ChunkedWrite,
        Form::LongCall,
        Form::LongReply,
        Form::Backward,
        Form::ContinuedCall,
        Form::ContinuedReply,
    ];

    /// Whether a pair that settles on -07 (`on_07`), or one that does not, has this form:
    /// continuation is -07's alone, and the server's backchannel speaks -00's RDMA_MSG only
    /// (it refuses a -07 connection).
    fn applies(self, on_07: bool) -> bool {
        match self {
            Form::Backward => !on_07,
            Form::ContinuedCall | Form::ContinuedReply => on_07,
            _ => true,
        }
    }

    /// The column label.
    pub fn label(self) -> &'static str {
        match self {
            Form::Short => "short",
            Form::ChunkedRead => "chunked read",
            Form::ChunkedWrite => "chunked write",
            Form::LongCall => "long call",
            Form::LongReply => "long reply",
            Form::Backward => "backward call",
            Form::ContinuedCall => "continued call",
            Form::ContinuedReply => "continued reply",
        }
    }

    fn code(self) -> u32 {
        Form::ALL.iter().position(|&f| f == self).unwrap() as u32
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The requester.
    pub requester: Speaks,
    /// The responder.
    pub responder: Speaks,
    /// Private data.
    pub pdata: Pdata,
    /// Who has the transport-properties extension.
    pub extension: Extension,
    /// Message form.
    pub form: Form,
}

impl Cell {
    /// Where the pair settles ([`settles`]).
    pub fn settles(&self) -> (Version, Option<Dialect>) {
        settles(self.requester, self.responder)
    }

    /// The pair settles on Version Two in -00, where the properties extension lives.
    pub fn both_v2(&self) -> bool {
        on_cel00(self.requester, self.responder)
    }
}

/// Whether a pair settles on -00: only there is the transport-properties extension spoken.
fn on_cel00(requester: Speaks, responder: Speaks) -> bool {
    settles(requester, responder) == (Version::TWO, Some(Dialect::Cel00))
}

/// How many cells [`all_cells`] gives: thirteen pairs with the extension axis collapsed to
/// [`Extension::None`] and three that settle on -00 with all four, in the six forms but the
/// continued ones; and the four pairs that settle on -07 in every form but the backward call
/// (for each private data).
pub const CELLS: usize =
    ((9 + 3 * Extension::ALL.len()) * (Form::ALL.len() - 2) + 4 * (Form::ALL.len() - 1)) * Pdata::ALL.len();

/// Every cell, in table order.
pub fn all_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for requester in Speaks::ALL {
        for responder in Speaks::RESPONDERS {
            // Version One never exchanges properties (properties document section 2.1), nor
            // does -07 (its own are CONNPROP's).
            let extensions: &[Extension] =
                if on_cel00(requester, responder) { &Extension::ALL } else { &[Extension::None] };
            let on_07 = settles(requester, responder).1 == Some(Dialect::Ietf07);
            for pdata in Pdata::ALL {
                for &extension in extensions {
                    for form in Form::ALL.into_iter().filter(|f| f.applies(on_07)) {
                        cells.push(Cell { requester, responder, pdata, extension, form });
                    }
                }
            }
        }
    }
    cells
}

/// What a cell came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The cell.
    pub cell: Cell,
    /// The version the connection settled on.
    pub version: Option<Version>,
    /// Its inline thresholds, after the properties exchange (if any).
    pub thresholds: Option<InlineThresholds>,
    /// What the transport-properties exchange gave (`None`: no client ran).
    pub properties: Option<PeerProperties>,
    /// The requester's credit window after the exchange.
    pub credits: u32,
    /// The Version Two dialect the connection settled in, if on Version Two.
    pub dialect: Option<Dialect>,
    /// `Ok` or why the cell failed.
    pub verdict: Result<(), String>,
    /// Wall time of the cell: connect, negotiate, exchange.
    pub elapsed: Duration,
}

impl Outcome {
    /// A cell that failed before its requester ran (its responder did not start).
    pub fn not_run(cell: Cell, why: String, elapsed: Duration) -> Outcome {
        Outcome {
            cell,
            version: None,
            thresholds: None,
            properties: None,
            credits: 0,
            dialect: None,
            verdict: Err(why),
            elapsed,
        }
    }
}

/// Private data that is not RFC 8797's: a wrong format identifier (0xf6ab0e19) with plausible
/// fields after it.
const GARBAGE: [u8; 8] = [0xf6, 0xab, 0x0e, 0x19, 1, 1, 3, 3];

/// The large payload's size: beyond every inline threshold a cell can negotiate (8192 at most).
const BIG: usize = 16 * 1024;
/// A small payload's size.
const SMALL: usize = 16;
/// Where the DDP-eligible `opaque<>`'s length word sits in calls and replies: after the XID,
/// the message type and the form code.
const OPAQUE_AT: usize = 12;

/// The responder's binding: both calls and replies may carry a DDP-eligible opaque.
const SERVER_ULB: OpaqueAtUlb = OpaqueAtUlb {
    call_opaque: Some(OPAQUE_AT),
    reply_opaque: Some(OPAQUE_AT),
    max_result: 4 * BIG,
    max_reply: 4 * BIG,
};

/// The requester's binding for a form: what it lets marshaling reduce, and how large a reply
/// it provisions for.
fn client_ulb(form: Form) -> OpaqueAtUlb {
    let small_reply = 64 + SMALL;
    match form {
        Form::Short | Form::Backward | Form::ChunkedRead => {
            OpaqueAtUlb { call_opaque: Some(OPAQUE_AT), reply_opaque: None, max_result: 0, max_reply: small_reply }
        }
        Form::ChunkedWrite => {
            OpaqueAtUlb { call_opaque: None, reply_opaque: Some(OPAQUE_AT), max_result: BIG, max_reply: small_reply }
        }
        Form::LongCall | Form::ContinuedCall | Form::ContinuedReply => {
            OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: small_reply }
        }
        Form::LongReply => OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 2 * BIG },
    }
}

/// An RPC message: XID, message type (0 call, 1 reply), the form code, then an `opaque<>` of
/// `len` pattern bytes.
fn message(xid: u32, msg_type: u32, form: Form, len: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(16 + len + 3);
    for w in [xid, msg_type, form.code(), len as u32] {
        m.extend_from_slice(&w.to_be_bytes());
    }
    m.extend((0..len).map(|i| (i as u8).wrapping_mul(7) ^ (xid as u8)));
    m.resize(m.len() + rpcrdma_v1::ulb::roundup_pad(len), 0);
    m
}

/// A continued message's payload: beyond -07's 4096-byte inline threshold, within three
/// Sends of it.
const CONTINUED: usize = 10_000;

/// The call a cell sends.
fn call_for(form: Form, xid: u32) -> Vec<u8> {
    let len = match form {
        Form::ChunkedRead | Form::LongCall => BIG,
        Form::ContinuedCall => CONTINUED,
        _ => SMALL,
    };
    message(xid, 0, form, len)
}

/// The service: its reply to a call, from the call's XID and form code.
pub fn serve(call: &[u8]) -> Vec<u8> {
    let word = |at: usize| call.get(at..at + 4).map_or(0, |w| u32::from_be_bytes(w.try_into().unwrap()));
    let form = Form::ALL.get(word(8) as usize).copied().unwrap_or(Form::Short);
    let len = match form {
        Form::ChunkedWrite | Form::LongReply => BIG,
        Form::ContinuedReply => CONTINUED,
        _ => SMALL,
    };
    message(word(0), 1, form, len)
}

/// The responder's configuration for a cell.
pub fn server_config(responder: Speaks, pdata: Pdata, extension: Extension) -> ServerConfig {
    let (_, server_pd) = pdata.advertised();
    let (_, server_props) = extension.stated();
    ServerConfig::default()
        .responder(
            responder::ResponderConfig::default()
                .versions(responder.versions())
                .draft07(matches!(responder, Speaks::Draft07 | Speaks::BothDrafts))
                .draft00(responder != Speaks::Draft07),
        )
        .private_data(server_pd)
        .foreign_private_data((pdata == Pdata::Garbage).then_some(GARBAGE))
        .properties(server_props)
}

/// Starts a cell's responder.
pub fn start_server<B: Backend + Clone>(
    backend: &B,
    responder: Speaks,
    pdata: Pdata,
    extension: Extension,
) -> rpcrdma_verbs::Result<Server> {
    let cfg = server_config(responder, pdata, extension);
    Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(SERVER_ULB), serve)
}

/// The responder end of a cell, wherever it runs: in this process, or in a child process
/// ([`crate::remote`]).
pub trait ResponderEnd {
    /// Where the requester connects.
    fn addr(&self) -> String;
    /// What the responder counted.
    fn stats(&self) -> Result<ServerStats, String>;
    /// Calls the requester back (RFC 8167) on the one connection, returning the reply.
    fn call_back(&self, call: &[u8]) -> Result<Vec<u8>, String>;
}

impl ResponderEnd for Server {
    fn addr(&self) -> String {
        self.local_addr()
    }
    fn stats(&self) -> Result<ServerStats, String> {
        Ok(Server::stats(self))
    }
    fn call_back(&self, call: &[u8]) -> Result<Vec<u8>, String> {
        let back = self.backchannels().into_iter().next().ok_or("no connection to call back on")?;
        back.call(call).map_err(|e| format!("backward call: {e}"))
    }
}

/// Runs one cell on `backend`, the responder in this process.
pub fn run_cell<B: Backend + Clone>(backend: &B, cell: Cell) -> Outcome {
    let start = Instant::now();
    match start_server(backend, cell.responder, cell.pdata, cell.extension) {
        Ok(server) => run_cell_against(backend, cell, &server, start),
        Err(e) => Outcome::not_run(cell, format!("server: {e}"), start.elapsed()),
    }
}

/// Runs one cell's requester on `backend` against `server`.
pub fn run_cell_against<B: Backend + Clone>(
    backend: &B,
    cell: Cell,
    server: &dyn ResponderEnd,
    start: Instant,
) -> Outcome {
    let (client_pd, server_pd) = cell.pdata.advertised();
    let (client_props, _) = cell.extension.stated();
    let ccfg = ClientConfig::default()
        .requester(
            requester::RequesterConfig::default()
                .versions(cell.requester.versions())
                .version_two(cell.requester.version_two())
                .timeout(Duration::from_secs(5)),
        )
        .private_data(client_pd)
        .foreign_private_data((cell.pdata == Pdata::Garbage).then_some(GARBAGE))
        .properties(client_props);
    let mut out = Outcome::not_run(cell, String::new(), Duration::ZERO);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let back = Arc::new(move |call: &[u8]| {
        s2.lock().unwrap().push(call.to_vec());
        serve(call)
    });
    let client = Client::with_backchannel(backend.clone(), server.addr(), ccfg, back);
    out.verdict = exchange(&client, server, cell, &seen);
    out.version = client.version();
    out.thresholds = client.thresholds();
    out.properties = Some(client.peer_properties());
    out.credits = client.credits();
    out.dialect = client.dialect();
    if out.verdict.is_ok() {
        out.verdict = check_negotiation(&out, client_pd, server_pd);
    }
    // Timed before teardown: stopping a server waits out its acceptor's tick.
    out.elapsed = start.elapsed();
    out
}

/// The calls (and for [`Form::Backward`], the backward call) and the checks on their bytes and
/// form. The form's call is made twice: the first settles the version and, on a Version Two
/// connection whose requester has the extension, is followed by the properties exchange
/// (properties document section 2.1: the client makes it right after that call); the second
/// travels under the thresholds the exchange gave, so a form that the stated sizes would have
/// turned into another fails here.
fn exchange<B: Backend>(
    client: &Client<B>,
    server: &dyn ResponderEnd,
    cell: Cell,
    seen: &std::sync::Mutex<Vec<Vec<u8>>>,
) -> Result<(), String> {
    let mut before = (ClientStats::default(), ServerStats::default());
    for (n, base) in [(1u64, 0x1000u32), (2, 0x2000)] {
        let call = call_for(cell.form, base + cell.form.code());
        let reply = client.call(&call, &client_ulb(cell.form)).map_err(|e| format!("call {n}: {e}"))?;
        if reply != serve(&call) {
            return Err(format!(
                "call {n}: reply of {} bytes differs from the {} sent",
                reply.len(),
                serve(&call).len()
            ));
        }
        // The server counts a reply once its Send completes, which may be after the reply
        // reached us: wait (bounded) for the count to reach this call, then it must be exact.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut s = server.stats()?;
        while s.calls.total() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            s = server.stats()?;
        }
        if s.calls.total() != n {
            return Err(format!("call {n}: the responder served {} calls, expected {n}: {s:?}", s.calls.total()));
        }
        let c = client.stats();
        let sent = transmissions(cell, n);
        form_used(cell.form, n, sent, (&before.0, &c), (&before.1, &s))
            .map_err(|why| format!("call {n}: the {} form was not used: {why}", cell.form.label()))?;
        before = (c, s);
    }
    // The RDMA_ERRORs the responder sent: one refusing the first message where the pair does
    // not settle in the requester's first choice (RDMA_ERR_VERS, or the other dialect's
    // refusal), and one RDMA_ERR_INVAL_OPTION refusing a properties request the responder
    // lacks (section 2.3). The server counts each once its Send completed, which may be after
    // the requester read it and went on: wait (bounded) for the count, then it must be exact.
    let want = (transmissions(cell, 1) - 1) + u64::from(cell.both_v2() && cell.extension == Extension::RequesterOnly);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut errors = before.1.errors_sent;
    while errors < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        errors = server.stats()?.errors_sent;
    }
    if errors != want {
        return Err(format!("the responder sent {errors} RDMA_ERRORs, expected {want}"));
    }
    if cell.form == Form::Backward {
        let bcall = message(0x8000_0000 | (0x1000 + cell.form.code()), 0, Form::Short, SMALL);
        let breply = server.call_back(&bcall)?;
        if breply != serve(&bcall) || seen.lock().unwrap().as_slice() != [bcall] {
            return Err("the backward call or its reply differs".into());
        }
    }
    Ok(())
}

/// How many times the requester sends call `n` (1 or 2) of `cell`: a Version Two requester's
/// first call goes twice when the pair does not settle in its preferred dialect, the first
/// message the responder refuses (RDMA_ERR_VERS, or the other dialect's refusal) and the same
/// call again in what the pair settles on, on the same connection (draft section 5.2, -07
/// section 4.3); every other call goes once.
fn transmissions(cell: Cell, n: u64) -> u64 {
    let first = cell.requester.version_two().first();
    let probe_refused = first.is_some() && cell.settles() != (Version::TWO, first);
    if n == 1 && probe_refused {
        2
    } else {
        1
    }
}

/// Whether call `n` (1 or 2) of a cell, sent `sent` times, between the `(before, after)`
/// counts of the client and the server was made in `form`: every count is compared with the
/// exact number the call should have made (the client's transmissions by form and those
/// continued, the server's one call served by call form and reply form, and its replies
/// continued), so a call that also went in another form, or twice, fails. A continued call's
/// first call is the -07 probe, one message of at most 1024 bytes (section 4.3): it goes in a
/// Call chunk, and only the second continues.
fn form_used(
    form: Form,
    n: u64,
    sent: u64,
    client: (&ClientStats, &ClientStats),
    server: (&ServerStats, &ServerStats),
) -> Result<(), String> {
    let (c0, c1) = client;
    let (s0, s1) = server;
    let long_call = form == Form::LongCall || (form == Form::ContinuedCall && n == 1);
    let continued_call = form == Form::ContinuedCall && n == 2;
    let got = (c1.short - c0.short, c1.chunked - c0.chunked, c1.long - c0.long, c1.continued - c0.continued);
    let want = match form {
        Form::ChunkedRead => (0, sent, 0, 0),
        _ if long_call => (0, 0, sent, 0),
        _ => (sent, 0, 0, u64::from(continued_call)),
    };
    if got != want {
        return Err(format!("the client sent (short, chunked, long, continued) {got:?}, expected {want:?}"));
    }
    let one = |yes: bool| u64::from(yes);
    let got = [
        s1.calls.total() - s0.calls.total(),
        s1.read_chunk_calls - s0.read_chunk_calls,
        s1.long_calls - s0.long_calls,
        s1.inline_replies - s0.inline_replies,
        s1.reply_chunk_replies - s0.reply_chunk_replies,
        s1.write_chunk_results - s0.write_chunk_results,
        s1.continued_replies - s0.continued_replies,
    ];
    let want = [
        1,
        one(form == Form::ChunkedRead),
        one(long_call),
        one(form != Form::LongReply),
        one(form == Form::LongReply),
        one(form == Form::ChunkedWrite),
        one(form == Form::ContinuedReply),
    ];
    if got != want {
        return Err(format!(
            "the responder counted (calls, read chunk calls, long calls, inline replies, reply chunk replies, \
             write chunk results, continued replies) {got:?}, expected {want:?}"
        ));
    }
    Ok(())
}

/// What the properties exchange should give on a connection of `version`: none on Version One
/// or without the requester's extension (section 2.1: only the requester asks), a refusal when
/// only the requester has it (section 2.3), the responder's properties when both have it.
fn expected_properties(version: Version, extension: Extension) -> PeerProperties {
    match extension.stated() {
        _ if version < Version::TWO => PeerProperties::NotExchanged,
        (None, _) => PeerProperties::NotExchanged,
        (Some(_), None) => PeerProperties::Refused,
        (Some(_), Some(theirs)) => PeerProperties::Stated(theirs),
    }
}

/// The version both sides should settle on, what the properties exchange should give, and the
/// thresholds RFC 8797 section 4.2 (or the version's defaults), refined by what both sides
/// stated (properties document section 2.4), give: [`Stated::thresholds`], fed from the cell's
/// configuration, not from what the client learned.
fn check_negotiation(
    out: &Outcome,
    client_pd: Option<PrivateData>,
    server_pd: Option<PrivateData>,
) -> Result<(), String> {
    let (want, dialect) = out.cell.settles();
    if (out.version, out.dialect) != (Some(want), dialect) {
        return Err(format!("negotiated {:?} {:?}, expected version {want} {dialect:?}", out.version, out.dialect));
    }
    let props = expected_properties(want, out.cell.extension);
    if out.properties != Some(props) {
        return Err(format!("properties exchange gave {:?}, expected {props:?}", out.properties));
    }
    // Only a completed exchange changes anything; a refusal falls back (section 2.3).
    let stated = match props {
        PeerProperties::Stated(_) => {
            let (requester, responder) = out.cell.extension.stated();
            Stated { requester, responder }
        }
        PeerProperties::NotExchanged | PeerProperties::Refused => Stated::default(),
    };
    let mut t = stated.thresholds(&Advertised { requester: client_pd, responder: server_pd }, want);
    if dialect == Some(Dialect::Ietf07) {
        // On -07 the responder states its Receives in its RDMA2_CONNPROP_FINAL (section
        // 5.2.2), which the requester takes as its call threshold once it has arrived (after
        // the first call): 4096 in every cell, the v2 default its Receives are never below
        // (private data asking for less does not shrink them). Only the cells where both
        // sides send private data tell it from no CONNPROP at all (their private data gives
        // 2048); the client tests check the size taken where it is larger.
        t.call = 4096;
    }
    if out.thresholds != Some(t) {
        return Err(format!("thresholds {:?}, expected {t:?}", out.thresholds));
    }
    if out.credits != 32 {
        return Err(format!("credit window {}, expected 32", out.credits));
    }
    Ok(())
}

/// How a table or JSON shows a Version Two dialect.
fn dialect_label(d: Dialect) -> &'static str {
    match d {
        Dialect::Cel00 => "cel-00",
        Dialect::Ietf07 => "ietf-07",
    }
}

/// How a table or JSON shows what the properties exchange gave (`-`: no client ran).
fn properties_label(p: Option<PeerProperties>) -> &'static str {
    match p {
        None => "-",
        Some(PeerProperties::NotExchanged) => "not exchanged",
        Some(PeerProperties::Stated(_)) => "stated",
        Some(PeerProperties::Refused) => "refused",
    }
}

/// The table, one line per cell.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s = format!(
        "{:<11} {:<11} {:<15} {:<14} {:<15} {:>4} {:<13} {:>11} {:>7} {:>9}  {}\n",
        "requester",
        "responder",
        "private data",
        "extension",
        "form",
        "vers",
        "properties",
        "thresholds",
        "credits",
        "time",
        "verdict"
    );
    for o in outcomes {
        let t = o.thresholds.map_or("-".into(), |t| format!("{}/{}", t.call, t.reply));
        let v = o.version.map_or("-".into(), |v| v.wire().to_string());
        let verdict = match &o.verdict {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("FAILED: {e}"),
        };
        s += &format!(
            "{:<11} {:<11} {:<15} {:<14} {:<15} {:>4} {:<13} {:>11} {:>7} {:>7.1}ms  {}\n",
            o.cell.requester.label(),
            o.cell.responder.label(),
            o.cell.pdata.label(),
            o.cell.extension.label(),
            o.cell.form.label(),
            v,
            properties_label(o.properties),
            t,
            o.credits,
            o.elapsed.as_secs_f64() * 1e3,
            verdict
        );
    }
    s
}

/// The outcomes as one JSON object: the backend, the summary (`passed`, `failed`) and
/// `cells`, one cell a line. Written with [`Json`], which escapes every control character, so
/// any error text makes valid JSON.
pub fn json(backend: &str, outcomes: &[Outcome]) -> String {
    let failed = outcomes.iter().filter(|o| o.verdict.is_err()).count();
    let cells: Vec<String> = outcomes.iter().map(|o| cell_json(o).to_string()).collect();
    format!(
        "{{\"backend\": {}, \"passed\": {}, \"failed\": {failed}, \"cells\": [\n  {}\n]}}\n",
        Json::str(backend),
        outcomes.len() - failed,
        cells.join(",\n  ")
    )
}

fn cell_json(o: &Outcome) -> Json {
    let thresholds =
        o.thresholds.map_or(Json::Null, |t| Json::Obj(vec![("call", t.call.into()), ("reply", t.reply.into())]));
    let ms = (o.elapsed.as_secs_f64() * 1e6).round() / 1e3;
    Json::Obj(vec![
        ("requester", Json::str(o.cell.requester.label())),
        ("responder", Json::str(o.cell.responder.label())),
        ("private_data", Json::str(o.cell.pdata.label())),
        ("extension", Json::str(o.cell.extension.label())),
        ("form", Json::str(o.cell.form.label())),
        ("version", o.version.map_or(Json::Null, |v| v.wire().into())),
        ("dialect", o.dialect.map_or(Json::Null, |d| Json::str(dialect_label(d)))),
        ("properties", o.properties.map_or(Json::Null, |p| Json::str(properties_label(Some(p))))),
        ("thresholds", thresholds),
        ("credits", o.credits.into()),
        ("verdict", Json::str(o.verdict.as_ref().map_or_else(String::clone, |()| "ok".to_string()))),
        ("ok", Json::Bool(o.verdict.is_ok())),
        ("time_ms", Json::Float(ms)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error text with a tab, a CR, a NUL, an ESC and a quote still gives JSON that
    /// parses, and the text comes back intact.
    #[test]
    fn json_escapes_every_control_character() {
        let cell = all_cells()[0];
        let why = "call 1:\tbad\r\n\u{0}\u{1b}[31m \"quoted\" back\\slash";
        let outcomes = [
            Outcome::not_run(cell, why.to_string(), Duration::from_micros(1500)),
            Outcome::not_run(cell, "x".into(), Duration::from_millis(2)),
        ];
        let text = json("inproc", &outcomes);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(v["backend"], "inproc");
        assert_eq!((v["passed"].as_u64(), v["failed"].as_u64()), (Some(0), Some(2)));
        assert_eq!(v["cells"][0]["verdict"], why);
        assert_eq!(v["cells"][0]["ok"], false);
        assert_eq!(v["cells"][0]["time_ms"], 1.5);
        // A whole number of milliseconds is still a float (`2.0`), as every other time is.
        assert!(v["cells"][1]["time_ms"].is_f64(), "{text}");
    }
}
