//! The counters of the IB counters extension (`DAT_IA_COUNTERS`, `DAT_EP_COUNTERS`,
//! `DAT_EVD_COUNTERS` of `dat_ib_extensions.h`) and dat2's own, as the objects keep them.
//! What reads them (`DAT_IB_QUERY_COUNTERS_OP` and the rest, `DAT2_STATS`) is `super::stats`.
//!
//! Counting costs the data path nothing it can measure: an EP's counters are plain integers
//! written under the EP's lock, which every post and completion holds already; an EVD's under
//! its queue lock, where an event is taken; an empty dequeue, which takes no lock, is counted
//! by the word its EVD's handle cell keeps anyway. No post or poll does an atomic
//! read-modify-write for a counter. The IA's counters count rarer things (connections,
//! asynchronous errors) and may use atomics; its object counts are the handle table's, kept
//! under the table's lock ([`super::table::object_counts`]). What a counter means on each
//! device is in docs/counters.md.

pub mod names;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::abi::*;
use crate::device::WrOp;
use crate::util::sync::MutexExt;

pub const IA_N: usize = DCNT_IA_ALL_COUNTERS as usize;
pub const EP_N: usize = DCNT_EP_ALL_COUNTERS as usize;
pub const EVD_N: usize = DCNT_EVD_ALL_COUNTERS as usize;

/// An EP's counters, written under the EP's lock. Posts are counted by the device's request
/// kind (`WrOp`, in its declaration order) and datagram or not, which takes a post no more
/// than the request's tag and two additions; the IB set is made of them when read.
#[derive(Clone, Copy)]
pub struct EpCounts {
    /// [count, bytes] by `op_index(op) + 8 * datagram`.
    posts: [[u64; 2]; 16],
    /// The other counters, at their `DAT_EP_COUNTERS` index (the post counters' slots unused).
    v: [u64; EP_N],
}

impl Default for EpCounts {
    fn default() -> EpCounts {
        EpCounts { posts: [[0; 2]; 16], v: [0; EP_N] }
    }
}

/// `WrOp`'s variants in declaration order (a match the compiler reduces to the tag).
#[inline(always)]
fn op_index(op: &WrOp) -> usize {
    match op {
        WrOp::Send => 0,
        WrOp::SendInv(_) => 1,
        WrOp::SendImm(_) => 2,
        WrOp::Write => 3,
        WrOp::WriteImm(_) => 4,
        WrOp::Read => 5,
        WrOp::CmpSwap { .. } => 6,
        WrOp::FetchAdd { .. } => 7,
    }
}

/// The (count, bytes) counters of `posts[k]`; atomics have no byte counter (`EP_N`: none).
fn post_counters(k: usize) -> (usize, usize) {
    let (n, d) = match (k % 8, k >= 8) {
        (0..=2, false) => (DCNT_EP_POST_SEND, DCNT_EP_POST_SEND_DATA),
        (0..=2, true) => (DCNT_EP_POST_SEND_UD, DCNT_EP_POST_SEND_UD_DATA),
        (3, _) => (DCNT_EP_POST_WRITE, DCNT_EP_POST_WRITE_DATA),
        (4, _) => (DCNT_EP_POST_WRITE_IMM, DCNT_EP_POST_WRITE_IMM_DATA),
        (5, _) => (DCNT_EP_POST_READ, DCNT_EP_POST_READ_DATA),
        (6, _) => (DCNT_EP_POST_CMP_SWAP, DCNT_EP_ALL_COUNTERS),
        _ => (DCNT_EP_POST_FETCH_ADD, DCNT_EP_ALL_COUNTERS),
    };
    (n as usize, d as usize)
}

/// What a receive completion was, for [`EpCounts::received`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Received {
    Message,
    Datagram,
    /// A send with immediate data.
    SendImm,
    /// An RDMA write with immediate data (which consumed a receive).
    WriteImm,
}

impl EpCounts {
    /// A send-queue request was accepted: `len` bytes, `ud` a datagram.
    #[inline]
    pub fn posted(&mut self, op: &WrOp, ud: bool, len: u64) {
        let p = &mut self.posts[(op_index(op) + 8 * usize::from(ud)) & 15];
        p[0] += 1;
        p[1] += len;
    }

    /// A receive was posted: `len` bytes of buffer.
    #[inline]
    pub fn posted_recv(&mut self, len: u64) {
        self.v[DCNT_EP_POST_RECV as usize] += 1;
        self.v[DCNT_EP_POST_RECV_DATA as usize] += len;
    }

    /// A receive completed successfully with `len` bytes.
    #[inline]
    pub fn received(&mut self, what: Received, len: u64) {
        let (n, data) = match what {
            Received::Message => (DCNT_EP_RECV, DCNT_EP_RECV_DATA),
            Received::Datagram => (DCNT_EP_RECV_UD, DCNT_EP_RECV_UD_DATA),
            Received::SendImm => (DCNT_EP_RECV_IMM, DCNT_EP_RECV_IMM_DATA),
            Received::WriteImm => (DCNT_EP_RECV_RDMA_IMM, DCNT_EP_RECV_RDMA_IMM_DATA),
        };
        self.v[n as usize] += 1;
        self.v[data as usize] += len;
    }

    /// Counts one of `DCNT_EP_CONNECT` or `DCNT_EP_DISCONNECT`.
    pub fn bump(&mut self, n: DAT_EP_COUNTERS) {
        self.v[n as usize] += 1;
    }

    pub fn values(&self) -> [u64; EP_N] {
        let mut v = self.v;
        for (k, p) in self.posts.iter().enumerate() {
            let (n, d) = post_counters(k);
            v[n] += p[0];
            if d < EP_N {
                v[d] += p[1];
            }
        }
        v
    }

    /// Zeroes counter `which`, or all of them.
    pub fn reset(&mut self, which: Option<usize>) {
        let Some(n) = which else {
            *self = EpCounts::default();
            return;
        };
        self.v[n] = 0;
        for (k, p) in self.posts.iter_mut().enumerate() {
            let (count, bytes) = post_counters(k);
            if count == n {
                p[0] = 0;
            }
            if bytes == n {
                p[1] = 0;
            }
        }
    }
}

/// An EVD's counters, written under its queue lock: events as they are queued and as a
/// wait takes them. A dequeue counts nothing itself: the events it took are those queued
/// and no longer there that no wait took, and the empty dequeues answered from the EVD's
/// handle cell are counted there (`evd::nothing_to_take`); `cell_base` is that count when
/// these were last zeroed.
#[derive(Clone, Copy, Default)]
pub struct EvdCounts {
    v: [u64; EVD_N],
    queued: u64,
    waited: u64,
    found_base: u64,
    cell_base: u64,
    /// Dequeues the cell counted as empty that took an event after all.
    not_empty: u64,
}

impl EvdCounts {
    /// Counts from now on; `cell` is the cell's count of empty dequeues now.
    pub fn new(cell: u64) -> EvdCounts {
        EvdCounts { cell_base: cell, ..EvdCounts::default() }
    }

    #[inline]
    pub fn bump(&mut self, n: DAT_EVD_COUNTERS) {
        self.v[n as usize] += 1;
    }

    /// An event was queued: a connection event or a completion counts as the provider's
    /// callback would.
    #[inline]
    pub fn queued(&mut self, number: DAT_EVENT_NUMBER) {
        self.queued += 1;
        let n = match number {
            DAT_DTO_COMPLETION_EVENT | DAT_RMR_BIND_COMPLETION_EVENT | DAT_IB_DTO_EVENT => DCNT_EVD_DTO_CALLBACK,
            DAT_CONNECTION_REQUEST_EVENT..=DAT_CONNECTION_EVENT_UNREACHABLE => DCNT_EVD_CONN_CALLBACK,
            DAT_IB_UD_CONNECTION_REQUEST_EVENT..=DAT_IB_UD_CONNECTION_ERROR_EVENT => DCNT_EVD_CONN_CALLBACK,
            _ => return,
        };
        self.v[n as usize] += 1;
    }

    /// A dequeue the handle cell counted as empty took an event after all.
    pub fn not_empty_after_all(&mut self) {
        self.not_empty += 1;
    }

    /// A wait took an event.
    pub fn waited(&mut self) {
        self.waited += 1;
    }

    fn found(&self, held: usize) -> u64 {
        self.queued.wrapping_sub(self.waited).wrapping_sub(held as u64)
    }

    /// The values, given the cell's count of empty dequeues and the events `held` now.
    pub fn values(&self, cell: u64, held: usize) -> [u64; EVD_N] {
        let mut v = self.v;
        v[DCNT_EVD_DEQUEUE_FOUND as usize] = self.found(held).wrapping_sub(self.found_base);
        // Saturating: a dequeue that did not come through the cell (the provider table called
        // by another libdat2) may have been taken back without having been counted.
        v[DCNT_EVD_DEQUEUE_NOT_FOUND as usize] += cell.wrapping_sub(self.cell_base).saturating_sub(self.not_empty);
        v[DCNT_EVD_DEQUEUE as usize] = v[DCNT_EVD_DEQUEUE_FOUND as usize] + v[DCNT_EVD_DEQUEUE_NOT_FOUND as usize];
        v
    }

    /// Zeroes counter `which`, or all of them, given the cell's count and the events held
    /// now. The dequeue total is the sum of its two parts: zeroing it zeroes both.
    pub fn reset(&mut self, which: Option<usize>, cell: u64, held: usize) {
        let (found, not_found) = (DCNT_EVD_DEQUEUE_FOUND as usize, DCNT_EVD_DEQUEUE_NOT_FOUND as usize);
        let all = which.is_none();
        let total = which == Some(DCNT_EVD_DEQUEUE as usize);
        if all || total || which == Some(found) {
            self.found_base = self.found(held);
        }
        if all || total || which == Some(not_found) {
            self.v[not_found] = 0;
            self.cell_base = cell;
            self.not_empty = 0;
        }
        for n in 0..EVD_N {
            if all || which == Some(n) {
                self.v[n] = 0;
            }
        }
    }
}

/// dat2's own counters of an IA, after the IB ones in [`IaCounts`].
pub const OWN: [&str; 5] = ["DAT2_CONN_REFUSED", "DAT2_CONN_BROKEN", "DAT2_BYTES_TCP", "DAT2_BYTES_CMA", "DAT2_BYTES_SHM"];
pub const OWN_CONN_REFUSED: usize = 0;
pub const OWN_CONN_BROKEN: usize = 1;
/// The first of the three per-path byte counters (TCP, cross-memory attach, shared memory).
pub const OWN_BYTES: usize = 2;

/// The counter group of `DAT_IB_START_COUNTERS_OP`/`DAT_IB_STOP_COUNTERS_OP`: its indexes.
pub fn group(g: DAT_IA_COUNTER_TYPE) -> Option<std::ops::RangeInclusive<usize>> {
    match g {
        DCNT_IA_CM => Some(DCNT_IA_CM_LISTEN as usize..=DCNT_IA_CM_ERR_UNEXPECTED as usize),
        DCNT_IA_LNK => Some(DCNT_IA_LNK_ERR_RCV as usize..=DCNT_IA_LNK_WARN_XMT_WAIT as usize),
        DCNT_IA_DIAG => Some(DCNT_IA_DIAG_ERR_RQ_RAE as usize..=DCNT_IA_DIAG_ERR_SQ_TREE as usize),
        _ => None,
    }
}

/// An IA's counters: those counted as things happen (the rest of `DAT_IA_COUNTERS` is
/// derived when read), dat2's own, what the IA's freed EPs and EVDs counted, and how the
/// consumer's resets, starts and stops shift what is reported.
pub struct IaCounts {
    events: [AtomicU64; IA_N],
    own: [AtomicU64; OWN.len()],
    gone_eps: Mutex<[u64; EP_N]>,
    gone_evds: Mutex<[u64; EVD_N]>,
    view: Mutex<View>,
}

/// What the consumer made of the raw counts: a reported value is the raw count less `base`,
/// or, for a stopped counter, what it was when stopped.
struct View {
    base: [u64; IA_N],
    held: [Option<u64>; IA_N],
}

impl Default for IaCounts {
    fn default() -> IaCounts {
        IaCounts {
            events: core::array::from_fn(|_| AtomicU64::new(0)),
            own: core::array::from_fn(|_| AtomicU64::new(0)),
            gone_eps: Mutex::new([0; EP_N]),
            gone_evds: Mutex::new([0; EVD_N]),
            view: Mutex::new(View { base: [0; IA_N], held: [None; IA_N] }),
        }
    }
}

impl IaCounts {
    /// Counts a connection event an EP of the IA reports: `active` when this side connected,
    /// `asked` when this side asked for the disconnection.
    pub fn connection_event(&self, number: DAT_EVENT_NUMBER, active: bool, asked: bool) {
        match number {
            DAT_CONNECTION_EVENT_ESTABLISHED => self.bump(if active { DCNT_IA_CM_ACTIVE_EST } else { DCNT_IA_CM_PASSIVE_EST }),
            DAT_CONNECTION_EVENT_PEER_REJECTED => {
                self.bump(DCNT_IA_CM_USER_REJ_RX);
                self.bump_own(OWN_CONN_REFUSED);
            }
            DAT_CONNECTION_EVENT_NON_PEER_REJECTED | DAT_CONNECTION_EVENT_UNREACHABLE => {
                self.bump(DCNT_IA_CM_ERR);
                self.bump(DCNT_IA_CM_ERR_REFUSED);
                self.bump_own(OWN_CONN_REFUSED);
            }
            DAT_CONNECTION_EVENT_TIMED_OUT => {
                self.bump(DCNT_IA_CM_ERR);
                self.bump(DCNT_IA_CM_ERR_TIMEOUT);
            }
            DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR => self.bump(DCNT_IA_CM_ERR),
            DAT_CONNECTION_EVENT_DISCONNECTED => self.bump(if asked { DCNT_IA_CM_DREP_RX } else { DCNT_IA_CM_DREQ_RX }),
            DAT_CONNECTION_EVENT_BROKEN => {
                self.bump(DCNT_IA_CM_ERR);
                self.bump(DCNT_IA_CM_ERR_RESET);
                self.bump_own(OWN_CONN_BROKEN);
            }
            _ => {}
        }
    }

    /// Counts an asynchronous event delivered on the IA's async EVD.
    pub fn async_event(&self, number: DAT_EVENT_NUMBER) {
        self.bump(DCNT_IA_ASYNC_ERROR);
        match number {
            DAT_ASYNC_ERROR_EP_BROKEN => self.bump(DCNT_IA_ASYNC_QP_ERROR),
            DAT_ASYNC_ERROR_EVD_OVERFLOW => self.bump(DCNT_IA_ASYNC_CQ_ERROR),
            _ => {}
        }
    }

    /// Counts one `DAT_IA_COUNTERS` event (never on a post or a poll).
    pub fn bump(&self, n: DAT_IA_COUNTERS) {
        self.events[n as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn bump_own(&self, n: usize) {
        self.own[n].fetch_add(1, Ordering::Relaxed);
    }

    /// A QP of the IA is gone: what it moved, by path, stays in the IA's totals.
    pub fn add_moved(&self, moved: [u64; 3]) {
        for (c, m) in self.own[OWN_BYTES..].iter().zip(moved) {
            c.fetch_add(m, Ordering::Relaxed);
        }
    }

    /// The counted events, raw.
    pub fn events(&self) -> [u64; IA_N] {
        core::array::from_fn(|n| self.events[n].load(Ordering::Relaxed))
    }

    /// dat2's own counters, raw (the bytes of the IA's QPs that are gone).
    pub fn own(&self) -> [u64; OWN.len()] {
        core::array::from_fn(|n| self.own[n].load(Ordering::Relaxed))
    }

    /// A freed EP's or EVD's counters join the IA's totals.
    pub fn add_gone_ep(&self, v: &[u64; EP_N]) {
        let mut t = self.gone_eps.locked();
        t.iter_mut().zip(v).for_each(|(t, v)| *t += v);
    }

    pub fn add_gone_evd(&self, v: &[u64; EVD_N]) {
        let mut t = self.gone_evds.locked();
        t.iter_mut().zip(v).for_each(|(t, v)| *t += v);
    }

    pub fn gone_eps(&self) -> [u64; EP_N] {
        *self.gone_eps.locked()
    }

    pub fn gone_evds(&self) -> [u64; EVD_N] {
        *self.gone_evds.locked()
    }

    /// What the consumer sees of `raw`.
    pub fn reported(&self, raw: &[u64; IA_N]) -> [u64; IA_N] {
        let v = self.view.locked();
        core::array::from_fn(|n| v.held[n].unwrap_or(raw[n].wrapping_sub(v.base[n])))
    }

    /// Zeroes counter `which` (or all) as the consumer sees it; a stopped counter stays
    /// stopped, at 0.
    pub fn reset(&self, raw: &[u64; IA_N], which: Option<usize>) {
        let mut v = self.view.locked();
        for n in which.map_or(0..IA_N, |n| n..n + 1) {
            v.base[n] = raw[n];
            if v.held[n].is_some() {
                v.held[n] = Some(0);
            }
        }
    }

    /// Starts the counters of `range` again from 0.
    pub fn start(&self, raw: &[u64; IA_N], range: std::ops::RangeInclusive<usize>) {
        let mut v = self.view.locked();
        for n in range {
            v.base[n] = raw[n];
            v.held[n] = None;
        }
    }

    /// Holds the counters of `range` at what they are now until they are started again.
    pub fn stop(&self, raw: &[u64; IA_N], range: std::ops::RangeInclusive<usize>) {
        let mut v = self.view.locked();
        for n in range {
            if v.held[n].is_none() {
                v.held[n] = Some(raw[n].wrapping_sub(v.base[n]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{group, EpCounts, EvdCounts, IaCounts, Received, EP_N, EVD_N, IA_N};
    use crate::abi::{
        DAT_CONNECTION_EVENT_ESTABLISHED, DAT_DTO_COMPLETION_EVENT, DAT_IB_DTO_EVENT, DAT_SOFTWARE_EVENT, DCNT_EP_POST_FETCH_ADD,
        DCNT_EP_POST_READ_DATA, DCNT_EP_POST_RECV_DATA, DCNT_EP_POST_SEND, DCNT_EP_POST_SEND_DATA, DCNT_EP_POST_SEND_UD,
        DCNT_EP_POST_SEND_UD_DATA, DCNT_EP_POST_WRITE_DATA, DCNT_EP_POST_WRITE_IMM, DCNT_EP_RECV_DATA, DCNT_EP_RECV_RDMA_IMM_DATA,
        DCNT_EVD_CONN_CALLBACK, DCNT_EVD_DEQUEUE, DCNT_EVD_DEQUEUE_FOUND, DCNT_EVD_DEQUEUE_NOT_FOUND, DCNT_EVD_DTO_CALLBACK, DCNT_IA_CM,
        DCNT_IA_CM_REQ_TX,
    };
    use crate::device::WrOp;

    #[test]
    fn ep_counts_posts_by_kind_and_bytes() {
        let mut c = EpCounts::default();
        c.posted(&WrOp::Send, false, 100);
        c.posted(&WrOp::SendImm(1), false, 50);
        c.posted(&WrOp::Send, true, 7);
        c.posted(&WrOp::Write, false, 4096);
        c.posted(&WrOp::WriteImm(3), false, 10);
        c.posted(&WrOp::Read, false, 20);
        c.posted(&WrOp::FetchAdd { add: 1 }, false, 8);
        c.posted_recv(256);
        c.received(Received::Message, 99);
        c.received(Received::WriteImm, 10);
        let v = c.values();
        assert_eq!(v[DCNT_EP_POST_SEND as usize], 2);
        assert_eq!(v[DCNT_EP_POST_SEND_DATA as usize], 150);
        assert_eq!(v[DCNT_EP_POST_SEND_UD as usize], 1);
        assert_eq!(v[DCNT_EP_POST_SEND_UD_DATA as usize], 7);
        assert_eq!(v[DCNT_EP_POST_WRITE_DATA as usize], 4096);
        assert_eq!(v[DCNT_EP_POST_WRITE_IMM as usize], 1);
        assert_eq!(v[DCNT_EP_POST_READ_DATA as usize], 20);
        assert_eq!(v[DCNT_EP_POST_FETCH_ADD as usize], 1);
        assert_eq!(v[DCNT_EP_POST_RECV_DATA as usize], 256);
        assert_eq!(v[DCNT_EP_RECV_DATA as usize], 99);
        assert_eq!(v[DCNT_EP_RECV_RDMA_IMM_DATA as usize], 10);
        c.posted(&WrOp::SendInv(1), true, 3);
        let v = c.values();
        assert_eq!(v[DCNT_EP_POST_SEND_UD as usize], 2);
        assert_eq!(v[DCNT_EP_POST_SEND_UD_DATA as usize], 10);
        // The atomic's 8 bytes went to no reported counter.
        assert_eq!(v.iter().sum::<u64>(), 2 + 150 + 2 + 10 + 1 + 4096 + 1 + 10 + 1 + 20 + 1 + 1 + 256 + 1 + 99 + 1 + 10);
        c.reset(Some(DCNT_EP_POST_SEND as usize));
        assert_eq!(c.values()[DCNT_EP_POST_SEND as usize], 0);
        assert_eq!(c.values()[DCNT_EP_POST_SEND_DATA as usize], 150);
        c.reset(None);
        assert_eq!(c.values(), [0; EP_N]);
    }

    #[test]
    fn evd_dequeues_are_derived() {
        let mut c = EvdCounts::new(1000);
        for _ in 0..3 {
            c.queued(DAT_DTO_COMPLETION_EVENT);
        }
        c.queued(DAT_CONNECTION_EVENT_ESTABLISHED);
        c.queued(DAT_SOFTWARE_EVENT);
        c.waited();
        // 5 queued, 1 taken by a wait, 1 still held: 3 dequeued.
        let v = c.values(1005, 1);
        assert_eq!(v[DCNT_EVD_DEQUEUE_FOUND as usize], 3);
        assert_eq!(v[DCNT_EVD_DEQUEUE_NOT_FOUND as usize], 5);
        assert_eq!(v[DCNT_EVD_DEQUEUE as usize], 8);
        assert_eq!(v[DCNT_EVD_DTO_CALLBACK as usize], 3);
        assert_eq!(v[DCNT_EVD_CONN_CALLBACK as usize], 1);
        c.reset(Some(DCNT_EVD_DEQUEUE_NOT_FOUND as usize), 1005, 1);
        assert_eq!(c.values(1007, 1)[DCNT_EVD_DEQUEUE as usize], 5);
        c.reset(None, 1007, 1);
        assert_eq!(c.values(1007, 1), [0; EVD_N]);
        c.not_empty_after_all();
        assert_eq!(c.values(1007, 1)[DCNT_EVD_DEQUEUE_NOT_FOUND as usize], 0, "never below 0");
        c.queued(DAT_IB_DTO_EVENT);
        assert_eq!(c.values(1007, 1)[DCNT_EVD_DTO_CALLBACK as usize], 1);
        assert_eq!(c.values(1007, 2)[DCNT_EVD_DEQUEUE_FOUND as usize], 0);
    }

    #[test]
    fn ia_view_resets_starts_and_stops() {
        let c = IaCounts::default();
        let cm = group(DCNT_IA_CM).unwrap();
        let n = DCNT_IA_CM_REQ_TX as usize;
        let mut raw = [0u64; IA_N];
        raw[n] = 5;
        assert_eq!(c.reported(&raw)[n], 5);
        c.start(&raw, cm.clone());
        raw[n] = 7;
        assert_eq!(c.reported(&raw)[n], 2);
        c.stop(&raw, cm.clone());
        raw[n] = 9;
        assert_eq!(c.reported(&raw)[n], 2, "a stopped counter holds");
        c.reset(&raw, Some(n));
        assert_eq!(c.reported(&raw)[n], 0);
        c.start(&raw, cm);
        raw[n] = 10;
        assert_eq!(c.reported(&raw)[n], 1);
        assert!(group(3).is_none());
    }
}
