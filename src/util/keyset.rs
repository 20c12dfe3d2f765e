//! A counted set of 32-bit keys whose membership test takes no lock: the local keys of a
//! protection zone's live LMRs, which every post checks (`builtin::pz`).
//!
//! Open addressing with linear probing in a power-of-two table of atomic words, each `key << 32
//! | OCCUPIED | FROZEN | count`. A key whose count drops to 0 stays as a tombstone (a
//! registration cache gives the same key back soon) until a new key whose probe path crosses
//! it takes its slot over; tombstones are purged in place when the table fills. A reader
//! probes without a lock and retries if a purge ran meanwhile (a sequence count, odd while a
//! purge runs). A table that must grow is replaced by one twice its size,
//! filled before it is published; the old one stays allocated for readers still in it, and
//! since sizes double, all the old ones together are smaller than the current one.
//!
//! Counting a key that has a slot (live or tombstone) takes no lock either: one
//! compare-and-swap of its word, as a registration cache's hit does at every create and free.
//! Taking a new slot, purging and growing are done under a mutex; before a purge or a growth
//! reads the words it moves, it sets their FROZEN bit, which fails every such swap begun on
//! them, and the swapping thread then takes the mutex's path, waiting for the move to end.

use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::util::sync::MutexExt;

const OCCUPIED: u64 = 1 << 31;
const FROZEN: u64 = 1 << 30;
const COUNT: u64 = FROZEN - 1;
const FIRST: usize = 64;

struct Slots {
    mask: usize,
    words: Box<[AtomicU64]>,
}

impl Slots {
    fn new(size: usize) -> Box<Slots> {
        Box::new(Slots { mask: size - 1, words: (0..size).map(|_| AtomicU64::new(0)).collect() })
    }

    fn start(&self, key: u32) -> usize {
        // Fibonacci hashing: device keys differ in their index bits, often the high ones.
        (u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & self.mask
    }

    /// The slot of `key` (live or tombstone), or the first empty one on its probe path.
    fn find(&self, key: u32) -> (usize, u64) {
        let mut i = self.start(key);
        for _ in 0..=self.mask {
            let w = self.words[i].load(Ordering::Relaxed);
            if w == 0 || (w >> 32) as u32 == key {
                return (i, w);
            }
            i = (i + 1) & self.mask;
        }
        // Never full: the writer keeps at most half the slots used.
        (usize::MAX, 0)
    }

    /// Under the writer's lock (no word frozen): the slot of `key` (live or tombstone) if it
    /// has one, else the first tombstone on its probe path, else the first empty slot; and
    /// whether it is `key`'s own.
    fn find_for_insert(&self, key: u32) -> ((usize, u64), bool) {
        let mut i = self.start(key);
        let mut tombstone = None;
        for _ in 0..=self.mask {
            let w = self.words[i].load(Ordering::Relaxed);
            if w != 0 && (w >> 32) as u32 == key {
                return ((i, w), true);
            }
            if w == 0 {
                return (tombstone.unwrap_or((i, w)), false);
            }
            if w & COUNT == 0 && tombstone.is_none() {
                tombstone = Some((i, w));
            }
            i = (i + 1) & self.mask;
        }
        // Never full: the writer keeps at most half the slots used.
        (tombstone.unwrap_or((usize::MAX, 0)), false)
    }

    /// Counts the key of the slot found as `(i, w)` once more (`up`) or once less, by a swap of
    /// its word; false if the word is frozen or changed meanwhile, or has no count to take.
    fn swap_count(&self, (i, w): (usize, u64), up: bool) -> bool {
        if w == 0 || w & FROZEN != 0 {
            return false;
        }
        let n = w & COUNT;
        let new = if up {
            if n == COUNT {
                // Saturated (2^30 LMRs of one key cannot be): a count lost here could only
                // make the key look dead early, which refuses a post, never lets one through.
                return true;
            }
            w + 1
        } else {
            if n == 0 {
                return false;
            }
            w - 1
        };
        self.words[i].compare_exchange(w, new, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }
}

struct Writer {
    /// Every table made, the current one last (see the module's note). Boxed: `current`
    /// points at one, which must not move when the vector grows.
    #[allow(clippy::vec_box)]
    tables: Vec<Box<Slots>>,
    /// Live keys and tombstones.
    used: usize,
}

pub struct KeySet {
    seq: AtomicU64,
    current: AtomicPtr<Slots>,
    writer: Mutex<Writer>,
}

impl Default for KeySet {
    fn default() -> KeySet {
        let first = Slots::new(FIRST);
        let current = AtomicPtr::new(&*first as *const Slots as *mut Slots);
        KeySet { seq: AtomicU64::new(0), current, writer: Mutex::new(Writer { tables: vec![first], used: 0 }) }
    }
}

impl KeySet {
    /// Whether `key` is in the set (counted at least once).
    pub fn contains(&self, key: u32) -> bool {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let t = self.current_table();
                let (_, w) = t.find(key);
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return w & COUNT != 0;
                }
            }
            std::hint::spin_loop();
        }
    }

    fn current_table(&self) -> &Slots {
        // SAFETY: `current` points at a table in `writer.tables`, which are never freed while
        // the set lives.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// The current table, to change it (under the writer's lock, which every change of
    /// `current` holds).
    fn table(&self, _w: &Writer) -> &Slots {
        // SAFETY: `current` points at a table in `writer.tables`, never freed while the set
        // lives; the caller holds the writer's lock, so it is the last one.
        unsafe { &*self.current.load(Ordering::Relaxed) }
    }

    /// Counts `key` once more.
    #[inline]
    pub fn insert(&self, key: u32) {
        let t = self.current_table();
        if !t.swap_count(t.find(key), true) {
            self.insert_locked(key);
        }
    }

    /// [`KeySet::insert`] when the key has no slot yet, or its word is frozen.
    #[cold]
    #[inline(never)]
    fn insert_locked(&self, key: u32) {
        let mut w = self.writer.locked();
        let empty = loop {
            // Under the lock no word of the current table is frozen: a swap fails only when a
            // lock-free count changed the word meanwhile.
            let t = self.table(&w);
            let (found, own) = t.find_for_insert(key);
            if own {
                if t.swap_count(found, true) {
                    return;
                }
                continue;
            }
            if found.1 == 0 {
                break found.0;
            }
            // Another key's tombstone on this key's path, and this key nowhere on it: taken
            // over, so that keys made and freed in turn (a new registration's at each create)
            // fill fewer slots and need fewer purges. The key it held stays absent (its count
            // was 0); a lock-free count of it that starts meanwhile fails its swap and takes the
            // lock, and one that ran first makes this swap fail, and the path is probed again.
            if t.words[found.0].compare_exchange(found.1, u64::from(key) << 32 | OCCUPIED | 1, Ordering::SeqCst, Ordering::Relaxed).is_ok()
            {
                return;
            }
        };
        // The empty slot found, unless the table changes first.
        let i = if (w.used + 1) * 2 > self.table(&w).words.len() {
            self.make_room(&mut w);
            self.table(&w).find(key).0
        } else {
            empty
        };
        self.table(&w).words[i].store(u64::from(key) << 32 | OCCUPIED | 1, Ordering::SeqCst);
        w.used += 1;
    }

    /// Counts `key` once less; a key not in the set is left alone.
    #[inline]
    pub fn remove(&self, key: u32) {
        let t = self.current_table();
        if !t.swap_count(t.find(key), false) {
            self.remove_locked(key);
        }
    }

    /// [`KeySet::remove`] when the key's word could not be swapped without the lock.
    #[cold]
    #[inline(never)]
    fn remove_locked(&self, key: u32) {
        let w = self.writer.locked();
        loop {
            let t = self.table(&w);
            let found = t.find(key);
            if found.1 & COUNT == 0 || t.swap_count(found, false) {
                return;
            }
        }
    }

    /// Before a new key goes in: purges the tombstones in place while they are most of the
    /// table, otherwise publishes a table twice the size. The words are frozen first, so that
    /// no lock-free count changes one after it is read.
    fn make_room(&self, w: &mut Writer) {
        let t = self.table(w);
        let live: Vec<u64> = t.words.iter().map(|s| s.fetch_or(FROZEN, Ordering::SeqCst) & !FROZEN).filter(|&s| s & COUNT != 0).collect();
        if (live.len() + 1) * 4 <= t.words.len() {
            let s = self.seq.load(Ordering::Relaxed);
            self.seq.store(s + 1, Ordering::Relaxed);
            fence(Ordering::Release);
            t.words.iter().for_each(|s| s.store(0, Ordering::Relaxed));
            Self::fill(t, &live);
            self.seq.store(s + 2, Ordering::Release);
        } else {
            let bigger = Slots::new(t.words.len() * 2);
            Self::fill(&bigger, &live);
            self.current.store(&*bigger as *const Slots as *mut Slots, Ordering::Release);
            w.tables.push(bigger);
        }
        w.used = live.len();
    }

    fn fill(t: &Slots, words: &[u64]) {
        for &word in words {
            let (i, _) = t.find((word >> 32) as u32);
            t.words[i].store(word, Ordering::Relaxed);
        }
    }

    /// Live keys (tests).
    #[cfg(test)]
    fn live(&self) -> usize {
        let _w = self.writer.locked();
        self.current_table().words.iter().filter(|s| s.load(Ordering::Relaxed) & COUNT != 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::KeySet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn counts_keys_and_forgets_them() {
        let s = KeySet::default();
        assert!(!s.contains(0));
        s.insert(0);
        s.insert(0);
        assert!(s.contains(0));
        s.remove(0);
        assert!(s.contains(0));
        s.remove(0);
        assert!(!s.contains(0));
        s.remove(0);
        assert!(!s.contains(0));
        assert_eq!(s.live(), 0);
    }

    #[test]
    fn churn_of_distinct_keys_keeps_the_table_small() {
        let s = KeySet::default();
        s.insert(7);
        for k in 1000..200_000u32 {
            s.insert(k);
            assert!(s.contains(k) && s.contains(7));
            s.remove(k);
            assert!(!s.contains(k));
        }
        assert_eq!(s.live(), 1);
        // Purged in place: no table ever grew.
        assert_eq!(s.writer.lock().unwrap().tables.len(), 1);
    }

    #[test]
    fn churn_takes_tombstones_over_without_purging() {
        let s = KeySet::default();
        s.insert(7);
        // Keys never seen again, each made and freed before the next, all on one probe path:
        // each takes over the tombstone the one before left (without that, each would take a
        // slot further on, and 40 of them would fill the first table to its purge).
        for k in colliding(40) {
            s.insert(k);
            assert!(s.contains(k));
            s.remove(k);
            assert!(!s.contains(k));
        }
        assert!(s.contains(7));
        // No purge ran (the sequence count moves by 2 for each), and two slots are in use.
        assert_eq!(s.seq.load(Ordering::Relaxed), 0);
        assert_eq!(s.writer.lock().unwrap().used, 2);
    }

    /// Keys whose probe paths start at the same slot of the first table.
    fn colliding(n: usize) -> Vec<u32> {
        let s = KeySet::default();
        let t = s.current_table();
        let at = t.start(1);
        (1..).filter(|&k| t.start(k) == at).take(n).collect()
    }

    #[test]
    fn a_tombstone_is_taken_over_only_by_a_key_not_further_on() {
        let k = colliding(3);
        let s = KeySet::default();
        // k0, k1, k2 in consecutive slots, then k0 and k1 tombstones.
        k.iter().for_each(|&x| s.insert(x));
        s.remove(k[0]);
        s.remove(k[1]);
        let t = s.current_table();
        let w = s.writer.lock().unwrap();
        // k1 has a tombstone of its own past k0's: that one is its slot, not k0's.
        let ((i, word), own) = t.find_for_insert(k[1]);
        assert!(own && (word >> 32) as u32 == k[1] && i == (t.start(k[1]) + 1) & t.mask);
        // A key with no slot takes the first tombstone on its path: k0's.
        let fresh = colliding(4)[3];
        let ((i, word), own) = t.find_for_insert(fresh);
        assert!(!own && (word >> 32) as u32 == k[0] && i == t.start(fresh));
        drop(w);
        s.insert(fresh);
        s.insert(k[1]);
        assert!(s.contains(fresh) && s.contains(k[1]) && s.contains(k[2]) && !s.contains(k[0]));
        s.remove(k[1]);
        assert!(!s.contains(k[1]), "one count, in one slot");
        s.insert(k[0]);
        assert!(s.contains(k[0]));
        assert_eq!(s.live(), 3);
    }

    #[test]
    fn grows_and_keeps_every_key() {
        let s = KeySet::default();
        let keys: Vec<u32> = (0..5000u32).map(|k| k.wrapping_mul(2_654_435_761)).collect();
        keys.iter().for_each(|&k| s.insert(k));
        assert!(keys.iter().all(|&k| s.contains(k)));
        keys.iter().step_by(2).for_each(|&k| s.remove(k));
        assert!(keys.iter().enumerate().all(|(n, &k)| s.contains(k) == (n % 2 == 1)));
    }

    #[test]
    fn lock_free_counts_are_not_lost_to_purges_or_growth() {
        let s = Arc::new(KeySet::default());
        // Slots for the shared keys, then one held by the test alone.
        (1..=8u32).for_each(|k| s.insert(k));
        (1..=8u32).for_each(|k| s.remove(k));
        s.insert(5);
        let counters: Vec<_> = (0..3)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for n in 0..30_000u32 {
                        let k = 1 + n % 8;
                        s.insert(k);
                        s.insert(k);
                        assert!(s.contains(k));
                        s.remove(k);
                        s.remove(k);
                    }
                })
            })
            .collect();
        // New keys meanwhile: the table purges in place and grows under the counting threads.
        for round in 0..300u32 {
            let base = 1000 + round * 200;
            (base..base + 100 + round % 150).for_each(|k| s.insert(k));
            (base..base + 100 + round % 150).for_each(|k| s.remove(k));
        }
        counters.into_iter().for_each(|t| t.join().unwrap());
        assert!((1..=8u32).all(|k| s.contains(k) == (k == 5)), "every count back where it was");
        assert_eq!(s.live(), 1);
        s.remove(5);
        assert!(!s.contains(5));
    }

    #[test]
    fn readers_see_a_live_key_through_purges_and_growth() {
        use std::sync::atomic::AtomicU64;
        let s = Arc::new(KeySet::default());
        s.insert(42);
        let (stop, reads) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let reader = {
            let (s, stop, reads) = (s.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    assert!(s.contains(42));
                    assert!(!s.contains(41));
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        // Purges and growth go on until the reader has probed through many of them.
        let mut round = 0u32;
        while round < 50 || reads.load(Ordering::Relaxed) < 100_000 {
            let base = 100 + (round % 4000) * 1000;
            (base..base + 500).for_each(|k| s.insert(k));
            (base..base + 500).for_each(|k| s.remove(k));
            round += 1;
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    }
}
