//! The soft device's connection manager, passive side: a TCP listener per service point.
//! Each accepted connection sends its request (HELLO, or UD_HELLO from a UD QP resolving the
//! service point, see ud/cm.rs), which becomes a connection request for the consumer to
//! accept or reject.
//!
//! One thread per listener reads every connection's HELLO (poll(2), non-blocking): a
//! connection that has not sent its HELLO yet costs a socket and a small buffer, never a
//! thread. At most HALF_OPEN_MAX such connections wait at a time, each for at most
//! HANDSHAKE_TIMEOUT, and a HELLO longer than `wire::HELLO_MAX` (a UD_HELLO longer than
//! `wire::UD_HELLO_MAX`) ends its connection unread.
//! When all places are taken, the oldest connection gives way to a new one once it has waited
//! EVICT_AGE (a flood of silent connections cannot keep out a peer that sends its HELLO at
//! once); until then new connections wait in the kernel's listen backlog, so that a burst of
//! honest peers (dtestcm -c 1000) is only slowed, never refused.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::qp::Pending;
use super::ud::UdPending;
use super::wire::timed_out;
use super::wire::{op, Hdr, Hello, UdHello, HDR_LEN, HELLO_MAX, UD_HELLO_MAX};
use crate::device::{CmEvent, DevError, ListenEvents, Listener};
use crate::util::sockaddr;

/// Connections that have not sent their whole HELLO, per listener.
pub const HALF_OPEN_MAX: usize = 128;

/// How long a connection keeps its place against newcomers when all places are taken.
const EVICT_AGE: Duration = Duration::from_secs(1);

/// How long accepting pauses when the process is out of descriptors.
const NO_FDS_PAUSE: Duration = Duration::from_millis(100);

/// How long a connection may take to send its HELLO.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct SoftListener {
    socket: TcpListener,
    port: u16,
    closed: Arc<AtomicBool>,
}

/// A connection whose HELLO is still arriving.
struct HalfOpen {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

/// What reading a half-open connection came to.
enum Step {
    Waiting,
    Hello(Hello),
    UdHello(UdHello),
    Drop,
}

impl HalfOpen {
    /// The header, once it has arrived.
    fn header(&self) -> Option<Hdr> {
        Some(Hdr::decode(self.buf.get(..HDR_LEN)?.try_into().ok()?))
    }

    /// Reads what has arrived: the header first, then exactly the body it announces, never
    /// more than HELLO_MAX (UD_HELLO_MAX for a UD_HELLO).
    fn read(&mut self) -> Step {
        loop {
            let want = match self.header() {
                None => HDR_LEN,
                Some(h) if h.acks != 0 => return Step::Drop,
                Some(h) if h.op == op::HELLO && h.payload <= HELLO_MAX => HDR_LEN + h.payload as usize,
                Some(h) if h.op == op::UD_HELLO && h.payload <= UD_HELLO_MAX => HDR_LEN + h.payload as usize,
                Some(_) => return Step::Drop,
            };
            if self.buf.len() == want {
                let body = &self.buf[HDR_LEN..];
                return match self.header().map(|h| h.op) {
                    Some(op::HELLO) => Hello::decode(body).map_or(Step::Drop, Step::Hello),
                    _ => UdHello::decode(body).map_or(Step::Drop, Step::UdHello),
                };
            }
            let start = self.buf.len();
            self.buf.resize(want, 0);
            let got = self.stream.read(&mut self.buf[start..]);
            self.buf.truncate(start + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => return Step::Drop,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Waiting,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Step::Drop,
            }
        }
    }
}

impl SoftListener {
    pub fn bind(addr: SocketAddr, events: Arc<dyn ListenEvents>) -> Result<SoftListener, DevError> {
        let socket = TcpListener::bind(addr).map_err(|e| match e.kind() {
            ErrorKind::AddrInUse => DevError::InUse,
            _ => DevError::NoResources,
        })?;
        let port = socket.local_addr().map_err(|_| DevError::NoResources)?.port();
        let accepting = socket.try_clone().map_err(|_| DevError::NoResources)?;
        accepting.set_nonblocking(true).map_err(|_| DevError::NoResources)?;
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::Builder::new()
            .name("dat2-soft-listen".into())
            .stack_size(256 << 10)
            .spawn(move || serve(accepting, flag, events))
            .map_err(|_| DevError::NoResources)?;
        Ok(SoftListener { socket, port, closed })
    }
}

/// The listener's thread: accepts connections and reads their HELLOs until the listener is
/// dropped.
fn serve(accepting: TcpListener, closed: Arc<AtomicBool>, events: Arc<dyn ListenEvents>) {
    let mut waiting: Vec<HalfOpen> = Vec::new();
    let mut paused_until: Option<Instant> = None;
    while !closed.load(Ordering::SeqCst) {
        let now = Instant::now();
        waiting.retain(|h| now.duration_since(h.since) < HANDSHAKE_TIMEOUT);
        // Whether a new connection can have a place now, else when one frees up.
        let oldest = waiting.iter().map(|h| h.since).min();
        let room_at = match oldest {
            Some(o) if waiting.len() >= HALF_OPEN_MAX => o + EVICT_AGE,
            _ => now,
        };
        let room_at = paused_until.map_or(room_at, |p| p.max(room_at));
        let accept_now = room_at <= now;
        let timeout = waiting
            .iter()
            .map(|h| HANDSHAKE_TIMEOUT.saturating_sub(now.duration_since(h.since)))
            .chain((!accept_now).then(|| room_at - now))
            .min();
        let mut fds: Vec<libc::pollfd> = std::iter::once(accepting.as_raw_fd())
            .chain(waiting.iter().map(|h| h.stream.as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        if !accept_now {
            fds[0].events = 0;
        }
        let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i32);
        // SAFETY: `fds` is a live array of fds.len() pollfd structures.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if closed.load(Ordering::SeqCst) {
            return;
        }
        // Connections first, so that the newcomers below are not read in this round.
        let mut done = Vec::new();
        for (k, p) in fds[1..].iter().enumerate() {
            if p.revents == 0 {
                continue;
            }
            match waiting[k].read() {
                Step::Waiting => {}
                Step::Drop => done.push((k, None)),
                step => done.push((k, Some(step))),
            }
        }
        for (k, step) in done.into_iter().rev() {
            let h = waiting.swap_remove(k);
            if step.is_none() || h.stream.set_nonblocking(false).is_err() {
                continue;
            }
            match step {
                Some(Step::Hello(hello)) => events.request(Arc::new(Pending::new(h.stream, hello, h.peer))),
                Some(Step::UdHello(hello)) => events.request(Arc::new(UdPending::new(h.stream, hello, h.peer))),
                _ => {}
            }
        }
        if fds[0].revents != 0 {
            paused_until = None;
            loop {
                if waiting.len() >= HALF_OPEN_MAX {
                    let (k, oldest) =
                        waiting.iter().enumerate().min_by_key(|(_, h)| h.since).map(|(k, h)| (k, h.since)).unwrap_or((0, Instant::now()));
                    if oldest.elapsed() < EVICT_AGE {
                        break;
                    }
                    // The oldest gives way (see the module text).
                    waiting.swap_remove(k);
                }
                match accepting.accept() {
                    Ok((stream, peer)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        let _ = stream.set_nodelay(true);
                        waiting.push(HalfOpen { stream, peer, buf: Vec::with_capacity(HDR_LEN), since: Instant::now() });
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    // The listening socket was shut down (the listener dropped), or a
                    // connection failed before we took it.
                    Err(_) if closed.load(Ordering::SeqCst) => return,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) => {
                        paused_until = Some(Instant::now() + NO_FDS_PAUSE);
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
    }
}

impl Listener for SoftListener {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for SoftListener {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // SAFETY: shutting down our own listening socket wakes the thread blocked in poll.
        unsafe { libc::shutdown(self.socket.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// How long a refused connection is retried: rdma_cm spends about as long resolving the
/// address and route, and programs such as dtest create their listener only just before the
/// peer connects.
const REFUSED_RETRY: Duration = Duration::from_millis(200);

/// The active side's connection to the service point `addr` (RC's connect, UD's resolution),
/// from `local` (unspecified: the address the kernel picks for the route) within `timeout`
/// (none: the kernel's own limit), or the connection event its failure is.
pub fn connect_service(local: IpAddr, addr: SocketAddr, timeout: Option<Duration>) -> Result<TcpStream, CmEvent> {
    let started = Instant::now();
    let limit = timeout.unwrap_or(NO_LIMIT);
    loop {
        let left = limit.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
        match sockaddr::connect_from(local, addr, left) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused && started.elapsed() < REFUSED_RETRY.min(limit) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other,
        }
    }
    .map_err(|e| match e.kind() {
        ErrorKind::ConnectionRefused => CmEvent::NonPeerRejected,
        _ if timed_out(&e) => CmEvent::TimedOut,
        _ => CmEvent::Unreachable,
    })
}

/// A connect without a timeout: the kernel gives up first (about two minutes of SYNs).
const NO_LIMIT: Duration = Duration::from_secs(3600);
