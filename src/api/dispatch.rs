//! Calling into a provider through its `DAT_PROVIDER` table.

/// `call!(provider, field, args...)`: calls the entry point `field` of the provider table
/// `provider` (a `*const DAT_PROVIDER` taken from a checked handle), or returns
/// `DAT_NOT_IMPLEMENTED` when the provider left it NULL. A macro private to `api/`: its
/// arguments are plain values (the consumer's, after the handle checks).
macro_rules! call {
    ($provider:expr, $field:ident $(, $arg:expr)* $(,)?) => {{
        let provider: *const $crate::abi::DAT_PROVIDER = $provider;
        // SAFETY: `provider` comes from the registry's records of an open IA, whose library
        // stays loaded until the IA is closed; the table is only read.
        match unsafe { (*provider).$field } {
            // SAFETY: the arguments are the consumer's, passed on unchanged after the handle
            // checks the DAT API requires; the provider owns their interpretation.
            Some(f) => unsafe { f($($arg),*) },
            None => $crate::abi::dat_error($crate::abi::DAT_NOT_IMPLEMENTED, 0),
        }
    }};
}
pub(crate) use call;

use crate::abi::*;
use crate::registry::handles::{self, Kind};

/// Runs a provider create call that returns its new object through an out-pointer: the
/// provider writes into our local, and only on success is the handle recorded (owned by IA
/// `ia`) and written to the consumer's `out`. A NULL `out` is passed on as NULL, for the
/// provider to reject.
pub fn create<F>(out: *mut DAT_HANDLE, kind: Kind, ia: usize, provider: *const DAT_PROVIDER, f: F) -> DAT_RETURN
where
    F: FnOnce(*mut DAT_HANDLE) -> DAT_RETURN,
{
    if out.is_null() {
        return f(core::ptr::null_mut());
    }
    let mut handle: DAT_HANDLE = core::ptr::null_mut();
    let status = f(&mut handle);
    if status == DAT_SUCCESS {
        handles::insert(handle, kind, ia, provider);
        // SAFETY: `out` is non-NULL and the consumer's location for the new handle.
        unsafe { out.write(handle) };
    }
    status
}

/// Runs a provider free call and forgets the handle once the object is gone.
pub fn free(handle: DAT_HANDLE, status: DAT_RETURN) -> DAT_RETURN {
    if status == DAT_SUCCESS {
        handles::remove(handle);
    }
    status
}
