//! An owned model of an RPC-over-RDMA Version One transport header.
//!
//! Our generated types (`rpcrdma_v1::xdr`) borrow their lists and arrays;
//! [`HeaderModel`] holds them in `Vec`s, so tests can
//! build, keep and compare headers freely, lend them out as an
//! `RdmaMsg<'_>` ([`with_msg`](HeaderModel::with_msg)), read one
//! back ([`from_ours`](HeaderModel::from_ours)), and print the
//! oracle's canonical text ([`canonical`](HeaderModel::canonical)). That is the crate's one
//! printer of canonical text: [`crate::oracle::canonical_from_ours`] (and, with feature
//! `peer-xdrgen`, `canonical_from_peer`) convert to the model and print it.
//!
//! ```
//! use interop_tests::v1_model::{BodyModel, ChunksModel, HeaderModel};
//! use rpcrdma_v1::rt::Xdr;
//! use rpcrdma_v1::xdr::XdrRdmaSegment;
//!
//! let seg = XdrRdmaSegment { handle: 1, length: 2, offset: 3 };
//! let m = HeaderModel {
//!     xid: 7,
//!     vers: 1,
//!     credit: 32,
//!     body: BodyModel::Msg(ChunksModel { reads: vec![], writes: vec![vec![], vec![seg]], reply: None }),
//! };
//! assert_eq!(m.canonical(), "xid=7 vers=1 credit=32 proc=0 reads=[] writes=[[];[1,2,3]] reply=none");
//! let bytes = m.with_msg(|msg| msg.to_vec()).unwrap();
//! let (back, n) = rpcrdma_v1::xdr::RdmaMsg::decode(&bytes).unwrap();
//! assert_eq!((HeaderModel::from_ours(&back), n), (m, bytes.len()));
//! ```

use std::fmt::Write as _;

use rpcrdma_v1::rt::{List, Seq};
use rpcrdma_v1::xdr::{
    RdmaBody, RdmaMsg, RpcRdmaError, RpcRdmaErrvers, RpcRdmaHeader, RpcRdmaHeaderNomsg, RpcRdmaHeaderPadded,
    XdrRdmaSegment, XdrReadChunk, XdrWriteChunk,
};

/// A whole header: the fixed fields and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderModel {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_vers`.
    pub vers: u32,
    /// `rdma_credit`.
    pub credit: u32,
    /// `rdma_body`, by procedure.
    pub body: BodyModel,
}

/// The body, one variant per procedure (RDMA_ERROR split by error code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyModel {
    /// RDMA_MSG (proc 0).
    Msg(ChunksModel),
    /// RDMA_NOMSG (proc 1).
    Nomsg(ChunksModel),
    /// RDMA_MSGP (proc 2).
    Msgp {
        /// `rdma_align`.
        align: u32,
        /// `rdma_thresh`.
        thresh: u32,
        /// The chunk lists.
        chunks: ChunksModel,
    },
    /// RDMA_DONE (proc 3).
    Done,
    /// RDMA_ERROR / ERR_VERS (proc 4, err 1).
    ErrVers {
        /// `rdma_vers_low`.
        low: u32,
        /// `rdma_vers_high`.
        high: u32,
    },
    /// RDMA_ERROR / ERR_CHUNK (proc 4, err 2).
    ErrChunk,
}

/// The three chunk lists of RDMA_MSG, RDMA_NOMSG and RDMA_MSGP.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunksModel {
    /// The read list, in wire order.
    pub reads: Vec<XdrReadChunk>,
    /// The write list: each write chunk's segments, in wire order.
    pub writes: Vec<Vec<XdrRdmaSegment>>,
    /// The reply chunk's segments (`Some(vec![])`: present, no segments).
    pub reply: Option<Vec<XdrRdmaSegment>>,
}

impl ChunksModel {
    /// All segments in all three lists (each read chunk is one).
    pub fn segments(&self) -> usize {
        self.reads.len() + self.writes.iter().map(Vec::len).sum::<usize>() + self.reply.as_ref().map_or(0, Vec::len)
    }

    fn from_ours(
        reads: &List<'_, XdrReadChunk>,
        writes: &List<'_, XdrWriteChunk<'_>>,
        reply: &Option<XdrWriteChunk<'_>>,
    ) -> ChunksModel {
        ChunksModel {
            reads: reads.iter().collect(),
            writes: writes.iter().map(|c| c.target.iter().collect()).collect(),
            reply: reply.map(|c| c.target.iter().collect()),
        }
    }

    fn push_canonical(&self, s: &mut String) {
        fn chunk(s: &mut String, segs: &[XdrRdmaSegment]) {
            s.push('[');
            for (i, g) in segs.iter().enumerate() {
                let sep = if i == 0 { "" } else { ";" };
                let _ = write!(s, "{sep}{},{},{}", g.handle, g.length, g.offset);
            }
            s.push(']');
        }
        s.push_str(" reads=[");
        for (i, r) in self.reads.iter().enumerate() {
            let sep = if i == 0 { "" } else { ";" };
            let t = &r.target;
            let _ = write!(s, "{sep}{},{},{},{}", r.position, t.handle, t.length, t.offset);
        }
        s.push_str("] writes=[");
        for (i, c) in self.writes.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            chunk(s, c);
        }
        s.push_str("] reply=");
        match &self.reply {
            None => s.push_str("none"),
            Some(c) => chunk(s, c),
        }
    }
}

impl HeaderModel {
    /// The procedure number (`rdma_body` discriminant).
    pub fn proc(&self) -> u32 {
        match self.body {
            BodyModel::Msg(_) => 0,
            BodyModel::Nomsg(_) => 1,
            BodyModel::Msgp { .. } => 2,
            BodyModel::Done => 3,
            BodyModel::ErrVers { .. } | BodyModel::ErrChunk => 4,
        }
    }

    /// The chunk lists, for the three procedures that carry them.
    pub fn chunks(&self) -> Option<&ChunksModel> {
        match &self.body {
            BodyModel::Msg(c) | BodyModel::Nomsg(c) | BodyModel::Msgp { chunks: c, .. } => Some(c),
            _ => None,
        }
    }

    /// Lends the header to `f` as our generated type.  (The write list's
    /// `XdrWriteChunk`s borrow from a vector that lives only for the
    /// call, hence a closure rather than a return value.)
    pub fn with_msg<R>(&self, f: impl FnOnce(&RdmaMsg<'_>) -> R) -> R {
        let writes: Vec<XdrWriteChunk<'_>> = self
            .chunks()
            .map(|c| c.writes.iter().map(|segs| XdrWriteChunk { target: Seq::from_slice(segs) }).collect())
            .unwrap_or_default();
        type Lists<'a> = (List<'a, XdrReadChunk>, List<'a, XdrWriteChunk<'a>>, Option<XdrWriteChunk<'a>>);
        fn lists<'a>(c: &'a ChunksModel, writes: &'a [XdrWriteChunk<'a>]) -> Lists<'a> {
            let reply = c.reply.as_ref().map(|segs| XdrWriteChunk { target: Seq::from_slice(segs) });
            (List::from_slice(&c.reads), List::from_slice(writes), reply)
        }
        let body = match &self.body {
            BodyModel::Msg(c) => {
                let (rdma_reads, rdma_writes, rdma_reply) = lists(c, &writes);
                RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply })
            }
            BodyModel::Nomsg(c) => {
                let (rdma_reads, rdma_writes, rdma_reply) = lists(c, &writes);
                RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply })
            }
            BodyModel::Msgp { align, thresh, chunks } => {
                let (rdma_reads, rdma_writes, rdma_reply) = lists(chunks, &writes);
                RdmaBody::RdmaMsgp(RpcRdmaHeaderPadded {
                    rdma_align: *align,
                    rdma_thresh: *thresh,
                    rdma_reads,
                    rdma_writes,
                    rdma_reply,
                })
            }
            BodyModel::Done => RdmaBody::RdmaDone,
            BodyModel::ErrVers { low, high } => RdmaBody::RdmaError(RpcRdmaError::ErrVers(RpcRdmaErrvers {
                rdma_vers_low: *low,
                rdma_vers_high: *high,
            })),
            BodyModel::ErrChunk => RdmaBody::RdmaError(RpcRdmaError::ErrChunk),
        };
        f(&RdmaMsg { rdma_xid: self.xid, rdma_vers: self.vers, rdma_credit: self.credit, rdma_body: body })
    }

    /// The owned copy of a header in our generated types.
    pub fn from_ours(m: &RdmaMsg<'_>) -> HeaderModel {
        let body = match &m.rdma_body {
            RdmaBody::RdmaMsg(h) => {
                BodyModel::Msg(ChunksModel::from_ours(&h.rdma_reads, &h.rdma_writes, &h.rdma_reply))
            }
            RdmaBody::RdmaNomsg(h) => {
                BodyModel::Nomsg(ChunksModel::from_ours(&h.rdma_reads, &h.rdma_writes, &h.rdma_reply))
            }
            RdmaBody::RdmaMsgp(h) => BodyModel::Msgp {
                align: h.rdma_align,
                thresh: h.rdma_thresh,
                chunks: ChunksModel::from_ours(&h.rdma_reads, &h.rdma_writes, &h.rdma_reply),
            },
            RdmaBody::RdmaDone => BodyModel::Done,
            RdmaBody::RdmaError(RpcRdmaError::ErrVers(v)) => {
                BodyModel::ErrVers { low: v.rdma_vers_low, high: v.rdma_vers_high }
            }
            RdmaBody::RdmaError(RpcRdmaError::ErrChunk) => BodyModel::ErrChunk,
        };
        HeaderModel { xid: m.rdma_xid, vers: m.rdma_vers, credit: m.rdma_credit, body }
    }

    /// The oracle's canonical text (see [`crate::oracle`]), printed from
    /// the model's own fields.
    pub fn canonical(&self) -> String {
        let mut s = format!("xid={} vers={} credit={} proc={}", self.xid, self.vers, self.credit, self.proc());
        match &self.body {
            BodyModel::Msg(c) | BodyModel::Nomsg(c) => c.push_canonical(&mut s),
            BodyModel::Msgp { align, thresh, chunks } => {
                let _ = write!(s, " align={align} thresh={thresh}");
                chunks.push_canonical(&mut s);
            }
            BodyModel::Done => {}
            BodyModel::ErrVers { low, high } => {
                let _ = write!(s, " err=1 low={low} high={high}");
            }
            BodyModel::ErrChunk => s.push_str(" err=2"),
        }
        s
    }
}
