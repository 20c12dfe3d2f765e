//! Service points. A PSP or RSP owns its connection qualifier: the TCP port it listens on
//! (the qualifier's low 16 bits), on the IA's address (so the qualifier is in use across processes too, as on a real host).
//! Connection requests arriving there are handled by the data path.

use core::ptr::addr_of_mut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::ep::{self, Ep};
use super::evd::Evd;
use super::ia::{self, Ia};
use super::put;
use super::table::{self, Obj};
use crate::abi::*;
use crate::device::{DevError, ListenEvents, Listener, PendingConnection};
use crate::lookup;

pub struct Psp {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: Arc<Evd>,
    pub flags: DAT_PSP_FLAGS,
    /// Listening for as long as the service point lives.
    _listener: Box<dyn Listener>,
    pub context: Mutex<u64>,
}

pub struct Rsp {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: Arc<Evd>,
    pub ep: Arc<Ep>,
    /// Listening for as long as the service point lives.
    _listener: Box<dyn Listener>,
    pub context: Mutex<u64>,
}

fn cr_evd(ia: &Arc<Ia>, handle: DAT_EVD_HANDLE) -> Result<Arc<Evd>, DAT_RETURN> {
    let e = lookup!(handle, Evd, DAT_INVALID_HANDLE_EVD_CR)?;
    if !Arc::ptr_eq(&e.ia, ia) || e.flags & DAT_EVD_CR_FLAG == 0 {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
    }
    Ok(e)
}

/// The TCP port of a connection qualifier: its low 16 bits, so a qualifier that is a port
/// number is that port (0 asks for any free port). Qualifiers that differ only above bit 15
/// share a port.
pub fn port_of(conn_qual: DAT_CONN_QUAL) -> u16 {
    (conn_qual & 0xffff) as u16
}

/// Passes connection requests arriving at a service point on to the built-in layer.
struct SpEvents {
    sp: usize,
}

impl ListenEvents for SpEvents {
    fn request(&self, conn: Arc<dyn PendingConnection>) {
        match table::get(self.sp as DAT_HANDLE) {
            Some(Obj::Psp(psp)) => {
                let ep = if psp.flags == DAT_PSP_PROVIDER_FLAG {
                    ep::create_object(&psp.ia, None, None, None, None, ep::default_attr(&psp.ia)).ok()
                } else {
                    None
                };
                let provider_ep = ep.is_some();
                super::cr::arrive(&psp.ia, psp.handle, psp.conn_qual, &psp.evd, ep, provider_ep, conn);
            }
            Some(Obj::Rsp(rsp)) => super::cr::arrive(&rsp.ia, rsp.handle, rsp.conn_qual, &rsp.evd, Some(rsp.ep.clone()), false, conn),
            _ => conn.reject(&[]),
        }
    }
}

/// Listens on a connection qualifier's port for the service point `sp` (0: any free port).
fn listen(ia: &Ia, conn_qual: DAT_CONN_QUAL, sp: usize) -> Result<Box<dyn Listener>, DAT_RETURN> {
    ia.dev.listen(port_of(conn_qual), Arc::new(SpEvents { sp })).map_err(|e| match e {
        DevError::InUse => dat_error(DAT_CONN_QUAL_IN_USE, 0),
        DevError::NotSupported => dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED),
        _ => dat_error(DAT_INSUFFICIENT_RESOURCES, 0),
    })
}

fn new_psp(ia: Arc<Ia>, conn_qual: DAT_CONN_QUAL, evd: Arc<Evd>, flags: DAT_PSP_FLAGS) -> Result<(usize, DAT_CONN_QUAL), DAT_RETURN> {
    let handle = table::reserve(ia.provider());
    let listener = match listen(&ia, conn_qual, handle) {
        Ok(l) => l,
        Err(e) => {
            table::unreserve(handle);
            return Err(e);
        }
    };
    let conn_qual = if conn_qual == 0 { DAT_CONN_QUAL::from(listener.port()) } else { conn_qual };
    evd.users.fetch_add(1, Ordering::SeqCst);
    table::insert(handle, Obj::Psp(Arc::new(Psp { handle, ia, conn_qual, evd, flags, _listener: listener, context: Mutex::new(0) })));
    Ok((handle, conn_qual))
}

pub fn psp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let evd = cr_evd(&ia, evd)?;
    if !matches!(flags, DAT_PSP_CONSUMER_FLAG | DAT_PSP_PROVIDER_FLAG) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    if port_of(conn_qual) == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let (handle, _) = new_psp(ia, conn_qual, evd, flags)?;
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_PSP_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn psp_create_any(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: *mut DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    if conn_qual.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let evd = cr_evd(&ia, evd)?;
    if !matches!(flags, DAT_PSP_CONSUMER_FLAG | DAT_PSP_PROVIDER_FLAG) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    let (handle, port) = new_psp(ia, 0, evd, flags)?;
    // SAFETY: both checked non-NULL.
    unsafe {
        put(conn_qual, port);
        put(out, handle as DAT_PSP_HANDLE);
    }
    Ok(DAT_SUCCESS)
}

pub fn psp_query(handle: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let psp = lookup!(handle, Psp, DAT_INVALID_HANDLE_PSP)?;
    super::query_args(u64::from(mask), u64::from(DAT_PSP_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_PSP_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(psp.ia.consumer_handle());
        }
        if mask & DAT_PSP_FIELD_CONN_QUAL != 0 {
            addr_of_mut!((*p).conn_qual).write(psp.conn_qual);
        }
        if mask & DAT_PSP_FIELD_EVD_HANDLE != 0 {
            addr_of_mut!((*p).evd_handle).write(psp.evd.handle as DAT_EVD_HANDLE);
        }
        if mask & DAT_PSP_FIELD_PSP_FLAGS != 0 {
            addr_of_mut!((*p).psp_flags).write(psp.flags);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn psp_free(handle: DAT_PSP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let psp = lookup!(handle, Psp, DAT_INVALID_HANDLE_PSP)?;
    if table::remove(psp.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
    }
    psp.evd.users.fetch_sub(1, Ordering::SeqCst);
    Ok(DAT_SUCCESS)
}

pub fn rsp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    ep_handle: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    out: *mut DAT_RSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let ep = ep::ep(ep_handle)?;
    if !Arc::ptr_eq(&ep.ia, &ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    }
    let evd = cr_evd(&ia, evd)?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    if port_of(conn_qual) == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    {
        let mut i = ep.lock();
        let reserved = match i.state {
            DAT_EP_STATE_UNCONNECTED => DAT_EP_STATE_RESERVED,
            DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => DAT_EP_STATE_UNCONFIGURED_RESERVED,
            s => return Err(dat_error(DAT_INVALID_STATE, ep::ep_state_subtype(s))),
        };
        let handle = table::reserve(ia.provider());
        let listener = match listen(&ia, conn_qual, handle) {
            Ok(l) => l,
            Err(e) => {
                table::unreserve(handle);
                return Err(e);
            }
        };
        i.state = reserved;
        evd.users.fetch_add(1, Ordering::SeqCst);
        table::insert(
            handle,
            Obj::Rsp(Arc::new(Rsp { handle, ia, conn_qual, evd, ep: ep.clone(), _listener: listener, context: Mutex::new(0) })),
        );
        // SAFETY: checked non-NULL.
        unsafe { put(out, handle as DAT_RSP_HANDLE) };
    }
    Ok(DAT_SUCCESS)
}

pub fn rsp_query(handle: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let rsp = lookup!(handle, Rsp, DAT_INVALID_HANDLE_RSP)?;
    super::query_args(u64::from(mask), u64::from(DAT_RSP_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_RSP_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(rsp.ia.consumer_handle());
        }
        if mask & DAT_RSP_FIELD_CONN_QUAL != 0 {
            addr_of_mut!((*p).conn_qual).write(rsp.conn_qual);
        }
        if mask & DAT_RSP_FIELD_EVD_HANDLE != 0 {
            addr_of_mut!((*p).evd_handle).write(rsp.evd.handle as DAT_EVD_HANDLE);
        }
        if mask & DAT_RSP_FIELD_EP_HANDLE != 0 {
            addr_of_mut!((*p).ep_handle).write(rsp.ep.handle as DAT_EP_HANDLE);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn rsp_free(handle: DAT_RSP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let rsp = lookup!(handle, Rsp, DAT_INVALID_HANDLE_RSP)?;
    if table::remove(rsp.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
    }
    destroy_rsp(&rsp);
    Ok(DAT_SUCCESS)
}

/// Releases what an RSP holds: its EVD use, and its EP's reservation.
pub fn destroy_rsp(rsp: &Rsp) {
    rsp.evd.users.fetch_sub(1, Ordering::SeqCst);
    let mut i = rsp.ep.lock();
    i.state = match i.state {
        DAT_EP_STATE_RESERVED => DAT_EP_STATE_UNCONNECTED,
        DAT_EP_STATE_UNCONFIGURED_RESERVED => DAT_EP_STATE_UNCONFIGURED_UNCONNECTED,
        s => s,
    };
}
