//! The registry's exports: providers registering themselves, listing the static registry's
//! entries, and converting IA handles for providers.

use crate::abi::*;
use crate::ffi::{guard, guard_try};
use crate::registry::{self, Key};

/// The argument checks of `dat_registry_add_provider` and `_remove_provider`.
fn provider_args(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> Result<(), DAT_RETURN> {
    if provider.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    }
    if info.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    registry::check_state()
}

extern "C" fn dat_registry_add_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN {
    guard_try(|| {
        provider_args(provider, info)?;
        // SAFETY: a provider registering itself passes its own table and info (both non-NULL,
        // checked above), as the provider API requires.
        Ok(unsafe { registry::add_provider(provider, info) })
    })
}

extern "C" fn dat_registry_remove_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN {
    guard_try(|| {
        provider_args(provider, info)?;
        // SAFETY: `info` is non-NULL and, per the provider API, a readable DAT_PROVIDER_INFO.
        let key = unsafe { Key::from_info(info) };
        Ok(registry::remove_provider(&key))
    })
}

extern "C" fn dat_registry_list_providers(
    max_to_return: DAT_COUNT,
    entries_returned: *mut DAT_COUNT,
    list: *mut *mut DAT_PROVIDER_INFO,
) -> DAT_RETURN {
    guard(|| {
        if let Err(e) = registry::check_state() {
            return e;
        }
        if entries_returned.is_null() {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        }
        let infos = registry::list_providers();
        if max_to_return == 0 {
            // SAFETY: checked non-NULL above; the caller provides a DAT_COUNT to write.
            unsafe { entries_returned.write(infos.len() as DAT_COUNT) };
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        }
        if list.is_null() {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        }
        // A negative maximum lists nothing, as the original does.
        let n = infos.len().min(max_to_return.max(0) as usize);
        // SAFETY: the caller provides `max_to_return` (>= n) pointers in `list`.
        let targets = unsafe { core::slice::from_raw_parts(list, n) };
        if targets.iter().any(|p| p.is_null()) {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        }
        for (target, info) in targets.iter().zip(&infos) {
            // SAFETY: each element is non-NULL (checked) and points to a caller-owned struct.
            unsafe { target.write(*info) };
        }
        // SAFETY: checked non-NULL above.
        unsafe { entries_returned.write(n as DAT_COUNT) };
        DAT_SUCCESS
    })
}

/// Converts between consumer IA handles and provider IA pointers, in both directions: a small
/// integer gives the provider's IA; a provider IA pointer gives its small integer.
extern "C" fn dats_get_ia_handle(handle: DAT_IA_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN {
    guard(|| {
        let bad = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        if handle.is_null() {
            return bad;
        }
        if out.is_null() {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        }
        match registry::convert_ia_handle(handle as usize) {
            Some(v) => {
                // SAFETY: checked non-NULL above; the caller provides a handle to write.
                unsafe { out.write(v as DAT_IA_HANDLE) };
                DAT_SUCCESS
            }
            None => bad,
        }
    })
}

crate::export_c!(dat_registry_add_provider, dat_registry_remove_provider, dat_registry_list_providers, dats_get_ia_handle);
