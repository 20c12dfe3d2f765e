//! Tests of the cache's hot slot (`cache/hot.rs`) with the mock device of `tests.rs`: a hit and
//! its free made without the lock, and what a locked section, an outstanding request or a
//! change to the memory does to a registration parked or claimed there.

use std::collections::HashSet;
use std::sync::Mutex;

use super::cache::{Cache, Config};
use super::tests::{dev_of, reg, uffd, Map, Mock, LOCAL, PAGE};

#[test]
fn a_hit_and_its_free_go_through_the_hot_slot() {
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
