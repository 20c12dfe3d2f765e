//! The soft device's progress engine: one thread per process, `dat2-soft-engine`, that waits
//! on every registered connection's socket at once (epoll) and continues what no consumer
//! call may wait for. A connection registers its one descriptor once it is connected and is
//! told of readiness through `Handler::ready`; the engine never blocks on a socket itself, so
//! one peer that stops reading or writing never delays another connection.
//!
//! One thread per process rather than per device: a process that opens several IAs (one per
//! rail, or one per library that uses DAT) still has one, and nothing the engine does belongs
//! to a device (sockets and memory). Like `dat2-soft-peers`, it lives as long as the process.
//!
//! Besides readiness, a handler is called when a deadline of its own passes (`timer`, kept in
//! the engine and served through epoll_wait's timeout) and when another thread asks for it
//! (`kick`: a handler that stopped reading until a receive is posted); both wake the engine
//! through an eventfd.
//!
//! Readiness is edge-triggered: the kernel reports a socket's send buffer gaining room
//! only after a write found it full, so connections whose writes go out at once from the
//! posting thread cost the engine nothing. An event is an edge, not a state: a handler that
//! finds another thread in the middle of a write must leave it a note to try again.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use crate::util::sync::MutexExt;

/// Readiness as epoll reports it, and the engine's own reasons.
pub const IN: u32 = libc::EPOLLIN as u32;
pub const OUT: u32 = libc::EPOLLOUT as u32;
pub const ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;
/// A deadline the handler set passed.
pub const TIMER: u32 = 1 << 28;
/// Called from a wait on the engine thread (`serve_nested`), possibly under the handler's own
/// turn up the stack: a handler that finds its state taken leaves itself a kick instead.
pub const NESTED: u32 = 1 << 27;
/// Another thread asked for the handler to run (`Registration::kick`).
pub const KICK: u32 = 1 << 29;

/// The eventfd's token in epoll (handler tokens start at 1).
const WAKE: u64 = 0;

/// What the engine drives: told on the engine thread what its socket is ready for (`IN`,
/// `OUT`, `ERR` bits). It must not block: the engine serves every connection of the process.
/// How long the engine thread keeps polling after work before it sleeps (see `run`).
const SPIN: std::time::Duration = std::time::Duration::from_micros(20);

pub trait Handler: Send + Sync {
    fn ready(&self, events: u32);
    /// Whether `ready` may also run on a consumer's polling thread (`poll_here`), concurrently
    /// with the engine thread: only a handler that never waits for a turn of its own on
    /// another thread (RC QPs: reader.rs `read_ready`). Others run on the engine thread only.
    fn runs_anywhere(&self) -> bool {
        false
    }
    /// `ready` panicked: whatever it was in the middle of is lost (an RC QP's read turn is
    /// left done), so the handler ends what it serves rather than leave it silently stuck.
    fn panicked(&self) {}
}

pub struct Engine {
    epoll: OwnedFd,
    wake: OwnedFd,
    handlers: Mutex<HashMap<u64, Weak<dyn Handler>>>,
    next: AtomicU64,
    /// Deadlines (a min-heap) and kicks, both served on the engine thread.
    timers: Mutex<BinaryHeap<Reverse<(Instant, u64)>>>,
    kicked: Mutex<Vec<u64>>,
    /// Edges a consumer's poll took for handlers that run on the engine thread only.
    handed: Mutex<Vec<(Arc<dyn Handler>, u32)>>,
}

/// A descriptor registered with the engine; dropping it unregisters it. Dropped before the
/// descriptor is closed (a closed number may be reused by another connection).
pub struct Registration {
    token: u64,
    fd: RawFd,
}

impl Engine {
    /// Registers `fd` for the readiness in `events` (edge-triggered), reported to `handler`
    /// while it lives.
    pub fn register(&'static self, fd: RawFd, events: u32, handler: Weak<dyn Handler>) -> std::io::Result<Registration> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        self.handlers.locked().insert(token, handler);
        let mut ev = libc::epoll_event { events: events | libc::EPOLLET as u32 | ERR, u64: token };
        // SAFETY: a live epoll descriptor and the caller's open socket; `ev` is ours.
        if unsafe { libc::epoll_ctl(self.epoll_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            let e = std::io::Error::last_os_error();
            self.handlers.locked().remove(&token);
            return Err(e);
        }
        Ok(Registration { token, fd })
    }

    fn wake(&self) {
        let one = 1u64;
        // SAFETY: writing 8 bytes of ours to our eventfd; a full counter (EAGAIN) is still a
        // wake-up.
        unsafe { libc::write(self.wake.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    fn epoll_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// How long epoll_wait may sleep: until the next deadline (-1: none).
    fn timeout_ms(&self) -> i32 {
        match self.timers.locked().peek() {
            None => -1,
            Some(Reverse((at, _))) => {
                let left = at.saturating_duration_since(Instant::now());
                // Rounded up: waking early would spin until the deadline.
                (left.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
            }
        }
    }

    /// The tokens whose deadlines passed, and those kicked, with their reasons.
    fn due(&self, out: &mut Vec<(u64, u32)>) {
        let now = Instant::now();
        let mut timers = self.timers.locked();
        while timers.peek().is_some_and(|Reverse((at, _))| *at <= now) {
            let Reverse((_, token)) = timers.pop().expect("peeked");
            out.push((token, TIMER));
        }
        drop(timers);
        out.extend(self.kicked.locked().drain(..).map(|t| (t, KICK)));
    }

    /// The handlers of the tokens in `events` (the eventfd drained), of the deadlines passed
    /// and of the kicks, into `ready`, their bits with `extra` (`tokens`: scratch space).
    /// Looked up under the map's lock; called without it (they may register or drop
    /// connections).
    fn take_ready(&self, events: &[libc::epoll_event], extra: u32, tokens: &mut Vec<(u64, u32)>, ready: &mut Vec<(Arc<dyn Handler>, u32)>) {
        tokens.clear();
        for ev in events {
            // Copies: epoll_event is packed.
            let (token, bits) = (ev.u64, ev.events);
            if token == WAKE {
                let mut count = 0u64;
                // SAFETY: reading 8 bytes into ours from our non-blocking eventfd.
                unsafe { libc::read(self.wake.as_raw_fd(), &mut count as *mut u64 as *mut libc::c_void, 8) };
            } else {
                tokens.push((token, bits));
            }
        }
        self.due(tokens);
        let map = self.handlers.locked();
        ready.extend(tokens.iter().filter_map(|&(t, bits)| map.get(&t).and_then(Weak::upgrade).map(|h| (h, bits | extra))));
    }

    fn run(&self) {
        ON_ENGINE.with(|on| on.set(true));
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut ready: Vec<(Arc<dyn Handler>, u32)> = Vec::with_capacity(events.len());
        let mut tokens: Vec<(u64, u32)> = Vec::with_capacity(events.len());
        // After work, the engine polls for SPIN before it sleeps, yielding between polls: the
        // answer to what it just delivered (a ping-pong's next frame) then finds it running,
        // not waiting for a CPU that spinning consumers hold.
        let mut spin_until: Option<Instant> = None;
        loop {
            let spinning = spin_until.is_some_and(|t| Instant::now() < t);
            if spinning {
                // A CPU shared with the consumers goes to them first.
                std::thread::yield_now();
            }
            let timeout = if spinning { 0 } else { self.timeout_ms() };
            // SAFETY: `events` is ours and holds as many entries as we say.
            let n = unsafe { libc::epoll_wait(self.epoll_fd(), events.as_mut_ptr(), events.len() as i32, timeout) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: the engine's epoll_wait failed: it stops");
                return;
            }
            if n > 0 {
                spin_until = Some(Instant::now() + SPIN);
            } else if !spinning {
                spin_until = None;
            }
            self.take_ready(&events[..n as usize], 0, &mut tokens, &mut ready);
            ready.append(&mut self.handed.locked());
            for (h, bits) in ready.drain(..) {
                call(&h, bits);
            }
        }
    }

    /// Runs on the calling thread, at once, the handlers of the sockets that are ready now:
    /// a consumer polling an EVD makes its connections' progress itself, as it would poll an
    /// HCA's CQ, instead of waiting for the engine thread to be scheduled (with both ends of
    /// a ping-pong on one CPU, that takes the consumer's time slice). Each edge goes to one
    /// of the threads that wait on the epoll set, so nothing is done twice; deadlines, kicks
    /// and the wake-up stay the engine thread's. Nothing runs on a thread already inside a
    /// handler (a consumer's callback that polls from within one): a handler is not
    /// reentered. Whether any handler ran.
    pub fn poll_here(&self) -> bool {
        if IN_HANDLER.get() {
            return false;
        }
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        // SAFETY: `events` is ours and holds as many entries as we say; a zero timeout never
        // waits.
        let n = unsafe { libc::epoll_wait(self.epoll_fd(), events.as_mut_ptr(), events.len() as i32, 0) };
        if n <= 0 {
            return false;
        }
        let mut ready: Vec<(Arc<dyn Handler>, u32)> = Vec::new();
        {
            let map = self.handlers.locked();
            // The eventfd (WAKE) is level-triggered and left unread: the kernel reports it to
            // the engine thread as well.
            for ev in &events[..n as usize] {
                // Copies: epoll_event is packed.
                let (token, bits) = (ev.u64, ev.events);
                if token == WAKE {
                    continue;
                }
                if let Some(h) = map.get(&token).and_then(Weak::upgrade) {
                    ready.push((h, bits));
                }
            }
        }
        let mut ran = false;
        for (h, bits) in ready {
            if h.runs_anywhere() {
                call(&h, bits);
                ran = true;
            } else {
                // The edge is this thread's now: the engine thread gets it, as it came.
                self.handed.locked().push((h, bits));
                self.wake();
            }
        }
        ran
    }
}

thread_local! {
    /// This thread is running a handler (see `poll_here`).
    static IN_HANDLER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs one handler. A bug in one connection's handling must not stop every other
/// connection's progress: its panic is reported, and the caller goes on.
fn call(h: &Arc<dyn Handler>, bits: u32) {
    let outer = IN_HANDLER.replace(true);
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.ready(bits))).is_err() {
        crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: a connection's handler panicked: the connection ends");
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.panicked()));
    }
    IN_HANDLER.set(outer);
}

impl Engine {
    /// One turn of the engine from inside a wait on its own thread (a consumer call made from
    /// a delivery, a CNO proxy agent, waiting for what only the engine brings: lease.rs
    /// `revoke`): what is ready within `timeout_ms` is served, with NESTED.
    fn nested_turn(&self, timeout_ms: i32) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        // SAFETY: `events` is ours and holds as many entries as we say.
        let n = unsafe { libc::epoll_wait(self.epoll_fd(), events.as_mut_ptr(), events.len() as i32, timeout_ms) };
        let (mut tokens, mut ready) = (Vec::new(), Vec::new());
        self.take_ready(&events[..n.max(0) as usize], NESTED, &mut tokens, &mut ready);
        for (h, bits) in ready {
            call(&h, bits);
        }
    }
}

/// On the engine thread (see `on_engine`), serves the engine for up to `timeout_ms`.
pub fn serve_nested(timeout_ms: i32) {
    if let (true, Some(e)) = (on_engine(), engine()) {
        e.nested_turn(timeout_ms);
    }
}

impl Registration {
    /// Runs the handler on the engine thread soon (with KICK).
    pub fn kick(&self) {
        let Some(e) = engine() else { return };
        e.kicked.locked().push(self.token);
        e.wake();
    }

    /// Runs the handler (with TIMER) once `at` has passed. The handler checks its own
    /// deadlines: a timer is never withdrawn, and one that is no longer wanted finds nothing.
    pub fn timer(&self, at: Instant) {
        let Some(e) = engine() else { return };
        let earliest = {
            let mut timers = e.timers.locked();
            let earliest = timers.peek().is_none_or(|Reverse((t, _))| at < *t);
            timers.push(Reverse((at, self.token)));
            earliest
        };
        if earliest {
            e.wake();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(e) = engine() else { return };
        e.handlers.locked().remove(&self.token);
        // SAFETY: the descriptor is still open (see the type); a null event is allowed for DEL.
        unsafe { libc::epoll_ctl(e.epoll_fd(), libc::EPOLL_CTL_DEL, self.fd, std::ptr::null_mut()) };
    }
}

thread_local! {
    static ON_ENGINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is the engine's: a consumer call made from a handler's delivery (a CNO
/// proxy agent) runs here, and must not wait for what only the engine would bring, nor for
/// the end of a turn of an engine-only handler (none runs elsewhere: `runs_anywhere`).
pub fn on_engine() -> bool {
    ON_ENGINE.with(|on| on.get())
}

static ENGINE: OnceLock<&'static Engine> = OnceLock::new();

/// Held while the engine is being started: one thread starts it.
static STARTING: Mutex<()> = Mutex::new(());

/// The process's engine if it was started (a poll has nothing to do before the first
/// connection).
pub fn started() -> Option<&'static Engine> {
    ENGINE.get().copied()
}

/// The process's engine, started on first use; None when it cannot be now (no descriptors or
/// threads left). A failed start is not remembered: the next use tries again, so that a
/// process that ran out of descriptors once (a dat_ia_open then fails) can open IAs again
/// once it has some.
pub fn engine() -> Option<&'static Engine> {
    if let Some(e) = ENGINE.get() {
        return Some(e);
    }
    let _one = STARTING.locked();
    if let Some(e) = ENGINE.get() {
        return Some(e);
    }
    let e = start()?;
    Some(ENGINE.get_or_init(|| e))
}

/// A new engine and its thread; None (nothing kept) when either cannot be had.
fn start() -> Option<&'static Engine> {
    // SAFETY: epoll_create1 returns a new descriptor or -1.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor we just opened and nobody else owns.
    let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return None;
    }
    // SAFETY: as above.
    let wake = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE };
    // SAFETY: both descriptors are ours and open.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, wake.as_raw_fd(), &mut ev) } < 0 {
        return None;
    }
    let e: &'static Engine = Box::leak(Box::new(Engine {
        epoll,
        wake,
        handlers: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        timers: Mutex::new(BinaryHeap::new()),
        kicked: Mutex::new(Vec::new()),
        handed: Mutex::new(Vec::new()),
    }));
    let spawned = std::thread::Builder::new().name("dat2-soft-engine".into()).stack_size(256 << 10).spawn(move || e.run());
    if spawned.is_err() {
        // SAFETY: `e` came from Box::leak just above, and nothing else holds it: the thread
        // was not created, and the closure that captured it has been dropped. Its
        // descriptors close with it.
        drop(unsafe { Box::from_raw(e as *const Engine as *mut Engine) });
        return None;
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::{call, Handler};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[derive(Default)]
    struct Bad {
        told: AtomicBool,
    }

    impl Handler for Bad {
        fn ready(&self, _events: u32) {
            panic!("a bug in a handler");
        }
        fn panicked(&self) {
            self.told.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_panicking_handler_is_told_and_the_caller_goes_on() {
        let bad = Arc::new(Bad::default());
        let h: Arc<dyn Handler> = bad.clone();
        call(&h, 1);
        assert!(bad.told.load(Ordering::SeqCst), "the handler was not told it panicked");
    }
}
