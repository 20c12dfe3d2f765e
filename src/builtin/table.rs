//! The built-in providers' objects, and the handles that name them.
//!
//! A handle is the address of a 16-byte cell whose first word is the object's
//! `DAT_PROVIDER *`, as DAT requires of every non-IA handle (and of provider IAs), and stays
//! so after the object is freed. Cells come from chunks that are never freed, and a freed
//! cell is reused only after many others (FIFO with a quarantine), so a stale handle keeps
//! failing the lookup instead of silently naming a new object. Objects live in one map from handle to `Arc`; a lookup clones the `Arc`, so
//! an object freed by another thread meanwhile stays valid for the call that holds it.
//!
//! The table knows no object type: each object module implements [`Object`] for its type,
//! and a lookup downcasts to the type asked for (a type id compare, so still O(1)). An abrupt
//! `dat_ia_close` frees every object of the IA through [`destroy`], which calls each object's
//! own [`Object::destroy`].

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

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

/// A freed cell keeps its `DAT_PROVIDER *`: a libdat2 that dispatches on the first word without
/// checking the handle (Debian's, with the provider library `src/plugin.rs`) then still calls
/// our table for a stale handle, whose lookup fails with DAT_INVALID_HANDLE, instead of
/// calling through NULL.
fn free_cell(addr: usize) {
    cells().locked().recycled.push_back(addr);
}

/// An object as `Any`, to downcast to its type: implemented once for every type here, so the
/// object types need not each write it.
pub trait AsAny {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<T: Any + Send + Sync> AsAny for T {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// What the table needs of every object of the built-in layer.
pub trait Object: AsAny + Send + Sync + 'static {
    fn handle_type(&self) -> DAT_HANDLE_TYPE;

    /// The consumer context every object carries (`dat_set_consumer_context`).
    fn context(&self) -> &Mutex<u64>;

    /// The handle of the IA the object belongs to (an IA's own handle for an IA).
    fn owner(&self) -> usize;

    /// The teardown of an object freed by an abrupt `dat_ia_close`, after it left the table
    /// and without the checks a consumer's free gets.
    fn destroy(&self) {}
}

/// Every live object of every built-in IA, by handle.
fn objects() -> &'static RwLock<IdMap<usize, Arc<dyn Object>>> {
    static OBJECTS: OnceLock<RwLock<IdMap<usize, Arc<dyn Object>>>> = OnceLock::new();
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
pub fn insert(handle: usize, obj: Arc<dyn Object>) {
    objects().write_locked().insert(handle, obj);
}

/// Removes an object; its handle stops working at once.
pub fn remove(handle: usize) -> Option<Arc<dyn Object>> {
    let obj = objects().write_locked().remove(&handle);
    if obj.is_some() {
        free_cell(handle);
    }
    obj
}

pub fn get(handle: DAT_HANDLE) -> Option<Arc<dyn Object>> {
    objects().read_locked().get(&(handle as usize)).cloned()
}

/// The object as its own type, if it is a `T`.
pub fn downcast<T: Object>(obj: Arc<dyn Object>) -> Option<Arc<T>> {
    obj.as_any().downcast::<T>().ok()
}

/// The object of type `T` named by `handle`, if there is one.
pub fn get_as<T: Object>(handle: DAT_HANDLE) -> Option<Arc<T>> {
    get(handle).and_then(downcast)
}

/// The object of type `T` named by `handle`, or `Err(DAT_INVALID_HANDLE | subtype)`.
pub fn lookup<T: Object>(handle: DAT_HANDLE, subtype: DAT_RETURN) -> Result<Arc<T>, DAT_RETURN> {
    get_as(handle).ok_or(dat_error(DAT_INVALID_HANDLE, subtype))
}

/// Every live object owned by the IA `ia` (its async EVD included), by handle.
pub fn owned_by(ia: usize) -> Vec<(usize, Arc<dyn Object>)> {
    objects()
        .read_locked()
        .iter()
        .filter(|(_, o)| o.handle_type() != DAT_HANDLE_TYPE_IA && o.owner() == ia)
        .map(|(h, o)| (*h, o.clone()))
        .collect()
}

/// Every live object of type `T`.
pub fn all_of<T: Object>() -> Vec<Arc<T>> {
    let all: Vec<Arc<dyn Object>> = objects().read_locked().values().cloned().collect();
    all.into_iter().filter_map(downcast).collect()
}

/// Frees an object of a closing IA, whatever its type, without the checks a consumer's free
/// gets (an abrupt close frees everything).
pub fn destroy(handle: DAT_HANDLE, obj: Arc<dyn Object>) {
    if remove(handle as usize).is_none() {
        return;
    }
    obj.destroy();
}
