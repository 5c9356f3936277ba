//! [`Transport::post_sq_chain`]: a reply's Writes and Send posted as one chain, and what a
//! chain refused part way gives back.

use std::time::Duration;

use rpcrdma_verbs::{
    Access, Backend, ConnectRequest, InProcess, Listener, MemoryRegion, ProtectionDomain, QpCaps, QueuePair, RemoteBuf,
    Sge,
};

use super::{ChainedWrite, DataPathError, Transport};

const T: Duration = Duration::from_secs(5);

/// A transport whose queue pair has `max_send_wr` send-queue slots, and its peer's queue pair
/// with eight Receives posted and a 256-byte region the transport may RDMA-Write.
fn pair(
    max_send_wr: u32,
) -> (Transport<InProcess>, <InProcess as Backend>::Qp, <InProcess as Backend>::Region, RemoteBuf) {
    let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    let addr = listener.local_addr();
    let peer_pd = InProcess.alloc_pd().unwrap();
    let target = peer_pd.register(vec![0; 256], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let remote = target.remote_at(0);
    let receives = peer_pd.register(vec![0; 8 * 64], Access::LOCAL_WRITE).unwrap();
    let peer = std::thread::spawn(move || {
        let req = listener.get_request(T).unwrap();
        let accept = |qp: &<InProcess as Backend>::Qp| {
            (0..8).try_for_each(|i| qp.post_recv(i, Sge::new(&receives, 64 * i as usize, 64)))
        };
        req.accept_with(&peer_pd, &[], QpCaps::default(), accept).unwrap()
    });
    let pd = InProcess.alloc_pd().unwrap();
    let caps = QpCaps::default().max_send_wr(max_send_wr);
    let (qp, _) = InProcess.connect(&pd, &addr, &[], caps, T).unwrap();
    (Transport::new(pd, qp, T), peer.join().unwrap(), target, remote)
}

/// `n` Writes of 8 bytes each, byte `i` repeated, to consecutive places of `remote`.
fn writes(
    conn: &Transport<InProcess>,
    n: usize,
    remote: RemoteBuf,
) -> Vec<ChainedWrite<<InProcess as Backend>::Region>> {
    (0..n)
        .map(|i| {
            let region = conn.pd().register(vec![i as u8 + 1; 8], Access::empty()).unwrap();
            let remote = RemoteBuf { addr: remote.addr + 8 * i as u64, rkey: remote.rkey };
            ChainedWrite { region, offset: 0, len: 8, remote }
        })
        .collect()
}

/// A Send of `done` filled, with `n` Writes ([`writes`]) to go before it.
fn done_after(conn: &Transport<InProcess>, n: usize, remote: RemoteBuf) -> super::FilledSend<InProcess> {
    let chained = writes(conn, n, remote);
    let fill = |buf: &mut [u8], chain: &mut super::ChainedWrites<_>| {
        chain.extend(chained);
        buf[..4].copy_from_slice(b"done");
        Ok(4)
    };
    conn.fill_send(64, fill).unwrap()
}

#[test]
fn a_chain_lands_its_writes_before_its_send() {
    let (conn, peer, target, remote) = pair(16);
    let id = conn.wr_id();
    conn.post_filled(id, None, done_after(&conn, 3, remote)).unwrap();
    conn.wait(id).unwrap();
    assert!(peer.wait_cq(T).unwrap().is_ok());
    target.with(|t| assert_eq!(&t[..24], &[[1u8; 8], [2; 8], [3; 8]].concat()[..]));
}

/// Four slots, five work requests: the four Writes go, the Send is refused and its pooled
/// buffer given back; once their completions are reaped the queue serves again.
#[test]
fn a_chain_refused_part_way_gives_back_its_send_buffer() {
    let (conn, peer, target, remote) = pair(4);
    let refused = conn.post_filled(conn.wr_id(), None, done_after(&conn, 4, remote));
    assert!(matches!(refused, Err(DataPathError::Verbs(rpcrdma_verbs::Error::QueueFull))), "{refused:?}");
    assert_eq!(conn.send_buffers_registered(), 1);
    assert!(peer.wait_cq(Duration::from_millis(50)).is_none(), "the refused Send arrived");
    target.with(|t| assert_eq!(&t[..32], &[[1u8; 8], [2; 8], [3; 8], [4; 8]].concat()[..]));
    // The Writes' completions (each signaled on so short a queue) free their slots once
    // reaped.
    conn.reap_queued();
    let id = conn.post_send_bytes(b"next", None).unwrap();
    conn.wait(id).unwrap();
    assert!(peer.wait_cq(T).unwrap().is_ok());
    assert_eq!(conn.send_buffers_registered(), 1, "the refused Send's buffer was not given back for reuse");
}
