//! Queue pairs of the verbs device: an RC QP with a completion queue of its own, created in
//! the INIT state so that receives can be posted before the connection exists, and moved to
//! RTR and RTS with the attributes rdma_cm computes for its connection (cm.rs).
//!
//! Immediate data goes into the work request as the consumer gave it and comes out of the
//! completion as it arrived, without byte swapping, as Debian's dapl does: a node on dat2 and
//! one on dapl see the same values.
//!
//! Work requests carry ids of our own: completions in error do not say which operation they
//! were, so each id remembers the consumer's id and the kind of operation.
//!
//! Solicited events: the sender's solicited flag goes out as `IBV_SEND_SOLICITED`, but a
//! receive completion cannot say whether its message carried it. rdma-core has no such flag
//! in `ibv_wc.wc_flags` (GRH, WITH_IMM, IP_CSUM_OK, WITH_INV and the tag-matching bits) nor
//! among the extended CQ's fields; the only solicited-aware mechanism is arming a CQ with
//! `ibv_req_notify_cq(cq, 1)`, which says that some solicited (or failed) completion arrived
//! since arming, not which one, and wakes nobody for the others, so the progress thread would
//! leave unsolicited receives in the CQ, where `dat_evd_dequeue` never sees them. Every
//! receive completion is therefore reported as solicited: on an EP configured for solicited
//! wait, each receive wakes the waiter, as without solicited wait (a wake-up too many, never
//! one too few).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::device::{mw_access, VerbsDevice};
use super::errno::{dev_error, last_error};
use super::inuse::WrKeys;
use super::srq::VerbsSrq;
use super::wq::{Request, Requests};
use super::{api, sys, Ptr};
use crate::abi::*;
use crate::dbg_log;
use crate::device::{
    keys_live, Access, AddressHandle, CmEvent, Completion, DevError, Mr, Mw, Pd, Qp, QpCaps, QpEvents, SendWr, Service, Sge, Sges, WcOp,
    WrOp,
};
use crate::log::DbgType;
use crate::util::lock::{Lock, LockGuard};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Conn {
    /// Not connected (yet).
    Idle,
    /// Active side: resolving the address and route, then waiting for the reply.
    Connecting,
    /// Passive side: accepted, waiting for the peer's confirmation.
    Accepting,
    Established,
    /// Ended (reported once).
    Ended,
}

pub(super) struct Inner {
    pub id: Option<Ptr<sys::rdma_cm_id>>,
    pub conn: Conn,
    /// Private data for the connect request.
    pub pdata: Vec<u8>,
    /// The requests outstanding (their ids are the verbs work request ids).
    reqs: Requests,
    /// A graceful disconnect waits for the posted sends.
    disconnect_when_drained: bool,
    /// An iWARP connect ended before it completed: its cm id is destroyed on a thread of its
    /// own (the kernel's iw_cm makes a disconnect or destroy wait until the connect resolves).
    abandoned: bool,
    pub remote: Option<SocketAddr>,
    pub local_port: u16,
    /// A UD QP's connects under way and the address handles its sends hold (ud.rs).
    pub ud: super::ud::UdState,
}

pub struct VerbsQp {
    /// Held while the CQ is polled and its completions handed on, so that the progress thread
    /// and a polling consumer never deliver out of order.
    pub(super) polling: Lock<()>,
    /// The CQ is armed: its next completion raises an event on the completion channel.
    armed: AtomicBool,
    /// Consumers blocked until this QP's completions come (`Qp::wait_begins`): the CQ is armed
    /// again after its event while there are any.
    waiters: AtomicUsize,
    pub(super) dev: Arc<VerbsDevice>,
    pub(super) qp: Ptr<sys::ibv_qp>,
    cq: Ptr<sys::ibv_cq>,
    /// The CQ's context: this QP, for the progress thread to find without a lookup
    /// (`progress::completions`). Freed after the CQ (a field drops after `Drop::drop`).
    cq_owner: Box<CqOwner>,
    pub(super) qp_num: u32,
    srq: Option<Arc<VerbsSrq>>,
    pub(super) events: Arc<dyn QpEvents>,
    pub(super) caps: QpCaps,
    inner: Lock<Inner>,
}

// SAFETY: the QP and CQ are rdma-core objects usable from any thread; our state is behind
// the mutex.
unsafe impl Send for VerbsQp {}
// SAFETY: as above.
unsafe impl Sync for VerbsQp {}

fn dto_status(s: u32) -> u32 {
    match s {
        sys::IBV_WC_SUCCESS => DAT_DTO_SUCCESS,
        sys::IBV_WC_WR_FLUSH_ERR => DAT_DTO_ERR_FLUSHED,
        sys::IBV_WC_LOC_LEN_ERR => DAT_DTO_ERR_LOCAL_LENGTH,
        sys::IBV_WC_LOC_QP_OP_ERR | sys::IBV_WC_LOC_EEC_OP_ERR => DAT_DTO_ERR_LOCAL_EP,
        sys::IBV_WC_LOC_PROT_ERR | sys::IBV_WC_MW_BIND_ERR => DAT_DTO_ERR_LOCAL_PROTECTION,
        sys::IBV_WC_BAD_RESP_ERR => DAT_DTO_ERR_BAD_RESPONSE,
        sys::IBV_WC_REM_ACCESS_ERR | sys::IBV_WC_REM_INV_REQ_ERR => DAT_DTO_ERR_REMOTE_ACCESS,
        sys::IBV_WC_REM_OP_ERR => DAT_DTO_ERR_REMOTE_RESPONDER,
        sys::IBV_WC_RNR_RETRY_EXC_ERR => DAT_DTO_ERR_RECEIVER_NOT_READY,
        _ => DAT_DTO_ERR_TRANSPORT,
    }
}

/// What a CQ's context points to: the QP it belongs to, once that exists.
pub(super) type CqOwner = std::sync::OnceLock<std::sync::Weak<VerbsQp>>;

/// Scatter entries a request carries on the stack; a longer list goes to the heap.
const INLINE_SGES: usize = 4;

/// Runs `f` with the verbs form of `sges` (which verbs copies into the queue during the call).
/// With `skip_empty`, zero-length entries are left out: they move no bytes, and Soft-iWARP
/// (6.12) dereferences a NULL memory object in `siw_tx_hdt` for one in a send, an oops that
/// leaves the posting process unkillable (c-tests `dataxfer:data_send_recv_3seg`).
fn with_sge_list<R>(sges: &[Sge], skip_empty: bool, f: impl FnOnce(&mut [sys::ibv_sge]) -> R) -> R {
    let conv = |s: &Sge| sys::ibv_sge { addr: s.addr, length: s.len, lkey: s.lkey };
    if skip_empty && sges.iter().any(|s| s.len == 0) {
        return f(&mut sges.iter().filter(|s| s.len > 0).map(conv).collect::<Vec<_>>());
    }
    if sges.len() <= INLINE_SGES {
        let mut inline = [sys::ibv_sge::default(); INLINE_SGES];
        for (d, s) in inline.iter_mut().zip(sges) {
            *d = conv(s);
        }
        f(&mut inline[..sges.len()])
    } else {
        f(&mut sges.iter().map(conv).collect::<Vec<_>>())
    }
}

impl VerbsQp {
    pub(super) fn create(
        dev: &Arc<VerbsDevice>,
        pd: Pd,
        caps: QpCaps,
        srq: Option<Arc<VerbsSrq>>,
        events: Arc<dyn QpEvents>,
    ) -> Result<Arc<VerbsQp>, DevError> {
        let l = crate::device::Device::limits(dev.as_ref());
        if caps.max_send_wr > l.max_qp_wr
            || caps.max_recv_wr > l.max_qp_wr
            || caps.max_send_sge > l.max_sge
            || caps.max_recv_sge > l.max_sge
        {
            return Err(DevError::NoResources);
        }
        let pdp = dev.pd_ptr(pd)?;
        // Room for every send and receive (or SRQ receive) this QP can have outstanding.
        let recvs = srq.as_ref().map_or(caps.max_recv_wr, |s| s.max_wr());
        let cqe = (caps.max_send_wr as u64 + recvs as u64 + 16).min(l.max_cqe as u64) as i32;
        let cq_owner = Box::<CqOwner>::default();
        let context = std::ptr::addr_of!(*cq_owner) as *mut libc::c_void;
        // SAFETY: an open context and our completion channel; the context outlives the CQ.
        let cq = unsafe { (dev.api.ibv.create_cq)(dev.ctx.0, cqe, context, dev.comp_channel.0, 0) };
        if cq.is_null() {
            return Err(last_error());
        }
        // SAFETY: plain data.
        let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq;
        init.recv_cq = cq;
        init.srq = srq.as_ref().map_or(std::ptr::null_mut(), |s| s.srq.0);
        init.cap.max_send_wr = caps.max_send_wr;
        init.cap.max_recv_wr = if srq.is_some() { 0 } else { caps.max_recv_wr };
        init.cap.max_send_sge = caps.max_send_sge;
        init.cap.max_recv_sge = if srq.is_some() { 0 } else { caps.max_recv_sge };
        init.qp_type = if caps.service == Service::Ud { sys::IBV_QPT_UD } else { sys::IBV_QPT_RC };
        init.sq_sig_all = 0;
        // SAFETY: a live PD and an initialised attribute struct.
        let qp = unsafe { (dev.api.ibv.create_qp)(pdp.0, &mut init) };
        if qp.is_null() {
            let e = last_error();
            // SAFETY: the CQ created above, unused.
            unsafe { (dev.api.ibv.destroy_cq)(cq) };
            return Err(e);
        }
        // SAFETY: a QP just created.
        let qp_num = unsafe { (*qp).qp_num };
        let this = Arc::new(VerbsQp {
            polling: Lock::new(()),
            armed: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            dev: dev.clone(),
            qp: Ptr(qp),
            cq: Ptr(cq),
            cq_owner,
            qp_num,
            srq,
            events,
            caps,
            inner: Lock::new(Inner {
                id: None,
                conn: Conn::Idle,
                pdata: Vec::new(),
                reqs: Requests::with_room(caps.max_send_wr, caps.max_recv_wr),
                disconnect_when_drained: false,
                abandoned: false,
                remote: None,
                local_port: 0,
                ud: Default::default(),
            }),
        });
        // From here on Drop releases the QP and CQ.
        let _ = this.cq_owner.set(Arc::downgrade(&this));
        {
            let mut s = dev.lock();
            Arc::make_mut(&mut s.polled).push(Arc::downgrade(&this));
            s.qps.insert(qp_num, Arc::downgrade(&this));
        }
        if caps.service == Service::Ud {
            super::ud::ready(&this)?;
        } else {
            this.modify_init()?;
        }
        if dev.waiters.load(Ordering::SeqCst) > 0 {
            this.arm();
        }
        Ok(this)
    }

    /// Arms the CQ unless it is armed. Callers count themselves as waiters (or set
    /// `disconnect_when_drained`) before arming, and the progress thread clears `armed` before
    /// it looks at those: so either it arms again, or this call sees the flag clear and arms.
    pub(super) fn arm(&self) {
        if self.armed.swap(true, Ordering::SeqCst) {
            return;
        }
        // SAFETY: our live CQ.
        if unsafe { api::req_notify_cq(self.cq.0, false) } != 0 {
            self.armed.store(false, Ordering::SeqCst);
            dbg_log!(DbgType::ERROR, "verbs QP {}: ibv_req_notify_cq: {}", self.qp_num, std::io::Error::last_os_error());
        }
    }

    /// The progress thread took the CQ's event: the CQ is no longer armed. Arms it again if a
    /// consumer waits or the QP waits for its own completions (a graceful disconnect).
    pub(super) fn event_taken(&self) {
        self.armed.store(false, Ordering::SeqCst);
        if self.dev.waiters.load(Ordering::SeqCst) > 0 || self.waiters.load(Ordering::SeqCst) > 0 || self.lock().disconnect_when_drained {
            self.arm();
        }
    }

    /// The QP's CQ.
    pub(super) fn cq(&self) -> Ptr<sys::ibv_cq> {
        self.cq
    }

    /// Whether a request posted here with `lkey` is still outstanding.
    pub(super) fn uses_lkey(&self, lkey: u32) -> bool {
        self.lock().reqs.uses_lkey(lkey)
    }

    pub(super) fn on_srq(&self) -> bool {
        self.srq.is_some()
    }

    pub(super) fn lock(&self) -> LockGuard<'_, Inner> {
        self.inner.lock()
    }

    fn modify_init(&self) -> Result<(), DevError> {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.dev.port;
        a.qp_access_flags =
            sys::IBV_ACCESS_LOCAL_WRITE | sys::IBV_ACCESS_REMOTE_WRITE | sys::IBV_ACCESS_REMOTE_READ | sys::IBV_ACCESS_REMOTE_ATOMIC;
        let mask = sys::IBV_QP_STATE | sys::IBV_QP_PKEY_INDEX | sys::IBV_QP_PORT | sys::IBV_QP_ACCESS_FLAGS;
        // SAFETY: our QP and an initialised attribute struct.
        let rc = unsafe { (self.dev.api.ibv.modify_qp)(self.qp.0, &mut a, mask as i32) };
        if rc != 0 {
            dbg_log!(DbgType::ERROR, "verbs QP {}: to INIT: {}", self.qp_num, std::io::Error::from_raw_os_error(rc));
            return Err(dev_error(rc));
        }
        Ok(())
    }

    /// Moves the QP to `state` with the attributes rdma_cm gives for connection `id`.
    fn modify_cm(&self, id: Ptr<sys::rdma_cm_id>, state: u32) -> Result<(), i32> {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = state;
        let mut mask = 0;
        // SAFETY: a live cm id and writable attributes.
        if unsafe { (self.dev.api.cm.init_qp_attr)(id.0, &mut a, &mut mask) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
        }
        let (dest, own) = rd_attrs(a.max_dest_rd_atomic, a.max_rd_atomic, &self.caps);
        if state == sys::IBV_QPS_RTR {
            a.max_dest_rd_atomic = dest;
        }
        if state == sys::IBV_QPS_RTS {
            a.max_rd_atomic = own;
        }
        // SAFETY: our QP and the attributes rdma_cm filled in.
        let rc = unsafe { (self.dev.api.ibv.modify_qp)(self.qp.0, &mut a, mask) };
        if rc != 0 {
            return Err(rc);
        }
        Ok(())
    }

    /// RTR then RTS for connection `id`.
    pub(super) fn ready(&self, id: Ptr<sys::rdma_cm_id>) -> Result<(), i32> {
        self.modify_cm(id, sys::IBV_QPS_RTR)?;
        self.modify_cm(id, sys::IBV_QPS_RTS)
    }

    /// Puts the QP in the error state: everything posted completes as flushed.
    pub(super) fn to_error(&self) {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::IBV_QPS_ERR;
        // SAFETY: our QP.
        unsafe { (self.dev.api.ibv.modify_qp)(self.qp.0, &mut a, sys::IBV_QP_STATE as i32) };
    }

    /// The connection ended (for `ev`): flush what is posted and tell the core, once.
    pub(super) fn end(&self, ev: CmEvent) {
        let id = {
            let mut i = self.lock();
            if i.conn == Conn::Ended {
                return;
            }
            // On iWARP, rdma_disconnect of a connect still under way blocks until the peer's
            // MPA reply or the kernel's timeout (iw_cm_disconnect waits for the connect): a
            // connect timeout would be reported seconds late. Such an id is only abandoned.
            i.abandoned = self.dev.iwarp && i.conn == Conn::Connecting;
            i.conn = Conn::Ended;
            i.disconnect_when_drained = false;
            i.id.filter(|_| !i.abandoned)
        };
        if let Some(id) = id {
            // SAFETY: our connection's cm id (a no-op error if it never connected).
            unsafe { (self.dev.api.cm.disconnect)(id.0) };
        }
        self.to_error();
        dbg_log!(DbgType::PROVIDER_API, "verbs QP {}: connection ends ({ev:?})", self.qp_num);
        self.events.cm(ev);
    }

    /// Posts one send-queue request; `fill` sets its opcode and operation fields. A datagram's
    /// address handle (`hold`) is kept until the request completes.
    pub(super) fn post(
        &self,
        wr_id: u64,
        op: Option<WcOp>,
        sges: &[Sge],
        flags: u32,
        hold: Option<Arc<dyn AddressHandle>>,
        fill: impl FnOnce(&mut sys::ibv_send_wr),
    ) -> Result<(), DevError> {
        with_sge_list(sges, self.dev.siw, |list| {
            // SAFETY: plain data.
            let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            wr.sg_list = if list.is_empty() { std::ptr::null_mut() } else { list.as_mut_ptr() };
            wr.num_sge = list.len() as i32;
            wr.send_flags = flags | sys::IBV_SEND_SIGNALED;
            fill(&mut wr);
            let mut i = self.lock();
            // Under the lock `uses_lkey` takes (see QpEvents::key_live).
            if !keys_live(sges, |k| self.events.key_live(k)) {
                return Err(DevError::Fault);
            }
            let id = i.reqs.add(Request { wr_id, op, keys: WrKeys::of(sges), ah: hold });
            wr.wr_id = id;
            let mut bad = std::ptr::null_mut();
            // SAFETY: our QP; the request and its scatter list live across the call (verbs
            // copies them into the send queue).
            let rc = unsafe { api::post_send(self.qp.0, &mut wr, &mut bad) };
            if rc != 0 {
                let r = i.reqs.take(id);
                drop(i);
                drop(r);
                dbg_log!(DbgType::ERROR, "verbs QP {}: ibv_post_send: {}", self.qp_num, std::io::Error::from_raw_os_error(rc));
                return Err(if rc == libc::ENOMEM { DevError::QueueFull } else { dev_error(rc) });
            }
            Ok(())
        })
    }

    /// A completion of this QP's CQ.
    pub(super) fn on_wc(&self, wc: &sys::ibv_wc) {
        let status = dto_status(wc.status);
        if wc.status != sys::IBV_WC_SUCCESS {
            dbg_log!(
                DbgType::PROVIDER_API,
                "verbs QP {}: completion {:#x}: verbs status {} (vendor {:#x}), opcode {} -> DAT status {status}",
                self.qp_num,
                wc.wr_id,
                wc.status,
                wc.vendor_err,
                wc.opcode
            );
        }
        let (found, drained, ended) = {
            let mut i = self.lock();
            let found = i.reqs.take(wc.wr_id);
            let drained = i.disconnect_when_drained && i.reqs.sends_out() == 0;
            (found, drained, i.conn == Conn::Ended)
        };
        // (A datagram's address handle, if any, is dropped here, outside the QP's lock.)
        let (wr_id, op) = match found {
            Some((wr_id, op, _ah)) => (wr_id, op),
            None => match self.srq.as_ref().and_then(|s| s.take(wc.wr_id)) {
                Some(core_id) => (core_id, Some(WcOp::Recv)),
                None => return,
            },
        };
        // A datagram longer than its receive: an HCA completes the receive with a local length
        // error; rxe drops the datagram (IBTA class D) or, on an SRQ, completes the receive as
        // an invalid request (class E), which on a UD receive means nothing else.
        let ud_recv = self.caps.service == Service::Ud && op == Some(WcOp::Recv);
        let status = if ud_recv && wc.status == sys::IBV_WC_REM_INV_REQ_ERR { DAT_DTO_ERR_LOCAL_LENGTH } else { status };
        // An error ends the connection, as it does on hardware; so does a flush the connection
        // did not ask for (rxe reports some local errors as flushes). A datagram's error is its
        // own (a receive too short, say); only flushes say that a UD QP went to the error state.
        let breaks = match self.caps.service {
            Service::Rc => status != DAT_DTO_SUCCESS && (status != DAT_DTO_ERR_FLUSHED || !ended),
            Service::Ud => status == DAT_DTO_ERR_FLUSHED && !ended,
        };
        let Some(mut op) = op else {
            // Our own request: only its failure matters.
            if breaks {
                self.end(CmEvent::Broken);
            }
            return;
        };
        let with_imm = wc.wc_flags & sys::IBV_WC_WITH_IMM != 0;
        let with_inv = wc.wc_flags & self.dev.inv_flags() != 0 && op == WcOp::Recv;
        if status == DAT_DTO_SUCCESS && op == WcOp::Recv && wc.opcode == sys::IBV_WC_RECV_RDMA_WITH_IMM {
            op = WcOp::RecvImm;
        }
        if status == DAT_DTO_SUCCESS && op == WcOp::Recv && self.caps.service == Service::Ud {
            super::ud::received(self, wc);
        }
        // SAFETY: the union holds the immediate data or the invalidated rkey, as the flags say.
        let (imm, inv) = unsafe { (wc.__bindgen_anon_1.imm_data, wc.__bindgen_anon_1.invalidated_rkey) };
        let c = Completion {
            wr_id,
            status,
            op,
            byte_len: wc.byte_len,
            imm: with_imm.then_some(imm),
            invalidated: (with_inv && status == DAT_DTO_SUCCESS).then_some(inv),
            // Not known on verbs (see the top of this file): receives always notify.
            solicited: matches!(op, WcOp::Recv | WcOp::RecvImm),
        };
        if let Some(k) = c.invalidated {
            self.dev.mw_invalidated(k);
        }
        self.events.completion(c);
        if breaks {
            self.end(CmEvent::Broken);
        } else if drained {
            self.end(CmEvent::Disconnected);
        }
    }
}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        let id = {
            let mut s = self.dev.lock();
            let me: *const VerbsQp = self;
            Arc::make_mut(&mut s.polled).retain(|w| !core::ptr::eq(w.as_ptr(), me));
            s.qps.remove(&self.qp_num);
            let id = self.inner.get_mut().id;
            if let Some(id) = id {
                s.ids.remove(&(id.0 as usize));
            }
            id
        };
        let abandoned = self.inner.get_mut().abandoned;
        // UD connects still under way: their ids are ours to destroy.
        let pending = std::mem::take(&mut self.inner.get_mut().ud.pending);
        super::udcm::release_all(&self.dev, pending.into_keys());
        let api = self.dev.api;
        // SAFETY: our QP, destroyed once, before the cm id (destroying a connected id tells the
        // peer) and the CQ it uses.
        unsafe { (api.ibv.destroy_qp)(self.qp.0) };
        if let Some(id) = id {
            // Nothing else holds the id (it left the device's table above), and the progress
            // thread acknowledges its events as they come, so destroying an abandoned one
            // waits only for the kernel's connect to resolve (see `end`): on a thread of its own.
            let destroy = move || {
                let id = id;
                // SAFETY: as above; the id is destroyed once, here.
                unsafe { (api.cm.destroy_id)(id.0) };
            };
            if !abandoned {
                destroy();
            } else if let Err(e) = std::thread::Builder::new().name("dat2-verbs-abandon".into()).stack_size(64 << 10).spawn(destroy) {
                dbg_log!(DbgType::ERROR, "verbs QP {}: no thread to destroy an abandoned connect's cm id ({e}): it is kept", self.qp_num);
            }
        }
        // SAFETY: our CQ, destroyed once, after the QP that used it.
        unsafe { (api.ibv.destroy_cq)(self.cq.0) };
    }
}

/// The peer's address and port, and our local port, of a connected cm id.
/// (An id without an IPv4 or IPv6 destination, which rdma_cm does not make, reads as 0.0.0.0.)
pub(super) fn id_addresses(api: &api::Api, id: Ptr<sys::rdma_cm_id>) -> (SocketAddr, u16) {
    // SAFETY: a live cm id; the route's addresses are inside it, in sockaddr_storage-sized
    // unions, so a sockaddr of the family stated is readable.
    unsafe {
        let dst = std::ptr::addr_of!((*id.0).route.addr.__bindgen_anon_2) as *const libc::sockaddr;
        let mut remote = crate::util::sockaddr::from_c(dst).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        remote.set_port(u16::from_be((api.cm.get_dst_port)(id.0)));
        let lport = u16::from_be((api.cm.get_src_port)(id.0));
        (remote, lport)
    }
}

impl Qp for VerbsQp {
    fn connect(&self, addr: SocketAddr, _conn_qual: u64, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
        match self.caps.service {
            Service::Rc => super::cm::connect(self, addr, private_data, timeout),
            Service::Ud => super::udcm::connect(self, addr, private_data, timeout),
        }
    }

    fn post_send(&self, wr: &SendWr) -> Result<(), DevError> {
        if self.caps.service == Service::Ud || wr.ah.is_some() {
            return super::ud::post_send(self, wr);
        }
        let mut flags = 0;
        if wr.fence {
            flags |= sys::IBV_SEND_FENCE;
        }
        if wr.solicited {
            flags |= sys::IBV_SEND_SOLICITED;
        }
        let remote = wr.remote.unwrap_or((0, 0));
        let (op, opcode) = match wr.op {
            WrOp::Send => (WcOp::Send, sys::IBV_WR_SEND),
            WrOp::SendInv(_) => (WcOp::Send, sys::IBV_WR_SEND_WITH_INV),
            WrOp::SendImm(_) => (WcOp::Send, sys::IBV_WR_SEND_WITH_IMM),
            WrOp::Write => (WcOp::Write, sys::IBV_WR_RDMA_WRITE),
            WrOp::WriteImm(_) => (WcOp::Write, sys::IBV_WR_RDMA_WRITE_WITH_IMM),
            WrOp::Read => (WcOp::Read, sys::IBV_WR_RDMA_READ),
            WrOp::CmpSwap { .. } => (WcOp::CmpSwap, sys::IBV_WR_ATOMIC_CMP_AND_SWP),
            WrOp::FetchAdd { .. } => (WcOp::FetchAdd, sys::IBV_WR_ATOMIC_FETCH_AND_ADD),
        };
        self.post(wr.wr_id, Some(op), &wr.sges, flags, None, |w| {
            w.opcode = opcode;
            match wr.op {
                WrOp::SendInv(rkey) => w.__bindgen_anon_1.invalidate_rkey = rkey,
                WrOp::SendImm(imm) | WrOp::WriteImm(imm) => w.__bindgen_anon_1.imm_data = imm,
                _ => {}
            }
            match wr.op {
                WrOp::Write | WrOp::WriteImm(_) | WrOp::Read => {
                    w.wr.rdma.remote_addr = remote.0;
                    w.wr.rdma.rkey = remote.1;
                }
                WrOp::CmpSwap { compare, swap } => {
                    w.wr.atomic.remote_addr = remote.0;
                    w.wr.atomic.rkey = remote.1;
                    w.wr.atomic.compare_add = compare;
                    w.wr.atomic.swap = swap;
                }
                WrOp::FetchAdd { add } => {
                    w.wr.atomic.remote_addr = remote.0;
                    w.wr.atomic.rkey = remote.1;
                    w.wr.atomic.compare_add = add;
                }
                _ => {}
            }
        })
    }

    fn poll(&self) {
        super::progress::poll_qp(self);
    }

    fn wait_begins(&self) {
        // Counted before arming (see `arm`), armed before the poll that follows: whatever
        // completes after it raises an event.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.arm();
    }

    fn deliver_before_wait(&self) {
        super::progress::drain_before_blocking(self);
    }

    fn wait_ends(&self) {
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError> {
        with_sge_list(&sges, self.dev.siw, |list| {
            // SAFETY: plain data.
            let mut wr: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
            wr.sg_list = if list.is_empty() { std::ptr::null_mut() } else { list.as_mut_ptr() };
            wr.num_sge = list.len() as i32;
            let mut i = self.lock();
            if !keys_live(&sges, |k| self.events.key_live(k)) {
                return Err(DevError::Fault);
            }
            let r = Request { wr_id, op: Some(WcOp::Recv), keys: WrKeys::of(&sges), ah: None };
            let id = i.reqs.add(r);
            wr.wr_id = id;
            let mut bad = std::ptr::null_mut();
            // SAFETY: our QP; the request and its list live across the call.
            let rc = unsafe { api::post_recv(self.qp.0, &mut wr, &mut bad) };
            if rc != 0 {
                i.reqs.take(id);
                return Err(if rc == libc::ENOMEM { DevError::QueueFull } else { dev_error(rc) });
            }
            Ok(())
        })
    }

    fn disconnect(&self, graceful: bool) {
        {
            let mut i = self.lock();
            if i.conn == Conn::Ended {
                return;
            }
            if graceful && i.reqs.sends_out() > 0 && i.conn == Conn::Established {
                i.disconnect_when_drained = true;
                drop(i);
                // The rest comes from the CQ, which nobody may be polling: armed, and what
                // is there already taken now.
                self.arm();
                super::progress::poll_qp(self);
                return;
            }
        }
        self.end(CmEvent::Disconnected);
    }

    fn bind_mw(&self, wr_id: u64, mw: &Mw, mr: &Mr, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<u32, DevError> {
        let mrp = self.dev.mr_ptr(mr).ok_or(DevError::Fault)?;
        let st = self.dev.mw_state(mw).ok_or(DevError::Fault)?;
        let st = if st.bound { self.dev.replace_mw(mw)? } else { st };
        let mwp = st.mw;
        let rkey = api::inc_rkey(st.rkey);
        self.post(wr_id, Some(WcOp::Bind), &[], 0, None, |w| {
            w.opcode = sys::IBV_WR_BIND_MW;
            // (the bind member of the union this opcode uses)
            w.__bindgen_anon_2.bind_mw.mw = mwp.0;
            w.__bindgen_anon_2.bind_mw.rkey = rkey;
            w.__bindgen_anon_2.bind_mw.bind_info.mr = mrp.0;
            w.__bindgen_anon_2.bind_mw.bind_info.addr = addr;
            w.__bindgen_anon_2.bind_mw.bind_info.length = len;
            w.__bindgen_anon_2.bind_mw.bind_info.mw_access_flags = mw_access(access, zero_based);
        })?;
        self.dev.set_mw(mw, rkey, true);
        Ok(rkey)
    }

    fn unbind_mw(&self, wr_id: u64, mw: &Mw) {
        let Some(st) = self.dev.mw_state(mw) else { return };
        if !st.bound {
            // Nothing to invalidate (never bound, unbound, or invalidated by the peer).
            self.events.completion(Completion::bare(wr_id, DAT_DTO_SUCCESS, WcOp::Bind));
            return;
        }
        let posted = self.post(wr_id, Some(WcOp::Bind), &[], 0, None, |w| {
            w.opcode = sys::IBV_WR_LOCAL_INV;
            w.__bindgen_anon_1.invalidate_rkey = st.rkey;
        });
        if posted.is_ok() {
            self.dev.set_mw(mw, st.rkey, false);
        }
        if posted.is_err() {
            self.events.completion(Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, WcOp::Bind));
        }
    }

    fn remote(&self) -> Option<SocketAddr> {
        self.lock().remote
    }

    fn local_port(&self) -> u16 {
        self.lock().local_port
    }

    fn destroy(&self) {
        self.disconnect(false);
        if self.caps.service == Service::Ud {
            // The QP is in the error state: it sends nothing more, and the address handles of
            // sends not yet completed go now, before the EP's PD. Connects under way end unreported.
            let (held, pending) = {
                let mut i = self.lock();
                (i.reqs.take_address_handles(), std::mem::take(&mut i.ud.pending))
            };
            drop(held);
            super::udcm::release_all(&self.dev, pending.into_keys());
        }
    }

    fn path(&self) -> &'static str {
        match self.caps.service {
            Service::Rc => "verbs",
            Service::Ud => "ud",
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The QP's read and atomic depths from those rdma_cm negotiated (`dest`, `own`): as responder
/// (`max_dest_rd_atomic`) no more than the EP's `max_rdma_read_in`, as initiator
/// (`max_rd_atomic`) no more than its `max_rdma_read_out`; at least 1 each.
pub(super) fn rd_attrs(dest: u8, own: u8, caps: &QpCaps) -> (u8, u8) {
    (dest.clamp(1, super::cm::depth(caps.max_rd_in)), own.clamp(1, super::cm::depth(caps.max_rd_atomic)))
}
