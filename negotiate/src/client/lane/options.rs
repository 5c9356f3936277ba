//! A lane's messages that are not calls awaiting replies: -00's RDMA_OPTIONAL (draft section
//! 3.1) and -07's extension messages (its Appendix B), each sent and its outcome waited for;
//! -07's call-only calls (its section 4.7), sent and not waited for; and the
//! transport-properties exchange built on RDMA_OPTIONAL
//! (`specs/rpcrdma2-transport-properties.txt`).

use super::workers::Job;
use super::*;
use crate::connection::Connection;
use crate::datapath::send_call_only;
use crate::extension07::ExtensionReply;
use rpcrdma_v2::dialect::Dialect;
use rpcrdma_v2::draft07::extension::ExtensionMessage;

/// How a message of ours that is not a call starts in a lane's core
/// ([`Connection::start_option`], [`Connection::start_extension`]).
type StartMessage<B> = fn(&mut Connection<Arc<Link<B>>>, Instant) -> Result<u32, ClientError>;

impl<B: Backend> Shared<B> {
    /// Sends an RDMA_OPTIONAL and waits for its outcome, as
    /// [`Client::send_option`](super::Client::send_option) says.
    pub(in crate::client) fn send_option(
        &self,
        opttype: u32,
        optinfo: &[u8],
        payload: &[u8],
    ) -> Result<OptionReply, ClientError> {
        let marshal = |xid: u32, t: &Transmit| {
            let threshold = t.thresholds.call;
            option_message(xid, t.credits, opttype, optinfo, payload, threshold).ok_or(ClientError::OptionTooLarge {
                len: 24 + optinfo.len().div_ceil(4) * 4 + payload.len(),
                threshold,
            })
        };
        let result = self.exchange(Connection::start_option, marshal, send_error, |step| match step {
            // Judged by the core as the answer to ours: it decodes.
            Ok(message) => OptionReply::from_message(&message).ok_or(ClientError::Closed),
            Err(ClientError::Call(CallFailure::Peer(PeerError::InvalOption))) => Ok(OptionReply::NotSupported),
            Err(e) => Err(e),
        });
        log::debug!("RDMA_OPTIONAL {opttype:#x}: {result:?}");
        result
    }

    /// Sends a message of a -07 extension's header type and waits for its outcome, as
    /// [`Client::send_extension`](super::Client::send_extension) says.
    pub(in crate::client) fn send_extension(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, ClientError> {
        let marshal = |xid: u32, t: &Transmit| {
            let bytes = ExtensionMessage::to_message(xid, t.credits, htype, body);
            let threshold = t.thresholds.call;
            match bytes.len() > threshold {
                true => Err(ClientError::OptionTooLarge { len: bytes.len(), threshold }),
                false => Ok(bytes),
            }
        };
        // (A -07 message: stamped with the highest running total sent, 4.2.1.)
        let result = self.exchange(Connection::start_extension, marshal, send_draft07, |step| match step {
            // Judged by the core as the answer to ours: an extension's message.
            Ok(message) => ExtensionReply::from_message(&message).ok_or(ClientError::Closed),
            Err(ClientError::Call(CallFailure::Peer(PeerError::Draft07(e)))) => Ok(ExtensionReply::from_error(&e)),
            Err(e) => Err(e),
        });
        log::debug!("-07 extension message {htype:#x}: {result:?}");
        result
    }

    /// Sends call `xid` (`message`) of a call-only procedure and returns once it is posted, as
    /// [`Client::call_only`](super::Client::call_only) says.
    pub(in crate::client) fn call_only(&self, xid: u32, message: &[u8]) -> Result<(), ClientError> {
        {
            let mut st = self.lock();
            let now = Instant::now();
            st.core.start_call_only(xid, now)?;
            st.last_active = now;
            st.waiters.insert(xid, Waiter::Thread(Sleeper::current()));
            st.wake();
        }
        let result = loop {
            match self.wait_step(xid).0 {
                CallStep::Transmit { transmit: t, link } => {
                    match send_call_only(&link.conn, message, &CallParams::from(&t)) {
                        Ok(sent) => {
                            let parts = sent.parts();
                            // No chunk, no memory to hold: nothing comes back for it.
                            let _ = sent.abandon(&link.conn, None);
                            self.lock().core.handle_sent_call_only(xid, parts, Instant::now());
                            break Ok(());
                        }
                        // A broken connection: the core ends it when the next one comes up
                        // (`Requester::start_call_only`: a new connection is not settled on
                        // -07 before its first call's answer).
                        Err(_) if link.conn.qp().state() == QpState::Error => {}
                        Err(e) => {
                            self.lock().core.cancel(xid, Instant::now());
                            break Err(e.into());
                        }
                    }
                }
                CallStep::Reply { .. } => unreachable!("a call-only call is over once sent"),
                CallStep::Failed(e) => break Err(e),
            }
        };
        self.end(xid, None);
        result
    }

    /// One exchange of a message of ours that is not a call: `start` begins it in the core
    /// (which picks its XID), `marshal` writes it for its transmission, `send` posts it, and
    /// `outcome` makes the result of the answer (its bytes) or the failure. Never marshaled
    /// ahead or posted by another thread; a broken connection fails it through the core.
    fn exchange<T>(
        &self,
        start: StartMessage<B>,
        marshal: impl Fn(u32, &Transmit) -> Result<Vec<u8>, ClientError>,
        send: fn(&Transport<B>, &[u8]) -> Result<(), DataPathError>,
        outcome: impl FnOnce(Result<Vec<u8>, ClientError>) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let xid = {
            let mut st = self.lock();
            let now = Instant::now();
            let xid = start(&mut st.core, now)?;
            st.last_active = now;
            st.waiters.insert(xid, Waiter::Thread(Sleeper::current()));
            st.wake();
            xid
        };
        let result = loop {
            match self.wait_step(xid).0 {
                CallStep::Transmit { transmit: t, link } => {
                    let sent = marshal(xid, &t).and_then(|bytes| match send(&link.conn, &bytes) {
                        Err(_) if link.conn.qp().state() == QpState::Error => Ok(()),
                        other => other.map_err(ClientError::from),
                    });
                    if let Err(e) = sent {
                        self.lock().core.cancel(xid, Instant::now());
                        break outcome(Err(e));
                    }
                }
                CallStep::Reply { message, .. } => break outcome(Ok(message)),
                CallStep::Failed(e) => break outcome(Err(e)),
            }
        };
        self.end(xid, None);
        result
    }

    /// The transport-properties exchange (`specs/rpcrdma2-transport-properties.txt` section
    /// 2), once per connection, after a call answered on a connection settled on Version Two
    /// (section 2.1: never on Version One), when [`ClientConfig::properties`] says what to
    /// state. The reply changes the thresholds of later calls; RDMA_ERR_INVAL_OPTION, a
    /// malformed reply or no reply leaves private data and the defaults in effect (sections
    /// 2.3 and 2.5).
    pub(super) fn exchange_properties(&self) {
        let Some(ours) = self.cfg.properties else { return };
        let link = {
            let mut st = self.lock();
            // -00's RDMA_OPTIONAL: on -07, header type 5 is RDMA2_GRANT, and properties travel
            // in CONNPROP (section 5).
            if st.core.version().is_none_or(|v| v < Version::TWO) || st.core.dialect() != Some(Dialect::Cel00) {
                return;
            }
            let Some(link) = st.core.link().cloned() else { return };
            if st.properties_for.as_ref().is_some_and(|done| done.ptr_eq(&Arc::downgrade(&link))) {
                return;
            }
            st.properties_for = Some(Arc::downgrade(&link));
            link
        };
        let mut optinfo = [0u8; 64];
        let Ok(len) = ours.encode(Exchange::Request, &mut optinfo) else { return };
        let theirs = match self.send_option(RPCRDMA2_OPT_PROPERTIES, &optinfo[..len], &[]) {
            Ok(OptionReply::Answered { opttype: RPCRDMA2_OPT_PROPERTIES, optinfo }) => {
                match TransportProperties::decode(&optinfo) {
                    Ok((Exchange::Reply, theirs)) => Some(theirs),
                    _ => None,
                }
            }
            _ => None,
        };
        let mut st = self.lock();
        // Only for the connection it was made on: a reconnect starts over.
        if st.core.link().is_some_and(|now| Arc::ptr_eq(now, &link)) {
            match theirs {
                Some(theirs) => st.core.handle_properties(ours, theirs),
                None => st.core.handle_properties_refused(),
            }
        }
    }

    /// After an async call succeeded: the exchange [`Shared::exchange_properties`] makes, by
    /// the client's workers, so that neither the caller's executor nor the dispatcher blocks
    /// on it. (Not made, with a log, only when no worker thread can be had: private data and
    /// the defaults stay in effect, as when a responder answers nothing, section 2.5, and the
    /// next async call asks again.)
    pub(in crate::client) fn exchange_properties_soon(&self) {
        if self.cfg.properties.is_none() {
            return;
        }
        {
            let mut st = self.lock();
            let Some(link) = st.core.link() else { return };
            let done = st.properties_for.as_ref().is_some_and(|done| done.ptr_eq(&Arc::downgrade(link)));
            if done || st.exchange_queued || st.core.dialect() != Some(Dialect::Cel00) {
                return;
            }
            st.exchange_queued = true;
        }
        let Some(lane) = self.me.upgrade() else { return };
        if self.workers.submit(Job::Exchange { lane }).is_some() {
            self.lock().exchange_queued = false;
            log::warn!("no worker for the transport-properties exchange with {}: not made now", self.addr);
        }
    }

    /// What the current connection's transport-properties exchange gave.
    pub(in crate::client) fn peer_properties(&self) -> PeerProperties {
        self.lock().core.peer_properties()
    }
}
