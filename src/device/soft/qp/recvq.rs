//! A soft QP's receive queue: the receives posted, the peer's requests held until one comes,
//! and the ring in which the receives are published to a verified peer on this host
//! (recvring.rs).
//!
//! Its invariants, kept here: receives are numbered from the connection's first (`base` is the
//! number of the oldest still queued); the ring shows exactly the queued receives numbered
//! below `published`, no more than RING_LEN ahead of `base`, so a receive is published once
//! and leaves the ring as it leaves the queue; what held requests cost is counted against the
//! connection's STALL_BYTES and the process's STALL_TOTAL, and given back when they run or
//! the queue is dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Data, Recv};
use crate::abi::{DAT_DTO_ERR_FLUSHED, DAT_DTO_SUCCESS};
use crate::device::soft::keytab::KeyTable;
use crate::device::soft::recvring::{OwnRing, Posted, RING_LEN};
use crate::device::soft::shm;
use crate::device::soft::wire::{flag, op, Hdr};
use crate::device::{Completion, Sges, WcOp};

/// The most a connection's peer can make us hold for requests that wait for a receive (their
/// data, or scatter lists, plus STALL_OVERHEAD each). A request that does not fit waits, still
/// on the socket, until a receive lets it run in place; after RNR_WAIT without one, the peer's
/// oldest waiting request is answered "receiver not ready" and the connection ends, as when an
/// HCA's RNR retries run out.
pub(super) const STALL_BYTES: usize = 4 << 20;
const STALL_OVERHEAD: usize = 128;
pub(super) const RNR_WAIT: Duration = Duration::from_secs(1);

/// What all the connections of the process together hold for requests waiting for a receive
/// (each within STALL_BYTES): a peer that opens many connections gets no more.
pub(super) const STALL_TOTAL: usize = 64 << 20;
static STALLED: AtomicUsize = AtomicUsize::new(0);

/// Counts `cost` against STALL_TOTAL, unless that would pass it.
fn take_stall(cost: usize) -> bool {
    STALLED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_add(cost).filter(|&n| n <= STALL_TOTAL)).is_ok()
}

fn give_stall(cost: usize) {
    STALLED.fetch_sub(cost, Ordering::SeqCst);
}

/// Whether a peer request consumes a receive (a send, or a write with immediate data).
pub(super) fn needs_recv(hdr: &Hdr) -> bool {
    hdr.op == op::SEND || (hdr.op == op::WRITE && hdr.flags & flag::IMM != 0)
}

/// What a request held until a receive comes costs the connection (see STALL_BYTES).
pub(super) fn stall_cost(hdr: &Hdr, data: &Data) -> usize {
    STALL_OVERHEAD
        + match data {
            Data::Socket => hdr.payload as usize,
            Data::Buffer(b) => b.len(),
            Data::Remote(l) => l.len() * std::mem::size_of::<(u64, u32)>(),
            Data::Shared(l, s) => l.len() * std::mem::size_of::<(u64, u32)>() + s.len() * std::mem::size_of::<shm::Source>(),
        }
}

/// How many bytes a receive takes: the sum of its elements.
pub(super) fn capacity(sges: &Sges) -> u64 {
    sges.iter().map(|g| u64::from(g.len)).sum()
}

/// A peer request that waits for a receive to be posted, and what it costs (`stall_cost`).
pub(super) struct Stalled {
    pub(super) hdr: Hdr,
    pub(super) data: Data,
    cost: usize,
}

#[derive(Default)]
pub(super) struct RecvQueue {
    recvs: VecDeque<Recv>,
    stalled: VecDeque<Stalled>,
    stalled_bytes: usize,
    ring: Option<OwnRing>,
    base: u64,
    published: u64,
}

impl Drop for RecvQueue {
    fn drop(&mut self) {
        give_stall(self.stalled_bytes);
    }
}

impl RecvQueue {
    pub(super) fn len(&self) -> usize {
        self.recvs.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.recvs.is_empty()
    }

    pub(super) fn post(&mut self, recv: Recv) {
        self.recvs.push_back(recv);
        self.publish();
    }

    /// The oldest receive, which the caller consumes.
    pub(super) fn take(&mut self) -> Option<Recv> {
        let r = self.recvs.pop_front()?;
        self.base += 1;
        self.publish();
        Some(r)
    }

    /// Publishes the receives the ring has room for: a receive of one element, as it is; one
    /// of several, as one a sender cannot place data into.
    fn publish(&mut self) {
        let Some(ring) = &self.ring else { return };
        let mut n = self.published.max(self.base);
        while n < self.base + RING_LEN {
            let Some((_, sges)) = self.recvs.get((n - self.base) as usize) else { break };
            let posted = match sges.as_slice() {
                [s] => Some(Posted { addr: s.addr, len: s.len, lkey: s.lkey }),
                _ => None,
            };
            ring.publish(n, posted);
            n += 1;
        }
        self.published = n;
    }

    /// Our ring for a connection's peer (taken from `table` on first use): its number and
    /// generation, which the peer names it by.
    pub(super) fn claim_ring(&mut self, table: &Arc<KeyTable>) -> (u32, u64) {
        if self.ring.is_none() {
            self.ring = OwnRing::take(table);
        }
        self.ring.as_ref().map_or((0, 0), |r| r.claim())
    }

    /// The connection's path is set: receives are numbered from here, and published when the
    /// ring (if we claimed one) is used.
    pub(super) fn restart_numbers(&mut self) {
        (self.base, self.published) = (0, 0);
        self.publish();
    }

    /// The peer placed a send of `len` bytes into receive `n` (fast.rs `send_direct`): that
    /// receive, when it is our next, published, long enough, and no held request comes before
    /// it; None: a protocol violation.
    pub(super) fn take_placed(&mut self, n: u64, len: u32) -> Option<Recv> {
        let fits = self.recvs.front().is_some_and(|(_, s)| capacity(s) >= u64::from(len));
        if self.ring.is_none() || !self.stalled.is_empty() || n != self.base || self.base >= self.published || !fits {
            return None;
        }
        self.take()
    }

    /// For the debug log of a refused placement: the next receive's number, and the first not
    /// published.
    pub(super) fn numbers(&self) -> (u64, u64) {
        (self.base, self.published)
    }

    /// The connection ends: our ring, to withdraw (recvring.rs `withdraw`, which waits for the
    /// peer's pins: not under the QP's lock). Nothing is published or placed any more.
    pub(super) fn take_ring(&mut self) -> Option<OwnRing> {
        self.ring.take()
    }

    /// Once `ring` is withdrawn: the oldest receives the peer said it filled, whose notice had
    /// not come, complete successfully, in order, as on an HCA whose send completed; the first
    /// it did not fill ends the run.
    pub(super) fn complete_placed(&mut self, ring: &OwnRing, events: &mut Vec<Completion>) {
        while self.base < self.published && self.stalled.is_empty() {
            let Some((len, imm)) = ring.placed(self.base) else { break };
            let Some((wr_id, sges)) = self.recvs.front() else { break };
            if capacity(sges) < u64::from(len) {
                break;
            }
            let wr_id = *wr_id;
            self.recvs.pop_front();
            self.base += 1;
            events.push(Completion {
                wr_id,
                status: DAT_DTO_SUCCESS,
                op: WcOp::Recv,
                byte_len: len,
                imm,
                invalidated: None,
                solicited: false,
            });
        }
    }

    /// The connection ended: the receives complete flushed (added to `events`), and the held
    /// requests go.
    pub(super) fn flush(&mut self, events: &mut Vec<Completion>) {
        for (wr_id, _) in self.recvs.drain(..) {
            events.push(Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, WcOp::Recv));
        }
        self.stalled.clear();
        give_stall(std::mem::take(&mut self.stalled_bytes));
    }

    /// Whether a held request waits (it runs before any request behind it).
    pub(super) fn holding(&self) -> bool {
        !self.stalled.is_empty()
    }

    /// Whether a request of `cost` would fit the connection's STALL_BYTES.
    pub(super) fn fits(&self, cost: usize) -> bool {
        self.stalled_bytes + cost <= STALL_BYTES
    }

    /// Counts a request about to be held against the connection's STALL_BYTES and the
    /// process's STALL_TOTAL; false when either is full (it then waits on the socket).
    pub(super) fn reserve(&mut self, cost: usize) -> bool {
        if !self.fits(cost) || !take_stall(cost) {
            return false;
        }
        self.stalled_bytes += cost;
        true
    }

    /// Holds a request whose cost was reserved (`reserve`).
    pub(super) fn hold(&mut self, hdr: Hdr, data: Data, cost: usize) {
        self.stalled.push_back(Stalled { hdr, data, cost });
    }

    /// Whether the oldest held request needs a receive; None when none is held.
    pub(super) fn next_held_needs_recv(&self) -> Option<bool> {
        self.stalled.front().map(|s| needs_recv(&s.hdr))
    }

    /// The oldest held request, to run now: its cost is given back.
    pub(super) fn release(&mut self) -> Option<Stalled> {
        let s = self.stalled.pop_front()?;
        self.stalled_bytes -= s.cost;
        give_stall(s.cost);
        Some(s)
    }
}
