//! [`CallError`]: why a typed call has no results.

use crate::client::ClientError;
use crate::onc::{OncError, Rejected};

/// Why a typed call ([`RpcClient`](super::RpcClient)) has no results. Each names the
/// procedure (its name in the specification, program and version) and reads as a sentence
/// with its cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The arguments break a bound of the specification (a string or array longer than its
    /// `<N>`): nothing was sent.
    #[error("{procedure}: the arguments have no XDR encoding: {source}")]
    Arguments {
        /// The procedure.
        procedure: Named,
        /// What bound they break.
        #[source]
        source: xdr_spec_rt::Error,
    },
    /// The call did not complete: the connection, the RPC-over-RDMA transport, or the
    /// responder's RDMA_ERROR ([`ClientError`] says which).
    #[error("{procedure}: the call did not complete: {source}")]
    Transport {
        /// The procedure.
        procedure: Named,
        /// The transport's error.
        #[source]
        source: ClientError,
    },
    /// PROG_UNAVAIL: the server does not serve the program.
    #[error("{procedure}: the server does not serve the program")]
    ProgramUnavailable {
        /// The procedure.
        procedure: Named,
    },
    /// PROG_MISMATCH: the server serves other versions of the program.
    #[error("{procedure}: the server has versions {low} to {high} of the program")]
    VersionMismatch {
        /// The procedure.
        procedure: Named,
        /// The lowest version it serves.
        low: u32,
        /// The highest.
        high: u32,
    },
    /// PROC_UNAVAIL: the server's version of the program has no such procedure.
    #[error("{procedure}: the server's version of the program has no such procedure")]
    ProcedureUnavailable {
        /// The procedure.
        procedure: Named,
    },
    /// GARBAGE_ARGS: the server could not decode the arguments as the procedure's.
    #[error("{procedure}: the server could not decode the arguments (GARBAGE_ARGS)")]
    GarbageArgs {
        /// The procedure.
        procedure: Named,
    },
    /// SYSTEM_ERR: the server failed to carry the call out (its handler failed or
    /// panicked, or its results could not be encoded: its log says which).
    #[error("{procedure}: the server failed to carry the call out (SYSTEM_ERR)")]
    SystemError {
        /// The procedure.
        procedure: Named,
    },
    /// MSG_DENIED: RPC_MISMATCH or AUTH_ERROR.
    #[error("{procedure}: the server denied the call: {rejected}")]
    Denied {
        /// The procedure.
        procedure: Named,
        /// Why.
        rejected: Rejected,
    },
    /// The reply is not an RPC reply to this call (it does not decode, or answers another
    /// XID).
    #[error("{procedure}: the reply is not an RPC reply to the call: {source}")]
    BadReply {
        /// The procedure.
        procedure: Named,
        /// What is wrong with it.
        #[source]
        source: OncError,
    },
    /// The results do not decode as the procedure's.
    #[error("{procedure}: the results do not decode as the procedure's: {source}")]
    BadResults {
        /// The procedure.
        procedure: Named,
        /// Where decoding failed.
        #[source]
        source: xdr_spec_rt::Error,
    },
}

/// A procedure as errors name it: its name in the specification, its program and version.
///
/// ```
/// use negotiate::service::CallError;
/// # use xdr_spec_rt::rpc::Procedure;
/// # struct Get;
/// # impl Procedure for Get {
/// #     const PROGRAM: u32 = 0x2000_0f02;
/// #     const VERSION: u32 = 1;
/// #     const PROCEDURE: u32 = 2;
/// #     const NAME: &'static str = "KV_GET";
/// #     type Args<'a> = u32;
/// #     type Results<'a> = u32;
/// # }
/// let named = negotiate::service::error::Named::of::<Get>();
/// assert_eq!(named.to_string(), "KV_GET (program 0x20000f02 version 1)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    /// The procedure's name in the specification.
    pub name: &'static str,
    /// Its program.
    pub program: u32,
    /// Its version.
    pub version: u32,
    /// Its number.
    pub procedure: u32,
}

impl Named {
    /// Procedure `P`.
    pub fn of<P: xdr_spec_rt::rpc::Procedure>() -> Named {
        Named { name: P::NAME, program: P::PROGRAM, version: P::VERSION, procedure: P::PROCEDURE }
    }
}

impl std::fmt::Display for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (program {:#x} version {})", self.name, self.program, self.version)
    }
}
