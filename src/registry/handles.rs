//! The table of every handle a provider has handed out through us.
//!
//! The original library trusts any pointer and dereferences it to find the provider; a wild,
//! stale or wrong-type handle crashes it. We look every handle up here first: only a handle a
//! provider returned (from a create call, an event, or a query) and that has not been freed is
//! ever passed on, and only to the provider of the IA that owns it. We never dereference a
//! handle ourselves.

use std::sync::{OnceLock, RwLock};

use crate::abi::*;
use crate::util::idmap::IdMap;
use crate::util::sync::RwLockExt;

/// The type of a tracked handle, numbered as `DAT_HANDLE_TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Cr,
    Ep,
    Evd,
    Lmr,
    Psp,
    Pz,
    Rmr,
    Rsp,
    Cno,
    Srq,
    /// A raw provider IA pointer handed to the consumer by an open-extension op
    /// (`DAT_IB_OPEN_QUERY_OP`); the registry holds a reference until its close op.
    RawIa,
}

/// What we know about a live handle.
#[derive(Clone, Copy, Debug)]
pub struct Tracked {
    pub kind: Kind,
    /// The small-integer IA slot that owns it (0 for open-extension IAs, which have none).
    pub ia: usize,
    /// The provider's dispatch table.
    pub provider: *const DAT_PROVIDER,
}

// SAFETY: the provider pointer refers to a table that lives as long as its library is loaded,
// and the registry drops every handle of an IA before it can unload that library.
unsafe impl Send for Tracked {}
// SAFETY: as above; `Tracked` is plain data.
unsafe impl Sync for Tracked {}

fn table() -> &'static RwLock<IdMap<usize, Tracked>> {
    static TABLE: OnceLock<RwLock<IdMap<usize, Tracked>>> = OnceLock::new();
    TABLE.get_or_init(|| RwLock::new(IdMap::default()))
}

fn read() -> std::sync::RwLockReadGuard<'static, IdMap<usize, Tracked>> {
    table().read_locked()
}

fn write() -> std::sync::RwLockWriteGuard<'static, IdMap<usize, Tracked>> {
    table().write_locked()
}

/// Records a handle a provider returned. A NULL handle is ignored.
pub fn insert(handle: DAT_HANDLE, kind: Kind, ia: usize, provider: *const DAT_PROVIDER) {
    if handle.is_null() {
        return;
    }
    write().insert(handle as usize, Tracked { kind, ia, provider });
}

/// Records a handle unless it is already known (handles that reach us through events and
/// queries may be seen many times).
pub fn insert_if_new(handle: DAT_HANDLE, kind: Kind, ia: usize, provider: *const DAT_PROVIDER) {
    if handle.is_null() {
        return;
    }
    write().entry(handle as usize).or_insert(Tracked { kind, ia, provider });
}

/// Forgets a handle once its object is gone.
pub fn remove(handle: DAT_HANDLE) {
    write().remove(&(handle as usize));
}

/// Forgets every handle owned by the IA in `slot` (after that IA closed).
pub fn remove_ia(slot: usize) {
    write().retain(|_, t| t.ia != slot);
}

/// Looks up a handle of any kind.
pub fn lookup(handle: DAT_HANDLE) -> Option<Tracked> {
    if handle.is_null() {
        return None;
    }
    read().get(&(handle as usize)).copied()
}

/// Checks that `handle` is a live handle of `kind`; otherwise returns
/// `DAT_INVALID_HANDLE | subtype`.
pub fn check(handle: DAT_HANDLE, kind: Kind, subtype: DAT_RETURN) -> Result<Tracked, DAT_RETURN> {
    match lookup(handle) {
        Some(t) if t.kind == kind => Ok(t),
        _ => Err(dat_error(DAT_INVALID_HANDLE, subtype)),
    }
}

/// Like [`check`], but DAT_HANDLE_NULL is accepted (the argument is optional) and gives `None`.
pub fn check_optional(handle: DAT_HANDLE, kind: Kind, subtype: DAT_RETURN) -> Result<Option<Tracked>, DAT_RETURN> {
    if handle.is_null() {
        return Ok(None);
    }
    check(handle, kind, subtype).map(Some)
}
