//! A soft device's remote keys, published read-only to peers on the same host.
//!
//! The table lives in a memfd the device writes and verified peers map (they take our
//! descriptor with `pidfd_getfd`, which needs the same permission as cross-memory attach;
//! see peer.rs). An initiator that finds a key
//! here, valid for the connection's PD and QP, with the right privilege and bounds, may move
//! the data itself with `process_vm_writev` instead of asking the target: one system call
//! instead of a round trip through two threads. Anything not found, or changing while read,
//! sends the request the ordinary way, where the target checks it: the table only ever makes
//! an access faster, never more permissive.
//!
//! Entries are seqlocked (an odd sequence means "being written"). A key is in one of
//! `PROBE` slots after its hash; a key that finds no free slot is simply not published.
//!
//! After the slots, the file holds one pin count per slot, which peers map writable. A peer
//! writing through a key pins its slot first and looks the key up again (`pin`); we withdraw
//! a key, then wait until its slot is unpinned (`wait_unpinned`), so that when the revoke of a
//! key returns, no peer is still writing through it (lease.rs).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::device::Access;
use crate::util::sync::MutexExt;

const SLOTS: usize = 1 << 18;
const PROBE: usize = 16;

#[repr(C)]
struct Slot {
    seq: AtomicU32,
    rkey: AtomicU32,
    pd: AtomicU32,
    access: AtomicU32,
    bound_qp: AtomicU64,
    addr: AtomicU64,
    len: AtomicU64,
    zero_based: AtomicU32,
    /// The key's memory in a shared file (shm.rs): our descriptor (0: none), its inode, and
    /// the file offset of `addr`.
    file_fd: AtomicU32,
    file_ino: AtomicU64,
    file_off: AtomicU64,
}

const SLOT_SIZE: usize = core::mem::size_of::<Slot>();
const _: () = assert!(SLOT_SIZE == 64);
const SLOT_BYTES: usize = SLOTS * SLOT_SIZE;
/// The receive rings (recvring.rs), after the slots: their tags, then their entries.
const RING_TAGS: usize = SLOT_BYTES;
const RING_ENTRIES: usize = RING_TAGS + RINGS * 8;
/// What peers map read-only: the slots and the rings.
const BYTES: usize = RING_ENTRIES + RINGS * RING_LEN as usize * ENTRY_SIZE;
/// The pin counts (one u32 per slot, then one per ring), after the rings.
const PIN_BYTES: usize = (SLOTS + RINGS) * 4;
/// After the pins, one `Placed` per ring entry, which the sender writes (peers map it
/// writable, with the pins).
const PLACED_BYTES: usize = RINGS * RING_LEN as usize * core::mem::size_of::<Placed>();
/// What peers map writable: the pins and the placed words.
const SHARED_RW: usize = PIN_BYTES + PLACED_BYTES;
const TOTAL: usize = BYTES + SHARED_RW;
const _: () = assert!(PIN_BYTES % 16 == 0 && SHARED_RW % 4096 == 0);
const _: () = assert!(BYTES % 4096 == 0 && RING_ENTRIES % 8 == 0);

/// Receive rings per table (recvring.rs), one per connected RC QP without an SRQ; QPs past
/// that have none.
pub const RINGS: usize = 1 << 14;
/// Receives a ring holds at a time; those posted beyond it are published as earlier ones are
/// consumed.
pub const RING_LEN: u64 = 64;

/// One published receive of a ring, in the file.
#[repr(C)]
pub struct Entry {
    /// The receive's number + 1; 0 while being written, or empty.
    seq: AtomicU64,
    addr: AtomicU64,
    len: AtomicU32,
    /// The receive's one scatter element's lkey; 0 when there is none to place data into.
    lkey: AtomicU32,
    _pad: AtomicU64,
}

const ENTRY_SIZE: usize = core::mem::size_of::<Entry>();
const _: () = assert!(ENTRY_SIZE == 32);

/// What a receiver published about one receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

impl Entry {
    /// Publishes receive number `n` (the receiver's, seqlocked).
    pub fn write(&self, n: u64, p: Posted) {
        self.seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        self.addr.store(p.addr, Ordering::Relaxed);
        self.len.store(p.len, Ordering::Relaxed);
        self.lkey.store(p.lkey, Ordering::Relaxed);
        self.seq.store(n + 1, Ordering::Release);
    }

    pub fn clear(&self) {
        self.seq.store(0, Ordering::Relaxed);
    }

    /// Receive number `n`, when this entry holds it, whole.
    pub fn read(&self, n: u64) -> Option<Posted> {
        if self.seq.load(Ordering::Acquire) != n + 1 {
            return None;
        }
        let p = Posted {
            addr: self.addr.load(Ordering::Relaxed),
            len: self.len.load(Ordering::Relaxed),
            lkey: self.lkey.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == n + 1).then_some(p)
    }
}

/// What a sender says it placed into one receive of a ring (recvring.rs): the receive's
/// number + 1 (0: nothing), with the top bit when it carries immediate data; its length and
/// immediate data.
#[repr(C)]
pub struct Placed {
    seq: AtomicU64,
    word: AtomicU64,
}

const IMM_BIT: u64 = 1 << 63;

impl Placed {
    /// The sender's: receive `n` holds `len` bytes (and `imm`), written before this.
    pub fn set(&self, n: u64, len: u32, imm: Option<u32>) {
        self.word.store(u64::from(len) | (u64::from(imm.unwrap_or(0)) << 32), Ordering::Relaxed);
        self.seq.store((n + 1) | if imm.is_some() { IMM_BIT } else { 0 }, Ordering::Release);
    }

    /// The receiver's: what the sender said it placed into receive `n`, if it did.
    pub fn get(&self, n: u64) -> Option<(u32, Option<u32>)> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & !IMM_BIT != n + 1 {
            return None;
        }
        let w = self.word.load(Ordering::Relaxed);
        Some((w as u32, (seq & IMM_BIT != 0).then_some((w >> 32) as u32)))
    }

    pub fn clear(&self) {
        self.seq.store(0, Ordering::Relaxed);
    }
}

/// The rings of our table not in use.
#[derive(Default)]
pub struct Alloc {
    /// Rings never used yet start at this index (their memory is still zero).
    next: u32,
    free: Vec<u32>,
    gen: u64,
}

impl Alloc {
    /// A ring: its index, whether it was never used, and a new generation.
    pub fn take(&mut self) -> Option<(u32, bool, u64)> {
        let (index, fresh) = match self.free.pop() {
            Some(i) => (i, false),
            None if (self.next as usize) < RINGS => {
                self.next += 1;
                (self.next - 1, true)
            }
            None => return None,
        };
        self.gen += 1;
        Some((index, fresh, self.gen))
    }

    pub fn give(&mut self, index: u32) {
        self.free.push(index);
    }
}

/// What a published key grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub pd: u32,
    pub access: Access,
    /// 0: not a window; otherwise the QP the window is bound to.
    pub bound_qp: u64,
    pub addr: u64,
    pub len: u64,
    pub zero_based: bool,
    /// Where `addr` is in a shared file, when the memory is in one (shm.rs).
    pub file: Option<super::shm::Source>,
}

/// A mapping of a key table (ours, writable; or a peer's, read-only).
pub struct KeyTable {
    base: *mut Slot,
    pins: *const AtomicU32,
    file: File,
    writable: bool,
    /// Ours: the receive rings not in use (recvring.rs).
    rings: std::sync::Mutex<Alloc>,
}

/// A pinned slot of a peer's table: the peer waits for it before its revoke of the key returns.
pub struct Pin<'a> {
    count: &'a AtomicU32,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

// SAFETY: the mapping is shared memory accessed only through atomics.
unsafe impl Send for KeyTable {}
// SAFETY: as above.
unsafe impl Sync for KeyTable {}

fn slot_of(rkey: u32, i: usize) -> usize {
    ((rkey.wrapping_mul(0x9e37_79b9) as usize) + i) & (SLOTS - 1)
}

impl KeyTable {
    /// Our own table, in a new memfd.
    pub fn create() -> Option<KeyTable> {
        // SAFETY: memfd_create with a static name and no flags beyond close-on-exec.
        let fd = unsafe { libc::memfd_create(c"dat2-soft-keys".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a new descriptor we own.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(TOTAL as u64).ok()?;
        // Its size is fixed for good, so a peer's mapping can never extend past the file (a
        // fault there would kill the peer).
        // SAFETY: fcntl on our own descriptor.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL) } != 0 {
            return None;
        }
        Self::map(file, true)
    }

    /// A peer's table: the peer's own descriptor of it (taken with `pidfd_getfd` from the
    /// verified peer process, see peer.rs), mapped read-only.
    pub fn open_peer(file: File) -> Option<KeyTable> {
        if crate::util::env::var("DAT2_SOFT_DIRECT").is_some_and(|v| v == "0") {
            return None;
        }
        // Only a table that cannot shrink is mapped: a peer cutting its file short under our
        // mapping would make our reads fault.
        // SAFETY: fcntl on our own descriptor.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if file.metadata().ok()?.len() != TOTAL as u64 || seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return None;
        }
        Self::map(file, false)
    }

    /// Ours: the whole file, writable. A peer's: the slots read-only, the pins writable.
    fn map(file: File, writable: bool) -> Option<KeyTable> {
        let (len, prot) = if writable { (TOTAL, libc::PROT_READ | libc::PROT_WRITE) } else { (BYTES, libc::PROT_READ) };
        // SAFETY: mapping the memfd, shared; we only access it through atomics.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), len, prot, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return None;
        }
        let pins = if writable {
            // SAFETY: BYTES < TOTAL: inside the mapping.
            unsafe { (p as *mut u8).add(BYTES) as *const AtomicU32 }
        } else {
            // SAFETY: the pins' part of the file (BYTES is a multiple of the page size), shared.
            let q = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    SHARED_RW,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    BYTES as libc::off_t,
                )
            };
            if q == libc::MAP_FAILED {
                // SAFETY: unmapping the slots mapped just above.
                unsafe { libc::munmap(p, len) };
                return None;
            }
            q as *const AtomicU32
        };
        Some(KeyTable { base: p as *mut Slot, pins, file, writable, rings: Default::default() })
    }

    /// The descriptor number a peer opens through /proc.
    pub fn fd(&self) -> u32 {
        self.file.as_raw_fd() as u32
    }

    fn slot(&self, i: usize) -> &Slot {
        // SAFETY: `i < SLOTS`, inside the mapping, which lives as long as `self`.
        unsafe { &*self.base.add(i) }
    }

    fn pin_count(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `i < SLOTS`, inside the pins' mapping, which lives as long as `self`.
        unsafe { &*self.pins.add(i) }
    }

    /// Our rings' allocator; None in a peer's table.
    pub(super) fn rings(&self) -> Option<std::sync::MutexGuard<'_, Alloc>> {
        self.writable.then(|| self.rings.locked())
    }

    /// Ring `r`'s tag (recvring.rs). Panics past RINGS (callers check).
    pub(super) fn ring_tag(&self, r: u32) -> &AtomicU64 {
        assert!((r as usize) < RINGS);
        // SAFETY: inside the mapping (RING_TAGS + 8 * RINGS <= BYTES), 8-aligned (page-aligned
        // base, RING_TAGS a multiple of 8), which lives as long as `self`.
        unsafe { &*((self.base as *const u8).add(RING_TAGS + 8 * r as usize) as *const AtomicU64) }
    }

    /// Entry `k` of ring `r`. Panics past RINGS or RING_LEN (callers reduce `k`).
    pub(super) fn ring_entry(&self, r: u32, k: u64) -> &Entry {
        assert!((r as usize) < RINGS && k < RING_LEN);
        let at = RING_ENTRIES + (r as usize * RING_LEN as usize + k as usize) * ENTRY_SIZE;
        // SAFETY: inside the mapping (checked bounds), aligned as above; lives as long as `self`.
        unsafe { &*((self.base as *const u8).add(at) as *const Entry) }
    }

    /// What the sender placed into entry `k` of ring `r`, in the writable part.
    pub(super) fn ring_placed(&self, r: u32, k: u64) -> &Placed {
        assert!((r as usize) < RINGS && k < RING_LEN);
        let at = PIN_BYTES + (r as usize * RING_LEN as usize + k as usize) * core::mem::size_of::<Placed>();
        // SAFETY: inside the writable mapping (PIN_BYTES + PLACED_BYTES = SHARED_RW, checked
        // bounds), 8-aligned (page-aligned base, PIN_BYTES a multiple of 16); lives as long as
        // `self`.
        unsafe { &*((self.pins as *const u8).add(at) as *const Placed) }
    }

    /// Ring `r`'s pin count, in the pins' part (writable by peers).
    pub(super) fn ring_pin(&self, r: u32) -> &AtomicU32 {
        assert!((r as usize) < RINGS);
        // SAFETY: SLOTS + r < SLOTS + RINGS: inside the pins' mapping, as in `pin_count`.
        unsafe { &*self.pins.add(SLOTS + r as usize) }
    }

    /// Publishes a key (ours only). Not finding room is fine: the key stays unpublished.
    pub fn publish(&self, rkey: u32, g: Grant) {
        if !self.writable || rkey == 0 {
            return;
        }
        for i in 0..PROBE {
            let s = self.slot(slot_of(rkey, i));
            if s.rkey.load(Ordering::Relaxed) != 0 {
                continue;
            }
            let seq = s.seq.load(Ordering::Relaxed);
            s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
            fence(Ordering::Release);
            s.pd.store(g.pd, Ordering::Relaxed);
            s.access.store(g.access.bits(), Ordering::Relaxed);
            s.bound_qp.store(g.bound_qp, Ordering::Relaxed);
            s.addr.store(g.addr, Ordering::Relaxed);
            s.len.store(g.len, Ordering::Relaxed);
            s.zero_based.store(g.zero_based as u32, Ordering::Relaxed);
            let f = g.file.unwrap_or(super::shm::Source { fd: 0, ino: 0, offset: 0 });
            s.file_fd.store(f.fd, Ordering::Relaxed);
            s.file_ino.store(f.ino, Ordering::Relaxed);
            s.file_off.store(f.offset, Ordering::Relaxed);
            s.rkey.store(rkey, Ordering::Relaxed);
            s.seq.store(seq.wrapping_add(2), Ordering::Release);
            return;
        }
    }

    /// Withdraws a key (ours only); peers stop finding it at once. Returns the slot it had:
    /// wait for it to be unpinned before the key's memory is given up (`wait_unpinned`).
    pub fn withdraw(&self, rkey: u32) -> Option<usize> {
        if !self.writable || rkey == 0 {
            return None;
        }
        let mut had = None;
        for i in 0..PROBE {
            let k = slot_of(rkey, i);
            let s = self.slot(k);
            if s.rkey.load(Ordering::Relaxed) == rkey {
                let seq = s.seq.load(Ordering::Relaxed);
                s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
                fence(Ordering::Release);
                s.rkey.store(0, Ordering::Relaxed);
                s.seq.store(seq.wrapping_add(2), Ordering::Release);
                had = Some(k);
            }
        }
        had
    }

    /// Waits until no peer holds slot `i` pinned, for at most `limit` (a peer that died or
    /// stopped while it held the pin is waited for no longer).
    pub fn wait_unpinned(&self, i: usize, limit: Duration) {
        // Pairs with the fence in `pin`: a peer either sees the key withdrawn, or we see its pin.
        fence(Ordering::SeqCst);
        let start = Instant::now();
        while self.pin_count(i).load(Ordering::SeqCst) != 0 {
            if start.elapsed() >= limit {
                crate::dbg_log!(
                    crate::log::DbgType::PROVIDER_API,
                    "soft: a peer held a key's slot pinned for {limit:?}; its revoke goes on"
                );
                return;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Looks a key up in a peer's table and pins its slot: until the pin is dropped, the
    /// peer's revoke of the key waits (see the module text). None when absent or changing.
    pub fn pin(&self, rkey: u32) -> Option<(Grant, Pin<'_>)> {
        let (i, g, seq) = self.find(rkey)?;
        let count = self.pin_count(i);
        count.fetch_add(1, Ordering::SeqCst);
        let pin = Pin { count };
        fence(Ordering::SeqCst);
        // Unchanged since it was read (the sequence moves with every change to the slot).
        let s = self.slot(i);
        (s.seq.load(Ordering::SeqCst) == seq && s.rkey.load(Ordering::Relaxed) == rkey).then_some((g, pin))
    }

    /// Looks a key up; None when absent or changing (the tests' view: a writer pins, `pin`).
    #[cfg(test)]
    fn lookup(&self, rkey: u32) -> Option<Grant> {
        self.find(rkey).map(|(_, g, _)| g)
    }

    /// A key's slot, grant, and the slot's sequence number when read.
    fn find(&self, rkey: u32) -> Option<(usize, Grant, u32)> {
        if rkey == 0 {
            return None;
        }
        for i in 0..PROBE {
            let k = slot_of(rkey, i);
            let s = self.slot(k);
            let before = s.seq.load(Ordering::Acquire);
            if before & 1 != 0 {
                return None;
            }
            if s.rkey.load(Ordering::Relaxed) != rkey {
                continue;
            }
            let g = Grant {
                pd: s.pd.load(Ordering::Relaxed),
                access: Access::from_bits_retain(s.access.load(Ordering::Relaxed)),
                bound_qp: s.bound_qp.load(Ordering::Relaxed),
                addr: s.addr.load(Ordering::Relaxed),
                len: s.len.load(Ordering::Relaxed),
                zero_based: s.zero_based.load(Ordering::Relaxed) != 0,
                file: match s.file_fd.load(Ordering::Relaxed) {
                    0 => None,
                    fd => {
                        Some(super::shm::Source { fd, ino: s.file_ino.load(Ordering::Relaxed), offset: s.file_off.load(Ordering::Relaxed) })
                    }
                },
            };
            fence(Ordering::Acquire);
            let still = s.rkey.load(Ordering::Relaxed) == rkey;
            return (still && s.seq.load(Ordering::Relaxed) == before).then_some((k, g, before));
        }
        None
    }
}

impl Drop for KeyTable {
    fn drop(&mut self) {
        if self.writable {
            // SAFETY: unmapping exactly the mapping made in `map`.
            unsafe { libc::munmap(self.base as *mut libc::c_void, TOTAL) };
        } else {
            // SAFETY: unmapping exactly the two mappings made in `map`.
            unsafe {
                libc::munmap(self.base as *mut libc::c_void, BYTES);
                libc::munmap(self.pins as *mut libc::c_void, SHARED_RW);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Grant, KeyTable};
    use crate::device::Access;

    #[test]
    fn publish_lookup_withdraw_and_peer_view() {
        let t = KeyTable::create().expect("memfd");
        let g = Grant { pd: 3, access: Access::REMOTE_WRITE, bound_qp: 0, addr: 0x1000, len: 64, zero_based: false, file: None };
        t.publish(0xdead_beef, g);
        assert_eq!(t.lookup(0xdead_beef), Some(g));
        // A peer takes our descriptor itself (pidfd_getfd): read and write, as we opened it.
        let ours = std::fs::OpenOptions::new().read(true).write(true).open(format!("/proc/self/fd/{}", t.fd())).unwrap();
        let peer = KeyTable::open_peer(ours).expect("peer view");
        assert_eq!(peer.lookup(0xdead_beef), Some(g));
        assert!(peer.lookup(0x1234_5678).is_none());
        // A peer's pin holds the withdrawal's wait until it is dropped.
        let (pg, pin) = peer.pin(0xdead_beef).expect("pinned");
        assert_eq!(pg, g);
        let slot = t.withdraw(0xdead_beef).expect("was published");
        assert!(peer.lookup(0xdead_beef).is_none());
        assert!(peer.pin(0xdead_beef).is_none());
        let start = Instant::now();
        std::thread::scope(|sc| {
            sc.spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                drop(pin);
            });
            t.wait_unpinned(slot, Duration::from_secs(5));
        });
        assert!(start.elapsed() >= Duration::from_millis(90));
        peer.publish(1, g);
        assert!(peer.lookup(1).is_none(), "a peer's view is read-only");
    }
}
