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
//! (then `TimedOut`). The waits are the QP's, served by its turns on the engine: a proof that
//! comes is matched as the QP reads it, and an engine timer for each deadline and each resend
//! (`Waiter::wakes`) runs `Proofs::tick`; nothing blocks. A QP waits for at most PROOFS_MAX proofs at a time; an accept beyond
//! that is reported `Broken` at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::dbg_log;
use crate::device::CmEvent;
use crate::log::DbgType;
use crate::util::sync::MutexExt;

/// How long a side waits for its peer's proof.
pub const PROOF_TIMEOUT: Duration = if cfg!(test) { Duration::from_secs(1) } else { Duration::from_secs(5) };

/// The most proofs a QP waits for at a time.
pub const PROOFS_MAX: usize = 256;

/// When the requester sends its proof, from the start of its wait (while no answer came).
pub const RESEND_AT: [Duration; 5] =
    [Duration::ZERO, Duration::from_millis(200), Duration::from_millis(600), Duration::from_millis(1400), Duration::from_millis(3000)];

/// How often at most a QP logs the datagrams it dropped for their keys.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Who waits for a proof.
pub enum Waiter {
    /// A resolution of ours: from `start` on, we send our proof `mine` at the times RESEND_AT
    /// gives (`sent` of them so far) until the peer's comes; then `event` is reported (the
    /// entry ends), or TimedOut at the deadline.
    Requester { mine: u128, start: Instant, sent: usize, event: CmEvent },
    /// A request our consumer accepted: once proven, we prove our own port with `answer` and
    /// report `event` (taken then; the entry stays until its deadline to answer copies).
    Acceptor { answer: u128, event: Option<CmEvent> },
}

impl Waiter {
    /// When the wait needs a turn of the QP's: a requester's resends before `deadline`, and
    /// the deadline.
    pub fn wakes(&self, deadline: Instant) -> Vec<Instant> {
        let mut at: Vec<Instant> = match self {
            Waiter::Requester { start, sent, .. } => RESEND_AT.iter().skip(*sent).map(|d| *start + *d).filter(|t| *t < deadline).collect(),
            Waiter::Acceptor { .. } => Vec::new(),
        };
        at.push(deadline);
        at
    }
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

/// What the waits' deadlines and schedules ask of the QP at a turn (`Proofs::tick`).
#[derive(Default)]
pub struct Due {
    /// The waits that ended unproven: requesters' TimedOut, acceptors' Broken.
    pub events: Vec<CmEvent>,
    /// Our proofs to send (a requester's), and where.
    pub proofs: Vec<(SocketAddr, u128)>,
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
    /// waits for it. A requester's wait ends with it.
    pub fn on_proof(&mut self, from: SocketAddr, token: u128) -> Option<Proven> {
        let at = self.entries.iter().position(|e| e.from == from && e.token == token)?;
        if let Waiter::Acceptor { answer, event } = &mut self.entries[at].waiter {
            return Some(Proven { answer: Some(*answer), event: event.take() });
        }
        match self.entries.swap_remove(at).waiter {
            Waiter::Requester { event, .. } => Some(Proven { answer: None, event: Some(event) }),
            Waiter::Acceptor { .. } => None,
        }
    }

    /// Forgets the acceptor's wait for `token` from `from` (its UD_ACCEPT did not go out).
    pub fn forget_acceptor(&mut self, from: SocketAddr, token: u128) {
        self.entries.retain(|e| !(e.from == from && e.token == token && matches!(e.waiter, Waiter::Acceptor { .. })));
    }

    /// Ends the waits past their deadline (an unproven acceptor's event becomes Broken, a
    /// requester's TimedOut), and takes the requesters' proofs due by `now` (one for the
    /// slots of RESEND_AT that passed: a late turn sends no burst).
    pub fn tick(&mut self, now: Instant) -> Due {
        let mut due = Due::default();
        self.entries.retain_mut(|e| {
            if e.deadline <= now {
                match &e.waiter {
                    Waiter::Acceptor { event: Some(_), .. } => due.events.push(CmEvent::Broken),
                    Waiter::Acceptor { event: None, .. } => {}
                    Waiter::Requester { .. } => due.events.push(CmEvent::TimedOut),
                }
                return false;
            }
            if let Waiter::Requester { mine, start, sent, .. } = &mut e.waiter {
                let passed = RESEND_AT.iter().take_while(|d| *start + **d <= now).count();
                if passed > *sent {
                    *sent = passed;
                    due.proofs.push((e.from, *mine));
                }
            }
            true
        });
        due
    }

    /// The next deadline of a wait (the engine has a timer for each wait).
    #[cfg(test)]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries.iter().map(|e| e.deadline).min()
    }

    /// Ends every wait (the QP closes): nothing more is reported.
    pub fn clear(&mut self) {
        self.entries.clear();
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
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use super::{Proofs, Violations, Waiter, PROOFS_MAX, PROOF_TIMEOUT};
    use crate::device::CmEvent;

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
        assert_eq!(p.tick(deadline).events, vec![CmEvent::Broken]);
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn waits_are_bounded_and_a_requester_ends_with_its_proof() {
        let mut p = Proofs::default();
        let from: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let now = Instant::now();
        let far = now + Duration::from_secs(60);
        let requester = || Waiter::Requester { mine: 3, start: now, sent: 1, event: CmEvent::Unreachable };
        for t in 0..PROOFS_MAX as u128 {
            assert!(p.expect(from, t, far, Waiter::Acceptor { answer: 0, event: None }));
        }
        assert!(!p.expect(from, 1 << 100, far, requester()), "past PROOFS_MAX");
        p.clear();
        assert!(p.expect(from, 1 << 100, far, requester()));
        let got = p.on_proof(from, 1 << 100).expect("proven");
        assert_eq!((got.answer, got.event), (None, Some(CmEvent::Unreachable)));
        // Its wait ended: a copy is nobody's, and its deadline reports nothing.
        assert!(p.on_proof(from, 1 << 100).is_none());
        assert!(p.tick(far).events.is_empty());
    }

    #[test]
    fn a_requester_resends_on_schedule_then_times_out() {
        let mut p = Proofs::default();
        let to: SocketAddr = "127.0.0.1:5001".parse().unwrap();
        let start = Instant::now();
        let deadline = start + Duration::from_millis(1000);
        let w = Waiter::Requester { mine: 42, start, sent: 1, event: CmEvent::Unreachable };
        // A turn at each resend before the deadline, and at it.
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(w.wakes(deadline), vec![at(200), at(600), deadline]);
        assert!(p.expect(to, 7, deadline, w));
        assert!(p.tick(at(100)).proofs.is_empty(), "the first went at the start");
        assert_eq!(p.tick(at(200)).proofs, vec![(to, 42)]);
        assert!(p.tick(at(300)).proofs.is_empty());
        // A late turn sends one proof for the slots that passed.
        let late = p.tick(at(999));
        assert_eq!((late.proofs, late.events), (vec![(to, 42)], vec![]));
        let end = p.tick(deadline);
        assert_eq!((end.proofs, end.events), (vec![], vec![CmEvent::TimedOut]));
        assert_eq!(p.next_deadline(), None);
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
