//! The active side of a connection as the engine advances it (RC's handshake, qp/opening.rs;
//! a UD resolution's, ud/resolving.rs): `Dial` makes the TCP connection, non-blocking (a
//! refused one is tried again for REFUSED_RETRY, as programs create their listener just
//! before the peer connects) and greets the far end, then carries one message each way per
//! stage. Each stage has a deadline, cut to the caller's limit. What is left of our message
//! is written, then exactly the bytes of the one awaited are read, so that what the peer sends
//! after it stays on the socket. Never waits: a socket with no more for now says so, and the
//! caller's next turn goes on.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Weak;
use std::time::{Duration, Instant};

use super::engine::{self, Handler, Registration};
use super::listener::{self, CLOSED_AT_GREETING, HANDSHAKE_TIMEOUT, REFUSED_RETRY};
use super::wire::{role, Greeting, Hdr, GREETING_LEN};
use crate::device::CmEvent;
use crate::util::sockaddr;

/// How long a refused connect waits before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// Why exchanging a message stopped (`Exchange::flush_and_fill`).
pub enum Stop {
    /// The socket has no more for now.
    Wait,
    /// The stage's deadline passed.
    Late,
    /// The peer closed or reset the connection.
    Closed,
    WriteFailed,
    ReadFailed,
}

/// A message going out, how much of it went, and what has come of the one awaited.
#[derive(Default)]
struct Exchange {
    out: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
}

impl Exchange {
    /// Starts a stage: `msg` to send, nothing received yet.
    fn start(&mut self, msg: Vec<u8>) {
        self.out = msg;
        self.sent = 0;
        self.got.clear();
    }

    /// Writes what is left of our message to `stream`, then reads until `got` holds `want`
    /// bytes. `late`: the stage's deadline has passed (a socket that would block is then
    /// `Late`, not `Wait`).
    fn flush_and_fill(&mut self, stream: &TcpStream, want: usize, late: bool) -> Result<(), Stop> {
        let wait = || if late { Stop::Late } else { Stop::Wait };
        let mut s = stream;
        while self.sent < self.out.len() {
            match s.write(&self.out[self.sent..]) {
                Ok(0) => return Err(Stop::WriteFailed),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(wait()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Stop::WriteFailed),
            }
        }
        while self.got.len() < want {
            let start = self.got.len();
            self.got.resize(want, 0);
            let r = s.read(&mut self.got[start..]);
            self.got.truncate(start + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(0) => return Err(Stop::Closed),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(wait()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => return Err(Stop::Closed),
                Err(_) => return Err(Stop::ReadFailed),
            }
        }
        Ok(())
    }
}

/// One handshake message: a header, then `body`.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = Hdr::message(kind, body.len()).encode().to_vec();
    m.extend_from_slice(body);
    m
}

/// Where a dial is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The TCP connect is in progress (or failed at once: `failed`).
    Connecting,
    /// A refused connect is tried again at `by`.
    Pausing,
    /// Our greeting is going out; its answer is awaited.
    Greeting,
    /// Greeted: the caller's stages (`enter`).
    Stages,
}

/// What a turn of `Dial::dial` came to.
pub enum Dialed {
    /// Nothing more until the socket is ready or the deadline passes.
    Wait,
    Failed(CmEvent),
    /// The far end answered as a dat2-soft listener of our wire version.
    Greeted,
}

/// An active side's connection, registered with the engine for its `handler`, and the
/// deadline of its current stage (an engine timer). Fields drop in order: the registration
/// before the stream.
pub struct Dial {
    reg: Option<Registration>,
    stream: TcpStream,
    handler: Weak<dyn Handler>,
    local: IpAddr,
    addr: SocketAddr,
    failed: Option<std::io::Error>,
    phase: Phase,
    /// The current stage's deadline, and whether it is the caller's limit (TimedOut past it)
    /// rather than the stage's own.
    by: Instant,
    consumers: bool,
    /// The deadline a timer was last armed for.
    armed: Option<Instant>,
    /// A refused connect was made again on a new socket since `renewed` was last asked.
    renewed: bool,
    started: Instant,
    limit: Duration,
    msg: Exchange,
}

impl Dial {
    /// Starts connecting from `local` (unspecified: the address the kernel picks for the
    /// route) to `addr`, everything within `limit`, for `handler` (`register`); Err when no
    /// socket can be made (a connect that fails at once is reported by the first `dial`).
    pub fn start(local: IpAddr, addr: SocketAddr, limit: Duration, handler: Weak<dyn Handler>) -> Result<Dial, CmEvent> {
        let started = Instant::now();
        let (stream, failed) = connect(local, addr)?;
        Ok(Dial {
            reg: None,
            stream,
            handler,
            local,
            addr,
            failed,
            phase: Phase::Connecting,
            by: started + limit,
            consumers: true,
            armed: None,
            renewed: false,
            started,
            limit,
            msg: Exchange::default(),
        })
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Whether the socket was replaced (a refused connect made again) since last asked: a
    /// caller that keeps a copy of it (to shut it down) takes the new one.
    pub fn renewed(&mut self) -> bool {
        std::mem::take(&mut self.renewed)
    }

    /// The connected stream, unregistered (the reader registers it again).
    pub fn into_stream(self) -> TcpStream {
        let Dial { reg, stream, .. } = self;
        drop(reg);
        stream
    }

    /// Registers the socket with the engine: its handler is told when it is ready, when the
    /// stage's deadline passes, and at once when the connect failed at once. None: the engine
    /// cannot take it.
    pub fn register(&mut self) -> Option<()> {
        self.reg = None;
        self.reg = Some(engine::engine()?.register(self.stream.as_raw_fd(), engine::IN | engine::OUT, self.handler.clone()).ok()?);
        self.armed = None;
        self.arm();
        if self.failed.is_some() {
            // Told on the engine thread, as any outcome is.
            self.reg.as_ref()?.kick();
        }
        Some(())
    }

    /// Arms the engine's timer for the current deadline, unless one is armed for it.
    fn arm(&mut self) {
        if let (false, Some(reg)) = (self.armed == Some(self.by), &self.reg) {
            reg.timer(self.by);
            self.armed = Some(self.by);
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// When the caller's limit runs out.
    pub fn limit_at(&self) -> Instant {
        self.started + self.limit
    }

    /// Advances the connect and the greeting; `events`: the engine's readiness bits.
    pub fn dial(&mut self, events: u32) -> Dialed {
        let d = self.dial_once(events);
        if let Dialed::Wait = d {
            self.arm();
        }
        d
    }

    fn dial_once(&mut self, events: u32) -> Dialed {
        let now = Instant::now();
        match self.phase {
            Phase::Connecting => {
                let error = match self.failed.take() {
                    Some(e) => Some(e),
                    None if events & (engine::OUT | engine::ERR) == 0 && now < self.by => return Dialed::Wait,
                    None => self.stream.take_error().unwrap_or_else(Some),
                };
                match error {
                    Some(e) if e.kind() == ErrorKind::ConnectionRefused && self.started.elapsed() < REFUSED_RETRY.min(self.limit) => {
                        self.phase = Phase::Pausing;
                        self.by = now + RETRY_PAUSE;
                        Dialed::Wait
                    }
                    Some(e) => Dialed::Failed(listener::connect_failed(&e, self.addr)),
                    // Not connected yet.
                    None if self.stream.peer_addr().is_err() => {
                        if now >= self.by {
                            Dialed::Failed(CmEvent::TimedOut)
                        } else {
                            Dialed::Wait
                        }
                    }
                    None => {
                        let _ = self.stream.set_nodelay(true);
                        self.enter(Greeting::ours(role::ASK).to_vec(), HANDSHAKE_TIMEOUT);
                        self.phase = Phase::Greeting;
                        self.dial_once(0)
                    }
                }
            }
            Phase::Pausing if now < self.by => Dialed::Wait,
            Phase::Pausing => match connect(self.local, self.addr) {
                Ok((stream, failed)) => {
                    // The old socket is unregistered before it closes.
                    self.reg = None;
                    self.stream = stream;
                    self.failed = failed;
                    self.phase = Phase::Connecting;
                    self.by = self.limit_at();
                    self.renewed = true;
                    if self.register().is_none() {
                        return Dialed::Failed(CmEvent::Unreachable);
                    }
                    // A connect that failed at once is told by the kick.
                    Dialed::Wait
                }
                Err(ev) => Dialed::Failed(ev),
            },
            Phase::Greeting => {
                match self.exchange(GREETING_LEN) {
                    Ok(()) => {}
                    Err(Stop::Wait) => return Dialed::Wait,
                    Err(Stop::Late) if self.consumers => return Dialed::Failed(CmEvent::TimedOut),
                    Err(Stop::Late) => {
                        let why = format!("no answer to its greeting within {HANDSHAKE_TIMEOUT:?}");
                        return Dialed::Failed(listener::not_ours(self.addr, &why));
                    }
                    Err(Stop::WriteFailed) => return Dialed::Failed(CmEvent::Unreachable),
                    Err(Stop::Closed | Stop::ReadFailed) => return Dialed::Failed(listener::not_ours(self.addr, CLOSED_AT_GREETING)),
                }
                let answer: [u8; GREETING_LEN] = self.msg.got.as_slice().try_into().expect("whole");
                if let Err(e) = listener::check_answer(&answer, self.addr) {
                    return Dialed::Failed(e);
                }
                self.phase = Phase::Stages;
                Dialed::Greeted
            }
            Phase::Stages => Dialed::Greeted,
        }
    }

    /// Enters a stage: `msg` to send, and a deadline of `wait` (cut to the caller's limit).
    pub fn enter(&mut self, msg: Vec<u8>, wait: Duration) {
        let left = self.limit.saturating_sub(self.started.elapsed());
        self.consumers = wait >= left;
        self.by = Instant::now().checked_add(wait.min(left)).unwrap_or(self.started + self.limit);
        self.msg.start(msg);
        self.arm();
    }

    /// Writes what is left of the stage's message, then reads until the message awaited holds
    /// `want` bytes (`Exchange::flush_and_fill`, late once the stage's deadline has passed).
    pub fn exchange(&mut self, want: usize) -> Result<(), Stop> {
        let late = Instant::now() >= self.by;
        self.msg.flush_and_fill(&self.stream, want, late)
    }

    /// What has come of the message awaited.
    pub fn got(&self) -> &[u8] {
        &self.msg.got
    }
}

/// The event an exchange's stop is while the answer to a request is awaited (HELLO's,
/// UD_HELLO's); None: wait.
pub fn answer_failed(stop: Stop) -> Option<CmEvent> {
    match stop {
        Stop::Wait => None,
        Stop::Late => Some(CmEvent::TimedOut),
        Stop::WriteFailed => Some(CmEvent::Unreachable),
        Stop::Closed | Stop::ReadFailed => Some(CmEvent::NonPeerRejected),
    }
}

/// A non-blocking connect from `local` to `addr` started, with the error it failed with at
/// once, if it did (reported from the engine, which the socket is registered with).
fn connect(local: IpAddr, addr: SocketAddr) -> Result<(TcpStream, Option<std::io::Error>), CmEvent> {
    sockaddr::connect_begin(local, addr).map_err(|e| listener::connect_failed(&e, addr))
}
