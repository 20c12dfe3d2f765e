//! `struct dat_provider` (DAT_PROVIDER): the table of entry points every provider fills in.
//!
//! The first word of every non-IA object a provider hands out points at its table; libdat2
//! dispatches every call through it. The layout (81 pointers, 648 bytes on x86_64) is fixed by
//! DAT 2.0 with `DAT_EXTENSIONS` defined, which is what `udat_config.h` does.

use core::ffi::{c_char, c_int, c_void};

use super::types::*;

/// An optional entry point: providers may leave any of them NULL.
type F<T> = Option<T>;

pub type IaOpenFn = unsafe extern "C" fn(*const c_char, DAT_COUNT, *mut DAT_EVD_HANDLE, *mut DAT_IA_HANDLE) -> DAT_RETURN;
pub type IaQueryFn = unsafe extern "C" fn(
    DAT_IA_HANDLE,
    *mut DAT_EVD_HANDLE,
    DAT_IA_ATTR_MASK,
    *mut DAT_IA_ATTR,
    DAT_PROVIDER_ATTR_MASK,
    *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN;
pub type IaCloseFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) -> DAT_RETURN;
pub type SetContextFn = unsafe extern "C" fn(DAT_HANDLE, DAT_CONTEXT) -> DAT_RETURN;
pub type GetContextFn = unsafe extern "C" fn(DAT_HANDLE, *mut DAT_CONTEXT) -> DAT_RETURN;
pub type GetHandleTypeFn = unsafe extern "C" fn(DAT_HANDLE, *mut DAT_HANDLE_TYPE) -> DAT_RETURN;
pub type CnoCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, *mut DAT_CNO_HANDLE) -> DAT_RETURN;
pub type CnoModifyAgentFn = unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN;
pub type CnoQueryFn = unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, *mut DAT_CNO_PARAM) -> DAT_RETURN;
pub type HandleFn = unsafe extern "C" fn(DAT_HANDLE) -> DAT_RETURN;
pub type CnoWaitFn = unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_TIMEOUT, *mut DAT_EVD_HANDLE) -> DAT_RETURN;
pub type CrQueryFn = unsafe extern "C" fn(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, *mut DAT_CR_PARAM) -> DAT_RETURN;
pub type CrAcceptFn = unsafe extern "C" fn(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, *const c_void) -> DAT_RETURN;
pub type CrRejectFn = unsafe extern "C" fn(DAT_CR_HANDLE, DAT_COUNT, *const c_void) -> DAT_RETURN;
pub type CrHandoffFn = unsafe extern "C" fn(DAT_CR_HANDLE, DAT_CONN_QUAL) -> DAT_RETURN;
pub type EvdCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_COUNT, DAT_CNO_HANDLE, DAT_EVD_FLAGS, *mut DAT_EVD_HANDLE) -> DAT_RETURN;
pub type EvdQueryFn = unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, *mut DAT_EVD_PARAM) -> DAT_RETURN;
pub type EvdModifyCnoFn = unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_CNO_HANDLE) -> DAT_RETURN;
pub type EvdWaitFn = unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, *mut DAT_EVENT, *mut DAT_COUNT) -> DAT_RETURN;
pub type HandleCountFn = unsafe extern "C" fn(DAT_HANDLE, DAT_COUNT) -> DAT_RETURN;
pub type EvdPostSeFn = unsafe extern "C" fn(DAT_EVD_HANDLE, *const DAT_EVENT) -> DAT_RETURN;
pub type EvdDequeueFn = unsafe extern "C" fn(DAT_EVD_HANDLE, *mut DAT_EVENT) -> DAT_RETURN;
pub type EpCreateFn = unsafe extern "C" fn(
    DAT_IA_HANDLE,
    DAT_PZ_HANDLE,
    DAT_EVD_HANDLE,
    DAT_EVD_HANDLE,
    DAT_EVD_HANDLE,
    *const DAT_EP_ATTR,
    *mut DAT_EP_HANDLE,
) -> DAT_RETURN;
pub type EpQueryFn = unsafe extern "C" fn(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *mut DAT_EP_PARAM) -> DAT_RETURN;
pub type EpModifyFn = unsafe extern "C" fn(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *const DAT_EP_PARAM) -> DAT_RETURN;
pub type EpConnectFn = unsafe extern "C" fn(
    DAT_EP_HANDLE,
    DAT_IA_ADDRESS_PTR,
    DAT_CONN_QUAL,
    DAT_TIMEOUT,
    DAT_COUNT,
    *const c_void,
    DAT_QOS,
    DAT_CONNECT_FLAGS,
) -> DAT_RETURN;
pub type EpDupConnectFn = unsafe extern "C" fn(DAT_EP_HANDLE, DAT_EP_HANDLE, DAT_TIMEOUT, DAT_COUNT, *const c_void, DAT_QOS) -> DAT_RETURN;
pub type EpDisconnectFn = unsafe extern "C" fn(DAT_EP_HANDLE, DAT_CLOSE_FLAGS) -> DAT_RETURN;
pub type EpPostFn =
    unsafe extern "C" fn(DAT_EP_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS) -> DAT_RETURN;
pub type EpPostRdmaFn = unsafe extern "C" fn(
    DAT_EP_HANDLE,
    DAT_COUNT,
    *mut DAT_LMR_TRIPLET,
    DAT_DTO_COOKIE,
    *const DAT_RMR_TRIPLET,
    DAT_COMPLETION_FLAGS,
) -> DAT_RETURN;
pub type EpGetStatusFn = unsafe extern "C" fn(DAT_EP_HANDLE, *mut DAT_EP_STATE, *mut DAT_BOOLEAN, *mut DAT_BOOLEAN) -> DAT_RETURN;
pub type LmrCreateFn = unsafe extern "C" fn(
    DAT_IA_HANDLE,
    DAT_MEM_TYPE,
    DAT_REGION_DESCRIPTION,
    DAT_VLEN,
    DAT_PZ_HANDLE,
    DAT_MEM_PRIV_FLAGS,
    DAT_VA_TYPE,
    *mut DAT_LMR_HANDLE,
    *mut DAT_LMR_CONTEXT,
    *mut DAT_RMR_CONTEXT,
    *mut DAT_VLEN,
    *mut DAT_VADDR,
) -> DAT_RETURN;
pub type LmrQueryFn = unsafe extern "C" fn(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, *mut DAT_LMR_PARAM) -> DAT_RETURN;
pub type RmrCreateFn = unsafe extern "C" fn(DAT_PZ_HANDLE, *mut DAT_RMR_HANDLE) -> DAT_RETURN;
pub type RmrQueryFn = unsafe extern "C" fn(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, *mut DAT_RMR_PARAM) -> DAT_RETURN;
pub type RmrBindFn = unsafe extern "C" fn(
    DAT_RMR_HANDLE,
    DAT_LMR_HANDLE,
    *const DAT_LMR_TRIPLET,
    DAT_MEM_PRIV_FLAGS,
    DAT_VA_TYPE,
    DAT_EP_HANDLE,
    DAT_RMR_COOKIE,
    DAT_COMPLETION_FLAGS,
    *mut DAT_RMR_CONTEXT,
) -> DAT_RETURN;
pub type PspCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, *mut DAT_PSP_HANDLE) -> DAT_RETURN;
pub type PspQueryFn = unsafe extern "C" fn(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, *mut DAT_PSP_PARAM) -> DAT_RETURN;
pub type RspCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EP_HANDLE, DAT_EVD_HANDLE, *mut DAT_RSP_HANDLE) -> DAT_RETURN;
pub type RspQueryFn = unsafe extern "C" fn(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, *mut DAT_RSP_PARAM) -> DAT_RETURN;
pub type PzCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, *mut DAT_PZ_HANDLE) -> DAT_RETURN;
pub type PzQueryFn = unsafe extern "C" fn(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, *mut DAT_PZ_PARAM) -> DAT_RETURN;
pub type PspCreateAnyFn =
    unsafe extern "C" fn(DAT_IA_HANDLE, *mut DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, *mut DAT_PSP_HANDLE) -> DAT_RETURN;
pub type LmrSyncFn = unsafe extern "C" fn(DAT_IA_HANDLE, *const DAT_LMR_TRIPLET, DAT_VLEN) -> DAT_RETURN;
pub type EpCreateWithSrqFn = unsafe extern "C" fn(
    DAT_IA_HANDLE,
    DAT_PZ_HANDLE,
    DAT_EVD_HANDLE,
    DAT_EVD_HANDLE,
    DAT_EVD_HANDLE,
    DAT_SRQ_HANDLE,
    *const DAT_EP_ATTR,
    *mut DAT_EP_HANDLE,
) -> DAT_RETURN;
pub type EpRecvQueryFn = unsafe extern "C" fn(DAT_EP_HANDLE, *mut DAT_COUNT, *mut DAT_COUNT) -> DAT_RETURN;
pub type EpSetWatermarkFn = unsafe extern "C" fn(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT) -> DAT_RETURN;
pub type SrqCreateFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_PZ_HANDLE, *mut DAT_SRQ_ATTR, *mut DAT_SRQ_HANDLE) -> DAT_RETURN;
pub type SrqPostRecvFn = unsafe extern "C" fn(DAT_SRQ_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE) -> DAT_RETURN;
pub type SrqQueryFn = unsafe extern "C" fn(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, *mut DAT_SRQ_PARAM) -> DAT_RETURN;
/// `handle_extendedop_func(DAT_HANDLE, DAT_EXTENDED_OP, va_list)`: only ever called from the
/// C shim, which owns the `va_list`; Rust sees it as an opaque pointer.
pub type ExtendedOpFn = unsafe extern "C" fn(DAT_HANDLE, c_int, *mut c_void) -> DAT_RETURN;

pub type EpPostSendInvFn = unsafe extern "C" fn(
    DAT_EP_HANDLE,
    DAT_COUNT,
    *mut DAT_LMR_TRIPLET,
    DAT_DTO_COOKIE,
    DAT_COMPLETION_FLAGS,
    DAT_BOOLEAN,
    DAT_RMR_CONTEXT,
) -> DAT_RETURN;

/// Entry points that libdat2 never calls (not exported by DAT 2.0 on Linux); kept opaque.
type Unused = *const c_void;

#[repr(C)]
pub struct DAT_PROVIDER {
    pub device_name: *const c_char,
    pub extension: *mut c_void,
    pub ia_open_func: F<IaOpenFn>,
    pub ia_query_func: F<IaQueryFn>,
    pub ia_close_func: F<IaCloseFn>,
    pub set_consumer_context_func: F<SetContextFn>,
    pub get_consumer_context_func: F<GetContextFn>,
    pub get_handle_type_func: F<GetHandleTypeFn>,
    pub cno_create_func: F<CnoCreateFn>,
    pub cno_modify_agent_func: F<CnoModifyAgentFn>,
    pub cno_query_func: F<CnoQueryFn>,
    pub cno_free_func: F<HandleFn>,
    pub cno_wait_func: F<CnoWaitFn>,
    pub cr_query_func: F<CrQueryFn>,
    pub cr_accept_func: F<CrAcceptFn>,
    pub cr_reject_func: F<CrRejectFn>,
    pub cr_handoff_func: F<CrHandoffFn>,
    pub evd_create_func: F<EvdCreateFn>,
    pub evd_query_func: F<EvdQueryFn>,
    pub evd_modify_cno_func: F<EvdModifyCnoFn>,
    pub evd_enable_func: F<HandleFn>,
    pub evd_disable_func: F<HandleFn>,
    pub evd_wait_func: F<EvdWaitFn>,
    pub evd_resize_func: F<HandleCountFn>,
    pub evd_post_se_func: F<EvdPostSeFn>,
    pub evd_dequeue_func: F<EvdDequeueFn>,
    pub evd_free_func: F<HandleFn>,
    pub ep_create_func: F<EpCreateFn>,
    pub ep_query_func: F<EpQueryFn>,
    pub ep_modify_func: F<EpModifyFn>,
    pub ep_connect_func: F<EpConnectFn>,
    pub ep_dup_connect_func: F<EpDupConnectFn>,
    pub ep_disconnect_func: F<EpDisconnectFn>,
    pub ep_post_send_func: F<EpPostFn>,
    pub ep_post_recv_func: F<EpPostFn>,
    pub ep_post_rdma_read_func: F<EpPostRdmaFn>,
    pub ep_post_rdma_write_func: F<EpPostRdmaFn>,
    pub ep_get_status_func: F<EpGetStatusFn>,
    pub ep_free_func: F<HandleFn>,
    pub lmr_create_func: F<LmrCreateFn>,
    pub lmr_query_func: F<LmrQueryFn>,
    pub lmr_free_func: F<HandleFn>,
    pub rmr_create_func: F<RmrCreateFn>,
    pub rmr_query_func: F<RmrQueryFn>,
    pub rmr_bind_func: F<RmrBindFn>,
    pub rmr_free_func: F<HandleFn>,
    pub psp_create_func: F<PspCreateFn>,
    pub psp_query_func: F<PspQueryFn>,
    pub psp_free_func: F<HandleFn>,
    pub rsp_create_func: F<RspCreateFn>,
    pub rsp_query_func: F<RspQueryFn>,
    pub rsp_free_func: F<HandleFn>,
    pub pz_create_func: F<PzCreateFn>,
    pub pz_query_func: F<PzQueryFn>,
    pub pz_free_func: F<HandleFn>,
    pub psp_create_any_func: F<PspCreateAnyFn>,
    pub ep_reset_func: F<HandleFn>,
    pub evd_set_unwaitable_func: F<HandleFn>,
    pub evd_clear_unwaitable_func: F<HandleFn>,
    pub lmr_sync_rdma_read_func: F<LmrSyncFn>,
    pub lmr_sync_rdma_write_func: F<LmrSyncFn>,
    pub ep_create_with_srq_func: F<EpCreateWithSrqFn>,
    pub ep_recv_query_func: F<EpRecvQueryFn>,
    pub ep_set_watermark_func: F<EpSetWatermarkFn>,
    pub srq_create_func: F<SrqCreateFn>,
    pub srq_free_func: F<HandleFn>,
    pub srq_post_recv_func: F<SrqPostRecvFn>,
    pub srq_query_func: F<SrqQueryFn>,
    pub srq_resize_func: F<HandleCountFn>,
    pub srq_set_lw_func: F<HandleCountFn>,
    pub csp_create_func: Unused,
    pub csp_query_func: Unused,
    pub csp_free_func: Unused,
    pub ep_common_connect_func: Unused,
    pub rmr_create_for_ep_func: Unused,
    /// Not exported by libdat2; consumers reach it through `DAT_EP_POST_SEND_WITH_INVALIDATE`.
    pub ep_post_send_with_invalidate_func: F<EpPostSendInvFn>,
    pub ep_post_rdma_read_to_rmr_func: Unused,
    pub cno_fd_create_func: Unused,
    pub cno_trigger_func: Unused,
    pub ia_ha_related_func: Unused,
    pub handle_extendedop_func: F<ExtendedOpFn>,
}

const _: () = assert!(core::mem::size_of::<DAT_PROVIDER>() == 648);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, ia_open_func) == 16);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, cno_create_func) == 64);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, cr_query_func) == 104);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, evd_create_func) == 136);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, ep_create_func) == 216);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, lmr_create_func) == 312);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, psp_create_func) == 368);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, pz_create_func) == 416);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, psp_create_any_func) == 440);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, lmr_sync_rdma_read_func) == 472);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, ep_create_with_srq_func) == 488);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, srq_create_func) == 512);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, srq_set_lw_func) == 552);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, csp_create_func) == 560);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, ia_ha_related_func) == 632);
const _: () = assert!(core::mem::offset_of!(DAT_PROVIDER, handle_extendedop_func) == 640);
