//! The one place socket addresses cross between Rust (`SocketAddr`, which the device trait
//! uses) and C (`struct sockaddr`, which DAT consumers and rdma_cm use).
//!
//! `std::net::SocketAddr` already holds everything an IPv4 or IPv6 address needs (port, flow
//! info, scope id), so the two conversions below replace a crate: a `socket2::SockAddr` would
//! only add a third representation between them.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
