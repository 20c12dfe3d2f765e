//! Endpoints: create (with or without SRQ), query, modify, connect, dup_connect, disconnect,
//! the four post calls, get_status, free, reset, recv_query, set_watermark.

use core::ffi::c_void;

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::builtin::{self, dto};
use crate::ffi::{guard_try, guard_try_local};
use crate::registry::handles::{self, Kind, Tracked};
use crate::registry::{self};

fn ep(handle: DAT_EP_HANDLE) -> Result<Tracked, DAT_RETURN> {
    handles::check(handle, Kind::Ep, DAT_INVALID_HANDLE_EP)
}

/// The optional PZ and EVD arguments of the create calls: NULL, or a live handle of the type.
fn check_ep_resources(pz: DAT_PZ_HANDLE, recv: DAT_EVD_HANDLE, request: DAT_EVD_HANDLE, connect: DAT_EVD_HANDLE) -> Result<(), DAT_RETURN> {
    handles::check_optional(pz, Kind::Pz, DAT_INVALID_HANDLE_PZ)?;
    handles::check_optional(recv, Kind::Evd, DAT_INVALID_HANDLE_EVD_RECV)?;
    handles::check_optional(request, Kind::Evd, DAT_INVALID_HANDLE_EVD_REQUEST)?;
    handles::check_optional(connect, Kind::Evd, DAT_INVALID_HANDLE_EVD_CONN)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) extern "C" fn dat_ep_create(
    ia_handle: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep_out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        check_ep_resources(pz, recv_evd, request_evd, connect_evd)?;
        Ok(dispatch::create(ep_out, Kind::Ep, ia.slot, ia.provider, |out| {
            call!(ia.provider, ep_create_func, ia.raw, pz, recv_evd, request_evd, connect_evd, attr, out)
        }))
    })
}

#[allow(clippy::too_many_arguments)]
extern "C" fn dat_ep_create_with_srq(
    ia_handle: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    srq: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep_out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        check_ep_resources(pz, recv_evd, request_evd, connect_evd)?;
        handles::check(srq, Kind::Srq, DAT_INVALID_HANDLE_SRQ)?;
        Ok(dispatch::create(ep_out, Kind::Ep, ia.slot, ia.provider, |out| {
            call!(ia.provider, ep_create_with_srq_func, ia.raw, pz, recv_evd, request_evd, connect_evd, srq, attr, out)
        }))
    })
}

extern "C" fn dat_ep_query(handle: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *mut DAT_EP_PARAM) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_query_func, handle, mask, param)))
}

extern "C" fn dat_ep_modify(handle: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *const DAT_EP_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = ep(handle)?;
        if !param.is_null() {
            // SAFETY: a non-NULL param is the consumer's DAT_EP_PARAM; only the handle fields
            // the mask selects are read, to check them.
            let p = unsafe { &*param };
            let handle_fields = [
                (DAT_EP_FIELD_PZ_HANDLE, p.pz_handle, Kind::Pz, DAT_INVALID_HANDLE_PZ),
                (DAT_EP_FIELD_RECV_EVD_HANDLE, p.recv_evd_handle, Kind::Evd, DAT_INVALID_HANDLE_EVD_RECV),
                (DAT_EP_FIELD_REQUEST_EVD_HANDLE, p.request_evd_handle, Kind::Evd, DAT_INVALID_HANDLE_EVD_REQUEST),
                (DAT_EP_FIELD_CONNECT_EVD_HANDLE, p.connect_evd_handle, Kind::Evd, DAT_INVALID_HANDLE_EVD_CONN),
                (DAT_EP_FIELD_SRQ_HANDLE, p.srq_handle, Kind::Srq, DAT_INVALID_HANDLE_SRQ),
            ];
            for (bit, h, kind, subtype) in handle_fields {
                if mask & bit != 0 {
                    handles::check_optional(h, kind, subtype)?;
                }
            }
        }
        Ok(call!(t.provider, ep_modify_func, handle, mask, param))
    })
}

#[allow(clippy::too_many_arguments)]
extern "C" fn dat_ep_connect(
    handle: DAT_EP_HANDLE,
    remote_address: DAT_IA_ADDRESS_PTR,
    remote_conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    private_data_size: DAT_COUNT,
    private_data: *const c_void,
    qos: DAT_QOS,
    flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    guard_try(|| {
        let t = ep(handle)?;
        Ok(call!(
            t.provider,
            ep_connect_func,
            handle,
            remote_address,
            remote_conn_qual,
            timeout,
            private_data_size,
            private_data,
            qos,
            flags
        ))
    })
}

extern "C" fn dat_ep_dup_connect(
    handle: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    private_data_size: DAT_COUNT,
    private_data: *const c_void,
    qos: DAT_QOS,
) -> DAT_RETURN {
    guard_try(|| {
        let t = ep(handle)?;
        ep(dup)?;
        Ok(call!(t.provider, ep_dup_connect_func, handle, dup, timeout, private_data_size, private_data, qos))
    })
}

extern "C" fn dat_ep_disconnect(handle: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_disconnect_func, handle, flags)))
}

pub(super) extern "C" fn dat_ep_post_send(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try_local(|local| {
        if let Some(ep) = builtin::ep::pinned(&local, handle) {
            return dto::post_send_on(&ep, count, iov, cookie, flags);
        }
        Ok(call!(ep(handle)?.provider, ep_post_send_func, handle, count, iov, cookie, flags))
    })
}

extern "C" fn dat_ep_post_recv(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try_local(|local| {
        if let Some(ep) = builtin::ep::pinned(&local, handle) {
            return dto::post_recv_on(&ep, count, iov, cookie, flags);
        }
        Ok(call!(ep(handle)?.provider, ep_post_recv_func, handle, count, iov, cookie, flags))
    })
}

extern "C" fn dat_ep_post_rdma_read(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try_local(|local| {
        if let Some(ep) = builtin::ep::pinned(&local, handle) {
            return dto::post_rdma_read_on(&ep, count, iov, cookie, remote, flags);
        }
        Ok(call!(ep(handle)?.provider, ep_post_rdma_read_func, handle, count, iov, cookie, remote, flags))
    })
}

extern "C" fn dat_ep_post_rdma_write(
    handle: DAT_EP_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try_local(|local| {
        if let Some(ep) = builtin::ep::pinned(&local, handle) {
            return dto::post_rdma_write_on(&ep, count, iov, cookie, remote, flags);
        }
        Ok(call!(ep(handle)?.provider, ep_post_rdma_write_func, handle, count, iov, cookie, remote, flags))
    })
}

extern "C" fn dat_ep_get_status(
    handle: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    request_idle: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_get_status_func, handle, state, recv_idle, request_idle)))
}

pub(super) extern "C" fn dat_ep_free(handle: DAT_EP_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = ep(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, ep_free_func, handle)))
    })
}

extern "C" fn dat_ep_reset(handle: DAT_EP_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_reset_func, handle)))
}

extern "C" fn dat_ep_recv_query(handle: DAT_EP_HANDLE, allocated: *mut DAT_COUNT, span: *mut DAT_COUNT) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_recv_query_func, handle, allocated, span)))
}

extern "C" fn dat_ep_set_watermark(handle: DAT_EP_HANDLE, soft_high: DAT_COUNT, hard_high: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| Ok(call!(ep(handle)?.provider, ep_set_watermark_func, handle, soft_high, hard_high)))
}

crate::export_c!(
    dat_ep_create,
    dat_ep_create_with_srq,
    dat_ep_query,
    dat_ep_modify,
    dat_ep_connect,
    dat_ep_dup_connect,
    dat_ep_disconnect,
    dat_ep_post_send,
    dat_ep_post_recv,
    dat_ep_post_rdma_read,
    dat_ep_post_rdma_write,
    dat_ep_get_status,
    dat_ep_free,
    dat_ep_reset,
    dat_ep_recv_query,
    dat_ep_set_watermark,
);
