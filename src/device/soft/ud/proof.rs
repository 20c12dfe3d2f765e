//! Proof that a UD peer owns the address and port it names, and the count of datagrams that
//! show wrong keys.
//!
//! A resolution names the peer's QP number, a UDP port on the peer's host. Believed as told, a
//! requester (or an acceptor) could point our datagrams at any UDP service of its host, with
//! the Q_Key it chose and our consumer's payload. So neither side believes it until a datagram
//! has come from that very address and port (as the kernel reports the source, `recvfrom`),
//! carrying a 128-bit token the peer sent over the TCP exchange, and neither reports the
//! resolution (nor hands out an address handle) before:
//!
//! 1. the requester sends UD_HELLO with its token Tr; the acceptor answers UD_ACCEPT with Ta;
//! 2. the requester sends proof datagrams (`wire::Dgram::proof`: no keys, the token Tr) from
//!    its QP to the acceptor's, at the times RESEND_AT gives, until the acceptor's proof comes;
//! 3. the acceptor, on a proof carrying Tr from the requester's TCP address and named port,
//!    answers with its own proof (Ta, to that now proven port; again for each copy that comes)
//!    and reports the requester resolved; the requester, on a proof carrying Ta from the
//!    acceptor's address and named port, reports the acceptor resolved.
//!
//! The acceptor thus sends nothing at all to a port before it is proven: a requester reachable
//! by anyone cannot make it send anywhere. The requester must send first, and its proofs go to
//! the port the acceptor named: a lying acceptor (a service point the consumer chose to
//! resolve) gets at most RESEND_AT.len() datagrams of 44 bytes sent to a port of its own host,
//! holding no key and nothing of its choosing (the token is the requester's own random).
//!
//! Every wait has a deadline: the acceptor's PROOF_TIMEOUT from its UD_ACCEPT (then its
//! consumer hears `Broken`), the requester's the same bound, within the connect's timeout
//! (then `TimedOut`). A QP waits for at most PROOFS_MAX proofs at a time; an accept beyond
//! that is reported `Broken` at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::dbg_log;
use crate::device::CmEvent;
use crate::log::DbgType;
use crate::util::sync::{CondvarExt, MutexExt};

/// How long a side waits for its peer's proof.
pub const PROOF_TIMEOUT: Duration = if cfg!(test) { Duration::from_secs(1) } else { Duration::from_secs(5) };

/// The most proofs a QP waits for at a time.
pub const PROOFS_MAX: usize = 256;

/// When the requester sends its proof, from the start of its wait (while no answer came).
pub const RESEND_AT: [Duration; 5] =
    [Duration::ZERO, Duration::from_millis(200), Duration::from_millis(600), Duration::from_millis(1400), Duration::from_millis(3000)];

/// How often at most a QP logs the datagrams it dropped for their keys.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Set once, waited for by the requester's thread.
#[derive(Default)]
pub struct Signal {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    fn raise(&self) {
        *self.set.locked() = true;
        self.cv.notify_all();
    }

    pub fn is_set(&self) -> bool {
        *self.set.locked()
    }

    /// Waits until raised or `until`; whether it was raised.
    pub fn wait_until(&self, until: Instant) -> bool {
        let mut s = self.set.locked();
        while !*s {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self.cv.wait_timeout_locked(s, left).0;
        }
        *s
    }
}

/// Who waits for a proof.
pub enum Waiter {
    /// A resolution of ours: its thread waits on the signal.
    Requester(Arc<Signal>),
    /// A request our consumer accepted: once proven, we prove our own port with `answer` and
    /// report `event` (taken then; the entry stays until its deadline to answer copies).
    Acceptor { answer: u128, event: Option<CmEvent> },
}

struct Entry {
    from: SocketAddr,
    token: u128,
    deadline: Instant,
    waiter: Waiter,
}

/// What a proof that came asks of the QP.
pub struct Proven {
    /// Our own proof to send back to the (now proven) sender.
    pub answer: Option<u128>,
    /// The resolution to report.
    pub event: Option<CmEvent>,
}

/// The proofs a QP waits for.
#[derive(Default)]
pub struct Proofs {
    entries: Vec<Entry>,
}

impl Proofs {
    /// Waits for a proof carrying `token` from `from`, until `deadline`; false when the QP
    /// already waits for PROOFS_MAX.
    pub fn expect(&mut self, from: SocketAddr, token: u128, deadline: Instant, waiter: Waiter) -> bool {
        if self.entries.len() >= PROOFS_MAX {
            return false;
        }
        self.entries.push(Entry { from, token, deadline, waiter });
        true
    }

    /// A proof datagram carrying `token` came from `from`: what to do, or None when nobody
    /// waits for it.
    pub fn on_proof(&mut self, from: SocketAddr, token: u128) -> Option<Proven> {
        let e = self.entries.iter_mut().find(|e| e.from == from && e.token == token)?;
        Some(match &mut e.waiter {
            Waiter::Requester(s) => {
                s.raise();
                Proven { answer: None, event: None }
            }
            Waiter::Acceptor { answer, event } => Proven { answer: Some(*answer), event: event.take() },
        })
    }

    /// Forgets the requester's wait on `signal` (it ended).
    pub fn forget(&mut self, signal: &Arc<Signal>) {
        self.entries.retain(|e| !matches!(&e.waiter, Waiter::Requester(s) if Arc::ptr_eq(s, signal)));
    }

    /// Forgets the acceptor's wait for `token` from `from` (its UD_ACCEPT did not go out).
    pub fn forget_acceptor(&mut self, from: SocketAddr, token: u128) {
        self.entries.retain(|e| !(e.from == from && e.token == token && matches!(e.waiter, Waiter::Acceptor { .. })));
    }

    /// Ends the acceptors' waits past their deadline; the unproven ones' events become Broken.
    pub fn expire(&mut self, now: Instant) -> Vec<CmEvent> {
        let mut broken = Vec::new();
        self.entries.retain_mut(|e| {
            let keep = e.deadline > now || matches!(e.waiter, Waiter::Requester(_));
            if !keep {
                if let Waiter::Acceptor { event: Some(_), .. } = e.waiter {
                    broken.push(CmEvent::Broken);
                }
            }
            keep
        });
        broken
    }

    /// The next deadline of an acceptor's wait (the engine has a timer for each wait).
    #[cfg(test)]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries.iter().filter(|e| matches!(e.waiter, Waiter::Acceptor { .. })).map(|e| e.deadline).min()
    }

    /// Ends every wait (the QP closes): requesters are woken (and find it closed).
    pub fn clear(&mut self) {
        for e in self.entries.drain(..) {
            if let Waiter::Requester(s) = e.waiter {
                s.raise();
            }
        }
    }
}

/// Datagrams a QP dropped because their keys were wrong (or a proof nobody waits for): counted,
/// and logged (`DAT_DBG_TYPE` bit ERROR) at most once a LOG_EVERY per QP, so that a search of
/// the key space leaves a trace without the log becoming the attacker's tool.
#[derive(Default)]
pub struct Violations {
    total: AtomicU64,
    /// When we last logged, and the total then.
    logged: Mutex<Option<(Instant, u64)>>,
}

impl Violations {
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub fn note(&self, qpn: u32, from: SocketAddr, what: &str) {
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        if !crate::log::enabled(DbgType::ERROR) {
            return;
        }
        let now = Instant::now();
        let mut logged = self.logged.locked();
        let (since, before) = match *logged {
            Some((at, _)) if now.duration_since(at) < LOG_EVERY => return,
            Some((at, n)) => (Some(now.duration_since(at)), n),
            None => (None, 0),
        };
        *logged = Some((now, total));
        drop(logged);
        let window = since.map_or_else(String::new, |d| format!(" in the last {:.1} s", d.as_secs_f64()));
        dbg_log!(
            DbgType::ERROR,
            "soft UD QP {qpn}: dropped {} datagrams with a wrong Q_Key or secret{window} ({total} in all); the last from {from}: {what}",
            total - before
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_match_address_port_and_token_only() {
        let mut p = Proofs::default();
        let from: SocketAddr = "127.0.0.2:4000".parse().unwrap();
        let deadline = Instant::now() + PROOF_TIMEOUT;
        let ev = CmEvent::TimedOut;
        assert!(p.expect(from, 7, deadline, Waiter::Acceptor { answer: 9, event: Some(ev.clone()) }));
        // Another port, another address, another token: nobody waits for it.
        for (f, t) in [("127.0.0.2:4001", 7), ("127.0.0.3:4000", 7), ("127.0.0.2:4000", 8)] {
            assert!(p.on_proof(f.parse().unwrap(), t).is_none(), "{f} {t}");
        }
        let got = p.on_proof(from, 7).expect("proven");
        assert_eq!((got.answer, got.event), (Some(9), Some(ev)));
        // A copy is answered again, but reported once.
        let again = p.on_proof(from, 7).expect("answered");
        assert_eq!((again.answer, again.event), (Some(9), None));
        // Proven: its deadline reports nothing; an unproven one's reports Broken.
        assert!(p.expect(from, 11, deadline, Waiter::Acceptor { answer: 1, event: Some(CmEvent::TimedOut) }));
        assert_eq!(p.next_deadline(), Some(deadline));
        assert_eq!(p.expire(deadline), vec![CmEvent::Broken]);
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn waits_are_bounded_and_requesters_woken() {
        let mut p = Proofs::default();
        let from: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        for t in 0..PROOFS_MAX as u128 {
            assert!(p.expect(from, t, far, Waiter::Acceptor { answer: 0, event: None }));
        }
        let s = Arc::new(Signal::default());
        assert!(!p.expect(from, 1 << 100, far, Waiter::Requester(s.clone())), "past PROOFS_MAX");
        p.clear();
        assert!(p.expect(from, 1 << 100, far, Waiter::Requester(s.clone())));
        assert!(p.on_proof(from, 1 << 100).is_some());
        assert!(s.wait_until(Instant::now()));
        p.forget(&s);
        assert!(p.on_proof(from, 1 << 100).is_none());
    }

    #[test]
    fn violations_count() {
        let v = Violations::default();
        let from: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for _ in 0..1000 {
            v.note(1, from, "test");
        }
        assert_eq!(v.total(), 1000);
    }
}
