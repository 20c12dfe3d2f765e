//! RMR semantics (memory windows): create in a PZ, query, free. A window is bound to one EP
//! at a time by `dat_rmr_bind`, which needs a connected EP and comes with the data path.

use core::ptr::addr_of_mut;
use std::sync::{Arc, Mutex};

use super::ia::Ia;
use super::lmr::Lmr;
use super::pz::{self, Pz};
use super::table::{self, Obj};
use super::put;
use crate::abi::*;
use crate::device::{DevError, Mw};
use crate::lookup;

/// A window's current binding.
#[derive(Clone)]
pub struct Binding {
    pub lmr: Arc<Lmr>,
    pub triplet: DAT_LMR_TRIPLET,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub va_type: DAT_VA_TYPE,
    pub rmr_context: DAT_RMR_CONTEXT,
    /// The EP handle the window is bound to.
    pub ep: usize,
}

pub struct Rmr {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub pz: Arc<Pz>,
    pub mw: Mw,
    pub binding: Mutex<Option<Binding>>,
    pub context: Mutex<u64>,
}

pub fn rmr(handle: DAT_RMR_HANDLE) -> Result<Arc<Rmr>, DAT_RETURN> {
    lookup!(handle, Rmr, DAT_INVALID_HANDLE_RMR)
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
    table::insert(handle, Obj::Rmr(Arc::new(Rmr { handle, ia, pz, mw, binding: Mutex::new(None), context: Mutex::new(0) })));
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_RMR_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_RMR_HANDLE, mask: DAT_RMR_PARAM_MASK, param: *mut DAT_RMR_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let r = rmr(handle)?;
    if mask & !DAT_RMR_FIELD_ALL != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    if param.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    let binding = r.binding.lock().unwrap_or_else(|e| e.into_inner()).clone();
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
    if let Some(b) = r.binding.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.lmr.unbind();
    }
    r.ia.dev.dealloc_mw(&r.mw);
    r.pz.release();
}
