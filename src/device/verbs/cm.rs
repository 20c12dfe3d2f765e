//! The connection manager of the verbs device, on rdma_cm. Every cm id of the device is
//! created on the device's one event channel; the progress thread reads the events and hands
//! them here, where the id says whom they are for: a listener, a request not yet answered,
//! or a QP's connection.
//!
//! QPs are ours (created before the connection, see qp.rs), so rdma_cm is used the way it is
//! for QPs it did not create: the active side moves the QP to RTR/RTS when the reply arrives
//! and confirms with rdma_establish; the passive side does so before rdma_accept.
//!
//! A listener listens in rdma_cm's TCP port space (RC) and, when the device has UD, in its UDP
//! port space on the same port (UD requests, answered in udcm.rs).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::device::VerbsDevice;
use super::errno::{dev_error, last_error};
use super::qp::{id_addresses, Conn, VerbsQp};
use super::{sys, Ptr};
use crate::dbg_log;
use crate::device::{CmEvent, DevError, IaPort, ListenEvents, Listener, PendingConnection, Qp, QpCaps, Service};
use crate::log::DbgType;
use crate::util::sync::MutexExt;

/// How long address and route resolution may take, in milliseconds.
const RESOLVE_MS: i32 = 2000;
/// IB CM rejection reason for a reject by the consumer (IBTA 12.6.7.2).
const REJ_CONSUMER_DEFINED: i32 = 28;

/// The private data rdma_cm delivers on IB and RoCE, padded with zeros to these sizes: a
/// connect request (the CM REQ's 92 bytes less rdma_cm's header), an accept and a reject.
pub(super) const PDATA_REQ: usize = 56;
const PDATA_REP: usize = 196;
const PDATA_REJ: usize = 148;
/// What a trailer takes from the private data a consumer may send.
pub(super) const TRAILER: usize = 4;

/// The read and atomic depths of a connection, as rdma_cm's parameters name them:
/// `responder_resources`, the requests the peer may have outstanding at us (the EP's
/// `max_rdma_read_in`, our QP's `max_dest_rd_atomic`), and `initiator_depth`, ours at the peer
/// (`max_rdma_read_out`, `max_rd_atomic`). Connecting, we offer our own. Accepting, no more
/// than the request offers, which rdma_cm reports from our side (`request`: its
/// responder_resources are the reads the peer means to issue, its initiator_depth the reads
/// the peer takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RdDepths {
    pub responder_resources: u8,
    pub initiator_depth: u8,
}

impl RdDepths {
    pub(super) fn new(caps: &QpCaps, request: Option<RdDepths>) -> RdDepths {
        let ours = RdDepths { responder_resources: depth(caps.max_rd_in), initiator_depth: depth(caps.max_rd_atomic) };
        match request {
            None => ours,
            Some(r) => RdDepths {
                responder_resources: r.responder_resources.min(ours.responder_resources),
                initiator_depth: r.initiator_depth.min(ours.initiator_depth),
            },
        }
    }
}

/// A QP's depth limit as one byte of rdma_cm's parameters (and of ibv_qp_attr): 1 to 255.
pub(super) fn depth(limit: u32) -> u8 {
    limit.clamp(1, 255) as u8
}

/// Pads `payload` to the transport's fixed `size` and ends it with a trailer giving its
/// length, so that a dat2 peer hands its consumer exactly what was sent. A peer on Debian's
/// dapl reads the payload where it expects it (at the start) and ignores the rest, as it
/// ignores the padding.
pub(super) fn frame(payload: &[u8], size: usize) -> Vec<u8> {
    let mut v = payload.to_vec();
    if payload.len() + TRAILER > size {
        return v;
    }
    v.resize(size, 0);
    let check = payload.iter().fold(0x5a ^ payload.len() as u8, |c, b| c ^ b);
    v[size - TRAILER..].copy_from_slice(&[payload.len() as u8, check, b'D', b'2']);
    v
}

/// The consumer's private data from what arrived: the framed length from a dat2 peer, the
/// transport's padded data from any other.
pub(super) fn unframe(mut data: Vec<u8>, size: usize) -> Vec<u8> {
    if data.len() != size || size < TRAILER || data[size - 2..] != [b'D', b'2'] {
        return data;
    }
    let len = usize::from(data[size - TRAILER]);
    if len > size - TRAILER || data[len..size - TRAILER].iter().any(|&b| b != 0) {
        return data;
    }
    let check = data[..len].iter().fold(0x5a ^ len as u8, |c, b| c ^ b);
    if check != data[size - TRAILER + 1] {
        return data;
    }
    data.truncate(len);
    data
}

pub(super) enum CmTarget {
    Listener(Arc<dyn ListenEvents>),
    Pending(Weak<VerbsPending>),
    Qp(Weak<VerbsQp>),
    /// A UD QP's connect (one id per connect, see udcm.rs).
    Ud(Weak<VerbsQp>),
}

/// What a UD event of rdma_cm says besides its private data.
#[derive(Clone, Copy)]
pub(super) struct UdParam {
    pub ah_attr: sys::ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// What the progress thread copied out of an event before acknowledging it.
pub(super) struct CmEv {
    pub kind: u32,
    pub status: i32,
    pub id: Ptr<sys::rdma_cm_id>,
    pub listen_id: Ptr<sys::rdma_cm_id>,
    pub private_data: Vec<u8>,
    pub initiator_depth: u8,
    pub responder_resources: u8,
    /// Events of ids in the UDP port space (UD).
    pub ud: Option<UdParam>,
}

/// A cm id on the device's channel in port space `ps` (RDMA_PS_TCP or RDMA_PS_UDP).
pub(super) fn create_id(dev: &VerbsDevice, ps: sys::rdma_port_space) -> Result<Ptr<sys::rdma_cm_id>, DevError> {
    let mut id = std::ptr::null_mut();
    // SAFETY: our event channel; the id is released with rdma_destroy_id.
    if unsafe { (dev.api.cm.create_id)(dev.cm_channel.0, &mut id, std::ptr::null_mut(), ps) } != 0 {
        return Err(last_error());
    }
    Ok(Ptr(id))
}

/// `addr` with `port`, as a C socket address for rdma_cm.
pub(super) fn with_port(mut addr: SocketAddr, port: u16) -> libc::sockaddr_storage {
    addr.set_port(port);
    crate::util::sockaddr::to_c(addr)
}

pub struct VerbsListener {
    dev: Arc<VerbsDevice>,
    /// The TCP port space's id, and the UDP port space's when the device has UD.
    ids: Vec<Ptr<sys::rdma_cm_id>>,
    port: u16,
    conn_qual: u64,
}

// SAFETY: the cm id is used through librdmacm, which is thread safe.
unsafe impl Send for VerbsListener {}
// SAFETY: as above.
unsafe impl Sync for VerbsListener {}

pub(super) fn listen(dev: &Arc<VerbsDevice>, port: u16, events: Arc<dyn ListenEvents>) -> Result<VerbsListener, DevError> {
    let ud = crate::device::Device::limits(dev.as_ref()).max_ud_msg > 0;
    // A port chosen by the TCP space (port 0) may be taken in the UDP space: another one then.
    for _ in 0..if port == 0 && ud { 16 } else { 1 } {
        let (tcp, chosen) = listen_on(dev, sys::RDMA_PS_TCP, port, &events)?;
        let udp = if ud { listen_on(dev, sys::RDMA_PS_UDP, chosen, &events).map(|(id, _)| Some(id)) } else { Ok(None) };
        let udp = match udp {
            Ok(udp) => udp,
            Err(e) => {
                unlisten(dev, tcp);
                if e == DevError::InUse && port == 0 {
                    continue;
                }
                return Err(e);
            }
        };
        let ids: Vec<_> = std::iter::once(tcp).chain(udp).collect();
        return Ok(VerbsListener { dev: dev.clone(), ids, port: chosen, conn_qual: u64::from(chosen) });
    }
    Err(DevError::InUse)
}

/// A listening id in port space `ps` on `port` (0: any), and the port it got. Its requests go
/// to `events` from the first on: the id is known to the progress thread before it listens,
/// so that a request arriving at once is not taken for one nobody listens for.
fn listen_on(
    dev: &Arc<VerbsDevice>,
    ps: sys::rdma_port_space,
    port: u16,
    events: &Arc<dyn ListenEvents>,
) -> Result<(Ptr<sys::rdma_cm_id>, u16), DevError> {
    let id = create_id(dev, ps)?;
    let mut addr = with_port(dev.address, port);
    let fail = |id: Ptr<sys::rdma_cm_id>, e: DevError| {
        unlisten(dev, id);
        Err(e)
    };
    dev.lock().ids.insert(id.0 as usize, CmTarget::Listener(events.clone()));
    // SAFETY: our id and an address of the device.
    if unsafe { (dev.api.cm.bind_addr)(id.0, &mut addr as *mut _ as *mut sys::sockaddr) } != 0 {
        let e = std::io::Error::last_os_error();
        dbg_log!(DbgType::ERROR, "verbs {}: rdma_bind_addr port {port} (port space {ps:#x}): {e}", dev.name_str());
        return fail(id, dev_error(e.raw_os_error().unwrap_or(0)));
    }
    // SAFETY: a bound id.
    if unsafe { (dev.api.cm.listen)(id.0, 128) } != 0 {
        return fail(id, last_error());
    }
    // SAFETY: a bound id.
    Ok((id, u16::from_be(unsafe { (dev.api.cm.get_src_port)(id.0) })))
}

/// Ends a listening id made by [`listen_on`]: the progress thread forgets it, then it is
/// destroyed (rdma_destroy_id returns once its events are acknowledged, and the progress
/// thread acknowledges each as it reads it).
fn unlisten(dev: &Arc<VerbsDevice>, id: Ptr<sys::rdma_cm_id>) {
    // Dropped after the device's lock: the consumer's side may hold QPs, whose drop takes
    // that lock.
    let events = dev.lock().ids.remove(&(id.0 as usize));
    drop(events);
    // SAFETY: a listening id of ours, destroyed once.
    unsafe { (dev.api.cm.destroy_id)(id.0) };
}

impl Listener for VerbsListener {
    fn conn_qual(&self) -> u64 {
        self.conn_qual
    }
}

/// The rdma_cm port of a connection qualifier: its low 16 bits, so a qualifier that is a port
/// number is that port (0 asks for any free port). Qualifiers that differ only above bit 15
/// share a port: rdma_cm carries no more.
pub(super) fn port_of(conn_qual: u64) -> u16 {
    (conn_qual & 0xffff) as u16
}

/// An open IA of the verbs device: rdma_cm listens per service point, on the device's address.
pub(super) struct VerbsIaPort {
    dev: Arc<VerbsDevice>,
}

impl VerbsIaPort {
    pub(super) fn new(dev: Arc<VerbsDevice>) -> VerbsIaPort {
        VerbsIaPort { dev }
    }
}

impl IaPort for VerbsIaPort {
    fn address(&self) -> SocketAddr {
        crate::device::Device::address(self.dev.as_ref())
    }

    /// Listens on the qualifier's port (see [`port_of`]); 0 asks for any port, which is then
    /// the qualifier.
    fn listen(&self, conn_qual: u64, events: Arc<dyn ListenEvents>) -> Result<Box<dyn Listener>, DevError> {
        let port = port_of(conn_qual);
        if conn_qual != 0 && port == 0 {
            return Err(DevError::BadQualifier);
        }
        let mut l = listen(&self.dev, port, events)?;
        l.conn_qual = if conn_qual == 0 { u64::from(l.port) } else { conn_qual };
        Ok(Box::new(l))
    }
}

impl Drop for VerbsListener {
    fn drop(&mut self) {
        for id in &self.ids {
            unlisten(&self.dev, Ptr(id.0));
        }
    }
}

/// A connection request not yet accepted or rejected.
pub struct VerbsPending {
    pub(super) dev: Arc<VerbsDevice>,
    pub(super) id: Ptr<sys::rdma_cm_id>,
    pub(super) private_data: Vec<u8>,
    pub(super) remote: SocketAddr,
    initiator_depth: u8,
    responder_resources: u8,
    /// A UD request: who asks (udcm.rs).
    pub(super) datagram: Option<super::ud::Requester>,
    /// Set once answered: the id then belongs to the QP (accept) or is gone (reject).
    answered: Mutex<bool>,
}

// SAFETY: the cm id is used through librdmacm, which is thread safe; state is behind a mutex.
unsafe impl Send for VerbsPending {}
// SAFETY: as above.
unsafe impl Sync for VerbsPending {}

impl VerbsPending {
    fn take(&self) -> bool {
        let mut a = self.answered.locked();
        !std::mem::replace(&mut *a, true)
    }
}

impl PendingConnection for VerbsPending {
    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    fn datagram(&self) -> bool {
        self.datagram.is_some()
    }

    fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn accept(&self, qp: &Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError> {
        let vqp = qp.as_any().downcast_ref::<VerbsQp>().ok_or(DevError::NotSupported)?;
        if self.datagram.is_some() != (vqp.caps.service == Service::Ud) {
            return Err(DevError::NotSupported);
        }
        if let Some(who) = self.datagram {
            if vqp.lock().conn == Conn::Ended {
                return Err(DevError::State);
            }
            if !self.take() {
                return Err(DevError::State);
            }
            return super::udcm::accept(self, vqp, &who, private_data);
        }
        if !self.take() {
            return Err(DevError::State);
        }
        let api = self.dev.api;
        let weak = {
            let mut s = self.dev.lock();
            let w = s.qps.get(&vqp.qp_num).cloned().unwrap_or_default();
            s.ids.insert(self.id.0 as usize, CmTarget::Qp(w.clone()));
            w
        };
        {
            let mut i = vqp.lock();
            i.id = Some(self.id);
            i.conn = Conn::Accepting;
            let (remote, local) = id_addresses(api, self.id);
            i.remote = Some(remote);
            i.local_port = local;
        }
        let _ = weak;
        if let Err(e) = vqp.ready(self.id) {
            dbg_log!(DbgType::ERROR, "verbs QP {}: to RTR/RTS for accept: {}", vqp.qp_num, std::io::Error::from_raw_os_error(e));
            // SAFETY: the request's id, answered here.
            unsafe { (api.cm.reject)(self.id.0, std::ptr::null(), 0) };
            return Err(dev_error(e));
        }
        let private_data = frame(private_data, PDATA_REP);
        // SAFETY: plain data.
        let mut p: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
        p.private_data = if private_data.is_empty() { std::ptr::null() } else { private_data.as_ptr() as *const _ };
        p.private_data_len = private_data.len() as u8;
        let request = RdDepths { responder_resources: self.responder_resources, initiator_depth: self.initiator_depth };
        let d = RdDepths::new(&vqp.caps, Some(request));
        p.responder_resources = d.responder_resources;
        p.initiator_depth = d.initiator_depth;
        p.rnr_retry_count = 7;
        p.qp_num = vqp.qp_num;
        p.srq = u8::from(vqp.on_srq());
        // SAFETY: the request's id and parameters that live across the call.
        if unsafe { (api.cm.accept)(self.id.0, &mut p) } != 0 {
            let e = std::io::Error::last_os_error();
            dbg_log!(DbgType::ERROR, "verbs QP {}: rdma_accept: {e}", vqp.qp_num);
            return Err(dev_error(e.raw_os_error().unwrap_or(0)));
        }
        Ok(())
    }

    fn reject(&self, private_data: &[u8]) {
        if !self.take() {
            return;
        }
        self.dev.lock().ids.remove(&(self.id.0 as usize));
        let private_data = frame(private_data, if self.datagram.is_some() { super::ud::PDATA_UD_REP } else { PDATA_REJ });
        let (p, n) = if private_data.is_empty() { (std::ptr::null(), 0) } else { (private_data.as_ptr(), private_data.len() as u8) };
        // SAFETY: the request's id, answered and released here.
        unsafe {
            (self.dev.api.cm.reject)(self.id.0, p as *const _, n);
            (self.dev.api.cm.destroy_id)(self.id.0);
        }
    }
}

impl Drop for VerbsPending {
    fn drop(&mut self) {
        // A request dropped unanswered is rejected.
        self.reject(&[]);
    }
}

/// Starts an active connection of `qp` to `addr`.
pub(super) fn connect(qp: &VerbsQp, addr: SocketAddr, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
    let dev = &qp.dev;
    let id = create_id(dev, sys::RDMA_PS_TCP)?;
    let weak = dev.lock().qps.get(&qp.qp_num).cloned().unwrap_or_default();
    {
        let mut i = qp.lock();
        if i.conn != Conn::Idle {
            drop(i);
            // SAFETY: the id created above, unused.
            unsafe { (dev.api.cm.destroy_id)(id.0) };
            return Err(DevError::State);
        }
        i.id = Some(id);
        i.conn = Conn::Connecting;
        i.pdata = frame(private_data, PDATA_REQ);
    }
    dev.lock().ids.insert(id.0 as usize, CmTarget::Qp(weak.clone()));
    let mut src = with_port(dev.address, 0);
    let mut dst = crate::util::sockaddr::to_c(addr);
    // SAFETY: our id and two socket addresses that live across the call.
    let rc = unsafe {
        (dev.api.cm.resolve_addr)(id.0, &mut src as *mut _ as *mut sys::sockaddr, &mut dst as *mut _ as *mut sys::sockaddr, RESOLVE_MS)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        dbg_log!(DbgType::ERROR, "verbs QP {}: rdma_resolve_addr: {e}", qp.qp_num);
        qp.lock().conn = Conn::Idle;
        return Err(dev_error(e.raw_os_error().unwrap_or(0)));
    }
    if let Some(t) = timeout {
        let _ = std::thread::Builder::new().name("dat2-verbs-timer".into()).stack_size(64 << 10).spawn(move || {
            std::thread::sleep(t);
            if let Some(q) = weak.upgrade() {
                if q.lock().conn == Conn::Connecting {
                    q.end(CmEvent::TimedOut);
                }
            }
        });
    }
    Ok(())
}

/// An rdma_cm event (already acknowledged).
pub(super) fn on_event(dev: &Arc<VerbsDevice>, ev: CmEv) {
    let target = {
        let s = dev.lock();
        let key = if ev.kind == sys::RDMA_CM_EVENT_CONNECT_REQUEST { ev.listen_id.0 as usize } else { ev.id.0 as usize };
        match s.ids.get(&key) {
            Some(CmTarget::Listener(l)) => Some(CmTarget::Listener(l.clone())),
            Some(CmTarget::Pending(p)) => Some(CmTarget::Pending(p.clone())),
            Some(CmTarget::Qp(q)) => Some(CmTarget::Qp(q.clone())),
            Some(CmTarget::Ud(q)) => Some(CmTarget::Ud(q.clone())),
            None => None,
        }
    };
    dbg_log!(DbgType::PROVIDER_API, "verbs {}: cm event {} status {}", dev.name_str(), ev.kind, ev.status);
    match (ev.kind, target) {
        (sys::RDMA_CM_EVENT_CONNECT_REQUEST, Some(CmTarget::Listener(events))) => {
            let (remote, _) = id_addresses(dev.api, ev.id);
            let (private_data, datagram) = match ev.ud {
                None => (unframe(ev.private_data, PDATA_REQ), None),
                Some(_) => match super::ud::unframe_request(&ev.private_data) {
                    Some((pdata, who)) => (pdata, Some(who)),
                    None => {
                        dbg_log!(DbgType::PROVIDER_API, "verbs {}: a UD request from {remote} names no QP: refused", dev.name_str());
                        // SAFETY: a request that cannot be answered: refused and released.
                        unsafe {
                            (dev.api.cm.reject)(ev.id.0, std::ptr::null(), 0);
                            (dev.api.cm.destroy_id)(ev.id.0);
                        }
                        return;
                    }
                },
            };
            let p = Arc::new(VerbsPending {
                dev: dev.clone(),
                id: ev.id,
                private_data,
                remote,
                initiator_depth: ev.initiator_depth,
                responder_resources: ev.responder_resources,
                datagram,
                answered: Mutex::new(false),
            });
            dev.lock().ids.insert(ev.id.0 as usize, CmTarget::Pending(Arc::downgrade(&p)));
            events.request(p);
        }
        (sys::RDMA_CM_EVENT_CONNECT_REQUEST, _) => {
            // SAFETY: a request nobody listens for any more: refuse and release it.
            unsafe {
                (dev.api.cm.reject)(ev.id.0, std::ptr::null(), 0);
                (dev.api.cm.destroy_id)(ev.id.0);
            }
        }
        (kind, Some(CmTarget::Qp(w))) => {
            if let Some(qp) = w.upgrade() {
                on_qp_event(&qp, kind, ev.status, ev.id, ev.private_data);
            }
        }
        // (A QP that is gone destroyed the ids of its connects.)
        (_, Some(CmTarget::Ud(w))) => {
            if let Some(qp) = w.upgrade() {
                super::udcm::on_event(&qp, ev);
            }
        }
        (sys::RDMA_CM_EVENT_DISCONNECTED, Some(CmTarget::Pending(_))) => {}
        _ => {}
    }
}

// The resolve calls in the arms below are actions, not conditions to match on.
#[allow(clippy::collapsible_match)]
fn on_qp_event(qp: &Arc<VerbsQp>, kind: u32, status: i32, id: Ptr<sys::rdma_cm_id>, private_data: Vec<u8>) {
    let api = qp.dev.api;
    match kind {
        sys::RDMA_CM_EVENT_ADDR_RESOLVED => {
            // SAFETY: the QP's id.
            if unsafe { (api.cm.resolve_route)(id.0, RESOLVE_MS) } != 0 {
                qp.end(CmEvent::Unreachable);
            }
        }
        sys::RDMA_CM_EVENT_ROUTE_RESOLVED if qp.dev.iwarp => {
            // siw's rdma_connect makes the TCP connection before it returns: towards a host that
            // does not answer it would hold the progress thread (every QP of the device) for
            // the kernel's SYN retries. Each iWARP connect gets a thread of its own.
            let q = qp.clone();
            let spawned =
                std::thread::Builder::new().name("dat2-verbs-connect".into()).stack_size(64 << 10).spawn(move || connect_now(&q, id));
            if let Err(e) = spawned {
                // Reported, never left waiting: the connect is not made.
                dbg_log!(DbgType::ERROR, "verbs QP {}: no thread for an iWARP connect: {e}", qp.qp_num);
                qp.end(CmEvent::Unreachable);
            }
        }
        sys::RDMA_CM_EVENT_ROUTE_RESOLVED => connect_now(qp, id),
        sys::RDMA_CM_EVENT_CONNECT_RESPONSE => {
            if qp.lock().conn != Conn::Connecting {
                return;
            }
            if let Err(e) = qp.ready(id) {
                dbg_log!(DbgType::ERROR, "verbs QP {}: to RTR/RTS: {}", qp.qp_num, std::io::Error::from_raw_os_error(e));
                // SAFETY: the QP's id; refuse the reply.
                unsafe { (api.cm.reject)(id.0, std::ptr::null(), 0) };
                qp.end(CmEvent::Unreachable);
                return;
            }
            // SAFETY: the QP's id, now with a QP ready to send.
            if unsafe { (api.cm.establish)(id.0) } != 0 {
                qp.end(CmEvent::Unreachable);
                return;
            }
            established(qp, id, unframe(private_data, PDATA_REP));
        }
        sys::RDMA_CM_EVENT_ESTABLISHED => {
            let state = qp.lock().conn;
            match state {
                // iWARP: the active side's connect completes with ESTABLISHED, carrying the
                // accept's private data (the kernel moved the QP to RTS).
                Conn::Connecting => established(qp, id, unframe(private_data, PDATA_REP)),
                Conn::Accepting => established(qp, id, private_data),
                _ => {}
            }
        }
        sys::RDMA_CM_EVENT_REJECTED => {
            // IB: the CM's reason (28 for a consumer's reject). iWARP: an MPA reject, which a
            // dat2 or dapl peer sends with private data, comes as -ECONNRESET from siw
            // (-ECONNREFUSED from other adapters); a reset or refusal without any is the
            // peer's host, not its consumer.
            let by_peer = status == REJ_CONSUMER_DEFINED
                || (qp.dev.iwarp && matches!(status.abs(), libc::ECONNREFUSED | libc::ECONNRESET) && !private_data.is_empty());
            let ev =
                if by_peer { CmEvent::PeerRejected { private_data: unframe(private_data, PDATA_REJ) } } else { CmEvent::NonPeerRejected };
            qp.end(ev);
        }
        sys::RDMA_CM_EVENT_ADDR_ERROR
        | sys::RDMA_CM_EVENT_ROUTE_ERROR
        | sys::RDMA_CM_EVENT_UNREACHABLE
        | sys::RDMA_CM_EVENT_CONNECT_ERROR => {
            let ev = if status == -libc::ETIMEDOUT || status == libc::ETIMEDOUT { CmEvent::TimedOut } else { CmEvent::Unreachable };
            qp.end(ev);
        }
        sys::RDMA_CM_EVENT_DISCONNECTED => qp.end(CmEvent::Disconnected),
        sys::RDMA_CM_EVENT_DEVICE_REMOVAL => qp.end(CmEvent::Broken),
        _ => {}
    }
}

/// rdma_connect once the route is resolved. A host that refuses the connection outright
/// (siw's TCP connect meets a reset: nobody listens on that port) is a non-peer reject, as the
/// IB CM's reject of an unknown service is.
fn connect_now(qp: &Arc<VerbsQp>, id: Ptr<sys::rdma_cm_id>) {
    let pdata = qp.lock().pdata.clone();
    // SAFETY: plain data.
    let mut p: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
    p.private_data = if pdata.is_empty() { std::ptr::null() } else { pdata.as_ptr() as *const _ };
    p.private_data_len = pdata.len() as u8;
    let d = RdDepths::new(&qp.caps, None);
    p.responder_resources = d.responder_resources;
    p.initiator_depth = d.initiator_depth;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    p.qp_num = qp.qp_num;
    p.srq = u8::from(qp.on_srq());
    // SAFETY: the QP's id and parameters that live across the call.
    if unsafe { (qp.dev.api.cm.connect)(id.0, &mut p) } != 0 {
        let e = std::io::Error::last_os_error();
        dbg_log!(DbgType::ERROR, "verbs QP {}: rdma_connect: {e}", qp.qp_num);
        qp.end(if e.raw_os_error() == Some(libc::ECONNREFUSED) { CmEvent::NonPeerRejected } else { CmEvent::Unreachable });
    }
}

fn established(qp: &Arc<VerbsQp>, id: Ptr<sys::rdma_cm_id>, private_data: Vec<u8>) {
    let (remote, local) = id_addresses(qp.dev.api, id);
    {
        let mut i = qp.lock();
        i.conn = Conn::Established;
        i.remote = Some(remote);
        i.local_port = local;
    }
    qp.events.cm(CmEvent::Established { private_data });
}

#[cfg(test)]
mod tests {
    use super::{frame, unframe, RdDepths, PDATA_REQ};
    use crate::device::{QpCaps, Service};

    fn caps(read_out: u32, read_in: u32) -> QpCaps {
        QpCaps {
            service: Service::Rc,
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_rd_atomic: read_out,
            max_rd_in: read_in,
            max_message: 1,
        }
    }

    #[test]
    fn responder_resources_are_the_reads_coming_in() {
        let c = caps(2, 8);
        // Connecting: we take 8 reads from the peer and issue 2.
        assert_eq!(RdDepths::new(&c, None), RdDepths { responder_resources: 8, initiator_depth: 2 });
        // Accepting a request whose peer issues 16 reads and takes 1 (from our side): we take
        // no more than 8, and issue no more than it takes.
        let req = RdDepths { responder_resources: 16, initiator_depth: 1 };
        assert_eq!(RdDepths::new(&c, Some(req)), RdDepths { responder_resources: 8, initiator_depth: 1 });
        let req = RdDepths { responder_resources: 3, initiator_depth: 4 };
        assert_eq!(RdDepths::new(&c, Some(req)), RdDepths { responder_resources: 3, initiator_depth: 2 });
        // The QP's attributes after rdma_cm's (see VerbsQp::modify_cm).
        assert_eq!(super::super::qp::rd_attrs(5, 5, &c), (5, 2));
        assert_eq!(super::super::qp::rd_attrs(16, 16, &c), (8, 2));
        assert_eq!(super::super::qp::rd_attrs(0, 0, &c), (1, 1));
        // Limits past a byte, or none.
        assert_eq!(RdDepths::new(&caps(0, 1000), None), RdDepths { responder_resources: 255, initiator_depth: 1 });
    }

    #[test]
    fn private_data_keeps_its_length() {
        for n in [0usize, 1, 15, 48, 52] {
            let p: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(7) | 1).collect();
            let f = frame(&p, PDATA_REQ);
            assert_eq!(f.len(), PDATA_REQ);
            assert_eq!(&f[..n], &p[..]);
            assert_eq!(unframe(f, PDATA_REQ), p);
        }
        // Too long for a trailer: sent as is.
        assert_eq!(frame(&[1; 54], PDATA_REQ).len(), 54);
        // A peer without the trailer (Debian's dapl): the padded data as it arrived.
        let mut raw = vec![9u8; 48];
        raw.resize(PDATA_REQ, 0);
        assert_eq!(unframe(raw.clone(), PDATA_REQ), raw);
        // A damaged trailer is not trusted.
        let mut f = frame(&[1, 2, 3], PDATA_REQ);
        f[1] ^= 0xff;
        assert_eq!(unframe(f.clone(), PDATA_REQ), f);
    }
}
