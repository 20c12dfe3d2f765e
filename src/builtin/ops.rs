//! The `DAT_PROVIDER` table of the built-in providers: one `extern "C"` function per entry,
//! each a guarded call into the built-in layer. Entries it does not offer yet stay NULL, which
//! libdat2 reports as DAT_NOT_IMPLEMENTED.

use core::ffi::{c_char, c_void};
use std::ffi::CStr;
use std::sync::Arc;

use super::table::{self, Object};
use super::{cm, cno, cr, dto, ep, evd, ext, ia, ia_open, lmr, provider, pz, rmr, sp, srq};
use crate::abi::*;
use crate::device::Driver;
use crate::ffi::guard_try;
use crate::util::sync::MutexExt;

/// The `DAT_PROVIDER` table of the built-in provider `name` on `driver` (created on first use
/// and kept for the life of the process), for the registry to register as it registers a C
/// provider's. `params` empty gives the driver's default.
pub fn init(driver: &'static dyn Driver, name: &[u8], thread_safe: bool, params: &CStr) -> *const DAT_PROVIDER {
    let params = driver.params_or_default(&params.to_string_lossy());
    provider::instance(name, driver, &params, table).table(thread_safe)
}

unsafe extern "C" fn ia_open_nts(name: *const c_char, qlen: DAT_COUNT, evd: *mut DAT_EVD_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN {
    guard_try(|| ia_open::open(name, false, qlen, evd, out))
}
unsafe extern "C" fn ia_open_ts(name: *const c_char, qlen: DAT_COUNT, evd: *mut DAT_EVD_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN {
    guard_try(|| ia_open::open(name, true, qlen, evd, out))
}
unsafe extern "C" fn ia_query(
    h: DAT_IA_HANDLE,
    evd: *mut DAT_EVD_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    p_mask: DAT_PROVIDER_ATTR_MASK,
    p_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guard_try(|| ia::query(h, evd, ia_mask, ia_attr, p_mask, p_attr))
}
unsafe extern "C" fn ia_close(h: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard_try(|| ia::close_then(h, flags, super::stats::at_close))
}

fn any(h: DAT_HANDLE) -> Result<Arc<dyn Object>, DAT_RETURN> {
    table::get(h).ok_or(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1))
}
unsafe extern "C" fn set_consumer_context(h: DAT_HANDLE, context: DAT_CONTEXT) -> DAT_RETURN {
    guard_try(|| {
        // SAFETY: DAT_CONTEXT is an 8-byte union; its u64 view covers every member.
        *any(h)?.context().locked() = unsafe { context.as_64 };
        Ok(DAT_SUCCESS)
    })
}
unsafe extern "C" fn get_consumer_context(h: DAT_HANDLE, context: *mut DAT_CONTEXT) -> DAT_RETURN {
    guard_try(|| {
        let o = any(h)?;
        if context.is_null() {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        }
        let v = *o.context().locked();
        // SAFETY: checked non-NULL.
        unsafe { context.write(DAT_CONTEXT { as_64: v }) };
        Ok(DAT_SUCCESS)
    })
}
unsafe extern "C" fn get_handle_type(h: DAT_HANDLE, out: *mut DAT_HANDLE_TYPE) -> DAT_RETURN {
    guard_try(|| {
        let o = any(h)?;
        if out.is_null() {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        }
        // SAFETY: checked non-NULL.
        unsafe { out.write(o.handle_type()) };
        Ok(DAT_SUCCESS)
    })
}

unsafe extern "C" fn cr_query(h: DAT_CR_HANDLE, mask: DAT_CR_PARAM_MASK, param: *mut DAT_CR_PARAM) -> DAT_RETURN {
    guard_try(|| cr::query(h, mask, param))
}
unsafe extern "C" fn cr_accept(h: DAT_CR_HANDLE, ep: DAT_EP_HANDLE, size: DAT_COUNT, data: *const c_void) -> DAT_RETURN {
    guard_try(|| cr::accept(h, ep, size, data))
}
unsafe extern "C" fn cr_reject(h: DAT_CR_HANDLE, size: DAT_COUNT, data: *const c_void) -> DAT_RETURN {
    guard_try(|| cr::reject(h, size, data))
}
unsafe extern "C" fn cr_handoff(h: DAT_CR_HANDLE, q: DAT_CONN_QUAL) -> DAT_RETURN {
    guard_try(|| sp::cr_handoff(h, q))
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ep_connect(
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    q: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    size: DAT_COUNT,
    data: *const c_void,
    qos: DAT_QOS,
    flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    guard_try(|| cm::connect(h, addr, q, timeout, size, data, qos, flags))
}
unsafe extern "C" fn ep_dup_connect(
    h: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    size: DAT_COUNT,
    data: *const c_void,
    qos: DAT_QOS,
) -> DAT_RETURN {
    guard_try(|| cm::dup_connect(h, dup, timeout, size, data, qos))
}
unsafe extern "C" fn ep_disconnect(h: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard_try(|| cm::disconnect(h, flags))
}
unsafe extern "C" fn ep_post_send(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try(|| dto::post_send(h, n, iov, cookie, flags))
}
unsafe extern "C" fn ep_post_rdma_read(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try(|| dto::post_rdma_read(h, n, iov, cookie, remote, flags))
}
unsafe extern "C" fn ep_post_rdma_write(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try(|| dto::post_rdma_write(h, n, iov, cookie, remote, flags))
}
unsafe extern "C" fn ep_recv_query(h: DAT_EP_HANDLE, n: *mut DAT_COUNT, span: *mut DAT_COUNT) -> DAT_RETURN {
    guard_try(|| ep::recv_query(h, n, span))
}
unsafe extern "C" fn ep_set_watermark(h: DAT_EP_HANDLE, soft: DAT_COUNT, hard: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| ep::set_watermark(h, soft, hard))
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rmr_bind(
    h: DAT_RMR_HANDLE,
    lmr: DAT_LMR_HANDLE,
    t: *const DAT_LMR_TRIPLET,
    mem_priv: DAT_MEM_PRIV_FLAGS,
    va: DAT_VA_TYPE,
    ep: DAT_EP_HANDLE,
    cookie: DAT_RMR_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    ctx: *mut DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    guard_try(|| rmr::bind(h, lmr, t, mem_priv, va, ep, cookie, flags, ctx))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ep_create_with_srq(
    h: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv: DAT_EVD_HANDLE,
    req: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    s: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| ep::create_with_srq(h, pz, recv, req, conn, s, attr, out))
}
unsafe extern "C" fn srq_create(h: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, attr: *mut DAT_SRQ_ATTR, out: *mut DAT_SRQ_HANDLE) -> DAT_RETURN {
    guard_try(|| srq::create(h, pz, attr, out))
}
unsafe extern "C" fn srq_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| srq::free(h))
}
unsafe extern "C" fn srq_post_recv(h: DAT_SRQ_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE) -> DAT_RETURN {
    guard_try(|| srq::post_recv(h, n, iov, cookie))
}
unsafe extern "C" fn srq_query(h: DAT_SRQ_HANDLE, mask: DAT_SRQ_PARAM_MASK, param: *mut DAT_SRQ_PARAM) -> DAT_RETURN {
    guard_try(|| srq::query(h, mask, param))
}
unsafe extern "C" fn srq_resize(h: DAT_HANDLE, n: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| srq::resize(h, n))
}
unsafe extern "C" fn srq_set_lw(h: DAT_HANDLE, n: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| srq::set_lw(h, n))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ep_post_send_with_invalidate(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    invalidate: DAT_BOOLEAN,
    ctx: DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    // Called through the provider table without libdat2's handle checks: the built-in layer's own
    // lookup rejects anything that is not a live EP.
    guard_try(|| dto::post_send_with_invalidate(h, n, iov, cookie, flags, invalidate, ctx))
}

unsafe extern "C" fn cno_create(h: DAT_IA_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT, out: *mut DAT_CNO_HANDLE) -> DAT_RETURN {
    guard_try(|| cno::create(h, agent, out))
}
unsafe extern "C" fn cno_modify_agent(h: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN {
    guard_try(|| cno::modify_agent(h, agent))
}
unsafe extern "C" fn cno_query(h: DAT_CNO_HANDLE, mask: DAT_CNO_PARAM_MASK, param: *mut DAT_CNO_PARAM) -> DAT_RETURN {
    guard_try(|| cno::query(h, mask, param))
}
unsafe extern "C" fn cno_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| cno::free(h))
}
unsafe extern "C" fn cno_wait(h: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| cno::wait(h, timeout, evd))
}

unsafe extern "C" fn evd_create(
    h: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
    out: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    guard_try(|| evd::create(h, qlen, cno, flags, out))
}
unsafe extern "C" fn evd_query(h: DAT_EVD_HANDLE, mask: DAT_EVD_PARAM_MASK, param: *mut DAT_EVD_PARAM) -> DAT_RETURN {
    guard_try(|| evd::query(h, mask, param))
}
unsafe extern "C" fn evd_modify_cno(h: DAT_EVD_HANDLE, cno: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::modify_cno(h, cno))
}
unsafe extern "C" fn evd_enable(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::set_enabled(h, true))
}
unsafe extern "C" fn evd_disable(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::set_enabled(h, false))
}
unsafe extern "C" fn evd_set_unwaitable(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::set_waitable(h, false))
}
unsafe extern "C" fn evd_clear_unwaitable(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::set_waitable(h, true))
}
unsafe extern "C" fn evd_wait(
    h: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> DAT_RETURN {
    guard_try(|| evd::wait(h, timeout, threshold, event, nmore))
}
unsafe extern "C" fn evd_resize(h: DAT_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| evd::resize(h, qlen))
}
unsafe extern "C" fn evd_post_se(h: DAT_EVD_HANDLE, event: *const DAT_EVENT) -> DAT_RETURN {
    guard_try(|| evd::post_se(h, event))
}
unsafe extern "C" fn evd_dequeue(h: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> DAT_RETURN {
    guard_try(|| evd::dequeue(h, event))
}
unsafe extern "C" fn evd_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| evd::free(h))
}

unsafe extern "C" fn ep_create(
    h: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv: DAT_EVD_HANDLE,
    req: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| ep::create(h, pz, recv, req, conn, attr, out))
}
unsafe extern "C" fn ep_query(h: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *mut DAT_EP_PARAM) -> DAT_RETURN {
    guard_try(|| ep::query(h, mask, param))
}
unsafe extern "C" fn ep_modify(h: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *const DAT_EP_PARAM) -> DAT_RETURN {
    guard_try(|| ep::modify(h, mask, param))
}
unsafe extern "C" fn ep_post_recv(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard_try(|| dto::post_recv(h, n, iov, cookie, flags))
}
unsafe extern "C" fn ep_get_status(
    h: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    req_idle: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    guard_try(|| ep::get_status(h, state, recv_idle, req_idle))
}
unsafe extern "C" fn ep_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| ep::free(h))
}
unsafe extern "C" fn ep_reset(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| ep::reset(h))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn lmr_create(
    h: DAT_IA_HANDLE,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    length: DAT_VLEN,
    pz: DAT_PZ_HANDLE,
    privileges: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    out: *mut DAT_LMR_HANDLE,
    lkey: *mut DAT_LMR_CONTEXT,
    rkey: *mut DAT_RMR_CONTEXT,
    reg_len: *mut DAT_VLEN,
    reg_addr: *mut DAT_VADDR,
) -> DAT_RETURN {
    guard_try(|| lmr::create(h, mem_type, region, length, pz, privileges, va_type, out, lkey, rkey, reg_len, reg_addr))
}
unsafe extern "C" fn lmr_query(h: DAT_LMR_HANDLE, mask: DAT_LMR_PARAM_MASK, param: *mut DAT_LMR_PARAM) -> DAT_RETURN {
    guard_try(|| lmr::query(h, mask, param))
}
unsafe extern "C" fn lmr_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| lmr::free(h))
}
unsafe extern "C" fn lmr_sync(h: DAT_IA_HANDLE, segs: *const DAT_LMR_TRIPLET, n: DAT_VLEN) -> DAT_RETURN {
    guard_try(|| lmr::sync(h, segs, n))
}

unsafe extern "C" fn rmr_create(pz: DAT_PZ_HANDLE, out: *mut DAT_RMR_HANDLE) -> DAT_RETURN {
    guard_try(|| rmr::create(pz, out))
}
unsafe extern "C" fn rmr_query(h: DAT_RMR_HANDLE, mask: DAT_RMR_PARAM_MASK, param: *mut DAT_RMR_PARAM) -> DAT_RETURN {
    guard_try(|| rmr::query(h, mask, param))
}
unsafe extern "C" fn rmr_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| rmr::free(h))
}

unsafe extern "C" fn psp_create(
    h: DAT_IA_HANDLE,
    q: DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| sp::psp_create(h, q, evd, flags, out))
}
unsafe extern "C" fn psp_create_any(
    h: DAT_IA_HANDLE,
    q: *mut DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| sp::psp_create_any(h, q, evd, flags, out))
}
unsafe extern "C" fn psp_query(h: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM) -> DAT_RETURN {
    guard_try(|| sp::psp_query(h, mask, param))
}
unsafe extern "C" fn psp_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| sp::psp_free(h))
}
unsafe extern "C" fn rsp_create(
    h: DAT_IA_HANDLE,
    q: DAT_CONN_QUAL,
    ep: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    out: *mut DAT_RSP_HANDLE,
) -> DAT_RETURN {
    guard_try(|| sp::rsp_create(h, q, ep, evd, out))
}
unsafe extern "C" fn rsp_query(h: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM) -> DAT_RETURN {
    guard_try(|| sp::rsp_query(h, mask, param))
}
unsafe extern "C" fn rsp_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| sp::rsp_free(h))
}

unsafe extern "C" fn pz_create(h: DAT_IA_HANDLE, out: *mut DAT_PZ_HANDLE) -> DAT_RETURN {
    guard_try(|| pz::create(h, out))
}
unsafe extern "C" fn pz_query(h: DAT_PZ_HANDLE, mask: DAT_PZ_PARAM_MASK, param: *mut DAT_PZ_PARAM) -> DAT_RETURN {
    guard_try(|| pz::query(h, mask, param))
}
unsafe extern "C" fn pz_free(h: DAT_HANDLE) -> DAT_RETURN {
    guard_try(|| pz::free(h))
}

/// A provider table of the built-in layer for the IA name `device_name`.
pub fn table(device_name: *const c_char, thread_safe: bool) -> DAT_PROVIDER {
    let none = core::ptr::null::<c_void>();
    DAT_PROVIDER {
        device_name,
        extension: core::ptr::null_mut(),
        ia_open_func: Some(if thread_safe { ia_open_ts } else { ia_open_nts }),
        ia_query_func: Some(ia_query),
        ia_close_func: Some(ia_close),
        set_consumer_context_func: Some(set_consumer_context),
        get_consumer_context_func: Some(get_consumer_context),
        get_handle_type_func: Some(get_handle_type),
        cno_create_func: Some(cno_create),
        cno_modify_agent_func: Some(cno_modify_agent),
        cno_query_func: Some(cno_query),
        cno_free_func: Some(cno_free),
        cno_wait_func: Some(cno_wait),
        cr_query_func: Some(cr_query),
        cr_accept_func: Some(cr_accept),
        cr_reject_func: Some(cr_reject),
        cr_handoff_func: Some(cr_handoff),
        evd_create_func: Some(evd_create),
        evd_query_func: Some(evd_query),
        evd_modify_cno_func: Some(evd_modify_cno),
        evd_enable_func: Some(evd_enable),
        evd_disable_func: Some(evd_disable),
        evd_wait_func: Some(evd_wait),
        evd_resize_func: Some(evd_resize),
        evd_post_se_func: Some(evd_post_se),
        evd_dequeue_func: Some(evd_dequeue),
        evd_free_func: Some(evd_free),
        ep_create_func: Some(ep_create),
        ep_query_func: Some(ep_query),
        ep_modify_func: Some(ep_modify),
        ep_connect_func: Some(ep_connect),
        ep_dup_connect_func: Some(ep_dup_connect),
        ep_disconnect_func: Some(ep_disconnect),
        ep_post_send_func: Some(ep_post_send),
        ep_post_recv_func: Some(ep_post_recv),
        ep_post_rdma_read_func: Some(ep_post_rdma_read),
        ep_post_rdma_write_func: Some(ep_post_rdma_write),
        ep_get_status_func: Some(ep_get_status),
        ep_free_func: Some(ep_free),
        lmr_create_func: Some(lmr_create),
        lmr_query_func: Some(lmr_query),
        lmr_free_func: Some(lmr_free),
        rmr_create_func: Some(rmr_create),
        rmr_query_func: Some(rmr_query),
        rmr_bind_func: Some(rmr_bind),
        rmr_free_func: Some(rmr_free),
        psp_create_func: Some(psp_create),
        psp_query_func: Some(psp_query),
        psp_free_func: Some(psp_free),
        rsp_create_func: Some(rsp_create),
        rsp_query_func: Some(rsp_query),
        rsp_free_func: Some(rsp_free),
        pz_create_func: Some(pz_create),
        pz_query_func: Some(pz_query),
        pz_free_func: Some(pz_free),
        psp_create_any_func: Some(psp_create_any),
        ep_reset_func: Some(ep_reset),
        evd_set_unwaitable_func: Some(evd_set_unwaitable),
        evd_clear_unwaitable_func: Some(evd_clear_unwaitable),
        lmr_sync_rdma_read_func: Some(lmr_sync),
        lmr_sync_rdma_write_func: Some(lmr_sync),
        ep_create_with_srq_func: Some(ep_create_with_srq),
        ep_recv_query_func: Some(ep_recv_query),
        ep_set_watermark_func: Some(ep_set_watermark),
        srq_create_func: Some(srq_create),
        srq_free_func: Some(srq_free),
        srq_post_recv_func: Some(srq_post_recv),
        srq_query_func: Some(srq_query),
        srq_resize_func: Some(srq_resize),
        srq_set_lw_func: Some(srq_set_lw),
        csp_create_func: none,
        csp_query_func: none,
        csp_free_func: none,
        ep_common_connect_func: none,
        rmr_create_for_ep_func: none,
        ep_post_send_with_invalidate_func: Some(ep_post_send_with_invalidate),
        ep_post_rdma_read_to_rmr_func: none,
        cno_fd_create_func: none,
        cno_trigger_func: none,
        ia_ha_related_func: none,
        handle_extendedop_func: Some(ext::extended_op),
    }
}
