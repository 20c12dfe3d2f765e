//! `verbs`: a device (the `Device` trait) on an rdma-core device port, under the DAT core of the
//! built-in providers (`src/core/`). libibverbs and librdmacm are loaded at
//! run time (api.rs), so the library loads, and the soft device works, where they are absent.

pub mod api;
pub mod cm;
pub mod device;
mod errno;
mod inuse;
pub mod probe;
mod progress;
pub mod qp;
pub mod srq;
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
