//! LMR semantics: the three memory types, privileges, keys, queries and frees.
//!
//! - VIRTUAL registers `[va, va+length)`; an equal live registration (same PZ, privileges and
//!   address type) is reused, each LMR keeping keys of its own.
//! - LMR registers the memory of an existing LMR again, in another PZ with other privileges;
//!   the length argument is ignored and the original's range is reported.
//! - SHARED_VIRTUAL shares one registration among all LMRs with an equal 40-byte cookie.
//!
//! `rmr_context` is returned only when a remote privilege is asked for (0 otherwise).

use core::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::ia::{self, Ia};
use super::put;
use super::pz::Pz;
use super::table::{self, Object};
use crate::abi::*;
use crate::builtin::mr::{self, Cookie, RegError, Registration, COOKIE_SIZE};
use crate::dbg_log;
use crate::device::{Access, DevError};
use crate::log::DbgType;
use crate::util::spare::Spare;

/// The privilege bits DAT and its IB extension define.
pub const PRIV_VALID: u32 = Access::all().bits();

pub struct Lmr {
    /// Its PZ, and through it its IA ([`Lmr::ia`]).
    pub pz: Arc<Pz>,
    pub mem_type: DAT_MEM_TYPE,
    /// The region as the consumer described it (the cookie pointer is replaced by ours).
    pub region: DAT_REGION_DESCRIPTION,
    pub length: u64,
    pub privileges: DAT_MEM_PRIV_FLAGS,
    pub va_type: DAT_VA_TYPE,
    pub reg: Registration,
    pub address: u64,
    /// Our copy of a shared-memory cookie; `region` points at it.
    _cookie: Option<Box<Cookie>>,
    /// RMRs bound to this LMR; `FREED` once it is being freed. Counted up only under the
    /// table's lock ([`lmr_bound`]), so that [`free`], holding it, reads and sets it with no
    /// read-modify-write.
    bound: AtomicU32,
    pub context: Mutex<u64>,
}

// SAFETY: `region` holds pointers only as values reported back to the consumer; the cookie
// pointer points into our own boxed copy. Everything mutable is atomic or locked.
unsafe impl Send for Lmr {}
// SAFETY: as above.
unsafe impl Sync for Lmr {}

const FREED: u32 = u32::MAX;

/// The memory of the last LMR freed (kept by the freeing thread), for the next one made: a
/// registration cache's hit, made and freed around each transfer, then calls neither `malloc`
/// nor `free`, and takes no atomic for it.
static SPARE: Spare<Lmr> = Spare::new();

impl Lmr {
    pub fn ia(&self) -> &Arc<Ia> {
        &self.pz.ia
    }
    pub fn lmr_context(&self) -> DAT_LMR_CONTEXT {
        self.reg.mr.lkey
    }
    pub fn rmr_context(&self) -> DAT_RMR_CONTEXT {
        self.reg.mr.rkey
    }
    /// Counts an RMR binding to this LMR; fails once the LMR is being freed. Only under the
    /// table's lock ([`lmr_bound`]).
    fn bind(&self) -> Result<(), DAT_RETURN> {
        self.bound
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| if n == FREED { None } else { Some(n + 1) })
            .map(|_| ())
            .map_err(|_| dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR))
    }
    pub fn unbind(&self) {
        let _ = self.bound.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| if n == FREED || n == 0 { None } else { Some(n - 1) });
    }
    /// Whether `[addr, addr+len)` lies inside the registered range.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.address && addr.checked_add(len).is_some_and(|end| end <= self.address + self.length)
    }
}

impl Object for Lmr {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_LMR
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia().handle
    }
    fn destroy(&self) {
        destroy(self)
    }
}

pub fn lmr(handle: DAT_LMR_HANDLE) -> Result<Arc<Lmr>, DAT_RETURN> {
    table::lookup::<Lmr>(handle, DAT_INVALID_HANDLE_LMR)
}

/// The LMR `handle` names, with an RMR binding counted ([`Lmr::unbind`] gives it back): looked
/// up and counted under the table's lock, which [`free`] holds while it checks for bindings.
pub fn lmr_bound(handle: DAT_LMR_HANDLE) -> Result<Arc<Lmr>, DAT_RETURN> {
    table::lookup_with::<Lmr>(handle, DAT_INVALID_HANDLE_LMR, Lmr::bind)
}

/// Whether `handle` names a published LMR of ours (a few loads, no lock).
pub fn published(handle: DAT_LMR_HANDLE) -> bool {
    matches!(table::published(handle as usize), Some(Some((_, DAT_HANDLE_TYPE_LMR))))
}

fn reg_error(e: RegError) -> DAT_RETURN {
    match e {
        RegError::Device(DevError::Fault) => dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3),
        RegError::Device(DevError::NoResources | DevError::InUse | DevError::State | DevError::QueueFull | DevError::BadQualifier) => {
            dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION)
        }
        // The process's memory, not the device's regions, ran out: DAT's memory resource.
        RegError::Device(DevError::LockedMemory) => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY),
        RegError::Device(DevError::NotSupported) => dat_error(DAT_MODEL_NOT_SUPPORTED, 0),
        RegError::CookieLength => dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4),
        RegError::CookieAddress => dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3),
    }
}

#[allow(clippy::too_many_arguments)]
pub fn create(
    ia_handle: DAT_IA_HANDLE,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    length: DAT_VLEN,
    pz_handle: DAT_PZ_HANDLE,
    privileges: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    lmr_out: *mut DAT_LMR_HANDLE,
    lmr_context: *mut DAT_LMR_CONTEXT,
    rmr_context: *mut DAT_RMR_CONTEXT,
    registered_length: *mut DAT_VLEN,
    registered_address: *mut DAT_VADDR,
) -> Result<DAT_RETURN, DAT_RETURN> {
    // Both looked up under one lock; the errors in the order of the arguments. The LMR holds
    // the PZ, and the IA through it.
    let (ia, pz) = table::check_and_lookup::<Ia, Pz>(ia_handle, DAT_INVALID_HANDLE_IA, pz_handle, DAT_INVALID_HANDLE_PZ);
    let ia = ia?;
    check_mem_type(mem_type)?;
    if pz_handle.is_null() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
    }
    let pz = pz?;
    if !core::ptr::eq(Arc::as_ptr(&pz.ia), ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
    }
    create_in(pz, mem_type, region, length, privileges, va_type, lmr_out, lmr_context, rmr_context, registered_length, registered_address)
}

fn check_mem_type(mem_type: DAT_MEM_TYPE) -> Result<(), DAT_RETURN> {
    if !matches!(mem_type, DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    Ok(())
}

/// [`create`] with the PZ resolved (pinned by the API layer, and checked to be of the IA the
/// consumer named): the checks of the other arguments in their order, then the registration.
/// Inlined into its callers: the hit path then passes its eleven arguments to no call.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn create_in(
    pz: Arc<Pz>,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    length: DAT_VLEN,
    privileges: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    lmr_out: *mut DAT_LMR_HANDLE,
    lmr_context: *mut DAT_LMR_CONTEXT,
    rmr_context: *mut DAT_RMR_CONTEXT,
    registered_length: *mut DAT_VLEN,
    registered_address: *mut DAT_VADDR,
) -> Result<DAT_RETURN, DAT_RETURN> {
    check_mem_type(mem_type)?;
    let ia = &pz.ia;
    if privileges & !PRIV_VALID != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6));
    }
    if !matches!(va_type, DAT_VA_TYPE_VA | DAT_VA_TYPE_ZB) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7));
    }
    if lmr_out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8));
    }
    let access = Access::from_bits_retain(privileges) | Access::LOCAL_READ;
    let zb = va_type == DAT_VA_TYPE_ZB;
    let mut cookie: Option<Box<Cookie>> = None;
    let mut region = region;
    let (address, size) = match mem_type {
        // SAFETY: the union member read matches mem_type; pointers are only copied here.
        DAT_MEM_TYPE_VIRTUAL => (unsafe { region.for_va } as u64, length),
        DAT_MEM_TYPE_LMR => {
            // SAFETY: as above.
            let original = lmr(unsafe { region.for_lmr_handle })?;
            if !Arc::ptr_eq(original.ia(), ia) {
                return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR));
            }
            (original.address, original.length)
        }
        _ => {
            // SAFETY: as above.
            let shared = unsafe { region.for_shared_memory };
            if shared.shared_memory_id.is_null() {
                return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
            }
            let mut bytes = [0u8; COOKIE_SIZE];
            // SAFETY: DAT_LMR_COOKIE points to the consumer's 40-byte identifier.
            unsafe { core::ptr::copy_nonoverlapping(shared.shared_memory_id as *const u8, bytes.as_mut_ptr(), COOKIE_SIZE) };
            let boxed = Box::new(bytes);
            region.for_shared_memory =
                DAT_SHARED_MEMORY { virtual_address: shared.virtual_address, shared_memory_id: &*boxed as *const Cookie as DAT_LMR_COOKIE };
            cookie = Some(boxed);
            (shared.virtual_address as u64, length)
        }
    };
    if size == 0 {
        return Err(dat_error(DAT_LENGTH_ERROR, 0));
    }
    pz.acquire()?;
    let reg = match &cookie {
        Some(c) => mr::register_shared(&ia.dev, c, pz.pd, address, size, access, zb),
        None => mr::register_range(&ia.dev, pz.pd, address, size, access, zb),
    };
    let reg = match reg {
        Ok(r) => r,
        Err(e) => {
            pz.release();
            dbg_log!(DbgType::PROVIDER_API, "lmr_create [{address:#x}, +{size:#x}) privileges {privileges:#x}: {e:?}");
            return Err(reg_error(e));
        }
    };
    dbg_log!(
        DbgType::GENERIC,
        "lmr_create [{address:#x}, +{size:#x}): {} (registrations made {}, reused {})",
        if reg.reused { "registration reused" } else { "new registration" },
        mr::counters().0,
        mr::counters().1
    );
    let (lkey, rkey) = (reg.mr.lkey, reg.mr.rkey);
    pz.key_made(lkey);
    let provider = ia.provider();
    let handle = table::publish(
        provider,
        SPARE.arc_with(|| Lmr {
            pz,
            mem_type,
            region,
            length: size,
            privileges,
            va_type,
            reg,
            address,
            _cookie: cookie,
            bound: AtomicU32::new(0),
            context: Mutex::new(0),
        }),
    );
    // SAFETY: lmr_out checked non-NULL; the others are written only if non-NULL.
    unsafe {
        put(lmr_out, handle as DAT_LMR_HANDLE);
        crate::ffi::write_opt(lmr_context, lkey);
        crate::ffi::write_opt(rmr_context, rkey);
        crate::ffi::write_opt(registered_length, size);
        crate::ffi::write_opt(registered_address, address);
    }
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_LMR_HANDLE, mask: DAT_LMR_PARAM_MASK, param: *mut DAT_LMR_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let l = lmr(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_LMR_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: `param` is the consumer's non-NULL DAT_LMR_PARAM; only the fields the mask asks
    // for are written.
    unsafe {
        let set = |bit: DAT_LMR_PARAM_MASK| mask & bit != 0;
        if set(DAT_LMR_FIELD_IA_HANDLE) {
            addr_of_mut!((*p).ia_handle).write(l.ia().consumer_handle());
        }
        if set(DAT_LMR_FIELD_MEM_TYPE) {
            addr_of_mut!((*p).mem_type).write(l.mem_type);
        }
        if set(DAT_LMR_FIELD_REGION_DESC) {
            addr_of_mut!((*p).region_desc).write(l.region);
        }
        if set(DAT_LMR_FIELD_LENGTH) {
            addr_of_mut!((*p).length).write(l.length);
        }
        if set(DAT_LMR_FIELD_PZ_HANDLE) {
            addr_of_mut!((*p).pz_handle).write(l.pz.handle as DAT_PZ_HANDLE);
        }
        if set(DAT_LMR_FIELD_MEM_PRIV) {
            addr_of_mut!((*p).mem_priv).write(l.privileges);
        }
        if set(DAT_LMR_FIELD_VA_TYPE) {
            addr_of_mut!((*p).va_type).write(l.va_type);
        }
        if set(DAT_LMR_FIELD_LMR_CONTEXT) {
            addr_of_mut!((*p).lmr_context).write(l.lmr_context());
        }
        if set(DAT_LMR_FIELD_RMR_CONTEXT) {
            addr_of_mut!((*p).rmr_context).write(l.rmr_context());
        }
        if set(DAT_LMR_FIELD_REGISTERED_SIZE) {
            addr_of_mut!((*p).registered_size).write(l.length);
        }
        if set(DAT_LMR_FIELD_REGISTERED_ADDRESS) {
            addr_of_mut!((*p).registered_address).write(l.address);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn free(handle: DAT_LMR_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    // Looked up, marked and taken out of the table under one lock (held for writing). A
    // binding is counted only under that lock too ([`lmr_bound`]), so no bind runs between the
    // load and the store: `bound` can only go down meanwhile (an unbind), never from 0, and a
    // load and a store do what a compare-exchange did.
    let l = table::take(handle, DAT_INVALID_HANDLE_LMR, |l: &Lmr| match l.bound.load(Ordering::Acquire) {
        0 => {
            l.bound.store(FREED, Ordering::Release);
            Ok(())
        }
        // Another thread is freeing it: to this caller the handle is already gone.
        FREED => Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR)),
        _ => Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE)),
    })?;
    destroy(&l);
    SPARE.recycle(l);
    Ok(DAT_SUCCESS)
}

/// Revokes the LMR's keys at once and releases its PZ (the object has left the table).
#[inline(always)]
pub fn destroy(l: &Lmr) {
    // First: a request posted from now on is refused, and one posted before is seen by the
    // cache's `mr_in_use` (see QpEvents::key_live).
    l.pz.key_revoked(l.lmr_context());
    mr::release(&l.ia().dev, &l.reg);
    l.pz.release();
}

/// `dat_lmr_sync_rdma_read/write`: every segment must lie inside a live LMR of the IA. The
/// soft device is cache coherent, so nothing else is needed. The LMRs are looked through, not
/// indexed: with `lmr_sync_req` false, portable programs do not make these calls, and an
/// index would cost every `dat_lmr_create` and `dat_lmr_free` an insert and a removal.
pub fn sync(ia_handle: DAT_IA_HANDLE, segments: *const DAT_LMR_TRIPLET, count: DAT_VLEN) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    if count == 0 {
        return Ok(DAT_SUCCESS);
    }
    if segments.is_null() || count > i32::MAX as u64 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    // SAFETY: the consumer passes `count` triplets.
    let segs = unsafe { core::slice::from_raw_parts(segments, count as usize) };
    for s in segs {
        let ok = table::any_of(|l: &Lmr| {
            l.lmr_context() == s.lmr_context && l.covers(s.virtual_address, u64::from(s.segment_length)) && l.ia().handle == ia.handle
        });
        if !ok {
            return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
        }
    }
    Ok(DAT_SUCCESS)
}
