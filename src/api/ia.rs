//! Interface adapters: `dat_ia_openv`, `dat_ia_query`, `dat_ia_close`.

use core::ffi::c_char;

use super::dispatch::call;
use crate::abi::*;
use crate::dbg_log;
use crate::ffi::guard;
use crate::log::DbgType;
use crate::registry::handles::{self, Kind};
use crate::registry::{self, Key};

pub(super) extern "C" fn dat_ia_openv(
    name: *const c_char,
    async_evd_qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_handle: *mut DAT_IA_HANDLE,
    major: DAT_UINT32,
    minor: DAT_UINT32,
    thread_safe: DAT_BOOLEAN,
) -> DAT_RETURN {
    guard(|| {
        // SAFETY: a non-NULL name is the consumer's C string; at most 256 bytes are read.
        let Some(name_bytes) = (unsafe { registry::name_arg(name) }) else {
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        };
        if ia_handle.is_null() {
            return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        }
        if let Err(e) = registry::check_state() {
            return e;
        }
        if !async_evd.is_null() {
            // SAFETY: the consumer passes a readable DAT_EVD_HANDLE (INOUT argument).
            let given = unsafe { async_evd.read() };
            // DAT_EVD_ASYNC_EXISTS and DAT_EVD_OUT_OF_SCOPE are requests, not handles.
            let special = matches!(given as usize, DAT_EVD_ASYNC_EXISTS | DAT_EVD_OUT_OF_SCOPE);
            if !special {
                if let Err(e) = handles::check_optional(given, Kind::Evd, DAT_INVALID_HANDLE_EVD_ASYNC) {
                    return e;
                }
            }
        }
        let key = Key { name: name_bytes, major, minor, thread_safe };
        let _life = registry::lifecycle();
        let dr = match registry::acquire_provider(&key) {
            Ok(dr) => dr,
            Err(e) => return e,
        };
        let Some(ia_open) = dr.ia_open else {
            registry::release_provider(&key);
            return dat_error(DAT_NOT_IMPLEMENTED, 0);
        };
        let mut raw: DAT_IA_HANDLE = core::ptr::null_mut();
        // SAFETY: the provider's ia_open with the consumer's arguments and our out-pointer.
        let status = unsafe { ia_open(name, async_evd_qlen, async_evd, &mut raw) };
        if status != DAT_SUCCESS || raw.is_null() {
            registry::release_provider(&key);
            dbg_log!(DbgType::CONSUMER_API, "dat_ia_open({}) failed: {status:#x}", key.display());
            return if status == DAT_SUCCESS { dat_error(DAT_INTERNAL_ERROR, 0) } else { status };
        }
        // SAFETY: a provider IA's first word is its DAT_PROVIDER pointer (DAT provider API).
        let provider = unsafe { *(raw as *const *const DAT_PROVIDER) };
        let slot = registry::insert_ia(raw, provider, key);
        // A built-in IA learns its consumer handle: dat_lmr_create then checks its IA and PZ
        // arguments against each other without the registry's lock.
        crate::builtin::ia::note_consumer_handle(raw, slot);
        if !async_evd.is_null() {
            // SAFETY: as above; the provider may have written the IA's async EVD.
            let evd = unsafe { async_evd.read() };
            if evd as usize > DAT_EVD_OUT_OF_SCOPE {
                handles::insert_if_new(evd, Kind::Evd, slot, provider);
            }
        }
        // As the original: learn whether this provider offers DAT extensions.
        // SAFETY: DAT_IA_ATTR is plain data; all-zero is a valid value.
        let mut attr: DAT_IA_ATTR = unsafe { core::mem::zeroed() };
        let q = call!(provider, ia_query_func, raw, core::ptr::null_mut(), DAT_IA_FIELD_ALL, &mut attr, 0, core::ptr::null_mut());
        if q == DAT_SUCCESS && attr.extension_supported != 0 {
            registry::mark_extensions_seen();
        }
        // SAFETY: checked non-NULL above.
        unsafe { ia_handle.write(slot as DAT_IA_HANDLE) };
        DAT_SUCCESS
    })
}

extern "C" fn dat_ia_query(
    ia_handle: DAT_IA_HANDLE,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_attr_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    provider_attr_mask: DAT_PROVIDER_ATTR_MASK,
    provider_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guard(|| {
        let ia = match registry::ia(ia_handle) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        let status = call!(ia.provider, ia_query_func, ia.raw, async_evd, ia_attr_mask, ia_attr, provider_attr_mask, provider_attr);
        if status == DAT_SUCCESS && !async_evd.is_null() {
            // SAFETY: the provider filled the consumer's out-pointer.
            handles::insert_if_new(unsafe { async_evd.read() }, Kind::Evd, ia.slot, ia.provider);
        }
        status
    })
}

pub(super) extern "C" fn dat_ia_close(ia_handle: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard(|| {
        if let Err(e) = registry::check_state() {
            return e;
        }
        let _life = registry::lifecycle();
        let ia = match registry::ia(ia_handle) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        // As the original: the provider states the version and thread safety it runs at; with
        // its device name they form the key the IA is released under.
        // SAFETY: DAT_PROVIDER_ATTR is plain data; all-zero is a valid value.
        let mut pattr: DAT_PROVIDER_ATTR = unsafe { core::mem::zeroed() };
        let q =
            call!(ia.provider, ia_query_func, ia.raw, core::ptr::null_mut(), 0, core::ptr::null_mut(), DAT_PROVIDER_FIELD_ALL, &mut pattr);
        if q != DAT_SUCCESS {
            return q;
        }
        let status = call!(ia.provider, ia_close_func, ia.raw, flags);
        if status != DAT_SUCCESS {
            return status;
        }
        // SAFETY: the provider table stays valid until the release below unloads it.
        let device = unsafe { (*ia.provider).device_name };
        let reported = Key {
            // SAFETY: a provider's device_name is its NUL-terminated IA name.
            name: if device.is_null() { Vec::new() } else { unsafe { std::ffi::CStr::from_ptr(device) }.to_bytes().to_vec() },
            major: pattr.dapl_version_major,
            minor: pattr.dapl_version_minor,
            thread_safe: pattr.is_thread_safe,
        };
        let Some(slot) = registry::remove_ia(ia.slot) else {
            return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        };
        // Release what the open took, whatever the provider reports now, so nothing leaks;
        // report a mismatch as the original does.
        let released = registry::release_provider(&slot.key);
        if reported != slot.key {
            dbg_log!(DbgType::ERROR, "IA closed, but its provider reports {} where {} was opened", reported.display(), slot.key.display());
            return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
        released
    })
}

crate::export_c!(dat_ia_openv, dat_ia_query, dat_ia_close);
