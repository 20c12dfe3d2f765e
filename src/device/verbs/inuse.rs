//! The local keys that requests still outstanding on a queue (posted, their completion not yet
//! taken from the CQ) were posted with.
//!
//! The registration cache keeps an MR registered after its last LMR is freed, for a later LMR
//! of the same memory to take back, and a kept MR's lkey stays valid in the device. A request
//! still queued with that lkey (an RDMA READ waiting behind others, a receive a large send is
//! landing in) would then go on reading or writing memory the consumer has given up, after
//! `dat_lmr_free` returned. So the device answers `Device::mr_in_use` from these counts, and
//! the cache deregisters such an MR instead of keeping it: `ibv_dereg_mr` returns only once
//! the device no longer uses it, and what was outstanding with it then completes in error, as
//! on an HCA. With nothing outstanding (the common case) the MR is kept as before.
//!
//! Each queue counts its own (under the lock it takes to post and to complete anyway): one
//! small map update per distinct lkey of a request, and no allocation for a request of one
//! or two segments.

use crate::device::Sge;
use crate::util::idmap::IdMap;

/// The distinct lkeys of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WrKeys {
    None,
    One(u32),
    Two(u32, u32),
    Many(Box<[u32]>),
}

impl WrKeys {
    pub(super) fn of(sges: &[Sge]) -> WrKeys {
        match sges {
            [] => WrKeys::None,
            [a] => WrKeys::One(a.lkey),
            [a, b] if a.lkey == b.lkey => WrKeys::One(a.lkey),
            [a, b] => WrKeys::Two(a.lkey, b.lkey),
            _ => {
                let mut keys: Vec<u32> = sges.iter().map(|s| s.lkey).collect();
                keys.sort_unstable();
                keys.dedup();
                match keys[..] {
                    [a] => WrKeys::One(a),
                    [a, b] => WrKeys::Two(a, b),
                    _ => WrKeys::Many(keys.into_boxed_slice()),
                }
            }
        }
    }

    fn each(&self, mut f: impl FnMut(u32)) {
        match self {
            WrKeys::None => {}
            WrKeys::One(a) => f(*a),
            WrKeys::Two(a, b) => {
                f(*a);
                f(*b);
            }
            WrKeys::Many(keys) => keys.iter().copied().for_each(f),
        }
    }
}

/// Keys whose count reached 0 stay in the map (a program posts with the same few keys again
/// and again: no removal and insertion per request) while it holds at most this many.
const KEEP_IDLE: usize = 16;

/// How many outstanding requests of a queue use each lkey.
#[derive(Debug, Default)]
pub(super) struct KeysInUse {
    counts: IdMap<u32, u32>,
}

impl KeysInUse {
    /// A request with `keys` was posted.
    pub(super) fn add(&mut self, keys: &WrKeys) {
        keys.each(|k| *self.counts.entry(k).or_insert(0) += 1);
    }

    /// A request with `keys` completed (or was never posted after all).
    pub(super) fn remove(&mut self, keys: &WrKeys) {
        let keep = self.counts.len() <= KEEP_IDLE;
        keys.each(|k| {
            if let Some(n) = self.counts.get_mut(&k) {
                *n = n.saturating_sub(1);
                if *n == 0 && !keep {
                    self.counts.remove(&k);
                }
            }
        });
    }

    pub(super) fn contains(&self, lkey: u32) -> bool {
        self.counts.get(&lkey).is_some_and(|&n| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sges(keys: &[u32]) -> Vec<Sge> {
        keys.iter().map(|&lkey| Sge { addr: 0, len: 1, lkey }).collect()
    }

    #[test]
    fn distinct_keys_of_a_request() {
        assert_eq!(WrKeys::of(&sges(&[])), WrKeys::None);
        assert_eq!(WrKeys::of(&sges(&[5])), WrKeys::One(5));
        assert_eq!(WrKeys::of(&sges(&[5, 5])), WrKeys::One(5));
        assert_eq!(WrKeys::of(&sges(&[5, 6])), WrKeys::Two(5, 6));
        assert_eq!(WrKeys::of(&sges(&[6, 5, 6, 5])), WrKeys::Two(5, 6));
        assert_eq!(WrKeys::of(&sges(&[7, 5, 6, 5])), WrKeys::Many(vec![5, 6, 7].into_boxed_slice()));
        assert_eq!(WrKeys::of(&sges(&[7, 7, 7])), WrKeys::One(7));
    }

    #[test]
    fn counts_until_the_last_request_completes() {
        let mut k = KeysInUse::default();
        let a = WrKeys::of(&sges(&[1, 2]));
        let b = WrKeys::of(&sges(&[2]));
        k.add(&a);
        k.add(&b);
        assert!(k.contains(1) && k.contains(2) && !k.contains(3));
        k.remove(&a);
        assert!(!k.contains(1) && k.contains(2));
        k.remove(&b);
        assert!(!k.contains(2));
        // a removal without its addition changes nothing
        k.remove(&b);
        assert!(!k.contains(2));
    }

    #[test]
    fn idle_keys_are_dropped_beyond_the_few_kept() {
        let mut k = KeysInUse::default();
        let many: Vec<WrKeys> = (0..100).map(WrKeys::One).collect();
        many.iter().for_each(|w| k.add(w));
        many.iter().for_each(|w| k.remove(w));
        assert!((0..100).all(|n| !k.contains(n)));
        assert!(k.counts.len() <= KEEP_IDLE, "{} idle keys kept", k.counts.len());
        // a kept idle key counts from 0 again
        k.add(&WrKeys::One(3));
        assert!(k.contains(3));
        k.remove(&WrKeys::One(3));
        assert!(!k.contains(3));
    }
}
