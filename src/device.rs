//! The device interface the DAT core runs on, modelled on verbs: protection domains, memory
//! regions, memory windows (and, with the data path, queue pairs, completion queues and a
//! connection manager). A built-in provider is the core plus one device.

use crate::abi::*;

/// Access rights of a registration, in DAT's privilege bits (`DAT_MEM_PRIV_*`, plus
/// `DAT_IB_MEM_PRIV_REMOTE_ATOMIC`). Local read is always implied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access(pub u32);

impl Access {
    pub const LOCAL_READ: u32 = DAT_MEM_PRIV_LOCAL_READ_FLAG;
    pub const REMOTE_READ: u32 = DAT_MEM_PRIV_REMOTE_READ_FLAG;
    pub const LOCAL_WRITE: u32 = DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    pub const REMOTE_WRITE: u32 = DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    pub const REMOTE_ATOMIC: u32 = DAT_IB_MEM_PRIV_REMOTE_ATOMIC;
    pub const ALL: u32 = Self::LOCAL_READ | Self::REMOTE_READ | Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_ATOMIC;
    pub const REMOTE: u32 = Self::REMOTE_READ | Self::REMOTE_WRITE | Self::REMOTE_ATOMIC;

    pub fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
    pub fn is_remote(self) -> bool {
        self.0 & Self::REMOTE != 0
    }
    /// Whether the memory must be writable: local or remote write, or atomics.
    pub fn needs_write(self) -> bool {
        self.0 & (Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_ATOMIC) != 0
    }
}

/// A protection domain of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);

/// A memory registration's keys and range as the device reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    /// Device-private identity of this registration (one per key set).
    pub id: u64,
    pub lkey: u32,
    /// 0 when no remote access was asked for.
    pub rkey: u32,
    /// The registered range, which covers the request (a device that pins pages may round it).
    pub addr: u64,
    pub len: u64,
}

/// A memory window (an RMR's device object).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mw {
    pub id: u64,
    pub rkey: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevError {
    /// The range is not mapped, or lacks the access asked for.
    Fault,
    /// The device ran out of something (keys, memory, a limit).
    NoResources,
    /// The device does not do this.
    NotSupported,
}

/// Limits the device reports; the core turns them into `DAT_IA_ATTR`.
#[derive(Clone, Debug)]
pub struct DeviceLimits {
    pub max_pds: u32,
    pub max_mrs: u32,
    pub max_mr_size: u64,
    pub max_mws: u32,
    pub max_qps: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cqs: u32,
    pub max_cqe: u32,
    pub max_rd_atom: u32,
    pub max_msg_size: u32,
    pub max_srqs: u32,
    pub max_srq_wr: u32,
    pub mtu: u32,
    pub page_size: u64,
}

pub trait Device: Send + Sync {
    /// The adapter name reported in `DAT_IA_ATTR.adapter_name`.
    fn name(&self) -> &str;
    fn vendor(&self) -> &str;
    fn limits(&self) -> &DeviceLimits;
    /// The IA's own address (what peers connect to).
    fn address(&self) -> libc::sockaddr_storage;

    fn alloc_pd(&self) -> Result<Pd, DevError>;
    fn dealloc_pd(&self, pd: Pd);

    /// Registers `[addr, addr+len)` in `pd`. `zero_based` makes remote addresses offsets from
    /// the region's start.
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError>;
    /// A second key set over the memory of `mr`, in `pd` with `access`: used to share one
    /// registration between LMRs while each keeps keys of its own, so that freeing one LMR
    /// revokes exactly its keys.
    fn alias_mr(&self, mr: &Mr, pd: Pd, access: Access, zero_based: bool) -> Result<Mr, DevError>;
    /// Revokes the keys of `mr` at once; the memory registration goes with its last key set.
    fn dereg_mr(&self, mr: &Mr);

    fn alloc_mw(&self, pd: Pd) -> Result<Mw, DevError>;
    fn dealloc_mw(&self, mw: &Mw);
}
