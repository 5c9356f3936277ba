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
//! * [memory windows](crate::QueuePair::post_bind_window) open part of a region to one
//!   connection's peer, with their own rights; Send with Invalidate kills such a window at the
//!   receiver and reports its rkey in the Receive completion, and naming anything else (a
//!   region's rkey included, as hardware refuses for `ibv_reg_mr` keys) fails the Receive and
//!   tears the connection down;
//! * keys are unpredictable and never reissued, addresses are random page-aligned bases;
//! * private data is limited to 56 bytes on connect and 196 on accept and delivered zero-padded
//!   to that size.
//!
//! The rules above are written once (in the crate's private `rules` module) and applied by both
//! software backends: here at post time, by the [TCP backend](crate::tcp) when a frame arrives.
//!
//! Addresses are names in a process-global registry, written `inproc:NAME`; `inproc:*` binds a
//! fresh unique name.
//!
//! Unsignaled work requests ([`SendFlags`](crate::SendFlags)) follow the verbs: a successful
//! one queues no completion and holds its send-queue slot until a later completion is reaped.
//!
//! Not modelled: completion-queue overflow (the queue grows), inline data, immediate data, atomics, fast registration (re-register or bind a window
//! instead), shared receive queues.

mod cm;
mod keys;
mod qp;
pub(crate) mod region;
/// The verbs rules both software backends enforce (this one and [`crate::tcp`]).
pub(crate) mod rules;

use std::time::Duration;

pub(crate) use crate::lock;
pub use cm::{InProcListener, InProcRequest};
pub(crate) use keys::{next_id, next_key};
pub use qp::InProcQp;
pub use region::{InProcPd, InProcRegion, RegionBytes};

use crate::{Backend, ListenOptions, QpCaps, Result};

/// The in-process backend. A unit value: all state is per protection domain, connection and
/// listener, plus one process-global registry of listening names.
///
/// ```
/// use std::time::Duration;
/// use rpcrdma_verbs::*;
/// let t = Duration::from_secs(5);
/// // Addresses are names in this process: `inproc:*` picks a fresh one.
/// let listener = InProcess.listen("inproc:my-server").unwrap();
/// assert_eq!(listener.local_addr(), "inproc:my-server");
/// assert_eq!(InProcess.listen("inproc:my-server").map(|_| ()), Err(Error::AddressInUse("inproc:my-server".into())));
///
/// let client = std::thread::spawn(move || {
///     let pd = InProcess.alloc_pd().unwrap();
///     let (qp, accepted) = InProcess.connect(&pd, "inproc:my-server", b"v1", QpCaps::default(), t).unwrap();
///     assert_eq!(&accepted[..2], b"ok");
///     qp // dropping a queue pair disconnects it: keep it until joined
/// });
/// let req = listener.get_request(t).unwrap();
/// let qp = req.accept(&InProcess.alloc_pd().unwrap(), b"ok", QpCaps::default()).unwrap();
/// let client_qp = client.join().unwrap();
/// assert_eq!((client_qp.state(), qp.state()), (QpState::Ready, QpState::Ready));
/// drop(client_qp);
/// assert_eq!(qp.cm_event(t), Some(CmEvent::Disconnected));
/// ```
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

    fn wakes_wakers(&self) -> bool {
        true
    }

    /// Reads and Writes are copies made by the poster (`qp::InProcQp::rdma`).
    fn rdma_at_post(&self) -> bool {
        true
    }

    fn listen_with(&self, addr: &str, opts: &ListenOptions) -> Result<InProcListener> {
        cm::listen(addr, opts)
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
