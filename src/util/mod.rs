//! Small helpers every layer may use, which know no DAT object and no device.

pub mod env;
pub mod idmap;
pub mod keyset;
pub mod lock;
pub mod pin;
pub mod ring;
pub mod slots;
pub mod sockaddr;
pub mod spare;
pub mod sync;
