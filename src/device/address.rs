//! An IA's address from its ia_params, `"<IPv4/IPv6 address or netdev name> <port>"`: the
//! soft device's whole ia_params, and the verbs device's netdev behind its port.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Parses ia_params into a socket address (a netdev name becomes its first IPv4 address, or
/// its first IPv6 address if it has none).
pub fn resolve(params: &str) -> Result<SocketAddr, String> {
    let mut words = params.split_whitespace();
    let host = words.next().unwrap_or("127.0.0.1");
    let port: u16 = match words.next() {
        Some(p) => p.parse().map_err(|_| format!("ia_params \"{params}\": port '{p}' is not a number"))?,
        None => 0,
    };
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => netdev_address(host)
            .ok_or_else(|| format!("ia_params \"{params}\": '{host}' is neither an IP address nor a network device with an address"))?,
    };
    Ok(SocketAddr::new(ip, port))
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
    use super::resolve;

    #[test]
    fn parses_addresses_and_devices() {
        assert_eq!(resolve("127.0.0.1 0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(resolve("::1 4791").unwrap(), "[::1]:4791".parse().unwrap());
        assert!(resolve("lo 0").unwrap().is_ipv4());
        assert!(resolve("no-such-netdev 0").is_err());
        assert!(resolve("127.0.0.1 x").is_err());
    }
}
