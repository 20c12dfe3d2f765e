//! The built-in providers as the registry sees them: each IA name served here has two
//! `DAT_PROVIDER` tables (DAT_THREADSAFE false and true: the built-in layer is thread safe either way,
//! and reports back what the IA was opened as), and a device created on first open.
//!
//! Without any dat.conf, every driver in [`crate::device::DRIVERS`] offers the IAs it probes
//! (`dat2-soft`; `dat2-verbs-<device>-<port>` per active port). A dat.conf entry whose lib_path
//! is `builtin:<driver>` configures another IA name on that driver with its own ia_params.
//! Nothing here names a device: each describes itself behind [`crate::device::Driver`].

use core::ffi::c_char;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

use crate::abi::*;
use crate::dbg_log;
use crate::device::{Device, Driver};
use crate::log::DbgType;
use crate::util::sync::MutexExt;

pub struct Builtin {
    pub name: CString,
    pub driver: &'static dyn Driver,
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

    /// The device, created on first use; a failure (say, an address that does not resolve)
    /// is reported on every open.
    pub fn device(&self) -> Result<Arc<dyn Device>, DAT_RETURN> {
        let dev = self.device.get_or_init(|| self.driver.open(&self.params));
        dev.clone().map_err(|why| {
            dbg_log!(DbgType::ERROR, "{}: cannot open the {} device: {why}", self.name.to_string_lossy(), self.driver.name());
            dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED)
        })
    }

    /// The provider-specific attributes `dat_ia_query` reports for an IA on `dev`: the fixed
    /// ones, the device's transport MTU and UD service, and the registration cache's state and counters.
    pub fn provider_specific(&self, dev: &dyn Device) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self.attrs.iter().map(|(n, v)| (n.to_string(), v.clone())).collect();
        v.extend(crate::device::capability_attributes(dev.limits()));
        v.push(("DAT_IB_TRANSPORT_MTU".into(), dev.limits().mtu.to_string()));
        // The unreliable datagram service, when the device has one, and its datagram size
        // limit (a UD EP's max_message_size is at most this).
        let ud = dev.limits().max_ud_msg;
        v.push(("DAT_IB_UD".into(), if ud > 0 { "TRUE" } else { "FALSE" }.into()));
        if ud > 0 {
            v.push(("DAT2_UD_MAX_MESSAGE".into(), ud.to_string()));
        }
        v.extend(dev.attributes());
        // The IB counters extension's ops (super::stats), on every device.
        v.push(("DAT_COUNTERS".into(), "TRUE".into()));
        if dev.cache_registrations() {
            let c = crate::builtin::mr::cache_stats();
            let state = match (&c.why_off, c.enabled) {
                (_, true) => "on".to_string(),
                (Some(why), false) => format!("off: {why}"),
                (None, false) => "off".to_string(),
            };
            let e = c.evictions;
            v.extend(
                [
                    ("DAT2_MR_CACHE", state),
                    ("DAT2_MR_CACHE_HITS", c.hits.to_string()),
                    ("DAT2_MR_CACHE_MISSES", c.misses.to_string()),
                    ("DAT2_MR_CACHE_EVICTIONS", format!("unmap={} lru={} collector={} flush={}", e.unmap, e.lru, e.collector, e.flush)),
                    ("DAT2_MR_CACHE_ENTRIES", format!("{}/{}", c.entries, c.max_entries)),
                    ("DAT2_MR_CACHE_BYTES", format!("{}/{}", c.bytes, c.max_bytes)),
                    ("DAT2_MR_CACHE_TTL_MS", c.ttl_ms.to_string()),
                ]
                .map(|(n, v)| (n.to_string(), v)),
            );
        }
        v
    }
}

fn instances() -> &'static Mutex<Vec<&'static Builtin>> {
    static ALL: OnceLock<Mutex<Vec<&'static Builtin>>> = OnceLock::new();
    ALL.get_or_init(|| Mutex::new(Vec::new()))
}

pub fn find(name: &[u8]) -> Option<&'static Builtin> {
    instances().locked().iter().copied().find(|b| b.name.as_bytes() == name)
}

/// Builds a `DAT_PROVIDER` table for the IA name `device_name` (`ops::table`, which calls
/// into everything built here).
pub type MakeTable = fn(device_name: *const c_char, thread_safe: bool) -> DAT_PROVIDER;

/// The instance serving `name`, created (and kept for the life of the process) on first use,
/// with its two tables from `make_table`.
pub fn instance(name: &[u8], driver: &'static dyn Driver, params: &str, make_table: MakeTable) -> &'static Builtin {
    let mut all = instances().locked();
    if let Some(b) = all.iter().find(|b| b.name.as_bytes() == name) {
        return b;
    }
    let cname = CString::new(name).unwrap_or_default();
    let device_name = Box::leak(cname.clone().into_boxed_c_str()).as_ptr();
    let tables = [&*Box::leak(Box::new(make_table(device_name, false))), &*Box::leak(Box::new(make_table(device_name, true)))];
    let b: &'static Builtin = Box::leak(Box::new(Builtin {
        name: cname,
        driver,
        params: params.to_string(),
        tables,
        device: OnceLock::new(),
        attrs: driver.attributes(params),
    }));
    all.push(b);
    b
}

/// The entries the registry lists after dat.conf's, every driver's in turn: (IA name,
/// lib_path, ia_params).
pub fn defaults() -> Vec<(String, String, String)> {
    crate::device::DRIVERS
        .iter()
        .flat_map(|d| d.probe().into_iter().map(move |(name, params)| (name, format!("builtin:{}", d.name()), params)))
        .collect()
}
