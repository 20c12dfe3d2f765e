//! One spare `Arc` allocation of a type, kept from the last value freed for the next one made:
//! an object that is made and freed in turn (an LMR over a cached registration, made and freed
//! around each transfer) then costs no `malloc` and no `free`.
//!
//! The allocation is kept by the thread that freed the value, in its pin record
//! ([`crate::util::pin::Local::spare_slot`]), which only that thread touches: a make and a free
//! on the same thread are a load and a store each, no read-modify-write. A thread without a
//! record, or whose record already keeps one, uses the one shared place (a swap each way), as
//! does the make of a thread whose record keeps none (values freed on another thread).
//!
//! The value is dropped as usual when its last reference goes through [`Spare::recycle`];
//! only the memory is kept, and only when nobody else holds a reference. Kept memory holds no
//! value, so nothing the value owned (a PZ, a registration) outlives it. Records are never
//! freed, so a thread's kept allocation stays for the next thread that takes its record: at
//! most one allocation per record, as many as threads ever ran at once.

use core::mem::MaybeUninit;
use core::ptr;
use std::sync::atomic::{fence, AtomicPtr, Ordering};
use std::sync::Arc;

use crate::util::pin;

pub struct Spare<T>(AtomicPtr<T>);

impl<T> Spare<T> {
    pub const fn new() -> Spare<T> {
        Spare(AtomicPtr::new(ptr::null_mut()))
    }

    /// What names this spare in a thread's slot: its address, since only a `'static` one uses
    /// a slot, so no other spare (of another type) can ever have it.
    fn id(&'static self) -> usize {
        self as *const Spare<T> as usize
    }

    /// `Arc::new(make())`, in a kept allocation when there is one: inlined, so that a large
    /// value is built straight into that memory instead of on the stack and then copied.
    #[inline(always)]
    pub fn arc_with(&'static self, make: impl FnOnce() -> T) -> Arc<T> {
        let p = self.take();
        if p.is_null() {
            return Arc::new(make());
        }
        // SAFETY: `p` came from `Arc::into_raw` of an `Arc<T>` that was the only reference to
        // its allocation (strong 1, weak 1 counting the strongs' own), whose value was then
        // dropped (`recycle`); taking it from its place made this thread its only owner.
        // Writing the new value makes it an `Arc<T>` again, as `Arc::get_mut_unchecked` would.
        unsafe {
            p.write(make());
            Arc::from_raw(p)
        }
    }

    /// A kept allocation (null: none), now the caller's alone.
    #[inline(always)]
    fn take(&'static self) -> *mut T {
        if let Some(slot) = pin::local().spare_slot() {
            let p = slot.take(self.id());
            if !p.is_null() {
                return p as *mut T;
            }
        }
        self.0.swap(ptr::null_mut(), Ordering::Acquire)
    }

    /// Drops `arc`; when it was the last reference, its value is dropped and its memory kept
    /// for the next [`Spare::arc_with`] (in this thread's slot if it is free, else in the
    /// shared place, freeing the one kept there before).
    #[inline]
    pub fn recycle(&'static self, arc: Arc<T>) {
        // Another strong reference, or a weak one that could become one: an ordinary drop.
        if Arc::strong_count(&arc) != 1 || Arc::weak_count(&arc) != 0 {
            return;
        }
        // What the other references' holders did before dropping them (their release
        // decrements, read above) happens before the value is dropped here, as in Arc's drop.
        fence(Ordering::Acquire);
        let p = Arc::into_raw(arc) as *mut T;
        // SAFETY: this was the only reference (checked above; none can be made from nothing),
        // so nobody else reads the value: it is dropped once, here, and the allocation holds
        // none after (`arc` and `from_raw` below never drop it).
        unsafe { ptr::drop_in_place(p) };
        // Asked after the drop: a drop that kept something itself may have filled the slot.
        if pin::local().spare_slot().is_some_and(|slot| slot.put(self.id(), p as *mut ())) {
            return;
        }
        let old = self.0.swap(p, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: a kept allocation (see `arc_with`), holding no value: freed as an
            // `Arc<MaybeUninit<T>>`, of the same size and alignment, which drops no value.
            drop(unsafe { Arc::from_raw(old as *const MaybeUninit<T>) });
        }
    }
}

impl<T> Default for Spare<T> {
    fn default() -> Spare<T> {
        Spare::new()
    }
}

impl<T> Drop for Spare<T> {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: as in `recycle`: a kept allocation holding no value.
            drop(unsafe { Arc::from_raw(p as *const MaybeUninit<T>) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spare;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops in the counter it points at.
    struct Counted(&'static AtomicUsize, u64);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Gives this thread a pin record (and so a spare slot), as a library call's first pin does,
    /// with an empty slot (records pass from ended threads to new ones, slots included).
    fn with_record() {
        drop(crate::util::pin::pin(0x5a5a_0000).expect("no pin held"));
        crate::util::pin::local().spare_slot().expect("a record").forget();
    }

    /// Made and freed in turn on one thread, with a slot (`record`) or through the shared place.
    fn reused_and_dropped_once(record: bool) {
        let drops: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let spare: &'static Spare<Counted> = Box::leak(Box::new(Spare::new()));
        if record {
            with_record();
        }
        let a = spare.arc_with(|| Counted(drops, 1));
        let first = Arc::as_ptr(&a);
        spare.recycle(a);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the value goes with its last reference");
        let b = spare.arc_with(|| Counted(drops, 2));
        assert_eq!(Arc::as_ptr(&b), first, "the allocation is reused");
        assert_eq!(b.1, 2);
        // Another reference: dropped normally, nothing kept.
        let other = b.clone();
        spare.recycle(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let c = spare.arc_with(|| Counted(drops, 3));
        assert_ne!(Arc::as_ptr(&c), first, "nothing was kept while another reference lived");
        drop(other);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        // A weak reference also keeps it from being kept.
        let weak = Arc::downgrade(&c);
        spare.recycle(c);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert!(weak.upgrade().is_none());
        // Two recycled in turn: the second goes to the shared place (the slot is full, or
        // there is none), replacing (freeing) what was kept there.
        let (d, e) = (spare.arc_with(|| Counted(drops, 4)), spare.arc_with(|| Counted(drops, 5)));
        let (dp, ep) = (Arc::as_ptr(&d), Arc::as_ptr(&e));
        spare.recycle(d);
        spare.recycle(e);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        let (f, g) = (spare.arc_with(|| Counted(drops, 6)), spare.arc_with(|| Counted(drops, 7)));
        if record {
            // The slot's first, then the shared place's.
            assert_eq!((Arc::as_ptr(&f), Arc::as_ptr(&g)), (dp, ep));
        } else {
            // The first was freed (`g` is new memory, which may be that).
            assert_eq!(Arc::as_ptr(&f), ep);
            assert_ne!(Arc::as_ptr(&g), ep);
        }
    }

    #[test]
    fn the_memory_is_reused_and_every_value_dropped_once() {
        std::thread::spawn(|| reused_and_dropped_once(false)).join().unwrap();
        std::thread::spawn(|| reused_and_dropped_once(true)).join().unwrap();
    }

    #[test]
    fn a_slot_gives_its_allocation_back_only_to_the_spare_that_kept_it() {
        std::thread::spawn(|| {
            with_record();
            // Two types of one size: the second must never be built in the first's memory.
            let a: &'static Spare<[u64; 4]> = Box::leak(Box::new(Spare::new()));
            let b: &'static Spare<(u64, u64, u64, u64)> = Box::leak(Box::new(Spare::new()));
            let x = a.arc_with(|| [1; 4]);
            let kept = Arc::as_ptr(&x) as usize;
            a.recycle(x);
            let y = b.arc_with(|| (2, 2, 2, 2));
            assert_ne!(Arc::as_ptr(&y) as usize, kept, "another spare's allocation was taken");
            b.recycle(y);
            assert_eq!(Arc::as_ptr(&a.arc_with(|| [3; 4])) as usize, kept, "the keeper's own is reused");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_making_and_freeing_share_it_safely() {
        static SPARE: Spare<Vec<u64>> = Spare::new();
        let (tx, rx) = std::sync::mpsc::channel::<Arc<Vec<u64>>>();
        // Values made on the others and freed here, with a record: slot and shared place mixed.
        let freer = std::thread::spawn(move || {
            with_record();
            for v in rx {
                SPARE.recycle(v);
            }
        });
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    if t % 2 == 0 {
                        with_record();
                    }
                    for n in 0..20_000u64 {
                        let v = SPARE.arc_with(|| vec![t, n]);
                        assert_eq!(*v, [t, n]);
                        if n % 5 == 0 {
                            tx.send(v).unwrap();
                            continue;
                        }
                        let held = (n % 3 == 0).then(|| v.clone());
                        SPARE.recycle(v);
                        assert_eq!(held.as_deref().map(|h| h[1]), (n % 3 == 0).then_some(n));
                    }
                })
            })
            .collect();
        drop(tx);
        threads.into_iter().for_each(|t| t.join().unwrap());
        freer.join().unwrap();
    }
}
