//! Leases on registered memory: when the call that revokes a key set returns (`dat_lmr_free`,
//! `dat_rmr_free`, `dat_rmr_bind` to another range or unbinding, a send with invalidate), no
//! request touches that memory again, as an HCA guarantees after `ibv_dereg_mr`.
//!
//! Every copy the device makes to or from registered memory holds a lease on each key set
//! that admitted it, taken only while the set is live (`take_all`). Revoking the set
//! (`SetLease::revoke`) refuses new leases, then waits until every lease is returned:
//! - a copy between memory and a socket never waits on it (the engine writes and reads
//!   without blocking, qp/tx.rs, qp/reader.rs); a payload that comes or goes in pieces takes
//!   fresh leases for each piece, so a revoke waits for one piece at most and the next piece
//!   finds the set revoked: the rest of the payload is not moved, and the request fails as
//!   one whose key is no longer valid. A write's lease names the socket, and revoking shuts
//!   that connection down (its requests complete flushed, as on an HCA whose QP went to error
//!   when it met a key that is no longer valid);
//! - a copy between processes or within memory is short and holds no socket;
//! - a request whose data a verified peer moves itself (cross-memory attach, shared files)
//!   holds leases on our key sets from the post until the peer's response, which the peer
//!   sends only after the copy. Revoking waits for that response for up to PEER_WAIT; then
//!   the connection is shut down too. Only a peer of our own uid that stops answering for
//!   that long (stopped, or hung) could still copy after the revoke returns.

use crate::util::sync::{CondvarExt, MutexExt};
use std::cell::Cell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long revoking waits for verified peers to finish copies they were asked for.
pub const PEER_WAIT: Duration = Duration::from_secs(2);

/// How much longer it waits, once the connections are shut down, for copies to end.
const GIVE_UP: Duration = Duration::from_secs(8);

/// The leases of one key set. Taking and returning a lease for a copy within memory is two
/// atomic operations (the common case, on the latency path); a lease that names a socket, and
/// a revoke, take the mutex.
#[derive(Default)]
pub struct SetLease {
    revoked: AtomicBool,
    users: AtomicU32,
    /// A revoke waits for the users: only then is `returned` signalled (a notification is a
    /// system call, which each copy would otherwise pay).
    waiting: AtomicBool,
    /// The sockets of leased copies: (descriptor, whether the copy waits on it (shut down at
    /// once), or a peer moves the data (shut down after PEER_WAIT)).
    sockets: Mutex<Vec<(RawFd, bool)>>,
    returned: Condvar,
}

/// How a lease's copy depends on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Within our process, never waiting on anything.
    Memory,
    /// Between memory and this socket: it may wait on the socket.
    Socket(RawFd),
    /// Moved by the verified peer on this connection, which answers when it is done.
    Peer(RawFd),
}

impl Via {
    fn socket(self) -> Option<(RawFd, bool)> {
        match self {
            Via::Memory => None,
            Via::Socket(fd) => Some((fd, true)),
            Via::Peer(fd) => Some((fd, false)),
        }
    }
}

thread_local! {
    /// Leases this thread holds for its own copies (not those a peer holds for us): a revoke
    /// on this thread cannot wait for them.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// Counts `n` leases this thread took for its own copies `via` (one thread-local access for a
/// copy's leases together: in a shared library each access is a call).
fn held_add(via: Via, n: u32) {
    if !matches!(via, Via::Peer(_)) {
        HELD.with(|h| h.set(h.get() + n));
    }
}

fn held_sub(via: Via, n: u32) {
    if !matches!(via, Via::Peer(_)) {
        HELD.with(|h| h.set(h.get().saturating_sub(n)));
    }
}

fn shut_down(fd: RawFd) {
    // SAFETY: the descriptor belongs to a connection whose lease is still out, so it is open
    // (the QP closes its socket only after its copies returned their leases).
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

impl SetLease {
    /// Counts a user for a copy `via` unless the set was revoked (then nothing is counted);
    /// [`SetLease::release`] undoes it. `HELD` is the caller's to count.
    fn admit(&self, via: Via) -> bool {
        // Counted first, then the revoke looked at (SeqCst both here and in `revoke`): either
        // the revoke sees this user and waits, or this sees the revoke and backs out.
        self.users.fetch_add(1, Ordering::SeqCst);
        if let Some(entry) = via.socket() {
            // Under the mutex, so that a revoke's pass over the sockets sees this one.
            let mut socks = self.sockets.locked();
            if self.revoked.load(Ordering::SeqCst) {
                drop(socks);
                self.give_back();
                return false;
            }
            socks.push(entry);
        } else if self.revoked.load(Ordering::SeqCst) {
            self.give_back();
            return false;
        }
        true
    }

    /// Gives back what [`SetLease::admit`] counted.
    fn release(&self, via: Via) {
        if let Some(entry) = via.socket() {
            let mut socks = self.sockets.locked();
            if let Some(pos) = socks.iter().position(|s| *s == entry) {
                socks.swap_remove(pos);
            }
        }
        self.give_back();
    }

    /// Counts a user unless the set was revoked (then nothing is counted): the borrowed
    /// leases of `hold_all`, with no reference count and no thread-local.
    fn enter(&self) -> bool {
        self.users.fetch_add(1, Ordering::SeqCst);
        if self.revoked.load(Ordering::SeqCst) {
            self.give_back();
            return false;
        }
        true
    }

    fn give_back(&self) {
        if self.users.fetch_sub(1, Ordering::SeqCst) == 1 && self.waiting.load(Ordering::SeqCst) {
            // Under the mutex, which the revoke holds from its check of `users` to its wait.
            let _socks = self.sockets.locked();
            self.returned.notify_all();
        }
    }

    /// Refuses new leases and returns once every lease is back (see the module text).
    pub fn revoke(&self) {
        let mut socks = self.sockets.locked();
        self.revoked.store(true, Ordering::SeqCst);
        for &(fd, at_once) in socks.iter() {
            if at_once {
                shut_down(fd);
            }
        }
        let deadline = Instant::now() + PEER_WAIT;
        let mut waited = false;
        // A revoke from inside one of this thread's copies (a consumer callback) must not wait
        // for that copy: it waits for the others, up to PEER_WAIT.
        let own = HELD.with(|h| h.get()) > 0;
        self.waiting.store(true, Ordering::SeqCst);
        while self.users.load(Ordering::SeqCst) > 0 {
            if own && waited {
                break;
            }
            if Instant::now() >= deadline + GIVE_UP {
                // Nothing of ours waits this long once its socket is shut down: a lease was
                // lost. Returning is better than never returning.
                crate::dbg_log!(
                    crate::log::DbgType::ERROR,
                    "soft: {} copies still hold a revoked key after {:?}; the revoke returns",
                    self.users.load(Ordering::SeqCst),
                    PEER_WAIT + GIVE_UP
                );
                break;
            }
            let now = Instant::now();
            if now >= deadline && !waited {
                waited = true;
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft: a peer did not finish copying within {PEER_WAIT:?} of a revoke: its connection is shut down"
                );
                for &(fd, _) in socks.iter() {
                    shut_down(fd);
                }
            }
            let wait = if waited { Duration::from_millis(50) } else { deadline - now };
            if super::engine::on_engine() {
                // A consumer call from a delivery on the engine thread (a CNO proxy agent): the
                // leases come back through the engine, which is served here meanwhile, without
                // our lock (its copies take leases).
                drop(socks);
                super::engine::serve_nested(wait.as_millis().clamp(1, 5) as i32);
                socks = self.sockets.locked();
                continue;
            }
            socks = self.returned.wait_timeout_locked(socks, wait).0;
        }
        self.waiting.store(false, Ordering::SeqCst);
    }
}

/// The leases of one copy: on its QP, and on the key sets that admitted it (most copies have
/// one; no allocation for up to one). Taken and given back together: one `HELD` count each way.
pub struct Leases {
    qp: Arc<SetLease>,
    one: Option<Arc<SetLease>>,
    more: Vec<Arc<SetLease>>,
    via: Via,
}

/// Leases on `qp` and every set in `sets` for one copy, or None if any was revoked.
pub fn take_all(qp: &Arc<SetLease>, sets: &[Arc<SetLease>], via: Via) -> Option<Leases> {
    if !qp.admit(via) {
        return None;
    }
    for (k, s) in sets.iter().enumerate() {
        if !s.admit(via) {
            sets[..k].iter().for_each(|s| s.release(via));
            qp.release(via);
            return None;
        }
    }
    held_add(via, 1 + sets.len() as u32);
    let (one, more) = match sets {
        [] => (None, Vec::new()),
        [one, rest @ ..] => (Some(one.clone()), rest.to_vec()),
    };
    Some(Leases { qp: qp.clone(), one, more, via })
}

impl Drop for Leases {
    fn drop(&mut self) {
        let via = self.via;
        held_sub(via, 1 + u32::from(self.one.is_some()) + self.more.len() as u32);
        self.qp.release(via);
        if let Some(one) = &self.one {
            one.release(via);
        }
        self.more.iter().for_each(|s| s.release(via));
    }
}

/// Borrowed leases on several sets at once, without allocating, for a short copy within memory
/// that makes no callback meanwhile (the latency path's).
pub struct HoldAll<'a, T: AsRef<SetLease>> {
    sets: &'a [T],
}

/// Holds every set in `sets`, or none (None) when one was revoked.
pub fn hold_all<T: AsRef<SetLease>>(sets: &[T]) -> Option<HoldAll<'_, T>> {
    for (k, s) in sets.iter().enumerate() {
        if !s.as_ref().enter() {
            sets[..k].iter().for_each(|s| s.as_ref().give_back());
            return None;
        }
    }
    Some(HoldAll { sets })
}

impl<T: AsRef<SetLease>> Drop for HoldAll<'_, T> {
    fn drop(&mut self) {
        self.sets.iter().for_each(|s| s.as_ref().give_back());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{take_all, SetLease, Via, HELD};
    use crate::util::sync::MutexExt;

    #[test]
    fn revoke_waits_for_leases_and_refuses_new_ones() {
        let set = Arc::new(SetLease::default());
        let lease = take_all(&set, &[], Via::Memory).expect("live");
        let s2 = set.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            s2.revoke();
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(lease);
        assert!(t.join().expect("joins") >= Duration::from_millis(90));
        assert!(take_all(&set, &[], Via::Memory).is_none());
    }

    #[test]
    fn a_copys_leases_go_and_come_back_together() {
        use std::os::fd::AsRawFd;
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let via = Via::Socket(a.as_raw_fd());
        let sets: Vec<Arc<SetLease>> = (0..4).map(|_| Arc::new(SetLease::default())).collect();
        let (qp, live) = (&sets[0], &sets[1..3]);
        let idle = |s: &SetLease| s.users.load(Ordering::SeqCst) == 0 && s.sockets.locked().is_empty();
        let held = || HELD.with(|h| h.get());
        let leases = take_all(qp, live, via).expect("live");
        assert_eq!(held(), 3);
        assert!(sets[..3].iter().all(|s| s.users.load(Ordering::SeqCst) == 1 && s.sockets.locked().len() == 1));
        drop(leases);
        assert_eq!(held(), 0);
        assert!(sets.iter().all(|s| idle(s)));
        // A revoked set after live ones: those taken before it are given back.
        sets[3].revoke();
        assert!(take_all(qp, &sets[1..], via).is_none());
        assert_eq!(held(), 0);
        assert!(sets.iter().all(|s| idle(s)));
    }

    #[test]
    fn revoke_shuts_down_a_waiting_socket() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        use std::os::fd::AsRawFd;
        let set = Arc::new(SetLease::default());
        let fd = a.as_raw_fd();
        let lease = take_all(&set, &[], Via::Socket(fd)).expect("live");
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 1];
            // Blocks until the revoke shuts the socket down.
            // SAFETY: reading into a local buffer from an open socket.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, 1, 0) };
            drop(lease);
            n
        });
        std::thread::sleep(Duration::from_millis(50));
        set.revoke();
        assert_eq!(reader.join().expect("joins"), 0);
    }
}
