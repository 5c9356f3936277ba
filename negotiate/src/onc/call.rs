//! Credentials and verifiers (`opaque_auth`, RFC 5531 sections 8.2 and 9, appendix A) and the
//! call header (`rpc_msg` with `msg_type` CALL, section 9).

use super::xdr::{put_opaque, put_u32, Reader};
use super::{OncError, AUTH_NONE, AUTH_SYS, CALL, MAX_AUTH_BYTES, MAX_GIDS, MAX_MACHINE_NAME, RPC_VERSION};

/// An `opaque_auth` (RFC 5531 section 8.2): a credential or verifier.
///
/// `AUTH_NONE` with an empty body decodes as [`Auth::None`], `AUTH_SYS` as [`Auth::Sys`]
/// (its body must be exactly one `authsys_parms`), any other flavor, or `AUTH_NONE` with a
/// body, as [`Auth::Other`] with its body as sent.
///
/// ```
/// use negotiate::onc::{Auth, AuthSys};
/// let mut out = Vec::new();
/// Auth::None.encode(&mut out).unwrap();
/// assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0]); // flavor AUTH_NONE, empty body
/// let sys = Auth::Sys(AuthSys { stamp: 1, machine_name: "h".into(), uid: 2, gid: 3, gids: vec![4] });
/// assert_eq!(sys.flavor(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// `AUTH_NONE` (flavor 0) with an empty body.
    #[default]
    None,
    /// `AUTH_SYS` (flavor 1, RFC 5531 appendix A).
    Sys(AuthSys),
    /// Any other flavor (RPCSEC_GSS, AUTH_DH, ...) or an `AUTH_NONE` with a body: the flavor
    /// and at most [`MAX_AUTH_BYTES`] bytes of body, uninterpreted.
    Other {
        /// The `auth_flavor`.
        flavor: u32,
        /// The body, without padding.
        body: Vec<u8>,
    },
}

/// The body of an `AUTH_SYS` credential, `authsys_parms` (RFC 5531 appendix A):
/// `machinename` is a `string<255>` (held here as UTF-8; a name that is not is refused when
/// decoded), `gids` an `unsigned int<16>`.
///
/// ```
/// use negotiate::onc::{Auth, AuthSys};
/// let cred = Auth::Sys(AuthSys { stamp: 0x5eed, machine_name: "client".into(), uid: 1000, gid: 100, gids: vec![100, 10] });
/// let mut out = Vec::new();
/// cred.encode(&mut out).unwrap();
/// assert_eq!(out.len(), 8 + 4 + 4 + 8 + 4 + 4 + 4 + 8);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSys {
    /// An arbitrary ID the caller's machine generates.
    pub stamp: u32,
    /// The caller's machine name, at most [`MAX_MACHINE_NAME`] bytes.
    pub machine_name: String,
    /// The caller's effective user ID.
    pub uid: u32,
    /// The caller's effective group ID.
    pub gid: u32,
    /// The caller's other groups, at most [`MAX_GIDS`].
    pub gids: Vec<u32>,
}

impl AuthSys {
    /// Checks the bounds of RFC 5531 appendix A and the 400-byte body of section 8.2, and
    /// returns the encoded body's length.
    fn body_len(&self) -> Result<usize, OncError> {
        let name = self.machine_name.len();
        if name > MAX_MACHINE_NAME as usize {
            return Err(OncError::TooLong {
                field: "authsys_parms.machinename",
                len: clamp(name),
                max: MAX_MACHINE_NAME,
            });
        }
        if self.gids.len() > MAX_GIDS as usize {
            return Err(OncError::TooLong { field: "authsys_parms.gids", len: clamp(self.gids.len()), max: MAX_GIDS });
        }
        // Always within 400: 4 + 4 + 256 + 4 + 4 + 4 + 64 = 340.
        Ok(4 + 4 + name.next_multiple_of(4) + 4 + 4 + 4 + 4 * self.gids.len())
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.stamp);
        put_opaque(out, self.machine_name.as_bytes());
        put_u32(out, self.uid);
        put_u32(out, self.gid);
        put_u32(out, self.gids.len() as u32);
        for &g in &self.gids {
            put_u32(out, g);
        }
    }

    /// Decodes an `authsys_parms` that must fill `body` exactly; `which` is "cred" or "verf".
    fn decode_body(body: &[u8], which: Which) -> Result<AuthSys, OncError> {
        let mut r = Reader::new(body);
        let stamp = r.u32(which.name("stamp"))?;
        let name = r.opaque(MAX_MACHINE_NAME, which.name("machinename length"), which.name("machinename"))?;
        let machine_name =
            std::str::from_utf8(name).map_err(|_| OncError::NotUtf8 { field: which.name("machinename") })?.to_owned();
        let uid = r.u32(which.name("uid"))?;
        let gid = r.u32(which.name("gid"))?;
        let n = r.u32(which.name("gids count"))?;
        if n > MAX_GIDS {
            return Err(OncError::TooLong { field: which.name("gids"), len: n, max: MAX_GIDS });
        }
        // n <= 16: at most 64 bytes, and only once the input is known to hold them.
        let words = r.padded(4 * n as usize, which.name("gids"))?;
        let gids = words.chunks_exact(4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]])).collect();
        if r.remaining() != 0 {
            return Err(OncError::Trailing { field: which.name("trailing bytes"), extra: r.remaining() });
        }
        Ok(AuthSys { stamp, machine_name, uid, gid, gids })
    }
}

fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Which `opaque_auth` of a call an error is in, so that its field names say so.
#[derive(Clone, Copy)]
pub(super) enum Which {
    Cred,
    Verf,
}

impl Which {
    pub(super) fn name(self, part: &'static str) -> &'static str {
        macro_rules! names {
            ($($p:literal),*) => {
                match (self, part) {
                    $((Which::Cred, $p) => concat!("cred.", $p), (Which::Verf, $p) => concat!("verf.", $p),)*
                    _ => part,
                }
            };
        }
        names!(
            "flavor",
            "body length",
            "body",
            "stamp",
            "machinename length",
            "machinename",
            "uid",
            "gid",
            "gids count",
            "gids",
            "trailing bytes"
        )
    }
}

impl Auth {
    /// The `auth_flavor` number: 0 for [`Auth::None`], 1 for [`Auth::Sys`].
    ///
    /// ```
    /// use negotiate::onc::Auth;
    /// assert_eq!(Auth::None.flavor(), 0);
    /// assert_eq!(Auth::Other { flavor: 6, body: vec![] }.flavor(), 6); // RPCSEC_GSS
    /// ```
    pub fn flavor(&self) -> u32 {
        match self {
            Auth::None => AUTH_NONE,
            Auth::Sys(_) => AUTH_SYS,
            Auth::Other { flavor, .. } => *flavor,
        }
    }

    /// Appends the `opaque_auth`: flavor, body length, body, padding. Refuses (appending
    /// nothing) a body over [`MAX_AUTH_BYTES`], or an [`AuthSys`] past its bounds.
    ///
    /// ```
    /// use negotiate::onc::{Auth, OncError};
    /// let mut out = Vec::new();
    /// Auth::Other { flavor: 9, body: vec![1, 2, 3] }.encode(&mut out).unwrap();
    /// assert_eq!(out, [0, 0, 0, 9, 0, 0, 0, 3, 1, 2, 3, 0]);
    /// let big = Auth::Other { flavor: 9, body: vec![0; 401] };
    /// assert!(matches!(big.encode(&mut out), Err(OncError::TooLong { max: 400, .. })));
    /// assert_eq!(out.len(), 12);
    /// ```
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), OncError> {
        match self {
            Auth::None => {
                put_u32(out, AUTH_NONE);
                put_u32(out, 0);
            }
            Auth::Sys(sys) => {
                let len = sys.body_len()?;
                put_u32(out, AUTH_SYS);
                put_u32(out, len as u32);
                sys.encode_body(out);
            }
            Auth::Other { flavor, body } => {
                if body.len() > MAX_AUTH_BYTES as usize {
                    return Err(OncError::TooLong {
                        field: "opaque_auth.body",
                        len: clamp(body.len()),
                        max: MAX_AUTH_BYTES,
                    });
                }
                put_u32(out, *flavor);
                put_opaque(out, body);
            }
        }
        Ok(())
    }

    /// The encoded length, or the bound it breaks.
    fn encoded_len(&self) -> Result<usize, OncError> {
        Ok(8 + match self {
            Auth::None => 0,
            Auth::Sys(sys) => sys.body_len()?,
            Auth::Other { body, .. } if body.len() > MAX_AUTH_BYTES as usize => {
                return Err(OncError::TooLong {
                    field: "opaque_auth.body",
                    len: clamp(body.len()),
                    max: MAX_AUTH_BYTES,
                })
            }
            Auth::Other { body, .. } => body.len().next_multiple_of(4),
        })
    }

    pub(super) fn decode(r: &mut Reader<'_>, which: Which) -> Result<Auth, OncError> {
        let flavor = r.u32(which.name("flavor"))?;
        let body = r.opaque(MAX_AUTH_BYTES, which.name("body length"), which.name("body"))?;
        Ok(match flavor {
            AUTH_NONE if body.is_empty() => Auth::None,
            AUTH_SYS => Auth::Sys(AuthSys::decode_body(body, which)?),
            _ => Auth::Other { flavor, body: body.to_vec() },
        })
    }
}

/// The header of an RPC call (`rpc_msg` with `msg_type` CALL, RFC 5531 section 9): what
/// precedes the procedure's arguments. `rpcvers` is always 2 ([`RPC_VERSION`]).
///
/// ```
/// use negotiate::onc::{Auth, AuthSys, CallHeader};
/// let call = CallHeader::new(7, 100_003, 3, 0);
/// let mut out = Vec::new();
/// call.encode(&mut out).unwrap();
/// assert_eq!(out.len(), 40);
/// let (back, args_at) = CallHeader::decode(&out).unwrap();
/// assert_eq!((back, args_at), (call.clone(), 40));
///
/// // AUTH_SYS, and the arguments after the header in one message:
/// let cred = Auth::Sys(AuthSys { machine_name: "client".into(), uid: 1000, gid: 1000, ..AuthSys::default() });
/// let msg = call.with_cred(cred).message(&[0, 0, 0, 42]).unwrap();
/// let (header, args_at) = CallHeader::decode(&msg).unwrap();
/// assert_eq!((header.proc, &msg[args_at..]), (0, &[0, 0, 0, 42][..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallHeader {
    /// The transaction ID the reply will carry ([`super::XidSource`] hands them out).
    pub xid: u32,
    /// The program number.
    pub prog: u32,
    /// The program's version.
    pub vers: u32,
    /// The procedure number.
    pub proc: u32,
    /// The credential.
    pub cred: Auth,
    /// The verifier.
    pub verf: Auth,
}

impl CallHeader {
    /// A call with an `AUTH_NONE` credential and verifier.
    ///
    /// ```
    /// use negotiate::onc::{Auth, CallHeader};
    /// let h = CallHeader::new(1, 2, 3, 4);
    /// assert_eq!((h.xid, h.prog, h.vers, h.proc, h.cred, h.verf), (1, 2, 3, 4, Auth::None, Auth::None));
    /// ```
    pub fn new(xid: u32, prog: u32, vers: u32, proc: u32) -> Self {
        CallHeader { xid, prog, vers, proc, cred: Auth::None, verf: Auth::None }
    }

    /// The same call with credential `cred` (the verifier stays as it was; `AUTH_NONE` is
    /// the verifier that goes with `AUTH_SYS`).
    ///
    /// ```
    /// use negotiate::onc::{Auth, AuthSys, CallHeader};
    /// let h = CallHeader::new(1, 2, 3, 4).with_cred(Auth::Sys(AuthSys::default()));
    /// assert_eq!((h.cred.flavor(), h.verf.flavor()), (1, 0));
    /// ```
    pub fn with_cred(mut self, cred: Auth) -> Self {
        self.cred = cred;
        self
    }

    /// Appends the header: xid, CALL (0), rpcvers 2, prog, vers, proc, cred, verf. Refuses
    /// (appending nothing) a credential or verifier past its bounds ([`Auth::encode`]).
    ///
    /// ```
    /// use negotiate::onc::CallHeader;
    /// let mut out = Vec::new();
    /// CallHeader::new(0x0102_0304, 100_003, 3, 1).encode(&mut out).unwrap();
    /// assert_eq!(out[..8], [1, 2, 3, 4, 0, 0, 0, 0]);
    /// assert_eq!(out[8..12], [0, 0, 0, 2]);
    /// ```
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), OncError> {
        out.reserve(self.encoded_len()?);
        for w in [self.xid, CALL, RPC_VERSION, self.prog, self.vers, self.proc] {
            put_u32(out, w);
        }
        self.cred.encode(out)?;
        self.verf.encode(out)
    }

    /// The header's encoded length, or the bound a credential or verifier breaks.
    ///
    /// ```
    /// use negotiate::onc::CallHeader;
    /// assert_eq!(CallHeader::new(1, 2, 3, 4).encoded_len(), Ok(40));
    /// ```
    pub fn encoded_len(&self) -> Result<usize, OncError> {
        Ok(24 + self.cred.encoded_len()? + self.verf.encoded_len()?)
    }

    /// The whole call message: the header followed by `args` (the procedure's arguments,
    /// already XDR-encoded), ready for [`crate::client::Client::call`].
    ///
    /// ```
    /// use negotiate::onc::CallHeader;
    /// let msg = CallHeader::new(1, 2, 3, 4).message(&[9, 9, 9, 9]).unwrap();
    /// assert_eq!((msg.len(), &msg[40..]), (44, &[9, 9, 9, 9][..]));
    /// ```
    pub fn message(&self, args: &[u8]) -> Result<Vec<u8>, OncError> {
        let mut out = Vec::with_capacity(self.encoded_len()? + args.len());
        self.encode(&mut out)?;
        out.extend_from_slice(args);
        Ok(out)
    }

    /// Decodes a call header from the start of `msg` and returns it with the offset of the
    /// arguments. Every length is checked against its bound (a body of at most
    /// [`MAX_AUTH_BYTES`], [`MAX_MACHINE_NAME`], [`MAX_GIDS`]) and against the input before
    /// anything is kept, so nothing is allocated by a peer's length beyond the input. A call
    /// whose `rpcvers` is not 2 is [`OncError::RpcVersion`] (answer it with
    /// [`super::reply_rpc_mismatch`]); a malformed credential or verifier names a `cred.` or
    /// `verf.` field ([`OncError::in_auth`]: answer it with [`super::reply_auth_error`]).
    ///
    /// ```
    /// use negotiate::onc::{CallHeader, OncError};
    /// let msg = CallHeader::new(5, 100, 1, 2).message(&[]).unwrap();
    /// assert_eq!(CallHeader::decode(&msg).unwrap().0.proc, 2);
    /// assert!(matches!(CallHeader::decode(&msg[..39]), Err(OncError::Truncated { field: "verf.body length", .. })));
    /// ```
    pub fn decode(msg: &[u8]) -> Result<(CallHeader, usize), OncError> {
        let mut r = Reader::new(msg);
        let xid = r.u32("xid")?;
        let mtype = r.u32("msg_type")?;
        if mtype != CALL {
            return Err(OncError::Unexpected { field: "msg_type", value: mtype });
        }
        let rpcvers = r.u32("rpcvers")?;
        if rpcvers != RPC_VERSION {
            return Err(OncError::RpcVersion { xid, rpcvers });
        }
        let prog = r.u32("prog")?;
        let vers = r.u32("vers")?;
        let proc = r.u32("proc")?;
        let cred = Auth::decode(&mut r, Which::Cred)?;
        let verf = Auth::decode(&mut r, Which::Verf)?;
        Ok((CallHeader { xid, prog, vers, proc, cred, verf }, r.at))
    }
}
