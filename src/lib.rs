//! dat2: a memory-safe drop-in replacement for the uDAPL 2.0 library `libdat2.so.2`.
//!
//! One module per DAT object family holds that family's exported entry points; `registry`
//! finds providers and checks handles; `abi` mirrors the C types; `ffi` is the C boundary.

pub mod abi;
mod context;
pub mod core;
pub mod device;
mod cno;
mod cr;
mod dispatch;
mod error;
mod ep;
mod evd;
mod ext;
pub mod ffi;
mod ia;
mod lmr;
pub mod log;
pub mod mr;
pub mod providers;
mod pz;
pub mod registry;
mod rmr;
mod sp;
mod srq;
