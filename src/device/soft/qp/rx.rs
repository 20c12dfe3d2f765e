//! The receiving side's outcomes for a soft QP: acknowledgements and responses completing our
//! requests in order, requests held until a receive is posted (within STALL_BYTES; the
//! engine-driven reader, reader.rs, waits RNR_WAIT for room) and run once one is, and the
//! answers we owe the peer (responses, acknowledgements riding on frames).

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Duration;

use super::{Event, Frame, FrameData, Inner, SoftQp, State, ACK_BATCH};
use crate::abi::DAT_DTO_SUCCESS;
use crate::device::soft::wire::{flag, op, Hdr};
use crate::device::{CmEvent, Completion, WcOp};
use std::sync::TryLockError;

use crate::util::sync::{CondvarExt, MutexExt};

impl SoftQp {
    /// `n` plain successes for our oldest requests still waiting for a response.
    pub(super) fn on_acks(&self, n: u32) -> bool {
        if !self.lock().sq.ack(n) {
            return false;
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
            while let Some(o) = i.sq.pop_done() {
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
            i.closing && i.sq.is_empty() && i.state == State::Connected
        };
        if drained {
            self.disconnect_now();
        }
    }

    /// The response to our oldest outstanding request `wr_id` has come, with `status` (its
    /// data landed, reader.rs); false: the connection is broken.
    pub(super) fn finish_response(&self, wr_id: u64, status: u32) -> bool {
        {
            let mut i = self.lock();
            let mut go = Vec::new();
            if !i.sq.answer(wr_id, status, &mut go) {
                return true;
            }
            // Sent under the QP's lock, so that they keep their place ahead of later posts.
            for frame in go {
                self.send_frame(frame);
            }
        }
        self.complete_ready();
        if status != DAT_DTO_SUCCESS {
            // A remote error breaks the connection, as on an HCA.
            self.fail(CmEvent::Broken);
        }
        true
    }

    pub(super) fn wait_room<'a>(&self, i: MutexGuard<'a, Inner>, d: Duration) -> MutexGuard<'a, Inner> {
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        let i = self.room.wait_timeout_locked(i, d).0;
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
        i
    }

    pub(super) fn wake_room(&self) {
        if self.rnr_wait.load(Ordering::SeqCst) {
            // The reader stopped until a receive comes (reader.rs): the engine runs it again.
            if let Some(reg) = &self.lock().reg {
                reg.kick();
            }
        }
        if self.room_waiters.load(Ordering::SeqCst) > 0 {
            // Under the QP's lock, so that a waiter between its check and its wait cannot
            // miss it.
            let _i = self.lock();
            self.room.notify_all();
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
    pub(super) fn exec_done(&self) {
        if self.drain_wanted.load(Ordering::SeqCst) {
            self.drain_stalled();
        }
    }

    fn drain_locked(&self, _exec: MutexGuard<'_, ()>) {
        let mut events = Vec::new();
        let mut broken = false;
        loop {
            let Some(needs) = self.lock().rq.next_held_needs_recv() else { break };
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
            let next = self.lock().rq.release();
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
        self.enqueue(events);
        drop(_exec);
        self.wake_room();
        self.deliver([]);
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

    /// Records a plain success response without sending it: the reader sends pending ones
    /// once the socket has nothing more for it (`flush_acks`), and any frame that goes out first
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

    /// A send the peer placed into our receive itself (fast.rs `send_direct`): completes that
    /// receive, unacknowledged (the peer completed its send when it placed it; were the
    /// connection to end first, `flush` would still complete the receive, recvring.rs). False, a
    /// protocol violation: not on the cross-memory path with our ring, or not our next
    /// receive, or one we had not published, or longer than it, or a request still waiting
    /// before it.
    pub(super) fn on_placed(&self, hdr: &Hdr) -> bool {
        let exec = self.exec.locked();
        let recv = {
            let mut i = self.lock();
            if i.state == State::Closed {
                // Ended meanwhile: its receives are flushed.
                return true;
            }
            let shape = hdr.op == op::SEND
                && hdr.payload == 0
                && hdr.flags & !(flag::PLACED | flag::IMM | flag::SOLICITED) == 0
                && hdr.length <= self.caps.max_message;
            let recv = if shape && i.path.cma() { i.rq.take_placed(hdr.a, hdr.length) } else { None };
            if recv.is_none() {
                let (next, published) = i.rq.numbers();
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft QP {}: a placed send for receive {} that is not ours to complete (next {next}, published {published})",
                    self.id,
                    hdr.a,
                );
                return false;
            }
            recv
        };
        let Some((wr_id, _)) = recv else { return false };
        let c = Completion {
            wr_id,
            status: DAT_DTO_SUCCESS,
            op: WcOp::Recv,
            byte_len: hdr.length,
            imm: (hdr.flags & flag::IMM != 0).then_some(hdr.imm),
            invalidated: None,
            solicited: hdr.flags & flag::SOLICITED != 0,
        };
        self.enqueue([Event::Completion(c)]);
        drop(exec);
        self.exec_done();
        self.deliver([]);
        true
    }
}
