//! The exported C functions: one module per DAT object family, each checking its handles in
//! the registry's table and calling the owning provider's `DAT_PROVIDER` table
//! ([`dispatch`]); the consumer-context and handle-type calls ([`context`]), `dat_strerror`
//! ([`error`]) and the registry's own exports ([`crate::registry`]).

mod cno;
mod context;
mod cr;
pub(crate) mod dispatch;
mod ep;
pub(crate) mod error;
mod evd;
mod ext;
mod ia;
mod lmr;
mod pz;
mod registry;
mod rmr;
mod sp;
mod srq;
#[cfg(test)]
mod tests;
