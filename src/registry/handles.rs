//! The table of every handle a provider has handed out through us.
//!
//! The original library trusts any pointer and dereferences it to find the provider; a wild,
//! stale or wrong-type handle crashes it. We look every handle up here first: only a handle a
//! provider returned (from a create call, an event, or a query) and that has not been freed is
//! ever passed on, and only to the provider of the IA that owns it. We never dereference a
//! handle ourselves.
//!
//! The built-in providers' handles are not recorded here: their table already knows each one,
//! and says (without a lock, [`crate::builtin::table::published`]) whether a handle is one of
//! its cells with an object of a given type published under it. That check answers for such a
//! handle, and the table below holds only the other providers' handles (and the raw IA
//! pointers of open-extension IAs, built-in ones included).

use std::sync::atomic::{AtomicUsize, Ordering};
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

impl Kind {
    /// The kind of a `DAT_HANDLE_TYPE` (none for an IA, whose consumer handles are registry slots).
    fn of(ty: DAT_HANDLE_TYPE) -> Option<Kind> {
        Some(match ty {
            DAT_HANDLE_TYPE_CR => Kind::Cr,
            DAT_HANDLE_TYPE_EP => Kind::Ep,
            DAT_HANDLE_TYPE_EVD => Kind::Evd,
            DAT_HANDLE_TYPE_LMR => Kind::Lmr,
            DAT_HANDLE_TYPE_PSP => Kind::Psp,
            DAT_HANDLE_TYPE_PZ => Kind::Pz,
            DAT_HANDLE_TYPE_RMR => Kind::Rmr,
            DAT_HANDLE_TYPE_RSP => Kind::Rsp,
            DAT_HANDLE_TYPE_CNO => Kind::Cno,
            DAT_HANDLE_TYPE_SRQ => Kind::Srq,
            _ => return None,
        })
    }
}

/// What the built-in table says of `handle`: `None` if it is not one of its cells; otherwise
/// the record of the object published there, if it is of a kind tracked here (`ia` is 0: the
/// registry keeps no owner for them, the built-in provider does).
fn builtin(handle: DAT_HANDLE) -> Option<Option<Tracked>> {
    let published = crate::builtin::table::published(handle as usize)?;
    Some(published.and_then(|(provider, ty)| Some(Tracked { kind: Kind::of(ty)?, ia: 0, provider })))
}

/// How many handles in the table are built-in cells (raw IA pointers): while none is, a
/// built-in handle's removal needs no lock.
static CELLS_RECORDED: AtomicUsize = AtomicUsize::new(0);

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
    let Some(cell) = to_record(handle, kind) else { return };
    if write().insert(handle as usize, Tracked { kind, ia, provider }).is_none() && cell {
        CELLS_RECORDED.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether `handle` must be recorded here as a `kind` (`None`: the built-in table answers for
/// it), and if so whether it is a built-in cell.
fn to_record(handle: DAT_HANDLE, kind: Kind) -> Option<bool> {
    match builtin(handle) {
        Some(Some(t)) if t.kind == kind => None,
        Some(_) => Some(true),
        None => Some(false),
    }
}

/// Records a handle unless it is already known (handles that reach us through events and
/// queries may be seen many times).
pub fn insert_if_new(handle: DAT_HANDLE, kind: Kind, ia: usize, provider: *const DAT_PROVIDER) {
    if handle.is_null() {
        return;
    }
    let Some(cell) = to_record(handle, kind) else { return };
    if let std::collections::hash_map::Entry::Vacant(e) = write().entry(handle as usize) {
        e.insert(Tracked { kind, ia, provider });
        if cell {
            CELLS_RECORDED.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Forgets a handle once its object is gone.
pub fn remove(handle: DAT_HANDLE) {
    let cell = builtin(handle).is_some();
    if cell && CELLS_RECORDED.load(Ordering::SeqCst) == 0 {
        return;
    }
    if write().remove(&(handle as usize)).is_some() && cell {
        CELLS_RECORDED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// [`remove`] for a handle known to be a built-in cell: while no cell is recorded here (raw IA
/// pointers), there is nothing to forget.
pub fn remove_cell(handle: DAT_HANDLE) {
    if CELLS_RECORDED.load(Ordering::SeqCst) != 0 {
        remove(handle);
    }
}

/// Forgets every handle owned by the IA in `slot` (after that IA closed).
pub fn remove_ia(slot: usize) {
    write().retain(|&h, t| {
        let keep = t.ia != slot;
        if !keep && builtin(h as DAT_HANDLE).is_some() {
            CELLS_RECORDED.fetch_sub(1, Ordering::SeqCst);
        }
        keep
    });
}

/// Looks up a handle of any kind.
pub fn lookup(handle: DAT_HANDLE) -> Option<Tracked> {
    if handle.is_null() {
        return None;
    }
    if let Some(Some(t)) = builtin(handle) {
        return Some(t);
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
