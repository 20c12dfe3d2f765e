//! The DAT semantics of the built-in providers: every object's semantics (states, reference counts,
//! argument checks, exact error codes, events), written once over the [`Device`] interface.
//! A built-in provider is this layer plus one device; the registry sees it as an ordinary
//! `DAT_PROVIDER` table ([`ops`]).
//!
//! [`Device`]: crate::device::Device
//!
//! The modules use each other without cycles, bottom to top: [`table`] (handles, and the
//! [`table::Object`] trait every object type implements, so the table names none of them),
//! [`events`], [`iov`] and [`counters`] (pure helpers), [`mr`], [`provider`], then the objects from [`ia`]
//! up ([`cno`], [`evd`], [`pz`], [`lmr`], [`srq`], [`ep`], [`rmr`]), [`dto`], [`ud`], [`cm`], [`cr`],
//! [`sp`], [`ia_open`], [`stats`], [`ext`], and [`ops`], which names them all.
//!
//! The functions here are the bodies of C entry points: their raw pointer arguments are the C
//! caller's, checked for NULL before use and otherwise trusted as the DAT API specifies, so they
//! are safe functions that dereference raw pointers.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod cm;
pub mod cno;
pub mod counters;
pub mod cr;
pub mod dto;
pub mod ep;
pub mod evd;
pub mod events;
pub mod ext;
#[cfg(test)]
pub mod fault;
pub mod ia;
pub mod ia_open;
pub mod iov;
pub mod lmr;
pub mod mr;
pub mod ops;
pub mod provider;
pub mod pz;
pub mod rmr;
pub mod sp;
pub mod srq;
pub mod stats;
pub mod table;
pub mod ud;

use core::ffi::c_char;

/// Copies `s` into a fixed C string field, truncating, always NUL-terminated.
pub fn fill_cstr<const N: usize>(dst: &mut [c_char; N], s: &str) {
    let n = s.len().min(N - 1);
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// Writes `value` through a consumer out-pointer known to be non-NULL.
///
/// # Safety
/// `ptr` must be non-NULL and valid for a write of `T`.
pub unsafe fn put<T>(ptr: *mut T, value: T) {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr.write(value) }
}

/// The argument checks every query shares: mask bits outside `all` are
/// `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`, a NULL parameter block `... | DAT_INVALID_ARG3`.
pub fn query_args<T>(mask: u64, all: u64, param: *mut T) -> Result<(), crate::abi::DAT_RETURN> {
    use crate::abi::*;
    if mask & !all != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    if param.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    Ok(())
}

/// A DAT timeout in microseconds; `DAT_TIMEOUT_INFINITE` is no deadline.
pub fn deadline(timeout: crate::abi::DAT_TIMEOUT) -> Option<std::time::Instant> {
    use crate::abi::*;
    (timeout != DAT_TIMEOUT_INFINITE).then(|| std::time::Instant::now() + std::time::Duration::from_micros(u64::from(timeout)))
}
