//! The in-process backend: the embedded default, with no C dependency.
//!
//! Both ends of a connection live in one process; an RDMA operation is a bounds- and
//! key-checked copy between registered regions, executed synchronously when posted. It keeps
//! hardware's rules, so code that works here is not relying on anything a NIC would refuse:
//!
//! * a Send with no Receive posted fails the sender with
//!   [`RnrRetryExceeded`](crate::Status::RnrRetryExceeded) (`rnr_retry_count` 0); one larger
//!   than the Receive fails the Receive with
//!   [`LocalLengthError`](crate::Status::LocalLengthError) and the sender with
//!   [`RemoteInvalidRequest`](crate::Status::RemoteInvalidRequest); both tear the connection
//!   down;
//! * RDMA Read/Write land only inside a registered region of the peer's protection domain,
//!   with a live rkey and the right access flag, else
//!   [`RemoteAccessError`](crate::Status::RemoteAccessError), the connection is torn down, and
//!   no byte anywhere has moved;
//! * work requests on a queue pair execute in posting order, so Writes posted before a Send are
//!   visible when its Receive completes;
//! * Send with Invalidate kills the named rkey at the receiver and reports it in the Receive
//!   completion;
//! * keys are unpredictable and never reissued, addresses are random page-aligned bases;
//! * private data is limited to 56 bytes on connect and 196 on accept and delivered zero-padded
//!   to that size.
//!
//! Addresses are names in a process-global registry, written `inproc:NAME`; `inproc:*` binds a
//! fresh unique name.
//!
//! Not modelled: completion-queue overflow (the queue grows), unsignaled work requests,
//! inline data, immediate data, atomics, memory windows and fast registration (re-register
//! instead), shared receive queues.

mod cm;
mod keys;
mod qp;
mod region;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub use cm::{InProcListener, InProcRequest};
pub use qp::InProcQp;
pub use region::{InProcPd, InProcRegion};

use crate::{Backend, QpCaps, Result};

/// The in-process backend. A unit value: all state is per protection domain, connection and
/// listener, plus one process-global registry of listening names.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcess;

impl Backend for InProcess {
    type Pd = InProcPd;
    type Region = InProcRegion;
    type Qp = InProcQp;
    type Listener = InProcListener;
    type Request = InProcRequest;

    /// `inproc:*`: a fresh, unique name.
    fn any_address(&self) -> String {
        "inproc:*".to_string()
    }

    fn alloc_pd(&self) -> Result<InProcPd> {
        Ok(InProcPd::new())
    }

    fn listen(&self, addr: &str) -> Result<InProcListener> {
        cm::listen(addr)
    }

    fn connect(
        &self,
        pd: &InProcPd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> Result<(InProcQp, Vec<u8>)> {
        cm::connect(pd, addr, private_data, caps, timeout)
    }
}

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent
/// before anything that can panic, so a panic elsewhere (a failed test assertion inside
/// `with_mut`, say) must not turn every later call into a panic too.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
