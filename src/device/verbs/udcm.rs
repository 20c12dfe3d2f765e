//! Resolving UD peers through rdma_cm's UDP port space (a SIDR exchange on IB and RoCE).
//!
//! Active side: every connect of a UD QP has a cm id of its own (a QP may resolve many peers,
//! concurrently), with no QP attached: address and route resolution, then `rdma_connect` with
//! our QP's number and the request's private data (ud.rs puts the requester's QP number and
//! address in its trailer). The answer, `RDMA_CM_EVENT_ESTABLISHED`, carries the peer's
//! address vector, QP number and Q_Key; a reject or a missing listener comes as
//! `RDMA_CM_EVENT_UNREACHABLE` with the SIDR status. Either way the QP reports the outcome once
//! and the id is destroyed.
//!
//! Passive side: a request on a listener's UDP id (cm.rs) is accepted with our QP's number and
//! answered at once; the accepting QP reports the requester, whose QP number the trailer of its
//! request names, reached through an address handle to the address the request came from
//! (`ud::requester_gid`). On InfiniBand nothing the fabric vouches for names the requester to
//! the passive side of a SIDR exchange (rdma_cm reports no path for it, and the trailer's GID
//! and LID are the requester's word, which could point our datagrams anywhere on the fabric),
//! so a UD request is refused there.
//!
//! Ownership of a connect's id: the QP's `UdState::pending` holds it while the connect is
//! under way, and whoever takes it out (the outcome, the consumer's timeout, the QP's end)
//! destroys it. The steps that use the id run with the QP's lock held and only while the id is
//! still there, so a timeout never destroys an id in use.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::cm::{self, CmEv, CmTarget, VerbsPending};
use super::device::VerbsDevice;
use super::errno::dev_error;
use super::qp::{id_addresses, Conn, VerbsQp};
use super::ud::{self, Requester, VerbsAh, PDATA_UD_REP};
use super::{sys, Ptr};
use crate::dbg_log;
use crate::device::{CmEvent, DevError, UdPeer};
use crate::log::DbgType;

/// How long address and route resolution may take, in milliseconds.
const RESOLVE_MS: i32 = 2000;
/// The SIDR REP status of a consumer's reject, and of a request nobody listens for (IBTA 16.7).
const SIDR_UNSUPPORTED: i32 = 1;
const SIDR_REJECT: i32 = 2;
/// IB CM rejection reason for a reject by the consumer (IBTA 12.6.7.2).
const REJ_CONSUMER_DEFINED: i32 = 28;

/// Destroys connect id `id` (whoever calls this owns it), after it stops naming a target.
pub(super) fn release(dev: &VerbsDevice, id: usize) {
    dev.lock().ids.remove(&id);
    // SAFETY: a cm id of ours, taken out of its owner's table by the caller, destroyed once.
    unsafe { (dev.api.cm.destroy_id)(id as *mut sys::rdma_cm_id) };
}

/// Destroys connect ids a QP held (it ends or is freed): their connects are not reported.
pub(super) fn release_all(dev: &VerbsDevice, ids: impl Iterator<Item = usize>) {
    for id in ids {
        release(dev, id);
    }
}

/// Starts resolving the UD peer at `addr` (its port is the peer's service point).
pub(super) fn connect(qp: &VerbsQp, addr: SocketAddr, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
    let dev = &qp.dev;
    // The request's trailer must fit too (checked again, with the route's GID, when it goes).
    let me = Requester { qpn: qp.qp_num, lid: dev.ud.lid, gid: [0; 16] };
    if ud::frame_request(private_data, &me).is_none() {
        return Err(DevError::NoResources);
    }
    let id = cm::create_id(dev, sys::RDMA_PS_UDP)?;
    let key = id.0 as usize;
    let weak = dev.lock().qps.get(&qp.qp_num).cloned().unwrap_or_default();
    {
        let mut i = qp.lock();
        if i.conn == Conn::Ended {
            drop(i);
            // SAFETY: the id created above, unused.
            unsafe { (dev.api.cm.destroy_id)(id.0) };
            return Err(DevError::State);
        }
        i.ud.pending.insert(key, private_data.to_vec());
    }
    dev.lock().ids.insert(key, CmTarget::Ud(weak.clone()));
    let mut src = cm::with_port(dev.address, 0);
    let mut dst = crate::util::sockaddr::to_c(addr);
    let rc = {
        let i = qp.lock();
        // SAFETY: our id (still ours: it is in `pending`, under the lock) and two socket
        // addresses that live across the call.
        let rc = unsafe {
            (dev.api.cm.resolve_addr)(id.0, &mut src as *mut _ as *mut sys::sockaddr, &mut dst as *mut _ as *mut sys::sockaddr, RESOLVE_MS)
        };
        drop(i);
        rc
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        dbg_log!(DbgType::ERROR, "verbs UD QP {}: rdma_resolve_addr {addr}: {e}", qp.qp_num);
        if qp.lock().ud.pending.remove(&key).is_some() {
            release(dev, key);
        }
        return Err(dev_error(e.raw_os_error().unwrap_or(0)));
    }
    if let Some(t) = timeout {
        let _ = std::thread::Builder::new().name("dat2-verbs-timer".into()).stack_size(64 << 10).spawn(move || {
            std::thread::sleep(t);
            if let Some(q) = weak.upgrade() {
                finish(&q, key, |_| CmEvent::TimedOut);
            }
        });
    }
    Ok(())
}

/// Ends connect `id` of `qp` with the outcome `outcome` computes (with the id still alive),
/// unless something else ended it first; then destroys the id and reports the outcome.
fn finish(qp: &Arc<VerbsQp>, id: usize, outcome: impl FnOnce(Ptr<sys::rdma_cm_id>) -> CmEvent) {
    if qp.lock().ud.pending.remove(&id).is_none() {
        return;
    }
    let mut ev = outcome(Ptr(id as *mut sys::rdma_cm_id));
    release(&qp.dev, id);
    if qp.lock().conn == Conn::Ended && matches!(ev, CmEvent::UdResolved { .. }) {
        // Nothing can be sent to the peer from a QP in the error state.
        ev = CmEvent::Broken;
    }
    dbg_log!(DbgType::PROVIDER_API, "verbs UD QP {}: connect ends: {ev:?}", qp.qp_num);
    qp.events.cm(ev);
}

/// Our GID and the peer's on the route of `id` (zero when rdma_cm left them out).
fn route_gids(id: Ptr<sys::rdma_cm_id>) -> ([u8; 16], [u8; 16]) {
    // SAFETY: a live id; librdmacm fills the IB address of its route when it resolves the
    // address (or receives a request), and it is plain data in any case.
    let ib = unsafe { (*id.0).route.addr.addr.ibaddr };
    (ud::gid_bytes(&ib.sgid), ud::gid_bytes(&ib.dgid))
}

/// An event of a UD connect's id.
pub(super) fn on_event(qp: &Arc<VerbsQp>, ev: CmEv) {
    let (dev, id) = (&qp.dev, ev.id);
    let key = id.0 as usize;
    match ev.kind {
        sys::RDMA_CM_EVENT_ADDR_RESOLVED => {
            let i = qp.lock();
            // SAFETY: the connect's id, ours while it is in `pending` (checked under the lock).
            let failed = i.ud.pending.contains_key(&key) && unsafe { (dev.api.cm.resolve_route)(id.0, RESOLVE_MS) } != 0;
            drop(i);
            if failed {
                finish(qp, key, |_| CmEvent::Unreachable);
            }
        }
        sys::RDMA_CM_EVENT_ROUTE_RESOLVED => {
            let i = qp.lock();
            let Some(payload) = i.ud.pending.get(&key) else { return };
            let (sgid, _) = route_gids(id);
            let gid = if sgid == [0; 16] { ud::ip_gid(dev.address.ip()) } else { sgid };
            let pdata = ud::frame_request(payload, &Requester { qpn: qp.qp_num, lid: dev.ud.lid, gid }).unwrap_or_default();
            let mut p = sys::rdma_conn_param {
                private_data: pdata.as_ptr() as *const _,
                private_data_len: pdata.len() as u8,
                qp_num: qp.qp_num,
                ..Default::default()
            };
            // SAFETY: the connect's id (in `pending`, under the lock) and parameters that
            // live across the call.
            let rc = unsafe { (dev.api.cm.connect)(id.0, &mut p) };
            drop(i);
            if rc != 0 {
                dbg_log!(DbgType::ERROR, "verbs UD QP {}: rdma_connect: {}", qp.qp_num, std::io::Error::last_os_error());
                finish(qp, key, |_| CmEvent::Unreachable);
            }
        }
        sys::RDMA_CM_EVENT_ESTABLISHED => finish(qp, key, |id| match ev.ud {
            Some(u) => resolved(qp, id, u, ev.private_data),
            None => CmEvent::Unreachable,
        }),
        sys::RDMA_CM_EVENT_UNREACHABLE => finish(qp, key, |_| match ev.status {
            SIDR_REJECT => CmEvent::PeerRejected { private_data: cm::unframe(ev.private_data, PDATA_UD_REP) },
            SIDR_UNSUPPORTED => CmEvent::NonPeerRejected,
            s if s == -libc::ETIMEDOUT || s == libc::ETIMEDOUT => CmEvent::TimedOut,
            _ => CmEvent::Unreachable,
        }),
        sys::RDMA_CM_EVENT_REJECTED => finish(qp, key, |_| match ev.status {
            REJ_CONSUMER_DEFINED => CmEvent::PeerRejected { private_data: cm::unframe(ev.private_data, PDATA_UD_REP) },
            _ => CmEvent::NonPeerRejected,
        }),
        sys::RDMA_CM_EVENT_ADDR_ERROR | sys::RDMA_CM_EVENT_ROUTE_ERROR | sys::RDMA_CM_EVENT_CONNECT_ERROR => {
            let timed_out = ev.status == -libc::ETIMEDOUT || ev.status == libc::ETIMEDOUT;
            finish(qp, key, |_| if timed_out { CmEvent::TimedOut } else { CmEvent::Unreachable })
        }
        sys::RDMA_CM_EVENT_DEVICE_REMOVAL => finish(qp, key, |_| CmEvent::Broken),
        _ => {}
    }
}

/// The peer that answered connect `id`: an address handle from the address vector rdma_cm
/// gave (with the GRH RoCE needs when it has none), the peer QP's number and Q_Key.
fn resolved(qp: &Arc<VerbsQp>, id: Ptr<sys::rdma_cm_id>, u: cm::UdParam, private_data: Vec<u8>) -> CmEvent {
    let dev = &qp.dev;
    let (sgid, dgid) = route_gids(id);
    let (remote, _) = id_addresses(dev.api, id);
    let dgid = if dgid == [0; 16] { ud::ip_gid(remote.ip()) } else { dgid };
    dbg_log!(
        DbgType::PROVIDER_API,
        "verbs UD QP {}: peer QP {:#x} qkey {:#x}; rdma_cm's address vector: global {}, dlid {}, sgid index {}",
        qp.qp_num,
        u.qp_num,
        u.qkey,
        u.ah_attr.is_global,
        u.ah_attr.dlid,
        u.ah_attr.grh.sgid_index
    );
    let ah = ud::address_vector(dev, Some(u.ah_attr), sgid, dgid, 0)
        .ok_or(DevError::NoResources)
        .and_then(|a| VerbsAh::create(dev, ud::qp_pd(qp), a, u.qp_num, u.qkey));
    match ah {
        Ok(ah) => CmEvent::UdResolved {
            private_data: cm::unframe(private_data, PDATA_UD_REP),
            peer: UdPeer { ah, qpn: u.qp_num, addr: remote },
            passive: false,
        },
        Err(_) => CmEvent::Unreachable,
    }
}

/// Accepts UD request `p` (already marked answered) on UD QP `qp`: answers with our QP's
/// number, then `qp` reports the requester `who`, reached through a handle made from its
/// request. On failure the request is rejected.
pub(super) fn accept(p: &VerbsPending, qp: &VerbsQp, who: &Requester, private_data: &[u8]) -> Result<(), DevError> {
    let dev = &p.dev;
    let (sgid, _) = route_gids(p.id);
    // Never the trailer's GID or LID: a requester could name a third party's.
    let dgid = ud::requester_gid(dev.ud.ethernet, p.remote.ip());
    if dgid.is_none() {
        dbg_log!(
            DbgType::ERROR,
            "verbs UD QP {}: a UD request from {} on InfiniBand is refused: nothing vouches for its GID and LID",
            qp.qp_num,
            p.remote
        );
    }
    let ah = dgid
        .ok_or(DevError::NotSupported)
        .and_then(|dgid| ud::address_vector(dev, None, sgid, dgid, 0).ok_or(DevError::NoResources))
        .and_then(|a| VerbsAh::create(&qp.dev, ud::qp_pd(qp), a, who.qpn, sys::RDMA_UDP_QKEY));
    let answer = cm::frame(private_data, PDATA_UD_REP);
    let outcome = ah.and_then(|ah| {
        let mut param = sys::rdma_conn_param {
            private_data: answer.as_ptr() as *const _,
            private_data_len: answer.len() as u8,
            qp_num: qp.qp_num,
            ..Default::default()
        };
        // SAFETY: the request's id (ours: the request is answered once) and parameters that
        // live across the call.
        if unsafe { (dev.api.cm.accept)(p.id.0, &mut param) } != 0 {
            let e = std::io::Error::last_os_error();
            dbg_log!(DbgType::ERROR, "verbs UD QP {}: rdma_accept: {e}", qp.qp_num);
            return Err(dev_error(e.raw_os_error().unwrap_or(0)));
        }
        Ok(ah)
    });
    if outcome.is_err() {
        // SAFETY: the request's id, answered here (the reject is a SIDR REP too).
        unsafe { (dev.api.cm.reject)(p.id.0, std::ptr::null(), 0) };
    }
    release(dev, p.id.0 as usize);
    let ah = outcome?;
    dbg_log!(DbgType::PROVIDER_API, "verbs UD QP {}: accepted QP {:#x} at {}: {ah:?}", qp.qp_num, who.qpn, p.remote);
    qp.events.cm(CmEvent::UdResolved {
        private_data: p.private_data.clone(),
        peer: UdPeer { ah, qpn: who.qpn, addr: p.remote },
        passive: true,
    });
    Ok(())
}
