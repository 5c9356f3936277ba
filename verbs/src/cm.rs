//! Connection-manager vocabulary shared by every backend: private data limits and events.

/// The most private data an active side may send with a connect request: 56 bytes, the
/// InfiniBand CM REQ limit that `rdma_connect` enforces.
pub const CONNECT_PRIVATE_DATA_MAX: usize = 56;

/// The most private data a passive side may send with its accept: 196 bytes, the InfiniBand
/// CM REP limit that `rdma_accept` enforces.
pub const ACCEPT_PRIVATE_DATA_MAX: usize = 196;

/// A connection-manager event on an established connection (`enum rdma_cm_event_type`,
/// the part that concerns a connected queue pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CmEvent {
    /// The connection is gone (`RDMA_CM_EVENT_DISCONNECTED`): either side disconnected, or a
    /// fatal error on either side tore it down. Delivered once to each side.
    Disconnected,
}

/// Checks `data` against `max` and returns it zero-padded to exactly `max` bytes, which is how
/// rdma_cm delivers private data: the receiver sees the CM message's whole field, never the
/// length the sender used.
///
/// ```
/// use rpcrdma_verbs::{pad_private_data, CONNECT_PRIVATE_DATA_MAX};
/// let padded = pad_private_data(&[1, 2, 3], CONNECT_PRIVATE_DATA_MAX).unwrap();
/// assert_eq!(padded.len(), 56);
/// assert_eq!(&padded[..4], &[1, 2, 3, 0]);
/// assert!(pad_private_data(&[0; 57], CONNECT_PRIVATE_DATA_MAX).is_err());
/// ```
pub fn pad_private_data(data: &[u8], max: usize) -> crate::Result<Vec<u8>> {
    if data.len() > max {
        return Err(crate::Error::PrivateDataTooLong { len: data.len(), max });
    }
    let mut padded = vec![0; max];
    padded[..data.len()].copy_from_slice(data);
    Ok(padded)
}
