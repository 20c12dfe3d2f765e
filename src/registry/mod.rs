//! The DAT registry: which IA names exist, which library provides each, and the small-integer
//! IA handles consumers see.
//!
//! - The *static registry* holds the loadable entries of `dat.conf` (`DAT_OVERRIDE`, else
//!   `/etc/dat.conf`), read once when the library loads. Opening a name dlopens the entry's
//!   library (`RTLD_NOW|RTLD_GLOBAL`) and calls its `dat_provider_init`.
//! - The *dynamic registry* holds what providers register with `dat_registry_add_provider`:
//!   the `DAT_PROVIDER` table whose `ia_open_func` opens an IA.
//! - Both are keyed by IA name, DAT major/minor version and thread safety.
//!
//! Locking: `LIFECYCLE` serialises opening and closing (provider init/fini may call back into
//! the registry), and the registry data sits behind a short-held `RwLock`. No lock is held while
//! a provider function runs.

mod config;
mod dynamic;
pub mod handles;
mod ia_table;
mod statics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::abi::*;
use crate::dbg_log;
use crate::ffi::{bounded_cstr, guard};
use crate::log::DbgType;
use crate::util::sync::{MutexExt, RwLockExt};

pub use dynamic::DrEntry;
pub use ia_table::IaSlot;
pub use statics::SrEntry;

/// The registry key: IA name, DAT version and thread safety, all compared exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub name: Vec<u8>,
    pub major: DAT_UINT32,
    pub minor: DAT_UINT32,
    pub thread_safe: DAT_BOOLEAN,
}

impl Key {
    /// Reads a key out of a provider's `DAT_PROVIDER_INFO`.
    ///
    /// # Safety
    /// `info` must point to a readable `DAT_PROVIDER_INFO`.
    pub unsafe fn from_info(info: *const DAT_PROVIDER_INFO) -> Key {
        // SAFETY: the caller guarantees `info` is readable.
        let info = unsafe { &*info };
        let name = info.ia_name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Key { name, major: info.dapl_version_major, minor: info.dapl_version_minor, thread_safe: info.is_thread_safe }
    }

    pub fn to_info(&self) -> DAT_PROVIDER_INFO {
        let mut ia_name = [0 as core::ffi::c_char; DAT_NAME_MAX_LENGTH];
        for (dst, &src) in ia_name.iter_mut().zip(self.name.iter().take(DAT_NAME_MAX_LENGTH - 1)) {
            *dst = src as core::ffi::c_char;
        }
        DAT_PROVIDER_INFO { ia_name, dapl_version_major: self.major, dapl_version_minor: self.minor, is_thread_safe: self.thread_safe }
    }

    pub fn display(&self) -> String {
        format!(
            "{} (DAT {}.{}, {})",
            String::from_utf8_lossy(&self.name),
            self.major,
            self.minor,
            if self.thread_safe != 0 { "threadsafe" } else { "nonthreadsafe" }
        )
    }
}

pub struct Registry {
    pub statics: Vec<SrEntry>,
    pub dynamic: Vec<dynamic::Registered>,
    pub ias: ia_table::IaTable,
    /// Raw IAs opened by an open-extension op, with the key to release on their close op.
    pub ext_opens: HashMap<usize, Key>,
}

const UNINITIALIZED: u8 = 0;
const INITIALIZED: u8 = 1;
const DEINITIALIZED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNINITIALIZED);

/// Set once any IA whose provider reports `extension_supported` has been opened.
static EXTENSIONS_SEEN: AtomicBool = AtomicBool::new(false);

fn cell() -> &'static RwLock<Registry> {
    static REGISTRY: OnceLock<RwLock<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let (conf_path, entries) = config::load();
        let statics = statics::from_config(&conf_path, entries);
        dbg_log!(DbgType::SR, "{} provider entries from {conf_path}", statics.len());
        STATE.store(INITIALIZED, Ordering::SeqCst);
        RwLock::new(Registry { statics, dynamic: Vec::new(), ias: ia_table::IaTable::new(), ext_opens: HashMap::new() })
    })
}

pub fn read() -> RwLockReadGuard<'static, Registry> {
    cell().read_locked()
}

pub fn write() -> RwLockWriteGuard<'static, Registry> {
    cell().write_locked()
}

/// Serialises IA open and close across threads.
pub fn lifecycle() -> MutexGuard<'static, ()> {
    static LIFECYCLE: Mutex<()> = Mutex::new(());
    LIFECYCLE.locked()
}

/// `DAT_INVALID_STATE` once the library's destructor has run.
pub fn check_state() -> Result<(), DAT_RETURN> {
    cell();
    if STATE.load(Ordering::SeqCst) == DEINITIALIZED {
        Err(dat_error(DAT_INVALID_STATE, 0))
    } else {
        Ok(())
    }
}

pub fn mark_extensions_seen() {
    EXTENSIONS_SEEN.store(true, Ordering::SeqCst);
}

pub fn extensions_seen() -> bool {
    EXTENSIONS_SEEN.load(Ordering::SeqCst)
}

/// Loads the configuration when the library is loaded, as the original does, so that
/// `DAT_OVERRIDE` is read once, before `main`.
extern "C" fn on_load() {
    let _ = guard(|| {
        cell();
        DAT_SUCCESS
    });
}

/// After this no provider is opened or closed any more.
extern "C" fn on_unload() {
    STATE.store(DEINITIALIZED, Ordering::SeqCst);
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_UNLOAD: extern "C" fn() = on_unload;

/// An open IA as seen by the entry points that take an IA handle.
pub struct OpenIa {
    pub slot: usize,
    pub raw: DAT_IA_HANDLE,
    pub provider: *const DAT_PROVIDER,
}

/// Converts a consumer IA handle (a small integer) to the provider's IA.
pub fn ia(handle: DAT_IA_HANDLE) -> Result<OpenIa, DAT_RETURN> {
    let bad = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    let index = handle as usize;
    if index == 0 {
        return Err(bad);
    }
    let reg = read();
    let slot = reg.ias.get(index).ok_or(bad)?;
    Ok(OpenIa { slot: index, raw: slot.raw as DAT_IA_HANDLE, provider: slot.provider })
}

/// Opens the provider registered for `key`: the static registry loads its library (if any
/// entry matches), then the dynamic registry must know the key. On success the caller holds a
/// reference on both, released by [`release_provider`].
pub fn acquire_provider(key: &Key) -> Result<DrEntry, DAT_RETURN> {
    statics::open(key);
    match dynamic::open(key) {
        Some(dr) => Ok(dr),
        None => {
            statics::close(key);
            dbg_log!(DbgType::ERROR, "no provider registered for {}", key.display());
            Err(dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED))
        }
    }
}

/// Drops the references [`acquire_provider`] took; the last one finalises and unloads the
/// provider library. Returns the static registry's status (not found if no entry matched).
pub fn release_provider(key: &Key) -> DAT_RETURN {
    dynamic::close(key);
    statics::close(key)
}

/// Registers a newly opened IA and returns its small-integer handle.
pub fn insert_ia(raw: DAT_IA_HANDLE, provider: *const DAT_PROVIDER, key: Key) -> usize {
    write().ias.insert(IaSlot { raw: raw as usize, provider, key })
}

/// Forgets a closed IA and every handle it owned.
pub fn remove_ia(slot: usize) -> Option<IaSlot> {
    let removed = write().ias.remove(slot);
    handles::remove_ia(slot);
    removed
}

/// The providers the static registry lists, as `dat_registry_list_providers` returns them.
pub fn list_providers() -> Vec<DAT_PROVIDER_INFO> {
    statics::list()
}

/// `dats_get_ia_handle`'s conversion: a small integer gives the provider's IA; a provider IA
/// pointer gives its small integer.
pub fn convert_ia_handle(value: usize) -> Option<usize> {
    let reg = read();
    if value < reg.ias.capacity() {
        reg.ias.get(value).map(|s| s.raw)
    } else {
        reg.ias.find_raw(value)
    }
}

/// Copies an IA name argument, checking its length (`DAT_NAME_MAX_LENGTH` includes the NUL).
///
/// # Safety
/// `name` must be NULL or a readable C string.
pub unsafe fn name_arg(name: *const core::ffi::c_char) -> Option<Vec<u8>> {
    if name.is_null() {
        return None;
    }
    // SAFETY: per the caller, `name` is a C string; we read at most DAT_NAME_MAX_LENGTH bytes.
    unsafe { bounded_cstr(name, DAT_NAME_MAX_LENGTH) }.map(<[u8]>::to_vec)
}

/// Resolves a handle of any type, as the generic functions (consumer context, handle type,
/// extension ops) take it: a small-integer IA handle becomes the provider's IA; any other
/// handle must be live. Returns the handle to pass on and its provider.
pub fn any_handle(handle: DAT_HANDLE) -> Option<(DAT_HANDLE, *const DAT_PROVIDER)> {
    if handle.is_null() {
        return None;
    }
    {
        let reg = read();
        let value = handle as usize;
        if value < reg.ias.capacity() {
            return reg.ias.get(value).map(|s| (s.raw as DAT_HANDLE, s.provider));
        }
    }
    handles::lookup(handle).map(|t| (handle, t.provider))
}

/// Registers a provider table, as `dat_registry_add_provider` does (for built-in providers).
///
/// # Safety
/// `provider` and `info` must point to a provider table and info that outlive the registration.
pub unsafe fn add_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN {
    // SAFETY: guaranteed by the caller.
    unsafe { dynamic::add(provider, info) }
}

/// Removes a provider registration, as `dat_registry_remove_provider` does.
pub fn remove_provider(key: &Key) -> DAT_RETURN {
    dynamic::remove(key)
}
