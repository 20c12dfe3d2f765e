//! Property test of memory registration through the C API, on the built-in `dat2-soft`
//! provider (no dat.conf: `DAT_OVERRIDE=/nonexistent`).
//!
//! Random sequences of LMR creates (VIRTUAL, over overlapping sub-ranges of a few buffers,
//! random privileges, in 2 or 3 PZs; some repeat a live LMR's exact range to go through
//! registration reuse), frees, queries, sync checks and PZ frees run against a model:
//! - no key (lmr_context or rmr_context) of a live LMR equals another live LMR's key, an
//!   rmr_context is returned exactly when a remote privilege was asked for;
//! - a query reports what was created;
//! - `dat_pz_free` fails with DAT_INVALID_STATE | PZ_IN_USE exactly while the model has live
//!   LMRs in that PZ;
//! - a freed LMR's lmr_context is refused by `dat_lmr_sync_rdma_read`, a live one's accepted;
//! - at the end everything frees, the IA closes gracefully and `dat2::testing::live()` is back
//!   to where it started (registration reference counts balance).
//!
//! The entry points are the exported C functions (the rlib holds their symbols).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Mutex, Once};

use dat2::abi::*;
use proptest::prelude::*;

extern "C" {
    fn dat_ia_openv(
        name: DAT_NAME_PTR,
        qlen: DAT_COUNT,
        async_evd: *mut DAT_EVD_HANDLE,
        ia: *mut DAT_IA_HANDLE,
        major: DAT_UINT32,
        minor: DAT_UINT32,
        thread_safe: DAT_BOOLEAN,
    ) -> DAT_RETURN;
    fn dat_ia_close(ia: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN;
    fn dat_pz_create(ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE) -> DAT_RETURN;
    fn dat_pz_query(pz: DAT_PZ_HANDLE, mask: DAT_PZ_PARAM_MASK, param: *mut DAT_PZ_PARAM) -> DAT_RETURN;
    fn dat_pz_free(pz: DAT_PZ_HANDLE) -> DAT_RETURN;
    #[allow(clippy::too_many_arguments)]
    fn dat_lmr_create(
        ia: DAT_IA_HANDLE,
        mem_type: DAT_MEM_TYPE,
        region: DAT_REGION_DESCRIPTION,
        length: DAT_VLEN,
        pz: DAT_PZ_HANDLE,
        privileges: DAT_MEM_PRIV_FLAGS,
        va_type: DAT_VA_TYPE,
        lmr: *mut DAT_LMR_HANDLE,
        lmr_context: *mut DAT_LMR_CONTEXT,
        rmr_context: *mut DAT_RMR_CONTEXT,
        registered_length: *mut DAT_VLEN,
        registered_address: *mut DAT_VADDR,
    ) -> DAT_RETURN;
    fn dat_lmr_query(lmr: DAT_LMR_HANDLE, mask: DAT_LMR_PARAM_MASK, param: *mut DAT_LMR_PARAM) -> DAT_RETURN;
    fn dat_lmr_free(lmr: DAT_LMR_HANDLE) -> DAT_RETURN;
    fn dat_lmr_sync_rdma_read(ia: DAT_IA_HANDLE, segments: *const DAT_LMR_TRIPLET, count: DAT_VLEN) -> DAT_RETURN;
}

const PZ_IN_USE: DAT_RETURN = 0x8007_0053;
const HANDLE_PZ: DAT_RETURN = 0x8005_000f;
const HANDLE_LMR: DAT_RETURN = 0x8005_000d;
const TYPE_MASK: DAT_RETURN = 0x3fff_0000;
const INVALID_PARAMETER: DAT_RETURN = 0x0006_0000;
const REMOTE: DAT_MEM_PRIV_FLAGS = 0x62;
const PRIV_BITS: [DAT_MEM_PRIV_FLAGS; 5] = [0x01, 0x02, 0x10, 0x20, 0x40];

const BUFFERS: usize = 3;
const BUF_LEN: usize = 4096;

/// The buffers every case registers sub-ranges of (leaked: stable addresses for the run).
fn buffers() -> &'static [Box<[u8]>] {
    static BUFS: Mutex<Option<&'static [Box<[u8]>]>> = Mutex::new(None);
    let mut b = BUFS.lock().unwrap();
    b.get_or_insert_with(|| Box::leak((0..BUFFERS).map(|_| vec![0u8; BUF_LEN].into_boxed_slice()).collect::<Vec<_>>().into_boxed_slice()))
}

/// The registration table is process-wide: one case at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn init_env() {
    static ONCE: Once = Once::new();
    // No dat.conf: dat2-soft is still there. Set before the library's first call.
    ONCE.call_once(|| std::env::set_var("DAT_OVERRIDE", "/nonexistent"));
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        buf: usize,
        off: usize,
        len: usize,
        pz: usize,
        privs: u8,
    },
    /// Another LMR over exactly the range, PZ and privileges of a live one (reuse).
    CreateSame {
        pick: usize,
    },
    Free {
        pick: usize,
    },
    Query {
        pick: usize,
    },
    Sync {
        pick: usize,
    },
    PzFree {
        pz: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..BUFFERS, 0..BUF_LEN, 1..=BUF_LEN, 0usize..3, 0u8..32)
            .prop_map(|(buf, off, len, pz, privs)| Op::Create { buf, off, len: len.min(BUF_LEN - off), pz, privs }),
        2 => any::<usize>().prop_map(|pick| Op::CreateSame { pick }),
        4 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Query { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Sync { pick }),
        1 => (0usize..3).prop_map(|pz| Op::PzFree { pz }),
    ]
}

fn privileges(bits: u8) -> DAT_MEM_PRIV_FLAGS {
    PRIV_BITS.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).fold(0, |acc, (_, b)| acc | b)
}

#[derive(Clone, Debug)]
struct LiveLmr {
    handle: DAT_LMR_HANDLE,
    addr: u64,
    len: u64,
    pz: usize,
    privs: DAT_MEM_PRIV_FLAGS,
    lctx: DAT_LMR_CONTEXT,
    rctx: DAT_RMR_CONTEXT,
    reg_len: DAT_VLEN,
    reg_addr: DAT_VADDR,
}

struct World {
    ia: DAT_IA_HANDLE,
    pzs: Vec<DAT_PZ_HANDLE>,
    live: Vec<LiveLmr>,
    /// lmr_contexts of freed LMRs (for the "key is dead" check).
    dead_keys: Vec<DAT_LMR_CONTEXT>,
}

impl World {
    fn keys_in_use(&self) -> HashMap<u32, usize> {
        let mut m = HashMap::new();
        for (i, l) in self.live.iter().enumerate() {
            m.insert(l.lctx, i);
            if l.rctx != 0 {
                m.insert(l.rctx, i);
            }
        }
        m
    }

    fn sync(&self, lctx: DAT_LMR_CONTEXT, addr: u64, len: u32) -> DAT_RETURN {
        let t = DAT_LMR_TRIPLET { virtual_address: addr, segment_length: len, lmr_context: lctx };
        // SAFETY: one triplet on our stack.
        unsafe { dat_lmr_sync_rdma_read(self.ia, &t, 1) }
    }

    fn create(&mut self, addr: u64, len: u64, pz: usize, privs: DAT_MEM_PRIV_FLAGS) -> Result<(), TestCaseError> {
        let region = DAT_REGION_DESCRIPTION { for_va: addr as DAT_PVOID };
        let mut handle: DAT_LMR_HANDLE = DAT_HANDLE_NULL;
        let (mut lctx, mut rctx, mut reg_len, mut reg_addr) = (0u32, 0xfeed_f00du32, 0u64, 0u64);
        // SAFETY: valid out-pointers to locals; the region is one of our live buffers.
        let rc = unsafe {
            dat_lmr_create(
                self.ia,
                DAT_MEM_TYPE_VIRTUAL,
                region,
                len,
                self.pzs[pz],
                privs,
                DAT_VA_TYPE_VA,
                &mut handle,
                &mut lctx,
                &mut rctx,
                &mut reg_len,
                &mut reg_addr,
            )
        };
        prop_assert_eq!(rc, DAT_SUCCESS, "lmr_create [{:#x}, +{:#x}) privileges {:#x}", addr, len, privs);
        prop_assert_ne!(lctx, 0, "lmr_context 0");
        if privs & REMOTE != 0 {
            prop_assert!(rctx != 0 && rctx != 0xfeed_f00d, "privileges {:#x}: rmr_context {:#x}", privs, rctx);
        } else {
            prop_assert_eq!(rctx, 0, "local-only privileges {:#x} got an rmr_context", privs);
        }
        prop_assert_ne!(lctx, rctx, "lmr_context equals rmr_context");
        let used = self.keys_in_use();
        prop_assert!(!used.contains_key(&lctx), "lmr_context {:#x} is a key of a live LMR", lctx);
        prop_assert!(rctx == 0 || !used.contains_key(&rctx), "rmr_context {:#x} is a key of a live LMR", rctx);
        prop_assert!(reg_addr <= addr && reg_addr + reg_len >= addr + len, "registered range does not cover the request");
        self.live.push(LiveLmr { handle, addr, len, pz, privs, lctx, rctx, reg_len, reg_addr });
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Create { buf, off, len, pz, privs } => {
                let pz = pz % self.pzs.len();
                let addr = buffers()[buf].as_ptr() as u64 + off as u64;
                self.create(addr, len as u64, pz, privileges(privs))?;
            }
            Op::CreateSame { pick } => {
                if !self.live.is_empty() {
                    let l = self.live[pick % self.live.len()].clone();
                    self.create(l.addr, l.len, l.pz, l.privs)?;
                }
            }
            Op::Free { pick } => {
                if !self.live.is_empty() {
                    let l = self.live.swap_remove(pick % self.live.len());
                    // SAFETY: a live handle.
                    prop_assert_eq!(unsafe { dat_lmr_free(l.handle) }, DAT_SUCCESS);
                    // SAFETY: a stale handle is only looked up.
                    prop_assert_eq!(unsafe { dat_lmr_free(l.handle) }, HANDLE_LMR, "second free");
                    let rc = self.sync(l.lctx, l.addr, 1);
                    prop_assert_eq!(rc & (0x8000_0000 | TYPE_MASK), 0x8000_0000 | INVALID_PARAMETER, "freed key accepted: {:#x}", rc);
                    self.dead_keys.push(l.lctx);
                }
            }
            Op::Query { pick } => {
                if !self.live.is_empty() {
                    let l = &self.live[pick % self.live.len()];
                    // SAFETY: all-zero is a valid DAT_LMR_PARAM (integers and pointers).
                    let mut p: DAT_LMR_PARAM = unsafe { std::mem::zeroed() };
                    // SAFETY: a live handle and our out-parameter.
                    prop_assert_eq!(unsafe { dat_lmr_query(l.handle, DAT_LMR_FIELD_ALL, &mut p) }, DAT_SUCCESS);
                    prop_assert_eq!(p.ia_handle, self.ia);
                    prop_assert_eq!(p.mem_type, DAT_MEM_TYPE_VIRTUAL);
                    // SAFETY: a VIRTUAL LMR's region is for_va.
                    prop_assert_eq!(unsafe { p.region_desc.for_va } as u64, l.addr);
                    prop_assert_eq!(p.length, l.len);
                    prop_assert_eq!(p.pz_handle, self.pzs[l.pz]);
                    prop_assert_eq!(p.mem_priv, l.privs);
                    prop_assert_eq!(p.va_type, DAT_VA_TYPE_VA);
                    prop_assert_eq!(p.lmr_context, l.lctx);
                    prop_assert_eq!(p.rmr_context, l.rctx);
                    prop_assert_eq!(p.registered_size, l.reg_len);
                    prop_assert_eq!(p.registered_address, l.reg_addr);
                }
            }
            Op::Sync { pick } => {
                if !self.live.is_empty() {
                    let l = &self.live[pick % self.live.len()];
                    prop_assert_eq!(self.sync(l.lctx, l.addr, l.len as u32), DAT_SUCCESS, "live key refused");
                    let rc = self.sync(l.lctx, l.addr + l.len, 1);
                    prop_assert_eq!(rc & (0x8000_0000 | TYPE_MASK), 0x8000_0000 | INVALID_PARAMETER, "segment after the LMR: {:#x}", rc);
                }
                // Keys die with their LMR and are not handed out again soon.
                let used = self.keys_in_use();
                for &k in &self.dead_keys {
                    if !used.contains_key(&k) {
                        let rc = self.sync(k, buffers()[0].as_ptr() as u64, 1);
                        prop_assert_ne!(rc, DAT_SUCCESS, "dead key {:#x} accepted", k);
                    }
                }
            }
            Op::PzFree { pz } => {
                let pz = pz % self.pzs.len();
                let users = self.live.iter().filter(|l| l.pz == pz).count();
                // SAFETY: a live PZ handle.
                let rc = unsafe { dat_pz_free(self.pzs[pz]) };
                if users > 0 {
                    prop_assert_eq!(rc, PZ_IN_USE, "pz_free with {} live LMRs", users);
                } else {
                    prop_assert_eq!(rc, DAT_SUCCESS, "pz_free of an unused PZ");
                    let mut p = DAT_PZ_PARAM { ia_handle: DAT_HANDLE_NULL };
                    // SAFETY: a stale handle is only looked up.
                    prop_assert_eq!(unsafe { dat_pz_query(self.pzs[pz], DAT_PZ_FIELD_ALL, &mut p) }, HANDLE_PZ);
                    let mut fresh: DAT_PZ_HANDLE = DAT_HANDLE_NULL;
                    // SAFETY: our out-parameter.
                    prop_assert_eq!(unsafe { dat_pz_create(self.ia, &mut fresh) }, DAT_SUCCESS);
                    self.pzs[pz] = fresh;
                }
            }
        }
        Ok(())
    }

    /// Frees everything, checking that each PZ frees exactly when its last LMR is gone.
    fn teardown(&mut self) -> Result<(), TestCaseError> {
        while let Some(l) = self.live.pop() {
            // SAFETY: a live handle.
            prop_assert_eq!(unsafe { dat_lmr_free(l.handle) }, DAT_SUCCESS);
        }
        for &pz in &self.pzs {
            let mut p = DAT_PZ_PARAM { ia_handle: DAT_HANDLE_NULL };
            // SAFETY: live handles and our out-parameter.
            prop_assert_eq!(unsafe { dat_pz_query(pz, DAT_PZ_FIELD_ALL, &mut p) }, DAT_SUCCESS);
            prop_assert_eq!(p.ia_handle, self.ia);
            // SAFETY: a live handle.
            prop_assert_eq!(unsafe { dat_pz_free(pz) }, DAT_SUCCESS);
        }
        self.pzs.clear();
        // SAFETY: our IA, now empty: a graceful close must succeed.
        prop_assert_eq!(unsafe { dat_ia_close(self.ia, DAT_CLOSE_GRACEFUL_FLAG) }, DAT_SUCCESS);
        Ok(())
    }
}

fn open(pz_count: usize) -> Result<World, TestCaseError> {
    init_env();
    let name = CString::new("dat2-soft").unwrap();
    let mut evd: DAT_EVD_HANDLE = DAT_HANDLE_NULL;
    let mut ia: DAT_IA_HANDLE = DAT_HANDLE_NULL;
    // SAFETY: a NUL-terminated name and out-pointers to locals.
    let rc = unsafe { dat_ia_openv(name.as_ptr() as DAT_NAME_PTR, 8, &mut evd, &mut ia, 2, 0, DAT_FALSE) };
    prop_assert_eq!(rc, DAT_SUCCESS, "dat_ia_openv(dat2-soft)");
    let mut pzs = Vec::new();
    for _ in 0..pz_count {
        let mut pz: DAT_PZ_HANDLE = DAT_HANDLE_NULL;
        // SAFETY: our IA and out-parameter.
        prop_assert_eq!(unsafe { dat_pz_create(ia, &mut pz) }, DAT_SUCCESS);
        pzs.push(pz);
    }
    Ok(World { ia, pzs, live: Vec::new(), dead_keys: Vec::new() })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn registration_model(pz_count in 2usize..=3, ops in proptest::collection::vec(op(), 1..200)) {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let start = dat2::testing::live();
        let mut w = open(pz_count)?;
        let result = ops.iter().try_for_each(|op| w.apply(op));
        // Tear down even after a failed step, so that the next case starts clean.
        let teardown = w.teardown();
        result?;
        teardown?;
        prop_assert_eq!(dat2::testing::live(), start, "registrations left after everything was freed");
    }
}

/// A fixed scenario the random ones may miss: many LMRs over one range and PZ share a
/// registration, which goes away with the last of them.
#[test]
fn shared_registration_released_with_last_lmr() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = dat2::testing::live();
    let mut w = open(2).expect("open");
    let addr = buffers()[1].as_ptr() as u64 + 100;
    for _ in 0..10 {
        w.create(addr, 1000, 0, 0x33).expect("create");
    }
    w.create(addr, 1000, 1, 0x33).expect("create in the other PZ");
    assert_eq!(dat2::testing::live(), start + 2, "one registration per (range, PZ, privileges)");
    while w.live.len() > 1 {
        w.apply(&Op::Free { pick: 0 }).expect("free");
        w.apply(&Op::Sync { pick: 0 }).expect("sync");
    }
    assert_eq!(dat2::testing::live(), start + 1);
    w.teardown().expect("teardown");
    assert_eq!(dat2::testing::live(), start);
}
