//! The completion events of posted work: DTO completions, the IB extensions' completions and
//! RMR bind completions, and how a request posted to an EP says which of them it completes as.

use crate::abi::*;

/// How a completed request is reported.
#[derive(Clone, Copy)]
pub enum Report {
    /// A DTO completion event with this DAT_DTOS operation.
    Dto(DAT_DTOS),
    /// An IB extension completion of this DAT_IB_EXT_TYPE.
    Extension(u32),
    /// An RMR bind completion for this RMR.
    Bind { rmr: usize, cookie: DAT_RMR_COOKIE },
}

/// A request posted to an EP and not yet completed.
pub struct PendingSend {
    pub cookie: DAT_DTO_COOKIE,
    pub flags: DAT_COMPLETION_FLAGS,
    pub report: Report,
}
// SAFETY: cookies are the consumer's opaque values.
unsafe impl Send for PendingSend {}

/// The event of a request that completed with `status` (and `len` bytes), as its kind reports.
pub fn request_event(ep: usize, s: &PendingSend, status: u32, len: u32) -> DAT_EVENT {
    match s.report {
        Report::Dto(op) => dto_event(ep, s.cookie, status, len, op, 0),
        Report::Extension(kind) => completion_event(ep, s.cookie, status, len, kind),
        Report::Bind { rmr, cookie } => bind_event(rmr, cookie, status),
    }
}

pub fn dto_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, op: DAT_DTOS, rmr_context: DAT_RMR_CONTEXT) -> DAT_EVENT {
    let mut ev = DAT_EVENT { event_number: DAT_DTO_COMPLETION_EVENT, ..Default::default() };
    ev.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: ep as DAT_EP_HANDLE,
        user_cookie: cookie,
        status,
        transfered_length: len,
        operation: op,
        rmr_context,
    };
    ev
}

pub fn bind_event(rmr: usize, cookie: DAT_RMR_COOKIE, status: u32) -> DAT_EVENT {
    let mut ev = DAT_EVENT { event_number: DAT_RMR_BIND_COMPLETION_EVENT, ..Default::default() };
    ev.event_data.rmr_completion_event_data =
        DAT_RMR_BIND_COMPLETION_EVENT_DATA { rmr_handle: rmr as DAT_RMR_HANDLE, user_cookie: cookie, status };
    ev
}

// The IB extensions' events: `DAT_IB_DTO_EVENT`s carrying a `DAT_IB_EXTENSION_EVENT_DATA`.

/// An extension completion event for one of our own requests.
pub fn completion_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, kind: DAT_IB_EXT_TYPE) -> DAT_EVENT {
    let op = match kind {
        DAT_IB_RDMA_WRITE_IMMED => DAT_IB_DTO_RDMA_WRITE_IMMED,
        DAT_IB_CMP_AND_SWAP => DAT_IB_DTO_CMP_SWAP,
        DAT_IB_UD_SEND => DAT_IB_DTO_SEND_UD,
        _ => DAT_IB_DTO_FETCH_ADD,
    };
    extension_event(ep, cookie, status, len, op, kind, 0)
}

/// The receive an RDMA write with immediate data consumed.
pub fn immediate_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, imm: u32) -> DAT_EVENT {
    extension_event(ep, cookie, status, len, DAT_IB_DTO_RECV_IMMED, DAT_IB_RDMA_WRITE_IMMED_DATA, imm)
}

/// A datagram received by a UD EP (the length counts the 40-byte GRH area first).
pub fn ud_recv_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32) -> DAT_EVENT {
    extension_event(ep, cookie, status, len, DAT_IB_DTO_RECV_UD, DAT_IB_UD_RECV, 0)
}

/// A receive completed by a send with immediate data (the one-shot bind+send).
pub fn send_immediate_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, imm: u32) -> DAT_EVENT {
    extension_event(ep, cookie, status, len, DAT_IB_DTO_RECV_MSG_IMMED, DAT_IB_RECV_IMMED_DATA, imm)
}

fn extension_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, op: DAT_DTOS, kind: DAT_IB_EXT_TYPE, imm: u32) -> DAT_EVENT {
    let mut ev = dto_event(ep, cookie, status, len, op, 0);
    ev.event_number = DAT_IB_DTO_EVENT;
    let status = if status == DAT_DTO_SUCCESS { DAT_OP_SUCCESS } else { DAT_IB_OP_ERR };
    let mut data = DAT_IB_EXTENSION_EVENT_DATA { r#type: kind, status, ..Default::default() };
    data.val.immed = DAT_IB_IMMED_DATA { data: imm };
    // SAFETY: the extension data is 64 bytes, exactly the event's extension area (checked by
    // the layout assertions of both types).
    unsafe { core::ptr::write_unaligned(ev.event_extension_data.as_mut_ptr() as *mut DAT_IB_EXTENSION_EVENT_DATA, data) };
    ev
}
