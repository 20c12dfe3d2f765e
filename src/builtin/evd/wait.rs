//! `dat_evd_wait`: a consumer blocks until enough events are queued, the time runs out, or the
//! EVD is made unwaitable; the device is told of each blocking wait, so that it wakes only for
//! waiting consumers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{with_evd, Evd, EvdState, Polling};
use crate::abi::*;
use crate::builtin::put;
use crate::device::Qp;
use crate::util::lock::{Deadline, LockGuard};

impl Evd {
    /// A consumer is about to block in a wait: the device wakes for what this EVD reports.
    /// Where QPs are polled, that is its sources alone (each armed, and what is ready taken),
    /// not every CQ of the device.
    #[inline]
    fn wait_begins(&self) {
        if !self.qps_polled {
            return self.ia.dev.consumer_waits(true);
        }
        self.sources_wait_begin();
    }

    #[inline(never)]
    fn sources_wait_begin(&self) {
        let s = {
            let mut s = self.sources.lock();
            s.waits += 1;
            for q in &s.qps {
                q.wait_begins();
            }
            s
        };
        // Taken outside the lock (a completion goes to its EP's lock, which an EP attaching a
        // QP holds while it comes to this one); armed first, so nothing is missed between.
        // One source (the EVD of one EP's requests, or of its receives) is the usual case: it
        // is held on its own, without a list.
        if let [q] = s.qps.as_slice() {
            let q = q.clone();
            drop(s);
            return q.deliver_before_wait();
        }
        let qps: smallvec::SmallVec<[Arc<dyn Qp>; 4]> = s.qps.iter().cloned().collect();
        drop(s);
        for q in &qps {
            q.deliver_before_wait();
        }
    }

    #[inline]
    fn wait_ends(&self) {
        if !self.qps_polled {
            return self.ia.dev.consumer_waits(false);
        }
        let mut s = self.sources.lock();
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
    // From here: the checks above took a lock's time. None for a wait that cannot sleep
    // (timeout 0) or that has no end.
    let deadline = (timeout != 0 && timeout != DAT_TIMEOUT_INFINITE).then(|| Deadline::after(Duration::from_micros(u64::from(timeout))));
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
    // Whether a sleep has ended, and whether one ended at the deadline.
    let (mut woken, mut timed_out) = (false, false);
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
        if timeout == 0 || timed_out {
            break Err(dat_error(DAT_TIMEOUT_EXPIRED, 0));
        }
        // Set under the lock the sleep lets go: a notification from here on wakes it.
        s.asleep = true;
        match &deadline {
            None => s = e.cond.wait(s),
            Some(d) => {
                // The kernel tells the sleep that reaches the deadline (the loop looks once
                // more, then times out). The clock is read only after a wake-up that did not
                // end the wait: a sleep that finds a notification already come returns
                // without a look at the time, so notifications that kept coming could keep
                // the wait going past its deadline.
                if woken && d.passed() {
                    break Err(dat_error(DAT_TIMEOUT_EXPIRED, 0));
                }
                (s, timed_out) = e.cond.wait_until(s, d);
                woken = true;
            }
        }
    };
    s.waiter = false;
    s.asleep = false;
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
