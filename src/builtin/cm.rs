//! Connection management of EPs: connect, dup_connect, accept (for the CR functions) and
//! disconnect, and the connection events the device reports.

use core::ffi::c_void;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::ep::{self, configured, ep_state_subtype, is_ud, Ep, EpInner, SendQueue};
use super::events::dto_event;
use super::ia::max_private_data;
use super::pz::Pz;
use super::{dto, evd};
use crate::abi::*;
use crate::device::{CmEvent, Completion, DevError, Moved, PendingConnection, Qp, QpCaps, QpEvents, Service, WcOp};
use crate::util::sockaddr;

/// Where an EP's QP reports: the EP, if it still exists, and the connection's send queue
/// (whose completions need neither the EP nor its lock); and whose keys it may use: its PZ's.
struct EpEvents {
    ep: Weak<Ep>,
    pz: Arc<Pz>,
    sends: Arc<SendQueue>,
}

impl QpEvents for EpEvents {
    fn completion(&self, c: Completion) {
        if matches!(c.op, WcOp::Recv | WcOp::RecvImm) {
            if let Some(ep) = self.ep.upgrade() {
                dto::on_recv_completion(&ep, c);
            }
        } else {
            dto::on_send_completion(&self.sends, c);
        }
    }
    fn key_live(&self, lkey: u32) -> bool {
        self.pz.key_live(lkey)
    }
    fn cm(&self, ev: CmEvent) {
        if let Some(ep) = self.ep.upgrade() {
            on_cm(&ep, ev);
        }
    }
    fn moved(&self, bytes: Moved) {
        self.pz.ia.counts.add_moved(bytes);
    }
}

/// Creates the EP's QP (at connect or accept time) and hands it the receives posted so far.
fn attach_qp(ep: &Ep, i: &mut EpInner) -> Result<Arc<dyn Qp>, DAT_RETURN> {
    let pz = i.pz().cloned().ok_or(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED))?;
    let a = i.attr();
    let ud = is_ud(a);
    let caps = QpCaps {
        service: if ud { Service::Ud } else { Service::Rc },
        max_send_wr: a.max_request_dtos.max(1) as u32,
        max_recv_wr: a.max_recv_dtos.max(1) as u32,
        max_send_sge: a.max_request_iov.max(a.max_rdma_read_iov).max(a.max_rdma_write_iov).max(1) as u32,
        max_recv_sge: a.max_recv_iov.max(1) as u32,
        max_rd_atomic: a.max_rdma_read_out.max(1) as u32,
        max_rd_in: a.max_rdma_read_in.max(1) as u32,
        max_message: if ud { a.max_message_size } else { ep.ia.dev.limits().max_msg_size },
    };
    let srq = i.srq().map(|s| s.dev.clone());
    let sends = Arc::new(SendQueue::new(ep.handle, a.max_request_dtos.max(0) as u32));
    let events = Arc::new(EpEvents { ep: ep.weak(), pz: pz.clone(), sends: sends.clone() });
    let qp = ep.ia.dev.create_qp(pz.pd, caps, srq, events).map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP))?;
    // A receive whose LMR was freed since it was posted completes as refused, and the
    // connection goes ahead without it.
    i.hand_unposted(
        |wr_id, r| match qp.post_recv(wr_id, r.sges().clone()) {
            Ok(()) => Ok(()),
            Err(e) => Err(e == DevError::Fault),
        },
        |cookie| dto_event(ep.handle, cookie, DAT_DTO_ERR_LOCAL_PROTECTION, 0, DAT_DTO_RECEIVE, 0),
    )
    .map_err(|()| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP))?;
    i.set_qp(&ep.ia, &qp, sends);
    Ok(qp)
}

/// Posts the events of receives a new QP refused ([`attach_qp`]), without the EP's lock: an
/// EVD's CNO may run a proxy agent that calls back into the EP.
fn post_refused(ep: &Ep) {
    let Some((evd, events)) = ep.lock().take_refused() else { return };
    evd::post_all(evd, events);
}

/// Checks private data arguments (`size` at `arg`, the data at `arg + 1`) against `max`.
pub fn private_data<'a>(size: DAT_COUNT, data: *const c_void, arg: DAT_RETURN, max: DAT_COUNT) -> Result<&'a [u8], DAT_RETURN> {
    if !(0..=max).contains(&size) {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    if size == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg + 1));
    }
    // SAFETY: the consumer passes `size` readable bytes.
    Ok(unsafe { core::slice::from_raw_parts(data as *const u8, size as usize) })
}

/// Reads a consumer's socket address (IPv4 or IPv6).
fn address_arg(addr: DAT_IA_ADDRESS_PTR) -> Result<SocketAddr, DAT_RETURN> {
    if addr.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    // SAFETY: a non-NULL consumer address is a socket address as long as its family says.
    unsafe { sockaddr::from_c(addr as *const libc::sockaddr) }.ok_or(dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED))
}

fn timeout_arg(timeout: DAT_TIMEOUT) -> Option<Duration> {
    (timeout != DAT_TIMEOUT_INFINITE).then(|| Duration::from_micros(u64::from(timeout)))
}

/// A connect timeout must be positive (DAT_TIMEOUT_INFINITE: no limit). No connection is
/// made in no time, so 0 is refused at once, as `DAT_INVALID_PARAMETER` naming the argument
/// (`arg`), and the EP stays unconnected; Debian's dapl does the same.
fn check_timeout(timeout: DAT_TIMEOUT, arg: DAT_RETURN) -> Result<(), DAT_RETURN> {
    if timeout == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    Ok(())
}

/// The QP a UD EP resolves peers with: its own, made on first use. A UD EP resolves any
/// number of peers, actively and passively, while it is unconnected or connected (it becomes
/// connected with its first resolved peer).
fn ud_qp(ep: &Ep, i: &mut EpInner) -> Result<Arc<dyn Qp>, DAT_RETURN> {
    if !matches!(i.state(), DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_CONNECTED) || !configured(i) {
        return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(i.state())));
    }
    match i.qp() {
        Some(qp) => Ok(qp.clone()),
        None => attach_qp(ep, i),
    }
}

/// Starts an active connection from an EP that is ready for one.
fn start_connect(
    ep: &Ep,
    addr: SocketAddr,
    conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    pdata: &[u8],
) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = start_connect_locked(ep, addr, conn_qual, timeout, pdata);
    post_refused(ep);
    r
}

fn start_connect_locked(
    ep: &Ep,
    addr: SocketAddr,
    conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    pdata: &[u8],
) -> Result<DAT_RETURN, DAT_RETURN> {
    // Where the connect goes is the device's (the qualifier may name the port): a pair it
    // cannot name is refused before the EP moves.
    let service = ep.ia.dev.service_address(addr, conn_qual).ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3))?;
    let qp = {
        let mut i = ep.lock();
        if i.is_ud() {
            let qp = ud_qp(ep, &mut i)?;
            drop(i);
            return resolve(ep, qp, addr, service, conn_qual, timeout, pdata);
        }
        if i.state() != DAT_EP_STATE_UNCONNECTED || !configured(&i) {
            return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(i.state())));
        }
        let qp = attach_qp(ep, &mut i)?;
        i.begin_connect(addr, conn_qual);
        i.counts().bump(DCNT_EP_CONNECT);
        qp
    };
    ep.ia.counts.bump(DCNT_IA_CM_REQ_TX);
    qp.connect(service, conn_qual, pdata, timeout_arg(timeout)).map_err(|e| {
        ep.lock().connect_refused();
        connect_error(e)
    })?;
    Ok(DAT_SUCCESS)
}

fn connect_error(e: DevError) -> DAT_RETURN {
    match e {
        DevError::NotSupported => dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED),
        _ => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP),
    }
}

/// A UD EP's connect: resolves the peer's service point (at `service`, the device's choice
/// for `addr`); the outcome is a UD connection event.
#[allow(clippy::too_many_arguments)]
fn resolve(
    ep: &Ep,
    qp: Arc<dyn Qp>,
    addr: SocketAddr,
    service: SocketAddr,
    conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    pdata: &[u8],
) -> Result<DAT_RETURN, DAT_RETURN> {
    qp.connect(service, conn_qual, pdata, timeout_arg(timeout)).map_err(connect_error)?;
    ep.lock().set_remote(addr, conn_qual);
    Ok(DAT_SUCCESS)
}

#[allow(clippy::too_many_arguments)]
pub fn connect(
    handle: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    size: DAT_COUNT,
    data: *const c_void,
    qos: DAT_QOS,
    flags: DAT_CONNECT_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep::ep(handle)?;
    let addr = address_arg(addr)?;
    check_timeout(timeout, DAT_INVALID_ARG4)?;
    let pdata = private_data(size, data, DAT_INVALID_ARG5, max_private_data(&ep.ia))?;
    if qos & !(DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | DAT_QOS_ECONOMY | DAT_QOS_PREMIUM) != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7));
    }
    if flags & !DAT_CONNECT_MULTIPATH_FLAG != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8));
    }
    if flags & DAT_CONNECT_MULTIPATH_FLAG != 0 {
        return Err(dat_error(DAT_MODEL_NOT_SUPPORTED, 0));
    }
    start_connect(&ep, addr, conn_qual, timeout, pdata)
}

pub fn dup_connect(
    handle: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    size: DAT_COUNT,
    data: *const c_void,
    qos: DAT_QOS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep::ep(handle)?;
    let other = ep::ep(dup)?;
    check_timeout(timeout, DAT_INVALID_ARG3)?;
    let pdata = private_data(size, data, DAT_INVALID_ARG4, max_private_data(&ep.ia))?;
    let _ = qos;
    // Only an EP that connected to a service point names one to connect to again.
    let (addr, conn_qual) = other.lock().connected_to().ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))?;
    start_connect(&ep, addr, conn_qual, timeout, pdata)
}

/// Accepts a connection request on `ep` (from `dat_cr_accept`).
pub fn accept(ep: &Arc<Ep>, pending: &Arc<dyn PendingConnection>, pdata: &[u8]) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = accept_locked(ep, pending, pdata);
    post_refused(ep);
    r
}

fn accept_locked(ep: &Arc<Ep>, pending: &Arc<dyn PendingConnection>, pdata: &[u8]) -> Result<DAT_RETURN, DAT_RETURN> {
    let qp = {
        let mut i = ep.lock();
        // A datagram request is accepted only by a UD EP, and a UD EP accepts only those.
        if pending.datagram() != i.is_ud() {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        }
        if i.is_ud() {
            let qp = ud_qp(ep, &mut i)?;
            drop(i);
            pending.accept(&qp, pdata).map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP))?;
            return Ok(DAT_SUCCESS);
        }
        if !matches!(i.state(), DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_RESERVED) || !configured(&i) {
            return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(i.state())));
        }
        let qp = attach_qp(ep, &mut i)?;
        i.begin_accept(pending.remote());
        qp
    };
    pending.accept(&qp, pdata).map_err(|_| {
        ep.lock().accept_refused();
        dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)
    })?;
    Ok(DAT_SUCCESS)
}

pub fn disconnect(handle: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep::ep(handle)?;
    if !matches!(flags, DAT_CLOSE_ABRUPT_FLAG | DAT_CLOSE_GRACEFUL_FLAG) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let qp = {
        let mut i = ep.lock();
        match i.state() {
            DAT_EP_STATE_CONNECTED
            | DAT_EP_STATE_ACTIVE_CONNECTION_PENDING
            | DAT_EP_STATE_COMPLETION_PENDING
            | DAT_EP_STATE_PASSIVE_CONNECTION_PENDING
            | DAT_EP_STATE_DISCONNECT_PENDING => {}
            DAT_EP_STATE_DISCONNECTED => return Ok(DAT_SUCCESS),
            s => return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(s))),
        }
        i.counts().bump(DCNT_EP_DISCONNECT);
        i.begin_disconnect()
    };
    ep.ia.counts.bump(DCNT_IA_CM_DREQ_TX);
    if let Some(qp) = qp {
        qp.disconnect(flags == DAT_CLOSE_GRACEFUL_FLAG);
    }
    Ok(DAT_SUCCESS)
}

/// A connection event of the EP's QP: move the EP's state and tell the consumer.
pub fn on_cm(ep: &Arc<Ep>, ev: CmEvent) {
    let ud = ep.lock().is_ud();
    let ev = if ud {
        match super::ud::on_cm(ep, ev) {
            Some(ev) => ev,
            None => return,
        }
    } else {
        ev
    };
    let (mut number, pdata) = match &ev {
        CmEvent::Established { private_data } => (DAT_CONNECTION_EVENT_ESTABLISHED, private_data.clone()),
        CmEvent::PeerRejected { private_data } => (DAT_CONNECTION_EVENT_PEER_REJECTED, private_data.clone()),
        CmEvent::NonPeerRejected => (DAT_CONNECTION_EVENT_NON_PEER_REJECTED, Vec::new()),
        CmEvent::Unreachable => (DAT_CONNECTION_EVENT_UNREACHABLE, Vec::new()),
        CmEvent::TimedOut => (DAT_CONNECTION_EVENT_TIMED_OUT, Vec::new()),
        CmEvent::Disconnected => (DAT_CONNECTION_EVENT_DISCONNECTED, Vec::new()),
        CmEvent::Broken => (DAT_CONNECTION_EVENT_BROKEN, Vec::new()),
        CmEvent::AcceptCompletionError => (DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, Vec::new()),
        // Only a UD EP's QP resolves peers (handled above).
        CmEvent::UdResolved { .. } => return,
    };
    let mut crossing = None;
    let (evd, ptr, len) = {
        let mut i = ep.lock();
        crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "EP {:#x} in state {}: connection event {number:#x}", ep.handle, i.state());
        // Before the state moves: who made the connection, and whether this side ended it.
        let (active, asked) = (i.state() == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, i.state() == DAT_EP_STATE_DISCONNECT_PENDING);
        if number == DAT_CONNECTION_EVENT_ESTABLISHED {
            // The hard high watermark applies from the moment the connection exists.
            let Some(c) = i.established() else { return };
            crossing = Some(c);
        } else {
            // One connection ends once: whatever reports its end later is not news. An end we
            // caused (the hard watermark, a dead key) is reported as broken.
            let Some(n) = i.ended(number) else { return };
            number = n;
        }
        ep.ia.counts.connection_event(number, active, asked);
        let boxed: Box<[u8]> = pdata.into_boxed_slice();
        let ptr = if boxed.is_empty() { core::ptr::null_mut() } else { boxed.as_ptr() as *mut c_void };
        let len = boxed.len();
        i.keep_private_data(boxed);
        (i.connect_evd().cloned(), ptr, len)
    };
    // An EP on an SRQ also reports, on the async EVD, that its last receive is done (the
    // verbs "last WQE reached" event): DAT_ASYNC_ERROR_EP_BROKEN naming the EP, which is what
    // Debian's dtestsrq waits for.
    let ended = matches!(number, DAT_CONNECTION_EVENT_DISCONNECTED | DAT_CONNECTION_EVENT_BROKEN);
    if ended && ep.lock().srq().is_some() {
        evd::post_async(&ep.ia, DAT_ASYNC_ERROR_EP_BROKEN, ep.handle, DAT_EP_OTHER_ERROR as DAT_COUNT);
    }
    if let Some(evd) = evd {
        let mut e = DAT_EVENT { event_number: number, ..Default::default() };
        e.event_data.connect_event_data =
            DAT_CONNECTION_EVENT_DATA { ep_handle: ep.handle as DAT_EP_HANDLE, private_data_size: len as DAT_COUNT, private_data: ptr };
        evd.post(e);
    }
    if let Some(c) = crossing {
        c.report(ep);
    }
}
