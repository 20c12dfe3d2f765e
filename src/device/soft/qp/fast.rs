//! The same-host fast path of an RDMA write whose source and target both lie in shared files
//! (shm.rs): one `memcpy` on the posting thread, from our alias of the source into our mapping
//! of the peer's file, no system call, and the completion reported before the post returns.
//!
//! It runs only when nothing the ordinary way is outstanding on the QP (so the write cannot overtake an
//! earlier request) and every check an HCA makes passes first, in this order: our lkey is live
//! (its lease is taken, so `dat_lmr_free` waits for the copy), in our PD, and the source lies
//! within it; the peer's rkey is in its published table and pinned (its revoke waits for the
//! pin), for the peer's PD, unbound or bound to the peer's QP, with REMOTE_WRITE, and the
//! target lies within it; the peer's file is its own descriptor, open for writing, and the
//! range lies within our mapping of it. Anything else, a scatter list of more than one
//! element included, takes the ordinary path (`write_direct`, or a request the target checks).
//!
//! Revocation: the target withdraws a key from its table (the slot's sequence moves) before it
//! waits for the slot's pin count to fall to zero; we pin the slot, then read the sequence
//! again (both sequentially consistent), so either we see the withdrawal and write nothing, or
//! the target sees our pin and its revoke returns only after our copy. Our own source is held
//! by its key set's lease the same way.

use std::sync::{Arc, MutexGuard};

use super::path::{LocalHit, PeerPath};
use super::sendq::Outstanding;
use super::{Event, Inner, SoftQp};
use crate::abi::DAT_DTO_SUCCESS;
use crate::device::soft::keytab::Grant;
use crate::device::soft::{io, shm, KeySet};
use crate::device::{sges_len, Completion, DevError, SendWr, WcOp, WrOp};
use crate::util::sync::MutexExt;

impl SoftQp {
    /// Does an RDMA write of one scatter element directly when both ends are in shared files;
    /// returns its length, to be completed at once. None: take the ordinary path.
    pub(super) fn write_fast(&self, i: &mut Inner, wr: &SendWr) -> Option<u32> {
        let [sge] = wr.sges.as_slice() else { return None };
        let (raddr, rkey) = wr.remote?;
        if wr.op != WrOp::Write || sge.len == 0 || sge.len > self.caps.max_message {
            return None;
        }
        if !direct_allowed(i) || !i.path.has_keys() {
            return None;
        }
        i.path.keep_hit(sge.lkey, || {
            let (set, backing) = self.dev.lkey_shared(sge.lkey)?;
            Some(LocalHit::new(sge.lkey, set, backing.as_ref()))
        })?;
        let path = &i.path;
        let hit = path.hit()?;
        let k = &hit.set;
        let len = u64::from(sge.len);
        if k.pd != self.pd || sge.addr < k.addr || sge.addr.checked_add(len)? > k.addr + k.len {
            return None;
        }
        // Our source stays registered while we copy it (lease.rs); a revoked set fails here.
        let _held = super::super::lease::hold_all(std::slice::from_ref(k))?;
        let backing = hit.backing()?;
        let src = backing.view(sge.addr, sge.len as usize)?;
        let (g, _pin, addr) = path.pin_write(rkey, raddr, len)?;
        self.put_peer_file(path, &g, addr, &[(src, sge.len as usize)]).then_some(sge.len)
    }

    /// Copies `views` into the peer's shared file at `addr` of key `g` (shm.rs); false when the
    /// key's memory is in no shared file or the range is outside our mapping of it.
    pub(super) fn put_peer_file(&self, path: &PeerPath, g: &Grant, addr: u64, views: &[(*const u8, usize)]) -> bool {
        let (Some(file), Some(peer)) = (g.file, path.process()) else { return false };
        let dst = shm::Source { offset: file.offset + (addr - g.addr), ..file };
        self.shm_peers.locked().put(peer, dst, views, io::TAIL)
    }

    /// The direct path of an RDMA write on one host: with nothing else outstanding (so the
    /// write cannot overtake an earlier request), a key the peer published as valid for this
    /// connection, and the peer's memory reachable, we write it ourselves, and say whether
    /// through shared files (else by cross-memory attach). None: send the request the
    /// ordinary way (where the target checks everything).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_direct(
        &self,
        i: &Inner,
        rkey: u32,
        raddr: u64,
        len: u64,
        segs: &[(u64, usize)],
        keys: &[KeySet],
        local: Option<&[(Arc<shm::Backing>, u64, usize)]>,
    ) -> Option<bool> {
        if !direct_allowed(i) {
            return None;
        }
        // Our source memory stays ours while we copy it (lease.rs). No lease on the QP is
        // needed: we hold its lock, which its destruction takes first.
        let _held = super::super::lease::hold_all(keys)?;
        let (g, _pin, addr) = i.path.pin_write(rkey, raddr, len)?;
        if let Some(local) = local {
            // Both ends in shared files (shm.rs): one memcpy from our alias into the peer's
            // file; `local` holds our aliases alive meanwhile.
            let views: Option<Vec<(*const u8, usize)>> = local.iter().map(|(b, a, n)| Some((b.view(*a, *n)?, *n))).collect();
            if views.is_some_and(|v| self.put_peer_file(&i.path, &g, addr, &v)) {
                return Some(true);
            }
        }
        push_tail_last(i.path.pid()?, segs, addr, len)?;
        Some(false)
    }

    /// Places a send of at most SEND_DIRECT_MAX bytes straight into the peer's next receive
    /// (recvring.rs), as an HCA does, so that a peer that polls its buffer sees the data with
    /// no thread of its own involved; returns its length. The peer is told which receive it
    /// filled (qp/rx.rs `on_placed`), and its acknowledgement completes the send. As for a direct write:
    /// nothing else outstanding, our keys live and leased, the peer's receive published in its
    /// ring (pinned: its flush waits for us) with an lkey in its table (pinned: its
    /// `dat_lmr_free` waits for us) of the peer QP's PD with LOCAL_WRITE, covering the data.
    /// None: the ordinary path, where the target checks everything.
    pub(super) fn send_direct(&self, i: &Inner, wr: &SendWr) -> Option<u32> {
        if !matches!(wr.op, WrOp::Send | WrOp::SendImm(_)) || !direct_allowed(i) {
            return None;
        }
        let len = sges_len(&wr.sges);
        if len > u64::from(SEND_DIRECT_MAX.min(self.caps.max_message)) {
            return None;
        }
        let keys = self.local_keys(&wr.sges, false)?;
        let n = i.sq.next_recv();
        let (posted, ring_pin) = i.path.pin_ring(n)?;
        if u64::from(posted.len) < len {
            return None;
        }
        if len > 0 {
            let _held = super::super::lease::hold_all(&keys)?;
            let _pin = i.path.pin_recv(&posted, len)?;
            let segs: Vec<(u64, usize)> = wr.sges.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as usize)).collect();
            push_tail_last(i.path.pid()?, &segs, posted.addr, len)?;
        }
        let imm = if let WrOp::SendImm(imm) = wr.op { Some(imm) } else { None };
        i.path.ring()?.mark_placed(&ring_pin, n, len as u32, imm);
        Some(len as u32)
    }

    /// Completes an RDMA write its poster did itself (`write_fast`, `write_direct`): at once
    /// when nothing is outstanding, else in order, after the placed sends before it.
    pub(super) fn complete_direct(&self, mut i: MutexGuard<'_, Inner>, wr_id: u64, op: WcOp, len: u32) -> Result<(), DevError> {
        if !i.sq.is_empty() {
            i.sq.push(Outstanding::local(wr_id, op, len, Some(DAT_DTO_SUCCESS)));
            drop(i);
            self.complete_ready();
            return Ok(());
        }
        drop(i);
        let c = Completion { wr_id, status: DAT_DTO_SUCCESS, op, byte_len: len, imm: None, invalidated: None, solicited: false };
        self.deliver([Event::Completion(c)]);
        Ok(())
    }
}

/// Sends larger than this go the ordinary way (the target pulls the data itself): a peer's
/// flush or `dat_lmr_free` waits for a placement in progress.
const SEND_DIRECT_MAX: u32 = 64 << 10;

/// Writes `segs` of ours into process `pid` at `addr` (`len` bytes), the last io::TAIL bytes
/// after the rest, for programs that poll the end of a buffer.
fn push_tail_last(pid: u32, segs: &[(u64, usize)], addr: u64, len: u64) -> Option<()> {
    let target = [(addr, len as usize)];
    let (head, tail) = io::split_tail(&target);
    let (lhead, ltail) = io::split_at(segs, len as usize - tail.iter().map(|t| t.1).sum::<usize>());
    if !head.is_empty() {
        io::push(pid, &lhead, &head).ok()?;
    }
    io::push(pid, &ltail, &tail).ok()
}

/// Whether the poster may place data itself: no request outstanding that went the ordinary
/// way (so the data cannot overtake an earlier request; placed sends before it landed
/// already) and the peer on this host.
fn direct_allowed(i: &Inner) -> bool {
    i.sq.quiet() && i.path.cma()
}
