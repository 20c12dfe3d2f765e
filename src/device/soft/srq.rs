//! The soft device's shared receive queue: receives that any attached QP consumes in order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use super::qp::SoftQp;
use crate::device::{keys_live, DevError, Sges, Srq, SrqEvents};
use crate::util::sync::MutexExt;

struct State {
    recvs: VecDeque<(u64, Sges)>,
    max_wr: u32,
    limit: u32,
    qps: Vec<Weak<SoftQp>>,
}

pub struct SoftSrq {
    max_sge: u32,
    state: Mutex<State>,
    events: Arc<dyn SrqEvents>,
}

impl SoftSrq {
    pub fn new(max_wr: u32, max_sge: u32, events: Arc<dyn SrqEvents>) -> SoftSrq {
        SoftSrq { max_sge, state: Mutex::new(State { recvs: VecDeque::new(), max_wr, limit: 0, qps: Vec::new() }), events }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    pub fn attach(&self, qp: Weak<SoftQp>) {
        let mut s = self.lock();
        s.qps.retain(|q| q.strong_count() > 0);
        s.qps.push(qp);
    }

    pub fn is_empty(&self) -> bool {
        self.lock().recvs.is_empty()
    }

    /// Takes the oldest receive; fires the limit event when the queue falls below the limit.
    pub fn pop(&self) -> Option<(u64, Sges)> {
        let (r, fire) = {
            let mut s = self.lock();
            let r = s.recvs.pop_front();
            let fire = r.is_some() && s.limit > 0 && (s.recvs.len() as u32) < s.limit;
            if fire {
                s.limit = 0;
            }
            (r, fire)
        };
        if fire {
            self.events.limit_reached();
        }
        r
    }

    /// A receive `pop` took and its QP did not use: first in line again. It may exceed max_wr
    /// for a moment, as it was counted when posted.
    pub fn put_back(&self, recv: (u64, Sges)) {
        self.lock().recvs.push_front(recv);
    }

    /// Receives went back on the queue (`put_back`): the attached QPs may hold requests that
    /// wait for one, as after a post. Called without any QP's locks held.
    pub fn receives_returned(&self) {
        let qps = self.lock().qps.clone();
        for qp in qps.iter().filter_map(Weak::upgrade) {
            qp.receive_posted();
        }
    }
}

impl Srq for SoftSrq {
    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError> {
        let qps = {
            let mut s = self.lock();
            if sges.len() > self.max_sge as usize {
                return Err(DevError::NoResources);
            }
            if s.recvs.len() >= s.max_wr as usize {
                return Err(DevError::QueueFull);
            }
            if !keys_live(&sges, |k| self.events.key_live(k)) {
                return Err(DevError::Fault);
            }
            s.recvs.push_back((wr_id, sges));
            s.qps.clone()
        };
        // A QP may hold requests that waited for a receive.
        for qp in qps.iter().filter_map(Weak::upgrade) {
            qp.receive_posted();
        }
        Ok(())
    }

    fn set_limit(&self, limit: u32) {
        self.lock().limit = limit;
    }

    fn resize(&self, max_wr: u32) -> Result<(), DevError> {
        let mut s = self.lock();
        if (max_wr as usize) < s.recvs.len() {
            return Err(DevError::State);
        }
        s.max_wr = max_wr;
        Ok(())
    }

    fn available(&self) -> usize {
        self.lock().recvs.len()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
