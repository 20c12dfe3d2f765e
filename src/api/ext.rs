//! `dat_extension_op`: the variadic entry point of DAT extensions.
//!
//! The exported function is C (`shim/extension_op.c`), because only C can take `...` and hand a
//! real `va_list` on to a provider's `handle_extendedop_func`. It asks [`dat2_ext_begin`] which
//! function to call with which handle, calls it, and reports the outcome to [`dat2_ext_end`].
//! Both are hidden symbols: visible to the shim, not exported.

use core::ffi::{c_char, c_int};

use crate::abi::*;
use crate::ffi::{bounded_cstr, guard_try};
use crate::registry::handles::{self, Kind};
use crate::registry::{self, Key};

/// What kind of call [`ExtCall`] describes.
const MODE_OP: u32 = 0;
const MODE_OPEN: u32 = 1;
const MODE_CLOSE: u32 = 2;

/// Shared with the C shim; the layout is mirrored there.
#[repr(C)]
pub struct ExtCall {
    /// The provider's `handle_extendedop_func`.
    pub func: Option<ExtendedOpFn>,
    /// The handle to pass it.
    pub handle: DAT_HANDLE,
    /// For `DAT_IB_OPEN_QUERY_OP`: where the provider returns its raw IA.
    pub ia_out: *mut DAT_HANDLE,
    pub mode: u32,
}

/// The IB open-query op: the one open op whose first argument after the name returns an IA.
const OPEN_QUERY_OP: c_int = 0x1000;

extern "C" fn dat2_ext_begin(
    handle: DAT_HANDLE,
    op: c_int,
    name: *const c_char,
    ia_out: *mut DAT_HANDLE,
    call: *mut ExtCall,
) -> DAT_RETURN {
    guard_try(|| {
        if call.is_null() {
            return Err(dat_error(DAT_INTERNAL_ERROR, 0));
        }
        // A live small-integer IA handle stands for the provider's IA.
        let target = match registry::any_handle(handle) {
            Some((h, provider)) => Some((h, provider)),
            None if handle.is_null() => None,
            None => {
                return Err(if op & DAT_OPEN_EXTENSION_BASE as c_int != 0 {
                    dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1)
                } else if op & DAT_CLOSE_EXTENSION_BASE as c_int != 0 {
                    dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA)
                } else {
                    dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1)
                })
            }
        };
        if target.is_some() && !registry::extensions_seen() {
            return Err(dat_error(DAT_NOT_IMPLEMENTED, 0));
        }
        let out = if op & DAT_OPEN_EXTENSION_BASE as c_int != 0 {
            // SAFETY: the name is the consumer's C string; at most 256 bytes are read.
            let Some(name_bytes) = (if name.is_null() { None } else { unsafe { bounded_cstr(name, DAT_NAME_MAX_LENGTH) } }) else {
                return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_ARG3));
            };
            let key = Key { name: name_bytes.to_vec(), major: DAT_VERSION_MAJOR, minor: DAT_VERSION_MINOR, thread_safe: DAT_FALSE };
            let dr = {
                let _life = registry::lifecycle();
                registry::acquire_provider(&key)?
            };
            registry::mark_extensions_seen();
            let Some(func) = dr.extended_op else {
                registry::release_provider(&key);
                return Err(dat_error(DAT_NOT_IMPLEMENTED, 0));
            };
            ExtCall {
                func: Some(func),
                handle: name as DAT_HANDLE,
                ia_out: if op == OPEN_QUERY_OP { ia_out } else { core::ptr::null_mut() },
                mode: MODE_OPEN,
            }
        } else if op & DAT_CLOSE_EXTENSION_BASE as c_int != 0 {
            let bad = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
            let t = handles::lookup(handle).filter(|t| t.kind == Kind::RawIa).ok_or(bad)?;
            // SAFETY: the provider table of a live handle.
            let func = unsafe { (*t.provider).handle_extendedop_func };
            ExtCall { func, handle, ia_out: core::ptr::null_mut(), mode: MODE_CLOSE }
        } else {
            let (h, provider) = target.ok_or(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1))?;
            // SAFETY: the provider table of a live handle or open IA.
            let func = unsafe { (*provider).handle_extendedop_func };
            ExtCall { func, handle: h, ia_out: core::ptr::null_mut(), mode: MODE_OP }
        };
        if out.func.is_none() {
            return Err(dat_error(DAT_NOT_IMPLEMENTED, 0));
        }
        // SAFETY: checked non-NULL; the shim's own struct.
        unsafe { call.write(out) };
        Ok(DAT_SUCCESS)
    })
}

extern "C" fn dat2_ext_end(call: *const ExtCall, status: DAT_RETURN) -> DAT_RETURN {
    guard_try(|| {
        if call.is_null() {
            return Err(dat_error(DAT_INTERNAL_ERROR, 0));
        }
        // SAFETY: the shim passes back the struct dat2_ext_begin filled.
        let call = unsafe { &*call };
        match call.mode {
            MODE_OPEN => {
                // SAFETY: in open mode `handle` is the consumer's name, checked in begin.
                let name = unsafe { std::ffi::CStr::from_ptr(call.handle as *const c_char) }.to_bytes().to_vec();
                let key = Key { name, major: DAT_VERSION_MAJOR, minor: DAT_VERSION_MINOR, thread_safe: DAT_FALSE };
                if status != DAT_SUCCESS {
                    let _life = registry::lifecycle();
                    registry::release_provider(&key);
                    return Ok(status);
                }
                if !call.ia_out.is_null() {
                    // SAFETY: the provider wrote its IA through the consumer's pointer.
                    let raw = unsafe { call.ia_out.read() };
                    if !raw.is_null() {
                        // SAFETY: a provider IA's first word is its DAT_PROVIDER pointer.
                        let provider = unsafe { *(raw as *const *const DAT_PROVIDER) };
                        handles::insert(raw, Kind::RawIa, 0, provider);
                        registry::write().ext_opens.insert(raw as usize, key);
                    }
                }
            }
            MODE_CLOSE if status == DAT_SUCCESS => {
                handles::remove(call.handle);
                let key = registry::write().ext_opens.remove(&(call.handle as usize));
                if let Some(key) = key {
                    let _life = registry::lifecycle();
                    return Ok(registry::release_provider(&key));
                }
            }
            _ => {}
        }
        Ok(status)
    })
}

/// Hidden (not exported) aliases the C shim links against.
macro_rules! hidden_c {
    ($($name:ident),+) => {
        $(
            ::core::arch::global_asm!(
                concat!(".globl ", stringify!($name)),
                concat!(".hidden ", stringify!($name)),
                concat!(".type ", stringify!($name), ",@function"),
                concat!(".set ", stringify!($name), ", {0}"),
                sym $name,
            );
        )+
    };
}
hidden_c!(dat2_ext_begin, dat2_ext_end);

const _: () = assert!(MODE_OP == 0);
