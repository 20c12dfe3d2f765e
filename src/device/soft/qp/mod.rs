//! The soft device's reliable-connected queue pair, over one TCP connection.
//!
//! The process's progress engine (engine.rs) drives each connected QP's one socket: it applies
//! the peer's requests to our memory (checking every remote key, bound, PD, window binding and
//! privilege first) without the application calling in, and completes our own requests as
//! their responses come back, in order. Frames are written without blocking by whichever
//! thread queues them; the engine continues what a full socket did not take.
//!
//! On one host, when each process can reach the other's memory (cross-memory attach) and the
//! kernel has confirmed which process the peer is (peer.rs, rendezvous.rs), requests carry
//! scatter lists instead of data and the target copies directly between the two processes'
//! registered memory.
//!
//! This module holds the QP's connection state and what the consumer calls (`Qp`: posting,
//! binding, disconnecting). Three parts of the state are each owned by a module, which alone
//! changes them and keeps their invariants (written at its top):
//! - `sendq`: the send queue: our requests until they complete, in order, with the reads in
//!   flight and the frames held back behind them;
//! - `recvq`: the receive queue: the receives posted, the peer's requests held until one
//!   comes (bounded), and the ring that publishes the receives to a peer on this host;
//! - `path`: the path to the peer's memory on this host: the verified process, its key table
//!   and receive ring.
//!
//! The rest are parts of `SoftQp`'s behaviour, each an `impl SoftQp` of its own:
//! - `cm`: connection setup, both sides (the passive handshake, the rendezvous, the path),
//!   and its end;
//! - `opening`: the active side's handshake, a state machine the engine advances;
//! - `tx`: the send side: frames written at once, the rest continued by the engine;
//! - `fast`: data a poster places in the peer's memory itself (direct writes, placed sends);
//! - `reader`: the read side, a state machine the engine advances: frames from the peer, in
//!   order, payloads landing in pieces, the handshake's and RNR's deadlines;
//! - `rx`: what the frames lead to: completions from responses and acknowledgements, requests
//!   held until a receive comes run once one is, the answers and acknowledgements we owe;
//! - `exec`: executing a peer's request against our memory (keys, leases, landing the data).
//!
//! The locks and their order are written with the device's (soft/mod.rs, "Lock order").
//!
//! Each child imports what it uses of this module and the device by name.

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::delivery::Delivery;
use super::io;
use super::lease::{Leases, SetLease, Via};
use super::peer::{self, OtherEnd, PeerProcess};
use super::rendezvous::{Channel, Claims};
use super::wire::{self, flag, op, Hdr};
use super::{shm, KeySet, SoftDevice};
use crate::abi::*;
use crate::device::*;
use crate::util::sync::MutexExt;
use path::PeerPath;
use recvq::RecvQueue;
use sendq::{Outstanding, SendQueue};

mod cm;
mod exec;
mod fast;
mod opening;
mod path;
mod reader;
mod recvq;
mod rx;
mod sendq;
mod tx;

pub use cm::Pending;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Connecting,
    Connected,
    Closed,
}

/// Our aliases of a request's destination (shm.rs), and the registrations' backings, held
/// alive while the data is copied: freeing the LMRs meanwhile cannot unmap them.
type Aliases = (Vec<Arc<shm::Backing>>, Vec<(*mut u8, usize)>);

/// Where a request's data is.
enum Data {
    /// Still on the socket (`hdr.payload` bytes).
    Socket,
    Buffer(Vec<u8>),
    /// In the peer's memory (cross-memory attach).
    Remote(Vec<(u64, u32)>),
    /// In the peer's memory, which is also in shared files (shm.rs): the scatter list, and
    /// where each element is in its file.
    Shared(Vec<(u64, u32)>, Vec<shm::Source>),
}

/// Where a peer's WRITE or SEND lands (exec.rs `target`).
struct Target {
    /// The data lands; else it is consumed unused (a refused key, a receive too short).
    go: bool,
    segs: io::Segs,
    /// The key sets that admitted `segs`, leased for each copy (lease.rs).
    sets: Vec<Arc<SetLease>>,
    /// The registrations of `segs`, for our aliases of them (shm.rs).
    regions: Vec<Option<u64>>,
    recv: Option<Recv>,
    /// A SEND's completion status decided before any data moved.
    status: u32,
}

/// Why a request's data did not land.
enum Landing {
    /// A key set that admitted it was revoked (lease.rs): nothing was consumed.
    Revoked,
    /// The copy or the connection failed.
    Failed,
}

enum Event {
    Completion(Completion),
    Cm(CmEvent),
    /// We answered the peer with an error, which ends the connection: what is still posted
    /// completes flushed, then the event (see `flush`).
    Flush(CmEvent),
    /// A receive taken from our SRQ went back unused (`return_recv`): the other QPs on it may
    /// hold requests that wait for one. Told after our locks are released, as a post is.
    Returned,
}
/// A receive taken for a request: its work request id and scatter list.
type Recv = (u64, Sges);

/// A frame's memory payload and its key sets: inline for a few elements (nothing allocated
/// on the post path).
type MemSegs = smallvec::SmallVec<[(u64, usize); 2]>;
type MemSets = smallvec::SmallVec<[Arc<SetLease>; 2]>;

enum FrameData {
    None,
    Bytes(Vec<u8>),
    /// Registered memory, and the key sets that admitted it (leased while it is written).
    Memory(MemSegs, MemSets),
    /// The unsent tail of a frame (header included): written as is, with no header of its own.
    Raw(Vec<u8>),
    /// The unsent part of a request's memory payload (its header and first bytes went out from
    /// the posting thread): written with no header, under fresh leases on the same key sets.
    Tail(MemSegs, MemSets),
}

struct Frame {
    hdr: Hdr,
    data: FrameData,
    /// Shut the connection down once this frame is out.
    last: bool,
}

/// The QP's state under its lock: the connection, and the parts each owned by a module of
/// its own (the send queue, the receive queue, the path to the peer's memory).
struct Inner {
    state: State,
    /// The stream's registration with the engine: dropped (unregistered) before it closes.
    reg: Option<super::engine::Registration>,
    stream: Option<TcpStream>,
    remote: Option<SocketAddr>,
    local_port: u16,
    /// Passive side, until READY: our channel to the active side's rendezvous, and the
    /// kernel's view of the other end of the connection.
    rendezvous: Option<(Channel, OtherEnd)>,
    /// A graceful disconnect waits for the outstanding requests: no new ones are taken.
    closing: bool,
    /// Passive side: the peer's READY, which completes the handshake, has not come yet.
    awaiting_ready: bool,
    /// Active side, until the handshake ends: its handler (opening.rs).
    opening: Option<Arc<opening::Opener>>,
    sq: SendQueue,
    rq: RecvQueue,
    path: PeerPath,
}

// SAFETY: sockaddr_storage is plain data; everything is behind the QP's mutex.
unsafe impl Send for Inner {}

struct OutState {
    frames: VecDeque<Frame>,
    closed: bool,
    /// Some thread (one that queued a frame, or the engine) is writing to the socket.
    busy: bool,
    /// What is being written carries a request's memory (see `send_disconnect`).
    carrying: bool,
    /// The queued frames wait (see `hold_frame`): nothing is written until it is released.
    held: bool,
    /// The engine was told of room while `busy`: the writer tries again (`write_out`).
    kicked: bool,
    fd: i32,
    /// Plain success responses not sent yet: they ride on the next frame that enters the
    /// stream (its `acks`), or go as an ACK frame of their own (see `flush_acks`).
    acks: u32,
}

struct Outbound {
    queue: Mutex<OutState>,
}

/// Payloads up to this size travel inline even when cross-memory attach is possible: one
/// socket write is cheaper than a second system call at the target.
const INLINE_MAX: u64 = 256;

/// Requests that move at most this many bytes are acknowledged lazily (see `defer_ack`);
/// larger ones at once, so that a window of bulk writes keeps flowing.
const ACK_LAZY_MAX: u32 = 16 << 10;

/// The most acknowledgements held back at a time.
const ACK_BATCH: u32 = 16;

pub struct SoftQp {
    this: std::sync::Weak<SoftQp>,
    /// Where receives come from when the QP uses a shared receive queue.
    srq: Option<Arc<super::srq::SoftSrq>>,
    dev: Arc<SoftDevice>,
    pub id: u64,
    pd: u32,
    caps: QpCaps,
    events: Arc<dyn QpEvents>,
    inner: Mutex<Inner>,
    /// The read side's state, advanced by the engine alone (reader.rs); None until connected.
    reader: Mutex<Option<reader::Reader>>,
    /// Serialises the execution of peer requests (the reader and stalled-request drains), and
    /// each piece of a payload landing from the socket.
    exec: Mutex<()>,
    /// The reader waits for a receive to be posted (reader.rs `try_run`): `wake_room` kicks it.
    rnr_wait: AtomicBool,
    /// The peer's shared files this connection has mapped (shm.rs).
    shm_peers: Mutex<shm::Peers>,
    delivery: Delivery<Event>,
    out: Outbound,
    /// Signalled when receives are posted or stalled requests ran (`await_peer_copies`), when a
    /// thread waits there (`room_waiters`): a notification is a system call.
    room: Condvar,
    room_waiters: AtomicU32,
    /// A receive was posted while `exec` was held: its holder runs the stalled requests.
    drain_wanted: AtomicBool,
    /// A turn of the read side was asked for while another thread had it (reader.rs
    /// `read_ready`).
    read_again: AtomicBool,
    /// The peer's READ and atomic requests taken and not answered yet (their responses not
    /// written): never more than `caps.max_rd_in`.
    reads_in: AtomicU32,
    /// Held by every copy this QP makes (lease.rs), revoked when the QP is destroyed: when
    /// `dat_ep_free` returns, none of its requests touches memory again.
    lease: Arc<SetLease>,
}

impl SoftQp {
    pub fn new(
        dev: Arc<SoftDevice>,
        id: u64,
        pd: u32,
        caps: QpCaps,
        srq: Option<Arc<super::srq::SoftSrq>>,
        events: Arc<dyn QpEvents>,
    ) -> Arc<SoftQp> {
        let qp = Arc::new_cyclic(|this| SoftQp {
            this: this.clone(),
            srq: srq.clone(),
            dev,
            id,
            pd,
            caps,
            events,
            inner: Mutex::new(Inner {
                state: State::Idle,
                reg: None,
                stream: None,
                remote: None,
                local_port: 0,
                rendezvous: None,
                closing: false,
                awaiting_ready: false,
                opening: None,
                sq: SendQueue::new(caps.max_rd_atomic),
                rq: RecvQueue::default(),
                path: PeerPath::default(),
            }),
            reader: Mutex::new(None),
            exec: Mutex::new(()),
            rnr_wait: AtomicBool::new(false),
            shm_peers: Mutex::new(shm::Peers::default()),
            delivery: Delivery::default(),
            out: Outbound::new(),
            room: Condvar::new(),
            room_waiters: AtomicU32::new(0),
            drain_wanted: AtomicBool::new(false),
            read_again: AtomicBool::new(false),
            reads_in: AtomicU32::new(0),
            lease: Arc::default(),
        });
        if let Some(srq) = srq {
            srq.attach(Arc::downgrade(&qp));
        }
        qp
    }

    fn keytab_fd(&self) -> u32 {
        self.dev.keytab.as_ref().map_or(0, |t| t.fd())
    }

    /// What we say about ourselves at the rendezvous (to a process of our uid only).
    /// Takes a receive ring of our key table for this connection, unless the QP's receives
    /// come from an SRQ (which another QP may take them from).
    fn claims(&self, stream: &TcpStream) -> Claims {
        let (ring, ring_gen) = match (&self.dev.keytab, &self.srq) {
            (Some(t), None) => self.lock().rq.claim_ring(t),
            _ => (0, 0),
        };
        Claims {
            sock_fd: stream.as_raw_fd() as u32,
            canary: peer::canary(),
            keytab_fd: self.keytab_fd(),
            pd: self.pd,
            qp: self.id,
            ring,
            ring_gen,
        }
    }

    /// Sets the connection's data path: cross-memory attach (and shared files, the key table
    /// and the receive rings) with the verified peer when `agreed`, else TCP.
    fn set_path(&self, verified: Option<(PeerProcess, Claims)>, agreed: bool) {
        let path = PeerPath::new(verified, agreed);
        let mut i = self.lock();
        i.path = path;
        i.sq.restart_recvs();
        // Our ring, if we claimed one, stays until the connection ends (`flush`), used or not:
        // the passive side learns the path only with READY.
        i.rq.restart_numbers();
    }

    /// A request that fails before it goes out (a local protection or length error) completes
    /// in error, and the connection ends, as on an HCA.
    fn fail_post(&self, mut i: MutexGuard<'_, Inner>, wr_id: u64, op: WcOp, status: u32) {
        i.sq.push(Outstanding::local(wr_id, op, 0, Some(status)));
        i.state = State::Closed;
        if let Some(s) = &i.stream {
            let _ = s.shutdown(Shutdown::Both);
        }
        drop(i);
        self.close_writer();
        self.flush(CmEvent::Broken);
    }

    /// Completes a request that needs no peer (a window bind) in order: it is reported after
    /// every request posted before it.
    fn complete_local(&self, wr_id: u64, op: WcOp) {
        let mut events = Vec::new();
        {
            let mut i = self.lock();
            if i.state == State::Closed {
                drop(i);
                let c = Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, op);
                return self.deliver(vec![Event::Completion(c)]);
            }
            i.sq.push(Outstanding::local(wr_id, op, 0, Some(DAT_DTO_SUCCESS)));
            while let Some(o) = i.sq.pop_done() {
                let status = o.done.unwrap_or(DAT_DTO_SUCCESS);
                events.push(Event::Completion(Completion::bare(o.wr_id, status, o.op)));
            }
        }
        self.deliver(events);
    }

    /// Ends the connection now: responses already queued (acknowledgements of requests we
    /// executed) still go out, as an HCA has sent them long before; then the peer is told, we
    /// stop reading, and everything still posted completes as flushed.
    fn disconnect_now(&self) {
        let state = {
            let mut i = self.lock();
            let s = i.state;
            i.state = State::Closed;
            // Closed already: the connection is ending (a DISCONNECT frame may still be on its
            // way out, carrying acknowledgements); leave it to the writer.
            if let (Some(st), false) = (&i.stream, s == State::Closed) {
                let _ = st.shutdown(if s == State::Connected { Shutdown::Read } else { Shutdown::Both });
            }
            s
        };
        match state {
            State::Closed => {}
            State::Connected => {
                // Written from this thread when the socket is idle and takes it, so that the
                // frame (and the acknowledgements it carries) is with the kernel before the
                // consumer can free the EP or exit; never waiting for the peer (see
                // `send_disconnect`).
                // A peer request being executed may be copying the peer's memory (cross-memory
                // attach): the peer completes its request flushed once DISCONNECT comes, and may
                // free that memory, so the copy ends first. Reading is shut down and the state
                // is Closed, so it is short, and no other request starts (see `on_request`).
                drop(self.exec.locked());
                self.send_disconnect();
                self.flush(CmEvent::Disconnected);
            }
            _ => {
                self.close_writer();
                self.flush(CmEvent::Disconnected);
            }
        }
    }

    /// Whether a receive is posted (on the SRQ, if the QP uses one). Only a hint on an SRQ,
    /// where another QP may take it the next moment: a request takes its receive with
    /// `take_recv`, in the same step that decides it runs.
    fn has_recv(&self, i: &Inner) -> bool {
        match &self.srq {
            Some(srq) => !srq.is_empty(),
            None => !i.rq.is_empty(),
        }
    }

    /// Takes the oldest receive (from the SRQ, if the QP uses one), for a request that then
    /// owns it: it consumes it, or gives it back (`return_recv`).
    fn take_recv(&self) -> Option<Recv> {
        match &self.srq {
            Some(srq) => srq.pop(),
            None => self.lock().rq.take(),
        }
    }

    /// A receive taken for a request that did not use it, because the request failed, which
    /// ends the connection. On an SRQ it goes back first in line, for the other QPs (the
    /// event tells them); our own receives are all flushed, this one first.
    fn return_recv(&self, recv: Recv) -> Event {
        match &self.srq {
            Some(srq) => {
                srq.put_back(recv);
                Event::Returned
            }
            None => Event::Completion(Completion::bare(recv.0, DAT_DTO_ERR_FLUSHED, WcOp::Recv)),
        }
    }

    /// A receive was posted to our SRQ: run requests that waited for one.
    pub fn receive_posted(&self) {
        let stalled = self.lock().rq.holding();
        if stalled {
            self.drain_stalled();
        }
        self.wake_room();
    }

    fn me(&self) -> Arc<SoftQp> {
        self.this.upgrade().expect("a QP in use is alive")
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Queues a peer request's events while `exec` still orders them (`deliver` follows once
    /// it is released): otherwise the next request, run by another thread in between, could
    /// complete its receive ahead of this one's.
    fn enqueue(&self, events: impl IntoIterator<Item = Event>) {
        self.delivery.queue(events);
    }

    /// Hands events to the consumer side in order, never while holding the QP's locks; a
    /// re-entrant call (from inside a callback) only queues (delivery.rs).
    fn deliver(&self, events: impl IntoIterator<Item = Event>) {
        self.delivery.deliver(events, |e| match e {
            Event::Completion(c) => self.events.completion(c),
            Event::Cm(e) => self.events.cm(e),
            // Its events join this queue (a re-entrant deliver only queues).
            Event::Flush(e) => self.flush(e),
            Event::Returned => {
                if let Some(srq) = &self.srq {
                    srq.receives_returned();
                }
            }
        });
    }

    // -----------------------------------------------------------------------------------------
    // Key checks.

    /// The key sets of a local scatter list's non-empty elements, when each lies within a live
    /// lkey of ours: its PD, bounds, and LOCAL_WRITE when the element is written.
    fn local_keys(&self, sges: &[Sge], write: bool) -> Option<super::Keys> {
        self.dev.local_keys(self.pd, sges, write)
    }

    /// The leases of `local_keys`.
    fn local_sets(&self, sges: &[Sge], write: bool) -> Option<Vec<Arc<SetLease>>> {
        Some(self.local_keys(sges, write)?.into_iter().map(|k| k.lease).collect())
    }

    /// Checks a remote access against our key table; returns the local address it names and
    /// the key set that admits it.
    fn check_remote(&self, rkey: u32, raddr: u64, len: u64, need: Access) -> Option<(u64, Arc<SetLease>)> {
        let k: KeySet = self.dev.rkey(rkey)?;
        if k.pd != self.pd || k.bound_qp.is_some_and(|q| q != self.id) || !k.access.contains(need) {
            return None;
        }
        let addr = if k.zero_based { k.addr.checked_add(raddr)? } else { raddr };
        (addr >= k.addr && addr.checked_add(len)? <= k.addr + k.len).then_some((addr, k.lease))
    }

    /// Leases for one copy: on this QP (see `destroy`) and on every key set in `sets`; None
    /// when any was revoked.
    fn leases(&self, sets: &[Arc<SetLease>], via: Via) -> Option<Leases> {
        super::lease::take_all(&self.lease, sets, via)
    }
}

impl Qp for SoftQp {
    fn connect(&self, addr: SocketAddr, conn_qual: u64, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
        {
            let mut i = self.lock();
            if i.state != State::Idle {
                return Err(DevError::State);
            }
            i.state = State::Connecting;
        }
        let me = self.me();
        if let Err(ev) = opening::Opener::start(&me, addr, conn_qual, private_data.to_vec(), timeout) {
            me.opened(Err(ev));
        }
        Ok(())
    }

    fn post_send(&self, wr: &SendWr) -> Result<(), DevError> {
        let mut i = self.lock();
        if i.state != State::Connected || i.closing {
            return Err(DevError::State);
        }
        if wr.sges.len() > self.caps.max_send_sge as usize {
            return Err(DevError::NoResources);
        }
        if i.sq.len() >= self.caps.max_send_wr as usize {
            return Err(DevError::QueueFull);
        }
        if !keys_live(&wr.sges, |k| self.events.key_live(k)) {
            return Err(DevError::Fault);
        }
        if let Some(len) = self.write_fast(&mut i, wr) {
            i.sq.count_moved(MOVED_SHM, u64::from(len));
            return self.complete_direct(i, wr.wr_id, WcOp::Write, len);
        }
        if let Some(len) = self.send_direct(&i, wr) {
            // Placed in the peer's receive: the peer is told which one, and completes it.
            let mut hdr = Hdr { op: op::SEND, flags: flag::PLACED, length: len, a: i.sq.next_recv(), ..Hdr::default() };
            if wr.solicited {
                hdr.flags |= flag::SOLICITED;
            }
            if let WrOp::SendImm(imm) = wr.op {
                hdr.flags |= flag::IMM;
                hdr.imm = imm;
            }
            i.sq.consumed_recv();
            i.sq.count_moved(MOVED_CMA, u64::from(len));
            // Complete now: the peer completes its receive successfully even if its connection
            // ends before this header is read (the ring says the receive was placed into).
            self.send_frame_after(i, Frame { hdr, data: FrameData::None, last: false });
            return self.complete_direct(self.lock(), wr.wr_id, WcOp::Send, len);
        }
        let is_read = matches!(wr.op, WrOp::Read | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. });
        let len = sges_len(&wr.sges);
        let wc_op = match wr.op {
            WrOp::Send | WrOp::SendInv(_) | WrOp::SendImm(_) => WcOp::Send,
            WrOp::Write | WrOp::WriteImm(_) => WcOp::Write,
            WrOp::Read => WcOp::Read,
            WrOp::CmpSwap { .. } => WcOp::CmpSwap,
            WrOp::FetchAdd { .. } => WcOp::FetchAdd,
        };
        let keys = self.local_keys(&wr.sges, is_read);
        let local_ok = keys.is_some();
        let keys = keys.unwrap_or_default();

        let atomic_ok = !matches!(wr.op, WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. }) || len == 8;
        if !local_ok || !atomic_ok || len > u64::from(self.caps.max_message) {
            let status = if local_ok { DAT_DTO_ERR_LOCAL_LENGTH } else { DAT_DTO_ERR_LOCAL_PROTECTION };
            self.fail_post(i, wr.wr_id, wc_op, status);
            return Ok(());
        }
        let (raddr, rkey) = wr.remote.unwrap_or((0, 0));
        // Pushed, not collected: SmallVec's generic extend cost several times as much here.
        let mut segs = MemSegs::new();
        for s in wr.sges.iter().filter(|s| s.len > 0) {
            segs.push((s.addr, s.len as usize));
        }
        // Data in shared files (shm.rs) goes as file references: the target copies it in one
        // memcpy, faster than our own process_vm_writev below.
        let carries_data = matches!(wr.op, WrOp::Send | WrOp::SendInv(_) | WrOp::SendImm(_) | WrOp::Write | WrOp::WriteImm(_));
        let local: Option<Vec<(Arc<shm::Backing>, u64, usize)>> =
            (i.path.cma() && carries_data && (len >= shm::MIN_LEN || wr.op == WrOp::Write))
                .then(|| {
                    wr.sges
                        .iter()
                        .filter(|s| s.len > 0)
                        .zip(&keys)
                        .map(|(s, k)| Some((self.dev.shared(k.region)?, s.addr, s.len as usize)))
                        .collect()
                })
                .flatten();
        let shared: Option<Vec<shm::Source>> = local.as_ref().and_then(|l| l.iter().map(|(b, a, n)| b.source(*a, *n as u64)).collect());
        if wr.op == WrOp::Write {
            if let Some(shm) = self.write_direct(&i, rkey, raddr, len, &segs, &keys, local.as_deref()) {
                i.sq.count_moved(MOVED_CMA + usize::from(shm), len);
                return self.complete_direct(i, wr.wr_id, WcOp::Write, len as u32);
            }
        }
        let mut hdr = Hdr { raddr, rkey, length: len as u32, ..Hdr::default() };
        if wr.solicited {
            hdr.flags |= flag::SOLICITED;
        }
        match wr.op {
            WrOp::Send => {
                hdr.op = op::SEND;
            }
            WrOp::SendInv(key) => {
                hdr.op = op::SEND;
                hdr.flags |= flag::INVALIDATE;
                hdr.rkey = key;
            }
            WrOp::SendImm(imm) => {
                hdr.op = op::SEND;
                hdr.flags |= flag::IMM;
                hdr.imm = imm;
            }
            WrOp::Write => {
                hdr.op = op::WRITE;
            }
            WrOp::WriteImm(imm) => {
                hdr.op = op::WRITE;
                hdr.flags |= flag::IMM;
                hdr.imm = imm;
            }
            WrOp::Read => hdr.op = op::READ,
            WrOp::CmpSwap { compare, swap } => {
                hdr.op = op::CMP_SWAP;
                hdr.a = compare;
                hdr.b = swap;
            }
            WrOp::FetchAdd { add } => {
                hdr.op = op::FETCH_ADD;
                hdr.a = add;
            }
        }
        let mut sets = MemSets::new();
        for k in keys {
            sets.push(k.lease);
        }
        let mut leases = None;
        let data = if i.path.cma() && ((carries_data && len > INLINE_MAX) || hdr.op == op::READ) {
            // The peer moves the data itself: our memory stays leased until its response.
            let fd = i.stream.as_ref().map_or(-1, |s| s.as_raw_fd());
            let Some(l) = self.leases(&sets, Via::Peer(fd)) else {
                self.fail_post(i, wr.wr_id, wc_op, DAT_DTO_ERR_LOCAL_PROTECTION);
                return Ok(());
            };
            leases = Some(l);
            hdr.flags |= flag::CMA;
            let list32: Vec<(u64, u32)> = segs.iter().map(|&(a, l)| (a, l as u32)).collect();
            let list = match &shared {
                Some(srcs) => {
                    hdr.flags |= flag::SHM;
                    i.sq.count_moved(MOVED_SHM, len);
                    wire::encode_shared(&list32, srcs)
                }
                None => {
                    i.sq.count_moved(MOVED_CMA, len);
                    wire::encode_segments(&list32)
                }
            };
            hdr.payload = list.len() as u32;
            FrameData::Bytes(list)
        } else if carries_data {
            hdr.payload = len as u32;
            i.sq.count_moved(MOVED_TCP, len);
            FrameData::Memory(segs, sets)
        } else {
            // An atomic, or a read answered over the connection.
            i.sq.count_moved(MOVED_TCP, len);
            FrameData::None
        };
        let keep = if is_read { wr.sges.to_vec() } else { Vec::new() };
        let reply = match hdr.op {
            op::READ if hdr.flags & flag::CMA == 0 => len as u32,
            op::CMP_SWAP | op::FETCH_ADD => 8,
            _ => 0,
        };
        i.sq.push(Outstanding::sent(wr.wr_id, wc_op, keep, len as u32, reply, leases));
        if recvq::needs_recv(&hdr) {
            i.sq.consumed_recv();
        }
        let frame = Frame { hdr, data, last: false };
        if i.sq.may_send(is_read) {
            self.send_frame_after(i, frame);
        } else {
            i.sq.hold_back(frame, is_read);
        }
        Ok(())
    }

    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError> {
        let stalled = {
            let mut i = self.lock();
            if i.state == State::Closed {
                return Err(DevError::State);
            }
            if sges.len() > self.caps.max_recv_sge as usize {
                return Err(DevError::NoResources);
            }
            if i.rq.len() >= self.caps.max_recv_wr as usize {
                return Err(DevError::QueueFull);
            }
            if !keys_live(&sges, |k| self.events.key_live(k)) {
                return Err(DevError::Fault);
            }
            i.rq.post((wr_id, sges));
            i.rq.holding()
        };
        if stalled {
            self.drain_stalled();
        }
        self.wake_room();
        Ok(())
    }

    fn destroy(&self) {
        self.await_peer_copies();
        self.disconnect_now();
        // Frames may still wait for a peer that stopped reading: the EP is going, so the
        // connection is cut under them, and nothing of this EP waits on the peer any more.
        let unfinished = {
            let q = self.out.queue.locked();
            q.busy || !q.closed
        };
        if unfinished {
            if let Some(s) = &self.lock().stream {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        // Whatever the peer did not answer, it will not answer now: those leases go (a
        // connection that ended before may have left some).
        self.lock().sq.drop_leases();
        // Then no copy of this QP runs any more, and none starts.
        self.lease.revoke();
        let moved = self.lock().sq.take_moved();
        self.events.moved(moved);
    }

    fn disconnect(&self, graceful: bool) {
        if graceful {
            // Graceful: requests already posted complete first; the disconnect follows the
            // last of them (see on_response).
            let mut i = self.lock();
            if i.state == State::Connected && !i.sq.is_empty() {
                i.closing = true;
                return;
            }
        }
        self.await_peer_copies();
        self.disconnect_now();
        if !graceful {
            self.cut_if_stalled();
        }
    }

    fn bind_mw(&self, wr_id: u64, mw: &Mw, mr: &Mr, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<u32, DevError> {
        let rkey = self.dev.bind_mw(mw, mr, self.pd, self.id, addr, len, access, zero_based)?;
        self.complete_local(wr_id, WcOp::Bind);
        Ok(rkey)
    }

    fn unbind_mw(&self, wr_id: u64, mw: &Mw) {
        self.dev.unbind_mw(mw);
        self.complete_local(wr_id, WcOp::Bind);
    }

    fn remote(&self) -> Option<SocketAddr> {
        self.lock().remote
    }

    fn local_port(&self) -> u16 {
        self.lock().local_port
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn moved(&self) -> Moved {
        self.lock().sq.moved()
    }

    fn path(&self) -> &'static str {
        let i = self.lock();
        match (i.state, i.path.cma()) {
            (State::Connected, true) => "cma",
            (State::Connected, false) => "tcp",
            _ => "none",
        }
    }
}
