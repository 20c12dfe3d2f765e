//! The memory-registration core shared by the built-in providers.
//!
//! - **Registration lookup**: an LMR over a range already registered with the same PD, access
//!   and address type reuses that registration (reference counted) instead of registering the
//!   memory again. Every LMR still gets keys of its own from the device, so freeing one LMR
//!   revokes exactly its keys, at once, while the others keep working.
//! - **Shared memory**: every SHARED_VIRTUAL LMR with the same 40-byte cookie (compared as raw
//!   bytes, NULs included) shares one registration, released with the last of them.
//! - **Registration cache** ([`cache`]), for devices that opt in
//!   ([`Device::cache_registrations`]): a local-only registration outlives its last LMR, for a
//!   later LMR of the same range to take back, until the memory changes (watched with
//!   userfaultfd, [`unmap`]), a bound is passed, it stays unused, or its PD goes.
//! - Counters of registrations made and reused, and the cache's statistics
//!   ([`cache_stats`]), for the debug log and `dat2-info`.
//!
//! `SAFETY.md` in this directory sets the bugs other registration caches had (libfabric, UCX,
//! Open MPI: stale registrations after unmapped memory, lost or missing monitor events,
//! deadlocks between `free` and the monitor, rkeys usable after free) against the mechanism here
//! that answers each, and lists the two cases not answered (`shmat(SHM_REMAP)` over a kept range,
//! and deregistration after free with rdma-core's fork support on).

pub mod cache;
mod config;
mod entries;
mod stats;
pub(crate) mod unmap;

use std::sync::Arc;

pub use cache::CacheStats;

use crate::device::{Access, DevError, Device, Mr, Pd};

pub const COOKIE_SIZE: usize = 40;
pub type Cookie = [u8; COOKIE_SIZE];

/// What a registration is found by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Range { dev: usize, pd: u32, addr: u64, len: u64, access: u32, zero_based: bool },
    Cookie { dev: usize, cookie: Cookie },
}

/// One LMR's hold on a registration: its own keys, and where to give them back.
#[derive(Debug)]
pub struct Registration {
    pub mr: Mr,
    /// The table entry (0: a registration of this LMR alone).
    entry: u64,
    /// Whether this LMR's keys came from an existing registration (shared or cached).
    pub reused: bool,
    /// Whether the registration was made (or taken back) by the cache, watched: only then may
    /// its release keep it.
    watched: bool,
    /// The hot slot's word this LMR's hit wrote (0: not taken from the slot), for its release
    /// to park it again without the cache's lock (`cache/hot.rs`).
    hot: u64,
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

/// (registrations made, registrations reused) since the library was loaded.
pub fn counters() -> (u64, u64) {
    cache::global().counters()
}

/// Registers `[addr, addr+len)`, reusing a live (or cached) registration of the same range,
/// PD, access and address type.
#[inline]
pub fn register_range(
    dev: &Arc<dyn Device>,
    pd: Pd,
    addr: u64,
    len: u64,
    access: Access,
    zero_based: bool,
) -> Result<Registration, RegError> {
    cache::global().register_range(dev, pd, addr, len, access, zero_based)
}

/// Registers shared memory named by `cookie`: the first LMR registers, the others share.
pub fn register_shared(
    dev: &Arc<dyn Device>,
    cookie: &Cookie,
    pd: Pd,
    addr: u64,
    len: u64,
    access: Access,
    zero_based: bool,
) -> Result<Registration, RegError> {
    cache::global().register_shared(dev, cookie, pd, addr, len, access, zero_based)
}

/// Revokes an LMR's keys; the registration goes with its last LMR (or stays cached).
#[inline]
pub fn release(dev: &Arc<dyn Device>, reg: &Registration) {
    cache::global().release(dev, reg)
}

/// Deregisters every cached registration of `dev`'s PD `pd` (every PD with `None`). The core
/// calls it before the device's `dealloc_pd` and when an IA closes.
pub fn flush(dev: &Arc<dyn Device>, pd: Option<Pd>) -> usize {
    cache::global().flush(dev, pd)
}

/// The registration cache's state and counters.
pub fn cache_stats() -> CacheStats {
    cache::global().stats()
}

/// How many registrations are live (for tests and `dat2-info`).
pub fn live() -> usize {
    cache::global().live()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hot;
#[cfg(test)]
mod tests_mock;
