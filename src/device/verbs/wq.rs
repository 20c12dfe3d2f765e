//! The requests outstanding on a verbs QP's work queues, under the work request ids the
//! device sees: slots made with room for the queues' depths (`util::slots`), so that keeping
//! and taking back a request allocates nothing and hashes nothing, and a stale or forged id
//! (already completed, never posted, or a slot's earlier use) finds nothing. An id never has
//! bit 63 set (an SRQ's receives use it).
//!
//! A ring in posting order (a work queue completes in order) was tried and measured: its
//! separate sequence, operation and key arrays cost more per request than one slot.

use std::sync::Arc;

use super::inuse::WrKeys;
use crate::device::{AddressHandle, WcOp};
use crate::util::slots::Slots;

/// One request: the consumer's id, what it does (None: a request of our own, such as the
/// invalidation before a rebind, whose success is not reported), the lkeys it was posted with
/// and, for a datagram, the address handle it was sent to (kept until it completes).
pub(super) struct Request {
    pub wr_id: u64,
    pub op: Option<WcOp>,
    pub keys: WrKeys,
    pub ah: Option<Arc<dyn AddressHandle>>,
}

impl Request {
    fn is_send(&self) -> bool {
        !matches!(self.op, Some(WcOp::Recv | WcOp::RecvImm))
    }
}

/// What a completed request was: the consumer's id, its operation and its address handle.
pub(super) type Done = (u64, Option<WcOp>, Option<Arc<dyn AddressHandle>>);

/// A QP's outstanding requests; `sends_out` counts those of the send queue.
pub(super) struct Requests {
    slots: Slots<Request>,
    sends_out: u32,
}

impl Requests {
    /// Room for the queues' depths before the first allocation.
    pub(super) fn with_room(send: u32, recv: u32) -> Requests {
        Requests { slots: Slots::with_room(send as usize + recv as usize), sends_out: 0 }
    }

    /// Keeps `r`; returns its id.
    pub(super) fn add(&mut self, r: Request) -> u64 {
        self.sends_out += u32::from(r.is_send());
        self.slots.insert(r)
    }

    /// Takes back the request `id` names, if it is still outstanding (it completed, or its
    /// post failed).
    pub(super) fn take(&mut self, id: u64) -> Option<Done> {
        let r = self.slots.remove(id)?;
        self.sends_out -= u32::from(r.is_send());
        Some((r.wr_id, r.op, r.ah))
    }

    /// Send-queue requests outstanding.
    pub(super) fn sends_out(&self) -> u32 {
        self.sends_out
    }

    /// Whether an outstanding request was posted with `lkey`.
    pub(super) fn uses_lkey(&self, lkey: u32) -> bool {
        self.slots.values().any(|r| r.keys.contains(lkey))
    }

    /// The address handles of the sends outstanding, taken out (the QP is being destroyed).
    pub(super) fn take_address_handles(&mut self) -> Vec<Arc<dyn AddressHandle>> {
        let ids: Vec<u64> = self.slots.iter().filter(|(_, r)| r.ah.is_some()).map(|(id, _)| id).collect();
        ids.into_iter().filter_map(|id| self.slots.get_mut(id)?.ah.take()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Request, Requests, WcOp, WrKeys};

    fn req(wr_id: u64, op: Option<WcOp>, lkey: u32) -> Request {
        Request { wr_id, op, keys: WrKeys::One(lkey), ah: None }
    }

    #[test]
    fn ids_find_their_request_once() {
        let mut q = Requests::with_room(3, 2);
        let s = q.add(req(10, Some(WcOp::Write), 1));
        let r = q.add(req(11, Some(WcOp::Recv), 2));
        assert_ne!(s, r);
        assert_eq!(q.sends_out(), 1);
        assert!(q.uses_lkey(1) && q.uses_lkey(2));
        assert_eq!(q.take(s).unwrap().0, 10);
        assert!(q.take(s).is_none(), "a completion seen twice finds nothing");
        assert!(q.take(r | 1 << 63).is_none(), "an SRQ's id is not ours");
        assert_eq!(q.sends_out(), 0);
        assert!(q.uses_lkey(2) && !q.uses_lkey(1));
        assert_eq!(q.take(r).unwrap().0, 11);
        let again = q.add(req(12, None, 3));
        assert!(q.take(s).is_none() && q.take(r).is_none(), "ids of a slot's earlier use");
        assert_eq!(q.take(again).unwrap().0, 12);
    }
}
