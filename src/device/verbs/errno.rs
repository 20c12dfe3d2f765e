//! rdma-core's error numbers as device errors. A leaf module: it uses nothing of the verbs
//! device's other modules, so that they can all use it.

use crate::device::DevError;

/// The calling thread's `errno`, as rdma-core's calls that return NULL or -1 leave it.
pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// An error number (an `errno`, or what the verbs that return one returned) as a device error.
pub(super) fn dev_error(e: i32) -> DevError {
    match e {
        libc::EFAULT | libc::EACCES | libc::EPERM | libc::EINVAL => DevError::Fault,
        libc::EOPNOTSUPP | libc::ENOSYS => DevError::NotSupported,
        libc::EADDRINUSE => DevError::InUse,
        _ => DevError::NoResources,
    }
}

/// The calling thread's `errno` as a device error.
pub(super) fn last_error() -> DevError {
    dev_error(errno())
}
