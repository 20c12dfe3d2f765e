//! The mock device that counts registrations, and the mappings and helpers shared by the
//! registration tests (`tests.rs`) and the hot slot's (`tests_hot.rs`), with the lock that
//! keeps the memory-watching tests apart from the hot slot's stress test.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use super::cache::Cache;
use super::unmap;
use super::Registration;
use crate::device::{Access, DevError, Device, DeviceLimits, IaPort, Mr, Mw, Pd, Qp, QpCaps, QpEvents, Srq, SrqEvents};

pub(super) struct Mock {
    opt_in: bool,
    limits: DeviceLimits,
    next: AtomicU64,
    regs: AtomicU64,
    aliases: AtomicU64,
    deregs: AtomicU64,
    pub(super) live: Mutex<HashSet<u64>>,
    /// Key sets at most (NoResources beyond).
    max_live: usize,
    /// lkeys that outstanding requests were posted with (`mr_in_use`).
    pub(super) in_use: Mutex<HashSet<u32>>,
    /// Local write grants remote write too, as on iWARP adapters whose read sinks need it
    /// (`wire_access`; not siw).
    pub(super) iwarp: AtomicBool,
}

impl Mock {
    pub(super) fn new(opt_in: bool) -> Arc<Mock> {
        Mock::with_limit(opt_in, usize::MAX)
    }
    pub(super) fn with_limit(opt_in: bool, max_live: usize) -> Arc<Mock> {
        Arc::new(Mock {
            opt_in,
            limits: DeviceLimits {
                max_pds: 16,
                max_mrs: 1024,
                max_mr_size: u64::MAX,
                max_mws: 16,
                max_qps: 16,
                max_qp_wr: 16,
                max_sge: 4,
                max_sge_rd: 4,
                max_cqs: 16,
                max_cqe: 16,
                max_rd_in: 4,
                max_rd_out: 4,
                max_msg_size: 1 << 20,
                max_srqs: 1,
                max_srq_wr: 16,
                mtu: 4096,
                page_size: 4096,
                max_private_data: 256,
                max_ud_msg: 0,
                atomics: true,
                immediate: true,
                zero_based: true,
            },
            next: AtomicU64::new(1),
            regs: AtomicU64::new(0),
            aliases: AtomicU64::new(0),
            deregs: AtomicU64::new(0),
            live: Mutex::new(HashSet::new()),
            max_live,
            in_use: Mutex::new(HashSet::new()),
            iwarp: AtomicBool::new(false),
        })
    }
    fn set(&self, addr: u64, len: u64, access: Access) -> Result<Mr, DevError> {
        let mut live = self.live.lock().unwrap();
        if live.len() >= self.max_live {
            return Err(DevError::NoResources);
        }
        let id = self.next.fetch_add(1, SeqCst);
        live.insert(id);
        let rkey = if access.is_remote() { 0x8000_0000 | id as u32 } else { 0 };
        Ok(Mr { id, lkey: id as u32, rkey, addr, len })
    }
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (self.regs.load(SeqCst), self.aliases.load(SeqCst), self.deregs.load(SeqCst))
    }
}

impl Device for Mock {
    fn name(&self) -> &str {
        "mock"
    }
    fn vendor(&self) -> &str {
        "test"
    }
    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }
    fn address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
    }
    fn alloc_pd(&self) -> Result<Pd, DevError> {
        Ok(Pd(1))
    }
    fn dealloc_pd(&self, _pd: Pd) {}
    fn reg_mr(&self, _pd: Pd, addr: u64, len: u64, access: Access, _zb: bool) -> Result<Mr, DevError> {
        let mr = self.set(addr, len, access)?;
        self.regs.fetch_add(1, SeqCst);
        Ok(mr)
    }
    fn alias_mr(&self, mr: &Mr, _pd: Pd, access: Access, _zb: bool) -> Result<Mr, DevError> {
        let mr = self.set(mr.addr, mr.len, access)?;
        self.aliases.fetch_add(1, SeqCst);
        Ok(mr)
    }
    fn dereg_mr(&self, mr: &Mr) {
        assert!(self.live.lock().unwrap().remove(&mr.id), "key set {} deregistered twice", mr.id);
        self.deregs.fetch_add(1, SeqCst);
    }
    fn cache_registrations(&self) -> bool {
        self.opt_in
    }
    fn mr_in_use(&self, mr: &Mr) -> bool {
        self.in_use.lock().unwrap().contains(&mr.lkey)
    }
    fn wire_access(&self, a: Access) -> Access {
        if self.iwarp.load(SeqCst) && a.contains(Access::LOCAL_WRITE) {
            a | Access::REMOTE_WRITE
        } else {
            a
        }
    }
    fn alloc_mw(&self, _pd: Pd) -> Result<Mw, DevError> {
        Err(DevError::NotSupported)
    }
    fn dealloc_mw(&self, _mw: &Mw) {}
    fn create_qp(&self, _pd: Pd, _caps: QpCaps, _srq: Option<Arc<dyn Srq>>, _events: Arc<dyn QpEvents>) -> Result<Arc<dyn Qp>, DevError> {
        Err(DevError::NotSupported)
    }
    fn create_srq(&self, _pd: Pd, _max_wr: u32, _max_sge: u32, _events: Arc<dyn SrqEvents>) -> Result<Arc<dyn Srq>, DevError> {
        Err(DevError::NotSupported)
    }
    fn open_ia(&self) -> Result<Box<dyn IaPort>, DevError> {
        Err(DevError::NotSupported)
    }
    fn service_address(&self, _addr: std::net::SocketAddr, _conn_qual: u64) -> Option<std::net::SocketAddr> {
        None
    }
}

pub(super) const LOCAL: Access = Access::LOCAL_READ.union(Access::LOCAL_WRITE);
pub(super) const REMOTE: Access = Access::LOCAL_READ.union(Access::LOCAL_WRITE).union(Access::REMOTE_WRITE);
pub(super) const PAGE: u64 = 4096;

/// An anonymous private mapping, unmapped on drop unless the test already did.
pub(super) struct Map {
    pub(super) addr: u64,
    len: u64,
}

/// Where `Map::new` places the next mapping: addresses that no other test of this process maps.
static NEXT_MAP: AtomicU64 = AtomicU64::new(0x3000_0000_0000);

impl Map {
    /// A mapping at addresses never mapped before in this process. Tests run in parallel, and an
    /// unmap event from another test's mapping at the same addresses may be read after this test
    /// registered them; the cache then (rightly) drops the registration, and counts would differ.
    pub(super) fn new(pages: u64) -> Map {
        loop {
            // One unmapped page between mappings, so that neighbours never merge into one VMA.
            let hint = NEXT_MAP.fetch_add((pages + 1) * PAGE, SeqCst);
            // SAFETY: as in `at`; MAP_FIXED_NOREPLACE fails with EEXIST instead of replacing.
            let p = unsafe {
                libc::mmap(
                    hint as *mut _,
                    (pages * PAGE) as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Map { addr: p as u64, len: pages * PAGE };
            }
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "mmap at {hint:#x}: {e}");
        }
    }
    pub(super) fn at(hint: u64, pages: u64, extra: i32) -> Map {
        let len = pages * PAGE;
        // SAFETY: a new anonymous mapping; a hint address is only a hint unless MAP_FIXED_NOREPLACE
        // is passed, which never replaces an existing mapping.
        let p = unsafe {
            libc::mmap(
                hint as *mut _,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        Map { addr: p as u64, len }
    }
    pub(super) fn unmap(&mut self) {
        if self.len != 0 {
            // SAFETY: unmaps exactly the mapping this value made.
            unsafe { libc::munmap(self.addr as *mut _, self.len as usize) };
            self.len = 0;
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// An anonymous mapping of `pages` exactly at `addr`, if nothing else took that address.
pub(super) fn map_again_at(addr: u64, pages: u64) -> Option<Map> {
    let len = pages * PAGE;
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; the result is checked.
    let p = unsafe {
        libc::mmap(
            addr as *mut _,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let m = Map { addr: p as u64, len };
    (m.addr == addr).then_some(m)
}

/// Held by every test that watches memory: shared by those of `tests.rs`, alone by the hot
/// slot's (`tests_hot.rs`), whose stress test unmaps and maps again thousands of times. The monitor's
/// events reach every cache's ring, and mmap hands the addresses out again, so another test's
/// cache could see one of those unmaps as its own (an entry evicted by "unmap" instead of by
/// the collector, say).
pub(super) static WATCHING: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub(super) fn watching() -> std::sync::RwLockReadGuard<'static, ()> {
    WATCHING.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether userfaultfd works here; prints why the calling test is skipped otherwise.
pub(super) fn uffd(test: &str) -> bool {
    match unmap::monitor() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            false
        }
    }
}

pub(super) fn dev_of(m: &Arc<Mock>) -> Arc<dyn Device> {
    m.clone()
}

pub(super) fn reg(c: &Cache, dev: &Arc<dyn Device>, pd: u32, addr: u64, len: u64, access: Access) -> Registration {
    c.register_range(dev, Pd(pd), addr, len, access, false).expect("register")
}
