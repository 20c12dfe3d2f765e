//! Who is at the other end of a soft connection, as the kernel tells it, never as the peer
//! claims it.
//!
//! Cross-memory attach (`process_vm_readv`/`writev` on the peer's pid), the peer's shared
//! files and its published key table name the peer process. Whatever a frame says about that
//! process is only a claim: a peer that names our own pid, or a third process's, would
//! otherwise make us copy between registered memory and memory it chose in a process it does
//! not own. So the peer process is established with the kernel before any of these paths is
//! used, in three steps:
//!
//! 1. **A Unix-socket rendezvous** (rendezvous.rs). On a connection whose other end is on this
//!    host, the active side listens on a fresh abstract Unix socket with a random name and
//!    sends the name in its HELLO; the passive side connects to it before it sends ACCEPT.
//!    Each side takes the other's process from the kernel (`SO_PEERCRED`: the pid and uid of
//!    the process that connected, or listened), and goes on only with a process of its own
//!    effective uid. A connection relayed by another process (a port forwarder, `ssh -L`,
//!    socat) cannot pass: the relay neither connects to nor listens on our rendezvous, and a
//!    peer elsewhere has no way to.
//! 2. **The other end of this TCP connection.** The socket at the other end is looked up with
//!    `NETLINK_SOCK_DIAG` (an exact `inet_diag` lookup of the reversed address and port pair,
//!    `SOCK_DIAG_BY_FAMILY` without `NLM_F_DUMP`), which finds it only on this host, in our
//!    network namespace, and gives its inode. The process from step 1 names its descriptor of
//!    the connection; that descriptor, taken from the process through a pidfd
//!    (`pidfd_getfd`, which needs the ptrace access cross-memory attach needs), must be that
//!    socket, and the pidfd must still name a live process afterwards. The pidfd is the one
//!    the kernel gave with the rendezvous's credentials (`SO_PEERPIDFD`), or, on kernels
//!    before 6.5, one opened by pid (then the final check shows that the pid was not reused
//!    in between). So the process that came to the rendezvous holds this connection.
//! 3. **Watching.** The pidfd is kept, one per peer process however many connections lead to
//!    it (a later connection's check uses a pidfd of its own, then takes the kept one when
//!    that process has not been reaped since: it then held the pid all along, so both name
//!    it). One thread per process waits on all of them (epoll) and
//!    marks a peer gone the moment its process exits, and every use of the pid for a copy
//!    first reads that mark (an atomic load). A pid is recycled only after its process has
//!    exited *and* its parent has reaped it, and the mark is set at the exit. What is left is
//!    a race: a peer that exits while one of our copies is already past that read, or before
//!    the watching thread has run, and whose pid its parent reaps and the kernel hands to a
//!    new process of our user, all within that time. Asking the kernel before every copy
//!    (`pidfd_send_signal` with signal 0) would narrow the window to the instructions between
//!    the check and the copy, but it costs a system call per copy (486 ns here: 0.6 us on the
//!    2.1 us zero-copy round trip, 30 % of the 64 KiB shared-memory bandwidth); it is what
//!    happens when the watching thread cannot be had. A peer's files and key table are taken
//!    with `pidfd_getfd`, which hands us the peer's own descriptor with the peer's own access
//!    mode, never a reopening of the file with our rights.
//!
//! Only a process of our own effective uid passes, so a peer can never make us do what it
//! could not do itself with `ptrace`: a process of another user, or one that gained
//! privileges by executing a set-user-ID program after it connected (we could then not reach
//! it), gets TCP.
//!
//! Alternatives considered: the descriptor check alone proves that a process holds the
//! socket, not that it speaks on it, so a relay of our user would be taken for the peer;
//! proving it with a word read at an address the peer names (the earlier canary) either
//! trusts a value the peer chose or, answered, tells an unverified peer what lies at an
//! address of its choice in a process it names. `SO_PEERCRED` exists for Unix sockets only,
//! hence the rendezvous. Scanning `/proc/net/tcp` for the inode costs a line per socket on the
//! host for every connection, and scanning every `/proc/<pid>/fd` for it costs every
//! descriptor of every process; neither finds more than the exact lookup. The lookup names no
//! interface, so IPv6 link-local connections are not found and use TCP.
//!
//! When anything fails (no sock_diag in the kernel, another network namespace, a peer of
//! another user, a claim that does not hold) the connection is not an error: its data travels
//! over TCP.

use std::collections::HashMap;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::io;
use crate::util::sync::MutexExt;

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_HDR: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then the socket id.
const REQ_LEN: usize = 8 + SOCKID_LEN;
/// `struct inet_diag_sockid`: ports, addresses, interface, cookie.
const SOCKID_LEN: usize = 48;
/// In `struct inet_diag_msg`: the owner's uid and the inode, after the socket id.
const MSG_UID: usize = 4 + SOCKID_LEN + 12;
const MSG_INODE: usize = MSG_UID + 4;

const TCP_ESTABLISHED: u8 = 1;

/// The socket at the other end of a TCP connection, found on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherEnd {
    /// 0 while the socket waits in its listener's queue (accept gives it an inode): an active
    /// side that has just connected sees that, and looks again once the peer has answered.
    pub inode: u64,
    established: bool,
}

/// A peer process whose identity the kernel confirmed (see the module text). Every connection
/// to one process shares its pidfd and its watch (`shared`): a process with thousands of
/// connections to another holds one descriptor for it, not one per connection.
#[derive(Debug, Clone)]
pub struct PeerProcess(Arc<Process>);

#[derive(Debug)]
struct Process {
    pid: u32,
    pidfd: OwnedFd,
    /// Set by the watching thread when the process exits; None: not watched (then every use
    /// asks the kernel).
    gone: Option<(u64, Arc<AtomicBool>)>,
}

impl Process {
    /// Whether the process has not been reaped, asked of the kernel.
    fn exists(&self) -> bool {
        // SAFETY: signal 0 on a pidfd we own only checks that the process exists.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, self.pidfd.as_raw_fd(), 0, core::ptr::null::<libc::siginfo_t>(), 0) };
        // EPERM: alive, but ours to signal it is not (a process of another user we may read).
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

impl PeerProcess {
    /// The pid, for one copy: None once the process has exited (its pid may then come to
    /// name another process).
    pub fn pid(&self) -> Option<u32> {
        let p = &self.0;
        match &p.gone {
            Some((_, gone)) => (!gone.load(Ordering::Acquire)).then_some(p.pid),
            None => p.exists().then_some(p.pid),
        }
    }

    /// Whether the kernel lets us copy from this process's memory (cross-memory attach needs
    /// ptrace access): one word read at `addr`, an address the verified process gave for that.
    pub fn reaches(&self, addr: u64) -> bool {
        let Some(pid) = self.pid() else { return false };
        let mut v = 0u64;
        addr != 0 && io::pull(pid, &[(&mut v as *mut u64 as u64, 8)], &[(addr, 8)]).is_ok()
    }

    /// A duplicate of the process's descriptor `fd` (`pidfd_getfd`): the same open file, with
    /// the access mode the process opened it with, whatever our own rights to the file are.
    pub fn get_fd(&self, fd: u32) -> Option<OwnedFd> {
        self.pid()?;
        getfd(&self.0.pidfd, fd)
    }
}

/// `pidfd_getfd`: a duplicate of descriptor `fd` of the process `pidfd` names.
fn getfd(pidfd: &OwnedFd, fd: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_getfd on a pidfd we own; it returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd as libc::c_int, 0) };
    // SAFETY: a descriptor the kernel just gave us (with O_CLOEXEC set).
    (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
}

#[cfg(test)]
impl PeerProcess {
    /// This process, as a peer of itself (for tests of what uses a peer).
    pub fn own() -> PeerProcess {
        // SAFETY: pidfd_open of our own pid.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id() as libc::pid_t, 0) };
        assert!(raw >= 0);
        // SAFETY: a descriptor the kernel just gave us.
        PeerProcess(Arc::new(Process { pid: std::process::id(), pidfd: unsafe { OwnedFd::from_raw_fd(raw as RawFd) }, gone: None }))
    }
}

/// The address of a word in our memory, for a verified peer to find out whether it can read
/// our memory.
pub fn canary() -> u64 {
    static CANARY: u64 = 0x6461_7432;
    &CANARY as *const u64 as u64
}

/// Whether `DAT2_SOFT_CMA=0` turned the paths off: then no peer is verified, so none uses
/// cross-memory attach, shared files or key tables with us, either way.
pub fn off() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| crate::util::env::var("DAT2_SOFT_CMA").is_some_and(|v| v == "0"))
}

/// Whether cross-memory attach can be used at all, and why not: `DAT2_SOFT_CMA=0`, or no
/// `NETLINK_SOCK_DIAG` to confirm peers with (reported by `dat_ia_query` as `DAT2_SOFT_CMA`).
pub fn cma_state() -> Result<(), String> {
    if off() {
        return Err("DAT2_SOFT_CMA=0".into());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me == overflow_uid() {
        return Err(format!(
            "this process runs as uid {me}, the overflow uid (nobody), which stands for every user not mapped into this user namespace: no peer of that uid is believed to be the same user"
        ));
    }
    // SAFETY: a new socket, closed at once.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(format!("no NETLINK_SOCK_DIAG to confirm peers with: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: our own descriptor, closed once.
    unsafe { libc::close(fd) };
    Ok(())
}

/// The uid that stands for every user not mapped into our user namespace.
pub fn overflow_uid() -> u32 {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(|| std::fs::read_to_string("/proc/sys/kernel/overflowuid").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(65534))
}

/// The kernel's view of the other end of the TCP connection `stream`, if that end is a socket
/// on this host (in our network namespace).
pub fn other_end(stream: &TcpStream) -> Option<OtherEnd> {
    let local = stream.local_addr().ok()?;
    let remote = stream.peer_addr().ok()?;
    let (family, ours, theirs) = match (local, remote) {
        (std::net::SocketAddr::V4(l), std::net::SocketAddr::V4(r)) => {
            (libc::AF_INET, v4_words(*l.ip(), l.port()), v4_words(*r.ip(), r.port()))
        }
        (std::net::SocketAddr::V6(l), std::net::SocketAddr::V6(r)) => match (l.ip().to_ipv4_mapped(), r.ip().to_ipv4_mapped()) {
            (Some(li), Some(ri)) => (libc::AF_INET, v4_words(li, l.port()), v4_words(ri, r.port())),
            _ => (libc::AF_INET6, (l.ip().octets(), l.port()), (r.ip().octets(), r.port())),
        },
        _ => return None,
    };
    // The peer's socket: its source is our destination and the other way round.
    let mut req = [0u8; NLMSG_HDR + REQ_LEN];
    req[0..4].copy_from_slice(&((NLMSG_HDR + REQ_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let r = &mut req[NLMSG_HDR..];
    r[0] = family as u8;
    r[1] = libc::IPPROTO_TCP as u8;
    r[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    let id = &mut r[8..];
    id[0..2].copy_from_slice(&theirs.1.to_be_bytes());
    id[2..4].copy_from_slice(&ours.1.to_be_bytes());
    id[4..20].copy_from_slice(&theirs.0);
    id[20..36].copy_from_slice(&ours.0);
    // No cookie: INET_DIAG_NOCOOKIE.
    id[40..48].copy_from_slice(&[0xff; 8]);

    // SAFETY: a new socket, owned below.
    let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_SOCK_DIAG) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a descriptor we just opened and nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_nl is plain data; all-zero is valid.
    let mut kernel: libc::sockaddr_nl = unsafe { core::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `req` and `kernel` are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            &kernel as *const _ as *const libc::sockaddr,
            core::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent != req.len() as isize {
        return None;
    }
    let mut buf = [0u8; 1024];
    // The kernel answers while sending the request: the answer is queued already.
    // SAFETY: `buf` is valid for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < (NLMSG_HDR + MSG_INODE + 4) as isize {
        return None;
    }
    let msg_len = u32::from_ne_bytes(buf[0..4].try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(buf[4..6].try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY || msg_len > n as usize || msg_len < NLMSG_HDR + MSG_INODE + 4 {
        return None;
    }
    let m = &buf[NLMSG_HDR..];
    // The answer must be about the socket we asked for (a dual-stack socket answers an IPv4
    // lookup as AF_INET6).
    if !matches!(i32::from(m[0]), libc::AF_INET | libc::AF_INET6) || m[4..8] != id_ports(&theirs, &ours) {
        return None;
    }
    let inode = u32::from_ne_bytes(m[MSG_INODE..MSG_INODE + 4].try_into().ok()?);
    Some(OtherEnd { inode: u64::from(inode), established: m[1] == TCP_ESTABLISHED })
}

fn id_ports(src: &([u8; 16], u16), dst: &([u8; 16], u16)) -> [u8; 4] {
    let (s, d) = (src.1.to_be_bytes(), dst.1.to_be_bytes());
    [s[0], s[1], d[0], d[1]]
}

fn v4_words(ip: std::net::Ipv4Addr, port: u16) -> ([u8; 16], u16) {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&ip.octets());
    (a, port)
}

/// Checks that process `pid` (as the kernel named it to us, with its pidfd when the kernel
/// gave one: rendezvous.rs) holds the other end of the connection as its descriptor `peer_fd`
/// (see the module text).
pub fn verify(end: OtherEnd, pid: u32, pidfd: Option<OwnedFd>, peer_fd: u32) -> Option<PeerProcess> {
    if off() {
        return None;
    }
    if end.inode == 0 || !end.established || pid == 0 || pid > i32::MAX as u32 || peer_fd > i32::MAX as u32 {
        return None;
    }
    let pidfd = match pidfd {
        Some(fd) => fd,
        None => {
            // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
            let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if raw < 0 {
                return None;
            }
            // SAFETY: a descriptor the kernel just gave us.
            unsafe { OwnedFd::from_raw_fd(raw as RawFd) }
        }
    };
    // Its descriptor `peer_fd`, taken from it, must be the socket at the other end (whether
    // the process is still the one the pidfd names is asked once, below).
    let sock = getfd(&pidfd, peer_fd)?;
    // SAFETY: stat is plain data; all-zero is valid.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: fstat fills `st` for our own descriptor.
    if unsafe { libc::fstat(sock.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK || st.st_ino != end.inode {
        return None;
    }
    drop(sock);
    shared(pid, pidfd)
}

/// The processes verified peers are, by pid, while connections use them.
fn known() -> &'static Mutex<HashMap<u32, Weak<Process>>> {
    static KNOWN: OnceLock<Mutex<HashMap<u32, Weak<Process>>>> = OnceLock::new();
    KNOWN.get_or_init(Mutex::default)
}

/// The verified process `pid`, whose `pidfd` was opened before the check that it holds the
/// connection: the one other connections already use, when that one has not been reaped now
/// (it then held the pid throughout, since a pid is reused only once reaped, so `pidfd` names
/// it too, and is closed); else a new one, watched. The map's lock is never held while an
/// entry may drop (its Drop takes it).
fn shared(pid: u32, pidfd: OwnedFd) -> Option<PeerProcess> {
    let known_one = known().locked().get(&pid).and_then(Weak::upgrade);
    if let Some(p) = known_one.filter(|p| p.exists()) {
        return Some(PeerProcess(p));
    }
    let gone = watcher().and_then(|w| w.watch(&pidfd));
    let p = Arc::new(Process { pid, pidfd, gone });
    // Still the process the pidfd was opened for: the pid was not reused meanwhile. (Asked of
    // the kernel: the watching thread may not have seen an exit that came before the watch.)
    if !p.exists() {
        return None;
    }
    known().locked().insert(pid, Arc::downgrade(&p));
    Some(PeerProcess(p))
}

impl Drop for Process {
    fn drop(&mut self) {
        if let (Some((token, _)), Some(w)) = (&self.gone, watcher()) {
            // Closing the pidfd (after this) takes it out of the epoll set.
            w.flags.locked().remove(token);
        }
        // Unless a newer one for the pid took the place meanwhile.
        let mut map = known().locked();
        if map.get(&self.pid).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&self.pid);
        }
    }
}

/// The thread that marks verified peers gone when their processes exit.
struct Watcher {
    epoll: OwnedFd,
    flags: Mutex<HashMap<u64, Weak<AtomicBool>>>,
    next: AtomicU64,
}

impl Watcher {
    /// Watches `pidfd` (once: EPOLLONESHOT); the flag it returns turns true at the exit.
    fn watch(&self, pidfd: &OwnedFd) -> Option<(u64, Arc<AtomicBool>)> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let flag = Arc::new(AtomicBool::new(false));
        self.flags.locked().insert(token, Arc::downgrade(&flag));
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: token };
        // SAFETY: both descriptors are open; `ev` is a valid event.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, pidfd.as_raw_fd(), &mut ev) } != 0 {
            self.flags.locked().remove(&token);
            return None;
        }
        Some((token, flag))
    }

    fn run(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        loop {
            // SAFETY: `events` is valid for 16 entries.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), 16, -1) };
            let flags = self.flags.locked();
            for ev in &events[..n.max(0) as usize] {
                let token = ev.u64;
                if let Some(flag) = flags.get(&token).and_then(Weak::upgrade) {
                    flag.store(true, Ordering::Release);
                }
            }
        }
    }
}

fn watcher() -> Option<&'static Watcher> {
    static WATCHER: OnceLock<Option<&'static Watcher>> = OnceLock::new();
    *WATCHER.get_or_init(|| {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor we just opened and nobody else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let w: &'static Watcher = Box::leak(Box::new(Watcher { epoll, flags: Mutex::new(HashMap::new()), next: AtomicU64::new(1) }));
        std::thread::Builder::new().name("dat2-soft-peers".into()).stack_size(64 << 10).spawn(move || w.run()).ok()?;
        Some(w)
    })
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::sync::Arc;

    use super::{canary, off, other_end, verify, watcher, PeerProcess, Process};

    #[test]
    fn verifies_only_the_true_holder() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let me = std::process::id();
        if off() {
            return;
        }
        let (Some(from_a), Some(from_b)) = (other_end(&a), other_end(&b)) else {
            eprintln!("no sock_diag in this kernel: nothing to check");
            return;
        };
        assert_ne!(from_a.inode, from_b.inode);
        // Each end finds the other's socket: b's descriptor is the one a's peer claims.
        assert!(verify(from_a, me, None, b.as_raw_fd() as u32).is_some());
        assert!(verify(from_b, me, None, a.as_raw_fd() as u32).is_some());
        // A descriptor that is not the other end (our own end, the listener, none) fails.
        assert!(verify(from_a, me, None, a.as_raw_fd() as u32).is_none());
        assert!(verify(from_a, me, None, l.as_raw_fd() as u32).is_none());
        assert!(verify(from_a, me, None, 99_999).is_none());
        // Another process never holds it.
        assert!(verify(from_a, 1, None, b.as_raw_fd() as u32).is_none());
        assert!(verify(from_a, 0, None, b.as_raw_fd() as u32).is_none());
        let p = verify(from_a, me, None, b.as_raw_fd() as u32).unwrap();
        assert!(p.reaches(canary()));
        assert!(!p.reaches(0));
        // Its descriptors come with their own access mode.
        let dup = p.get_fd(b.as_raw_fd() as u32).unwrap();
        // SAFETY: fcntl on our own descriptor.
        assert_eq!(unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_GETFL) } & libc::O_ACCMODE, libc::O_RDWR);
    }

    #[test]
    fn connections_to_one_process_share_its_pidfd() {
        if off() {
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let pairs: Vec<(TcpStream, TcpStream)> = (0..3)
            .map(|_| {
                let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                (a, l.accept().unwrap().0)
            })
            .collect();
        let me = std::process::id();
        let Some(end) = other_end(&pairs[0].0) else { return };
        let first = verify(end, me, None, pairs[0].1.as_raw_fd() as u32).unwrap();
        let descriptors = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = descriptors();
        let others: Vec<PeerProcess> =
            pairs[1..].iter().map(|(a, b)| verify(other_end(a).unwrap(), me, None, b.as_raw_fd() as u32).unwrap()).collect();
        assert!(others.iter().all(|o| Arc::ptr_eq(&o.0, &first.0)), "a second connection to the process opened its own");
        assert_eq!(descriptors(), before, "verifying more connections kept descriptors");
        // (Whether it goes with its last connection is not asked here: the other tests of this
        // process verify it too, at the same time.)
        drop((first, others));
        let again = verify(end, me, None, pairs[0].1.as_raw_fd() as u32).unwrap();
        assert_eq!(again.pid(), Some(me));
    }

    #[test]
    fn a_reaped_process_is_not_used() {
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let pid = child.id();
        // SAFETY: pidfd_open on a child we own.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        assert!(raw >= 0);
        // SAFETY: a descriptor the kernel just gave us.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
        let gone = watcher().and_then(|w| w.watch(&pidfd));
        assert!(gone.is_some(), "no watching thread");
        let watched = PeerProcess(Arc::new(Process { pid, pidfd, gone }));
        assert_eq!(watched.pid(), Some(pid));
        // SAFETY: pidfd_open on a child we own.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a descriptor the kernel just gave us.
        let asked = PeerProcess(Arc::new(Process { pid, pidfd: unsafe { OwnedFd::from_raw_fd(raw as RawFd) }, gone: None }));
        assert_eq!(asked.pid(), Some(pid));
        // Killed but not reaped yet: the watched one is gone at once, the asked one only after the reap.
        child.kill().unwrap();
        let t = std::time::Instant::now();
        while watched.pid().is_some() && t.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(watched.pid(), None);
        child.wait().unwrap();
        assert_eq!(asked.pid(), None);
    }
}
