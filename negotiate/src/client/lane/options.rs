//! A lane's Version Two RDMA_OPTIONAL traffic: sending one and waiting for its outcome
//! (draft section 3.1), and the transport-properties exchange built on it
//! (`specs/rpcrdma2-transport-properties.txt`).

use super::*;
use rpcrdma_v2::dialect::Dialect;

impl<B: Backend> Shared<B> {
    /// Sends an RDMA_OPTIONAL and waits for its outcome, as
    /// [`Client::send_option`](super::Client::send_option) says.
    pub(in crate::client) fn send_option(
        &self,
        opttype: u32,
        optinfo: &[u8],
        payload: &[u8],
    ) -> Result<OptionReply, ClientError> {
        let xid = {
            let mut st = self.lock();
            let now = Instant::now();
            let xid = st.core.start_option(now)?;
            st.last_active = now;
            st.waiters.insert(xid, Waiter::Thread(std::thread::current()));
            st.wake();
            xid
        };
        let result = loop {
            // An RDMA_OPTIONAL is never marshaled ahead or posted by another thread.
            match self.wait_step(xid).0 {
                CallStep::Transmit { transmit: t, link } => {
                    let threshold = t.thresholds.call;
                    let Some(bytes) = option_message(xid, t.credits, opttype, optinfo, payload, threshold) else {
                        let len = 24 + optinfo.len().div_ceil(4) * 4 + payload.len();
                        self.lock().core.cancel(xid, Instant::now());
                        break Err(ClientError::OptionTooLarge { len, threshold });
                    };
                    match send_error(&link.conn, &bytes) {
                        Ok(()) => {}
                        // A broken connection fails the option through the core.
                        Err(_) if link.conn.qp().state() == QpState::Error => {}
                        Err(e) => {
                            self.lock().core.cancel(xid, Instant::now());
                            break Err(e.into());
                        }
                    }
                }
                CallStep::Reply { message, .. } => {
                    // Judged by the core as the answer to ours: it decodes.
                    break OptionReply::from_message(&message).ok_or(ClientError::Closed);
                }
                CallStep::Failed(ClientError::Call(CallFailure::Peer(PeerError::InvalOption))) => {
                    break Ok(OptionReply::NotSupported);
                }
                CallStep::Failed(e) => break Err(e),
            }
        };
        self.end(xid, None);
        log::debug!("RDMA_OPTIONAL {opttype:#x} (XID {xid:#010x}): {result:?}");
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
    /// the dispatcher, so that the caller's executor never blocks on it.
    pub(in crate::client) fn exchange_properties_soon(&self) {
        if self.cfg.properties.is_none() {
            return;
        }
        let mut st = self.lock();
        let Some(link) = st.core.link() else { return };
        let done = st.properties_for.as_ref().is_some_and(|done| done.ptr_eq(&Arc::downgrade(link)));
        if !done && st.core.dialect() == Some(Dialect::Cel00) {
            st.exchange_due = true;
            self.cv.notify_one();
        }
    }

    /// What the current connection's transport-properties exchange gave.
    pub(in crate::client) fn peer_properties(&self) -> PeerProperties {
        self.lock().core.peer_properties()
    }
}
