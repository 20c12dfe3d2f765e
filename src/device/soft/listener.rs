//! The soft device's connection manager, passive side. Each open IA has a TCP port of its
//! own (`SoftIaPort`: its ia_params' port, or one the system picks), and a table of its
//! service points by their whole 64-bit qualifier. A service point whose qualifier is a port
//! number (1..=65535) also listens on that port, so that a peer that names only the host
//! (port 0, as rdma_cm programs do: dtest -h) reaches it there; both sockets read into the
//! same table. Each accepted connection greets (wire::Greeting) and is answered in kind, then
//! sends its request (HELLO, or UD_HELLO from a UD QP resolving the service point, see
//! ud/cm.rs), which becomes a connection request for the consumer to accept or reject when
//! its qualifier has an entry in the table, else is refused unseen (REJECT NO_SERVICE: the
//! requester hears NON_PEER_REJECTED). A connection that does not start with the greeting of
//! this wire version is closed unanswered (a dat2 of another version hears ours first, so
//! that it can say why).
//!
//! The process's engine (engine.rs) accepts and reads every connection's HELLO, each
//! listening socket and each connection registered with it (non-blocking): a listener or a
//! connection that has not sent its HELLO yet costs a socket and a small buffer, never a
//! thread. At most HALF_OPEN_MAX such connections wait at a time per socket, each for at most
//! HANDSHAKE_TIMEOUT, and a HELLO longer than `wire::HELLO_MAX` (a UD_HELLO longer than
//! `wire::UD_HELLO_MAX`) ends its connection unread.
//! When all places are taken, the oldest connection gives way to a new one once it has waited
//! EVICT_AGE (a flood of silent connections cannot keep out a peer that sends its HELLO at
//! once); until then new connections wait in the kernel's listen backlog, so that a burst of
//! honest peers (dtestcm -c 1000) is only slowed, never refused. Each deadline is an engine
//! timer. A request goes to the consumer (`ListenEvents::request`) on the engine thread,
//! under no lock of ours but the table's (a leaf, taken for the lookup alone), so that it may
//! free the service point; dropping a service point's listener closes its own socket and
//! every half-open connection of it, and takes its entry out of the table, before it returns.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::engine::{self, Handler, Registration};

use super::qp::Pending;
use super::ud::UdPending;
use super::wire::{op, reject, role, timed_out, Greeting, Hdr, Hello, UdHello, GREETING_LEN, HDR_LEN, HELLO_MAX, UD_HELLO_MAX, VERSION};
use crate::device::{CmEvent, DevError, IaPort, ListenEvents, Listener};
use crate::util::sync::MutexExt;

/// Connections that have not sent their whole HELLO, per listener.
pub const HALF_OPEN_MAX: usize = 128;

/// How long a connection keeps its place against newcomers when all places are taken.
const EVICT_AGE: Duration = Duration::from_secs(1);

/// How long accepting pauses when the process is out of descriptors.
const NO_FDS_PAUSE: Duration = Duration::from_millis(100);

/// How long a connection may take to send its HELLO.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// An IA's service points by qualifier: where each of its listening sockets hands the requests
/// it reads. The lock is a leaf.
#[derive(Default)]
struct Table {
    entries: Mutex<HashMap<u64, Arc<dyn ListenEvents>>>,
}

impl Table {
    /// Takes `conn_qual` for `events`: false when it is taken.
    fn insert(&self, conn_qual: u64, events: Arc<dyn ListenEvents>) -> bool {
        match self.entries.locked().entry(conn_qual) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(events);
                true
            }
        }
    }

    fn remove(&self, conn_qual: u64) {
        // Dropped without the lock: the service point's last reference may go with it.
        let gone = self.entries.locked().remove(&conn_qual);
        drop(gone);
    }

    fn get(&self, conn_qual: u64) -> Option<Arc<dyn ListenEvents>> {
        self.entries.locked().get(&conn_qual).cloned()
    }
}

/// An open IA of the soft device: its own listening port, and its service points' table.
pub struct SoftIaPort {
    address: SocketAddr,
    table: Arc<Table>,
    _socket: Socket,
}

impl SoftIaPort {
    /// Listens on `addr` (port 0: one the system picks) for the IA's service points.
    pub fn open(addr: SocketAddr) -> Result<SoftIaPort, DevError> {
        let table = Arc::new(Table::default());
        let socket = Socket::bind(addr, table.clone()).inspect_err(|e| {
            let why = if *e == DevError::InUse { "the port is taken" } else { "out of resources (descriptors?)" };
            crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: the IA cannot listen on {addr}: {why}");
        })?;
        let mut address = addr;
        address.set_port(socket.port);
        Ok(SoftIaPort { address, table, _socket: socket })
    }
}

/// How many ports the system may pick before one is found that no service point of the IA
/// has as its qualifier (dat_psp_create_any).
const ANY_TRIES: usize = 16;

impl IaPort for SoftIaPort {
    fn address(&self) -> SocketAddr {
        self.address
    }

    /// An entry for `conn_qual` in the IA's table; and when it is a port number, that port
    /// too (for peers that name only the host), unless it is the IA's own. 0 asks for any: the
    /// port the system picks is the qualifier.
    fn listen(&self, conn_qual: u64, events: Arc<dyn ListenEvents>) -> Result<Box<dyn Listener>, DevError> {
        let at = |port: u16| {
            let mut a = self.address;
            a.set_port(port);
            a
        };
        if conn_qual == 0 {
            for _ in 0..ANY_TRIES {
                let socket = Socket::bind(at(0), self.table.clone())?;
                let conn_qual = u64::from(socket.port);
                if self.table.insert(conn_qual, events.clone()) {
                    return Ok(Box::new(SoftListener { conn_qual, table: self.table.clone(), own: Some(socket) }));
                }
            }
            return Err(DevError::InUse);
        }
        if !self.table.insert(conn_qual, events) {
            return Err(DevError::InUse);
        }
        let own = match u16::try_from(conn_qual) {
            Ok(port) if port != self.address.port() => match Socket::bind(at(port), self.table.clone()) {
                Ok(s) => Some(s),
                Err(e) => {
                    self.table.remove(conn_qual);
                    return Err(e);
                }
            },
            _ => None,
        };
        Ok(Box::new(SoftListener { conn_qual, table: self.table.clone(), own }))
    }
}

/// A service point's entry in its IA's table, and its own port when it has one.
pub struct SoftListener {
    conn_qual: u64,
    table: Arc<Table>,
    own: Option<Socket>,
}

/// A listening socket: the IA's, or a service point's own. Dropping it closes the socket and
/// every half-open connection before it returns.
struct Socket {
    port: u16,
    serving: Arc<Serving>,
}

/// A listening socket as the engine drives it: its handler, and its connections' through
/// `Conn`.
struct Serving {
    table: Arc<Table>,
    this: Weak<Serving>,
    /// Taken by the engine's handlers for a turn (never while a request goes to the
    /// consumer) and by the drop. Under it: the engine's handler map and timers (leaves).
    state: Mutex<State>,
}

struct State {
    /// None once the listener is dropped.
    socket: Option<Accepting>,
    /// The connections that have not sent their whole HELLO, by their handlers' ids.
    waiting: HashMap<u64, HalfOpen>,
    next: u64,
    /// Accepting waits until then: the process was out of descriptors.
    paused_until: Option<Instant>,
    /// The listening socket's earliest timer not yet served: a later need finds it set (a
    /// peer's connections cannot pile up timers).
    armed: Option<Instant>,
}

/// The listening socket, unregistered before it is closed (fields drop in order).
struct Accepting {
    reg: Registration,
    socket: TcpListener,
}

/// The engine's handler of one half-open connection.
struct Conn {
    serving: Weak<Serving>,
    id: u64,
}

impl Handler for Conn {
    fn ready(&self, _events: u32) {
        if let Some(s) = self.serving.upgrade() {
            s.conn_ready(self.id);
        }
    }
}

impl Handler for Serving {
    fn ready(&self, _events: u32) {
        self.accept();
    }
}

/// A connection whose greeting or HELLO is still arriving. Unregistered before its stream
/// is closed or handed on (fields drop in order).
struct HalfOpen {
    reg: Registration,
    _handler: Arc<Conn>,
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
}

/// Refuses a request for a qualifier nobody listens for (the stream still non-blocking: the
/// frame is small, the socket new): the requester hears NON_PEER_REJECTED, our consumer
/// nothing.
fn refuse(stream: &TcpStream, peer: SocketAddr, asked: u64) {
    crate::dbg_log!(
        crate::log::DbgType::PROVIDER_API,
        "dat2-soft: {peer} asked for qualifier {asked:#x}, which nobody here listens for: refused"
    );
    let body = Hello::default().encode();
    let hdr = Hdr { status: reject::NO_SERVICE, ..Hdr::message(op::REJECT, body.len()) };
    let _ = (&*stream).write(&[&hdr.encode()[..], &body].concat());
}

impl Socket {
    /// Listens on `addr` (port 0: one the system picks) for the service points of `table`.
    fn bind(addr: SocketAddr, table: Arc<Table>) -> Result<Socket, DevError> {
        let engine = engine::engine().ok_or(DevError::NoResources)?;
        let socket = TcpListener::bind(addr).map_err(|e| match e.kind() {
            ErrorKind::AddrInUse => DevError::InUse,
            _ => DevError::NoResources,
        })?;
        let port = socket.local_addr().map_err(|_| DevError::NoResources)?.port();
        socket.set_nonblocking(true).map_err(|_| DevError::NoResources)?;
        let serving = Arc::new_cyclic(|this| Serving {
            table,
            this: this.clone(),
            state: Mutex::new(State { socket: None, waiting: HashMap::new(), next: 0, paused_until: None, armed: None }),
        });
        let handler: Weak<dyn Handler> = serving.this.clone();
        let reg = engine.register(socket.as_raw_fd(), engine::IN, handler).map_err(|_| DevError::NoResources)?;
        // A connection whose edge came before the socket was stored found nothing: the engine
        // looks again, once it is.
        let mut s = serving.state.locked();
        s.socket.insert(Accepting { reg, socket }).reg.kick();
        drop(s);
        Ok(Socket { port, serving })
    }
}

impl Serving {
    /// A half-open connection is readable, or its deadline passed: reads what came, and hands
    /// its request on once whole (see the module text).
    fn conn_ready(&self, id: u64) {
        let mut s = self.state.locked();
        let Some(h) = s.waiting.get_mut(&id) else { return };
        let step = if h.since.elapsed() >= HANDSHAKE_TIMEOUT { Step::Drop } else { h.read() };
        if matches!(step, Step::Waiting) {
            return;
        }
        let was_full = s.waiting.len() >= HALF_OPEN_MAX;
        let h = s.waiting.remove(&id).expect("found above");
        // The consumer hears of the request without our lock: it may free the service point.
        drop(s);
        self.hand_on(h, step);
        if was_full {
            // A place is free: the backlog may hold a connection whose edge came while full.
            self.accept();
        }
    }

    /// A half-open connection's end: refused, handed to the consumer as a request, or closed.
    fn hand_on(&self, h: HalfOpen, step: Step) {
        let HalfOpen { reg, stream, peer, .. } = h;
        // Unregistered first: the accepting QP registers the socket anew.
        drop(reg);
        let asked = match &step {
            Step::Hello(h) => h.conn_qual,
            Step::UdHello(h) => h.conn_qual,
            _ => return,
        };
        let Some(events) = self.table.get(asked) else { return refuse(&stream, peer, asked) };
        match step {
            Step::Hello(hello) if stream.set_nonblocking(false).is_ok() => events.request(Arc::new(Pending::new(stream, hello, peer))),
            Step::UdHello(hello) if stream.set_nonblocking(false).is_ok() => events.request(Arc::new(UdPending::new(stream, hello, peer))),
            _ => {}
        }
    }

    /// Accepts what the listen backlog holds while there are places (see the module text);
    /// when there are none, or no descriptors, the engine comes back when one may be.
    fn accept(&self) {
        let mut s = self.state.locked();
        let now = Instant::now();
        if s.armed.is_some_and(|a| a <= now) {
            s.armed = None;
        }
        if let Some(p) = s.paused_until.filter(|p| *p > now) {
            return Self::arm(&mut s, p);
        }
        s.paused_until = None;
        loop {
            let oldest = s.waiting.iter().min_by_key(|(_, h)| h.since).map(|(id, h)| (*id, h.since));
            let full = s.waiting.len() >= HALF_OPEN_MAX;
            if let Some((_, since)) = oldest.filter(|_| full) {
                if since.elapsed() < EVICT_AGE {
                    return Self::arm(&mut s, since + EVICT_AGE);
                }
            }
            let Some(accepting) = s.socket.as_ref() else { return };
            match accepting.socket.accept() {
                Ok((stream, peer)) => {
                    if let (true, Some((id, _))) = (full, oldest) {
                        // The oldest gives way to the newcomer (see the module text).
                        s.waiting.remove(&id);
                    }
                    if let Err(e) = self.admit(&mut s, stream, peer) {
                        return self.pause(&mut s, &e);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // A connection that ended before we took it.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::EPROTO | libc::EPERM)) => {}
                Err(e) => return self.pause(&mut s, &e),
            }
        }
    }

    /// Gives an accepted connection a place, its registration and its deadline.
    fn admit(&self, s: &mut State, stream: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let engine = engine::engine().ok_or(ErrorKind::OutOfMemory)?;
        let id = s.next;
        s.next += 1;
        let handler = Arc::new(Conn { serving: self.this.clone(), id });
        let weak: Weak<dyn Handler> = Arc::downgrade(&handler) as Weak<dyn Handler>;
        let reg = engine.register(stream.as_raw_fd(), engine::IN, weak)?;
        let since = Instant::now();
        reg.timer(since + HANDSHAKE_TIMEOUT);
        s.waiting.insert(id, HalfOpen { reg, _handler: handler, stream, peer, buf: Vec::with_capacity(HDR_LEN), since, greeted: false });
        Ok(())
    }

    /// Accepting failed for want of something (descriptors, memory): it pauses for
    /// NO_FDS_PAUSE, the connections wait in the backlog.
    fn pause(&self, s: &mut State, e: &std::io::Error) {
        if out_of_descriptors(e) {
            let port = s.socket.as_ref().and_then(|a| a.socket.local_addr().ok()).map_or(0, |a| a.port());
            descriptor_limit(&format!("accepting a connection on port {port}"));
        }
        let until = Instant::now() + NO_FDS_PAUSE;
        s.paused_until = Some(until);
        Self::arm(s, until);
    }

    /// Has the engine run the listening socket's handler at `at`, unless an earlier timer
    /// will already (it arms again if need be).
    fn arm(s: &mut State, at: Instant) {
        if s.armed.is_some_and(|a| a <= at) {
            return;
        }
        if let Some(a) = &s.socket {
            a.reg.timer(at);
            s.armed = Some(at);
        }
    }
}

impl Listener for SoftListener {
    fn conn_qual(&self) -> u64 {
        self.conn_qual
    }
}

impl Drop for SoftListener {
    /// Its own socket closes first (Socket's drop), then its qualifier is free: a request read
    /// before goes to a service point that is closed already (builtin/sp.rs refuses it).
    fn drop(&mut self) {
        drop(self.own.take());
        self.table.remove(self.conn_qual);
    }
}

impl Drop for Socket {
    /// Ends everything at once: the socket and every half-open connection are unregistered
    /// and closed (the port is free on return); a handler running now on the engine finds
    /// nothing left, and a request it took out before goes to a service point that is closed
    /// already (builtin/sp.rs refuses it).
    fn drop(&mut self) {
        let (socket, waiting) = {
            let mut s = self.serving.state.locked();
            (s.socket.take(), std::mem::take(&mut s.waiting))
        };
        drop(waiting);
        drop(socket);
    }
}

/// How long a refused connection is retried: rdma_cm spends about as long resolving the
/// address and route, and programs such as dtest create their listener only just before the
/// peer connects.
pub const REFUSED_RETRY: Duration = Duration::from_millis(200);

pub const CLOSED_AT_GREETING: &str = "it closed the connection at the greeting (an older dat2, or another service)";

/// A connect's end because `addr` is no dat2-soft listener of our wire version (`why`), said
/// under DAT_DBG_TYPE (0x1).
pub fn not_ours(addr: SocketAddr, why: &str) -> CmEvent {
    crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: {addr} is not a dat2-soft peer of wire version {VERSION}: {why}");
    CmEvent::NonPeerRejected
}

/// Whether `answer`, the answer to our greeting, is a dat2-soft listener's of our wire
/// version; else the connect ends (`not_ours`).
pub fn check_answer(answer: &[u8; GREETING_LEN], addr: SocketAddr) -> Result<(), CmEvent> {
    match Greeting::decode(answer) {
        Some(g) if g.role == role::ANSWER && g.version == VERSION => Ok(()),
        Some(g) if g.role == role::ANSWER => Err(not_ours(addr, &format!("it speaks version {}", g.version))),
        _ => Err(not_ours(addr, "its answer is not a dat2-soft greeting")),
    }
}

/// The connection event a failed TCP connect to `addr` is.
pub fn connect_failed(e: &std::io::Error, addr: SocketAddr) -> CmEvent {
    match e.kind() {
        ErrorKind::ConnectionRefused => CmEvent::NonPeerRejected,
        _ if timed_out(e) => CmEvent::TimedOut,
        _ => {
            if out_of_descriptors(e) {
                descriptor_limit(&format!("a connect to {addr}"));
            }
            CmEvent::Unreachable
        }
    }
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
    use std::io::ErrorKind;
    use std::net::TcpListener;
    use std::sync::Arc;

    use super::SoftIaPort;
    use crate::device::{DevError, IaPort, ListenEvents};

    struct Nobody;
    impl ListenEvents for Nobody {
        fn request(&self, _conn: Arc<dyn crate::device::PendingConnection>) {}
    }

    #[test]
    fn an_ia_port_takes_each_64_bit_qualifier_once() {
        let ia = SoftIaPort::open("127.0.0.1:0".parse().expect("addr")).expect("opens");
        assert_ne!(ia.address().port(), 0);
        let high = |k: u64| (k << 32) | 0x6249;
        let a = ia.listen(high(1), Arc::new(Nobody)).expect("first");
        let _b = ia.listen(high(2), Arc::new(Nobody)).expect("differs above bit 15 only");
        assert_eq!(ia.listen(high(1), Arc::new(Nobody)).err(), Some(DevError::InUse));
        drop(a);
        assert!(ia.listen(high(1), Arc::new(Nobody)).is_ok(), "free again once its listener is dropped");
        // Any: the port the system picks, listened on, is the qualifier.
        let any = ia.listen(0, Arc::new(Nobody)).expect("any");
        let port = u16::try_from(any.conn_qual()).expect("a port");
        assert_eq!(TcpListener::bind(("127.0.0.1", port)).err().map(|e| e.kind()), Some(ErrorKind::AddrInUse));
        // The IA's own port as a qualifier binds nothing more.
        assert!(ia.listen(u64::from(ia.address().port()), Arc::new(Nobody)).is_ok());
    }
}
