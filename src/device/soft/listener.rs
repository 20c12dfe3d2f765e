//! The soft device's connection manager, passive side: a TCP listener per service point.
//! Each accepted connection greets (wire::Greeting) and is answered in kind, then sends its
//! request (HELLO, or UD_HELLO from a UD QP resolving the service point, see ud/cm.rs), which
//! becomes a connection request for the consumer to accept or reject when it names this
//! service point's qualifier (all 64 bits; several share a port), else is refused unseen.
//! A connection that does not start with the greeting of this wire version is closed
//! unanswered (a dat2 of another version hears ours first, so that it can say why).
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

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::qp::Pending;
use super::ud::UdPending;
use super::wire::{op, reject, role, timed_out, Greeting, Hdr, Hello, UdHello, GREETING_LEN, HDR_LEN, HELLO_MAX, UD_HELLO_MAX, VERSION};
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

/// A connection whose greeting or HELLO is still arriving.
struct HalfOpen {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
    /// Its greeting came and was answered: `buf` holds the HELLO.
    greeted: bool,
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

    /// Reads what has arrived: the greeting (answered at once), then the HELLO's header, then
    /// exactly the body it announces, never more than HELLO_MAX (UD_HELLO_MAX for a UD_HELLO).
    fn read(&mut self) -> Step {
        loop {
            if !self.greeted && self.buf.len() == GREETING_LEN {
                if !self.greet() {
                    return Step::Drop;
                }
                self.greeted = true;
                self.buf.clear();
            }
            let want = match self.header() {
                _ if !self.greeted => GREETING_LEN,
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

    /// Answers the greeting in `buf`: true when it is this wire version's, and our answer is
    /// out (a new socket's buffer takes it whole).
    fn greet(&mut self) -> bool {
        let got = self.buf.as_slice().try_into().ok().and_then(Greeting::decode);
        match got {
            Some(g) if g.role == role::ASK => {
                let ours = (&self.stream).write(&Greeting::ours(role::ANSWER)).is_ok_and(|n| n == GREETING_LEN);
                if g.version != VERSION {
                    // Ours went out: the peer can tell its consumer why.
                    crate::dbg_log!(
                        crate::log::DbgType::PROVIDER_API,
                        "dat2-soft: {} speaks wire version {}, this library {VERSION}: connection closed",
                        self.peer,
                        g.version
                    );
                    return false;
                }
                ours
            }
            _ => {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "dat2-soft: {} did not greet as dat2-soft wire version {VERSION} (an older dat2, or another program): connection closed",
                    self.peer
                );
                false
            }
        }
    }

    /// Refuses a request for another qualifier than `ours`: the requester hears
    /// NON_PEER_REJECTED, our consumer nothing.
    fn refuse(&self, asked: u64, ours: u64) {
        crate::dbg_log!(
            crate::log::DbgType::PROVIDER_API,
            "dat2-soft: {} asked for qualifier {asked:#x}, this is {ours:#x}: refused",
            self.peer
        );
        let body = Hello::default().encode();
        let hdr = Hdr { status: reject::NO_SERVICE, ..Hdr::message(op::REJECT, body.len()) };
        let _ = (&self.stream).write(&[&hdr.encode()[..], &body].concat());
    }
}

impl SoftListener {
    /// Listens on `addr` for the service point `conn_qual` (0: the port it gets).
    pub fn bind(addr: SocketAddr, conn_qual: u64, events: Arc<dyn ListenEvents>) -> Result<SoftListener, DevError> {
        let socket = TcpListener::bind(addr).map_err(|e| match e.kind() {
            ErrorKind::AddrInUse => DevError::InUse,
            _ => DevError::NoResources,
        })?;
        let port = socket.local_addr().map_err(|_| DevError::NoResources)?.port();
        let conn_qual = if conn_qual == 0 { u64::from(port) } else { conn_qual };
        let accepting = socket.try_clone().map_err(|_| DevError::NoResources)?;
        accepting.set_nonblocking(true).map_err(|_| DevError::NoResources)?;
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::Builder::new()
            .name("dat2-soft-listen".into())
            .stack_size(256 << 10)
            .spawn(move || serve(accepting, conn_qual, flag, events))
            .map_err(|_| DevError::NoResources)?;
        Ok(SoftListener { socket, port, closed })
    }
}

/// The listener's thread: accepts connections, greets them and reads their HELLOs (for
/// `conn_qual`) until the listener is dropped.
fn serve(accepting: TcpListener, conn_qual: u64, closed: Arc<AtomicBool>, events: Arc<dyn ListenEvents>) {
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
                Some(Step::Hello(hello)) if hello.conn_qual != conn_qual => h.refuse(hello.conn_qual, conn_qual),
                Some(Step::UdHello(hello)) if hello.conn_qual != conn_qual => h.refuse(hello.conn_qual, conn_qual),
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
                        waiting.push(HalfOpen { stream, peer, buf: Vec::with_capacity(HDR_LEN), since: Instant::now(), greeted: false });
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    // The listening socket was shut down (the listener dropped), or a
                    // connection failed before we took it.
                    Err(_) if closed.load(Ordering::SeqCst) => return,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) => {
                        if out_of_descriptors(&e) {
                            descriptor_limit(&format!("accepting a connection on port {}", accepting.local_addr().map_or(0, |a| a.port())));
                        }
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
/// (none: the kernel's own limit), greeted (see `greet`); or the connection event its failure
/// is.
pub fn connect_service(local: IpAddr, addr: SocketAddr, timeout: Option<Duration>) -> Result<TcpStream, CmEvent> {
    let started = Instant::now();
    let limit = timeout.unwrap_or(NO_LIMIT);
    let stream = connect_tcp(local, addr, started, limit)?;
    greet(&stream, addr, limit.saturating_sub(started.elapsed()))?;
    Ok(stream)
}

/// Greets the listener at `addr` and takes its answer, within HANDSHAKE_TIMEOUT and `left`:
/// only a dat2-soft listener of our wire version gets anything of the consumer's after this.
/// Anything else ends the connect with NON_PEER_REJECTED (TIMED_OUT when `left` ran out
/// first), and a DAT_DBG_TYPE message (0x1) says why.
fn greet(stream: &TcpStream, addr: SocketAddr, left: Duration) -> Result<(), CmEvent> {
    let wait = left.min(HANDSHAKE_TIMEOUT).max(Duration::from_millis(1));
    let _ = stream.set_read_timeout(Some(wait));
    let _ = stream.set_write_timeout(Some(wait));
    let not_ours = |why: &str| {
        crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: {addr} is not a dat2-soft peer of wire version {VERSION}: {why}");
        CmEvent::NonPeerRejected
    };
    let mut s = stream;
    s.write_all(&Greeting::ours(role::ASK)).map_err(|_| CmEvent::Unreachable)?;
    let mut answer = [0u8; GREETING_LEN];
    if let Err(e) = s.read_exact(&mut answer) {
        return Err(match e.kind() {
            _ if timed_out(&e) && wait >= left => CmEvent::TimedOut,
            _ if timed_out(&e) => not_ours(&format!("no answer to its greeting within {wait:?}")),
            _ => not_ours("it closed the connection at the greeting (an older dat2, or another service)"),
        });
    }
    match Greeting::decode(&answer) {
        Some(g) if g.role == role::ANSWER && g.version == VERSION => {
            // The connection's later writes have no deadline of this stage's (the caller sets
            // its own).
            let _ = stream.set_read_timeout(None);
            let _ = stream.set_write_timeout(None);
            Ok(())
        }
        Some(g) if g.role == role::ANSWER => Err(not_ours(&format!("it speaks version {}", g.version))),
        _ => Err(not_ours("its answer is not a dat2-soft greeting")),
    }
}

/// The TCP connection of `connect_service`, within `limit` of `started`.
fn connect_tcp(local: IpAddr, addr: SocketAddr, started: Instant, limit: Duration) -> Result<TcpStream, CmEvent> {
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
        _ => {
            if out_of_descriptors(&e) {
                descriptor_limit(&format!("a connect to {addr}"));
            }
            CmEvent::Unreachable
        }
    })
}

/// Whether `e` says the process (or the system) has no descriptor left.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Says, under DAT_DBG_TYPE (0x1), that `what` failed for want of a descriptor: every soft
/// connection holds one, so a process with many needs RLIMIT_NOFILE raised.
fn descriptor_limit(what: &str) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) into a local.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    let limits = if known { format!("soft {}, hard {}", r.rlim_cur, r.rlim_max) } else { "unknown".into() };
    crate::dbg_log!(
        crate::log::DbgType::ERROR,
        "dat2-soft: {what} failed: out of file descriptors (RLIMIT_NOFILE {limits}); each connection holds one: \
         raise it with ulimit -n, /etc/security/limits.d or systemd's LimitNOFILE"
    );
}

/// A connect without a timeout: the kernel gives up first (about two minutes of SYNs).
pub const NO_LIMIT: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that answers one greeting with `answer` and then holds the connection.
    fn answering(answer: [u8; GREETING_LEN]) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().expect("accepts");
            let mut got = [0u8; GREETING_LEN];
            c.read_exact(&mut got).expect("a greeting");
            let _ = c.write_all(&answer);
            let mut rest = Vec::new();
            let _ = c.set_read_timeout(Some(Duration::from_millis(300)));
            let _ = c.read_to_end(&mut rest);
            [&got[..], &rest].concat()
        });
        (addr, t)
    }

    #[test]
    fn greeted_stream_keeps_no_stage_deadline() {
        let (addr, t) = answering(Greeting::ours(role::ANSWER));
        let s = connect_service(IpAddr::from([127, 0, 0, 1]), addr, Some(Duration::from_secs(10))).expect("greeted");
        // A later write to a peer that reads slowly must not fail at the greeting's 5 s.
        assert_eq!((s.read_timeout().ok().flatten(), s.write_timeout().ok().flatten()), (None, None));
        drop(s);
        assert_eq!(t.join().expect("joins"), Greeting::ours(role::ASK).to_vec());
    }

    #[test]
    fn an_echo_or_another_version_is_no_peer() {
        for answer in [Greeting::ours(role::ASK), { Greeting::ours(role::ANSWER).map(|b| b ^ 0x20) }] {
            let (addr, t) = answering(answer);
            let got = connect_service(IpAddr::from([127, 0, 0, 1]), addr, Some(Duration::from_secs(10)));
            assert_eq!(got.err(), Some(CmEvent::NonPeerRejected));
            // It heard our greeting and nothing else.
            assert_eq!(t.join().expect("joins"), Greeting::ours(role::ASK).to_vec());
        }
        let mut other = Greeting::ours(role::ANSWER);
        other[8] = 7;
        let (addr, t) = answering(other);
        assert_eq!(
            connect_service(IpAddr::from([127, 0, 0, 1]), addr, Some(Duration::from_secs(10))).err(),
            Some(CmEvent::NonPeerRejected)
        );
        t.join().expect("joins");
    }
}
