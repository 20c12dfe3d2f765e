//! The IB extensions of the built-in providers, reached through `dat_extension_op`:
//! RDMA write with immediate data, compare-and-swap and fetch-and-add (8 bytes, atomic with
//! respect to each other). Their completions are `DAT_IB_DTO_EVENT`s carrying a
//! `DAT_IB_EXTENSION_EVENT_DATA`.

use core::ffi::{c_int, c_void};

use super::dto::{self, remote_arg, Post};
use super::ep::Report;
use crate::abi::*;
use crate::device::WrOp;
use crate::ffi::entry;

extern "C" {
    // Hidden helpers of shim/extension_op.c: each takes the next argument of the va_list.
    fn dat2_va_u64(ap: *mut c_void) -> u64;
    fn dat2_va_ptr(ap: *mut c_void) -> *mut c_void;
    fn dat2_va_int(ap: *mut c_void) -> c_int;
}

/// An extension completion event for one of our own requests.
pub fn completion_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, kind: DAT_IB_EXT_TYPE) -> DAT_EVENT {
    let op = match kind {
        DAT_IB_RDMA_WRITE_IMMED => DAT_IB_DTO_RDMA_WRITE_IMMED,
        DAT_IB_CMP_AND_SWAP => DAT_IB_DTO_CMP_SWAP,
        _ => DAT_IB_DTO_FETCH_ADD,
    };
    extension_event(ep, cookie, status, len, op, kind, 0)
}

/// The receive an RDMA write with immediate data consumed.
pub fn immediate_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, imm: u32) -> DAT_EVENT {
    extension_event(ep, cookie, status, len, DAT_IB_DTO_RECV_IMMED, DAT_IB_RDMA_WRITE_IMMED_DATA, imm)
}

fn extension_event(ep: usize, cookie: DAT_DTO_COOKIE, status: u32, len: u32, op: DAT_DTOS, kind: DAT_IB_EXT_TYPE, imm: u32) -> DAT_EVENT {
    let mut ev = super::ep::dto_event(ep, cookie, status, len, op, 0);
    ev.event_number = DAT_IB_DTO_EVENT;
    let mut data = DAT_IB_EXTENSION_EVENT_DATA::default();
    data.r#type = kind;
    data.status = if status == DAT_DTO_SUCCESS { DAT_OP_SUCCESS } else { DAT_IB_OP_ERR };
    data.val.immed = DAT_IB_IMMED_DATA { data: imm };
    // SAFETY: the extension data is 64 bytes, exactly the event's extension area (checked by
    // the layout assertions of both types).
    unsafe { core::ptr::write_unaligned(ev.event_extension_data.as_mut_ptr() as *mut DAT_IB_EXTENSION_EVENT_DATA, data) };
    ev
}

/// `handle_extendedop_func` of the built-in providers. `args` is the caller's `va_list`.
pub unsafe extern "C" fn extended_op(handle: DAT_HANDLE, op: c_int, args: *mut c_void) -> DAT_RETURN {
    entry(|| {
        // SAFETY: each helper takes the next argument of the order the IB extension defines
        // for this op (dat_ib_extensions.h), which is what the caller pushed.
        unsafe {
            match op as u32 {
                DAT_IB_RDMA_WRITE_IMMED_OP => {
                    let count = dat2_va_int(args);
                    let iov = dat2_va_ptr(args) as *const DAT_LMR_TRIPLET;
                    let cookie = DAT_DTO_COOKIE { as_64: dat2_va_u64(args) };
                    let remote = dat2_va_ptr(args) as *const DAT_RMR_TRIPLET;
                    let imm = dat2_va_int(args) as u32;
                    let flags = dat2_va_int(args) as DAT_COMPLETION_FLAGS;
                    let (addr, key, _) = remote_arg(remote, DAT_INVALID_ARG6)?;
                    dto::post(handle, count, iov, cookie, flags, Post {
                        op: WrOp::WriteImm(imm),
                        report: Report::Extension(DAT_IB_RDMA_WRITE_IMMED),
                        remote: Some((addr, key)),
                        max_iov: |a| a.max_rdma_write_iov,
                    })
                }
                DAT_IB_CMP_AND_SWAP_OP | DAT_IB_FETCH_AND_ADD_OP => {
                    let swap_op = op as u32 == DAT_IB_CMP_AND_SWAP_OP;
                    let a = dat2_va_u64(args);
                    let b = if swap_op { dat2_va_u64(args) } else { 0 };
                    let local = dat2_va_ptr(args) as *const DAT_LMR_TRIPLET;
                    let cookie = DAT_DTO_COOKIE { as_64: dat2_va_u64(args) };
                    let remote = dat2_va_ptr(args) as *const DAT_RMR_TRIPLET;
                    let flags = dat2_va_int(args) as DAT_COMPLETION_FLAGS;
                    let (addr, key, _) = remote_arg(remote, DAT_INVALID_ARG6)?;
                    let (wr, kind) = if swap_op {
                        (WrOp::CmpSwap { compare: a, swap: b }, DAT_IB_CMP_AND_SWAP)
                    } else {
                        (WrOp::FetchAdd { add: a }, DAT_IB_FETCH_AND_ADD)
                    };
                    dto::post(handle, 1, local, cookie, flags, Post { op: wr, report: Report::Extension(kind), remote: Some((addr, key)), max_iov: |a| a.max_request_iov })
                }
                _ => Err(dat_error(DAT_NOT_IMPLEMENTED, 0)),
            }
        }
    })
}
