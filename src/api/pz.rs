//! Protection zones: `dat_pz_create`, `dat_pz_query`, `dat_pz_free`.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::{self, handles, handles::Kind};

pub(super) extern "C" fn dat_pz_create(ia_handle: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        Ok(dispatch::create(pz, Kind::Pz, ia.slot, ia.provider, |out| call!(ia.provider, pz_create_func, ia.raw, out)))
    })
}

extern "C" fn dat_pz_query(pz: DAT_PZ_HANDLE, mask: DAT_PZ_PARAM_MASK, param: *mut DAT_PZ_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
        Ok(call!(t.provider, pz_query_func, pz, mask, param))
    })
}

extern "C" fn dat_pz_free(pz: DAT_PZ_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = handles::check(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
        Ok(dispatch::free(pz, call!(t.provider, pz_free_func, pz)))
    })
}

crate::export_c!(dat_pz_create, dat_pz_query, dat_pz_free);
