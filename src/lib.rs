//! dat2: a memory-safe drop-in replacement for the uDAPL 2.0 library `libdat2.so.2`.
//!
//! The layers, from the C caller down (docs/architecture.md's Layout section has the full map):
//! - [`api`]: the exported C functions, one module per DAT object family. Each checks its
//!   handles and calls the owning provider's `DAT_PROVIDER` table.
//! - [`registry`]: `dat.conf`, loading C providers, the built-in providers' entries, the table
//!   of live handles, and the registry's own exports.
//! - [`builtin`]: the DAT semantics of the built-in providers (objects, states, events, memory
//!   registration), written once over the [`device::Device`] trait; C providers never pass
//!   through it.
//! - [`device`]: the device trait and one folder per device (`soft`, `verbs`).
//! - Beside them: [`abi`] (the `#[repr(C)]` mirrors and constants), [`ffi`] (the C boundary:
//!   the panic guard and argument checks), [`log`] (`DAT_DBG_TYPE`) and [`util`] (helpers that
//!   know no DAT object and no device).
//! - With the feature `plugin`, [`api`] and [`registry`] give way to [`plugin`]: the built-in
//!   providers as a DAT provider library (`libdat2prov.so.2`) that another libdat2 loads.

// The provider library uses the built-in providers and what is below them, not all of it.
#![cfg_attr(feature = "plugin", allow(dead_code))]

pub mod abi;
#[cfg(not(feature = "plugin"))]
mod api;
pub(crate) mod builtin;
pub(crate) mod device;
pub(crate) mod ffi;
pub(crate) mod log;
#[cfg(feature = "plugin")]
mod plugin;
#[cfg(not(feature = "plugin"))]
pub(crate) mod registry;
pub(crate) mod util;

/// What the integration tests (`tests/`) and the fuzzer (`fuzz/`) reach inside the library,
/// and nothing else: the count of live registrations, and the soft device's wire protocol
/// with the peer checks it drives. The C API is the library's only interface.
#[doc(hidden)]
pub mod testing {
    pub use crate::builtin::mr::live;
    pub use crate::device::soft::{peer, rendezvous, shm, wire};
}
