//! The object types of the built-in layer, gathered for the object table.

pub use super::cno::Cno;
pub use super::cr::Cr;
pub use super::ep::Ep;
pub use super::evd::Evd;
pub use super::ia::Ia;
pub use super::lmr::Lmr;
pub use super::pz::Pz;
pub use super::rmr::Rmr;
pub use super::sp::{Psp, Rsp};
pub use super::srq::Srq;
