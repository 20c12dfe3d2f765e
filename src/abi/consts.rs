//! Integer constants of the DAT 2.0 ABI: every enumeration constant and
//! every integer (and a few string) macro of the user-level headers, with the
//! C names and values of the installed x86_64 Linux headers.
//!
//! Enumeration constants carry the type alias of their enumeration from
//! `super::types` (all `u32`), except return code types and subtypes, which
//! are typed `DAT_RETURN` so they can be or-ed into return codes directly.

#![allow(dead_code)]

use core::ffi::{c_int, CStr};

use super::types::*;

/// Builds an error return code: `DAT_CLASS_ERROR | type_ | subtype`.
pub const fn dat_error(type_: DAT_RETURN, subtype: DAT_RETURN) -> DAT_RETURN {
    DAT_CLASS_ERROR | type_ | subtype
}

/// The type part (`DAT_TYPE_MASK` bits) of a return code.
pub const fn dat_get_type(r: DAT_RETURN) -> DAT_RETURN {
    r & DAT_TYPE_MASK
}

/// The subtype part (`DAT_SUBTYPE_MASK` bits) of a return code.
pub const fn dat_get_subtype(r: DAT_RETURN) -> DAT_RETURN {
    r & DAT_SUBTYPE_MASK
}

/// True if the return code has the warning class bit set.
pub const fn dat_is_warning(r: DAT_RETURN) -> bool {
    r & DAT_CLASS_WARNING != 0
}

// ---------------------------------------------------------------------------
// `DAT_RETURN_TYPE`: Return code types (bits 16..29 of a `DAT_RETURN`).
// ---------------------------------------------------------------------------

pub const DAT_SUCCESS: DAT_RETURN = 0x00000000;
pub const DAT_ABORT: DAT_RETURN = 0x00010000;
pub const DAT_CONN_QUAL_IN_USE: DAT_RETURN = 0x00020000;
pub const DAT_INSUFFICIENT_RESOURCES: DAT_RETURN = 0x00030000;
pub const DAT_INTERNAL_ERROR: DAT_RETURN = 0x00040000;
pub const DAT_INVALID_HANDLE: DAT_RETURN = 0x00050000;
pub const DAT_INVALID_PARAMETER: DAT_RETURN = 0x00060000;
pub const DAT_INVALID_STATE: DAT_RETURN = 0x00070000;
pub const DAT_LENGTH_ERROR: DAT_RETURN = 0x00080000;
pub const DAT_MODEL_NOT_SUPPORTED: DAT_RETURN = 0x00090000;
pub const DAT_PROVIDER_NOT_FOUND: DAT_RETURN = 0x000a0000;
pub const DAT_PRIVILEGES_VIOLATION: DAT_RETURN = 0x000b0000;
pub const DAT_PROTECTION_VIOLATION: DAT_RETURN = 0x000c0000;
pub const DAT_QUEUE_EMPTY: DAT_RETURN = 0x000d0000;
pub const DAT_QUEUE_FULL: DAT_RETURN = 0x000e0000;
pub const DAT_TIMEOUT_EXPIRED: DAT_RETURN = 0x000f0000;
pub const DAT_PROVIDER_ALREADY_REGISTERED: DAT_RETURN = 0x00100000;
pub const DAT_PROVIDER_IN_USE: DAT_RETURN = 0x00110000;
pub const DAT_INVALID_ADDRESS: DAT_RETURN = 0x00120000;
pub const DAT_INTERRUPTED_CALL: DAT_RETURN = 0x00130000;
pub const DAT_CONN_QUAL_UNAVAILABLE: DAT_RETURN = 0x00140000;
pub const DAT_RESERVED_LMR: DAT_RETURN = 0x00150000;
pub const DAT_PORT_IN_USE: DAT_RETURN = 0x00160000;
pub const DAT_COMM_NOT_SUPPORTED: DAT_RETURN = 0x00170000;
pub const DAT_EXTENSION_BASE: DAT_RETURN = 0x10000000;
pub const DAT_NOT_IMPLEMENTED: DAT_RETURN = 0x3fff0000;

// ---------------------------------------------------------------------------
// `DAT_RETURN_SUBTYPE`: Return code subtypes (bits 0..15 of a `DAT_RETURN`).
// ---------------------------------------------------------------------------

pub const DAT_NO_SUBTYPE: DAT_RETURN = 0;
pub const DAT_SUB_INTERRUPTED: DAT_RETURN = 1;
pub const DAT_RESOURCE_MEMORY: DAT_RETURN = 2;
pub const DAT_RESOURCE_DEVICE: DAT_RETURN = 3;
pub const DAT_RESOURCE_TEP: DAT_RETURN = 4;
pub const DAT_RESOURCE_TEVD: DAT_RETURN = 5;
pub const DAT_RESOURCE_PROTECTION_DOMAIN: DAT_RETURN = 6;
pub const DAT_RESOURCE_MEMORY_REGION: DAT_RETURN = 7;
pub const DAT_RESOURCE_ERROR_HANDLER: DAT_RETURN = 8;
pub const DAT_RESOURCE_CREDITS: DAT_RETURN = 9;
pub const DAT_RESOURCE_SRQ: DAT_RETURN = 10;
pub const DAT_INVALID_HANDLE_IA: DAT_RETURN = 11;
pub const DAT_INVALID_HANDLE_EP: DAT_RETURN = 12;
pub const DAT_INVALID_HANDLE_LMR: DAT_RETURN = 13;
pub const DAT_INVALID_HANDLE_RMR: DAT_RETURN = 14;
pub const DAT_INVALID_HANDLE_PZ: DAT_RETURN = 15;
pub const DAT_INVALID_HANDLE_PSP: DAT_RETURN = 16;
pub const DAT_INVALID_HANDLE_RSP: DAT_RETURN = 17;
pub const DAT_INVALID_HANDLE_CR: DAT_RETURN = 18;
pub const DAT_INVALID_HANDLE_CNO: DAT_RETURN = 19;
pub const DAT_INVALID_HANDLE_EVD_CR: DAT_RETURN = 20;
pub const DAT_INVALID_HANDLE_EVD_REQUEST: DAT_RETURN = 21;
pub const DAT_INVALID_HANDLE_EVD_RECV: DAT_RETURN = 22;
pub const DAT_INVALID_HANDLE_EVD_CONN: DAT_RETURN = 23;
pub const DAT_INVALID_HANDLE_EVD_ASYNC: DAT_RETURN = 24;
pub const DAT_INVALID_HANDLE_SRQ: DAT_RETURN = 25;
pub const DAT_INVALID_HANDLE_CSP: DAT_RETURN = 26;
pub const DAT_INVALID_HANDLE1: DAT_RETURN = 27;
pub const DAT_INVALID_HANDLE2: DAT_RETURN = 28;
pub const DAT_INVALID_HANDLE3: DAT_RETURN = 29;
pub const DAT_INVALID_HANDLE4: DAT_RETURN = 30;
pub const DAT_INVALID_HANDLE5: DAT_RETURN = 31;
pub const DAT_INVALID_HANDLE6: DAT_RETURN = 32;
pub const DAT_INVALID_HANDLE7: DAT_RETURN = 33;
pub const DAT_INVALID_HANDLE8: DAT_RETURN = 34;
pub const DAT_INVALID_HANDLE9: DAT_RETURN = 35;
pub const DAT_INVALID_HANDLE10: DAT_RETURN = 36;
pub const DAT_INVALID_ARG1: DAT_RETURN = 37;
pub const DAT_INVALID_ARG2: DAT_RETURN = 38;
pub const DAT_INVALID_ARG3: DAT_RETURN = 39;
pub const DAT_INVALID_ARG4: DAT_RETURN = 40;
pub const DAT_INVALID_ARG5: DAT_RETURN = 41;
pub const DAT_INVALID_ARG6: DAT_RETURN = 42;
pub const DAT_INVALID_ARG7: DAT_RETURN = 43;
pub const DAT_INVALID_ARG8: DAT_RETURN = 44;
pub const DAT_INVALID_ARG9: DAT_RETURN = 45;
pub const DAT_INVALID_ARG10: DAT_RETURN = 46;
pub const DAT_INVALID_STATE_EP_UNCONNECTED: DAT_RETURN = 47;
pub const DAT_INVALID_STATE_EP_ACTCONNPENDING: DAT_RETURN = 48;
pub const DAT_INVALID_STATE_EP_PASSCONNPENDING: DAT_RETURN = 49;
pub const DAT_INVALID_STATE_EP_TENTCONNPENDING: DAT_RETURN = 50;
pub const DAT_INVALID_STATE_EP_CONNECTED: DAT_RETURN = 51;
pub const DAT_INVALID_STATE_EP_DISCONNECTED: DAT_RETURN = 52;
pub const DAT_INVALID_STATE_EP_RESERVED: DAT_RETURN = 53;
pub const DAT_INVALID_STATE_EP_COMPLPENDING: DAT_RETURN = 54;
pub const DAT_INVALID_STATE_EP_DISCPENDING: DAT_RETURN = 55;
pub const DAT_INVALID_STATE_EP_PROVIDERCONTROL: DAT_RETURN = 56;
pub const DAT_INVALID_STATE_EP_NOTREADY: DAT_RETURN = 57;
pub const DAT_INVALID_STATE_EP_RECV_WATERMARK: DAT_RETURN = 58;
pub const DAT_INVALID_STATE_EP_PZ: DAT_RETURN = 59;
pub const DAT_INVALID_STATE_EP_EVD_REQUEST: DAT_RETURN = 60;
pub const DAT_INVALID_STATE_EP_EVD_RECV: DAT_RETURN = 61;
pub const DAT_INVALID_STATE_EP_EVD_CONNECT: DAT_RETURN = 62;
pub const DAT_INVALID_STATE_EP_UNCONFIGURED: DAT_RETURN = 63;
pub const DAT_INVALID_STATE_EP_UNCONFRESERVED: DAT_RETURN = 64;
pub const DAT_INVALID_STATE_EP_UNCONFPASSIVE: DAT_RETURN = 65;
pub const DAT_INVALID_STATE_EP_UNCONFTENTATIVE: DAT_RETURN = 66;
pub const DAT_INVALID_STATE_CNO_IN_USE: DAT_RETURN = 67;
pub const DAT_INVALID_STATE_CNO_DEAD: DAT_RETURN = 68;
pub const DAT_INVALID_STATE_EVD_OPEN: DAT_RETURN = 69;
pub const DAT_INVALID_STATE_EVD_ENABLED: DAT_RETURN = 70;
pub const DAT_INVALID_STATE_EVD_DISABLED: DAT_RETURN = 71;
pub const DAT_INVALID_STATE_EVD_WAITABLE: DAT_RETURN = 72;
pub const DAT_INVALID_STATE_EVD_UNWAITABLE: DAT_RETURN = 73;
pub const DAT_INVALID_STATE_EVD_IN_USE: DAT_RETURN = 74;
pub const DAT_INVALID_STATE_EVD_CONFIG_NOTIFY: DAT_RETURN = 75;
pub const DAT_INVALID_STATE_EVD_CONFIG_SOLICITED: DAT_RETURN = 76;
pub const DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD: DAT_RETURN = 77;
pub const DAT_INVALID_STATE_EVD_WAITER: DAT_RETURN = 78;
pub const DAT_INVALID_STATE_EVD_ASYNC: DAT_RETURN = 79;
pub const DAT_INVALID_STATE_IA_IN_USE: DAT_RETURN = 80;
pub const DAT_INVALID_STATE_LMR_IN_USE: DAT_RETURN = 81;
pub const DAT_INVALID_STATE_LMR_FREE: DAT_RETURN = 82;
pub const DAT_INVALID_STATE_PZ_IN_USE: DAT_RETURN = 83;
pub const DAT_INVALID_STATE_PZ_FREE: DAT_RETURN = 84;
pub const DAT_INVALID_STATE_SRQ_OPERATIONAL: DAT_RETURN = 85;
pub const DAT_INVALID_STATE_SRQ_ERROR: DAT_RETURN = 86;
pub const DAT_INVALID_STATE_SRQ_IN_USE: DAT_RETURN = 87;
pub const DAT_INVALID_STATE_SRQ_SHUTDOWN: DAT_RETURN = 88;
pub const DAT_PRIVILEGES_READ: DAT_RETURN = 89;
pub const DAT_PRIVILEGES_WRITE: DAT_RETURN = 90;
pub const DAT_PRIVILEGES_RDMA_READ: DAT_RETURN = 91;
pub const DAT_PRIVILEGES_RDMA_WRITE: DAT_RETURN = 92;
pub const DAT_PROTECTION_READ: DAT_RETURN = 93;
pub const DAT_PROTECTION_WRITE: DAT_RETURN = 94;
pub const DAT_PROTECTION_RDMA_READ: DAT_RETURN = 95;
pub const DAT_PROTECTION_RDMA_WRITE: DAT_RETURN = 96;
pub const DAT_INVALID_ADDRESS_UNSUPPORTED: DAT_RETURN = 97;
pub const DAT_INVALID_ADDRESS_UNREACHABLE: DAT_RETURN = 98;
pub const DAT_INVALID_ADDRESS_MALFORMED: DAT_RETURN = 99;
pub const DAT_NAME_NOT_REGISTERED: DAT_RETURN = 100;
pub const DAT_MAJOR_NOT_FOUND: DAT_RETURN = 101;
pub const DAT_MINOR_NOT_FOUND: DAT_RETURN = 102;
pub const DAT_THREAD_SAFETY_NOT_FOUND: DAT_RETURN = 103;

// ---------------------------------------------------------------------------
// Return code classes and masks
// ---------------------------------------------------------------------------

pub const DAT_CLASS_ERROR: DAT_RETURN = 0x80000000;
pub const DAT_CLASS_WARNING: DAT_RETURN = 0x40000000;
pub const DAT_CLASS_SUCCESS: DAT_RETURN = 0x00000000;
pub const DAT_TYPE_MASK: DAT_RETURN = 0x3fff0000;
pub const DAT_SUBTYPE_MASK: DAT_RETURN = 0x0000ffff;
pub const DAT_NAME_NOT_FOUND: DAT_RETURN = DAT_PROVIDER_NOT_FOUND;

// ---------------------------------------------------------------------------
// `DAT_MEM_TYPE`: Memory types accepted by `dat_lmr_create`.
// ---------------------------------------------------------------------------

pub const DAT_MEM_TYPE_VIRTUAL: DAT_MEM_TYPE = 0x0;
pub const DAT_MEM_TYPE_LMR: DAT_MEM_TYPE = 0x1;
pub const DAT_MEM_TYPE_SHARED_VIRTUAL: DAT_MEM_TYPE = 0x2;

// ---------------------------------------------------------------------------
// `DAT_HANDLE_TYPE`: Object kinds reported by `dat_get_handle_type`.
// ---------------------------------------------------------------------------

pub const DAT_HANDLE_TYPE_CR: DAT_HANDLE_TYPE = 0;
pub const DAT_HANDLE_TYPE_EP: DAT_HANDLE_TYPE = 1;
pub const DAT_HANDLE_TYPE_EVD: DAT_HANDLE_TYPE = 2;
pub const DAT_HANDLE_TYPE_IA: DAT_HANDLE_TYPE = 3;
pub const DAT_HANDLE_TYPE_LMR: DAT_HANDLE_TYPE = 4;
pub const DAT_HANDLE_TYPE_PSP: DAT_HANDLE_TYPE = 5;
pub const DAT_HANDLE_TYPE_PZ: DAT_HANDLE_TYPE = 6;
pub const DAT_HANDLE_TYPE_RMR: DAT_HANDLE_TYPE = 7;
pub const DAT_HANDLE_TYPE_RSP: DAT_HANDLE_TYPE = 8;
pub const DAT_HANDLE_TYPE_CNO: DAT_HANDLE_TYPE = 9;
pub const DAT_HANDLE_TYPE_SRQ: DAT_HANDLE_TYPE = 10;
pub const DAT_HANDLE_TYPE_CSP: DAT_HANDLE_TYPE = 11;
pub const DAT_HANDLE_TYPE_EXTENSION_BASE: DAT_HANDLE_TYPE = 12;

// ---------------------------------------------------------------------------
// `DAT_EVD_STATE`: EVD states reported by `dat_evd_query`.
// ---------------------------------------------------------------------------

pub const DAT_EVD_STATE_ENABLED: DAT_EVD_STATE = 0x1;
pub const DAT_EVD_STATE_DISABLED: DAT_EVD_STATE = 0x2;
pub const DAT_EVD_STATE_WAITABLE: DAT_EVD_STATE = 0x4;
pub const DAT_EVD_STATE_UNWAITABLE: DAT_EVD_STATE = 0x8;
pub const DAT_EVD_STATE_CONFIG_NOTIFY: DAT_EVD_STATE = 0x10;
pub const DAT_EVD_STATE_CONFIG_SOLICITED: DAT_EVD_STATE = 0x20;
pub const DAT_EVD_STATE_CONFIG_THRESHOLD: DAT_EVD_STATE = 0x30;

// ---------------------------------------------------------------------------
// `DAT_EVD_PARAM_MASK`: `dat_evd_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_EVD_FIELD_IA_HANDLE: DAT_EVD_PARAM_MASK = 0x1;
pub const DAT_EVD_FIELD_EVD_QLEN: DAT_EVD_PARAM_MASK = 0x2;
pub const DAT_EVD_FIELD_EVD_STATE: DAT_EVD_PARAM_MASK = 0x4;
pub const DAT_EVD_FIELD_CNO: DAT_EVD_PARAM_MASK = 0x8;
pub const DAT_EVD_FIELD_EVD_FLAGS: DAT_EVD_PARAM_MASK = 0x10;
pub const DAT_EVD_FIELD_ALL: DAT_EVD_PARAM_MASK = 0x1f;

// ---------------------------------------------------------------------------
// `DAT_LMR_PARAM_MASK`: `dat_lmr_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_LMR_FIELD_IA_HANDLE: DAT_LMR_PARAM_MASK = 0x1;
pub const DAT_LMR_FIELD_MEM_TYPE: DAT_LMR_PARAM_MASK = 0x2;
pub const DAT_LMR_FIELD_REGION_DESC: DAT_LMR_PARAM_MASK = 0x4;
pub const DAT_LMR_FIELD_LENGTH: DAT_LMR_PARAM_MASK = 0x8;
pub const DAT_LMR_FIELD_PZ_HANDLE: DAT_LMR_PARAM_MASK = 0x10;
pub const DAT_LMR_FIELD_MEM_PRIV: DAT_LMR_PARAM_MASK = 0x20;
pub const DAT_LMR_FIELD_VA_TYPE: DAT_LMR_PARAM_MASK = 0x40;
pub const DAT_LMR_FIELD_LMR_CONTEXT: DAT_LMR_PARAM_MASK = 0x80;
pub const DAT_LMR_FIELD_RMR_CONTEXT: DAT_LMR_PARAM_MASK = 0x100;
pub const DAT_LMR_FIELD_REGISTERED_SIZE: DAT_LMR_PARAM_MASK = 0x200;
pub const DAT_LMR_FIELD_REGISTERED_ADDRESS: DAT_LMR_PARAM_MASK = 0x400;
pub const DAT_LMR_FIELD_ALL: DAT_LMR_PARAM_MASK = 0x7ff;

// ---------------------------------------------------------------------------
// `DAT_BOOLEAN`: Booleans.
// ---------------------------------------------------------------------------

pub const DAT_FALSE: DAT_BOOLEAN = 0;
pub const DAT_TRUE: DAT_BOOLEAN = 1;

// ---------------------------------------------------------------------------
// `DAT_COMPLETION_FLAGS`: Completion flags of posted operations and endpoint attributes.
// ---------------------------------------------------------------------------

pub const DAT_COMPLETION_DEFAULT_FLAG: DAT_COMPLETION_FLAGS = 0x0;
pub const DAT_COMPLETION_SUPPRESS_FLAG: DAT_COMPLETION_FLAGS = 0x1;
pub const DAT_COMPLETION_SOLICITED_WAIT_FLAG: DAT_COMPLETION_FLAGS = 0x2;
pub const DAT_COMPLETION_UNSIGNALLED_FLAG: DAT_COMPLETION_FLAGS = 0x4;
pub const DAT_COMPLETION_BARRIER_FENCE_FLAG: DAT_COMPLETION_FLAGS = 0x8;
pub const DAT_COMPLETION_EVD_THRESHOLD_FLAG: DAT_COMPLETION_FLAGS = 0x10;
pub const DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG: DAT_COMPLETION_FLAGS = 0x20;

// ---------------------------------------------------------------------------
// `DAT_DTOS`: Data transfer operations reported in DTO completions.
// ---------------------------------------------------------------------------

pub const DAT_DTO_SEND: DAT_DTOS = 0;
pub const DAT_DTO_RDMA_WRITE: DAT_DTOS = 1;
pub const DAT_DTO_RDMA_READ: DAT_DTOS = 2;
pub const DAT_DTO_RECEIVE: DAT_DTOS = 3;
pub const DAT_DTO_RECEIVE_WITH_INVALIDATE: DAT_DTOS = 4;
pub const DAT_DTO_BIND_MW: DAT_DTOS = 5;
pub const DAT_DTO_LMR_FMR: DAT_DTOS = 6;
pub const DAT_DTO_LMR_INVALIDATE: DAT_DTOS = 7;
pub const DAT_DTO_EXTENSION_BASE: DAT_DTOS = 8;

// ---------------------------------------------------------------------------
// `DAT_QOS`: Quality of service classes.
// ---------------------------------------------------------------------------

pub const DAT_QOS_BEST_EFFORT: DAT_QOS = 0x0;
pub const DAT_QOS_HIGH_THROUGHPUT: DAT_QOS = 0x1;
pub const DAT_QOS_LOW_LATENCY: DAT_QOS = 0x2;
pub const DAT_QOS_ECONOMY: DAT_QOS = 0x4;
pub const DAT_QOS_PREMIUM: DAT_QOS = 0x8;

// ---------------------------------------------------------------------------
// `DAT_CONNECT_FLAGS`: Flags of `dat_ep_connect`.
// ---------------------------------------------------------------------------

pub const DAT_CONNECT_DEFAULT_FLAG: DAT_CONNECT_FLAGS = 0x0;
pub const DAT_CONNECT_MULTIPATH_FLAG: DAT_CONNECT_FLAGS = 0x1;
pub const DAT_CONNECT_MULTIPATH_REQUIRED_FLAG: DAT_CONNECT_FLAGS = 0x2;

// ---------------------------------------------------------------------------
// `DAT_CLOSE_FLAGS`: Flags of `dat_ia_close` and `dat_ep_disconnect`.
// ---------------------------------------------------------------------------

pub const DAT_CLOSE_ABRUPT_FLAG: DAT_CLOSE_FLAGS = 0x0;
pub const DAT_CLOSE_GRACEFUL_FLAG: DAT_CLOSE_FLAGS = 0x1;

// ---------------------------------------------------------------------------
// `DAT_EVD_FLAGS`: Event stream selectors of `dat_evd_create`.
// ---------------------------------------------------------------------------

pub const DAT_EVD_SOFTWARE_FLAG: DAT_EVD_FLAGS = 0x1;
pub const DAT_EVD_CR_FLAG: DAT_EVD_FLAGS = 0x10;
pub const DAT_EVD_DTO_FLAG: DAT_EVD_FLAGS = 0x20;
pub const DAT_EVD_CONNECTION_FLAG: DAT_EVD_FLAGS = 0x40;
pub const DAT_EVD_RMR_BIND_FLAG: DAT_EVD_FLAGS = 0x80;
pub const DAT_EVD_ASYNC_FLAG: DAT_EVD_FLAGS = 0x100;
pub const DAT_EVD_DEFAULT_FLAG: DAT_EVD_FLAGS = 0x1f0;
pub const DAT_EVD_EXTENSION_BASE: DAT_EVD_FLAGS = 0x200;

// ---------------------------------------------------------------------------
// `DAT_PSP_FLAGS`: Who creates the endpoint for a public service point.
// ---------------------------------------------------------------------------

pub const DAT_PSP_CONSUMER_FLAG: DAT_PSP_FLAGS = 0x0;
pub const DAT_PSP_PROVIDER_FLAG: DAT_PSP_FLAGS = 0x1;

// ---------------------------------------------------------------------------
// `DAT_MEM_PRIV_FLAGS`: Memory access privileges.
// ---------------------------------------------------------------------------

pub const DAT_MEM_PRIV_NONE_FLAG: DAT_MEM_PRIV_FLAGS = 0x0;
pub const DAT_MEM_PRIV_LOCAL_READ_FLAG: DAT_MEM_PRIV_FLAGS = 0x1;
pub const DAT_MEM_PRIV_REMOTE_READ_FLAG: DAT_MEM_PRIV_FLAGS = 0x2;
pub const DAT_MEM_PRIV_LOCAL_WRITE_FLAG: DAT_MEM_PRIV_FLAGS = 0x10;
pub const DAT_MEM_PRIV_REMOTE_WRITE_FLAG: DAT_MEM_PRIV_FLAGS = 0x20;
pub const DAT_MEM_PRIV_ALL_FLAG: DAT_MEM_PRIV_FLAGS = 0x33;
pub const DAT_MEM_PRIV_EXTENSION_BASE: DAT_MEM_PRIV_FLAGS = 0x40;

// ---------------------------------------------------------------------------
// `DAT_VA_TYPE`: Virtual address kinds of an LMR or RMR.
// ---------------------------------------------------------------------------

pub const DAT_VA_TYPE_VA: DAT_VA_TYPE = 0x0;
pub const DAT_VA_TYPE_ZB: DAT_VA_TYPE = 0x1;

// ---------------------------------------------------------------------------
// `DAT_RMR_SCOPE`: RMR protection scopes.
// ---------------------------------------------------------------------------

pub const DAT_RMR_SCOPE_EP: DAT_RMR_SCOPE = 0;
pub const DAT_RMR_SCOPE_PZ: DAT_RMR_SCOPE = 1;
pub const DAT_RMR_SCOPE_ANY: DAT_RMR_SCOPE = 2;

// ---------------------------------------------------------------------------
// `DAT_RMR_PARAM_MASK`: `dat_rmr_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_RMR_FIELD_IA_HANDLE: DAT_RMR_PARAM_MASK = 0x1;
pub const DAT_RMR_FIELD_PZ_HANDLE: DAT_RMR_PARAM_MASK = 0x2;
pub const DAT_RMR_FIELD_LMR_TRIPLET: DAT_RMR_PARAM_MASK = 0x4;
pub const DAT_RMR_FIELD_MEM_PRIV: DAT_RMR_PARAM_MASK = 0x8;
pub const DAT_RMR_FIELD_RMR_CONTEXT: DAT_RMR_PARAM_MASK = 0x10;
pub const DAT_RMR_FIELD_RMR_SCOPE: DAT_RMR_PARAM_MASK = 0x20;
pub const DAT_RMR_FIELD_VA_TYPE: DAT_RMR_PARAM_MASK = 0x40;
pub const DAT_RMR_FIELD_ALL: DAT_RMR_PARAM_MASK = 0x7f;

// ---------------------------------------------------------------------------
// `DAT_IOV_OWNERSHIP`: Who owns an IOV when a DTO completes.
// ---------------------------------------------------------------------------

pub const DAT_IOV_CONSUMER: DAT_IOV_OWNERSHIP = 0x0;
pub const DAT_IOV_PROVIDER_NOMOD: DAT_IOV_OWNERSHIP = 0x1;
pub const DAT_IOV_PROVIDER_MOD: DAT_IOV_OWNERSHIP = 0x2;

// ---------------------------------------------------------------------------
// `DAT_EP_CREATOR_FOR_PSP`: Whether the provider creates endpoints for PSPs.
// ---------------------------------------------------------------------------

pub const DAT_PSP_CREATES_EP_NEVER: DAT_EP_CREATOR_FOR_PSP = 0;
pub const DAT_PSP_CREATES_EP_IFASKED: DAT_EP_CREATOR_FOR_PSP = 1;
pub const DAT_PSP_CREATES_EP_ALWAYS: DAT_EP_CREATOR_FOR_PSP = 2;

// ---------------------------------------------------------------------------
// `DAT_EXTENSION`: Extension families an IA may support.
// ---------------------------------------------------------------------------

pub const DAT_EXTENSION_NONE: DAT_EXTENSION = 0;
pub const DAT_EXTENSION_IB: DAT_EXTENSION = 1;
pub const DAT_EXTENSION_IW: DAT_EXTENSION = 2;

// ---------------------------------------------------------------------------
// `DAT_SERVICE_TYPE`: Endpoint service types.
// ---------------------------------------------------------------------------

pub const DAT_SERVICE_TYPE_RC: DAT_SERVICE_TYPE = 0;
pub const DAT_SERVICE_TYPE_EXTENSION_BASE: DAT_SERVICE_TYPE = 1;

// ---------------------------------------------------------------------------
// `DAT_EP_STATE`: Endpoint states.
// ---------------------------------------------------------------------------

pub const DAT_EP_STATE_UNCONNECTED: DAT_EP_STATE = 0;
pub const DAT_EP_STATE_UNCONFIGURED_UNCONNECTED: DAT_EP_STATE = 1;
pub const DAT_EP_STATE_RESERVED: DAT_EP_STATE = 2;
pub const DAT_EP_STATE_UNCONFIGURED_RESERVED: DAT_EP_STATE = 3;
pub const DAT_EP_STATE_PASSIVE_CONNECTION_PENDING: DAT_EP_STATE = 4;
pub const DAT_EP_STATE_UNCONFIGURED_PASSIVE: DAT_EP_STATE = 5;
pub const DAT_EP_STATE_ACTIVE_CONNECTION_PENDING: DAT_EP_STATE = 6;
pub const DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING: DAT_EP_STATE = 7;
pub const DAT_EP_STATE_UNCONFIGURED_TENTATIVE: DAT_EP_STATE = 8;
pub const DAT_EP_STATE_CONNECTED: DAT_EP_STATE = 9;
pub const DAT_EP_STATE_DISCONNECT_PENDING: DAT_EP_STATE = 10;
pub const DAT_EP_STATE_DISCONNECTED: DAT_EP_STATE = 11;
pub const DAT_EP_STATE_COMPLETION_PENDING: DAT_EP_STATE = 12;
pub const DAT_EP_STATE_CONNECTED_SINGLE_PATH: DAT_EP_STATE = 13;
pub const DAT_EP_STATE_CONNECTED_MULTI_PATH: DAT_EP_STATE = 14;

// ---------------------------------------------------------------------------
// `DAT_SRQ_STATE`: Shared receive queue states.
// ---------------------------------------------------------------------------

pub const DAT_SRQ_STATE_ERROR: DAT_SRQ_STATE = 0;
pub const DAT_SRQ_STATE_OPERATIONAL: DAT_SRQ_STATE = 1;
pub const DAT_SRQ_STATE_SHUTDOWN: DAT_SRQ_STATE = 2;

// ---------------------------------------------------------------------------
// `DAT_SRQ_PARAM_MASK`: `dat_srq_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_SRQ_FIELD_IA_HANDLE: DAT_SRQ_PARAM_MASK = 0x1;
pub const DAT_SRQ_FIELD_SRQ_STATE: DAT_SRQ_PARAM_MASK = 0x2;
pub const DAT_SRQ_FIELD_PZ_HANDLE: DAT_SRQ_PARAM_MASK = 0x4;
pub const DAT_SRQ_FIELD_MAX_RECV_DTO: DAT_SRQ_PARAM_MASK = 0x8;
pub const DAT_SRQ_FIELD_MAX_RECV_IOV: DAT_SRQ_PARAM_MASK = 0x10;
pub const DAT_SRQ_FIELD_LOW_WATERMARK: DAT_SRQ_PARAM_MASK = 0x20;
pub const DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT: DAT_SRQ_PARAM_MASK = 0x40;
pub const DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT: DAT_SRQ_PARAM_MASK = 0x80;
pub const DAT_SRQ_FIELD_ALL: DAT_SRQ_PARAM_MASK = 0xff;

// ---------------------------------------------------------------------------
// `DAT_PZ_PARAM_MASK`: `dat_pz_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_PZ_FIELD_IA_HANDLE: DAT_PZ_PARAM_MASK = 0x1;
pub const DAT_PZ_FIELD_ALL: DAT_PZ_PARAM_MASK = 0x1;

// ---------------------------------------------------------------------------
// `DAT_PSP_PARAM_MASK`: `dat_psp_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_PSP_FIELD_IA_HANDLE: DAT_PSP_PARAM_MASK = 0x1;
pub const DAT_PSP_FIELD_CONN_QUAL: DAT_PSP_PARAM_MASK = 0x2;
pub const DAT_PSP_FIELD_EVD_HANDLE: DAT_PSP_PARAM_MASK = 0x4;
pub const DAT_PSP_FIELD_PSP_FLAGS: DAT_PSP_PARAM_MASK = 0x8;
pub const DAT_PSP_FIELD_ALL: DAT_PSP_PARAM_MASK = 0xf;

// ---------------------------------------------------------------------------
// `DAT_RSP_PARAM_MASK`: `dat_rsp_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_RSP_FIELD_IA_HANDLE: DAT_RSP_PARAM_MASK = 0x1;
pub const DAT_RSP_FIELD_CONN_QUAL: DAT_RSP_PARAM_MASK = 0x2;
pub const DAT_RSP_FIELD_EVD_HANDLE: DAT_RSP_PARAM_MASK = 0x4;
pub const DAT_RSP_FIELD_EP_HANDLE: DAT_RSP_PARAM_MASK = 0x8;
pub const DAT_RSP_FIELD_ALL: DAT_RSP_PARAM_MASK = 0xf;

// ---------------------------------------------------------------------------
// `DAT_CSP_PARAM_MASK`: `dat_csp_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_CSP_FIELD_IA_HANDLE: DAT_CSP_PARAM_MASK = 0x1;
pub const DAT_CSP_FIELD_COMM: DAT_CSP_PARAM_MASK = 0x2;
pub const DAT_CSP_FIELD_IA_ADDRESS: DAT_CSP_PARAM_MASK = 0x4;
pub const DAT_CSP_FIELD_EVD_HANDLE: DAT_CSP_PARAM_MASK = 0x8;
pub const DAT_CSP_FIELD_ALL: DAT_CSP_PARAM_MASK = 0xf;

// ---------------------------------------------------------------------------
// `DAT_CR_PARAM_MASK`: `dat_cr_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_CR_FIELD_REMOTE_IA_ADDRESS_PTR: DAT_CR_PARAM_MASK = 0x1;
pub const DAT_CR_FIELD_REMOTE_PORT_QUAL: DAT_CR_PARAM_MASK = 0x2;
pub const DAT_CR_FIELD_PRIVATE_DATA_SIZE: DAT_CR_PARAM_MASK = 0x4;
pub const DAT_CR_FIELD_PRIVATE_DATA: DAT_CR_PARAM_MASK = 0x8;
pub const DAT_CR_FIELD_LOCAL_EP_HANDLE: DAT_CR_PARAM_MASK = 0x10;
pub const DAT_CR_FIELD_ALL: DAT_CR_PARAM_MASK = 0x1f;

// ---------------------------------------------------------------------------
// `DAT_DTO_COMPLETION_STATUS`: Completion status of DTOs and RMR binds.
// ---------------------------------------------------------------------------

pub const DAT_DTO_SUCCESS: DAT_DTO_COMPLETION_STATUS = 0;
pub const DAT_DTO_ERR_FLUSHED: DAT_DTO_COMPLETION_STATUS = 1;
pub const DAT_DTO_ERR_LOCAL_LENGTH: DAT_DTO_COMPLETION_STATUS = 2;
pub const DAT_DTO_ERR_LOCAL_EP: DAT_DTO_COMPLETION_STATUS = 3;
pub const DAT_DTO_ERR_LOCAL_PROTECTION: DAT_DTO_COMPLETION_STATUS = 4;
pub const DAT_DTO_ERR_BAD_RESPONSE: DAT_DTO_COMPLETION_STATUS = 5;
pub const DAT_DTO_ERR_REMOTE_ACCESS: DAT_DTO_COMPLETION_STATUS = 6;
pub const DAT_DTO_ERR_REMOTE_RESPONDER: DAT_DTO_COMPLETION_STATUS = 7;
pub const DAT_DTO_ERR_TRANSPORT: DAT_DTO_COMPLETION_STATUS = 8;
pub const DAT_DTO_ERR_RECEIVER_NOT_READY: DAT_DTO_COMPLETION_STATUS = 9;
pub const DAT_DTO_ERR_PARTIAL_PACKET: DAT_DTO_COMPLETION_STATUS = 10;
pub const DAT_RMR_OPERATION_FAILED: DAT_DTO_COMPLETION_STATUS = 11;
pub const DAT_DTO_ERR_LOCAL_MM_ERROR: DAT_DTO_COMPLETION_STATUS = 12;

// ---------------------------------------------------------------------------
// `DAT_IA_ASYNC_ERROR_REASON`: Reasons of IA asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_IA_CATASTROPHIC_ERROR: DAT_IA_ASYNC_ERROR_REASON = 0;
pub const DAT_IA_OTHER_ERROR: DAT_IA_ASYNC_ERROR_REASON = 1;

// ---------------------------------------------------------------------------
// `DAT_EP_ASYNC_ERROR_REASON`: Reasons of endpoint asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_EP_TRANSFER_TO_ERROR: DAT_EP_ASYNC_ERROR_REASON = 0;
pub const DAT_EP_OTHER_ERROR: DAT_EP_ASYNC_ERROR_REASON = 1;
pub const DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT: DAT_EP_ASYNC_ERROR_REASON = 2;

// ---------------------------------------------------------------------------
// `DAT_EVD_ASYNC_ERROR_REASON`: Reasons of EVD asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_EVD_OVERFLOW_ERROR: DAT_EVD_ASYNC_ERROR_REASON = 0;
pub const DAT_EVD_OTHER_ERROR: DAT_EVD_ASYNC_ERROR_REASON = 1;

// ---------------------------------------------------------------------------
// `DAT_SRQ_ASYNC_ERROR_REASON`: Reasons of SRQ asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_SRQ_TRANSFER_TO_ERROR: DAT_SRQ_ASYNC_ERROR_REASON = 0;
pub const DAT_SRQ_OTHER_ERROR: DAT_SRQ_ASYNC_ERROR_REASON = 1;
pub const DAT_SRQ_LOW_WATERMARK_EVENT: DAT_SRQ_ASYNC_ERROR_REASON = 2;

// ---------------------------------------------------------------------------
// `DAT_LMR_ASYNC_ERROR_REASON`: Reasons of LMR asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_LMR_OTHER_ERROR: DAT_LMR_ASYNC_ERROR_REASON = 0;

// ---------------------------------------------------------------------------
// `DAT_RMR_ASYNC_ERROR_REASON`: Reasons of RMR asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_RMR_OTHER_ERROR: DAT_RMR_ASYNC_ERROR_REASON = 0;

// ---------------------------------------------------------------------------
// `DAT_PZ_ASYNC_ERROR_REASON`: Reasons of PZ asynchronous errors.
// ---------------------------------------------------------------------------

pub const DAT_PZ_OTHER_ERROR: DAT_PZ_ASYNC_ERROR_REASON = 0;

// ---------------------------------------------------------------------------
// `DAT_EVENT_NUMBER`: Event numbers (`DAT_EVENT::event_number`).
// ---------------------------------------------------------------------------

pub const DAT_DTO_COMPLETION_EVENT: DAT_EVENT_NUMBER = 0x1;
pub const DAT_RMR_BIND_COMPLETION_EVENT: DAT_EVENT_NUMBER = 0x1001;
pub const DAT_CONNECTION_REQUEST_EVENT: DAT_EVENT_NUMBER = 0x2001;
pub const DAT_CONNECTION_EVENT_ESTABLISHED: DAT_EVENT_NUMBER = 0x4001;
pub const DAT_CONNECTION_EVENT_PEER_REJECTED: DAT_EVENT_NUMBER = 0x4002;
pub const DAT_CONNECTION_EVENT_NON_PEER_REJECTED: DAT_EVENT_NUMBER = 0x4003;
pub const DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: DAT_EVENT_NUMBER = 0x4004;
pub const DAT_CONNECTION_EVENT_DISCONNECTED: DAT_EVENT_NUMBER = 0x4005;
pub const DAT_CONNECTION_EVENT_BROKEN: DAT_EVENT_NUMBER = 0x4006;
pub const DAT_CONNECTION_EVENT_TIMED_OUT: DAT_EVENT_NUMBER = 0x4007;
pub const DAT_CONNECTION_EVENT_UNREACHABLE: DAT_EVENT_NUMBER = 0x4008;
pub const DAT_ASYNC_ERROR_EVD_OVERFLOW: DAT_EVENT_NUMBER = 0x8001;
pub const DAT_ASYNC_ERROR_IA_CATASTROPHIC: DAT_EVENT_NUMBER = 0x8002;
pub const DAT_ASYNC_ERROR_EP_BROKEN: DAT_EVENT_NUMBER = 0x8003;
pub const DAT_ASYNC_ERROR_TIMED_OUT: DAT_EVENT_NUMBER = 0x8004;
pub const DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: DAT_EVENT_NUMBER = 0x8005;
pub const DAT_HA_DOWN_TO_1: DAT_EVENT_NUMBER = 0x8101;
pub const DAT_HA_UP_TO_MULTI_PATH: DAT_EVENT_NUMBER = 0x8102;
pub const DAT_SOFTWARE_EVENT: DAT_EVENT_NUMBER = 0x10001;
pub const DAT_EXTENSION_EVENT: DAT_EVENT_NUMBER = 0x20000;
pub const DAT_IB_EXTENSION_RANGE_BASE: DAT_EVENT_NUMBER = 0x40000;
pub const DAT_IW_EXTENSION_RANGE_BASE: DAT_EVENT_NUMBER = 0x80000;

// ---------------------------------------------------------------------------
// `DAT_PROXY_TYPE`: CNO proxy kinds.
// ---------------------------------------------------------------------------

pub const DAT_PROXY_TYPE_NONE: DAT_PROXY_TYPE = 0x0;
pub const DAT_PROXY_TYPE_AGENT: DAT_PROXY_TYPE = 0x1;
pub const DAT_PROXY_TYPE_FD: DAT_PROXY_TYPE = 0x2;

// ---------------------------------------------------------------------------
// `DAT_CNO_PARAM_MASK`: `dat_cno_query` field selectors.
// ---------------------------------------------------------------------------

pub const DAT_CNO_FIELD_IA_HANDLE: DAT_CNO_PARAM_MASK = 0x1;
pub const DAT_CNO_FIELD_PROXY_TYPE: DAT_CNO_PARAM_MASK = 0x2;
pub const DAT_CNO_FIELD_PROXY: DAT_CNO_PARAM_MASK = 0x3;
pub const DAT_CNO_FIELD_ALL: DAT_CNO_PARAM_MASK = 0x4;

// ---------------------------------------------------------------------------
// `DAT_PZ_SUPPORT`: Protection zone sharing support.
// ---------------------------------------------------------------------------

pub const DAT_PZ_UNIQUE: DAT_PZ_SUPPORT = 0;
pub const DAT_PZ_SHAREABLE: DAT_PZ_SUPPORT = 1;

// ---------------------------------------------------------------------------
// `DAT_HA_RELATIONSHIP`: High-availability relationship of two providers.
// ---------------------------------------------------------------------------

pub const DAT_HA_FALSE: DAT_HA_RELATIONSHIP = 0;
pub const DAT_HA_TRUE: DAT_HA_RELATIONSHIP = 1;
pub const DAT_HA_UNKNOWN: DAT_HA_RELATIONSHIP = 2;
pub const DAT_HA_CONFLICTING: DAT_HA_RELATIONSHIP = 3;
pub const DAT_HA_EXTENSION_BASE: DAT_HA_RELATIONSHIP = 4;

// ---------------------------------------------------------------------------
// `DAT_IB_EVENT_NUMBER`: IB extension event numbers.
// ---------------------------------------------------------------------------

pub const DAT_IB_DTO_EVENT: DAT_IB_EVENT_NUMBER = 0x40000;
pub const DAT_IB_UD_CONNECTION_REQUEST_EVENT: DAT_IB_EVENT_NUMBER = 0x40001;
pub const DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED: DAT_IB_EVENT_NUMBER = 0x40002;
pub const DAT_IB_UD_CONNECTION_REJECT_EVENT: DAT_IB_EVENT_NUMBER = 0x40003;
pub const DAT_IB_UD_CONNECTION_ERROR_EVENT: DAT_IB_EVENT_NUMBER = 0x40004;
pub const DAT_IB_COLLECTIVE_EVENT: DAT_IB_EVENT_NUMBER = 0x40005;

// ---------------------------------------------------------------------------
// `DAT_IB_OP`: IB extension operations (the `op` argument of `dat_extension_op`).
// ---------------------------------------------------------------------------

pub const DAT_IB_FETCH_AND_ADD_OP: DAT_IB_OP = 0;
pub const DAT_IB_CMP_AND_SWAP_OP: DAT_IB_OP = 1;
pub const DAT_IB_RDMA_WRITE_IMMED_OP: DAT_IB_OP = 2;
pub const DAT_IB_UD_SEND_OP: DAT_IB_OP = 3;
pub const DAT_IB_QUERY_COUNTERS_OP: DAT_IB_OP = 4;
pub const DAT_IB_PRINT_COUNTERS_OP: DAT_IB_OP = 5;
pub const DAT_IB_COLLECTIVE_CREATE_MEMBER_OP: DAT_IB_OP = 6;
pub const DAT_IB_COLLECTIVE_FREE_MEMBER_OP: DAT_IB_OP = 7;
pub const DAT_IB_COLLECTIVE_CREATE_GROUP_OP: DAT_IB_OP = 8;
pub const DAT_IB_COLLECTIVE_FREE_GROUP_OP: DAT_IB_OP = 9;
pub const DAT_IB_COLLECTIVE_SET_CLOCK_OP: DAT_IB_OP = 10;
pub const DAT_IB_COLLECTIVE_READ_CLOCK_OP: DAT_IB_OP = 11;
pub const DAT_IB_COLLECTIVE_SCATTER_OP: DAT_IB_OP = 12;
pub const DAT_IB_COLLECTIVE_SCATTERV_OP: DAT_IB_OP = 13;
pub const DAT_IB_COLLECTIVE_GATHER_OP: DAT_IB_OP = 14;
pub const DAT_IB_COLLECTIVE_GATHERV_OP: DAT_IB_OP = 15;
pub const DAT_IB_COLLECTIVE_ALLGATHER_OP: DAT_IB_OP = 16;
pub const DAT_IB_COLLECTIVE_ALLGATHERV_OP: DAT_IB_OP = 17;
pub const DAT_IB_COLLECTIVE_ALLTOALL_OP: DAT_IB_OP = 18;
pub const DAT_IB_COLLECTIVE_ALLTOALLV_OP: DAT_IB_OP = 19;
pub const DAT_IB_COLLECTIVE_REDUCE_OP: DAT_IB_OP = 20;
pub const DAT_IB_COLLECTIVE_ALLREDUCE_OP: DAT_IB_OP = 21;
pub const DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP: DAT_IB_OP = 22;
pub const DAT_IB_COLLECTIVE_SCAN_OP: DAT_IB_OP = 23;
pub const DAT_IB_COLLECTIVE_BROADCAST_OP: DAT_IB_OP = 24;
pub const DAT_IB_COLLECTIVE_BARRIER_OP: DAT_IB_OP = 25;
pub const DAT_IB_START_COUNTERS_OP: DAT_IB_OP = 26;
pub const DAT_IB_STOP_COUNTERS_OP: DAT_IB_OP = 27;
pub const DAT_IB_UD_CM_FREE_OP: DAT_IB_OP = 28;
pub const DAT_IB_UD_AH_FREE_OP: DAT_IB_OP = 29;
pub const DAT_IB_OPEN_QUERY_OP: DAT_IB_OP = 0x1000;
pub const DAT_IB_CLOSE_QUERY_OP: DAT_IB_OP = 0x2000;

// ---------------------------------------------------------------------------
// `DAT_IB_EXT_TYPE`: IB extension event types (`DAT_IB_EXTENSION_EVENT_DATA::type`).
// ---------------------------------------------------------------------------

pub const DAT_IB_FETCH_AND_ADD: DAT_IB_EXT_TYPE = 0;
pub const DAT_IB_CMP_AND_SWAP: DAT_IB_EXT_TYPE = 1;
pub const DAT_IB_RDMA_WRITE_IMMED: DAT_IB_EXT_TYPE = 2;
pub const DAT_IB_RDMA_WRITE_IMMED_DATA: DAT_IB_EXT_TYPE = 3;
pub const DAT_IB_RECV_IMMED_DATA: DAT_IB_EXT_TYPE = 4;
pub const DAT_IB_UD_CONNECT_REQUEST: DAT_IB_EXT_TYPE = 5;
pub const DAT_IB_UD_REMOTE_AH: DAT_IB_EXT_TYPE = 6;
pub const DAT_IB_UD_PASSIVE_REMOTE_AH: DAT_IB_EXT_TYPE = 7;
pub const DAT_IB_UD_SEND: DAT_IB_EXT_TYPE = 8;
pub const DAT_IB_UD_RECV: DAT_IB_EXT_TYPE = 9;
pub const DAT_IB_UD_CONNECT_REJECT: DAT_IB_EXT_TYPE = 10;
pub const DAT_IB_UD_CONNECT_ERROR: DAT_IB_EXT_TYPE = 11;
pub const DAT_IB_COLLECTIVE_CREATE_STATUS: DAT_IB_EXT_TYPE = 12;
pub const DAT_IB_COLLECTIVE_CREATE_DATA: DAT_IB_EXT_TYPE = 13;
pub const DAT_IB_COLLECTIVE_CLOCK_SET_STATUS: DAT_IB_EXT_TYPE = 14;
pub const DAT_IB_COLLECTIVE_SCATTER_STATUS: DAT_IB_EXT_TYPE = 15;
pub const DAT_IB_COLLECTIVE_SCATTERV_STATUS: DAT_IB_EXT_TYPE = 16;
pub const DAT_IB_COLLECTIVE_GATHER_STATUS: DAT_IB_EXT_TYPE = 17;
pub const DAT_IB_COLLECTIVE_GATHERV_STATUS: DAT_IB_EXT_TYPE = 18;
pub const DAT_IB_COLLECTIVE_ALLGATHER_STATUS: DAT_IB_EXT_TYPE = 19;
pub const DAT_IB_COLLECTIVE_ALLGATHERV_STATUS: DAT_IB_EXT_TYPE = 20;
pub const DAT_IB_COLLECTIVE_ALLTOALL_STATUS: DAT_IB_EXT_TYPE = 21;
pub const DAT_IB_COLLECTIVE_ALLTOALLV_STATUS: DAT_IB_EXT_TYPE = 22;
pub const DAT_IB_COLLECTIVE_REDUCE_STATUS: DAT_IB_EXT_TYPE = 23;
pub const DAT_IB_COLLECTIVE_ALLREDUCE_STATUS: DAT_IB_EXT_TYPE = 24;
pub const DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS: DAT_IB_EXT_TYPE = 25;
pub const DAT_IB_COLLECTIVE_SCAN_STATUS: DAT_IB_EXT_TYPE = 26;
pub const DAT_IB_COLLECTIVE_BROADCAST_STATUS: DAT_IB_EXT_TYPE = 27;
pub const DAT_IB_COLLECTIVE_BARRIER_STATUS: DAT_IB_EXT_TYPE = 28;

// ---------------------------------------------------------------------------
// `DAT_IB_STATUS`: IB extension event status (`DAT_IB_EXTENSION_EVENT_DATA::status`).
// ---------------------------------------------------------------------------

pub const DAT_OP_SUCCESS: DAT_IB_STATUS = 0;
pub const DAT_IB_OP_ERR: DAT_IB_STATUS = 1;
pub const DAT_IB_COLL_COMP_ERR: DAT_IB_STATUS = 2;

// ---------------------------------------------------------------------------
// `DAT_IB_RETURN`: IB extension return code types.
// ---------------------------------------------------------------------------

pub const DAT_IB_ERR: DAT_IB_RETURN = 0x10000000;
pub const DAT_IB_COLLECTIVE_ERR: DAT_IB_RETURN = 0x10000001;

// ---------------------------------------------------------------------------
// `DAT_IB_DTOS`: IB extension DTO operations.
// ---------------------------------------------------------------------------

pub const DAT_IB_DTO_RDMA_WRITE_IMMED: DAT_IB_DTOS = 8;
pub const DAT_IB_DTO_RECV_IMMED: DAT_IB_DTOS = 9;
pub const DAT_IB_DTO_FETCH_ADD: DAT_IB_DTOS = 10;
pub const DAT_IB_DTO_CMP_SWAP: DAT_IB_DTOS = 11;
pub const DAT_IB_DTO_RECV_MSG_IMMED: DAT_IB_DTOS = 12;
pub const DAT_IB_DTO_SEND_UD: DAT_IB_DTOS = 13;
pub const DAT_IB_DTO_RECV_UD: DAT_IB_DTOS = 14;
pub const DAT_IB_DTO_RECV_UD_IMMED: DAT_IB_DTOS = 15;
pub const DAT_IB_DTO_COLLECTIVES: DAT_IB_DTOS = 16;

// ---------------------------------------------------------------------------
// `DAT_IB_HANDLE_TYPE`: IB extension handle types.
// ---------------------------------------------------------------------------

pub const DAT_IB_HANDLE_TYPE_EXT: DAT_IB_HANDLE_TYPE = 12;
pub const DAT_IB_HANDLE_TYPE_COLLECTIVE: DAT_IB_HANDLE_TYPE = 13;

// ---------------------------------------------------------------------------
// `DAT_IB_EVD_EXTENSION_FLAGS`: IB extension EVD flag.
// ---------------------------------------------------------------------------

pub const DAT_IB_EVD_EXTENSION_FLAG: DAT_IB_EVD_EXTENSION_FLAGS = 0x200;

// ---------------------------------------------------------------------------
// `DAT_IB_MEM_PRIV_FLAGS`: IB extension memory privilege.
// ---------------------------------------------------------------------------

pub const DAT_IB_MEM_PRIV_REMOTE_ATOMIC: DAT_IB_MEM_PRIV_FLAGS = 0x40;

// ---------------------------------------------------------------------------
// `DAT_IB_SERVICE_TYPE`: IB extension endpoint service type.
// ---------------------------------------------------------------------------

pub const DAT_IB_SERVICE_TYPE_UD: DAT_IB_SERVICE_TYPE = 1;

// ---------------------------------------------------------------------------
// `DAT_IA_COUNTERS`: IA counter indexes of the counters extension.
// ---------------------------------------------------------------------------

pub const DCNT_IA_PZ_CREATE: DAT_IA_COUNTERS = 0;
pub const DCNT_IA_PZ_FREE: DAT_IA_COUNTERS = 1;
pub const DCNT_IA_LMR_CREATE: DAT_IA_COUNTERS = 2;
pub const DCNT_IA_LMR_FREE: DAT_IA_COUNTERS = 3;
pub const DCNT_IA_RMR_CREATE: DAT_IA_COUNTERS = 4;
pub const DCNT_IA_RMR_FREE: DAT_IA_COUNTERS = 5;
pub const DCNT_IA_PSP_CREATE: DAT_IA_COUNTERS = 6;
pub const DCNT_IA_PSP_CREATE_ANY: DAT_IA_COUNTERS = 7;
pub const DCNT_IA_PSP_FREE: DAT_IA_COUNTERS = 8;
pub const DCNT_IA_RSP_CREATE: DAT_IA_COUNTERS = 9;
pub const DCNT_IA_RSP_FREE: DAT_IA_COUNTERS = 10;
pub const DCNT_IA_EVD_CREATE: DAT_IA_COUNTERS = 11;
pub const DCNT_IA_EVD_FREE: DAT_IA_COUNTERS = 12;
pub const DCNT_IA_EP_CREATE: DAT_IA_COUNTERS = 13;
pub const DCNT_IA_EP_FREE: DAT_IA_COUNTERS = 14;
pub const DCNT_IA_SRQ_CREATE: DAT_IA_COUNTERS = 15;
pub const DCNT_IA_SRQ_FREE: DAT_IA_COUNTERS = 16;
pub const DCNT_IA_SP_CR: DAT_IA_COUNTERS = 17;
pub const DCNT_IA_SP_CR_ACCEPTED: DAT_IA_COUNTERS = 18;
pub const DCNT_IA_SP_CR_REJECTED: DAT_IA_COUNTERS = 19;
pub const DCNT_IA_MEM_ALLOC: DAT_IA_COUNTERS = 20;
pub const DCNT_IA_MEM_ALLOC_DATA: DAT_IA_COUNTERS = 21;
pub const DCNT_IA_MEM_FREE: DAT_IA_COUNTERS = 22;
pub const DCNT_IA_ASYNC_ERROR: DAT_IA_COUNTERS = 23;
pub const DCNT_IA_ASYNC_QP_ERROR: DAT_IA_COUNTERS = 24;
pub const DCNT_IA_ASYNC_CQ_ERROR: DAT_IA_COUNTERS = 25;
pub const DCNT_IA_CM_LISTEN: DAT_IA_COUNTERS = 26;
pub const DCNT_IA_CM_REQ_TX: DAT_IA_COUNTERS = 27;
pub const DCNT_IA_CM_REQ_RX: DAT_IA_COUNTERS = 28;
pub const DCNT_IA_CM_REP_TX: DAT_IA_COUNTERS = 29;
pub const DCNT_IA_CM_REP_RX: DAT_IA_COUNTERS = 30;
pub const DCNT_IA_CM_RTU_TX: DAT_IA_COUNTERS = 31;
pub const DCNT_IA_CM_RTU_RX: DAT_IA_COUNTERS = 32;
pub const DCNT_IA_CM_USER_REJ_TX: DAT_IA_COUNTERS = 33;
pub const DCNT_IA_CM_USER_REJ_RX: DAT_IA_COUNTERS = 34;
pub const DCNT_IA_CM_ACTIVE_EST: DAT_IA_COUNTERS = 35;
pub const DCNT_IA_CM_PASSIVE_EST: DAT_IA_COUNTERS = 36;
pub const DCNT_IA_CM_AH_REQ_TX: DAT_IA_COUNTERS = 37;
pub const DCNT_IA_CM_AH_REQ_RX: DAT_IA_COUNTERS = 38;
pub const DCNT_IA_CM_AH_RESOLVED: DAT_IA_COUNTERS = 39;
pub const DCNT_IA_CM_DREQ_TX: DAT_IA_COUNTERS = 40;
pub const DCNT_IA_CM_DREQ_RX: DAT_IA_COUNTERS = 41;
pub const DCNT_IA_CM_DREP_TX: DAT_IA_COUNTERS = 42;
pub const DCNT_IA_CM_DREP_RX: DAT_IA_COUNTERS = 43;
pub const DCNT_IA_CM_MRA_TX: DAT_IA_COUNTERS = 44;
pub const DCNT_IA_CM_MRA_RX: DAT_IA_COUNTERS = 45;
pub const DCNT_IA_CM_REQ_FULLQ_POLL: DAT_IA_COUNTERS = 46;
pub const DCNT_IA_CM_ERR: DAT_IA_COUNTERS = 47;
pub const DCNT_IA_CM_ERR_REQ_FULLQ: DAT_IA_COUNTERS = 48;
pub const DCNT_IA_CM_ERR_REQ_DUP: DAT_IA_COUNTERS = 49;
pub const DCNT_IA_CM_ERR_REQ_RETRY: DAT_IA_COUNTERS = 50;
pub const DCNT_IA_CM_ERR_REP_DUP: DAT_IA_COUNTERS = 51;
pub const DCNT_IA_CM_ERR_REP_RETRY: DAT_IA_COUNTERS = 52;
pub const DCNT_IA_CM_ERR_RTU_DUP: DAT_IA_COUNTERS = 53;
pub const DCNT_IA_CM_ERR_RTU_RETRY: DAT_IA_COUNTERS = 54;
pub const DCNT_IA_CM_ERR_REFUSED: DAT_IA_COUNTERS = 55;
pub const DCNT_IA_CM_ERR_RESET: DAT_IA_COUNTERS = 56;
pub const DCNT_IA_CM_ERR_TIMEOUT: DAT_IA_COUNTERS = 57;
pub const DCNT_IA_CM_ERR_REJ_TX: DAT_IA_COUNTERS = 58;
pub const DCNT_IA_CM_ERR_REJ_RX: DAT_IA_COUNTERS = 59;
pub const DCNT_IA_CM_ERR_DREQ_DUP: DAT_IA_COUNTERS = 60;
pub const DCNT_IA_CM_ERR_DREQ_RETRY: DAT_IA_COUNTERS = 61;
pub const DCNT_IA_CM_ERR_DREP_DUP: DAT_IA_COUNTERS = 62;
pub const DCNT_IA_CM_ERR_DREP_RETRY: DAT_IA_COUNTERS = 63;
pub const DCNT_IA_CM_ERR_MRA_DUP: DAT_IA_COUNTERS = 64;
pub const DCNT_IA_CM_ERR_MRA_RETRY: DAT_IA_COUNTERS = 65;
pub const DCNT_IA_CM_ERR_UNEXPECTED: DAT_IA_COUNTERS = 66;
pub const DCNT_IA_LNK_ERR_RCV: DAT_IA_COUNTERS = 67;
pub const DCNT_IA_LNK_ERR_RCV_REM_PHYS: DAT_IA_COUNTERS = 68;
pub const DCNT_IA_LNK_ERR_RCV_CONSTRAINT: DAT_IA_COUNTERS = 69;
pub const DCNT_IA_LNK_ERR_XMT_DISCARDS: DAT_IA_COUNTERS = 70;
pub const DCNT_IA_LNK_ERR_XMT_CONTRAINT: DAT_IA_COUNTERS = 71;
pub const DCNT_IA_LNK_ERR_INTEGRITY: DAT_IA_COUNTERS = 72;
pub const DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN: DAT_IA_COUNTERS = 73;
pub const DCNT_IA_LNK_WARN_RCV_SW_RELAY: DAT_IA_COUNTERS = 74;
pub const DCNT_IA_LNK_WARN_XMT_WAIT: DAT_IA_COUNTERS = 75;
pub const DCNT_IA_DIAG_ERR_RQ_RAE: DAT_IA_COUNTERS = 76;
pub const DCNT_IA_DIAG_ERR_RQ_OOS: DAT_IA_COUNTERS = 77;
pub const DCNT_IA_DIAG_ERR_RQ_RIRE: DAT_IA_COUNTERS = 78;
pub const DCNT_IA_DIAG_ERR_RQ_UDSDPRD: DAT_IA_COUNTERS = 79;
pub const DCNT_IA_DIAG_ERR_SQ_RAE: DAT_IA_COUNTERS = 80;
pub const DCNT_IA_DIAG_ERR_SQ_OOS: DAT_IA_COUNTERS = 81;
pub const DCNT_IA_DIAG_ERR_SQ_RIRE: DAT_IA_COUNTERS = 82;
pub const DCNT_IA_DIAG_ERR_SQ_RREE: DAT_IA_COUNTERS = 83;
pub const DCNT_IA_DIAG_ERR_SQ_TREE: DAT_IA_COUNTERS = 84;
pub const DCNT_IA_ALL_COUNTERS: DAT_IA_COUNTERS = 85;

// ---------------------------------------------------------------------------
// `DAT_EP_COUNTERS`: Endpoint counter indexes of the counters extension.
// ---------------------------------------------------------------------------

pub const DCNT_EP_CONNECT: DAT_EP_COUNTERS = 0;
pub const DCNT_EP_DISCONNECT: DAT_EP_COUNTERS = 1;
pub const DCNT_EP_POST_SEND: DAT_EP_COUNTERS = 2;
pub const DCNT_EP_POST_SEND_DATA: DAT_EP_COUNTERS = 3;
pub const DCNT_EP_POST_SEND_UD: DAT_EP_COUNTERS = 4;
pub const DCNT_EP_POST_SEND_UD_DATA: DAT_EP_COUNTERS = 5;
pub const DCNT_EP_POST_RECV: DAT_EP_COUNTERS = 6;
pub const DCNT_EP_POST_RECV_DATA: DAT_EP_COUNTERS = 7;
pub const DCNT_EP_POST_WRITE: DAT_EP_COUNTERS = 8;
pub const DCNT_EP_POST_WRITE_DATA: DAT_EP_COUNTERS = 9;
pub const DCNT_EP_POST_WRITE_IMM: DAT_EP_COUNTERS = 10;
pub const DCNT_EP_POST_WRITE_IMM_DATA: DAT_EP_COUNTERS = 11;
pub const DCNT_EP_POST_READ: DAT_EP_COUNTERS = 12;
pub const DCNT_EP_POST_READ_DATA: DAT_EP_COUNTERS = 13;
pub const DCNT_EP_POST_CMP_SWAP: DAT_EP_COUNTERS = 14;
pub const DCNT_EP_POST_FETCH_ADD: DAT_EP_COUNTERS = 15;
pub const DCNT_EP_RECV: DAT_EP_COUNTERS = 16;
pub const DCNT_EP_RECV_DATA: DAT_EP_COUNTERS = 17;
pub const DCNT_EP_RECV_UD: DAT_EP_COUNTERS = 18;
pub const DCNT_EP_RECV_UD_DATA: DAT_EP_COUNTERS = 19;
pub const DCNT_EP_RECV_IMM: DAT_EP_COUNTERS = 20;
pub const DCNT_EP_RECV_IMM_DATA: DAT_EP_COUNTERS = 21;
pub const DCNT_EP_RECV_RDMA_IMM: DAT_EP_COUNTERS = 22;
pub const DCNT_EP_RECV_RDMA_IMM_DATA: DAT_EP_COUNTERS = 23;
pub const DCNT_EP_ALL_COUNTERS: DAT_EP_COUNTERS = 24;

// ---------------------------------------------------------------------------
// `DAT_EVD_COUNTERS`: EVD counter indexes of the counters extension.
// ---------------------------------------------------------------------------

pub const DCNT_EVD_WAIT: DAT_EVD_COUNTERS = 0;
pub const DCNT_EVD_WAIT_BLOCKED: DAT_EVD_COUNTERS = 1;
pub const DCNT_EVD_WAIT_NOTIFY: DAT_EVD_COUNTERS = 2;
pub const DCNT_EVD_DEQUEUE: DAT_EVD_COUNTERS = 3;
pub const DCNT_EVD_DEQUEUE_FOUND: DAT_EVD_COUNTERS = 4;
pub const DCNT_EVD_DEQUEUE_NOT_FOUND: DAT_EVD_COUNTERS = 5;
pub const DCNT_EVD_DEQUEUE_POLL: DAT_EVD_COUNTERS = 6;
pub const DCNT_EVD_DEQUEUE_POLL_FOUND: DAT_EVD_COUNTERS = 7;
pub const DCNT_EVD_CONN_CALLBACK: DAT_EVD_COUNTERS = 8;
pub const DCNT_EVD_DTO_CALLBACK: DAT_EVD_COUNTERS = 9;
pub const DCNT_EVD_ALL_COUNTERS: DAT_EVD_COUNTERS = 10;

// ---------------------------------------------------------------------------
// `DAT_IA_COUNTER_TYPE`: IA counter groups of the counters extension.
// ---------------------------------------------------------------------------

pub const DCNT_IA_CM: DAT_IA_COUNTER_TYPE = 0;
pub const DCNT_IA_LNK: DAT_IA_COUNTER_TYPE = 1;
pub const DCNT_IA_DIAG: DAT_IA_COUNTER_TYPE = 2;

// ---------------------------------------------------------------------------
// `DAT_IB_COLLECTIVE_DATA_TYPE`: Element types of the collective extension.
// ---------------------------------------------------------------------------

pub const DAT_IB_COLLECTIVE_TYPE_INT8: DAT_IB_COLLECTIVE_DATA_TYPE = 0;
pub const DAT_IB_COLLECTIVE_TYPE_UINT8: DAT_IB_COLLECTIVE_DATA_TYPE = 1;
pub const DAT_IB_COLLECTIVE_TYPE_INT16: DAT_IB_COLLECTIVE_DATA_TYPE = 2;
pub const DAT_IB_COLLECTIVE_TYPE_UINT16: DAT_IB_COLLECTIVE_DATA_TYPE = 3;
pub const DAT_IB_COLLECTIVE_TYPE_INT32: DAT_IB_COLLECTIVE_DATA_TYPE = 4;
pub const DAT_IB_COLLECTIVE_TYPE_UINT32: DAT_IB_COLLECTIVE_DATA_TYPE = 5;
pub const DAT_IB_COLLECTIVE_TYPE_INT64: DAT_IB_COLLECTIVE_DATA_TYPE = 6;
pub const DAT_IB_COLLECTIVE_TYPE_UINT64: DAT_IB_COLLECTIVE_DATA_TYPE = 7;
pub const DAT_IB_COLLECTIVE_TYPE_FLOAT: DAT_IB_COLLECTIVE_DATA_TYPE = 8;
pub const DAT_IB_COLLECTIVE_TYPE_DOUBLE: DAT_IB_COLLECTIVE_DATA_TYPE = 9;
pub const DAT_IB_COLLECTIVE_TYPE_LONG_DOUBLE: DAT_IB_COLLECTIVE_DATA_TYPE = 10;
pub const DAT_IB_COLLECTIVE_TYPE_SHORT_INT: DAT_IB_COLLECTIVE_DATA_TYPE = 11;
pub const DAT_IB_COLLECTIVE_TYPE_2INT: DAT_IB_COLLECTIVE_DATA_TYPE = 12;
pub const DAT_IB_COLLECTIVE_TYPE_FLOAT_INT: DAT_IB_COLLECTIVE_DATA_TYPE = 13;
pub const DAT_IB_COLLECTIVE_TYPE_LONG_INT: DAT_IB_COLLECTIVE_DATA_TYPE = 14;
pub const DAT_IB_COLLECTIVE_TYPE_DOUBLE_INT: DAT_IB_COLLECTIVE_DATA_TYPE = 15;

// ---------------------------------------------------------------------------
// `DAT_IB_COLLECTIVE_REDUCE_DATA_OP`: Reduction operators of the collective extension.
// ---------------------------------------------------------------------------

pub const DAT_IB_COLLECTIVE_REDUCE_OP_MAX: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 0;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_MIN: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 1;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_SUM: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 2;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_PROD: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 3;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_LAND: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 4;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_BAND: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 5;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_LOR: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 6;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_BOR: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 7;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_LXOR: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 8;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_BXOR: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 9;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_MAXLOC: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 10;
pub const DAT_IB_COLLECTIVE_REDUCE_OP_MINLOC: DAT_IB_COLLECTIVE_REDUCE_DATA_OP = 11;

// ---------------------------------------------------------------------------
// Versions and build configuration
// ---------------------------------------------------------------------------

pub const DAT_VERSION_MAJOR: DAT_UINT32 = 2;
pub const DAT_VERSION_MINOR: DAT_UINT32 = 0;
pub const DAT_THREADSAFE: DAT_BOOLEAN = DAT_FALSE;
pub const DAT_EXTENSIONS: c_int = 1;
pub const DAT_OPTIMAL_ALIGNMENT: DAT_UINT32 = 256;
pub const DAT_AF_INET: c_int = libc::AF_INET;
pub const DAT_AF_INET6: c_int = libc::AF_INET6;

// ---------------------------------------------------------------------------
// Sizes and limits
// ---------------------------------------------------------------------------

pub const DAT_NAME_MAX_LENGTH: usize = 256;
pub const DAT_LMR_COOKIE_SIZE: usize = 40;
pub const DAT_TIMEOUT_INFINITE: DAT_TIMEOUT = DAT_TIMEOUT::MAX;
pub const DAT_WATERMARK_INFINITE: DAT_COUNT = -1;
pub const DAT_HW_DEFAULT: DAT_COUNT = DAT_WATERMARK_INFINITE;
pub const DAT_SRQ_LW_DEFAULT: DAT_COUNT = 0;
pub const DAT_VALUE_UNKNOWN: DAT_COUNT = -2;

// ---------------------------------------------------------------------------
// Extension families (plain `int` macros; see also `DAT_EXTENSION_*`)
// ---------------------------------------------------------------------------

pub const DAT_IB_EXTENSION: c_int = 1;
pub const DAT_IW_EXTENSION: c_int = 2;
pub const DAT_IB_EXTENSION_VERSION: DAT_COUNT = 209;
pub const DAT_OPEN_EXTENSION_BASE: DAT_EXTENDED_OP = 0x1000;
pub const DAT_CLOSE_EXTENSION_BASE: DAT_EXTENDED_OP = 0x2000;

// ---------------------------------------------------------------------------
// High-availability load balancing
// ---------------------------------------------------------------------------

pub const DAT_HA_LB_NONE: DAT_HA_LB = 0;
pub const DAT_HA_LB_INTERCOMM: DAT_HA_LB = 1;
pub const DAT_HA_LB_INTRACOMM: DAT_HA_LB = 2;

// ---------------------------------------------------------------------------
// Aliases kept for older consumers
// ---------------------------------------------------------------------------

pub const DAT_CONNECT_MULTIPATH_REQUESTED_FLAG: DAT_CONNECT_FLAGS = DAT_CONNECT_MULTIPATH_FLAG;
pub const DAT_CLOSE_DEFAULT: DAT_CLOSE_FLAGS = DAT_CLOSE_ABRUPT_FLAG;
pub const DAT_MEM_PRIV_READ_FLAG: DAT_MEM_PRIV_FLAGS = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG;
pub const DAT_MEM_PRIV_WRITE_FLAG: DAT_MEM_PRIV_FLAGS = DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
pub const DAT_EP_STATE_ERROR: DAT_EP_STATE = DAT_EP_STATE_DISCONNECTED;
pub const DAT_DTO_LENGTH_ERROR: DAT_DTO_COMPLETION_STATUS = DAT_DTO_ERR_LOCAL_LENGTH;
pub const DAT_DTO_FAILURE: DAT_DTO_COMPLETION_STATUS = DAT_DTO_ERR_FLUSHED;
pub const DAT_RMR_BIND_SUCCESS: DAT_DTO_COMPLETION_STATUS = DAT_DTO_SUCCESS;
pub const DAT_RMR_BIND_FAILURE: DAT_DTO_COMPLETION_STATUS = DAT_DTO_ERR_FLUSHED;
pub const DAT_QUERY_COUNTERS_OP: DAT_IB_OP = DAT_IB_QUERY_COUNTERS_OP;
pub const DAT_PRINT_COUNTERS_OP: DAT_IB_OP = DAT_IB_PRINT_COUNTERS_OP;

// ---------------------------------------------------------------------------
// `dat_ia_query` IA attribute selectors
// ---------------------------------------------------------------------------

pub const DAT_IA_FIELD_IA_ADAPTER_NAME: DAT_IA_ATTR_MASK = 0x1;
pub const DAT_IA_FIELD_IA_VENDOR_NAME: DAT_IA_ATTR_MASK = 0x2;
pub const DAT_IA_FIELD_IA_HARDWARE_MAJOR_VERSION: DAT_IA_ATTR_MASK = 0x4;
pub const DAT_IA_FIELD_IA_HARDWARE_MINOR_VERSION: DAT_IA_ATTR_MASK = 0x8;
pub const DAT_IA_FIELD_IA_FIRMWARE_MAJOR_VERSION: DAT_IA_ATTR_MASK = 0x10;
pub const DAT_IA_FIELD_IA_FIRMWARE_MINOR_VERSION: DAT_IA_ATTR_MASK = 0x20;
pub const DAT_IA_FIELD_IA_ADDRESS_PTR: DAT_IA_ATTR_MASK = 0x40;
pub const DAT_IA_FIELD_IA_MAX_EPS: DAT_IA_ATTR_MASK = 0x80;
pub const DAT_IA_FIELD_IA_MAX_DTO_PER_EP: DAT_IA_ATTR_MASK = 0x100;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN: DAT_IA_ATTR_MASK = 0x200;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT: DAT_IA_ATTR_MASK = 0x400;
pub const DAT_IA_FIELD_IA_MAX_EVDS: DAT_IA_ATTR_MASK = 0x800;
pub const DAT_IA_FIELD_IA_MAX_EVD_QLEN: DAT_IA_ATTR_MASK = 0x1000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_DTO: DAT_IA_ATTR_MASK = 0x2000;
pub const DAT_IA_FIELD_IA_MAX_LMRS: DAT_IA_ATTR_MASK = 0x4000;
pub const DAT_IA_FIELD_IA_MAX_LMR_BLOCK_SIZE: DAT_IA_ATTR_MASK = 0x8000;
pub const DAT_IA_FIELD_IA_MAX_LMR_VIRTUAL_ADDRESS: DAT_IA_ATTR_MASK = 0x10000;
pub const DAT_IA_FIELD_IA_MAX_PZS: DAT_IA_ATTR_MASK = 0x20000;
pub const DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE: DAT_IA_ATTR_MASK = 0x40000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_SIZE: DAT_IA_ATTR_MASK = 0x80000;
pub const DAT_IA_FIELD_IA_MAX_RMRS: DAT_IA_ATTR_MASK = 0x100000;
pub const DAT_IA_FIELD_IA_MAX_RMR_TARGET_ADDRESS: DAT_IA_ATTR_MASK = 0x200000;
pub const DAT_IA_FIELD_IA_MAX_SRQS: DAT_IA_ATTR_MASK = 0x400000;
pub const DAT_IA_FIELD_IA_MAX_EP_PER_SRQ: DAT_IA_ATTR_MASK = 0x800000;
pub const DAT_IA_FIELD_IA_MAX_RECV_PER_SRQ: DAT_IA_ATTR_MASK = 0x1000000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_READ: DAT_IA_ATTR_MASK = 0x2000000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_WRITE: DAT_IA_ATTR_MASK = 0x4000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_IN: DAT_IA_ATTR_MASK = 0x8000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_OUT: DAT_IA_ATTR_MASK = 0x10000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN_GUARANTEED: DAT_IA_ATTR_MASK = 0x20000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT_GUARANTEED: DAT_IA_ATTR_MASK = 0x40000000;
pub const DAT_IA_FIELD_IA_ZB_SUPPORTED: DAT_IA_ATTR_MASK = 0x80000000;
pub const DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED: DAT_IA_ATTR_MASK = 0x100000000;
pub const DAT_IA_FIELD_NONE: DAT_IA_ATTR_MASK = 0x0;
pub const DAT_IA_FIELD_IA_EXTENSION: DAT_IA_ATTR_MASK = 0x100000000;
pub const DAT_IA_FIELD_IA_EXTENSION_VERSION: DAT_IA_ATTR_MASK = 0x200000000;
pub const DAT_IA_FIELD_IA_NUM_TRANSPORT_ATTR: DAT_IA_ATTR_MASK = 0x400000000;
pub const DAT_IA_FIELD_IA_TRANSPORT_ATTR: DAT_IA_ATTR_MASK = 0x800000000;
pub const DAT_IA_FIELD_IA_NUM_VENDOR_ATTR: DAT_IA_ATTR_MASK = 0x1000000000;
pub const DAT_IA_FIELD_IA_VENDOR_ATTR: DAT_IA_ATTR_MASK = 0x2000000000;
pub const DAT_IA_FIELD_ALL: DAT_IA_ATTR_MASK = 0x3fffffffff;
pub const DAT_IA_ALL: DAT_IA_ATTR_MASK = DAT_IA_FIELD_ALL;
pub const DAT_IA_FIELD_IA_MAX_MTU_SIZE: DAT_IA_ATTR_MASK = DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE;

// ---------------------------------------------------------------------------
// `dat_ia_query` provider attribute selectors
// ---------------------------------------------------------------------------

pub const DAT_PROVIDER_FIELD_PROVIDER_NAME: DAT_PROVIDER_ATTR_MASK = 0x1;
pub const DAT_PROVIDER_FIELD_PROVIDER_VERSION_MAJOR: DAT_PROVIDER_ATTR_MASK = 0x2;
pub const DAT_PROVIDER_FIELD_PROVIDER_VERSION_MINOR: DAT_PROVIDER_ATTR_MASK = 0x4;
pub const DAT_PROVIDER_FIELD_DAPL_VERSION_MAJOR: DAT_PROVIDER_ATTR_MASK = 0x8;
pub const DAT_PROVIDER_FIELD_DAPL_VERSION_MINOR: DAT_PROVIDER_ATTR_MASK = 0x10;
pub const DAT_PROVIDER_FIELD_LMR_MEM_TYPE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x20;
pub const DAT_PROVIDER_FIELD_IOV_OWNERSHIP: DAT_PROVIDER_ATTR_MASK = 0x40;
pub const DAT_PROVIDER_FIELD_DAT_QOS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x80;
pub const DAT_PROVIDER_FIELD_COMPLETION_FLAGS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x100;
pub const DAT_PROVIDER_FIELD_IS_THREAD_SAFE: DAT_PROVIDER_ATTR_MASK = 0x200;
pub const DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE: DAT_PROVIDER_ATTR_MASK = 0x400;
pub const DAT_PROVIDER_FIELD_SUPPORTS_MULTIPATH: DAT_PROVIDER_ATTR_MASK = 0x800;
pub const DAT_PROVIDER_FIELD_EP_CREATOR: DAT_PROVIDER_ATTR_MASK = 0x1000;
pub const DAT_PROVIDER_FIELD_PZ_SUPPORT: DAT_PROVIDER_ATTR_MASK = 0x2000;
pub const DAT_PROVIDER_FIELD_OPTIMAL_BUFFER_ALIGNMENT: DAT_PROVIDER_ATTR_MASK = 0x4000;
pub const DAT_PROVIDER_FIELD_EVD_STREAM_MERGING_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x8000;
pub const DAT_PROVIDER_FIELD_SRQ_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x10000;
pub const DAT_PROVIDER_FIELD_SRQ_WATERMARKS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x20000;
pub const DAT_PROVIDER_FIELD_SRQ_EP_PZ_DIFFERENCE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x40000;
pub const DAT_PROVIDER_FIELD_SRQ_INFO_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x80000;
pub const DAT_PROVIDER_FIELD_EP_RECV_INFO_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x100000;
pub const DAT_PROVIDER_FIELD_LMR_SYNC_REQ: DAT_PROVIDER_ATTR_MASK = 0x200000;
pub const DAT_PROVIDER_FIELD_DTO_ASYNC_RETURN_GUARANTEED: DAT_PROVIDER_ATTR_MASK = 0x400000;
pub const DAT_PROVIDER_FIELD_RDMA_WRITE_FOR_RDMA_READ_REQ: DAT_PROVIDER_ATTR_MASK = 0x800000;
pub const DAT_PROVIDER_FIELD_RDMA_READ_LMR_RMR_CONTEXT_EXPOSURE: DAT_PROVIDER_ATTR_MASK = 0x1000000;
pub const DAT_PROVIDER_FIELD_RMR_SCOPE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x2000000;
pub const DAT_PROVIDER_FIELD_IS_SIGNAL_SAFE: DAT_PROVIDER_ATTR_MASK = 0x4000000;
pub const DAT_PROVIDER_FIELD_HA_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x8000000;
pub const DAT_PROVIDER_FIELD_HA_LB: DAT_PROVIDER_ATTR_MASK = 0x10000000;
pub const DAT_PROVIDER_FIELD_NUM_PROVIDER_SPECIFIC_ATTR: DAT_PROVIDER_ATTR_MASK = 0x20000000;
pub const DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR: DAT_PROVIDER_ATTR_MASK = 0x40000000;
pub const DAT_PROVIDER_FIELD_ALL: DAT_PROVIDER_ATTR_MASK = 0x7fffffff;
pub const DAT_PROVIDER_FIELD_NONE: DAT_PROVIDER_ATTR_MASK = 0x0;

// ---------------------------------------------------------------------------
// `dat_ep_query` / `dat_ep_modify` field selectors
// ---------------------------------------------------------------------------

pub const DAT_EP_FIELD_IA_HANDLE: DAT_EP_PARAM_MASK = 0x1;
pub const DAT_EP_FIELD_EP_STATE: DAT_EP_PARAM_MASK = 0x2;
pub const DAT_EP_FIELD_COMM: DAT_EP_PARAM_MASK = 0x4;
pub const DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR: DAT_EP_PARAM_MASK = 0x8;
pub const DAT_EP_FIELD_LOCAL_PORT_QUAL: DAT_EP_PARAM_MASK = 0x10;
pub const DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR: DAT_EP_PARAM_MASK = 0x20;
pub const DAT_EP_FIELD_REMOTE_PORT_QUAL: DAT_EP_PARAM_MASK = 0x40;
pub const DAT_EP_FIELD_PZ_HANDLE: DAT_EP_PARAM_MASK = 0x80;
pub const DAT_EP_FIELD_RECV_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x100;
pub const DAT_EP_FIELD_REQUEST_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x200;
pub const DAT_EP_FIELD_CONNECT_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x400;
pub const DAT_EP_FIELD_SRQ_HANDLE: DAT_EP_PARAM_MASK = 0x800;
pub const DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE: DAT_EP_PARAM_MASK = 0x1000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE: DAT_EP_PARAM_MASK = 0x2000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE: DAT_EP_PARAM_MASK = 0x4000;
pub const DAT_EP_FIELD_EP_ATTR_QOS: DAT_EP_PARAM_MASK = 0x8000;
pub const DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS: DAT_EP_PARAM_MASK = 0x10000;
pub const DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS: DAT_EP_PARAM_MASK = 0x20000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS: DAT_EP_PARAM_MASK = 0x40000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS: DAT_EP_PARAM_MASK = 0x80000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV: DAT_EP_PARAM_MASK = 0x100000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV: DAT_EP_PARAM_MASK = 0x200000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN: DAT_EP_PARAM_MASK = 0x400000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT: DAT_EP_PARAM_MASK = 0x800000;
pub const DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW: DAT_EP_PARAM_MASK = 0x1000000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV: DAT_EP_PARAM_MASK = 0x2000000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV: DAT_EP_PARAM_MASK = 0x4000000;
pub const DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR: DAT_EP_PARAM_MASK = 0x8000000;
pub const DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR: DAT_EP_PARAM_MASK = 0x10000000;
pub const DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR: DAT_EP_PARAM_MASK = 0x20000000;
pub const DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR: DAT_EP_PARAM_MASK = 0x40000000;
pub const DAT_EP_FIELD_EP_ATTR_ALL: DAT_EP_PARAM_MASK = 0x7ffff000;
pub const DAT_EP_FIELD_ALL: DAT_EP_PARAM_MASK = 0x7fffffff;

// ---------------------------------------------------------------------------
// Provider library entry point names (looked up with dlsym)
// ---------------------------------------------------------------------------

pub const DAT_PROVIDER_INIT_FUNC_STR: &CStr = c"dat_provider_init";
pub const DAT_PROVIDER_FINI_FUNC_STR: &CStr = c"dat_provider_fini";

// ---------------------------------------------------------------------------
// Names of IB extension attributes (provider-specific attributes)
// ---------------------------------------------------------------------------

pub const DAT_IB_ATTR_COUNTERS: &CStr = c"DAT_COUNTERS";
pub const DAT_IB_ATTR_FETCH_AND_ADD: &CStr = c"DAT_IB_FETCH_AND_ADD";
pub const DAT_IB_ATTR_CMP_AND_SWAP: &CStr = c"DAT_IB_CMP_AND_SWAP";
pub const DAT_IB_ATTR_IMMED_DATA: &CStr = c"DAT_IB_IMMED_DATA";
pub const DAT_IB_ATTR_UD: &CStr = c"DAT_IB_UD";
pub const DAT_IB_COLL_SET_CLOCK: &CStr = c"DAT_COLL_SET_CLOCK";
pub const DAT_IB_COLL_READ_CLOCK: &CStr = c"DAT_COLL_READ_CLOCK";
pub const DAT_IB_COLL_BROADCAST: &CStr = c"DAT_COLL_BROADCAST";
pub const DAT_IB_COLL_BARRIER: &CStr = c"DAT_COLL_BARRIER";
pub const DAT_IB_COLL_SCATTER: &CStr = c"DAT_COLL_SCATTER";
pub const DAT_IB_COLL_SCATTERV: &CStr = c"DAT_COLL_SCATTERV";
pub const DAT_IB_COLL_GATHER: &CStr = c"DAT_COLL_GATHER";
pub const DAT_IB_COLL_GATHERV: &CStr = c"DAT_COLL_GATHERV";
pub const DAT_IB_COLL_ALLGATHER: &CStr = c"DAT_COLL_ALLGATHER";
pub const DAT_IB_COLL_ALLGATHERV: &CStr = c"DAT_COLL_ALLGATHERV";
pub const DAT_IB_COLL_ALLTOALL: &CStr = c"DAT_COLL_ALLTOALL";
pub const DAT_IB_COLL_ALLTOALLV: &CStr = c"DAT_COLL_ALLTOALLV";
pub const DAT_IB_COLL_REDUCE: &CStr = c"DAT_COLL_REDUCE";
pub const DAT_IB_COLL_ALLREDUCE: &CStr = c"DAT_COLL_ALLREDUCE";
pub const DAT_IB_COLL_REDUCE_SCATTER: &CStr = c"DAT_COLL_REDUCE_SCATTER";
pub const DAT_IB_COLL_SCAN: &CStr = c"DAT_COLL_SCAN";
pub const DAT_ATTR_COUNTERS: &CStr = c"DAT_COUNTERS";

// ---------------------------------------------------------------------------
// Special handle and aggregate values
// ---------------------------------------------------------------------------

/// The null handle.
pub const DAT_HANDLE_NULL: DAT_HANDLE = core::ptr::null_mut();
/// Address value of the `DAT_EVD_ASYNC_EXISTS` pseudo-handle that a consumer
/// passes to `dat_ia_open` to say that it already owns an async EVD.
pub const DAT_EVD_ASYNC_EXISTS: usize = 0x1;
/// Address value of the `DAT_EVD_OUT_OF_SCOPE` pseudo-handle.
pub const DAT_EVD_OUT_OF_SCOPE: usize = 0x2;
/// A CNO proxy agent with no instance data and no callback.
pub const DAT_OS_WAIT_PROXY_AGENT_NULL: DAT_OS_WAIT_PROXY_AGENT =
    DAT_OS_WAIT_PROXY_AGENT { instance_data: core::ptr::null_mut(), proxy_agent_func: None };

#[cfg(test)]
mod tests {
    use super::{
        dat_error, dat_get_subtype, dat_get_type, dat_is_warning, DAT_EP_FIELD_ALL, DAT_EP_FIELD_EP_ATTR_ALL, DAT_EVD_ASYNC_FLAG,
        DAT_EVD_CONNECTION_FLAG, DAT_EVD_CR_FLAG, DAT_EVD_DEFAULT_FLAG, DAT_EVD_DTO_FLAG, DAT_EVD_EXTENSION_BASE, DAT_EVD_RMR_BIND_FLAG,
        DAT_IA_FIELD_ALL, DAT_IB_EVD_EXTENSION_FLAG, DAT_INVALID_ARG1, DAT_INVALID_ARG6, DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1,
        DAT_INVALID_HANDLE_EP, DAT_INVALID_HANDLE_EVD_REQUEST, DAT_INVALID_HANDLE_IA, DAT_INVALID_PARAMETER, DAT_INVALID_STATE,
        DAT_INVALID_STATE_PZ_IN_USE, DAT_LMR_FIELD_ALL, DAT_LMR_FIELD_REGISTERED_ADDRESS, DAT_NAME_NOT_REGISTERED, DAT_NOT_IMPLEMENTED,
        DAT_NO_SUBTYPE, DAT_PROVIDER_FIELD_ALL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, DAT_PROVIDER_NOT_FOUND, DAT_QUEUE_EMPTY,
        DAT_TIMEOUT_EXPIRED,
    };
    use crate::abi::types::{DAT_IB_EXTENSION_EVENT_DATA, DAT_UINT64};

    #[test]
    fn error_codes_compose_like_the_original_library() {
        // Codes observed from Debian's libdat2 (the project's ABI reference, kept outside the
        // repository: ../shared/reference/dat-abi.md next to the checkout).
        let cases = [
            (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA, 0x8005_000b),
            (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST, 0x8005_0015),
            (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1, 0x8005_001b),
            (DAT_INVALID_PARAMETER, DAT_INVALID_ARG1, 0x8006_0025),
            (DAT_INVALID_PARAMETER, DAT_INVALID_ARG6, 0x8006_002a),
            (DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED, 0x800a_0064),
            (DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE, 0x8007_0053),
            (DAT_TIMEOUT_EXPIRED, DAT_NO_SUBTYPE, 0x800f_0000),
        ];
        for (type_, subtype, code) in cases {
            assert_eq!(dat_error(type_, subtype), code);
        }
    }

    #[test]
    fn error_codes_split() {
        let r = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        assert_eq!(dat_get_type(r), DAT_INVALID_HANDLE);
        assert_eq!(dat_get_subtype(r), DAT_INVALID_HANDLE_EP);
        assert!(!dat_is_warning(r));
        assert_eq!(dat_get_type(DAT_QUEUE_EMPTY), DAT_QUEUE_EMPTY);
        assert_eq!(dat_get_type(DAT_NOT_IMPLEMENTED), DAT_NOT_IMPLEMENTED);
    }

    #[test]
    fn masks_cover_their_fields() {
        assert_eq!(DAT_IA_FIELD_ALL, (1u64 << 38) - 1);
        assert_eq!(DAT_EP_FIELD_ALL, DAT_EP_FIELD_EP_ATTR_ALL | 0xfff);
        assert_eq!(DAT_PROVIDER_FIELD_ALL, (DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR << 1) - 1);
        assert_eq!(DAT_LMR_FIELD_ALL, (DAT_LMR_FIELD_REGISTERED_ADDRESS << 1) - 1);
        assert_eq!(
            DAT_EVD_DEFAULT_FLAG,
            DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG | DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG
        );
    }

    #[test]
    fn ib_extension_data_fits_in_an_event() {
        let ext = core::mem::size_of::<DAT_IB_EXTENSION_EVENT_DATA>();
        let room = core::mem::size_of::<[DAT_UINT64; 8]>();
        assert!(ext <= room);
        assert_eq!(DAT_IB_EVD_EXTENSION_FLAG, DAT_EVD_EXTENSION_BASE);
    }
}
