//! `dat_evd_dequeue`: the call a polling consumer makes most, kept apart from the rest of the
//! EVD. An empty one is answered from the EVD's handle cell when it can be (no pin, no lock);
//! otherwise the EVD's sources are polled, and the first event found goes straight to the
//! caller when nothing was queued before it (`Evd::post_as`).

use std::sync::atomic::Ordering;

use super::{with_evd, Evd, Polling};
use crate::abi::*;
use crate::builtin::table;

pub fn dequeue(handle: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> Result<DAT_RETURN, DAT_RETURN> {
    with_evd(handle, |e| dequeue_on(e, event, Found::Unknown(None)))
}

/// Word 0 of an EVD's cell with this bit: its empty dequeues must reach the device.
pub(super) const MUST_LOOK: u64 = 1 << 63;

/// How often an empty dequeue answered from the cell goes the whole way instead, so that the
/// device makes progress on the consumer's thread (dat2-soft yields there, letting its
/// threads deliver what arrived).
const PROGRESS_EVERY: u64 = 8;

/// Whether a dequeue of `handle` can answer `DAT_QUEUE_EMPTY` from the EVD's handle cell
/// alone: no pin and no panic guard, only loads (nothing here can panic). False sends the
/// call the whole way, which also tells every error apart. A moment old, as any answer: an
/// event queued meanwhile is for the next dequeue.
#[inline]
pub fn nothing_to_take(handle: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> Found {
    let Some(listed) = table::listed(handle as usize) else { return Found::Unknown(None) };
    if event.is_null() {
        return Found::Unknown(Some(listed));
    }
    let Some(w) = listed.published_words(DAT_HANDLE_TYPE_EVD) else { return Found::Unknown(Some(listed)) };
    if w[0].load(Ordering::Acquire) != 0 {
        return Found::Unknown(Some(listed));
    }
    // Not a read-modify-write: the count is a hint, and one thread polls an EVD at a time.
    let n = w[1].load(Ordering::Relaxed).wrapping_add(1);
    w[1].store(n, Ordering::Relaxed);
    if n % PROGRESS_EVERY != 0 {
        Found::Nothing
    } else {
        Found::NothingYet(listed)
    }
}

/// What [`nothing_to_take`] found, with the handle's cell when the handle is one of the
/// table's (for the rest of the call to pin without checking the handle again).
#[derive(Clone, Copy)]
pub enum Found {
    /// Nothing: the dequeue answers `DAT_QUEUE_EMPTY`.
    Nothing,
    /// Nothing, counted as an empty dequeue, but the call goes the whole way (the device's
    /// progress): if it takes an event after all, the count is corrected.
    NothingYet(table::Listed),
    /// The cell cannot say: the call goes the whole way, counted there.
    Unknown(Option<table::Listed>),
}

impl Found {
    pub(super) fn listed(self) -> Option<table::Listed> {
        match self {
            Found::Nothing => None,
            Found::NothingYet(l) => Some(l),
            Found::Unknown(l) => l,
        }
    }
}

/// [`dequeue`] on an EVD already resolved. The empty case is kept small (a polling consumer
/// spends most calls there); taking an event is out of line.
#[inline(always)]
pub fn dequeue_on(e: &Evd, event: *mut DAT_EVENT, found: Found) -> Result<DAT_RETURN, DAT_RETURN> {
    #[cfg(test)]
    crate::builtin::fault::hit(crate::builtin::fault::Point::Dequeue);
    if event.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    // Nothing queued: the device delivers what is ready, and only then is the lock worth
    // taking.
    if e.queued() == 0 {
        match e.poll_sources(event) {
            Polling::NoSources => e.ia.dev.progress(),
            Polling::Caught => return caught(e, found),
            Polling::Polled => {}
        }
        if e.queued() == 0 {
            return Ok(DAT_QUEUE_EMPTY);
        }
    }
    // An event queued since the cell was read is taken, and the cell's count of empty
    // dequeues, which counted this one, corrected.
    if matches!(found, Found::NothingYet(_)) {
        return take_after_empty(e, event);
    }
    take_one(e, event)
}

/// A dequeue whose poll wrote an event to the consumer ([`Polling::Caught`]); one the handle
/// cell counted as empty has that count corrected.
#[inline]
fn caught(e: &Evd, found: Found) -> Result<DAT_RETURN, DAT_RETURN> {
    if matches!(found, Found::NothingYet(_)) && e.must_look == 0 {
        e.lock().counts.not_empty_after_all();
    }
    Ok(DAT_SUCCESS)
}

/// [`take_one`] for a dequeue the handle cell counted as empty ([`Found::NothingYet`]) that
/// then found an event (the device's progress delivered it, or it came meanwhile).
#[inline(never)]
fn take_after_empty(e: &Evd, event: *mut DAT_EVENT) -> Result<DAT_RETURN, DAT_RETURN> {
    let mut s = e.lock();
    if e.must_look == 0 {
        s.counts.not_empty_after_all();
    }
    // SAFETY: checked non-NULL by the caller.
    if unsafe { e.pop_into(&mut s, event) } {
        Ok(DAT_SUCCESS)
    } else {
        Ok(DAT_QUEUE_EMPTY)
    }
}

/// Takes the oldest event, inline in the dequeue (the guarded call has saved the registers
/// this needs already).
#[inline(always)]
fn take_one(e: &Evd, event: *mut DAT_EVENT) -> Result<DAT_RETURN, DAT_RETURN> {
    // SAFETY: checked non-NULL by the caller.
    if unsafe { e.pop_into(&mut e.lock(), event) } {
        Ok(DAT_SUCCESS)
    } else {
        // Plain DAT_QUEUE_EMPTY (no class bit): programs compare it with ==.
        Ok(DAT_QUEUE_EMPTY)
    }
}
