//! PZ semantics: a protection domain of the device, in use while any EP, LMR or RMR uses it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::ia::{self, Ia};
use super::put;
use super::table::{self, Object};
use crate::abi::*;
use crate::device::{AddressHandle, Pd};
use crate::util::idmap::IdMap;
use crate::util::keyset::KeySet;

pub struct Pz {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub pd: Pd,
    /// EPs, LMRs and RMRs using this PZ.
    pub users: AtomicU32,
    /// The UD address handles its EPs resolved, by id: as on verbs, where an address handle
    /// belongs to the protection domain, any UD EP of the PZ sends with one (Debian's
    /// dtestsrq -u sends on each EP through the one EP 0 resolved). Each stays owned, and is
    /// freed, by the EP whose event handed it out (`ep::UdState`).
    pub ahs: Mutex<IdMap<u64, Arc<dyn AddressHandle>>>,
    /// The lmr_contexts of its live LMRs: a request may use only these
    /// (`QpEvents::key_live`). An LMR's goes in before its handle is handed out, and out
    /// before its registration is released.
    keys: KeySet,
    pub context: Mutex<u64>,
}

/// `users` once the PZ is being freed: no new user may take it.
const FREED: u32 = u32::MAX;

impl Pz {
    /// Takes a use of the PZ; fails (as an invalid handle) once it is being freed.
    pub fn acquire(&self) -> Result<(), DAT_RETURN> {
        self.users
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| if n == FREED { None } else { Some(n + 1) })
            .map(|_| ())
            .map_err(|_| dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ))
    }
    pub fn release(&self) {
        self.users.fetch_sub(1, Ordering::SeqCst);
    }
    /// An LMR of the PZ with this lmr_context is live.
    #[inline]
    pub fn key_made(&self, lmr_context: DAT_LMR_CONTEXT) {
        self.keys.insert(lmr_context);
    }
    /// That LMR is being freed: no request may use its lmr_context from now on.
    #[inline]
    pub fn key_revoked(&self, lmr_context: DAT_LMR_CONTEXT) {
        self.keys.remove(lmr_context);
    }
    /// Whether `lmr_context` names a live LMR of the PZ.
    pub fn key_live(&self, lmr_context: DAT_LMR_CONTEXT) -> bool {
        self.keys.contains(lmr_context)
    }
}

impl Object for Pz {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_PZ
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        destroy(self)
    }
}

pub fn pz(handle: DAT_PZ_HANDLE) -> Result<Arc<Pz>, DAT_RETURN> {
    table::lookup::<Pz>(handle, DAT_INVALID_HANDLE_PZ)
}

impl table::Pinnable for Pz {
    const HANDLE_TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_PZ;
}

/// The PZ `handle` names, for the length of a call (see [`table::pin`]): `dat_lmr_create`
/// resolves its PZ this way.
pub fn pinned(local: &crate::util::pin::Local, handle: DAT_PZ_HANDLE) -> Option<table::Pinned<Pz>> {
    table::pin(local, handle as usize)
}

pub fn create(ia_handle: DAT_IA_HANDLE, out: *mut DAT_PZ_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let pd = ia.dev.alloc_pd().map_err(|_| dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN))?;
    let handle = table::reserve(ia.provider());
    table::insert(
        handle,
        Arc::new(Pz { handle, ia, pd, users: AtomicU32::new(0), ahs: Mutex::default(), keys: KeySet::default(), context: Mutex::new(0) }),
    );
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_PZ_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_PZ_HANDLE, mask: DAT_PZ_PARAM_MASK, param: *mut DAT_PZ_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let pz = pz(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_PZ_FIELD_ALL), param)?;
    // SAFETY: checked non-NULL.
    unsafe { put(param, DAT_PZ_PARAM { ia_handle: pz.ia.consumer_handle() }) };
    Ok(DAT_SUCCESS)
}

pub fn free(handle: DAT_PZ_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let pz = pz(handle)?;
    match pz.users.compare_exchange(0, FREED, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {}
        // Another thread is freeing it: to this caller the handle is already gone.
        Err(FREED) => return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ)),
        Err(_) => return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE)),
    }
    destroy(&pz);
    table::remove(pz.handle);
    Ok(DAT_SUCCESS)
}

/// Releases the device PD (the object leaves the table separately), after the registrations
/// the cache kept in it: a device may refuse to free a PD that still has MRs.
pub fn destroy(pz: &Pz) {
    crate::builtin::mr::flush(&pz.ia.dev, Some(pz.pd));
    pz.ia.dev.dealloc_pd(pz.pd);
}
