//! `dat_strerror`: the names of a `DAT_RETURN`'s type and subtype.
//!
//! The strings and the set of known values are those of the original library, so programs that
//! print them read the same: types 0x14-0x17, extension types and the SRQ-state subtypes 85-88
//! are not known to it, and neither are they here.

use core::ffi::{c_char, CStr};

use crate::abi::*;
use crate::ffi::guard;

/// Type names, indexed by `DAT_GET_TYPE(value) >> 16` for 0x00..=0x13.
const TYPE_NAMES: [&CStr; 20] = [
    c"DAT_SUCCESS",
    c"DAT_ABORT",
    c"DAT_CONN_QUAL_IN_USE",
    c"DAT_INSUFFICIENT_RESOURCES",
    c"DAT_INTERNAL_ERROR",
    c"DAT_INVALID_HANDLE",
    c"DAT_INVALID_PARAMETER",
    c"DAT_INVALID_STATE",
    c"DAT_LENGTH_ERROR",
    c"DAT_MODEL_NOT_SUPPORTED",
    c"DAT_PROVIDER_NOT_FOUND",
    c"DAT_PRIVILEGES_VIOLATION",
    c"DAT_PROTECTION_VIOLATION",
    c"DAT_QUEUE_EMPTY",
    c"DAT_QUEUE_FULL",
    c"DAT_TIMEOUT_EXPIRED",
    c"DAT_PROVIDER_ALREADY_REGISTERED",
    c"DAT_PROVIDER_IN_USE",
    c"DAT_INVALID_ADDRESS",
    c"DAT_INTERRUPTED_CALL",
];

/// Subtype names 0..=84 (0 is not printed by name).
const SUBTYPE_NAMES: [&CStr; 85] = [
    c"DAT_NO_SUBTYPE",
    c"DAT_SUB_INTERRUPTED",
    c"DAT_RESOURCE_MEMORY",
    c"DAT_RESOURCE_DEVICE",
    c"DAT_RESOURCE_TEP",
    c"DAT_RESOURCE_TEVD",
    c"DAT_RESOURCE_PROTECTION_DOMAIN",
    c"DAT_RESOURCE_MEMORY_REGION",
    c"DAT_RESOURCE_ERROR_HANDLER",
    c"DAT_RESOURCE_CREDITS",
    c"DAT_RESOURCE_SRQ",
    c"DAT_INVALID_HANDLE_IA",
    c"DAT_INVALID_HANDLE_EP",
    c"DAT_INVALID_HANDLE_LMR",
    c"DAT_INVALID_HANDLE_RMR",
    c"DAT_INVALID_HANDLE_PZ",
    c"DAT_INVALID_HANDLE_PSP",
    c"DAT_INVALID_HANDLE_RSP",
    c"DAT_INVALID_HANDLE_CR",
    c"DAT_INVALID_HANDLE_CNO",
    c"DAT_INVALID_HANDLE_EVD_CR",
    c"DAT_INVALID_HANDLE_EVD_REQUEST",
    c"DAT_INVALID_HANDLE_EVD_RECV",
    c"DAT_INVALID_HANDLE_EVD_CONN",
    c"DAT_INVALID_HANDLE_EVD_ASYNC",
    c"DAT_INVALID_HANDLE_SRQ",
    c"DAT_INVALID_HANDLE_CSP",
    c"DAT_INVALID_HANDLE1",
    c"DAT_INVALID_HANDLE2",
    c"DAT_INVALID_HANDLE3",
    c"DAT_INVALID_HANDLE4",
    c"DAT_INVALID_HANDLE5",
    c"DAT_INVALID_HANDLE6",
    c"DAT_INVALID_HANDLE7",
    c"DAT_INVALID_HANDLE8",
    c"DAT_INVALID_HANDLE9",
    c"DAT_INVALID_HANDLE10",
    c"DAT_INVALID_ARG1",
    c"DAT_INVALID_ARG2",
    c"DAT_INVALID_ARG3",
    c"DAT_INVALID_ARG4",
    c"DAT_INVALID_ARG5",
    c"DAT_INVALID_ARG6",
    c"DAT_INVALID_ARG7",
    c"DAT_INVALID_ARG8",
    c"DAT_INVALID_ARG9",
    c"DAT_INVALID_ARG10",
    c"DAT_INVALID_STATE_EP_UNCONNECTED",
    c"DAT_INVALID_STATE_EP_ACTCONNPENDING",
    c"DAT_INVALID_STATE_EP_PASSCONNPENDING",
    c"DAT_INVALID_STATE_EP_TENTCONNPENDING",
    c"DAT_INVALID_STATE_EP_CONNECTED",
    c"DAT_INVALID_STATE_EP_DISCONNECTED",
    c"DAT_INVALID_STATE_EP_RESERVED",
    c"DAT_INVALID_STATE_EP_COMPLPENDING",
    c"DAT_INVALID_STATE_EP_DISCPENDING",
    c"DAT_INVALID_STATE_EP_PROVIDERCONTROL",
    c"DAT_INVALID_STATE_EP_NOTREADY",
    c"DAT_INVALID_STATE_EP_RECV_WATERMARK",
    c"DAT_INVALID_STATE_EP_PZ",
    c"DAT_INVALID_STATE_EP_EVD_REQUEST",
    c"DAT_INVALID_STATE_EP_EVD_RCV",
    c"DAT_INVALID_STATE_EP_EVD_CONNECT",
    c"DAT_INVALID_STATE_EP_UNCONFIGURED",
    c"DAT_INVALID_STATE_EP_UNCONFRESERVED",
    c"DAT_INVALID_STATE_EP_UNCONFPASSIVE",
    c"DAT_INVALID_STATE_EP_UNCONFTENTATIVE",
    c"DAT_INVALID_STATE_CNO_IN_USE",
    c"DAT_INVALID_STATE_CNO_DEAD",
    c"DAT_INVALID_STATE_EVD_OPEN",
    c"DAT_INVALID_STATE_EVD_ENABLED",
    c"DAT_INVALID_STATE_EVD_DISABLED",
    c"DAT_INVALID_STATE_EVD_WAITABLE",
    c"DAT_INVALID_STATE_EVD_UNWAITABLE",
    c"DAT_INVALID_STATE_EVD_IN_USE",
    c"DAT_INVALID_STATE_EVD_CONFIG_NOTIFY",
    c"DAT_INVALID_STATE_EVD_CONFIG_SOLICITED",
    c"DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD",
    c"DAT_INVALID_STATE_EVD_WAITER",
    c"DAT_INVALID_STATE_EVD_ASYNC",
    c"DAT_INVALID_STATE_IA_IN_USE",
    c"DAT_INVALID_STATE_LMR_IN_USE",
    c"DAT_INVALID_STATE_LMR_FREE",
    c"DAT_INVALID_STATE_PZ_IN_USE",
    c"DAT_INVALID_STATE_PZ_FREE",
];

/// Subtype names 89..=103.
const SUBTYPE_NAMES_89: [&CStr; 15] = [
    c"DAT_PRIVILEGES_READ",
    c"DAT_PRIVILEGES_WRITE",
    c"DAT_PRIVILEGES_RDMA_READ",
    c"DAT_PRIVILEGES_RDMA_WRITE",
    c"DAT_PROTECTION_READ",
    c"DAT_PROTECTION_WRITE",
    c"DAT_PROTECTION_RDMA_READ",
    c"DAT_PROTECTION_RDMA_WRITE",
    c"DAT_INVALID_ADDRESS_UNSUPPORTED",
    c"DAT_INVALID_ADDRESS_UNREACHABLE",
    c"DAT_INVALID_ADDRESS_MALFORMED",
    c"DAT_NAME_NOT_REGISTERED",
    c"DAT_MAJOR_NOT_FOUND",
    c"DAT_MINOR_NOT_FOUND",
    c"DAT_THREAD_SAFETY_NOT_FOUND",
];

const UNKNOWN_MAJOR: &CStr = c"unknown error";
const UNKNOWN_MINOR: &CStr = c"unknown minor error";
const NOT_IMPLEMENTED: &CStr = c"DAT_NOT_IMPLEMENTED";

/// The name of a value's type, if the library knows it.
pub fn type_name(value: DAT_RETURN) -> Option<&'static CStr> {
    let t = dat_get_type(value);
    if t == DAT_NOT_IMPLEMENTED {
        return Some(NOT_IMPLEMENTED);
    }
    TYPE_NAMES.get((t >> 16) as usize).copied()
}

/// The name of a value's subtype, if the library knows it.
pub fn subtype_name(value: DAT_RETURN) -> Option<&'static CStr> {
    let s = dat_get_subtype(value) as usize;
    match s {
        // "No subtype" reads as an empty string.
        0 => Some(c""),
        1..=84 => Some(SUBTYPE_NAMES[s]),
        89..=103 => Some(SUBTYPE_NAMES_89[s - 89]),
        _ => None,
    }
}

extern "C" fn dat_strerror(value: DAT_RETURN, major: *mut *const c_char, minor: *mut *const c_char) -> DAT_RETURN {
    guard(|| {
        if major.is_null() {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        }
        let Some(major_name) = type_name(value) else {
            // SAFETY: checked non-NULL; the caller provides a pointer to write.
            unsafe { major.write(UNKNOWN_MAJOR.as_ptr()) };
            return DAT_INVALID_PARAMETER;
        };
        // SAFETY: checked non-NULL; the caller provides a pointer to write.
        unsafe { major.write(major_name.as_ptr()) };
        if minor.is_null() {
            return DAT_SUCCESS;
        }
        match subtype_name(value) {
            Some(name) => {
                // SAFETY: checked non-NULL; the caller provides a pointer to write.
                unsafe { minor.write(name.as_ptr()) };
                DAT_SUCCESS
            }
            None => {
                // SAFETY: as above.
                unsafe { minor.write(UNKNOWN_MINOR.as_ptr()) };
                DAT_INVALID_PARAMETER
            }
        }
    })
}

crate::export_c!(dat_strerror);

#[cfg(test)]
mod tests {
    use super::{subtype_name, type_name};

    #[test]
    fn names() {
        assert_eq!(type_name(0x8005_000b).unwrap(), c"DAT_INVALID_HANDLE");
        assert_eq!(subtype_name(0x8005_000b).unwrap(), c"DAT_INVALID_HANDLE_IA");
        assert_eq!(subtype_name(61).unwrap(), c"DAT_INVALID_STATE_EP_EVD_RCV");
        assert_eq!(subtype_name(103).unwrap(), c"DAT_THREAD_SAFETY_NOT_FOUND");
        assert!(subtype_name(85).is_none() && subtype_name(104).is_none());
        assert!(type_name(0x0014_0000).is_none() && type_name(0x1000_0000).is_none());
        assert_eq!(type_name(0xbfff_0000).unwrap(), c"DAT_NOT_IMPLEMENTED");
        assert_eq!(type_name(0).unwrap(), c"DAT_SUCCESS");
    }
}
