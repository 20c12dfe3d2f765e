//! CR semantics: a connection request waiting at a service point, answered by accept (on a
//! consumer EP, the RSP's EP or the provider-created one), reject or handoff (`sp.rs`: it
//! names another service point).

use core::ffi::c_void;
use core::ptr::addr_of_mut;
use std::sync::{Arc, Mutex};

use super::cm::private_data;
use super::ep::{self, Ep};
use super::evd::Evd;
use super::ia::{max_private_data, Ia};
use super::table::{self, Object};
use crate::abi::*;
use crate::device::PendingConnection;

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

impl Object for Cr {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_CR
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        self.pending.reject(&[])
    }
}

pub fn cr(handle: DAT_CR_HANDLE) -> Result<Arc<Cr>, DAT_RETURN> {
    table::lookup::<Cr>(handle, DAT_INVALID_HANDLE_CR)
}

/// The EP a connection request is for.
pub enum ForEp {
    /// None yet (a PSP without the provider flag): the consumer names one when it accepts.
    Consumer,
    /// The RSP's.
    Rsp(Arc<Ep>),
    /// One the provider makes (a PSP with `DAT_PSP_PROVIDER_FLAG`), once the request is known
    /// to be deliverable.
    Provider,
}

/// A connection request arrived at service point `sp` (a PSP or RSP handle): make it a CR and
/// tell the consumer on the service point's EVD.
///
/// A request the EVD has no room for is refused and leaves nothing behind: no CR, no EP, no
/// handle. A peer could otherwise grow the process without bound with requests the consumer
/// never learns of and so can never free. The room is checked before anything is made; when a
/// post still fails (the queue filled up in between), what was made is undone.
pub fn arrive(ia: &Arc<Ia>, sp: usize, conn_qual: DAT_CONN_QUAL, evd: &Arc<Evd>, for_ep: ForEp, pending: Arc<dyn PendingConnection>) {
    if !evd.admits() {
        pending.reject(&[]);
        return;
    }
    let (ep, provider_ep) = match for_ep {
        ForEp::Consumer => (None, false),
        ForEp::Rsp(ep) => (Some(ep), false),
        ForEp::Provider => {
            let mut attr = ep::default_attr(ia);
            if pending.datagram() {
                attr = ep::ud_attr(ia, attr);
            }
            let ep = ep::create_object(ia, None, None, None, None, attr).ok();
            let made = ep.is_some();
            (ep, made)
        }
    };
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
    let datagram = cr.pending.datagram();
    table::insert(handle, cr);
    let mut ev = DAT_EVENT { event_number: DAT_CONNECTION_REQUEST_EVENT, ..Default::default() };
    if datagram {
        // A UD EP asks: the IB extension's own request event, whose extension data says so.
        ev.event_number = DAT_IB_UD_CONNECTION_REQUEST_EVENT;
        let data = DAT_IB_EXTENSION_EVENT_DATA { r#type: DAT_IB_UD_CONNECT_REQUEST, status: DAT_OP_SUCCESS, ..Default::default() };
        // SAFETY: the extension data is 64 bytes, exactly the event's extension area (checked
        // by the layout assertions of both types).
        unsafe { core::ptr::write_unaligned(ev.event_extension_data.as_mut_ptr() as *mut DAT_IB_EXTENSION_EVENT_DATA, data) };
    }
    ev.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
        sp_handle: DAT_SP_HANDLE { psp_handle: sp as DAT_PSP_HANDLE },
        local_ia_address_ptr: &*ia.address as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR,
        conn_qual,
        cr_handle: handle as DAT_CR_HANDLE,
        truncate_flag: DAT_FALSE,
    };
    if !evd.post(ev) {
        // No room after all: refuse the request rather than leave the peer waiting, and undo
        // the CR and the EP made for it, which nobody was told of.
        if let Some(cr) = table::remove(handle).and_then(table::downcast::<Cr>) {
            cr.pending.reject(&[]);
            cr.drop_provider_ep();
        }
    }
}

impl Cr {
    /// The EP the provider made for this request goes with it (rejected, or never delivered).
    pub fn drop_provider_ep(&self) {
        if let (true, Some(e)) = (self.provider_ep, &self.ep) {
            if table::remove(e.handle).is_some() {
                ep::destroy(e);
            }
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

pub fn accept(handle: DAT_CR_HANDLE, ep_handle: DAT_EP_HANDLE, size: DAT_COUNT, data: *const c_void) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    let ep = if ep_handle.is_null() { c.ep.clone().ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))? } else { ep::ep(ep_handle)? };
    if !Arc::ptr_eq(&ep.ia, &c.ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    }
    let pdata = private_data(size, data, DAT_INVALID_ARG3, max_private_data(&c.ia))?;
    super::cm::accept(&ep, &c.pending, pdata)?;
    table::remove(c.handle);
    c.ia.counts.bump(DCNT_IA_SP_CR_ACCEPTED);
    Ok(DAT_SUCCESS)
}

pub fn reject(handle: DAT_CR_HANDLE, size: DAT_COUNT, data: *const c_void) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr(handle)?;
    let pdata = private_data(size, data, DAT_INVALID_ARG2, max_private_data(&c.ia))?;
    if table::remove(c.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
    }
    c.pending.reject(pdata);
    c.drop_provider_ep();
    c.ia.counts.bump(DCNT_IA_SP_CR_REJECTED);
    Ok(DAT_SUCCESS)
}
