//! What the verbs device can find out without loading rdma-core: the RDMA devices, their
//! ports and states, and the network device (and so the IP address) behind a port, all from
//! sysfs. The registry uses it to name the built-in verbs IAs (`dat2-verbs-<device>-<port>`,
//! one per active port) and `dat2-info` to say why a port cannot be opened.

use std::path::{Path, PathBuf};

const SYSFS: &str = "/sys/class/infiniband";

/// A port of an RDMA device as sysfs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub device: String,
    pub port: u8,
    /// "ACTIVE", "DOWN", "INIT", ... (the word after the number in the `state` file).
    pub state: String,
    /// The network device behind the port (RoCE, iWARP, IPoIB), if any.
    pub netdev: Option<String>,
}

impl PortInfo {
    pub fn is_active(&self) -> bool {
        self.state == "ACTIVE"
    }
    /// The built-in IA name serving this port.
    pub fn ia_name(&self) -> String {
        format!("dat2-verbs-{}-{}", self.device, self.port)
    }
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn sorted_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// The network device of `device`'s `port`: the port's first GID's netdev (RoCE), else the
/// device's own net interfaces (IPoIB, iWARP).
fn netdev_of(root: &Path, device: &str, port: u8) -> Option<String> {
    let dev = root.join(device);
    if let Some(n) = read_trimmed(&dev.join(format!("ports/{port}/gid_attrs/ndevs/0"))).filter(|n| !n.is_empty()) {
        return Some(n);
    }
    sorted_names(&dev.join("device/net")).into_iter().next()
}

/// Every port of every RDMA device under `root` (normally /sys/class/infiniband).
pub fn ports_in(root: &Path) -> Vec<PortInfo> {
    let mut out = Vec::new();
    for device in sorted_names(root) {
        let mut ports: Vec<u8> = sorted_names(&root.join(&device).join("ports")).iter().filter_map(|p| p.parse().ok()).collect();
        ports.sort_unstable();
        for port in ports {
            let raw = read_trimmed(&root.join(&device).join(format!("ports/{port}/state"))).unwrap_or_default();
            // "4: ACTIVE" -> "ACTIVE"
            let state = raw.split_once(':').map_or(raw.as_str(), |(_, s)| s).trim().to_string();
            let netdev = netdev_of(root, &device, port);
            out.push(PortInfo { device: device.clone(), port, state, netdev });
        }
    }
    out
}

/// The type of entry `index` of a port's GID table ("IB/RoCE v1", "RoCE v2"), as sysfs says.
pub fn gid_type(device: &str, port: u8, index: u8) -> Option<String> {
    read_trimmed(&Path::new(SYSFS).join(device).join(format!("ports/{port}/gid_attrs/types/{index}")))
}

/// Every port of every RDMA device on this host.
pub fn ports() -> Vec<PortInfo> {
    ports_in(Path::new(SYSFS))
}

/// The port named by ia_params `"<device> <port>"` (port 1 if left out).
pub fn parse_params(params: &str) -> Result<(String, u8), String> {
    let mut w = params.split_whitespace();
    let device = w.next().ok_or_else(|| format!("ia_params \"{params}\": no device name (expected \"<device> <port>\")"))?;
    let port = match w.next() {
        Some(p) => {
            p.parse::<u8>().ok().filter(|&p| p > 0).ok_or_else(|| format!("ia_params \"{params}\": port '{p}' is not a port number"))?
        }
        None => 1,
    };
    Ok((device.to_string(), port))
}

/// Why `device`/`port` cannot serve an IA, as far as sysfs tells; None if it looks usable.
pub fn unusable(device: &str, port: u8) -> Option<String> {
    let root = PathBuf::from(SYSFS);
    if !root.is_dir() {
        return Some(format!("{SYSFS}: no RDMA devices on this host (no kernel RDMA support or driver)"));
    }
    if !root.join(device).is_dir() {
        return Some(format!("{SYSFS}/{device}: no such RDMA device"));
    }
    let all = ports_in(&root);
    let Some(p) = all.iter().find(|p| p.device == device && p.port == port) else {
        return Some(format!("{SYSFS}/{device}/ports/{port}: no such port"));
    };
    if !p.is_active() {
        return Some(format!(
            "{SYSFS}/{device}/ports/{port}: port is {}",
            if p.state.is_empty() { "in an unknown state" } else { &p.state }
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{parse_params, ports_in, PortInfo};

    fn fake(root: &Path, device: &str, port: u8, state: &str, ndev: Option<&str>) {
        let p = root.join(device).join(format!("ports/{port}"));
        std::fs::create_dir_all(p.join("gid_attrs/ndevs")).unwrap();
        std::fs::write(p.join("state"), format!("{state}\n")).unwrap();
        if let Some(n) = ndev {
            std::fs::write(p.join("gid_attrs/ndevs/0"), format!("{n}\n")).unwrap();
        }
    }

    #[test]
    fn ports_states_and_netdevs() {
        let root = std::env::temp_dir().join(format!("dat2-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        fake(&root, "rxe0", 1, "4: ACTIVE", Some("eth0"));
        fake(&root, "mlx5_0", 1, "1: DOWN", None);
        fake(&root, "mlx5_0", 2, "4: ACTIVE", None);
        let ports = ports_in(&root);
        assert_eq!(ports.len(), 3);
        assert_eq!(ports[0], PortInfo { device: "mlx5_0".into(), port: 1, state: "DOWN".into(), netdev: None });
        assert!(ports[1].is_active());
        assert_eq!(ports[2].ia_name(), "dat2-verbs-rxe0-1");
        assert_eq!(ports[2].netdev.as_deref(), Some("eth0"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn params() {
        assert_eq!(parse_params("rxe0 1"), Ok(("rxe0".into(), 1)));
        assert_eq!(parse_params("mlx5_0"), Ok(("mlx5_0".into(), 1)));
        assert!(parse_params("").is_err());
        assert!(parse_params("rxe0 0").is_err());
        assert!(parse_params("rxe0 x").is_err());
    }
}
