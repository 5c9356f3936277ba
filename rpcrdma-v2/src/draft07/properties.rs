//! -07's transport properties (draft-ietf-nfsv4-rpcrdma-version-two-07 section 5): what a
//! peer states about its end of a connection in the `rpcrdma2_propset` of its CONNPROP
//! messages, read as section 5.1 says and written so that each CONNPROP message fits the
//! default inline threshold (6.3.3, 6.3.4). Sans-I/O.
//!
//! Reading ([`Properties::from_propset`]): each property of Table 1 is its typedef's XDR
//! encoding inside `rdma_data`; an empty `rdma_data` is the property's default; one that does
//! not decode as its typedef, or is too short for it, is refused with RDMA2_ERR_BAD_PROPVAL
//! and none of the set is applied (5.1, 7.2.2: "MUST silently discard the ingress message
//! without applying any of its property settings"); a property this side does not recognize
//! is not processed, but kept for an extension that knows it ([`Properties::others`], at
//! most [`OTHERS_MOST`] of them and [`OTHERS_BYTES_MOST`] bytes: a peer stating more, over
//! as many CONNPROP_MIDDLE messages as it likes, sizes nothing). A property stated twice
//! takes its last value.
//!
//! ```
//! use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
//! use rpcrdma_v2::draft07::xdr::{Rpcrdma2Propset, Rpcrdma2Propval, RDMA2_PROPID_BRS, RDMA2_PROPID_RBSIZ};
//! use rpcrdma_v2::rt::Seq;
//! let vals = [
//!     Rpcrdma2Propval { rdma_which: RDMA2_PROPID_RBSIZ, rdma_data: &[0, 0, 0x20, 0] },
//!     Rpcrdma2Propval { rdma_which: RDMA2_PROPID_BRS, rdma_data: &[0, 0, 0, 1] },
//!     Rpcrdma2Propval { rdma_which: 999, rdma_data: b"someone else's" }, // kept aside
//! ];
//! let theirs = Properties::from_propset(&Rpcrdma2Propset(Seq::from_slice(&vals))).unwrap();
//! assert_eq!(theirs.receive_buffer_size, 8192);
//! assert_eq!(theirs.reverse_direction, ReverseDirection::Simple);
//! assert_eq!(theirs.max_send_size, 4096); // not stated: Table 1's default
//! assert_eq!(theirs.others, [(999, b"someone else's".to_vec())]);
//! ```

use xdr_spec_rt::{Reader, Xdr};

use super::xdr::*;

/// Section 5.2.5's levels of reverse-direction support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReverseDirection {
    /// RDMA2_RVRSDIR_NONE (0), the default: no reverse-direction operation.
    #[default]
    None,
    /// RDMA2_RVRSDIR_SIMPLE (1): Simple Format messages without data item chunks.
    Simple,
    /// RDMA2_RVRSDIR_CONT (2): Simple or Continued Format, without data item chunks.
    Continued,
    /// RDMA2_RVRSDIR_GENL (3): as forward-direction messages.
    General,
    /// A level this draft does not define (an extension's, Appendix B): honoured as none.
    Unknown(u32),
}

impl ReverseDirection {
    fn from_wire(v: u32) -> ReverseDirection {
        match v {
            RDMA2_RVRSDIR_NONE => ReverseDirection::None,
            RDMA2_RVRSDIR_SIMPLE => ReverseDirection::Simple,
            RDMA2_RVRSDIR_CONT => ReverseDirection::Continued,
            RDMA2_RVRSDIR_GENL => ReverseDirection::General,
            v => ReverseDirection::Unknown(v),
        }
    }

    fn wire(self) -> u32 {
        match self {
            ReverseDirection::None => RDMA2_RVRSDIR_NONE,
            ReverseDirection::Simple => RDMA2_RVRSDIR_SIMPLE,
            ReverseDirection::Continued => RDMA2_RVRSDIR_CONT,
            ReverseDirection::General => RDMA2_RVRSDIR_GENL,
            ReverseDirection::Unknown(v) => v,
        }
    }
}

/// One end's transport properties (Table 1), each at its default until stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Properties {
    /// Maximum Send Size, RDMA2_PROPID_SBSIZ (5.2.1): the largest Send payload it sends.
    pub max_send_size: u32,
    /// Receive Buffer Size, RDMA2_PROPID_RBSIZ (5.2.2): its Receives are at least this long.
    pub receive_buffer_size: u32,
    /// Maximum Segment Size, RDMA2_PROPID_RSSIZ (5.2.3).
    pub max_segment_size: u32,
    /// Maximum Segment Count, RDMA2_PROPID_RCSIZ (5.2.4): segments in a Requester's header.
    pub max_segment_count: u32,
    /// Reverse-Direction Support, RDMA2_PROPID_BRS (5.2.5).
    pub reverse_direction: ReverseDirection,
    /// Host Auth Message, RDMA2_PROPID_HOSTAUTH (5.2.6), for the caller to judge; `None`
    /// when not stated (the peer stays unauthenticated).
    pub host_auth: Option<Vec<u8>>,
    /// Properties the base does not define, as `(rdma_which, rdma_data)` in the order first
    /// stated: an extension's (Appendix B.3), for the extension to read. The base has a
    /// receiver not process them (5.1); kept here, each once (its last value, as for the
    /// base's), at most [`OTHERS_MOST`] of them and [`OTHERS_BYTES_MOST`] bytes of values
    /// (those beyond are not kept), and sent by [`Properties::to_propvals`] after the base's.
    pub others: Vec<(u32, Vec<u8>)>,
}

impl Default for Properties {
    /// Table 1's defaults (its two sizes the default inline threshold, section 4.2.2).
    fn default() -> Self {
        const THRESHOLD: u32 = super::DEFAULT_INLINE_THRESHOLD as u32;
        Properties {
            max_send_size: THRESHOLD,
            receive_buffer_size: THRESHOLD,
            max_segment_size: 1_048_576,
            max_segment_count: 16,
            reverse_direction: ReverseDirection::None,
            host_auth: None,
            others: Vec::new(),
        }
    }
}

/// The most properties the base does not define a receiver keeps ([`Properties::others`]).
pub const OTHERS_MOST: usize = 64;

/// The most bytes of their values a receiver keeps ([`Properties::others`]): a CONNPROP
/// message's worth at the default inline threshold (section 4.2.2).
pub const OTHERS_BYTES_MOST: usize = super::DEFAULT_INLINE_THRESHOLD;

/// A property value refused (section 5.1): answer RDMA2_ERR_BAD_PROPVAL and apply none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("property {which}: {len} bytes of rdma_data are not the XDR of its type (section 5.1)")]
pub struct BadPropval {
    /// The property's `rdma_which`.
    pub which: u32,
    /// The length of its `rdma_data`.
    pub len: usize,
}

impl BadPropval {
    /// The error body to answer with (section 7.2.2).
    pub fn answer(&self) -> Rpcrdma2HdrError {
        Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_BAD_PROPVAL }
    }
}

/// Decodes `data` as exactly one `T`: the whole of it, nothing left over.
fn exactly<'a, T: Xdr<'a>>(which: u32, data: &'a [u8]) -> Result<T, BadPropval> {
    let bad = BadPropval { which, len: data.len() };
    let mut r = Reader::new(data);
    let v = T::decode_from(&mut r).map_err(|_| bad)?;
    if r.remaining() != 0 {
        return Err(bad);
    }
    Ok(v)
}

impl Properties {
    /// A peer's properties from its `rdma_props` (see the [module documentation](self)),
    /// starting from `self`'s values: what the peer stated before (in an earlier CONNPROP),
    /// or [`Properties::default`].
    pub fn apply(&self, set: &Rpcrdma2Propset<'_>) -> Result<Properties, BadPropval> {
        let mut p = self.clone();
        let defaults = Properties::default();
        for v in set.0.iter() {
            let (which, data) = (v.rdma_which, v.rdma_data);
            let empty = data.is_empty();
            let word = |default: u32| if empty { Ok(default) } else { exactly::<u32>(which, data) };
            match which {
                RDMA2_PROPID_SBSIZ => p.max_send_size = word(defaults.max_send_size)?,
                RDMA2_PROPID_RBSIZ => p.receive_buffer_size = word(defaults.receive_buffer_size)?,
                RDMA2_PROPID_RSSIZ => p.max_segment_size = word(defaults.max_segment_size)?,
                RDMA2_PROPID_RCSIZ => p.max_segment_count = word(defaults.max_segment_count)?,
                RDMA2_PROPID_BRS => {
                    p.reverse_direction = ReverseDirection::from_wire(word(RDMA2_RVRSDIR_NONE)?);
                }
                RDMA2_PROPID_HOSTAUTH => {
                    // Table 1 gives it no default: an empty rdma_data states empty material.
                    p.host_auth =
                        Some(if empty { Vec::new() } else { exactly::<Rpcrdma2PropHostauth>(which, data)?.0.to_vec() });
                }
                // Not recognized: "the receiver does not process that rpcrdma2_propval"; kept
                // for an extension that knows it, within bounds a peer cannot move.
                _ => p.keep_other(which, data),
            }
        }
        Ok(p)
    }

    /// Keeps `data` as the value of property `which`, one the base does not define: its last
    /// value, within [`OTHERS_MOST`] properties and [`OTHERS_BYTES_MOST`] bytes (a value
    /// that would go over is not kept).
    fn keep_other(&mut self, which: u32, data: &[u8]) {
        let held: usize = self.others.iter().filter(|(w, _)| *w != which).map(|(_, d)| d.len()).sum();
        if held + data.len() > OTHERS_BYTES_MOST {
            // Its last value is not kept: nor is an earlier one.
            self.others.retain(|(w, _)| *w != which);
            return;
        }
        match self.others.iter().position(|(w, _)| *w == which) {
            Some(i) => self.others[i].1 = data.to_vec(),
            None if self.others.len() < OTHERS_MOST => self.others.push((which, data.to_vec())),
            None => {}
        }
    }

    /// [`Properties::apply`] to the defaults.
    pub fn from_propset(set: &Rpcrdma2Propset<'_>) -> Result<Properties, BadPropval> {
        Properties::default().apply(set)
    }

    /// Each property that differs from its default, as `(rdma_which, rdma_data)`: what this
    /// side states (a property at its default need not be sent; its receiver assumes it).
    ///
    /// ```
    /// use rpcrdma_v2::draft07::properties::Properties;
    /// let ours = Properties { receive_buffer_size: 8192, ..Properties::default() };
    /// assert_eq!(ours.to_propvals(), [(2, vec![0, 0, 0x20, 0])]); // RDMA2_PROPID_RBSIZ
    /// ```
    pub fn to_propvals(&self) -> Vec<(u32, Vec<u8>)> {
        let d = Properties::default();
        let word = |v: u32| v.to_be_bytes().to_vec();
        let mut out = Vec::new();
        for (which, value, default) in [
            (RDMA2_PROPID_SBSIZ, self.max_send_size, d.max_send_size),
            (RDMA2_PROPID_RBSIZ, self.receive_buffer_size, d.receive_buffer_size),
            (RDMA2_PROPID_RSSIZ, self.max_segment_size, d.max_segment_size),
            (RDMA2_PROPID_RCSIZ, self.max_segment_count, d.max_segment_count),
            (RDMA2_PROPID_BRS, self.reverse_direction.wire(), d.reverse_direction.wire()),
        ] {
            if value != default {
                out.push((which, word(value)));
            }
        }
        if let Some(auth) = &self.host_auth {
            let data = Rpcrdma2PropHostauth(auth).to_vec().expect("an opaque<> under 4 GiB encodes");
            out.push((RDMA2_PROPID_HOSTAUTH, data));
        }
        out.extend(self.others.iter().cloned());
        out
    }

    /// The CONNPROP messages that state these properties: as few as hold them, each at most
    /// `threshold` bytes (the default inline threshold, 4096 in Version Two, section 4.2.2:
    /// the peer's Receives are no smaller before it states otherwise), all CONNPROP_MIDDLE
    /// but the last, a CONNPROP_FINAL (6.3.3, 6.3.4), with `xid` and `credit` in each
    /// prefix. `None` when one property alone does not fit a message.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::header::{Header, HeaderType};
    /// use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
    /// use rpcrdma_v2::HeaderLimits;
    /// let ours = Properties {
    ///     max_send_size: 8192,
    ///     receive_buffer_size: 8192,
    ///     reverse_direction: ReverseDirection::General,
    ///     host_auth: Some(vec![7; 990]),
    ///     ..Properties::default()
    /// };
    /// let messages = ours.connprop_messages(0, 32, 1024).unwrap();
    /// let types: Vec<_> = messages.iter().map(|m| Header::parse(m, &HeaderLimits::default()).unwrap().header_type()).collect();
    /// assert_eq!(types, [HeaderType::ConnPropMiddle, HeaderType::ConnPropFinal]);
    /// assert!(messages.iter().all(|m| m.len() <= 1024));
    /// assert_eq!(ours.connprop_messages(0, 32, 512), None); // the host auth alone is over 512
    /// ```
    pub fn connprop_messages(&self, xid: u32, credit: u32, threshold: usize) -> Option<Vec<Vec<u8>>> {
        // The prefix and the property count.
        const EMPTY: usize = 16 + 4;
        let vals = self.to_propvals();
        // rdma_which, the length word, the data padded.
        let size = |data: &[u8]| 8 + data.len().div_ceil(4) * 4;
        let mut groups: Vec<(usize, Vec<usize>)> = vec![(EMPTY, Vec::new())];
        for (i, (_, data)) in vals.iter().enumerate() {
            let n = size(data);
            if EMPTY + n > threshold {
                return None;
            }
            let last = groups.last_mut().expect("one group at least");
            if last.0 + n <= threshold {
                last.0 += n;
                last.1.push(i);
            } else {
                groups.push((EMPTY + n, vec![i]));
            }
        }
        let count = groups.len();
        let messages = groups
            .into_iter()
            .enumerate()
            .map(|(n, (_, members))| {
                let htype = if n + 1 == count { RDMA2_CONNPROP_FINAL } else { RDMA2_CONNPROP_MIDDLE };
                let props: Vec<Rpcrdma2Propval<'_>> =
                    members.iter().map(|&i| Rpcrdma2Propval { rdma_which: vals[i].0, rdma_data: &vals[i].1 }).collect();
                let prefix = RpcrdmaCommon { rdma_xid: xid, rdma_vers: 2, rdma_credit: credit, rdma_htype: htype };
                let body = Rpcrdma2HdrConnprop { rdma_props: Rpcrdma2Propset(xdr_spec_rt::Seq::from_slice(&props)) };
                let mut m = prefix.to_vec().expect("the prefix encodes");
                m.extend(body.to_vec().expect("a property set under 4 GiB encodes"));
                m
            })
            .collect();
        Some(messages)
    }
}
