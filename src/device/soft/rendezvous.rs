//! The Unix-socket rendezvous of a soft connection whose two ends are on one host: where each
//! side learns from the kernel which process the other is (peer.rs has the whole scheme).
//!
//! The active side listens on an abstract Unix socket with a random name (`Rendezvous`) and
//! sends the name in its HELLO. The passive side connects to it (`Channel::connect`) and
//! writes its `Claims` before it sends ACCEPT; the active side, given the ACCEPT, takes that
//! connection, writes its own claims back, and then sends READY; the passive side reads them
//! when READY comes. The TCP stream orders it all, so nobody waits on the Unix socket: what
//! is not there when it is looked for was never sent, and the connection uses TCP.
//!
//! Each side takes the other's process from the kernel (`SO_PEERCRED` and, where the kernel has
//! it, `SO_PEERPIDFD`: the acceptor sees the process that connected, the connector the process
//! that listened), never from the claims, and goes on only with a process of its own
//! effective uid (not the overflow uid, which stands for every unmapped user inside a user
//! namespace); the claims only name where that process keeps things (its descriptor of the
//! TCP connection, a readable word, its key table, PD and QP), and peer::verify checks the
//! descriptor against the kernel's view of the TCP connection. Claims are sent to no process
//! of another uid.
//!
//! What a local process of another user can still do: the name is visible in
//! `/proc/net/unix`, and abstract sockets have no permissions, so it can come to the
//! rendezvous (it is passed over, unread, for its uid), or name its own listener in a HELLO
//! (the passive side then connects to it and leaves at once); either way the kernel tells it
//! our pid and uid, which `/proc` shows it anyway unless mounted with `hidepid`. By filling
//! the rendezvous's backlog (`BACKLOG` connections) between HELLO and the passive side's
//! connect it can make a connection use TCP. It never gets a claim, and never the path.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::peer::{self, OtherEnd, PeerProcess};

/// What a process says about itself at the rendezvous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    /// Its descriptor of the TCP connection.
    pub sock_fd: u32,
    /// A word the other side reads to find out whether it can reach this process's memory.
    pub canary: u64,
    /// Its published key table (a descriptor number in its process; 0: none), and the PD and
    /// QP its side of the connection uses.
    pub keytab_fd: u32,
    pub pd: u32,
    pub qp: u64,
    /// Its QP's receive ring in that table (index + 1; 0: none) and the ring's generation
    /// (recvring.rs).
    pub ring: u32,
    pub ring_gen: u64,
}

const CLAIMS_LEN: usize = 48;
const MAGIC: u32 = 0x6461_7432;
/// Connections a rendezvous queues, and looks at before giving up.
const BACKLOG: i32 = 64;
/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process at the other end of a Unix socket.
const SO_PEERPIDFD: libc::c_int = 77;

impl Claims {
    fn encode(&self) -> [u8; CLAIMS_LEN] {
        let mut b = [0u8; CLAIMS_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.sock_fd.to_le_bytes());
        b[8..16].copy_from_slice(&self.canary.to_le_bytes());
        b[16..20].copy_from_slice(&self.keytab_fd.to_le_bytes());
        b[20..24].copy_from_slice(&self.pd.to_le_bytes());
        b[24..32].copy_from_slice(&self.qp.to_le_bytes());
        b[32..36].copy_from_slice(&self.ring.to_le_bytes());
        b[40..48].copy_from_slice(&self.ring_gen.to_le_bytes());
        b
    }

    fn decode(b: &[u8; CLAIMS_LEN]) -> Option<Claims> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        (u32_at(0) == MAGIC).then(|| Claims {
            sock_fd: u32_at(4),
            canary: u64_at(8),
            keytab_fd: u32_at(16),
            pd: u32_at(20),
            qp: u64_at(24),
            ring: u32_at(32),
            ring_gen: u64_at(40),
        })
    }
}

/// The abstract socket address of rendezvous `token`, and its length.
fn address(token: u64) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut sa: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("dat2-soft-{token:016x}");
    // sun_path[0] stays 0: the abstract namespace.
    for (d, s) in sa.sun_path[1..].iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let len = core::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len();
    (sa, len as libc::socklen_t)
}

fn unix_socket() -> Option<OwnedFd> {
    // SAFETY: a new socket, owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    // SAFETY: a descriptor we just opened and nobody else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The process at the other end of a connected Unix socket, from the kernel, if it runs as
/// our effective uid: its pid, and a pidfd of it when the kernel gives one (`SO_PEERPIDFD`).
fn peer_process(fd: &OwnedFd) -> Option<(u32, Option<OwnedFd>)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is valid for `len` bytes.
    let r = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut libc::c_void, &mut len)
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if r != 0 || cred.pid <= 0 || cred.uid != me || me == peer::overflow_uid() {
        return None;
    }
    let mut pidfd: libc::c_int = -1;
    let mut len = core::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `pidfd` is valid for `len` bytes.
    let r =
        unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_PEERPIDFD, &mut pidfd as *mut _ as *mut libc::c_void, &mut len) };
    // SAFETY: a descriptor the kernel just gave us (close-on-exec).
    Some((cred.pid as u32, (r == 0 && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) })))
}

/// The active side's listener, for one connection's handshake.
pub struct Rendezvous {
    listener: OwnedFd,
    pub token: u64,
}

impl Rendezvous {
    /// None when the paths are off (`DAT2_SOFT_CMA=0`) or no socket can be had.
    pub fn open() -> Option<Rendezvous> {
        if peer::off() {
            return None;
        }
        let listener = unix_socket()?;
        for _ in 0..4 {
            let mut token = 0u64;
            // SAFETY: getrandom writes at most 8 bytes into `token`.
            if unsafe { libc::getrandom(&mut token as *mut u64 as *mut libc::c_void, 8, 0) } != 8 {
                return None;
            }
            let (sa, len) = address(token);
            // SAFETY: `sa` is a valid address of `len` bytes.
            if unsafe { libc::bind(listener.as_raw_fd(), &sa as *const _ as *const libc::sockaddr, len) } == 0 {
                // SAFETY: listen on our own bound socket.
                return (unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } == 0).then_some(Rendezvous { listener, token });
            }
        }
        None
    }

    /// The passive side's connection to us, made before its ACCEPT: the peer process, if the
    /// kernel names one of our uid that holds `end` (the other end of our TCP connection), its
    /// claims, and the channel to write ours on.
    pub fn take(&self, end: OtherEnd) -> Option<(PeerProcess, Claims, Channel)> {
        // Every queued connection, until the queue is empty: the first that verifies wins.
        for _ in 0..BACKLOG + 1 {
            // SAFETY: accept4 on our listening socket; it returns a new descriptor or -1.
            let fd = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                return None;
            }
            // SAFETY: a descriptor the kernel just gave us.
            let channel = Channel(unsafe { OwnedFd::from_raw_fd(fd) });
            if let Some((p, c)) = channel.verify(end) {
                return Some((p, c, channel));
            }
        }
        None
    }
}

/// One connection of a rendezvous.
pub struct Channel(OwnedFd);

impl Channel {
    /// The passive side: connects to the active side's rendezvous `token`, if a process of our
    /// uid listens there.
    pub fn connect(token: u64) -> Option<Channel> {
        if peer::off() || token == 0 {
            return None;
        }
        let fd = unix_socket()?;
        let (sa, len) = address(token);
        // SAFETY: `sa` is a valid address of `len` bytes. A Unix stream connection to a
        // listening socket completes at once (or fails when its backlog is full).
        if unsafe { libc::connect(fd.as_raw_fd(), &sa as *const _ as *const libc::sockaddr, len) } != 0 {
            return None;
        }
        peer_process(&fd)?;
        Some(Channel(fd))
    }

    /// Writes our claims (to a process of our uid: checked when the channel was made).
    pub fn send(&self, c: &Claims) -> bool {
        let b = c.encode();
        // SAFETY: `b` is valid for its length; a new socket's buffer takes 32 bytes at once.
        let n = unsafe { libc::send(self.0.as_raw_fd(), b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        n == CLAIMS_LEN as isize
    }

    /// Reads the other side's claims, written before the TCP message that made us look, and
    /// checks them: the process the kernel names at the other end of this channel must hold
    /// `end`.
    pub fn verify(&self, end: OtherEnd) -> Option<(PeerProcess, Claims)> {
        let (pid, pidfd) = peer_process(&self.0)?;
        let mut b = [0u8; CLAIMS_LEN];
        // SAFETY: `b` is valid for its length.
        let n = unsafe { libc::recv(self.0.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
        if n != CLAIMS_LEN as isize {
            return None;
        }
        let claims = Claims::decode(&b)?;
        Some((peer::verify(end, pid, pidfd, claims.sock_fd)?, claims))
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::{Channel, Claims, Rendezvous};
    use crate::device::soft::peer;

    #[test]
    fn both_sides_learn_each_other() {
        if peer::off() {
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let (Some(end_a), Some(end_b)) = (peer::other_end(&a), peer::other_end(&b)) else {
            eprintln!("no sock_diag in this kernel: nothing to check");
            return;
        };
        let r = Rendezvous::open().unwrap();
        // Nobody came yet.
        assert!(r.take(end_a).is_none());
        // Someone who does not hold the other end comes first; then the true passive side.
        let liar = Channel::connect(r.token).unwrap();
        assert!(liar.send(&Claims { sock_fd: a.as_raw_fd() as u32, ..Claims::default() }));
        let passive = Channel::connect(r.token).unwrap();
        let claims_b = Claims { sock_fd: b.as_raw_fd() as u32, canary: peer::canary(), keytab_fd: 0, pd: 7, qp: 9, ring: 3, ring_gen: 11 };
        assert!(passive.send(&claims_b));
        let (p, c, active) = r.take(end_a).unwrap();
        assert_eq!(c, claims_b);
        assert!(p.reaches(c.canary));
        let claims_a = Claims { sock_fd: a.as_raw_fd() as u32, canary: peer::canary(), keytab_fd: 0, pd: 1, qp: 2, ring: 0, ring_gen: 0 };
        assert!(active.send(&claims_a));
        let (_, c) = passive.verify(end_b).unwrap();
        assert_eq!(c, claims_a);
        // A name nobody listens on, and claims that name the wrong descriptor.
        assert!(Channel::connect(r.token ^ 1).is_none());
        let r2 = Rendezvous::open().unwrap();
        let wrong = Channel::connect(r2.token).unwrap();
        assert!(wrong.send(&Claims { sock_fd: a.as_raw_fd() as u32, ..claims_b }));
        assert!(r2.take(end_a).is_none());
    }
}
