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
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::util::sync::MutexExt;

struct Record {
    seq: AtomicU64,
    what: AtomicUsize,
    /// Whether a live thread owns the record.
    taken: AtomicBool,
}

/// Every record made, for [`wait_unpinned`] to look through. Records are never freed.
static RECORDS: Mutex<Vec<&'static Record>> = Mutex::new(Vec::new());

/// This thread's record, given back when the thread ends, and whether the thread holds its
/// pin (the record's count is odd). One thread-local, reached once per pin: in a shared
/// library each thread-local access is a call.
struct Mine {
    record: &'static Record,
    held: Cell<bool>,
    /// What this thread freed while it held a pin on it ([`keep_while_pinned`]), dropped when
    /// the pin drops.
    kept: RefCell<Vec<Box<dyn Any>>>,
    has_kept: Cell<bool>,
}

impl Drop for Mine {
    fn drop(&mut self) {
        // A thread that ends holding its pin (it unwound through C, say) leaves the count
        // even, so that the record's next owner pins with the right parity.
        let s = self.record.seq.load(Ordering::Relaxed);
        if s & 1 == 1 {
            self.record.seq.store(s + 1, Ordering::Release);
        }
        self.record.taken.store(false, Ordering::Release);
    }
}

thread_local! {
    static MINE: Mine = Mine { record: take_record(), held: Cell::new(false), kept: RefCell::new(Vec::new()), has_kept: Cell::new(false) };
}

fn take_record() -> &'static Record {
    let mut all = RECORDS.locked();
    if let Some(r) = all.iter().find(|r| r.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()) {
        return r;
    }
    let r: &'static Record =
        Box::leak(Box::new(Record { seq: AtomicU64::new(0), what: AtomicUsize::new(0), taken: AtomicBool::new(true) }));
    all.push(r);
    r
}

/// A pin on one address, held until dropped.
pub struct Pin {
    mine: *const Mine,
}

/// Pins `what`; `None` when this thread already holds a pin (or is ending). The caller then
/// checks that the object is still published: only then may it use it, until the pin drops.
pub fn pin(what: usize) -> Option<Pin> {
    let mine = MINE.try_with(|m| m as *const Mine).ok()?;
    // SAFETY: this thread's own thread-local, alive until the thread ends, after any pin.
    let m = unsafe { &*mine };
    if m.held.replace(true) {
        return None;
    }
    m.record.what.store(what, Ordering::Release);
    let s = m.record.seq.load(Ordering::Relaxed);
    m.record.seq.store(s | 1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    Some(Pin { mine })
}

impl Drop for Pin {
    fn drop(&mut self) {
        // SAFETY: as in `pin`: the pin is not Send (a raw pointer), so this is the same
        // thread, whose thread-local outlives it.
        let m = unsafe { &*self.mine };
        let s = m.record.seq.load(Ordering::Relaxed);
        m.record.seq.store(s + 1, Ordering::Release);
        m.held.set(false);
        if m.has_kept.replace(false) {
            drop(std::mem::take(&mut *m.kept.borrow_mut()));
        }
    }
}

/// When this thread holds a pin on `what` (its pinned call reached consumer code that freed
/// the object, a CNO's proxy agent say), keeps `value` (a reference to the object) until the
/// pin drops, so that the call goes on with live memory; otherwise gives it back.
pub fn keep_while_pinned(what: usize, value: Box<dyn Any>) -> Option<Box<dyn Any>> {
    let Ok(mine) = MINE.try_with(|m| m as *const Mine) else { return Some(value) };
    // SAFETY: this thread's own thread-local, alive while the thread runs.
    let m = unsafe { &*mine };
    if !m.held.get() || m.record.what.load(Ordering::Relaxed) != what {
        return Some(value);
    }
    m.kept.borrow_mut().push(value);
    m.has_kept.set(true);
    None
}

/// Called after the object at `what` was unpublished: returns once no other thread holds a
/// pin on `what` that it took before that. The calling thread's own pin does not count.
pub fn wait_unpinned(what: usize) {
    fence(Ordering::SeqCst);
    let mine = MINE.try_with(|m| m.record as *const Record).ok();
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
