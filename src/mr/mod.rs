//! The memory-registration core shared by the built-in providers.
//!
//! - **Registration lookup**: an LMR over a range already registered with the same PD, access
//!   and address type reuses that registration (reference counted) instead of registering the
//!   memory again. Every LMR still gets keys of its own from the device, so freeing one LMR
//!   revokes exactly its keys, at once, while the others keep working.
//! - **Shared memory**: every SHARED_VIRTUAL LMR with the same 40-byte cookie (compared as raw
//!   bytes, NULs included) shares one registration, released with the last of them.
//! - Counters of registrations made and reused, reported through the debug log and `dat2-info`.

pub mod keys;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::device::{Access, DevError, Device, Mr, Pd};

pub const COOKIE_SIZE: usize = 40;
pub type Cookie = [u8; COOKIE_SIZE];

/// What a registration is found by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Range { dev: usize, pd: u32, addr: u64, len: u64, access: u32, zero_based: bool },
    Cookie { dev: usize, cookie: Cookie },
}

struct Shared {
    /// The key sets (one per LMR) over this registration; new ones are derived from the first.
    members: Vec<Mr>,
    /// The range the registration was made with (a cookie's LMRs must all ask for it).
    addr: u64,
    len: u64,
}

fn table() -> &'static Mutex<HashMap<Key, Shared>> {
    static TABLE: OnceLock<Mutex<HashMap<Key, Shared>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

static REGISTRATIONS: AtomicU64 = AtomicU64::new(0);
static REUSES: AtomicU64 = AtomicU64::new(0);

/// (registrations made, registrations reused) since the library was loaded.
pub fn counters() -> (u64, u64) {
    (REGISTRATIONS.load(Ordering::Relaxed), REUSES.load(Ordering::Relaxed))
}

/// One LMR's hold on a registration: its own keys, and where to give them back.
#[derive(Debug)]
pub struct Registration {
    pub mr: Mr,
    key: Key,
    /// Whether this LMR's keys came from reusing an existing registration.
    pub reused: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RegError {
    Device(DevError),
    /// A shared-memory cookie already names a registration of another length.
    CookieLength,
    /// A shared-memory cookie already names a registration at another address.
    CookieAddress,
}

fn dev_id(dev: &Arc<dyn Device>) -> usize {
    Arc::as_ptr(dev) as *const () as usize
}

fn acquire(dev: &Arc<dyn Device>, key: Key, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Registration, RegError> {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(shared) = table.get_mut(&key) {
        if shared.len != len {
            return Err(RegError::CookieLength);
        }
        if shared.addr != addr {
            return Err(RegError::CookieAddress);
        }
        let mr = dev.alias_mr(&shared.members[0], pd, access, zero_based).map_err(RegError::Device)?;
        shared.members.push(mr);
        REUSES.fetch_add(1, Ordering::Relaxed);
        return Ok(Registration { mr, key, reused: true });
    }
    let mr = dev.reg_mr(pd, addr, len, access, zero_based).map_err(RegError::Device)?;
    table.insert(key.clone(), Shared { members: vec![mr], addr, len });
    REGISTRATIONS.fetch_add(1, Ordering::Relaxed);
    Ok(Registration { mr, key, reused: false })
}

/// Registers `[addr, addr+len)`, reusing a live registration of the same range, PD, access
/// and address type.
pub fn register_range(dev: &Arc<dyn Device>, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Registration, RegError> {
    let key = Key::Range { dev: dev_id(dev), pd: pd.0, addr, len, access: access.0, zero_based };
    acquire(dev, key, pd, addr, len, access, zero_based)
}

/// Registers shared memory named by `cookie`: the first LMR registers, the others share.
pub fn register_shared(dev: &Arc<dyn Device>, cookie: &Cookie, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Registration, RegError> {
    let key = Key::Cookie { dev: dev_id(dev), cookie: *cookie };
    acquire(dev, key, pd, addr, len, access, zero_based)
}

/// Revokes an LMR's keys; the registration goes with its last LMR.
pub fn release(dev: &Arc<dyn Device>, reg: &Registration) {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    dev.dereg_mr(&reg.mr);
    if let Some(shared) = table.get_mut(&reg.key) {
        shared.members.retain(|m| m.id != reg.mr.id);
        if shared.members.is_empty() {
            table.remove(&reg.key);
        }
    }
}

/// How many registrations are live (for tests and `dat2-info`).
pub fn live() -> usize {
    table().lock().unwrap_or_else(|e| e.into_inner()).len()
}
