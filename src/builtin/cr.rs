//! CR semantics: a connection request waiting at a service point, answered by accept (on a
//! consumer EP, the RSP's EP or the provider-created one), reject or handoff.

use core::ffi::c_void;
use core::ptr::addr_of_mut;
use std::sync::{Arc, Mutex};

use super::ep::{self, Ep, MAX_PRIVATE_DATA};
use super::evd::Evd;
use super::ia::Ia;
use super::table::{self, Obj};
use crate::abi::*;
use crate::device::PendingConnection;
use crate::lookup;

pub struct Cr {
    pub handle: usize,
    pub ia: Arc<Ia>,
    /// The PSP or RSP the request arrived at.
    pub sp: usize,
    pub pending: Arc<dyn PendingConnection>,
    pub remote: Box<libc::sockaddr_storage>,
    pub remote_port: u16,
    pub private_data: Box<[u8]>,
    /// The EP the request is for: the RSP's, or one the provider created (PSP provider flag).
    pub ep: Option<Arc<Ep>>,
    /// Whether `ep` was created by the provider (and dies with a rejected request).
    pub provider_ep: bool,
    pub context: Mutex<u64>,
}

// SAFETY: plain data plus thread-safe objects.
unsafe impl Send for Cr {}
// SAFETY: as above.
unsafe impl Sync for Cr {}

pub fn cr(handle: DAT_CR_HANDLE) -> Result<Arc<Cr>, DAT_RETURN> {
    lookup!(handle, Cr, DAT_INVALID_HANDLE_CR)
}

/// A connection request arrived at service point `sp` (a PSP or RSP handle): make it a CR and
/// tell the consumer on the service point's EVD.
pub fn arrive(
    ia: &Arc<Ia>,
    sp: usize,
    conn_qual: DAT_CONN_QUAL,
    evd: &Arc<Evd>,
    ep: Option<Arc<Ep>>,
    provider_ep: bool,
    pending: Arc<dyn PendingConnection>,
) {
    let remote = pending.remote();
    let private_data: Box<[u8]> = pending.private_data().into();
    let handle = table::reserve(ia.provider());
    let cr = Arc::new(Cr {
        handle,
        ia: ia.clone(),
        sp,
        pending,
        remote: Box::new(crate::util::sockaddr::to_c(remote)),
        remote_port: remote.port(),
        private_data,
        ep,
        provider_ep,
        context: Mutex::new(0),
    });
    table::insert(handle, Obj::Cr(cr));
    let mut ev = DAT_EVENT { event_number: DAT_CONNECTION_REQUEST_EVENT, ..Default::default() };
    ev.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
        sp_handle: DAT_SP_HANDLE { psp_handle: sp as DAT_PSP_HANDLE },
        local_ia_address_ptr: &*ia.address as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR,
        conn_qual,
        cr_handle: handle as DAT_CR_HANDLE,
        truncate_flag: DAT_FALSE,
    };
    if !evd.post(ev) {
        // No room to tell anyone: refuse the request rather than leave the peer waiting.
        if let Some(Obj::Cr(cr)) = table::remove(handle) {
            cr.pending.reject(&[]);
        }
    }
}

pub fn query(handle: DAT_CR_HANDLE, mask: DAT_CR_PARAM_MASK, param: *mut DAT_CR_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_CR_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_CR_FIELD_REMOTE_IA_ADDRESS_PTR != 0 {
            addr_of_mut!((*p).remote_ia_address_ptr).write(&*c.remote as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR);
        }
        if mask & DAT_CR_FIELD_REMOTE_PORT_QUAL != 0 {
            addr_of_mut!((*p).remote_port_qual).write(DAT_PORT_QUAL::from(c.remote_port));
        }
        if mask & DAT_CR_FIELD_PRIVATE_DATA_SIZE != 0 {
            addr_of_mut!((*p).private_data_size).write(c.private_data.len() as DAT_COUNT);
        }
        if mask & DAT_CR_FIELD_PRIVATE_DATA != 0 {
            addr_of_mut!((*p).private_data).write(c.private_data.as_ptr() as *mut c_void);
        }
        if mask & DAT_CR_FIELD_LOCAL_EP_HANDLE != 0 {
            addr_of_mut!((*p).local_ep_handle).write(c.ep.as_ref().map_or(core::ptr::null_mut(), |e| e.handle as DAT_EP_HANDLE));
        }
    }
    Ok(DAT_SUCCESS)
}

/// The most private data a connection message of `ia`'s device carries.
pub fn max_private_data(ia: &super::ia::Ia) -> DAT_COUNT {
    (ia.dev.limits().max_private_data as DAT_COUNT).min(MAX_PRIVATE_DATA)
}

/// Checks private data arguments (`size` at `arg`, the data at `arg + 1`) against `max`.
pub fn private_data<'a>(size: DAT_COUNT, data: *const c_void, arg: DAT_RETURN, max: DAT_COUNT) -> Result<&'a [u8], DAT_RETURN> {
    if !(0..=max).contains(&size) {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg));
    }
    if size == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, arg + 1));
    }
    // SAFETY: the consumer passes `size` readable bytes.
    Ok(unsafe { core::slice::from_raw_parts(data as *const u8, size as usize) })
}

pub fn accept(handle: DAT_CR_HANDLE, ep_handle: DAT_EP_HANDLE, size: DAT_COUNT, data: *const c_void) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    let ep = if ep_handle.is_null() { c.ep.clone().ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))? } else { ep::ep(ep_handle)? };
    if !Arc::ptr_eq(&ep.ia, &c.ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    }
    let pdata = private_data(size, data, DAT_INVALID_ARG3, max_private_data(&c.ia))?;
    super::cm::accept(&ep, &c.pending, pdata)?;
    table::remove(c.handle);
    Ok(DAT_SUCCESS)
}

pub fn reject(handle: DAT_CR_HANDLE, size: DAT_COUNT, data: *const c_void) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    let pdata = private_data(size, data, DAT_INVALID_ARG2, max_private_data(&c.ia))?;
    if table::remove(c.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
    }
    c.pending.reject(pdata);
    if c.provider_ep {
        if let Some(e) = &c.ep {
            if table::remove(e.handle).is_some() {
                ep::destroy(e);
            }
        }
    }
    Ok(DAT_SUCCESS)
}

/// Hands the request to another PSP of the IA, listening on `conn_qual`.
pub fn handoff(handle: DAT_CR_HANDLE, conn_qual: DAT_CONN_QUAL) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    let target = table::owned_by(&c.ia).into_iter().find_map(|(h, o)| match o {
        Obj::Psp(p) if h != c.sp && p.conn_qual == conn_qual => Some(p),
        _ => None,
    });
    let psp = target.ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))?;
    if table::remove(c.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
    }
    arrive(&c.ia, psp.handle, conn_qual, &psp.evd, None, false, c.pending.clone());
    Ok(DAT_SUCCESS)
}
