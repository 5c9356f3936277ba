//! ONC RPC (RFC 5531) by hand, for the guest examples that talk to the Linux kernel's NFS
//! server: an XDR builder, a call header, and a check of an accepted, successful reply.
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

/// An RPC call header (RFC 5531 section 9): xid, CALL, rpcvers 2, program, version,
/// procedure, the credential (AUTH_SYS uid 0, or AUTH_NONE), an AUTH_NONE verifier.
pub fn rpc_call(xid: u32, prog: u32, vers: u32, proc_: u32, auth_sys: bool) -> Xdr {
    let x = Xdr::default().u32(xid).u32(CALL).u32(2).u32(prog).u32(vers).u32(proc_);
    let x = if auth_sys {
        // authsys_parms: stamp, machinename, uid 0, gid 0, no gids.
        let body = Xdr::default().u32(0x5eed).opaque(b"rpcrdma-rs").u32(0).u32(0).u32(0);
        x.u32(AUTH_SYS).opaque(&body.0)
    } else {
        x.u32(AUTH_NONE).u32(0)
    };
    x.u32(AUTH_NONE).u32(0)
}

/// Big-endian XDR words as bytes.
pub fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The big-endian word at byte `at`.
pub fn word(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()))
}

/// Reads an accepted, successful RPC reply to `xid` and returns the offset of its results, or
/// says what it is instead.
pub fn accepted_success(reply: &[u8], xid: u32) -> Result<usize, String> {
    let w = |i: usize| word(reply, i * 4);
    let (Some(rx), Some(mtype), Some(stat)) = (w(0), w(1), w(2)) else {
        return Err(format!("reply of {} bytes is too short", reply.len()));
    };
    if rx != xid {
        return Err(format!("reply XID {rx:#x}, call XID {xid:#x}"));
    }
    if mtype != REPLY {
        return Err(format!("msg_type {mtype}, not REPLY"));
    }
    if stat != MSG_ACCEPTED {
        return Err(format!("reply_stat {stat} (MSG_DENIED), words {:?}", (3..6).map(w).collect::<Vec<_>>()));
    }
    let verf_len = w(4).ok_or("no verifier")? as usize;
    let at = 20 + verf_len.next_multiple_of(4);
    let accept = word(reply, at).ok_or("no accept_stat")?;
    if accept != SUCCESS {
        return Err(format!("accept_stat {accept}, not SUCCESS"));
    }
    Ok(at + 4)
}
