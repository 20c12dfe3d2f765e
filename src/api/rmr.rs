//! Remote memory regions (memory windows): `dat_rmr_create`, `dat_rmr_query`,
//! `dat_rmr_bind`, `dat_rmr_free`.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::{handles, handles::Kind};

extern "C" fn dat_rmr_create(pz: DAT_PZ_HANDLE, rmr: *mut DAT_RMR_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
        Ok(dispatch::create(rmr, Kind::Rmr, t.ia, t.provider, |out| call!(t.provider, rmr_create_func, pz, out)))
    })
}

extern "C" fn dat_rmr_query(rmr: DAT_RMR_HANDLE, mask: DAT_RMR_PARAM_MASK, param: *mut DAT_RMR_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(rmr, Kind::Rmr, DAT_INVALID_HANDLE_RMR)?;
        Ok(call!(t.provider, rmr_query_func, rmr, mask, param))
    })
}

#[allow(clippy::too_many_arguments)]
extern "C" fn dat_rmr_bind(
    rmr: DAT_RMR_HANDLE,
    lmr: DAT_LMR_HANDLE,
    lmr_triplet: *const DAT_LMR_TRIPLET,
    mem_priv: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    ep: DAT_EP_HANDLE,
    user_cookie: DAT_RMR_COOKIE,
    completion_flags: DAT_COMPLETION_FLAGS,
    rmr_context: *mut DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(rmr, Kind::Rmr, DAT_INVALID_HANDLE_RMR)?;
        // An unbind may name no LMR.
        handles::check_optional(lmr, Kind::Lmr, DAT_INVALID_HANDLE_LMR)?;
        handles::check(ep, Kind::Ep, DAT_INVALID_HANDLE_EP)?;
        Ok(call!(t.provider, rmr_bind_func, rmr, lmr, lmr_triplet, mem_priv, va_type, ep, user_cookie, completion_flags, rmr_context))
    })
}

extern "C" fn dat_rmr_free(rmr: DAT_RMR_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(rmr, Kind::Rmr, DAT_INVALID_HANDLE_RMR)?;
        Ok(dispatch::free(rmr, call!(t.provider, rmr_free_func, rmr)))
    })
}

crate::export_c!(dat_rmr_create, dat_rmr_query, dat_rmr_bind, dat_rmr_free);
