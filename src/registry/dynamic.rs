//! The dynamic registry: the providers that registered themselves with
//! `dat_registry_add_provider`, and how many IAs each has open.

use super::{write, Key};
use crate::abi::*;
use crate::dbg_log;
use crate::log::DbgType;

#[derive(Clone, Copy)]
pub struct DrEntry {
    /// Copied from the provider table when it registered, as the original does.
    pub ia_open: Option<IaOpenFn>,
    pub extended_op: Option<ExtendedOpFn>,
}

pub struct Registered {
    pub key: Key,
    pub entry: DrEntry,
    pub ref_count: u32,
}

// SAFETY: provider tables are static data of loaded libraries; they are only read.
unsafe impl Send for Registered {}
// SAFETY: as above.
unsafe impl Sync for Registered {}
// SAFETY: as above.
unsafe impl Send for DrEntry {}

/// # Safety
/// `provider` and `info` must be non-NULL and point to a readable provider table and info.
pub unsafe fn add(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN {
    // SAFETY: guaranteed by the caller.
    let key = unsafe { Key::from_info(info) };
    // SAFETY: guaranteed by the caller.
    let table = unsafe { &*provider };
    let mut reg = write();
    if reg.dynamic.iter().any(|r| r.key == key) {
        dbg_log!(DbgType::DR, "provider {} is already registered", key.display());
        return dat_error(DAT_PROVIDER_ALREADY_REGISTERED, 0);
    }
    dbg_log!(DbgType::DR, "provider {} registered", key.display());
    reg.dynamic.push(Registered {
        key,
        entry: DrEntry { ia_open: table.ia_open_func, extended_op: table.handle_extendedop_func },
        ref_count: 0,
    });
    DAT_SUCCESS
}

pub fn remove(key: &Key) -> DAT_RETURN {
    let mut reg = write();
    let Some(index) = reg.dynamic.iter().position(|r| r.key == *key) else {
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    };
    if reg.dynamic[index].ref_count != 0 {
        return dat_error(DAT_PROVIDER_IN_USE, 0);
    }
    reg.dynamic.remove(index);
    dbg_log!(DbgType::DR, "provider {} removed", key.display());
    DAT_SUCCESS
}

/// Takes a reference on the provider registered for `key`.
pub fn open(key: &Key) -> Option<DrEntry> {
    let mut reg = write();
    let r = reg.dynamic.iter_mut().find(|r| r.key == *key)?;
    r.ref_count += 1;
    Some(r.entry)
}

pub fn close(key: &Key) {
    if let Some(r) = write().dynamic.iter_mut().find(|r| r.key == *key) {
        r.ref_count = r.ref_count.saturating_sub(1);
    }
}
