//! Address resolution of a UD QP over the soft device's TCP listeners, both sides.
//!
//! Active (`resolve`): a thread per call connects to the peer's service point, sends UD_HELLO
//! (our QP number, keys and proof token, and the private data), and reads the answer within
//! the connect's timeout (RESOLVE_TIMEOUT without one): UD_ACCEPT names the peer's QP, keys
//! and token, REJECT carries the peer's private data. After an accept the two QPs prove their
//! ports (proof.rs) within that timeout too, and the peer is reported resolved only once its
//! proof came. Every call reports exactly one event while the QP is open.
//!
//! Passive (`UdPending`): the listener hands the request on with the requester's address as
//! the kernel gave it (the TCP peer): a requester claims only its QP number (a UDP port on
//! that address), its keys and its token. Accepting answers UD_ACCEPT, and the QP reports the
//! requester resolved once a proof from that address and port came, `Broken` if none came in
//! time (proof.rs); either way the connection closes after the answer.

use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::proof::{Signal, Waiter, PROOF_TIMEOUT, RESEND_AT};
use super::{SoftAh, SoftUdQp};
use crate::device::soft::keys;
use crate::device::soft::listener::connect_service;
use crate::device::soft::wire::{op, read_message, reject, timed_out, write_message, Hello, UdHello, HELLO_MAX, UD_HELLO_MAX};
use crate::device::{CmEvent, DevError, PendingConnection, Qp, UdPeer};
use crate::util::sync::MutexExt;

/// How long a resolution without a timeout of its own may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the passive side waits to write its answer.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// The UDP address of QP `qpn` on `addr`'s host.
fn qp_address(addr: SocketAddr, qpn: u32) -> SocketAddr {
    SocketAddr::new(addr.ip(), qpn as u16)
}

/// The peer a resolution names (`named`: its QP number and keys) on `addr`'s host.
fn peer(addr: SocketAddr, named: &UdHello) -> UdPeer {
    let ah = SoftAh { dest: qp_address(addr, named.qpn), qkey: named.qkey, secret: named.secret };
    UdPeer { ah: Arc::new(ah), qpn: named.qpn, addr: SocketAddr::new(addr.ip(), 0) }
}

/// A fresh 128-bit proof token.
fn token() -> u128 {
    (0..4).fold(0u128, |t, _| t << 32 | u128::from(keys::random_u32()))
}

/// Starts resolving the service point `addr` for `qp`; the outcome is reported as one event.
pub(super) fn resolve(
    qp: &SoftUdQp,
    addr: SocketAddr,
    conn_qual: u64,
    private_data: &[u8],
    timeout: Option<Duration>,
) -> Result<(), DevError> {
    let hello =
        UdHello { qpn: qp.qpn(), qkey: qp.qkey(), secret: qp.secret(), token: token(), conn_qual, private_data: private_data.to_vec() };
    // The thread keeps no QP alive: a QP destroyed meanwhile hears nothing.
    let weak = qp.this.clone();
    // The request comes from the IA's address: the passive side takes the requester's address
    // from the kernel and sends its datagrams there.
    let local = qp.local_ip();
    std::thread::Builder::new()
        .name("dat2-soft-connect".into())
        .stack_size(256 << 10)
        .spawn(move || {
            let limit = timeout.unwrap_or(RESOLVE_TIMEOUT);
            let deadline = Instant::now() + limit;
            let ev = ask(local, addr, &hello, limit).and_then(|(answer, private_data)| {
                prove(&weak, qp_address(addr, answer.qpn), hello.token, answer.token, deadline)?;
                // The peer is on the host we connected to, at the port it proved its own.
                Ok(CmEvent::UdResolved { private_data, peer: peer(addr, &answer), passive: false })
            });
            if let Some(qp) = weak.upgrade() {
                qp.report(ev.unwrap_or_else(|e| e));
            }
        })
        .map(|_| ())
        .map_err(|_| DevError::NoResources)
}

/// The requester's side of the proofs (proof.rs): sends ours (`mine`) from our QP to the
/// acceptor's QP at `theirs` at the times RESEND_AT gives, until a proof carrying `expected`
/// came from there; within `deadline` and PROOF_TIMEOUT, else TimedOut.
fn prove(qp: &Weak<SoftUdQp>, theirs: SocketAddr, mine: u128, expected: u128, deadline: Instant) -> Result<(), CmEvent> {
    let start = Instant::now();
    let deadline = deadline.min(start + PROOF_TIMEOUT);
    let signal = Arc::new(Signal::default());
    let gone = || CmEvent::Broken;
    if !qp.upgrade().ok_or_else(gone)?.expect_proof(theirs, expected, deadline, Waiter::Requester(signal.clone())) {
        return Err(CmEvent::Broken);
    }
    let mut sent = 0;
    let proven = loop {
        if signal.is_set() {
            break true;
        }
        let now = Instant::now();
        if now >= deadline {
            break false;
        }
        if sent < RESEND_AT.len() && now >= start + RESEND_AT[sent] {
            let Some(q) = qp.upgrade() else { break false };
            q.send_proof(theirs, mine);
            sent += 1;
        }
        let next = RESEND_AT.get(sent).map_or(deadline, |&at| deadline.min(start + at));
        signal.wait_until(next);
    };
    let q = qp.upgrade().ok_or_else(gone)?;
    q.proofs.locked().forget(&signal);
    match proven {
        _ if q.is_closed() => Err(CmEvent::Broken),
        true => Ok(()),
        false => Err(CmEvent::TimedOut),
    }
}

/// One request: the acceptor's UD_ACCEPT (decoded, and its private data), or the failure's
/// event.
fn ask(local: IpAddr, addr: SocketAddr, hello: &UdHello, limit: Duration) -> Result<(UdHello, Vec<u8>), CmEvent> {
    let started = Instant::now();
    let left = || limit.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
    let stream = connect_service(local, addr, Some(limit))?;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(left()));
    let _ = stream.set_write_timeout(Some(left()));
    write_message(&stream, op::UD_HELLO, &hello.encode())
        .map_err(|e| if timed_out(&e) { CmEvent::TimedOut } else { CmEvent::Unreachable })?;
    let (hdr, body) = read_message(&stream, UD_HELLO_MAX.max(HELLO_MAX)).map_err(|e| {
        if timed_out(&e) {
            CmEvent::TimedOut
        } else {
            CmEvent::NonPeerRejected
        }
    })?;
    let _ = stream.shutdown(Shutdown::Both);
    match hdr.op {
        op::UD_ACCEPT => {
            let mut answer = UdHello::decode(&body).ok_or(CmEvent::NonPeerRejected)?;
            let private_data = std::mem::take(&mut answer.private_data);
            Ok((answer, private_data))
        }
        op::REJECT if hdr.status == reject::NO_SERVICE => {
            crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: no service point {:#x} at {addr}", hello.conn_qual);
            Err(CmEvent::NonPeerRejected)
        }
        op::REJECT => Err(CmEvent::PeerRejected { private_data: Hello::decode(&body).ok_or(CmEvent::NonPeerRejected)?.private_data }),
        _ => Err(CmEvent::NonPeerRejected),
    }
}

/// A UD resolution request received by a listener, waiting for accept or reject.
pub struct UdPending {
    stream: Mutex<Option<TcpStream>>,
    hello: UdHello,
    /// The requester's address, from the kernel.
    remote: SocketAddr,
}

impl UdPending {
    pub fn new(stream: TcpStream, hello: UdHello, remote: SocketAddr) -> UdPending {
        UdPending { stream: Mutex::new(Some(stream)), hello, remote }
    }
}

impl PendingConnection for UdPending {
    fn private_data(&self) -> &[u8] {
        &self.hello.private_data
    }

    fn datagram(&self) -> bool {
        true
    }

    fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn accept(&self, qp: &Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError> {
        let ud = qp.as_any().downcast_ref::<SoftUdQp>().ok_or(DevError::NotSupported)?;
        if ud.is_closed() {
            return Err(DevError::State);
        }
        let stream = self.stream.locked().take().ok_or(DevError::State)?;
        let answer = UdHello {
            qpn: ud.qpn(),
            qkey: ud.qkey(),
            secret: ud.secret(),
            token: token(),
            conn_qual: 0,
            private_data: private_data.to_vec(),
        };
        // Reported once the requester proved the port it named is its own (proof.rs): until
        // then nothing is sent there, and the consumer has no handle to send with.
        let from = qp_address(self.remote, self.hello.qpn);
        let resolved =
            CmEvent::UdResolved { private_data: self.hello.private_data.clone(), peer: peer(self.remote, &self.hello), passive: true };
        let waiter = Waiter::Acceptor { answer: answer.token, event: Some(resolved) };
        let waiting = ud.expect_proof(from, self.hello.token, Instant::now() + ANSWER_WAIT + PROOF_TIMEOUT, waiter);
        let _ = stream.set_write_timeout(Some(ANSWER_WAIT));
        let sent = waiting && write_message(&stream, op::UD_ACCEPT, &answer.encode()).is_ok();
        let _ = stream.shutdown(Shutdown::Both);
        if !sent {
            // A requester gone before our answer (or a QP waiting for too many) is not
            // resolved: the consumer hears of an error.
            ud.proofs.locked().forget_acceptor(from, self.hello.token);
            ud.report(CmEvent::Broken);
        }
        Ok(())
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(stream) = self.stream.locked().take() {
            // As for RC: only the private data.
            let answer = Hello { private_data: private_data.to_vec(), ..Hello::default() };
            let _ = stream.set_nonblocking(true);
            let _ = write_message(&stream, op::REJECT, &answer.encode());
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
