//! The read side of a connected soft QP, driven by the engine (engine.rs): a state machine
//! over the connection's one non-blocking socket, advanced whenever it is readable, a
//! deadline of its own passes, or a posted receive kicks it. It takes the peer's frames in
//! order, completes our requests as their responses and acknowledgements come, and runs the
//! peer's requests (exec.rs) or holds them until a receive is posted (rx.rs).
//!
//! Nothing here waits. A frame with a small payload is handled once it is buffered whole; a
//! larger payload lands in our memory piece by piece as it comes (`Step::Land`), each piece
//! under fresh leases on the key sets that admitted it and under `exec`: a revoke waits for
//! one piece at most, and meets the landing's next piece with the set revoked (the rest is
//! consumed unused, and the request fails as one whose key was revoked before its data came),
//! and a disconnect, once it has taken `exec`, sees no more of it land. What used to wait in
//! a reader thread is a state with a deadline: the passive side's READY (READY_WAIT), a
//! request with no receive and no room to hold it (RNR_WAIT: the socket is not read until a
//! receive is posted or the time passes).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, TryLockError};
use std::time::Instant;

use super::recvq::{needs_recv, stall_cost, RNR_WAIT, STALL_BYTES, STALL_TOTAL};
use super::{Data, Frame, FrameData, SoftQp, State, Target};
use super::{Event, Landing, ACK_LAZY_MAX};
use crate::abi::{DAT_DTO_ERR_LOCAL_PROTECTION, DAT_DTO_ERR_RECEIVER_NOT_READY, DAT_DTO_SUCCESS};
use crate::device::soft::engine;
use crate::device::soft::io::{Rx, Segs, RX_BUF, TAIL};
use crate::device::soft::lease::{SetLease, Via};
use crate::device::soft::wire::{self, flag, op, Hdr, Hello, HDR_LEN};
use crate::device::CmEvent;
use crate::util::sync::MutexExt;

/// The largest payload handled whole from the buffer (a READY, a scatter list, a small
/// message); a larger one is moved as it comes.
const SMALL: usize = RX_BUF - HDR_LEN;

/// The most frames one connection is served in a row before the engine turns to the others.
const BUDGET: u32 = 64;

pub(super) struct Reader {
    rx: Rx,
    step: Step,
    /// Passive side, until the peer's READY (its first frame): READY_WAIT after the accept.
    ready_by: Option<Instant>,
}

enum Step {
    /// Between frames.
    Header,
    /// A request that can neither run nor be held: nothing more is read until a receive is
    /// posted (a kick) or the deadline passes (then the peer hears "receiver not ready").
    Rnr { hdr: Hdr, data: Data, deadline: Instant },
    /// A payload moving into our memory (`segs`, the part not landed yet; `left` bytes, the
    /// last TAIL of them landed apart, see `io::split_tail`).
    Land { segs: Segs, left: usize, sets: Vec<Arc<SetLease>>, then: Then },
    /// Payload bytes consumed unused; then `then`, as one whose key was revoked.
    Discard { left: usize, then: Then },
    /// A request's payload buffered, to wait for a receive (bounded by STALL_BYTES).
    Collect { hdr: Hdr, buf: Vec<u8>, cost: usize },
    /// The connection ended.
    Done,
}

/// What follows a payload.
enum Then {
    Nothing,
    /// The response to our request `wr_id`, with its status.
    Response {
        wr_id: u64,
        status: u32,
    },
    /// A peer's WRITE or SEND (exec.rs `finish_exec`).
    Exec {
        hdr: Hdr,
        target: Box<Target>,
    },
}

/// How the state machine goes on.
enum Flow {
    /// To this step, at once.
    Next(Step),
    /// Nothing more has come: this step goes on when it does.
    Block(Step),
    /// Not reading until a kick or a deadline.
    Stop(Step),
    /// The connection ends: with this event, or quietly (already reported, or ours).
    End(Option<CmEvent>),
    /// The socket failed or ended.
    Lost(std::io::Error),
}

impl Reader {
    pub(super) fn new(fd: i32, ready_by: Option<Instant>) -> Reader {
        Reader { rx: Rx::new(fd), step: Step::Header, ready_by }
    }
}

impl SoftQp {
    /// A turn for our reading side (see the module text), on the engine thread or on a
    /// consumer's polling thread (engine.rs `poll_here`). One thread reads at a time and none
    /// waits for another: a thread that finds the reader taken leaves it a note (`read_again`)
    /// and returns, and the holder takes one more turn before it lets go, so no readiness,
    /// deadline or kick is lost, and the engine thread never waits on a consumer's thread
    /// (which may be running the consumer's own code with the reader held).
    pub(super) fn read_ready(&self) {
        self.read_again.store(true, Ordering::SeqCst);
        loop {
            let guard = match self.reader.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            if !self.read_again.swap(false, Ordering::SeqCst) {
                return;
            }
            self.read_turn(guard);
            if !self.read_again.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// A turn of our reading side on the engine thread from inside a consumer call that waits
    /// for the peer's answer (cm.rs `await_peer_copies`); false when the turn cannot be taken
    /// here: a thread is in the middle of one already (this one, when the call came from our
    /// own delivery, or a polling consumer's, which then takes the turn itself).
    pub(super) fn try_read_turn(&self) -> bool {
        let guard = match self.reader.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        // This turn serves what was asked for until now; what comes during it gets its own.
        self.read_again.store(false, Ordering::SeqCst);
        self.read_turn(guard);
        if self.read_again.load(Ordering::SeqCst) {
            self.read_ready();
        }
        true
    }

    /// One turn, with the reader held (`guard`, dropped by the time it returns).
    fn read_turn(&self, mut guard: MutexGuard<'_, Option<Reader>>) {
        let Some(r) = guard.as_mut() else { return };
        if let Some(by) = r.ready_by {
            if Instant::now() >= by && !matches!(r.step, Step::Done) {
                r.step = Step::Done;
                drop(guard);
                if self.lock().state != State::Closed {
                    crate::dbg_log!(
                        crate::log::DbgType::PROVIDER_API,
                        "soft QP {}: no READY from {:?} within READY_WAIT of the accept",
                        self.id,
                        self.lock().remote
                    );
                    self.fail(CmEvent::AcceptCompletionError);
                }
                return;
            }
        }
        let mut budget = BUDGET;
        loop {
            let step = std::mem::replace(&mut r.step, Step::Done);
            let flow = match step {
                Step::Done => return,
                Step::Header => {
                    if budget == 0 {
                        // Others wait: this connection goes on at the engine's next turn.
                        r.step = Step::Header;
                        if let Some(reg) = &self.lock().reg {
                            reg.kick();
                        }
                        return;
                    }
                    budget -= 1;
                    self.next_frame(r)
                }
                Step::Rnr { hdr, data, deadline } => self.try_run(r, hdr, data, deadline, false),
                Step::Land { segs, left, sets, then } => self.land_more(r, segs, left, sets, then),
                Step::Discard { left, then } => self.discard_more(r, left, then),
                Step::Collect { hdr, buf, cost } => self.collect_more(r, hdr, buf, cost),
            };
            match flow {
                Flow::Next(s) => r.step = s,
                Flow::Block(s) => {
                    let idle = matches!(s, Step::Header);
                    r.step = s;
                    if idle && self.acks_pending() {
                        // Nothing more from the peer: the acknowledgements we owe go now, after
                        // the consumer's threads had one chance to carry them in a request of
                        // their own (a ping-pong).
                        // SAFETY: sched_yield has no preconditions.
                        unsafe { libc::sched_yield() };
                        self.flush_acks();
                    }
                    return;
                }
                Flow::Stop(s) => {
                    r.step = s;
                    return;
                }
                Flow::End(ev) => {
                    r.step = Step::Done;
                    drop(guard);
                    if let Some(ev) = ev {
                        self.fail(ev);
                    }
                    return;
                }
                Flow::Lost(e) => {
                    r.step = Step::Done;
                    drop(guard);
                    if self.lock().state != State::Closed {
                        // An orderly close by the peer (an abrupt disconnect or free) reads as
                        // a disconnect, as with rdma_cm; a reset or error is a broken connection.
                        let eof = e.kind() == std::io::ErrorKind::UnexpectedEof;
                        self.fail(if eof { CmEvent::Disconnected } else { CmEvent::Broken });
                    }
                    return;
                }
            }
        }
    }

    /// The next frame, once its header (and a small payload) is buffered.
    fn next_frame(&self, r: &mut Reader) -> Flow {
        let hdr = loop {
            if let Some(h) = r.rx.peek(HDR_LEN) {
                let hdr = Hdr::decode(h.try_into().unwrap_or(&[0; HDR_LEN]));
                let small = hdr.payload as usize <= SMALL;
                if r.rx.buffered() >= HDR_LEN + if small { hdr.payload as usize } else { 0 } {
                    break hdr;
                }
            }
            match r.rx.fill(false) {
                Ok(true) => {}
                Ok(false) => return Flow::Block(Step::Header),
                Err(e) => return Flow::Lost(e),
            }
        };
        let _ = r.rx.take_array::<HDR_LEN>();
        let handshaking = r.ready_by.take().is_some();
        if handshaking && (hdr.op != op::READY || hdr.acks > 0) {
            return Flow::End(Some(CmEvent::AcceptCompletionError));
        }
        if hdr.acks > 0 && !self.on_acks(hdr.acks) {
            return Flow::End(Some(CmEvent::Broken));
        }
        match hdr.op {
            op::ACK => Flow::Next(Step::Header),
            op::RESPONSE => self.on_response(&hdr),
            op::READY => {
                if self.on_ready(r, &hdr) {
                    Flow::Next(Step::Header)
                } else {
                    Flow::End(Some(if handshaking { CmEvent::AcceptCompletionError } else { CmEvent::Broken }))
                }
            }
            op::DISCONNECT => {
                {
                    let mut i = self.lock();
                    if i.state == State::Closed {
                        return Flow::End(None);
                    }
                    i.state = State::Closed;
                }
                self.send_frame(Frame { hdr: Hdr { op: op::DISCONNECT, ..Hdr::default() }, data: FrameData::None, last: true });
                self.flush(CmEvent::Disconnected);
                Flow::End(None)
            }
            op::SEND | op::WRITE | op::READ | op::CMP_SWAP | op::FETCH_ADD => self.on_request(r, hdr),
            _ => Flow::End(Some(CmEvent::Broken)),
        }
    }

    /// The active side's last handshake message: did it verify us at the rendezvous, and can
    /// it reach our memory? It wrote its claims there before READY; with them the
    /// connection's path is decided, and the passive side reports ESTABLISHED (so that
    /// dat_ep_query then names the final path), and tells the active side the path in the
    /// answer's status. It is the first frame the peer sends, so the event still precedes
    /// everything the peer does on the connection. False: not a valid READY.
    fn on_ready(&self, r: &mut Reader, hdr: &Hdr) -> bool {
        let body = if hdr.payload <= wire::HELLO_MAX { r.rx.take_vec(hdr.payload as usize).ok() } else { None };
        let Some(ready) = body.and_then(|body| Hello::decode(&body)) else { return false };
        let (expected, rendezvous) = {
            let mut i = self.lock();
            (std::mem::take(&mut i.awaiting_ready), i.rendezvous.take())
        };
        if expected {
            let verified = rendezvous.and_then(|(channel, end)| channel.verify(end));
            let agreed = ready.reaches_peer && verified.as_ref().is_some_and(|(p, c)| p.reaches(c.canary));
            self.set_path(verified, agreed);
            // The answer goes first in the stream, ahead of anything the consumer sends once
            // it has the event, but leaves only after the event is queued (op::ESTABLISHED).
            let answer = Hdr { status: agreed as u8, ..Hdr::message(op::ESTABLISHED, 0) };
            self.hold_frame(Frame { hdr: answer, data: FrameData::None, last: false });
            self.deliver(vec![Event::Cm(CmEvent::Established { private_data: Vec::new() })]);
            self.release_frames();
        }
        // A READY the handshake did not ask for is not valid.
        expected
    }

    /// A response to our oldest outstanding request: its data (a READ's, an atomic's) lands
    /// in the request's buffers, whose keys must still be live (lease.rs).
    fn on_response(&self, hdr: &Hdr) -> Flow {
        let head = {
            let i = self.lock();
            i.sq.awaiting()
        };
        let Some((wr_id, sges, reply)) = head else { return Flow::End(Some(CmEvent::Broken)) };
        let status = u32::from(hdr.status);
        // A response carries exactly what its request asked for: a success its data, an error
        // nothing.
        if hdr.payload != if status == DAT_DTO_SUCCESS { reply } else { 0 } {
            return Flow::End(Some(CmEvent::Broken));
        }
        let left = hdr.payload as usize;
        let then = Then::Response { wr_id, status };
        if left == 0 {
            return self.finish(then, Ok(()));
        }
        match self.local_sets(&sges, true) {
            // Revoked since the post (dat_lmr_free): a local protection error, as on an HCA.
            None => Flow::Next(Step::Discard { left, then }),
            // The payload is exactly what the request asked for: its buffers, in full.
            Some(sets) => {
                let segs = sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
                Flow::Next(Step::Land { segs, left, sets, then })
            }
        }
    }

    /// A request from the peer. Its header is checked before anything is read or allocated
    /// for it (wire::request_shape_ok).
    fn on_request(&self, r: &mut Reader, hdr: Hdr) -> Flow {
        if hdr.flags & flag::PLACED != 0 {
            return if self.on_placed(&hdr) { Flow::Next(Step::Header) } else { Flow::End(Some(CmEvent::Broken)) };
        }
        if !wire::request_shape_ok(&hdr, self.caps.max_message) {
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: a malformed request (op {}, payload {}, length {})",
                self.id,
                hdr.op,
                hdr.payload,
                hdr.length
            );
            return Flow::End(Some(CmEvent::Broken));
        }
        if self.lock().state == State::Closed {
            // We answered an earlier request with an error (or are disconnecting): requests
            // still on the wire are not executed, as on an HCA whose QP went to error.
            return Flow::Next(Step::Discard { left: hdr.payload as usize, then: Then::Nothing });
        }
        let cma = hdr.flags & flag::CMA != 0;
        if (cma || hdr.flags & flag::SHM != 0) && !(cma && self.lock().path.cma() && matches!(hdr.op, op::SEND | op::WRITE | op::READ)) {
            // A path the handshake did not agree (see peer.rs): a protocol violation.
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: a request flagged CMA/SHM on a connection without that path",
                self.id
            );
            return Flow::End(Some(CmEvent::Broken));
        }
        if matches!(hdr.op, op::READ | op::CMP_SWAP | op::FETCH_ADD)
            && !cma
            && self.reads_in.fetch_add(1, Ordering::SeqCst) >= self.caps.max_rd_in
        {
            // More reads in flight than we said we take (responder resources).
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: more than {} reads or atomics outstanding",
                self.id,
                self.caps.max_rd_in
            );
            return Flow::End(Some(CmEvent::Broken));
        }
        let data = if cma {
            // A scatter list, small: buffered whole (see `next_frame`).
            let Ok(list) = r.rx.take_vec(hdr.payload as usize) else { return Flow::End(Some(CmEvent::Broken)) };
            let data = if hdr.flags & flag::SHM != 0 {
                let (segs, srcs) = wire::decode_shared(&list);
                Data::Shared(segs, srcs)
            } else {
                Data::Remote(wire::decode_segments(&list))
            };
            let (Data::Remote(segs) | Data::Shared(segs, _)) = &data else { return Flow::End(Some(CmEvent::Broken)) };
            if wire::list_total(segs) != Some(hdr.length) {
                return Flow::End(Some(CmEvent::Broken));
            }
            data
        } else {
            Data::Socket
        };
        self.try_run(r, hdr, data, Instant::now() + RNR_WAIT, true)
    }

    /// Runs a request now, holds it until a receive comes, or (no room to hold it) stops
    /// reading until a receive is posted or `deadline` passes (`first`: the engine is told
    /// of the deadline).
    fn try_run(&self, r: &mut Reader, hdr: Hdr, data: Data, deadline: Instant, first: bool) -> Flow {
        self.rnr_wait.store(false, Ordering::SeqCst);
        let payload = hdr.payload as usize;
        let on_socket = matches!(data, Data::Socket);
        let exec = self.exec.locked();
        if self.lock().state == State::Closed {
            // A disconnect waits for `exec` (see `disconnect_now`): nothing it ended runs
            // after it.
            drop(exec);
            let left = if on_socket { payload } else { 0 };
            return Flow::Next(Step::Discard { left, then: Then::Nothing });
        }
        let needs_recv = needs_recv(&hdr);
        let cost = stall_cost(&hdr, &data);
        let (stalled, room) = {
            let i = self.lock();
            (i.rq.holding(), i.rq.fits(cost))
        };
        // The receive is taken where the request is decided to run: on an SRQ, a check and a
        // later take would let another QP take the last receive in between.
        let recv = if needs_recv && !stalled { self.take_recv() } else { None };
        if !stalled && (!needs_recv || recv.is_some()) {
            if on_socket && payload > SMALL {
                // Its data is still coming: it lands in pieces (`land_more`).
                let target = self.target(&hdr, recv);
                drop(exec);
                self.exec_done();
                let Some(target) = target else { return Flow::End(Some(CmEvent::Broken)) };
                let (go, segs, sets) = (target.go, target.segs.iter().copied().filter(|s| s.1 > 0).collect(), target.sets.clone());
                let then = Then::Exec { hdr, target: Box::new(target) };
                return Flow::Next(if go { Step::Land { segs, left: payload, sets, then } } else { Step::Discard { left: payload, then } });
            }
            let (ok, events) = self.execute(Some(&mut r.rx), hdr, data, recv);
            self.enqueue(events);
            drop(exec);
            self.exec_done();
            self.deliver([]);
            return if ok { Flow::Next(Step::Header) } else { Flow::End(Some(CmEvent::Broken)) };
        }
        if room && self.lock().rq.reserve(cost) {
            let data = match data {
                Data::Socket if payload > SMALL => {
                    drop(exec);
                    return Flow::Next(Step::Collect { hdr, buf: Vec::with_capacity(payload), cost });
                }
                Data::Socket => match r.rx.take_vec(payload) {
                    Ok(buf) => Data::Buffer(buf),
                    Err(_) => return Flow::End(Some(CmEvent::Broken)),
                },
                d => d,
            };
            self.stall(hdr, data, cost, exec);
            return Flow::Next(Step::Header);
        }
        // No room to hold it: it stays on the socket until it can run in place.
        drop(exec);
        self.exec_done();
        if Instant::now() >= deadline {
            if self.lock().state != State::Closed {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft QP {}: no receive for {RNR_WAIT:?} and no room to hold requests (at most {STALL_BYTES} bytes a connection, {STALL_TOTAL} the process): receiver not ready",
                    self.id
                );
                // The answer goes out (the connection ends after it); reading stops.
                self.respond(DAT_DTO_ERR_RECEIVER_NOT_READY, FrameData::None, 0, false);
                self.flush(CmEvent::Broken);
            }
            return Flow::End(None);
        }
        // Told by `wake_room` when a receive is posted; checked again after the flag is up, so
        // that a receive posted in between is not missed.
        self.rnr_wait.store(true, Ordering::SeqCst);
        let ready = {
            let i = self.lock();
            if let (true, Some(reg)) = (first, &i.reg) {
                reg.timer(deadline);
            }
            i.state == State::Closed || (!i.rq.holding() && (!needs_recv || self.has_recv(&i)))
        };
        let step = Step::Rnr { hdr, data, deadline };
        if ready {
            Flow::Next(step)
        } else {
            Flow::Stop(step)
        }
    }

    /// Queues a request until a receive comes, then runs what a receive posted meanwhile
    /// lets run.
    /// (Its cost was counted when it was decided to hold it, `RecvQueue::reserve`.)
    fn stall(&self, hdr: Hdr, data: Data, cost: usize, exec: std::sync::MutexGuard<'_, ()>) {
        self.lock().rq.hold(hdr, data, cost);
        drop(exec);
        self.drain_stalled();
    }

    /// Lands what has come of a payload, piece by piece (see the module text).
    fn land_more(&self, r: &mut Reader, mut segs: Segs, mut left: usize, sets: Vec<Arc<SetLease>>, then: Then) -> Flow {
        while left > 0 {
            if segs.is_empty() {
                // Fewer bytes of memory than of payload: not a shape any request has.
                return self.finish(then, Err(Landing::Failed));
            }
            let exec = self.exec.locked();
            if self.lock().state == State::Closed {
                drop(exec);
                return self.finish(then, Err(Landing::Failed));
            }
            let Some(leases) = self.leases(&sets, Via::Memory) else {
                drop(exec);
                return Flow::Next(Step::Discard { left, then });
            };
            // The last TAIL bytes land in a copy of their own, after the rest (io::split_tail).
            let max = if left > TAIL { left - TAIL } else { left };
            let got = r.rx.land_some(&mut segs, max);
            drop(leases);
            drop(exec);
            // A receive posted during the piece left its drain to us (rx.rs `drain_stalled`).
            self.exec_done();
            match got {
                Ok(0) => return Flow::Block(Step::Land { segs, left, sets, then }),
                Ok(n) => left -= n,
                Err(_) => return self.finish(then, Err(Landing::Failed)),
            }
        }
        self.finish(then, Ok(()))
    }

    fn discard_more(&self, r: &mut Reader, mut left: usize, then: Then) -> Flow {
        while left > 0 {
            match r.rx.discard_some(left) {
                Ok(0) => return Flow::Block(Step::Discard { left, then }),
                Ok(n) => left -= n,
                Err(_) => return self.finish(then, Err(Landing::Failed)),
            }
        }
        self.finish(then, Err(Landing::Revoked))
    }

    fn collect_more(&self, r: &mut Reader, hdr: Hdr, mut buf: Vec<u8>, cost: usize) -> Flow {
        match r.rx.take_some(&mut buf, hdr.payload as usize) {
            Ok(false) => Flow::Block(Step::Collect { hdr, buf, cost }),
            Err(e) => Flow::Lost(e),
            Ok(true) => {
                let exec = self.exec.locked();
                if self.lock().state == State::Closed {
                    return Flow::Next(Step::Header);
                }
                self.stall(hdr, Data::Buffer(buf), cost, exec);
                Flow::Next(Step::Header)
            }
        }
    }

    /// What follows a payload that landed (`Ok`), was consumed unused (`Revoked`), or did not
    /// come (`Failed`: the connection ends).
    fn finish(&self, then: Then, outcome: Result<(), Landing>) -> Flow {
        match then {
            Then::Nothing if matches!(outcome, Err(Landing::Failed)) => Flow::End(Some(CmEvent::Broken)),
            Then::Nothing => Flow::Next(Step::Header),
            Then::Response { wr_id, status } => {
                let status = match outcome {
                    Ok(()) => status,
                    Err(Landing::Revoked) => DAT_DTO_ERR_LOCAL_PROTECTION,
                    Err(Landing::Failed) => return Flow::End(Some(CmEvent::Broken)),
                };
                if self.finish_response(wr_id, status) {
                    Flow::Next(Step::Header)
                } else {
                    Flow::End(Some(CmEvent::Broken))
                }
            }
            Then::Exec { hdr, target } => {
                let lazy = hdr.length <= ACK_LAZY_MAX;
                let exec = self.exec.locked();
                let (ok, events) = self.finish_exec(hdr, *target, outcome, lazy);
                self.enqueue(events);
                drop(exec);
                self.exec_done();
                self.deliver([]);
                if ok {
                    Flow::Next(Step::Header)
                } else {
                    Flow::End(Some(CmEvent::Broken))
                }
            }
        }
    }
}

impl engine::Handler for SoftQp {
    /// Its read turns never wait for one another (`read_ready`), nor does a write (`busy`).
    fn runs_anywhere(&self) -> bool {
        true
    }

    /// The read turn that panicked left its step done, and a write its `busy`: the connection
    /// ends, its requests complete flushed, and the consumer gets BROKEN.
    fn panicked(&self) {
        self.fail(CmEvent::Broken);
    }

    fn ready(&self, events: u32) {
        if events & (engine::OUT | engine::ERR) != 0 {
            // Room again (or an error, which the next write finds): what waits goes on.
            self.pump();
        }
        if events & (engine::IN | engine::ERR | engine::TIMER | engine::KICK) != 0 {
            if events & engine::NESTED == 0 {
                self.read_ready();
            } else if !self.try_read_turn() {
                // Our turn is up the stack (the wait came from our own delivery): the edge is
                // not lost, it is left for the engine's next turn.
                if let Some(reg) = &self.lock().reg {
                    reg.kick();
                }
            }
        }
    }
}
