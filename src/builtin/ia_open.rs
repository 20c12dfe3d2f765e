//! Opening an IA of a built-in provider (`ia_open_func`): the provider found by name, its
//! device, and the IA's async EVD, made here or shared. It sits above the EVDs, which the IA
//! itself (`ia.rs`, below every object that names it) does not know.

use core::ffi::c_char;
use std::ffi::CStr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::evd::{self, Evd};
use super::ia::Ia;
use super::{provider, put, table};
use crate::abi::*;

/// `ia_open_func` of a built-in provider.
pub fn open(
    name: *const c_char,
    thread_safe: bool,
    qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    out: *mut DAT_IA_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    if name.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    }
    if async_evd.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    // SAFETY: the registry passes the consumer's name, already checked to be a short C string.
    let name = unsafe { CStr::from_ptr(name) };
    let b = provider::find(name.to_bytes()).ok_or(dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED))?;
    // SAFETY: checked non-NULL; the INOUT async EVD argument.
    let given = unsafe { async_evd.read() };
    let dev = b.device()?;
    if dev.cache_registrations() {
        // Start the registration cache's unmap monitor now, before the consumer maps and
        // unmaps memory, so that its thread's stack never lands on memory later registered.
        let _ = crate::builtin::mr::cache_stats();
    }
    let given_evd = if given.is_null() {
        if qlen <= 0 {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        }
        None
    } else if given as usize == DAT_EVD_OUT_OF_SCOPE {
        // The consumer wants no async EVD for this IA.
        Some(None)
    } else if given as usize == DAT_EVD_ASYNC_EXISTS {
        // Share the async EVD of another open IA of this provider, if there is one.
        evd::async_evd_of(b).map(Some)
    } else {
        let e: Arc<Evd> = table::lookup(given, DAT_INVALID_HANDLE_EVD_ASYNC)?;
        if e.flags & DAT_EVD_ASYNC_FLAG == 0 || !core::ptr::eq(e.ia.builtin, b) {
            return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC));
        }
        Some(Some(e))
    };
    // The IA's own listening (the soft device binds its port): a port that cannot be had is
    // a resource this IA lacks (the device says why under DAT_DBG_TYPE).
    let port = dev.open_ia().map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_DEVICE))?;
    let handle = table::reserve(b.table(thread_safe));
    let async_handle = given_evd.as_ref().and_then(|e| e.as_ref()).map_or(0, |e| e.handle);
    let ia = Arc::new(Ia::new(handle, b, thread_safe, dev, port, async_handle, given_evd.is_none()));
    table::insert(handle, ia.clone());
    if given_evd.is_none() {
        match evd::create_object(&ia, qlen, None, DAT_EVD_ASYNC_FLAG) {
            Ok(e) => ia.async_evd.store(e.handle, Ordering::SeqCst),
            Err(e) => {
                table::remove(handle);
                return Err(e);
            }
        }
    }
    // SAFETY: both checked non-NULL above.
    unsafe {
        put(async_evd, ia.async_evd.load(Ordering::SeqCst) as DAT_EVD_HANDLE);
        put(out, handle as DAT_IA_HANDLE);
    }
    Ok(DAT_SUCCESS)
}
