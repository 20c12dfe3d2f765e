//! Shared receive queues of the verbs device (`ibv_srq`), with the limit event armed through
//! `ibv_modify_srq` and reported by the progress thread.

use std::sync::{Arc, Mutex};

use super::device::VerbsDevice;
use super::errno::{dev_error, last_error};
use super::inuse::WrKeys;
use super::{api, sys, Ptr};
use crate::device::{keys_live, DevError, Pd, Sges, Srq, SrqEvents};
use crate::util::idmap::IdMap;
use crate::util::sync::MutexExt;

pub struct VerbsSrq {
    dev: Arc<VerbsDevice>,
    pub(super) srq: Ptr<sys::ibv_srq>,
    max_wr: Mutex<u32>,
    posted: Mutex<Posted>,
    pub(super) events: Arc<dyn SrqEvents>,
}

/// The receives posted and not yet completed.
#[derive(Default)]
struct Posted {
    next: u64,
    /// Our receive ids -> the consumer's, and the lkeys the receive was posted with.
    ids: IdMap<u64, (u64, WrKeys)>,
}

// SAFETY: the SRQ is an rdma-core object usable from any thread; state is behind mutexes.
unsafe impl Send for VerbsSrq {}
// SAFETY: as above.
unsafe impl Sync for VerbsSrq {}

impl VerbsSrq {
    pub(super) fn create(
        dev: &Arc<VerbsDevice>,
        pd: Pd,
        max_wr: u32,
        max_sge: u32,
        events: Arc<dyn SrqEvents>,
    ) -> Result<Arc<VerbsSrq>, DevError> {
        let pdp = dev.pd_ptr(pd)?;
        // SAFETY: plain data.
        let mut a: sys::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        a.attr.max_wr = max_wr.max(1);
        a.attr.max_sge = max_sge.max(1);
        // SAFETY: a live PD and initialised attributes.
        let srq = unsafe { (dev.api.ibv.create_srq)(pdp.0, &mut a) };
        if srq.is_null() {
            return Err(last_error());
        }
        let s = Arc::new(VerbsSrq {
            dev: dev.clone(),
            srq: Ptr(srq),
            max_wr: Mutex::new(max_wr),
            // The top bit set: the ids of a QP's own requests never have it, and its CQ
            // reports both.
            posted: Mutex::new(Posted { next: 1 << 63, ..Posted::default() }),
            events,
        });
        dev.lock().srqs.insert(srq as usize, Arc::downgrade(&s));
        Ok(s)
    }

    /// The concrete SRQ behind a trait object made by this device.
    pub(super) fn downcast(s: Arc<dyn Srq>) -> Option<Arc<VerbsSrq>> {
        s.as_any().downcast_ref::<VerbsSrq>()?;
        let raw = Arc::into_raw(s) as *const VerbsSrq;
        // SAFETY: checked above to be a VerbsSrq; the pointer comes from Arc::into_raw of that
        // same allocation.
        Some(unsafe { Arc::from_raw(raw) })
    }

    pub(super) fn max_wr(&self) -> u32 {
        *self.max_wr.locked()
    }

    /// A receive of this SRQ completed on one of its QPs: the consumer's id.
    pub(super) fn take(&self, id: u64) -> Option<u64> {
        let mut p = self.posted.locked();
        let (wr_id, _) = p.ids.remove(&id)?;
        Some(wr_id)
    }

    /// Whether a receive posted here with `lkey` is still outstanding.
    pub(super) fn uses_lkey(&self, lkey: u32) -> bool {
        self.posted.locked().ids.values().any(|(_, keys)| keys.contains(lkey))
    }
}

impl Drop for VerbsSrq {
    fn drop(&mut self) {
        self.dev.lock().srqs.remove(&(self.srq.0 as usize));
        // SAFETY: our SRQ, destroyed once (its QPs hold it alive until they are gone).
        unsafe { (self.dev.api.ibv.destroy_srq)(self.srq.0) };
    }
}

impl Srq for VerbsSrq {
    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError> {
        // (zero-length entries left out on siw, as for a QP's requests: see qp.rs)
        let mut list: Vec<sys::ibv_sge> = sges
            .iter()
            .filter(|s| s.len > 0 || !self.dev.siw)
            .map(|s| sys::ibv_sge { addr: s.addr, length: s.len, lkey: s.lkey })
            .collect();
        // SAFETY: plain data.
        let mut wr: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.sg_list = if list.is_empty() { std::ptr::null_mut() } else { list.as_mut_ptr() };
        wr.num_sge = list.len() as i32;
        let keys = WrKeys::of(&sges);
        let mut p = self.posted.locked();
        // Under the lock `uses_lkey` takes (see QpEvents::key_live).
        if !keys_live(&sges, |k| self.events.key_live(k)) {
            return Err(DevError::Fault);
        }
        let id = p.next;
        p.next += 1;
        wr.wr_id = id;
        let mut bad = std::ptr::null_mut();
        // SAFETY: our SRQ; the request and its list live across the call.
        let rc = unsafe { api::post_srq_recv(self.srq.0, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(if rc == libc::ENOMEM { DevError::QueueFull } else { dev_error(rc) });
        }
        p.ids.insert(id, (wr_id, keys));
        Ok(())
    }

    fn set_limit(&self, limit: u32) {
        // SAFETY: plain data.
        let mut a: sys::ibv_srq_attr = unsafe { std::mem::zeroed() };
        a.srq_limit = limit;
        // SAFETY: our SRQ and initialised attributes.
        unsafe { (self.dev.api.ibv.modify_srq)(self.srq.0, &mut a, sys::IBV_SRQ_LIMIT as i32) };
    }

    fn resize(&self, max_wr: u32) -> Result<(), DevError> {
        // SAFETY: plain data.
        let mut a: sys::ibv_srq_attr = unsafe { std::mem::zeroed() };
        a.max_wr = max_wr;
        // SAFETY: our SRQ and initialised attributes.
        let rc = unsafe { (self.dev.api.ibv.modify_srq)(self.srq.0, &mut a, sys::IBV_SRQ_MAX_WR as i32) };
        if rc != 0 {
            return Err(dev_error(rc));
        }
        *self.max_wr.locked() = max_wr;
        Ok(())
    }

    fn available(&self) -> usize {
        self.posted.locked().ids.len()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
