//! The soft device's reliable-connected queue pair, over one TCP connection.
//!
//! Each connected QP has a reader thread, which is the progress engine: it applies the peer's
//! requests to our memory (checking every remote key, bound, PD, window binding and privilege
//! first) without the application calling in, and completes our own requests as their
//! responses come back, in order. A writer thread sends queued frames, so neither the reader
//! nor an application thread ever blocks on a full socket while holding anything.
//!
//! On one host, when each process can reach the other's memory (cross-memory attach) and the
//! kernel has confirmed which process the peer is (peer.rs, rendezvous.rs), requests carry
//! scatter lists instead of data and the target copies directly between the two processes'
//! registered memory.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::io;
use super::wire::{self, flag, op, Hdr, Hello, HDR_LEN};
use super::keytab::KeyTable;
use super::lease::{Leases, SetLease, Via};
use super::peer::{self, OtherEnd, PeerProcess};
use super::rendezvous::{Channel, Claims, Rendezvous};
use super::{shm, KeySet, SoftDevice};
use crate::abi::*;
use crate::device::*;

/// How long a refused connection attempt is retried.
const REFUSED_RETRY: Duration = Duration::from_millis(200);

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
}

enum FrameData {
    None,
    Bytes(Vec<u8>),
    /// Registered memory, and the key sets that admitted it (leased while it is written).
    Memory(Vec<(u64, usize)>, Vec<Arc<SetLease>>),
    /// The unsent tail of a frame (header included): written as is, with no header of its own.
    Raw(Vec<u8>),
}

struct Frame {
    hdr: Hdr,
    data: FrameData,
    /// Shut the connection down once this frame is out.
    last: bool,
}

struct Inner {
    state: State,
    stream: Option<TcpStream>,
    outstanding: VecDeque<Outstanding>,
    recvs: VecDeque<(u64, Vec<Sge>)>,
    stalled: VecDeque<Stalled>,
    /// The stalled requests' cost (bounded by STALL_BYTES).
    stalled_bytes: usize,
    remote: Option<(libc::sockaddr_storage, u16)>,
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
}

// SAFETY: sockaddr_storage is plain data; everything is behind the QP's mutex.
unsafe impl Send for Inner {}

impl Inner {
    /// Both sides agreed the cross-memory path: we may send requests whose scatter lists name
    /// our memory, and the peer's such requests are served. A request flagged CMA or SHM
    /// without it breaks the connection.
    fn cma(&self) -> bool {
        self.peer.is_some()
    }
}

struct Delivery {
    queue: VecDeque<Event>,
    busy: bool,
}

struct OutState {
    frames: VecDeque<Frame>,
    closed: bool,
    /// Someone (the writer thread or a posting thread) is writing to the socket.
    busy: bool,
    /// The queued frames wait (see `hold_frame`): nothing is written until it is released.
    held: bool,
    fd: i32,
    /// Plain success responses not sent yet: they ride on the next frame that enters the
    /// stream (its `acks`), or go as an ACK frame of their own (see `flush_acks`).
    acks: u32,
}

struct Outbound {
    queue: Mutex<OutState>,
    cv: Condvar,
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

/// How long the reader polls an empty socket after a request it acknowledged, before it
/// sleeps (see `await_frame`).
const BUSY_POLL: Duration = Duration::from_micros(20);

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
    /// Serialises the execution of peer requests (reader thread and stalled-request drains).
    exec: Mutex<()>,
    /// The peer's shared files this connection has mapped (shm.rs).
    shm_peers: Mutex<shm::Peers>,
    delivery: Mutex<Delivery>,
    out: Outbound,
    /// Signalled when receives are posted or stalled requests ran (see `await_room`), when a
    /// thread waits there (`room_waiters`): a notification is a system call.
    room: Condvar,
    room_waiters: AtomicU32,
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

fn status_u8(s: u32) -> u8 {
    s as u8
}

impl SoftQp {
    pub fn new(dev: Arc<SoftDevice>, id: u64, pd: u32, caps: QpCaps, srq: Option<Arc<super::srq::SoftSrq>>, events: Arc<dyn QpEvents>) -> Arc<SoftQp> {
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
            }),
            exec: Mutex::new(()),
            shm_peers: Mutex::new(shm::Peers::default()),
            delivery: Mutex::new(Delivery { queue: VecDeque::new(), busy: false }),
            out: Outbound { queue: Mutex::new(OutState { frames: VecDeque::new(), closed: false, busy: false, held: false, fd: -1, acks: 0 }), cv: Condvar::new() },
            room: Condvar::new(),
            room_waiters: AtomicU32::new(0),
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
    fn claims(&self, stream: &TcpStream) -> Claims {
        Claims { sock_fd: stream.as_raw_fd() as u32, canary: peer::canary(), keytab_fd: self.keytab_fd(), pd: self.pd, qp: self.id }
    }

    /// Sets the connection's data path: cross-memory attach (and shared files, and the key
    /// table) with the verified peer when `agreed`, else TCP.
    fn set_path(&self, verified: Option<(PeerProcess, Claims)>, agreed: bool) {
        let verified = verified.filter(|_| agreed);
        let keys = verified.as_ref().and_then(|(p, c)| (c.keytab_fd != 0).then(|| peer_table(p, c.keytab_fd)).flatten());
        let mut i = self.lock();
        i.peer_keys = keys;
        i.peer_pd = verified.as_ref().map_or(0, |(_, c)| c.pd);
        i.peer_qp = verified.as_ref().map_or(0, |(_, c)| c.qp);
        i.peer = verified.map(|(p, _)| Arc::new(p));
    }

    /// The direct path of an RDMA write on one host: with nothing else outstanding (so the
    /// write cannot overtake an earlier request), a key the peer published as valid for this
    /// connection, and the peer's memory reachable, we write it ourselves. None: send the
    /// request the ordinary way (where the target checks everything).
    #[allow(clippy::too_many_arguments)]
    fn write_direct(&self, i: &Inner, rkey: u32, raddr: u64, len: u64, segs: &[(u64, usize)], keys: &[KeySet], local: Option<&[(Arc<shm::Backing>, u64, usize)]>) -> Option<()> {
        if !i.outstanding.is_empty() || !i.deferred.is_empty() || !i.cma() {
            return None;
        }
        // Our source memory stays ours while we copy it (lease.rs). No lease on the QP is
        // needed: we hold its lock, which its destruction takes first.
        let _held = super::lease::hold_all(keys)?;
        // The peer's key stays valid while we write through it: its revoke waits for the pin.
        let keys = i.peer_keys.as_ref()?;
        let (g, _pin) = keys.pin(rkey)?;
        if g.pd != i.peer_pd || (g.bound_qp != 0 && g.bound_qp != i.peer_qp) || !g.access.has(Access::REMOTE_WRITE) {
            return None;
        }
        let addr = if g.zero_based { g.addr.checked_add(raddr)? } else { raddr };
        if addr < g.addr || addr.checked_add(len)? > g.addr + g.len {
            return None;
        }
        if let (Some(local), Some(file)) = (local, g.file) {
            // Both ends in shared files (shm.rs): one memcpy from our alias into the peer's
            // file; `local` holds our aliases alive meanwhile.
            let dst = shm::Source { offset: file.offset + (addr - g.addr), ..file };
            let views: Option<Vec<(*const u8, usize)>> = local.iter().map(|(b, a, n)| Some((b.view(*a, *n)?, *n))).collect();
            if let Some(v) = views {
                if self.shm_peers.lock().unwrap_or_else(|e| e.into_inner()).put(i.peer.as_deref()?, dst, &v, io::TAIL) {
                    return Some(());
                }
            }
        }
        let target = [(addr, len as usize)];
        let (head, tail) = io::split_tail(&target);
        let (lhead, ltail) = io::split_at(segs, len as usize - tail.iter().map(|t| t.1).sum::<usize>());
        let pid = live_pid(i)?;
        if !head.is_empty() {
            io::push(pid, &lhead, &head).ok()?;
        }
        io::push(pid, &ltail, &tail).ok()?;
        Some(())
    }

    /// A request that fails before it goes out (a local protection or length error) completes
    /// in error, and the connection ends, as on an HCA.
    fn fail_post(&self, mut i: MutexGuard<'_, Inner>, wr_id: u64, op: WcOp, status: u32) {
        i.outstanding.push_back(Outstanding { wr_id, op, sges: Vec::new(), len: 0, reply: 0, done: Some(status), leases: None });
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
                let c = Completion { wr_id, status: DAT_DTO_ERR_FLUSHED, op, byte_len: 0, imm: None, invalidated: None, solicited: false };
                return self.deliver(vec![Event::Completion(c)]);
            }
            i.outstanding.push_back(Outstanding { wr_id, op, sges: Vec::new(), len: 0, reply: 0, done: Some(DAT_DTO_SUCCESS), leases: None });
            while i.outstanding.front().is_some_and(|o| o.done.is_some()) {
                let o = i.outstanding.pop_front().expect("front exists");
                let status = o.done.unwrap_or(DAT_DTO_SUCCESS);
                events.push(Event::Completion(Completion { wr_id: o.wr_id, status, op: o.op, byte_len: 0, imm: None, invalidated: None, solicited: false }));
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
                // Written from this thread when the socket is idle, so that the frame (and the
                // acknowledgements it carries) is with the kernel before the consumer can free
                // the EP or exit.
                self.send_frame_direct(Frame { hdr: Hdr { op: op::DISCONNECT, ..Hdr::default() }, data: FrameData::None, last: true });
                self.flush(CmEvent::Disconnected);
            }
            _ => {
                self.close_writer();
                self.flush(CmEvent::Disconnected);
            }
        }
    }

    /// Whether a receive is available (from the SRQ, if the QP uses one).
    fn has_recv(&self, i: &Inner) -> bool {
        match &self.srq {
            Some(srq) => !srq.is_empty(),
            None => !i.recvs.is_empty(),
        }
    }

    fn pop_recv(&self) -> Option<(u64, Vec<Sge>)> {
        match &self.srq {
            Some(srq) => srq.pop(),
            None => self.lock().recvs.pop_front(),
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
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands events to the consumer side in order, never while holding the QP's locks; a
    /// re-entrant call (from inside a callback) only queues.
    fn deliver(&self, events: Vec<Event>) {
        {
            let mut d = self.delivery.lock().unwrap_or_else(|e| e.into_inner());
            d.queue.extend(events);
            if d.busy {
                return;
            }
            d.busy = true;
        }
        loop {
            let next = {
                let mut d = self.delivery.lock().unwrap_or_else(|e| e.into_inner());
                match d.queue.pop_front() {
                    Some(e) => e,
                    None => {
                        d.busy = false;
                        return;
                    }
                }
            };
            match next {
                Event::Completion(c) => self.events.completion(c),
                Event::Cm(e) => self.events.cm(e),
                // Its events join this queue (a re-entrant deliver only queues).
                Event::Flush(e) => self.flush(e),
            }
        }
    }

    /// Queues a frame for the writer thread (the reader thread's way: it must never block).
    fn send_frame(&self, frame: Frame) {
        self.queue_frame(frame, false);
    }

    fn queue_frame(&self, mut frame: Frame, hold: bool) {
        let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.closed || !stamp(&mut q, &mut frame) {
            return;
        }
        push_frame(&mut q, frame);
        q.held |= hold;
        self.out.cv.notify_one();
    }

    /// Queues `frame` and holds it, and everything queued after it, until `release_frames`:
    /// frames that other threads send meanwhile queue behind it (the queue is not empty).
    fn hold_frame(&self, frame: Frame) {
        self.queue_frame(frame, true);
    }

    fn release_frames(&self) {
        let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.held = false;
        self.out.cv.notify_one();
    }

    /// A response that carries data (a READ's or an atomic's) has gone to the socket: the peer
    /// may have another read in flight (see `reads_in`).
    fn answered(&self, frame: &Frame) {
        if frame.hdr.op == op::RESPONSE && matches!(frame.data, FrameData::Memory(..) | FrameData::Bytes(_)) {
            let _ = self.reads_in.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    /// Sends a small frame (no memory payload) from the reader thread without blocking: what the
    /// socket does not take at once is queued, in order, for the writer thread.
    fn send_frame_now(&self, mut frame: Frame) {
        if matches!(frame.data, FrameData::Memory(..)) || frame.last {
            return self.send_frame(frame);
        }
        let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.closed || !stamp(&mut q, &mut frame) {
            return;
        }
        if q.busy || !q.frames.is_empty() || q.fd < 0 {
            push_frame(&mut q, frame);
            self.out.cv.notify_one();
            return;
        }
        let mut bytes = frame.hdr.encode().to_vec();
        if let FrameData::Bytes(b) = &frame.data {
            bytes.extend_from_slice(b);
        }
        // Held under the queue lock: a non-blocking send is short, and nobody else may write.
        let sent = io::try_write(q.fd, &[(bytes.as_ptr() as u64, bytes.len())]);
        if sent.is_ok() {
            self.answered(&frame);
        }
        match sent {
            Ok(n) if n == bytes.len() => {}
            Ok(n) => {
                // The rest goes out as raw bytes first, before anything queued later.
                let rest = bytes[n..].to_vec();
                q.frames.push_front(Frame { hdr: Hdr::default(), data: FrameData::Raw(rest), last: false });
                self.out.cv.notify_one();
            }
            Err(_) => {
                q.closed = true;
                q.frames.clear();
                self.out.cv.notify_all();
            }
        }
    }

    /// Sends a frame from the posting thread itself when nothing else is being written (no
    /// hand-off to the writer thread on the latency path); otherwise queues it.
    fn send_frame_direct(&self, mut frame: Frame) {
        let fd = {
            let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.closed || !stamp(&mut q, &mut frame) {
                return;
            }
            if q.busy || !q.frames.is_empty() || q.fd < 0 {
                push_frame(&mut q, frame);
                self.out.cv.notify_one();
                return;
            }
            q.busy = true;
            q.fd
        };
        let ok = self.write_frame(fd, &frame);
        let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.busy = false;
        if !ok || frame.last {
            q.closed = true;
            q.frames.clear();
            // SAFETY: shutting down our own connected socket.
            unsafe { libc::shutdown(fd, if ok { libc::SHUT_WR } else { libc::SHUT_RDWR }) };
            self.out.cv.notify_all();
        } else if !q.frames.is_empty() {
            // Frames queued meanwhile: the writer thread takes over (it is not woken otherwise).
            self.out.cv.notify_one();
        }
    }

    /// Writes one frame (header and data); false when the connection failed, or when memory
    /// the frame carries was revoked before it went out (lease.rs).
    fn write_frame(&self, fd: i32, frame: &Frame) -> bool {
        if let FrameData::Raw(b) = &frame.data {
            return io::write_all(fd, &[(b.as_ptr() as u64, b.len())]).is_ok();
        }
        let hdr = frame.hdr.encode();
        let mut parts = vec![(hdr.as_ptr() as u64, HDR_LEN)];
        let mut leases = None;
        match &frame.data {
            FrameData::None | FrameData::Raw(_) => {}
            FrameData::Bytes(b) => parts.push((b.as_ptr() as u64, b.len())),
            FrameData::Memory(m, sets) => {
                leases = self.leases(sets, Via::Socket(fd));
                if leases.is_none() {
                    crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: memory revoked before it was sent: the connection ends", self.id);
                    return false;
                }
                parts.extend_from_slice(m);
            }
        }
        let ok = io::write_all(fd, &parts).is_ok();
        drop(leases);
        ok
    }

    // -----------------------------------------------------------------------------------------
    // Key checks.

    /// The key sets of a local scatter list's non-empty elements, when each lies within a live
    /// lkey of ours: its PD, bounds, and LOCAL_WRITE when the element is written.
    fn local_keys(&self, sges: &[Sge], write: bool) -> Option<Vec<KeySet>> {
        sges.iter()
            .filter(|s| s.len > 0)
            .map(|s| {
                let k = self.dev.lkey(s.lkey)?;
                let inside = s.addr >= k.addr && s.addr.checked_add(u64::from(s.len)).is_some_and(|e| e <= k.addr + k.len);
                (k.pd == self.pd && inside && (!write || k.access.has(Access::LOCAL_WRITE))).then_some(k)
            })
            .collect()
    }

    /// The leases of `local_keys`.
    fn local_sets(&self, sges: &[Sge], write: bool) -> Option<Vec<Arc<SetLease>>> {
        Some(self.local_keys(sges, write)?.into_iter().map(|k| k.lease).collect())
    }

    /// Checks a remote access against our key table; returns the local address it names and
    /// the key set that admits it.
    fn check_remote(&self, rkey: u32, raddr: u64, len: u64, need: u32) -> Option<(u64, Arc<SetLease>)> {
        let k: KeySet = self.dev.rkey(rkey)?;
        if k.pd != self.pd || k.bound_qp.is_some_and(|q| q != self.id) || !k.access.has(need) {
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

    // -----------------------------------------------------------------------------------------
    // Connection setup.

    /// Takes the connected stream and starts the reader and writer threads. `established`
    /// (the active side's ESTABLISHED, with the peer's private data) is reported before the
    /// reader starts, so that nothing the peer does on the connection, a disconnect included,
    /// can be reported before it. `verified`/`agreed`: the data path (see set_path); the
    /// passive side learns it later, with READY.
    /// `peer_rd_in`: how many reads and atomics the peer takes at a time (its handshake's
    /// `rd_in`).
    fn start(self: &Arc<Self>, stream: TcpStream, verified: Option<(PeerProcess, Claims)>, agreed: bool, peer_rd_in: u32, established: Option<Vec<u8>>) {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(None);
        let reader = stream.try_clone();
        let writer = stream.try_clone();
        self.set_path(verified, agreed);
        {
            let mut i = self.lock();
            i.local_port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
            if let Ok(peer) = stream.peer_addr() {
                i.remote = Some((super::address::to_storage(peer), peer.port()));
            }
            i.stream = Some(stream);
            i.state = State::Connected;
            i.rd_limit = self.caps.max_rd_atomic.min(peer_rd_in).max(1);
        }
        if let Some(private_data) = established {
            self.deliver(vec![Event::Cm(CmEvent::Established { private_data })]);
        }
        match (reader, writer) {
            (Ok(r), Ok(w)) => {
                let me = self.clone();
                let spawned_w = std::thread::Builder::new().name("dat2-soft-tx".into()).stack_size(256 << 10).spawn(move || me.writer(w));
                let me = self.clone();
                let spawned_r = std::thread::Builder::new().name("dat2-soft-rx".into()).stack_size(256 << 10).spawn(move || me.reader(r));
                if spawned_w.is_err() || spawned_r.is_err() {
                    self.fail(CmEvent::Broken);
                }
            }
            _ => self.fail(CmEvent::Broken),
        }
    }

    fn active(self: Arc<Self>, addr: SocketAddr, private_data: Vec<u8>, timeout: Option<Duration>) {
        let outcome = (|| -> Result<(TcpStream, Hello, Option<(PeerProcess, Claims)>, bool), CmEvent> {
            // A refused connection is retried briefly: rdma_cm spends about as long resolving
            // the address and route, and programs such as dtest create their listener only
            // just before the peer connects.
            let started = std::time::Instant::now();
            let stream = loop {
                let attempt = match timeout {
                    Some(t) => TcpStream::connect_timeout(&addr, t.saturating_sub(started.elapsed()).max(Duration::from_millis(1))),
                    None => TcpStream::connect(addr),
                };
                match attempt {
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && started.elapsed() < REFUSED_RETRY.min(timeout.unwrap_or(REFUSED_RETRY)) =>
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    other => break other,
                }
            }
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused => CmEvent::NonPeerRejected,
                _ if timed_out(&e) => CmEvent::TimedOut,
                _ => CmEvent::Unreachable,
            })?;
            let _ = stream.set_nodelay(true);
            let _ = stream.set_read_timeout(Some(timeout.unwrap_or(Duration::from_secs(3600)).max(Duration::from_millis(1))));
            // A peer on this host is asked to our rendezvous (rendezvous.rs), where each side
            // learns from the kernel which process the other is.
            let rendezvous = peer::other_end(&stream).and_then(|_| Rendezvous::open());
            let hello = Hello { rendezvous: rendezvous.as_ref().map_or(0, |r| r.token), rd_in: self.caps.max_rd_in, private_data, ..Hello::default() };
            write_message(&stream, op::HELLO, &hello.encode()).map_err(|_| CmEvent::Unreachable)?;
            let (hdr, body) =
                read_message(&stream, wire::HELLO_MAX).map_err(|e| if timed_out(&e) { CmEvent::TimedOut } else { CmEvent::NonPeerRejected })?;
            let answer = Hello::decode(&body).ok_or(CmEvent::NonPeerRejected)?;
            match hdr.op {
                op::ACCEPT => {
                    // The passive side came to the rendezvous before it sent ACCEPT, if at all.
                    // The other end is looked up only now: when we sent HELLO, the peer may not
                    // have accepted the connection yet (its socket had no inode).
                    let end = rendezvous.as_ref().and_then(|_| peer::other_end(&stream));
                    let verified = rendezvous.as_ref().zip(end).and_then(|(r, e)| r.take(e));
                    let we_reach = verified.as_ref().is_some_and(|(p, c, channel)| channel.send(&self.claims(&stream)) && p.reaches(c.canary));
                    let verified = verified.map(|(p, c, _)| (p, c));
                    let ready = Hello { reaches_peer: we_reach, ..Hello::default() };
                    write_message(&stream, op::READY, &ready.encode()).map_err(|_| CmEvent::Broken)?;
                    // Wait until the passive side has reported ESTABLISHED (see op::ESTABLISHED).
                    // If the connection ends first (the passive side broke it at once), it was
                    // accepted all the same: we report ESTABLISHED and the reader then finds
                    // the end.
                    // Its status says whether the passive side agreed the cross-memory path too.
                    let agreed = match read_message(&stream, 0) {
                        Ok((done, _)) if done.op == op::ESTABLISHED && done.acks == 0 => we_reach && done.status == 1,
                        Err(e) if timed_out(&e) => return Err(CmEvent::TimedOut),
                        Err(e) if matches!(
                            e.kind(),
                            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                        ) => false,
                        _ => return Err(CmEvent::Broken),
                    };
                    Ok((stream, answer, verified, agreed))
                }
                op::REJECT => Err(CmEvent::PeerRejected { private_data: answer.private_data }),
                _ => Err(CmEvent::NonPeerRejected),
            }
        })();
        match outcome {
            Ok((stream, answer, verified, agreed)) => {
                if self.lock().state != State::Connecting {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
                self.start(stream, verified, agreed, answer.rd_in, Some(answer.private_data));
            }
            Err(ev) => {
                let mut i = self.lock();
                if i.state != State::Connecting {
                    return;
                }
                i.state = State::Closed;
                drop(i);
                self.flush(ev);
            }
        }
    }

    /// Completes everything posted as flushed, then reports `ev`.
    fn flush(&self, ev: CmEvent) {
        let mut events = Vec::new();
        {
            let mut i = self.lock();
            for o in i.outstanding.drain(..) {
                let status = o.done.unwrap_or(DAT_DTO_ERR_FLUSHED);
                events.push(Event::Completion(Completion { wr_id: o.wr_id, status, op: o.op, byte_len: 0, imm: None, invalidated: None, solicited: false }));
            }
            for (wr_id, _) in i.recvs.drain(..) {
                events.push(Event::Completion(Completion { wr_id, status: DAT_DTO_ERR_FLUSHED, op: WcOp::Recv, byte_len: 0, imm: None, invalidated: None, solicited: false }));
            }
            i.stalled.clear();
            i.stalled_bytes = 0;
            i.deferred.clear();
            i.outstanding_reads = 0;
            i.rendezvous = None;
        }
        events.push(Event::Cm(ev));
        self.wake_room();
        self.deliver(events);
    }

    /// Tears the connection down because of an error and reports `ev` (once).
    #[track_caller]
    fn fail(&self, ev: CmEvent) {
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

    fn close_writer(&self) {
        let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.closed = true;
        q.frames.clear();
        self.out.cv.notify_all();
    }

    // -----------------------------------------------------------------------------------------
    // The writer.

    fn writer(&self, stream: TcpStream) {
        let fd = stream.as_raw_fd();
        self.out.queue.lock().unwrap_or_else(|e| e.into_inner()).fd = fd;
        loop {
            let frame = {
                let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if !q.busy && !q.held {
                        if let Some(f) = q.frames.pop_front() {
                            q.busy = true;
                            break Some(f);
                        }
                    }
                    if q.closed && !q.busy {
                        break None;
                    }
                    q = self.out.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            let Some(frame) = frame else { return };
            let ok = self.write_frame(fd, &frame);
            if ok {
                self.answered(&frame);
            }
            let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.busy = false;
            if !ok || frame.last {
                q.closed = true;
                q.frames.clear();
                drop(q);
                let _ = stream.shutdown(if ok { Shutdown::Write } else { Shutdown::Both });
                self.out.cv.notify_all();
                return;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // The reader: the progress engine.

    fn reader(self: Arc<Self>, stream: TcpStream) {
        let mut rx = io::Rx::new(stream.as_raw_fd());
        // Passive side: the peer's first frame must be READY (the handshake's end).
        let mut handshaking = self.lock().awaiting_ready;
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
                self.fail(CmEvent::Broken);
                return;
            }
            handshaking = false;
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
                self.fail(CmEvent::Broken);
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
    fn await_frame(&self, rx: &mut io::Rx) -> std::io::Result<()> {
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
    fn on_acks(&self, n: u32) -> bool {
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
    fn complete_ready(&self) {
        let mut events = Vec::new();
        {
            let mut i = self.lock();
            while i.outstanding.front().is_some_and(|o| o.done.is_some()) {
                let o = i.outstanding.pop_front().expect("front exists");
                let st = o.done.unwrap_or(DAT_DTO_SUCCESS);
                let byte_len = if st == DAT_DTO_SUCCESS { o.len } else { 0 };
                events.push(Event::Completion(Completion { wr_id: o.wr_id, status: st, op: o.op, byte_len, imm: None, invalidated: None, solicited: false }));
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
    fn on_response(&self, rx: &mut io::Rx, hdr: &Hdr) -> bool {
        let head = {
            let i = self.lock();
            i.outstanding.iter().find(|o| o.done.is_none()).map(|o| (o.wr_id, o.op, o.sges.clone(), o.reply))
        };
        let Some((wr_id, op_kind, sges, reply)) = head else { return false };
        let status = u32::from(hdr.status);
        // A response carries exactly what its request asked for: a success its data, an
        // error nothing.
        if hdr.payload != if status == DAT_DTO_SUCCESS { reply } else { 0 } {
            return false;
        }
        let mut status = status;
        // The local buffers' keys must still be live when the data lands (lease.rs).
        let leases = (status == DAT_DTO_SUCCESS && hdr.payload > 0).then(|| self.local_sets(&sges, true).and_then(|sets| self.leases(&sets, Via::Socket(rx.fd()))));
        if let Some(None) = leases {
            // Revoked since the post (dat_lmr_free): a local protection error, as on an HCA.
            status = DAT_DTO_ERR_LOCAL_PROTECTION;
            if rx.discard(hdr.payload as usize).is_err() {
                return false;
            }
        } else if status == DAT_DTO_SUCCESS && hdr.payload > 0 {
            // Read data or an atomic's original value, into the checked local buffers.
            let mut left = hdr.payload as usize;
            let mut segs = Vec::new();
            for s in &sges {
                let n = (s.len as usize).min(left);
                if n > 0 {
                    segs.push((s.addr, n));
                }
                left -= n;
            }
            if rx.land(&segs).is_err() {
                return false;
            }
            if left > 0 && rx.discard(left).is_err() {
                return false;
            }
            drop(leases);
        } else if hdr.payload > 0 && rx.discard(hdr.payload as usize).is_err() {
            return false;
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
    fn on_request(&self, rx: &mut io::Rx, hdr: Hdr) -> bool {
        if !wire::request_shape_ok(&hdr, self.caps.max_message) {
            crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: a malformed request (op {}, payload {}, length {})", self.id, hdr.op, hdr.payload, hdr.length);
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
            crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: a request flagged CMA/SHM on a connection without that path", self.id);
            return false;
        }
        if matches!(hdr.op, op::READ | op::CMP_SWAP | op::FETCH_ADD) && !cma && self.reads_in.fetch_add(1, Ordering::SeqCst) >= self.caps.max_rd_in {
            // More reads in flight than we said we take (responder resources).
            crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: more than {} reads or atomics outstanding", self.id, self.caps.max_rd_in);
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
        let needs_recv = hdr.op == op::SEND || (hdr.op == op::WRITE && hdr.flags & flag::IMM != 0);
        loop {
            let exec = self.exec.lock().unwrap_or_else(|e| e.into_inner());
            let (stall, room) = {
                let i = self.lock();
                let stall = !i.stalled.is_empty() || (needs_recv && !self.has_recv(&i));
                (stall, i.stalled_bytes + stall_cost(&hdr, &data) <= STALL_BYTES)
            };
            if !stall {
                let (ok, events) = self.execute(Some(rx), hdr, data);
                drop(exec);
                self.deliver(events);
                return ok;
            }
            if room {
                let cost = stall_cost(&hdr, &data);
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
                return true;
            }
            // No room to hold it: it stays on the socket until it can run in place.
            drop(exec);
            if !self.await_room(needs_recv) {
                if self.lock().state != State::Closed {
                    crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "soft QP {}: no receive for {RNR_WAIT:?} with {STALL_BYTES} bytes of requests waiting: receiver not ready", self.id);
                    // The answer goes out (the connection ends after it); the reader stops.
                    self.respond(DAT_DTO_ERR_RECEIVER_NOT_READY, FrameData::None, 0, false);
                    self.flush(CmEvent::Broken);
                }
                return false;
            }
        }
    }

    fn wait_room<'a>(&self, i: MutexGuard<'a, Inner>, d: Duration) -> MutexGuard<'a, Inner> {
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        let i = self.room.wait_timeout(i, d).unwrap_or_else(|e| e.into_inner()).0;
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
        i
    }

    fn wake_room(&self) {
        if self.room_waiters.load(Ordering::SeqCst) > 0 {
            // Under the QP's lock, so that a waiter between its check and its wait cannot
            // miss it.
            let _i = self.lock();
            self.room.notify_all();
        }
    }

    /// Waits up to RNR_WAIT until a request can run at once: nothing stalled before it, and a
    /// receive posted if it needs one. False: it cannot (or the connection ended).
    fn await_room(&self, needs_recv: bool) -> bool {
        let deadline = Instant::now() + RNR_WAIT;
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

    /// Runs requests that waited for receives, now that one was posted.
    fn drain_stalled(&self) {
        let _exec = self.exec.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = Vec::new();
        let mut broken = false;
        loop {
            let next = {
                let mut i = self.lock();
                let Some(front) = i.stalled.front() else { break };
                let needs_recv = front.hdr.op == op::SEND || (front.hdr.op == op::WRITE && front.hdr.flags & flag::IMM != 0);
                if needs_recv && !self.has_recv(&i) {
                    break;
                }
                let next = i.stalled.pop_front().expect("front exists");
                i.stalled_bytes -= next.cost;
                next
            };
            let (ok, evs) = self.execute(None, next.hdr, next.data);
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
    fn respond(&self, status: u32, data: FrameData, payload: u32, defer: bool) {
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
        self.send_frame_now(Frame { hdr: Hdr { op: op::RESPONSE, status: status_u8(status), payload, ..Hdr::default() }, data, last });
        if last {
            self.lock().state = State::Closed;
        }
    }

    /// Records a plain success response without sending it: the reader thread sends pending
    /// ones before it waits for the socket (`flush_acks`), and any frame that goes out first
    /// carries them. Ping-pong traffic thus acknowledges a write with the next request going
    /// back, and a stream of small requests with one ACK per batch. A batch never grows past
    /// ACK_BATCH.
    fn defer_ack(&self) {
        let full = {
            let mut q = self.out.queue.lock().unwrap_or_else(|e| e.into_inner());
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

    fn acks_pending(&self) -> bool {
        self.out.queue.lock().unwrap_or_else(|e| e.into_inner()).acks > 0
    }

    /// Sends the pending acknowledgements, unless another frame already took them.
    fn flush_acks(&self) {
        self.send_frame_now(Frame { hdr: Hdr { op: op::ACK, ..Hdr::default() }, data: FrameData::None, last: false });
    }

    /// Moves a request's data into our memory at `segs`; the last bytes land last (see
    /// `io::split_tail`).
    /// `aliases` gives our own mappings of `segs` when they are in shared files (shm.rs).
    /// `sets`: the key sets that admitted `segs`, leased for the copy (lease.rs); if one was
    /// revoked, nothing is consumed and the answer is `Landing::Revoked`.
    fn land(&self, rx: Option<&mut io::Rx>, data: &Data, segs: &[(u64, usize)], sets: &[Arc<SetLease>], aliases: impl FnOnce() -> Option<Aliases>) -> Result<(), Landing> {
        let via = match (data, &rx) {
            (Data::Socket, Some(rx)) => Via::Socket(rx.fd()),
            _ => Via::Memory,
        };
        let Some(_leases) = self.leases(sets, via) else { return Err(Landing::Revoked) };
        self.land_leased(rx, data, segs, aliases).map_err(|_| Landing::Failed)
    }

    fn land_leased(&self, rx: Option<&mut io::Rx>, data: &Data, segs: &[(u64, usize)], aliases: impl FnOnce() -> Option<Aliases>) -> Result<(), ()> {
        let total: usize = segs.iter().map(|s| s.1).sum();
        let (head, tail) = io::split_tail(segs);
        let pull = |remote: &[(u64, u32)]| {
            let pid = live_pid(&self.lock()).ok_or(())?;
            let remote: Vec<(u64, usize)> = remote.iter().map(|&(a, l)| (a, l as usize)).collect();
            let cut = total.saturating_sub(io::TAIL);
            let (rhead, rtail) = io::split_at(&remote, cut);
            if !head.is_empty() {
                io::pull(pid, &head, &rhead).map_err(|_| ())?;
            }
            io::pull(pid, &tail, &rtail).map_err(|_| ())
        };
        match data {
            Data::Socket => {
                let rx = rx.ok_or(())?;
                if !head.is_empty() {
                    rx.land(&head).map_err(|_| ())?;
                }
                rx.land(&tail).map_err(|_| ())
            }
            Data::Buffer(b) => {
                let cut = total - tail.iter().map(|t| t.1).sum::<usize>();
                io::scatter(&b[..cut.min(b.len())], &head).map_err(|_| ())?;
                io::scatter(&b[cut.min(b.len())..], &tail).map_err(|_| ())
            }
            Data::Remote(remote) => pull(remote),
            Data::Shared(remote, srcs) => {
                // One copy between the peer's file and ours when both are shared; otherwise
                // (or if the peer's file cannot be mapped) cross-memory attach as usual.
                if let Some((_held, dst)) = aliases() {
                    let peer = self.lock().peer.clone().ok_or(())?;
                    let from: Vec<(shm::Source, usize)> = srcs.iter().zip(remote).map(|(s, &(_, l))| (*s, l as usize)).collect();
                    if self.shm_peers.lock().unwrap_or_else(|e| e.into_inner()).copy(&peer, &from, &dst, io::TAIL) {
                        return Ok(());
                    }
                }
                pull(remote)
            }
        }
    }

    /// Our aliases of `segs`, each in the registration of the key (lkey or rkey) that
    /// admitted it, when every one is in a shared file.
    fn aliases(&self, segs: &[(u64, usize)], regions: &[Option<u64>]) -> Option<Aliases> {
        let mut held = Vec::with_capacity(segs.len());
        let mut ptrs = Vec::with_capacity(segs.len());
        for (&(a, l), r) in segs.iter().zip(regions) {
            let b = self.dev.shared((*r)?)?;
            ptrs.push((b.alias(a, l)?, l));
            held.push(b);
        }
        Some((held, ptrs))
    }

    /// Consumes a request's data without using it.
    fn skip(&self, rx: Option<&mut io::Rx>, hdr: &Hdr, data: &Data) -> bool {
        match data {
            Data::Socket => rx.is_some_and(|rx| rx.discard(hdr.payload as usize).is_ok()),
            _ => true,
        }
    }

    /// Executes one peer request; returns whether the connection survives, and the events.
    /// `rx`: the connection, when the request's data may still be on it (the reader thread);
    /// only then are acknowledgements deferred.
    fn execute(&self, mut rx: Option<&mut io::Rx>, hdr: Hdr, data: Data) -> (bool, Vec<Event>) {
        let len = u64::from(hdr.length);
        let lazy = rx.is_some() && hdr.length <= ACK_LAZY_MAX;
        match hdr.op {
            op::WRITE => {
                // A key that is not valid, or is revoked before the data lands, is a remote
                // access error (the data is consumed, not used).
                let landed = match self.check_remote(hdr.rkey, hdr.raddr, len, Access::REMOTE_WRITE) {
                    Some((addr, set)) => {
                        let aliases = || self.aliases(&[(addr, len as usize)], &[self.dev.rkey(hdr.rkey).map(|k| k.region)]);
                        self.land(rx.as_deref_mut(), &data, &[(addr, len as usize)], &[set], aliases)
                    }
                    None => Err(Landing::Revoked),
                };
                match landed {
                    Ok(()) => {}
                    Err(Landing::Failed) => return (false, Vec::new()),
                    Err(Landing::Revoked) => {
                        let ok = self.skip(rx, &hdr, &data);
                        self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                        return (ok, vec![Event::Flush(CmEvent::Broken)]);
                    }
                }
                let mut events = Vec::new();
                if hdr.flags & flag::IMM != 0 {
                    let recv = self.pop_recv();
                    if let Some((wr_id, _)) = recv {
                        events.push(Event::Completion(Completion {
                            wr_id,
                            status: DAT_DTO_SUCCESS,
                            op: WcOp::RecvImm,
                            byte_len: hdr.length,
                            imm: Some(hdr.imm),
                            invalidated: None,
                            solicited: hdr.flags & flag::SOLICITED != 0,
                        }));
                    }
                }
                self.respond(DAT_DTO_SUCCESS, FrameData::None, 0, lazy);
                (true, events)
            }
            op::SEND => {
                let Some((wr_id, sges)) = self.pop_recv() else { return (false, Vec::new()) };
                let capacity: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
                let sets = self.local_sets(&sges, true);
                let mut status = if sets.is_none() {
                    DAT_DTO_ERR_LOCAL_PROTECTION
                } else if capacity < len {
                    DAT_DTO_ERR_LOCAL_LENGTH
                } else {
                    DAT_DTO_SUCCESS
                };
                let mut invalidated = None;
                if status == DAT_DTO_SUCCESS {
                    let mut left = len as usize;
                    let mut segs = Vec::new();
                    let mut keys = Vec::new();
                    for s in &sges {
                        let n = (s.len as usize).min(left);
                        if n > 0 {
                            segs.push((s.addr, n));
                            keys.push(s.lkey);
                        }
                        left -= n;
                    }
                    let aliases = || self.aliases(&segs, &keys.iter().map(|&k| self.dev.lkey(k).map(|s| s.region)).collect::<Vec<_>>());
                    match self.land(rx.as_deref_mut(), &data, &segs, sets.as_deref().unwrap_or_default(), aliases) {
                        Ok(()) => {
                            if hdr.flags & flag::INVALIDATE != 0 && self.dev.invalidate(hdr.rkey, self.pd, self.id) {
                                invalidated = Some(hdr.rkey);
                            }
                        }
                        Err(Landing::Failed) => {
                            // The connection ends; the receive it took completes with it.
                            let c = Completion { wr_id, status: DAT_DTO_ERR_FLUSHED, op: WcOp::Recv, byte_len: 0, imm: None, invalidated: None, solicited: false };
                            return (false, vec![Event::Completion(c)]);
                        }
                        // The receive's memory was revoked (dat_lmr_free) before the data came.
                        Err(Landing::Revoked) => {
                            status = DAT_DTO_ERR_LOCAL_PROTECTION;
                            if !self.skip(rx, &hdr, &data) {
                                return (false, Vec::new());
                            }
                        }
                    }
                } else if !self.skip(rx, &hdr, &data) {
                    return (false, Vec::new());
                }
                let c = Completion {
                    wr_id,
                    status,
                    op: WcOp::Recv,
                    byte_len: if status == DAT_DTO_SUCCESS { hdr.length } else { 0 },
                    imm: (hdr.flags & flag::IMM != 0).then_some(hdr.imm),
                    invalidated,
                    solicited: hdr.flags & flag::SOLICITED != 0,
                };
                // The sender learns of a receive-side failure as a remote error.
                let answer = if status == DAT_DTO_SUCCESS { DAT_DTO_SUCCESS } else { DAT_DTO_ERR_REMOTE_RESPONDER };
                self.respond(answer, FrameData::None, 0, lazy);
                let mut events = vec![Event::Completion(c)];
                if status != DAT_DTO_SUCCESS {
                    events.push(Event::Flush(CmEvent::Broken));
                }
                (true, events)
            }
            op::READ => {
                let Some((addr, set)) = self.check_remote(hdr.rkey, hdr.raddr, len, Access::REMOTE_READ) else {
                    self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                    return (true, vec![Event::Flush(CmEvent::Broken)]);
                };
                match &data {
                    Data::Remote(remote) => {
                        let Some(pid) = live_pid(&self.lock()) else { return (false, Vec::new()) };
                        let Some(leases) = self.leases(&[set], Via::Memory) else {
                            self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                            return (true, vec![Event::Flush(CmEvent::Broken)]);
                        };
                        let remote: Vec<(u64, usize)> = remote.iter().map(|&(a, l)| (a, l as usize)).collect();
                        if io::push(pid, &[(addr, len as usize)], &remote).is_err() {
                            return (false, Vec::new());
                        }
                        drop(leases);
                        // A read is always answered by a response of its own (never an ACK).
                        self.send_frame_now(Frame { hdr: Hdr { op: op::RESPONSE, ..Hdr::default() }, data: FrameData::None, last: false });
                    }
                    _ => self.respond(DAT_DTO_SUCCESS, FrameData::Memory(vec![(addr, len as usize)], vec![set]), hdr.length, false),
                }
                (true, Vec::new())
            }
            op::CMP_SWAP | op::FETCH_ADD => {
                let leased = self.check_remote(hdr.rkey, hdr.raddr, 8, Access::REMOTE_ATOMIC).filter(|(a, _)| a % 8 == 0);
                let Some((addr, _leases)) = leased.and_then(|(a, set)| Some((a, self.leases(&[set], Via::Memory)?))) else {
                    self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                    return (true, vec![Event::Flush(CmEvent::Broken)]);
                };
                let original = {
                    let _atomic = self.dev.atomics.lock().unwrap_or_else(|e| e.into_inner());
                    let Ok(old) = io::read_u64(addr) else { return (false, Vec::new()) };
                    let new = if hdr.op == op::CMP_SWAP { if old == hdr.a { hdr.b } else { old } } else { old.wrapping_add(hdr.a) };
                    if new != old && io::write_u64(addr, new).is_err() {
                        return (false, Vec::new());
                    }
                    old
                };
                self.respond(DAT_DTO_SUCCESS, FrameData::Bytes(original.to_le_bytes().to_vec()), 8, false);
                (true, Vec::new())
            }
            _ => (false, Vec::new()),
        }
    }
}

/// What a request held until a receive comes costs the connection (see STALL_BYTES).
fn stall_cost(hdr: &Hdr, data: &Data) -> usize {
    STALL_OVERHEAD
        + match data {
            Data::Socket => hdr.payload as usize,
            Data::Buffer(b) => b.len(),
            Data::Remote(l) => l.len() * std::mem::size_of::<(u64, u32)>(),
            Data::Shared(l, s) => l.len() * std::mem::size_of::<(u64, u32)>() + s.len() * std::mem::size_of::<shm::Source>(),
        }
}

/// Queues a frame; an ACK right behind another queued ACK joins it, so that acknowledgements
/// a peer makes us owe while it does not read never grow the queue.
fn push_frame(q: &mut OutState, frame: Frame) {
    if frame.hdr.op == op::ACK {
        if let Some(last) = q.frames.back_mut().filter(|l| l.hdr.op == op::ACK && matches!(l.data, FrameData::None) && !l.last) {
            last.hdr.acks = last.hdr.acks.saturating_add(frame.hdr.acks);
            return;
        }
    }
    q.frames.push_back(frame);
}

/// Gives a frame entering the stream the acknowledgements pending before it; false when the
/// frame is an ACK left with nothing to carry (another frame took them).
fn stamp(q: &mut OutState, frame: &mut Frame) -> bool {
    if matches!(frame.data, FrameData::Raw(_)) {
        return true;
    }
    frame.hdr.acks = frame.hdr.acks.saturating_add(q.acks);
    q.acks = 0;
    frame.hdr.op != op::ACK || frame.hdr.acks > 0
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
    let mut tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    tables.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = tables.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Some(t);
    }
    let t = Arc::new(KeyTable::open_peer(file)?);
    tables.push((key, Arc::downgrade(&t)));
    Some(t)
}

fn write_message(stream: &TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
    let hdr = Hdr::message(kind, body.len());
    let mut s = stream;
    s.write_all(&hdr.encode())?;
    s.write_all(body)
}

/// Whether a handshake step failed for want of time (a connect or a read past its timeout).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

/// Reads one handshake message whose body is at most `max` bytes.
pub(super) fn read_message(stream: &TcpStream, max: u32) -> std::io::Result<(Hdr, Vec<u8>)> {
    let mut s = stream;
    let mut h = [0u8; HDR_LEN];
    s.read_exact(&mut h)?;
    let hdr = Hdr::decode(&h);
    if hdr.payload > max {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut body = vec![0u8; hdr.payload as usize];
    s.read_exact(&mut body)?;
    Ok((hdr, body))
}

impl Qp for SoftQp {
    fn connect(&self, addr: libc::sockaddr_storage, port: u16, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
        let ip = super::address::ip_of(&addr).ok_or(DevError::NotSupported)?;
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
            .spawn(move || me.active(SocketAddr::new(ip, port), pdata, timeout))
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
        let segs: Vec<(u64, usize)> = wr.sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
        // Data in shared files (shm.rs) goes as file references: the target copies it in one
        // memcpy, faster than our own process_vm_writev below.
        let carries_data = matches!(wr.op, WrOp::Send | WrOp::SendInv(_) | WrOp::SendImm(_) | WrOp::Write | WrOp::WriteImm(_));
        let local: Option<Vec<(Arc<shm::Backing>, u64, usize)>> = (i.cma() && carries_data && len >= shm::MIN_LEN)
            .then(|| wr.sges.iter().filter(|s| s.len > 0).zip(&keys).map(|(s, k)| Some((self.dev.shared(k.region)?, s.addr, s.len as usize))).collect())
            .flatten();
        let shared: Option<Vec<shm::Source>> = local.as_ref().and_then(|l| l.iter().map(|(b, a, n)| b.source(*a, *n as u64)).collect());
        if wr.op == WrOp::Write && self.write_direct(&i, rkey, raddr, len, &segs, &keys, local.as_deref()).is_some() {
            drop(i);
            let c = Completion { wr_id: wr.wr_id, status: DAT_DTO_SUCCESS, op: WcOp::Write, byte_len: len as u32, imm: None, invalidated: None, solicited: false };
            self.deliver(vec![Event::Completion(c)]);
            return Ok(());
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
        let sets: Vec<Arc<SetLease>> = keys.into_iter().map(|k| k.lease).collect();
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
                    wire::encode_shared(&list32, srcs)
                }
                None => wire::encode_segments(&list32),
            };
            hdr.payload = list.len() as u32;
            FrameData::Bytes(list)
        } else if carries_data {
            hdr.payload = len as u32;
            FrameData::Memory(segs, sets)
        } else {
            FrameData::None
        };
        let keep = if is_read { wr.sges.clone() } else { Vec::new() };
        let reply = match hdr.op {
            op::READ if hdr.flags & flag::CMA == 0 => len as u32,
            op::CMP_SWAP | op::FETCH_ADD => 8,
            _ => 0,
        };
        i.outstanding.push_back(Outstanding { wr_id: wr.wr_id, op: wc_op, sges: keep, len: len as u32, reply, done: None, leases });
        let frame = Frame { hdr, data, last: false };
        if !i.deferred.is_empty() || (is_read && i.outstanding_reads >= i.rd_limit) {
            i.deferred.push_back((frame, is_read));
            return Ok(());
        }
        if is_read {
            i.outstanding_reads += 1;
        }
        drop(i);
        self.send_frame_direct(frame);
        Ok(())
    }

    fn post_recv(&self, wr_id: u64, sges: Vec<Sge>) -> Result<(), DevError> {
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
            i.recvs.push_back((wr_id, sges));
            !i.stalled.is_empty()
        };
        if stalled {
            self.drain_stalled();
        }
        self.wake_room();
        Ok(())
    }

    fn destroy(&self) {
        // Requests whose data the verified peer moves itself end with its response (lease.rs):
        // they are waited for first, as revoking a key set would.
        let deadline = Instant::now() + super::lease::PEER_WAIT;
        {
            let mut i = self.lock();
            while i.state == State::Connected && i.outstanding.iter().any(|o| o.leases.is_some()) && Instant::now() < deadline {
                i = self.wait_room(i, Duration::from_millis(5));
            }
        }
        self.disconnect_now();
        // Whatever the peer did not answer, it will not answer now: those leases go (a
        // connection that ended before may have left some).
        for o in self.lock().outstanding.iter_mut() {
            o.leases = None;
        }
        // Then no copy of this QP runs any more, and none starts.
        self.lease.revoke();
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
        self.disconnect_now();
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

    fn remote(&self) -> Option<(libc::sockaddr_storage, u16)> {
        self.lock().remote
    }

    fn local_port(&self) -> u16 {
        self.lock().local_port
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
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

/// A connection request received by a listener, waiting for accept or reject.
pub struct Pending {
    stream: Mutex<Option<TcpStream>>,
    hello: Hello,
    remote: (libc::sockaddr_storage, u16),
}

// SAFETY: sockaddr_storage is plain data; the stream is behind a mutex.
unsafe impl Send for Pending {}
// SAFETY: as above.
unsafe impl Sync for Pending {}

impl Pending {
    pub fn new(stream: TcpStream, hello: Hello, peer: SocketAddr) -> Pending {
        Pending { stream: Mutex::new(Some(stream)), hello, remote: (super::address::to_storage(peer), peer.port()) }
    }
}

impl PendingConnection for Pending {
    fn private_data(&self) -> &[u8] {
        &self.hello.private_data
    }

    fn remote(&self) -> (libc::sockaddr_storage, u16) {
        self.remote
    }

    fn accept(&self, qp: &Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError> {
        let soft = qp.as_any().downcast_ref::<SoftQp>().ok_or(DevError::NotSupported)?.me();
        let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take().ok_or(DevError::State)?;
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
        if let Some(stream) = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // Only the private data: nothing about us goes to a peer we turn away.
            let answer = Hello { private_data: private_data.to_vec(), ..Hello::default() };
            let _ = write_message(&stream, op::REJECT, &answer.encode());
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
