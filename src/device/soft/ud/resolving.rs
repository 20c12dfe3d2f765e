//! The requester's side of a UD resolution, driven by the process's engine (engine.rs): a
//! resolution costs a socket while it runs, no thread. Each stage is a state of `Resolution`'s
//! turn, advanced when its socket is ready, and each has a deadline, an engine timer:
//! 1. the TCP connect from the IA's address (a refused one is tried again for
//!    REFUSED_RETRY) and the greeting's answer: within the resolution's timeout (the
//!    consumer's, else RESOLVE_TIMEOUT), and the answer within HANDSHAKE_TIMEOUT besides;
//! 2. the acceptor's answer to UD_HELLO (UD_ACCEPT or REJECT, which its consumer decides):
//!    within the resolution's timeout;
//! 3. the proofs (proof.rs): a wait of the QP's own, served by the QP's turns on the engine
//!    (its timers resend our proof and end the wait), within PROOF_TIMEOUT and the
//!    resolution's timeout.
//!
//! Past a deadline the consumer hears TimedOut. Only exactly the bytes of the answer are read.
//! The QP owns its resolutions while their TCP exchange runs, and a resolution holds the QP
//! only weakly: `disconnect` and `destroy` end them at once, and a QP that is gone hears
//! nothing.

use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::proof::{Waiter, PROOF_TIMEOUT};
use super::{SoftAh, SoftUdQp};
use crate::device::soft::engine::Handler;
use crate::device::soft::exchange::{answer_failed, message, Dial, Dialed};
use crate::device::soft::keys;
use crate::device::soft::wire::{op, reject, Hdr, Hello, UdHello, HDR_LEN, HELLO_MAX, UD_HELLO_MAX};
use crate::device::{CmEvent, UdPeer};
use crate::util::sync::MutexExt;

/// How long a resolution without a timeout of its own may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// The engine's handler of one resolution's TCP exchange, owned by its QP while it runs.
pub struct Resolver {
    this: Weak<Resolver>,
    qp: Weak<SoftUdQp>,
    state: Mutex<Option<Resolution>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The TCP connect (from the IA's address: the acceptor takes the requester's address from
    /// the kernel and proves it, proof.rs) and the greeting (exchange.rs `Dial`).
    Dialing,
    /// UD_HELLO is going out; the answer (UD_ACCEPT or REJECT) is awaited.
    Answer,
}

struct Resolution {
    dial: Dial,
    stage: Stage,
    hello: UdHello,
}

/// What a turn came to.
enum Turn {
    Wait,
    Failed(CmEvent),
    /// UD_ACCEPT came: the acceptor's QP, keys and token, and its private data.
    Accepted(UdHello, Vec<u8>),
}

/// The UDP address of QP `qpn` on `addr`'s host.
pub(super) fn qp_address(addr: SocketAddr, qpn: u32) -> SocketAddr {
    SocketAddr::new(addr.ip(), qpn as u16)
}

/// The peer a resolution names (`named`: its QP number and keys) on `addr`'s host.
pub(super) fn peer(addr: SocketAddr, named: &UdHello) -> UdPeer {
    let ah = SoftAh { dest: qp_address(addr, named.qpn), qkey: named.qkey, secret: named.secret };
    UdPeer { ah: Arc::new(ah), qpn: named.qpn, addr: SocketAddr::new(addr.ip(), 0) }
}

/// A fresh 128-bit proof token.
pub(super) fn token() -> u128 {
    (0..4).fold(0u128, |t, _| t << 32 | u128::from(keys::random_u32()))
}

/// Starts resolving the service point `conn_qual` at `addr` for `qp`, with the consumer's
/// `private_data` and `timeout`: its outcome is one event (`report`).
pub(super) fn resolve(qp: &SoftUdQp, addr: SocketAddr, conn_qual: u64, private_data: &[u8], timeout: Option<Duration>) {
    let hello =
        UdHello { qpn: qp.qpn(), qkey: qp.qkey(), secret: qp.secret(), token: token(), conn_qual, private_data: private_data.to_vec() };
    start(qp, addr, hello, timeout);
}

/// `resolve` with our UD_HELLO (our QP number, keys, token and the private data).
fn start(qp: &SoftUdQp, addr: SocketAddr, hello: UdHello, timeout: Option<Duration>) {
    let resolver = Arc::new_cyclic(|this| Resolver { this: this.clone(), qp: qp.this.clone(), state: Mutex::new(None) });
    let handler: Weak<dyn Handler> = resolver.this.clone();
    let dial = match Dial::start(qp.local_ip(), addr, timeout.unwrap_or(RESOLVE_TIMEOUT), handler) {
        Ok(d) => d,
        Err(ev) => return qp.report(ev),
    };
    let mut r = Resolution { dial, stage: Stage::Dialing, hello };
    // Held until the resolution is stored: an edge that comes first waits for it.
    let mut g = resolver.state.locked();
    if r.dial.register().is_none() {
        drop(g);
        return qp.report(CmEvent::Unreachable);
    }
    *g = Some(r);
    // Listed before a turn can end it (and take it off the list).
    qp.resolving.locked().push(resolver.clone());
    drop(g);
}

impl Resolver {
    /// Ends the exchange at once (the QP is disconnected or destroyed): its socket is
    /// unregistered and closed; a turn under way ends first.
    pub(super) fn end(&self) {
        let r = self.state.locked().take();
        drop(r);
    }
}

impl Handler for Resolver {
    fn ready(&self, events: u32) {
        let Some(qp) = self.qp.upgrade() else { return };
        let mut g = self.state.locked();
        let Some(r) = g.as_mut() else { return };
        let outcome = match r.turn(&qp, events) {
            Turn::Wait => return,
            Turn::Failed(ev) => Err(ev),
            Turn::Accepted(answer, private_data) => Ok((answer, private_data)),
        };
        let Some(Resolution { dial, hello, .. }) = g.take() else { return };
        drop(g);
        let (addr, deadline) = (dial.addr(), dial.limit_at());
        let stream = dial.into_stream();
        let _ = stream.shutdown(Shutdown::Both);
        drop(stream);
        qp.resolving.locked().retain(|x| !std::ptr::eq(Arc::as_ptr(x), self));
        match outcome {
            Ok((answer, private_data)) => prove(&qp, addr, &hello, &answer, private_data, deadline),
            Err(ev) => qp.report(ev),
        }
    }

    fn panicked(&self) {
        let r = self.state.locked().take();
        drop(r);
        if let Some(qp) = self.qp.upgrade() {
            qp.resolving.locked().retain(|x| !std::ptr::eq(Arc::as_ptr(x), self));
            qp.report(CmEvent::Broken);
        }
    }
}

/// The acceptor answered: the QP waits for its proof and sends ours (proof.rs), within
/// PROOF_TIMEOUT and `deadline`. The peer is on the host we connected to, at the port it
/// proves its own; until then nothing but our proofs goes there.
fn prove(qp: &SoftUdQp, addr: SocketAddr, hello: &UdHello, answer: &UdHello, private_data: Vec<u8>, deadline: Instant) {
    let theirs = qp_address(addr, answer.qpn);
    let start = Instant::now();
    let event = CmEvent::UdResolved { private_data, peer: peer(addr, answer), passive: false };
    // The first proof goes now (RESEND_AT[0]), once the wait is there to take the answer.
    let waiter = Waiter::Requester { mine: hello.token, start, sent: 1, event };
    if !qp.expect_proof(theirs, answer.token, deadline.min(start + PROOF_TIMEOUT), waiter) {
        return qp.report(CmEvent::Broken);
    }
    qp.send_proof(theirs, hello.token);
}

impl Resolution {
    /// Advances the resolution as far as the socket lets it.
    fn turn(&mut self, qp: &SoftUdQp, events: u32) -> Turn {
        if qp.is_closed() {
            return Turn::Failed(CmEvent::Broken);
        }
        loop {
            match self.stage {
                Stage::Dialing => match self.dial.dial(events) {
                    Dialed::Wait => return Turn::Wait,
                    Dialed::Failed(ev) => return Turn::Failed(ev),
                    Dialed::Greeted => {
                        // Only now, to a dat2-soft listener, anything of the consumer's.
                        let hello = message(op::UD_HELLO, &self.hello.encode());
                        // Within what is left of the resolution's own limit.
                        self.dial.enter(hello, Duration::MAX);
                        self.stage = Stage::Answer;
                    }
                },
                Stage::Answer => return self.answer(),
            }
        }
    }

    /// The acceptor's answer to UD_HELLO, once it has come whole.
    fn answer(&mut self) -> Turn {
        let failed = |stop| answer_failed(stop).map_or(Turn::Wait, Turn::Failed);
        if let Err(stop) = self.dial.exchange(HDR_LEN) {
            return failed(stop);
        }
        let hdr = Hdr::decode(self.dial.got()[..HDR_LEN].try_into().expect("a header"));
        if hdr.payload > UD_HELLO_MAX.max(HELLO_MAX) {
            return Turn::Failed(CmEvent::NonPeerRejected);
        }
        if let Err(stop) = self.dial.exchange(HDR_LEN + hdr.payload as usize) {
            return failed(stop);
        }
        let body = &self.dial.got()[HDR_LEN..];
        match hdr.op {
            op::UD_ACCEPT => match UdHello::decode(body) {
                Some(mut answer) => {
                    let private_data = std::mem::take(&mut answer.private_data);
                    Turn::Accepted(answer, private_data)
                }
                None => Turn::Failed(CmEvent::NonPeerRejected),
            },
            op::REJECT if hdr.status == reject::NO_SERVICE => {
                crate::dbg_log!(
                    crate::log::DbgType::ERROR,
                    "dat2-soft: no service point {:#x} at {}",
                    self.hello.conn_qual,
                    self.dial.addr()
                );
                Turn::Failed(CmEvent::NonPeerRejected)
            }
            op::REJECT => match Hello::decode(body) {
                Some(h) => Turn::Failed(CmEvent::PeerRejected { private_data: h.private_data }),
                None => Turn::Failed(CmEvent::NonPeerRejected),
            },
            _ => Turn::Failed(CmEvent::NonPeerRejected),
        }
    }
}
