//! The C boundary: the panic guard every exported function runs in, the macro that exports a
//! Rust function as a versioned C symbol, and helpers for out-parameters.
//!
//! Conventions (see docs/architecture.md): out-parameters are written only on success; a handle we did not
//! hand out is never dereferenced; no panic ever unwinds into C.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use crate::abi::{dat_error, DAT_INTERNAL_ERROR, DAT_RETURN};
use crate::log::{self, DbgType};
use crate::util::pin::{self, LocalRef};

/// Exports `$name` (a private `extern "C" fn` of the same name in the invoking module) as the
/// C symbol `$name`. The version script (`src/dat2.map`) binds it to `DAT_2.0`. A plain
/// `#[no_mangle]` would be exported by rustc's own version script, unversioned.
#[macro_export]
macro_rules! export_c {
    ($($name:ident),+ $(,)?) => {
        $(
            ::core::arch::global_asm!(
                concat!(".globl ", stringify!($name)),
                concat!(".type ", stringify!($name), ",@function"),
                concat!(".set ", stringify!($name), ", {0}"),
                sym $name,
            );
        )+
    };
}

#[cfg(test)]
thread_local! {
    /// Test builds only: the panics this thread's guards sent to the debug log (not stderr).
    pub static PANICS_LOGGED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` as the body of an exported function: a panic becomes `DAT_INTERNAL_ERROR` and is
/// reported through the debug log (never printed unless `DAT_DBG_TYPE` asks for it).
pub fn guard<F: FnOnce() -> DAT_RETURN>(f: F) -> DAT_RETURN {
    install_panic_hook();
    guard_local(|_| f())
}

/// [`guard`], handing `f` this thread's call state, reached once per call, for it to pin a
/// handle with. For the data path's calls (posts, dequeues, waits), which name a handle that
/// an earlier call made under [`guard`] (`dat_ia_open` at least), so the panic hook is there
/// already: they skip its check. (A call with a wild handle before any other call still
/// turns a panic into DAT_INTERNAL_ERROR; only its message would go to the default hook.)
#[inline]
pub fn guard_local<F: FnOnce(LocalRef) -> DAT_RETURN>(f: F) -> DAT_RETURN {
    let local = pin::local();
    local.enter();
    let result = panic::catch_unwind(AssertUnwindSafe(|| f(local)));
    local.leave();
    match result {
        Ok(r) => r,
        Err(_) => dat_error(DAT_INTERNAL_ERROR, 0),
    }
}

/// A panic inside one of our guards goes to the debug log instead of stderr; any other panic
/// (the host program may be Rust too) goes to the previous hook unchanged.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if pin::local().depth() > 0 {
                let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
                let payload = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                log::log(DbgType::ERROR, format_args!("internal error at {location}: {payload}; returning DAT_INTERNAL_ERROR"));
                #[cfg(test)]
                PANICS_LOGGED.with(|n| n.set(n.get() + 1));
            } else {
                previous(info);
            }
        }));
    });
}

/// Writes `value` through an out-pointer the caller may have left NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for a write of `T`.
pub unsafe fn write_opt<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: the caller guarantees a non-NULL `ptr` is writable.
        unsafe { ptr.write(value) };
    }
}

/// Reads a C string that the caller guarantees is NUL-terminated, bounded to `max` bytes.
/// Returns `None` when no NUL appears within `max` bytes.
///
/// # Safety
/// `ptr` must be non-NULL and point to readable memory up to its NUL or `max` bytes.
pub unsafe fn bounded_cstr<'a>(ptr: *const core::ffi::c_char, max: usize) -> Option<&'a [u8]> {
    // SAFETY: reads stop at the first NUL or after `max` bytes, as the caller guarantees.
    let len = unsafe { libc::strnlen(ptr, max) };
    if len >= max {
        return None;
    }
    // SAFETY: the `len` bytes before the NUL are readable.
    Some(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Like [`guard`], for bodies written with `?`: `Err(code)` and `Ok(code)` are both returned.
pub fn guard_try<F: FnOnce() -> Result<DAT_RETURN, DAT_RETURN>>(f: F) -> DAT_RETURN {
    guard(|| match f() {
        Ok(r) | Err(r) => r,
    })
}

/// [`guard_local`] for bodies written with `?`.
#[inline]
pub fn guard_try_local<F: FnOnce(LocalRef) -> Result<DAT_RETURN, DAT_RETURN>>(f: F) -> DAT_RETURN {
    guard_local(|local| match f(local) {
        Ok(r) | Err(r) => r,
    })
}
