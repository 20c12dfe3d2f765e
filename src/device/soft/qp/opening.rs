//! The active side's handshake, driven by the process's engine (engine.rs): a connect costs
//! no thread. Each stage is a state of `Handshake`, advanced when its socket is ready, and
//! each has a deadline, an engine timer:
//! 1. the TCP connect (a refused one is tried again for REFUSED_RETRY, as programs create
//!    their listener just before the peer connects) and the greeting's answer: within the
//!    consumer's timeout, and the answer within HANDSHAKE_TIMEOUT besides;
//! 2. the passive side's answer to HELLO (ACCEPT or REJECT, which its consumer decides):
//!    within the consumer's timeout (none: an hour);
//! 3. the answer to READY, which no consumer decides: within READY_WAIT besides.
//!
//! Past a deadline the consumer hears TIMED_OUT. Only exactly the bytes of each message are
//! read, so that what the peer sends after ESTABLISHED stays on the socket for the reader.
//! `dat_ep_disconnect` and `dat_ep_free` end the handshake at once: they shut its stream down
//! (the QP keeps a clone), which the next turn finds.

use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::cm::READY_WAIT;
use super::{SoftQp, State};
use crate::device::soft::engine::Handler;
use crate::device::soft::exchange::{answer_failed, message, Dial, Dialed, Stop};
use crate::device::soft::listener::NO_LIMIT;
use crate::device::soft::peer::{self, PeerProcess};
use crate::device::soft::rendezvous::{Claims, Rendezvous};
use crate::device::soft::wire::{self, op, Hdr, Hello, HDR_LEN};
use crate::device::CmEvent;
use crate::util::sync::MutexExt;

/// What the handshake came to: the connected stream, the peer's ACCEPT, the same-host peer
/// it proved to be (if any), and whether both sides agreed the cross-memory path.
pub(super) type Outcome = (TcpStream, Hello, Option<(PeerProcess, Claims)>, bool);

/// The engine's handler of one active handshake, owned by its QP while it runs.
pub(super) struct Opener {
    this: Weak<Opener>,
    qp: Weak<SoftQp>,
    hs: Mutex<Option<Handshake>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The TCP connect and the greeting (exchange.rs `Dial`).
    Dialing,
    /// HELLO is going out; the answer (ACCEPT or REJECT) is awaited.
    Answer,
    /// READY is going out; ESTABLISHED is awaited.
    Established,
}

struct Handshake {
    dial: Dial,
    conn_qual: u64,
    stage: Stage,
    private_data: Vec<u8>,
    rendezvous: Option<Rendezvous>,
    answer: Option<Hello>,
    verified: Option<(PeerProcess, Claims)>,
    we_reach: bool,
}

/// What a turn came to.
enum Turn {
    Wait,
    Failed(CmEvent),
    /// ESTABLISHED came (or the connection ended after READY): whether the path is agreed.
    Accepted(bool),
}

impl Opener {
    /// Starts the handshake of `qp` with the service point `conn_qual` at `addr`, the QP's
    /// `opening` while it runs. Err: the connect failed at once (no socket to be had).
    pub(super) fn start(
        qp: &Arc<SoftQp>,
        addr: SocketAddr,
        conn_qual: u64,
        private_data: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<(), CmEvent> {
        let opener = Arc::new_cyclic(|this| Opener { this: this.clone(), qp: Arc::downgrade(qp), hs: Mutex::new(None) });
        let handler: Weak<dyn Handler> = opener.this.clone();
        let dial = Dial::start(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr, timeout.unwrap_or(NO_LIMIT), handler)?;
        let mut hs = Handshake {
            dial,
            conn_qual,
            stage: Stage::Dialing,
            private_data,
            rendezvous: None,
            answer: None,
            verified: None,
            we_reach: false,
        };
        {
            let mut i = qp.lock();
            // Where a disconnect or free finds it.
            i.stream = hs.dial.stream().try_clone().ok();
            i.opening = Some(opener.clone());
        }
        // Held until the handshake is stored: an edge that comes first waits for it.
        let mut g = opener.hs.locked();
        if hs.dial.register().is_none() {
            return Err(CmEvent::Unreachable);
        }
        *g = Some(hs);
        Ok(())
    }
}

impl Handler for Opener {
    fn ready(&self, events: u32) {
        let Some(qp) = self.qp.upgrade() else { return };
        let mut g = self.hs.locked();
        let Some(hs) = g.as_mut() else { return };
        let outcome = match hs.turn(&qp, events) {
            Turn::Wait => return,
            Turn::Failed(ev) => Err(ev),
            Turn::Accepted(agreed) => Ok(agreed),
        };
        let Some(Handshake { dial, answer, verified, .. }) = g.take() else { return };
        drop(g);
        // Unregistered before the stream is handed on (the reader registers it again).
        let stream = dial.into_stream();
        let outcome = match (outcome, answer) {
            (Ok(agreed), Some(answer)) => Ok((stream, answer, verified, agreed)),
            (Ok(_), None) => Err(CmEvent::Broken),
            (Err(ev), _) => Err(ev),
        };
        qp.opened(outcome);
    }

    fn panicked(&self) {
        let hs = self.hs.locked().take();
        drop(hs);
        if let Some(qp) = self.qp.upgrade() {
            qp.opened(Err(CmEvent::Broken));
        }
    }
}

impl Handshake {
    /// Enters `stage` with `msg` to send and a deadline of `wait` (cut to the consumer's).
    fn enter(&mut self, stage: Stage, msg: Vec<u8>, wait: Duration) {
        self.dial.enter(msg, wait);
        self.stage = stage;
    }

    /// Advances the handshake as far as the socket lets it.
    fn turn(&mut self, qp: &Arc<SoftQp>, events: u32) -> Turn {
        if qp.lock().state != State::Connecting {
            return Turn::Failed(CmEvent::Broken);
        }
        loop {
            match self.stage {
                Stage::Dialing => match self.dial.dial(events) {
                    Dialed::Wait => {
                        if self.dial.renewed() {
                            // Where a disconnect or free finds it.
                            qp.lock().stream = self.dial.stream().try_clone().ok();
                        }
                        return Turn::Wait;
                    }
                    Dialed::Failed(ev) => return Turn::Failed(ev),
                    Dialed::Greeted => {
                        // A peer on this host is asked to our rendezvous (rendezvous.rs), where
                        // each side learns from the kernel which process the other is.
                        self.rendezvous = peer::other_end(self.dial.stream()).and_then(|_| Rendezvous::open());
                        let hello = Hello {
                            rendezvous: self.rendezvous.as_ref().map_or(0, |r| r.token),
                            conn_qual: self.conn_qual,
                            rd_in: qp.caps.max_rd_in,
                            private_data: std::mem::take(&mut self.private_data),
                            ..Hello::default()
                        };
                        self.enter(Stage::Answer, message(op::HELLO, &hello.encode()), NO_LIMIT);
                    }
                },
                Stage::Answer => {
                    let failed = |stop| answer_failed(stop).map_or(Turn::Wait, Turn::Failed);
                    if let Err(stop) = self.dial.exchange(HDR_LEN) {
                        return failed(stop);
                    }
                    let hdr = Hdr::decode(self.dial.got()[..HDR_LEN].try_into().expect("a header"));
                    if hdr.payload > wire::HELLO_MAX {
                        return Turn::Failed(CmEvent::NonPeerRejected);
                    }
                    if let Err(stop) = self.dial.exchange(HDR_LEN + hdr.payload as usize) {
                        return failed(stop);
                    }
                    let Some(answer) = Hello::decode(&self.dial.got()[HDR_LEN..]) else { return Turn::Failed(CmEvent::NonPeerRejected) };
                    match hdr.op {
                        op::ACCEPT => {
                            // The passive side came to the rendezvous before it sent ACCEPT, if at
                            // all. The other end is looked up only now: when we sent HELLO, the
                            // peer may not have accepted the connection yet (its socket had no
                            // inode).
                            let end = self.rendezvous.as_ref().and_then(|_| peer::other_end(self.dial.stream()));
                            let verified = self.rendezvous.as_ref().zip(end).and_then(|(r, e)| r.take(e));
                            self.we_reach = verified
                                .as_ref()
                                .is_some_and(|(p, c, channel)| channel.send(&qp.claims(self.dial.stream())) && p.reaches(c.canary));
                            self.verified = verified.map(|(p, c, _)| (p, c));
                            self.answer = Some(answer);
                            let ready = Hello { reaches_peer: self.we_reach, ..Hello::default() };
                            self.enter(Stage::Established, message(op::READY, &ready.encode()), READY_WAIT);
                        }
                        op::REJECT if hdr.status == wire::reject::NO_SERVICE => {
                            crate::dbg_log!(
                                crate::log::DbgType::ERROR,
                                "dat2-soft: no service point {:#x} at {}",
                                self.conn_qual,
                                self.dial.addr()
                            );
                            return Turn::Failed(CmEvent::NonPeerRejected);
                        }
                        op::REJECT => return Turn::Failed(CmEvent::PeerRejected { private_data: answer.private_data }),
                        _ => return Turn::Failed(CmEvent::NonPeerRejected),
                    }
                }
                Stage::Established => {
                    // Wait until the passive side has reported ESTABLISHED (see op::ESTABLISHED).
                    // If the connection ends first (the passive side broke it at once), it was
                    // accepted all the same: we report ESTABLISHED and the reader then finds the
                    // end. Its status says whether the passive side agreed the cross-memory path.
                    return match self.dial.exchange(HDR_LEN) {
                        Ok(()) => {
                            let done = Hdr::decode(self.dial.got()[..HDR_LEN].try_into().expect("a header"));
                            if done.op != op::ESTABLISHED || done.acks != 0 || done.payload != 0 {
                                return Turn::Failed(CmEvent::Broken);
                            }
                            Turn::Accepted(self.we_reach && done.status == 1)
                        }
                        Err(Stop::Wait) => Turn::Wait,
                        Err(Stop::Late) => Turn::Failed(CmEvent::TimedOut),
                        Err(Stop::Closed) => Turn::Accepted(false),
                        Err(Stop::WriteFailed | Stop::ReadFailed) => Turn::Failed(CmEvent::Broken),
                    };
                }
            }
        }
    }
}

impl SoftQp {
    /// The active side's handshake ended (opening.rs): the connection starts, unless the
    /// consumer ended it meanwhile; or the consumer hears `ev`.
    pub(super) fn opened(self: &Arc<Self>, outcome: Result<Outcome, CmEvent>) {
        let opener = self.lock().opening.take();
        match outcome {
            Ok((stream, answer, verified, agreed)) => {
                if self.lock().state != State::Connecting {
                    let _ = stream.shutdown(Shutdown::Both);
                    self.lock().stream = None;
                    return;
                }
                self.start(stream, verified, agreed, answer.rd_in, Some(answer.private_data));
            }
            Err(ev) => {
                let mut i = self.lock();
                // The handshake's stream closes now, not with the QP.
                i.stream = None;
                if i.state != State::Connecting {
                    return;
                }
                i.state = State::Closed;
                drop(i);
                self.flush(ev);
            }
        }
        drop(opener);
    }
}
