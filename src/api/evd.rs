//! Event dispatchers: create, query, modify_cno, enable/disable, wait, resize, post_se,
//! dequeue, free, set/clear_unwaitable.
//!
//! Connection requests reach the consumer as events carrying a new CR handle; those handles
//! are recorded here as they pass, so that the CR functions can check them.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::builtin;
use crate::ffi::{guard_try, guard_try_local};
use crate::registry::handles::{self, Kind, Tracked};
use crate::registry::{self};

const EVD: DAT_RETURN = DAT_INVALID_HANDLE_EVD_REQUEST;

fn evd(handle: DAT_EVD_HANDLE) -> Result<Tracked, DAT_RETURN> {
    handles::check(handle, Kind::Evd, EVD)
}

/// Records the handles a delivered event introduces.
fn note_event(owner: &Tracked, event: *const DAT_EVENT) {
    if event.is_null() {
        return;
    }
    // SAFETY: the provider has just filled the consumer's event on success.
    let event = unsafe { &*event };
    // A UD EP's request (IB extensions) is a CR as well, answered with dat_cr_accept.
    if matches!(event.event_number, DAT_CONNECTION_REQUEST_EVENT | DAT_IB_UD_CONNECTION_REQUEST_EVENT) {
        // SAFETY: a connection request event carries CR arrival data.
        let cr = unsafe { event.event_data.cr_arrival_event_data.cr_handle };
        handles::insert_if_new(cr, Kind::Cr, owner.ia, owner.provider);
    }
}

pub(super) extern "C" fn dat_evd_create(
    ia_handle: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
    evd_out: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        handles::check_optional(cno, Kind::Cno, DAT_INVALID_HANDLE_CNO)?;
        Ok(dispatch::create(evd_out, Kind::Evd, ia.slot, ia.provider, |out| {
            call!(ia.provider, evd_create_func, ia.raw, qlen, cno, flags, out)
        }))
    })
}

extern "C" fn dat_evd_query(handle: DAT_EVD_HANDLE, mask: DAT_EVD_PARAM_MASK, param: *mut DAT_EVD_PARAM) -> DAT_RETURN {
    guard_try(|| {
        let t = evd(handle)?;
        Ok(call!(t.provider, evd_query_func, handle, mask, param))
    })
}

extern "C" fn dat_evd_modify_cno(handle: DAT_EVD_HANDLE, cno: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = evd(handle)?;
        handles::check_optional(cno, Kind::Cno, DAT_INVALID_HANDLE_CNO)?;
        Ok(call!(t.provider, evd_modify_cno_func, handle, cno))
    })
}

extern "C" fn dat_evd_enable(handle: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_enable_func, handle)))
}

extern "C" fn dat_evd_disable(handle: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_disable_func, handle)))
}

extern "C" fn dat_evd_set_unwaitable(handle: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_set_unwaitable_func, handle)))
}

extern "C" fn dat_evd_clear_unwaitable(handle: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_clear_unwaitable_func, handle)))
}

extern "C" fn dat_evd_wait(
    handle: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> DAT_RETURN {
    guard_try_local(|local| {
        // A built-in EVD: its events' handles are the built-in table's, which answers for
        // them itself (nothing to note).
        if let Some(e) = builtin::evd::pinned(&local, handle) {
            return builtin::evd::wait::wait_on(&e, timeout, threshold, event, nmore);
        }
        let t = evd(handle)?;
        let status = call!(t.provider, evd_wait_func, handle, timeout, threshold, event, nmore);
        if status == DAT_SUCCESS {
            note_event(&t, event);
        }
        Ok(status)
    })
}

extern "C" fn dat_evd_resize(handle: DAT_EVD_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_resize_func, handle, qlen)))
}

pub(super) extern "C" fn dat_evd_post_se(handle: DAT_EVD_HANDLE, event: *const DAT_EVENT) -> DAT_RETURN {
    guard_try(|| Ok(call!(evd(handle)?.provider, evd_post_se_func, handle, event)))
}

pub(super) extern "C" fn dat_evd_dequeue(handle: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> DAT_RETURN {
    // A polling consumer's most frequent call, answered from the handle's cell: loads that
    // cannot panic, so outside the guard (and without the registers the rest needs saved).
    let found = builtin::evd::dequeue::nothing_to_take(handle, event);
    if matches!(found, builtin::evd::Found::Nothing) {
        return DAT_QUEUE_EMPTY;
    }
    dequeue_guarded(handle, event, found)
}

#[inline(never)]
fn dequeue_guarded(handle: DAT_EVD_HANDLE, event: *mut DAT_EVENT, found: builtin::evd::Found) -> DAT_RETURN {
    guard_try_local(|local| {
        if let Some(e) = builtin::evd::pinned_found(&local, found) {
            return builtin::evd::dequeue::dequeue_on(&e, event, found);
        }
        let t = evd(handle)?;
        let status = call!(t.provider, evd_dequeue_func, handle, event);
        if status == DAT_SUCCESS {
            note_event(&t, event);
        }
        Ok(status)
    })
}

pub(super) extern "C" fn dat_evd_free(handle: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = evd(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, evd_free_func, handle)))
    })
}

crate::export_c!(
    dat_evd_create,
    dat_evd_query,
    dat_evd_modify_cno,
    dat_evd_enable,
    dat_evd_disable,
    dat_evd_set_unwaitable,
    dat_evd_clear_unwaitable,
    dat_evd_wait,
    dat_evd_resize,
    dat_evd_post_se,
    dat_evd_dequeue,
    dat_evd_free,
);
