//! ONC RPC (RFC 5531) for the guest examples that talk to the Linux kernel's NFS server: an
//! XDR builder for their arguments, and the call header and reply check of the library's
//! `negotiate::onc` (the one home of those rules), in the shapes the examples use.
//! Included by each example with `#[path = "common/onc_rpc.rs"] mod onc_rpc;`; an example
//! need not use every item.
#![allow(dead_code)]

pub const CALL: u32 = 0;
pub const REPLY: u32 = 1;
pub const MSG_ACCEPTED: u32 = 0;
pub const MSG_DENIED: u32 = 1;
pub const SUCCESS: u32 = 0;
pub const PROG_UNAVAIL: u32 = 1;
pub const PROC_UNAVAIL: u32 = 3;
pub const GARBAGE_ARGS: u32 = 4;
pub const RPC_MISMATCH: u32 = 0;
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
pub const NFS_PROGRAM: u32 = 100003;

/// XDR encoding into a byte vector.
#[derive(Default)]
pub struct Xdr(pub Vec<u8>);

impl Xdr {
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn fixed(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }
    pub fn opaque(self, b: &[u8]) -> Self {
        self.u32(b.len() as u32).fixed(b)
    }
}

/// An RPC call header (RFC 5531 section 9) from `negotiate::onc::CallHeader`: xid, program,
/// version, procedure, the credential (AUTH_SYS uid 0 gid 0 from machine "rpcrdma-rs", or
/// AUTH_NONE), an AUTH_NONE verifier.
pub fn rpc_call(xid: u32, prog: u32, vers: u32, proc_: u32, auth_sys: bool) -> Xdr {
    use negotiate::onc::{Auth, AuthSys, CallHeader};
    let mut header = CallHeader::new(xid, prog, vers, proc_);
    if auth_sys {
        let cred = AuthSys { stamp: 0x5eed, machine_name: "rpcrdma-rs".into(), ..AuthSys::default() };
        header = header.with_cred(Auth::Sys(cred));
    }
    let mut x = Xdr::default();
    header.encode(&mut x.0).expect("a header within RFC 5531's bounds");
    x
}

/// Big-endian XDR words as bytes.
pub fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The big-endian word at byte `at`.
pub fn word(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()))
}

/// Reads an accepted, successful RPC reply to `xid` (`negotiate::onc::results`) and returns
/// the offset of its results, or says what it is instead.
pub fn accepted_success(reply: &[u8], xid: u32) -> Result<usize, String> {
    let results = negotiate::onc::results(reply, xid).map_err(|e| e.to_string())?;
    Ok(reply.len() - results.len())
}
