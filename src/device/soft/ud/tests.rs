//! The UD QP on a real soft device over loopback: resolution both ways, datagrams with their
//! GRH, a short receive, an SRQ, what a forged datagram (other keys, a lying or oversized
//! length) cannot do, and what a requester or acceptor that names a port not its own gets.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{grh, proof, SoftUdQp, UdPending, MTU};
use crate::abi::{DAT_DTO_ERR_FLUSHED, DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_ERR_LOCAL_PROTECTION, DAT_DTO_SUCCESS};
use crate::device::soft::wire::{
    flag, op, read_message, role, write_message, Dgram, Greeting, UdHello, DGRAM_HDR_LEN, GREETING_LEN, PRIVATE_DATA_MAX, PROOF_LEN,
    UD_HELLO_MAX, VERSION,
};
use crate::device::soft::{io, SoftDevice};
use crate::device::{
    Access, AddressHandle, CmEvent, Completion, DevError, Device, ListenEvents, Mr, Pd, PendingConnection, Qp, QpCaps, QpEvents, SendWr,
    Service, Sge, Srq, SrqEvents, WcOp, WrOp, GRH_LEN,
};
use crate::util::sync::{CondvarExt, MutexExt};

const WAIT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Recorder {
    state: Mutex<(VecDeque<Completion>, VecDeque<CmEvent>)>,
    cv: Condvar,
}

impl QpEvents for Recorder {
    fn completion(&self, c: Completion) {
        self.state.locked().0.push_back(c);
        self.cv.notify_all();
    }
    fn cm(&self, ev: CmEvent) {
        self.state.locked().1.push_back(ev);
        self.cv.notify_all();
    }
    fn key_live(&self, _lkey: u32) -> bool {
        true
    }
}

impl Recorder {
    fn completion(&self, wait: Duration) -> Option<Completion> {
        let deadline = Instant::now() + wait;
        let mut s = self.state.locked();
        loop {
            if let Some(c) = s.0.pop_front() {
                return Some(c);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self.cv.wait_timeout_locked(s, left).0;
        }
    }
    fn cm(&self) -> Option<CmEvent> {
        self.cm_within(WAIT)
    }
    fn cm_within(&self, wait: Duration) -> Option<CmEvent> {
        let deadline = Instant::now() + wait;
        let mut s = self.state.locked();
        loop {
            if let Some(e) = s.1.pop_front() {
                return Some(e);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self.cv.wait_timeout_locked(s, left).0;
        }
    }
}

/// Accepts every UD request on `qp` with private data "yes", or rejects it with "no".
struct Accepting {
    qp: Option<Arc<dyn Qp>>,
}

impl ListenEvents for Accepting {
    fn request(&self, conn: Arc<dyn PendingConnection>) {
        assert!(conn.datagram());
        match &self.qp {
            Some(qp) => conn.accept(qp, b"yes").expect("accepts"),
            None => conn.reject(b"no"),
        }
    }
}

struct Setup {
    dev: Arc<SoftDevice>,
    pd: Pd,
    mem: Vec<u8>,
    mr: Mr,
}

fn setup() -> Setup {
    let dev = SoftDevice::new("127.0.0.1 0").expect("device");
    let pd = dev.alloc_pd().expect("pd");
    let mem = vec![0u8; 64 << 10];
    let mr = dev.reg_mr(pd, mem.as_ptr() as u64, mem.len() as u64, Access::LOCAL_WRITE, false).expect("mr");
    Setup { dev, pd, mem, mr }
}

fn caps() -> QpCaps {
    QpCaps {
        service: Service::Ud,
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_rd_atomic: 1,
        max_rd_in: 1,
        max_message: MTU,
    }
}

impl Setup {
    fn qp(&self, srq: Option<Arc<dyn Srq>>) -> (Arc<dyn Qp>, Arc<Recorder>) {
        let rec = Arc::new(Recorder::default());
        let qp = self.dev.create_qp(self.pd, caps(), srq, rec.clone()).expect("UD QP");
        (qp, rec)
    }
    fn sge(&self, off: usize, len: u32) -> Sge {
        Sge { addr: self.mem.as_ptr() as u64 + off as u64, len, lkey: self.mr.lkey }
    }
    fn at(&self, off: usize, len: usize) -> Vec<u8> {
        // The device wrote through the registration; read it back the same way.
        let mut v = vec![0u8; len];
        io::pull(std::process::id(), &[(v.as_mut_ptr() as u64, len)], &[(self.mem.as_ptr() as u64 + off as u64, len)]).expect("reads");
        v
    }
    fn fill(&self, off: usize, bytes: &[u8]) {
        io::scatter(bytes, &[(self.mem.as_ptr() as u64 + off as u64, bytes.len())]).expect("writes");
    }
}

fn send(qp: &Arc<dyn Qp>, wr_id: u64, sges: Vec<Sge>, ah: &Arc<dyn AddressHandle>) {
    qp.post_send(&SendWr { wr_id, op: WrOp::Send, sges: sges.into(), remote: None, ah: Some(ah.clone()), fence: false, solicited: true })
        .expect("posts");
}

fn soft(qp: &Arc<dyn Qp>) -> &SoftUdQp {
    qp.as_any().downcast_ref::<SoftUdQp>().expect("a soft UD QP")
}

/// A datagram as a peer would send it, from a socket of its own, with `to`'s secret.
fn forged(from: &UdpSocket, to: &Arc<dyn Qp>, qkey: u32, length: u32, payload: &[u8]) {
    forged_keys(from, to, qkey, soft(to).secret(), length, payload)
}

fn forged_keys(from: &UdpSocket, to: &Arc<dyn Qp>, qkey: u32, secret: u64, length: u32, payload: &[u8]) {
    let src_qpn = u32::from(from.local_addr().expect("addr").port());
    let mut d = Dgram { qkey, secret, src_qpn, flags: 0, length }.encode().to_vec();
    d.extend_from_slice(payload);
    from.send_to(&d, ("127.0.0.1", to.local_port())).expect("sent");
}

#[test]
fn resolve_send_receive_with_grh() {
    let s = setup();
    let (a, ra) = s.qp(None);
    let (b, rb) = s.qp(None);
    assert_eq!((a.path(), a.remote()), ("udp", None));
    let listener = s.dev.open_ia().expect("ia").listen(0, Arc::new(Accepting { qp: Some(a.clone()) })).expect("listens");
    a.post_recv(1, smallvec::smallvec![s.sge(0, 40), s.sge(40, 8192)]).expect("posts");
    b.connect(SocketAddr::from(([127, 0, 0, 1], listener.conn_qual() as u16)), listener.conn_qual(), b"hello", Some(WAIT))
        .expect("connects");

    let Some(CmEvent::UdResolved { private_data, peer, passive: false }) = rb.cm() else { panic!("no active resolution") };
    assert_eq!((private_data.as_slice(), peer.qpn, peer.addr.ip()), (&b"yes"[..], u32::from(a.local_port()), "127.0.0.1".parse().unwrap()));
    let Some(CmEvent::UdResolved { private_data, peer: back, passive: true }) = ra.cm() else { panic!("no passive resolution") };
    assert_eq!((private_data.as_slice(), back.qpn), (&b"hello"[..], u32::from(b.local_port())));

    let payload: Vec<u8> = (0..100u8).collect();
    s.fill(16384, &payload);
    send(&b, 7, vec![s.sge(16384, 60), s.sge(16384 + 60, 40)], &peer.ah);
    let c = rb.completion(WAIT).expect("send completes");
    assert_eq!((c.wr_id, c.status, c.op, c.byte_len), (7, DAT_DTO_SUCCESS, WcOp::Send, 100));
    let c = ra.completion(WAIT).expect("receive completes");
    assert_eq!((c.wr_id, c.status, c.op, c.byte_len, c.solicited), (1, DAT_DTO_SUCCESS, WcOp::Recv, 140, true));
    let g = s.at(0, 40);
    assert_eq!(g[0] >> 4, 6);
    assert_eq!((u16::from_be_bytes([g[4], g[5]]), g[6]), (100, 0x1B));
    let v4mapped = |ip: [u8; 4]| std::net::Ipv4Addr::from(ip).to_ipv6_mapped().octets();
    assert_eq!((&g[8..24], &g[24..40]), (&v4mapped([127, 0, 0, 1])[..], &v4mapped([127, 0, 0, 1])[..]));
    assert_eq!(s.at(40, 100), payload);

    // A receive shorter than GRH + payload: LOCAL_LENGTH, and the datagram is consumed.
    a.post_recv(2, smallvec::smallvec![s.sge(0, 100)]).expect("posts");
    send(&b, 8, vec![s.sge(16384, 100)], &peer.ah);
    assert_eq!(rb.completion(WAIT).map(|c| c.status), Some(DAT_DTO_SUCCESS));
    let c = ra.completion(WAIT).expect("completes");
    assert_eq!((c.wr_id, c.status), (2, DAT_DTO_ERR_LOCAL_LENGTH));

    // A datagram larger than the EP's messages is refused at the sender.
    send(&b, 9, vec![s.sge(0, MTU), s.sge(0, 1)], &peer.ah);
    assert_eq!(rb.completion(WAIT).map(|c| (c.wr_id, c.status)), Some((9, DAT_DTO_ERR_LOCAL_LENGTH)));
    // A bad lkey: a local protection error, and the QP goes on.
    b.post_send(&SendWr {
        wr_id: 10,
        op: WrOp::Send,
        sges: smallvec::smallvec![Sge { lkey: s.mr.lkey ^ 1, ..s.sge(0, 8) }],
        remote: None,
        ah: Some(peer.ah.clone()),
        fence: false,
        solicited: false,
    })
    .expect("posts");
    assert_eq!(rb.completion(WAIT).map(|c| (c.wr_id, c.status)), Some((10, DAT_DTO_ERR_LOCAL_PROTECTION)));

    // Destroy flushes what is posted, reports the end once, and takes nothing more.
    a.post_recv(3, smallvec::smallvec![s.sge(0, 8192)]).expect("posts");
    a.destroy();
    assert_eq!(ra.completion(WAIT).map(|c| (c.wr_id, c.status)), Some((3, DAT_DTO_ERR_FLUSHED)));
    assert_eq!(ra.cm(), Some(CmEvent::Disconnected));
    assert!(a.post_recv(4, smallvec::smallvec![s.sge(0, 8)]).is_err());
    a.disconnect(false);
    assert!(ra.cm().is_none());
    // Sends to a QP that is gone still complete: UD does not know.
    send(&b, 11, vec![s.sge(0, 8)], &peer.ah);
    assert_eq!(rb.completion(WAIT).map(|c| (c.wr_id, c.status)), Some((11, DAT_DTO_SUCCESS)));
    drop(listener);
}

#[test]
fn forged_datagrams_do_not_land() {
    let s = setup();
    let (a, ra) = s.qp(None);
    let qkey = soft(&a).qkey();
    let peer = UdpSocket::bind("127.0.0.1:0").expect("binds");
    a.post_recv(1, smallvec::smallvec![s.sge(0, 8192)]).expect("posts");
    let quiet = Duration::from_millis(300);
    // Another Q_Key; a length that is not the payload's; one above the MTU; a short header.
    forged(&peer, &a, qkey ^ 0x8000_0000, 4, b"evil");
    forged(&peer, &a, qkey, 5, b"evil");
    forged(&peer, &a, qkey, 3, b"evil");
    forged(&peer, &a, qkey, MTU + 1, &vec![b'o'; MTU as usize + 1]);
    forged(&peer, &a, qkey, 60000, &vec![b'o'; 60000]);
    let secret = soft(&a).secret();
    peer.send_to(&Dgram { qkey, secret, src_qpn: 1, flags: 0, length: 0 }.encode()[..DGRAM_HDR_LEN - 1], ("127.0.0.1", a.local_port()))
        .expect("sent");
    // A source QPN that is not the port it comes from.
    let mut d = Dgram { qkey, secret, src_qpn: 1, flags: 0, length: 4 }.encode().to_vec();
    d.extend_from_slice(b"evil");
    peer.send_to(&d, ("127.0.0.1", a.local_port())).expect("sent");
    assert!(ra.completion(quiet).is_none(), "a forged datagram consumed the receive");
    // The receive is still posted: an honest datagram of the largest size takes it.
    forged(&peer, &a, qkey, MTU, &vec![b'g'; MTU as usize]);
    let c = ra.completion(WAIT).expect("completes");
    assert_eq!((c.wr_id, c.status, c.byte_len), (1, DAT_DTO_SUCCESS, GRH_LEN + MTU));
    assert!(s.at(40, MTU as usize).iter().all(|&b| b == b'g'));
    // With no receive, datagrams are dropped; nothing is held for them.
    for _ in 0..64 {
        forged(&peer, &a, qkey, 4, b"lost");
    }
    std::thread::sleep(quiet);
    a.post_recv(2, smallvec::smallvec![s.sge(0, 8192)]).expect("posts");
    assert!(ra.completion(quiet).is_none());
    forged(&peer, &a, qkey, 4, b"late");
    assert_eq!(ra.completion(WAIT).map(|c| (c.wr_id, c.byte_len)), Some((2, GRH_LEN + 4)));
    assert_eq!(s.at(40, 4), b"late");
    a.destroy();
}

#[test]
fn srq_rejects_and_foreign_handles() {
    struct NoLimit;
    impl SrqEvents for NoLimit {
        fn limit_reached(&self) {}
        fn key_live(&self, _lkey: u32) -> bool {
            true
        }
    }
    #[derive(Debug)]
    struct Foreign;
    impl AddressHandle for Foreign {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    let s = setup();
    let srq = s.dev.create_srq(s.pd, 8, 1, Arc::new(NoLimit)).expect("srq");
    let (a, ra) = s.qp(Some(srq.clone()));
    let (b, rb) = s.qp(None);
    let accepting = s.dev.open_ia().expect("ia").listen(0, Arc::new(Accepting { qp: Some(a.clone()) })).expect("listens");
    let rejecting = s.dev.open_ia().expect("ia").listen(0, Arc::new(Accepting { qp: None })).expect("listens");
    b.connect(SocketAddr::from(([127, 0, 0, 1], rejecting.conn_qual() as u16)), rejecting.conn_qual(), b"", Some(WAIT)).expect("connects");
    assert_eq!(rb.cm(), Some(CmEvent::PeerRejected { private_data: b"no".to_vec() }));
    b.connect(SocketAddr::from(([127, 0, 0, 1], accepting.conn_qual() as u16)), accepting.conn_qual(), b"", Some(WAIT)).expect("connects");
    let Some(CmEvent::UdResolved { peer, .. }) = rb.cm() else { panic!("not resolved") };
    assert!(matches!(ra.cm(), Some(CmEvent::UdResolved { passive: true, .. })));
    // Receives come from the SRQ.
    srq.post_recv(5, smallvec::smallvec![s.sge(0, 8192)]).expect("posts");
    s.fill(16384, b"through the srq");
    send(&b, 1, vec![s.sge(16384, 15)], &peer.ah);
    assert_eq!(rb.completion(WAIT).map(|c| c.status), Some(DAT_DTO_SUCCESS));
    assert_eq!(ra.completion(WAIT).map(|c| (c.wr_id, c.status, c.byte_len)), Some((5, DAT_DTO_SUCCESS, GRH_LEN + 15)));
    assert_eq!(s.at(40, 15), b"through the srq");
    assert_eq!(srq.available(), 0);
    // Another device's address handle; a UD request from a QP that is not a soft UD QP.
    let foreign: Arc<dyn AddressHandle> = Arc::new(Foreign);
    let wr =
        SendWr { wr_id: 2, op: WrOp::Send, sges: smallvec::smallvec![], remote: None, ah: Some(foreign), fence: false, solicited: false };
    assert_eq!(b.post_send(&wr), Err(DevError::NotSupported));
    let wr = SendWr { wr_id: 3, op: WrOp::Send, sges: smallvec::smallvec![], remote: None, ah: None, fence: false, solicited: false };
    assert_eq!(b.post_send(&wr), Err(DevError::NotSupported));
    // Nobody listening: a non-peer rejection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    b.connect(SocketAddr::from(([127, 0, 0, 1], port)), u64::from(port), b"", Some(WAIT)).expect("connects");
    assert_eq!(rb.cm(), Some(CmEvent::NonPeerRejected));
    // The requester's own QPN and keys, read off the wire by a listener of ours.
    let ours = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    b.connect(ours.local_addr().expect("addr"), 0x1_0000_0000 | 7, b"pd", Some(Duration::from_millis(500))).expect("connects");
    let (conn, _) = ours.accept().expect("accepts");
    answer_greeting(&conn);
    let (hdr, body) = read_message(&conn, UD_HELLO_MAX).expect("reads");
    let hello = UdHello::decode(&body).expect("a UD_HELLO");
    assert_eq!(
        (hdr.op, hello.qpn, hello.qkey, hello.secret, hello.conn_qual, hello.private_data.as_slice()),
        (op::UD_HELLO, u32::from(b.local_port()), soft(&b).qkey(), soft(&b).secret(), 0x1_0000_0007, &b"pd"[..])
    );
    // We never answer: the resolution times out.
    assert_eq!(rb.cm(), Some(CmEvent::TimedOut));
    a.destroy();
    b.destroy();
}

#[test]
fn grh_layout() {
    let g = grh("10.0.0.1".parse().unwrap(), "fe80::1".parse().unwrap(), 4096);
    assert_eq!(&g[0..8], &[0x60, 0, 0, 0, 0x10, 0x00, 0x1B, 64]);
    assert_eq!(&g[8..24], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);
    assert_eq!(&g[24..40], &"fe80::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
}

/// What a socket receives within `wait`: every datagram, whole.
fn received(sock: &UdpSocket, wait: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return got;
        }
        sock.set_read_timeout(Some(left)).expect("timeout");
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            got.push(buf[..n].to_vec());
        }
    }
}

/// Plays a listener's part of the greeting (wire::Greeting) on `conn`.
fn answer_greeting(mut conn: &std::net::TcpStream) {
    let mut ask = [0u8; GREETING_LEN];
    conn.read_exact(&mut ask).expect("a greeting");
    assert_eq!(Greeting::decode(&ask), Some(Greeting { version: VERSION, role: role::ASK }));
    conn.write_all(&Greeting::ours(role::ANSWER)).expect("answers");
}

/// A hostile requester: a UD_HELLO naming `qpn` (a port it may not own) to the service point
/// `port`; returns the UD_ACCEPT it got.
fn hostile_hello(port: u16, qpn: u16, token: u128) -> UdHello {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.write_all(&Greeting::ours(role::ASK)).expect("greets");
    let mut answer = [0u8; GREETING_LEN];
    s.read_exact(&mut answer).expect("an answer");
    assert_eq!(Greeting::decode(&answer).map(|g| g.role), Some(role::ANSWER));
    let hello = UdHello {
        qpn: u32::from(qpn),
        qkey: 0x4141_4141,
        secret: 0x4242,
        token,
        conn_qual: u64::from(port),
        private_data: b"evil".to_vec(),
    };
    write_message(&s, op::UD_HELLO, &hello.encode()).expect("writes");
    let (hdr, body) = read_message(&s, UD_HELLO_MAX).expect("an answer");
    assert_eq!(hdr.op, op::UD_ACCEPT);
    UdHello::decode(&body).expect("a UD_ACCEPT")
}

#[test]
fn a_requester_naming_a_port_not_its_own_gets_nothing_sent_there() {
    let s = setup();
    let (a, ra) = s.qp(None);
    let listener = s.dev.open_ia().expect("ia").listen(0, Arc::new(Accepting { qp: Some(a.clone()) })).expect("listens");
    // An unrelated UDP service on the requester's host.
    let victim = UdpSocket::bind("127.0.0.1:0").expect("binds");
    let vport = victim.local_addr().expect("addr").port();
    let token = 0x5eed_5eed_5eed_5eed_5eed_5eed_5eed_5eed;
    let answer = hostile_hello(listener.conn_qual() as u16, vport, token);
    // The requester proves nothing from the victim's port; a proof with the right token from
    // its own socket is not one from the port it named (counted, not believed).
    let own = UdpSocket::bind("127.0.0.1:0").expect("binds");
    own.send_to(&Dgram::proof(u32::from(own.local_addr().expect("addr").port()), token), ("127.0.0.1", answer.qpn as u16)).expect("sent");
    // The consumer is told of an error once the proof's time is up, never of a resolution.
    assert_eq!(ra.cm_within(proof::PROOF_TIMEOUT / 2), None, "an event before the proof's deadline");
    assert_eq!(ra.cm_within(proof::PROOF_TIMEOUT + Duration::from_secs(2)), Some(CmEvent::Broken));
    assert!(received(&victim, Duration::from_millis(300)).is_empty(), "the victim received a datagram");
    assert_eq!(soft(&a).key_violations(), 1);
    // An honest requester still resolves the same QP.
    let (b, rb) = s.qp(None);
    b.connect(SocketAddr::from(([127, 0, 0, 1], listener.conn_qual() as u16)), listener.conn_qual(), b"", Some(WAIT)).expect("connects");
    assert!(matches!(rb.cm(), Some(CmEvent::UdResolved { passive: false, .. })));
    assert!(matches!(ra.cm(), Some(CmEvent::UdResolved { passive: true, .. })));
    a.destroy();
    b.destroy();
}

#[test]
fn an_acceptor_naming_a_port_not_its_own_is_not_believed() {
    let s = setup();
    let (b, rb) = s.qp(None);
    let victim = UdpSocket::bind("127.0.0.1:0").expect("binds");
    let vport = victim.local_addr().expect("addr").port();
    let hostile = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = hostile.local_addr().expect("addr").port();
    b.connect(hostile.local_addr().expect("addr"), u64::from(port), b"", Some(Duration::from_secs(30))).expect("connects");
    let (conn, _) = hostile.accept().expect("accepts");
    answer_greeting(&conn);
    let (_, body) = read_message(&conn, UD_HELLO_MAX).expect("reads");
    let hello = UdHello::decode(&body).expect("a UD_HELLO");
    let lie = UdHello { qpn: u32::from(vport), qkey: 0x4141_4141, secret: 0x4242, token: 7, conn_qual: 0, private_data: b"ok".to_vec() };
    write_message(&conn, op::UD_ACCEPT, &lie.encode()).expect("writes");
    // Not resolved: timed out when no proof came from the port named.
    assert_eq!(rb.cm_within(proof::PROOF_TIMEOUT + Duration::from_secs(2)), Some(CmEvent::TimedOut));
    // All the victim got: the requester's proofs, few, keyless, with nothing of the
    // acceptor's choosing (the token is the requester's own).
    let got = received(&victim, Duration::from_millis(300));
    assert!(!got.is_empty() && got.len() <= proof::RESEND_AT.len(), "{} proofs", got.len());
    for d in &got {
        assert_eq!(d.len(), DGRAM_HDR_LEN + PROOF_LEN);
        let h = Dgram::parse(d, MTU).expect("a datagram");
        assert_eq!((h.flags, h.qkey, h.secret, Dgram::token(d)), (flag::PROOF, 0, 0, Some(hello.token)));
    }
    b.destroy();
}

#[test]
fn wrong_keys_are_counted_and_never_land() {
    let s = setup();
    let (a, ra) = s.qp(None);
    let (qkey, secret) = (soft(&a).qkey(), soft(&a).secret());
    let peer = UdpSocket::bind("127.0.0.1:0").expect("binds");
    a.post_recv(1, smallvec::smallvec![s.sge(0, 8192)]).expect("posts");
    // A search of the Q_Key space, and the right Q_Key with wrong secrets.
    for k in 0..200u32 {
        forged_keys(&peer, &a, qkey ^ (k + 1), secret, 4, b"gues");
        forged_keys(&peer, &a, qkey, secret ^ u64::from(k + 1), 4, b"gues");
    }
    assert!(ra.completion(Duration::from_millis(300)).is_none(), "a datagram with wrong keys landed");
    let deadline = Instant::now() + WAIT;
    while soft(&a).key_violations() < 400 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(soft(&a).key_violations(), 400);
    forged(&peer, &a, qkey, 4, b"good");
    assert_eq!(ra.completion(WAIT).map(|c| (c.wr_id, c.byte_len)), Some((1, GRH_LEN + 4)));
    a.destroy();
}

/// Once `disconnect` returns, nothing more reaches the consumer, though the engine was in the
/// middle of a flood of datagrams with the right keys for the QP, and its SRQ (which the
/// disconnect does not flush) still has receives.
#[test]
fn nothing_lands_after_disconnect_returns() {
    struct NoLimit;
    impl SrqEvents for NoLimit {
        fn limit_reached(&self) {}
        fn key_live(&self, _lkey: u32) -> bool {
            true
        }
    }
    let s = setup();
    for round in 0..5 {
        let srq = s.dev.create_srq(s.pd, 256, 1, Arc::new(NoLimit)).expect("srq");
        let (b, rb) = s.qp(Some(srq.clone()));
        let stop = Arc::new(AtomicBool::new(false));
        let flood = {
            let (b, stop) = (b.clone(), stop.clone());
            std::thread::spawn(move || {
                let from = UdpSocket::bind("127.0.0.1:0").expect("binds");
                let qkey = soft(&b).qkey();
                while !stop.load(Ordering::Relaxed) {
                    forged(&from, &b, qkey, 4, b"data");
                }
            })
        };
        let stock = |n: u64| {
            for k in 0..n {
                let _ = srq.post_recv(k, smallvec::smallvec![s.sge(0, 64)]);
            }
        };
        stock(128);
        // One landed: the disconnect meets the engine in the middle of the flood.
        rb.completion(WAIT).expect("a datagram lands");
        stock(128);
        b.disconnect(false);
        let count = || {
            let st = rb.state.locked();
            st.0.len() + st.1.len()
        };
        let seen = count();
        stock(128);
        std::thread::sleep(Duration::from_millis(50));
        let after = count();
        stop.store(true, Ordering::Relaxed);
        flood.join().expect("joins");
        assert_eq!(after, seen, "round {round}: events after disconnect returned");
        assert_eq!(rb.state.locked().1.back(), Some(&CmEvent::Disconnected), "round {round}: Disconnected comes last");
    }
}

/// A service that is no dat2-soft listener of our wire version (one that echoes, one that
/// answers garbled, a dat2 of another version) ends the resolution NonPeerRejected, and hears
/// our greeting and nothing of the consumer's.
#[test]
fn a_listener_that_is_not_ours_hears_only_the_greeting() {
    let s = setup();
    let (b, rb) = s.qp(None);
    let mut other = Greeting::ours(role::ANSWER);
    other[8] = 7;
    for answer in [Greeting::ours(role::ASK), Greeting::ours(role::ANSWER).map(|x| x ^ 0x20), other] {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = l.local_addr().expect("addr");
        b.connect(addr, u64::from(addr.port()), b"the consumer's", Some(WAIT)).expect("connects");
        let (mut c, _) = l.accept().expect("accepts");
        let mut got = [0u8; GREETING_LEN];
        c.read_exact(&mut got).expect("a greeting");
        c.write_all(&answer).expect("answers");
        assert_eq!(rb.cm(), Some(CmEvent::NonPeerRejected));
        // The resolution closed its connection, having sent nothing more.
        c.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).expect("closed");
        assert_eq!((got, rest.len()), (Greeting::ours(role::ASK), 0));
    }
    b.destroy();
}

/// The stages after the greeting have the consumer's deadline: an acceptor that takes
/// UD_HELLO and never answers, and one whose port never proves itself, end the resolution
/// TimedOut at the consumer's timeout (shorter than the proof's own), its connection closed;
/// and a disconnect ends a resolution in flight at once: its connection closes, and only
/// DISCONNECTED is reported.
#[test]
fn resolution_stages_have_the_consumers_deadline_and_end_with_the_qp() {
    let s = setup();
    let (b, rb) = s.qp(None);
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = l.local_addr().expect("addr");
    let limit = Duration::from_millis(400);
    assert!(limit < proof::PROOF_TIMEOUT);
    let closed = |c: &std::net::TcpStream| {
        c.set_read_timeout(Some(WAIT)).expect("timeout");
        matches!((&*c).read(&mut [0u8; 1]), Ok(0))
    };
    for answers in [false, true] {
        let t0 = Instant::now();
        b.connect(addr, u64::from(addr.port()), b"", Some(limit)).expect("connects");
        let (c, _) = l.accept().expect("accepts");
        answer_greeting(&c);
        let (hdr, _) = read_message(&c, UD_HELLO_MAX).expect("UD_HELLO");
        assert_eq!(hdr.op, op::UD_HELLO);
        if answers {
            // A port of nobody's: no proof ever comes from it.
            let lie = UdHello { qpn: 9, qkey: 1, secret: 2, token: 3, conn_qual: 0, private_data: Vec::new() };
            write_message(&c, op::UD_ACCEPT, &lie.encode()).expect("writes");
        }
        assert_eq!(rb.cm(), Some(CmEvent::TimedOut), "answers: {answers}");
        let took = t0.elapsed();
        assert!(took >= limit && took < limit + Duration::from_millis(500), "answers: {answers}, took {took:?}");
        assert!(closed(&c), "answers: {answers}: the connection stayed open");
    }
    b.connect(addr, u64::from(addr.port()), b"", Some(Duration::from_secs(30))).expect("connects");
    let (c, _) = l.accept().expect("accepts");
    answer_greeting(&c);
    read_message(&c, UD_HELLO_MAX).expect("UD_HELLO");
    b.disconnect(false);
    assert!(closed(&c), "the disconnect left the resolution's connection open");
    assert_eq!(rb.cm(), Some(CmEvent::Disconnected));
    assert_eq!(rb.cm_within(Duration::from_millis(300)), None);
    b.destroy();
}

/// Accepting never waits on the requester: an answer its socket does not take at once is not
/// sent, and the requester is not resolved (`Broken` at once; its proof, coming later, is not
/// believed). A requester cannot bring this about by itself on a new socket (the kernel takes
/// the small answer whatever the window), so the test fills the accepting socket's buffer
/// first, as a host short of socket memory would leave it; before, the accept took ~1 s.
#[test]
fn accept_never_waits_on_the_requester() {
    let s = setup();
    let (a, ra) = s.qp(None);
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let requester = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connects");
    let (conn, remote) = l.accept().expect("accepts");
    // Never read: the requester's window closes, then the acceptor's buffer fills.
    conn.set_nonblocking(true).expect("non-blocking");
    while (&conn).write(&[0u8; 64 << 10]).is_ok() {}
    conn.set_nonblocking(false).expect("blocking, as the listener hands it on");
    let port = UdpSocket::bind(remote).expect("binds the requester's QP port");
    let token = 0x704b_3d70_4b3d;
    let qpn = u32::from(port.local_addr().expect("addr").port());
    let hello = UdHello { qpn, qkey: 1, secret: 2, token, conn_qual: 0, private_data: vec![7; PRIVATE_DATA_MAX] };
    let pending = UdPending::new(conn, hello, remote);
    let t0 = Instant::now();
    pending.accept(&a, &[9; PRIVATE_DATA_MAX]).expect("accepts");
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(50), "the accept took {took:?}");
    assert_eq!(ra.cm_within(Duration::ZERO), Some(CmEvent::Broken));
    // The acceptor no longer waits for this requester's proof.
    port.send_to(&Dgram::proof(qpn, token), ("127.0.0.1", a.local_port())).expect("sent");
    assert_eq!(ra.cm_within(Duration::from_millis(300)), None);
    assert!(received(&port, Duration::from_millis(100)).is_empty(), "the acceptor answered an unresolved requester");
    drop(requester);
    a.destroy();
}
