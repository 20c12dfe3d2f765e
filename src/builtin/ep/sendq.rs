//! One connection's send queue: the requests posted to its QP and not yet completed, and
//! where they complete. A post takes a slot under the EP's lock; the completion gives it back
//! on whatever thread polls the QP, without that lock and without touching the EP: the two
//! meet only on the slot's own word. Each change keeps these true:
//! - at most `max_request_dtos` of the consumer's requests are outstanding, and a memory
//!   window bind (ordered with them, not one of them) takes a slot of its own region;
//! - a slot is written only by its post while it is free, under the EP's lock (so there is
//!   one writer), and read only by the completion that won it from busy;
//! - an id names its slot's index and generation: a stale or forged one finds nothing;
//! - memory follows what is in flight: slots come in chunks, made when a post needs them;
//! - completions report on the request EVD the EP had at the queue's first post (set then,
//!   before any slot is busy, and never again).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::EpInner;
use crate::abi::DAT_DTO_ERR_FLUSHED;
use crate::builtin::evd::{self, Evd};
use crate::builtin::events::{request_event, PendingSend};

/// Slots per chunk.
const CHUNK: usize = 32;

/// A slot's word: its generation above its state.
const FREE: u64 = 0;
const BUSY: u64 = 1;
/// Won by a completion, which is reading it.
const TAKING: u64 = 2;
const STATE: u64 = 3;
/// Generations wrap within the 31 bits an id has for them (bit 63 of an id stays clear).
const GENERATION: u64 = 0x7fff_ffff;

struct Slot {
    word: AtomicU64,
    request: UnsafeCell<MaybeUninit<PendingSend>>,
}

impl Slot {
    /// Whether no request holds it (acquiring what the completion that gave it back read).
    #[inline]
    fn is_free(&self) -> bool {
        self.word.load(Ordering::Acquire) & STATE == FREE
    }
}

struct Chunk([Slot; CHUNK]);

/// Which region a request takes its slot from.
#[derive(Clone, Copy)]
enum Region {
    Sends,
    Binds,
}

pub struct SendQueue {
    /// Unique in the process: which connection's queue this is.
    serial: u64,
    /// The EP's handle, for the events.
    ep: usize,
    /// Where its completions are reported: the EP's request EVD at its first post. Not the
    /// one the QP was made with: a UD EP keeps the QP it resolved with while unconnected, and
    /// dat_ep_modify may change its EVDs then (once a request is posted, the EP stays out of
    /// the states dat_ep_modify allows for as long as the queue is its).
    evd: OnceLock<Option<Arc<Evd>>>,
    /// Chunk pointers (null until made); the first `sends` slots are the consumer's requests',
    /// the rest the binds'.
    chunks: Box<[AtomicPtr<Chunk>]>,
    sends: u32,
    total: u32,
    /// Where each region's next post looks first. Written only under the EP's lock.
    next_send: AtomicU32,
    next_bind: AtomicU32,
}

// SAFETY: a slot's request is written only by the one post (under the EP's lock) that found
// it FREE and read only by the one completion whose compare-exchange won it from BUSY; the
// word's release stores and acquire loads order those accesses. PendingSend is plain data.
unsafe impl Sync for SendQueue {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for SendQueue {}

impl SendQueue {
    /// Room for `sends` of the consumer's requests (its `max_request_dtos`) and as many
    /// binds (at least 16), reported as requests of EP `ep`.
    pub fn new(ep: usize, sends: u32) -> SendQueue {
        let binds = sends.max(16);
        let total = sends.saturating_add(binds).min(u32::MAX >> 1);
        let chunks = (0..(total as usize).div_ceil(CHUNK)).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect();
        // From 1: 0 stands for no queue (`EpInner::take_send`).
        static SERIALS: AtomicU64 = AtomicU64::new(1);
        let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
        SendQueue { serial, ep, evd: OnceLock::new(), chunks, sends, total, next_send: AtomicU32::new(0), next_bind: AtomicU32::new(sends) }
    }

    pub fn serial(&self) -> u64 {
        self.serial
    }

    pub fn ep(&self) -> usize {
        self.ep
    }

    /// The request EVD of the queue's first post (None before it).
    pub fn evd(&self) -> Option<&Arc<Evd>> {
        self.evd.get().and_then(Option::as_ref)
    }

    /// Takes a slot for one of the consumer's requests; None: `max_request_dtos` are
    /// outstanding. `held` proves the EP's lock is held (one writer of the slots), and names
    /// the request EVD.
    #[inline]
    pub fn add_send(&self, held: &EpInner, s: PendingSend) -> Option<u64> {
        self.add(Region::Sends, s, held.request_evd())
    }

    /// Takes a slot for a memory window bind.
    pub fn add_bind(&self, held: &EpInner, s: PendingSend) -> Option<u64> {
        self.add(Region::Binds, s, held.request_evd())
    }

    /// `evd`: the EP's request EVD, where the queue reports if this is its first post.
    #[inline(always)]
    fn add(&self, region: Region, s: PendingSend, evd: Option<&Arc<Evd>>) -> Option<u64> {
        let (next, start, end) = match region {
            Region::Sends => (&self.next_send, 0, self.sends),
            Region::Binds => (&self.next_bind, self.sends, self.total),
        };
        if start == end {
            return None;
        }
        let first = next.load(Ordering::Relaxed);
        // In-order completion leaves the slot after the last one taken free: one look, mostly.
        let (index, slot) = match self.slot(first).filter(|s| s.is_free()) {
            Some(slot) => (first, slot),
            None => self.search(first, start, end, evd)?,
        };
        let word = slot.word.load(Ordering::Acquire);
        let generation = (word >> 2).wrapping_add(1) & GENERATION;
        // SAFETY: a FREE slot is touched by no completion, and posts hold the EP's lock.
        unsafe { (*slot.request.get()).write(s) };
        slot.word.store(generation << 2 | BUSY, Ordering::Release);
        // The next slot, if made (within the chunk it is), else the region's first.
        let after = index + 1;
        let made = after < end && (after as usize % CHUNK != 0 || self.slot(after).is_some());
        next.store(if made { after } else { start }, Ordering::Relaxed);
        Some(generation << 32 | u64::from(index))
    }

    /// A free slot of the region `start..end` other than at `first`: the made slots are
    /// searched, from `first` round to it; a chunk is made only when every made slot is busy,
    /// so that memory follows what is in flight. None: the region is full.
    #[cold]
    #[inline(never)]
    fn search(&self, first: u32, start: u32, end: u32, evd: Option<&Arc<Evd>>) -> Option<(u32, &Slot)> {
        let made = |r: std::ops::Range<u32>| r.map_while(|i| Some((i, self.slot(i)?)));
        let free = made(first..end).chain(made(start..first)).find(|(_, s)| s.is_free());
        if free.is_some() {
            return free;
        }
        let index = (start..end).find(|&i| self.slot(i).is_none())?;
        // The first post makes the first chunk: the EVD is set before any slot is busy, so a
        // completion, which wins a busy slot first, finds it set.
        self.evd.get_or_init(|| evd.cloned());
        Some((index, self.make_chunk(index)))
    }

    /// The slot `index` names, if its chunk was made.
    #[inline]
    fn slot(&self, index: u32) -> Option<&Slot> {
        let chunk = self.chunks.get(index as usize / CHUNK)?.load(Ordering::Acquire);
        // SAFETY: a chunk, once published, lives as long as the queue.
        let chunk = unsafe { chunk.as_ref() }?;
        Some(&chunk.0[index as usize % CHUNK])
    }

    /// Makes the chunk of `index` (a post, under the EP's lock: no other maker).
    #[cold]
    #[inline(never)]
    fn make_chunk(&self, index: u32) -> &Slot {
        let fresh = || Slot { word: AtomicU64::new(FREE), request: UnsafeCell::new(MaybeUninit::uninit()) };
        let chunk = Box::into_raw(Box::new(Chunk(std::array::from_fn(|_| fresh()))));
        self.chunks[index as usize / CHUNK].store(chunk, Ordering::Release);
        self.slot(index).expect("the chunk just made")
    }

    /// The request `id` names, given back, if it is still outstanding (it completed, or its
    /// post failed). Exactly one caller gets it.
    #[inline]
    pub fn take(&self, id: u64) -> Option<PendingSend> {
        if id >> 32 > GENERATION {
            return None;
        }
        let index = u32::try_from(id & 0xffff_ffff).ok().filter(|&i| i < self.total)?;
        let slot = self.slot(index)?;
        let generation = id >> 32;
        slot.word.compare_exchange(generation << 2 | BUSY, generation << 2 | TAKING, Ordering::Acquire, Ordering::Relaxed).ok()?;
        // SAFETY: won from BUSY above: written by its post, and no one else reads or writes it
        // until the store below gives it back.
        let s = unsafe { (*slot.request.get()).assume_init_read() };
        slot.word.store(generation << 2 | FREE, Ordering::Release);
        Some(s)
    }

    /// Whether no request is outstanding.
    pub fn idle(&self) -> bool {
        // Only the chunks made hold requests.
        self.chunks.iter().all(|c| {
            // SAFETY: a chunk, once published, lives as long as the queue.
            unsafe { c.load(Ordering::Acquire).as_ref() }.is_none_or(|c| c.0.iter().all(|s| s.is_free()))
        })
    }

    /// Every request still outstanding completes as flushed on the queue's EVD (the
    /// connection is gone), each once: a poll of the QP still under way elsewhere may report
    /// one itself, and [`SendQueue::take`] decides.
    pub fn flush(&self) {
        let events = self.drain().iter().map(|s| request_event(self.ep, s, DAT_DTO_ERR_FLUSHED, 0)).collect();
        evd::post_all(self.evd().cloned(), events);
    }

    /// Every request still outstanding, given back, the consumer's oldest-first as far as the
    /// ring tells.
    fn drain(&self) -> Vec<PendingSend> {
        let from = self.next_send.load(Ordering::Relaxed);
        let order = (from..self.sends).chain(0..from).chain(self.sends..self.total);
        order
            .filter_map(|i| {
                let word = self.slot(i)?.word.load(Ordering::Acquire);
                (word & STATE == BUSY).then(|| self.take((word >> 2) << 32 | u64::from(i)))?
            })
            .collect()
    }
}

impl Drop for SendQueue {
    fn drop(&mut self) {
        for c in self.chunks.iter() {
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: made by Box::into_raw in make_chunk, dropped once, here (PendingSend
                // needs no drop, so slots still busy leak nothing).
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Region, SendQueue, CHUNK};
    use crate::abi::*;
    use crate::builtin::events::{PendingSend, Report};

    fn req(n: u64) -> PendingSend {
        PendingSend { cookie: DAT_CONTEXT { as_64: n }, flags: 0, report: Report::Dto(DAT_DTO_SEND) }
    }

    fn cookie(s: &PendingSend) -> u64 {
        // SAFETY: the tests write as_64.
        unsafe { s.cookie.as_64 }
    }

    fn made(q: &SendQueue) -> usize {
        q.chunks.iter().filter(|c| !c.load(std::sync::atomic::Ordering::Relaxed).is_null()).count()
    }

    #[test]
    fn an_id_finds_its_request_once() {
        let q = SendQueue::new(1, 4);
        let a = q.add(Region::Sends, req(10), None).unwrap();
        let b = q.add(Region::Sends, req(11), None).unwrap();
        assert_ne!(a, b);
        assert!(!q.idle());
        assert_eq!(q.take(a).map(|s| cookie(&s)), Some(10));
        assert!(q.take(a).is_none(), "a completion seen twice finds nothing");
        assert!(q.take(b | 1 << 63).is_none(), "an id with bit 63 is not ours");
        assert!(q.take(u64::from(q.total)).is_none(), "an index past the queue");
        assert!(q.take(b + (1 << 32)).is_none(), "another generation");
        assert_eq!(q.take(b).map(|s| cookie(&s)), Some(11));
        assert!(q.idle());
        // The slots again, under new ids: the old ones find nothing.
        let ids: Vec<u64> = (0..4).map(|n| q.add(Region::Sends, req(n), None).unwrap()).collect();
        assert!(!ids.contains(&a) && !ids.contains(&b));
        assert!(q.take(a).is_none() && q.take(b).is_none());
    }

    #[test]
    fn the_consumers_requests_are_bounded_and_binds_have_their_own_room() {
        let q = SendQueue::new(1, 3);
        let ids: Vec<u64> = (0..3).map(|n| q.add(Region::Sends, req(n), None).unwrap()).collect();
        assert!(q.add(Region::Sends, req(9), None).is_none(), "max_request_dtos outstanding");
        let binds: Vec<u64> = (0..16).map(|n| q.add(Region::Binds, req(100 + n), None).unwrap()).collect();
        assert!(q.add(Region::Binds, req(200), None).is_none(), "the binds' room is bounded too");
        // Out of order: the free slot is found wherever it is.
        assert_eq!(q.take(ids[1]).map(|s| cookie(&s)), Some(1));
        let again = q.add(Region::Sends, req(7), None).unwrap();
        assert_eq!(again & 0xffff_ffff, ids[1] & 0xffff_ffff);
        assert!(q.add(Region::Sends, req(8), None).is_none());
        assert_eq!(q.take(binds[0]).map(|s| cookie(&s)), Some(100));
        let none = SendQueue::new(1, 0);
        assert!(none.add(Region::Sends, req(1), None).is_none(), "max_request_dtos 0 takes nothing");
    }

    #[test]
    fn memory_follows_what_is_in_flight() {
        let q = SendQueue::new(1, 4 * CHUNK as u32);
        assert_eq!(made(&q), 0);
        for n in 0..(3 * CHUNK as u64) {
            let id = q.add(Region::Sends, req(n), None).unwrap();
            assert_eq!(q.take(id).map(|s| cookie(&s)), Some(n));
        }
        assert_eq!(made(&q), 1, "a ring one deep stays in its first chunk");
        let q = SendQueue::new(1, 4 * CHUNK as u32);
        for _ in 0..1000 {
            let ids: Vec<u64> = (0..5).map(|n| q.add(Region::Sends, req(n), None).unwrap()).collect();
            for id in ids {
                q.take(id).unwrap();
            }
        }
        assert!(made(&q) <= 4);
    }

    #[test]
    fn drain_gives_back_what_is_outstanding_oldest_first() {
        let q = SendQueue::new(1, 4);
        let ids: Vec<u64> = (0..4).map(|n| q.add(Region::Sends, req(n), None).unwrap()).collect();
        q.take(ids[0]).unwrap();
        q.take(ids[1]).unwrap();
        q.add(Region::Sends, req(4), None).unwrap();
        q.add(Region::Binds, req(50), None).unwrap();
        let drained: Vec<u64> = q.drain().iter().map(cookie).collect();
        assert_eq!(drained, [2, 3, 4, 50]);
        assert!(q.idle());
        assert!(ids.iter().all(|&id| q.take(id).is_none()));
    }

    /// A poster (one at a time, as under the EP's lock) and a completing thread meet only on
    /// the slots: every request is taken exactly once, with what was posted in it.
    #[test]
    fn posts_and_completions_on_two_threads_hand_over_every_request() {
        const N: u64 = 200_000;
        let q = Arc::new(SendQueue::new(1, 8));
        let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, u64)>(64);
        let taker = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut seen = 0;
                while let Ok((id, n)) = rx.recv() {
                    assert_eq!(q.take(id).map(|s| cookie(&s)), Some(n));
                    assert!(q.take(id).is_none());
                    seen += 1;
                }
                seen
            })
        };
        let mut n = 0;
        while n < N {
            match q.add(Region::Sends, req(n), None) {
                Some(id) => {
                    tx.send((id, n)).unwrap();
                    n += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        drop(tx);
        assert_eq!(taker.join().unwrap(), N);
        assert!(q.idle());
    }
}
