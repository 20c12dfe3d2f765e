//! Pins: a thread says, without a lock or a shared atomic, that it is using the object behind
//! one address, and whoever unpublishes that object waits until no thread that may have seen
//! it still uses it before letting it go. The data path resolves a handle this way (a few
//! loads and one fence), instead of taking a lock and a reference count per call.
//!
//! Each thread has a record of its own (leaked, reused by a later thread once its thread has
//! ended): a sequence count, odd while the thread holds a pin, and the pinned address. A
//! thread holds one pin at a time; a second one is refused (the caller takes its slow path).
//!
//! The order that makes it sound (a Dekker pair of SeqCst fences): the pinning thread writes
//! its record, fences, then reads whether the object is still published; the unpublishing
//! thread unpublishes, fences, then reads every record. Either the pinning thread sees the
//! object gone, or the unpublishing thread sees the pin and waits for the count to move on.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::util::sync::MutexExt;

struct Record {
    seq: AtomicU64,
    what: AtomicUsize,
    /// Whether a live thread owns the record.
    taken: AtomicBool,
    /// One allocation [`crate::util::spare`] keeps for the record's thread (and for the next
    /// thread that takes the record): touched only by the owning thread, so no swap.
    spare: Slot,
}

/// A record's kept allocation ([`crate::util::spare`]), and the address of the spare that kept
/// it, which alone may take it back: touched only by the record's owning thread.
#[derive(Default)]
pub struct Slot {
    kept: AtomicPtr<()>,
    of: AtomicUsize,
}

impl Slot {
    /// The allocation kept by spare `of` (null: none), now the caller's; the slot is then empty.
    #[inline]
    pub fn take(&self, of: usize) -> *mut () {
        let p = self.kept.load(Ordering::Relaxed);
        if p.is_null() || self.of.load(Ordering::Relaxed) != of {
            return core::ptr::null_mut();
        }
        self.kept.store(core::ptr::null_mut(), Ordering::Relaxed);
        p
    }

    /// Keeps `p` for spare `of` if the slot is empty; false (and nothing kept) otherwise.
    #[inline]
    pub fn put(&self, of: usize, p: *mut ()) -> bool {
        if !self.kept.load(Ordering::Relaxed).is_null() {
            return false;
        }
        self.of.store(of, Ordering::Relaxed);
        self.kept.store(p, Ordering::Relaxed);
        true
    }

    /// Empties the slot, leaking what it kept (tests: a record an earlier test's thread used).
    #[cfg(test)]
    pub fn forget(&self) {
        self.kept.store(core::ptr::null_mut(), Ordering::Relaxed);
    }
}

/// Every record made, for [`wait_unpinned`] to look through. Records are never freed.
static RECORDS: Mutex<Vec<&'static Record>> = Mutex::new(Vec::new());

/// This thread's state for the library calls it is in: its record (taken at its first pin),
/// whether it holds its pin, and how deep it is in guarded calls (`ffi::guard`, which reaches
/// this state once per call and hands it down to the pin).
///
/// Plain cells with no destructor: such a thread-local costs one address lookup (in a shared
/// library a call), with no registration check; the record goes back through [`Owner`].
#[repr(C)]
pub struct Local {
    record: Cell<Option<&'static Record>>,
    /// [`HELD`] while the thread holds its pin, with [`KEEPS`] when it keeps something until the
    /// pin drops ([`keep_while_pinned`]): one byte, so that the drop reads and clears both at
    /// once.
    pin_state: Cell<u8>,
    /// The thread ended (its record went back): it pins no more.
    ended: Cell<bool>,
    /// The thread is handing a device's completions on, where a consumer's callback may run
    /// (see [`Local::dispatching`]).
    dispatching: Cell<bool>,
    depth: Cell<u32>,
}

const HELD: u8 = 1;
const KEEPS: u8 = 2;

// This thread's `Local`, in the initial-exec TLS model on x86_64 Linux: two instructions to
// reach, where a `thread_local!` of a shared library is a call into the loader
// (`__tls_get_addr`, about a dozen instructions, on every guarded call). The loader then
// keeps the library's whole TLS segment in the static TLS area (DF_STATIC_TLS: 216 bytes with
// std's own thread-locals, measured with readelf; glibc keeps surplus room, about 1.5 KiB, for
// libraries dlopen'ed so, and a dlopen finding it used up by others fails "cannot allocate
// memory in static TLS block"). All zero is a valid `Local`: no record, nothing held, depth 0.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    // Global for the other codegen units of the crate, hidden from the library's users.
    ".globl dat2_pin_local",
    ".hidden dat2_pin_local",
    ".type dat2_pin_local,@object",
    ".size dat2_pin_local,16",
    "dat2_pin_local:",
    ".zero 16",
    ".popsection",
);

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const _: () = assert!(core::mem::size_of::<Local>() <= 16 && core::mem::align_of::<Local>() <= 8);

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
thread_local! {
    static LOCAL: Local = const {
        Local { record: Cell::new(None), pin_state: Cell::new(0), ended: Cell::new(false), dispatching: Cell::new(false), depth: Cell::new(0) }
    };
}

thread_local! {
    /// What this thread freed while it held a pin on it ([`keep_while_pinned`]), dropped when
    /// the pin drops.
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
    /// Gives the record back when the thread ends (made at the thread's first pin).
    static OWNER: Owner = const { Owner };
}

struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let l = local();
        l.ended.set(true);
        if let Some(r) = l.record.take() {
            // A thread that ends holding its pin (it unwound through C, say) leaves the
            // count even, so that the record's next owner pins with the right parity.
            let s = r.seq.load(Ordering::Relaxed);
            if s & 1 == 1 {
                r.seq.store(s + 1, Ordering::Release);
            }
            r.taken.store(false, Ordering::Release);
        }
    }
}

fn take_record() -> &'static Record {
    let mut all = RECORDS.locked();
    if let Some(r) = all.iter().find(|r| r.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()) {
        return r;
    }
    let r: &'static Record = Box::leak(Box::new(Record {
        seq: AtomicU64::new(0),
        what: AtomicUsize::new(0),
        taken: AtomicBool::new(true),
        spare: Slot::default(),
    }));
    all.push(r);
    r
}

/// This thread's [`Local`], for the length of one call on this thread.
#[derive(Clone, Copy)]
pub struct LocalRef(*const Local);

impl LocalRef {
    /// An address no other live thread has (its `Local`'s): names this thread in a word that
    /// other threads compare with their own.
    #[inline]
    pub fn addr(self) -> usize {
        self.0 as usize
    }
}

/// This thread's state (see [`Local`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline]
pub fn local() -> LocalRef {
    let p: *const Local;
    // SAFETY: the thread pointer plus the block's offset, which the loader put in the GOT:
    // this thread's `dat2_pin_local`, 16 zeroed bytes made for each thread (a `Local`, see
    // above). Only reads memory, the GOT entry and the thread pointer.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + dat2_pin_local@GOTTPOFF]",
            p = out(reg) p,
            options(pure, readonly, nostack),
        );
    }
    LocalRef(p)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline]
pub fn local() -> LocalRef {
    LocalRef(LOCAL.with(|l| l as *const Local))
}

impl core::ops::Deref for LocalRef {
    type Target = Local;
    #[inline]
    fn deref(&self) -> &Local {
        // SAFETY: this thread's own thread-local, which has no destructor and so lives as long
        // as the thread; `LocalRef` is not Send (a raw pointer), so this is that thread.
        unsafe { &*self.0 }
    }
}

impl Local {
    /// Counts a guarded call entered; [`Local::leave`] counts it left.
    #[inline]
    pub fn enter(&self) {
        self.depth.set(self.depth.get() + 1);
    }

    #[inline]
    pub fn leave(&self) {
        self.depth.set(self.depth.get() - 1);
    }

    /// Whether the thread is dispatching a device's completions (set by the device around the
    /// dispatch): a call made from a consumer's callback there must not wait for what the
    /// dispatch holds. Here rather than in a `thread_local!` of its own, which in a shared
    /// library is a call into the loader on each completion.
    #[inline]
    pub fn dispatching(&self) -> &Cell<bool> {
        &self.dispatching
    }

    /// How many guarded calls this thread is inside.
    pub fn depth(&self) -> u32 {
        self.depth.get()
    }

    /// This thread's place for a kept allocation ([`crate::util::spare`]); `None` until its
    /// first pin gave it a record. Records are never freed, and pass to a later thread only
    /// through `taken` (released by the old owner, acquired by the new), so the slot's plain
    /// loads and stores need no ordering of their own.
    #[inline]
    pub fn spare_slot(&self) -> Option<&'static Slot> {
        self.record.get().map(|r| &r.spare)
    }

    /// Pins `what`; `None` when this thread already holds a pin (or is ending). The caller
    /// then checks that the object is still published: only then may it use it, until the pin
    /// drops.
    #[inline]
    pub fn pin(&self, what: usize) -> Option<Pin> {
        let record = match self.record.get() {
            Some(r) => r,
            None => self.first_record()?,
        };
        if self.pin_state.get() != 0 {
            return None;
        }
        self.pin_state.set(HELD);
        record.what.store(what, Ordering::Release);
        let s = record.seq.load(Ordering::Relaxed);
        record.seq.store(s | 1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        Some(Pin { local: self, record })
    }

    #[cold]
    fn first_record(&self) -> Option<&'static Record> {
        if self.ended.get() || OWNER.try_with(|_| ()).is_err() {
            return None;
        }
        let r = take_record();
        self.record.set(Some(r));
        Some(r)
    }
}

/// Pins `what` on this thread (see [`Local::pin`]); the library pins through `ffi::guard_local`.
#[cfg(test)]
pub fn pin(what: usize) -> Option<Pin> {
    let l = local();
    // SAFETY: as in `LocalRef::deref`: the pin borrows this thread's own thread-local, which
    // outlives it.
    let l: &'static Local = unsafe { &*l.0 };
    l.pin(what)
}

/// A pin on one address, held until dropped.
pub struct Pin {
    local: *const Local,
    record: &'static Record,
}

impl Drop for Pin {
    #[inline]
    fn drop(&mut self) {
        let s = self.record.seq.load(Ordering::Relaxed);
        self.record.seq.store(s + 1, Ordering::Release);
        // SAFETY: the pin is not Send (a raw pointer), so this is the thread whose
        // thread-local (no destructor) it points at.
        let l = unsafe { &*self.local };
        if l.pin_state.replace(0) & KEEPS != 0 {
            drop_kept();
        }
    }
}

#[cold]
fn drop_kept() {
    let kept = KEPT.try_with(|k| std::mem::take(&mut *k.borrow_mut()));
    drop(kept);
}

/// When this thread holds a pin on `what` (its pinned call reached consumer code that freed
/// the object, a CNO's proxy agent say), keeps `value` (a reference to the object) until the
/// pin drops, so that the call goes on with live memory; otherwise gives it back.
pub fn keep_while_pinned(what: usize, value: Box<dyn Any>) -> Option<Box<dyn Any>> {
    let l = local();
    let Some(r) = l.record.get() else { return Some(value) };
    if l.pin_state.get() & HELD == 0 || r.what.load(Ordering::Relaxed) != what {
        return Some(value);
    }
    // A thread that is ending cannot keep anything: the caller waits instead.
    if KEPT.try_with(|_| ()).is_err() {
        return Some(value);
    }
    KEPT.with(|k| k.borrow_mut().push(value));
    l.pin_state.set(HELD | KEEPS);
    None
}

/// Called after the object at `what` was unpublished: returns once no other thread holds a
/// pin on `what` that it took before that. The calling thread's own pin does not count.
pub fn wait_unpinned(what: usize) {
    fence(Ordering::SeqCst);
    let mine = local().record.get().map(|r| r as *const Record);
    // Looked through outside the list's lock: a pinned thread may itself free something (and
    // come here), and a new thread takes its record under that lock. A record added after
    // the copy belongs to a thread whose fence comes after ours: it sees the object gone.
    let records: Vec<&'static Record> = RECORDS.locked().clone();
    for r in records {
        if Some(r as *const Record) == mine {
            continue;
        }
        let s = r.seq.load(Ordering::Acquire);
        if s & 1 == 0 || r.what.load(Ordering::Acquire) != what {
            continue;
        }
        while r.seq.load(Ordering::Acquire) == s {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pin, wait_unpinned};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn what_this_thread_frees_under_its_own_pin_lives_until_the_pin_drops() {
        let object = Arc::new(7u32);
        let p = pin(0x3000).unwrap();
        // Not pinned here: given back at once.
        assert!(super::keep_while_pinned(0x4000, Box::new(object.clone())).is_some());
        assert!(super::keep_while_pinned(0x3000, Box::new(object.clone())).is_none());
        // The freeing thread does not wait for its own pin.
        wait_unpinned(0x3000);
        assert_eq!(Arc::strong_count(&object), 2);
        drop(p);
        assert_eq!(Arc::strong_count(&object), 1);
    }

    #[test]
    fn one_pin_per_thread() {
        let p = pin(1).expect("first pin");
        assert!(pin(2).is_none());
        drop(p);
        assert!(pin(2).is_some());
    }

    #[test]
    fn an_unpublisher_waits_for_the_pin_on_its_object_only() {
        let published = Arc::new(AtomicUsize::new(1));
        let (held, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let t = {
            let (published, held, release) = (published.clone(), held.clone(), release.clone());
            std::thread::spawn(move || {
                let p = pin(0x1000).unwrap();
                assert_eq!(published.load(Ordering::SeqCst), 1);
                held.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                // Still published to this reader: the unpublisher has not returned.
                drop(p);
            })
        };
        while !held.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // Another address does not wait.
        wait_unpinned(0x2000);
        published.store(0, Ordering::SeqCst);
        let done = Arc::new(AtomicBool::new(false));
        let waiter = {
            let done = done.clone();
            std::thread::spawn(move || {
                wait_unpinned(0x1000);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "returned while the object was pinned");
        release.store(true, Ordering::SeqCst);
        waiter.join().unwrap();
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }
}
