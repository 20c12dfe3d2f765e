//! Receive rings: an RC QP's posted receives, published to its verified peer on the same host,
//! so that the peer places a send straight into the receive (qp/fast.rs `send_direct`), as an
//! HCA does, without our thread: a receiver that polls its buffer sees the data at once.
//!
//! Each ring lives in our key table's file (keytab.rs), which verified peers map read-only:
//! a tag (the ring's generation; 0 while withdrawn) and RING_LEN entries. Receive number `n`
//! of the connection (counted from the connection's start, in the order posted, which is the
//! order sends consume them) is in entry `n % RING_LEN` once its sequence word reads `n + 1`.
//! It is published only while receive `n - RING_LEN` is consumed, so an entry never changes
//! under a sender that is entitled to it: receive `n` is consumed only once the sender's
//! notice of its placement (or its request) has come.
//!
//! A sender pins the ring (a count in the file's writable part), then checks the tag, reads
//! the entry, pins the receive's lkey in our key table (so `dat_lmr_free` of its memory waits
//! for the copy, as for a direct RDMA write), writes, says so in the entry's `Placed` word (in
//! the writable part too), and unpins; its send completes then, and a header on the
//! connection tells us. Before the QP's receives are flushed (the connection ends), the ring
//! is withdrawn: the tag is cleared, then we wait for the pin count to fall to zero (at most
//! PEER_WAIT), so no peer writes into a receive once it has completed and the consumer may
//! reuse its buffer; the receives the peer said it filled complete successfully, as on an HCA
//! whose send completed, and the rest flushed. A stale peer never matches the tag of the
//! ring's next owner.
//!
//! What the peer reads here only ever points it at our own memory, through keys it also finds
//! in our table; what it tells us (which receive it filled, how many bytes) is checked against
//! our own queue (qp/reader.rs `on_placed`).

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::keytab::KeyTable;

pub use super::keytab::{Posted, RINGS, RING_LEN};

/// Our ring, for one QP: withdrawn, waited for and given back when dropped.
pub struct OwnRing {
    table: Arc<KeyTable>,
    index: u32,
    gen: u64,
}

impl OwnRing {
    /// A ring of our table (`table`: ours, writable), empty, under a new generation.
    pub fn take(table: &Arc<KeyTable>) -> Option<OwnRing> {
        let (index, fresh, gen) = table.rings()?.take()?;
        if !fresh {
            // A ring used before: its old entries go (it was withdrawn, tag 0, and unpinned).
            (0..RING_LEN).for_each(|k| {
                table.ring_entry(index, k).clear();
                table.ring_placed(index, k).clear();
            });
        }
        table.ring_tag(index).store(gen, Ordering::Release);
        Some(OwnRing { table: table.clone(), index, gen })
    }

    /// What the peer is told: the ring's number (index + 1) and generation.
    pub fn claim(&self) -> (u32, u64) {
        (self.index + 1, self.gen)
    }

    /// Publishes receive number `n`; `p` None: one a sender cannot place into.
    pub fn publish(&self, n: u64, p: Option<Posted>) {
        let p = p.unwrap_or(Posted { addr: 0, len: 0, lkey: 0 });
        self.table.ring_entry(self.index, n % RING_LEN).write(n, p);
    }
}

impl OwnRing {
    /// Withdraws the ring: once this returns, no peer places into its receives any more, and
    /// what it placed is final (`placed`). False when a peer held it pinned past PEER_WAIT.
    pub fn withdraw(&self) -> bool {
        self.table.ring_tag(self.index).store(0, Ordering::SeqCst);
        // Pairs with the fence in `PeerRing::pin`: a peer either sees the tag cleared, or we
        // see its pin.
        fence(Ordering::SeqCst);
        let pins = self.table.ring_pin(self.index);
        let start = Instant::now();
        while pins.load(Ordering::SeqCst) != 0 {
            if start.elapsed() >= super::lease::PEER_WAIT {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft: a peer held receive ring {} pinned for {:?}; it is not reused",
                    self.index,
                    super::lease::PEER_WAIT
                );
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// The length (and immediate data) the peer said it placed into receive `n`, if it did:
    /// after `withdraw`, the receives the peer filled whose notice had not come yet.
    pub fn placed(&self, n: u64) -> Option<(u32, Option<u32>)> {
        self.table.ring_placed(self.index, n % RING_LEN).get(n)
    }
}

impl Drop for OwnRing {
    fn drop(&mut self) {
        if self.withdraw() {
            if let Some(mut a) = self.table.rings() {
                a.give(self.index);
            }
        }
    }
}

/// The peer's ring, as we read it (its table mapped read-only, its pins writable).
pub struct PeerRing {
    table: Arc<KeyTable>,
    index: u32,
    gen: u64,
}

/// A pinned peer ring: the peer's withdrawal waits for it.
pub struct RingPin<'a> {
    count: &'a AtomicU32,
}

impl Drop for RingPin<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PeerRing {
    /// The ring the peer claimed (`number`: index + 1, 0 for none) in its table.
    pub fn new(table: Arc<KeyTable>, number: u32, gen: u64) -> Option<PeerRing> {
        let index = number.checked_sub(1).filter(|&i| (i as usize) < RINGS)?;
        (gen != 0).then_some(PeerRing { table, index, gen })
    }

    /// Pins the ring and reads receive `n`: None when the ring was withdrawn or receive `n`
    /// is not published (yet, or no longer).
    pub fn pin(&self, n: u64) -> Option<(Posted, RingPin<'_>)> {
        let count = self.table.ring_pin(self.index);
        count.fetch_add(1, Ordering::SeqCst);
        let pin = RingPin { count };
        fence(Ordering::SeqCst);
        if self.table.ring_tag(self.index).load(Ordering::SeqCst) != self.gen {
            return None;
        }
        Some((self.table.ring_entry(self.index, n % RING_LEN).read(n)?, pin))
    }
}

impl PeerRing {
    /// Says receive `n` now holds `len` bytes (and `imm`): written after the data, while
    /// `_pin` holds the ring, so the peer's withdrawal sees it (`OwnRing::placed`).
    pub fn mark_placed(&self, _pin: &RingPin<'_>, n: u64, len: u32, imm: Option<u32>) {
        self.table.ring_placed(self.index, n % RING_LEN).set(n, len, imm);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{OwnRing, PeerRing};
    use crate::device::soft::keytab::{KeyTable, Posted, RINGS, RING_LEN};

    #[test]
    fn publish_pin_withdraw_and_reuse() {
        let t = Arc::new(KeyTable::create().expect("memfd"));
        let ours = std::fs::OpenOptions::new().read(true).write(true).open(format!("/proc/self/fd/{}", t.fd())).unwrap();
        let peer = Arc::new(KeyTable::open_peer(ours).expect("peer view"));
        let r = OwnRing::take(&t).expect("a ring");
        let (num, gen) = r.claim();
        let pr = PeerRing::new(peer.clone(), num, gen).expect("claimed");
        assert!(pr.pin(0).is_none(), "nothing published yet");
        let p = Posted { addr: 0x1000, len: 64, lkey: 7 };
        r.publish(0, Some(p));
        r.publish(1, None);
        assert_eq!(pr.pin(0).map(|x| x.0), Some(p));
        assert_eq!(pr.pin(1).map(|x| x.0), Some(Posted { addr: 0, len: 0, lkey: 0 }));
        // What the sender says it placed, the receiver reads (by number: not another round's).
        assert_eq!(r.placed(0), None);
        let (_, pin) = pr.pin(0).unwrap();
        pr.mark_placed(&pin, 0, 8, Some(0xabcd));
        drop(pin);
        assert_eq!(r.placed(0), Some((8, Some(0xabcd))));
        assert_eq!(r.placed(RING_LEN), None, "the same entry, another receive");
        assert!(pr.pin(RING_LEN).is_none(), "a later receive in the same entry is not there yet");
        assert!(PeerRing::new(peer.clone(), 0, gen).is_none() && PeerRing::new(peer.clone(), RINGS as u32 + 1, gen).is_none());
        // A pin holds the withdrawal until dropped.
        let (_, pin) = pr.pin(0).unwrap();
        let start = Instant::now();
        std::thread::scope(|sc| {
            sc.spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                drop(pin);
            });
            drop(r);
        });
        assert!(start.elapsed() >= Duration::from_millis(90));
        assert!(pr.pin(0).is_none(), "withdrawn");
        // The ring's next owner: the old peer's view matches nothing of it.
        let r2 = OwnRing::take(&t).expect("reused");
        assert_eq!(r2.claim().0, num);
        r2.publish(0, Some(p));
        assert!(pr.pin(0).is_none(), "another generation");
        let pr2 = PeerRing::new(peer, num, r2.claim().1).unwrap();
        assert_eq!(pr2.pin(0).map(|x| x.0), Some(p));
        assert!(pr2.pin(1).is_none(), "the old owner's entry was cleared");
        assert_eq!(r2.placed(0), None, "and what was placed under the old owner");
    }
}
