//! The built-in providers as the registry sees them: each IA name served by the core has two
//! `DAT_PROVIDER` tables (DAT_THREADSAFE false and true: the core is thread safe either way,
//! and reports back what the IA was opened as), and a device created on first open.
//!
//! Without any dat.conf, `dat2-soft` is available, and `dat2-verbs-<device>-<port>` for every
//! active port of an RDMA device (found in sysfs; rdma-core is loaded only when one opens). A
//! dat.conf entry whose lib_path is `builtin:soft` or `builtin:verbs` configures another IA
//! name on that device with its own ia_params.

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use crate::abi::*;
use crate::dbg_log;
use crate::device::Device;
use crate::log::DbgType;
use crate::device::soft::{address, SoftDevice};
use crate::device::verbs::{device::VerbsDevice, probe};

/// The IA name of the default soft device.
pub const SOFT_NAME: &str = "dat2-soft";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Soft,
    Verbs,
}

impl Kind {
    pub fn from_lib_path(path: &[u8]) -> Option<Kind> {
        match path.strip_prefix(b"builtin:")? {
            b"soft" => Some(Kind::Soft),
            b"verbs" => Some(Kind::Verbs),
            _ => None,
        }
    }
}

pub struct Builtin {
    pub name: CString,
    pub kind: Kind,
    pub params: String,
    tables: [&'static DAT_PROVIDER; 2],
    device: OnceLock<Result<Arc<dyn Device>, String>>,
    /// Provider-specific attributes known before the device opens.
    attrs: Vec<(&'static str, String)>,
}

// SAFETY: the tables and attributes are leaked, immutable statics; the device is thread safe.
unsafe impl Send for Builtin {}
// SAFETY: as above.
unsafe impl Sync for Builtin {}

impl Builtin {
    pub fn table(&self, thread_safe: bool) -> *const DAT_PROVIDER {
        self.tables[thread_safe as usize]
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Soft => "soft",
            Kind::Verbs => "verbs",
        }
    }

    /// The device, created on first use; a failure (say, an address that does not resolve)
    /// is reported on every open.
    pub fn device(&self) -> Result<Arc<dyn Device>, DAT_RETURN> {
        let dev = self.device.get_or_init(|| match self.kind {
            Kind::Soft => SoftDevice::new(&self.params).map(|d| d as Arc<dyn Device>),
            Kind::Verbs => VerbsDevice::new(&self.params).map(|d| d as Arc<dyn Device>),
        });
        dev.clone().map_err(|why| {
            dbg_log!(DbgType::ERROR, "{}: cannot open the {} device: {why}", self.name.to_string_lossy(), self.kind_name());
            dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED)
        })
    }

    /// The provider-specific attributes `dat_ia_query` reports for an IA on `dev`: the fixed
    /// ones, the device's transport MTU, and the registration cache's state and counters.
    pub fn provider_specific(&self, dev: &dyn Device) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self.attrs.iter().map(|(n, v)| (n.to_string(), v.clone())).collect();
        v.push(("DAT_IB_TRANSPORT_MTU".into(), dev.limits().mtu.to_string()));
        if self.kind == Kind::Verbs {
            v.push(("DAT_IB_DEVICE_NAME".into(), dev.name().to_string()));
        }
        if self.kind == Kind::Soft {
            let shm = if crate::device::soft::shm::enabled() {
                format!("on: registrations of {} bytes or more in memfds sealed with F_SEAL_SHRINK", crate::device::soft::shm::MIN_LEN)
            } else {
                "off: DAT2_SOFT_SHM=0".to_string()
            };
            v.push(("DAT2_SOFT_SHM".into(), shm));
            let cma = match crate::device::soft::peer::cma_state() {
                Ok(()) => "on: with peers of this user on this host that the kernel confirms (Unix-socket rendezvous, SO_PEERCRED, NETLINK_SOCK_DIAG)".to_string(),
                Err(why) => format!("off: {why}"),
            };
            v.push(("DAT2_SOFT_CMA".into(), cma));
        }
        if dev.cache_registrations() {
            let c = crate::builtin::mr::cache_stats();
            let state = match (&c.why_off, c.enabled) {
                (_, true) => "on".to_string(),
                (Some(why), false) => format!("off: {why}"),
                (None, false) => "off".to_string(),
            };
            let e = c.evictions;
            v.extend([
                ("DAT2_MR_CACHE", state),
                ("DAT2_MR_CACHE_HITS", c.hits.to_string()),
                ("DAT2_MR_CACHE_MISSES", c.misses.to_string()),
                ("DAT2_MR_CACHE_EVICTIONS", format!("unmap={} lru={} collector={} flush={}", e.unmap, e.lru, e.collector, e.flush)),
                ("DAT2_MR_CACHE_ENTRIES", format!("{}/{}", c.entries, c.max_entries)),
                ("DAT2_MR_CACHE_BYTES", format!("{}/{}", c.bytes, c.max_bytes)),
                ("DAT2_MR_CACHE_TTL_MS", c.ttl_ms.to_string()),
            ].map(|(n, v)| (n.to_string(), v)));
        }
        v
    }
}

fn instances() -> &'static Mutex<Vec<&'static Builtin>> {
    static ALL: OnceLock<Mutex<Vec<&'static Builtin>>> = OnceLock::new();
    ALL.get_or_init(|| Mutex::new(Vec::new()))
}

pub fn find(name: &[u8]) -> Option<&'static Builtin> {
    instances().lock().unwrap_or_else(|e| e.into_inner()).iter().copied().find(|b| b.name.as_bytes() == name)
}

fn named_attrs(kind: Kind, params: &str) -> Vec<(&'static str, String)> {
    match kind {
        Kind::Soft => vec![
            ("DAT_EXTENSION_INTERFACE", "TRUE".into()),
            ("DAT_IB_RDMA_READ", "TRUE".into()),
            ("DAT_IB_CMP_AND_SWAP", "TRUE".into()),
            ("DAT_IB_FETCH_AND_ADD", "TRUE".into()),
            ("DAT_IB_IMMED_DATA", "TRUE".into()),
            ("DAT_IB_CONNECTIVITY_MODE", "DIRECT".into()),
            ("DAT2_DEVICE", "soft".into()),
            ("DAT2_SOFT_PARAMS", params.into()),
        ],
        Kind::Verbs => vec![
            ("DAT_EXTENSION_INTERFACE", "TRUE".into()),
            ("DAT_IB_RDMA_READ", "TRUE".into()),
            ("DAT_IB_CMP_AND_SWAP", "TRUE".into()),
            ("DAT_IB_FETCH_AND_ADD", "TRUE".into()),
            ("DAT_IB_IMMED_DATA", "TRUE".into()),
            ("DAT_IB_CONNECTIVITY_MODE", "RC".into()),
            ("DAT2_DEVICE", "verbs".into()),
            ("DAT2_VERBS_PARAMS", params.into()),
        ],
    }
}

/// The instance serving `name`, created (and kept for the life of the process) on first use.
fn instance(name: &[u8], kind: Kind, params: &str) -> &'static Builtin {
    let mut all = instances().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = all.iter().find(|b| b.name.as_bytes() == name) {
        return b;
    }
    let cname = CString::new(name).unwrap_or_default();
    let device_name = Box::leak(cname.clone().into_boxed_c_str()).as_ptr();
    let tables = [
        &*Box::leak(Box::new(super::ops::table(device_name, false))),
        &*Box::leak(Box::new(super::ops::table(device_name, true))),
    ];
    let b: &'static Builtin = Box::leak(Box::new(Builtin {
        name: cname,
        kind,
        params: params.to_string(),
        tables,
        device: OnceLock::new(),
        attrs: named_attrs(kind, params),
    }));
    all.push(b);
    b
}

/// `dat_provider_init` of a built-in provider: registers the table for the entry's key.
///
/// # Safety
/// `info` must point to the static registry's entry info, which outlives the registration.
pub unsafe fn init(kind: Kind, info: *const DAT_PROVIDER_INFO, params: &CStr) {
    // SAFETY: guaranteed by the caller.
    let key = unsafe { crate::registry::Key::from_info(info) };
    if key.major != DAT_VERSION_MAJOR || key.minor != DAT_VERSION_MINOR {
        dbg_log!(DbgType::ERROR, "{}: the built-in providers implement DAT 2.0 only", key.display());
        return;
    }
    let params = params.to_string_lossy();
    let params = match kind {
        Kind::Soft if params.trim().is_empty() => address::DEFAULT_PARAMS.to_string(),
        _ => params.into_owned(),
    };
    let b = instance(&key.name, kind, &params);
    // SAFETY: a leaked table and the caller's info.
    let status = unsafe { crate::registry::add_provider(b.table(key.thread_safe != 0), info) };
    if status != DAT_SUCCESS {
        dbg_log!(DbgType::DR, "{}: built-in registration: {status:#x}", key.display());
    }
}

/// `dat_provider_fini` of a built-in provider.
///
/// # Safety
/// `info` must point to a readable `DAT_PROVIDER_INFO`.
pub unsafe fn fini(info: *const DAT_PROVIDER_INFO) {
    // SAFETY: guaranteed by the caller.
    let key = unsafe { crate::registry::Key::from_info(info) };
    crate::registry::remove_provider(&key);
}

/// The entries the registry lists after dat.conf's: (IA name, lib_path, ia_params).
pub fn defaults() -> Vec<(String, &'static str, String)> {
    let mut v = vec![(SOFT_NAME.to_string(), "builtin:soft", address::DEFAULT_PARAMS.to_string())];
    for p in probe::ports().into_iter().filter(|p| p.is_active()) {
        v.push((p.ia_name(), "builtin:verbs", format!("{} {}", p.device, p.port)));
    }
    v
}
