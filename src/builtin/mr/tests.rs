//! Tests of the registration table and cache with the mock device of `tests_mock.rs`,
//! and of the userfaultfd monitor on real mappings (skipped, saying so, where the kernel or
//! the privileges do not allow userfaultfd).

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::cache::{Cache, Config};
use super::tests_mock::{dev_of, map_again_at, reg, uffd, watching, Map, Mock, LOCAL, PAGE, REMOTE};
use super::unmap;
use super::RegError;
use crate::device::*;

/// Writes one byte at `addr` on another thread; false if it did not finish within 5 s.
fn touch_within_5s(addr: u64) -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: `addr` lies in a live read/write mapping owned by the calling test.
        unsafe { core::ptr::write_volatile(addr as *mut u8, 1) };
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5)).is_ok()
}

#[test]
fn config_from_environment_values() {
    let env =
        |pairs: &'static [(&'static str, &'static str)]| move |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string());
    let (c, notes) = Config::parse(env(&[]));
    assert_eq!(c, Config::default());
    assert!(notes.is_empty());
    assert!(c.enabled);
    for off in ["0", "off", "NO", "false"] {
        let v: &'static str = off;
        let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([("DAT2_MR_CACHE", v)]));
        assert!(!Config::parse(env(pairs)).0.enabled, "{off}");
    }
    assert!(Config::parse(env(&[("DAT2_MR_CACHE", "1")])).0.enabled);
    let (c, notes) =
        Config::parse(env(&[("DAT2_MR_CACHE_MAX_ENTRIES", "7"), ("DAT2_MR_CACHE_MAX_BYTES", "64M"), ("DAT2_MR_CACHE_TTL", "0.5")]));
    assert_eq!((c.max_entries, c.max_bytes, c.ttl), (7, 64 << 20, Some(Duration::from_millis(500))));
    assert!(notes.is_empty());
    assert_eq!(Config::parse(env(&[("DAT2_MR_CACHE_MAX_BYTES", "2GiB")])).0.max_bytes, 2 << 30);
    assert_eq!(Config::parse(env(&[("DAT2_MR_CACHE_MAX_BYTES", "4096")])).0.max_bytes, 4096);
    assert_eq!(Config::parse(env(&[("DAT2_MR_CACHE_TTL", "0")])).0.ttl, None);
    let (c, notes) =
        Config::parse(env(&[("DAT2_MR_CACHE_MAX_ENTRIES", "many"), ("DAT2_MR_CACHE_MAX_BYTES", "1X"), ("DAT2_MR_CACHE_TTL", "-3")]));
    assert_eq!((c.max_entries, c.max_bytes, c.ttl), (Config::default().max_entries, Config::default().max_bytes, Config::default().ttl));
    assert_eq!(notes.len(), 3, "{notes:?}");
}

#[test]
fn hit_after_free() {
    let _watching = watching();
    if !uffd("hit_after_free") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(4);
    let r1 = reg(&c, &dev, 1, m.addr + 100, 3000, LOCAL);
    assert!(!r1.reused);
    assert_eq!(r1.mr.rkey, 0);
    c.release(&dev, &r1);
    assert_eq!(mock.counts(), (1, 0, 0), "kept, not deregistered");
    let s = c.stats();
    assert!(s.enabled, "{:?}", s.why_off);
    assert_eq!((s.entries, s.bytes, s.hits, s.misses), (1, 3000, 0, 1));
    let r2 = reg(&c, &dev, 1, m.addr + 100, 3000, LOCAL);
    assert!(r2.reused);
    assert_eq!(r2.mr, r1.mr, "the kept MR comes back");
    assert_eq!(mock.counts(), (1, 0, 0));
    let s = c.stats();
    assert_eq!((s.entries, s.bytes, s.hits, s.misses), (0, 0, 1, 1));
    // A live registration is shared as before, each LMR with keys of its own.
    let r3 = reg(&c, &dev, 1, m.addr + 100, 3000, LOCAL);
    assert!(r3.reused);
    assert_ne!(r3.mr.lkey, r2.mr.lkey);
    assert_eq!(mock.counts(), (1, 1, 0));
    c.release(&dev, &r3);
    assert_eq!(mock.counts(), (1, 1, 1));
    c.release(&dev, &r2);
    assert_eq!(c.stats().entries, 1);
    // Another PD, access or range is another key: a miss.
    let r4 = reg(&c, &dev, 2, m.addr + 100, 3000, LOCAL);
    let r5 = reg(&c, &dev, 1, m.addr + 100, 3000, Access::LOCAL_READ);
    let r6 = reg(&c, &dev, 1, m.addr, 3000, LOCAL);
    assert!(!r4.reused && !r5.reused && !r6.reused);
    assert_eq!(c.stats().misses, 4);
    for r in [r4, r5, r6] {
        c.release(&dev, &r);
    }
    assert_eq!(c.stats().entries, 4);
    assert_eq!(c.flush(&dev, None), 4);
    assert_eq!(mock.counts(), (4, 1, 5));
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn in_use_is_never_kept() {
    let _watching = watching();
    if !uffd("in_use_is_never_kept") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(4);
    // A request posted with the lkey is outstanding when the last LMR goes: the MR is
    // deregistered (a kept one would leave the lkey valid for that request), not kept.
    let r1 = reg(&c, &dev, 1, m.addr, 4 * PAGE, LOCAL);
    mock.in_use.lock().unwrap().insert(r1.mr.lkey);
    c.release(&dev, &r1);
    assert_eq!(mock.counts(), (1, 0, 1), "deregistered");
    assert_eq!(c.stats().entries, 0);
    assert!(mock.live.lock().unwrap().is_empty());
    // The next LMR of the range registers afresh, and with nothing outstanding is kept.
    let r2 = reg(&c, &dev, 1, m.addr, 4 * PAGE, LOCAL);
    assert!(!r2.reused);
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (2, 0, 1), "kept");
    assert_eq!(c.stats().entries, 1);
    // While another LMR shares the registration, freeing one revokes its own keys only,
    // outstanding requests or not; the last one decides.
    let r3 = reg(&c, &dev, 1, m.addr, 4 * PAGE, LOCAL);
    let r4 = reg(&c, &dev, 1, m.addr, 4 * PAGE, LOCAL);
    assert!(r3.reused && r4.reused);
    mock.in_use.lock().unwrap().insert(r3.mr.lkey);
    c.release(&dev, &r4);
    assert_eq!(mock.counts(), (2, 1, 2));
    c.release(&dev, &r3);
    assert_eq!(mock.counts(), (2, 1, 3), "the last LMR's MR was in use: deregistered");
    assert_eq!(c.stats().entries, 0);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn remote_access_is_registered_alone_unwatched_and_never_kept() {
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(2);
    let r1 = reg(&c, &dev, 1, m.addr, 2 * PAGE, REMOTE);
    let r2 = reg(&c, &dev, 1, m.addr, 2 * PAGE, REMOTE);
    assert!(!r1.reused && !r2.reused, "each LMR with remote access registers on its own");
    assert!(r1.mr.rkey != 0 && r2.mr.rkey != 0 && r1.mr.rkey != r2.mr.rkey, "each LMR has its own rkey");
    assert_eq!(mock.counts(), (2, 0, 0));
    assert_eq!(c.live(), 0, "not in the table: nothing can find it");
    if let Ok(mon) = unmap::monitor() {
        assert_eq!((mon.watches_at(m.addr), mon.watches_at(m.addr + PAGE)), (0, 0), "remote registrations are not watched");
    }
    c.release(&dev, &r1);
    assert_eq!(mock.counts(), (2, 0, 1), "the first LMR's keys are revoked at once");
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (2, 0, 2), "the last remote registration is deregistered, not kept");
    let s = c.stats();
    assert_eq!((s.entries, s.hits, s.misses), (0, 0, 0), "remote registrations are no cache misses");
    let r3 = reg(&c, &dev, 1, m.addr, 2 * PAGE, REMOTE);
    assert!(!r3.reused);
    assert_eq!(mock.counts().0, 3);
    c.release(&dev, &r3);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn on_iwarp_a_local_write_registration_is_never_kept() {
    let _watching = watching();
    if !uffd("on_iwarp_a_local_write_registration_is_never_kept") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    mock.iwarp.store(true, SeqCst);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let (w, r) = (reg(&c, &dev, 1, m.addr, PAGE, LOCAL), reg(&c, &dev, 1, m.addr, PAGE, Access::LOCAL_READ));
    assert_eq!(c.live(), 1, "only the read-only registration is in the cache");
    c.release(&dev, &w);
    c.release(&dev, &r);
    assert_eq!(mock.counts(), (2, 0, 1), "the remotely writable one deregistered at once, the read-only one kept");
    assert_eq!(c.flush(&dev, None), 1);
}

#[test]
fn a_local_registration_is_watched_and_kept_beside_remote_ones() {
    let _watching = watching();
    if !uffd("a_local_registration_is_watched_and_kept_beside_remote_ones") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(2);
    let remote = reg(&c, &dev, 1, m.addr, 2 * PAGE, REMOTE);
    let local = reg(&c, &dev, 1, m.addr, 2 * PAGE, LOCAL);
    let mon = unmap::monitor().unwrap();
    assert_eq!(mon.watches_at(m.addr), 1, "only the local registration is watched");
    c.release(&dev, &remote);
    c.release(&dev, &local);
    assert_eq!(mock.counts(), (2, 0, 1), "the remote one deregistered, the local one kept");
    let again = reg(&c, &dev, 1, m.addr, 2 * PAGE, LOCAL);
    assert!(again.reused);
    c.release(&dev, &again);
    assert_eq!(c.flush(&dev, None), 1);
    assert_eq!(mon.watches_at(m.addr), 0);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn switched_off_every_lmr_registers_on_its_own() {
    let c = Cache::new(Config { enabled: false, ..Config::default() });
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    let r2 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert!(!r1.reused && !r2.reused);
    assert_eq!(mock.counts(), (2, 0, 0));
    c.release(&dev, &r1);
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (2, 0, 2));
    let s = c.stats();
    assert!(!s.enabled);
    assert!(s.why_off.as_deref().is_some_and(|w| w.contains("DAT2_MR_CACHE=0")), "{s:?}");
    assert_eq!((s.hits, s.misses, s.entries), (0, 0, 0));
}

#[test]
fn a_device_that_does_not_opt_in_shares_live_and_keeps_nothing() {
    let c = Cache::new(Config::default());
    let mock = Mock::new(false);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r1 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    let r2 = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    assert!(r2.reused);
    assert_eq!(c.live(), 1);
    c.release(&dev, &r1);
    c.release(&dev, &r2);
    assert_eq!(mock.counts(), (1, 1, 2));
    assert_eq!(c.live(), 0);
    assert_eq!(c.stats().entries, 0);
    // Shared memory by cookie is unchanged too.
    let cookie = [7u8; super::COOKIE_SIZE];
    let s1 = c.register_shared(&dev, &cookie, Pd(1), m.addr, PAGE, LOCAL, false).unwrap();
    assert_eq!(c.register_shared(&dev, &cookie, Pd(1), m.addr, 2 * PAGE, LOCAL, false).unwrap_err(), RegError::CookieLength);
    let s2 = c.register_shared(&dev, &cookie, Pd(1), m.addr, PAGE, LOCAL, false).unwrap();
    assert!(s2.reused);
    c.release(&dev, &s1);
    c.release(&dev, &s2);
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn lru_bound_on_entries() {
    let _watching = watching();
    if !uffd("lru_bound_on_entries") {
        return;
    }
    let c = Cache::new(Config { max_entries: 2, ..Config::default() });
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let maps: Vec<Map> = (0..3).map(|_| Map::new(1)).collect();
    for m in &maps {
        let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
        c.release(&dev, &r);
    }
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.lru), (2, 1));
    assert_eq!(mock.counts(), (3, 0, 1));
    // The oldest went; the two newest are still there.
    let r = reg(&c, &dev, 1, maps[0].addr, PAGE, LOCAL);
    assert!(!r.reused);
    c.release(&dev, &r);
    let r = reg(&c, &dev, 1, maps[2].addr, PAGE, LOCAL);
    assert!(r.reused);
    c.release(&dev, &r);
    // Using an entry makes it the newest: maps[1] is now the oldest and goes next.
    assert_eq!(c.stats().evictions.lru, 2);
    let r = reg(&c, &dev, 1, maps[1].addr, PAGE, LOCAL);
    assert!(!r.reused);
    c.release(&dev, &r);
    // No entries at all: nothing is kept.
    let c0 = Cache::new(Config { max_entries: 0, ..Config::default() });
    let r = reg(&c0, &dev, 1, maps[0].addr + 8, 8, LOCAL);
    c0.release(&dev, &r);
    assert_eq!(c0.stats().entries, 0);
}

#[test]
fn a_live_entry_at_the_front_of_the_lru_is_not_evicted() {
    let _watching = watching();
    if !uffd("a_live_entry_at_the_front_of_the_lru_is_not_evicted") {
        return;
    }
    let c = Cache::new(Config { max_entries: 1, ..Config::default() });
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let maps: Vec<Map> = (0..3).map(|_| Map::new(1)).collect();
    let r = reg(&c, &dev, 1, maps[0].addr, PAGE, LOCAL);
    c.release(&dev, &r);
    // A hit: the entry is live again, and its LRU place (the oldest) stays.
    let live = reg(&c, &dev, 1, maps[0].addr, PAGE, LOCAL);
    assert!(live.reused);
    for m in &maps[1..] {
        let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
        c.release(&dev, &r);
    }
    // The bound passed once: the oldest kept entry went, not the live one in front of it.
    assert_eq!((c.stats().entries, c.stats().evictions.lru), (1, 1));
    c.release(&dev, &live);
    assert_eq!((c.stats().entries, c.stats().evictions.lru), (1, 2));
    // Released last, it is the one kept.
    let r = reg(&c, &dev, 1, maps[0].addr, PAGE, LOCAL);
    assert!(r.reused);
    c.release(&dev, &r);
    for m in &maps[1..] {
        let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
        assert!(!r.reused);
        c.release(&dev, &r);
    }
}

#[test]
fn lru_bound_on_bytes() {
    let _watching = watching();
    if !uffd("lru_bound_on_bytes") {
        return;
    }
    let c = Cache::new(Config { max_bytes: 2 * PAGE, ..Config::default() });
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let maps: Vec<Map> = (0..3).map(|_| Map::new(1)).collect();
    for m in &maps {
        let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
        c.release(&dev, &r);
    }
    let s = c.stats();
    assert_eq!((s.entries, s.bytes, s.evictions.lru), (2, 2 * PAGE, 1));
    // One registration larger than the bound is never kept, and evicts nothing.
    let big = Map::new(3);
    let r = reg(&c, &dev, 1, big.addr, 3 * PAGE, LOCAL);
    let before = mock.counts().2;
    c.release(&dev, &r);
    assert_eq!(mock.counts().2, before + 1);
    let s = c.stats();
    assert_eq!((s.entries, s.bytes, s.evictions.lru), (2, 2 * PAGE, 1));
    // A two-page entry pushes both one-page entries out.
    let two = Map::new(2);
    let r = reg(&c, &dev, 1, two.addr, 2 * PAGE, LOCAL);
    c.release(&dev, &r);
    let s = c.stats();
    assert_eq!((s.entries, s.bytes, s.evictions.lru), (1, 2 * PAGE, 3));
}

#[test]
fn collector_deregisters_unused_entries() {
    let _watching = watching();
    if !uffd("collector_deregisters_unused_entries") {
        return;
    }
    let c = Cache::new(Config { ttl: Some(Duration::from_millis(200)), ..Config::default() });
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(1);
    let r = reg(&c, &dev, 1, m.addr, PAGE, LOCAL);
    c.release(&dev, &r);
    assert_eq!(c.stats().entries, 1);
    let start = Instant::now();
    while mock.counts().2 == 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.collector), (0, 1), "{s:?}");
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert_eq!(mock.counts(), (1, 0, 1));
}

#[test]
fn flush_per_pd_and_per_device() {
    let _watching = watching();
    if !uffd("flush_per_pd_and_per_device") {
        return;
    }
    let c = Cache::new(Config::default());
    let (a, b) = (Mock::new(true), Mock::new(true));
    let (da, db) = (dev_of(&a), dev_of(&b));
    let m = Map::new(2);
    for (dev, pd) in [(&da, 1), (&da, 1), (&da, 2), (&db, 1)] {
        let off = c.stats().entries * 8;
        let r = reg(&c, dev, pd, m.addr + off, 8, LOCAL);
        c.release(dev, &r);
    }
    assert_eq!(c.stats().entries, 4);
    assert_eq!(c.flush(&da, Some(Pd(1))), 2);
    assert_eq!(a.counts().2, 2);
    assert_eq!(c.flush(&da, Some(Pd(1))), 0);
    assert_eq!(c.flush(&da, None), 1);
    assert_eq!(b.counts().2, 0, "another device's entries stay");
    assert_eq!(c.stats().entries, 1);
    assert_eq!(c.flush(&db, Some(Pd(1))), 1);
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.flush), (0, 4));
}

#[test]
fn out_of_resources_gives_back_kept_registrations() {
    let _watching = watching();
    if !uffd("out_of_resources_gives_back_kept_registrations") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::with_limit(true, 1);
    let dev = dev_of(&mock);
    let (m1, m2) = (Map::new(1), Map::new(1));
    let r = reg(&c, &dev, 1, m1.addr, PAGE, LOCAL);
    c.release(&dev, &r);
    let r = reg(&c, &dev, 1, m2.addr, PAGE, LOCAL);
    assert_eq!(mock.counts(), (2, 0, 1));
    assert_eq!(c.stats().evictions.lru, 1);
    // With the one live registration the device really is full.
    assert_eq!(c.register_range(&dev, Pd(1), m1.addr, PAGE, LOCAL, false).unwrap_err(), RegError::Device(DevError::NoResources));
    c.release(&dev, &r);
    // A registration with remote access, made outside the table, gets the kept one back too.
    assert_eq!(c.stats().entries, 1);
    let r = reg(&c, &dev, 1, m1.addr, PAGE, REMOTE);
    assert_eq!((c.stats().entries, c.stats().evictions.lru), (0, 2));
    assert_eq!(mock.counts(), (3, 0, 2));
    c.release(&dev, &r);
    assert!(mock.live.lock().unwrap().is_empty());
}

// ---- the monitor on real memory --------------------------------------------------------------

#[test]
fn munmap_evicts_and_a_new_mapping_registers_afresh() {
    let _watching = watching();
    if !uffd("munmap_evicts_and_a_new_mapping_registers_afresh") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    // Other tests map memory concurrently and may take the freed address: try again then.
    for attempt in 0.. {
        assert!(attempt < 50, "the freed address was always taken by another mapping");
        let s0 = c.stats();
        let (regs0, _, deregs0) = mock.counts();
        let mut m = Map::new(4);
        let addr = m.addr;
        let r = reg(&c, &dev, 1, addr + 10, 3 * PAGE, LOCAL);
        c.release(&dev, &r);
        assert_eq!(c.stats().entries, 1);
        m.unmap();
        let s = c.stats();
        assert_eq!((s.entries, s.evictions.unmap), (0, s0.evictions.unmap + 1), "{s:?}");
        assert_eq!(mock.counts(), (regs0 + 1, 0, deregs0 + 1));
        // The same address mapped again is other memory: a miss.
        let Some(m2) = map_again_at(addr, 4) else { continue };
        let r = reg(&c, &dev, 1, addr + 10, 3 * PAGE, LOCAL);
        assert!(!r.reused);
        assert_eq!(c.stats().misses, s0.misses + 2);
        c.release(&dev, &r);
        // Unmapping part of the range is enough.
        // SAFETY: unmaps the last page of the test's own mapping m2.
        unsafe { libc::munmap((addr + 3 * PAGE) as *mut _, PAGE as usize) };
        let s = c.stats();
        assert_eq!((s.entries, s.evictions.unmap), (0, s0.evictions.unmap + 2));
        drop(m2);
        break;
    }
}

/// A new cache and mock device with one kept registration of a new mapping of `pages`; None
/// (the test skipped, saying so) without userfaultfd.
fn kept_range(test: &str, pages: u64) -> Option<(Arc<Cache>, Arc<dyn Device>, Map)> {
    let _watching = watching();
    if !uffd(test) {
        return None;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(pages);
    let r = reg(&c, &dev, 1, m.addr, pages * PAGE, LOCAL);
    c.release(&dev, &r);
    Some((c, dev, m))
}

#[test]
fn mmap_fixed_over_a_kept_range_evicts() {
    let Some((c, dev, m)) = kept_range("mmap_fixed_over_a_kept_range_evicts", 2) else { return };
    // Replacing the mapping in place (no gap another thread could take) is an unmap too.
    let again = Map::at(m.addr, 1, libc::MAP_FIXED);
    assert_eq!(again.addr, m.addr);
    core::mem::forget(again);
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.unmap), (0, 1), "{s:?}");
    let r = reg(&c, &dev, 1, m.addr, 2 * PAGE, LOCAL);
    assert!(!r.reused);
    c.release(&dev, &r);
}

/// A known hole (mr/SAFETY.md, "Not answered"): shmat(2) with SHM_REMAP
/// replaces the pages of a watched range, and the kernel reports no event for it (do_shmat maps
/// with no userfaultfd unmap list), so the kept registration of the old pages is served again.
/// UCX's memory hooks had the same hole (openucx/ucx#2731). Run with `--ignored`; it still fails
/// on Linux 6.18. SAFETY.md says what closing it would cost (a system call on every hit, or a
/// `shmat` hook that programs bound to glibc's never reach) and why neither is done.
#[test]
#[ignore = "known hole: shmat(SHM_REMAP) over a kept range raises no userfaultfd event; no fix fits the hit path (mr/SAFETY.md)"]
fn shmat_remap_over_a_kept_range_evicts() {
    let Some((c, dev, m)) = kept_range("shmat_remap_over_a_kept_range_evicts", 2) else { return };
    assert_eq!(c.stats().entries, 1);
    // SAFETY: a new private SysV segment, attached over the test's own mapping m (SHM_REMAP
    // replaces it in place), then detached and removed; m is not used through its old pages.
    let attached = unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, (2 * PAGE) as usize, libc::IPC_CREAT | 0o600);
        assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
        let p = libc::shmat(id, m.addr as *const _, libc::SHM_REMAP);
        libc::shmctl(id, libc::IPC_RMID, core::ptr::null_mut());
        assert_ne!(p as isize, -1, "shmat: {}", std::io::Error::last_os_error());
        p
    };
    assert_eq!(attached as u64, m.addr);
    let s = c.stats();
    let again = reg(&c, &dev, 1, m.addr, 2 * PAGE, LOCAL);
    let stale = again.reused;
    c.release(&dev, &again);
    // SAFETY: detaches the segment attached above; m's Drop then unmaps nothing of ours.
    unsafe { libc::shmdt(attached) };
    assert!(!stale && s.entries == 0, "the registration of the replaced pages was served again: {s:?}");
}

#[test]
fn madvise_dontneed_evicts_and_faults_do_not_hang() {
    let _watching = watching();
    if !uffd("madvise_dontneed_evicts_and_faults_do_not_hang") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(4);
    // Populate first, as a pinning device would have.
    for p in 0..4 {
        // SAFETY: inside the test's own read/write mapping.
        unsafe { core::ptr::write_volatile((m.addr + p * PAGE) as *mut u8, 7) };
    }
    let r = reg(&c, &dev, 1, m.addr, 4 * PAGE, LOCAL);
    c.release(&dev, &r);
    assert_eq!(c.stats().entries, 1);
    // SAFETY: discards two pages of the test's own mapping.
    let rc = unsafe { libc::madvise((m.addr + PAGE) as *mut _, 2 * PAGE as usize, libc::MADV_DONTNEED) };
    assert_eq!(rc, 0);
    // Touch a discarded page at once, before the cache looked at the event: it must not hang.
    assert!(touch_within_5s(m.addr + PAGE + 5), "a fault after MADV_DONTNEED hung");
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.unmap), (0, 1), "{s:?}");
    assert_eq!(mock.counts(), (1, 0, 1));
    // SAFETY: reads inside the test's own mapping.
    assert_eq!(unsafe { core::ptr::read_volatile((m.addr + 2 * PAGE) as *const u8) }, 0, "discarded pages read as zero");
    // SAFETY: as above.
    assert_eq!(unsafe { core::ptr::read_volatile(m.addr as *const u8) }, 7);
}

#[test]
fn mremap_evicts() {
    let _watching = watching();
    if !uffd("mremap_evicts") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(2);
    let r = reg(&c, &dev, 1, m.addr, 2 * PAGE, LOCAL);
    c.release(&dev, &r);
    // Move the pages elsewhere (growing them too); the old range is gone.
    let dest = Map::new(4);
    // SAFETY: moves the test's own mapping onto the test's own destination mapping.
    let moved = unsafe {
        libc::mremap(
            m.addr as *mut _,
            2 * PAGE as usize,
            4 * PAGE as usize,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dest.addr as *mut libc::c_void,
        )
    };
    assert_eq!(moved as u64, dest.addr, "mremap: {}", std::io::Error::last_os_error());
    core::mem::forget(m);
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.unmap), (0, 1), "{s:?}");
    assert_eq!(mock.counts(), (1, 0, 1));
    // The moved pages and the grown tail fault normally at their new address.
    for p in 0..4 {
        assert!(touch_within_5s(dest.addr + p * PAGE), "a fault on moved page {p} hung");
    }
}

#[test]
fn a_live_registration_over_changed_memory_is_not_shared() {
    let _watching = watching();
    if !uffd("a_live_registration_over_changed_memory_is_not_shared") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(2);
    let addr = m.addr;
    let old = reg(&c, &dev, 1, addr, 2 * PAGE, LOCAL);
    // New memory at the same address while the LMR lives (MAP_FIXED replaces it in place).
    let m2 = Map::at(addr, 2, libc::MAP_FIXED);
    assert_eq!(m2.addr, addr);
    core::mem::forget(m);
    let new = reg(&c, &dev, 1, addr, 2 * PAGE, LOCAL);
    assert!(!new.reused, "an LMR over remapped memory must not reuse the old registration");
    assert_eq!(mock.counts(), (2, 0, 0));
    assert_eq!(c.stats().evictions.unmap, 1);
    // The stale one goes with its last LMR; the new one is kept.
    c.release(&dev, &old);
    assert_eq!(mock.counts(), (2, 0, 1));
    c.release(&dev, &new);
    assert_eq!(c.stats().entries, 1);
    let again = reg(&c, &dev, 1, addr, 2 * PAGE, LOCAL);
    assert!(again.reused);
    assert_eq!(again.mr, new.mr);
    c.release(&dev, &again);
}

#[test]
fn a_fault_on_a_watched_page_does_not_hang_and_evicts() {
    let _watching = watching();
    if !uffd("a_fault_on_a_watched_page_does_not_hang_and_evicts") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let m = Map::new(3);
    // The mock pins nothing, so these pages are still missing when first touched.
    let r = reg(&c, &dev, 1, m.addr, 3 * PAGE, LOCAL);
    c.release(&dev, &r);
    assert!(touch_within_5s(m.addr + PAGE), "a fault on a watched page hung");
    let s = c.stats();
    assert_eq!((s.entries, s.evictions.unmap), (0, 1), "{s:?}");
    for p in [0, 2] {
        assert!(touch_within_5s(m.addr + p * PAGE));
    }
}

#[test]
fn file_and_shared_mappings_are_not_kept() {
    let _watching = watching();
    if !uffd("file_and_shared_mappings_are_not_kept") {
        return;
    }
    let c = Cache::new(Config::default());
    let mock = Mock::new(true);
    let dev = dev_of(&mock);
    let len = 2 * PAGE as usize;
    // SAFETY: new shared anonymous mapping, unmapped below.
    let shared = unsafe {
        libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(shared, libc::MAP_FAILED);
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    // SAFETY: a private read-only mapping of our own executable, unmapped below.
    let mapped =
        unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, std::os::fd::AsRawFd::as_raw_fd(&file), 0) };
    assert_ne!(mapped, libc::MAP_FAILED);
    let r = reg(&c, &dev, 1, mapped as u64, PAGE, Access::LOCAL_READ);
    c.release(&dev, &r);
    assert_eq!(c.stats().entries, 0, "a file mapping cannot be watched, so it is not kept");
    let r = reg(&c, &dev, 1, shared as u64, PAGE, LOCAL);
    c.release(&dev, &r);
    let kept = c.stats().entries;
    // Shared memory is recognised where the kernel offers MINOR registration of shmem (5.14+).
    if unmap::monitor().map(|m| m.tells_shared_memory()).unwrap_or(false) {
        assert_eq!(kept, 0, "shared memory is not kept");
    } else {
        eprintln!("note: this kernel cannot tell shared from private memory through userfaultfd");
    }
    c.flush(&dev, None);
    // SAFETY: unmaps the two mappings made above.
    unsafe {
        libc::munmap(shared, len);
        libc::munmap(mapped, len);
    }
    assert!(mock.live.lock().unwrap().is_empty());
}

#[test]
fn unregister_skips_what_the_kernel_dropped() {
    use super::unmap::still_registered;
    let r = (0x10000, 0x20000);
    assert_eq!(still_registered(r, &[]), vec![r]);
    // Not gone (a fault resolved without unregistering): still ours to unregister.
    assert_eq!(still_registered(r, &[(0x10000, 0x20000, false)]), vec![r]);
    assert_eq!(still_registered(r, &[(0x0, 0x30000, true)]), vec![]);
    assert_eq!(still_registered(r, &[(0x14000, 0x16000, true)]), vec![(0x10000, 0x14000), (0x16000, 0x20000)]);
    assert_eq!(
        still_registered(r, &[(0x8000, 0x12000, true), (0x1f000, 0x40000, true), (0x30000, 0x31000, true)]),
        vec![(0x12000, 0x1f000)]
    );
}
