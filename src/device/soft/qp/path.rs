//! A soft QP's path to its peer's memory on this host: the verified peer process (cross-memory
//! attach), its published key table and receive ring, and the local key set the fast path
//! used last.
//!
//! A path is made whole for each connection (`PeerPath::new`) from what the kernel confirmed
//! at the rendezvous (peer.rs), and only when both sides agreed it; until then, and over TCP,
//! it is empty and every question here answers no. Nothing the peer wrote in its table is
//! believed without the checks below (PD, window binding, privilege, bounds), and whatever is
//! used is pinned: the peer's revoke waits for the pin.

use std::sync::{Arc, Mutex, Weak};

use crate::device::soft::keytab::{Grant, KeyTable, Pin};
use crate::device::soft::peer::PeerProcess;
use crate::device::soft::recvring::{PeerRing, Posted, RingPin};
use crate::device::soft::rendezvous::Claims;
use crate::device::soft::{shm, KeySet};
use crate::device::Access;
use crate::util::sync::MutexExt;

/// The local key set the fast path used last on this QP, and its shared file: looked up in
/// the device's tables once, then reused while its lease is not revoked (a freed LMR's set is
/// revoked before `dat_lmr_free` returns; the file is held weakly, so a freed registration's
/// mapping is not kept alive by the QP). A key whose memory is in no shared file is kept too
/// (`backing` None), so that posts from heap memory do not look it up twice: keys are not
/// reused (keys.rs), so the answer cannot change.
pub(super) struct LocalHit {
    lkey: u32,
    pub(super) set: KeySet,
    backing: Option<Weak<shm::Backing>>,
}

impl LocalHit {
    pub(super) fn new(lkey: u32, set: KeySet, backing: Option<&Arc<shm::Backing>>) -> LocalHit {
        LocalHit { lkey, set, backing: backing.map(Arc::downgrade) }
    }

    /// Its shared file, while the registration lives.
    pub(super) fn backing(&self) -> Option<Arc<shm::Backing>> {
        self.backing.as_ref()?.upgrade()
    }
}

#[derive(Default)]
pub(super) struct PeerPath {
    /// The peer process, when the kernel confirmed who it is, each side reaches the other's
    /// memory, and both sides agreed the path.
    peer: Option<Arc<PeerProcess>>,
    /// The peer's published keys, PD and QP (direct writes and placed sends).
    keys: Option<Arc<KeyTable>>,
    pd: u32,
    qp: u64,
    /// The peer's receive ring (placed sends).
    ring: Option<PeerRing>,
    local_hit: Option<LocalHit>,
}

impl PeerPath {
    /// The path to the verified peer when `agreed`, else an empty one (TCP).
    pub(super) fn new(verified: Option<(PeerProcess, Claims)>, agreed: bool) -> PeerPath {
        let Some((peer, claims)) = verified.filter(|_| agreed) else { return PeerPath::default() };
        let keys = (claims.keytab_fd != 0).then(|| peer_table(&peer, claims.keytab_fd)).flatten();
        let ring = keys.clone().and_then(|t| PeerRing::new(t, claims.ring, claims.ring_gen));
        PeerPath { peer: Some(Arc::new(peer)), keys, pd: claims.pd, qp: claims.qp, ring, local_hit: None }
    }

    /// Both sides agreed the cross-memory path: we may send requests whose scatter lists name
    /// our memory, and the peer's such requests are served. A request flagged CMA or SHM
    /// without it breaks the connection.
    pub(super) fn cma(&self) -> bool {
        self.peer.is_some()
    }

    /// The peer process, for a copy.
    pub(super) fn process(&self) -> Option<&Arc<PeerProcess>> {
        self.peer.as_ref()
    }

    /// The verified peer's pid for one copy; None when there is no verified peer or it has
    /// exited (peer.rs).
    pub(super) fn pid(&self) -> Option<u32> {
        self.peer.as_ref()?.pid()
    }

    pub(super) fn has_keys(&self) -> bool {
        self.keys.is_some()
    }

    pub(super) fn ring(&self) -> Option<&PeerRing> {
        self.ring.as_ref()
    }

    /// The peer's key `rkey` pinned for an RDMA write of `len` bytes at `raddr`, and the target
    /// address: the peer published it for its PD, unbound or bound to the peer's QP, with
    /// REMOTE_WRITE, and the range lies within it. Its revoke waits for the pin.
    pub(super) fn pin_write(&self, rkey: u32, raddr: u64, len: u64) -> Option<(Grant, Pin<'_>, u64)> {
        let (g, pin) = self.keys.as_ref()?.pin(rkey)?;
        if g.pd != self.pd || (g.bound_qp != 0 && g.bound_qp != self.qp) || !g.access.contains(Access::REMOTE_WRITE) {
            return None;
        }
        let addr = if g.zero_based { g.addr.checked_add(raddr)? } else { raddr };
        if addr < g.addr || addr.checked_add(len)? > g.addr.checked_add(g.len)? {
            return None;
        }
        Some((g, pin, addr))
    }

    /// The lkey of the peer's posted receive pinned for `len` bytes placed at its start: a key
    /// of the peer QP's PD, not a window, with LOCAL_WRITE, covering them. Its `dat_lmr_free`
    /// waits for the pin.
    pub(super) fn pin_recv(&self, posted: &Posted, len: u64) -> Option<Pin<'_>> {
        let (g, pin) = self.keys.as_ref()?.pin(posted.lkey)?;
        if g.pd != self.pd || g.bound_qp != 0 || !g.access.contains(Access::LOCAL_WRITE) {
            return None;
        }
        if posted.addr < g.addr || posted.addr.checked_add(len)? > g.addr.checked_add(g.len)? {
            return None;
        }
        Some(pin)
    }

    /// Receive `n` of the peer's ring, pinned: None when the ring was withdrawn or receive `n`
    /// is not published.
    pub(super) fn pin_ring(&self, n: u64) -> Option<(Posted, RingPin<'_>)> {
        self.ring.as_ref()?.pin(n)
    }

    /// Keeps the fast path's local key set for `lkey`, looked up with `find` when it is not
    /// the one kept; None when `find` finds none.
    pub(super) fn keep_hit(&mut self, lkey: u32, find: impl FnOnce() -> Option<LocalHit>) -> Option<()> {
        if self.local_hit.as_ref().is_none_or(|h| h.lkey != lkey) {
            self.local_hit = Some(find()?);
        }
        Some(())
    }

    /// The local key set kept last (`keep_hit`).
    pub(super) fn hit(&self) -> Option<&LocalHit> {
        self.local_hit.as_ref()
    }
}

/// The peer key tables this process has mapped, shared by all connections to that process:
/// the peer's descriptor `fd`, taken from the verified process (the same file: device and
/// inode).
fn peer_table(peer: &PeerProcess, fd: u32) -> Option<Arc<KeyTable>> {
    use std::os::unix::fs::MetadataExt;
    type Tables = Vec<((u64, u64), Weak<KeyTable>)>;
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
