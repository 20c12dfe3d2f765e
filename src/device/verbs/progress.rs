//! The verbs device's progress thread: it waits on the completion channel, the rdma_cm event
//! channel and the async event fd (all non-blocking) and dispatches what arrives. Events are
//! copied and acknowledged before they are handed on, so that a consumer callback may destroy
//! the object they name.

use std::sync::Arc;

use super::cm::{self, CmEv};
use super::device::VerbsDevice;
use super::qp::CqOwner;
use super::{api, sys, Ptr};
use crate::dbg_log;
use crate::log::DbgType;
use crate::util::pin;

fn nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor rdma-core gave us.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn start(dev: &Arc<VerbsDevice>) -> std::io::Result<()> {
    // SAFETY: the channels and context are open for the device's life.
    let fds = unsafe { [(*dev.cm_channel.0).fd, (*dev.comp_channel.0).fd, (*dev.ctx.0).async_fd] };
    for fd in fds {
        nonblocking(fd)?;
    }
    let weak = Arc::downgrade(dev);
    std::thread::Builder::new().name("dat2-verbs".into()).stack_size(512 << 10).spawn(move || {
        let mut pfds: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        loop {
            // SAFETY: an array of pollfd of the length given.
            let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            let Some(dev) = weak.upgrade() else { return };
            if pfds[1].revents != 0 {
                completions(&dev);
            }
            if pfds[0].revents != 0 {
                cm_events(&dev);
            }
            if pfds[2].revents != 0 {
                async_events(&dev);
            }
        }
    })?;
    Ok(())
}

fn completions(dev: &Arc<VerbsDevice>) {
    let api = dev.api;
    loop {
        let mut cq = std::ptr::null_mut();
        let mut ctx = std::ptr::null_mut();
        // SAFETY: our non-blocking completion channel.
        if unsafe { (api.ibv.get_cq_event)(dev.comp_channel.0, &mut cq, &mut ctx) } != 0 {
            return;
        }
        // SAFETY: the context of each of the device's CQs is its QP's `CqOwner`, freed only
        // after `ibv_destroy_cq` returned, and that waits until every event it reported was
        // acknowledged: so it is live until the acknowledgement below.
        let qp = unsafe { (ctx as *const CqOwner).as_ref() }.and_then(|o| o.get()).and_then(|w| w.upgrade());
        // SAFETY: the CQ the event names; acknowledged at once so destroying it never waits.
        unsafe { (api.ibv.ack_cq_events)(cq, 1) };
        let Some(qp) = qp else { continue };
        // Re-armed (when someone still waits) before draining, so nothing is missed.
        qp.event_taken();
        drain(&qp, Ptr(cq));
    }
}

/// What a polling consumer finds ready now, on its own thread: every CQ not being polled by
/// another thread at this moment is polled empty.
pub(super) fn poll_now(dev: &VerbsDevice) {
    let polled = dev.lock().polled.clone();
    for qp in polled.iter().filter_map(|w| w.upgrade()) {
        let Some(_turn) = qp.polling.try_lock() else { continue };
        poll_cq(&qp, qp.cq());
    }
}

/// What a consumer about to block finds ready, after it armed every CQ: each CQ is polled
/// empty, waiting for its turn where another thread polls it. Skipping such a CQ (as
/// [`poll_now`] does) would lose a completion that arrived after the other thread's last poll
/// and before the arm: it raises no event, and the other thread has finished looking.
/// A thread that is itself dispatching completions (a CNO's proxy agent that waits, say) may
/// hold the turn it would wait for: it polls only what is free, as before.
pub(super) fn poll_before_blocking(dev: &VerbsDevice) {
    if pin::local().dispatching().get() {
        return poll_now(dev);
    }
    let polled = dev.lock().polled.clone();
    for qp in polled.iter().filter_map(|w| w.upgrade()) {
        drain(&qp, qp.cq());
    }
}

/// What one QP's CQ holds before its consumer blocks (see [`poll_before_blocking`]).
pub(super) fn drain_before_blocking(qp: &super::qp::VerbsQp) {
    if pin::local().dispatching().get() {
        return poll_qp(qp);
    }
    let _turn = qp.polling.lock();
    poll_cq(qp, qp.cq());
}

/// Arms every CQ of the device (a consumer starts waiting).
pub(super) fn arm_all(dev: &VerbsDevice) {
    // `polled` lists every QP, so every CQ (each QP has its own).
    let polled = dev.lock().polled.clone();
    for qp in polled.iter().filter_map(|w| w.upgrade()) {
        qp.arm();
    }
}

/// What one QP's CQ holds now, unless another thread is polling it.
#[inline]
pub(super) fn poll_qp(qp: &super::qp::VerbsQp) {
    if let Some(_turn) = qp.polling.try_lock() {
        poll_cq(qp, qp.cq());
    }
}

/// Polls a CQ empty, dispatching each completion to its QP, in turn with other pollers.
fn drain(qp: &Arc<super::qp::VerbsQp>, cq: Ptr<sys::ibv_cq>) {
    let _turn = qp.polling.lock();
    poll_cq(qp, cq);
}

/// Polls a CQ empty, handing each completion to its QP. Inline: the first poll, which a
/// polling consumer mostly finds empty, costs no frame of its own; what it found is handed on
/// out of line.
#[inline(always)]
fn poll_cq(qp: &super::qp::VerbsQp, cq: Ptr<sys::ibv_cq>) {
    // Not zeroed: the provider writes the entries it returns, and only those are read.
    let mut wcs = [const { std::mem::MaybeUninit::<sys::ibv_wc>::uninit() }; POLL_BATCH];
    // SAFETY: a live CQ and room for POLL_BATCH completions.
    let n = unsafe { api::poll_cq(cq.0, POLL_BATCH as i32, wcs.as_mut_ptr().cast()) };
    if n != 0 {
        dispatch(qp, cq, &mut wcs, n);
    }
}

/// Completions asked for per `ibv_poll_cq`.
const POLL_BATCH: usize = 16;

/// Hands on the `n` completions a poll of `cq` returned into `wcs` (an error when negative),
/// and polls again while the batch came back full.
#[inline(never)]
fn dispatch(qp: &super::qp::VerbsQp, cq: Ptr<sys::ibv_cq>, wcs: &mut [std::mem::MaybeUninit<sys::ibv_wc>; POLL_BATCH], mut n: i32) {
    loop {
        if n <= 0 {
            if n < 0 {
                dbg_log!(DbgType::ERROR, "verbs QP {}: ibv_poll_cq failed ({n})", qp.qp_num);
            }
            return;
        }
        let got = (n as usize).min(wcs.len());
        // Marked only while completions are handed on (the only time a consumer's callback
        // can run here): an empty poll does not touch the thread's state.
        {
            /// Restores the mark however the delivery ends (a consumer's callback may unwind).
            struct Restore(pin::LocalRef, bool);
            impl Drop for Restore {
                fn drop(&mut self) {
                    self.0.dispatching().set(self.1);
                }
            }
            let local = pin::local();
            let _restore = Restore(local, local.dispatching().replace(true));
            for wc in &wcs[..got] {
                // SAFETY: ibv_poll_cq filled the first `got` entries.
                qp.on_wc(unsafe { wc.assume_init_ref() });
            }
        }
        // Fewer than asked for: the CQ was empty then. What completes later raises an event
        // (the CQ was armed before it was drained) or waits for the next poll.
        if got < wcs.len() {
            return;
        }
        // SAFETY: a live CQ and room for POLL_BATCH completions.
        n = unsafe { api::poll_cq(cq.0, POLL_BATCH as i32, wcs.as_mut_ptr().cast()) };
    }
}

fn cm_events(dev: &Arc<VerbsDevice>) {
    let api = dev.api;
    loop {
        let mut ev = std::ptr::null_mut();
        // SAFETY: our non-blocking event channel.
        if unsafe { (api.cm.get_cm_event)(dev.cm_channel.0, &mut ev) } != 0 {
            return;
        }
        // SAFETY: an event rdma_cm returned, read before it is acknowledged below; its id is
        // live, and its parameters are the UD ones for an id of the UDP port space.
        let copied = unsafe {
            let e = &*ev;
            let udp = !e.id.is_null() && (*e.id).ps == sys::RDMA_PS_UDP;
            let (data, len) = if udp {
                (e.param.ud.private_data, e.param.ud.private_data_len)
            } else {
                (e.param.conn.private_data, e.param.conn.private_data_len)
            };
            let pdata = if data.is_null() || len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(data as *const u8, usize::from(len)).to_vec()
            };
            let ud = if udp {
                Some(cm::UdParam { ah_attr: e.param.ud.ah_attr, qp_num: e.param.ud.qp_num, qkey: e.param.ud.qkey })
            } else {
                None
            };
            let conn = if udp { sys::rdma_conn_param::default() } else { e.param.conn };
            CmEv {
                kind: e.event,
                status: e.status,
                id: Ptr(e.id),
                listen_id: Ptr(e.listen_id),
                private_data: pdata,
                initiator_depth: conn.initiator_depth,
                responder_resources: conn.responder_resources,
                ud,
            }
        };
        // SAFETY: the event above, acknowledged once.
        unsafe { (api.cm.ack_cm_event)(ev) };
        cm::on_event(dev, copied);
    }
}

fn async_events(dev: &Arc<VerbsDevice>) {
    let api = dev.api;
    loop {
        // SAFETY: plain data.
        let mut ev: sys::ibv_async_event = unsafe { std::mem::zeroed() };
        // SAFETY: our context's non-blocking async fd.
        if unsafe { (api.ibv.get_async_event)(dev.ctx.0, &mut ev) } != 0 {
            return;
        }
        let kind = ev.event_type;
        // SAFETY: the union member the event type names.
        let (qp, srq) = unsafe { (ev.element.qp as usize, ev.element.srq as usize) };
        // SAFETY: acknowledged once, after reading it.
        unsafe { (api.ibv.ack_async_event)(&mut ev) };
        dbg_log!(DbgType::PROVIDER_API, "verbs {}: async event {kind}", dev.name_str());
        match kind {
            sys::IBV_EVENT_SRQ_LIMIT_REACHED => {
                let s = dev.lock().srqs.get(&srq).and_then(|w| w.upgrade());
                if let Some(s) = s {
                    s.events.limit_reached();
                }
            }
            sys::IBV_EVENT_QP_FATAL | sys::IBV_EVENT_QP_REQ_ERR | sys::IBV_EVENT_QP_ACCESS_ERR => {
                let q = {
                    let s = dev.lock();
                    s.qps.values().filter_map(|w| w.upgrade()).find(|q| q.qp.0 as usize == qp)
                };
                if let Some(q) = q {
                    q.end(crate::device::CmEvent::Broken);
                }
            }
            _ => {}
        }
    }
}
