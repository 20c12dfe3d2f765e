//! Connection requests: `dat_cr_query`, `dat_cr_accept`, `dat_cr_reject`, `dat_cr_handoff`.
//! A CR handle arrives in a connection request event and is consumed by accept, reject or
//! handoff.

use core::ffi::c_void;

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::handles::{self, Kind, Tracked};

fn cr(handle: DAT_CR_HANDLE) -> Result<Tracked, DAT_RETURN> {
    handles::check(handle, Kind::Cr, DAT_INVALID_HANDLE_CR)
}

extern "C" fn dat_cr_query(handle: DAT_CR_HANDLE, mask: DAT_CR_PARAM_MASK, param: *mut DAT_CR_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = cr(handle)?;
        let status = call!(t.provider, cr_query_func, handle, mask, param);
        if status == DAT_SUCCESS && !param.is_null() && mask & DAT_CR_FIELD_LOCAL_EP_HANDLE != 0 {
            // A provider-created endpoint (DAT_PSP_PROVIDER_FLAG) first shows up here.
            // SAFETY: the provider filled the consumer's param on success.
            let local_ep = unsafe { (*param).local_ep_handle };
            handles::insert_if_new(local_ep, Kind::Ep, t.ia, t.provider);
        }
        Ok(status)
    })
}

extern "C" fn dat_cr_accept(
    handle: DAT_CR_HANDLE,
    ep: DAT_EP_HANDLE,
    private_data_size: DAT_COUNT,
    private_data: *const c_void,
) -> DAT_RETURN {
    guard_try(|| {
        let t = cr(handle)?;
        handles::check_optional(ep, Kind::Ep, DAT_INVALID_HANDLE_EP)?;
        Ok(dispatch::free(handle, call!(t.provider, cr_accept_func, handle, ep, private_data_size, private_data)))
    })
}

extern "C" fn dat_cr_reject(handle: DAT_CR_HANDLE, private_data_size: DAT_COUNT, private_data: *const c_void) -> DAT_RETURN {
    guard_try(|| {
        let t = cr(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, cr_reject_func, handle, private_data_size, private_data)))
    })
}

extern "C" fn dat_cr_handoff(handle: DAT_CR_HANDLE, conn_qual: DAT_CONN_QUAL) -> DAT_RETURN {
    guard_try(|| {
        let t = cr(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, cr_handoff_func, handle, conn_qual)))
    })
}

crate::export_c!(dat_cr_query, dat_cr_accept, dat_cr_reject, dat_cr_handoff);
