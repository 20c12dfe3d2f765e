//! The built-in devices. Each folder is one device behind the [`crate::device::Device`]
//! interface; the DAT core on top of it is shared.

pub mod soft;
pub mod verbs;
