//! A peer's request executed against our memory: its keys checked, its memory leased
//! (lease.rs), its data landed from the socket, a buffer, or the peer's memory. A WRITE's or
//! SEND's data that is still coming lands in pieces, from the engine (rx.rs): its `target`
//! is decided first, its `finish_exec` runs once the data is in.

use std::sync::Arc;

use super::recvq::capacity;
use super::{Aliases, Data, Event, Frame, FrameData, Landing, Recv, SoftQp, Target, ACK_LAZY_MAX};
use crate::abi::{
    DAT_DTO_ERR_FLUSHED, DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_ERR_LOCAL_PROTECTION, DAT_DTO_ERR_REMOTE_ACCESS, DAT_DTO_ERR_REMOTE_RESPONDER,
    DAT_DTO_SUCCESS,
};
use crate::device::soft::lease::{SetLease, Via};
use crate::device::soft::wire::{flag, op, Hdr};
use crate::device::soft::{io, shm};
use crate::device::{Access, CmEvent, Completion, WcOp};
use crate::util::sync::MutexExt;

impl SoftQp {
    /// Moves a request's data into our memory at `segs`; the last bytes land last (see
    /// `io::split_tail`).
    /// `aliases` gives our own mappings of `segs` when they are in shared files (shm.rs).
    /// `sets`: the key sets that admitted `segs`, leased for the copy (lease.rs); if one was
    /// revoked, nothing is consumed and the answer is `Landing::Revoked`.
    pub(super) fn land(
        &self,
        rx: Option<&mut io::Rx>,
        data: &Data,
        segs: &[(u64, usize)],
        sets: &[Arc<SetLease>],
        aliases: impl FnOnce() -> Option<Aliases>,
    ) -> Result<(), Landing> {
        let via = match (data, &rx) {
            (Data::Socket, Some(rx)) => Via::Socket(rx.fd()),
            _ => Via::Memory,
        };
        let Some(_leases) = self.leases(sets, via) else { return Err(Landing::Revoked) };
        self.land_leased(rx, data, segs, aliases).map_err(|_| Landing::Failed)
    }

    pub(super) fn land_leased(
        &self,
        rx: Option<&mut io::Rx>,
        data: &Data,
        segs: &[(u64, usize)],
        aliases: impl FnOnce() -> Option<Aliases>,
    ) -> Result<(), ()> {
        let total: usize = segs.iter().map(|s| s.1).sum();
        let (head, tail) = io::split_tail(segs);
        let pull = |remote: &[(u64, u32)]| {
            let pid = self.lock().path.pid().ok_or(())?;
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
                    let peer = self.lock().path.process().cloned().ok_or(())?;
                    let from: Vec<(shm::Source, usize)> = srcs.iter().zip(remote).map(|(s, &(_, l))| (*s, l as usize)).collect();
                    if self.shm_peers.locked().copy(&peer, &from, &dst, io::TAIL) {
                        return Ok(());
                    }
                }
                pull(remote)
            }
        }
    }

    /// Our aliases of `segs`, each in the registration of the key (lkey or rkey) that
    /// admitted it, when every one is in a shared file.
    pub(super) fn aliases(&self, segs: &[(u64, usize)], regions: &[Option<u64>]) -> Option<Aliases> {
        let mut held = Vec::with_capacity(segs.len());
        let mut ptrs = Vec::with_capacity(segs.len());
        for (&(a, l), r) in segs.iter().zip(regions) {
            let b = self.dev.shared((*r)?)?;
            ptrs.push((b.alias(a, l)?, l));
            held.push(b);
        }
        Some((held, ptrs))
    }

    /// Where a WRITE's or SEND's data goes, decided before any of it is consumed: the
    /// remote key checked (WRITE), or the receive's keys and length (SEND). None: a SEND
    /// without a receive (the caller takes one).
    pub(super) fn target(&self, hdr: &Hdr, recv: Option<Recv>) -> Option<Target> {
        let len = u64::from(hdr.length);
        if hdr.op == op::WRITE {
            return Some(match self.check_remote(hdr.rkey, hdr.raddr, len, Access::REMOTE_WRITE) {
                Some((addr, set)) => Target {
                    go: true,
                    segs: vec![(addr, len as usize)],
                    sets: vec![set],
                    regions: vec![self.dev.rkey(hdr.rkey).map(|k| k.region)],
                    recv,
                    status: DAT_DTO_SUCCESS,
                },
                None => Target { go: false, segs: Vec::new(), sets: Vec::new(), regions: Vec::new(), recv, status: DAT_DTO_SUCCESS },
            });
        }
        let (_, sges) = recv.as_ref()?;
        let capacity = capacity(sges);
        let sets = self.local_sets(sges, true);
        let status = if sets.is_none() {
            DAT_DTO_ERR_LOCAL_PROTECTION
        } else if capacity < len {
            DAT_DTO_ERR_LOCAL_LENGTH
        } else {
            DAT_DTO_SUCCESS
        };
        let (mut segs, mut regions) = (Vec::new(), Vec::new());
        if status == DAT_DTO_SUCCESS {
            let mut left = len as usize;
            for s in sges.iter() {
                let n = (s.len as usize).min(left);
                if n > 0 {
                    segs.push((s.addr, n));
                    regions.push(self.dev.lkey(s.lkey).map(|k| k.region));
                }
                left -= n;
            }
        }
        Some(Target { go: status == DAT_DTO_SUCCESS, segs, sets: sets.unwrap_or_default(), regions, recv, status })
    }

    /// Completes a WRITE or SEND once its data landed, or was consumed unused (`outcome`
    /// Revoked: a key refused or revoked on the way), or the connection failed under it;
    /// returns whether the connection survives, and the events.
    pub(super) fn finish_exec(&self, hdr: Hdr, t: Target, outcome: Result<(), Landing>, lazy: bool) -> (bool, Vec<Event>) {
        let recv = t.recv;
        if hdr.op == op::WRITE {
            // A key that is not valid, or is revoked before the data lands, is a remote access
            // error. The receive of a write with immediate data is consumed only once the data
            // landed; a failure gives it back.
            return match outcome {
                Err(Landing::Failed) => (false, recv.map(|r| self.return_recv(r)).into_iter().collect()),
                Err(Landing::Revoked) => {
                    self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                    let returned = recv.map(|r| self.return_recv(r));
                    (true, returned.into_iter().chain([Event::Flush(CmEvent::Broken)]).collect())
                }
                Ok(()) => {
                    let mut events = Vec::new();
                    if let (true, Some((wr_id, _))) = (hdr.flags & flag::IMM != 0, recv) {
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
                    self.respond(DAT_DTO_SUCCESS, FrameData::None, 0, lazy);
                    (true, events)
                }
            };
        }
        let Some((wr_id, _)) = recv else { return (false, Vec::new()) };
        let mut status = t.status;
        let mut invalidated = None;
        match outcome {
            // The connection ends; the receive it took completes with it.
            Err(Landing::Failed) => return (false, vec![Event::Completion(Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, WcOp::Recv))]),
            // The receive's memory was revoked (dat_lmr_free) before the data came.
            Err(Landing::Revoked) if t.go => status = DAT_DTO_ERR_LOCAL_PROTECTION,
            Err(Landing::Revoked) => {}
            Ok(()) => {
                if hdr.flags & flag::INVALIDATE != 0 && self.dev.invalidate(hdr.rkey, self.pd, self.id) {
                    invalidated = Some(hdr.rkey);
                }
            }
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

    /// Consumes a request's data without using it.
    pub(super) fn skip(&self, rx: Option<&mut io::Rx>, hdr: &Hdr, data: &Data) -> bool {
        match data {
            Data::Socket => rx.is_some_and(|rx| rx.discard(hdr.payload as usize).is_ok()),
            _ => true,
        }
    }

    /// Executes one peer request; returns whether the connection survives, and the events.
    /// `rx`: the connection, when the request's data is on it (buffered, reader.rs);
    /// only then are acknowledgements deferred. `recv`: the receive taken for a request that
    /// consumes one (a send, a write with immediate data), or given back if it fails first.
    pub(super) fn execute(&self, mut rx: Option<&mut io::Rx>, hdr: Hdr, data: Data, recv: Option<Recv>) -> (bool, Vec<Event>) {
        let len = u64::from(hdr.length);
        let lazy = rx.is_some() && hdr.length <= ACK_LAZY_MAX;
        match hdr.op {
            op::WRITE | op::SEND => {
                let Some(t) = self.target(&hdr, recv) else { return (false, Vec::new()) };
                let mut outcome = if t.go {
                    self.land(rx.as_deref_mut(), &data, &t.segs, &t.sets, || self.aliases(&t.segs, &t.regions))
                } else {
                    Err(Landing::Revoked)
                };
                if matches!(outcome, Err(Landing::Revoked)) && !self.skip(rx, &hdr, &data) {
                    outcome = Err(Landing::Failed);
                }
                self.finish_exec(hdr, t, outcome, lazy)
            }
            op::READ => {
                let Some((addr, set)) = self.check_remote(hdr.rkey, hdr.raddr, len, Access::REMOTE_READ) else {
                    self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                    return (true, vec![Event::Flush(CmEvent::Broken)]);
                };
                match &data {
                    Data::Remote(remote) => {
                        let Some(pid) = self.lock().path.pid() else { return (false, Vec::new()) };
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
                    _ => self.respond(
                        DAT_DTO_SUCCESS,
                        FrameData::Memory(smallvec::smallvec![(addr, len as usize)], smallvec::smallvec![set]),
                        hdr.length,
                        false,
                    ),
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
                    let _atomic = self.dev.atomics.locked();
                    let Ok(old) = io::read_u64(addr) else { return (false, Vec::new()) };
                    let new = if hdr.op == op::CMP_SWAP {
                        if old == hdr.a {
                            hdr.b
                        } else {
                            old
                        }
                    } else {
                        old.wrapping_add(hdr.a)
                    };
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
