//! The DAT 2.0 binary interface: `#[repr(C)]` mirrors of the C types, the constants, and the
//! provider table. Nothing here has behaviour; sizes and offsets are asserted at compile time.

pub mod consts;
pub mod provider;
pub mod types;

pub use consts::*;
pub use provider::*;
pub use types::*;
