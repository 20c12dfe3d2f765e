//! The hot registration: one kept registration that a hit takes, and its LMR's free puts back,
//! without the cache's lock. A program that registers one buffer around each transfer then
//! makes no locked call into the cache at all.
//!
//! The slot is a state word (a generation and one of NONE, PARKED, CLAIMED) and what a hit
//! compares and hands out, kept in atomics. The generation moves on with every claim and every
//! unpark: a claim's word is then never seen again, and the claims (the slot's hits) are the
//! generations the lock holders did not make (`Hot::hits`), counted with no atomic of their
//! own. The roles:
//! - The lock holder alone parks a registration (NONE -> PARKED, after writing what it
//!   describes) and takes it back (any -> NONE with the next generation, [`Hot::unpark`]): every
//!   locked section begins so ([`Cache`]'s `lock`), so code under the lock sees
//!   only ordinary entries, kept or live.
//! - A hit claims it (PARKED -> CLAIMED, next generation) when what it asks for is what the
//!   slot describes; that LMR's free parks it again (CLAIMED -> PARKED, same generation).
//!
//! Every transition is a read-modify-write of the word, and the description is written only
//! while the word is NONE, so a claim whose compare-exchange succeeds read a description that
//! nobody rewrote meanwhile (a rewrite needs the next generation first). A free whose claim was
//! taken back by a lock holder (the generation moved on) finds the exchange failing and takes
//! the locked path, where its registration is an ordinary live one.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use super::{Cache, State};
use crate::builtin::mr::{unmap, Registration};
use crate::device::Mr;

const NONE: u64 = 0;
const PARKED: u64 = 1;
const CLAIMED: u64 = 2;
const STATE: u64 = 3;
const GENERATION: u64 = 4;

/// What a hit must match: the cache's `Key::Range` of the registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RangeKey {
    pub dev: usize,
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: u32,
    pub zero_based: bool,
}

impl RangeKey {
    /// The device and the address type in one word (a device's address is aligned).
    fn dev_zb(&self) -> u64 {
        self.dev as u64 ^ u64::from(self.zero_based)
    }
    fn pd_access(&self) -> u64 {
        u64::from(self.pd) | u64::from(self.access) << 32
    }
}

/// What the slot describes, one atomic per word.
#[derive(Default)]
struct Described {
    dev: AtomicU64,
    addr: AtomicU64,
    len: AtomicU64,
    pd_access: AtomicU64,
    mr_id: AtomicU64,
    mr_lkey: AtomicU64,
    mr_addr: AtomicU64,
    mr_len: AtomicU64,
    entry: AtomicU64,
}

#[derive(Default)]
pub(super) struct Hot {
    word: AtomicU64,
    what: Described,
    /// When the parked registration was released last (the coarse clock, in ns).
    released: AtomicU64,
    /// How many times [`Hot::unpark`] moved the generation on (written by lock holders only):
    /// the other generations are the claims, the hits made through the slot.
    unparks: AtomicU64,
}

/// A registration taken from a parked slot: what its free needs to park it again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Claim {
    pub mr: Mr,
    pub entry: u64,
    /// The word this claim wrote.
    pub word: u64,
}

/// What [`Hot::unpark`] found in the slot.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Nothing was parked.
    Nothing,
    /// The registration was parked: it is kept.
    Parked,
    /// A hit held it: it is live, with that LMR as its one member.
    Claimed,
}

impl Hot {
    /// Whether a registration is parked (one load, for the hit to look no further when not).
    #[inline]
    pub(super) fn parked(&self) -> bool {
        self.word.load(Relaxed) & STATE == PARKED
    }

    /// Claims the parked registration if it is the one `key` names.
    #[inline]
    pub(super) fn claim(&self, key: &RangeKey) -> Option<Claim> {
        let w = self.word.load(SeqCst);
        if w & STATE != PARKED {
            return None;
        }
        let d = &self.what;
        if d.dev.load(Relaxed) != key.dev_zb()
            || d.addr.load(Relaxed) != key.addr
            || d.len.load(Relaxed) != key.len
            || d.pd_access.load(Relaxed) != key.pd_access()
        {
            return None;
        }
        let mr = Mr {
            id: d.mr_id.load(Relaxed),
            lkey: d.mr_lkey.load(Relaxed) as u32,
            rkey: 0,
            addr: d.mr_addr.load(Relaxed),
            len: d.mr_len.load(Relaxed),
        };
        let entry = d.entry.load(Relaxed);
        // The next generation: this claim's word is its own, and the claim counts as a hit.
        let claimed = (w & !STATE).wrapping_add(GENERATION) | CLAIMED;
        // Success: the word was still `w`, so the description read above is the one it was
        // written with (see the module comment).
        self.word.compare_exchange(w, claimed, SeqCst, SeqCst).ok()?;
        Some(Claim { mr, entry, word: claimed })
    }

    /// Parks a claimed registration again (its LMR was freed); false when a lock holder took it
    /// back meanwhile, for the caller to take the locked path.
    #[inline]
    pub(super) fn put_back(&self, claimed: u64, released_ns: u64) -> bool {
        if self.word.compare_exchange(claimed, claimed & !STATE | PARKED, SeqCst, SeqCst).is_err() {
            return false;
        }
        // After the exchange: a lock holder that read the older time meanwhile sees the entry
        // a moment older than it is, which only lets the collector take it a little early.
        self.released.store(released_ns, Relaxed);
        true
    }

    /// Under the cache's lock, with nothing parked or claimed: parks registration `entry`,
    /// `mr`, found by `key`.
    pub(super) fn park(&self, key: &RangeKey, mr: &Mr, entry: u64, released_ns: u64) {
        let w = self.word.load(SeqCst);
        debug_assert_eq!(w & STATE, NONE);
        let d = &self.what;
        d.dev.store(key.dev_zb(), Relaxed);
        d.addr.store(key.addr, Relaxed);
        d.len.store(key.len, Relaxed);
        d.pd_access.store(key.pd_access(), Relaxed);
        d.mr_id.store(mr.id, Relaxed);
        d.mr_lkey.store(u64::from(mr.lkey), Relaxed);
        d.mr_addr.store(mr.addr, Relaxed);
        d.mr_len.store(mr.len, Relaxed);
        d.entry.store(entry, Relaxed);
        self.released.store(released_ns, Relaxed);
        // Published by the store (SeqCst, so also a release): a claim that reads PARKED reads
        // this description.
        self.word.store(w & !STATE | PARKED, SeqCst);
    }

    /// Under the cache's lock: takes the slot back, whatever a hit or a free does meanwhile.
    pub(super) fn unpark(&self) -> Found {
        // Counted first: a reader that sees the new generation sees this count too.
        self.unparks.store(self.unparks.load(Relaxed).wrapping_add(1), Relaxed);
        // A compare-exchange, not a swap of a word read before: a claim made in between would
        // lose its generation, and so its hit.
        let next = |w: u64| Some((w & !STATE).wrapping_add(GENERATION) | NONE);
        match self.word.fetch_update(SeqCst, Relaxed, next).unwrap_or_else(|w| w) & STATE {
            PARKED => Found::Parked,
            CLAIMED => Found::Claimed,
            _ => Found::Nothing,
        }
    }

    /// When the parked registration was last released, in ns of the coarse clock.
    pub(super) fn released_ns(&self) -> u64 {
        self.released.load(Relaxed)
    }

    /// Hits made through the slot so far: the generations that no unpark made (exact under
    /// the cache's lock; without it, a moment old, or one short while an unpark runs).
    pub(super) fn hits(&self) -> u64 {
        let generations = self.word.load(SeqCst) / GENERATION;
        let unparks = self.unparks.load(Relaxed);
        // 2^62 generations (the word's) wrap long after any process ends.
        generations.saturating_sub(unparks)
    }
}

impl Cache {
    /// Takes the hot slot's registration back into the table (a lock was just taken): kept,
    /// as the newest of the LRU, if it was parked; live, with the LMR that claimed it as its
    /// member, if a hit holds it (that LMR's free then finds its claim gone and comes here).
    #[inline]
    pub(super) fn unpark(&self, st: &mut State) {
        if st.hot.is_some() {
            self.unpark_slow(st);
        }
    }

    #[inline(never)]
    fn unpark_slow(&self, st: &mut State) {
        let Some((id, mr)) = st.hot.take() else { return };
        let found = self.hot.unpark();
        let released = Duration::from_nanos(self.hot.released_ns());
        let Some(e) = st.entries.get_mut(id) else { return };
        match found {
            Found::Parked => {
                if e.seq != 0 {
                    st.lru.remove(&e.seq);
                }
                st.next_seq += 1;
                e.seq = st.next_seq;
                e.released = released;
                e.cached = Some(mr);
                st.lru.insert(e.seq, id);
                st.last = id;
            }
            Found::Claimed => {
                e.members.push(mr);
                st.kept -= 1;
                st.kept_bytes -= mr.len;
            }
            Found::Nothing => {}
        }
    }

    /// A hit on the hot slot, without the lock: the same checks a locked lookup makes first
    /// (the monitor usable, every change it reported applied), then a claim. A locked section
    /// takes the slot back before it drains the monitor's ring, so a claim that succeeds came
    /// before that drain, after this thread found the ring empty (see SAFETY.md, 1).
    #[inline(always)]
    pub(super) fn hot_hit(&self, key: &RangeKey) -> Option<Registration> {
        if !self.hot.parked() {
            return None;
        }
        unmap::ready()?;
        let Some(Some(ring)) = self.ring.get().copied() else { return None };
        unmap::settle();
        if unmap::queued(ring) {
            return None;
        }
        let c = self.hot.claim(key)?;
        Some(Registration { mr: c.mr, entry: c.entry, reused: true, watched: true, hot: c.word })
    }
}

#[cfg(test)]
mod tests {
    use super::{Found, Hot, RangeKey};
    use crate::device::Mr;

    const KEY: RangeKey = RangeKey { dev: 0x1000, pd: 3, addr: 0x7000, len: 4096, access: 5, zero_based: false };
    const MR: Mr = Mr { id: 9, lkey: 0x1234, rkey: 0, addr: 0x7000, len: 4096 };

    #[test]
    fn a_hit_claims_only_what_is_parked_under_its_key() {
        let h = Hot::default();
        assert!(h.claim(&KEY).is_none(), "nothing parked");
        h.park(&KEY, &MR, 77, 5);
        for other in [
            RangeKey { dev: 0x2000, ..KEY },
            RangeKey { pd: 4, ..KEY },
            RangeKey { addr: 0x8000, ..KEY },
            RangeKey { len: 8192, ..KEY },
            RangeKey { access: 1, ..KEY },
            RangeKey { zero_based: true, ..KEY },
        ] {
            assert!(h.claim(&other).is_none(), "{other:?}");
        }
        let c = h.claim(&KEY).expect("parked under KEY");
        assert_eq!((c.mr, c.entry), (MR, 77));
        assert!(h.claim(&KEY).is_none(), "claimed once");
        assert!(h.put_back(c.word, 6));
        assert_eq!(h.released_ns(), 6);
        assert_eq!(h.hits(), 1);
        assert!(h.claim(&KEY).is_some(), "parked again");
    }

    #[test]
    fn a_claim_taken_back_under_the_lock_cannot_be_put_back_or_repeated() {
        let h = Hot::default();
        assert_eq!(h.unpark(), Found::Nothing);
        h.park(&KEY, &MR, 1, 0);
        let c = h.claim(&KEY).unwrap();
        assert_eq!(h.unpark(), Found::Claimed);
        assert!(!h.put_back(c.word, 0), "the lock holder made it a live registration");
        // Parked again under the next generation: the old claim's word is still refused.
        h.park(&KEY, &MR, 1, 0);
        assert!(!h.put_back(c.word, 0));
        assert_eq!(h.unpark(), Found::Parked);
        assert!(h.claim(&KEY).is_none());
        assert_eq!(h.hits(), 1, "unparks are not hits");
    }

    #[test]
    fn every_claim_is_counted_as_a_hit_and_unparks_are_not() {
        let h = Hot::default();
        for round in 1..=50u64 {
            h.park(&KEY, &MR, 1, 0);
            for _ in 0..round {
                let c = h.claim(&KEY).unwrap();
                assert!(h.put_back(c.word, 0));
            }
            // Taken back while claimed, every other round.
            if round % 2 == 0 {
                h.claim(&KEY).unwrap();
                assert_eq!(h.unpark(), Found::Claimed);
            } else {
                assert_eq!(h.unpark(), Found::Parked);
            }
            assert_eq!(h.hits(), round * (round + 1) / 2 + round / 2);
        }
    }

    #[test]
    fn concurrent_claims_hand_the_registration_to_one_thread_at_a_time() {
        use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
        let h = Hot::default();
        h.park(&KEY, &MR, 1, 0);
        let (holders, claims) = (AtomicU32::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        if let Some(c) = h.claim(&KEY) {
                            assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                            holders.fetch_sub(1, Ordering::SeqCst);
                            claims.fetch_add(1, Ordering::SeqCst);
                            assert!(h.put_back(c.word, 0));
                        }
                    }
                });
            }
        });
        assert_eq!(h.unpark(), Found::Parked);
        assert_eq!(h.hits(), claims.load(Ordering::SeqCst), "a hit lost or counted twice");
    }
}
