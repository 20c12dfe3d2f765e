//! `verbs`: a device (the `Device` trait) on an rdma-core device port, under the DAT semantics
//! of the built-in providers (`src/builtin/`). libibverbs and librdmacm are loaded at run time
//! (api.rs), so the library loads, and the soft device works, where they are absent.

pub mod api;
pub mod cm;
pub mod device;
mod errno;
mod inuse;
mod memlock;
pub mod probe;
mod progress;
pub mod qp;
pub mod srq;
pub mod ud;
mod udcm;
mod wq;
// bindgen's output: its unsafe blocks are generated, not written.
#[allow(clippy::undocumented_unsafe_blocks)]
pub mod sys;

/// A raw pointer to an rdma-core object, copyable and sendable; what may be done with it is
/// said at each use.
#[derive(Debug)]
pub struct Ptr<T>(pub *mut T);

impl<T> Clone for Ptr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Ptr<T> {}

// SAFETY: rdma-core objects may be used from any thread; the owners of the pointers decide
// when they are released.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

/// The verbs device's driver: `builtin:verbs` in dat.conf, and `dat2-verbs-<device>-<port>`
/// for every active port found in sysfs (rdma-core is loaded only when one opens).
pub static DRIVER: VerbsDriver = VerbsDriver;

pub struct VerbsDriver;

impl crate::device::Driver for VerbsDriver {
    fn name(&self) -> &'static str {
        "verbs"
    }
    fn probe(&self) -> Vec<(String, String)> {
        probe::ports().into_iter().filter(|p| p.is_active()).map(|p| (p.ia_name(), format!("{} {}", p.device, p.port))).collect()
    }
    fn attributes(&self, params: &str) -> Vec<(&'static str, String)> {
        let mut v = crate::device::common_attributes(self, "RC");
        v.push(("DAT2_VERBS_PARAMS", params.into()));
        v
    }
    fn open(&self, params: &str) -> Result<std::sync::Arc<dyn crate::device::Device>, String> {
        device::VerbsDevice::new(params).map(|d| d as std::sync::Arc<dyn crate::device::Device>)
    }
}
