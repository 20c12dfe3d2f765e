//! The reader thread of a soft QP, its progress engine: it takes the peer's frames in order,
//! completes our requests as their responses and acknowledgements come, and runs the peer's
//! requests (exec.rs) or holds them until a receive is posted, within the bounds of
//! STALL_BYTES and RNR_WAIT.

use super::cm::READY_WAIT;
use super::*;
use std::sync::TryLockError;

use crate::util::sync::{CondvarExt, MutexExt};

impl SoftQp {
    // -----------------------------------------------------------------------------------------
    // The reader: the progress engine.

    pub(super) fn reader(self: Arc<Self>, stream: TcpStream) {
        let mut rx = io::Rx::new(stream.as_raw_fd());
        // Passive side: the peer's first frame must be READY (the handshake's end), and whole
        // within READY_WAIT of our accept. A peer that fails that has not completed the
        // accept: the consumer hears DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR (as DAT's
        // reference implementation reports a requester that stopped talking after the accept).
        let mut handshaking = self.lock().awaiting_ready;
        if handshaking && !await_ready(&mut rx) {
            if self.lock().state != State::Closed {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft QP {}: no READY from {:?} within {READY_WAIT:?} of the accept",
                    self.id,
                    stream.peer_addr().ok()
                );
                self.fail(CmEvent::AcceptCompletionError);
            }
            return;
        }
        loop {
            if let Err(e) = self.await_frame(&mut rx) {
                let graceful = self.lock().state == State::Closed;
                if !graceful {
                    // An orderly close by the peer (an abrupt disconnect or free) reads as a
                    // disconnect, as with rdma_cm; a reset or error is a broken connection.
                    let eof = e.kind() == std::io::ErrorKind::UnexpectedEof;
                    self.fail(if eof { CmEvent::Disconnected } else { CmEvent::Broken });
                }
                return;
            }
            let hdr = match rx.take_array::<HDR_LEN>() {
                Ok(h) => Hdr::decode(&h),
                Err(_) => {
                    if self.lock().state != State::Closed {
                        self.fail(CmEvent::Broken);
                    }
                    return;
                }
            };
            if handshaking && (hdr.op != op::READY || hdr.acks > 0) {
                self.fail(CmEvent::AcceptCompletionError);
                return;
            }
            let first = std::mem::take(&mut handshaking);
            if hdr.acks > 0 && !self.on_acks(hdr.acks) {
                self.fail(CmEvent::Broken);
                return;
            }
            let ok = match hdr.op {
                op::ACK => true,
                op::RESPONSE => self.on_response(&mut rx, &hdr),
                op::READY => {
                    // The active side's last handshake message: did it verify us at the
                    // rendezvous, and can it reach our memory? It wrote its claims there before
                    // READY; with them the connection's path is decided, and the passive side
                    // reports ESTABLISHED (so that dat_ep_query then names the final path), and
                    // tells the active side the path in the answer's status. It is the first
                    // frame the peer sends, so the event still precedes everything the peer
                    // does on the connection.
                    let body = if hdr.payload <= wire::HELLO_MAX { rx.take_vec(hdr.payload as usize).ok() } else { None };
                    match body.and_then(|body| Hello::decode(&body)) {
                        Some(ready) => {
                            let (expected, rendezvous) = {
                                let mut i = self.lock();
                                (std::mem::take(&mut i.awaiting_ready), i.rendezvous.take())
                            };
                            if expected {
                                let verified = rendezvous.and_then(|(channel, end)| channel.verify(end));
                                let agreed = ready.reaches_peer && verified.as_ref().is_some_and(|(p, c)| p.reaches(c.canary));
                                self.set_path(verified, agreed);
                                // The answer goes first in the stream, ahead of anything the
                                // consumer sends once it has the event, but leaves only after
                                // the event is queued (see op::ESTABLISHED).
                                let answer = Hdr { status: agreed as u8, ..Hdr::message(op::ESTABLISHED, 0) };
                                self.hold_frame(Frame { hdr: answer, data: FrameData::None, last: false });
                                self.deliver(vec![Event::Cm(CmEvent::Established { private_data: Vec::new() })]);
                                self.release_frames();
                            }
                            // A READY the handshake did not ask for is not valid.
                            expected
                        }
                        None => false,
                    }
                }
                op::DISCONNECT => {
                    {
                        let mut i = self.lock();
                        if i.state == State::Closed {
                            return;
                        }
                        i.state = State::Closed;
                    }
                    self.send_frame(Frame { hdr: Hdr { op: op::DISCONNECT, ..Hdr::default() }, data: FrameData::None, last: true });
                    self.flush(CmEvent::Disconnected);
                    return;
                }
                op::SEND | op::WRITE | op::READ | op::CMP_SWAP | op::FETCH_ADD => self.on_request(&mut rx, hdr),
                _ => false,
            };
            if !ok {
                self.fail(if first { CmEvent::AcceptCompletionError } else { CmEvent::Broken });
                return;
            }
        }
    }

    /// Waits until a whole header is buffered. Before waiting on an empty socket it sends the
    /// acknowledgements still pending, after giving the other threads of this process one
    /// chance to run: a consumer that answers what just arrived (a ping-pong) then carries
    /// them in its own request, which saves the peer a wake-up and us a frame. Then it polls
    /// the socket for up to BUSY_POLL before it sleeps in `recv`: an answer that comes within
    /// that time costs no wake-up (a thread asleep in `recv` takes 10-20 us to run again on a
    /// busy 2-core machine, which doubled the ping-pong latency, unpredictably).
    pub(super) fn await_frame(&self, rx: &mut io::Rx) -> std::io::Result<()> {
        while rx.buffered() < HDR_LEN {
            if !self.acks_pending() {
                rx.fill(true)?;
            } else if !rx.fill(false)? {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
                self.flush_acks();
                let t = std::time::Instant::now();
                while t.elapsed() < BUSY_POLL && !rx.fill(false)? {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }

    /// `n` plain successes for our oldest requests still waiting for a response.
    pub(super) fn on_acks(&self, n: u32) -> bool {
        {
            let mut i = self.lock();
            let mut left = n;
            for o in i.outstanding.iter_mut().filter(|o| o.done.is_none()) {
                if left == 0 {
                    break;
                }
                if matches!(o.op, WcOp::Read | WcOp::CmpSwap | WcOp::FetchAdd) {
                    // Reads and atomics are always answered by a response with their data.
                    return false;
                }
                o.done = Some(DAT_DTO_SUCCESS);
                o.leases = None;
                left -= 1;
            }
            if left > 0 {
                return false;
            }
        }
        self.complete_ready();
        true
    }

    /// Reports, in order, the requests at the head of the send queue that have their answer;
    /// then ends a graceful disconnect that waited for them.
    pub(super) fn complete_ready(&self) {
        let mut events = Vec::new();
        {
            let mut i = self.lock();
            while i.outstanding.front().is_some_and(|o| o.done.is_some()) {
                let o = i.outstanding.pop_front().expect("front exists");
                let st = o.done.unwrap_or(DAT_DTO_SUCCESS);
                let byte_len = if st == DAT_DTO_SUCCESS { o.len } else { 0 };
                events.push(Event::Completion(Completion {
                    wr_id: o.wr_id,
                    status: st,
                    op: o.op,
                    byte_len,
                    imm: None,
                    invalidated: None,
                    solicited: false,
                }));
            }
        }
        self.deliver(events);
        let drained = {
            let i = self.lock();
            i.closing && i.outstanding.is_empty() && i.state == State::Connected
        };
        if drained {
            self.disconnect_now();
        }
    }

    /// A response to our oldest outstanding request.
    pub(super) fn on_response(&self, rx: &mut io::Rx, hdr: &Hdr) -> bool {
        let head = {
            let i = self.lock();
            i.outstanding.iter().find(|o| o.done.is_none()).map(|o| (o.wr_id, o.op, o.sges.clone(), o.reply))
        };
        let Some((wr_id, op_kind, sges, reply)) = head else { return false };
        let mut status = u32::from(hdr.status);
        // A response carries exactly what its request asked for: a success its data, an
        // error nothing.
        if hdr.payload != if status == DAT_DTO_SUCCESS { reply } else { 0 } {
            return false;
        }
        if hdr.payload > 0 {
            // Read data or an atomic's original value, into the local buffers, whose keys must
            // still be live when the data lands (lease.rs).
            match self.local_sets(&sges, true).and_then(|sets| self.leases(&sets, Via::Socket(rx.fd()))) {
                None => {
                    // Revoked since the post (dat_lmr_free): a local protection error, as on
                    // an HCA.
                    status = DAT_DTO_ERR_LOCAL_PROTECTION;
                    if rx.discard(hdr.payload as usize).is_err() {
                        return false;
                    }
                }
                Some(_leases) => {
                    // The payload is exactly what the request asked for: its buffers, in full.
                    let segs: Vec<(u64, usize)> = sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
                    if rx.land(&segs).is_err() {
                        return false;
                    }
                }
            }
        }
        {
            let mut i = self.lock();
            let Some(pos) = i.outstanding.iter().position(|o| o.wr_id == wr_id && o.done.is_none()) else { return true };
            i.outstanding[pos].done = Some(status);
            i.outstanding[pos].leases = None;
            if op_kind == WcOp::Read || matches!(op_kind, WcOp::CmpSwap | WcOp::FetchAdd) {
                i.outstanding_reads = i.outstanding_reads.saturating_sub(1);
                while let Some((_, read)) = i.deferred.front() {
                    if *read && i.outstanding_reads >= i.rd_limit {
                        break;
                    }
                    let (frame, read) = i.deferred.pop_front().expect("front exists");
                    if read {
                        i.outstanding_reads += 1;
                    }
                    self.send_frame(frame);
                }
            }
        }
        self.complete_ready();
        if status != DAT_DTO_SUCCESS {
            // A remote error breaks the connection, as on an HCA.
            self.fail(CmEvent::Broken);
            return true;
        }
        true
    }

    /// A request from the peer, executed now or queued until a receive is posted. Its header
    /// is checked before anything is read or allocated for it (wire::request_shape_ok).
    pub(super) fn on_request(&self, rx: &mut io::Rx, hdr: Hdr) -> bool {
        if !wire::request_shape_ok(&hdr, self.caps.max_message) {
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: a malformed request (op {}, payload {}, length {})",
                self.id,
                hdr.op,
                hdr.payload,
                hdr.length
            );
            return false;
        }
        if self.lock().state == State::Closed {
            // We answered an earlier request with an error (or are disconnecting): requests
            // still on the wire are not executed, as on an HCA whose QP went to error.
            return rx.discard(hdr.payload as usize).is_ok();
        }
        let cma = hdr.flags & flag::CMA != 0;
        if (cma || hdr.flags & flag::SHM != 0) && !(cma && self.lock().cma() && matches!(hdr.op, op::SEND | op::WRITE | op::READ)) {
            // A path the handshake did not agree (see peer.rs): a protocol violation.
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: a request flagged CMA/SHM on a connection without that path",
                self.id
            );
            return false;
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
            return false;
        }
        let data = if cma {
            let Ok(list) = rx.take_vec(hdr.payload as usize) else { return false };
            let data = if hdr.flags & flag::SHM != 0 {
                let (segs, srcs) = wire::decode_shared(&list);
                Data::Shared(segs, srcs)
            } else {
                Data::Remote(wire::decode_segments(&list))
            };
            let (Data::Remote(segs) | Data::Shared(segs, _)) = &data else { return false };
            if wire::list_total(segs) != Some(hdr.length) {
                return false;
            }
            data
        } else {
            Data::Socket
        };
        let needs_recv = needs_recv(&hdr);
        let cost = stall_cost(&hdr, &data);
        let deadline = Instant::now() + RNR_WAIT;
        loop {
            let exec = self.exec.locked();
            if self.lock().state == State::Closed {
                // Closed since the check above: a disconnect waits for `exec` (see
                // `disconnect_now`), so nothing it ended runs after it.
                drop(exec);
                return !matches!(data, Data::Socket) || rx.discard(hdr.payload as usize).is_ok();
            }
            let (stalled, room) = {
                let i = self.lock();
                (!i.stalled.is_empty(), i.stalled_bytes + cost <= STALL_BYTES)
            };
            // The receive is taken where the request is decided to run: on an SRQ, a check
            // and a later take would let another QP take the last receive in between.
            let recv = if needs_recv && !stalled { self.take_recv() } else { None };
            if !stalled && (!needs_recv || recv.is_some()) {
                let (ok, events) = self.execute(Some(rx), hdr, data, recv);
                drop(exec);
                self.exec_done();
                self.deliver(events);
                return ok;
            }
            if room {
                let data = match data {
                    Data::Socket => {
                        let Ok(buf) = rx.take_vec(hdr.payload as usize) else { return false };
                        Data::Buffer(buf)
                    }
                    d => d,
                };
                let mut i = self.lock();
                i.stalled_bytes += cost;
                i.stalled.push_back(Stalled { hdr, data, cost });
                drop(i);
                drop(exec);
                // A receive posted while the payload was read, before it was queued.
                self.drain_stalled();
                return true;
            }
            // No room to hold it: it stays on the socket until it can run in place.
            drop(exec);
            self.exec_done();
            if !self.await_room(needs_recv, deadline) {
                if self.lock().state != State::Closed {
                    crate::dbg_log!(
                        crate::log::DbgType::PROVIDER_API,
                        "soft QP {}: no receive for {RNR_WAIT:?} with {STALL_BYTES} bytes of requests waiting: receiver not ready",
                        self.id
                    );
                    // The answer goes out (the connection ends after it); the reader stops.
                    self.respond(DAT_DTO_ERR_RECEIVER_NOT_READY, FrameData::None, 0, false);
                    self.flush(CmEvent::Broken);
                }
                return false;
            }
        }
    }

    pub(super) fn wait_room<'a>(&self, i: MutexGuard<'a, Inner>, d: Duration) -> MutexGuard<'a, Inner> {
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        let i = self.room.wait_timeout_locked(i, d).0;
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
        i
    }

    pub(super) fn wake_room(&self) {
        if self.room_waiters.load(Ordering::SeqCst) > 0 {
            // Under the QP's lock, so that a waiter between its check and its wait cannot
            // miss it.
            let _i = self.lock();
            self.room.notify_all();
        }
    }

    /// Waits until `deadline` for a request to be able to run at once: nothing stalled before
    /// it, and a receive posted if it needs one (which, on an SRQ, another QP may still take
    /// first: the caller tries again, to the same deadline). False: it cannot (or the
    /// connection ended).
    pub(super) fn await_room(&self, needs_recv: bool, deadline: Instant) -> bool {
        let mut i = self.lock();
        loop {
            if i.state == State::Closed {
                return false;
            }
            if i.stalled.is_empty() && (!needs_recv || self.has_recv(&i)) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            i = self.wait_room(i, deadline - now);
        }
    }

    /// Runs requests that waited for receives, now that one was posted. Never waits for
    /// `exec`: its holder may be reading a peer's payload, which the peer may hold back, so
    /// it is asked instead (`drain_wanted`) to run them once done (`exec_done`).
    pub(super) fn drain_stalled(&self) {
        self.drain_wanted.store(true, Ordering::SeqCst);
        while self.drain_wanted.load(Ordering::SeqCst) {
            let exec = match self.exec.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            self.drain_wanted.store(false, Ordering::SeqCst);
            self.drain_locked(exec);
        }
    }

    /// `exec` was released: runs what a post asked for meanwhile (see `drain_stalled`).
    fn exec_done(&self) {
        if self.drain_wanted.load(Ordering::SeqCst) {
            self.drain_stalled();
        }
    }

    fn drain_locked(&self, _exec: MutexGuard<'_, ()>) {
        let mut events = Vec::new();
        let mut broken = false;
        loop {
            let Some(needs) = self.lock().stalled.front().map(|f| needs_recv(&f.hdr)) else { break };
            if self.lock().state == State::Closed {
                // As in `on_request`: what a disconnect ended does not run after it.
                break;
            }
            // Taken before the request leaves the queue (see `on_request`); only this drain,
            // under `exec`, removes the front, but a flush may clear the queue meanwhile.
            let recv = if needs { self.take_recv() } else { None };
            if needs && recv.is_none() {
                break;
            }
            let next = {
                let mut i = self.lock();
                let next = i.stalled.pop_front();
                if let Some(n) = &next {
                    i.stalled_bytes -= n.cost;
                }
                next
            };
            let Some(next) = next else {
                events.extend(recv.map(|r| self.return_recv(r)));
                break;
            };
            let (ok, evs) = self.execute(None, next.hdr, next.data, recv);
            events.extend(evs);
            if !ok {
                broken = true;
                break;
            }
        }
        drop(_exec);
        self.wake_room();
        self.deliver(events);
        if broken {
            self.fail(CmEvent::Broken);
        }
    }

    /// Answers the peer; a failure status also ends the connection after the answer is out.
    /// With `defer`, a plain success only becomes pending (see `defer_ack`).
    pub(super) fn respond(&self, status: u32, data: FrameData, payload: u32, defer: bool) {
        if status == DAT_DTO_SUCCESS && payload == 0 && matches!(data, FrameData::None) {
            // A plain success is an acknowledgement: it never takes a frame of its own in the
            // queue (consecutive ones merge, see `push_frame`).
            self.defer_ack();
            if !defer {
                self.flush_acks();
            }
            return;
        }
        let last = status != DAT_DTO_SUCCESS;
        self.send_frame_now(Frame { hdr: Hdr { op: op::RESPONSE, status: status as u8, payload, ..Hdr::default() }, data, last });
        if last {
            self.lock().state = State::Closed;
        }
    }

    /// Records a plain success response without sending it: the reader thread sends pending
    /// ones before it waits for the socket (`flush_acks`), and any frame that goes out first
    /// carries them. Ping-pong traffic thus acknowledges a write with the next request going
    /// back, and a stream of small requests with one ACK per batch. A batch never grows past
    /// ACK_BATCH.
    pub(super) fn defer_ack(&self) {
        let full = {
            let mut q = self.out.queue.locked();
            if q.closed {
                return;
            }
            q.acks += 1;
            q.acks >= ACK_BATCH
        };
        if full {
            self.flush_acks();
        }
    }

    pub(super) fn acks_pending(&self) -> bool {
        self.out.queue.locked().acks > 0
    }

    /// Sends the pending acknowledgements, unless another frame already took them.
    pub(super) fn flush_acks(&self) {
        self.send_frame_now(Frame { hdr: Hdr { op: op::ACK, ..Hdr::default() }, data: FrameData::None, last: false });
    }
}

/// Passive side: waits until the peer's first frame is buffered whole (a header and, when it
/// announces at most `wire::HELLO_MAX`, its body), at most READY_WAIT. False: the time passed,
/// or the connection ended first.
fn await_ready(rx: &mut io::Rx) -> bool {
    let deadline = Instant::now() + READY_WAIT;
    loop {
        let want = match rx.peek(HDR_LEN) {
            None => HDR_LEN,
            Some(h) => {
                let payload = Hdr::decode(h.try_into().unwrap_or(&[0; HDR_LEN])).payload;
                // Longer than any READY: the reader refuses it without reading on.
                if payload > wire::HELLO_MAX {
                    return true;
                }
                HDR_LEN + payload as usize
            }
        };
        if rx.buffered() >= want {
            return true;
        }
        if !rx.readable_by(deadline) || rx.fill(false).is_err() {
            return false;
        }
    }
}

/// What a request held until a receive comes costs the connection (see STALL_BYTES).
/// Whether a peer request consumes a receive (a send, or a write with immediate data).
fn needs_recv(hdr: &Hdr) -> bool {
    hdr.op == op::SEND || (hdr.op == op::WRITE && hdr.flags & flag::IMM != 0)
}

pub(super) fn stall_cost(hdr: &Hdr, data: &Data) -> usize {
    STALL_OVERHEAD
        + match data {
            Data::Socket => hdr.payload as usize,
            Data::Buffer(b) => b.len(),
            Data::Remote(l) => l.len() * std::mem::size_of::<(u64, u32)>(),
            Data::Shared(l, s) => l.len() * std::mem::size_of::<(u64, u32)>() + s.len() * std::mem::size_of::<shm::Source>(),
        }
}
