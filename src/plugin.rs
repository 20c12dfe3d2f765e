//! `libdat2prov.so.2` (built with the feature `plugin`): dat2's built-in providers as a DAT
//! provider library, for a libdat2 that is not ours (Debian's, say) to load through dat.conf,
//! as it loads dapl's `libdaplofa.so.2`. A line
//!
//! ```text
//! dat2prov-soft u2.0 nonthreadsafe default /usr/lib/x86_64-linux-gnu/libdat2prov.so.2 dat2.2.0 "soft 127.0.0.1 0" ""
//! ```
//!
//! makes the host call [`dat_provider_init`] with the line's key and ia_params: the first word
//! names the device (`soft`, `verbs`), the rest are the ia_params a `builtin:<device>` entry
//! takes. We register the built-in layer's own `DAT_PROVIDER` table ([`ops::init`], the very
//! table our libdat2's registry registers for a `builtin:` entry) under that key with the
//! host's `dat_registry_add_provider`, and remove it again in [`dat_provider_fini`].
//!
//! The host dispatches every call on a handle through the `DAT_PROVIDER *` in the handle's
//! first word; the built-in layer's handles are cells whose first word is that table
//! (`builtin::table`), and each table function looks its handle up before use. What the host
//! does before calling us (a NULL check in Debian's library, then reading the first word of
//! whatever it was given) is the host's: a wild handle crashes there, and only our libdat2
//! checks every handle first.
//!
//! Nothing else is exported (`src/dat2prov.map`): a `dat_*` function of ours would interpose on
//! the host's. The host's functions we call (`dat_registry_add_provider`,
//! `dat_registry_remove_provider`, and `dats_get_ia_handle` from `builtin::ia`) are left
//! undefined here and bound to the host's when it loads us.

use core::ffi::c_char;
use std::ffi::CString;

use crate::abi::*;
use crate::builtin::{ops, provider};
use crate::dbg_log;
use crate::device;
use crate::ffi::{bounded_cstr, guard};
use crate::log::DbgType;

extern "C" {
    // The host library's registry (what every DAT provider library calls).
    fn dat_registry_add_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN;
    fn dat_registry_remove_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN;
}

/// The IA name and thread safety of the key the host hands us, or None for a NULL info or a
/// name without its NUL.
///
/// # Safety
/// `info` must be NULL or point to a readable `DAT_PROVIDER_INFO`.
unsafe fn key(info: *const DAT_PROVIDER_INFO) -> Option<(Vec<u8>, bool)> {
    if info.is_null() {
        return None;
    }
    // SAFETY: per the caller; the name is a fixed array, read up to its NUL within its length.
    let name = unsafe { bounded_cstr((*info).ia_name.as_ptr(), DAT_NAME_MAX_LENGTH) }?.to_vec();
    // SAFETY: as above.
    let thread_safe = unsafe { (*info).is_thread_safe } != 0;
    Some((name, thread_safe))
}

/// Splits ia_params into the device's name and that device's own ia_params:
/// `"soft 127.0.0.1 0"` gives `("soft", "127.0.0.1 0")`.
fn split_params(params: &str) -> (&str, &str) {
    let params = params.trim();
    match params.split_once(char::is_whitespace) {
        Some((device, rest)) => (device, rest.trim()),
        None => (params, ""),
    }
}

/// `void dat_provider_init(const DAT_PROVIDER_INFO *, const char *instance_data)`: registers
/// the built-in provider the ia_params describe under the entry's key. Failures (an unknown
/// device, a key the host refuses) leave the key unregistered, so that opening it fails with
/// DAT_PROVIDER_NOT_FOUND; `DAT_DBG_TYPE` shows why.
extern "C" fn dat_provider_init(info: *const DAT_PROVIDER_INFO, instance_data: *const c_char) {
    guard(|| {
        // SAFETY: the host passes its entry's info (or NULL, refused here).
        let Some((name, thread_safe)) = (unsafe { key(info) }) else {
            dbg_log!(DbgType::ERROR, "dat2prov: dat_provider_init without a provider info");
            return DAT_SUCCESS;
        };
        let shown = String::from_utf8_lossy(&name).into_owned();
        let params = if instance_data.is_null() {
            String::new()
        } else {
            // SAFETY: the host passes the entry's ia_params, a C string (bounded all the same).
            match unsafe { bounded_cstr(instance_data, 4096) } {
                Some(p) => String::from_utf8_lossy(p).into_owned(),
                None => {
                    dbg_log!(DbgType::ERROR, "{shown}: dat2prov: ia_params longer than 4095 bytes");
                    return DAT_SUCCESS;
                }
            }
        };
        let (device_name, rest) = split_params(&params);
        let Some(driver) = device::driver_named(device_name.as_bytes()) else {
            let known: Vec<&str> = device::DRIVERS.iter().map(|d| d.name()).collect();
            dbg_log!(DbgType::ERROR, "{shown}: dat2prov: ia_params \"{params}\" do not start with a device name ({})", known.join(", "));
            return DAT_SUCCESS;
        };
        if let Some(b) = provider::find(&name) {
            if b.driver.name() != driver.name() || b.params != driver.params_or_default(rest) {
                dbg_log!(DbgType::ERROR, "{shown}: dat2prov: already serves {} \"{}\"; \"{params}\" is ignored", b.driver.name(), b.params);
            }
        }
        let table = ops::init(driver, &name, thread_safe, &CString::new(rest).unwrap_or_default());
        // SAFETY: the table lives as long as the process; `info` is the host's, valid for
        // this call (and kept by the host while the library is loaded).
        let status = unsafe { dat_registry_add_provider(table, info) };
        dbg_log!(DbgType::PROVIDER_API, "{shown}: dat2prov: registered {} \"{rest}\": {status:#x}", driver.name());
        DAT_SUCCESS
    });
}

/// `void dat_provider_fini(const DAT_PROVIDER_INFO *)`: removes the registration
/// [`dat_provider_init`] made for this key. The devices stay (the library is never unloaded:
/// `-z nodelete`), so that a later init of the same key serves it again.
extern "C" fn dat_provider_fini(info: *const DAT_PROVIDER_INFO) {
    guard(|| {
        // SAFETY: the host passes its entry's info (or NULL, refused here).
        let Some((name, thread_safe)) = (unsafe { key(info) }) else {
            return DAT_SUCCESS;
        };
        let Some(b) = provider::find(&name) else {
            return DAT_SUCCESS;
        };
        // SAFETY: the table we registered for this key, and the host's info.
        let status = unsafe { dat_registry_remove_provider(b.table(thread_safe), info) };
        dbg_log!(DbgType::PROVIDER_API, "{}: dat2prov: removed: {status:#x}", String::from_utf8_lossy(&name));
        DAT_SUCCESS
    });
}

crate::export_c!(dat_provider_init, dat_provider_fini);
