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

use std::cell::Cell;
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
}

impl Drop for Mine {
    fn drop(&mut self) {
        self.record.taken.store(false, Ordering::Release);
    }
}

thread_local! {
    static MINE: Mine = Mine { record: take_record(), held: Cell::new(false) };
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
    m.record.what.store(what, Ordering::Relaxed);
    let s = m.record.seq.load(Ordering::Relaxed);
    m.record.seq.store(s + 1, Ordering::Relaxed);
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
    }
}

/// Called after the object at `what` was unpublished: returns once no other thread holds a
/// pin on `what` that it took before that. The calling thread's own pin does not count.
pub fn wait_unpinned(what: usize) {
    fence(Ordering::SeqCst);
    let mine = MINE.try_with(|m| m.record as *const Record).ok();
    // Under the list's lock, which a pinned thread never takes (it took its record before).
    for &r in RECORDS.locked().iter() {
        if Some(r as *const Record) == mine {
            continue;
        }
        let s = r.seq.load(Ordering::Acquire);
        if s & 1 == 0 || r.what.load(Ordering::Relaxed) != what {
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
