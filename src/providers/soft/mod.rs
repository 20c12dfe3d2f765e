//! `soft`: a software RDMA device inside the library, needing no kernel support or hardware.
//! Like Soft-RoCE, it enforces in software what an HCA enforces in hardware: registrations
//! cover only memory that is really mapped with the access asked for, keys are unpredictable
//! capabilities, and every key names its protection domain, bounds and rights.

pub mod address;
pub mod memory;

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use crate::device::{Access, DevError, Device, DeviceLimits, Mr, Mw, Pd};
use crate::mr::keys::KeyGen;

/// One key set: what an lkey or rkey grants.
#[derive(Clone, Copy, Debug)]
pub struct KeySet {
    pub region: u64,
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub zero_based: bool,
    pub lkey: u32,
    pub rkey: u32,
}

struct Region {
    writable: bool,
    sets: u32,
}

#[derive(Default)]
struct State {
    next_pd: u32,
    pds: HashSet<u32>,
    next_id: u64,
    regions: HashMap<u64, Region>,
    sets: HashMap<u64, KeySet>,
    lkeys: HashMap<u32, u64>,
    rkeys: HashMap<u32, u64>,
    mws: HashMap<u64, u32>,
}

pub struct SoftDevice {
    name: String,
    limits: DeviceLimits,
    address: libc::sockaddr_storage,
    keys: KeyGen,
    state: RwLock<State>,
}

// SAFETY: sockaddr_storage is plain data; all mutable state is behind the RwLock.
unsafe impl Send for SoftDevice {}
// SAFETY: as above.
unsafe impl Sync for SoftDevice {}

impl SoftDevice {
    /// A device on the address `params` names (`"<address or netdev> <port>"`).
    pub fn new(params: &str) -> Result<SoftDevice, String> {
        let address = address::resolve(params)?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        Ok(SoftDevice {
            name: "soft0".into(),
            limits: DeviceLimits {
                max_pds: 1 << 16,
                max_mrs: 1 << 22,
                max_mr_size: 1 << 40,
                max_mws: 1 << 20,
                max_qps: 1 << 14,
                max_qp_wr: 1 << 14,
                max_sge: 16,
                max_cqs: 1 << 14,
                max_cqe: 1 << 20,
                max_rd_atom: 16,
                max_msg_size: 1 << 31,
                max_srqs: 1 << 10,
                max_srq_wr: 1 << 14,
                mtu: 4096,
                page_size: page,
            },
            address,
            keys: KeyGen::new(),
            state: RwLock::new(State::default()),
        })
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// What a local key grants, if it is live.
    pub fn lkey(&self, lkey: u32) -> Option<KeySet> {
        let s = self.read();
        s.lkeys.get(&lkey).and_then(|id| s.sets.get(id)).copied()
    }

    /// What a remote key grants, if it is live.
    pub fn rkey(&self, rkey: u32) -> Option<KeySet> {
        let s = self.read();
        s.rkeys.get(&rkey).and_then(|id| s.sets.get(id)).copied()
    }

    fn new_set(&self, s: &mut State, region: u64, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if !s.pds.contains(&pd.0) {
            return Err(DevError::Fault);
        }
        if s.sets.len() >= self.limits.max_mrs as usize {
            return Err(DevError::NoResources);
        }
        s.next_id += 1;
        let id = s.next_id;
        let lkey = self.keys.next();
        let rkey = if access.is_remote() { self.keys.next() } else { 0 };
        s.sets.insert(id, KeySet { region, pd: pd.0, addr, len, access, zero_based, lkey, rkey });
        s.lkeys.insert(lkey, id);
        if rkey != 0 {
            s.rkeys.insert(rkey, id);
        }
        if let Some(r) = s.regions.get_mut(&region) {
            r.sets += 1;
        }
        Ok(Mr { id, lkey, rkey, addr, len })
    }
}

impl Device for SoftDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn vendor(&self) -> &str {
        "dat2 software RDMA"
    }
    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }
    fn address(&self) -> libc::sockaddr_storage {
        self.address
    }

    fn alloc_pd(&self) -> Result<Pd, DevError> {
        let mut s = self.write();
        if s.pds.len() >= self.limits.max_pds as usize {
            return Err(DevError::NoResources);
        }
        s.next_pd += 1;
        let pd = s.next_pd;
        s.pds.insert(pd);
        Ok(Pd(pd))
    }

    fn dealloc_pd(&self, pd: Pd) {
        self.write().pds.remove(&pd.0);
    }

    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if len == 0 || len > self.limits.max_mr_size {
            return Err(DevError::NoResources);
        }
        // Validate outside the lock: it may take a while for a large range.
        if !memory::accessible(addr, len, access.needs_write(), self.limits.page_size) {
            return Err(DevError::Fault);
        }
        let mut s = self.write();
        s.next_id += 1;
        let region = s.next_id;
        s.regions.insert(region, Region { writable: access.needs_write(), sets: 0 });
        let mr = self.new_set(&mut s, region, pd, addr, len, access, zero_based);
        if mr.is_err() {
            s.regions.remove(&region);
        }
        mr
    }

    fn alias_mr(&self, mr: &Mr, pd: Pd, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        let (region, addr, len, writable) = {
            let s = self.read();
            let set = s.sets.get(&mr.id).ok_or(DevError::Fault)?;
            let r = s.regions.get(&set.region).ok_or(DevError::Fault)?;
            (set.region, set.addr, set.len, r.writable)
        };
        if access.needs_write() && !writable {
            if !memory::accessible(addr, len, true, self.limits.page_size) {
                return Err(DevError::Fault);
            }
            if let Some(r) = self.write().regions.get_mut(&region) {
                r.writable = true;
            }
        }
        let mut s = self.write();
        if !s.regions.contains_key(&region) {
            return Err(DevError::Fault);
        }
        self.new_set(&mut s, region, pd, addr, len, access, zero_based)
    }

    fn dereg_mr(&self, mr: &Mr) {
        let mut s = self.write();
        let Some(set) = s.sets.remove(&mr.id) else { return };
        s.lkeys.remove(&set.lkey);
        if set.rkey != 0 {
            s.rkeys.remove(&set.rkey);
        }
        let last = match s.regions.get_mut(&set.region) {
            Some(r) => {
                r.sets -= 1;
                r.sets == 0
            }
            None => false,
        };
        if last {
            s.regions.remove(&set.region);
        }
    }

    fn alloc_mw(&self, pd: Pd) -> Result<Mw, DevError> {
        let mut s = self.write();
        if !s.pds.contains(&pd.0) {
            return Err(DevError::Fault);
        }
        if s.mws.len() >= self.limits.max_mws as usize {
            return Err(DevError::NoResources);
        }
        s.next_id += 1;
        let id = s.next_id;
        let rkey = self.keys.next();
        s.mws.insert(id, pd.0);
        Ok(Mw { id, rkey })
    }

    fn dealloc_mw(&self, mw: &Mw) {
        self.write().mws.remove(&mw.id);
    }
}
