//! The local keys that requests still outstanding on a queue (posted, their completion not yet
//! taken from the CQ) were posted with.
//!
//! The registration cache keeps an MR registered after its last LMR is freed, for a later LMR
//! of the same memory to take back, and a kept MR's lkey stays valid in the device. A request
//! still queued with that lkey (an RDMA READ waiting behind others, a receive a large send is
//! landing in) would then go on reading or writing memory the consumer has given up, after
//! `dat_lmr_free` returned. So the device answers `Device::mr_in_use` from these, and the
//! cache deregisters such an MR instead of keeping it: `ibv_dereg_mr` returns only once the
//! device no longer uses it, and what was outstanding with it then completes in error, as on
//! an HCA. With nothing outstanding (the common case) the MR is kept as before.
//!
//! Each request keeps its keys with its slot (no allocation for one or two segments), and
//! `mr_in_use` looks through the outstanding requests, under the lock the post took: the cost
//! is paid by the free that asks, not by every post and completion.

use crate::device::Sge;

/// The distinct lkeys of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WrKeys {
    None,
    One(u32),
    Two(u32, u32),
    Many(Box<[u32]>),
}

impl WrKeys {
    /// Inline: every post makes one, mostly of one or two segments.
    #[inline]
    pub(super) fn of(sges: &[Sge]) -> WrKeys {
        match sges {
            [] => WrKeys::None,
            [a] => WrKeys::One(a.lkey),
            [a, b] if a.lkey == b.lkey => WrKeys::One(a.lkey),
            [a, b] => WrKeys::Two(a.lkey, b.lkey),
            _ => Self::of_many(sges),
        }
    }

    #[cold]
    #[inline(never)]
    fn of_many(sges: &[Sge]) -> WrKeys {
        let mut keys: Vec<u32> = sges.iter().map(|s| s.lkey).collect();
        keys.sort_unstable();
        keys.dedup();
        match keys[..] {
            [a] => WrKeys::One(a),
            [a, b] => WrKeys::Two(a, b),
            _ => WrKeys::Many(keys.into_boxed_slice()),
        }
    }

    /// Whether the request was posted with `lkey`.
    pub(super) fn contains(&self, lkey: u32) -> bool {
        match self {
            WrKeys::None => false,
            WrKeys::One(a) => *a == lkey,
            WrKeys::Two(a, b) => *a == lkey || *b == lkey,
            WrKeys::Many(keys) => keys.contains(&lkey),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WrKeys;
    use crate::device::Sge;

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
    fn a_request_names_its_keys() {
        let w = WrKeys::of(&sges(&[7, 5, 6, 5]));
        assert!(w.contains(5) && w.contains(7) && !w.contains(8));
        assert!(WrKeys::of(&sges(&[1, 2])).contains(2));
        assert!(!WrKeys::of(&sges(&[])).contains(0));
    }
}
