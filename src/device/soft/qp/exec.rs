//! A peer's request executed against our memory: its keys checked, its memory leased
//! (lease.rs), its data landed from the socket, a buffer, or the peer's memory.

use super::*;
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

    /// Consumes a request's data without using it.
    pub(super) fn skip(&self, rx: Option<&mut io::Rx>, hdr: &Hdr, data: &Data) -> bool {
        match data {
            Data::Socket => rx.is_some_and(|rx| rx.discard(hdr.payload as usize).is_ok()),
            _ => true,
        }
    }

    /// Executes one peer request; returns whether the connection survives, and the events.
    /// `rx`: the connection, when the request's data may still be on it (the reader thread);
    /// only then are acknowledgements deferred. `recv`: the receive taken for a request that
    /// consumes one (a send, a write with immediate data), or given back if it fails first.
    pub(super) fn execute(&self, mut rx: Option<&mut io::Rx>, hdr: Hdr, data: Data, recv: Option<Recv>) -> (bool, Vec<Event>) {
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
                // The receive of a write with immediate data is consumed only once the data
                // landed; a failure gives it back.
                match landed {
                    Ok(()) => {}
                    Err(Landing::Failed) => return (false, recv.map(|r| self.return_recv(r)).into_iter().collect()),
                    Err(Landing::Revoked) => {
                        let ok = self.skip(rx, &hdr, &data);
                        self.respond(DAT_DTO_ERR_REMOTE_ACCESS, FrameData::None, 0, false);
                        let returned = recv.map(|r| self.return_recv(r));
                        return (ok, returned.into_iter().chain([Event::Flush(CmEvent::Broken)]).collect());
                    }
                }
                let mut events = Vec::new();
                if hdr.flags & flag::IMM != 0 {
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
                // The caller took one (on_request, drain_stalled).
                let Some((wr_id, sges)) = recv else { return (false, Vec::new()) };
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
                            let c = Completion::bare(wr_id, DAT_DTO_ERR_FLUSHED, WcOp::Recv);
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
