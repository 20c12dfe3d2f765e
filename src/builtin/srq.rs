//! SRQ semantics: receives shared by the EPs created on the SRQ, with a low watermark that
//! raises an asynchronous event when the posted receives fall below it.

use core::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::evd;
use super::ia::{self, Ia};
use super::iov::{iov_sges, PostedRecv};
use super::put;
use super::pz::{self, Pz};
use super::table::{self, Object};
use crate::abi::*;
use crate::device::{sges_len, DevError, Srq as DevSrq, SrqEvents};
use crate::util::idmap::IdMap;
use crate::util::sync::MutexExt;

pub struct Srq {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub pz: Arc<Pz>,
    pub dev: Arc<dyn DevSrq>,
    /// Posted receives by work request id (ids are unique across all SRQs).
    pub recvs: Mutex<IdMap<u64, PostedRecv>>,
    pub max_recv_dtos: AtomicU32,
    pub max_recv_iov: DAT_COUNT,
    pub low_watermark: AtomicU32,
    /// EPs using this SRQ.
    pub users: AtomicU32,
    pub context: Mutex<u64>,
}

/// SRQ receive ids live in their own range, apart from EPs' own receive ids.
static NEXT_WR: AtomicU64 = AtomicU64::new(1 << 62);

impl Object for Srq {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_SRQ
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
}

pub fn srq(handle: DAT_SRQ_HANDLE) -> Result<Arc<Srq>, DAT_RETURN> {
    table::lookup::<Srq>(handle, DAT_INVALID_HANDLE_SRQ)
}

/// The low watermark was crossed: tell the consumer on the IA's async EVD. And whose keys
/// the SRQ's receives may use: its PZ's.
struct Watermark {
    srq: Mutex<Weak<Srq>>,
    pz: Arc<Pz>,
}

impl SrqEvents for Watermark {
    fn limit_reached(&self) {
        let srq = self.srq.locked().upgrade();
        if let Some(s) = srq {
            evd::post_async(&s.ia, evd::WATERMARK_EVENT, s.handle, DAT_SRQ_LOW_WATERMARK_EVENT as DAT_COUNT);
        }
    }
    fn key_live(&self, lkey: u32) -> bool {
        self.pz.key_live(lkey)
    }
}

pub fn create(
    ia_handle: DAT_IA_HANDLE,
    pz_handle: DAT_PZ_HANDLE,
    attr: *mut DAT_SRQ_ATTR,
    out: *mut DAT_SRQ_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let pz = pz::pz(pz_handle)?;
    if !Arc::ptr_eq(&pz.ia, &ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
    }
    if attr.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    // SAFETY: the consumer's attributes.
    let a = unsafe { attr.read() };
    let l = ia.dev.limits();
    if a.max_recv_dtos <= 0
        || a.max_recv_dtos as u32 > l.max_srq_wr
        || a.max_recv_iov <= 0
        || a.max_recv_iov as u32 > l.max_sge
        || a.low_watermark < 0
        || a.low_watermark > a.max_recv_dtos
    {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    let watermark = Arc::new(Watermark { srq: Mutex::new(Weak::new()), pz: pz.clone() });
    let dev = ia
        .dev
        .create_srq(pz.pd, a.max_recv_dtos as u32, a.max_recv_iov as u32, watermark.clone())
        .map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ))?;
    let handle = table::reserve(ia.provider());
    let s = Arc::new(Srq {
        handle,
        ia: ia.clone(),
        pz,
        dev,
        recvs: Mutex::new(IdMap::default()),
        max_recv_dtos: AtomicU32::new(a.max_recv_dtos as u32),
        max_recv_iov: a.max_recv_iov,
        low_watermark: AtomicU32::new(a.low_watermark as u32),
        users: AtomicU32::new(0),
        context: Mutex::new(0),
    });
    *watermark.srq.locked() = Arc::downgrade(&s);
    s.dev.set_limit(a.low_watermark as u32);
    table::insert(handle, s);
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_SRQ_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn post_recv(
    handle: DAT_SRQ_HANDLE,
    count: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq(handle)?;
    let list = iov_sges(count, iov, s.max_recv_iov, DAT_INVALID_ARG2)?;
    let wr_id = NEXT_WR.fetch_add(1, Ordering::Relaxed);
    let len = sges_len(&list);
    s.recvs.locked().insert(wr_id, PostedRecv::posted(cookie, len));
    if let Err(e) = s.dev.post_recv(wr_id, list) {
        s.recvs.locked().remove(&wr_id);
        // No EP to complete it on yet: a segment that names no live LMR of the SRQ's PZ is
        // refused at once.
        return Err(match e {
            DevError::Fault => dat_error(DAT_PROTECTION_VIOLATION, 0),
            _ => dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ),
        });
    }
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_SRQ_HANDLE, mask: DAT_SRQ_PARAM_MASK, param: *mut DAT_SRQ_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_SRQ_FIELD_ALL), param)?;
    let available = s.dev.available() as DAT_COUNT;
    let outstanding = s.recvs.locked().len() as DAT_COUNT;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_SRQ_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(s.ia.consumer_handle());
        }
        if mask & DAT_SRQ_FIELD_SRQ_STATE != 0 {
            addr_of_mut!((*p).srq_state).write(DAT_SRQ_STATE_OPERATIONAL);
        }
        if mask & DAT_SRQ_FIELD_PZ_HANDLE != 0 {
            addr_of_mut!((*p).pz_handle).write(s.pz.handle as DAT_PZ_HANDLE);
        }
        if mask & DAT_SRQ_FIELD_MAX_RECV_DTO != 0 {
            addr_of_mut!((*p).max_recv_dtos).write(s.max_recv_dtos.load(Ordering::SeqCst) as DAT_COUNT);
        }
        if mask & DAT_SRQ_FIELD_MAX_RECV_IOV != 0 {
            addr_of_mut!((*p).max_recv_iov).write(s.max_recv_iov);
        }
        if mask & DAT_SRQ_FIELD_LOW_WATERMARK != 0 {
            addr_of_mut!((*p).low_watermark).write(s.low_watermark.load(Ordering::SeqCst) as DAT_COUNT);
        }
        if mask & DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT != 0 {
            addr_of_mut!((*p).available_dto_count).write(available);
        }
        if mask & DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT != 0 {
            addr_of_mut!((*p).outstanding_dto_count).write(outstanding);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn resize(handle: DAT_SRQ_HANDLE, max: DAT_COUNT) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq(handle)?;
    if max <= 0 || max as u32 > s.ia.dev.limits().max_srq_wr {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    s.dev.resize(max as u32).map_err(|_| dat_error(DAT_INVALID_STATE, 0))?;
    s.max_recv_dtos.store(max as u32, Ordering::SeqCst);
    Ok(DAT_SUCCESS)
}

pub fn set_lw(handle: DAT_SRQ_HANDLE, lw: DAT_COUNT) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq(handle)?;
    if lw < 0 || lw as u32 > s.max_recv_dtos.load(Ordering::SeqCst) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    s.low_watermark.store(lw as u32, Ordering::SeqCst);
    s.dev.set_limit(lw as u32);
    Ok(DAT_SUCCESS)
}

pub fn free(handle: DAT_SRQ_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let s = srq(handle)?;
    if s.users.load(Ordering::SeqCst) != 0 {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE));
    }
    table::remove(s.handle);
    Ok(DAT_SUCCESS)
}
