//! The IB extensions of the built-in providers, reached through `dat_extension_op`:
//! RDMA write with immediate data, compare-and-swap and fetch-and-add (8 bytes, atomic with
//! respect to each other), unreliable datagrams, and the counters (`super::stats`). Their completions are `DAT_IB_DTO_EVENT`s carrying a
//! `DAT_IB_EXTENSION_EVENT_DATA`, built in [`super::events`].

use core::ffi::{c_int, c_void};

use super::dto::{self, remote_arg, Post, Vector};
use super::events::Report;
use crate::abi::*;
use crate::device::WrOp;
use crate::ffi::guard_try;

extern "C" {
    // Hidden helpers of shim/va_args.c: each takes the next argument of the va_list.
    fn dat2_va_u64(ap: *mut c_void) -> u64;
    fn dat2_va_ptr(ap: *mut c_void) -> *mut c_void;
    fn dat2_va_int(ap: *mut c_void) -> c_int;
}

/// dat2's own extension op: bind a memory window on an EP and send its new rmr_context to the
/// peer in one post. Arguments after (ep, op): DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr,
/// const DAT_LMR_TRIPLET *window, DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type,
/// DAT_COUNT num_segments, DAT_LMR_TRIPLET *local_iov, DAT_DTO_COOKIE cookie,
/// DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *rmr_context. The peer's receive completes
/// as a DAT_IB_DTO_EVENT of type DAT_IB_RECV_IMMED_DATA whose immediate data is the context.
pub const DAT2_BIND_AND_SEND_OP: u32 = 0x100;

/// `handle_extendedop_func` of the built-in providers. `args` is the caller's `va_list`.
pub unsafe extern "C" fn extended_op(handle: DAT_HANDLE, op: c_int, args: *mut c_void) -> DAT_RETURN {
    guard_try(|| {
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
                    dto::post(
                        handle,
                        count,
                        iov,
                        cookie,
                        flags,
                        Post {
                            op: WrOp::WriteImm(imm),
                            report: Report::Extension(DAT_IB_RDMA_WRITE_IMMED),
                            remote: Some((addr, key)),
                            ah: None,
                            max_iov: Vector::RdmaWrite,
                        },
                    )
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
                    dto::post(
                        handle,
                        1,
                        local,
                        cookie,
                        flags,
                        Post { op: wr, report: Report::Extension(kind), remote: Some((addr, key)), ah: None, max_iov: Vector::Request },
                    )
                }
                DAT_IB_UD_SEND_OP => {
                    let count = dat2_va_int(args);
                    let iov = dat2_va_ptr(args) as *const DAT_LMR_TRIPLET;
                    let ah = dat2_va_ptr(args) as *const DAT_IB_ADDR_HANDLE;
                    let cookie = DAT_DTO_COOKIE { as_64: dat2_va_u64(args) };
                    let flags = dat2_va_int(args) as DAT_COMPLETION_FLAGS;
                    super::ud::post_send(handle, count, iov, ah, cookie, flags)
                }
                DAT_IB_QUERY_COUNTERS_OP => {
                    let counter = dat2_va_int(args);
                    let out = dat2_va_ptr(args) as *mut u64;
                    let reset = dat2_va_int(args) != 0;
                    super::stats::query(handle, counter, out, reset)
                }
                DAT_IB_PRINT_COUNTERS_OP => {
                    let counter = dat2_va_int(args);
                    let reset = dat2_va_int(args) != 0;
                    super::stats::print(handle, counter, reset)
                }
                DAT_IB_START_COUNTERS_OP | DAT_IB_STOP_COUNTERS_OP => {
                    super::stats::start_stop(handle, dat2_va_int(args), op as u32 == DAT_IB_START_COUNTERS_OP)
                }
                DAT_IB_UD_AH_FREE_OP => super::ud::ah_free(handle, dat2_va_ptr(args) as *const DAT_IB_ADDR_HANDLE),
                DAT_IB_UD_CM_FREE_OP => super::ud::cm_free(handle, dat2_va_u64(args)),
                DAT2_BIND_AND_SEND_OP => {
                    let rmr = dat2_va_ptr(args);
                    let lmr = dat2_va_ptr(args);
                    let window = dat2_va_ptr(args) as *const DAT_LMR_TRIPLET;
                    let privileges = dat2_va_int(args) as DAT_MEM_PRIV_FLAGS;
                    let va_type = dat2_va_int(args) as DAT_VA_TYPE;
                    let count = dat2_va_int(args);
                    let iov = dat2_va_ptr(args) as *const DAT_LMR_TRIPLET;
                    let cookie = DAT_DTO_COOKIE { as_64: dat2_va_u64(args) };
                    let flags = dat2_va_int(args) as DAT_COMPLETION_FLAGS;
                    let context_out = dat2_va_ptr(args) as *mut DAT_RMR_CONTEXT;
                    bind_and_send(handle, rmr, lmr, window, privileges, va_type, count, iov, cookie, flags, context_out)
                }
                op if op == DAT_OPEN_EXTENSION_BASE as u32 => {
                    // DAT_IB_OPEN_QUERY_OP: `handle` is the IA name; open an IA for queries and
                    // return it (a provider IA, not a small integer) with its attributes.
                    let ia_out = dat2_va_ptr(args) as *mut DAT_IA_HANDLE;
                    let ia_mask = dat2_va_u64(args);
                    let ia_attr = dat2_va_ptr(args) as *mut DAT_IA_ATTR;
                    let p_mask = dat2_va_u64(args);
                    let p_attr = dat2_va_ptr(args) as *mut DAT_PROVIDER_ATTR;
                    if ia_out.is_null() {
                        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
                    }
                    let mut async_evd: DAT_EVD_HANDLE = core::ptr::null_mut();
                    let mut ia: DAT_IA_HANDLE = core::ptr::null_mut();
                    super::ia_open::open(handle as *const core::ffi::c_char, false, 8, &mut async_evd, &mut ia)?;
                    if let Err(e) = super::ia::query(ia, core::ptr::null_mut(), ia_mask, ia_attr, p_mask, p_attr) {
                        let _ = super::ia::close(ia, DAT_CLOSE_ABRUPT_FLAG);
                        return Err(e);
                    }
                    ia_out.write(ia);
                    Ok(DAT_SUCCESS)
                }
                op if op == DAT_CLOSE_EXTENSION_BASE as u32 => super::ia::close(handle, DAT_CLOSE_ABRUPT_FLAG),
                _ => Err(dat_error(DAT_NOT_IMPLEMENTED, 0)),
            }
        }
    })
}

/// The one-shot bind+send: the bind (with its own completion suppressed) and the send are
/// posted together; the send carries the window's new context as immediate data.
#[allow(clippy::too_many_arguments)]
fn bind_and_send(
    ep: DAT_HANDLE,
    rmr: DAT_HANDLE,
    lmr: DAT_HANDLE,
    window: *const DAT_LMR_TRIPLET,
    privileges: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    count: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    context_out: *mut DAT_RMR_CONTEXT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    if window.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    // SAFETY: checked non-NULL; the consumer's triplet.
    if unsafe { window.read() }.segment_length == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    let mut context: DAT_RMR_CONTEXT = 0;
    super::rmr::bind(rmr, lmr, window, privileges, va_type, ep, DAT_RMR_COOKIE { as_64: 0 }, DAT_COMPLETION_SUPPRESS_FLAG, &mut context)?;
    dto::post(
        ep,
        count,
        iov,
        cookie,
        flags,
        Post { op: WrOp::SendImm(context), report: Report::Dto(DAT_DTO_SEND), remote: None, ah: None, max_iov: Vector::Request },
    )?;
    if !context_out.is_null() {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { context_out.write(context) };
    }
    Ok(DAT_SUCCESS)
}
