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
//! Write readiness is edge-triggered: the kernel reports a socket's send buffer gaining room
//! only after a write found it full, so connections whose writes go out at once from the
//! posting thread cost the engine nothing. An event is an edge, not a state: a handler that
//! finds another thread in the middle of a write must leave it a note to try again.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::util::sync::MutexExt;

/// Readiness as epoll reports it.
pub const OUT: u32 = libc::EPOLLOUT as u32;
pub const ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// What the engine drives: told on the engine thread what its socket is ready for (`IN`,
/// `OUT`, `ERR` bits). It must not block: the engine serves every connection of the process.
pub trait Handler: Send + Sync {
    fn ready(&self, events: u32);
}

pub struct Engine {
    epoll: OwnedFd,
    handlers: Mutex<HashMap<u64, Weak<dyn Handler>>>,
    next: AtomicU64,
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

    fn epoll_fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.epoll.as_raw_fd()
    }

    fn run(&self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut ready: Vec<(Arc<dyn Handler>, u32)> = Vec::with_capacity(events.len());
        loop {
            // SAFETY: `events` is ours and holds as many entries as we say.
            let n = unsafe { libc::epoll_wait(self.epoll_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: the engine's epoll_wait failed: it stops");
                return;
            }
            {
                // The handlers are called without the map's lock: they may register or drop
                // connections.
                let map = self.handlers.locked();
                for ev in &events[..n as usize] {
                    let (token, bits) = (ev.u64, ev.events);
                    if let Some(h) = map.get(&token).and_then(Weak::upgrade) {
                        ready.push((h, bits));
                    }
                }
            }
            for (h, bits) in ready.drain(..) {
                h.ready(bits);
            }
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

/// The process's engine, started on first use; None when it cannot be (no descriptors or
/// threads left).
pub fn engine() -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<&'static Engine>> = OnceLock::new();
    *ENGINE.get_or_init(|| {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor we just opened and nobody else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let e: &'static Engine = Box::leak(Box::new(Engine { epoll, handlers: Mutex::new(HashMap::new()), next: AtomicU64::new(1) }));
        std::thread::Builder::new().name("dat2-soft-engine".into()).stack_size(256 << 10).spawn(move || e.run()).ok()?;
        Some(e)
    })
}
