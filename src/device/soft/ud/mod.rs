//! The soft device's unreliable datagram (UD) queue pair, over UDP.
//!
//! Why UDP: a UD QP sends single messages of at most the MTU to any peer it has resolved,
//! without connection, order or delivery guarantee; a UDP socket is exactly that, and the
//! kernel does the rest (routing, the other host's demultiplexing, and dropping what nobody
//! reads when the socket's receive buffer is full, as a fabric drops datagrams a QP has no
//! receive for). So:
//!
//! - each UD QP is one UDP socket bound to the IA's address, port 0: the QP number is its UDP
//!   port, and a random 32-bit Q_Key with a random 64-bit secret (keys.rs) is the capability
//!   a sender must show; a datagram that shows another is dropped and counted, and logged at
//!   most once a second (proof.rs);
//! - a peer is resolved over the TCP listener of its service point (cm.rs): UD_HELLO carries
//!   the requester's QP number and keys (its address comes from the kernel), UD_ACCEPT the
//!   acceptor's, then the connection closes; then each side proves with a datagram from its
//!   QP that it owns the port it named, before the other reports it resolved (proof.rs). The
//!   engine drives the requester's exchange (resolving.rs) and both sides' proofs (the QP's
//!   turns and timers): a resolution costs no thread. An address handle ([`SoftAh`]) is the
//!   peer's address, QP number and keys;
//! - sends gather from registered memory on the caller's thread (lkey, PD, bounds and leases
//!   checked as for RC) into one `sendmsg` behind the 28-byte datagram header of wire.rs, and
//!   complete at once, successfully even when nobody receives (UD is unreliable);
//! - the process's engine (engine.rs) reads each QP's datagrams, its socket registered,
//!   into the QP's buffer of exactly
//!   header + MTU + 1 bytes, so an oversized one is seen, drops every malformed one, every one
//!   with other keys and every one that finds no receive posted (as hardware does), and
//!   lands the rest 40 bytes into a receive, after a synthetic GRH naming the sender ([`grh`]);
//!   the completed length counts the 40 bytes. A receive shorter than that completes
//!   `DAT_DTO_ERR_LOCAL_LENGTH`, and the datagram is consumed.
//!
//! What a peer can make a UD QP hold: nothing per datagram (one buffer per QP, allocated when
//! the QP is made), the socket's kernel receive buffer (at most `net.core.rmem_max` doubled),
//! and the receives the consumer posted.
//!
//! `disconnect` and `destroy` end the resolutions in flight (their connections closed, none
//! reported), unregister the socket and wait for a turn of the engine's under
//! way on the QP to end (unless called on the engine thread, in a completion's handler, whose
//! turn then lands nothing more), flush the posted receives, and
//! report `Disconnected` once; `destroy` also waits for sends in flight on other threads (the
//! QP's lease, lease.rs), so that when it returns no memory of the QP's requests is touched.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::delivery::Delivery;
use super::engine::{self, Handler, Registration};
use super::lease::{self, SetLease, Via};
use super::srq::SoftSrq;
use super::wire::{flag, Dgram, DGRAM_HDR_LEN};
use super::{io, keys, SoftDevice};
use crate::abi::*;
use crate::device::*;
use crate::util::sockaddr;
use crate::util::sync::MutexExt;
use proof::{Proofs, Violations, Waiter};
use resolving::Resolver;

mod cm;
mod proof;
mod resolving;
#[cfg(test)]
mod tests;

pub use cm::UdPending;

/// The largest datagram payload (`DeviceLimits::max_ud_msg`, and `DAT_IB_TRANSPORT_MTU`).
pub const MTU: u32 = 4096;

/// Where a datagram starts in the QP's buffer: its header ends where the GRH area does,
/// so that the payload is already in place behind the GRH, and one copy lands both.
const AT: usize = GRH_LEN as usize - DGRAM_HDR_LEN;

/// The receive buffer asked of the kernel (it grants at most twice `net.core.rmem_max`): room
/// for a burst of datagrams while the engine catches up.
const SOCKET_RCVBUF: libc::c_int = 4 << 20;

/// Datagrams read in one turn of the engine's: then it serves the others, and comes back
/// (a flood on one QP holds no other connection).
const TURN_DATAGRAMS: usize = 256;

/// How long a send waits for room in the socket's send buffer before its datagram is lost.
const SEND_WAIT: Duration = Duration::from_secs(1);

/// The GRH's hop limit (an IPv4 TTL's usual value).
const HOP_LIMIT: u8 = 64;

/// The GRH's next header: the InfiniBand base transport header.
const NEXT_HEADER_BTH: u8 = 0x1B;

/// An address handle of the soft device: where a peer UD QP is (proven, proof.rs), and its
/// keys.
pub struct SoftAh {
    /// The peer's IP address and UDP port (its QP number).
    pub dest: SocketAddr,
    pub qkey: u32,
    secret: u64,
}

impl std::fmt::Debug for SoftAh {
    // Not the secret: a debug line must not hand out the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SoftAh {{ dest: {}, qkey: {:#x} }}", self.dest, self.qkey)
    }
}

impl AddressHandle for SoftAh {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The synthetic global routing header a receive starts with: IPv6's layout, as on
/// InfiniBand and RoCE. Version 6, traffic class and flow label 0; payload length: the
/// payload's bytes (those after the GRH in the receive); next header 0x1B (IB BTH); hop limit
/// 64; the source GID is the sender's address (an IPv4 address IPv4-mapped, ::ffff:a.b.c.d,
/// as RoCEv2 writes it), the destination GID ours. Network byte order.
pub fn grh(src: IpAddr, dst: IpAddr, payload: u32) -> [u8; GRH_LEN as usize] {
    let gid = |ip: IpAddr| match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    let mut g = [0u8; GRH_LEN as usize];
    g[0..4].copy_from_slice(&(6u32 << 28).to_be_bytes());
    g[4..6].copy_from_slice(&(payload.min(u32::from(u16::MAX)) as u16).to_be_bytes());
    g[6] = NEXT_HEADER_BTH;
    g[7] = HOP_LIMIT;
    g[8..24].copy_from_slice(&gid(src));
    g[24..40].copy_from_slice(&gid(dst));
    g
}

enum Event {
    Completion(Completion),
    Cm(CmEvent),
}

struct Inner {
    closed: bool,
    recvs: VecDeque<(u64, Sges)>,
}

pub struct SoftUdQp {
    this: Weak<SoftUdQp>,
    dev: Arc<SoftDevice>,
    pd: u32,
    caps: QpCaps,
    srq: Option<Arc<SoftSrq>>,
    events: Arc<dyn QpEvents>,
    /// The socket's registration with the engine, until `disconnect` (or the drop): dropped
    /// before the socket is closed. A leaf: only the engine's timers under it.
    reg: Mutex<Option<Registration>>,
    socket: UdpSocket,
    /// Our address: the IA's, and the QP number as its port.
    local: SocketAddr,
    qkey: u32,
    /// The rest of the key a datagram must show (wire.rs, `Dgram`).
    secret: u64,
    /// The peers' proofs this QP waits for.
    proofs: Mutex<Proofs>,
    /// The resolutions whose TCP exchange runs (resolving.rs), ended by `disconnect`. A leaf.
    resolving: Mutex<Vec<Arc<Resolver>>>,
    violations: Violations,
    /// `Inner::closed`, for the engine's turn to look at without the lock.
    closed: AtomicBool,
    /// The datagram buffer, held by the engine for a turn of the QP (outermost; `disconnect`
    /// takes it to wait for a turn under way).
    rx: Mutex<Vec<u8>>,
    inner: Mutex<Inner>,
    delivery: Delivery<Event>,
    /// Held by every send while it reads memory; revoked by `destroy`.
    lease: Arc<SetLease>,
}

impl SoftUdQp {
    pub fn new(
        dev: Arc<SoftDevice>,
        pd: u32,
        caps: QpCaps,
        srq: Option<Arc<SoftSrq>>,
        events: Arc<dyn QpEvents>,
    ) -> Result<Arc<SoftUdQp>, DevError> {
        let mut bind = dev.address();
        bind.set_port(0);
        let socket = UdpSocket::bind(bind).map_err(|_| DevError::NoResources)?;
        socket.set_nonblocking(true).map_err(|_| DevError::NoResources)?;
        // SAFETY: setsockopt reads an int from a live local of that size.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &SOCKET_RCVBUF as *const libc::c_int as *const libc::c_void,
                core::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let local = socket.local_addr().map_err(|_| DevError::NoResources)?;
        let engine = engine::engine().ok_or(DevError::NoResources)?;
        let qkey = loop {
            let k = keys::random_u32();
            if k != 0 {
                break k;
            }
        };
        let secret = u64::from(keys::random_u32()) << 32 | u64::from(keys::random_u32());
        let qp = Arc::new_cyclic(|this| SoftUdQp {
            this: this.clone(),
            dev,
            pd,
            caps,
            srq,
            events,
            reg: Mutex::new(None),
            socket,
            local,
            qkey,
            secret,
            proofs: Mutex::default(),
            resolving: Mutex::default(),
            violations: Violations::default(),
            closed: AtomicBool::new(false),
            rx: Mutex::new(vec![0u8; AT + DGRAM_HDR_LEN + MTU as usize + 1]),
            inner: Mutex::new(Inner { closed: false, recvs: VecDeque::new() }),
            delivery: Delivery::default(),
            lease: Arc::default(),
        });
        let handler: Weak<dyn Handler> = qp.this.clone();
        let reg = engine.register(qp.socket.as_raw_fd(), engine::IN, handler).map_err(|_| DevError::NoResources)?;
        *qp.reg.locked() = Some(reg);
        Ok(qp)
    }

    /// The IA's address, which the QP's socket is bound to.
    pub fn local_ip(&self) -> IpAddr {
        self.local.ip()
    }

    /// The QP number: our UDP port.
    pub fn qpn(&self) -> u32 {
        u32::from(self.local.port())
    }

    pub fn qkey(&self) -> u32 {
        self.qkey
    }

    pub fn secret(&self) -> u64 {
        self.secret
    }

    /// Datagrams dropped so far for wrong keys (or a proof nobody waited for).
    #[cfg(test)]
    pub fn key_violations(&self) -> u64 {
        self.violations.total()
    }

    /// Waits for a proof (proof.rs) until `deadline`; false when closed or too many wait.
    fn expect_proof(&self, from: SocketAddr, token: u128, deadline: Instant, waiter: Waiter) -> bool {
        let wakes = waiter.wakes(deadline);
        let added = !self.is_closed() && self.proofs.locked().expect(from, token, deadline, waiter);
        if added {
            // The engine serves each wait's deadline, and a requester's resends (`tick_proofs`).
            if let Some(reg) = &*self.reg.locked() {
                for at in wakes {
                    reg.timer(at);
                }
            }
        }
        added
    }

    /// Sends our proof datagram carrying `token` to `to` (no wait: a lost one is sent again).
    fn send_proof(&self, to: SocketAddr, token: u128) {
        let _ = self.socket.send_to(&Dgram::proof(self.qpn(), token), to);
    }

    /// A proof datagram carrying `token` came from `from` (the kernel's word).
    fn on_proof(&self, from: SocketAddr, token: u128) {
        let proven = self.proofs.locked().on_proof(from, token);
        let Some(p) = proven else {
            self.violations.note(self.qpn(), from, "a proof nobody waits for");
            return;
        };
        // Proven: the port is the sender's, and may be answered.
        if let Some(answer) = p.answer {
            self.send_proof(from, answer);
        }
        if let Some(ev) = p.event {
            self.report(ev);
        }
    }

    /// Ends the waits that are past their deadline, and sends the requesters' proofs that are
    /// due (proof.rs).
    fn tick_proofs(&self) {
        let due = self.proofs.locked().tick(Instant::now());
        for (to, token) in due.proofs {
            self.send_proof(to, token);
        }
        for ev in due.events {
            self.report(ev);
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Reports a connection event (an address resolution's outcome) while the QP is open.
    fn report(&self, ev: CmEvent) {
        if !self.is_closed() {
            self.deliver(vec![Event::Cm(ev)]);
        }
    }

    /// Hands events to the consumer side in order (delivery.rs).
    fn deliver(&self, events: Vec<Event>) {
        self.delivery.deliver(events, |e| match e {
            Event::Completion(c) => self.events.completion(c),
            Event::Cm(e) => self.events.cm(e),
        });
    }

    fn complete(&self, wr_id: u64, op: WcOp, status: u32, byte_len: u32, solicited: bool) {
        let byte_len = if status == DAT_DTO_SUCCESS { byte_len } else { 0 };
        let c = Completion { wr_id, status, op, byte_len, imm: None, invalidated: None, solicited };
        self.deliver(vec![Event::Completion(c)]);
    }

    fn pop_recv(&self) -> Option<(u64, Sges)> {
        match &self.srq {
            Some(srq) => srq.pop(),
            None => self.inner.locked().recvs.pop_front(),
        }
    }

    /// A datagram the engine read: `buf[AT..AT + n]`, from `from`. The first AT bytes
    /// of `buf` are free for the GRH.
    fn on_datagram(&self, buf: &mut [u8], n: usize, from: SocketAddr) {
        let datagram = &buf[AT..AT + n];
        let Some(d) = Dgram::parse(datagram, MTU) else { return };
        if d.src_qpn != u32::from(from.port()) {
            return;
        }
        if d.flags == flag::PROOF {
            if let Some(token) = Dgram::token(datagram) {
                self.on_proof(from, token);
            }
            return;
        }
        if !d.keys_are(self.qkey, self.secret) {
            self.violations.note(self.qpn(), from, if d.qkey == self.qkey { "the right Q_Key, a wrong secret" } else { "a wrong Q_Key" });
            return;
        }
        // No receive: dropped, as on a fabric.
        let Some((wr_id, sges)) = self.pop_recv() else { return };
        let len = GRH_LEN as usize + d.length as usize;
        let status = self.land(&mut buf[..len], from.ip(), d.length, &sges);
        self.complete(wr_id, WcOp::Recv, status, len as u32, d.flags & flag::SOLICITED != 0);
    }

    /// Writes the GRH into `buf`'s first 40 bytes and lands all of `buf` in the receive
    /// `sges`; returns the completion status.
    fn land(&self, buf: &mut [u8], src: IpAddr, payload: u32, sges: &[Sge]) -> u32 {
        let Some(keys) = self.dev.local_keys(self.pd, sges, true) else { return DAT_DTO_ERR_LOCAL_PROTECTION };
        let capacity = sges_len(sges);
        if capacity < buf.len() as u64 {
            return DAT_DTO_ERR_LOCAL_LENGTH;
        }
        buf[..GRH_LEN as usize].copy_from_slice(&grh(src, self.local.ip(), payload));
        let all: Vec<(u64, usize)> = sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
        let (segs, _) = io::split_at(&all, buf.len());
        let sets: Vec<Arc<SetLease>> = keys.into_iter().map(|k| k.lease).collect();
        // The receive's memory stays registered while it is written (dat_lmr_free waits).
        let Some(_leases) = lease::take_all(&self.lease, &sets, Via::Memory) else {
            return if self.is_closed() { DAT_DTO_ERR_FLUSHED } else { DAT_DTO_ERR_LOCAL_PROTECTION };
        };
        match io::scatter(buf, &segs) {
            Ok(()) => DAT_DTO_SUCCESS,
            Err(_) => DAT_DTO_ERR_LOCAL_PROTECTION,
        }
    }

    /// One datagram to `dest`: our header, then `segs` of registered memory, in one sendmsg.
    /// Waits up to SEND_WAIT for room in the socket's send buffer.
    fn send_datagram(&self, dest: SocketAddr, hdr: &[u8; DGRAM_HDR_LEN], segs: &[(u64, usize)]) -> std::io::Result<()> {
        let mut iov: Vec<libc::iovec> = std::iter::once((hdr.as_ptr() as u64, hdr.len()))
            .chain(segs.iter().copied())
            .map(|(a, l)| libc::iovec { iov_base: a as *mut libc::c_void, iov_len: l })
            .collect();
        let name = sockaddr::to_c(dest);
        let name_len = match dest {
            SocketAddr::V4(_) => core::mem::size_of::<libc::sockaddr_in>(),
            SocketAddr::V6(_) => core::mem::size_of::<libc::sockaddr_in6>(),
        };
        // SAFETY: an all-zero msghdr is valid; we then point it at our address and iovecs.
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        msg.msg_name = &name as *const libc::sockaddr_storage as *mut libc::c_void;
        msg.msg_namelen = name_len as libc::socklen_t;
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len();
        let fd = self.socket.as_raw_fd();
        let deadline = Instant::now() + SEND_WAIT;
        loop {
            // SAFETY: the iovecs name our header and registered memory the caller checked and
            // leased; the kernel only reads them and reports a bad address as EFAULT.
            // MSG_NOSIGNAL: no SIGPIPE, MSG_DONTWAIT: the wait is ours (below).
            let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
            if n >= 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            let left = deadline.saturating_duration_since(Instant::now());
            match e.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock if !left.is_zero() => {
                    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                    // SAFETY: one live pollfd.
                    unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 1000) as libc::c_int) };
                }
                _ => return Err(e),
            }
        }
    }

    /// No datagram is landed after this returns (`closed` is set): unregisters the socket and
    /// waits for a turn of the engine's under way on the QP, unless this is the engine thread
    /// (a completion's handler disconnecting): no other turn runs then, and the one this call
    /// may be inside lands nothing more once its handler returns.
    fn stop_receiving(&self) {
        let reg = self.reg.locked().take();
        if !engine::on_engine() {
            drop(self.rx.locked());
        }
        drop(reg);
    }
}

impl Drop for SoftUdQp {
    fn drop(&mut self) {
        // Unregistered before the socket closes (a closed number may be reused).
        drop(self.reg.locked().take());
    }
}

impl Handler for SoftUdQp {
    /// A turn of the engine's: ends the proofs' waits past their deadlines, and hands the
    /// datagrams that came to the QP while it is open, at most TURN_DATAGRAMS (then the
    /// engine comes back). The buffer is the only memory it uses, made with the QP.
    fn ready(&self, _events: u32) {
        let mut buf = self.rx.locked();
        if self.is_closed() {
            return;
        }
        self.tick_proofs();
        let mut errors = 0;
        for _ in 0..TURN_DATAGRAMS {
            if self.is_closed() {
                return;
            }
            match self.socket.recv_from(&mut buf[AT..]) {
                Ok((n, from)) => self.on_datagram(&mut buf, n, from),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                // An error the kernel queued is consumed by reading it; a socket that keeps
                // failing is left until its next edge.
                Err(_) if errors < 16 => errors += 1,
                Err(_) => return,
            }
        }
        // More may be there, and no new edge comes for them: the engine comes back.
        if let Some(reg) = &*self.reg.locked() {
            reg.kick();
        }
    }
}

impl Qp for SoftUdQp {
    fn connect(&self, addr: SocketAddr, conn_qual: u64, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
        if self.is_closed() {
            return Err(DevError::State);
        }
        resolving::resolve(self, addr, conn_qual, private_data, timeout);
        Ok(())
    }

    fn post_send(&self, wr: &SendWr) -> Result<(), DevError> {
        let ah = wr.ah.as_ref().ok_or(DevError::NotSupported)?;
        let ah = ah.as_any().downcast_ref::<SoftAh>().ok_or(DevError::NotSupported)?;
        if wr.op != WrOp::Send {
            return Err(DevError::NotSupported);
        }
        if self.is_closed() {
            return Err(DevError::State);
        }
        if wr.sges.len() > self.caps.max_send_sge as usize {
            return Err(DevError::NoResources);
        }
        if !keys_live(&wr.sges, |k| self.events.key_live(k)) {
            return Err(DevError::Fault);
        }
        let len = sges_len(&wr.sges);
        let status = if len > u64::from(self.caps.max_message.min(MTU)) {
            DAT_DTO_ERR_LOCAL_LENGTH
        } else if let Some(keys) = self.dev.local_keys(self.pd, &wr.sges, false) {
            let sets: Vec<Arc<SetLease>> = keys.into_iter().map(|k| k.lease).collect();
            match lease::take_all(&self.lease, &sets, Via::Memory) {
                None if self.is_closed() => DAT_DTO_ERR_FLUSHED,
                None => DAT_DTO_ERR_LOCAL_PROTECTION,
                Some(_leases) => {
                    let flags = if wr.solicited { flag::SOLICITED } else { 0 };
                    let hdr = Dgram { qkey: ah.qkey, secret: ah.secret, src_qpn: self.qpn(), flags, length: len as u32 }.encode();
                    let segs: Vec<(u64, usize)> = wr.sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
                    match self.send_datagram(ah.dest, &hdr, &segs) {
                        Err(e) if e.raw_os_error() == Some(libc::EFAULT) => DAT_DTO_ERR_LOCAL_PROTECTION,
                        // Sent, or lost on the way (no route, no room): UD does not know.
                        _ => DAT_DTO_SUCCESS,
                    }
                }
            }
        } else {
            DAT_DTO_ERR_LOCAL_PROTECTION
        };
        self.complete(wr.wr_id, WcOp::Send, status, len as u32, false);
        Ok(())
    }

    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError> {
        let mut i = self.inner.locked();
        if i.closed {
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
        Ok(())
    }

    fn disconnect(&self, _graceful: bool) {
        // Sends complete as they are posted: graceful and abrupt are the same.
        let first = {
            let mut i = self.inner.locked();
            let first = !i.closed;
            i.closed = true;
            self.closed.store(true, Ordering::SeqCst);
            first
        };
        self.stop_receiving();
        // The resolutions end at once, their sockets closed; none reports.
        let resolving = std::mem::take(&mut *self.resolving.locked());
        for r in resolving {
            r.end();
        }
        self.proofs.locked().clear();
        if first {
            let flushed: Vec<(u64, Sges)> = self.inner.locked().recvs.drain(..).collect();
            let mut events: Vec<Event> =
                flushed.into_iter().map(|(wr_id, _)| Event::Completion(Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, WcOp::Recv))).collect();
            events.push(Event::Cm(CmEvent::Disconnected));
            self.deliver(events);
        }
    }

    fn destroy(&self) {
        self.disconnect(false);
        // Sends in flight on other threads finish their copies first; none starts after.
        self.lease.revoke();
    }

    fn bind_mw(&self, _wr_id: u64, _mw: &Mw, _mr: &Mr, _addr: u64, _len: u64, _access: Access, _zero_based: bool) -> Result<u32, DevError> {
        // Memory windows serve RDMA, which UD does not have.
        Err(DevError::NotSupported)
    }

    fn unbind_mw(&self, wr_id: u64, mw: &Mw) {
        self.dev.unbind_mw(mw);
        let status = if self.is_closed() { DAT_DTO_ERR_FLUSHED } else { DAT_DTO_SUCCESS };
        self.complete(wr_id, WcOp::Bind, status, 0, false);
    }

    fn remote(&self) -> Option<SocketAddr> {
        None
    }

    fn local_port(&self) -> u16 {
        self.local.port()
    }

    fn path(&self) -> &'static str {
        "udp"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
