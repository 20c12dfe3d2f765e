//! Service points. A PSP or RSP owns its connection qualifier on its IA: the device listens
//! for it ([`crate::device::IaPort::listen`]; how a qualifier maps to ports is the device's).
//! Connection requests arriving there become CRs ([`super::cr`]); handing one to another PSP
//! (`dat_cr_handoff`) is here too.
//!
//! A service point exists entirely or not at all ([`Listening`]). The device listens before
//! the service point's handle is published (a PSP made by `dat_psp_create_any` learns its
//! qualifier from the listener), so a request that arrives in between is held, and delivered
//! once the handle is published, never refused unseen. Its free returns only once no request
//! is being delivered to it any more and the listener is closed: the qualifier is free again
//! at once, and nothing reaches a service point whose free has returned.

use core::ptr::addr_of_mut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use super::cr::{self, ForEp};
use super::ep::{self, Ep};
use super::evd::Evd;
use super::ia::{self, Ia};
use super::put;
use super::table::{self, Object};
use crate::abi::*;
use crate::device::{DevError, ListenEvents, Listener, PendingConnection};
use crate::util::sync::{CondvarExt, MutexExt};

pub struct Psp {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: Arc<Evd>,
    pub flags: DAT_PSP_FLAGS,
    listening: Listening,
    pub context: Mutex<u64>,
}

pub struct Rsp {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: Arc<Evd>,
    pub ep: Arc<Ep>,
    listening: Listening,
    pub context: Mutex<u64>,
}

impl Psp {
    /// The EP a request arriving here is for.
    fn for_ep(&self) -> ForEp {
        if self.flags == DAT_PSP_PROVIDER_FLAG {
            ForEp::Provider
        } else {
            ForEp::Consumer
        }
    }
}

impl Object for Psp {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_PSP
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        self.listening.end();
        self.evd.users.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Object for Rsp {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_RSP
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        destroy_rsp(self)
    }
}

fn cr_evd(ia: &Arc<Ia>, handle: DAT_EVD_HANDLE) -> Result<Arc<Evd>, DAT_RETURN> {
    let e = table::lookup::<Evd>(handle, DAT_INVALID_HANDLE_EVD_CR)?;
    if !Arc::ptr_eq(&e.ia, ia) || e.flags & DAT_EVD_CR_FLAG == 0 {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR));
    }
    Ok(e)
}

/// Requests held while a service point is being made, at most: more are refused (the device
/// keeps its own bound on connections it is still reading, see the soft device's listener).
const HELD_MAX: usize = 128;

/// Where a service point's connection requests stand.
enum Phase {
    /// Listening, the handle not published yet: requests are held.
    Opening,
    /// Published under this handle: requests are delivered.
    Open(usize),
    /// Its free has begun: requests are refused.
    Closed,
}

struct GateState {
    phase: Phase,
    /// The requests that arrived while `Opening`.
    held: Vec<Arc<dyn PendingConnection>>,
    /// The threads delivering a request to the service point now.
    delivering: Vec<ThreadId>,
}

/// Passes the connection requests arriving at a service point on to the built-in layer, in
/// the order of its life: held, delivered, refused (see the module text).
struct SpEvents {
    state: Mutex<GateState>,
    /// Signalled when a delivery ends.
    delivered: Condvar,
}

/// A delivery under way: its thread is listed in `delivering` until it ends, however it ends.
struct Delivering<'a> {
    events: &'a SpEvents,
    thread: ThreadId,
}

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        let mut s = self.events.state.locked();
        if let Some(k) = s.delivering.iter().position(|t| *t == self.thread) {
            s.delivering.swap_remove(k);
        }
        drop(s);
        self.events.delivered.notify_all();
    }
}

impl SpEvents {
    fn new() -> SpEvents {
        SpEvents {
            state: Mutex::new(GateState { phase: Phase::Opening, held: Vec::new(), delivering: Vec::new() }),
            delivered: Condvar::new(),
        }
    }

    /// The service point is published under `sp`: the requests held until now are delivered.
    fn open(&self, sp: usize) {
        let thread = std::thread::current().id();
        let held = {
            let mut s = self.state.locked();
            if !matches!(s.phase, Phase::Opening) {
                return;
            }
            s.phase = Phase::Open(sp);
            s.delivering.push(thread);
            std::mem::take(&mut s.held)
        };
        let _delivering = Delivering { events: self, thread };
        for conn in held {
            deliver(sp, conn);
        }
    }

    /// No request reaches the service point any more: returns once those being delivered
    /// by other threads have arrived. A delivery of this very thread (consumer code, say a
    /// CNO's proxy agent, run inside it freed the service point) is not waited for.
    fn close(&self) {
        let me = std::thread::current().id();
        let held = {
            let mut s = self.state.locked();
            s.phase = Phase::Closed;
            while s.delivering.iter().any(|t| *t != me) {
                s = self.delivered.wait_locked(s);
            }
            std::mem::take(&mut s.held)
        };
        for conn in held {
            conn.reject(&[]);
        }
    }

    /// A delivery to the published service point begins on this thread (a handoff's): its
    /// free waits until the guard drops. None when it is not open.
    fn begin(&self) -> Option<Delivering<'_>> {
        let thread = std::thread::current().id();
        let mut s = self.state.locked();
        if !matches!(s.phase, Phase::Open(_)) {
            return None;
        }
        s.delivering.push(thread);
        Some(Delivering { events: self, thread })
    }
}

impl ListenEvents for SpEvents {
    fn request(&self, conn: Arc<dyn PendingConnection>) {
        let thread = std::thread::current().id();
        let sp = {
            let mut s = self.state.locked();
            match s.phase {
                Phase::Opening if s.held.len() < HELD_MAX => return s.held.push(conn),
                Phase::Open(sp) => {
                    s.delivering.push(thread);
                    sp
                }
                _ => {
                    drop(s);
                    return conn.reject(&[]);
                }
            }
        };
        let _delivering = Delivering { events: self, thread };
        deliver(sp, conn);
    }
}

/// A request arrived at the published service point `sp`: a CR for the consumer.
fn deliver(sp: usize, conn: Arc<dyn PendingConnection>) {
    let sp = table::get(sp as DAT_HANDLE);
    test_delay();
    if let Some(psp) = sp.clone().and_then(table::downcast::<Psp>) {
        cr::arrive(&psp.ia, psp.handle, psp.conn_qual, &psp.evd, psp.for_ep(), conn);
    } else if let Some(rsp) = sp.and_then(table::downcast::<Rsp>) {
        cr::arrive(&rsp.ia, rsp.handle, rsp.conn_qual, &rsp.evd, ForEp::Rsp(rsp.ep.clone()), conn);
    } else {
        conn.reject(&[]);
    }
}

/// `DAT2_TEST_SP_DELAY_MS` (at most 1000), for c-tests/dataxfer's service-point races only:
/// a pause between a service point's listen and its publication, and between a request's
/// arrival and its CR, as a thread start delayed on a loaded host makes them. Unset (and in a
/// secure-execution process, `util::env`) there is none.
fn test_delay() {
    static MS: OnceLock<u64> = OnceLock::new();
    let ms = *MS.get_or_init(|| crate::util::env::var("DAT2_TEST_SP_DELAY_MS").and_then(|v| v.trim().parse().ok()).unwrap_or(0).min(1000));
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// A service point's listener, from its listen to its free.
struct Listening {
    events: Arc<SpEvents>,
    /// Taken by [`Listening::end`]: the listener is closed by the free itself, never later by
    /// whoever drops the service point's last reference.
    listener: Mutex<Option<Box<dyn Listener>>>,
    conn_qual: DAT_CONN_QUAL,
}

impl Listening {
    /// Listens for a connection qualifier (0: one the device chooses), holding what arrives
    /// until [`Listening::open`].
    fn start(ia: &Ia, conn_qual: DAT_CONN_QUAL) -> Result<Listening, DAT_RETURN> {
        let events = Arc::new(SpEvents::new());
        let listener = ia.port.listen(conn_qual, events.clone()).map_err(|e| match e {
            DevError::InUse => dat_error(DAT_CONN_QUAL_IN_USE, 0),
            DevError::BadQualifier => dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2),
            DevError::NotSupported => dat_error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED),
            _ => dat_error(DAT_INSUFFICIENT_RESOURCES, 0),
        })?;
        test_delay();
        Ok(Listening { events, conn_qual: listener.conn_qual(), listener: Mutex::new(Some(listener)) })
    }

    /// The service point is published under `sp`.
    fn open(&self, sp: usize) {
        self.events.open(sp)
    }

    /// Ends the service point's listening: no request reaches it after this returns, and its
    /// qualifier is free. A second call finds nothing left to do.
    fn end(&self) {
        self.events.close();
        drop(self.listener.locked().take());
    }
}

fn new_psp(ia: Arc<Ia>, conn_qual: DAT_CONN_QUAL, evd: Arc<Evd>, flags: DAT_PSP_FLAGS) -> Result<(usize, DAT_CONN_QUAL), DAT_RETURN> {
    let listening = Listening::start(&ia, conn_qual)?;
    let conn_qual = listening.conn_qual;
    evd.users.fetch_add(1, Ordering::SeqCst);
    let handle = table::reserve(ia.provider());
    let psp = Arc::new(Psp { handle, ia, conn_qual, evd, flags, listening, context: Mutex::new(0) });
    table::insert(handle, psp.clone());
    psp.listening.open(handle);
    Ok((handle, conn_qual))
}

pub fn psp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let evd = cr_evd(&ia, evd)?;
    if !matches!(flags, DAT_PSP_CONSUMER_FLAG | DAT_PSP_PROVIDER_FLAG) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    // 0 is no qualifier (dat_psp_create_any asks for one); which others the device can name is
    // its own (Listening::start).
    if conn_qual == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let (handle, _) = new_psp(ia, conn_qual, evd, flags)?;
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_PSP_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn psp_create_any(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: *mut DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    if conn_qual.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let evd = cr_evd(&ia, evd)?;
    if !matches!(flags, DAT_PSP_CONSUMER_FLAG | DAT_PSP_PROVIDER_FLAG) {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    let (handle, port) = new_psp(ia.clone(), 0, evd, flags)?;
    ia.counts.bump(DCNT_IA_PSP_CREATE_ANY);
    // SAFETY: both checked non-NULL.
    unsafe {
        put(conn_qual, port);
        put(out, handle as DAT_PSP_HANDLE);
    }
    Ok(DAT_SUCCESS)
}

pub fn psp_query(handle: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let psp = table::lookup::<Psp>(handle, DAT_INVALID_HANDLE_PSP)?;
    super::query_args(u64::from(mask), u64::from(DAT_PSP_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_PSP_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(psp.ia.consumer_handle());
        }
        if mask & DAT_PSP_FIELD_CONN_QUAL != 0 {
            addr_of_mut!((*p).conn_qual).write(psp.conn_qual);
        }
        if mask & DAT_PSP_FIELD_EVD_HANDLE != 0 {
            addr_of_mut!((*p).evd_handle).write(psp.evd.handle as DAT_EVD_HANDLE);
        }
        if mask & DAT_PSP_FIELD_PSP_FLAGS != 0 {
            addr_of_mut!((*p).psp_flags).write(psp.flags);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn psp_free(handle: DAT_PSP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let psp = table::lookup::<Psp>(handle, DAT_INVALID_HANDLE_PSP)?;
    // Before the handle goes: a request being delivered has it still, and arrives first.
    psp.listening.end();
    if table::remove(psp.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
    }
    psp.evd.users.fetch_sub(1, Ordering::SeqCst);
    Ok(DAT_SUCCESS)
}

pub fn rsp_create(
    ia_handle: DAT_IA_HANDLE,
    conn_qual: DAT_CONN_QUAL,
    ep_handle: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    out: *mut DAT_RSP_HANDLE,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    let ep = ep::ep(ep_handle)?;
    if !Arc::ptr_eq(&ep.ia, &ia) {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    }
    let evd = cr_evd(&ia, evd)?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    // As psp_create.
    if conn_qual == 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    let rsp = {
        let mut i = ep.lock();
        let reserved = i.reserved_state()?;
        let listening = Listening::start(&ia, conn_qual)?;
        i.reserve(reserved);
        evd.users.fetch_add(1, Ordering::SeqCst);
        let handle = table::reserve(ia.provider());
        let rsp = Arc::new(Rsp { handle, ia, conn_qual, evd, ep: ep.clone(), listening, context: Mutex::new(0) });
        table::insert(handle, rsp.clone());
        rsp
    };
    // The requests held meanwhile are delivered without the EP's lock.
    rsp.listening.open(rsp.handle);
    // SAFETY: checked non-NULL.
    unsafe { put(out, rsp.handle as DAT_RSP_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn rsp_query(handle: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let rsp = table::lookup::<Rsp>(handle, DAT_INVALID_HANDLE_RSP)?;
    super::query_args(u64::from(mask), u64::from(DAT_RSP_FIELD_ALL), param)?;
    let p = param;
    // SAFETY: the consumer's non-NULL param; only the fields asked for are written.
    unsafe {
        if mask & DAT_RSP_FIELD_IA_HANDLE != 0 {
            addr_of_mut!((*p).ia_handle).write(rsp.ia.consumer_handle());
        }
        if mask & DAT_RSP_FIELD_CONN_QUAL != 0 {
            addr_of_mut!((*p).conn_qual).write(rsp.conn_qual);
        }
        if mask & DAT_RSP_FIELD_EVD_HANDLE != 0 {
            addr_of_mut!((*p).evd_handle).write(rsp.evd.handle as DAT_EVD_HANDLE);
        }
        if mask & DAT_RSP_FIELD_EP_HANDLE != 0 {
            addr_of_mut!((*p).ep_handle).write(rsp.ep.handle as DAT_EP_HANDLE);
        }
    }
    Ok(DAT_SUCCESS)
}

pub fn rsp_free(handle: DAT_RSP_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let rsp = table::lookup::<Rsp>(handle, DAT_INVALID_HANDLE_RSP)?;
    // As psp_free.
    rsp.listening.end();
    if table::remove(rsp.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
    }
    destroy_rsp(&rsp);
    Ok(DAT_SUCCESS)
}

/// Releases what an RSP holds: its listener, its EVD use, and its EP's reservation.
pub fn destroy_rsp(rsp: &Rsp) {
    rsp.listening.end();
    rsp.evd.users.fetch_sub(1, Ordering::SeqCst);
    rsp.ep.lock().unreserve();
}

/// `dat_cr_handoff`: hands the request to another PSP of the IA, listening on `conn_qual`.
pub fn cr_handoff(handle: DAT_CR_HANDLE, conn_qual: DAT_CONN_QUAL) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cr::cr(handle)?;
    let target = table::owned_by(c.ia.handle).into_iter().find_map(|(h, o)| match table::downcast::<Psp>(o) {
        Some(p) if h != c.sp && p.conn_qual == conn_qual => Some(p),
        _ => None,
    });
    let psp = target.ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2))?;
    // Through the target's gate, as a request from the wire: a PSP whose free has begun takes
    // nothing (as if it were gone already), and its free waits until this CR has arrived.
    let Some(_delivering) = psp.listening.events.begin() else {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    };
    if table::remove(c.handle).is_none() {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
    }
    // The new CR has no EP, whatever the PSP's flags; an EP made for the old one stays the
    // consumer's (dat_cr_handoff(3)).
    cr::arrive(&c.ia, psp.handle, conn_qual, &psp.evd, ForEp::Consumer, c.pending.clone());
    Ok(DAT_SUCCESS)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::SpEvents;
    use crate::device::{DevError, ListenEvents, PendingConnection};
    use crate::util::sync::MutexExt;

    /// A request that counts its rejections; `slow` makes a rejection take 100 ms, `then`
    /// runs inside it.
    #[derive(Default)]
    struct Conn {
        rejected: AtomicUsize,
        entered: AtomicBool,
        slow: bool,
        then: Option<Box<dyn Fn() + Send + Sync>>,
    }

    impl PendingConnection for Conn {
        fn private_data(&self) -> &[u8] {
            &[]
        }
        fn remote(&self) -> std::net::SocketAddr {
            std::net::SocketAddr::from(([127, 0, 0, 1], 1))
        }
        fn accept(&self, _: &Arc<dyn crate::device::Qp>, _: &[u8]) -> Result<(), DevError> {
            Err(DevError::NotSupported)
        }
        fn reject(&self, _: &[u8]) {
            self.entered.store(true, Ordering::SeqCst);
            if self.slow {
                std::thread::sleep(Duration::from_millis(100));
            }
            if let Some(f) = &self.then {
                f();
            }
            self.rejected.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A handle no object is published under: a delivery to it is a rejection.
    const NOBODY: usize = 8;

    #[test]
    fn a_request_before_publication_is_held_not_refused() {
        let events = SpEvents::new();
        let conn = Arc::new(Conn::default());
        events.request(conn.clone());
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 0, "refused before the service point was published");
        // Published: it is delivered (here to a handle with nothing under it, which rejects).
        events.open(NOBODY);
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_request_held_when_the_free_comes_is_refused() {
        let events = SpEvents::new();
        let conn = Arc::new(Conn::default());
        events.request(conn.clone());
        events.close();
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 1);
        events.request(conn.clone());
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 2, "a request after the free must be refused");
        // Opening after the free delivers nothing.
        events.open(NOBODY);
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn close_waits_for_a_delivery_of_another_thread() {
        let events = Arc::new(SpEvents::new());
        events.open(NOBODY);
        let conn = Arc::new(Conn { slow: true, ..Conn::default() });
        let (e, c) = (events.clone(), conn.clone());
        let t = std::thread::spawn(move || e.request(c));
        while !conn.entered.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        events.close();
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 1, "close returned while a delivery was under way");
        t.join().unwrap();
    }

    #[test]
    fn a_handoff_begun_holds_the_free_and_none_begins_after_it() {
        let events = Arc::new(SpEvents::new());
        assert!(events.begin().is_none(), "a handoff to a service point not published yet");
        events.open(NOBODY);
        let freed = Arc::new(AtomicBool::new(false));
        let t = {
            let guard = events.begin().expect("an open service point takes a handoff");
            let (e, f) = (events.clone(), freed.clone());
            let t = std::thread::spawn(move || {
                e.close();
                f.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(!freed.load(Ordering::SeqCst), "the free returned while a handoff was arriving");
            drop(guard);
            t
        };
        t.join().unwrap();
        assert!(events.begin().is_none(), "a handoff after the free began");
    }

    #[test]
    fn close_inside_a_delivery_of_its_own_thread_returns() {
        let events = Arc::new(SpEvents::new());
        events.open(NOBODY);
        let e = events.clone();
        let conn = Arc::new(Conn { then: Some(Box::new(move || e.close())), ..Conn::default() });
        events.request(conn.clone());
        assert_eq!(conn.rejected.load(Ordering::SeqCst), 1);
        assert!(events.state.locked().delivering.is_empty());
    }
}
