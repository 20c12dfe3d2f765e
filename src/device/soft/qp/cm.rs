//! Connection setup of a soft QP, both sides: the active side's connect and handshake, the
//! passive side's pending request (`Pending`) and accept, the start of the connection (its
//! registration with the engine), and its end (`fail`, `flush`).

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Event, Frame, FrameData, SoftQp, State};
use crate::abi::DAT_DTO_ERR_FLUSHED;
use crate::device::soft::engine;
use crate::device::soft::peer::{self, PeerProcess};
use crate::device::soft::rendezvous::{Channel, Claims};
use crate::device::soft::wire::answer_now;
use crate::device::soft::wire::{op, Hdr, Hello};
use crate::device::{CmEvent, Completion, DevError, PendingConnection, Qp};
use crate::util::sync::MutexExt;

/// How long the passive side waits, after its ACCEPT, for the peer's READY; and the active
/// side, after its READY, for the answer. Neither waits on a consumer: a peer that takes
/// longer is not completing the handshake.
pub(super) const READY_WAIT: Duration = Duration::from_secs(5);

impl SoftQp {
    // -----------------------------------------------------------------------------------------
    // Connection setup.

    /// Takes the connected stream and registers it with the engine, which reads it and
    /// continues writes the socket did not take at once. `established`
    /// (the active side's ESTABLISHED, with the peer's private data) is reported before the
    /// engine reads anything, so that nothing the peer does on the connection, a disconnect included,
    /// can be reported before it. `verified`/`agreed`: the data path (see set_path); the
    /// passive side learns it later, with READY.
    /// `peer_rd_in`: how many reads and atomics the peer takes at a time (its handshake's
    /// `rd_in`).
    pub(super) fn start(
        self: &Arc<Self>,
        stream: TcpStream,
        verified: Option<(PeerProcess, Claims)>,
        agreed: bool,
        peer_rd_in: u32,
        established: Option<Vec<u8>>,
    ) {
        let _ = stream.set_nodelay(true);
        // The engine reads and writes it, never waiting (reader.rs, tx.rs).
        let nonblocking = stream.set_nonblocking(true).is_ok();
        let fd = stream.as_raw_fd();
        self.set_path(verified, agreed);
        let awaiting_ready = {
            let mut i = self.lock();
            if i.state == State::Closed {
                // Disconnected or freed since the handshake ended (its events are out): the
                // connection closes here, unstarted.
                return;
            }
            i.local_port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
            if let Ok(peer) = stream.peer_addr() {
                i.remote = Some(peer);
            }
            i.stream = Some(stream);
            i.state = State::Connected;
            i.sq.limit_reads(self.caps.max_rd_atomic, peer_rd_in);
            i.awaiting_ready
        };
        if let Some(private_data) = established {
            self.deliver(vec![Event::Cm(CmEvent::Established { private_data })]);
        }
        // Passive side: the peer's first frame must be READY (the handshake's end), whole
        // within READY_WAIT of our accept. A peer that fails that has not completed the
        // accept: the consumer hears DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR (as DAT's
        // reference implementation reports a requester that stopped talking after the accept).
        let ready_by = awaiting_ready.then(|| Instant::now() + READY_WAIT);
        *self.reader.locked() = Some(super::reader::Reader::new(fd, ready_by));
        self.out.queue.locked().fd = fd;
        let registered = {
            // Registered under the QP's lock: the engine, which may run the reader at once,
            // finds the registration (for its kicks and deadlines) there.
            let mut i = self.lock();
            let handler: std::sync::Weak<dyn engine::Handler> = self.this.clone();
            i.reg = engine::engine().and_then(|e| e.register(fd, engine::IN | engine::OUT, handler).ok());
            if let (Some(reg), Some(by)) = (&i.reg, ready_by) {
                reg.timer(by);
            }
            i.reg.is_some()
        };
        if !nonblocking || !registered {
            crate::dbg_log!(crate::log::DbgType::ERROR, "dat2-soft: the progress engine cannot take connection of QP {}", self.id);
            return self.fail(CmEvent::Broken);
        }
        // Frames queued before the start (ACCEPT) go out now.
        self.pump();
    }

    /// Before the consumer ends a connection: requests whose data the verified peer moves
    /// itself end with its response (lease.rs), and the peer may be copying now; they are
    /// waited for, up to PEER_WAIT, as revoking a key set would. Flushed instead, they would
    /// give their leases up while the peer still copies: a `dat_lmr_free` after the flushed
    /// completion would return with the peer still writing the memory.
    pub(super) fn await_peer_copies(&self) {
        let deadline = Instant::now() + super::super::lease::PEER_WAIT;
        let on_engine = engine::on_engine();
        let mut i = self.lock();
        while i.state == State::Connected && i.sq.peer_copying() && Instant::now() < deadline {
            if on_engine {
                // Called from a delivery on the engine thread (a CNO proxy agent): the answers
                // come through this thread, and every connection of the process waits with us.
                // Our reading side takes its turns here until they have come (not when the
                // caller is our own delivery, in the middle of a turn: then the wait is all
                // PEER_WAIT, as before).
                drop(i);
                self.try_read_turn();
                i = self.lock();
                if !(i.state == State::Connected && i.sq.peer_copying()) {
                    break;
                }
                i = self.wait_room(i, Duration::from_millis(1));
                continue;
            }
            i = self.wait_room(i, Duration::from_millis(5));
        }
    }

    /// Completes everything posted as flushed, then reports `ev`.
    pub(super) fn flush(&self, ev: CmEvent) {
        // The receive ring is withdrawn first: once a receive completes, the peer places
        // nothing into it; those the peer filled (its sends completed) complete successfully
        // (recvring.rs).
        let ring = self.lock().rq.take_ring();
        let final_ring = ring.filter(|r| r.withdraw());
        let mut done = Vec::new();
        {
            let mut i = self.lock();
            if let Some(r) = &final_ring {
                i.rq.complete_placed(r, &mut done);
            }
            for o in i.sq.drain() {
                let status = o.done.unwrap_or(DAT_DTO_ERR_FLUSHED);
                done.push(Completion::bare(o.wr_id, status, o.op));
            }
            i.rq.flush(&mut done);
            i.rendezvous = None;
        }
        let mut events: Vec<Event> = done.into_iter().map(Event::Completion).collect();
        events.push(Event::Cm(ev));
        self.wake_room();
        self.deliver(events);
    }

    /// Tears the connection down because of an error and reports `ev` (once).
    #[track_caller]
    pub(super) fn fail(&self, ev: CmEvent) {
        let at = std::panic::Location::caller();
        crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: connection ends ({ev:?}) at {}:{}", self.id, at.file(), at.line());
        {
            let mut i = self.lock();
            if i.state == State::Closed {
                return;
            }
            i.state = State::Closed;
            if let Some(s) = &i.stream {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        self.close_writer();
        self.flush(ev);
    }

    pub(super) fn close_writer(&self) {
        let mut q = self.out.queue.locked();
        q.closed = true;
        q.frames.clear();
    }
}

/// A connection request received by a listener, waiting for accept or reject.
pub struct Pending {
    stream: Mutex<Option<TcpStream>>,
    hello: Hello,
    remote: SocketAddr,
}

// SAFETY: sockaddr_storage is plain data; the stream is behind a mutex.
unsafe impl Send for Pending {}
// SAFETY: as above.
unsafe impl Sync for Pending {}

impl Pending {
    pub fn new(stream: TcpStream, hello: Hello, peer: SocketAddr) -> Pending {
        Pending { stream: Mutex::new(Some(stream)), hello, remote: peer }
    }
}

impl PendingConnection for Pending {
    fn private_data(&self) -> &[u8] {
        &self.hello.private_data
    }

    fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn accept(&self, qp: &Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError> {
        let soft = qp.as_any().downcast_ref::<SoftQp>().ok_or(DevError::NotSupported)?.me();
        let stream = self.stream.locked().take().ok_or(DevError::State)?;
        {
            let mut i = soft.lock();
            if i.state != State::Idle {
                return Err(DevError::State);
            }
            i.state = State::Connecting;
            i.awaiting_ready = true;
        }
        // Come to the active side's rendezvous, if it has one and is on this host, and say who we
        // are there (rendezvous.rs); we learn who it is when READY comes.
        let end = (self.hello.rendezvous != 0).then(|| peer::other_end(&stream)).flatten();
        let channel = end.and_then(|_| Channel::connect(self.hello.rendezvous)).filter(|c| c.send(&soft.claims(&stream)));
        soft.lock().rendezvous = channel.zip(end);
        let answer = Hello { private_data: private_data.to_vec(), rd_in: soft.caps.max_rd_in, ..Hello::default() };
        // Start the connection and queue ACCEPT as its first frame. The reader takes the
        // peer's READY (whether it can reach our memory) as the peer's first frame and reports
        // ESTABLISHED then, once the path is decided; until then the EP is COMPLETION_PENDING.
        soft.start(stream, None, false, self.hello.rd_in, None);
        let body = answer.encode();
        soft.send_frame(Frame { hdr: Hdr::message(op::ACCEPT, body.len()), data: FrameData::Bytes(body), last: false });
        Ok(())
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(stream) = self.stream.locked().take() {
            // Only the private data: nothing about us goes to a peer we turn away.
            let answer = Hello { private_data: private_data.to_vec(), ..Hello::default() };
            // Never waiting on the peer (this may run on the engine thread): a socket that
            // does not take the small answer at once is closed without it.
            let _ = answer_now(&stream, op::REJECT, &answer.encode());
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
