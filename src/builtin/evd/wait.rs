//! `dat_evd_wait`: a consumer blocks until enough events are queued, the time runs out, or the
//! EVD is made unwaitable; the device is told of each blocking wait, so that it wakes only for
//! waiting consumers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{with_evd, Evd, EvdState, Polling};
use crate::abi::*;
use crate::builtin::{deadline, put};
use crate::device::Qp;
use crate::util::lock::LockGuard;
use crate::util::sync::MutexExt;

impl Evd {
    /// A consumer is about to block in a wait: the device wakes for what this EVD reports.
    /// Where QPs are polled, that is its sources alone (each armed, and what is ready taken),
    /// not every CQ of the device.
    fn wait_begins(&self) {
        if !self.ia.dev.polled_qps() {
            return self.ia.dev.consumer_waits(true);
        }
        let qps: smallvec::SmallVec<[Arc<dyn Qp>; 4]> = {
            let mut s = self.sources.locked();
            s.waits += 1;
            for q in &s.qps {
                q.wait_begins();
            }
            s.qps.iter().cloned().collect()
        };
        // Taken outside the lock (a completion goes to its EP's lock, which an EP attaching a
        // QP holds while it comes to this one); armed first, so nothing is missed between.
        for q in &qps {
            q.deliver_before_wait();
        }
    }

    fn wait_ends(&self) {
        if !self.ia.dev.polled_qps() {
            return self.ia.dev.consumer_waits(false);
        }
        let mut s = self.sources.locked();
        s.waits -= 1;
        for q in &s.qps {
            q.wait_ends();
        }
    }
}

pub fn wait(
    handle: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    with_evd(handle, |e| wait_on(e, timeout, threshold, event, nmore))
}

/// [`wait`] on an EVD already resolved (pinned by the API layer: its free wakes this wait
/// before it waits for the pin).
pub fn wait_on(
    e: &Evd,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    if event.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    let mut s = e.lock();
    if threshold <= 0 || threshold > s.qlen {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    if !s.waitable {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE));
    }
    if s.waiter {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER));
    }
    // A solicited-wait stream controls the waking itself: a threshold cannot apply too.
    if threshold > 1 && e.solicited_streams.load(Ordering::SeqCst) > 0 {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED));
    }
    s.counts.bump(DCNT_EVD_WAIT);
    // Enough queued already: the oldest is taken under this lock. Nothing the device holds
    // ready could come before it (it would be queued behind), so neither its poll nor the
    // clock is worth a call.
    if s.queue.len() >= threshold as usize {
        // SAFETY: checked non-NULL; the consumer's event buffer.
        let taken = unsafe { e.pop_into(&mut s, event) };
        debug_assert!(taken, "the queue holds at least one event");
        s.counts.waited();
        if !nmore.is_null() {
            // SAFETY: non-NULL consumer out-pointer.
            unsafe { put(nmore, s.queue.len() as DAT_COUNT) };
        }
        return Ok(DAT_SUCCESS);
    }
    wait_for_more(e, s, timeout, threshold, event, nmore)
}

/// The rest of [`wait_on`], once the queue held too few events: the device delivers what it
/// holds ready, then the consumer blocks until a notification event brings the queue to the
/// threshold.
#[inline(never)]
fn wait_for_more(
    e: &Evd,
    mut s: LockGuard<'_, EvdState>,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> Result<DAT_RETURN, DAT_RETURN> {
    // From here: the checks above took a lock's time.
    let deadline = deadline(timeout);
    s.waiter = true;
    let unwaits = s.unwaits;
    // Completions the device holds ready count at once, as queued events do; while blocked,
    // only a notification event wakes the waiter (then it takes the oldest event,
    // notification or not). The device hears of a blocking wait only when one may happen, so
    // that it can keep completion wake-ups for waiting consumers.
    drop(s);
    if e.poll_sources(std::ptr::null_mut()) == Polling::NoSources {
        e.ia.dev.progress();
    }
    let mut s = e.lock();
    let mut blocks = false;
    if s.queue.len() < threshold as usize && timeout != 0 {
        blocks = true;
        drop(s);
        e.wait_begins();
        s = e.lock();
    }
    let ready_at_entry = s.queue.len() >= threshold as usize;
    let notices = s.notices;
    let mut slept = false;
    let result = loop {
        if !s.waitable || s.unwaits != unwaits {
            break Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE));
        }
        if s.queue.len() >= threshold as usize && (ready_at_entry || s.notices != notices) {
            // SAFETY: checked non-NULL; the consumer's event buffer.
            let taken = unsafe { e.pop_into(&mut s, event) };
            debug_assert!(taken, "the queue holds at least one event");
            s.counts.waited();
            if slept {
                s.counts.bump(DCNT_EVD_WAIT_NOTIFY);
            }
            break Ok(DAT_SUCCESS);
        }
        if !slept {
            slept = true;
            s.counts.bump(DCNT_EVD_WAIT_BLOCKED);
        }
        match deadline {
            None => s = e.cond.wait(s),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break Err(dat_error(DAT_TIMEOUT_EXPIRED, 0));
                }
                s = e.cond.wait_timeout(s, Some(d - now)).0;
            }
        }
    };
    s.waiter = false;
    if !nmore.is_null() {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { put(nmore, s.queue.len() as DAT_COUNT) };
    }
    drop(s);
    if blocks {
        e.wait_ends();
    }
    result
}
