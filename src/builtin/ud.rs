//! The unreliable datagram (UD) service of the IB extensions: a UD EP's connection events, its
//! sends (`dat_ib_post_send_ud`) and the records its events hand out, released with
//! `dat_ib_ud_ah_free` and `dat_ib_ud_cm_free`.
//!
//! "Connecting" a UD EP resolves a peer: both sides then get
//! `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` whose extension data names the peer
//! (`DAT_IB_ADDR_HANDLE {ah, qpn, ia_addr}`) and a context. `ah` and `context` are ids of
//! this EP's tables ([`super::ep::UdState`]), never pointers: an id is never reused, so a freed,
//! stale or forged one is refused rather than followed. An address handle is owned (and freed)
//! by the EP whose event handed it out, and any UD EP of the same PZ sends with it
//! (`Pz::ahs`), as with verbs address handles, which belong to the protection domain.

use core::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::dto::{self, Post, Vector};
use super::ep::{self, Ep, EpInner};
use super::events::Report;
use crate::abi::*;
use crate::device::{CmEvent, UdPeer, WrOp};
use crate::util::sockaddr;
use crate::util::sync::MutexExt;

/// The most address handles, and the most connection records, a UD EP holds unfreed. A
/// resolution beyond them is reported as `DAT_IB_UD_CONNECTION_ERROR_EVENT`.
pub const HELD_MAX: usize = 4096;

/// The next id of an address handle or connection record (process-wide, never reused).
static NEXT_ID: AtomicU64 = AtomicU64::new(0x5344_0000_0001);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The extension data of a UD connection event.
fn extension_data(ev: &mut DAT_EVENT, kind: DAT_IB_EXT_TYPE, status: DAT_IB_STATUS, peer: Option<(u64, &UdPeer)>, context: u64) {
    let mut data = DAT_IB_EXTENSION_EVENT_DATA { r#type: kind, status, ..Default::default() };
    if let Some((ah, p)) = peer {
        // SAFETY: sockaddr_in6 is plain data; all-zero is valid.
        let mut ia_addr: DAT_SOCK_ADDR6 = unsafe { core::mem::zeroed() };
        let storage = sockaddr::to_c(p.addr);
        let n = core::mem::size_of::<DAT_SOCK_ADDR6>();
        // SAFETY: both are plain data, and sockaddr_storage is larger than sockaddr_in6; an IPv4
        // address fits in the first bytes, as in dapl's events (its family says which it is).
        unsafe { core::ptr::copy_nonoverlapping(&storage as *const _ as *const u8, &mut ia_addr as *mut _ as *mut u8, n) };
        data.u.remote_ah = DAT_IB_ADDR_HANDLE { ah: ah as usize as *mut c_void, qpn: p.qpn, ia_addr };
    }
    data.context = DAT_CONTEXT { as_64: context };
    // SAFETY: the extension data is 64 bytes, exactly the event's extension area (checked by
    // the layout assertions of both types).
    unsafe { core::ptr::write_unaligned(ev.event_extension_data.as_mut_ptr() as *mut DAT_IB_EXTENSION_EVENT_DATA, data) };
}

/// A connection event of a UD EP's QP. Resolutions and their failures leave the EP's state
/// alone (a UD EP resolves any number of peers); only the end of the QP disconnects it.
/// Returns the event back when it is not one of UD's own.
pub fn on_cm(ep: &Arc<Ep>, ev: CmEvent) -> Option<CmEvent> {
    let (number, kind, peer, pdata) = match ev {
        CmEvent::UdResolved { private_data, peer, passive } => {
            let kind = if passive { DAT_IB_UD_PASSIVE_REMOTE_AH } else { DAT_IB_UD_REMOTE_AH };
            (DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED, kind, Some(peer), private_data)
        }
        CmEvent::PeerRejected { private_data } => (DAT_IB_UD_CONNECTION_REJECT_EVENT, DAT_IB_UD_CONNECT_REJECT, None, private_data),
        CmEvent::NonPeerRejected | CmEvent::Unreachable | CmEvent::TimedOut | CmEvent::Broken | CmEvent::AcceptCompletionError => {
            (DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR, None, Vec::new())
        }
        other => return Some(other),
    };
    let mut e = DAT_EVENT { event_number: number, ..Default::default() };
    let (evd, ids) = {
        let mut i = ep.lock();
        let mut ids = None;
        let pdata: Box<[u8]> = pdata.into_boxed_slice();
        let (ptr, len) = if pdata.is_empty() { (core::ptr::null_mut(), 0) } else { (pdata.as_ptr() as *mut c_void, pdata.len()) };
        match peer {
            Some(p) if i.ud().ahs.len() < HELD_MAX && i.ud().contexts.len() < HELD_MAX => {
                let (ah, context) = (next_id(), next_id());
                extension_data(&mut e, kind, DAT_OP_SUCCESS, Some((ah, &p)), context);
                if let Some(pz) = i.pz() {
                    pz.ahs.locked().insert(ah, p.ah.clone());
                }
                i.ud().ahs.insert(ah, p);
                // The record keeps the event's private data alive until dat_ib_ud_cm_free.
                i.ud().contexts.insert(context, pdata);
                ids = Some((ah, context));
                i.ud_connected();
            }
            Some(_) => {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "UD EP {:#x}: {HELD_MAX} address handles or records unfreed; a resolution is refused",
                    ep.handle
                );
                e.event_number = DAT_IB_UD_CONNECTION_ERROR_EVENT;
                extension_data(&mut e, DAT_IB_UD_CONNECT_ERROR, DAT_IB_OP_ERR, None, 0);
            }
            None => {
                extension_data(&mut e, kind, DAT_IB_OP_ERR, None, 0);
                i.keep_private_data(pdata);
            }
        }
        // An error event carries no private data (a refused resolution's is already dropped).
        let ptr = if e.event_number == DAT_IB_UD_CONNECTION_ERROR_EVENT { core::ptr::null_mut() } else { ptr };
        let len = if ptr.is_null() { 0 } else { len };
        e.event_data.connect_event_data =
            DAT_CONNECTION_EVENT_DATA { ep_handle: ep.handle as DAT_EP_HANDLE, private_data_size: len as DAT_COUNT, private_data: ptr };
        (i.connect_evd().cloned(), ids)
    };
    let posted = evd.is_some_and(|evd| evd.post(e));
    if !posted {
        // Nobody can free what nobody was told of.
        if let Some((ah, context)) = ids {
            let mut i = ep.lock();
            forget_ah(&mut i, ah);
            i.ud().contexts.remove(&context);
        }
    }
    None
}

/// A UD EP, or `DAT_MODEL_NOT_SUPPORTED` for an EP of another service.
fn ud_ep(handle: DAT_EP_HANDLE) -> Result<Arc<Ep>, DAT_RETURN> {
    let ep = ep::ep(handle)?;
    if !ep.lock().is_ud() {
        return Err(dat_error(DAT_MODEL_NOT_SUPPORTED, 0));
    }
    Ok(ep)
}

/// Reads the `ah` id of a consumer's `DAT_IB_ADDR_HANDLE` (argument `arg`).
fn ah_arg(ah: *const DAT_IB_ADDR_HANDLE, arg: DAT_RETURN) -> Result<u64, DAT_RETURN> {
    if ah.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    // SAFETY: a non-NULL consumer DAT_IB_ADDR_HANDLE; only its first member is read.
    Ok(unsafe { core::ptr::addr_of!((*ah).ah).read_unaligned() } as usize as u64)
}

/// `dat_ib_post_send_ud`: a datagram to the peer `ah` names (an address handle of this EP).
pub fn post_send(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    ah: *const DAT_IB_ADDR_HANDLE,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ud_ep(handle)?;
    let id = ah_arg(ah, DAT_INVALID_ARG4)?;
    // Any UD EP of the PZ the address handle was resolved in sends with it.
    let pz = ep.lock().pz().cloned();
    let dest = pz.and_then(|pz| pz.ahs.locked().get(&id).cloned()).ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4))?;
    dto::post(
        handle,
        count,
        iov,
        cookie,
        flags,
        Post { op: WrOp::Send, report: Report::Extension(DAT_IB_UD_SEND), remote: None, ah: Some(dest), max_iov: Vector::Request },
    )
}

/// Frees address handle `id` of the EP (from its PZ's index too); whether it was the EP's.
fn forget_ah(i: &mut EpInner, id: u64) -> bool {
    let owned = i.ud().ahs.remove(&id).is_some();
    if let (true, Some(pz)) = (owned, i.pz()) {
        pz.ahs.locked().remove(&id);
    }
    owned
}

/// `dat_ib_ud_ah_free`: the address handle goes (a send still posted with it keeps the
/// device's handle until it completes).
pub fn ah_free(handle: DAT_EP_HANDLE, ah: *const DAT_IB_ADDR_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ud_ep(handle)?;
    let id = ah_arg(ah, DAT_INVALID_ARG3)?;
    let freed = forget_ah(&mut ep.lock(), id);
    freed.then_some(DAT_SUCCESS).ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3))
}

/// `dat_ib_ud_cm_free`: the connection record goes, and with it the private data its event
/// pointed at.
pub fn cm_free(handle: DAT_EP_HANDLE, context: u64) -> Result<DAT_RETURN, DAT_RETURN> {
    let ep = ud_ep(handle)?;
    let freed = ep.lock().ud().contexts.remove(&context);
    freed.map(|_| DAT_SUCCESS).ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3))
}
