//! The functions that take a handle of any type: `dat_set_consumer_context`,
//! `dat_get_consumer_context`, `dat_get_handle_type`.

use super::dispatch::call;
use crate::abi::*;
use crate::ffi::guard_try;
use crate::registry;

fn any(handle: DAT_HANDLE) -> Result<(DAT_HANDLE, *const DAT_PROVIDER), DAT_RETURN> {
    registry::any_handle(handle).ok_or(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1))
}

extern "C" fn dat_set_consumer_context(handle: DAT_HANDLE, context: DAT_CONTEXT) -> DAT_RETURN {
    guard_try(|| {
        let (h, provider) = any(handle)?;
        Ok(call!(provider, set_consumer_context_func, h, context))
    })
}

extern "C" fn dat_get_consumer_context(handle: DAT_HANDLE, context: *mut DAT_CONTEXT) -> DAT_RETURN {
    guard_try(|| {
        let (h, provider) = any(handle)?;
        Ok(call!(provider, get_consumer_context_func, h, context))
    })
}

extern "C" fn dat_get_handle_type(handle: DAT_HANDLE, handle_type: *mut DAT_HANDLE_TYPE) -> DAT_RETURN {
    guard_try(|| {
        let (h, provider) = any(handle)?;
        Ok(call!(provider, get_handle_type_func, h, handle_type))
    })
}

crate::export_c!(dat_set_consumer_context, dat_get_consumer_context, dat_get_handle_type);
