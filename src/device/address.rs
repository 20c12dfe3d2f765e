//! An IA's address from its ia_params, `"<IPv4/IPv6 address or netdev name> <port>"`: the
//! soft device's whole ia_params, and the verbs device's netdev behind its port.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Parses ia_params into a socket address (a netdev name becomes its first IPv4 address, or
/// its first IPv6 address if it has none).
pub fn resolve(params: &str) -> Result<libc::sockaddr_storage, String> {
    let mut words = params.split_whitespace();
    let host = words.next().unwrap_or("127.0.0.1");
    let port: u16 = match words.next() {
        Some(p) => p.parse().map_err(|_| format!("ia_params \"{params}\": port '{p}' is not a number"))?,
        None => 0,
    };
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => netdev_address(host).ok_or_else(|| format!("ia_params \"{params}\": '{host}' is neither an IP address nor a network device with an address"))?,
    };
    Ok(to_storage(SocketAddr::new(ip, port)))
}

pub fn to_storage(sa: SocketAddr) -> libc::sockaddr_storage {
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
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
        }
    }
    ss
}

fn netdev_address(name: &str) -> Option<IpAddr> {
    let mut list: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, released with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut v4 = None;
    let mut v6 = None;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated interface name.
        if unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of the family it states.
        match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
            libc::AF_INET if v4.is_none() => {
                // SAFETY: an AF_INET address.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                v4 = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
            }
            libc::AF_INET6 if v6.is_none() => {
                // SAFETY: an AF_INET6 address.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                v6 = Some(IpAddr::V6(sin6.sin6_addr.s6_addr.into()));
            }
            _ => {}
        }
    }
    // SAFETY: the list getifaddrs returned.
    unsafe { libc::freeifaddrs(list) };
    v4.or(v6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses_and_devices() {
        let ss = resolve("127.0.0.1 0").unwrap();
        assert_eq!(i32::from(ss.ss_family), libc::AF_INET);
        let ss = resolve("::1 4791").unwrap();
        assert_eq!(i32::from(ss.ss_family), libc::AF_INET6);
        let ss = resolve("lo 0").unwrap();
        assert_eq!(i32::from(ss.ss_family), libc::AF_INET);
        assert!(resolve("no-such-netdev 0").is_err());
        assert!(resolve("127.0.0.1 x").is_err());
    }
}

/// The IP address of a socket address (None for other families).
pub fn ip_of(ss: &libc::sockaddr_storage) -> Option<IpAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(IpAddr::V6(sin6.sin6_addr.s6_addr.into()))
        }
        _ => None,
    }
}
