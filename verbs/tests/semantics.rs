//! The verbs semantics every backend must have, written once, generic over [`Backend`], and
//! instantiated per backend at the bottom (`instantiate!`). A TCP or rdma-core backend joins
//! by adding one line there.

use std::time::Duration;

use proptest::test_runner::{Config, TestRunner};
use rpcrdma_verbs::*;

/// Generous: a test that waits this long has already failed.
const T: Duration = Duration::from_secs(10);
/// How long to wait for something that must *not* happen.
const BRIEF: Duration = Duration::from_millis(50);
/// How long a spawned waiter gets to reach its sleep before what should wake it happens (long:
/// a thread's start under the guest's emulation can take tens of milliseconds).
const SETTLE: Duration = Duration::from_millis(500);

struct Pair<B: Backend> {
    cpd: B::Pd,
    spd: B::Pd,
    client: B::Qp,
    server: B::Qp,
}

/// Connects a client and a server (separate protection domains), returning the pair, the
/// private data the server received, and the private data the client received.
fn connect_with<B: Backend>(b: &B, cdata: &[u8], sdata: &[u8]) -> (Pair<B>, Vec<u8>, Vec<u8>) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let cpd = b.alloc_pd().unwrap();
    let spd = b.alloc_pd().unwrap();
    let (client, server, got, accepted) = std::thread::scope(|s| {
        let c = s.spawn(|| b.connect(&cpd, &addr, cdata, QpCaps::default(), T).unwrap());
        let req = listener.get_request(T).unwrap();
        let got = req.private_data().to_vec();
        let server = req.accept(&spd, sdata, QpCaps::default()).unwrap();
        let (client, accepted) = c.join().unwrap();
        (client, server, got, accepted)
    });
    (Pair { cpd, spd, client, server }, got, accepted)
}

fn pair<B: Backend>(b: &B) -> Pair<B> {
    connect_with(b, &[], &[]).0
}

/// Waits for the next completion on `qp` and checks its identity and status.
fn expect<Q: QueuePair>(qp: &Q, wr_id: u64, opcode: Opcode, status: Status) -> Completion {
    let c = qp.wait_cq(T).expect("a completion");
    assert_eq!((c.wr_id, c.opcode, c.status), (wr_id, opcode, status), "{c:?}");
    c
}

/// Waits for the next completion on `qp`: `wr_id`'s, for `opcode`, failed with one of `allowed`.
fn expect_one_of<Q: QueuePair>(qp: &Q, wr_id: u64, opcode: Opcode, allowed: &[Status]) -> Completion {
    let c = qp.wait_cq(T).expect("a completion");
    assert_eq!((c.wr_id, c.opcode), (wr_id, opcode), "{c:?}");
    assert!(allowed.contains(&c.status), "{c:?}: status not one of {allowed:?}");
    c
}

/// Both sides are in the Error state and each got exactly one Disconnected event.
fn assert_torn_down<B: Backend>(p: &Pair<B>) {
    // The event first: a backend may learn of the teardown asynchronously (TCP's NAK, rdma_cm's
    // DREQ), and the state is Error once the event is out.
    for qp in [&p.client, &p.server] {
        assert_eq!(qp.cm_event(T), Some(CmEvent::Disconnected));
        assert_eq!(qp.state(), QpState::Error);
        assert_eq!(qp.cm_event(BRIEF), None);
    }
}

/// Waits on `qp` for up to [`T`] and returns the completion, which must have woken the wait
/// before its timeout (a wait that times out still takes what has arrived by then).
fn woken<Q: QueuePair>(qp: &Q) -> Completion {
    let started = std::time::Instant::now();
    let c = qp.wait_cq(T).expect("a completion");
    assert!(started.elapsed() < T, "the waiter slept to its timeout: {c:?}");
    c
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

// ---- the rules ----

fn send_recv_delivers_bytes_and_length<B: Backend>(b: &B) {
    let p = pair(b);
    let buf = p.spd.register(vec![0; 100], Access::LOCAL_WRITE).unwrap();
    let hello = p.cpd.register(b"hello ".to_vec(), Access::empty()).unwrap();
    let world = p.cpd.register(b"--world--".to_vec(), Access::empty()).unwrap();
    p.server.post_recv(10, Sge::new(&buf, 4, 96)).unwrap();
    p.client.post_send(20, &[Sge::whole(&hello), Sge::new(&world, 2, 5)], None).unwrap();
    let c = expect(&p.client, 20, Opcode::Send, Status::Success);
    assert_eq!(c.byte_len, 11);
    let r = expect(&p.server, 10, Opcode::Recv, Status::Success);
    assert_eq!((r.byte_len, r.invalidated_rkey), (11, None));
    buf.with(|b| {
        assert_eq!(&b[4..15], b"hello world");
        assert!(b[..4].iter().chain(&b[15..]).all(|&x| x == 0));
    });
    // Both directions work, and the connection is still up.
    let back = p.cpd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
    p.client.post_recv(11, Sge::whole(&back)).unwrap();
    p.server.post_send(21, &[Sge::new(&buf, 4, 5)], None).unwrap();
    assert_eq!(expect(&p.client, 11, Opcode::Recv, Status::Success).byte_len, 5);
    back.with(|b| assert_eq!(&b[..5], b"hello"));
    assert_eq!(p.client.state(), QpState::Ready);
}

fn send_larger_than_posted_receive_is_fatal<B: Backend>(b: &B) {
    let p = pair(b);
    let small = p.spd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
    let spare = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let msg = p.cpd.register(vec![1; 16], Access::empty()).unwrap();
    p.server.post_recv(1, Sge::whole(&small)).unwrap();
    p.server.post_recv(2, Sge::whole(&spare)).unwrap();
    p.client.post_send(3, &[Sge::whole(&msg)], None).unwrap();
    // The receiver's Receive fails with a local error, the sender's Send with a remote one.
    // The IBA codes are LOC_LEN_ERR and REM_INV_REQ_ERR (what the emulating backends give);
    // rxe (Linux 6.1) reports LOC_QP_OP_ERR and REM_OP_ERR.
    expect_one_of(&p.server, 1, Opcode::Recv, &[Status::LocalLengthError, Status::LocalProtectionError]);
    expect(&p.server, 2, Opcode::Recv, Status::WorkRequestFlushed);
    expect_one_of(&p.client, 3, Opcode::Send, &[Status::RemoteInvalidRequest, Status::RemoteOperationError]);
    assert_torn_down(&p);
    // Later work requests are flushed, not executed.
    p.client.post_send(4, &[Sge::whole(&msg)], None).unwrap();
    expect(&p.client, 4, Opcode::Send, Status::WorkRequestFlushed);
}

fn send_with_no_receive_posted_is_fatal_rnr<B: Backend>(b: &B) {
    let p = pair(b);
    let msg = p.cpd.register(vec![1; 16], Access::empty()).unwrap();
    p.client.post_send(1, &[Sge::whole(&msg)], None).unwrap();
    expect(&p.client, 1, Opcode::Send, Status::RnrRetryExceeded);
    assert_torn_down(&p);
    // A Receive posted too late is flushed; nothing arrives in it.
    let buf = p.spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    p.server.post_recv(2, Sge::whole(&buf)).unwrap();
    expect(&p.server, 2, Opcode::Recv, Status::WorkRequestFlushed);
    buf.with(|b| assert!(b.iter().all(|&x| x == 0)));
}

fn rdma_write_within_region_lands<B: Backend>(b: &B) {
    let p = pair(b);
    let target = p.spd.register(vec![0; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let src = p.cpd.register(pattern(300, 7), Access::empty()).unwrap();
    p.client.post_write(1, &[Sge::new(&src, 0, 100), Sge::new(&src, 200, 100)], target.remote_at(1000)).unwrap();
    assert_eq!(expect(&p.client, 1, Opcode::RdmaWrite, Status::Success).byte_len, 200);
    let want = pattern(300, 7);
    target.with(|t| {
        assert_eq!(&t[1000..1100], &want[..100]);
        assert_eq!(&t[1100..1200], &want[200..]);
        assert!(t[..1000].iter().chain(&t[1200..]).all(|&x| x == 0));
    });
    // The responder sees no completion for an RDMA Write.
    assert_eq!(p.server.wait_cq(BRIEF), None);
    // The very last byte of the region is writable.
    p.client.post_write(2, &[Sge::new(&src, 0, 1)], target.remote_at(4095)).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::Success);
    assert_eq!(p.client.state(), QpState::Ready);
}

fn rdma_read_within_region_returns_data<B: Backend>(b: &B) {
    let p = pair(b);
    let source = p.spd.register(pattern(4096, 3), Access::REMOTE_READ).unwrap();
    let dst = p.cpd.register(vec![0; 512], Access::LOCAL_WRITE).unwrap();
    p.client.post_read(1, &[Sge::new(&dst, 10, 256)], source.remote_at(3840)).unwrap();
    assert_eq!(expect(&p.client, 1, Opcode::RdmaRead, Status::Success).byte_len, 256);
    let want = pattern(4096, 3);
    dst.with(|d| {
        assert_eq!(&d[10..266], &want[3840..]);
        assert!(d[..10].iter().chain(&d[266..]).all(|&x| x == 0));
    });
    assert_eq!(p.server.wait_cq(BRIEF), None);
}

fn rdma_write_outside_region_is_remote_access_error_and_canary_untouched<B: Backend>(b: &B) {
    const LEN: usize = 4096;
    // Each case (remote address relative to the target's, length) crosses or misses the
    // region; each runs on a fresh connection, since each tears one down.
    let cases: [(i64, usize); 5] =
        [(-1, 1), (-16, 32), (LEN as i64 - 16, 32), (LEN as i64, 1), (LEN as i64 + 4096, 64)];
    for (delta, len) in cases {
        let p = pair(b);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        // Canaries: regions registered just before and after the target in the same domain.
        let before = p.spd.register(vec![0xcc; LEN], rw).unwrap();
        let target = p.spd.register(vec![0; LEN], rw).unwrap();
        let after = p.spd.register(vec![0xcc; LEN], rw).unwrap();
        let src = p.cpd.register(vec![0xee; 64], Access::empty()).unwrap();
        let addr = target.addr().wrapping_add_signed(delta);
        p.client.post_write(1, &[Sge::new(&src, 0, len)], RemoteBuf { addr, rkey: target.rkey() }).unwrap();
        expect(&p.client, 1, Opcode::RdmaWrite, Status::RemoteAccessError);
        assert_torn_down(&p);
        target.with(|t| assert!(t.iter().all(|&x| x == 0), "target touched for {delta} {len}"));
        for canary in [&before, &after] {
            canary.with(|c| assert!(c.iter().all(|&x| x == 0xcc), "canary touched for {delta} {len}"));
        }
    }
    // A gather whose first entry fits and whose second crosses the end: nothing may land,
    // not even the part that fits.
    let p = pair(b);
    let target = p.spd.register(vec![0; LEN], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let src = p.cpd.register(vec![0xee; 64], Access::empty()).unwrap();
    let sges = [Sge::new(&src, 0, 32), Sge::new(&src, 32, 32)];
    p.client.post_write(1, &sges, target.remote_at(LEN - 48)).unwrap();
    expect(&p.client, 1, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
    target.with(|t| assert!(t.iter().all(|&x| x == 0), "partial gather landed"));
    // The same for a read: the local buffer stays as it was.
    let p = pair(b);
    let source = p.spd.register(vec![9; LEN], Access::REMOTE_READ).unwrap();
    let dst = p.cpd.register(vec![0xcc; 64], Access::LOCAL_WRITE).unwrap();
    p.client.post_read(1, &[Sge::whole(&dst)], source.remote_at(LEN - 32)).unwrap();
    expect(&p.client, 1, Opcode::RdmaRead, Status::RemoteAccessError);
    assert_torn_down(&p);
    dst.with(|d| assert!(d.iter().all(|&x| x == 0xcc)));
}

fn rdma_write_without_remote_write_access_is_refused<B: Backend>(b: &B) {
    let p = pair(b);
    let target = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
    let src = p.cpd.register(vec![1; 64], Access::empty()).unwrap();
    p.client.post_write(1, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
    expect(&p.client, 1, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
    target.with(|t| assert!(t.iter().all(|&x| x == 0)));
}

fn rdma_read_without_remote_read_access_is_refused<B: Backend>(b: &B) {
    let p = pair(b);
    let source = p.spd.register(vec![5; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let dst = p.cpd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    p.client.post_read(1, &[Sge::whole(&dst)], source.remote_at(0)).unwrap();
    expect(&p.client, 1, Opcode::RdmaRead, Status::RemoteAccessError);
    assert_torn_down(&p);
    dst.with(|d| assert!(d.iter().all(|&x| x == 0)));
}

fn invalidated_rkey_is_refused<B: Backend>(b: &B) {
    let p = pair(b);
    let target = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let src = p.cpd.register(vec![1; 64], Access::empty()).unwrap();
    p.client.post_write(1, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
    expect(&p.client, 1, Opcode::RdmaWrite, Status::Success);
    target.with_mut(|t| t.fill(0));
    p.server.post_local_invalidate(2, target.rkey()).unwrap();
    expect(&p.server, 2, Opcode::LocalInvalidate, Status::Success);
    p.client.post_write(3, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
    expect(&p.client, 3, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
    target.with(|t| assert!(t.iter().all(|&x| x == 0)));
}

fn send_with_invalidate_kills_a_window_and_reports_its_rkey<B: Backend>(b: &B) {
    let p = pair(b);
    // The region itself grants no remote rights: only the window opens it to the peer.
    let chunk = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let src = p.cpd.register(vec![1; 64], Access::empty()).unwrap();
    let window = p.server.post_bind_window(9, &chunk, 0, 64, Access::REMOTE_WRITE).unwrap();
    expect(&p.server, 9, Opcode::BindWindow, Status::Success);
    assert_ne!(window.rkey, chunk.rkey());
    p.server.post_recv(1, Sge::whole(&buf)).unwrap();
    p.client.post_write(2, &[Sge::whole(&src)], window).unwrap();
    p.client.post_send(3, &[Sge::new(&src, 0, 8)], Some(window.rkey)).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::Success);
    expect(&p.client, 3, Opcode::Send, Status::Success);
    let r = expect(&p.server, 1, Opcode::Recv, Status::Success);
    assert_eq!((r.byte_len, r.invalidated_rkey), (8, Some(window.rkey)));
    chunk.with(|c| assert!(c.iter().all(|&x| x == 1)));
    // The key is dead now.
    p.client.post_write(4, &[Sge::whole(&src)], window).unwrap();
    expect(&p.client, 4, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
}

/// A region's own rkey is not remotely invalidatable (as with `ibv_reg_mr` on hardware): the
/// receiver's Receive fails and the connection goes down. Which status each side sees is the
/// device's business (rxe fails the Receive with `IBV_WC_REM_INV_REQ_ERR` and completes the
/// Send), so only the failure and the teardown are checked.
fn send_with_invalidate_of_a_region_rkey_fails<B: Backend>(b: &B) {
    let p = pair(b);
    let region = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let src = p.cpd.register(vec![1; 8], Access::empty()).unwrap();
    p.server.post_recv(1, Sge::whole(&buf)).unwrap();
    p.client.post_send(2, &[Sge::whole(&src)], Some(region.rkey())).unwrap();
    let r = p.server.wait_cq(T).expect("the Receive's completion");
    assert_eq!((r.wr_id, r.opcode), (1, Opcode::Recv));
    assert!(!r.is_ok() && r.status != Status::WorkRequestFlushed, "{r:?}");
    // The failed Receive's buffer is not checked: its contents are undefined (rxe has
    // written the payload by the time it fails the Receive).
    assert_torn_down(&p);
}

fn window_limits_the_peer_to_its_range_and_rights<B: Backend>(b: &B) {
    let (p, region, w) = window_over_the_middle(b);
    let src = p.cpd.register(vec![7; 64], Access::LOCAL_WRITE).unwrap();
    p.client.post_write(2, &[Sge::whole(&src)], w).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::Success);
    region.with(|r| {
        assert!(r[64..128].iter().all(|&x| x == 7));
        assert!(r[..64].iter().chain(&r[128..]).all(|&x| x == 0));
    });
    // Reading through a write-only window is refused.
    p.client.post_read(3, &[Sge::whole(&src)], w).unwrap();
    expect(&p.client, 3, Opcode::RdmaRead, Status::RemoteAccessError);
    assert_torn_down(&p);
}

/// Inside the region but past the window's end: refused, nothing lands. Soft-RoCE does not
/// enforce this (see `rdma::rxe_checks_window_accesses_against_the_region_only`).
fn window_bounds_hold_inside_its_region<B: Backend>(b: &B) {
    let (p, region, w) = window_over_the_middle(b);
    let src = p.cpd.register(vec![7; 64], Access::empty()).unwrap();
    let crossing = RemoteBuf { addr: w.addr + 32, rkey: w.rkey };
    p.client.post_write(2, &[Sge::whole(&src)], crossing).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
    region.with(|r| assert!(r.iter().all(|&x| x == 0)));
}

/// A pair whose server bound a write-only window over bytes 64..128 of a 256-byte region.
fn window_over_the_middle<B: Backend>(b: &B) -> (Pair<B>, B::Region, RemoteBuf) {
    let p = pair(b);
    let region = p.spd.register(vec![0; 256], Access::LOCAL_WRITE).unwrap();
    let w = p.server.post_bind_window(1, &region, 64, 64, Access::REMOTE_WRITE).unwrap();
    expect(&p.server, 1, Opcode::BindWindow, Status::Success);
    assert_eq!(w.addr, region.addr() + 64);
    (p, region, w)
}

fn local_invalidate_kills_a_window<B: Backend>(b: &B) {
    let p = pair(b);
    let region = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let src = p.cpd.register(vec![3; 64], Access::empty()).unwrap();
    let w = p.server.post_bind_window(1, &region, 0, 64, Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    expect(&p.server, 1, Opcode::BindWindow, Status::Success);
    p.client.post_write(2, &[Sge::whole(&src)], w).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::Success);
    p.server.post_local_invalidate(3, w.rkey).unwrap();
    expect(&p.server, 3, Opcode::LocalInvalidate, Status::Success);
    region.with_mut(|r| r.fill(0));
    p.client.post_write(4, &[Sge::whole(&src)], w).unwrap();
    expect(&p.client, 4, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
    region.with(|r| assert!(r.iter().all(|&x| x == 0)));
}

/// A window's rkey is bound to one queue pair: another connection into the same protection
/// domain cannot use it.
fn window_answers_only_its_queue_pairs_peer<B: Backend>(b: &B) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let spd = b.alloc_pd().unwrap();
    let cpd = b.alloc_pd().unwrap();
    let mut conns = std::thread::scope(|s| {
        (0..2)
            .map(|_| {
                let c = s.spawn(|| b.connect(&cpd, &addr, &[], QpCaps::default(), T).unwrap().0);
                let server = listener.get_request(T).unwrap().accept(&spd, &[], QpCaps::default()).unwrap();
                (c.join().unwrap(), server)
            })
            .collect::<Vec<_>>()
    });
    let (c2, s2) = conns.pop().unwrap();
    let (c1, s1) = conns.pop().unwrap();
    let region = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let src = cpd.register(vec![5; 64], Access::empty()).unwrap();
    let w = s1.post_bind_window(1, &region, 0, 64, Access::REMOTE_WRITE).unwrap();
    expect(&s1, 1, Opcode::BindWindow, Status::Success);
    c2.post_write(2, &[Sge::whole(&src)], w).unwrap();
    expect(&c2, 2, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_eq!(s2.cm_event(T), Some(CmEvent::Disconnected));
    region.with(|r| assert!(r.iter().all(|&x| x == 0)));
    c1.post_write(3, &[Sge::whole(&src)], w).unwrap();
    expect(&c1, 3, Opcode::RdmaWrite, Status::Success);
    region.with(|r| assert!(r.iter().all(|&x| x == 5)));
    assert_eq!(s1.state(), QpState::Ready);
}

fn bind_window_checks_its_arguments<B: Backend>(b: &B) {
    let p = pair(b);
    let region = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let read_only = p.spd.register(vec![0; 64], Access::REMOTE_READ).unwrap();
    let bad = |r, off, len, access| p.server.post_bind_window(1, r, off, len, access).unwrap_err();
    assert!(matches!(bad(&region, 0, 64, Access::empty()), Error::InvalidAccess(_)));
    assert!(matches!(bad(&region, 0, 64, Access::LOCAL_WRITE | Access::REMOTE_READ), Error::InvalidAccess(_)));
    assert!(matches!(bad(&read_only, 0, 64, Access::REMOTE_WRITE), Error::InvalidAccess(_)));
    assert_eq!(bad(&region, 32, 64, Access::REMOTE_READ), Error::OutOfBounds { offset: 32, len: 64, region_len: 64 });
    assert_eq!(
        bad(&region, usize::MAX, 2, Access::REMOTE_READ),
        Error::OutOfBounds { offset: usize::MAX, len: 2, region_len: 64 }
    );
    // Nothing was posted and nothing failed.
    assert_eq!(p.server.wait_cq(BRIEF), None);
    assert_eq!(p.server.state(), QpState::Ready);
}

fn writes_posted_before_send_are_visible_at_its_receive_completion<B: Backend>(b: &B) {
    const WRITES: usize = 32;
    const CHUNK: usize = 8192;
    let p = pair(b);
    let target = p.spd.register(vec![0; WRITES * CHUNK], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let buf = p.spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    let srcs: Vec<_> = (0..WRITES).map(|i| p.cpd.register(pattern(CHUNK, i as u8), Access::empty()).unwrap()).collect();
    let msg = p.cpd.register(b"done".to_vec(), Access::empty()).unwrap();
    for round in 0..20u64 {
        p.server.post_recv(round, Sge::whole(&buf)).unwrap();
        target.with_mut(|t| t.fill(0));
        std::thread::scope(|s| {
            // The receiver checks the data the moment it reaps the Receive completion,
            // concurrently with the sender, which never waits for its Writes.
            let checker = s.spawn(|| {
                expect(&p.server, round, Opcode::Recv, Status::Success);
                target.with(|t| {
                    for (i, chunk) in t.chunks(CHUNK).enumerate() {
                        assert!(chunk == pattern(CHUNK, i as u8), "write {i} not visible in round {round}");
                    }
                });
            });
            for (i, src) in srcs.iter().enumerate() {
                p.client.post_write(i as u64, &[Sge::whole(src)], target.remote_at(i * CHUNK)).unwrap();
            }
            p.client.post_send(1000, &[Sge::whole(&msg)], None).unwrap();
            checker.join().unwrap();
        });
        for i in 0..WRITES as u64 {
            expect(&p.client, i, Opcode::RdmaWrite, Status::Success);
        }
        expect(&p.client, 1000, Opcode::Send, Status::Success);
    }
}

fn rkeys_are_unpredictable_and_change_on_reregistration<B: Backend>(b: &B) {
    let p = pair(b);
    let regions: Vec<_> =
        (0..256).map(|_| p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap()).collect();
    let rkeys: Vec<u32> = regions.iter().map(|r| r.rkey()).collect();
    let mut unique = rkeys.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), rkeys.len(), "rkeys repeat");
    // Not a counter: consecutive keys differ by a varying amount, rarely by one.
    let steps: Vec<u32> = rkeys.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    assert!(steps.iter().filter(|&&d| d == steps[0]).count() < 8, "rkeys step regularly: {steps:?}");
    assert!(steps.iter().filter(|&&d| d == 1).count() < 8);
    // Spread over the key space, not clustered near zero.
    assert!(rkeys.iter().filter(|&&k| k > 0xffff).count() > 200);
    // Addresses are not small integers either.
    assert!(regions.iter().all(|r| r.addr() > 0xffff_ffff));

    // Re-registration yields a fresh key; the old one is dead.
    let old = regions[0].clone();
    let old_rkey = old.rkey();
    drop(regions);
    let buf = old.deregister().unwrap();
    let again = p.spd.register(buf, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    assert_ne!(again.rkey(), old_rkey);
    assert!(!rkeys.contains(&again.rkey()));
    let src = p.cpd.register(vec![1; 64], Access::empty()).unwrap();
    p.client.post_write(1, &[Sge::whole(&src)], again.remote_at(0)).unwrap();
    expect(&p.client, 1, Opcode::RdmaWrite, Status::Success);
    p.client.post_write(2, &[Sge::whole(&src)], RemoteBuf { addr: again.addr(), rkey: old_rkey }).unwrap();
    expect(&p.client, 2, Opcode::RdmaWrite, Status::RemoteAccessError);
    assert_torn_down(&p);
}

fn private_data_is_padded_to_56_on_connect_and_196_on_accept<B: Backend>(b: &B) {
    let (_p, at_server, at_client) = connect_with(b, b"req", b"rep!");
    assert_eq!(at_server.len(), CONNECT_PRIVATE_DATA_MAX);
    assert_eq!(at_server.len(), 56);
    assert_eq!(&at_server[..3], b"req");
    assert!(at_server[3..].iter().all(|&x| x == 0));
    assert_eq!(at_client.len(), ACCEPT_PRIVATE_DATA_MAX);
    assert_eq!(at_client.len(), 196);
    assert_eq!(&at_client[..4], b"rep!");
    assert!(at_client[4..].iter().all(|&x| x == 0));
    // The limits themselves pass whole; empty private data arrives as all zeros.
    let (full_c, full_a) = (pattern(56, 1), pattern(196, 2));
    let (_p, at_server, at_client) = connect_with(b, &full_c, &full_a);
    assert_eq!((at_server, at_client), (full_c, full_a));
    let (_p, at_server, at_client) = connect_with(b, &[], &[]);
    assert_eq!((at_server, at_client), (vec![0; 56], vec![0; 196]));
}

/// A connect request names who asks ([`ConnectRequest::peer`]), and two connections from one
/// protection domain name the same host (a responder knows a requester again by it); on the
/// in-process backend, another protection domain is another host.
fn connect_request_names_its_peer<B: Backend>(b: &B) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let (pd, other) = (b.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let peer_of = |pd: &B::Pd| {
        std::thread::scope(|s| {
            let c = s.spawn(|| b.connect(pd, &addr, &[], QpCaps::default(), T).unwrap());
            let req = listener.get_request(T).unwrap();
            let peer = req.peer().expect("the connection manager names the peer");
            let spd = b.alloc_pd().unwrap();
            let server = req.accept(&spd, &[], QpCaps::default()).unwrap();
            let (client, _) = c.join().unwrap();
            drop((client, server));
            peer
        })
    };
    let (first, again, elsewhere) = (peer_of(&pd), peer_of(&pd), peer_of(&other));
    assert_eq!(first.host(), again.host(), "{first} and {again}");
    match (first, elsewhere) {
        (PeerAddress::InProcess(a), PeerAddress::InProcess(b)) => assert_ne!(a, b),
        // Connected from this machine to its own address: the peer's IP is the listener's.
        (PeerAddress::Ip(a), PeerAddress::Ip(_)) => assert!(addr.starts_with(&format!("{}:", a.ip())), "{a} {addr}"),
        other => panic!("{other:?}"),
    }
}

fn oversized_private_data_is_refused<B: Backend>(b: &B) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let pd = b.alloc_pd().unwrap();
    let too_long = Error::PrivateDataTooLong { len: 57, max: 56 };
    assert_eq!(b.connect(&pd, &addr, &[0; 57], QpCaps::default(), T).err(), Some(too_long));
    // Nothing reached the listener.
    assert!(matches!(listener.get_request(BRIEF), Err(Error::Timeout)));
    // An oversized accept fails, and the connect is rejected.
    std::thread::scope(|s| {
        let c = s.spawn(|| b.connect(&pd, &addr, &[], QpCaps::default(), T));
        let req = listener.get_request(T).unwrap();
        let err = req.accept(&pd, &[0; 197], QpCaps::default()).err();
        assert_eq!(err, Some(Error::PrivateDataTooLong { len: 197, max: 196 }));
        assert_eq!(c.join().unwrap().err(), Some(Error::Rejected));
    });
}

fn disconnect_is_reported_to_the_peer_and_flushes_posted_receives<B: Backend>(b: &B) {
    let p = pair(b);
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let cbuf = p.cpd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    for wr_id in 1..=3 {
        p.server.post_recv(wr_id, Sge::new(&buf, 0, 16)).unwrap();
    }
    p.client.post_recv(9, Sge::whole(&cbuf)).unwrap();
    assert_eq!(p.server.cm_event(BRIEF), None);
    p.client.disconnect();
    for wr_id in 1..=3 {
        assert_eq!(expect(&p.server, wr_id, Opcode::Recv, Status::WorkRequestFlushed).byte_len, 0);
    }
    expect(&p.client, 9, Opcode::Recv, Status::WorkRequestFlushed);
    assert_torn_down(&p);
    p.server.post_send(4, &[Sge::whole(&buf)], None).unwrap();
    expect(&p.server, 4, Opcode::Send, Status::WorkRequestFlushed);
    // Disconnecting again changes nothing.
    p.client.disconnect();
    assert_eq!(p.client.cm_event(BRIEF), None);

    // Dropping a queue pair disconnects too.
    let p = pair(b);
    let Pair { client, server, .. } = p;
    drop(client);
    assert_eq!(server.cm_event(T), Some(CmEvent::Disconnected));
    assert_eq!(server.state(), QpState::Error);
}

/// The peer may Send the moment the connection is established (an RPC-over-RDMA requester
/// does): Receives posted by `accept_with` are already there for it.
fn receives_posted_at_accept_catch_the_peers_first_send<B: Backend>(b: &B) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let (cpd, spd) = (b.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let buf = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let _keep = std::thread::scope(|s| {
        let c = s.spawn(|| {
            let (qp, _) = b.connect(&cpd, &addr, &[], QpCaps::default(), T).unwrap();
            let msg = cpd.register(b"first".to_vec(), Access::empty()).unwrap();
            qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
            expect(&qp, 1, Opcode::Send, Status::Success);
            qp
        });
        let req = listener.get_request(T).unwrap();
        let server = req.accept_with(&spd, &[], QpCaps::default(), |qp| qp.post_recv(7, Sge::whole(&buf))).unwrap();
        assert_eq!(expect(&server, 7, Opcode::Recv, Status::Success).byte_len, 5);
        (c.join().unwrap(), server)
    });
    buf.with(|b| assert_eq!(&b[..5], b"first"));
}

// ---- selective signaling (SendFlags) ----

/// Unsignaled work requests that succeed report nothing; the signaled one after them reports
/// itself, and (a send queue completes in order) says they completed too.
fn unsignaled_success_gives_no_completion_until_a_signaled_one<B: Backend>(b: &B) {
    let p = pair(b);
    let unsignaled = SendFlags::empty();
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let target = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let window_region = p.cpd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let msg = p.cpd.register(b"0123".to_vec(), Access::empty()).unwrap();
    for i in 0..4 {
        p.server.post_recv(10 + i, Sge::new(&buf, 16 * i as usize, 16)).unwrap();
    }
    for id in 1..=3 {
        p.client.post_send_with(id, &[Sge::whole(&msg)], None, unsignaled).unwrap();
    }
    p.client.post_write_with(4, &[Sge::whole(&msg)], target.remote_at(8), unsignaled).unwrap();
    let w = p.client.post_bind_window_with(5, &window_region, 0, 64, Access::REMOTE_READ, unsignaled).unwrap();
    p.client.post_local_invalidate_with(6, w.rkey, unsignaled).unwrap();
    p.client.post_send_with(7, &[Sge::whole(&msg)], None, SendFlags::SIGNALED).unwrap();
    expect(&p.client, 7, Opcode::Send, Status::Success);
    for i in 0..4 {
        expect(&p.server, 10 + i, Opcode::Recv, Status::Success);
    }
    // Everything before 7 has completed (the Write has landed), and reported nothing.
    target.with(|t| assert_eq!(&t[8..12], b"0123"));
    assert_eq!(p.client.poll_cq(&mut [Completion::default(); 4]), 0);
    assert_eq!(p.client.state(), QpState::Ready);
}

/// An unsignaled work request holds its send-queue slot until a later completion is reaped:
/// `max_send_wr` of them fill the queue, and reaping the signaled one frees them all.
fn unsignaled_work_requests_hold_send_queue_slots_until_a_later_completion_is_reaped<B: Backend>(b: &B) {
    let p = pair(b);
    let target = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let src = p.cpd.register(vec![5; 8], Access::empty()).unwrap();
    let depth = p.client.caps().max_send_wr as u64;
    let write = |id, flags| p.client.post_write_with(id, &[Sge::whole(&src)], target.remote_at(0), flags);
    for id in 1..depth {
        write(id, SendFlags::empty()).unwrap();
    }
    write(depth, SendFlags::SIGNALED).unwrap();
    assert_eq!(write(depth + 1, SendFlags::SIGNALED), Err(Error::QueueFull));
    expect(&p.client, depth, Opcode::RdmaWrite, Status::Success);
    // Reaped: every slot is free again.
    for id in 1..depth {
        write(depth + id, SendFlags::empty()).unwrap();
    }
    write(2 * depth, SendFlags::SIGNALED).unwrap();
    expect(&p.client, 2 * depth, Opcode::RdmaWrite, Status::Success);
    assert_eq!(p.client.poll_cq(&mut [Completion::default()]), 0);
}

/// An unsignaled Send that finds no Receive still fails with its error completion, tears the
/// connection down, and what is posted after it (unsignaled too) is flushed with a completion.
fn an_unsignaled_send_that_fails_reports_its_error<B: Backend>(b: &B) {
    let p = pair(b);
    let msg = p.cpd.register(vec![1; 16], Access::empty()).unwrap();
    p.client.post_send_with(1, &[Sge::whole(&msg)], None, SendFlags::empty()).unwrap();
    expect(&p.client, 1, Opcode::Send, Status::RnrRetryExceeded);
    assert_torn_down(&p);
    p.client.post_send_with(2, &[Sge::whole(&msg)], None, SendFlags::empty()).unwrap();
    expect(&p.client, 2, Opcode::Send, Status::WorkRequestFlushed);
}

/// An unsignaled Send gathering from memory this queue pair may not use (another protection
/// domain's region: a bad lkey) fails with its error completion, after the unsignaled Send
/// before it succeeded silently.
fn an_unsignaled_send_with_a_bad_lkey_reports_its_error<B: Backend>(b: &B) {
    let p = pair(b);
    let buf = p.spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    let msg = p.cpd.register(vec![1; 16], Access::empty()).unwrap();
    let foreign = p.spd.register(vec![2; 16], Access::empty()).unwrap();
    p.server.post_recv(9, Sge::whole(&buf)).unwrap();
    p.client.post_send_with(1, &[Sge::whole(&msg)], None, SendFlags::empty()).unwrap();
    expect(&p.server, 9, Opcode::Recv, Status::Success);
    p.client.post_send_with(2, &[Sge::whole(&foreign)], None, SendFlags::empty()).unwrap();
    // Only the failure is reported; the first Send's success is not.
    expect(&p.client, 2, Opcode::Send, Status::LocalProtectionError);
    assert_eq!(p.client.state(), QpState::Error);
}

/// A chain (`post_chain`: a reply's Writes and its Send, one doorbell) completes as its work
/// requests posted one by one would: in order, the Writes visible when the Send's Receive
/// completes, and only the signaled ones reporting.
fn a_chain_completes_in_order_as_its_work_requests_would<B: Backend>(b: &B) {
    const WRITES: usize = 4;
    let p = pair(b);
    let target = p.spd.register(vec![0; WRITES * 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let buf = p.spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    let srcs: Vec<_> = (0..WRITES).map(|i| p.cpd.register(pattern(64, i as u8), Access::empty()).unwrap()).collect();
    let msg = p.cpd.register(b"done".to_vec(), Access::empty()).unwrap();
    p.server.post_recv(9, Sge::whole(&buf)).unwrap();
    let sges: Vec<[Sge<'_, B::Region>; 1]> = srcs.iter().map(|r| [Sge::whole(r)]).collect();
    let send = [Sge::whole(&msg)];
    let mut chain: Vec<WorkRequest<'_, B::Region>> = (0..WRITES)
        .map(|i| WorkRequest::Write {
            wr_id: i as u64,
            sges: &sges[i],
            remote: target.remote_at(i * 64),
            flags: SendFlags::empty(),
        })
        .collect();
    chain.push(WorkRequest::Send { wr_id: 100, sges: &send, invalidate: None, flags: SendFlags::SIGNALED });
    p.client.post_chain(&chain).unwrap();
    let c = expect(&p.server, 9, Opcode::Recv, Status::Success);
    assert_eq!((c.byte_len, &buf.with(|b| b[..4].to_vec())[..]), (4, &b"done"[..]));
    target.with(|t| {
        for (i, w) in t.chunks(64).enumerate() {
            assert!(w == pattern(64, i as u8), "write {i} not visible at the Send's Receive");
        }
    });
    expect(&p.client, 100, Opcode::Send, Status::Success);
    assert_eq!(p.client.poll_cq(&mut [Completion::default(); 4]), 0);
}

/// A chain whose work request cannot be posted (no room left on the send queue, or a
/// scatter/gather list over `max_sge`) posts those before it and none after it, and says how
/// many: `ChainError::posted`, as `ibv_post_send`'s `bad_wr` does.
fn a_chain_refused_midway_posts_only_what_came_before<B: Backend>(b: &B) {
    let p = pair(b);
    let target = p.spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let buf = p.spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    let src = p.cpd.register(vec![7; 8], Access::empty()).unwrap();
    p.server.post_recv(9, Sge::whole(&buf)).unwrap();
    let one = [Sge::whole(&src)];
    let too_many = vec![Sge::new(&src, 0, 1); p.client.caps().max_sge as usize + 1];
    let write =
        |wr_id, sges| WorkRequest::Write { wr_id, sges, remote: target.remote_at(0), flags: SendFlags::SIGNALED };
    let send = WorkRequest::Send { wr_id: 3, sges: &one, invalidate: None, flags: SendFlags::SIGNALED };

    // A scatter/gather list too long: the Write before it goes, nothing after it.
    let e = p.client.post_chain(&[write(1, &one[..]), write(2, &too_many[..]), send]).unwrap_err();
    assert_eq!(e, ChainError { posted: 1, error: Error::TooManySges(too_many.len()) });
    expect(&p.client, 1, Opcode::RdmaWrite, Status::Success);
    assert!(p.server.wait_cq(BRIEF).is_none(), "the Send after the refused Write went out");
    assert_eq!(p.client.poll_cq(&mut [Completion::default()]), 0);

    // A send queue with one slot left: the first goes, the second is refused.
    let depth = p.client.caps().max_send_wr as u64;
    for id in 10..10 + depth - 1 {
        p.client.post_write_with(id, &one, target.remote_at(0), SendFlags::empty()).unwrap();
    }
    let send = WorkRequest::Send { wr_id: 3, sges: &one, invalidate: None, flags: SendFlags::SIGNALED };
    let e = p.client.post_chain(&[write(4, &one[..]), send]).unwrap_err();
    assert_eq!(e, ChainError { posted: 1, error: Error::QueueFull });
    expect(&p.client, 4, Opcode::RdmaWrite, Status::Success);
    assert!(p.server.wait_cq(BRIEF).is_none(), "the refused Send went out");
    assert_eq!(p.client.state(), QpState::Ready);
}

// ---- engine details beyond the list ----

fn receive_queue_depth_is_enforced<B: Backend>(b: &B) {
    let p = pair(b);
    let buf = p.spd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
    for i in 0..QpCaps::default().max_recv_wr {
        p.server.post_recv(i.into(), Sge::whole(&buf)).unwrap();
    }
    assert_eq!(p.server.post_recv(999, Sge::whole(&buf)), Err(Error::QueueFull));
    assert_eq!(p.server.state(), QpState::Ready);
}

/// A waiter asleep in `wait_cq` when the completion arrives is woken for it (on rdma-core: the
/// completion channel's event, armed before it slept), not left to its timeout.
fn a_sleeping_waiter_wakes_for_a_completion<B: Backend>(b: &B) {
    let p = pair(b);
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    p.server.post_recv(1, Sge::whole(&buf)).unwrap();
    let msg = p.cpd.register(b"late".to_vec(), Access::empty()).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| woken(&p.server));
        std::thread::sleep(SETTLE);
        p.client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
        let c = waiter.join().unwrap();
        assert_eq!((c.wr_id, c.opcode, c.byte_len), (1, Opcode::Recv, 4));
    });
    expect(&p.client, 2, Opcode::Send, Status::Success);
}

/// Several threads waiting on one queue pair at once each get a completion of their own: none
/// is lost, none is handed out twice, and a completion one waiter's poll took along does not
/// leave another asleep.
fn several_waiters_each_get_one_completion<B: Backend>(b: &B) {
    const N: u64 = 4;
    let p = pair(b);
    let buf = p.spd.register(vec![0; 16 * N as usize], Access::LOCAL_WRITE).unwrap();
    for i in 0..N {
        p.server.post_recv(i, Sge::new(&buf, 16 * i as usize, 16)).unwrap();
    }
    let msg = p.cpd.register(vec![7; 8], Access::empty()).unwrap();
    let mut got: Vec<u64> = std::thread::scope(|s| {
        let waiters: Vec<_> = (0..N).map(|_| s.spawn(|| woken(&p.server))).collect();
        std::thread::sleep(SETTLE);
        for i in 0..N {
            p.client.post_send(100 + i, &[Sge::whole(&msg)], None).unwrap();
        }
        waiters.into_iter().map(|w| w.join().unwrap().wr_id).collect()
    });
    got.sort_unstable();
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    for i in 0..N {
        expect(&p.client, 100 + i, Opcode::Send, Status::Success);
    }
    assert_eq!(p.server.wait_cq(BRIEF), None);
}

/// A work request posted in the Error state completes (flushed) without the device on
/// rdma-core; a thread already waiting is woken for it all the same.
fn a_waiter_wakes_for_a_work_request_flushed_at_post<B: Backend>(b: &B) {
    let p = pair(b);
    p.client.disconnect();
    assert_eq!(p.client.cm_event(T), Some(CmEvent::Disconnected));
    let msg = p.cpd.register(vec![1; 8], Access::empty()).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| woken(&p.client));
        std::thread::sleep(SETTLE);
        p.client.post_send(5, &[Sge::whole(&msg)], None).unwrap();
        let c = waiter.join().unwrap();
        assert_eq!((c.wr_id, c.opcode, c.status), (5, Opcode::Send, Status::WorkRequestFlushed));
    });
}

/// The event-loop protocol of [`QueuePair::completion_fd`], for backends that have the fd:
/// armed and idle, the fd is not readable; a completion makes it readable; arming again
/// consumes that notification; a completion the backend makes itself wakes it too.
#[cfg(feature = "rdma")]
fn completion_fd_wakes_an_event_loop<B: Backend>(b: &B) {
    use std::os::fd::{AsRawFd, BorrowedFd};
    fn readable(fd: BorrowedFd<'_>, within: Duration) -> bool {
        let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd on an fd the queue pair keeps open while borrowed.
        unsafe { libc::poll(&mut pfd, 1, within.as_millis() as i32) == 1 }
    }
    let p = pair(b);
    let fd = p.server.completion_fd().expect("this backend has a completion fd");
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    p.server.post_recv(1, Sge::whole(&buf)).unwrap();
    let mut c = [Completion::default()];
    assert_eq!(p.server.poll_cq(&mut c), 0);
    assert!(!p.server.req_notify_cq(), "nothing has completed yet");
    assert!(!readable(fd, BRIEF), "readable with nothing completed");
    let msg = p.cpd.register(b"wake".to_vec(), Access::empty()).unwrap();
    p.client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
    assert!(readable(fd, T), "the completion did not make the fd readable");
    assert_eq!(p.server.poll_cq(&mut c), 1);
    assert_eq!((c[0].wr_id, c[0].byte_len), (1, 4));
    assert!(!p.server.req_notify_cq(), "nothing more has completed");
    assert!(!readable(fd, BRIEF), "arming did not consume the notification");
    expect(&p.client, 2, Opcode::Send, Status::Success);
    p.server.disconnect();
    p.server.post_send(3, &[Sge::whole(&buf)], None).unwrap();
    assert!(readable(fd, T), "a completion made by the backend did not make the fd readable");
    assert_eq!(p.server.poll_cq(&mut c), 1);
    assert_eq!((c[0].wr_id, c[0].status), (3, Status::WorkRequestFlushed));
}

/// `QueuePair::arm_waker` on every backend that says it wakes wakers: an armed queue pair
/// wakes the waker once at its next completion (a peer's Send into a posted Receive, and a
/// completion the backend makes itself); arming while a completion waits says so and arms
/// nothing.
fn an_armed_waker_is_woken_by_the_next_completion<B: Backend>(b: &B) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::task::{Wake, Waker};
    #[derive(Default)]
    struct Count(Mutex<usize>, Condvar, AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() += 1;
            self.2.fetch_add(1, Ordering::SeqCst);
            self.1.notify_all();
        }
    }
    let wait_for = |count: &Count, n: usize| {
        let g = count.0.lock().unwrap();
        let (g, _) = count.1.wait_timeout_while(g, T, |c| *c < n).unwrap();
        *g
    };
    assert!(b.wakes_wakers(), "the rule is for backends whose queue pairs wake wakers");
    let p = pair(b);
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    let buf = p.spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    p.server.post_recv(1, Sge::whole(&buf)).unwrap();
    assert_eq!(p.server.arm_waker(&waker), Arm::Armed);
    std::thread::sleep(BRIEF);
    assert_eq!(count.2.load(Ordering::SeqCst), 0, "woken with nothing completed");
    let msg = p.cpd.register(b"wake".to_vec(), Access::empty()).unwrap();
    p.client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
    assert_eq!(wait_for(&count, 1), 1, "the Receive's completion did not wake the armed waker");
    // Not reaped yet: arming says so and arms nothing.
    assert_eq!(p.server.arm_waker(&waker), Arm::Waiting);
    let mut c = [Completion::default()];
    assert_eq!(p.server.poll_cq(&mut c), 1);
    assert_eq!((c[0].wr_id, c[0].byte_len), (1, 4));
    expect(&p.client, 2, Opcode::Send, Status::Success);
    // Armed again: a completion the backend makes itself (a Send posted in Error, flushed)
    // wakes it too, once.
    assert_eq!(p.server.arm_waker(&waker), Arm::Armed);
    p.server.disconnect();
    p.server.post_send(3, &[Sge::whole(&buf)], None).unwrap();
    assert!(wait_for(&count, 2) >= 2, "a flushed work request's completion did not wake the armed waker");
}

fn rejected_and_unknown_connects_fail<B: Backend>(b: &B) {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let pd = b.alloc_pd().unwrap();
    std::thread::scope(|s| {
        let c = s.spawn(|| b.connect(&pd, &addr, &[], QpCaps::default(), T));
        listener.get_request(T).unwrap().reject();
        assert_eq!(c.join().unwrap().err(), Some(Error::Rejected));
    });
    assert!(matches!(b.listen(&addr), Err(Error::AddressInUse(_))));
    drop(listener);
    assert!(matches!(b.connect(&pd, &addr, &[], QpCaps::default(), T), Err(Error::ConnectionRefused(_))));
}

/// `Listener::close` ends a `get_request` waiting with no deadline at once, and every later
/// one, with `ConnectionAborted`: a server stopping waits on no tick and no peer.
fn closing_a_listener_ends_a_waiting_get_request<B: Backend>(b: &B) {
    let listener = std::sync::Arc::new(b.listen(&b.any_address()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    // Not a scoped thread: where close does not wake it, the test fails instead of waiting
    // for it.
    let l = listener.clone();
    std::thread::spawn(move || tx.send(l.get_request(Duration::MAX).err()).unwrap());
    std::thread::sleep(BRIEF);
    assert!(rx.try_recv().is_err(), "get_request returned before anything came or the listener closed");
    listener.close();
    let got = rx.recv_timeout(T).expect("close did not end the waiting get_request");
    assert_eq!(got, Some(Error::ConnectionAborted));
    assert_eq!(listener.get_request(T).err(), Some(Error::ConnectionAborted));
    listener.close();
}

fn remote_write_needs_local_write_at_registration<B: Backend>(b: &B) {
    let pd = b.alloc_pd().unwrap();
    assert!(matches!(pd.register(vec![0; 8], Access::REMOTE_WRITE), Err(Error::InvalidAccess(_))));
}

/// Property: a Write of random (offset, length) against a 256-byte region lands exactly when
/// it lies inside, and touches nothing outside it in any case.
fn rdma_write_lands_exactly_when_in_bounds<B: Backend>(b: &B) {
    let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
    runner
        .run(&(-300i64..600, 0usize..300), |(delta, len)| {
            let p = pair(b);
            let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
            let target = p.spd.register(vec![0; 256], rw).unwrap();
            let canary = p.spd.register(vec![0xcc; 256], rw).unwrap();
            let src = p.cpd.register(vec![0xee; 300], Access::empty()).unwrap();
            let addr = target.addr().wrapping_add_signed(delta);
            p.client.post_write(1, &[Sge::new(&src, 0, len)], RemoteBuf { addr, rkey: target.rkey() }).unwrap();
            let inside = len == 0 || (delta >= 0 && delta as usize + len <= 256);
            let c = p.client.wait_cq(T).unwrap();
            let want = if inside { Status::Success } else { Status::RemoteAccessError };
            proptest::prop_assert_eq!(c.status, want);
            target.with(|t| {
                for (i, &x) in t.iter().enumerate() {
                    let written = inside && (i as i64) >= delta && (i as i64) < delta + len as i64;
                    assert_eq!(x, if written { 0xee } else { 0 }, "byte {i}");
                }
            });
            canary.with(|c| assert!(c.iter().all(|&x| x == 0xcc)));
            Ok(())
        })
        .unwrap();
}

/// Instantiates every rule above as a `#[test]` for one backend; after `;`, the rules that are
/// not common to all backends and that this one keeps.
macro_rules! instantiate {
    ($module:ident, $backend:expr; $($extra:ident),* $(,)?) => {
        mod $module {
            instantiate!(@tests $backend;
                send_recv_delivers_bytes_and_length,
                send_larger_than_posted_receive_is_fatal,
                send_with_no_receive_posted_is_fatal_rnr,
                rdma_write_within_region_lands,
                rdma_read_within_region_returns_data,
                rdma_write_outside_region_is_remote_access_error_and_canary_untouched,
                rdma_write_without_remote_write_access_is_refused,
                rdma_read_without_remote_read_access_is_refused,
                invalidated_rkey_is_refused,
                send_with_invalidate_kills_a_window_and_reports_its_rkey,
                send_with_invalidate_of_a_region_rkey_fails,
                window_limits_the_peer_to_its_range_and_rights,
                local_invalidate_kills_a_window,
                window_answers_only_its_queue_pairs_peer,
                bind_window_checks_its_arguments,
                receives_posted_at_accept_catch_the_peers_first_send,
                writes_posted_before_send_are_visible_at_its_receive_completion,
                rkeys_are_unpredictable_and_change_on_reregistration,
                private_data_is_padded_to_56_on_connect_and_196_on_accept,
                connect_request_names_its_peer,
                oversized_private_data_is_refused,
                disconnect_is_reported_to_the_peer_and_flushes_posted_receives,
                receive_queue_depth_is_enforced,
                rejected_and_unknown_connects_fail,
                remote_write_needs_local_write_at_registration,
                rdma_write_lands_exactly_when_in_bounds,
                a_sleeping_waiter_wakes_for_a_completion,
                several_waiters_each_get_one_completion,
                a_waiter_wakes_for_a_work_request_flushed_at_post,
                unsignaled_success_gives_no_completion_until_a_signaled_one,
                unsignaled_work_requests_hold_send_queue_slots_until_a_later_completion_is_reaped,
                an_unsignaled_send_that_fails_reports_its_error,
                an_unsignaled_send_with_a_bad_lkey_reports_its_error,
                an_armed_waker_is_woken_by_the_next_completion,
                closing_a_listener_ends_a_waiting_get_request,
                a_chain_completes_in_order_as_its_work_requests_would,
                a_chain_refused_midway_posts_only_what_came_before,
                $($extra,)*
            );
        }
    };
    (@tests $backend:expr; $($rule:ident),* $(,)?) => {
        $(
            #[test]
            fn $rule() {
                super::$rule(&$backend)
            }
        )*
    };
}

instantiate!(inproc, rpcrdma_verbs::InProcess; window_bounds_hold_inside_its_region);
instantiate!(tcp, rpcrdma_verbs::Tcp; window_bounds_hold_inside_its_region);
#[cfg(feature = "rdma")]
instantiate!(
    rdma,
    match crate::stderr_log::rdma_from_test_env() {
        Some(b) => b,
        None => return,
    };
    completion_fd_wakes_an_event_loop
);

/// The rdma-core backend's diagnostics (`log`) on stderr, at the level `RUST_LOG` names
/// (`error` to `trace`; none when unset): guest/test-rdma passes it into the guest.
#[cfg(feature = "rdma")]
mod stderr_log {
    struct Stderr;

    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &log::Record<'_>) {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
        }
        fn flush(&self) {}
    }

    /// The backend under test (`Rdma::from_test_env`), with the logger installed first.
    pub fn rdma_from_test_env() -> Option<rpcrdma_verbs::Rdma> {
        install();
        rpcrdma_verbs::Rdma::from_test_env()
    }

    fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let Some(level) = std::env::var("RUST_LOG").ok().and_then(|l| l.parse().ok()) else { return };
            if log::set_logger(&Stderr).is_ok() {
                log::set_max_level(level);
            }
        });
    }
}

/// What Soft-RoCE does differently, asserted so that a kernel that fixes it fails here and the
/// rule moves back into the common list.
#[cfg(feature = "rdma")]
mod rxe {
    use super::*;

    /// rdma_rxe (Linux 6.1, `check_rkey` in rxe_resp.c) checks an access through a memory
    /// window against the range of the MR under it, not the window's: a Write inside the
    /// region but past the window's end lands. RPC-over-RDMA peers on rxe therefore get
    /// region-granular protection from windows; the other backends enforce the window.
    #[test]
    fn rxe_checks_window_accesses_against_the_region_only() {
        let Some(b) = rpcrdma_verbs::Rdma::from_test_env() else { return };
        let (p, region, w) = window_over_the_middle(&b);
        let src = p.cpd.register(vec![7; 64], Access::empty()).unwrap();
        p.client.post_write(2, &[Sge::whole(&src)], RemoteBuf { addr: w.addr + 32, rkey: w.rkey }).unwrap();
        expect(&p.client, 2, Opcode::RdmaWrite, Status::Success);
        region.with(|r| assert!(r[96..160].iter().all(|&x| x == 7)));
    }
}
