//! One spare `Arc` allocation of a type, kept from the last value freed for the next one made:
//! an object that is made and freed in turn (an LMR over a cached registration, made and freed
//! around each transfer) then costs no `malloc` and no `free`, two swaps instead.
//!
//! The value is dropped as usual when its last reference goes through [`Spare::recycle`];
//! only the memory is kept, and only when nobody else holds a reference. Kept memory holds no
//! value, so nothing the value owned (a PZ, a registration) outlives it.

use core::mem::MaybeUninit;
use core::ptr;
use std::sync::atomic::{fence, AtomicPtr, Ordering};
use std::sync::Arc;

pub struct Spare<T>(AtomicPtr<T>);

impl<T> Spare<T> {
    pub const fn new() -> Spare<T> {
        Spare(AtomicPtr::new(ptr::null_mut()))
    }

    /// `Arc::new(make())`, in the spare allocation when there is one: inlined, so that a large
    /// value is built straight into that memory instead of on the stack and then copied.
    #[inline(always)]
    pub fn arc_with(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let p = self.0.swap(ptr::null_mut(), Ordering::Acquire);
        if p.is_null() {
            return Arc::new(make());
        }
        // SAFETY: `p` came from `Arc::into_raw` of an `Arc<T>` that was the only reference to
        // its allocation (strong 1, weak 1 counting the strongs' own), whose value was then
        // dropped (`recycle`); the swap made this thread its only owner. Writing the new value
        // makes it an `Arc<T>` again, as `Arc::get_mut_unchecked` would.
        unsafe {
            p.write(make());
            Arc::from_raw(p)
        }
    }

    /// Drops `arc`; when it was the last reference, its value is dropped and its memory kept
    /// for the next [`Spare::arc_with`] (the one kept before is freed).
    #[inline]
    pub fn recycle(&self, arc: Arc<T>) {
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
    struct Counted<'a>(&'a AtomicUsize, u64);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_memory_is_reused_and_every_value_dropped_once() {
        let drops = AtomicUsize::new(0);
        let spare = Spare::new();
        let a = spare.arc_with(|| Counted(&drops, 1));
        let first = Arc::as_ptr(&a);
        spare.recycle(a);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the value goes with its last reference");
        let b = spare.arc_with(|| Counted(&drops, 2));
        assert_eq!(Arc::as_ptr(&b), first, "the allocation is reused");
        assert_eq!(b.1, 2);
        // Another reference: dropped normally, nothing kept.
        let other = b.clone();
        spare.recycle(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let c = spare.arc_with(|| Counted(&drops, 3));
        assert_ne!(Arc::as_ptr(&c), first, "nothing was kept while another reference lived");
        drop(other);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        // A weak reference also keeps it from being kept.
        let weak = Arc::downgrade(&c);
        spare.recycle(c);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert!(weak.upgrade().is_none());
        // Two recycled in turn: the second replaces (frees) the first.
        let (d, e) = (spare.arc_with(|| Counted(&drops, 4)), spare.arc_with(|| Counted(&drops, 5)));
        spare.recycle(d);
        spare.recycle(e);
        drop(spare);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn threads_making_and_freeing_share_it_safely() {
        static SPARE: Spare<Vec<u64>> = Spare::new();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                std::thread::spawn(move || {
                    for n in 0..20_000u64 {
                        let v = SPARE.arc_with(|| vec![t, n]);
                        assert_eq!(*v, [t, n]);
                        let held = (n % 3 == 0).then(|| v.clone());
                        SPARE.recycle(v);
                        assert_eq!(held.as_deref().map(|h| h[1]), (n % 3 == 0).then_some(n));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
    }
}
