//! The TCP backend across a process boundary: the test re-executes this test binary as a
//! child process (`--exact child_role`, with `VERBS_TCP_CHILD` naming the parent's listening
//! address) that acts as the peer. Send/Receive, RDMA Write and Read cross the boundary, and
//! the parent detects the disconnect when the child process exits without disconnecting.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rpcrdma_verbs::*;

const T: Duration = Duration::from_secs(20);
const ENV: &str = "VERBS_TCP_CHILD";
const REGION: usize = 4096;
/// Offset of the byte the parent sets after its first Write; the child polls it.
const FLAG: usize = 2047;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
}

fn expect<Q: QueuePair>(qp: &Q, wr_id: u64, opcode: Opcode) -> Completion {
    let c = qp.wait_cq(T).expect("a completion");
    assert_eq!((c.wr_id, c.opcode, c.status), (wr_id, opcode, Status::Success), "{c:?}");
    c
}

/// The child's side. Without `VERBS_TCP_CHILD` (an ordinary test run) it does nothing.
#[test]
fn child_role() {
    let Ok(addr) = std::env::var(ENV) else { return };
    let b = Tcp;
    let pd = b.alloc_pd().unwrap();
    // The region the parent writes into and reads from: its upper half holds pattern 2.
    let mut init = vec![0u8; REGION];
    init[FLAG + 1..].copy_from_slice(&pattern(REGION - FLAG - 1, 2));
    let target = pd.register(init, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    // Advertise the region in the connect private data, as RPC-over-RDMA peers do.
    let mut pdata = target.addr().to_le_bytes().to_vec();
    pdata.extend_from_slice(&target.rkey().to_le_bytes());
    pdata.extend_from_slice(b"child");
    let (qp, accepted) = b.connect(&pd, &addr, &pdata, QpCaps::default(), T).unwrap();
    assert_eq!(accepted.len(), ACCEPT_PRIVATE_DATA_MAX);
    assert_eq!(&accepted[..6], b"parent");

    // Wait for the parent's Write: data first, then the flag (Writes land in order).
    let deadline = Instant::now() + T;
    while target.with(|t| t[FLAG]) == 0 {
        assert!(Instant::now() < deadline, "the parent's write never landed");
        std::thread::sleep(Duration::from_millis(1));
    }
    target.with(|t| assert_eq!(&t[..1024], &pattern(1024, 1)[..]));

    // Post a Receive, then tell the parent (whose Receive is posted) that it may Send.
    let inbox = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    qp.post_recv(1, Sge::whole(&inbox)).unwrap();
    let msg = pd.register(b"hello from the child".to_vec(), Access::empty()).unwrap();
    qp.post_send(2, &[Sge::whole(&msg)], None).unwrap();
    expect(&qp, 2, Opcode::Send);
    let r = expect(&qp, 1, Opcode::Recv);
    inbox.with(|b| assert_eq!(&b[..r.byte_len as usize], b"bye"));

    // Report, then exit without disconnecting: the OS closing the socket must be noticed.
    qp.post_send(3, &[Sge::new(&msg, 0, 5)], None).unwrap();
    expect(&qp, 3, Opcode::Send);
    std::process::exit(0);
}

#[test]
fn send_write_read_and_disconnect_across_processes() {
    let b = Tcp;
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ENV, &addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let req = listener.get_request(T).unwrap();
    let pdata = req.private_data().to_vec();
    assert_eq!(pdata.len(), CONNECT_PRIVATE_DATA_MAX);
    assert_eq!(&pdata[12..17], b"child");
    let remote_addr = u64::from_le_bytes(pdata[..8].try_into().unwrap());
    let rkey = u32::from_le_bytes(pdata[8..12].try_into().unwrap());
    let pd = b.alloc_pd().unwrap();
    let qp = req.accept(&pd, b"parent", QpCaps::default()).unwrap();
    let inbox = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    qp.post_recv(10, Sge::whole(&inbox)).unwrap();

    // RDMA Write into the child's region, then the flag it waits for.
    let data = pd.register(pattern(1024, 1), Access::empty()).unwrap();
    let flag = pd.register(vec![1], Access::empty()).unwrap();
    qp.post_write(11, &[Sge::whole(&data)], RemoteBuf { addr: remote_addr, rkey }).unwrap();
    qp.post_write(12, &[Sge::whole(&flag)], RemoteBuf { addr: remote_addr + FLAG as u64, rkey }).unwrap();
    assert_eq!(expect(&qp, 11, Opcode::RdmaWrite).byte_len, 1024);
    expect(&qp, 12, Opcode::RdmaWrite);

    // The child's Send.
    let r = expect(&qp, 10, Opcode::Recv);
    inbox.with(|b| assert_eq!(&b[..r.byte_len as usize], b"hello from the child"));

    // RDMA Read of the whole child region: our Write, the flag, and the child's own pattern.
    let back = pd.register(vec![0; REGION], Access::LOCAL_WRITE).unwrap();
    qp.post_read(13, &[Sge::whole(&back)], RemoteBuf { addr: remote_addr, rkey }).unwrap();
    assert_eq!(expect(&qp, 13, Opcode::RdmaRead).byte_len, REGION as u32);
    back.with(|b| {
        assert_eq!(&b[..1024], &pattern(1024, 1)[..]);
        assert!(b[1024..FLAG].iter().all(|&x| x == 0));
        assert_eq!(b[FLAG], 1);
        assert_eq!(&b[FLAG + 1..], &pattern(REGION - FLAG - 1, 2)[..]);
    });

    // Answer; the child reports and exits.
    qp.post_recv(14, Sge::whole(&inbox)).unwrap();
    let bye = pd.register(b"bye".to_vec(), Access::empty()).unwrap();
    qp.post_send(15, &[Sge::whole(&bye)], None).unwrap();
    expect(&qp, 15, Opcode::Send);
    let r = expect(&qp, 14, Opcode::Recv);
    inbox.with(|b| assert_eq!(&b[..r.byte_len as usize], b"hello"));

    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("running 1 test"), "the child ran no test");
    // The child exited without disconnecting; its socket closing is the disconnect.
    assert_eq!(qp.cm_event(T), Some(CmEvent::Disconnected));
    assert_eq!(qp.state(), QpState::Error);
    qp.post_recv(16, Sge::whole(&inbox)).unwrap();
    let c = qp.wait_cq(T).unwrap();
    assert_eq!((c.wr_id, c.status), (16, Status::WorkRequestFlushed));
}
