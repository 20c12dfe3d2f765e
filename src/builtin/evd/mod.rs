//! EVD semantics: a bounded event queue with waiters, an optional CNO, enable/disable and
//! waitable/unwaitable states. The queue holds exactly the qlen asked for; an event that does
//! not fit is not lost silently: the IA's async EVD gets DAT_ASYNC_ERROR_EVD_OVERFLOW.

use core::ptr::addr_of_mut;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::cno::{self, Cno};
use super::counters::{EvdCounts, EVD_N};
use super::ia::{self, Ia};
use super::provider::Builtin;
use super::put;
use super::table::{self, Object};
use crate::abi::*;
use crate::device::Qp;
use crate::util::lock::{Cond, Lock, LockGuard};
use crate::util::pin::{self, Local};
use crate::util::ring::Ring;

pub mod dequeue;
#[cfg(test)]
mod tests;
pub mod wait;
use dequeue::MUST_LOOK;
pub use dequeue::{dequeue, Found};
pub use wait::wait;

/// The EVD flags a consumer may ask for.
const VALID_FLAGS: DAT_EVD_FLAGS = DAT_EVD_SOFTWARE_FLAG
    | DAT_EVD_CR_FLAG
    | DAT_EVD_DTO_FLAG
    | DAT_EVD_CONNECTION_FLAG
    | DAT_EVD_RMR_BIND_FLAG
    | DAT_EVD_ASYNC_FLAG
    | DAT_EVD_EXTENSION_BASE;

/// A queued event. `DAT_EVENT` carries raw handles, which are plain values here.
#[derive(Clone, Copy)]
pub struct Event(pub DAT_EVENT);
// SAFETY: the pointers inside are handles and consumer cookies, never dereferenced by us.
unsafe impl Send for Event {}

pub struct EvdState {
    /// Changed only through [`Evd::push`] and [`Evd::pop`], which keep [`Evd::queued`].
    queue: Ring<Event>,
    pub qlen: DAT_COUNT,
    pub enabled: bool,
    pub waitable: bool,
    /// How many times the EVD was made unwaitable (wrapping): a waiter that finds it moved
    /// returns UNWAITABLE even when the EVD is waitable again by the time it looks.
    unwaits: u32,
    pub waiter: bool,
    /// The waiter has found too few events and sleeps, or is about to: a notification event
    /// must wake it. Until then it reads the queue itself, and an event delivered meanwhile
    /// (its own poll's, most often) needs no wake-up, which is a system call.
    asleep: bool,
    pub cno: Option<Arc<Cno>>,
    /// How many notification events have been queued (wrapping). An event that is queued
    /// without notification (an unsolicited receive on a solicited-wait stream) leaves it as
    /// it is, so a blocked waiter can tell the two apart.
    pub notices: u64,
    /// Whether the EVD still writes its cell's words (see [`Evd::words`]).
    owns_cell: bool,
    /// The IB counters extension's EVD counters, counted under this lock.
    counts: EvdCounts,
}

pub struct Evd {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub flags: DAT_EVD_FLAGS,
    /// Not std's Mutex: a dequeue takes it, and std's poison checks cost a tenth of one
    /// (`util::lock`).
    state: Lock<EvdState>,
    cond: Cond,
    /// EPs, service points and IAs (as async EVD) that deliver to this EVD.
    pub users: AtomicU32,
    /// EP receive streams feeding this EVD that are configured for solicited wait (see
    /// `ep::solicited_wait`): while there are any, waits must use a threshold of 1.
    pub solicited_streams: AtomicU32,
    /// How many events the queue holds, readable without the lock: a dequeue that finds
    /// nothing takes no lock.
    queued: AtomicUsize,
    /// The words of the EVD's handle cell (`table::words`), for a dequeue to find it empty
    /// without pinning it ([`nothing_to_take`]): 0, what `queued` says, with [`MUST_LOOK`] on
    /// an EVD whose empty dequeue must reach the device; 1, the empty dequeues answered so.
    words: &'static [AtomicU64; 2],
    /// [`MUST_LOOK`] or 0, for word 0.
    must_look: u64,
    /// The device's `polled_qps`, asked once (a blocking wait needs it twice).
    qps_polled: bool,
    /// The QPs whose completions this EVD reports, on a device whose QPs are polled
    /// (`Device::polled_qps`): an empty dequeue polls these and no others, and a blocking
    /// wait arms these and no others. Not std's Mutex: a blocking wait takes it twice, and
    /// std's poison checks would cost more than what it does under it (`util::lock`).
    sources: Lock<Sources>,
    /// How many there are, readable without the lock.
    nsources: AtomicUsize,
    /// Bumped (under the `sources` lock) each time they change.
    sources_version: AtomicU64,
    /// What a dequeue polls: its copy of the sources, taken again only when they changed, so
    /// that the sources' lock and reference counts stay off an empty dequeue. Weak: a QP its
    /// EP gave up is never kept alive by the copy. Ordered before an EP's lock (a completion
    /// polled here goes to it); `sources` is taken inside it only to copy. Not std's Mutex:
    /// an empty dequeue tries it (`util::lock`).
    polled: Lock<Polled>,
    /// While a dequeue polls the sources (holding `polled`), its thread (`LocalRef::addr`)
    /// and the consumer's `DAT_EVENT`: the first event that thread delivers here, found with
    /// nothing queued before it, is written there at once instead of queued and taken back
    /// (`post_as`). 0 and null otherwise, always set back before the dequeue returns.
    catch_thread: AtomicUsize,
    catch_out: AtomicPtr<DAT_EVENT>,
    pub context: Mutex<u64>,
}

/// What a dequeue's poll of its sources came to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Polling {
    /// The EVD has no sources to poll (the device's progress is for the caller to make).
    NoSources,
    /// They were polled (or are being polled by another thread): what they had is queued.
    Polled,
    /// The first event they had was written to the consumer's `DAT_EVENT`.
    Caught,
}

/// Ends a dequeue's catch ([`Evd::catch_thread`]) however its poll ends (it may unwind): a
/// later thread of the same address must not find it. An event caught by a poll that unwinds
/// goes back to the queue.
struct Catching<'a> {
    evd: &'a Evd,
    /// The consumer's `DAT_EVENT`.
    out: *mut DAT_EVENT,
    /// Whether the poll ended normally.
    done: bool,
}

impl Drop for Catching<'_> {
    fn drop(&mut self) {
        let e = self.evd;
        let caught = e.catch_out.load(Ordering::Relaxed).is_null();
        e.catch_thread.store(0, Ordering::Relaxed);
        e.catch_out.store(std::ptr::null_mut(), Ordering::Relaxed);
        if !self.done && caught {
            e.give_back(self.out);
        }
    }
}

/// A dequeue's copy of an EVD's source QPs, as of `version` (see `Evd::polled`).
#[derive(Default)]
struct Polled {
    version: u64,
    qps: Vec<std::sync::Weak<dyn Qp>>,
}

/// An EVD's source QPs, and how many blocking waits they are armed for (each source, added
/// or removed during a wait too, is told of each one: `Qp::wait_begins`, `Qp::wait_ends`).
#[derive(Default)]
struct Sources {
    qps: Vec<Arc<dyn Qp>>,
    waits: u32,
}

impl Evd {
    #[inline]
    pub fn lock(&self) -> LockGuard<'_, EvdState> {
        self.state.lock()
    }

    /// Queues an event (the caller checked the room, under the lock it holds as `s`).
    fn push(&self, s: &mut EvdState, event: Event) {
        s.queue.push_back(event);
        self.set_queued(s);
    }

    fn set_queued(&self, s: &EvdState) {
        self.queued.store(s.queue.len(), Ordering::Release);
        if s.owns_cell {
            self.words[0].store(s.queue.len() as u64 | self.must_look, Ordering::Release);
        }
    }

    /// Takes the oldest event (under the lock the caller holds as `s`) straight into the
    /// consumer's `out`; false when there is none.
    ///
    /// # Safety
    /// `out` must be valid for a write of a `DAT_EVENT`.
    unsafe fn pop_into(&self, s: &mut EvdState, out: *mut DAT_EVENT) -> bool {
        // SAFETY: as the caller guarantees; one copy, from the queue to the consumer.
        if !s.queue.take_front(|front| unsafe { put(out, front.0) }) {
            return false;
        }
        self.set_queued(s);
        true
    }

    /// The EVD's counters (`super::counters`), read under the lock the caller holds as `s`;
    /// then `reset` (`Some(None)`: all of them) are zeroed.
    pub fn counter_values(&self, s: &mut EvdState, reset: Option<Option<usize>>) -> [u64; EVD_N] {
        let cell = self.words[1].load(Ordering::Relaxed);
        let v = s.counts.values(cell, s.queue.len());
        if let Some(which) = reset {
            s.counts.reset(which, cell, s.queue.len());
        }
        v
    }

    /// Events queued, as of a moment ago (no lock).
    fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// `qp` reports completions here (an EP's QP, while the EP has it).
    pub fn add_source(&self, qp: &Arc<dyn Qp>) {
        let mut s = self.sources.lock();
        s.qps.push(qp.clone());
        self.sources_version.fetch_add(1, Ordering::Release);
        // A wait already blocked hears of it too (nothing to deliver: a new QP has nothing
        // ready).
        for _ in 0..s.waits {
            qp.wait_begins();
        }
        self.nsources.store(s.qps.len(), Ordering::Release);
    }

    /// `qp` no longer does.
    pub fn remove_source(&self, qp: &Arc<dyn Qp>) {
        let mut s = self.sources.lock();
        if let Some(n) = s.qps.iter().position(|q| Arc::ptr_eq(q, qp)) {
            let q = s.qps.swap_remove(n);
            self.sources_version.fetch_add(1, Ordering::Release);
            for _ in 0..s.waits {
                q.wait_ends();
            }
        }
        self.nsources.store(s.qps.len(), Ordering::Release);
    }

    /// Polls the QPs that report here; false when there are none. They are taken out of the
    /// lock first: a completion goes to its EP's lock, which an EP attaching a QP holds while
    /// it comes here.
    ///
    /// With `catch` (the consumer's `DAT_EVENT`, valid for a write), the first event found is
    /// written there rather than queued, when nothing was queued before it.
    #[inline]
    fn poll_sources(&self, catch: *mut DAT_EVENT) -> Polling {
        if self.nsources.load(Ordering::Acquire) == 0 {
            return Polling::NoSources;
        }
        self.poll_each_source(catch)
    }

    #[inline(never)]
    fn poll_each_source(&self, catch: *mut DAT_EVENT) -> Polling {
        // Another thread dequeuing here polls these QPs now (as each QP's own turn would send
        // us away too).
        let Some(mut p) = self.polled.try_lock() else { return Polling::Polled };
        // No catch where a proxy agent may run in the poll: a dequeue it makes here would find
        // the queue without the caught event, and take a later one of the same EP before it.
        let catch = if cno::agents() { std::ptr::null_mut() } else { catch };
        // Only the holder of `polled` sets the catch, so these are plain stores.
        let mut catching = (!catch.is_null()).then(|| {
            self.catch_out.store(catch, Ordering::Relaxed);
            self.catch_thread.store(pin::local().addr(), Ordering::Relaxed);
            Catching { evd: self, out: catch, done: false }
        });
        if p.version != self.sources_version.load(Ordering::Acquire) {
            let s = self.sources.lock();
            p.version = self.sources_version.load(Ordering::Acquire);
            p.qps.clear();
            p.qps.extend(s.qps.iter().map(Arc::downgrade));
        }
        for q in &p.qps {
            if let Some(q) = q.upgrade() {
                q.poll();
            }
        }
        if let Some(c) = &mut catching {
            c.done = true;
        }
        if p.qps.is_empty() {
            Polling::NoSources
        } else if !catch.is_null() && self.catch_out.load(Ordering::Relaxed).is_null() {
            Polling::Caught
        } else {
            Polling::Polled
        }
    }

    /// The consumer's `DAT_EVENT` of a dequeue polling on this thread, taken (one event is
    /// caught per dequeue); null when there is none.
    #[inline]
    fn take_catch(&self) -> *mut DAT_EVENT {
        // Only the thread named here reads or changes `catch_out` while it is named, and it
        // stays named until its dequeue is over (so the pointer is still the consumer's).
        if self.catch_thread.load(Ordering::Relaxed) != pin::local().addr() || cno::agents() {
            return std::ptr::null_mut();
        }
        self.catch_out.swap(std::ptr::null_mut(), Ordering::Relaxed)
    }

    /// The event a poll caught in `out` and then unwound (its dequeue reports an error, not
    /// the event) goes back before what was queued after it, and waiters hear of it again.
    #[cold]
    #[inline(never)]
    fn give_back(&self, out: *mut DAT_EVENT) {
        // SAFETY: the consumer's DAT_EVENT, written by the catch; its dequeue is unwinding.
        let event = unsafe { out.read() };
        let (cno, wake) = {
            let mut s = self.lock();
            if s.queue.len() >= s.qlen as usize {
                drop(s);
                return self.overflowed();
            }
            s.queue.push_front(Event(event));
            self.set_queued(&s);
            (if s.enabled { s.cno.clone() } else { None }, s.asleep)
        };
        if wake {
            self.cond.notify_all();
        }
        if let Some(c) = cno {
            cno::trigger(&c, self.handle);
        }
    }

    /// Delivers an event as a notification event. Returns false when the queue was full (the
    /// event is dropped and the overflow is reported on the IA's async EVD).
    pub fn post(&self, event: DAT_EVENT) -> bool {
        self.post_as(event, true)
    }

    /// Delivers an event; `notify` false queues it without notification: it wakes no waiter
    /// and triggers no CNO (a later notification event, or a new wait, finds it queued).
    pub fn post_as(&self, mut event: DAT_EVENT, notify: bool) -> bool {
        event.evd_handle = self.handle as DAT_EVD_HANDLE;
        let (cno, wake) = {
            let mut s = self.lock();
            if s.queue.len() >= s.qlen as usize {
                drop(s);
                self.overflowed();
                return false;
            }
            // Only with nothing queued before it may an event skip the queue; otherwise the
            // dequeue polling on this thread (if any) takes the oldest one from the queue.
            let catch = if s.queue.is_empty() { self.take_catch() } else { std::ptr::null_mut() };
            if catch.is_null() {
                self.push(&mut s, Event(event));
            } else {
                // Queued and at once taken by the dequeue polling on this thread: one copy,
                // straight to the consumer.
                // SAFETY: the consumer's DAT_EVENT, valid for a write until its dequeue returns
                // (`poll_each_source`, on this thread, still under way).
                unsafe { put(catch, event) };
            }
            s.counts.queued(event.event_number);
            if !notify {
                return true;
            }
            s.notices = s.notices.wrapping_add(1);
            (if s.enabled { s.cno.clone() } else { None }, s.asleep)
        };
        // Only a sleeping waiter needs waking (a futex call per event otherwise), and after the
        // lock is given back, so that it does not wake into a held lock. It reads the queue and
        // the notice count under the lock, so it cannot miss what was queued above.
        if wake {
            self.cond.notify_all();
        }
        if let Some(c) = cno {
            cno::trigger(&c, self.handle);
        }
        true
    }

    /// Whether one more event fits now, so that a caller can refuse what the event would be
    /// for before it makes anything for it. When it does not, the overflow is reported on the
    /// IA's async EVD, as for a post that finds the queue full. A post after it may still find
    /// the queue full (events posted in the meantime): its caller must undo what it made then.
    pub fn admits(&self) -> bool {
        let full = {
            let s = self.lock();
            s.queue.len() >= s.qlen as usize
        };
        if full {
            self.overflowed();
        }
        !full
    }

    fn overflowed(&self) {
        let async_handle = self.ia.async_evd.load(Ordering::SeqCst);
        if async_handle == self.handle {
            return;
        }
        if let Ok(async_evd) = evd(async_handle as DAT_EVD_HANDLE) {
            let mut ev = DAT_EVENT { event_number: DAT_ASYNC_ERROR_EVD_OVERFLOW, ..Default::default() };
            ev.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: self.handle as DAT_HANDLE, reason: 0 };
            if async_evd.post(ev) {
                self.ia.counts.async_event(DAT_ASYNC_ERROR_EVD_OVERFLOW);
            }
        }
    }
}

impl Object for Evd {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_EVD
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        destroy(self)
    }
    fn cell_released(&self) {
        self.lock().owns_cell = false;
    }
}

impl table::Pinnable for Evd {
    const HANDLE_TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_EVD;
}

/// The EVD `handle` names, for the length of a call (see [`table::pin`]).
pub fn pinned(local: &Local, handle: DAT_EVD_HANDLE) -> Option<table::Pinned<Evd>> {
    table::pin(local, handle as usize)
}

/// [`pinned`] for a dequeue whose handle [`nothing_to_take`] has already found to be one of
/// the table's cells (`None` when it is not, or was not looked at).
#[inline]
pub fn pinned_found(local: &Local, found: Found) -> Option<table::Pinned<Evd>> {
    table::pin_listed(local, found.listed()?)
}

/// Runs `f` on the EVD `handle` names: pinned, or looked up when it cannot be.
fn with_evd<R>(handle: DAT_EVD_HANDLE, f: impl FnOnce(&Evd) -> Result<R, DAT_RETURN>) -> Result<R, DAT_RETURN> {
    match pinned(&pin::local(), handle) {
        Some(e) => f(&e),
        None => f(&*evd(handle)?),
    }
}

impl cno::Source for Evd {
    fn handle(&self) -> usize {
        self.handle
    }
    fn ready(&self) -> bool {
        let st = self.lock();
        st.enabled && !st.queue.is_empty()
    }
}

pub fn evd(handle: DAT_EVD_HANDLE) -> Result<Arc<Evd>, DAT_RETURN> {
    table::lookup(handle, DAT_INVALID_HANDLE_EVD_REQUEST)
}

/// The async EVD of some open IA of the built-in provider `b` (for DAT_EVD_ASYNC_EXISTS).
pub fn async_evd_of(b: &Builtin) -> Option<Arc<Evd>> {
    table::all_of::<Ia>()
        .into_iter()
        .filter(|ia| core::ptr::eq(ia.builtin, b))
        .find_map(|ia| table::get_as::<Evd>(ia.async_evd.load(Ordering::SeqCst) as DAT_HANDLE))
}

/// The event number of the watermark events (an SRQ below its low watermark, an EP above its
/// soft high watermark). DAT defines no event number of its own for them, only their reasons
/// (`DAT_SRQ_LOW_WATERMARK_EVENT`, `DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT`, both 2) in the
/// asynchronous error data, whose `dat_handle` names the SRQ or the EP; the event carries them
/// under the general asynchronous number, which is not an error of the provider.
pub const WATERMARK_EVENT: DAT_EVENT_NUMBER = DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR;

/// Posts an asynchronous event about `handle` on the IA's async EVD, if it has one.
pub fn post_async(ia: &Ia, number: DAT_EVENT_NUMBER, handle: usize, reason: DAT_COUNT) {
    let async_handle = ia.async_evd.load(Ordering::SeqCst);
    if let Ok(e) = evd(async_handle as DAT_EVD_HANDLE) {
        let mut ev = DAT_EVENT { event_number: number, ..Default::default() };
        ev.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: handle as DAT_HANDLE, reason };
        if e.post(ev) {
            ia.counts.async_event(number);
        }
    }
}

/// Posts events in order on an EVD, if there is one.
pub fn post_all(evd: Option<Arc<Evd>>, events: Vec<DAT_EVENT>) {
    if let Some(evd) = evd {
        for ev in events {
            evd.post(ev);
        }
    }
}

/// Builds and publishes an EVD (also used for an IA's own async EVD).
pub fn create_object(ia: &Arc<Ia>, qlen: DAT_COUNT, cno: Option<Arc<Cno>>, flags: DAT_EVD_FLAGS) -> Result<Arc<Evd>, DAT_RETURN> {
    if qlen <= 0 || qlen as u64 > u64::from(ia.dev.limits().max_cqe) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    if flags == 0 || flags & !VALID_FLAGS != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if let Some(c) = &cno {
        c.users.fetch_add(1, Ordering::SeqCst);
    }
    let handle = table::reserve(ia.provider());
    let words = table::words(handle);
    // A device whose QPs are polled has completions an empty queue does not show.
    let qps_polled = ia.dev.polled_qps();
    let must_look = if qps_polled { MUST_LOOK } else { 0 };
    words[0].store(must_look, Ordering::Release);
    let e = Arc::new(Evd {
        handle,
        ia: ia.clone(),
        flags,
        state: Lock::new(EvdState {
            queue: Ring::default(),
            qlen,
            enabled: true,
            waitable: true,
            unwaits: 0,
            waiter: false,
            asleep: false,
            cno,
            notices: 0,
            owns_cell: true,
            counts: EvdCounts::new(words[1].load(Ordering::Relaxed)),
        }),
        cond: Cond::new(),
        users: AtomicU32::new(0),
        solicited_streams: AtomicU32::new(0),
        queued: AtomicUsize::new(0),
        words,
        must_look,
        qps_polled,
        sources: Lock::new(Sources::default()),
        nsources: AtomicUsize::new(0),
        sources_version: AtomicU64::new(0),
        polled: Lock::new(Polled::default()),
        catch_thread: AtomicUsize::new(0),
        catch_out: AtomicPtr::new(std::ptr::null_mut()),
        context: Mutex::new(0),
    });
    table::insert(handle, e.clone());
    if let Some(c) = e.lock().cno.clone() {
        cno::attach(&c, &e);
    }
    Ok(e)
}

pub fn create(
    ia_handle: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno_handle: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
    out: *mut DAT_EVD_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let cno = if cno_handle.is_null() { None } else { Some(cno::cno(cno_handle)?) };
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    let e = create_object(&ia, qlen, cno, flags)?;
    // SAFETY: checked non-NULL.
    unsafe { put(out, e.handle as DAT_EVD_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_EVD_HANDLE, mask: DAT_EVD_PARAM_MASK, param: *mut DAT_EVD_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_EVD_FIELD_ALL), param)?;
    let s = e.lock();
    let state = (if s.enabled { DAT_EVD_STATE_ENABLED } else { DAT_EVD_STATE_DISABLED })
        | (if s.waitable { DAT_EVD_STATE_WAITABLE } else { DAT_EVD_STATE_UNWAITABLE });
    let p = param;
    // SAFETY: the consumer's non-NULL DAT_EVD_PARAM; only the fields asked for are written.
    unsafe {
        if mask & DAT_EVD_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(e.ia.consumer_handle());
        }
        if mask & DAT_EVD_FIELD_EVD_QLEN != 0 {
            addr_of_mut!((*p).evd_qlen).write(s.qlen);
        }
        if mask & DAT_EVD_FIELD_EVD_STATE != 0 {
            addr_of_mut!((*p).evd_state).write(state);
        }
        if mask & DAT_EVD_FIELD_CNO != 0 {
            addr_of_mut!((*p).cno_handle).write(s.cno.as_ref().map_or(core::ptr::null_mut(), |c| c.handle as DAT_CNO_HANDLE));
        }
        if mask & DAT_EVD_FIELD_EVD_FLAGS != 0 {
            addr_of_mut!((*p).evd_flags).write(e.flags);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn modify_cno(handle: DAT_EVD_HANDLE, cno_handle: DAT_CNO_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    let new = if cno_handle.is_null() { None } else { Some(cno::cno(cno_handle)?) };
    if let Some(c) = &new {
        c.users.fetch_add(1, Ordering::SeqCst);
    }
    let old = std::mem::replace(&mut e.lock().cno, new.clone());
    if let Some(c) = old {
        cno::detach(&c, e.handle);
        c.users.fetch_sub(1, Ordering::SeqCst);
    }
    if let Some(c) = new {
        cno::attach(&c, &e);
    }
    Ok(DAT_SUCCESS)
}

pub fn set_enabled(handle: DAT_EVD_HANDLE, enabled: bool) -> Result<DAT_RETURN, DAT_RETURN> {
    evd(handle)?.lock().enabled = enabled;
    Ok(DAT_SUCCESS)
}

pub fn set_waitable(handle: DAT_EVD_HANDLE, waitable: bool) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    {
        let mut s = e.lock();
        s.waitable = waitable;
        if !waitable {
            s.unwaits = s.unwaits.wrapping_add(1);
        }
    }
    e.cond.notify_all();
    Ok(DAT_SUCCESS)
}

pub fn post_se(handle: DAT_EVD_HANDLE, event: *const DAT_EVENT) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    if e.flags & DAT_EVD_SOFTWARE_FLAG == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    }
    if event.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    // SAFETY: the consumer's event.
    let ev = unsafe { event.read() };
    if ev.event_number != DAT_SOFTWARE_EVENT {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    {
        let s = e.lock();
        if s.queue.len() >= s.qlen as usize {
            return Err(dat_error(DAT_QUEUE_FULL, 0));
        }
    }
    e.post(ev);
    Ok(DAT_SUCCESS)
}

pub fn resize(handle: DAT_EVD_HANDLE, qlen: DAT_COUNT) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    if qlen <= 0 || qlen as u64 > u64::from(e.ia.dev.limits().max_cqe) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let mut s = e.lock();
    if (qlen as usize) < s.queue.len() {
        return Err(dat_error(DAT_INVALID_STATE, 0));
    }
    s.qlen = qlen;
    Ok(DAT_SUCCESS)
}

pub fn free(handle: DAT_EVD_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let e = evd(handle)?;
    if e.users.load(Ordering::SeqCst) != 0 || e.ia.async_evd.load(Ordering::SeqCst) == e.handle {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE));
    }
    if e.lock().waiter {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER));
    }
    if table::remove_then(e.handle, |_| destroy(&e)).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
    }
    Ok(DAT_SUCCESS)
}

pub fn destroy(e: &Evd) {
    let cno = {
        let mut s = e.lock();
        // What it counted stays in its IA's totals (DAT2_STATS).
        e.ia.counts.add_gone_evd(&e.counter_values(&mut s, None));
        s.waitable = false;
        s.unwaits = s.unwaits.wrapping_add(1);
        s.cno.take()
    };
    e.cond.notify_all();
    if let Some(c) = cno {
        cno::detach(&c, e.handle);
        c.users.fetch_sub(1, Ordering::SeqCst);
    }
}
