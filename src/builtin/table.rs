//! The built-in providers' objects, and the handles that name them.
//!
//! A handle is the address of a 64-byte cell (a cache line of its own) whose first word is the object's
//! `DAT_PROVIDER *`, as DAT requires of every non-IA handle (and of provider IAs), and stays
//! so after the object is freed. Cells come from chunks that are never freed, and a freed cell
//! is reused only after many others (FIFO with a quarantine), so a stale handle keeps failing
//! the lookup instead of silently naming a new object. Objects live in a slot per cell, indexed
//! by the cell's place in the reserved range (no hashing, `ObjMap`); a lookup clones the
//! `Arc`, so an object freed by another thread meanwhile stays valid for the call that holds
//! it. The slots and the cells share one lock, so that creating or
//! freeing an object takes it once. A cell also says, while an object is published under it,
//! the object's handle type: the registry checks the handles of built-in objects with a few
//! loads ([`published`]) instead of keeping records of its own.
//!
//! The table knows no object type: each object module implements [`Object`] for its type,
//! and a lookup downcasts to the type asked for (a type id compare, so still O(1)). An abrupt
//! `dat_ia_close` frees every object of the IA through [`destroy`], which calls each object's
//! own [`Object::destroy`].

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::abi::*;
use crate::util::idmap::IdMap;
use crate::util::pin::{Local, Pin};
use crate::util::sync::RwLockExt;

#[repr(C)]
struct Cell {
    provider: AtomicPtr<DAT_PROVIDER>,
    /// The handle type + 1 while an object is published under the cell (0: none), so that
    /// [`published`] can answer without the table's lock.
    published: AtomicU64,
    /// The published object itself (its data pointer, of the type the handle type names), for
    /// [`pin`]; null while none is.
    object: AtomicPtr<()>,
    /// The object's own words ([`words`]), which a call can read through the handle without
    /// pinning the object: what the object keeps there is its business.
    words: [AtomicU64; 2],
    _reserved: [u64; 3],
}

const _: () = assert!(core::mem::size_of::<Cell>() == CELL);
const CELL: usize = 64;
/// The cells are one range of address space, reserved whole when the first is needed and
/// made accessible a chunk at a time, so that telling our cells from other pointers is one
/// compare whatever the churn. Past it (millions of live handles), cells come from the heap
/// and are simply not found by [`published`] or [`pin`]: their handles take the slow paths.
const RESERVED_CELLS: usize = 1 << 23;
const CHUNK: usize = 4096;
/// The reserved range's start, and how many of its bytes are accessible cells.
static BASE: AtomicUsize = AtomicUsize::new(0);
static COMMITTED: AtomicUsize = AtomicUsize::new(0);
/// A freed handle is not handed out again before this many others were freed after it.
const QUARANTINE: usize = 1 << 16;

struct Cells {
    /// Cells never handed out yet.
    fresh: &'static [Cell],
    recycled: VecDeque<usize>,
}

/// Makes the next chunk of cells accessible (reserving the range first), or one of the heap
/// when the range is used up or cannot be had.
fn more_cells() -> &'static [Cell] {
    let mut base = BASE.load(Ordering::Relaxed);
    if base == 0 {
        // SAFETY: a new private anonymous mapping with no access: address space only, no
        // memory committed.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                RESERVED_CELLS * CELL,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            base = p as usize;
            BASE.store(base, Ordering::Release);
        }
    }
    let done = COMMITTED.load(Ordering::Relaxed);
    if base != 0 && done + CHUNK * CELL <= RESERVED_CELLS * CELL {
        // SAFETY: a chunk of our own reservation, never handed out before; zeroed pages are
        // cells with no provider and nothing published.
        let ok = unsafe { libc::mprotect((base + done) as *mut libc::c_void, CHUNK * CELL, libc::PROT_READ | libc::PROT_WRITE) } == 0;
        if ok {
            COMMITTED.store(done + CHUNK * CELL, Ordering::Release);
            // SAFETY: the chunk is now readable and writable memory of zeroed cells (all-zero
            // atomics are valid), ours for the rest of the process.
            return unsafe { core::slice::from_raw_parts((base + done) as *const Cell, CHUNK) };
        }
    }
    let chunk: Vec<Cell> = (0..CHUNK)
        .map(|_| Cell {
            provider: AtomicPtr::new(core::ptr::null_mut()),
            published: AtomicU64::new(0),
            object: AtomicPtr::new(core::ptr::null_mut()),
            words: [AtomicU64::new(0), AtomicU64::new(0)],
            _reserved: [0; 3],
        })
        .collect();
    Box::leak(chunk.into_boxed_slice())
}

#[inline]
fn alloc_cell(c: &mut Cells, provider: *const DAT_PROVIDER) -> usize {
    let addr = if c.recycled.len() > QUARANTINE {
        c.recycled.pop_front().unwrap_or_default()
    } else {
        if c.fresh.is_empty() {
            c.fresh = more_cells();
        }
        let (first, rest) = c.fresh.split_first().expect("non-empty chunk");
        c.fresh = rest;
        first as *const Cell as usize
    };
    // SAFETY: `addr` is a cell of a chunk that lives for the rest of the process.
    let cell = unsafe { &*(addr as *const Cell) };
    cell.provider.store(provider as *mut DAT_PROVIDER, Ordering::Release);
    addr
}

/// The cell at `handle`, if `handle` is one of the reserved range's accessible cells (only
/// compared, never read, until it is known to be one).
#[inline]
fn listed_cell(handle: usize) -> Option<&'static Cell> {
    // The accessible length first: a base read after it is the one it was made for.
    let committed = COMMITTED.load(Ordering::Acquire);
    let base = BASE.load(Ordering::Acquire);
    let offset = handle.wrapping_sub(base);
    if base == 0 || offset % CELL != 0 || offset >= committed {
        return None;
    }
    // SAFETY: a cell-aligned address inside the accessible part of our reservation, which
    // stays mapped for the rest of the process.
    Some(unsafe { &*(handle as *const Cell) })
}

/// The two words of the cell behind `handle`, a handle [`reserve`] gave, for the object built
/// for it to keep what a call should read without pinning it ([`published_words`]). The words
/// outlive the object (cells are never freed), and the next object of the cell finds them as
/// the last one left them: an object stops writing them before its cell can be reused
/// ([`Object::cell_released`]).
pub fn words(reserved: usize) -> &'static [AtomicU64; 2] {
    // SAFETY: `reserve` hands out only cells, from chunks that live for the rest of the
    // process (a value that is not one is a bug of this layer, never a consumer's input).
    &unsafe { &*(reserved as *const Cell) }.words
}

/// A handle known to name one of the table's cells (checked once by [`listed`]), for a call
/// that reads its words first and may pin it after ([`pin_listed`]) without checking again.
#[derive(Clone, Copy)]
pub struct Listed(&'static Cell);

/// The cell `handle` names, if it is one of ours (see [`Listed`]).
#[inline]
pub fn listed(handle: usize) -> Option<Listed> {
    listed_cell(handle).map(Listed)
}

impl Listed {
    /// The cell's words when an object of type `ty` is published under it: no lock, no pin, a
    /// few loads. A moment old, as any lookup's answer.
    #[inline]
    pub fn published_words(self, ty: DAT_HANDLE_TYPE) -> Option<&'static [AtomicU64; 2]> {
        (self.0.published.load(Ordering::Acquire) == u64::from(ty) + 1).then_some(&self.0.words)
    }
}

/// Whether `handle` is one of our cells, and if an object is published under it, its provider
/// and handle type: a few loads, no lock. `None`: not a listed cell of ours (a C provider's
/// handle, a wild pointer, or a cell from the heap), for the caller to look elsewhere. Racing
/// with a free, the answer may be a moment old, as a lookup's is.
pub fn published(handle: usize) -> Option<Option<(*const DAT_PROVIDER, DAT_HANDLE_TYPE)>> {
    let cell = listed_cell(handle)?;
    let ty = cell.published.load(Ordering::Acquire);
    let provider = cell.provider.load(Ordering::Acquire);
    Some((ty != 0 && !provider.is_null()).then(|| (provider as *const DAT_PROVIDER, (ty - 1) as DAT_HANDLE_TYPE)))
}

/// The object types [`pin`] may resolve a handle to: the type its handle type names.
pub trait Pinnable: Object {
    const HANDLE_TYPE: DAT_HANDLE_TYPE;
}

/// An object of the table used without a reference count: valid until dropped, however the
/// object is freed meanwhile (its free waits, see [`crate::util::pin`]).
pub struct Pinned<T: 'static> {
    object: &'static T,
    _pin: Pin,
}

impl<T> core::ops::Deref for Pinned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.object
    }
}

/// Resolves `handle` to its `T` for the length of a call, in a few loads and without a lock
/// or a shared atomic: `None` when it names no published `T` (or the thread already holds a
/// pin), for the caller to take the looked-up path, which tells the errors apart.
#[inline]
pub fn pin<T: Pinnable>(local: &Local, handle: usize) -> Option<Pinned<T>> {
    pin_listed(local, listed(handle)?)
}

/// [`pin`] of a handle already known to name one of our cells.
#[inline]
pub fn pin_listed<T: Pinnable>(local: &Local, listed: Listed) -> Option<Pinned<T>> {
    const { assert!(PINNABLE[0] == T::HANDLE_TYPE || PINNABLE[1] == T::HANDLE_TYPE || PINNABLE[2] == T::HANDLE_TYPE) };
    let cell = listed.0;
    let pin = local.pin(cell as *const Cell as usize)?;
    if cell.published.load(Ordering::Acquire) != u64::from(T::HANDLE_TYPE) + 1 {
        return None;
    }
    let object = cell.object.load(Ordering::Acquire) as *const T;
    if object.is_null() {
        return None;
    }
    // SAFETY: the cell publishes an object of T's handle type, which is a T (Pinnable); the
    // pin, taken before these loads, keeps its free from returning, and so the table's
    // reference alive, until the pin drops.
    Some(Pinned { object: unsafe { &*object }, _pin: pin })
}

impl<T: Pinnable> Pinned<T> {
    /// A reference of its own to the pinned object, for an object made now that holds it (an
    /// LMR its PZ): one count taken, where a lookup takes the table's lock as well.
    pub fn to_arc(&self) -> Arc<T> {
        let object: *const T = self.object;
        // SAFETY: the object was published from an `Arc<T>` coerced to `Arc<dyn Object>`, and
        // the cell's pointer is that Arc's data pointer (`Objects::insert`); the pin keeps the
        // table's count alive while a count of our own is taken.
        unsafe {
            Arc::increment_strong_count(object);
            Arc::from_raw(object)
        }
    }
}

/// A freed cell keeps its `DAT_PROVIDER *`: a libdat2 that dispatches on the first word without
/// checking the handle (Debian's, with the provider library `src/plugin.rs`) then still calls
/// our table for a stale handle, whose lookup fails with DAT_INVALID_HANDLE, instead of
/// calling through NULL. Its published type is cleared before it comes here.
fn free_cell(c: &mut Cells, addr: usize) {
    c.recycled.push_back(addr);
}

/// An object as `Any`, to downcast to its type: implemented once for every type here, so the
/// object types need not each write it.
pub trait AsAny {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    fn as_any_ref(&self) -> &dyn Any;
}

impl<T: Any + Send + Sync> AsAny for T {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
    fn as_any_ref(&self) -> &dyn Any {
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

    /// The object's cell is about to be reused (the object left the table and no call has it
    /// pinned): it must not write the cell's [`words`] any more.
    fn cell_released(&self) {}
}

/// The live objects by handle: a slot per cell of the reserved range, indexed by the cell's
/// place in it (a create or free stores or takes one slot, with no hashing), and a map for the
/// heap's cells past it. A look through every object walks every cell ever handed out, which
/// only the rare calls that need no index do ([`any_of`], [`owned_by`], [`all_of`]).
#[derive(Default)]
struct ObjMap {
    slots: Vec<Option<Arc<dyn Object>>>,
    heap: IdMap<usize, Arc<dyn Object>>,
}

impl ObjMap {
    /// The slot index of one of the reserved range's cells.
    #[inline]
    fn slot_of(cell: &'static Cell) -> usize {
        (cell as *const Cell as usize - BASE.load(Ordering::Relaxed)) / CELL
    }

    /// The slot index of a handle that is one of the reserved range's cells.
    #[inline]
    fn index(handle: usize) -> Option<usize> {
        listed_cell(handle)?;
        Some((handle - BASE.load(Ordering::Relaxed)) / CELL)
    }

    fn get(&self, handle: usize) -> Option<&Arc<dyn Object>> {
        match Self::index(handle) {
            Some(i) => self.slots.get(i)?.as_ref(),
            None => self.heap.get(&handle),
        }
    }

    /// Stores the object of one of the reserved range's cells in its slot.
    #[inline]
    fn insert_listed(&mut self, cell: &'static Cell, obj: Arc<dyn Object>) {
        let i = Self::slot_of(cell);
        if i >= self.slots.len() {
            self.grow(i);
        }
        let old = self.slots.get_mut(i).and_then(|s| s.replace(obj));
        // A cell is handed out only once its object left the table.
        debug_assert!(old.is_none(), "a slot held an object");
    }

    /// A chunk's worth of slots at a time, as the cells are committed.
    #[cold]
    fn grow(&mut self, i: usize) {
        self.slots.resize_with((i / CHUNK + 1) * CHUNK, || None);
    }

    fn remove(&mut self, handle: usize) -> Option<Arc<dyn Object>> {
        match Self::index(handle) {
            Some(i) => self.slots.get_mut(i)?.take(),
            None => self.heap.remove(&handle),
        }
    }

    /// Removes the object of `handle` if `check` allows it, with one lookup; `Err(missing)`
    /// when there is none, or what `check` returned (the object then stays).
    #[inline]
    fn take_if<E: Copy>(
        &mut self,
        handle: usize,
        listed: Option<&'static Cell>,
        missing: E,
        check: impl FnOnce(&Arc<dyn Object>) -> Result<(), E>,
    ) -> Result<Arc<dyn Object>, E> {
        let Some(cell) = listed else {
            check(self.heap.get(&handle).ok_or(missing)?)?;
            return self.heap.remove(&handle).ok_or_else(|| unreachable!("just found"));
        };
        let i = Self::slot_of(cell);
        let slot = self.slots.get_mut(i).ok_or(missing)?;
        let Some(obj) = slot.as_ref() else { return Err(missing) };
        check(obj)?;
        Ok(slot.take().unwrap_or_else(|| unreachable!("just found")))
    }

    fn iter(&self) -> impl Iterator<Item = (usize, &Arc<dyn Object>)> {
        let base = BASE.load(Ordering::Relaxed);
        let listed = self.slots.iter().enumerate().filter_map(move |(i, o)| Some((base + i * CELL, o.as_ref()?)));
        listed.chain(self.heap.iter().map(|(h, o)| (*h, o)))
    }

    fn values(&self) -> impl Iterator<Item = &Arc<dyn Object>> {
        self.iter().map(|(_, o)| o)
    }
}

struct Objects {
    map: ObjMap,
    cells: Cells,
    /// How many objects of each handle type each IA made and freed (the IB counters
    /// extension's `DCNT_IA_*_CREATE`/`_FREE`), kept under the lock a create or free takes
    /// anyway; one entry per open IA, found by a look along a short list.
    counts: Vec<(usize, ObjectCounts)>,
}

/// Handle types with object counts: `DAT_HANDLE_TYPE_CR` to `DAT_HANDLE_TYPE_CSP`.
pub const COUNTED_TYPES: usize = DAT_HANDLE_TYPE_EXTENSION_BASE as usize;

/// An IA's objects made and freed, by handle type.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ObjectCounts {
    pub created: [u64; COUNTED_TYPES],
    pub freed: [u64; COUNTED_TYPES],
}

impl Objects {
    /// Counts an object of handle type `ty` of IA `ia` made (`made`) or freed. An IA's own
    /// entry comes and goes with the IA.
    fn count(&mut self, ty: DAT_HANDLE_TYPE, ia: usize, made: bool) {
        if ty == DAT_HANDLE_TYPE_IA {
            if made {
                self.counts.push((ia, ObjectCounts::default()));
            } else {
                self.counts.retain(|(h, _)| *h != ia);
            }
            return;
        }
        if let (Some((_, c)), true) = (self.counts.iter_mut().find(|(h, _)| *h == ia), (ty as usize) < COUNTED_TYPES) {
            let n = if made { &mut c.created } else { &mut c.freed };
            n[ty as usize] += 1;
        }
    }

    /// Publishes `obj`, of handle type `ty` and IA `owner` (given by a caller that may know
    /// them without asking the object through its vtable).
    #[inline(always)]
    fn insert(&mut self, handle: usize, ty: DAT_HANDLE_TYPE, owner: usize, obj: Arc<dyn Object>) {
        self.count(ty, owner, true);
        let Some(cell) = listed_cell(handle) else {
            self.map.heap.insert(handle, obj);
            return;
        };
        cell.object.store(Arc::as_ptr(&obj) as *const () as *mut (), Ordering::Release);
        cell.published.store(u64::from(ty) + 1, Ordering::Release);
        self.map.insert_listed(cell, obj);
    }

    /// The cell's side of a removal from the map; whether the object is pinnable (its cell is
    /// then freed by [`unpinned`]).
    #[inline]
    fn unpublish(&mut self, handle: usize, listed: Option<&'static Cell>, ty: DAT_HANDLE_TYPE, owner: usize) -> bool {
        self.count(ty, owner, false);
        if let Some(cell) = listed {
            cell.published.store(0, Ordering::Release);
            cell.object.store(core::ptr::null_mut(), Ordering::Release);
        }
        // A pinnable object's cell is reused only once the pins on it are gone ([`unpinned`]):
        // a pin that read the old type must not find another type's object there.
        let pinnable = PINNABLE.contains(&ty);
        if !pinnable {
            free_cell(&mut self.cells, handle);
        }
        pinnable
    }
}

/// Every live object of every built-in IA, by handle, and the cells behind the handles.
fn objects() -> &'static RwLock<Objects> {
    static OBJECTS: OnceLock<RwLock<Objects>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        RwLock::new(Objects { map: ObjMap::default(), cells: Cells { fresh: &[], recycled: VecDeque::new() }, counts: Vec::new() })
    })
}

/// The objects IA `ia` made and freed so far (zero for an IA that is not open).
pub fn object_counts(ia: usize) -> ObjectCounts {
    objects().read_locked().counts.iter().find(|(h, _)| *h == ia).map(|(_, c)| *c).unwrap_or_default()
}

/// Reserves a handle for an object about to be built (objects know their own handle).
pub fn reserve(provider: *const DAT_PROVIDER) -> usize {
    alloc_cell(&mut objects().write_locked().cells, provider)
}

/// Publishes an object under its reserved handle.
pub fn insert(handle: usize, obj: Arc<dyn Object>) {
    let (ty, owner) = (obj.handle_type(), obj.owner());
    objects().write_locked().insert(handle, ty, owner, obj);
}

/// Publishes an object that need not know its own handle under a new one: [`reserve`] and
/// [`insert`] under one lock.
pub fn publish<T: Object>(provider: *const DAT_PROVIDER, obj: Arc<T>) -> usize {
    let (ty, owner) = (obj.handle_type(), obj.owner());
    let mut o = objects().write_locked();
    let handle = alloc_cell(&mut o.cells, provider);
    o.insert(handle, ty, owner, obj);
    handle
}

/// Removes an object; its handle stops working at once.
pub fn remove(handle: usize) -> Option<Arc<dyn Object>> {
    remove_then(handle, |_| {})
}

/// [`remove`], with the object's teardown run before the wait for the calls that pinned it:
/// a teardown that ends what such a call may be blocked on (a post waiting for a peer that
/// an EP's disconnect releases) must come first.
pub fn remove_then(handle: usize, teardown: impl FnOnce(&Arc<dyn Object>)) -> Option<Arc<dyn Object>> {
    let mut o = objects().write_locked();
    let obj = o.map.remove(handle)?;
    let pinnable = o.unpublish(handle, listed_cell(handle), obj.handle_type(), obj.owner());
    drop(o);
    teardown(&obj);
    if pinnable {
        unpinned(handle, &obj);
    }
    Some(obj)
}

/// The handle types [`pin`] resolves: a free of one of their objects waits for the pins on
/// it ([`unpinned`]); the others' frees need not look.
const PINNABLE: [DAT_HANDLE_TYPE; 3] = [DAT_HANDLE_TYPE_EP, DAT_HANDLE_TYPE_EVD, DAT_HANDLE_TYPE_PZ];

/// After a pinnable object left the table (and its lock is given back: a pinned call may look
/// something up): waits until no call of another thread that pinned it before is still
/// using it, keeps it alive for this thread's own pinned call if there is one (consumer code
/// run inside the call freed it), then lets its cell be reused.
fn unpinned(handle: usize, obj: &Arc<dyn Object>) {
    drop(crate::util::pin::keep_while_pinned(handle, Box::new(obj.clone())));
    crate::util::pin::wait_unpinned(handle);
    obj.cell_released();
    free_cell(&mut objects().write_locked().cells, handle);
}

/// Removes the object of type `T` named by `handle` if `check` allows it, under one lock (a
/// free that looked it up first and removed it after took the lock twice); otherwise
/// `Err(DAT_INVALID_HANDLE | subtype)`, or what `check` returned, and the object stays.
pub fn take<T: Object>(
    handle: DAT_HANDLE,
    subtype: DAT_RETURN,
    check: impl FnOnce(&T) -> Result<(), DAT_RETURN>,
) -> Result<Arc<T>, DAT_RETURN> {
    let bad = dat_error(DAT_INVALID_HANDLE, subtype);
    let mut guard = objects().write_locked();
    let o = &mut *guard;
    let mut seen = (0, 0);
    let listed = listed_cell(handle as usize);
    // `**found`: the object itself (an `Arc` is `Any` too).
    let obj = o.map.take_if(handle as usize, listed, bad, |found| {
        let t = (**found).as_any_ref().downcast_ref::<T>().ok_or(bad)?;
        check(t)?;
        seen = (t.handle_type(), t.owner());
        Ok(())
    })?;
    let pinnable = o.unpublish(handle as usize, listed, seen.0, seen.1);
    drop(guard);
    if pinnable {
        unpinned(handle as usize, &obj);
    }
    // SAFETY: the object was just found to be a `T` (the downcast above), so the `Arc`'s data
    // pointer is that of an `Arc<T>` coerced to `Arc<dyn Object>`: the same allocation.
    Ok(unsafe { Arc::from_raw(Arc::into_raw(obj) as *const T) })
}

/// The object of type `T` named by `handle`, after `f` accepted it, both under the table's lock
/// (for reading): no [`take`], which holds it for writing, runs between the lookup and `f`, so
/// a take's check sees what `f` did, and `f` never sees an object a take has removed.
pub fn lookup_with<T: Object>(
    handle: DAT_HANDLE,
    subtype: DAT_RETURN,
    f: impl FnOnce(&T) -> Result<(), DAT_RETURN>,
) -> Result<Arc<T>, DAT_RETURN> {
    let o = objects().read_locked();
    let obj = o.map.get(handle as usize).cloned().and_then(downcast::<T>).ok_or(dat_error(DAT_INVALID_HANDLE, subtype))?;
    f(&obj)?;
    Ok(obj)
}

/// Whether a live object of type `T` satisfies `pred`: a look through every object, under
/// the read lock, for the rare call that needs no index (`dat_lmr_sync_rdma_*`), so that
/// creating and freeing objects keeps none.
pub fn any_of<T: Object>(mut pred: impl FnMut(&T) -> bool) -> bool {
    objects().read_locked().map.values().any(|o| (**o).as_any_ref().downcast_ref::<T>().is_some_and(&mut pred))
}

pub fn get(handle: DAT_HANDLE) -> Option<Arc<dyn Object>> {
    objects().read_locked().map.get(handle as usize).cloned()
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

/// Under one lock: whether `a` names a live `A`, as its address (only to compare with a
/// reference another object holds, say a PZ's to its IA: no reference count is taken), and
/// the `B` named by `b` as [`lookup`] gives it. Both are looked up, so that a caller reports
/// the errors in its own order.
#[allow(clippy::type_complexity)]
pub fn check_and_lookup<A: Object, B: Object>(
    a: DAT_HANDLE,
    a_subtype: DAT_RETURN,
    b: DAT_HANDLE,
    b_subtype: DAT_RETURN,
) -> (Result<*const A, DAT_RETURN>, Result<Arc<B>, DAT_RETURN>) {
    let o = objects().read_locked();
    let a = o.map.get(a as usize).and_then(|obj| (**obj).as_any_ref().downcast_ref::<A>()).map(|a| a as *const A);
    let b = o.map.get(b as usize).cloned().and_then(downcast);
    (a.ok_or(dat_error(DAT_INVALID_HANDLE, a_subtype)), b.ok_or(dat_error(DAT_INVALID_HANDLE, b_subtype)))
}

/// Every live object owned by the IA `ia` (its async EVD included), by handle.
pub fn owned_by(ia: usize) -> Vec<(usize, Arc<dyn Object>)> {
    objects()
        .read_locked()
        .map
        .iter()
        .filter(|(_, o)| o.handle_type() != DAT_HANDLE_TYPE_IA && o.owner() == ia)
        .map(|(h, o)| (h, o.clone()))
        .collect()
}

/// Every live object of type `T`.
pub fn all_of<T: Object>() -> Vec<Arc<T>> {
    let all: Vec<Arc<dyn Object>> = objects().read_locked().map.values().cloned().collect();
    all.into_iter().filter_map(downcast).collect()
}

/// Frees an object of a closing IA, whatever its type, without the checks a consumer's free
/// gets (an abrupt close frees everything).
pub fn destroy(handle: DAT_HANDLE, obj: Arc<dyn Object>) {
    remove_then(handle as usize, |_| obj.destroy());
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::{get, insert, lookup_with, object_counts, publish, published, remove, reserve, take, Object, ObjectCounts};
    use crate::abi::{
        dat_error, DAT_HANDLE, DAT_HANDLE_TYPE, DAT_HANDLE_TYPE_IA, DAT_HANDLE_TYPE_LMR, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE,
        DAT_INVALID_HANDLE_LMR, DAT_INVALID_HANDLE_PZ, DAT_PROVIDER,
    };

    /// An object of handle type `TY` (a type of its own for each).
    struct Thing<const TY: DAT_HANDLE_TYPE>(Mutex<u64>);

    impl<const TY: DAT_HANDLE_TYPE> Object for Thing<TY> {
        fn handle_type(&self) -> DAT_HANDLE_TYPE {
            TY
        }
        fn context(&self) -> &Mutex<u64> {
            &self.0
        }
        fn owner(&self) -> usize {
            0
        }
    }

    type Pz = Thing<DAT_HANDLE_TYPE_PZ>;
    type Lmr = Thing<DAT_HANDLE_TYPE_LMR>;

    /// An object of handle type `TY` owned by the IA `.1` (an IA's own handle for an IA).
    struct Owned<const TY: DAT_HANDLE_TYPE>(Mutex<u64>, usize);

    impl<const TY: DAT_HANDLE_TYPE> Object for Owned<TY> {
        fn handle_type(&self) -> DAT_HANDLE_TYPE {
            TY
        }
        fn context(&self) -> &Mutex<u64> {
            &self.0
        }
        fn owner(&self) -> usize {
            self.1
        }
    }

    /// An object with a binding count, as an LMR's.
    struct Counted(Mutex<u64>, std::sync::atomic::AtomicU32, std::sync::atomic::AtomicBool);

    impl Object for Counted {
        fn handle_type(&self) -> DAT_HANDLE_TYPE {
            DAT_HANDLE_TYPE_LMR
        }
        fn context(&self) -> &Mutex<u64> {
            &self.0
        }
        fn owner(&self) -> usize {
            0
        }
    }

    /// `lmr::free` reads and sets an LMR's binding count with a load and a store, relying on
    /// this: a `lookup_with` closure (where `lmr_bound` counts a binding) never runs during a
    /// take's check, and never on an object a take removed. (Fails with the closure run after
    /// the read lock is given back.)
    #[test]
    fn a_lookup_with_never_overlaps_a_take() {
        use std::sync::atomic::Ordering::SeqCst;
        let provider = 0x1000 as *const DAT_PROVIDER;
        for _ in 0..20 {
            let obj = Arc::new(Counted(Mutex::new(0), 0.into(), false.into()));
            let h = publish(provider, obj.clone());
            let (taken, late) = (std::sync::atomic::AtomicBool::new(false), std::sync::atomic::AtomicBool::new(false));
            // A bind that counts and gives back at once, flagging the time it runs.
            let bind = |c: &Counted| {
                c.2.store(true, SeqCst);
                if taken.load(SeqCst) {
                    late.store(true, SeqCst);
                }
                c.1.fetch_add(1, SeqCst);
                (0..100).for_each(|_| std::hint::spin_loop());
                c.1.fetch_sub(1, SeqCst);
                c.2.store(false, SeqCst);
                Ok(())
            };
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| while lookup_with::<Counted>(h as DAT_HANDLE, 0, bind).is_ok() {});
                }
                // Let the binders run, then take it from under them.
                while obj.1.load(SeqCst) == 0 {
                    std::hint::spin_loop();
                }
                let took = take::<Counted>(h as DAT_HANDLE, 0, |c| {
                    let during = c.2.load(SeqCst) || c.1.load(SeqCst) != 0;
                    taken.store(true, SeqCst);
                    if during {
                        late.store(true, SeqCst);
                    }
                    Ok(())
                });
                assert!(took.is_ok());
            });
            assert!(!late.load(SeqCst), "a bind ran during a take's check, or after it");
        }
    }

    #[test]
    fn object_counts_are_per_ia_and_go_with_it() {
        let provider = 0x1000 as *const DAT_PROVIDER;
        let ia = reserve(provider);
        insert(ia, Arc::new(Owned::<DAT_HANDLE_TYPE_IA>(Mutex::new(0), ia)));
        let other = 0x5eed_usize; // an IA that is not open: nothing counted for it
        let lmr = |owner| Arc::new(Owned::<DAT_HANDLE_TYPE_LMR>(Mutex::new(0), owner));
        let a = publish(provider, lmr(ia));
        let b = publish(provider, lmr(ia));
        let c = publish(provider, lmr(other));
        assert!(take::<Owned<DAT_HANDLE_TYPE_LMR>>(a as DAT_HANDLE, DAT_INVALID_HANDLE_LMR, |_| Ok(())).is_ok());
        let n = object_counts(ia);
        assert_eq!((n.created[DAT_HANDLE_TYPE_LMR as usize], n.freed[DAT_HANDLE_TYPE_LMR as usize]), (2, 1));
        assert_eq!(n.created.iter().sum::<u64>(), 2, "the IA itself is not one of its objects");
        assert_eq!(object_counts(other), ObjectCounts::default());
        remove(b);
        remove(c);
        remove(ia);
        assert_eq!(object_counts(ia), ObjectCounts::default());
    }

    #[test]
    fn published_answers_for_our_cells_only_while_an_object_is_there() {
        let provider = 0x1000 as *const DAT_PROVIDER;
        let h = publish(provider, Arc::new(Thing::<DAT_HANDLE_TYPE_PZ>(Mutex::new(0))));
        assert_eq!(published(h), Some(Some((provider, DAT_HANDLE_TYPE_PZ))));
        // Inside a chunk but not a cell's start, and not ours at all.
        assert_eq!(published(h + 8), None);
        let local = 0u64;
        assert_eq!(published(&local as *const u64 as usize), None);
        assert_eq!(published(0), None);
        // The wrong type is refused and the object stays.
        let bad = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
        assert_eq!(take::<Lmr>(h as DAT_HANDLE, DAT_INVALID_HANDLE_LMR, |_| Ok(())).err(), Some(bad));
        assert!(published(h).is_some_and(|p| p.is_some()));
        // A check that refuses leaves it too; one that allows takes it, and the cell is empty.
        assert_eq!(take::<Pz>(h as DAT_HANDLE, DAT_INVALID_HANDLE_PZ, |_| Err(7)).err(), Some(7));
        assert!(take::<Pz>(h as DAT_HANDLE, DAT_INVALID_HANDLE_PZ, |_| Ok(())).is_ok());
        assert_eq!(published(h), Some(None));
        assert!(get(h as DAT_HANDLE).is_none());
        assert!(take::<Pz>(h as DAT_HANDLE, DAT_INVALID_HANDLE_PZ, |_| Ok(())).is_err());
    }
}
