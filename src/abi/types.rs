//! `#[repr(C)]` mirrors of every scalar type, structure and union that the
//! DAT 2.0 user-level headers (`dat.h`, `udat.h`, `dat_registry.h`,
//! `dat_ib_extensions.h`) define for x86_64 Linux.
//!
//! Names deliberately follow the C spelling (`DAT_LMR_PARAM`,
//! `registered_address`, ...) so that code in this crate reads like the C API
//! it implements and so that layouts can be compared name by name.
//!
//! C enumerations are plain integer aliases here (`pub type DAT_QOS = u32;`):
//! gcc gives an enumeration without negative constants the underlying type
//! `unsigned int`, and a Rust `enum` would make any unknown value coming from
//! C undefined behaviour. The constants themselves live in `super::consts`.
//!
//! The table of provider entry points (`DAT_PROVIDER`) is not here; it lives in
//! `super::provider`.
//!
//! Every aggregate is followed by compile-time checks of its size, its
//! alignment and the offset of each member. The expected numbers were measured
//! by compiling a C program against the installed DAT 2.0 headers with gcc on
//! x86_64.

#![allow(non_camel_case_types, dead_code)]

use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

// ---------------------------------------------------------------------------
// Zero-initialisation helper
// ---------------------------------------------------------------------------

/// Marker for plain C data whose all-zero bit pattern is a valid value
/// (integers, raw pointers, `Option` of function pointers, and aggregates of
/// those).
///
/// # Safety
/// Implement this only for types for which `core::mem::zeroed()` is sound.
pub unsafe trait Zeroable: Sized {
    /// A value with every byte set to zero.
    fn zeroed() -> Self {
        // SAFETY: implementors promise that the all-zero pattern is valid.
        unsafe { core::mem::zeroed() }
    }
}

/// Returns an all-zero value of a plain C type (the Rust spelling of
/// `memset(&x, 0, sizeof x)`).
pub fn zeroed<T: Zeroable>() -> T {
    T::zeroed()
}

/// Implements [`Zeroable`] and a zero-filling [`Default`] for each listed type.
macro_rules! plain_c_data {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: the type is a `#[repr(C)]` aggregate made only of
            // integers, raw pointers, `Option<extern fn>` and other such
            // aggregates, so the all-zero bit pattern is a valid value.
            unsafe impl Zeroable for $t {}

            impl Default for $t {
                fn default() -> Self {
                    <$t as Zeroable>::zeroed()
                }
            }
        )*
    };
}

/// Compile-time layout checks: total size, alignment and the offset of every
/// listed member.
macro_rules! layout {
    ($t:ty, size $size:expr, align $align:expr, { $($field:ident @ $off:expr),* $(,)? }) => {
        const _: () = assert!(core::mem::size_of::<$t>() == $size);
        const _: () = assert!(core::mem::align_of::<$t>() == $align);
        $( const _: () = assert!(core::mem::offset_of!($t, $field) == $off); )*
    };
}

// ---------------------------------------------------------------------------
// Platform scalars (dat_platform_specific.h, Linux branch)
// ---------------------------------------------------------------------------

pub type DAT_UINT32 = u32;
pub type DAT_UINT64 = u64;
pub type DAT_UVERYLONG = c_ulonglong;
pub type DAT_PVOID = *mut c_void;
pub type DAT_COUNT = c_int;
pub type DAT_PADDR = DAT_UINT64;
pub type DAT_FD = c_int;

/// The OS socket address header (`struct sockaddr`).
pub type DAT_SOCK_ADDR = libc::sockaddr;
/// The OS IPv6 socket address (`struct sockaddr_in6`, 28 bytes).
pub type DAT_SOCK_ADDR6 = libc::sockaddr_in6;

/// Communicator description (`struct dat_comm`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_COMM {
    pub domain: c_int,
    pub r#type: c_int,
    pub protocol: c_int,
}

// ---------------------------------------------------------------------------
// Return codes (dat_error.h)
// ---------------------------------------------------------------------------

/// `enum dat_return_type`: the type part of a return code.
pub type DAT_RETURN_TYPE = u32;
/// Every DAT call returns this: class | type | subtype.
pub type DAT_RETURN = DAT_UINT32;
/// `enum dat_return_subtype`: the subtype part of a return code.
pub type DAT_RETURN_SUBTYPE = u32;

// ---------------------------------------------------------------------------
// Generic types (dat.h)
// ---------------------------------------------------------------------------

pub type DAT_NAME_PTR = *mut c_char;

/// A name/value pair of C strings (`struct dat_named_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_NAMED_ATTR {
    pub name: *const c_char,
    pub value: *const c_char,
}

/// `enum dat_boolean`.
pub type DAT_BOOLEAN = u32;
pub type DAT_HA_LB = DAT_UINT32;

/// Consumer context: one 8-byte word seen as a pointer or an integer
/// (`union dat_context`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_CONTEXT {
    pub as_ptr: DAT_PVOID,
    pub as_64: DAT_UINT64,
    pub as_index: DAT_UVERYLONG,
}

pub type DAT_DTO_COOKIE = DAT_CONTEXT;
pub type DAT_RMR_COOKIE = DAT_CONTEXT;

/// `enum dat_completion_flags`.
pub type DAT_COMPLETION_FLAGS = u32;
/// Microseconds.
pub type DAT_TIMEOUT = DAT_UINT32;

pub type DAT_HANDLE = DAT_PVOID;
pub type DAT_CR_HANDLE = DAT_HANDLE;
pub type DAT_EP_HANDLE = DAT_HANDLE;
pub type DAT_EVD_HANDLE = DAT_HANDLE;
pub type DAT_IA_HANDLE = DAT_HANDLE;
pub type DAT_LMR_HANDLE = DAT_HANDLE;
pub type DAT_PSP_HANDLE = DAT_HANDLE;
pub type DAT_PZ_HANDLE = DAT_HANDLE;
pub type DAT_RMR_HANDLE = DAT_HANDLE;
pub type DAT_RSP_HANDLE = DAT_HANDLE;
pub type DAT_SRQ_HANDLE = DAT_HANDLE;
pub type DAT_CSP_HANDLE = DAT_HANDLE;
pub type DAT_CNO_HANDLE = DAT_HANDLE;

/// `enum dat_dtos`.
pub type DAT_DTOS = u32;

/// `DAT_SOCK_ADDR *`.
pub type DAT_IA_ADDRESS_PTR = *mut DAT_SOCK_ADDR;
pub type DAT_CONN_QUAL = DAT_UINT64;
pub type DAT_PORT_QUAL = DAT_UINT64;

/// `enum dat_qos`.
pub type DAT_QOS = u32;
/// `enum dat_connect_flags`.
pub type DAT_CONNECT_FLAGS = u32;
/// `enum dat_close_flags`.
pub type DAT_CLOSE_FLAGS = u32;
/// `enum dat_evd_flags`.
pub type DAT_EVD_FLAGS = u32;
/// `enum dat_psp_flags`.
pub type DAT_PSP_FLAGS = u32;

pub type DAT_LMR_CONTEXT = DAT_UINT32;
pub type DAT_RMR_CONTEXT = DAT_UINT32;
pub type DAT_VLEN = DAT_UINT64;
pub type DAT_VADDR = DAT_UINT64;
/// 32-bit data segment length.
pub type DAT_SEG_LENGTH = DAT_UINT32;

/// One local memory segment (`struct dat_lmr_triplet`). A zero
/// `segment_length` is legal.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_LMR_TRIPLET {
    pub virtual_address: DAT_VADDR,
    pub segment_length: DAT_SEG_LENGTH,
    pub lmr_context: DAT_LMR_CONTEXT,
}

/// One remote memory segment (`struct dat_rmr_triplet`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_RMR_TRIPLET {
    pub virtual_address: DAT_VADDR,
    pub segment_length: DAT_SEG_LENGTH,
    pub rmr_context: DAT_RMR_CONTEXT,
}

/// `enum dat_mem_priv_flags`.
pub type DAT_MEM_PRIV_FLAGS = u32;
/// `enum dat_va_type`.
pub type DAT_VA_TYPE = u32;
/// `enum dat_rmr_scope`.
pub type DAT_RMR_SCOPE = u32;

/// Result of `dat_rmr_query` (`struct dat_rmr_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_RMR_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub pz_handle: DAT_PZ_HANDLE,
    pub lmr_triplet: DAT_LMR_TRIPLET,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub rmr_context: DAT_RMR_CONTEXT,
    pub rmr_scope: DAT_RMR_SCOPE,
    pub va_type: DAT_VA_TYPE,
}

/// `enum dat_rmr_param_mask`.
pub type DAT_RMR_PARAM_MASK = u32;
/// `enum dat_iov_ownership`.
pub type DAT_IOV_OWNERSHIP = u32;
/// `enum dat_ep_creator_for_psp`.
pub type DAT_EP_CREATOR_FOR_PSP = u32;
/// `enum dat_extension`.
pub type DAT_EXTENSION = u32;
pub type DAT_IA_ATTR_MASK = DAT_UINT64;
/// `enum dat_service_type`.
pub type DAT_SERVICE_TYPE = u32;

/// Endpoint attributes (`struct dat_ep_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_EP_ATTR {
    pub service_type: DAT_SERVICE_TYPE,
    pub max_message_size: DAT_SEG_LENGTH,
    pub max_rdma_size: DAT_SEG_LENGTH,
    pub qos: DAT_QOS,
    pub recv_completion_flags: DAT_COMPLETION_FLAGS,
    pub request_completion_flags: DAT_COMPLETION_FLAGS,
    pub max_recv_dtos: DAT_COUNT,
    pub max_request_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub max_request_iov: DAT_COUNT,
    pub max_rdma_read_in: DAT_COUNT,
    pub max_rdma_read_out: DAT_COUNT,
    pub srq_soft_hw: DAT_COUNT,
    pub max_rdma_read_iov: DAT_COUNT,
    pub max_rdma_write_iov: DAT_COUNT,
    pub ep_transport_specific_count: DAT_COUNT,
    pub ep_transport_specific: *mut DAT_NAMED_ATTR,
    pub ep_provider_specific_count: DAT_COUNT,
    pub ep_provider_specific: *mut DAT_NAMED_ATTR,
}

/// `enum dat_ep_state`.
pub type DAT_EP_STATE = u32;

/// Result of `dat_ep_query`, argument of `dat_ep_modify`
/// (`struct dat_ep_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_EP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub ep_state: DAT_EP_STATE,
    pub comm: DAT_COMM,
    pub local_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub local_port_qual: DAT_PORT_QUAL,
    pub remote_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub remote_port_qual: DAT_PORT_QUAL,
    pub pz_handle: DAT_PZ_HANDLE,
    pub recv_evd_handle: DAT_EVD_HANDLE,
    pub request_evd_handle: DAT_EVD_HANDLE,
    pub connect_evd_handle: DAT_EVD_HANDLE,
    pub srq_handle: DAT_SRQ_HANDLE,
    pub ep_attr: DAT_EP_ATTR,
}

pub type DAT_EP_PARAM_MASK = DAT_UINT64;

/// `enum dat_srq_state`.
pub type DAT_SRQ_STATE = u32;

/// Shared receive queue creation attributes (`struct dat_srq_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_SRQ_ATTR {
    pub max_recv_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub low_watermark: DAT_COUNT,
}

/// Result of `dat_srq_query` (`struct dat_srq_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_SRQ_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub srq_state: DAT_SRQ_STATE,
    pub pz_handle: DAT_PZ_HANDLE,
    pub max_recv_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub low_watermark: DAT_COUNT,
    pub available_dto_count: DAT_COUNT,
    pub outstanding_dto_count: DAT_COUNT,
}

/// `enum dat_srq_param_mask`.
pub type DAT_SRQ_PARAM_MASK = u32;

/// Result of `dat_pz_query` (`struct dat_pz_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_PZ_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
}

/// `enum dat_pz_param_mask`.
pub type DAT_PZ_PARAM_MASK = u32;

/// Result of `dat_psp_query` (`struct dat_psp_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_PSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd_handle: DAT_EVD_HANDLE,
    pub psp_flags: DAT_PSP_FLAGS,
}

/// `enum dat_psp_param_mask`.
pub type DAT_PSP_PARAM_MASK = u32;

/// Result of `dat_rsp_query` (`struct dat_rsp_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_RSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd_handle: DAT_EVD_HANDLE,
    pub ep_handle: DAT_EP_HANDLE,
}

/// `enum dat_rsp_param_mask`.
pub type DAT_RSP_PARAM_MASK = u32;

/// Result of `dat_csp_query` (`struct dat_csp_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_CSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub comm: *mut DAT_COMM,
    pub address_ptr: DAT_IA_ADDRESS_PTR,
    pub evd_handle: DAT_EVD_HANDLE,
}

/// `enum dat_csp_param_mask`.
pub type DAT_CSP_PARAM_MASK = u32;

/// Result of `dat_cr_query` (`struct dat_cr_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_CR_PARAM {
    pub remote_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub remote_port_qual: DAT_PORT_QUAL,
    pub private_data_size: DAT_COUNT,
    pub private_data: DAT_PVOID,
    pub local_ep_handle: DAT_EP_HANDLE,
}

/// `enum dat_cr_param_mask`.
pub type DAT_CR_PARAM_MASK = u32;

// ---------------------------------------------------------------------------
// Events (dat.h)
// ---------------------------------------------------------------------------

/// `enum dat_dto_completion_status`.
pub type DAT_DTO_COMPLETION_STATUS = u32;
/// RMR bind completions reuse the DTO status values.
pub type DAT_RMR_BIND_COMPLETION_STATUS = DAT_DTO_COMPLETION_STATUS;

/// Payload of `DAT_DTO_COMPLETION_EVENT`
/// (`struct dat_dto_completion_event_data`; the C member is spelled
/// `transfered_length`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_DTO_COMPLETION_EVENT_DATA {
    pub ep_handle: DAT_EP_HANDLE,
    pub user_cookie: DAT_DTO_COOKIE,
    pub status: DAT_DTO_COMPLETION_STATUS,
    pub transfered_length: DAT_SEG_LENGTH,
    pub operation: DAT_DTOS,
    pub rmr_context: DAT_RMR_CONTEXT,
}

/// Payload of `DAT_RMR_BIND_COMPLETION_EVENT`
/// (`struct dat_rmr_bind_completion_event_data`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_RMR_BIND_COMPLETION_EVENT_DATA {
    pub rmr_handle: DAT_RMR_HANDLE,
    pub user_cookie: DAT_RMR_COOKIE,
    pub status: DAT_RMR_BIND_COMPLETION_STATUS,
}

/// The service point that received a connection request
/// (`union dat_sp_handle`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_SP_HANDLE {
    pub rsp_handle: DAT_RSP_HANDLE,
    pub psp_handle: DAT_PSP_HANDLE,
    pub csp_handle: DAT_CSP_HANDLE,
}

/// Payload of `DAT_CONNECTION_REQUEST_EVENT`
/// (`struct dat_cr_arrival_event_data`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_CR_ARRIVAL_EVENT_DATA {
    pub sp_handle: DAT_SP_HANDLE,
    pub local_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub conn_qual: DAT_CONN_QUAL,
    pub cr_handle: DAT_CR_HANDLE,
    pub truncate_flag: DAT_BOOLEAN,
}

/// Payload of the `DAT_CONNECTION_EVENT_*` events
/// (`struct dat_connection_event_data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_CONNECTION_EVENT_DATA {
    pub ep_handle: DAT_EP_HANDLE,
    pub private_data_size: DAT_COUNT,
    pub private_data: DAT_PVOID,
}

/// Payload of the `DAT_ASYNC_ERROR_*` events
/// (`struct dat_asynch_error_event_data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_ASYNCH_ERROR_EVENT_DATA {
    pub dat_handle: DAT_HANDLE,
    pub reason: DAT_COUNT,
}

/// `enum ia_async_error_reason`.
pub type DAT_IA_ASYNC_ERROR_REASON = u32;
/// `enum ep_async_error_reason`.
pub type DAT_EP_ASYNC_ERROR_REASON = u32;
/// `enum evd_async_error_reason`.
pub type DAT_EVD_ASYNC_ERROR_REASON = u32;
/// `enum srq_async_error_reason`.
pub type DAT_SRQ_ASYNC_ERROR_REASON = u32;
/// `enum lmr_async_error_reason`.
pub type DAT_LMR_ASYNC_ERROR_REASON = u32;
/// `enum rmr_async_error_reason`.
pub type DAT_RMR_ASYNC_ERROR_REASON = u32;
/// `enum pz_async_error_reason`.
pub type DAT_PZ_ASYNC_ERROR_REASON = u32;

/// Payload of `DAT_SOFTWARE_EVENT` (`struct dat_software_event_data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_SOFTWARE_EVENT_DATA {
    pub pointer: DAT_PVOID,
}

/// `enum dat_event_number`.
pub type DAT_EVENT_NUMBER = u32;

/// Event payload selected by `event_number` (`union dat_event_data`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_EVENT_DATA {
    pub dto_completion_event_data: DAT_DTO_COMPLETION_EVENT_DATA,
    pub rmr_completion_event_data: DAT_RMR_BIND_COMPLETION_EVENT_DATA,
    pub cr_arrival_event_data: DAT_CR_ARRIVAL_EVENT_DATA,
    pub connect_event_data: DAT_CONNECTION_EVENT_DATA,
    pub asynch_error_event_data: DAT_ASYNCH_ERROR_EVENT_DATA,
    pub software_event_data: DAT_SOFTWARE_EVENT_DATA,
}

/// One event as returned by `dat_evd_dequeue` / `dat_evd_wait`
/// (`struct dat_event`). Extensions (see [`DAT_IB_EXTENSION_EVENT_DATA`])
/// store their data in `event_extension_data`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_EVENT {
    pub event_number: DAT_EVENT_NUMBER,
    pub evd_handle: DAT_EVD_HANDLE,
    pub event_data: DAT_EVENT_DATA,
    pub event_extension_data: [DAT_UINT64; 8],
}

/// Registry key of a provider (`struct dat_provider_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_PROVIDER_INFO {
    pub ia_name: [c_char; 256],
    pub dapl_version_major: DAT_UINT32,
    pub dapl_version_minor: DAT_UINT32,
    pub is_thread_safe: DAT_BOOLEAN,
}

/// Operation code of `dat_extension_op` (a plain C `int`).
pub type DAT_EXTENDED_OP = c_int;

// ---------------------------------------------------------------------------
// User-level types (udat.h)
// ---------------------------------------------------------------------------

/// `enum dat_mem_type`.
pub type DAT_MEM_TYPE = u32;
/// `enum dat_handle_type`.
pub type DAT_HANDLE_TYPE = u32;
/// `enum dat_evd_state`.
pub type DAT_EVD_STATE = u32;
/// `enum dat_evd_param_mask`.
pub type DAT_EVD_PARAM_MASK = u32;
pub type DAT_PROVIDER_ATTR_MASK = DAT_UINT64;
/// `enum dat_lmr_param_mask`.
pub type DAT_LMR_PARAM_MASK = u32;

/// Result of `dat_evd_query` (`struct dat_evd_param`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_EVD_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub evd_qlen: DAT_COUNT,
    pub evd_state: DAT_EVD_STATE,
    pub cno_handle: DAT_CNO_HANDLE,
    pub evd_flags: DAT_EVD_FLAGS,
}

/// Pointer to a 40-byte shared-memory cookie (`char (*)[40]`).
pub type DAT_LMR_COOKIE = *mut [c_char; 40];

/// CNO proxy agent callback: `void (*)(DAT_PVOID, DAT_EVD_HANDLE)`.
pub type DAT_AGENT_FUNC = Option<unsafe extern "C" fn(DAT_PVOID, DAT_EVD_HANDLE)>;

/// CNO wait proxy (`struct dat_os_wait_proxy_agent`); passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_OS_WAIT_PROXY_AGENT {
    pub instance_data: DAT_PVOID,
    pub proxy_agent_func: DAT_AGENT_FUNC,
}

/// Shared-memory region description (`struct dat_shared_memory`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_SHARED_MEMORY {
    pub virtual_address: DAT_PVOID,
    pub shared_memory_id: DAT_LMR_COOKIE,
}

/// What `dat_lmr_create` registers, selected by the memory type
/// (`union dat_region_description`); passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_REGION_DESCRIPTION {
    pub for_va: DAT_PVOID,
    pub for_lmr_handle: DAT_LMR_HANDLE,
    pub for_shared_memory: DAT_SHARED_MEMORY,
}

/// Result of `dat_lmr_query` (`struct dat_lmr_param`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_LMR_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub mem_type: DAT_MEM_TYPE,
    pub region_desc: DAT_REGION_DESCRIPTION,
    pub length: DAT_VLEN,
    pub pz_handle: DAT_PZ_HANDLE,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub va_type: DAT_VA_TYPE,
    pub lmr_context: DAT_LMR_CONTEXT,
    pub rmr_context: DAT_RMR_CONTEXT,
    pub registered_size: DAT_VLEN,
    pub registered_address: DAT_VADDR,
}

/// `enum dat_proxy_type`.
pub type DAT_PROXY_TYPE = u32;

/// The `proxy` member of [`DAT_CNO_PARAM`] (an unnamed union in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_CNO_PARAM_PROXY {
    pub agent: DAT_OS_WAIT_PROXY_AGENT,
    pub fd: DAT_FD,
    pub none: DAT_PVOID,
}

/// Result of `dat_cno_query` (`struct dat_cno_param`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_CNO_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub proxy_type: DAT_PROXY_TYPE,
    pub proxy: DAT_CNO_PARAM_PROXY,
}

/// `enum dat_cno_param_mask`.
pub type DAT_CNO_PARAM_MASK = u32;

/// Interface adapter attributes returned by `dat_ia_query`
/// (`struct dat_ia_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_IA_ATTR {
    pub adapter_name: [c_char; 256],
    pub vendor_name: [c_char; 256],
    pub hardware_version_major: DAT_UINT32,
    pub hardware_version_minor: DAT_UINT32,
    pub firmware_version_major: DAT_UINT32,
    pub firmware_version_minor: DAT_UINT32,
    pub ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub max_eps: DAT_COUNT,
    pub max_dto_per_ep: DAT_COUNT,
    pub max_rdma_read_per_ep_in: DAT_COUNT,
    pub max_rdma_read_per_ep_out: DAT_COUNT,
    pub max_evds: DAT_COUNT,
    pub max_evd_qlen: DAT_COUNT,
    pub max_iov_segments_per_dto: DAT_COUNT,
    pub max_lmrs: DAT_COUNT,
    pub max_lmr_block_size: DAT_SEG_LENGTH,
    pub max_lmr_virtual_address: DAT_VADDR,
    pub max_pzs: DAT_COUNT,
    pub max_message_size: DAT_SEG_LENGTH,
    pub max_rdma_size: DAT_SEG_LENGTH,
    pub max_rmrs: DAT_COUNT,
    pub max_rmr_target_address: DAT_VADDR,
    pub max_srqs: DAT_COUNT,
    pub max_ep_per_srq: DAT_COUNT,
    pub max_recv_per_srq: DAT_COUNT,
    pub max_iov_segments_per_rdma_read: DAT_COUNT,
    pub max_iov_segments_per_rdma_write: DAT_COUNT,
    pub max_rdma_read_in: DAT_COUNT,
    pub max_rdma_read_out: DAT_COUNT,
    pub max_rdma_read_per_ep_in_guaranteed: DAT_BOOLEAN,
    pub max_rdma_read_per_ep_out_guaranteed: DAT_BOOLEAN,
    pub zb_supported: DAT_BOOLEAN,
    pub extension_supported: DAT_EXTENSION,
    pub extension_version: DAT_COUNT,
    pub num_transport_attr: DAT_COUNT,
    pub transport_attr: *mut DAT_NAMED_ATTR,
    pub num_vendor_attr: DAT_COUNT,
    pub vendor_attr: *mut DAT_NAMED_ATTR,
}

/// `enum dat_pz_support`.
pub type DAT_PZ_SUPPORT = u32;

/// Provider attributes returned by `dat_ia_query`
/// (`struct dat_provider_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_PROVIDER_ATTR {
    pub provider_name: [c_char; 256],
    pub provider_version_major: DAT_UINT32,
    pub provider_version_minor: DAT_UINT32,
    pub dapl_version_major: DAT_UINT32,
    pub dapl_version_minor: DAT_UINT32,
    pub lmr_mem_types_supported: DAT_MEM_TYPE,
    pub iov_ownership_on_return: DAT_IOV_OWNERSHIP,
    pub dat_qos_supported: DAT_QOS,
    pub completion_flags_supported: DAT_COMPLETION_FLAGS,
    pub is_thread_safe: DAT_BOOLEAN,
    pub max_private_data_size: DAT_COUNT,
    pub supports_multipath: DAT_BOOLEAN,
    pub ep_creator: DAT_EP_CREATOR_FOR_PSP,
    pub pz_support: DAT_PZ_SUPPORT,
    pub optimal_buffer_alignment: DAT_UINT32,
    pub evd_stream_merging_supported: [[DAT_BOOLEAN; 6]; 6],
    pub srq_supported: DAT_BOOLEAN,
    pub srq_watermarks_supported: DAT_COUNT,
    pub srq_ep_pz_difference_supported: DAT_BOOLEAN,
    pub srq_info_supported: DAT_COUNT,
    pub ep_recv_info_supported: DAT_COUNT,
    pub lmr_sync_req: DAT_BOOLEAN,
    pub dto_async_return_guaranteed: DAT_BOOLEAN,
    pub rdma_write_for_rdma_read_req: DAT_BOOLEAN,
    pub rdma_read_lmr_rmr_context_exposure: DAT_BOOLEAN,
    pub rmr_scope_supported: DAT_RMR_SCOPE,
    pub is_signal_safe: DAT_BOOLEAN,
    pub ha_supported: DAT_BOOLEAN,
    pub ha_loadbalancing: DAT_HA_LB,
    pub num_provider_specific_attr: DAT_COUNT,
    pub provider_specific_attr: *mut DAT_NAMED_ATTR,
}

// ---------------------------------------------------------------------------
// Registry (dat_registry.h)
// ---------------------------------------------------------------------------

/// `dat_provider_init(info, instance_data)` exported by a provider library.
pub type DAT_PROVIDER_INIT_FUNC = Option<unsafe extern "C" fn(*const DAT_PROVIDER_INFO, *const c_char)>;
/// `dat_provider_fini(info)` exported by a provider library.
pub type DAT_PROVIDER_FINI_FUNC = Option<unsafe extern "C" fn(*const DAT_PROVIDER_INFO)>;
/// `enum dat_ha_relationship`.
pub type DAT_HA_RELATIONSHIP = u32;

// ---------------------------------------------------------------------------
// InfiniBand extensions (dat_ib_extensions.h)
// ---------------------------------------------------------------------------

pub type DAT_IB_COLLECTIVE_HANDLE = DAT_HANDLE;
/// `enum dat_ib_event_number`.
pub type DAT_IB_EVENT_NUMBER = u32;
/// `enum dat_ib_op`.
pub type DAT_IB_OP = u32;
/// `enum dat_ib_ext_type`.
pub type DAT_IB_EXT_TYPE = u32;
/// `enum dat_ib_status`.
pub type DAT_IB_STATUS = u32;
/// `enum dat_ib_return`.
pub type DAT_IB_RETURN = u32;
/// `enum dat_ib_dtos`.
pub type DAT_IB_DTOS = u32;
/// `enum dat_ib_handle_type`.
pub type DAT_IB_HANDLE_TYPE = u32;
/// `enum dat_ib_evd_extension_flags`.
pub type DAT_IB_EVD_EXTENSION_FLAGS = u32;
/// `enum dat_ib_mem_priv_flags`.
pub type DAT_IB_MEM_PRIV_FLAGS = u32;
/// `enum dat_ib_service_type`.
pub type DAT_IB_SERVICE_TYPE = u32;
/// `enum dat_ia_counters`.
pub type DAT_IA_COUNTERS = u32;
/// `enum dat_ep_counters`.
pub type DAT_EP_COUNTERS = u32;
/// `enum dat_evd_counters`.
pub type DAT_EVD_COUNTERS = u32;
/// `enum dat_ia_counter_type`.
pub type DAT_IA_COUNTER_TYPE = u32;
/// `enum dat_ib_collective_data_type`.
pub type DAT_IB_COLLECTIVE_DATA_TYPE = u32;
/// `enum dat_ib_collective_reduce_data_op`.
pub type DAT_IB_COLLECTIVE_REDUCE_DATA_OP = u32;
pub type DAT_IB_COLLECTIVE_RANK = c_uint;
pub type DAT_IB_COLLECTIVE_ID = c_uint;
pub type DAT_IB_COLLECTIVE_MEMBER = *mut c_void;

/// Unreliable-datagram address handle (`struct dat_ib_addr_handle`).
/// `ah` points to a verbs `struct ibv_ah`, opaque here.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_ADDR_HANDLE {
    pub ah: *mut c_void,
    pub qpn: DAT_UINT32,
    pub ia_addr: DAT_SOCK_ADDR6,
}

/// Immediate data of an RDMA write or receive (`struct dat_ib_immed_data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_IB_IMMED_DATA {
    pub data: DAT_UINT32,
}

/// Collective completion payload (`struct dat_ib_collective_event_data`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_COLLECTIVE_EVENT_DATA {
    pub handle: DAT_HANDLE,
    pub context: DAT_CONTEXT,
}

/// The `val` member of [`DAT_IB_EXTENSION_EVENT_DATA`] (an unnamed union
/// type in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_IB_EXTENSION_EVENT_VAL {
    pub immed: DAT_IB_IMMED_DATA,
}

/// The anonymous union of [`DAT_IB_EXTENSION_EVENT_DATA`]. C code names its
/// members directly (`ext->remote_ah`); in Rust they are reached through the
/// member `u` (`ext.u.remote_ah`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_IB_EXTENSION_EVENT_U {
    pub remote_ah: DAT_IB_ADDR_HANDLE,
    pub coll: DAT_IB_COLLECTIVE_EVENT_DATA,
}

/// IB extension data carried in `DAT_EVENT::event_extension_data`
/// (`struct dat_ib_extension_event_data`, exactly 64 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_EXTENSION_EVENT_DATA {
    pub r#type: DAT_IB_EXT_TYPE,
    pub status: DAT_IB_STATUS,
    pub val: DAT_IB_EXTENSION_EVENT_VAL,
    /// Unnamed in C: holds `remote_ah` or `coll`.
    pub u: DAT_IB_EXTENSION_EVENT_U,
    pub context: DAT_CONTEXT,
}

/// Group description for the collective extension
/// (`struct dat_ib_collective_group`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DAT_IB_COLLECTIVE_GROUP {
    pub local_size: c_int,
    pub local_rank: c_int,
    pub local_ranks: *mut c_int,
    pub external_size: c_int,
    pub external_rank: c_int,
    pub external_ranks: *mut c_int,
    pub intranode_table: *mut c_int,
    pub internode_table: *mut c_int,
    pub is_comm_world: c_int,
}

plain_c_data!(
    DAT_COMM,
    DAT_NAMED_ATTR,
    DAT_CONTEXT,
    DAT_LMR_TRIPLET,
    DAT_RMR_TRIPLET,
    DAT_RMR_PARAM,
    DAT_EP_ATTR,
    DAT_EP_PARAM,
    DAT_SRQ_ATTR,
    DAT_SRQ_PARAM,
    DAT_PZ_PARAM,
    DAT_PSP_PARAM,
    DAT_RSP_PARAM,
    DAT_CSP_PARAM,
    DAT_CR_PARAM,
    DAT_DTO_COMPLETION_EVENT_DATA,
    DAT_RMR_BIND_COMPLETION_EVENT_DATA,
    DAT_SP_HANDLE,
    DAT_CR_ARRIVAL_EVENT_DATA,
    DAT_CONNECTION_EVENT_DATA,
    DAT_ASYNCH_ERROR_EVENT_DATA,
    DAT_SOFTWARE_EVENT_DATA,
    DAT_EVENT_DATA,
    DAT_EVENT,
    DAT_PROVIDER_INFO,
    DAT_EVD_PARAM,
    DAT_OS_WAIT_PROXY_AGENT,
    DAT_SHARED_MEMORY,
    DAT_REGION_DESCRIPTION,
    DAT_LMR_PARAM,
    DAT_CNO_PARAM_PROXY,
    DAT_CNO_PARAM,
    DAT_IA_ATTR,
    DAT_PROVIDER_ATTR,
    DAT_IB_ADDR_HANDLE,
    DAT_IB_IMMED_DATA,
    DAT_IB_COLLECTIVE_EVENT_DATA,
    DAT_IB_EXTENSION_EVENT_VAL,
    DAT_IB_EXTENSION_EVENT_U,
    DAT_IB_EXTENSION_EVENT_DATA,
    DAT_IB_COLLECTIVE_GROUP,
);

// ---------------------------------------------------------------------------
// Layout checks (numbers measured with gcc on x86_64 against the installed
// DAT 2.0 headers)
// ---------------------------------------------------------------------------

layout!(DAT_COMM, size 12, align 4, {
    domain @ 0,
    r#type @ 4,
    protocol @ 8,
});

layout!(DAT_NAMED_ATTR, size 16, align 8, {
    name @ 0,
    value @ 8,
});

layout!(DAT_CONTEXT, size 8, align 8, {
    as_ptr @ 0,
    as_64 @ 0,
    as_index @ 0,
});

layout!(DAT_LMR_TRIPLET, size 16, align 8, {
    virtual_address @ 0,
    segment_length @ 8,
    lmr_context @ 12,
});

layout!(DAT_RMR_TRIPLET, size 16, align 8, {
    virtual_address @ 0,
    segment_length @ 8,
    rmr_context @ 12,
});

layout!(DAT_RMR_PARAM, size 48, align 8, {
    ia_handle @ 0,
    pz_handle @ 8,
    lmr_triplet @ 16,
    mem_priv @ 32,
    rmr_context @ 36,
    rmr_scope @ 40,
    va_type @ 44,
});

layout!(DAT_EP_ATTR, size 88, align 8, {
    service_type @ 0,
    max_message_size @ 4,
    max_rdma_size @ 8,
    qos @ 12,
    recv_completion_flags @ 16,
    request_completion_flags @ 20,
    max_recv_dtos @ 24,
    max_request_dtos @ 28,
    max_recv_iov @ 32,
    max_request_iov @ 36,
    max_rdma_read_in @ 40,
    max_rdma_read_out @ 44,
    srq_soft_hw @ 48,
    max_rdma_read_iov @ 52,
    max_rdma_write_iov @ 56,
    ep_transport_specific_count @ 60,
    ep_transport_specific @ 64,
    ep_provider_specific_count @ 72,
    ep_provider_specific @ 80,
});

layout!(DAT_EP_PARAM, size 184, align 8, {
    ia_handle @ 0,
    ep_state @ 8,
    comm @ 12,
    local_ia_address_ptr @ 24,
    local_port_qual @ 32,
    remote_ia_address_ptr @ 40,
    remote_port_qual @ 48,
    pz_handle @ 56,
    recv_evd_handle @ 64,
    request_evd_handle @ 72,
    connect_evd_handle @ 80,
    srq_handle @ 88,
    ep_attr @ 96,
});

layout!(DAT_SRQ_ATTR, size 12, align 4, {
    max_recv_dtos @ 0,
    max_recv_iov @ 4,
    low_watermark @ 8,
});

layout!(DAT_SRQ_PARAM, size 48, align 8, {
    ia_handle @ 0,
    srq_state @ 8,
    pz_handle @ 16,
    max_recv_dtos @ 24,
    max_recv_iov @ 28,
    low_watermark @ 32,
    available_dto_count @ 36,
    outstanding_dto_count @ 40,
});

layout!(DAT_PZ_PARAM, size 8, align 8, {
    ia_handle @ 0,
});

layout!(DAT_PSP_PARAM, size 32, align 8, {
    ia_handle @ 0,
    conn_qual @ 8,
    evd_handle @ 16,
    psp_flags @ 24,
});

layout!(DAT_RSP_PARAM, size 32, align 8, {
    ia_handle @ 0,
    conn_qual @ 8,
    evd_handle @ 16,
    ep_handle @ 24,
});

layout!(DAT_CSP_PARAM, size 32, align 8, {
    ia_handle @ 0,
    comm @ 8,
    address_ptr @ 16,
    evd_handle @ 24,
});

layout!(DAT_CR_PARAM, size 40, align 8, {
    remote_ia_address_ptr @ 0,
    remote_port_qual @ 8,
    private_data_size @ 16,
    private_data @ 24,
    local_ep_handle @ 32,
});

layout!(DAT_DTO_COMPLETION_EVENT_DATA, size 32, align 8, {
    ep_handle @ 0,
    user_cookie @ 8,
    status @ 16,
    transfered_length @ 20,
    operation @ 24,
    rmr_context @ 28,
});

layout!(DAT_RMR_BIND_COMPLETION_EVENT_DATA, size 24, align 8, {
    rmr_handle @ 0,
    user_cookie @ 8,
    status @ 16,
});

layout!(DAT_SP_HANDLE, size 8, align 8, {
    rsp_handle @ 0,
    psp_handle @ 0,
    csp_handle @ 0,
});

layout!(DAT_CR_ARRIVAL_EVENT_DATA, size 40, align 8, {
    sp_handle @ 0,
    local_ia_address_ptr @ 8,
    conn_qual @ 16,
    cr_handle @ 24,
    truncate_flag @ 32,
});

layout!(DAT_CONNECTION_EVENT_DATA, size 24, align 8, {
    ep_handle @ 0,
    private_data_size @ 8,
    private_data @ 16,
});

layout!(DAT_ASYNCH_ERROR_EVENT_DATA, size 16, align 8, {
    dat_handle @ 0,
    reason @ 8,
});

layout!(DAT_SOFTWARE_EVENT_DATA, size 8, align 8, {
    pointer @ 0,
});

layout!(DAT_EVENT_DATA, size 40, align 8, {
    dto_completion_event_data @ 0,
    rmr_completion_event_data @ 0,
    cr_arrival_event_data @ 0,
    connect_event_data @ 0,
    asynch_error_event_data @ 0,
    software_event_data @ 0,
});

layout!(DAT_EVENT, size 120, align 8, {
    event_number @ 0,
    evd_handle @ 8,
    event_data @ 16,
    event_extension_data @ 56,
});

layout!(DAT_PROVIDER_INFO, size 268, align 4, {
    ia_name @ 0,
    dapl_version_major @ 256,
    dapl_version_minor @ 260,
    is_thread_safe @ 264,
});

layout!(DAT_EVD_PARAM, size 32, align 8, {
    ia_handle @ 0,
    evd_qlen @ 8,
    evd_state @ 12,
    cno_handle @ 16,
    evd_flags @ 24,
});

layout!(DAT_OS_WAIT_PROXY_AGENT, size 16, align 8, {
    instance_data @ 0,
    proxy_agent_func @ 8,
});

layout!(DAT_SHARED_MEMORY, size 16, align 8, {
    virtual_address @ 0,
    shared_memory_id @ 8,
});

layout!(DAT_REGION_DESCRIPTION, size 16, align 8, {
    for_va @ 0,
    for_lmr_handle @ 0,
    for_shared_memory @ 0,
});

layout!(DAT_LMR_PARAM, size 80, align 8, {
    ia_handle @ 0,
    mem_type @ 8,
    region_desc @ 16,
    length @ 32,
    pz_handle @ 40,
    mem_priv @ 48,
    va_type @ 52,
    lmr_context @ 56,
    rmr_context @ 60,
    registered_size @ 64,
    registered_address @ 72,
});

layout!(DAT_CNO_PARAM_PROXY, size 16, align 8, {
    agent @ 0,
    fd @ 0,
    none @ 0,
});

layout!(DAT_CNO_PARAM, size 32, align 8, {
    ia_handle @ 0,
    proxy_type @ 8,
    proxy @ 16,
});

layout!(DAT_IA_ATTR, size 688, align 8, {
    adapter_name @ 0,
    vendor_name @ 256,
    hardware_version_major @ 512,
    hardware_version_minor @ 516,
    firmware_version_major @ 520,
    firmware_version_minor @ 524,
    ia_address_ptr @ 528,
    max_eps @ 536,
    max_dto_per_ep @ 540,
    max_rdma_read_per_ep_in @ 544,
    max_rdma_read_per_ep_out @ 548,
    max_evds @ 552,
    max_evd_qlen @ 556,
    max_iov_segments_per_dto @ 560,
    max_lmrs @ 564,
    max_lmr_block_size @ 568,
    max_lmr_virtual_address @ 576,
    max_pzs @ 584,
    max_message_size @ 588,
    max_rdma_size @ 592,
    max_rmrs @ 596,
    max_rmr_target_address @ 600,
    max_srqs @ 608,
    max_ep_per_srq @ 612,
    max_recv_per_srq @ 616,
    max_iov_segments_per_rdma_read @ 620,
    max_iov_segments_per_rdma_write @ 624,
    max_rdma_read_in @ 628,
    max_rdma_read_out @ 632,
    max_rdma_read_per_ep_in_guaranteed @ 636,
    max_rdma_read_per_ep_out_guaranteed @ 640,
    zb_supported @ 644,
    extension_supported @ 648,
    extension_version @ 652,
    num_transport_attr @ 656,
    transport_attr @ 664,
    num_vendor_attr @ 672,
    vendor_attr @ 680,
});

layout!(DAT_PROVIDER_ATTR, size 520, align 8, {
    provider_name @ 0,
    provider_version_major @ 256,
    provider_version_minor @ 260,
    dapl_version_major @ 264,
    dapl_version_minor @ 268,
    lmr_mem_types_supported @ 272,
    iov_ownership_on_return @ 276,
    dat_qos_supported @ 280,
    completion_flags_supported @ 284,
    is_thread_safe @ 288,
    max_private_data_size @ 292,
    supports_multipath @ 296,
    ep_creator @ 300,
    pz_support @ 304,
    optimal_buffer_alignment @ 308,
    evd_stream_merging_supported @ 312,
    srq_supported @ 456,
    srq_watermarks_supported @ 460,
    srq_ep_pz_difference_supported @ 464,
    srq_info_supported @ 468,
    ep_recv_info_supported @ 472,
    lmr_sync_req @ 476,
    dto_async_return_guaranteed @ 480,
    rdma_write_for_rdma_read_req @ 484,
    rdma_read_lmr_rmr_context_exposure @ 488,
    rmr_scope_supported @ 492,
    is_signal_safe @ 496,
    ha_supported @ 500,
    ha_loadbalancing @ 504,
    num_provider_specific_attr @ 508,
    provider_specific_attr @ 512,
});

layout!(DAT_IB_ADDR_HANDLE, size 40, align 8, {
    ah @ 0,
    qpn @ 8,
    ia_addr @ 12,
});

layout!(DAT_IB_IMMED_DATA, size 4, align 4, {
    data @ 0,
});

layout!(DAT_IB_COLLECTIVE_EVENT_DATA, size 16, align 8, {
    handle @ 0,
    context @ 8,
});

layout!(DAT_IB_EXTENSION_EVENT_VAL, size 4, align 4, {
    immed @ 0,
});

layout!(DAT_IB_EXTENSION_EVENT_U, size 40, align 8, {
    remote_ah @ 0,
    coll @ 0,
});

layout!(DAT_IB_EXTENSION_EVENT_DATA, size 64, align 8, {
    r#type @ 0,
    status @ 4,
    val @ 8,
    u @ 16,
    context @ 56,
});

layout!(DAT_IB_COLLECTIVE_GROUP, size 56, align 8, {
    local_size @ 0,
    local_rank @ 4,
    local_ranks @ 8,
    external_size @ 16,
    external_rank @ 20,
    external_ranks @ 24,
    intranode_table @ 32,
    internode_table @ 40,
    is_comm_world @ 48,
});
