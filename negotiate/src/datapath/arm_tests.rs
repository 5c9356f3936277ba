//! [`Transport::arm_receive`] while another thread polls the queue pair: the waker is left
//! with that thread, which fires it for a message it sets aside and, when it stops polling,
//! arms the queue pair with it (`pass_on_receive_waker`). A message in either phase wakes the
//! armed waker; none is lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use rpcrdma_verbs::{
    Access, Arm, Backend, ConnectRequest, InProcess, Listener, ProtectionDomain, QpCaps, QueuePair, Sge,
};

use super::{ReceivePool, Transport};

const T: Duration = Duration::from_secs(5);

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits (up to [`T`]) until `count` has been woken `n` times.
fn woken(count: &Count, n: usize) -> bool {
    let deadline = Instant::now() + T;
    while count.0.load(Ordering::SeqCst) < n {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn a_waker_armed_while_another_thread_polls_hears_of_every_message() {
    let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    let addr = listener.local_addr();
    let peer = std::thread::spawn(move || {
        let pd = InProcess.alloc_pd().unwrap();
        (InProcess.connect(&pd, &addr, &[], QpCaps::default(), T).unwrap().0, pd)
    });
    let pd = InProcess.alloc_pd().unwrap();
    let qp = listener.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    let (peer_qp, peer_pd) = peer.join().unwrap();
    let pool = ReceivePool::post(&pd, &qp, 4, 64).unwrap();
    // Waits of 400 ms: the poller's for a work request that never completes.
    let conn = Transport::<InProcess>::new(pd, qp, Duration::from_millis(400));
    let msg = peer_pd.register(b"ping".to_vec(), Access::empty()).unwrap();
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    std::thread::scope(|s| {
        let poller = s.spawn(|| conn.wait(u64::MAX >> 8));
        while !conn.set_aside.lock().unwrap().polling {
            std::thread::yield_now();
        }
        // Phase 1: armed while the poller polls; the message is reaped by the poller.
        assert_eq!(conn.arm_receive(&waker), Arm::Armed);
        peer_qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
        assert!(woken(&count, 1), "the poller set the message aside without waking the armed waker");
        assert_eq!(conn.arm_receive(&waker), Arm::Waiting, "the message is set aside");
        assert_eq!(&pool.receive_within(&conn, Duration::ZERO).unwrap().bytes[..], b"ping");
        // Phase 2: armed while it still polls; it stops, and a message comes after it.
        assert!(conn.set_aside.lock().unwrap().polling, "the poller stopped early (a slow machine?)");
        assert_eq!(conn.arm_receive(&waker), Arm::Armed);
        assert!(poller.join().unwrap().is_err(), "the poller's work request never completes");
        assert!(!conn.set_aside.lock().unwrap().polling);
        peer_qp.post_send(2, &[Sge::whole(&msg)], None).unwrap();
        assert!(woken(&count, 2), "nobody polled and the queue pair was never armed: the message woke nobody");
    });
    for _ in 0..2 {
        assert!(peer_qp.wait_cq(T).unwrap().is_ok());
    }
}
