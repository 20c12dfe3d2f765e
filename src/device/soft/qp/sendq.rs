//! A soft QP's send queue: our requests from their post to their completion, in order.
//!
//! It keeps three counts true with the requests it holds, which is why nothing outside changes
//! them: how many requests went to the peer the ordinary way (`on_wire`: while any did, a
//! poster places nothing itself, fast.rs), how many reads and atomics are in flight (never past
//! `rd_limit`; the rest wait in `deferred`, in order, as an HCA's send queue holds them), and how
//! many of the peer's receives our requests consume (`sends`: the number of the receive the next
//! send takes, recvring.rs).

use std::collections::VecDeque;

use super::Frame;
use crate::abi::DAT_DTO_SUCCESS;
use crate::device::soft::lease::Leases;
use crate::device::{Moved, Sge, WcOp};

/// A send-queue request awaiting its response.
pub(super) struct Outstanding {
    pub(super) wr_id: u64,
    pub(super) op: WcOp,
    /// Where a read's data or an atomic's original value lands.
    pub(super) sges: Vec<Sge>,
    pub(super) len: u32,
    /// The payload its response carries: a READ's data (unless the target moved it itself,
    /// cross-memory attach), an atomic's original value, else nothing.
    pub(super) reply: u32,
    /// Completed without going on the wire (a local error, a bind), or answered.
    pub(super) done: Option<u32>,
    /// With cross-memory attach, the peer moves the data itself: leases on our memory until
    /// its response (lease.rs).
    pub(super) leases: Option<Leases>,
    /// It went to the peer the ordinary way, as a request the peer runs (counted in
    /// `on_wire`); false: done here, or its data placed by us (a direct write or send).
    wire: bool,
}

impl Outstanding {
    /// A request done here, or placed by us (`done`: its status when known already).
    pub(super) fn local(wr_id: u64, op: WcOp, len: u32, done: Option<u32>) -> Outstanding {
        Outstanding { wr_id, op, sges: Vec::new(), len, reply: 0, done, leases: None, wire: false }
    }

    /// A request sent to the peer, which answers it.
    pub(super) fn sent(wr_id: u64, op: WcOp, sges: Vec<Sge>, len: u32, reply: u32, leases: Option<Leases>) -> Outstanding {
        Outstanding { wr_id, op, sges, len, reply, done: None, leases, wire: true }
    }

    fn answered_by_data(&self) -> bool {
        matches!(self.op, WcOp::Read | WcOp::CmpSwap | WcOp::FetchAdd)
    }
}

pub(super) struct SendQueue {
    outstanding: VecDeque<Outstanding>,
    on_wire: u32,
    reads: u32,
    /// The most reads and atomics we have in flight: our EP's `max_rdma_read_out`, and no more
    /// than the peer takes (its `max_rdma_read_in`, from the handshake).
    rd_limit: u32,
    /// Frames held back while `rd_limit` reads or atomics are in flight; the flag marks reads
    /// and atomics.
    deferred: VecDeque<(Frame, bool)>,
    sends: u64,
    /// Bytes our requests moved, by path (`crate::device::Moved`), counted as they are posted.
    moved: Moved,
}

impl SendQueue {
    pub(super) fn new(rd_limit: u32) -> SendQueue {
        SendQueue {
            outstanding: VecDeque::new(),
            on_wire: 0,
            reads: 0,
            rd_limit: rd_limit.max(1),
            deferred: VecDeque::new(),
            sends: 0,
            moved: [0; 3],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.outstanding.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.outstanding.is_empty()
    }

    #[inline]
    pub(super) fn push(&mut self, o: Outstanding) {
        self.on_wire += u32::from(o.wire);
        self.outstanding.push_back(o);
    }

    /// The oldest outstanding request, if its answer is in (reported in order).
    pub(super) fn pop_done(&mut self) -> Option<Outstanding> {
        self.outstanding.front()?.done?;
        let o = self.outstanding.pop_front()?;
        self.on_wire -= u32::from(o.wire);
        Some(o)
    }

    /// Everything still queued, for a connection that ended: nothing more goes out.
    pub(super) fn drain(&mut self) -> std::collections::vec_deque::Drain<'_, Outstanding> {
        self.deferred.clear();
        self.reads = 0;
        self.on_wire = 0;
        self.outstanding.drain(..)
    }

    /// Whether the peer may be moving the data of a request of ours now (its leases are held).
    pub(super) fn peer_copying(&self) -> bool {
        self.outstanding.iter().any(|o| o.leases.is_some())
    }

    /// The peer will not answer any more: the leases of what it did not answer go.
    pub(super) fn drop_leases(&mut self) {
        for o in self.outstanding.iter_mut() {
            o.leases = None;
        }
    }

    /// `n` plain successes for our oldest requests still waiting for an answer; false when
    /// fewer wait, or one of them is answered only with its data (a read or an atomic).
    pub(super) fn ack(&mut self, n: u32) -> bool {
        let mut left = n;
        for o in self.outstanding.iter_mut().filter(|o| o.done.is_none()) {
            if left == 0 {
                break;
            }
            if o.answered_by_data() {
                return false;
            }
            o.done = Some(DAT_DTO_SUCCESS);
            o.leases = None;
            left -= 1;
        }
        left == 0
    }

    /// The oldest request still waiting for its answer: its id, where its data lands, and how
    /// much a successful answer carries.
    pub(super) fn awaiting(&self) -> Option<(u64, Vec<Sge>, u32)> {
        self.outstanding.iter().find(|o| o.done.is_none()).map(|o| (o.wr_id, o.sges.clone(), o.reply))
    }

    /// The answer to request `wr_id` came with `status`. When it was a read or an atomic, the
    /// frames it held back that may go now are added to `go` (in order). False: no such
    /// request waits (the connection ended meanwhile).
    pub(super) fn answer(&mut self, wr_id: u64, status: u32, go: &mut Vec<Frame>) -> bool {
        let Some(o) = self.outstanding.iter_mut().find(|o| o.wr_id == wr_id && o.done.is_none()) else { return false };
        o.done = Some(status);
        o.leases = None;
        if !o.answered_by_data() {
            return true;
        }
        self.reads = self.reads.saturating_sub(1);
        while let Some((_, read)) = self.deferred.front() {
            if *read && self.reads >= self.rd_limit {
                break;
            }
            let (frame, read) = self.deferred.pop_front().expect("front exists");
            self.reads += u32::from(read);
            go.push(frame);
        }
        true
    }

    /// Whether a request's frame may go now, in order (counted, when it is a read or an
    /// atomic); else it is to be held back (`hold_back`) until one in flight is answered.
    #[inline]
    pub(super) fn may_send(&mut self, is_read: bool) -> bool {
        if !self.deferred.is_empty() || (is_read && self.reads >= self.rd_limit) {
            return false;
        }
        self.reads += u32::from(is_read);
        true
    }

    /// Holds a frame back that may not go yet (`may_send`).
    pub(super) fn hold_back(&mut self, frame: Frame, is_read: bool) {
        self.deferred.push_back((frame, is_read));
    }

    /// Reads and atomics in flight at a time: ours, and no more than the peer takes.
    pub(super) fn limit_reads(&mut self, ours: u32, peer_takes: u32) {
        self.rd_limit = ours.min(peer_takes).max(1);
    }

    /// Nothing we sent the ordinary way is unanswered or held back: data we place ourselves
    /// cannot overtake an earlier request.
    pub(super) fn quiet(&self) -> bool {
        self.on_wire == 0 && self.deferred.is_empty()
    }

    /// The number of the peer's receive that our next send (or write with immediate data)
    /// consumes.
    pub(super) fn next_recv(&self) -> u64 {
        self.sends
    }

    /// A request that consumes the peer's next receive was posted.
    pub(super) fn consumed_recv(&mut self) {
        self.sends += 1;
    }

    /// A new connection: the peer's receives are counted from its first.
    pub(super) fn restart_recvs(&mut self) {
        self.sends = 0;
    }

    pub(super) fn count_moved(&mut self, path: usize, bytes: u64) {
        self.moved[path] += bytes;
    }

    pub(super) fn moved(&self) -> Moved {
        self.moved
    }

    pub(super) fn take_moved(&mut self) -> Moved {
        core::mem::take(&mut self.moved)
    }
}
