//! Data transfer on EPs: posting receives (also ahead of a connection), sends and RDMA
//! (checked against the EP's limits at post time, never overrunning a queue), and turning the
//! device's completions into DTO events, in order, on the EP's EVDs (the events themselves are
//! built in [`super::events`]).

use std::sync::Arc;

use super::counters::Received;
use super::ep::{self, check_watermarks, ep_state_subtype, Ep, SendQueue, COMPLETION_FLAGS};
use super::events::{dto_event, immediate_event, request_event, send_immediate_event, ud_recv_event, PendingSend, Report};
use super::iov::{iov_slice, sges, PostedRecv};
use crate::abi::*;
use crate::device::{keys_live, sges_len, AddressHandle, Completion, DevError, SendWr, Sge, Sges, WcOp, WrOp};
use crate::util::sync::MutexExt;

/// What a post asks of the device.
pub struct Post {
    pub op: WrOp,
    pub report: Report,
    pub remote: Option<(u64, u32)>,
    /// UD: the destination (only `dat_ib_post_send_ud` posts on a UD EP).
    pub ah: Option<Arc<dyn AddressHandle>>,
    /// The EP attribute that bounds the local vector.
    pub max_iov: Vector,
}

/// Which of the EP's attributes bounds a request's local vector.
#[derive(Clone, Copy)]
pub enum Vector {
    /// `max_request_iov`: sends, and the extensions' atomics.
    Request,
    /// `max_rdma_write_iov`.
    RdmaWrite,
    /// `max_rdma_read_iov`.
    RdmaRead,
}

impl Vector {
    fn max(self, a: &DAT_EP_ATTR) -> DAT_COUNT {
        match self {
            Vector::Request => a.max_request_iov,
            Vector::RdmaWrite => a.max_rdma_write_iov,
            Vector::RdmaRead => a.max_rdma_read_iov,
        }
    }
}

impl Post {
    /// The completion flags' argument position: after the remote triplet for RDMA.
    fn flags_arg(&self) -> DAT_RETURN {
        if self.remote.is_some() {
            DAT_INVALID_ARG6
        } else {
            DAT_INVALID_ARG5
        }
    }
}

/// Writes [`sges`] of the consumer's triplets `iov` into `out` (empty), where the request is
/// built (no vector made and moved in after), and returns their summed length (one read of
/// each triplet; a separate sum was a vectorised loop with its own set-up).
#[inline(always)]
fn sges_into(iov: &[DAT_LMR_TRIPLET], out: &mut Sges) -> u64 {
    if iov.len() > out.inline_size() {
        *out = sges(iov);
        return iov.iter().map(|t| u64::from(t.segment_length)).sum();
    }
    // Written straight into the vector's inline room.
    let room = out.as_mut_ptr();
    let mut total = 0;
    for (k, t) in iov.iter().enumerate() {
        // SAFETY: k < iov.len() <= the inline capacity, which an empty SmallVec has.
        unsafe { room.add(k).write(Sge { addr: t.virtual_address, len: t.segment_length, lkey: t.lmr_context }) };
        total += u64::from(t.segment_length);
    }
    // SAFETY: the first iov.len() elements were written above (Sge is plain data).
    unsafe { out.set_len(iov.len()) };
    total
}

/// Posts a send-queue request; `count`/`iov` are the consumer's local vector.
pub fn post(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    p: Post,
) -> Result<DAT_RETURN, DAT_RETURN> {
    ep::with_ep(handle, |ep| post_on(ep, count, iov, cookie, flags, p))
}

/// [`post`] on an EP already resolved.
pub fn post_on(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    p: Post,
) -> Result<DAT_RETURN, DAT_RETURN> {
    #[cfg(test)]
    super::fault::hit(super::fault::Point::Post);
    let mut i = ep.lock();
    // A UD EP takes only datagram sends, and only a UD EP takes them (checked first: a UD EP's
    // RDMA segment limits are 0, which would otherwise name the vector).
    let ud = i.is_ud();
    let limits = ep.ia.limits();
    if ud != p.ah.is_some() || !limits.supports(&p.op) {
        return Err(dat_error(DAT_MODEL_NOT_SUPPORTED, 0));
    }
    let local = iov_slice(count, iov, p.max_iov.max(i.attr()), DAT_INVALID_ARG2)?;
    if flags & !COMPLETION_FLAGS != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, p.flags_arg()));
    }
    // The request is built where the device reads it (lent, not moved), its scatter list
    // copied once into it from the consumer's triplets, summed as it goes.
    let mut wr = SendWr {
        wr_id: 0,
        op: p.op,
        sges: Sges::new(),
        remote: p.remote,
        ah: p.ah,
        fence: flags & DAT_COMPLETION_BARRIER_FENCE_FLAG != 0,
        solicited: flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG != 0,
    };
    let len = sges_into(local, &mut wr.sges);
    // Like an HCA, only the device's message size limit is enforced (programs such as dtest
    // post RDMA larger than the max_rdma_size they ask for); a datagram's is the EP's
    // max_message_size, which is at most the path MTU.
    let limit = if ud { i.attr().max_message_size } else { limits.max_msg_size };
    if len > u64::from(limit) {
        return Err(dat_error(DAT_LENGTH_ERROR, 0));
    }
    if i.state() != DAT_EP_STATE_CONNECTED {
        return not_connected(ep, i, PendingSend { cookie, flags, report: p.report });
    }
    let qp = i.qp().cloned().ok_or(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY))?;
    let s = PendingSend { cookie, flags, report: p.report };
    let wr_id = match i.add_send(s) {
        Ok(id) => id,
        Err(_) => {
            // Completions nobody has collected yet (a consumer that suppresses them never
            // dequeues) may still hold the slots: the device delivers what is ready first.
            drop(i);
            ep.ia.dev.progress();
            i = ep.lock();
            if i.state() != DAT_EP_STATE_CONNECTED {
                return not_connected(ep, i, PendingSend { cookie, flags, report: p.report });
            }
            if !i.qp().is_some_and(|q| Arc::ptr_eq(q, &qp)) {
                return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY));
            }
            i.add_send(PendingSend { cookie, flags, report: p.report })
                .map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP))?
        }
    };
    let serial = i.send_queue().map_or(0, |q| q.serial());
    i.counts().posted(&wr.op, ud, len);
    drop(i);
    wr.wr_id = wr_id;
    if let Err(e) = qp.post_send(&wr) {
        let i = ep.lock();
        let sent = i.take_send(serial, wr_id);
        if let (DevError::Fault, Some(s)) = (e, sent) {
            drop(i);
            refuse_dead_key(ep, request_event(ep.handle, &s, DAT_DTO_ERR_LOCAL_PROTECTION, 0), false);
            return Ok(DAT_SUCCESS);
        }
        return Err(match e {
            DevError::State => dat_error(DAT_INVALID_STATE, ep_state_subtype(i.state())),
            _ => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP),
        });
    }
    Ok(DAT_SUCCESS)
}

/// A post on an EP that is not connected: on a disconnected one it is accepted and completes at
/// once as flushed; otherwise it is refused with the state's subtype.
#[cold]
#[inline(never)]
fn not_connected(ep: &Ep, i: crate::util::lock::LockGuard<'_, super::ep::EpInner>, s: PendingSend) -> Result<DAT_RETURN, DAT_RETURN> {
    let state = i.state();
    if state != DAT_EP_STATE_DISCONNECTED {
        return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(state)));
    }
    let evd = i.request_evd().cloned();
    drop(i);
    if let Some(evd) = evd {
        evd.post(request_event(ep.handle, &s, DAT_DTO_ERR_FLUSHED, 0));
    }
    Ok(DAT_SUCCESS)
}

/// A request with a segment that names no live LMR of the EP's PZ (`QpEvents::key_live`),
/// refused by the device before it moved a byte: as on an HCA, it completes with
/// `event` (DAT_DTO_ERR_LOCAL_PROTECTION), and a connection ends, reported as broken (what
/// else is posted is flushed). `recv` says which EVD reports it.
pub fn refuse_dead_key(ep: &Ep, event: DAT_EVENT, recv: bool) {
    let (evd, qp) = {
        let mut i = ep.lock();
        let qp = i.break_connection();
        (if recv { i.recv_evd() } else { i.request_evd() }.cloned(), qp)
    };
    crate::dbg_log!(
        crate::log::DbgType::PROVIDER_API,
        "EP {:#x}: a request names a freed or foreign lmr_context: LOCAL_PROTECTION",
        ep.handle
    );
    if let Some(evd) = evd {
        evd.post(event);
    }
    if let Some(qp) = qp {
        qp.disconnect(false);
    }
}

/// Checks a remote RMR triplet argument and returns (address, key, length).
pub fn remote_arg(remote: *const DAT_RMR_TRIPLET, arg: DAT_RETURN) -> Result<(u64, u32, u32), DAT_RETURN> {
    if remote.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    // SAFETY: the consumer's triplet.
    let t = unsafe { remote.read() };
    Ok((t.virtual_address, t.rmr_context, t.segment_length))
}

/// A receive completion of the EP's QP: report it on the recv EVD.
pub fn on_recv_completion(ep: &Arc<Ep>, c: Completion) {
    let success = c.status == DAT_DTO_SUCCESS;
    let mut crossing = None;
    let (evd, event, notify) = {
        let mut i = ep.lock();
        let own = i.take_recv(c.wr_id);
        let from_srq = own.is_none();
        let r = own.or_else(|| i.srq().and_then(|s| s.recvs.locked().remove(&c.wr_id)));
        let Some(r) = r else { return };
        if from_srq && c.status != DAT_DTO_ERR_FLUSHED {
            // The EP took a buffer from the SRQ for this message: with its own, that is
            // what it holds as the message lands (the watermarks' count).
            let held = i.recvs_held() + 1;
            crossing = Some(ep::check_watermarks(&mut i, held));
        }
        let event = if i.is_ud() {
            ud_recv_event(ep.handle, r.cookie(), c.status, c.byte_len)
        } else if c.op == WcOp::RecvImm {
            immediate_event(ep.handle, r.cookie(), c.status, c.byte_len, c.imm.unwrap_or(0))
        } else if let Some(imm) = c.imm {
            send_immediate_event(ep.handle, r.cookie(), c.status, c.byte_len, imm)
        } else {
            let (op, ctx) = match c.invalidated {
                Some(k) => (DAT_DTO_RECEIVE_WITH_INVALIDATE, k),
                None => (DAT_DTO_RECEIVE, 0),
            };
            if let Some(k) = c.invalidated {
                super::rmr::invalidated(&ep.ia, k);
            }
            dto_event(ep.handle, r.cookie(), c.status, c.byte_len, op, ctx)
        };
        if success {
            let what = match (i.is_ud(), c.op, c.imm) {
                (true, ..) => Received::Datagram,
                (_, WcOp::RecvImm, _) => Received::WriteImm,
                (_, _, Some(_)) => Received::SendImm,
                _ => Received::Message,
            };
            i.counts().received(what, u64::from(c.byte_len));
        }
        // On a solicited-wait stream only what the sender solicited, or a failure, notifies.
        let notify = !ep::solicited_wait(i.attr()) || c.solicited || !success;
        (i.recv_evd().cloned(), event, notify)
    };
    if let Some(evd) = evd {
        evd.post_as(event, notify);
    }
    if let Some(c) = crossing {
        c.report(ep);
    }
}

/// A send-queue completion of a connection: reported on the request EVD of the connection's
/// first request (see [`SendQueue`]), unless it was suppressed. Neither the EP nor its lock
/// is touched.
pub fn on_send_completion(q: &SendQueue, c: Completion) {
    // An error ends the connection; the connection event that follows moves the state.
    let Some(s) = q.take(c.wr_id) else { return };
    if c.status == DAT_DTO_SUCCESS && s.flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) != 0 {
        return;
    }
    // The event is built in the call: one copy of it, into the EVD's queue.
    if let Some(evd) = q.evd() {
        evd.post_as(request_event(q.ep(), &s, c.status, c.byte_len), true);
    }
}

pub fn post_send(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    ep::with_ep(handle, |ep| post_send_on(ep, count, iov, cookie, flags))
}

pub fn post_send_on(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let send = Post { op: WrOp::Send, report: Report::Dto(DAT_DTO_SEND), remote: None, ah: None, max_iov: Vector::Request };
    post_on(ep, count, iov, cookie, flags, send)
}

/// An RDMA write or read: the local vector, and the remote triplet (argument 5).
#[allow(clippy::too_many_arguments)]
fn post_rdma(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
    op: WrOp,
    dto: DAT_DTOS,
    max_iov: Vector,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let (addr, key, _) = remote_arg(remote, DAT_INVALID_ARG5)?;
    post_on(ep, count, iov, cookie, flags, Post { op, report: Report::Dto(dto), remote: Some((addr, key)), ah: None, max_iov })
}

pub fn post_rdma_write(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    ep::with_ep(handle, |ep| post_rdma_write_on(ep, count, iov, cookie, remote, flags))
}

pub fn post_rdma_write_on(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    post_rdma(ep, count, iov, cookie, remote, flags, WrOp::Write, DAT_DTO_RDMA_WRITE, Vector::RdmaWrite)
}

pub fn post_rdma_read(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    ep::with_ep(handle, |ep| post_rdma_read_on(ep, count, iov, cookie, remote, flags))
}

pub fn post_rdma_read_on(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    post_rdma(ep, count, iov, cookie, remote, flags, WrOp::Read, DAT_DTO_RDMA_READ, Vector::RdmaRead)
}

/// `ep_post_send_with_invalidate_func` (reached through the `DAT_EP_POST_SEND_WITH_INVALIDATE`
/// redirection macro, which calls the provider table directly): a send that, when
/// `invalidate` is true, also revokes the peer's memory window `rmr_context`. The receiver's
/// completion is DAT_DTO_RECEIVE_WITH_INVALIDATE carrying that context, and its RMR is unbound.
pub fn post_send_with_invalidate(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    invalidate: DAT_BOOLEAN,
    rmr_context: DAT_RMR_CONTEXT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let op = if invalidate != DAT_FALSE { WrOp::SendInv(rmr_context) } else { WrOp::Send };
    post(
        handle,
        count,
        iov,
        cookie,
        flags,
        Post { op, report: Report::Dto(DAT_DTO_SEND), remote: None, ah: None, max_iov: Vector::Request },
    )
}

// Receives.

pub fn post_recv(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    ep::with_ep(handle, |ep| post_recv_on(ep, count, iov, cookie, flags))
}

pub fn post_recv_on(
    ep: &Ep,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let mut i = ep.lock();
    // As for sends (dto::post): receive completions not collected yet hold their slots.
    if i.recvs_full() {
        drop(i);
        ep.ia.dev.progress();
        i = ep.lock();
    }
    let (wr_id, list, qp, crossing) = {
        let list = sges(iov_slice(count, iov, i.attr().max_recv_iov, DAT_INVALID_ARG2)?);
        if flags & !COMPLETION_FLAGS != 0 {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
        }
        if i.recv_evd().is_none() {
            return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_EVD_RECV));
        }
        if i.srq().is_some() {
            // Its receives come from the SRQ (dat_srq_post_recv).
            return Err(dat_error(DAT_INVALID_STATE, 0));
        }
        if i.recvs_full() {
            return Err(dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        }
        let qp = i.qp().cloned();
        // Without a QP yet, checked now as the device checks at post (and again when the QP
        // takes it).
        if qp.is_none() && i.pz().is_some_and(|pz| !keys_live(&list, |k| pz.key_live(k))) {
            drop(i);
            refuse_dead_key(ep, dto_event(ep.handle, cookie, DAT_DTO_ERR_LOCAL_PROTECTION, 0, DAT_DTO_RECEIVE, 0), true);
            return Ok(DAT_SUCCESS);
        }
        let len = sges_len(&list);
        // The list goes to the QP, or is kept until there is one.
        let (recv, list) = match qp {
            Some(_) => (PostedRecv::posted(cookie, len), list),
            None => (PostedRecv::waiting(cookie, len, list), Sges::new()),
        };
        let wr_id = i.add_recv(recv);
        i.counts().posted_recv(len);
        let held = i.recvs_held();
        let crossing = check_watermarks(&mut i, held);
        drop(i);
        (wr_id, list, qp, crossing)
    };
    let posted = qp.map_or(Ok(()), |qp| qp.post_recv(wr_id, list));
    // After the receive is with the QP: a connection broken by the hard watermark flushes it.
    crossing.report(ep);
    if let Err(e) = posted {
        let mut i = ep.lock();
        i.take_recv(wr_id);
        return Err(match e {
            DevError::State => {
                // The connection is gone: the receive completes as flushed.
                drop(i);
                flush_one_recv(ep, cookie);
                return Ok(DAT_SUCCESS);
            }
            DevError::Fault => {
                drop(i);
                refuse_dead_key(ep, dto_event(ep.handle, cookie, DAT_DTO_ERR_LOCAL_PROTECTION, 0, DAT_DTO_RECEIVE, 0), true);
                return Ok(DAT_SUCCESS);
            }
            _ => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP),
        });
    }
    Ok(DAT_SUCCESS)
}

fn flush_one_recv(ep: &Ep, cookie: DAT_DTO_COOKIE) {
    let evd = ep.lock().recv_evd().cloned();
    if let Some(evd) = evd {
        evd.post(dto_event(ep.handle, cookie, DAT_DTO_ERR_FLUSHED, 0, DAT_DTO_RECEIVE, 0));
    }
}
