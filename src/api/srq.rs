//! Shared receive queues: create, free, post_recv, query, resize, set_lw.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::handles::{self, Kind, Tracked};
use crate::registry::{self};

fn srq(handle: DAT_SRQ_HANDLE) -> Result<Tracked, DAT_RETURN> {
    handles::check(handle, Kind::Srq, DAT_INVALID_HANDLE_SRQ)
}

extern "C" fn dat_srq_create(
    ia_handle: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    attr: *mut DAT_SRQ_ATTR,
    srq_out: *mut DAT_SRQ_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        handles::check(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
        Ok(dispatch::create(srq_out, Kind::Srq, ia.slot, ia.provider, |out| call!(ia.provider, srq_create_func, ia.raw, pz, attr, out)))
    })
}

extern "C" fn dat_srq_free(handle: DAT_SRQ_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = srq(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, srq_free_func, handle)))
    })
}

extern "C" fn dat_srq_post_recv(handle: DAT_SRQ_HANDLE, count: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE) -> DAT_RETURN {
    guard_try(|| Ok(call!(srq(handle)?.provider, srq_post_recv_func, handle, count, iov, cookie)))
}

extern "C" fn dat_srq_query(handle: DAT_SRQ_HANDLE, mask: DAT_SRQ_PARAM_MASK, param: *mut DAT_SRQ_PARAM) -> DAT_RETURN {
    guard_try(|| Ok(call!(srq(handle)?.provider, srq_query_func, handle, mask, param)))
}

extern "C" fn dat_srq_resize(handle: DAT_SRQ_HANDLE, max_recv_dtos: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| Ok(call!(srq(handle)?.provider, srq_resize_func, handle, max_recv_dtos)))
}

extern "C" fn dat_srq_set_lw(handle: DAT_SRQ_HANDLE, low_watermark: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| Ok(call!(srq(handle)?.provider, srq_set_lw_func, handle, low_watermark)))
}

crate::export_c!(dat_srq_create, dat_srq_free, dat_srq_post_recv, dat_srq_query, dat_srq_resize, dat_srq_set_lw);
