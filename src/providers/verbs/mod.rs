//! `verbs`: the device on rdma-core (libibverbs and librdmacm), loaded at run time.

pub mod api;
pub mod sys;
