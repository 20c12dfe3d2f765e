//! The exported functions called as C calls them, on the built-in dat2-soft IA.
//!
//! A panic forced inside the built-in data path (`crate::builtin::fault`, test builds only),
//! reached through `dat_ep_post_send` and `dat_evd_dequeue`, whose handles the API resolves
//! with a pin and whose built-in bodies it calls directly (no provider table, no second
//! guard in between): the call must return exactly DAT_INTERNAL_ERROR, the panic must go to
//! the debug log (not stderr), the pin must be given back, and the next call must work. Were
//! the guard not there, the panic would unwind out of an `extern "C"` function, which aborts
//! the whole test process.

use core::mem::MaybeUninit;
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::Duration;

use super::cno::{dat_cno_create, dat_cno_free};
use super::ep::{dat_ep_create, dat_ep_free, dat_ep_post_send};
use super::evd::{dat_evd_create, dat_evd_dequeue, dat_evd_free, dat_evd_post_se};
use super::ia::{dat_ia_close, dat_ia_openv};
use super::pz::dat_pz_create;
use crate::abi::*;
use crate::builtin::fault::{self, Point};
use crate::ffi::PANICS_LOGGED;
use crate::{builtin, device};

/// An IA on dat2-soft (always offered, after any dat.conf's entries), a PZ, a DTO EVD and a
/// connection EVD, and an EP on them, never connected.
struct Soft {
    ia: DAT_IA_HANDLE,
    evd: DAT_EVD_HANDLE,
    ep: DAT_EP_HANDLE,
}

fn open_soft() -> Soft {
    let mut async_evd: DAT_EVD_HANDLE = core::ptr::null_mut();
    let mut ia: DAT_IA_HANDLE = core::ptr::null_mut();
    let rc = dat_ia_openv(c"dat2-soft".as_ptr(), 8, &mut async_evd, &mut ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
    assert_eq!(rc, DAT_SUCCESS, "dat_ia_openv(dat2-soft)");
    let mut pz: DAT_PZ_HANDLE = core::ptr::null_mut();
    assert_eq!(dat_pz_create(ia, &mut pz), DAT_SUCCESS, "dat_pz_create");
    let (mut evd, mut conn): (DAT_EVD_HANDLE, DAT_EVD_HANDLE) = (core::ptr::null_mut(), core::ptr::null_mut());
    assert_eq!(dat_evd_create(ia, 16, core::ptr::null_mut(), DAT_EVD_DTO_FLAG, &mut evd), DAT_SUCCESS, "dat_evd_create(DTO)");
    assert_eq!(dat_evd_create(ia, 16, core::ptr::null_mut(), DAT_EVD_CONNECTION_FLAG, &mut conn), DAT_SUCCESS, "dat_evd_create(CONN)");
    let mut ep: DAT_EP_HANDLE = core::ptr::null_mut();
    assert_eq!(dat_ep_create(ia, pz, evd, evd, conn, core::ptr::null(), &mut ep), DAT_SUCCESS, "dat_ep_create");
    Soft { ia, evd, ep }
}

fn post_send(ep: DAT_EP_HANDLE) -> DAT_RETURN {
    dat_ep_post_send(ep, 0, core::ptr::null_mut(), DAT_DTO_COOKIE { as_64: 7 }, DAT_COMPLETION_DEFAULT_FLAG)
}

fn dequeue(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    let mut event = MaybeUninit::<DAT_EVENT>::uninit();
    dat_evd_dequeue(evd, event.as_mut_ptr())
}

/// Runs `call` with a panic armed at `point`: it must have fired (and been logged, not
/// printed), and the call must have returned exactly DAT_INTERNAL_ERROR with no pin left.
fn forced(point: Point, call: impl FnOnce() -> DAT_RETURN) {
    let logged = PANICS_LOGGED.with(|n| n.get());
    fault::arm(point);
    let rc = call();
    assert!(!fault::armed(), "the forced panic at {point:?} was not reached");
    assert_eq!(rc, dat_error(DAT_INTERNAL_ERROR, 0), "a panic at {point:?}: 0x{rc:08x}");
    assert_eq!(PANICS_LOGGED.with(|n| n.get()), logged + 1, "the panic at {point:?} did not go to the debug log");
    // The unwind dropped the call's pin: this thread can pin again.
    assert!(crate::util::pin::pin(0x10).is_some(), "a pin was left held after the panic at {point:?}");
}

#[test]
fn a_panic_in_a_post_or_a_dequeue_returns_dat_internal_error() {
    let s = open_soft();
    // The handles take the pinned path (the one without a guard of its own).
    assert!(crate::builtin::ep::pinned(&crate::util::pin::local(), s.ep).is_some(), "the EP does not pin");
    assert!(crate::builtin::evd::pinned(&crate::util::pin::local(), s.evd).is_some(), "the EVD does not pin");

    // The normal answers first: a send on an EP never connected, a dequeue of an idle EVD.
    let unconnected = dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
    assert_eq!(post_send(s.ep), unconnected);
    assert_eq!(dequeue(s.evd), DAT_QUEUE_EMPTY);

    forced(Point::Post, || post_send(s.ep));
    // Nothing was poisoned or left behind: the same calls give the same answers, twice.
    for _ in 0..2 {
        assert_eq!(post_send(s.ep), unconnected, "dat_ep_post_send after the panic");
        assert_eq!(dequeue(s.evd), DAT_QUEUE_EMPTY, "dat_evd_dequeue after the panic in the post");
    }

    // An empty EVD's dequeue is mostly answered before the guard, by loads that cannot
    // panic: the panic is forced in the dequeue of an event, which goes the whole way.
    let mut sw: DAT_EVD_HANDLE = core::ptr::null_mut();
    assert_eq!(dat_evd_create(s.ia, 4, core::ptr::null_mut(), DAT_EVD_SOFTWARE_FLAG, &mut sw), DAT_SUCCESS);
    let se = DAT_EVENT { event_number: DAT_SOFTWARE_EVENT, ..Default::default() };
    assert_eq!(dat_evd_post_se(sw, &se), DAT_SUCCESS);
    forced(Point::Dequeue, || dequeue(sw));
    // The event is still there, and taken once.
    assert_eq!(dequeue(sw), DAT_SUCCESS, "dat_evd_dequeue after the panic");
    for _ in 0..2 {
        assert_eq!(dequeue(sw), DAT_QUEUE_EMPTY, "dat_evd_dequeue after the panic");
        assert_eq!(dequeue(s.evd), DAT_QUEUE_EMPTY, "dat_evd_dequeue of another EVD after the panic");
        assert_eq!(post_send(s.ep), unconnected, "dat_ep_post_send after the panic in the dequeue");
    }

    // A free waits for the calls that pinned the EP: from another thread it must not find
    // the panicked calls' pins still held (it would wait for ever).
    let (tx, rx) = mpsc::channel();
    let ep = s.ep as usize;
    std::thread::spawn(move || {
        let _ = tx.send(dat_ep_free(ep as DAT_EP_HANDLE));
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(DAT_SUCCESS), "dat_ep_free from another thread");
    assert_eq!(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/// A QP of no device whose poll delivers, once, completions of one EP to an EVD: what a
/// verbs QP does when a dequeue polls it (the soft device's QPs are not polled).
struct Completions {
    evd: Weak<builtin::evd::Evd>,
    ep: DAT_EP_HANDLE,
    cookies: Mutex<Vec<u64>>,
    /// The first poll panics after delivering them (a bug of the device's dispatch, say).
    panics: std::sync::atomic::AtomicBool,
}

// SAFETY: the EP handle is a plain value, never dereferenced.
unsafe impl Send for Completions {}
// SAFETY: as above.
unsafe impl Sync for Completions {}

fn completion(ep: DAT_EP_HANDLE, cookie: u64) -> DAT_EVENT {
    let mut ev = DAT_EVENT { event_number: DAT_DTO_COMPLETION_EVENT, ..Default::default() };
    ev.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: ep,
        user_cookie: DAT_DTO_COOKIE { as_64: cookie },
        status: DAT_DTO_SUCCESS,
        transfered_length: 0,
        operation: DAT_DTO_SEND,
        rmr_context: 0,
    };
    ev
}

fn cookie(ev: &DAT_EVENT) -> u64 {
    assert_eq!(ev.event_number, DAT_DTO_COMPLETION_EVENT);
    // SAFETY: a DTO completion event carries the DTO completion data.
    unsafe { ev.event_data.dto_completion_event_data.user_cookie.as_64 }
}

impl device::Qp for Completions {
    fn connect(&self, _: std::net::SocketAddr, _: u64, _: &[u8], _: Option<Duration>) -> Result<(), device::DevError> {
        unimplemented!()
    }
    fn post_send(&self, _: &device::SendWr) -> Result<(), device::DevError> {
        unimplemented!()
    }
    fn post_recv(&self, _: u64, _: device::Sges) -> Result<(), device::DevError> {
        unimplemented!()
    }
    fn poll(&self) {
        let cookies = std::mem::take(&mut *self.cookies.lock().unwrap());
        let evd = self.evd.upgrade().expect("the EVD outlives its source");
        for c in cookies {
            assert!(evd.post(completion(self.ep, c)), "completion {c} overflowed");
        }
        if self.panics.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a poll panics (test)");
        }
    }
    fn disconnect(&self, _: bool) {}
    fn bind_mw(&self, _: u64, _: &device::Mw, _: &device::Mr, _: u64, _: u64, _: device::Access, _: bool) -> Result<u32, device::DevError> {
        unimplemented!()
    }
    fn unbind_mw(&self, _: u64, _: &device::Mw) {}
    fn remote(&self) -> Option<std::net::SocketAddr> {
        None
    }
    fn local_port(&self) -> u16 {
        0
    }
    fn path(&self) -> &'static str {
        "test"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// An EVD of `qlen` on `cno` whose one source delivers completions `cookies` of `ep` when
/// polled; the source comes back for `remove_source`.
fn evd_with_source(
    ia: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno: DAT_CNO_HANDLE,
    ep: DAT_EP_HANDLE,
    cookies: &[u64],
    panics: bool,
) -> (DAT_EVD_HANDLE, Arc<builtin::evd::Evd>, Arc<dyn device::Qp>) {
    let mut h: DAT_EVD_HANDLE = core::ptr::null_mut();
    assert_eq!(dat_evd_create(ia, qlen, cno, DAT_EVD_DTO_FLAG, &mut h), DAT_SUCCESS);
    let e = builtin::evd::evd(h).expect("the builtin EVD");
    let qp: Arc<dyn device::Qp> =
        Arc::new(Completions { evd: Arc::downgrade(&e), ep, cookies: Mutex::new(cookies.to_vec()), panics: panics.into() });
    e.add_source(&qp);
    (h, e, qp)
}

/// One dequeue of the whole way (the soft EVD's cell answers an empty dequeue without a poll
/// seven times in eight); true when it took an event, its cookie then added to `taken`.
fn dequeue_into(h: DAT_EVD_HANDLE, taken: &Mutex<Vec<u64>>) -> bool {
    let mut event = MaybeUninit::<DAT_EVENT>::uninit();
    match builtin::evd::dequeue(h, event.as_mut_ptr()) {
        Ok(DAT_SUCCESS) => {
            // SAFETY: written by the successful dequeue.
            taken.lock().unwrap().push(cookie(unsafe { event.assume_init_ref() }));
            true
        }
        rc => {
            assert_eq!(rc, Ok(DAT_QUEUE_EMPTY));
            false
        }
    }
}

/// A dequeue that polls its EVD's source takes the first completion (written straight to it
/// when nothing was queued), and the next dequeues the rest, in order, each once; the
/// counters count each as dequeued.
#[test]
fn a_dequeues_poll_hands_out_its_sources_completions_in_order() {
    let s = open_soft();
    // Room for all three: with a proxy agent anywhere in the process (another test's) the
    // first is queued too.
    let (h, e, qp) = evd_with_source(s.ia, 3, core::ptr::null_mut(), s.ep, &[1, 2, 3], false);
    let taken = Mutex::new(Vec::new());
    assert!(dequeue_into(h, &taken), "the dequeue that polled found nothing");
    assert_eq!(*taken.lock().unwrap(), [1]);
    while dequeue_into(h, &taken) {}
    assert_eq!(*taken.lock().unwrap(), [1, 2, 3]);
    let v = e.counter_values(&mut e.lock(), None);
    assert_eq!(v[DCNT_EVD_DEQUEUE_FOUND as usize], 3);
    assert_eq!(v[DCNT_EVD_DTO_CALLBACK as usize], 3);
    e.remove_source(&qp);
    drop(e);
    assert_eq!(dat_evd_free(h), DAT_SUCCESS);
    assert_eq!(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/// The cookies a proxy agent took, each time it was called, with one dequeue of the EVD.
unsafe extern "C" fn agent_dequeues(taken: DAT_PVOID, evd: DAT_EVD_HANDLE) {
    // SAFETY: the test's list, alive while its CNO is.
    let taken = unsafe { &*(taken as *const Mutex<Vec<u64>>) };
    let mut event = MaybeUninit::<DAT_EVENT>::uninit();
    if dat_evd_dequeue(evd, event.as_mut_ptr()) == DAT_SUCCESS {
        // SAFETY: written by the successful dequeue.
        taken.lock().unwrap().push(cookie(unsafe { event.assume_init_ref() }));
    }
}

/// A dequeue polls its EVD's source, whose completions (of one EP) each call the EVD's CNO's
/// proxy agent on the same thread, and the agent dequeues too: between them they must get
/// the completions in order. A dequeue that kept the first completion for itself while the
/// agent took the second from the queue would hand them out backwards.
#[test]
fn a_proxy_agent_dequeuing_in_a_dequeues_poll_keeps_the_order() {
    let s = open_soft();
    let taken = Mutex::new(Vec::<u64>::new());
    let agent =
        DAT_OS_WAIT_PROXY_AGENT { instance_data: &taken as *const Mutex<Vec<u64>> as DAT_PVOID, proxy_agent_func: Some(agent_dequeues) };
    let mut cno: DAT_CNO_HANDLE = core::ptr::null_mut();
    assert_eq!(dat_cno_create(s.ia, agent, &mut cno), DAT_SUCCESS);
    let (h, e, qp) = evd_with_source(s.ia, 8, cno, s.ep, &[1, 2], false);
    while dequeue_into(h, &taken) {}
    assert_eq!(*taken.lock().unwrap(), [1, 2], "the EP's completions, in the order the dequeues took them");
    e.remove_source(&qp);
    drop(e);
    assert_eq!(dat_evd_free(h), DAT_SUCCESS);
    assert_eq!(dat_cno_free(cno), DAT_SUCCESS);
    assert_eq!(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/// A poll that panics after the first completion was written to the dequeue's caller: the
/// dequeue returns DAT_INTERNAL_ERROR, so that completion must still be there for the next
/// dequeue, ahead of the one queued after it, and not count as dequeued.
#[test]
fn a_panic_in_a_dequeues_poll_loses_no_completion() {
    let s = open_soft();
    let (h, e, qp) = evd_with_source(s.ia, 4, core::ptr::null_mut(), s.ep, &[1, 2], true);
    let mut event = MaybeUninit::<DAT_EVENT>::uninit();
    let rc = crate::ffi::guard_try(|| builtin::evd::dequeue(h, event.as_mut_ptr()));
    assert_eq!(rc, dat_error(DAT_INTERNAL_ERROR, 0), "the dequeue whose poll panicked");
    let v = e.counter_values(&mut e.lock(), None);
    assert_eq!(v[DCNT_EVD_DEQUEUE_FOUND as usize], 0, "nothing was dequeued");
    let taken = Mutex::new(Vec::new());
    while dequeue_into(h, &taken) {}
    assert_eq!(*taken.lock().unwrap(), [1, 2]);
    e.remove_source(&qp);
    drop(e);
    assert_eq!(dat_evd_free(h), DAT_SUCCESS);
    assert_eq!(dat_ia_close(s.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}
