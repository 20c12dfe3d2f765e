//! The built-in providers' objects, and the handles that name them.
//!
//! A handle is the address of a 16-byte cell whose first word is the object's
//! `DAT_PROVIDER *`, as DAT requires of every non-IA handle (and of provider IAs). Cells come
//! from chunks that are never freed, and a freed cell is reused only after many others (FIFO
//! with a quarantine), so a stale handle keeps failing the lookup instead of silently naming
//! a new object. Objects live in one map from handle to `Arc`; a lookup clones the `Arc`, so
//! an object freed by another thread meanwhile stays valid for the call that holds it.
//!
//! An abrupt `dat_ia_close` frees every object of the IA through [`destroy`], the one
//! teardown that knows every type.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::objects::*;
use crate::abi::*;
use crate::util::idmap::IdMap;
use crate::util::sync::{MutexExt, RwLockExt};

#[repr(C)]
struct Cell {
    provider: AtomicPtr<DAT_PROVIDER>,
    _reserved: u64,
}

const CHUNK: usize = 4096;
/// A freed handle is not handed out again before this many others were freed after it.
const QUARANTINE: usize = 1 << 16;

struct Cells {
    /// Cells never handed out yet, in the newest chunk.
    fresh: &'static [Cell],
    recycled: VecDeque<usize>,
}

fn cells() -> &'static Mutex<Cells> {
    static CELLS: OnceLock<Mutex<Cells>> = OnceLock::new();
    CELLS.get_or_init(|| Mutex::new(Cells { fresh: &[], recycled: VecDeque::new() }))
}

fn alloc_cell(provider: *const DAT_PROVIDER) -> usize {
    let mut c = cells().locked();
    let addr = if c.recycled.len() > QUARANTINE {
        c.recycled.pop_front().unwrap_or_default()
    } else {
        if c.fresh.is_empty() {
            let chunk: Vec<Cell> = (0..CHUNK).map(|_| Cell { provider: AtomicPtr::new(core::ptr::null_mut()), _reserved: 0 }).collect();
            c.fresh = Box::leak(chunk.into_boxed_slice());
        }
        let (first, rest) = c.fresh.split_first().expect("non-empty chunk");
        c.fresh = rest;
        first as *const Cell as usize
    };
    // SAFETY: `addr` is a cell of a leaked chunk, which lives for the rest of the process.
    let cell = unsafe { &*(addr as *const Cell) };
    cell.provider.store(provider as *mut DAT_PROVIDER, Ordering::Release);
    addr
}

fn free_cell(addr: usize) {
    // SAFETY: `addr` came from alloc_cell and names a leaked cell.
    let cell = unsafe { &*(addr as *const Cell) };
    cell.provider.store(core::ptr::null_mut(), Ordering::Release);
    cells().locked().recycled.push_back(addr);
}

/// Every live object of every built-in IA, by handle.
#[derive(Clone)]
pub enum Obj {
    Ia(Arc<Ia>),
    Pz(Arc<Pz>),
    Lmr(Arc<Lmr>),
    Rmr(Arc<Rmr>),
    Evd(Arc<Evd>),
    Cno(Arc<Cno>),
    Ep(Arc<Ep>),
    Psp(Arc<Psp>),
    Rsp(Arc<Rsp>),
    Cr(Arc<Cr>),
    Srq(Arc<Srq>),
}

impl Obj {
    pub fn ia(&self) -> &Arc<Ia> {
        match self {
            Obj::Ia(_) => unreachable!("an IA has no owner"),
            Obj::Pz(o) => &o.ia,
            Obj::Lmr(o) => &o.ia,
            Obj::Rmr(o) => &o.ia,
            Obj::Evd(o) => &o.ia,
            Obj::Cno(o) => &o.ia,
            Obj::Ep(o) => &o.ia,
            Obj::Psp(o) => &o.ia,
            Obj::Rsp(o) => &o.ia,
            Obj::Cr(o) => &o.ia,
            Obj::Srq(o) => &o.ia,
        }
    }

    pub fn handle_type(&self) -> DAT_HANDLE_TYPE {
        match self {
            Obj::Ia(_) => DAT_HANDLE_TYPE_IA,
            Obj::Pz(_) => DAT_HANDLE_TYPE_PZ,
            Obj::Lmr(_) => DAT_HANDLE_TYPE_LMR,
            Obj::Rmr(_) => DAT_HANDLE_TYPE_RMR,
            Obj::Evd(_) => DAT_HANDLE_TYPE_EVD,
            Obj::Cno(_) => DAT_HANDLE_TYPE_CNO,
            Obj::Ep(_) => DAT_HANDLE_TYPE_EP,
            Obj::Psp(_) => DAT_HANDLE_TYPE_PSP,
            Obj::Rsp(_) => DAT_HANDLE_TYPE_RSP,
            Obj::Cr(_) => DAT_HANDLE_TYPE_CR,
            Obj::Srq(_) => DAT_HANDLE_TYPE_SRQ,
        }
    }

    /// The consumer context every object carries (`dat_set_consumer_context`).
    pub fn context(&self) -> &Mutex<u64> {
        match self {
            Obj::Ia(o) => &o.context,
            Obj::Pz(o) => &o.context,
            Obj::Lmr(o) => &o.context,
            Obj::Rmr(o) => &o.context,
            Obj::Evd(o) => &o.context,
            Obj::Cno(o) => &o.context,
            Obj::Ep(o) => &o.context,
            Obj::Psp(o) => &o.context,
            Obj::Rsp(o) => &o.context,
            Obj::Cr(o) => &o.context,
            Obj::Srq(o) => &o.context,
        }
    }
}

fn objects() -> &'static RwLock<IdMap<usize, Obj>> {
    static OBJECTS: OnceLock<RwLock<IdMap<usize, Obj>>> = OnceLock::new();
    OBJECTS.get_or_init(|| RwLock::new(IdMap::default()))
}

/// Reserves a handle for an object about to be built (objects know their own handle).
pub fn reserve(provider: *const DAT_PROVIDER) -> usize {
    alloc_cell(provider)
}

/// Gives back a reserved handle whose object was never built.
pub fn unreserve(handle: usize) {
    free_cell(handle);
}

/// Publishes an object under its reserved handle.
pub fn insert(handle: usize, obj: Obj) {
    objects().write_locked().insert(handle, obj);
}

/// Removes an object; its handle stops working at once.
pub fn remove(handle: usize) -> Option<Obj> {
    let obj = objects().write_locked().remove(&handle);
    if obj.is_some() {
        free_cell(handle);
    }
    obj
}

pub fn get(handle: DAT_HANDLE) -> Option<Obj> {
    objects().read_locked().get(&(handle as usize)).cloned()
}

/// Every live object owned by `ia` (its async EVD included).
pub fn owned_by(ia: &Arc<Ia>) -> Vec<(usize, Obj)> {
    objects()
        .read_locked()
        .iter()
        .filter(|(_, o)| !matches!(o, Obj::Ia(_)) && Arc::ptr_eq(o.ia(), ia))
        .map(|(h, o)| (*h, o.clone()))
        .collect()
}

/// `lookup!(handle, Variant, subtype)`: the object of that type, or
/// `Err(DAT_INVALID_HANDLE | subtype)`.
#[macro_export]
macro_rules! lookup {
    ($handle:expr, $variant:ident, $subtype:expr) => {
        match $crate::builtin::table::get($handle) {
            Some($crate::builtin::table::Obj::$variant(o)) => Ok(o),
            _ => Err($crate::abi::dat_error($crate::abi::DAT_INVALID_HANDLE, $subtype)),
        }
    };
}

/// The async EVD of some open IA of the built-in provider `b` (for DAT_EVD_ASYNC_EXISTS).
pub fn async_evd_of(b: &super::provider::Builtin) -> Option<Arc<Evd>> {
    let objects = objects().read_locked();
    objects.values().find_map(|o| match o {
        Obj::Ia(ia) if core::ptr::eq(ia.builtin, b) => match objects.get(&ia.async_evd.load(std::sync::atomic::Ordering::SeqCst)) {
            Some(Obj::Evd(e)) => Some(e.clone()),
            _ => None,
        },
        _ => None,
    })
}

/// Frees an object of a closing IA, whatever its type, without the checks a consumer's free
/// gets (an abrupt close frees everything).
pub fn destroy(handle: DAT_HANDLE, obj: Obj) {
    if remove(handle as usize).is_none() {
        return;
    }
    match obj {
        Obj::Ia(_) => {}
        Obj::Pz(p) => super::pz::destroy(&p),
        Obj::Lmr(l) => super::lmr::destroy(&l),
        Obj::Rmr(r) => super::rmr::destroy(&r),
        Obj::Evd(e) => super::evd::destroy(&e),
        Obj::Cno(_) => {}
        Obj::Ep(e) => super::ep::destroy(&e),
        Obj::Psp(p) => {
            p.evd.users.fetch_sub(1, Ordering::SeqCst);
        }
        Obj::Rsp(r) => super::sp::destroy_rsp(&r),
        Obj::Cr(c) => c.pending.reject(&[]),
        Obj::Srq(_) => {}
    }
}
