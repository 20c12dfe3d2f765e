//! The registration table and cache, generic over [`Device`].
//!
//! Three ways a range registration is handled, chosen per device:
//! - **Share** (a device that does not opt in, such as the soft device): a registration is
//!   reused while another LMR of the same key is alive, and deregistered with its last LMR.
//! - **Cache** (a device whose [`Device::cache_registrations`] is true, with the cache on): the
//!   range is watched by the userfaultfd monitor ([`super::unmap`]) from the moment it is first
//!   registered. When the last LMR goes and the registration has no remote access (rkey 0), the
//!   device MR is kept in an LRU instead of being deregistered (unless a request posted with
//!   its lkey is still outstanding, [`Device::mr_in_use`]: a kept MR's lkey stays valid, and
//!   such a request would go on using the memory after `dat_lmr_free` returned; the MR is then
//!   deregistered, which the device completes in error), and a later registration of the
//!   same (device, PD, range, access, address type) takes it back: a hit.
//!   A watched range that is unmapped, remapped or discarded makes its registrations stale: a
//!   kept one is deregistered at once, a live one leaves the lookup table (later LMRs register
//!   afresh) and is deregistered with its last LMR. A range that cannot be watched is
//!   registered for its LMR alone and never shared or kept.
//! - **Remote** (a registration with remote access on a device that opts in, cache on or off):
//!   registered for its LMR alone, like Private, with no watch. It is never kept, so a freed
//!   LMR's rkey never stays usable by a peer; and the watch would only serve to share it
//!   between LMRs that live at the same time, which without a watch could hand a later LMR a
//!   registration of pages since unmapped. Such sharing saves nothing on these devices (the
//!   verbs device's `alias_mr` is a registration of its own), while the watch cost 4-5x a
//!   registration on Soft-RoCE: the `UFFDIO_REGISTER` and its probe, and a `munmap` that
//!   waits for the monitor's thread.
//! - **Private** (a device that opts in, with the cache off): every LMR registers on its own,
//!   since without the monitor nothing proves that the memory under an older registration is
//!   still the same.
//!
//! Kept registrations also go when the LRU bounds (entries, bytes) are passed, when they were
//! unused for the TTL (a collector thread, started with the first watched registration, which
//! also applies the monitor's events promptly), when their PD or device is flushed
//! ([`Cache::flush`], before `dealloc_pd` and at IA close), and when the device runs out of
//! resources for a new registration.
//!
//! The kept registration released last is parked in a hot slot (`cache/hot.rs`): the next hit
//! of its range takes it, and that LMR's free parks it again, without the lock (a program that
//! registers one buffer around each transfer then never takes it). Every locked section first
//! takes the slot back into the table (`Cache::unpark`).
//!
//! One lock guards the table. Registrations are made under it; evicted ones are deregistered
//! just after it is given back (a deregistration unpins every page, and the collector thread
//! should not hold up a lookup meanwhile), under a second lock that [`Cache::flush`] and
//! [`Cache::stats`] wait for, so a flush that returns has left no deregistration in flight.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

pub use super::config::Config;
use super::entries::Entries;
use super::stats::Cause;
pub use super::stats::{CacheStats, Evictions};
use super::unmap::{self, Monitor, RingId};
use super::{dev_id, Cookie, Key, RegError, Registration};
use crate::dbg_log;
use crate::device::{Access, DevError, Device, Mr, Pd};
use crate::log::DbgType;
use crate::util::idmap::IdMap;
use crate::util::sync::MutexExt;
use hot::{Hot, RangeKey};

mod hot;

/// How long the collector sleeps when it has nothing to expire.
const IDLE_WAIT: Duration = Duration::from_secs(10);
/// How soon the background thread tries again when another thread held the cache's lock (that
/// thread applies the reported changes itself; the collector may still be due).
const GRACE: Duration = Duration::from_millis(2);

struct Entry {
    key: Key,
    dev: Arc<dyn Device>,
    pd: Pd,
    /// The key sets (one per live LMR) over this registration; new ones derive from the first.
    members: Vec<Mr>,
    /// The key set kept while no LMR uses the registration.
    cached: Option<Mr>,
    /// The range the registration was made with (a cookie's LMRs must all ask for it).
    addr: u64,
    len: u64,
    /// The page range the monitor watches for this registration.
    watch: Option<(u64, u64)>,
    /// Whether lookups find it (false once stale).
    indexed: bool,
    /// Its place in the LRU (0: none), and the time of its last release. A hit leaves the
    /// place where it was, so that the next release of the newest entry need not move it (a
    /// live entry's place is dropped when the front reaches it, see [`State::lru`]).
    seq: u64,
    released: Duration,
}

impl Entry {
    /// A registration of `[addr, addr+len)` just made for its first LMR.
    fn new(key: Key, dev: &Arc<dyn Device>, pd: Pd, mr: Mr, addr: u64, len: u64, watch: Option<(u64, u64)>) -> Entry {
        Entry {
            key,
            dev: dev.clone(),
            pd,
            members: vec![mr],
            cached: None,
            addr,
            len,
            watch,
            indexed: true,
            seq: 0,
            released: coarse_now(),
        }
    }
}

#[derive(Default)]
struct State {
    entries: Entries<Entry>,
    index: IdMap<Key, u64>,
    /// Entries by `seq`, oldest first: every kept entry, and live ones that were kept before
    /// their last hit (at most one place per entry; whoever takes from the front drops those).
    lru: BTreeMap<u64, u64>,
    /// The entry released last while kept (0: none), which a lookup tries before the index:
    /// a program that registers one buffer around each transfer finds it without a hash.
    last: u64,
    next_seq: u64,
    kept: u64,
    kept_bytes: u64,
    /// Evicted registrations still to deregister: [`Locked`] does it once the lock is given
    /// back, so that a deregistration (a system call that unpins every page) never holds up
    /// another thread's lookup.
    doomed: Vec<(Arc<dyn Device>, Mr)>,
    /// The entry parked in the hot slot ([`Cache::hot`]) when the lock was last given back, and
    /// its MR. While it is there, its `cached` and `members` are empty and the slot says which
    /// it is; `kept` and `kept_bytes` count it. Every locked section starts by taking it back
    /// ([`Cache::unpark`]), so code under the lock never sees it.
    hot: Option<(u64, Mr)>,
}

/// Deregisters evicted registrations.
fn dereg_all(doomed: Vec<(Arc<dyn Device>, Mr)>) {
    for (dev, mr) in doomed {
        dev.dereg_mr(&mr);
    }
}

impl State {
    /// Deregisters the evicted registrations now (under the lock: a caller that needs their
    /// resources back before it goes on).
    fn reap(&mut self) {
        dereg_all(std::mem::take(&mut self.doomed));
    }
}

/// The cache's lock, held; on release it deregisters what was evicted meanwhile, holding the
/// cache's `reaping` lock (taken before the state's is given back) until it is done, so that
/// [`Cache::wait_reaped`] can wait for deregistrations in flight.
struct Locked<'a>(Option<MutexGuard<'a, State>>, &'a Mutex<()>);

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.0.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.0.as_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        let Some(st) = self.0.take() else { return };
        if !st.doomed.is_empty() {
            reap_unlocked(st, self.1);
        }
    }
}

/// [`Locked`]'s release when it evicted something (most releases did not: kept out of line).
#[cold]
#[inline(never)]
fn reap_unlocked(mut st: MutexGuard<'_, State>, reaping: &Mutex<()>) {
    let doomed = std::mem::take(&mut st.doomed);
    let _reaping = reaping.locked();
    drop(st);
    dereg_all(doomed);
}

impl State {
    fn insert(&mut self, e: Entry) -> u64 {
        let indexed = e.indexed.then(|| e.key.clone());
        let id = self.entries.insert(e);
        if let Some(key) = indexed {
            self.index.insert(key, id);
        }
        id
    }

    /// Takes an entry out of every structure.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(id)?;
        if e.indexed && self.index.get(&e.key) == Some(&id) {
            self.index.remove(&e.key);
        }
        if e.seq != 0 {
            self.lru.remove(&e.seq);
        }
        if let Some(mr) = &e.cached {
            self.kept -= 1;
            self.kept_bytes -= mr.len;
        }
        Some(e)
    }

    /// The indexed entry of `key`: the one released last if it is that one (an entry indexed
    /// under `key` is the only one, see `insert`), else the index's.
    #[inline]
    fn lookup(&self, key: &Key) -> Option<u64> {
        if self.entries.get(self.last).is_some_and(|e| e.indexed && e.key == *key) {
            return Some(self.last);
        }
        self.index.get(key).copied()
    }

    /// The oldest kept entry; the places of live entries found before it are dropped.
    fn oldest_kept(&mut self) -> Option<u64> {
        while let Some((&seq, &id)) = self.lru.first_key_value() {
            match self.entries.get_mut(id) {
                Some(e) if e.cached.is_some() => return Some(id),
                Some(e) => e.seq = 0,
                None => {}
            }
            self.lru.remove(&seq);
        }
        None
    }

    /// The kept entries whose device (and PD, if given) match.
    fn kept_of(&self, dev: usize, pd: Option<Pd>) -> Vec<u64> {
        let kept = |e: &Entry| e.cached.is_some() && dev_id(&e.dev) == dev && pd.is_none_or(|p| p == e.pd);
        self.lru.values().copied().filter(|id| self.entries.get(*id).is_some_and(kept)).collect()
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Share,
    Cache(&'static Monitor),
    Private,
}

pub struct Cache {
    config: Config,
    state: Mutex<State>,
    /// One kept registration that a hit takes and its free puts back without the lock.
    hot: Hot,
    /// Held while evicted registrations are deregistered outside `state` (see [`Locked`]).
    reaping: Mutex<()>,
    ring: OnceLock<Option<RingId>>,
    worker: AtomicBool,
    told_off: AtomicBool,
    me: Weak<Cache>,
    registrations: AtomicU64,
    reuses: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evicted: [AtomicU64; 4],
}

/// The monotonic clock at its coarse (tick) resolution, which is plenty for a TTL of seconds:
/// the vDSO answers it from the last tick without reading a clocksource, so it never becomes a
/// system call, where the fine clock does on hosts (and VMs) whose clocksource the vDSO cannot
/// read. Every release stamps its entry, so this is on the re-registration path.
fn coarse_ns() -> u64 {
    coarse_now().as_nanos() as u64
}

/// See [`coarse_ns`].
fn coarse_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec on the stack; CLOCK_MONOTONIC_COARSE exists
    // since Linux 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Counts one more in a counter written only under the cache's lock (no read-modify-write:
/// readers without the lock see one value or the next).
fn bump(c: &AtomicU64) {
    c.store(c.load(Relaxed) + 1, Relaxed);
}

/// The monitor, if this process may still make ioctls on it.
fn usable_monitor() -> Option<&'static Monitor> {
    if unmap::unusable().is_some() {
        return None;
    }
    unmap::monitor().ok()
}

impl Cache {
    pub fn new(config: Config) -> Arc<Cache> {
        Arc::new_cyclic(|me| Cache {
            config,
            state: Mutex::new(State::default()),
            hot: Hot::default(),
            reaping: Mutex::new(()),
            ring: OnceLock::new(),
            worker: AtomicBool::new(false),
            told_off: AtomicBool::new(false),
            me: me.clone(),
            registrations: AtomicU64::new(0),
            reuses: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evicted: Default::default(),
        })
    }

    /// The lock, with the hot slot's registration taken back into the table.
    fn lock(&self) -> Locked<'_> {
        let mut l = Locked(Some(self.state.locked()), &self.reaping);
        self.unpark(&mut l);
        l
    }

    /// The lock, unless another thread holds it.
    fn try_lock(&self) -> Option<Locked<'_>> {
        let st = match self.state.try_lock() {
            Ok(st) => st,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let mut l = Locked(Some(st), &self.reaping);
        self.unpark(&mut l);
        Some(l)
    }

    /// Waits until registrations another thread evicted are deregistered (a PD can be freed
    /// only after its MRs, and counters read after it are final).
    fn wait_reaped(&self) {
        drop(self.reaping.locked());
    }

    /// The monitor when caching is possible, or why it is not.
    fn availability(&self) -> Result<&'static Monitor, String> {
        if !self.config.enabled {
            return Err("turned off by DAT2_MR_CACHE=0".into());
        }
        if let Some(why) = unmap::unusable() {
            return Err(why);
        }
        let m = unmap::monitor()?;
        self.ring.get_or_init(unmap::claim_ring).ok_or("no free event ring (too many registration caches in this process)")?;
        Ok(m)
    }

    /// The mode of a device that caches registrations.
    fn mode(&self, dev: &Arc<dyn Device>) -> Mode {
        // Once the monitor runs and the ring is ours, only a fork or a stopped reader turns
        // the cache off: two loads, not the whole of `availability`.
        if self.config.enabled && self.ring.get().is_some_and(Option::is_some) {
            if let Some(m) = unmap::ready() {
                return Mode::Cache(m);
            }
        }
        match self.availability() {
            Ok(m) => Mode::Cache(m),
            Err(why) => {
                if !self.told_off.swap(true, Relaxed) {
                    dbg_log!(DbgType::GENERIC, "mr cache: off ({why}); every LMR of {} registers on its own", dev.name());
                }
                Mode::Private
            }
        }
    }

    /// Applies the memory changes the monitor reported (see `unmap::settle`).
    #[inline]
    fn sync(&self, st: &mut State) {
        let Some(Some(ring)) = self.ring.get().copied() else { return };
        if unmap::forked() {
            // The parent's events are not about this process's memory.
            return;
        }
        unmap::settle();
        // Most lookups find nothing reported: asked before anything else is set up.
        if unmap::queued(ring) {
            self.sync_queued(st, ring);
        }
    }

    #[cold]
    #[inline(never)]
    fn sync_queued(&self, st: &mut State, ring: RingId) {
        let mut ranges = Vec::new();
        let all = unmap::drain(ring, &mut ranges);
        if ranges.is_empty() && !all {
            return;
        }
        let overlaps = |w: (u64, u64)| all || ranges.iter().any(|&(a, b, _)| a < w.1 && w.0 < b);
        let changed: Vec<u64> = st.entries.iter().filter(|(_, e)| e.watch.is_some_and(overlaps)).map(|(id, _)| id).collect();
        for id in changed {
            let kept = st.entries.get(id).is_some_and(|e| e.cached.is_some());
            if kept {
                self.evict_after(st, id, Cause::Unmap, &ranges);
                continue;
            }
            let Some(e) = st.entries.get_mut(id) else { continue };
            let watch = e.watch.take();
            let was_indexed = std::mem::replace(&mut e.indexed, false);
            let (key, addr, len) = (e.key.clone(), e.addr, e.len);
            if was_indexed && st.index.get(&key) == Some(&id) {
                st.index.remove(&key);
            }
            if let (Some(w), Some(m)) = (watch, usable_monitor()) {
                m.unwatch_after(w, &ranges);
            }
            self.evicted[Cause::Unmap as usize].fetch_add(1, Relaxed);
            dbg_log!(
                DbgType::GENERIC,
                "mr cache: eviction ({}): live registration [{addr:#x}, +{len:#x}) leaves the lookup table; later LMRs register afresh",
                Cause::Unmap.name()
            );
        }
    }

    /// Deregisters a kept entry (or drops any entry) for `cause`.
    fn evict(&self, st: &mut State, id: u64, cause: Cause) {
        self.evict_after(st, id, cause, &[]);
    }

    /// [`Cache::evict`] after the monitor reported `changed`: the watch is not unregistered
    /// where the kernel already dropped it.
    fn evict_after(&self, st: &mut State, id: u64, cause: Cause, changed: &[unmap::Changed]) {
        let Some(e) = st.remove(id) else { return };
        if let Some(mr) = e.cached {
            st.doomed.push((e.dev.clone(), mr));
        }
        if let (Some(w), Some(m)) = (e.watch, usable_monitor()) {
            m.unwatch_after(w, changed);
        }
        self.evicted[cause as usize].fetch_add(1, Relaxed);
        dbg_log!(
            DbgType::GENERIC,
            "mr cache: eviction ({}): [{:#x}, +{:#x}) pd {} on {} ({} kept, {} bytes)",
            cause.name(),
            e.addr,
            e.len,
            e.pd.0,
            e.dev.name(),
            st.kept,
            st.kept_bytes
        );
    }

    fn enforce_bounds(&self, st: &mut State) {
        while st.kept > self.config.max_entries as u64 || st.kept_bytes > self.config.max_bytes {
            let Some(id) = st.oldest_kept() else { break };
            self.evict(st, id, Cause::Lru);
        }
    }

    /// Deregisters kept entries unused for the TTL; returns how long until the next expires.
    fn collect(&self, st: &mut State, now: Duration) -> Option<Duration> {
        let ttl = self.config.ttl?;
        while let Some(id) = st.oldest_kept() {
            let deadline = st.entries.get(id).map_or(now, |e| e.released + ttl);
            if deadline > now {
                return Some(deadline - now);
            }
            self.evict(st, id, Cause::Collector);
        }
        None
    }

    /// One round of the background thread: events, then the collector. With the lock taken by
    /// another thread (which applies the events itself), it only asks to be back soon.
    fn background_pass(&self) -> Duration {
        let Some(mut st) = self.try_lock() else { return GRACE };
        self.sync(&mut st);
        self.collect(&mut st, coarse_now()).unwrap_or(IDLE_WAIT)
    }

    fn start_worker(&self) {
        if self.worker.swap(true, Relaxed) {
            return;
        }
        let me = self.me.clone();
        let spawned = std::thread::Builder::new().name("dat2-mr-cache".into()).spawn(move || {
            let _stack = unmap::note_own_stack();
            loop {
                let generation = unmap::event_generation();
                let wait = match me.upgrade() {
                    Some(cache) => cache.background_pass(),
                    None => return,
                };
                unmap::wait_for_events(generation, wait.min(IDLE_WAIT));
            }
        });
        if let Err(e) = spawned {
            // Evictions then happen on the next call into the cache instead.
            dbg_log!(DbgType::ERROR, "mr cache: cannot start the collector thread: {e}");
        }
    }

    /// Deregisters every registration kept for `dev`, which ran out of resources (kept
    /// registrations hold pinned memory and device MRs); whether there was any to try again.
    fn give_back(&self, st: &mut Locked<'_>, dev: &Arc<dyn Device>) -> bool {
        let mine = st.kept_of(dev_id(dev), None);
        if mine.is_empty() {
            return false;
        }
        for id in mine {
            self.evict(st, id, Cause::Lru);
        }
        st.reap();
        self.wait_reaped();
        true
    }

    /// Registers `[addr, addr+len)` (see the module comment for how it is shared or kept).
    #[inline(always)]
    pub fn register_range(
        &self,
        dev: &Arc<dyn Device>,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<Registration, RegError> {
        let range = RangeKey { dev: dev_id(dev), pd: pd.0, addr, len, access: access.bits(), zero_based };
        if let Some(reg) = self.hot_hit(&range) {
            return Ok(reg);
        }
        self.register_range_locked(dev, pd, addr, len, access, zero_based)
    }

    /// [`Cache::register_range`] past the hot slot (out of line: the hit stays small).
    #[inline(never)]
    fn register_range_locked(
        &self,
        dev: &Arc<dyn Device>,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<Registration, RegError> {
        // Remote access on a device that caches: this LMR's registration alone, and no monitor
        // is opened for it (see the module comment).
        let mode = if !dev.cache_registrations() {
            Mode::Share
        } else if dev.wire_access(access).is_remote() {
            Mode::Private
        } else {
            self.mode(dev)
        };
        // Only a shared or cached registration is found by its key.
        let key = || Key::Range { dev: dev_id(dev), pd: pd.0, addr, len, access: access.bits(), zero_based };
        match mode {
            Mode::Share => self.share(dev, key(), pd, addr, len, access, zero_based),
            Mode::Cache(monitor) => self.cached(dev, key(), pd, addr, len, access, zero_based, monitor),
            Mode::Private => {
                let mut reg = dev.reg_mr(pd, addr, len, access, zero_based);
                if matches!(reg, Err(DevError::NoResources | DevError::LockedMemory)) && self.give_back(&mut self.lock(), dev) {
                    reg = dev.reg_mr(pd, addr, len, access, zero_based);
                }
                let mr = reg.map_err(RegError::Device)?;
                self.registrations.fetch_add(1, Relaxed);
                Ok(Registration { mr, entry: 0, reused: false, watched: false, hot: 0 })
            }
        }
    }

    /// Registers shared memory named by `cookie`: the first LMR registers, the others share.
    #[allow(clippy::too_many_arguments)]
    pub fn register_shared(
        &self,
        dev: &Arc<dyn Device>,
        cookie: &Cookie,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<Registration, RegError> {
        let key = Key::Cookie { dev: dev_id(dev), cookie: *cookie };
        self.share(dev, key, pd, addr, len, access, zero_based)
    }

    #[allow(clippy::too_many_arguments)]
    fn share(
        &self,
        dev: &Arc<dyn Device>,
        key: Key,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<Registration, RegError> {
        let mut st = self.lock();
        self.sync(&mut st);
        if let Some(&id) = st.index.get(&key) {
            if let Some(e) = st.entries.get_mut(id) {
                if e.len != len {
                    return Err(RegError::CookieLength);
                }
                if e.addr != addr {
                    return Err(RegError::CookieAddress);
                }
                if let Some(base) = e.members.first().copied() {
                    let mr = dev.alias_mr(&base, pd, access, zero_based).map_err(RegError::Device)?;
                    e.members.push(mr);
                    bump(&self.reuses);
                    return Ok(Registration { mr, entry: id, reused: true, watched: false, hot: 0 });
                }
            }
        }
        let mr = dev.reg_mr(pd, addr, len, access, zero_based).map_err(RegError::Device)?;
        self.registrations.fetch_add(1, Relaxed);
        let id = st.insert(Entry::new(key, dev, pd, mr, addr, len, None));
        Ok(Registration { mr, entry: id, reused: false, watched: false, hot: 0 })
    }

    #[allow(clippy::too_many_arguments)]
    fn cached(
        &self,
        dev: &Arc<dyn Device>,
        key: Key,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
        monitor: &'static Monitor,
    ) -> Result<Registration, RegError> {
        let mut st = self.lock();
        self.sync(&mut st);
        if let Some(id) = st.lookup(&key) {
            let st = &mut *st;
            if let Some(e) = st.entries.get_mut(id) {
                if let Some(mr) = e.cached.take() {
                    // Its LRU place stays (see `Entry::seq`).
                    st.kept -= 1;
                    st.kept_bytes -= mr.len;
                    e.members.push(mr);
                    bump(&self.hits);
                    bump(&self.reuses);
                    return Ok(Registration { mr, entry: id, reused: true, watched: e.watch.is_some(), hot: 0 });
                }
                if let Some(base) = e.members.first().copied() {
                    let mr = dev.alias_mr(&base, pd, access, zero_based).map_err(RegError::Device)?;
                    e.members.push(mr);
                    bump(&self.reuses);
                    return Ok(Registration { mr, entry: id, reused: true, watched: e.watch.is_some(), hot: 0 });
                }
            }
        }
        self.misses.fetch_add(1, Relaxed);
        // Watch first: a change after this point is reported, and one before it is what the
        // device pins.
        let watch = monitor.watch(addr, len);
        let mut reg = dev.reg_mr(pd, addr, len, access, zero_based);
        if matches!(reg, Err(DevError::NoResources | DevError::LockedMemory)) && self.give_back(&mut st, dev) {
            reg = dev.reg_mr(pd, addr, len, access, zero_based);
        }
        let mr = match reg {
            Ok(mr) => mr,
            Err(e) => {
                if let Ok(w) = watch {
                    monitor.unwatch(w);
                }
                return Err(RegError::Device(e));
            }
        };
        self.registrations.fetch_add(1, Relaxed);
        let w = match watch {
            Ok(w) => w,
            Err(why) => {
                dbg_log!(DbgType::GENERIC, "mr cache: [{addr:#x}, +{len:#x}) cannot be watched ({why}): registered for this LMR only");
                return Ok(Registration { mr, entry: 0, reused: false, watched: false, hot: 0 });
            }
        };
        let id = st.insert(Entry::new(key, dev, pd, mr, addr, len, Some(w)));
        drop(st);
        self.start_worker();
        Ok(Registration { mr, entry: id, reused: false, watched: true, hot: 0 })
    }

    /// Revokes an LMR's keys; the registration goes with its last LMR, or is kept.
    #[inline]
    pub fn release(&self, dev: &Arc<dyn Device>, reg: &Registration) {
        // A registration of its LMR alone (a remote one's): nothing to look up or keep.
        if reg.entry == 0 {
            dev.dereg_mr(&reg.mr);
            return;
        }
        // Taken from the hot slot and not taken back since: parked again, with no lock (all
        // that `keep` in `release_locked` asks held when it was parked, and only a lock holder
        // changes it), after the same two checks: the monitor still usable, and no request
        // outstanding with the lkey (see there).
        if reg.hot != 0 && unmap::ready().is_some() && !dev.mr_in_use(&reg.mr) && self.hot.put_back(reg.hot, coarse_ns()) {
            return;
        }
        self.release_locked(dev, reg);
    }

    /// [`Cache::release`] of a registration of the table (`entry` set), past the hot slot.
    #[inline(never)]
    fn release_locked(&self, dev: &Arc<dyn Device>, reg: &Registration) {
        // Only a watched registration can be kept, and then the device caches, the cache is on
        // and its ring is claimed, none of which changes: of `mode`, only whether the monitor
        // is still usable is left to ask.
        let caching = reg.watched && unmap::ready().is_some();
        // A request still outstanding with the lkey would go on using the memory through a kept
        // MR after dat_lmr_free returned: such an MR is deregistered (asked before the lock,
        // since the device looks at its queues).
        let busy = caching && reg.mr.rkey == 0 && dev.mr_in_use(&reg.mr);
        // No `sync` here: a change the monitor reported since the last lookup makes the entry
        // stale, and the next lookup (or the collector, woken by the event) evicts it, kept or
        // not, before anything can be registered over it again.
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some(e) = st.entries.get_mut(reg.entry) else {
            dev.dereg_mr(&reg.mr);
            return;
        };
        e.members.retain(|m| m.id != reg.mr.id);
        if !e.members.is_empty() {
            dev.dereg_mr(&reg.mr);
            return;
        }
        let keep = caching
            && e.indexed
            && e.watch.is_some()
            && reg.mr.rkey == 0
            && self.config.max_entries > 0
            && reg.mr.len <= self.config.max_bytes;
        if keep && busy {
            dbg_log!(
                DbgType::GENERIC,
                "mr cache: [{:#x}, +{:#x}) not kept: a request posted with its lkey is still outstanding",
                reg.mr.addr,
                reg.mr.len
            );
        }
        if keep && !busy {
            // The newest place already is at the back (a hit of the registration released
            // last): it stays.
            if e.seq == 0 || e.seq != st.next_seq {
                if e.seq != 0 {
                    st.lru.remove(&e.seq);
                }
                st.next_seq += 1;
                e.seq = st.next_seq;
                st.lru.insert(e.seq, reg.entry);
            }
            e.released = coarse_now();
            st.kept += 1;
            st.kept_bytes += reg.mr.len;
            // Parked in the hot slot, for the next hit to take without the lock (a range entry
            // always: only those are watched).
            if let Key::Range { dev, pd, addr, len, access, zero_based } = e.key {
                let range = RangeKey { dev, pd, addr, len, access, zero_based };
                let released = e.released.as_nanos() as u64;
                st.hot = Some((reg.entry, reg.mr));
                self.enforce_bounds(st);
                self.hot.park(&range, &reg.mr, reg.entry, released);
                return;
            }
            e.cached = Some(reg.mr);
            st.last = reg.entry;
            self.enforce_bounds(st);
            return;
        }
        dev.dereg_mr(&reg.mr);
        if let Some(e) = st.remove(reg.entry) {
            if let (Some(w), Some(m)) = (e.watch, usable_monitor()) {
                m.unwatch(w);
            }
        }
    }

    /// Deregisters every kept registration of `dev` (of `pd` only, if given); returns how many.
    pub fn flush(&self, dev: &Arc<dyn Device>, pd: Option<Pd>) -> usize {
        let mut st = self.lock();
        self.sync(&mut st);
        let ids = st.kept_of(dev_id(dev), pd);
        for i in &ids {
            self.evict(&mut st, *i, Cause::Flush);
        }
        drop(st);
        self.wait_reaped();
        ids.len()
    }

    pub fn stats(&self) -> CacheStats {
        let available = self.availability();
        let mut st = self.lock();
        self.sync(&mut st);
        let (kept, kept_bytes) = (st.kept, st.kept_bytes);
        drop(st);
        self.wait_reaped();
        let n = |c: Cause| self.evicted[c as usize].load(Relaxed);
        CacheStats {
            enabled: available.is_ok(),
            why_off: available.err(),
            hits: self.hits.load(Relaxed) + self.hot.hits(),
            misses: self.misses.load(Relaxed),
            evictions: Evictions { unmap: n(Cause::Unmap), lru: n(Cause::Lru), collector: n(Cause::Collector), flush: n(Cause::Flush) },
            entries: kept,
            bytes: kept_bytes,
            max_entries: self.config.max_entries as u64,
            max_bytes: self.config.max_bytes,
            ttl_ms: self.config.ttl.map_or(0, |t| t.as_millis() as u64),
        }
    }

    /// (registrations made, registrations reused, hits included).
    pub fn counters(&self) -> (u64, u64) {
        (self.registrations.load(Relaxed), self.reuses.load(Relaxed) + self.hot.hits())
    }

    /// Registrations with at least one live LMR in the table.
    pub fn live(&self) -> usize {
        self.lock().entries.values().filter(|e| !e.members.is_empty()).count()
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut st = std::mem::take(st);
        self.unpark(&mut st);
        let kept: Vec<u64> = st.lru.values().copied().filter(|id| st.entries.get(*id).is_some_and(|e| e.cached.is_some())).collect();
        for id in kept {
            self.evict(&mut st, id, Cause::Flush);
        }
        st.reap();
        for e in st.entries.values() {
            if let (Some(w), Some(m)) = (e.watch, usable_monitor()) {
                m.unwatch(w);
            }
        }
        if let Some(Some(ring)) = self.ring.get().copied() {
            unmap::release_ring(ring);
        }
    }
}

/// The library's cache, configured from the environment on first use.
#[inline]
pub fn global() -> &'static Cache {
    static GLOBAL: OnceLock<Arc<Cache>> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let (config, notes) = Config::from_env();
        for n in notes {
            dbg_log!(DbgType::ERROR, "mr cache: {n}");
        }
        Cache::new(config)
    })
}
