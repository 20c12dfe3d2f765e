//! EP semantics: creation with provider defaults or checked attributes, query and modify,
//! status, reset and free (posted work completes as
//! flushed on the EP's EVDs).

use core::ptr::addr_of_mut;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use super::counters::EpCounts;
use super::evd::{self, Evd};
use super::events::dto_event;
use super::ia::{self, Ia};
use super::iov::PostedRecv;
use super::put;
use super::pz::{self, Pz};
use super::srq::{self, Srq};
use super::table::{self, Object};
use crate::abi::*;
use crate::device::Qp;
use crate::util::idmap::IdMap;
use crate::util::lock::{Lock, LockGuard};
use crate::util::pin::{self, Local};
use crate::util::slots::Slots;
use crate::util::sync::MutexExt;

mod inner;
mod sendq;

pub use sendq::SendQueue;

/// Completion flags an EP may be asked to honour.
pub const COMPLETION_FLAGS: DAT_COMPLETION_FLAGS = DAT_COMPLETION_SUPPRESS_FLAG
    | DAT_COMPLETION_SOLICITED_WAIT_FLAG
    | DAT_COMPLETION_UNSIGNALLED_FLAG
    | DAT_COMPLETION_BARRIER_FENCE_FLAG
    | DAT_COMPLETION_EVD_THRESHOLD_FLAG;

pub struct EpInner {
    state: DAT_EP_STATE,
    pz: Option<Arc<Pz>>,
    recv_evd: Option<Arc<Evd>>,
    request_evd: Option<Arc<Evd>>,
    connect_evd: Option<Arc<Evd>>,
    attr: DAT_EP_ATTR,
    /// Posted receives by work request id; `unposted` holds those posted before a QP existed,
    /// in order.
    recvs: Slots<PostedRecv>,
    unposted: VecDeque<u64>,
    /// The current (or last) connection's send queue: requests posted and not completed;
    /// their ids are the work requests' ids.
    sendq: Option<Arc<SendQueue>>,
    /// Receives refused when a new QP took them (their LMR was freed meanwhile): their
    /// events, posted once the EP's lock is given back (`cm::post_refused`).
    refused: Vec<DAT_EVENT>,
    qp: Option<Arc<dyn Qp>>,
    /// The SRQ the EP receives from, if it was created with one.
    srq: Option<Arc<Srq>>,
    /// What `remote_ia_address_ptr` points at (zero until connected).
    remote_address: Box<libc::sockaddr_storage>,
    remote_port: DAT_CONN_QUAL,
    local_port: DAT_CONN_QUAL,
    /// Whether the current connection was made by this side (dat_ep_connect), i.e. whether
    /// `remote_port` is the peer's service point.
    active: bool,
    /// Private data of recent connection events, kept alive for the consumer to read.
    private_data: VecDeque<Box<[u8]>>,
    watermarks: Watermarks,
    /// The connection is being ended because the hard high watermark was exceeded: its end
    /// is reported as BROKEN.
    breaking: bool,
    /// A UD EP's resolved peers and connection records (see `super::ud`).
    ud: UdState,
    /// The IB counters extension's EP counters, counted under this lock.
    counts: EpCounts,
}

/// What a UD EP's connection events handed out, until the consumer frees it: address handles
/// (`dat_ib_ud_ah_free`) and connection records, which keep each event's private data alive
/// (`dat_ib_ud_cm_free`). Both are keyed by never-reused ids, so a stale or forged value is
/// recognised.
#[derive(Default)]
pub struct UdState {
    pub ahs: IdMap<u64, crate::device::UdPeer>,
    pub contexts: IdMap<u64, Box<[u8]>>,
}

/// Request slots an EP makes at creation for each queue: memory follows what is in flight,
/// not the queues' bounds (thousands of EPs with queues of a thousand would take megabytes
/// each otherwise).
const SLOTS_AT_CREATE: DAT_COUNT = 64;

/// How many connection events' private data an EP keeps alive for the consumer to read.
const PRIVATE_DATA_KEPT: usize = 16;

impl EpInner {
    /// The EP's counters (`super::counters`), for the post or completion holding the lock.
    #[inline]
    pub fn counts(&mut self) -> &mut EpCounts {
        &mut self.counts
    }

    /// Keeps a connection event's private data alive (the event points into it) until
    /// PRIVATE_DATA_KEPT later events have come.
    pub fn keep_private_data(&mut self, data: Box<[u8]>) {
        self.private_data.push_back(data);
        while self.private_data.len() > PRIVATE_DATA_KEPT {
            self.private_data.pop_front();
        }
    }

    /// Frees the UD EP's address handles (from its PZ's index too) and connection records.
    pub fn drop_ud(&mut self) {
        let ud = std::mem::take(&mut self.ud);
        if let Some(pz) = &self.pz {
            let mut index = pz.ahs.locked();
            for id in ud.ahs.keys() {
                index.remove(id);
            }
        }
    }
}

/// Whether an EP gives the unreliable datagram service.
pub fn is_ud(attr: &DAT_EP_ATTR) -> bool {
    attr.service_type == DAT_IB_SERVICE_TYPE_UD
}

/// The high watermarks of `dat_ep_set_watermark` on the receive buffers the EP holds (those
/// allocated to it and not yet completed, as `dat_ep_recv_query` counts them: every receive
/// posted to the EP, or, for an EP on an SRQ, the buffer it takes from the SRQ for a message).
#[derive(Clone, Copy)]
pub struct Watermarks {
    /// Above it, once per setting: an asynchronous event on the IA's async EVD.
    pub soft: DAT_COUNT,
    pub soft_armed: bool,
    /// Above it, while connected: the connection breaks (DAT_CONNECTION_EVENT_BROKEN).
    pub hard: DAT_COUNT,
}

/// What crossing a watermark asks for, done once the EP's lock is released.
#[derive(Default)]
#[must_use]
pub struct Crossing {
    soft: bool,
    hard: Option<Arc<dyn Qp>>,
}

/// Checks the watermarks against `held` receive buffers at the EP.
pub fn check_watermarks(i: &mut EpInner, held: usize) -> Crossing {
    let above = |mark: DAT_COUNT| mark != DAT_WATERMARK_INFINITE && held > mark as usize;
    let mut c = Crossing::default();
    if i.watermarks.soft_armed && above(i.watermarks.soft) {
        i.watermarks.soft_armed = false;
        c.soft = true;
    }
    if i.state == DAT_EP_STATE_CONNECTED && above(i.watermarks.hard) {
        if let Some(qp) = i.qp.clone() {
            i.state = DAT_EP_STATE_DISCONNECT_PENDING;
            i.breaking = true;
            c.hard = Some(qp);
        }
    }
    c
}

impl Crossing {
    /// Reports a crossing: the soft one as `DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT` naming the EP on
    /// the async EVD; the hard one by ending the connection, which then reports BROKEN (and
    /// flushes what is posted).
    pub fn report(self, ep: &Ep) {
        if self.soft {
            evd::post_async(&ep.ia, evd::WATERMARK_EVENT, ep.handle, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT as DAT_COUNT);
        }
        if let Some(qp) = self.hard {
            crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "EP {:#x}: above its hard high watermark; the connection breaks", ep.handle);
            qp.disconnect(false);
        }
    }
}
// SAFETY: the raw pointers in `attr` are cleared; everything is plain data behind the mutex.
unsafe impl Send for EpInner {}

pub struct Ep {
    pub handle: usize,
    this: Weak<Ep>,
    pub ia: Arc<Ia>,
    /// Not std's Mutex: every post takes it, and std's poison checks and out-of-line guard
    /// drop cost a tenth of one (`util::lock`).
    pub inner: Lock<EpInner>,
    pub context: Mutex<u64>,
}

impl Ep {
    #[inline]
    pub fn lock(&self) -> LockGuard<'_, EpInner> {
        self.inner.lock()
    }

    pub fn weak(&self) -> Weak<Ep> {
        self.this.clone()
    }
}

impl Object for Ep {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_EP
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        destroy(self)
    }
}

pub fn ep(handle: DAT_EP_HANDLE) -> Result<Arc<Ep>, DAT_RETURN> {
    table::lookup(handle, DAT_INVALID_HANDLE_EP)
}

impl table::Pinnable for Ep {
    const HANDLE_TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_EP;
}

/// The EP `handle` names, for the length of a call (see [`table::pin`]).
pub fn pinned(local: &Local, handle: DAT_EP_HANDLE) -> Option<table::Pinned<Ep>> {
    table::pin(local, handle as usize)
}

/// Runs `f` on the EP `handle` names: pinned, or looked up when it cannot be (which also
/// tells the errors apart).
pub fn with_ep<R>(handle: DAT_EP_HANDLE, f: impl FnOnce(&Ep) -> Result<R, DAT_RETURN>) -> Result<R, DAT_RETURN> {
    match pinned(&pin::local(), handle) {
        Some(ep) => f(&ep),
        None => f(&*ep(handle)?),
    }
}

/// The attributes an EP gets when the consumer passes none.
pub fn default_attr(ia: &Ia) -> DAT_EP_ATTR {
    let l = ia.dev.limits();
    let mut a = DAT_EP_ATTR::default();
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = l.max_msg_size;
    a.max_rdma_size = l.max_msg_size;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = COMPLETION_FLAGS;
    a.request_completion_flags = COMPLETION_FLAGS;
    a.max_recv_dtos = 1024.min(l.max_qp_wr as DAT_COUNT);
    a.max_request_dtos = 1024.min(l.max_qp_wr as DAT_COUNT);
    a.max_recv_iov = 4.min(l.max_sge as DAT_COUNT);
    a.max_request_iov = 4.min(l.max_sge as DAT_COUNT);
    a.max_rdma_read_in = 4.min(l.max_rd_in as DAT_COUNT);
    a.max_rdma_read_out = 4.min(l.max_rd_out as DAT_COUNT);
    a.max_rdma_read_iov = a.max_request_iov.min(l.max_sge_rd as DAT_COUNT);
    a.max_rdma_write_iov = a.max_request_iov;
    a
}

/// `attr` as a UD EP's (for the EP a PSP with the provider flag makes for a UD request).
pub fn ud_attr(ia: &Ia, mut attr: DAT_EP_ATTR) -> DAT_EP_ATTR {
    attr.service_type = DAT_IB_SERVICE_TYPE_UD;
    check_attr(ia, &attr, 0).unwrap_or(attr)
}

/// Checks consumer attributes against the device; `arg` is the argument's subtype.
fn check_attr(ia: &Ia, a: &DAT_EP_ATTR, arg: DAT_RETURN) -> Result<DAT_EP_ATTR, DAT_RETURN> {
    let l = ia.dev.limits();
    let ud = is_ud(a);
    if a.service_type != DAT_SERVICE_TYPE_RC && !(ud && l.max_ud_msg > 0) {
        return Err(dat_error(DAT_MODEL_NOT_SUPPORTED, 0));
    }
    let bad = dat_error(DAT_INVALID_PARAMETER, arg);
    let within = |v: DAT_COUNT, max: u32| v >= 0 && v as u64 <= u64::from(max);
    // A UD EP's message size is bounded by the path MTU instead (below).
    let ok = (ud || a.max_message_size <= l.max_msg_size)
        && a.max_rdma_size <= l.max_msg_size
        && within(a.max_recv_dtos, l.max_qp_wr)
        && within(a.max_request_dtos, l.max_qp_wr)
        && within(a.max_recv_iov, l.max_sge)
        && within(a.max_request_iov, l.max_sge)
        && within(a.max_rdma_read_in, l.max_rd_in)
        && within(a.max_rdma_read_out, l.max_rd_out)
        && within(a.max_rdma_read_iov, l.max_sge_rd)
        && within(a.max_rdma_write_iov, l.max_sge)
        && a.recv_completion_flags & !COMPLETION_FLAGS == 0
        && a.request_completion_flags & !COMPLETION_FLAGS == 0;
    if !ok {
        return Err(bad);
    }
    let mut copy = *a;
    // Zero means "the provider's default".
    if copy.max_message_size == 0 {
        copy.max_message_size = l.max_msg_size;
    }
    if copy.max_rdma_size == 0 {
        copy.max_rdma_size = l.max_msg_size;
    }
    if copy.max_rdma_read_iov == 0 {
        copy.max_rdma_read_iov = copy.max_request_iov.min(l.max_sge_rd as DAT_COUNT);
    }
    if copy.max_rdma_write_iov == 0 {
        copy.max_rdma_write_iov = copy.max_request_iov;
    }
    if ud {
        // A datagram is at most the path MTU: a larger request is lowered to it (dat_ep_query
        // shows the limit, and a longer send gets DAT_LENGTH_ERROR), so that programs sizing
        // their buffers above it (dtestx -u -b 8192) still run. There is no RDMA on UD.
        copy.max_message_size = copy.max_message_size.min(l.max_ud_msg);
        copy.max_rdma_size = 0;
        copy.max_rdma_read_in = 0;
        copy.max_rdma_read_out = 0;
        copy.max_rdma_read_iov = 0;
        copy.max_rdma_write_iov = 0;
    }
    copy.ep_transport_specific_count = 0;
    copy.ep_transport_specific = core::ptr::null_mut();
    copy.ep_provider_specific_count = 0;
    copy.ep_provider_specific = core::ptr::null_mut();
    Ok(copy)
}

/// Whether the EP's receive stream is configured for solicited wait: a receive completion
/// then notifies (wakes a waiter on the receive EVD, triggers its CNO) only when the sender
/// posted the message with `DAT_COMPLETION_SOLICITED_WAIT_FLAG`, or when it failed. DAT makes
/// solicited wait and threshold waiting exclusive modes of `recv_completion_flags`; a value
/// that names both (such as 0x1f, "every flag") keeps the default, threshold waiting.
pub fn solicited_wait(attr: &DAT_EP_ATTR) -> bool {
    attr.recv_completion_flags & (DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG)
        == DAT_COMPLETION_SOLICITED_WAIT_FLAG
}

/// Counts the EP's receive stream on its receive EVD (`add`) or stops counting it, when it is
/// a solicited-wait stream (see `Evd::solicited_streams`).
fn count_solicited_stream(i: &EpInner, add: bool) {
    if let (true, Some(e)) = (solicited_wait(&i.attr), &i.recv_evd) {
        if add {
            e.solicited_streams.fetch_add(1, Ordering::SeqCst);
        } else {
            e.solicited_streams.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

pub fn configured(inner: &EpInner) -> bool {
    inner.pz.is_some() && inner.recv_evd.is_some() && inner.request_evd.is_some() && inner.connect_evd.is_some()
}

fn evd_arg(ia: &Arc<Ia>, handle: DAT_EVD_HANDLE, flag: DAT_EVD_FLAGS, subtype: DAT_RETURN) -> Result<Option<Arc<Evd>>, DAT_RETURN> {
    if handle.is_null() {
        return Ok(None);
    }
    let e: Arc<Evd> = table::lookup(handle, subtype)?;
    if !Arc::ptr_eq(&e.ia, ia) || e.flags & flag == 0 {
        return Err(dat_error(DAT_INVALID_HANDLE, subtype));
    }
    Ok(Some(e))
}

#[allow(clippy::too_many_arguments)]
pub fn create(
    ia_handle: DAT_IA_HANDLE,
    pz_handle: DAT_PZ_HANDLE,
    recv: DAT_EVD_HANDLE,
    request: DAT_EVD_HANDLE,
    connect: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let pz = if pz_handle.is_null() { None } else { Some(pz::pz(pz_handle)?) };
    if pz.as_ref().is_some_and(|p| !Arc::ptr_eq(&p.ia, &ia)) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
    }
    let recv_evd = evd_arg(&ia, recv, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV)?;
    let request_evd = evd_arg(&ia, request, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST)?;
    let connect_evd = evd_arg(&ia, connect, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN)?;
    let attr = if attr.is_null() {
        default_attr(&ia)
    } else {
        // SAFETY: a non-NULL attr is the consumer's DAT_EP_ATTR.
        check_attr(&ia, unsafe { &*attr }, DAT_INVALID_ARG6)?
    };
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7));
    }
    let ep = create_object(&ia, pz, recv_evd, request_evd, connect_evd, attr)?;
    // SAFETY: checked non-NULL.
    unsafe { put(out, ep.handle as DAT_EP_HANDLE) };
    Ok(DAT_SUCCESS)
}

/// `dat_ep_create_with_srq`: an EP whose receives come from an SRQ.
#[allow(clippy::too_many_arguments)]
pub fn create_with_srq(
    ia_handle: DAT_IA_HANDLE,
    pz_handle: DAT_PZ_HANDLE,
    recv: DAT_EVD_HANDLE,
    request: DAT_EVD_HANDLE,
    connect: DAT_EVD_HANDLE,
    srq_handle: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq::srq(srq_handle)?;
    let ia = ia::ia(ia_handle)?;
    if !Arc::ptr_eq(&s.ia, &ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8));
    }
    let mut handle: DAT_EP_HANDLE = core::ptr::null_mut();
    // The attributes are this call's seventh argument.
    create(ia_handle, pz_handle, recv, request, connect, attr, &mut handle).map_err(|e| {
        if e == dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6) {
            dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7)
        } else {
            e
        }
    })?;
    let ep = ep(handle)?;
    s.users.fetch_add(1, Ordering::SeqCst);
    ep.lock().srq = Some(s);
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle) };
    Ok(DAT_SUCCESS)
}

/// Builds and publishes an EP (also used for the EPs a PSP with the provider flag creates).
pub fn create_object(
    ia: &Arc<Ia>,
    pz: Option<Arc<Pz>>,
    recv_evd: Option<Arc<Evd>>,
    request_evd: Option<Arc<Evd>>,
    connect_evd: Option<Arc<Evd>>,
    attr: DAT_EP_ATTR,
) -> Result<Arc<Ep>, DAT_RETURN> {
    if let Some(p) = &pz {
        p.acquire()?;
    }
    for e in [&recv_evd, &request_evd, &connect_evd].into_iter().flatten() {
        e.users.fetch_add(1, Ordering::SeqCst);
    }
    let mut inner = EpInner {
        state: DAT_EP_STATE_UNCONNECTED,
        pz,
        recv_evd,
        request_evd,
        connect_evd,
        attr,
        // Room for what is usually in flight; more slots come (doubling) only when more is.
        recvs: Slots::with_room(attr.max_recv_dtos.clamp(0, SLOTS_AT_CREATE) as usize),
        unposted: VecDeque::new(),
        sendq: None,
        refused: Vec::new(),
        qp: None,
        srq: None,
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        remote_address: Box::new(unsafe { core::mem::zeroed() }),
        remote_port: 0,
        local_port: 0,
        active: false,
        private_data: VecDeque::new(),
        // Zeroed attributes hold srq_soft_hw 0, and programs pass them without meaning a
        // watermark of 0 (Debian's dtestsrq among them): only dat_ep_set_watermark arms one.
        watermarks: Watermarks { soft: DAT_WATERMARK_INFINITE, soft_armed: false, hard: DAT_WATERMARK_INFINITE },
        breaking: false,
        ud: UdState::default(),
        counts: EpCounts::default(),
    };
    if !configured(&inner) {
        inner.state = DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
    }
    count_solicited_stream(&inner, true);
    let handle = table::reserve(ia.provider());
    let ep = Arc::new_cyclic(|this| Ep { handle, this: this.clone(), ia: ia.clone(), inner: Lock::new(inner), context: Mutex::new(0) });
    table::insert(handle, ep.clone());
    Ok(ep)
}

pub fn query(handle: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *mut DAT_EP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    super::query_args(mask, DAT_EP_FIELD_ALL, param)?;
    let i = ep.lock();
    let h = |e: &Option<Arc<Evd>>| e.as_ref().map_or(core::ptr::null_mut(), |e| e.handle as DAT_EVD_HANDLE);
    let p = param;
    let set = |bit: DAT_EP_PARAM_MASK| mask & bit != 0;
    // SAFETY: the consumer's non-NULL DAT_EP_PARAM; only the fields asked for are written.
    unsafe {
        if set(DAT_EP_FIELD_IA_HANDLE) {
            addr_of_mut!((*p).ia_handle).write(ep.ia.consumer_handle());
        }
        if set(DAT_EP_FIELD_EP_STATE) {
            addr_of_mut!((*p).ep_state).write(i.state);
        }
        if set(DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR) {
            addr_of_mut!((*p).local_ia_address_ptr).write(&*ep.ia.address as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR);
        }
        if set(DAT_EP_FIELD_LOCAL_PORT_QUAL) {
            addr_of_mut!((*p).local_port_qual).write(i.local_port);
        }
        if set(DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR) {
            addr_of_mut!((*p).remote_ia_address_ptr).write(&*i.remote_address as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR);
        }
        if set(DAT_EP_FIELD_REMOTE_PORT_QUAL) {
            addr_of_mut!((*p).remote_port_qual).write(i.remote_port);
        }
        if set(DAT_EP_FIELD_PZ_HANDLE) {
            addr_of_mut!((*p).pz_handle).write(i.pz.as_ref().map_or(core::ptr::null_mut(), |p| p.handle as DAT_PZ_HANDLE));
        }
        if set(DAT_EP_FIELD_RECV_EVD_HANDLE) {
            addr_of_mut!((*p).recv_evd_handle).write(h(&i.recv_evd));
        }
        if set(DAT_EP_FIELD_REQUEST_EVD_HANDLE) {
            addr_of_mut!((*p).request_evd_handle).write(h(&i.request_evd));
        }
        if set(DAT_EP_FIELD_CONNECT_EVD_HANDLE) {
            addr_of_mut!((*p).connect_evd_handle).write(h(&i.connect_evd));
        }
        if set(DAT_EP_FIELD_SRQ_HANDLE) {
            addr_of_mut!((*p).srq_handle).write(i.srq.as_ref().map_or(core::ptr::null_mut(), |s| s.handle as DAT_SRQ_HANDLE));
        }
        if mask & DAT_EP_FIELD_EP_ATTR_ALL != 0 {
            let mut attr = i.attr;
            // How this connection moves data ("cma", "tcp", or "none" while unconnected).
            let path = path_attr(i.qp.as_ref().map_or("none", |q| q.path()));
            attr.ep_provider_specific_count = 1;
            attr.ep_provider_specific = path as *const DAT_NAMED_ATTR as *mut DAT_NAMED_ATTR;
            addr_of_mut!((*p).ep_attr).write(attr);
        }
    }
    Ok(DAT_SUCCESS)
}

/// Replaces an optional EVD of the EP, moving its use count.
fn swap_evd(slot: &mut Option<Arc<Evd>>, new: Option<Arc<Evd>>) {
    if let Some(n) = &new {
        n.users.fetch_add(1, Ordering::SeqCst);
    }
    if let Some(old) = std::mem::replace(slot, new) {
        old.users.fetch_sub(1, Ordering::SeqCst);
    }
}

pub fn modify(handle: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *const DAT_EP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    let fixed = DAT_EP_FIELD_IA_HANDLE
        | DAT_EP_FIELD_EP_STATE
        | DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR
        | DAT_EP_FIELD_LOCAL_PORT_QUAL
        | DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR
        | DAT_EP_FIELD_REMOTE_PORT_QUAL
        | DAT_EP_FIELD_SRQ_HANDLE;
    if mask & !DAT_EP_FIELD_ALL != 0 || mask & fixed != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    if param.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    // SAFETY: the consumer's non-NULL DAT_EP_PARAM.
    let p = unsafe { &*param };
    let mut i = ep.lock();
    if !matches!(i.state, DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_UNCONFIGURED_UNCONNECTED) {
        return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(i.state)));
    }
    let ia = &ep.ia;
    let attr = if mask & DAT_EP_FIELD_EP_ATTR_ALL != 0 { Some(check_attr(ia, &p.ep_attr, DAT_INVALID_ARG3)?) } else { None };
    let new_pz = if mask & DAT_EP_FIELD_PZ_HANDLE != 0 {
        let pz = if p.pz_handle.is_null() { None } else { Some(pz::pz(p.pz_handle)?) };
        if pz.as_ref().is_some_and(|z| !Arc::ptr_eq(&z.ia, ia)) {
            return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        }
        Some(pz)
    } else {
        None
    };
    let recv = if mask & DAT_EP_FIELD_RECV_EVD_HANDLE != 0 {
        Some(evd_arg(ia, p.recv_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV)?)
    } else {
        None
    };
    let request = if mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE != 0 {
        Some(evd_arg(ia, p.request_evd_handle, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST)?)
    } else {
        None
    };
    let connect = if mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE != 0 {
        Some(evd_arg(ia, p.connect_evd_handle, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN)?)
    } else {
        None
    };
    if let Some(new_pz) = new_pz {
        if let Some(n) = &new_pz {
            n.acquire()?;
        }
        if let Some(old) = std::mem::replace(&mut i.pz, new_pz) {
            old.release();
        }
    }
    count_solicited_stream(&i, false);
    // A QP left from a connect that failed reports to the EVDs the EP has: they change together.
    let qp = i.qp.clone();
    if let Some(qp) = &qp {
        forget_qp(&i, qp);
    }
    if let Some(e) = recv {
        swap_evd(&mut i.recv_evd, e);
    }
    if let Some(e) = request {
        swap_evd(&mut i.request_evd, e);
    }
    if let Some(e) = connect {
        swap_evd(&mut i.connect_evd, e);
    }
    if let Some(a) = attr {
        i.attr = a;
    }
    if let Some(qp) = &qp {
        watch_qp(&ep.ia, &i, qp);
    }
    count_solicited_stream(&i, true);
    i.state = if configured(&i) { DAT_EP_STATE_UNCONNECTED } else { DAT_EP_STATE_UNCONFIGURED_UNCONNECTED };
    Ok(DAT_SUCCESS)
}

/// The provider-specific EP attribute `DAT2_SOFT_PATH` for a data path name.
fn path_attr(path: &str) -> &'static DAT_NAMED_ATTR {
    struct Attr(DAT_NAMED_ATTR);
    // SAFETY: the attributes point at static strings and are never written.
    unsafe impl Sync for Attr {}
    static CMA: Attr = Attr(DAT_NAMED_ATTR { name: c"DAT2_SOFT_PATH".as_ptr(), value: c"cma".as_ptr() });
    static TCP: Attr = Attr(DAT_NAMED_ATTR { name: c"DAT2_SOFT_PATH".as_ptr(), value: c"tcp".as_ptr() });
    static NONE: Attr = Attr(DAT_NAMED_ATTR { name: c"DAT2_SOFT_PATH".as_ptr(), value: c"none".as_ptr() });
    static UDP: Attr = Attr(DAT_NAMED_ATTR { name: c"DAT2_SOFT_PATH".as_ptr(), value: c"udp".as_ptr() });
    match path {
        "cma" => &CMA.0,
        "tcp" => &TCP.0,
        "udp" => &UDP.0,
        _ => &NONE.0,
    }
}

/// The INVALID_STATE subtype that names an EP state.
pub fn ep_state_subtype(state: DAT_EP_STATE) -> DAT_RETURN {
    match state {
        DAT_EP_STATE_UNCONNECTED => DAT_INVALID_STATE_EP_UNCONNECTED,
        DAT_EP_STATE_ACTIVE_CONNECTION_PENDING => DAT_INVALID_STATE_EP_ACTCONNPENDING,
        DAT_EP_STATE_PASSIVE_CONNECTION_PENDING => DAT_INVALID_STATE_EP_PASSCONNPENDING,
        DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING => DAT_INVALID_STATE_EP_TENTCONNPENDING,
        DAT_EP_STATE_CONNECTED => DAT_INVALID_STATE_EP_CONNECTED,
        DAT_EP_STATE_DISCONNECTED => DAT_INVALID_STATE_EP_DISCONNECTED,
        DAT_EP_STATE_RESERVED => DAT_INVALID_STATE_EP_RESERVED,
        DAT_EP_STATE_COMPLETION_PENDING => DAT_INVALID_STATE_EP_COMPLPENDING,
        DAT_EP_STATE_DISCONNECT_PENDING => DAT_INVALID_STATE_EP_DISCPENDING,
        DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => DAT_INVALID_STATE_EP_UNCONFIGURED,
        DAT_EP_STATE_UNCONFIGURED_RESERVED => DAT_INVALID_STATE_EP_UNCONFRESERVED,
        DAT_EP_STATE_UNCONFIGURED_PASSIVE => DAT_INVALID_STATE_EP_UNCONFPASSIVE,
        DAT_EP_STATE_UNCONFIGURED_TENTATIVE => DAT_INVALID_STATE_EP_UNCONFTENTATIVE,
        _ => DAT_INVALID_STATE_EP_NOTREADY,
    }
}

pub fn get_status(
    handle: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    request_idle: *mut DAT_BOOLEAN,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    let i = ep.lock();
    // SAFETY: each out-pointer is written only if the consumer passed one.
    unsafe {
        crate::ffi::write_opt(state, i.state);
        crate::ffi::write_opt(recv_idle, i.recvs.is_empty() as DAT_BOOLEAN);
        crate::ffi::write_opt(request_idle, i.sends_idle() as DAT_BOOLEAN);
    }
    Ok(DAT_SUCCESS)
}

pub fn recv_query(handle: DAT_EP_HANDLE, allocated: *mut DAT_COUNT, span: *mut DAT_COUNT) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    let i = ep.lock();
    let bytes: u64 = i.recvs.values().map(|r| r.len()).sum();
    // SAFETY: each out-pointer is written only if the consumer passed one.
    unsafe {
        crate::ffi::write_opt(allocated, i.recvs.len() as DAT_COUNT);
        crate::ffi::write_opt(span, bytes.min(i32::MAX as u64) as DAT_COUNT);
    }
    Ok(DAT_SUCCESS)
}

pub fn set_watermark(handle: DAT_EP_HANDLE, soft: DAT_COUNT, hard: DAT_COUNT) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    if soft < DAT_WATERMARK_INFINITE {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    if hard < DAT_WATERMARK_INFINITE {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    let crossing = {
        let mut i = ep.lock();
        i.watermarks = Watermarks { soft, soft_armed: soft != DAT_WATERMARK_INFINITE, hard };
        let held = i.recvs.len();
        check_watermarks(&mut i, held)
    };
    crossing.report(&ep);
    Ok(DAT_SUCCESS)
}

pub fn reset(handle: DAT_EP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    let mut i = ep.lock();
    match i.state {
        DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => {}
        DAT_EP_STATE_DISCONNECTED => {
            if let Some(qp) = i.qp.take() {
                forget_qp(&i, &qp);
            }
            i.drop_ud();
            let evd = i.recv_evd.clone();
            let flushed = flush_recvs(&ep, &mut i);
            // Sends whose completions nobody collected from the QP just dropped (its CQ went
            // with it) complete as flushed too.
            let sends = i.sendq.take();
            i.state = if configured(&i) { DAT_EP_STATE_UNCONNECTED } else { DAT_EP_STATE_UNCONFIGURED_UNCONNECTED };
            drop(i);
            evd::post_all(evd, flushed);
            if let Some(q) = sends {
                q.flush();
            }
        }
        s => return Err(dat_error(DAT_INVALID_STATE, ep_state_subtype(s))),
    }
    Ok(DAT_SUCCESS)
}

pub fn free(handle: DAT_EP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ep(handle)?;
    if table::remove_then(ep.handle, |_| destroy(&ep)).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    }
    Ok(DAT_SUCCESS)
}

/// Ends any connection, completes posted work as flushed and releases the EP's PZ and EVDs
/// (the object has left the table).
pub fn destroy(ep: &Ep) {
    let qp = {
        let mut i = ep.lock();
        let qp = i.qp.take();
        if let Some(qp) = &qp {
            forget_qp(&i, qp);
        }
        qp
    };
    if let Some(qp) = qp {
        // Flushes everything posted to the QP, through the EP's completion handler; when it
        // returns, the QP touches no memory any more.
        qp.destroy();
    }
    let mut i = ep.lock();
    // What it counted stays in its IA's totals (DAT2_STATS).
    ep.ia.counts.add_gone_ep(&i.counts.values());
    // Address handles go before the PZ they were made in.
    i.drop_ud();
    let evd = i.recv_evd.clone();
    let flushed = flush_recvs(ep, &mut i);
    let sends = i.sendq.take();
    i.state = DAT_EP_STATE_DISCONNECTED;
    if let Some(p) = i.pz.take() {
        p.release();
    }
    if let Some(s) = i.srq.take() {
        s.users.fetch_sub(1, Ordering::SeqCst);
    }
    count_solicited_stream(&i, false);
    let i = &mut *i;
    for slot in [&mut i.recv_evd, &mut i.request_evd, &mut i.connect_evd] {
        swap_evd(slot, None);
    }
    evd::post_all(evd, flushed);
    if let Some(q) = sends {
        q.flush();
    }
}

/// The EP has `qp`: on a device whose QPs are polled, its recv and request EVDs poll it.
pub fn watch_qp(ia: &Ia, i: &EpInner, qp: &Arc<dyn Qp>) {
    if ia.dev.polled_qps() {
        for evd in [&i.recv_evd, &i.request_evd].into_iter().flatten() {
            evd.add_source(qp);
        }
    }
}

/// The EP gave up its QP: its EVDs stop polling it.
pub fn forget_qp(i: &EpInner, qp: &Arc<dyn Qp>) {
    for evd in [&i.recv_evd, &i.request_evd].into_iter().flatten() {
        evd.remove_source(qp);
    }
}

/// Takes every posted receive out as a flushed completion event (to post without locks).
fn flush_recvs(ep: &Ep, i: &mut EpInner) -> Vec<DAT_EVENT> {
    i.unposted.clear();
    i.recvs
        .drain_in_order()
        .into_iter()
        .map(|(_, r)| dto_event(ep.handle, r.cookie(), DAT_DTO_ERR_FLUSHED, 0, DAT_DTO_RECEIVE, 0))
        .collect()
}
