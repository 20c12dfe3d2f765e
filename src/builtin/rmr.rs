//! RMR semantics (memory windows): create in a PZ, query, free. A window is bound to one EP
//! at a time by `dat_rmr_bind`, which needs a connected EP and comes with the data path.

use core::ptr::addr_of_mut;
use std::sync::{Arc, Mutex};

use super::ia::Ia;
use super::lmr::Lmr;
use super::put;
use super::pz::{self, Pz};
use super::table::{self, Object};
use crate::abi::*;
use crate::device::{DevError, Mw};
use crate::util::sync::MutexExt;

/// A window's current binding.
#[derive(Clone)]
pub struct Binding {
    pub lmr: Arc<Lmr>,
    pub triplet: DAT_LMR_TRIPLET,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub va_type: DAT_VA_TYPE,
    pub rmr_context: DAT_RMR_CONTEXT,
}

pub struct Rmr {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub pz: Arc<Pz>,
    pub mw: Mw,
    pub binding: Mutex<Option<Binding>>,
    pub context: Mutex<u64>,
}

impl Object for Rmr {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_RMR
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

pub fn rmr(handle: DAT_RMR_HANDLE) -> Result<Arc<Rmr>, DAT_RETURN> {
    table::lookup::<Rmr>(handle, DAT_INVALID_HANDLE_RMR)
}

pub fn create(pz_handle: DAT_PZ_HANDLE, out: *mut DAT_RMR_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let pz = pz::pz(pz_handle)?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    pz.acquire()?;
    let mw = match pz.ia.dev.alloc_mw(pz.pd) {
        Ok(mw) => mw,
        Err(e) => {
            pz.release();
            return Err(match e {
                DevError::NotSupported => dat_error(DAT_MODEL_NOT_SUPPORTED, 0),
                _ => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION),
            });
        }
    };
    let ia = pz.ia.clone();
    let handle = table::reserve(ia.provider());
    table::insert(handle, Arc::new(Rmr { handle, ia, pz, mw, binding: Mutex::new(None), context: Mutex::new(0) }));
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_RMR_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_RMR_HANDLE, mask: DAT_RMR_PARAM_MASK, param: *mut DAT_RMR_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = rmr(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_RMR_FIELD_ALL), param)?;
    let binding = r.binding.locked().clone();
    if mask & DAT_RMR_FIELD_LMR_TRIPLET != 0 && binding.is_none() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let p = param;
    // SAFETY: the consumer's non-NULL DAT_RMR_PARAM; only the fields asked for are written.
    unsafe {
        let set = |bit: DAT_RMR_PARAM_MASK| mask & bit != 0;
        if set(DAT_RMR_FIELD_IA_HANDLE) {
            addr_of_mut!((*p).ia_handle).write(r.ia.consumer_handle());
        }
        if set(DAT_RMR_FIELD_PZ_HANDLE) {
            addr_of_mut!((*p).pz_handle).write(r.pz.handle as DAT_PZ_HANDLE);
        }
        if let Some(b) = &binding {
            if set(DAT_RMR_FIELD_LMR_TRIPLET) {
                addr_of_mut!((*p).lmr_triplet).write(b.triplet);
            }
        }
        if set(DAT_RMR_FIELD_MEM_PRIV) {
            addr_of_mut!((*p).mem_priv).write(binding.as_ref().map_or(0, |b| b.mem_priv));
        }
        if set(DAT_RMR_FIELD_RMR_CONTEXT) {
            addr_of_mut!((*p).rmr_context).write(binding.as_ref().map_or(0, |b| b.rmr_context));
        }
        if set(DAT_RMR_FIELD_RMR_SCOPE) {
            addr_of_mut!((*p).rmr_scope).write(DAT_RMR_SCOPE_EP);
        }
        if set(DAT_RMR_FIELD_VA_TYPE) {
            addr_of_mut!((*p).va_type).write(binding.as_ref().map_or(DAT_VA_TYPE_VA, |b| b.va_type));
        }
    }
    Ok(DAT_SUCCESS)
}

/// Frees a window, bound or not (an implicit unbind).
pub fn free(handle: DAT_RMR_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = rmr(handle)?;
    if table::remove(r.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR));
    }
    destroy(&r);
    Ok(DAT_SUCCESS)
}

pub fn destroy(r: &Rmr) {
    if let Some(b) = r.binding.locked().take() {
        b.lmr.unbind();
    }
    r.ia.dev.dealloc_mw(&r.mw);
    r.pz.release();
}

/// `dat_rmr_bind`: binds the window over part of an LMR for one connected EP (a non-zero
/// segment length), or unbinds it (zero). The window gets a fresh rmr_context on every bind;
/// the old one stops working at once. The bind takes effect when the call returns; its
/// completion event follows, on the EP's request EVD, those of the requests posted before it.
#[allow(clippy::too_many_arguments)]
pub fn bind(
    handle: DAT_RMR_HANDLE,
    lmr_handle: DAT_LMR_HANDLE,
    triplet: *const DAT_LMR_TRIPLET,
    mem_priv: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    ep_handle: DAT_EP_HANDLE,
    cookie: DAT_RMR_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    context_out: *mut DAT_RMR_CONTEXT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = rmr(handle)?;
    let ep = super::ep::ep(ep_handle)?;
    if triplet.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    // SAFETY: the consumer's triplet.
    let t = unsafe { triplet.read() };
    if flags & !super::ep::COMPLETION_FLAGS != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8));
    }
    let (qp, ep_pz, state, serial) = {
        let i = ep.lock();
        (i.qp().cloned(), i.pz().cloned(), i.state(), i.send_queue().map_or(0, |q| q.serial()))
    };
    if state != DAT_EP_STATE_CONNECTED {
        return Err(dat_error(DAT_INVALID_STATE, super::ep::ep_state_subtype(state)));
    }
    let qp = qp.ok_or(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY))?;
    if ep_pz.as_ref().is_none_or(|p| !Arc::ptr_eq(p, &r.pz)) {
        return Err(dat_error(DAT_PROTECTION_VIOLATION, 0));
    }
    let new_binding = if t.segment_length == 0 {
        None
    } else {
        // Counted as bound when looked up (so that its free, once this returns, answers
        // DAT_INVALID_STATE), and given back if a check below refuses the bind.
        let l = super::lmr::lmr_bound(lmr_handle)?;
        let checks = || {
            if !Arc::ptr_eq(&l.pz, &r.pz) {
                return Err(dat_error(DAT_PROTECTION_VIOLATION, 0));
            }
            // Any valid privilege bits may be given (DAT_MEM_PRIV_ALL_FLAG is common); a window
            // grants only the remote ones.
            if mem_priv & !super::lmr::PRIV_VALID != 0 {
                return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
            }
            if !matches!(va_type, DAT_VA_TYPE_VA | DAT_VA_TYPE_ZB) {
                return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
            }
            if !l.covers(t.virtual_address, u64::from(t.segment_length)) || t.lmr_context != l.lmr_context() {
                return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
            }
            // A window grants no more than its LMR: remote write needs local write.
            let writes = mem_priv & (DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC) != 0;
            if writes && l.privileges & DAT_MEM_PRIV_LOCAL_WRITE_FLAG == 0 {
                return Err(dat_error(DAT_PRIVILEGES_VIOLATION, 0));
            }
            Ok(())
        };
        if let Err(e) = checks() {
            l.unbind();
            return Err(e);
        }
        Some(l)
    };
    // The bind completes as a request of the EP, in order with what was posted before it.
    let added = ep
        .lock()
        .add_bind(serial, super::events::PendingSend { cookie, flags, report: super::events::Report::Bind { rmr: r.handle, cookie } });
    let Ok(wr_id) = added else {
        if let Some(l) = &new_binding {
            l.unbind();
        }
        return Err(dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    };
    let mut slot = r.binding.locked();
    let rkey = match &new_binding {
        Some(l) => match qp.bind_mw(
            wr_id,
            &r.mw,
            &l.reg.mr,
            t.virtual_address,
            u64::from(t.segment_length),
            crate::device::Access::from_bits_retain(mem_priv) & crate::device::Access::REMOTE,
            va_type == DAT_VA_TYPE_ZB,
        ) {
            Ok(k) => k,
            Err(_) => {
                l.unbind();
                ep.lock().take_send(serial, wr_id);
                return Err(dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
            }
        },
        None => {
            qp.unbind_mw(wr_id, &r.mw);
            0
        }
    };
    if let Some(old) = slot.take() {
        old.lmr.unbind();
    }
    *slot = new_binding.map(|lmr| Binding { lmr, triplet: t, mem_priv, va_type, rmr_context: rkey });
    drop(slot);
    if !context_out.is_null() {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { put(context_out, rkey) };
    }
    Ok(DAT_SUCCESS)
}

/// A peer's send-with-invalidate revoked window `rkey`: the RMR is unbound.
pub fn invalidated(ia: &Arc<Ia>, rkey: u32) {
    for (_, o) in table::owned_by(ia.handle) {
        if let Some(r) = table::downcast::<Rmr>(o) {
            let mut b = r.binding.locked();
            if b.as_ref().is_some_and(|b| b.rmr_context == rkey) {
                if let Some(old) = b.take() {
                    old.lmr.unbind();
                }
            }
        }
    }
}
