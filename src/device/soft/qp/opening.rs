//! The active side's handshake, driven by the process's engine (engine.rs): a connect costs
//! no thread. Each stage is a state of `Handshake`, advanced when its socket is ready, and
//! each has a deadline, an engine timer:
//! 1. the TCP connect (a refused one is tried again for REFUSED_RETRY, as programs create
//!    their listener just before the peer connects) and the greeting's answer: within the
//!    consumer's timeout, and the answer within HANDSHAKE_TIMEOUT besides;
//! 2. the passive side's answer to HELLO (ACCEPT or REJECT, which its consumer decides):
//!    within the consumer's timeout (none: an hour);
//! 3. the answer to READY, which no consumer decides: within READY_WAIT besides.
//!
//! Past a deadline the consumer hears TIMED_OUT. Only exactly the bytes of each message are
//! read, so that what the peer sends after ESTABLISHED stays on the socket for the reader.
//! `dat_ep_disconnect` and `dat_ep_free` end the handshake at once: they shut its stream down
//! (the QP keeps a clone), which the next turn finds.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::cm::READY_WAIT;
use super::{SoftQp, State};
use crate::device::soft::engine::{self, Handler, Registration};
use crate::device::soft::exchange::{message, Exchange, Stop};
use crate::device::soft::listener::{self, CLOSED_AT_GREETING, HANDSHAKE_TIMEOUT, NO_LIMIT, REFUSED_RETRY};
use crate::device::soft::peer::{self, PeerProcess};
use crate::device::soft::rendezvous::{Claims, Rendezvous};
use crate::device::soft::wire::{self, op, role, Greeting, Hdr, Hello, GREETING_LEN, HDR_LEN};
use crate::device::CmEvent;
use crate::util::sockaddr;
use crate::util::sync::MutexExt;

/// How long a refused connect waits before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// What the handshake came to: the connected stream, the peer's ACCEPT, the same-host peer
/// it proved to be (if any), and whether both sides agreed the cross-memory path.
pub(super) type Outcome = (TcpStream, Hello, Option<(PeerProcess, Claims)>, bool);

/// The engine's handler of one active handshake, owned by its QP while it runs.
pub(super) struct Opener {
    this: Weak<Opener>,
    qp: Weak<SoftQp>,
    hs: Mutex<Option<Handshake>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The TCP connect is in progress (or failed at once: `failed`).
    Connecting,
    /// A refused connect is tried again at `by`.
    Pausing,
    /// Our greeting is going out; its answer is awaited.
    Greeting,
    /// HELLO is going out; the answer (ACCEPT or REJECT) is awaited.
    Answer,
    /// READY is going out; ESTABLISHED is awaited.
    Established,
}

/// Fields drop in order: the registration before the stream.
struct Handshake {
    reg: Option<Registration>,
    stream: TcpStream,
    addr: SocketAddr,
    conn_qual: u64,
    stage: Stage,
    /// The current stage's deadline, and whether it is the consumer's (TIMED_OUT) rather than
    /// the stage's own.
    by: Instant,
    consumers: bool,
    started: Instant,
    limit: Duration,
    /// The message going out, and the one awaited.
    msg: Exchange,
    failed: Option<std::io::Error>,
    private_data: Vec<u8>,
    rendezvous: Option<Rendezvous>,
    answer: Option<Hello>,
    verified: Option<(PeerProcess, Claims)>,
    we_reach: bool,
}

/// What a turn came to.
enum Turn {
    Wait,
    Failed(CmEvent),
    /// ESTABLISHED came (or the connection ended after READY): whether the path is agreed.
    Accepted(bool),
}

impl Opener {
    /// Starts the handshake of `qp` with the service point `conn_qual` at `addr`, the QP's
    /// `opening` while it runs. Err: the connect failed at once (no socket to be had).
    pub(super) fn start(
        qp: &Arc<SoftQp>,
        addr: SocketAddr,
        conn_qual: u64,
        private_data: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<(), CmEvent> {
        let started = Instant::now();
        let limit = timeout.unwrap_or(NO_LIMIT);
        let (stream, failed) = connect(addr)?;
        let opener = Arc::new_cyclic(|this| Opener { this: this.clone(), qp: Arc::downgrade(qp), hs: Mutex::new(None) });
        let mut hs = Handshake {
            reg: None,
            stream,
            addr,
            conn_qual,
            stage: Stage::Connecting,
            by: started + limit,
            consumers: true,
            started,
            limit,
            msg: Exchange::default(),
            failed,
            private_data,
            rendezvous: None,
            answer: None,
            verified: None,
            we_reach: false,
        };
        {
            let mut i = qp.lock();
            // Where a disconnect or free finds it.
            i.stream = hs.stream.try_clone().ok();
            i.opening = Some(opener.clone());
        }
        let mut g = opener.hs.locked();
        if opener.register(&mut hs).is_none() {
            return Err(CmEvent::Unreachable);
        }
        if hs.failed.is_some() {
            // Told on the engine thread, as any outcome is.
            if let Some(reg) = &hs.reg {
                reg.kick();
            }
        }
        *g = Some(hs);
        Ok(())
    }

    fn register(&self, hs: &mut Handshake) -> Option<()> {
        hs.reg = None;
        let handler: Weak<dyn Handler> = self.this.clone();
        let reg = engine::engine()?.register(hs.stream.as_raw_fd(), engine::IN | engine::OUT, handler).ok()?;
        reg.timer(hs.by);
        hs.reg = Some(reg);
        Some(())
    }
}

impl Handler for Opener {
    fn ready(&self, events: u32) {
        let Some(qp) = self.qp.upgrade() else { return };
        let mut g = self.hs.locked();
        let Some(hs) = g.as_mut() else { return };
        let outcome = match hs.turn(&qp, events, self) {
            Turn::Wait => return,
            Turn::Failed(ev) => Err(ev),
            Turn::Accepted(agreed) => Ok(agreed),
        };
        let Some(Handshake { reg, stream, answer, verified, .. }) = g.take() else { return };
        drop(g);
        // Unregistered before the stream is handed on (the reader registers it again).
        drop(reg);
        let outcome = match (outcome, answer) {
            (Ok(agreed), Some(answer)) => Ok((stream, answer, verified, agreed)),
            (Ok(_), None) => Err(CmEvent::Broken),
            (Err(ev), _) => Err(ev),
        };
        qp.opened(outcome);
    }

    fn panicked(&self) {
        let hs = self.hs.locked().take();
        drop(hs);
        if let Some(qp) = self.qp.upgrade() {
            qp.opened(Err(CmEvent::Broken));
        }
    }
}

/// A non-blocking connect to `addr` started, with the error it failed with at once, if it did
/// (reported from the engine, which the socket is registered with).
fn connect(addr: SocketAddr) -> Result<(TcpStream, Option<std::io::Error>), CmEvent> {
    sockaddr::connect_begin(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr).map_err(|e| listener::connect_failed(&e, addr))
}

impl Handshake {
    /// Enters `stage` with `msg` to send and a deadline of `wait` (cut to the consumer's).
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

    /// Advances the handshake as far as the socket lets it.
    fn turn(&mut self, qp: &Arc<SoftQp>, events: u32, opener: &Opener) -> Turn {
        if qp.lock().state != State::Connecting {
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
                    let (stream, failed) = match connect(self.addr) {
                        Ok(c) => c,
                        Err(ev) => return Turn::Failed(ev),
                    };
                    self.reg = None;
                    self.stream = stream;
                    self.failed = failed;
                    qp.lock().stream = self.stream.try_clone().ok();
                    self.stage = Stage::Connecting;
                    self.by = self.started + self.limit;
                    if opener.register(self).is_none() {
                        return Turn::Failed(CmEvent::Unreachable);
                    }
                    if self.failed.is_none() {
                        return Turn::Wait;
                    }
                }
                Stage::Greeting => {
                    match self.flush_and_fill(GREETING_LEN, now) {
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
                    // A peer on this host is asked to our rendezvous (rendezvous.rs), where each
                    // side learns from the kernel which process the other is.
                    self.rendezvous = peer::other_end(&self.stream).and_then(|_| Rendezvous::open());
                    let hello = Hello {
                        rendezvous: self.rendezvous.as_ref().map_or(0, |r| r.token),
                        conn_qual: self.conn_qual,
                        rd_in: qp.caps.max_rd_in,
                        private_data: std::mem::take(&mut self.private_data),
                        ..Hello::default()
                    };
                    self.enter(Stage::Answer, message(op::HELLO, &hello.encode()), NO_LIMIT);
                }
                Stage::Answer => {
                    let answer_failed = |stop| match stop {
                        Stop::Wait => Turn::Wait,
                        Stop::Late => Turn::Failed(CmEvent::TimedOut),
                        Stop::WriteFailed => Turn::Failed(CmEvent::Unreachable),
                        Stop::Closed | Stop::ReadFailed => Turn::Failed(CmEvent::NonPeerRejected),
                    };
                    if let Err(stop) = self.flush_and_fill(HDR_LEN, now) {
                        return answer_failed(stop);
                    }
                    let hdr = Hdr::decode(self.msg.got()[..HDR_LEN].try_into().expect("a header"));
                    if hdr.payload > wire::HELLO_MAX {
                        return Turn::Failed(CmEvent::NonPeerRejected);
                    }
                    if let Err(stop) = self.flush_and_fill(HDR_LEN + hdr.payload as usize, now) {
                        return answer_failed(stop);
                    }
                    let Some(answer) = Hello::decode(&self.msg.got()[HDR_LEN..]) else { return Turn::Failed(CmEvent::NonPeerRejected) };
                    match hdr.op {
                        op::ACCEPT => {
                            // The passive side came to the rendezvous before it sent ACCEPT, if at
                            // all. The other end is looked up only now: when we sent HELLO, the
                            // peer may not have accepted the connection yet (its socket had no
                            // inode).
                            let end = self.rendezvous.as_ref().and_then(|_| peer::other_end(&self.stream));
                            let verified = self.rendezvous.as_ref().zip(end).and_then(|(r, e)| r.take(e));
                            self.we_reach = verified
                                .as_ref()
                                .is_some_and(|(p, c, channel)| channel.send(&qp.claims(&self.stream)) && p.reaches(c.canary));
                            self.verified = verified.map(|(p, c, _)| (p, c));
                            self.answer = Some(answer);
                            let ready = Hello { reaches_peer: self.we_reach, ..Hello::default() };
                            self.enter(Stage::Established, message(op::READY, &ready.encode()), READY_WAIT);
                        }
                        op::REJECT if hdr.status == wire::reject::NO_SERVICE => {
                            crate::dbg_log!(
                                crate::log::DbgType::ERROR,
                                "dat2-soft: no service point {:#x} at {}",
                                self.conn_qual,
                                self.addr
                            );
                            return Turn::Failed(CmEvent::NonPeerRejected);
                        }
                        op::REJECT => return Turn::Failed(CmEvent::PeerRejected { private_data: answer.private_data }),
                        _ => return Turn::Failed(CmEvent::NonPeerRejected),
                    }
                }
                Stage::Established => {
                    // Wait until the passive side has reported ESTABLISHED (see op::ESTABLISHED).
                    // If the connection ends first (the passive side broke it at once), it was
                    // accepted all the same: we report ESTABLISHED and the reader then finds the
                    // end. Its status says whether the passive side agreed the cross-memory path.
                    return match self.flush_and_fill(HDR_LEN, now) {
                        Ok(()) => {
                            let done = Hdr::decode(self.msg.got()[..HDR_LEN].try_into().expect("a header"));
                            if done.op != op::ESTABLISHED || done.acks != 0 || done.payload != 0 {
                                return Turn::Failed(CmEvent::Broken);
                            }
                            Turn::Accepted(self.we_reach && done.status == 1)
                        }
                        Err(Stop::Wait) => Turn::Wait,
                        Err(Stop::Late) => Turn::Failed(CmEvent::TimedOut),
                        Err(Stop::Closed) => Turn::Accepted(false),
                        Err(Stop::WriteFailed | Stop::ReadFailed) => Turn::Failed(CmEvent::Broken),
                    };
                }
            }
        }
    }

    /// Writes what is left of our message, then reads until the message awaited holds `want`
    /// bytes.
    fn flush_and_fill(&mut self, want: usize, now: Instant) -> Result<(), Stop> {
        self.msg.flush_and_fill(&self.stream, want, now >= self.by)
    }
}

impl SoftQp {
    /// The active side's handshake ended (opening.rs): the connection starts, unless the
    /// consumer ended it meanwhile; or the consumer hears `ev`.
    pub(super) fn opened(self: &Arc<Self>, outcome: Result<Outcome, CmEvent>) {
        let opener = self.lock().opening.take();
        match outcome {
            Ok((stream, answer, verified, agreed)) => {
                if self.lock().state != State::Connecting {
                    let _ = stream.shutdown(Shutdown::Both);
                    self.lock().stream = None;
                    return;
                }
                self.start(stream, verified, agreed, answer.rd_in, Some(answer.private_data));
            }
            Err(ev) => {
                let mut i = self.lock();
                // The handshake's stream closes now, not with the QP.
                i.stream = None;
                if i.state != State::Connecting {
                    return;
                }
                i.state = State::Closed;
                drop(i);
                self.flush(ev);
            }
        }
        drop(opener);
    }
}
