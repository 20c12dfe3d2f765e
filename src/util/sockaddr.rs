//! The one place socket addresses cross between Rust (`SocketAddr`, which the device trait
//! uses) and C (`struct sockaddr`, which DAT consumers and rdma_cm use).
//!
//! `std::net::SocketAddr` already holds everything an IPv4 or IPv6 address needs (port, flow
//! info, scope id), so the two conversions below replace a crate: a `socket2::SockAddr` would
//! only add a third representation between them.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};

/// `sa` as a C socket address, in a `sockaddr_storage` (the rest zeroed).
pub fn to_c(sa: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    match sa {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
        }
    }
    ss
}

/// The IPv4 or IPv6 address a C socket address holds; `None` for NULL or another family.
///
/// # Safety
/// `p` must be NULL or point to a readable socket address as long as its family says
/// (`sockaddr_in` for `AF_INET`, `sockaddr_in6` for `AF_INET6`).
pub unsafe fn from_c(p: *const libc::sockaddr) -> Option<SocketAddr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: every socket address starts with its family (the caller's guarantee).
    match i32::from(unsafe { (*p).sa_family }) {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in; read unaligned, as a consumer's
            // buffer need not be aligned.
            let sin = unsafe { (p as *const libc::sockaddr_in).read_unaligned() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6; read unaligned, as above.
            let sin6 = unsafe { (p as *const libc::sockaddr_in6).read_unaligned() };
            let (port, flow) = (u16::from_be(sin6.sin6_port), u32::from_be(sin6.sin6_flowinfo));
            Some(SocketAddr::V6(SocketAddrV6::new(sin6.sin6_addr.s6_addr.into(), port, flow, sin6.sin6_scope_id)))
        }
        _ => None,
    }
}

/// The length of the C address `to_c` makes of `sa`.
pub fn c_len(sa: &SocketAddr) -> libc::socklen_t {
    match sa {
        SocketAddr::V4(_) => core::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        SocketAddr::V6(_) => core::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
    }
}

/// Starts a TCP connection to `remote` from the local address `local` (any port), without
/// waiting for it: a non-blocking socket whose connect is in progress (writable once it is
/// done; `take_error` then says how it went), and the error it failed with at once, if it did.
/// Bound first, so that the peer sees the address we name rather than the one the kernel picks
/// for the route (on a host with several addresses, or an IA on 127.0.0.2 reaching one on
/// 127.0.0.1). An unspecified `local`, or one of the other family, is not bound. Only a socket
/// that cannot be made, or bound, is an error here.
pub fn connect_begin(local: IpAddr, remote: SocketAddr) -> io::Result<(TcpStream, Option<io::Error>)> {
    let family = if remote.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor socket(2) just returned, owned from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // The connection's end in TIME_WAIT (after we close first) must not keep its port from a
    // listener: the kernel lets a listener (ours set SO_REUSEADDR) bind a port held by a
    // TIME_WAIT socket only when that socket set it too. Without it a process that closed
    // many connections could not create a service point on one of their ports for a minute.
    let one: libc::c_int = 1;
    // SAFETY: an int option of our own socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of_val(&one) as u32,
        )
    };
    if !local.is_unspecified() && local.is_ipv4() == remote.is_ipv4() {
        let at = SocketAddr::new(local, 0);
        let ss = to_c(at);
        // SAFETY: a socket address of the length c_len gives, in storage large enough for it.
        if unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, c_len(&at)) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let ss = to_c(remote);
    // SAFETY: as above.
    if unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, c_len(&remote)) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Ok((TcpStream::from(sock), Some(e)));
        }
    }
    Ok((TcpStream::from(sock), None))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::net::{IpAddr, SocketAddr, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    use super::{connect_begin, from_c, to_c};

    /// A blocking connect within `timeout` (what the engine does in turns).
    fn connect_from(local: IpAddr, remote: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        let (stream, failed) = connect_begin(local, remote)?;
        if let Some(e) = failed {
            return Err(e);
        }
        let mut pfd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one pollfd, ours.
        if unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) } <= 0 {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match stream.take_error()? {
            Some(e) => Err(e),
            None => Ok(stream),
        }
    }

    #[test]
    fn a_closed_connection_leaves_its_port_to_a_listener() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = connect_from(IpAddr::from([0, 0, 0, 0]), l.local_addr().unwrap(), Duration::from_secs(5)).unwrap();
        let (mut a, _) = l.accept().unwrap();
        let port = c.local_addr().unwrap().port();
        // We close first, then the peer: our end is left in TIME_WAIT on its port.
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(a.read(&mut [0u8; 1]).unwrap(), 0);
        drop(a);
        assert_eq!((&c).read(&mut [0u8; 1]).unwrap(), 0);
        drop(c);
        let again = std::net::TcpListener::bind(("127.0.0.1", port));
        assert!(again.is_ok(), "a listener cannot take port {port} of a closed connection: {:?}", again.err());
    }

    #[test]
    fn round_trips() {
        for text in ["127.0.0.1:4791", "[::1]:18515", "[fe80::1%2]:7"] {
            let sa: SocketAddr = text.parse().unwrap();
            let ss = to_c(sa);
            // SAFETY: a sockaddr_storage filled by to_c.
            let back = unsafe { from_c(&ss as *const _ as *const libc::sockaddr) };
            assert_eq!(back, Some(sa), "{text}");
        }
        // SAFETY: all-zero storage is AF_UNSPEC.
        let unspec: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { from_c(&unspec as *const _ as *const libc::sockaddr) }, None);
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { from_c(core::ptr::null()) }, None);
    }

    #[test]
    fn connects_from_the_address_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let s = connect_from("127.0.0.2".parse().unwrap(), to, Duration::from_secs(5)).unwrap();
        let (_, from) = l.accept().unwrap();
        assert_eq!(from.ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(s.local_addr().unwrap(), from);
        drop(l);
        let refused = connect_from("127.0.0.1".parse().unwrap(), to, Duration::from_secs(5)).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }
}
