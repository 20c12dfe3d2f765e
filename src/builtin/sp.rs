//! Service points. A PSP or RSP owns its connection qualifier: the TCP port it listens on
//! (the qualifier's low 16 bits), on the IA's address (so the qualifier is in use across processes too, as on a real host).
//! Connection requests arriving there become CRs ([`super::cr`]); handing one to another PSP
//! (`dat_cr_handoff`) is here too.

use core::ptr::addr_of_mut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::cm::port_of;
use super::cr::{self, ForEp};
use super::ep::{self, Ep};
use super::evd::Evd;
use super::ia::{self, Ia};
use super::put;
use super::table::{self, Object};
use crate::abi::*;
use crate::device::{DevError, ListenEvents, Listener, PendingConnection};

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

impl Psp {
    /// The EP a request arriving here is for.
    fn for_ep(&self) -> ForEp {
        if self.flags == DAT_PSP_PROVIDER_FLAG {
            ForEp::Provider
        } else {
            ForEp::Consumer
        }
    }
}

impl Object for Psp {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_PSP
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        self.evd.users.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Object for Rsp {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_RSP
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        destroy_rsp(self)
    }
}

fn cr_evd(ia: &Arc<Ia>, handle: DAT_EVD_HANDLE) -> Result<Arc<Evd>, DAT_RETURN> {
    let e = table::lookup::<Evd>(handle, DAT_INVALID_HANDLE_EVD_CR)?;
    if !Arc::ptr_eq(&e.ia, ia) || e.flags & DAT_EVD_CR_FLAG == 0 {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
    }
    Ok(e)
}

/// Passes connection requests arriving at a service point on to the built-in layer.
struct SpEvents {
    sp: usize,
}

impl ListenEvents for SpEvents {
    fn request(&self, conn: Arc<dyn PendingConnection>) {
        let sp = table::get(self.sp as DAT_HANDLE);
        if let Some(psp) = sp.clone().and_then(table::downcast::<Psp>) {
            cr::arrive(&psp.ia, psp.handle, psp.conn_qual, &psp.evd, psp.for_ep(), conn);
        } else if let Some(rsp) = sp.and_then(table::downcast::<Rsp>) {
            cr::arrive(&rsp.ia, rsp.handle, rsp.conn_qual, &rsp.evd, ForEp::Rsp(rsp.ep.clone()), conn);
        } else {
            conn.reject(&[]);
        }
    }
}

/// Listens on a connection qualifier's port for the service point `sp` (0: any free port).
fn listen(ia: &Ia, conn_qual: DAT_CONN_QUAL, sp: usize) -> Result<Box<dyn Listener>, DAT_RETURN> {
    ia.dev.listen(port_of(conn_qual), conn_qual, Arc::new(SpEvents { sp })).map_err(|e| match e {
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
    table::insert(handle, Arc::new(Psp { handle, ia, conn_qual, evd, flags, _listener: listener, context: Mutex::new(0) }));
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
    let (handle, port) = new_psp(ia.clone(), 0, evd, flags)?;
    ia.counts.bump(DCNT_IA_PSP_CREATE_ANY);
    // SAFETY: both checked non-NULL.
    unsafe {
        put(conn_qual, port);
        put(out, handle as DAT_PSP_HANDLE);
    }
    Ok(DAT_SUCCESS)
}

pub fn psp_query(handle: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let psp = table::lookup::<Psp>(handle, DAT_INVALID_HANDLE_PSP)?;
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
    let psp = table::lookup::<Psp>(handle, DAT_INVALID_HANDLE_PSP)?;
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
        let reserved = i.reserved_state()?;
        let handle = table::reserve(ia.provider());
        let listener = match listen(&ia, conn_qual, handle) {
            Ok(l) => l,
            Err(e) => {
                table::unreserve(handle);
                return Err(e);
            }
        };
        i.reserve(reserved);
        evd.users.fetch_add(1, Ordering::SeqCst);
        table::insert(handle, Arc::new(Rsp { handle, ia, conn_qual, evd, ep: ep.clone(), _listener: listener, context: Mutex::new(0) }));
        // SAFETY: checked non-NULL.
        unsafe { put(out, handle as DAT_RSP_HANDLE) };
    }
    Ok(DAT_SUCCESS)
}

pub fn rsp_query(handle: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let rsp = table::lookup::<Rsp>(handle, DAT_INVALID_HANDLE_RSP)?;
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
    let rsp = table::lookup::<Rsp>(handle, DAT_INVALID_HANDLE_RSP)?;
    if table::remove(rsp.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
    }
    destroy_rsp(&rsp);
    Ok(DAT_SUCCESS)
}

/// Releases what an RSP holds: its EVD use, and its EP's reservation.
pub fn destroy_rsp(rsp: &Rsp) {
    rsp.evd.users.fetch_sub(1, Ordering::SeqCst);
    rsp.ep.lock().unreserve();
}

/// `dat_cr_handoff`: hands the request to another PSP of the IA, listening on `conn_qual`.
pub fn cr_handoff(handle: DAT_CR_HANDLE, conn_qual: DAT_CONN_QUAL) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr::cr(handle)?;
    let target = table::owned_by(c.ia.handle).into_iter().find_map(|(h, o)| match table::downcast::<Psp>(o) {
        Some(p) if h != c.sp && p.conn_qual == conn_qual => Some(p),
        _ => None,
    });
    let psp = target.ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))?;
    if table::remove(c.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
    }
    // The new CR has no EP, whatever the PSP's flags; an EP made for the old one stays the
    // consumer's (dat_cr_handoff(3)).
    cr::arrive(&c.ia, psp.handle, conn_qual, &psp.evd, ForEp::Consumer, c.pending.clone());
    Ok(DAT_SUCCESS)
}
