//! The requester's side of a UD resolution, driven by the process's engine (engine.rs): a
//! resolution costs a socket while it runs, no thread. Each stage is a state of `Exchange`'s
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

use std::io::ErrorKind;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::proof::{Waiter, PROOF_TIMEOUT};
use super::{SoftAh, SoftUdQp};
use crate::device::soft::engine::{self, Handler, Registration};
use crate::device::soft::exchange::{message, Exchange, Stop};
use crate::device::soft::keys;
use crate::device::soft::listener::{self, CLOSED_AT_GREETING, HANDSHAKE_TIMEOUT, REFUSED_RETRY};
use crate::device::soft::wire::{op, reject, role, Greeting, Hdr, Hello, UdHello, GREETING_LEN, HDR_LEN, HELLO_MAX, UD_HELLO_MAX};
use crate::device::{CmEvent, UdPeer};
use crate::util::sockaddr;
use crate::util::sync::MutexExt;

/// How long a resolution without a timeout of its own may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a refused connect waits before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// The engine's handler of one resolution's TCP exchange, owned by its QP while it runs.
pub struct Resolver {
    this: Weak<Resolver>,
    qp: Weak<SoftUdQp>,
    state: Mutex<Option<Resolution>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The TCP connect is in progress (or failed at once: `failed`).
    Connecting,
    /// A refused connect is tried again at `by`.
    Pausing,
    /// Our greeting is going out; its answer is awaited.
    Greeting,
    /// UD_HELLO is going out; the answer (UD_ACCEPT or REJECT) is awaited.
    Answer,
}

/// Fields drop in order: the registration before the stream.
struct Resolution {
    reg: Option<Registration>,
    stream: TcpStream,
    /// The IA's address, which the request comes from: the acceptor takes the requester's
    /// address from the kernel and proves it (proof.rs).
    local: IpAddr,
    addr: SocketAddr,
    stage: Stage,
    /// The current stage's deadline, and whether it is the resolution's (TimedOut) rather
    /// than the stage's own.
    by: Instant,
    consumers: bool,
    started: Instant,
    limit: Duration,
    msg: Exchange,
    failed: Option<std::io::Error>,
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
    let started = Instant::now();
    let limit = timeout.unwrap_or(RESOLVE_TIMEOUT);
    let local = qp.local_ip();
    let (stream, failed) = match connect(local, addr) {
        Ok(c) => c,
        Err(ev) => return qp.report(ev),
    };
    let resolver = Arc::new_cyclic(|this| Resolver { this: this.clone(), qp: qp.this.clone(), state: Mutex::new(None) });
    let mut r = Resolution {
        reg: None,
        stream,
        local,
        addr,
        stage: Stage::Connecting,
        by: started + limit,
        consumers: true,
        started,
        limit,
        msg: Exchange::default(),
        failed,
        hello,
    };
    // Held until the resolution is stored: an edge that comes first waits for it.
    let mut g = resolver.state.locked();
    if resolver.register(&mut r).is_none() {
        drop(g);
        return qp.report(CmEvent::Unreachable);
    }
    if r.failed.is_some() {
        // Told on the engine thread, as any outcome is.
        if let Some(reg) = &r.reg {
            reg.kick();
        }
    }
    *g = Some(r);
    // Listed before a turn can end it (and take it off the list).
    qp.resolving.locked().push(resolver.clone());
    drop(g);
}

/// A non-blocking connect from `local` to `addr` started, with the error it failed with at
/// once, if it did (reported from the engine, which the socket is registered with).
fn connect(local: IpAddr, addr: SocketAddr) -> Result<(TcpStream, Option<std::io::Error>), CmEvent> {
    sockaddr::connect_begin(local, addr).map_err(|e| listener::connect_failed(&e, addr))
}

impl Resolver {
    fn register(&self, r: &mut Resolution) -> Option<()> {
        r.reg = None;
        let handler: Weak<dyn Handler> = self.this.clone();
        let reg = engine::engine()?.register(r.stream.as_raw_fd(), engine::IN | engine::OUT, handler).ok()?;
        reg.timer(r.by);
        r.reg = Some(reg);
        Some(())
    }

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
        let outcome = match r.turn(&qp, events, self) {
            Turn::Wait => return,
            Turn::Failed(ev) => Err(ev),
            Turn::Accepted(answer, private_data) => Ok((answer, private_data)),
        };
        let Some(Resolution { reg, stream, addr, hello, started, limit, .. }) = g.take() else { return };
        drop(g);
        drop(reg);
        let _ = stream.shutdown(Shutdown::Both);
        drop(stream);
        qp.resolving.locked().retain(|x| !std::ptr::eq(Arc::as_ptr(x), self));
        match outcome {
            Ok((answer, private_data)) => prove(&qp, addr, &hello, &answer, private_data, started + limit),
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
    /// Enters `stage` with `msg` to send and a deadline of `wait` (cut to the resolution's).
    fn enter(&mut self, stage: Stage, msg: Vec<u8>, wait: Duration) {
        let left = self.limit.saturating_sub(self.started.elapsed());
        self.consumers = wait >= left;
        self.by = Instant::now() + wait.min(left);
        self.stage = stage;
        self.msg.start(msg);
        if let Some(reg) = &self.reg {
            reg.timer(self.by);
        }
    }

    /// Advances the resolution as far as the socket lets it.
    fn turn(&mut self, qp: &SoftUdQp, events: u32, resolver: &Resolver) -> Turn {
        if qp.is_closed() {
            return Turn::Failed(CmEvent::Broken);
        }
        loop {
            let now = Instant::now();
            match self.stage {
                Stage::Connecting => {
                    let error = match self.failed.take() {
                        Some(e) => Some(e),
                        None if events & (engine::OUT | engine::ERR) == 0 && now < self.by => return Turn::Wait,
                        None => self.stream.take_error().unwrap_or_else(Some),
                    };
                    match error {
                        Some(e) if e.kind() == ErrorKind::ConnectionRefused && self.started.elapsed() < REFUSED_RETRY.min(self.limit) => {
                            self.stage = Stage::Pausing;
                            self.by = now + RETRY_PAUSE;
                            if let Some(reg) = &self.reg {
                                reg.timer(self.by);
                            }
                            return Turn::Wait;
                        }
                        Some(e) => return Turn::Failed(listener::connect_failed(&e, self.addr)),
                        None if self.stream.peer_addr().is_err() => {
                            // Not connected yet.
                            return if now >= self.by { Turn::Failed(CmEvent::TimedOut) } else { Turn::Wait };
                        }
                        None => {
                            let _ = self.stream.set_nodelay(true);
                            self.enter(Stage::Greeting, Greeting::ours(role::ASK).to_vec(), HANDSHAKE_TIMEOUT);
                        }
                    }
                }
                Stage::Pausing => {
                    if now < self.by {
                        return Turn::Wait;
                    }
                    let (stream, failed) = match connect(self.local, self.addr) {
                        Ok(c) => c,
                        Err(ev) => return Turn::Failed(ev),
                    };
                    self.reg = None;
                    self.stream = stream;
                    self.failed = failed;
                    self.stage = Stage::Connecting;
                    self.by = self.started + self.limit;
                    if resolver.register(self).is_none() {
                        return Turn::Failed(CmEvent::Unreachable);
                    }
                    if self.failed.is_none() {
                        return Turn::Wait;
                    }
                }
                Stage::Greeting => {
                    match self.msg.flush_and_fill(&self.stream, GREETING_LEN, now >= self.by) {
                        Ok(()) => {}
                        Err(Stop::Wait) => return Turn::Wait,
                        Err(Stop::Late) if self.consumers => return Turn::Failed(CmEvent::TimedOut),
                        Err(Stop::Late) => {
                            let why = format!("no answer to its greeting within {HANDSHAKE_TIMEOUT:?}");
                            return Turn::Failed(listener::not_ours(self.addr, &why));
                        }
                        Err(Stop::WriteFailed) => return Turn::Failed(CmEvent::Unreachable),
                        Err(Stop::Closed | Stop::ReadFailed) => return Turn::Failed(listener::not_ours(self.addr, CLOSED_AT_GREETING)),
                    }
                    let answer: [u8; GREETING_LEN] = self.msg.got().try_into().expect("whole");
                    if let Err(e) = listener::check_answer(&answer, self.addr) {
                        return Turn::Failed(e);
                    }
                    // Only now, to a dat2-soft listener, anything of the consumer's.
                    let hello = message(op::UD_HELLO, &self.hello.encode());
                    self.enter(Stage::Answer, hello, self.limit);
                }
                Stage::Answer => return self.answer(now),
            }
        }
    }

    /// The acceptor's answer to UD_HELLO, once it has come whole.
    fn answer(&mut self, now: Instant) -> Turn {
        let failed = |stop| match stop {
            Stop::Wait => Turn::Wait,
            Stop::Late => Turn::Failed(CmEvent::TimedOut),
            Stop::WriteFailed => Turn::Failed(CmEvent::Unreachable),
            Stop::Closed | Stop::ReadFailed => Turn::Failed(CmEvent::NonPeerRejected),
        };
        let late = now >= self.by;
        if let Err(stop) = self.msg.flush_and_fill(&self.stream, HDR_LEN, late) {
            return failed(stop);
        }
        let hdr = Hdr::decode(self.msg.got()[..HDR_LEN].try_into().expect("a header"));
        if hdr.payload > UD_HELLO_MAX.max(HELLO_MAX) {
            return Turn::Failed(CmEvent::NonPeerRejected);
        }
        if let Err(stop) = self.msg.flush_and_fill(&self.stream, HDR_LEN + hdr.payload as usize, late) {
            return failed(stop);
        }
        let body = &self.msg.got()[HDR_LEN..];
        match hdr.op {
            op::UD_ACCEPT => match UdHello::decode(body) {
                Some(mut answer) => {
                    let private_data = std::mem::take(&mut answer.private_data);
                    Turn::Accepted(answer, private_data)
                }
                None => Turn::Failed(CmEvent::NonPeerRejected),
            },
            op::REJECT if hdr.status == reject::NO_SERVICE => {
                crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: no service point {:#x} at {}", self.hello.conn_qual, self.addr);
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
