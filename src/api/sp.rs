//! Service points: public (`dat_psp_*`, including `dat_psp_create_any`) and reserved
//! (`dat_rsp_*`).

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::handles::{self, Kind};
use crate::registry::{self};

extern "C" fn dat_psp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    psp_out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        handles::check(evd, Kind::Evd, DAT_INVALID_HANDLE_EVD_CR)?;
        Ok(dispatch::create(psp_out, Kind::Psp, ia.slot, ia.provider, |out| {
            call!(ia.provider, psp_create_func, ia.raw, conn_qual, evd, flags, out)
        }))
    })
}

extern "C" fn dat_psp_create_any(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: *mut DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    psp_out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        handles::check(evd, Kind::Evd, DAT_INVALID_HANDLE_EVD_CR)?;
        Ok(dispatch::create(psp_out, Kind::Psp, ia.slot, ia.provider, |out| {
            call!(ia.provider, psp_create_any_func, ia.raw, conn_qual, evd, flags, out)
        }))
    })
}

extern "C" fn dat_psp_query(psp: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(psp, Kind::Psp, DAT_INVALID_HANDLE_PSP)?;
        Ok(call!(t.provider, psp_query_func, psp, mask, param))
    })
}

extern "C" fn dat_psp_free(psp: DAT_PSP_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(psp, Kind::Psp, DAT_INVALID_HANDLE_PSP)?;
        Ok(dispatch::free(psp, call!(t.provider, psp_free_func, psp)))
    })
}

extern "C" fn dat_rsp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    ep: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    rsp_out: *mut DAT_RSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        handles::check(ep, Kind::Ep, DAT_INVALID_HANDLE_EP)?;
        handles::check(evd, Kind::Evd, DAT_INVALID_HANDLE_EVD_CR)?;
        Ok(dispatch::create(rsp_out, Kind::Rsp, ia.slot, ia.provider, |out| {
            call!(ia.provider, rsp_create_func, ia.raw, conn_qual, ep, evd, out)
        }))
    })
}

extern "C" fn dat_rsp_query(rsp: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(rsp, Kind::Rsp, DAT_INVALID_HANDLE_RSP)?;
        Ok(call!(t.provider, rsp_query_func, rsp, mask, param))
    })
}

extern "C" fn dat_rsp_free(rsp: DAT_RSP_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(rsp, Kind::Rsp, DAT_INVALID_HANDLE_RSP)?;
        Ok(dispatch::free(rsp, call!(t.provider, rsp_free_func, rsp)))
    })
}

crate::export_c!(dat_psp_create, dat_psp_create_any, dat_psp_query, dat_psp_free, dat_rsp_create, dat_rsp_query, dat_rsp_free);
