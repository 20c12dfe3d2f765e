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
//! This module holds the QP's state and what the consumer calls (`Qp`: posting, binding,
//! disconnecting); its parts, each an `impl SoftQp` of its own over that state:
//! - `cm`: connection setup, both sides (handshake, rendezvous, the path), and its end;
//! - `tx`: the send side: frames written at once, the rest continued by the engine;
//! - `reader`: the read side, a state machine the engine advances: frames from the peer, in
//!   order, payloads landing in pieces, the handshake's and RNR's deadlines;
//! - `rx`: what the frames lead to: completions from responses and acknowledgements, requests
//!   held until a receive comes, the answers and acknowledgements we owe;
//! - `exec`: executing a peer's request against our memory (keys, leases, landing the data).
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
use super::keytab::KeyTable;
use super::lease::{Leases, SetLease, Via};
use super::peer::{self, OtherEnd, PeerProcess};
use super::recvring::{OwnRing, PeerRing, Posted, RING_LEN};
use super::rendezvous::{Channel, Claims};
use super::wire::{self, flag, op, Hdr};
use super::{shm, KeySet, SoftDevice};
use crate::abi::*;
use crate::device::*;
use crate::util::sync::MutexExt;

mod cm;
mod exec;
mod fast;
mod reader;
mod rx;
mod tx;

pub use cm::Pending;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Connecting,
    Connected,
    Closed,
}

/// A send-queue request awaiting its response.
struct Outstanding {
    wr_id: u64,
    op: WcOp,
    /// Where a read's data or an atomic's original value lands.
    sges: Vec<Sge>,
    len: u32,
    /// The payload its response carries: a READ's data (unless the target moved it itself,
    /// cross-memory attach), an atomic's original value, else nothing.
    reply: u32,
    /// Completed without going on the wire (a local error, a bind).
    done: Option<u32>,
    /// With cross-memory attach, the peer moves the data itself: leases on our memory until
    /// its response (lease.rs).
    leases: Option<Leases>,
    /// It went to the peer the ordinary way, as a request the peer runs (see `on_wire`);
    /// false: done here, or its data placed by us (a direct write or send, fast.rs).
    wire: bool,
}

impl Outstanding {
    /// A request done here, or placed by us (`done`: its status when known already).
    fn local(wr_id: u64, op: WcOp, len: u32, done: Option<u32>) -> Outstanding {
        Outstanding { wr_id, op, sges: Vec::new(), len, reply: 0, done, leases: None, wire: false }
    }
}

/// A peer request that waits for a receive to be posted.
struct Stalled {
    hdr: Hdr,
    data: Data,
    /// What it counts against STALL_BYTES.
    cost: usize,
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

struct Inner {
    state: State,
    /// The stream's registration with the engine: dropped (unregistered) before it closes.
    reg: Option<super::engine::Registration>,
    stream: Option<TcpStream>,
    outstanding: VecDeque<Outstanding>,
    recvs: VecDeque<(u64, Sges)>,
    stalled: VecDeque<Stalled>,
    /// The stalled requests' cost (bounded by STALL_BYTES).
    stalled_bytes: usize,
    remote: Option<SocketAddr>,
    local_port: u16,
    /// The peer process, when the kernel confirmed who it is and each side reaches the other's
    /// memory (peer.rs): both sides agreed the cross-memory path (see `cma`).
    peer: Option<Arc<PeerProcess>>,
    /// Passive side, until READY: our channel to the active side's rendezvous, and the
    /// kernel's view of the other end of the connection.
    rendezvous: Option<(Channel, OtherEnd)>,
    outstanding_reads: u32,
    /// The most reads and atomics we have in flight: our EP's `max_rdma_read_out`, and no more
    /// than the peer takes (its `max_rdma_read_in`, from the handshake).
    rd_limit: u32,
    /// Requests held back, in order, while `rd_limit` reads or atomics are in flight (as
    /// an HCA's send queue holds them); the flag marks reads and atomics.
    deferred: VecDeque<(Frame, bool)>,
    /// The peer's published keys, PD and QP, when we can reach its memory (direct writes).
    peer_keys: Option<Arc<KeyTable>>,
    peer_pd: u32,
    peer_qp: u64,
    /// A graceful disconnect waits for the outstanding requests: no new ones are taken.
    closing: bool,
    /// Passive side: the peer's READY, which completes the handshake, has not come yet.
    awaiting_ready: bool,
    /// The local key set the shared-memory fast path used last (fast.rs).
    local_hit: Option<fast::LocalHit>,
    /// Bytes our requests moved, by path (`crate::device::Moved`), counted as they are
    /// posted, under this lock.
    moved: Moved,
    /// Our receive ring, published to the verified peer (recvring.rs): receives it places
    /// sends into. `recv_base`: the receives consumed since the connection began (the number
    /// of `recvs`' first); `published`: the number of the first receive not published yet.
    ring: Option<OwnRing>,
    recv_base: u64,
    published: u64,
    /// The peer's receive ring, and how many of the peer's receives our requests consumed or
    /// will consume (sends and writes with immediate data, in the order posted): the number
    /// of the receive our next send takes.
    peer_ring: Option<PeerRing>,
    sends: u64,
    /// The `outstanding` requests that went the ordinary way: while there are any, nothing
    /// is placed directly (it could overtake them, fast.rs `direct_allowed`).
    on_wire: u32,
}

// SAFETY: sockaddr_storage is plain data; everything is behind the QP's mutex.
unsafe impl Send for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // What requests still held counted against the process's total (rx.rs).
        rx::give_stall(self.stalled_bytes);
    }
}

impl Inner {
    fn push_outstanding(&mut self, o: Outstanding) {
        self.on_wire += u32::from(o.wire);
        self.outstanding.push_back(o);
    }

    /// The oldest outstanding request, if its answer is in (reported in order).
    fn pop_done(&mut self) -> Option<Outstanding> {
        self.outstanding.front()?.done?;
        let o = self.outstanding.pop_front()?;
        self.on_wire -= u32::from(o.wire);
        Some(o)
    }

    fn drain_outstanding(&mut self) -> std::collections::vec_deque::Drain<'_, Outstanding> {
        self.on_wire = 0;
        self.outstanding.drain(..)
    }

    /// Both sides agreed the cross-memory path: we may send requests whose scatter lists name
    /// our memory, and the peer's such requests are served. A request flagged CMA or SHM
    /// without it breaks the connection.
    fn cma(&self) -> bool {
        self.peer.is_some()
    }
}

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

/// The most a connection's peer can make us hold for requests that wait for a receive (their
/// data, or scatter lists, plus STALL_OVERHEAD each). A request that does not fit waits, still
/// on the socket, until a receive lets it run in place; after RNR_WAIT without one, the peer's
/// oldest waiting request is answered "receiver not ready" and the connection ends, as when an
/// HCA's RNR retries run out.
const STALL_BYTES: usize = 4 << 20;
const STALL_OVERHEAD: usize = 128;
const RNR_WAIT: Duration = Duration::from_secs(1);

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

/// The verified peer's pid for one copy; None when there is no verified peer or it has exited
/// (peer.rs).
fn live_pid(i: &Inner) -> Option<u32> {
    i.peer.as_ref()?.pid()
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
                outstanding: VecDeque::new(),
                recvs: VecDeque::new(),
                stalled: VecDeque::new(),
                stalled_bytes: 0,
                remote: None,
                local_port: 0,
                peer: None,
                rendezvous: None,
                outstanding_reads: 0,
                rd_limit: caps.max_rd_atomic.max(1),
                deferred: VecDeque::new(),
                peer_keys: None,
                peer_pd: 0,
                peer_qp: 0,
                closing: false,
                awaiting_ready: false,
                moved: [0; 3],
                local_hit: None,
                ring: None,
                recv_base: 0,
                published: 0,
                peer_ring: None,
                sends: 0,
                on_wire: 0,
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
            (Some(t), None) => {
                let mut i = self.lock();
                if i.ring.is_none() {
                    i.ring = OwnRing::take(t);
                }
                i.ring.as_ref().map_or((0, 0), |r| r.claim())
            }
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
        let verified = verified.filter(|_| agreed);
        let keys = verified.as_ref().and_then(|(p, c)| (c.keytab_fd != 0).then(|| peer_table(p, c.keytab_fd)).flatten());
        let peer_ring = verified.as_ref().zip(keys.clone()).and_then(|((_, c), t)| PeerRing::new(t, c.ring, c.ring_gen));
        let mut i = self.lock();
        i.peer_keys = keys;
        i.peer_pd = verified.as_ref().map_or(0, |(_, c)| c.pd);
        i.peer_qp = verified.as_ref().map_or(0, |(_, c)| c.qp);
        i.peer_ring = peer_ring;
        i.sends = 0;
        // Our ring, if we claimed one, stays until the connection ends (`flush`), used or not:
        // the passive side learns the path only with READY.
        (i.recv_base, i.published) = (0, 0);
        i.peer = verified.map(|(p, _)| Arc::new(p));
        self.publish_recvs(&mut i);
    }

    /// Publishes the receives the ring has room for (recvring.rs): a receive of one element,
    /// as it is; one of several, as one a sender cannot place data into.
    fn publish_recvs(&self, i: &mut Inner) {
        let Some(ring) = &i.ring else { return };
        let mut n = i.published.max(i.recv_base);
        while n < i.recv_base + RING_LEN {
            let Some((_, sges)) = i.recvs.get((n - i.recv_base) as usize) else { break };
            let posted = match sges.as_slice() {
                [s] => Some(Posted { addr: s.addr, len: s.len, lkey: s.lkey }),
                _ => None,
            };
            ring.publish(n, posted);
            n += 1;
        }
        i.published = n;
    }

    /// A request that fails before it goes out (a local protection or length error) completes
    /// in error, and the connection ends, as on an HCA.
    fn fail_post(&self, mut i: MutexGuard<'_, Inner>, wr_id: u64, op: WcOp, status: u32) {
        i.push_outstanding(Outstanding::local(wr_id, op, 0, Some(status)));
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
            i.push_outstanding(Outstanding::local(wr_id, op, 0, Some(DAT_DTO_SUCCESS)));
            while let Some(o) = i.pop_done() {
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
            None => !i.recvs.is_empty(),
        }
    }

    /// Takes the oldest receive (from the SRQ, if the QP uses one), for a request that then
    /// owns it: it consumes it, or gives it back (`return_recv`).
    fn take_recv(&self) -> Option<Recv> {
        match &self.srq {
            Some(srq) => srq.pop(),
            None => {
                let mut i = self.lock();
                let r = i.recvs.pop_front()?;
                i.recv_base += 1;
                self.publish_recvs(&mut i);
                Some(r)
            }
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
        let stalled = !self.lock().stalled.is_empty();
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

/// The peer key tables this process has mapped, shared by all connections to that process:
/// the peer's descriptor `fd`, taken from the verified process (the same file: device and
/// inode).
fn peer_table(peer: &PeerProcess, fd: u32) -> Option<Arc<KeyTable>> {
    use std::os::unix::fs::MetadataExt;
    type Tables = Vec<((u64, u64), std::sync::Weak<KeyTable>)>;
    static TABLES: Mutex<Tables> = Mutex::new(Vec::new());
    let file = std::fs::File::from(peer.get_fd(fd)?);
    let meta = file.metadata().ok()?;
    let key = (meta.dev(), meta.ino());
    let mut tables = TABLES.locked();
    tables.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = tables.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Some(t);
    }
    let t = Arc::new(KeyTable::open_peer(file)?);
    tables.push((key, Arc::downgrade(&t)));
    Some(t)
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
        let pdata = private_data.to_vec();
        std::thread::Builder::new()
            .name("dat2-soft-connect".into())
            .stack_size(256 << 10)
            .spawn(move || me.active(addr, conn_qual, pdata, timeout))
            .map_err(|_| DevError::NoResources)?;
        Ok(())
    }

    fn post_send(&self, wr: SendWr) -> Result<(), DevError> {
        let mut i = self.lock();
        if i.state != State::Connected || i.closing {
            return Err(DevError::State);
        }
        if wr.sges.len() > self.caps.max_send_sge as usize {
            return Err(DevError::NoResources);
        }
        if i.outstanding.len() >= self.caps.max_send_wr as usize {
            return Err(DevError::QueueFull);
        }
        if !keys_live(&wr.sges, |k| self.events.key_live(k)) {
            return Err(DevError::Fault);
        }
        if let Some(len) = self.write_fast(&mut i, &wr) {
            i.moved[MOVED_SHM] += u64::from(len);
            return self.complete_direct(i, wr.wr_id, WcOp::Write, len);
        }
        if let Some(len) = self.send_direct(&i, &wr) {
            // Placed in the peer's receive: the peer is told which one, and completes it.
            let mut hdr = Hdr { op: op::SEND, flags: flag::PLACED, length: len, a: i.sends, ..Hdr::default() };
            if wr.solicited {
                hdr.flags |= flag::SOLICITED;
            }
            if let WrOp::SendImm(imm) = wr.op {
                hdr.flags |= flag::IMM;
                hdr.imm = imm;
            }
            i.sends += 1;
            i.moved[MOVED_CMA] += u64::from(len);
            // Complete now: the peer completes its receive successfully even if its connection
            // ends before this header is read (the ring says the receive was placed into).
            self.send_frame_after(i, Frame { hdr, data: FrameData::None, last: false });
            return self.complete_direct(self.lock(), wr.wr_id, WcOp::Send, len);
        }
        let is_read = matches!(wr.op, WrOp::Read | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. });
        let len: u64 = wr.sges.iter().map(|s| u64::from(s.len)).sum();
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
            (i.cma() && carries_data && (len >= shm::MIN_LEN || wr.op == WrOp::Write))
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
                i.moved[MOVED_CMA + usize::from(shm)] += len;
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
        let data = if i.cma() && ((carries_data && len > INLINE_MAX) || hdr.op == op::READ) {
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
                    i.moved[MOVED_SHM] += len;
                    wire::encode_shared(&list32, srcs)
                }
                None => {
                    i.moved[MOVED_CMA] += len;
                    wire::encode_segments(&list32)
                }
            };
            hdr.payload = list.len() as u32;
            FrameData::Bytes(list)
        } else if carries_data {
            hdr.payload = len as u32;
            i.moved[MOVED_TCP] += len;
            FrameData::Memory(segs, sets)
        } else {
            // An atomic, or a read answered over the connection.
            i.moved[MOVED_TCP] += len;
            FrameData::None
        };
        let keep = if is_read { wr.sges.to_vec() } else { Vec::new() };
        let reply = match hdr.op {
            op::READ if hdr.flags & flag::CMA == 0 => len as u32,
            op::CMP_SWAP | op::FETCH_ADD => 8,
            _ => 0,
        };
        i.push_outstanding(Outstanding { wr_id: wr.wr_id, op: wc_op, sges: keep, len: len as u32, reply, done: None, leases, wire: true });
        if rx::needs_recv(&hdr) {
            i.sends += 1;
        }
        let frame = Frame { hdr, data, last: false };
        if !i.deferred.is_empty() || (is_read && i.outstanding_reads >= i.rd_limit) {
            i.deferred.push_back((frame, is_read));
            return Ok(());
        }
        if is_read {
            i.outstanding_reads += 1;
        }
        self.send_frame_after(i, frame);
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
            if i.recvs.len() >= self.caps.max_recv_wr as usize {
                return Err(DevError::QueueFull);
            }
            if !keys_live(&sges, |k| self.events.key_live(k)) {
                return Err(DevError::Fault);
            }
            i.recvs.push_back((wr_id, sges));
            self.publish_recvs(&mut i);
            !i.stalled.is_empty()
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
        for o in self.lock().outstanding.iter_mut() {
            o.leases = None;
        }
        // Then no copy of this QP runs any more, and none starts.
        self.lease.revoke();
        let moved = core::mem::take(&mut self.lock().moved);
        self.events.moved(moved);
    }

    fn disconnect(&self, graceful: bool) {
        if graceful {
            // Graceful: requests already posted complete first; the disconnect follows the
            // last of them (see on_response).
            let mut i = self.lock();
            if i.state == State::Connected && !i.outstanding.is_empty() {
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
        self.lock().moved
    }

    fn path(&self) -> &'static str {
        let i = self.lock();
        match (i.state, i.cma()) {
            (State::Connected, true) => "cma",
            (State::Connected, false) => "tcp",
            _ => "none",
        }
    }
}
