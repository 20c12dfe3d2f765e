//! Tests of the cache's hot slot (`cache/hot.rs`) with the mock device of `tests_mock.rs`: a
//! hit and its free made without the lock, and what a locked section, an outstanding request
//! or a change to the memory does to a registration parked or claimed there.

use std::collections::HashSet;
use std::sync::Mutex;

use super::cache::{Cache, Config};
use super::tests_mock::{dev_of, reg, uffd, Map, Mock, LOCAL, PAGE, WATCHING};

/// Taken by each test here, alone among all that watch memory (`tests_mock::WATCHING`): the
/// stress test's unmaps reach every cache's ring, and a hit that finds something queued
/// rightly takes the locked path, which the others assert it does not.
fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    WATCHING.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_hit_and_its_free_go_through_the_hot_slot() {
    let _alone = alone();
    if !uffd("a_hit_and_its_free_go_through_the_hot_slot") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert_eq!(r1.hot, 0, "a miss");
    c.release(&dev, &r1);
    for _ in 0..3 {
        let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
        assert_ne!(r.hot, 0, "taken from the slot");
        assert!(r.reused);
        assert_eq!(r.mr, r1.mr, "the kept MR comes back");
        c.release(&dev, &r);
    }
    // Another PD is another key: not the parked one.
    let other = reg(&c, &dev, 2, m.addr, PAGE, LOCAL);
    assert!(!other.reused && other.hot == 0);
    c.release(&dev, &other);
    assert_eq!(mock.counts(), (2, 0, 0), "nothing deregistered");
    let s = c.stats();
    assert_eq!((s.entries, s.bytes, s.hits, s.misses), (2, 2 * PAGE, 3, 2));
    assert_eq!(c.counters(), (2, 3));
    // `stats` took the slot back: the next hit is a locked one, and its free parks it again.
    let r = reg(&c, &dev, 2, m.addr, PAGE, LOCAL);
    assert!(r.reused && r.hot == 0);
    c.release(&dev, &r);
    let r = reg(&c, &dev, 2, m.addr, PAGE, LOCAL);
    assert_ne!(r.hot, 0);
    c.release(&dev, &r);
    assert_eq!(c.flush(&dev, None), 2, "a parked registration is flushed as a kept one");
    assert_eq!(mock.counts(), (2, 0, 2));
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn a_claimed_registration_in_use_at_its_free_is_deregistered() {
    let _alone = alone();
    if !uffd("a_claimed_registration_in_use_at_its_free_is_deregistered") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r1);
    let r2 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert_ne!(r2.hot, 0);
    mock.in_use.lock().unwrap().insert(r2.mr.lkey);
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (1, 0, 1), "deregistered, not parked");
    assert_eq!(c.stats().entries, 0);
    let r3 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert!(!r3.reused, "nothing was kept");
    mock.in_use.lock().unwrap().clear();
    c.release(&dev, &r3);
    c.flush(&dev, None);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn a_locked_section_during_a_claim_makes_it_an_ordinary_live_registration() {
    let _alone = alone();
    if !uffd("a_locked_section_during_a_claim_makes_it_an_ordinary_live_registration") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r1);
    let r2 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert_ne!(r2.hot, 0);
    // A second LMR of the range meanwhile (through the lock) shares it, with keys of its own.
    let r3 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert!(r3.reused && r3.hot == 0);
    assert_ne!(r3.mr.lkey, r2.mr.lkey);
    assert_eq!((c.stats().entries, c.live()), (0, 1), "live, not kept");
    // The claim was taken back: the free takes the locked path, and revokes its own keys only.
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (1, 1, 1));
    c.release(&dev, &r3);
    assert_eq!(mock.counts(), (1, 1, 1), "the last one is kept");
    assert_eq!(c.stats().entries, 1);
    assert_eq!(c.flush(&dev, None), 1);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn memory_unmapped_while_parked_or_claimed_is_never_served() {
    let _alone = alone();
    if !uffd("memory_unmapped_while_parked_or_claimed_is_never_served") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    // Parked: the next registration of the range finds the change queued, and misses.
    let mut m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r1);
    m.unmap();
    let r2 = c.register_range(&dev, crate::device::Pd(1), m.addr, PAGE, LOCAL, false).expect("register");
    assert!(!r2.reused && r2.hot == 0, "a registration of unmapped memory was served");
    c.release(&dev, &r2);
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.unmap), (0, 1), "{s:?}");
    // Claimed: its free parks it again (no lock), and the next hit still finds the change.
    let mut m = Map::new(1);
    let r3 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r3);
    let r4 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert_ne!(r4.hot, 0);
    m.unmap();
    c.release(&dev, &r4);
    let r5 = c.register_range(&dev, crate::device::Pd(1), m.addr, PAGE, LOCAL, false).expect("register");
    assert!(!r5.reused, "a registration of unmapped memory was served");
    c.release(&dev, &r5);
    c.flush(&dev, None);
    assert_eq!(c.stats().evictions.unmap, 2);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn threads_hitting_one_range_while_others_take_the_lock() {
    let _alone = alone();
    if !uffd("threads_hitting_one_range_while_others_take_the_lock") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r);
    // Key sets held by a live registration now: never two holders of one.
    let held = Mutex::new(HashSet::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..20_000 {
                    let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
                    assert!(held.lock().unwrap().insert(r.mr.id), "key set {} handed out twice", r.mr.id);
                    assert!(held.lock().unwrap().remove(&r.mr.id));
                    c.release(&dev, &r);
                }
            });
        }
        s.spawn(|| {
            for i in 0..3_000 {
                let _ = c.stats();
                if i % 100 == 0 {
                    c.flush(&dev, None);
                }
            }
        });
    });
    c.flush(&dev, None);
    assert!(mock.live.lock().unwrap().is_empty(), "a key set leaked");
    let (regs, aliases, deregs) = mock.counts();
    assert_eq!(regs + aliases, deregs);
    let s = c.stats();
    assert_eq!(s.hits + s.misses + aliases, 60_001, "{s:?}");
}

/// One thread registers a range around each transfer and unmaps and maps it again between, while
/// others cycle the hot slot through a range of their own and take the lock (each lock takes the
/// slot back and drains the monitor's ring): a registration made after `munmap` returned is never
/// the kept one of the old pages, whoever parked, claimed or drained meanwhile, and no key set
/// leaks. (Checked to fail with `hot_hit`'s `queued` check left out, and with `Hot::unpark`
/// keeping the generation, where a stale claim's free re-parks another thread's claim.)
#[test]
fn a_hit_racing_drains_never_serves_memory_unmapped_before_it() {
    let _alone = alone();
    if !uffd("a_hit_racing_drains_never_serves_memory_unmapped_before_it") {
        return;
    }
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let a = Map::new(1);
    let b = Map::new(1);
    let addr = a.addr;
    std::mem::forget(a);
    let done = AtomicBool::new(false);
    let remap = || {
        // SAFETY: a fresh anonymous page at an address only this test maps (`Map::new`), which
        // MAP_FIXED_NOREPLACE never takes from anyone.
        let p = unsafe {
            libc::mmap(
                addr as *mut _,
                PAGE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        assert_eq!(p as u64, addr, "mmap: {}", std::io::Error::last_os_error());
    };
    let mut stale = 0;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(SeqCst) {
                    let r = reg(&c, &dev, 1, b.addr, PAGE, LOCAL);
                    c.release(&dev, &r);
                }
            });
        }
        s.spawn(|| {
            while !done.load(SeqCst) {
                let _ = c.stats();
                std::thread::yield_now();
            }
        });
        // Stops the others however this thread leaves the loop (a failed assertion included).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let _stop = Stop(&done);
        for i in 0..3_000 {
            // Kept, and (when nobody parked another since) parked; a claim of it half the time.
            let r = reg(&c, &dev, 1, addr, PAGE, LOCAL);
            c.release(&dev, &r);
            let held = (i % 2 == 0).then(|| reg(&c, &dev, 1, addr, PAGE, LOCAL));
            // SAFETY: the page mapped at `addr` above (or by `Map::new`), used by nobody else.
            unsafe { libc::munmap(addr as *mut _, PAGE as usize) };
            if let Some(r) = held {
                c.release(&dev, &r);
            }
            remap();
            let fresh = reg(&c, &dev, 1, addr, PAGE, LOCAL);
            if fresh.reused {
                stale += 1;
            }
            c.release(&dev, &fresh);
        }
    });
    // SAFETY: the page this test mapped last.
    unsafe { libc::munmap(addr as *mut _, PAGE as usize) };
    assert_eq!(stale, 0, "registrations of unmapped pages served");
    c.flush(&dev, None);
    let _ = c.stats();
    assert!(mock.live.lock().unwrap().is_empty(), "a key set leaked");
    let (regs, aliases, deregs) = mock.counts();
    assert_eq!(regs + aliases, deregs);
}
