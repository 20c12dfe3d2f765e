//! The wait of an EVD on a device whose QPs are polled (verbs' way, which only the VM runs
//! otherwise): a fake device says so, and fake source QPs count how they are told of waits and
//! deliver their completions when the EVD asks, where a verbs CQ would.

use core::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::wait::wait_on;
use super::{create_object, Evd};
use crate::abi::*;
use crate::builtin::ia::Ia;
use crate::builtin::{ops, provider, table};
use crate::device::{self, Access, DevError, Device, DeviceLimits, IaPort, Mr, Mw, Pd, Qp};

/// A device with polled QPs and nothing else.
struct Polled {
    limits: DeviceLimits,
}

impl Device for Polled {
    fn name(&self) -> &str {
        "polled"
    }
    fn vendor(&self) -> &str {
        "test"
    }
    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }
    fn address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
    }
    fn polled_qps(&self) -> bool {
        true
    }
    fn consumer_waits(&self, _begins: bool) {
        panic!("a device whose QPs are polled hears of an EVD's wait through the EVD's sources");
    }
    fn alloc_pd(&self) -> Result<Pd, DevError> {
        Err(DevError::NotSupported)
    }
    fn dealloc_pd(&self, _pd: Pd) {}
    fn reg_mr(&self, _pd: Pd, _addr: u64, _len: u64, _access: Access, _zb: bool) -> Result<Mr, DevError> {
        Err(DevError::NotSupported)
    }
    fn alias_mr(&self, _mr: &Mr, _pd: Pd, _access: Access, _zb: bool) -> Result<Mr, DevError> {
        Err(DevError::NotSupported)
    }
    fn dereg_mr(&self, _mr: &Mr) {}
    fn alloc_mw(&self, _pd: Pd) -> Result<Mw, DevError> {
        Err(DevError::NotSupported)
    }
    fn dealloc_mw(&self, _mw: &Mw) {}
    fn create_qp(
        &self,
        _pd: Pd,
        _caps: device::QpCaps,
        _srq: Option<Arc<dyn device::Srq>>,
        _events: Arc<dyn device::QpEvents>,
    ) -> Result<Arc<dyn Qp>, DevError> {
        Err(DevError::NotSupported)
    }
    fn create_srq(
        &self,
        _pd: Pd,
        _max_wr: u32,
        _max_sge: u32,
        _events: Arc<dyn device::SrqEvents>,
    ) -> Result<Arc<dyn device::Srq>, DevError> {
        Err(DevError::NotSupported)
    }
    fn open_ia(&self) -> Result<Box<dyn IaPort>, DevError> {
        Ok(Box::new(Port))
    }
    fn service_address(&self, _addr: std::net::SocketAddr, _conn_qual: u64) -> Option<std::net::SocketAddr> {
        None
    }
}

struct Port;

impl IaPort for Port {
    fn address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
    }
    fn listen(&self, _conn_qual: u64, _events: Arc<dyn device::ListenEvents>) -> Result<Box<dyn device::Listener>, DevError> {
        Err(DevError::NotSupported)
    }
}

/// A source QP: counts the waits it is told of, and holds completions (cookies) that its poll
/// delivers (`ready`) or that only the delivery after the arm finds (`after_arm`: they
/// completed after the EVD's last poll, before the CQ was armed).
#[derive(Default)]
struct Source {
    evd: Mutex<Weak<Evd>>,
    ready: Mutex<Vec<u64>>,
    after_arm: Mutex<Vec<u64>>,
    polls: AtomicU32,
    begins: AtomicU32,
    ends: AtomicU32,
    armed: AtomicBool,
}

impl Source {
    fn deliver(&self, cookies: Vec<u64>) {
        let evd = self.evd.lock().unwrap().upgrade().expect("the EVD outlives its source");
        for c in cookies {
            let mut ev = DAT_EVENT { event_number: DAT_DTO_COMPLETION_EVENT, ..Default::default() };
            ev.event_data.dto_completion_event_data.user_cookie = DAT_DTO_COOKIE { as_64: c };
            assert!(evd.post(ev), "completion {c} overflowed");
        }
    }
}

impl Qp for Source {
    fn connect(&self, _: std::net::SocketAddr, _: u64, _: &[u8], _: Option<Duration>) -> Result<(), DevError> {
        unimplemented!()
    }
    fn post_send(&self, _: &device::SendWr) -> Result<(), DevError> {
        unimplemented!()
    }
    fn post_recv(&self, _: u64, _: device::Sges) -> Result<(), DevError> {
        unimplemented!()
    }
    fn poll(&self) {
        self.polls.fetch_add(1, SeqCst);
        self.deliver(std::mem::take(&mut *self.ready.lock().unwrap()));
    }
    fn wait_begins(&self) {
        self.begins.fetch_add(1, SeqCst);
        self.armed.store(true, SeqCst);
    }
    fn wait_ends(&self) {
        self.ends.fetch_add(1, SeqCst);
    }
    fn deliver_before_wait(&self) {
        assert!(self.armed.load(SeqCst), "delivered before the arm: a completion in between would be lost");
        self.deliver(std::mem::take(&mut *self.ready.lock().unwrap()));
        self.deliver(std::mem::take(&mut *self.after_arm.lock().unwrap()));
    }
    fn disconnect(&self, _: bool) {}
    fn bind_mw(&self, _: u64, _: &Mw, _: &Mr, _: u64, _: u64, _: Access, _: bool) -> Result<u32, DevError> {
        unimplemented!()
    }
    fn unbind_mw(&self, _: u64, _: &Mw) {}
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

/// An IA of the polled device (under a built-in provider of its own, whose driver is never
/// asked for a device), and an EVD of it with `n` sources.
fn evd_with_sources(n: usize) -> (Arc<Evd>, Vec<Arc<Source>>) {
    let driver = *crate::device::DRIVERS.iter().find(|d| d.name() == "soft").expect("the soft driver");
    ops::init(driver, b"evd-polled-test", false, c"");
    let builtin = provider::find(b"evd-polled-test").expect("the provider just made");
    let limits = DeviceLimits {
        max_pds: 1,
        max_mrs: 1,
        max_mr_size: 0,
        max_mws: 0,
        max_qps: 4,
        max_qp_wr: 16,
        max_sge: 1,
        max_sge_rd: 1,
        max_cqs: 4,
        max_cqe: 64,
        max_rd_in: 1,
        max_rd_out: 1,
        max_msg_size: 1 << 20,
        max_srqs: 0,
        max_srq_wr: 0,
        mtu: 4096,
        page_size: 4096,
        max_private_data: 0,
        max_ud_msg: 0,
        atomics: false,
        immediate: false,
        zero_based: false,
    };
    let dev: Arc<dyn Device> = Arc::new(Polled { limits });
    let port = dev.open_ia().expect("a port");
    let handle = table::reserve(builtin.table(false));
    let ia = Arc::new(Ia::new(handle, builtin, false, dev, port, 0, false));
    table::insert(handle, ia.clone());
    let e = create_object(&ia, 8, None, DAT_EVD_DTO_FLAG).expect("the EVD");
    let sources: Vec<Arc<Source>> = (0..n).map(|_| Arc::new(Source::default())).collect();
    for s in &sources {
        *s.evd.lock().unwrap() = Arc::downgrade(&e);
        let q: Arc<dyn Qp> = s.clone();
        e.add_source(&q);
    }
    (e, sources)
}

fn wait(e: &Evd, timeout: DAT_TIMEOUT) -> (Result<DAT_RETURN, DAT_RETURN>, Option<u64>, DAT_COUNT) {
    let mut ev = MaybeUninit::<DAT_EVENT>::uninit();
    let mut nmore: DAT_COUNT = -1;
    let rc = wait_on(e, timeout, 1, ev.as_mut_ptr(), &mut nmore);
    // SAFETY: written by a successful wait.
    let cookie = (rc == Ok(DAT_SUCCESS)).then(|| unsafe { ev.assume_init_ref().event_data.dto_completion_event_data.user_cookie.as_64 });
    (rc, cookie, nmore)
}

fn counts(s: &Source) -> (u32, u32, u32) {
    (s.polls.load(SeqCst), s.begins.load(SeqCst), s.ends.load(SeqCst))
}

/// A completion that came after the wait's poll of its sources and before their arm raises
/// no event: only the delivery after the arm finds it, and the wait must return it at once
/// rather than sleep to its timeout. Each source is told of the wait once, and of its end.
#[test]
fn a_completion_between_the_poll_and_the_arm_ends_the_wait() {
    for n in [1, 3] {
        let (e, sources) = evd_with_sources(n);
        sources[0].after_arm.lock().unwrap().push(7);
        sources[n - 1].after_arm.lock().unwrap().push(8);
        let start = Instant::now();
        assert_eq!(wait(&e, 5_000_000), (Ok(DAT_SUCCESS), Some(7), 1), "{n} sources");
        assert!(start.elapsed() < Duration::from_secs(2), "{n} sources: the wait slept");
        for s in &sources {
            assert_eq!(counts(s), (1, 1, 1), "{n} sources: polls, wait_begins, wait_ends");
        }
        // The other was queued: taken at once, nothing polled or armed.
        assert_eq!(wait(&e, 0), (Ok(DAT_SUCCESS), Some(8), 0), "{n} sources");
        for s in &sources {
            assert_eq!(counts(s), (1, 1, 1), "{n} sources, the second wait");
        }
    }
}

/// A completion the first poll finds ends the wait without the sources being armed; one that
/// comes while the waiter sleeps (delivered by another thread, as verbs' progress thread
/// does) wakes it; and an event queued at entry is taken with no poll and no arm.
#[test]
fn a_wait_arms_its_sources_only_to_block() {
    let (e, sources) = evd_with_sources(1);
    let s = &sources[0];
    s.ready.lock().unwrap().push(1);
    assert_eq!(wait(&e, 5_000_000), (Ok(DAT_SUCCESS), Some(1), 0));
    assert_eq!(counts(s), (1, 0, 0), "ready at the first poll: polls, wait_begins, wait_ends");

    let late = {
        let s = s.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            s.deliver(vec![2, 3]);
        })
    };
    let start = Instant::now();
    assert_eq!(wait(&e, 5_000_000), (Ok(DAT_SUCCESS), Some(2), 1));
    assert!(start.elapsed() < Duration::from_secs(2), "the delivery did not wake the waiter (it found it at its timeout)");
    late.join().unwrap();
    assert_eq!(counts(s), (2, 1, 1), "woken: polls, wait_begins, wait_ends");

    assert_eq!(wait(&e, 5_000_000), (Ok(DAT_SUCCESS), Some(3), 0));
    assert_eq!(counts(s), (2, 1, 1), "queued at entry: no poll, no arm");

    // Nothing comes: the wait times out, told to the sources and ended.
    assert_eq!(wait(&e, 20_000), (Err(dat_error(DAT_TIMEOUT_EXPIRED, 0)), None, 0));
    assert_eq!(counts(s), (3, 2, 2), "timed out: polls, wait_begins, wait_ends");
}

/// Not a check: `n` waits of each kind on the polled device's path for callgrind to count
/// (`valgrind --tool=callgrind --toggle-collect='*polled_wait_ready*'
/// --toggle-collect='*polled_wait_after_arm*' <test binary> --ignored --exact
/// builtin::evd::tests::polled_waits_for_callgrind`): a completion the wait's first poll finds
/// (a verbs CQ that holds it when the consumer waits), and one that only the delivery after
/// the arm finds. The counts include the fake sources' own delivery.
#[test]
#[ignore]
fn polled_waits_for_callgrind() {
    let (e, sources) = evd_with_sources(1);
    let s = &sources[0];
    for k in 0..2000 {
        s.ready.lock().unwrap().push(k);
        assert_eq!(polled_wait_ready(&e), (Ok(DAT_SUCCESS), Some(k), 0));
    }
    for k in 0..2000 {
        s.after_arm.lock().unwrap().push(k);
        assert_eq!(polled_wait_after_arm(&e), (Ok(DAT_SUCCESS), Some(k), 0));
    }
}

#[inline(never)]
fn polled_wait_ready(e: &Evd) -> (Result<DAT_RETURN, DAT_RETURN>, Option<u64>, DAT_COUNT) {
    wait(e, 5_000_000)
}

#[inline(never)]
fn polled_wait_after_arm(e: &Evd) -> (Result<DAT_RETURN, DAT_RETURN>, Option<u64>, DAT_COUNT) {
    std::hint::black_box(wait(e, 5_000_000))
}
