//! Noticing that registered memory was unmapped, remapped or discarded, without malloc hooks:
//! a userfaultfd(2) monitor.
//!
//! # Why userfaultfd
//! A registration pins the pages that were mapped when it was made. If the application then
//! unmaps, remaps or discards that memory and maps something new at the same address, a cached
//! registration would point at the old pages, and data would silently go to the wrong place.
//! The cache must learn about every such change, from every path (libc's `free`, a custom
//! allocator, a direct `munmap`/`mremap`/`madvise`/`brk`, `mmap(MAP_FIXED)` over the range):
//! - malloc/munmap hooks (symbol interposition, `__morecore`, relocation patching as UCX does)
//!   miss direct system calls, static binaries and allocators that call the kernel themselves;
//!   glibc removed its hooks, and patching another library's GOT is fragile;
//! - `/proc/self/pagemap` PFN checks on every reuse cost a system call and a page-table walk
//!   per page, hide PFNs without CAP_SYS_ADMIN, and still race with a change after the check;
//! - on-demand paging (ODP) MRs need no cache at all, but few devices (and not rxe) offer it;
//! - MMU notifiers are kernel-only (that is what the RDMA core's own umem uses internally).
//!
//! With `UFFD_FEATURE_EVENT_UNMAP | EVENT_REMAP | EVENT_REMOVE` and a range registered in
//! `UFFDIO_REGISTER_MODE_MISSING`, the kernel itself reports every `munmap`, `mremap`, shrinking
//! `brk`, `mmap(MAP_FIXED)` over the range and `madvise(MADV_DONTNEED/FREE/REMOVE)`, and the
//! thread making the change waits until a reader has taken the event. It costs nothing on the
//! application's memory paths, one ioctl per new registration, and one thread.
//!
//! # Kernels and privileges
//! The events need Linux 4.11. Creating a userfaultfd that also handles faults taken in kernel
//! mode needs CAP_SYS_PTRACE, or `vm.unprivileged_userfaultfd = 1` (5.2+), or read/write access
//! to `/dev/userfaultfd` (6.1+, `USERFAULTFD_IOC_NEW`); all three are tried. Since 5.11 an
//! unprivileged process could ask for `UFFD_USER_MODE_ONLY` instead, but then a kernel-mode
//! access (a `read(2)` into the buffer, another driver pinning it) to a watched page that is
//! missing fails with EFAULT instead of waiting for us, which would change the application's
//! behaviour; so it is not used, and the cache stays off, saying why. Seccomp filters (container
//! defaults) may also refuse the system call: the cache is then off too.
//!
//! # What is watched
//! Only private anonymous memory (heap, anonymous mmap, stacks): file mappings cannot be
//! registered in MISSING mode at all; shared memory (shmem, memfd) can be hole-punched or
//! truncated through the file, which no userfaultfd event reports, so where the kernel offers
//! `UFFD_FEATURE_MINOR_SHMEM` (5.14) such ranges are recognised (registering them in MINOR mode
//! succeeds, which it never does for anonymous memory) and left alone; hugetlbfs ranges are
//! recognised by the missing `UFFDIO_ZEROPAGE` ioctl and left alone too. A range the
//! application registered with its own userfaultfd gives EBUSY and is simply not watched. A
//! range that cannot be watched is never cached.
//!
//! # Faults on watched ranges
//! A device pins the pages of an MR for as long as it lives, so a missing-page fault on a
//! watched page is normally impossible. It happens after a `MADV_DONTNEED` (the event arrives
//! first), on a device that does not pin, on memory that `mremap` grew in place (the new tail
//! inherits the registration), or after a move (the new address inherits it). Such a fault must
//! never hang: the reader unregisters the faulting page at once (the kernel then wakes the
//! thread, which takes the fault the ordinary way), and the registrations over that page are
//! treated as changed. Only if that unregister fails (say, the VMA count limit is reached) it
//! resolves the fault with `UFFDIO_ZEROPAGE`, which for anonymous and shmem memory is exactly
//! what the kernel would have done itself (a zero page); if that fails too (`EEXIST`: the page
//! appeared meanwhile; `EAGAIN`: another change is in flight) it wakes the thread to retry.
//! A `REMOVE` event unregisters its range before anything else, for the same reason, and a
//! `REMAP` event unregisters the new address range, which the kernel leaves registered.
//!
//! # Fork
//! `UFFD_FEATURE_EVENT_FORK` is not asked for, so the kernel drops every registration from the
//! child's copy of the address space. The child inherits the descriptor, whose ioctls would act
//! on the parent's memory, so after `fork` the child never uses the monitor (a `pthread_atfork`
//! handler notes the fork) and its cache is off.
//!
//! # Deadlocks
//! A thread changing a watched range waits until the event has been read, possibly while it
//! holds one of our locks (a `free` inside our code can shrink the heap). So the reader thread
//! takes no lock and allocates nothing: it reads events into a stack buffer, unregisters what
//! must be, and publishes the ranges into fixed lock-free rings, one per cache. A cache applies
//! them under its own lock before every lookup; `settle` first waits until the batch the
//! current thread's own changes were read in has been published, so a lookup made after a
//! `munmap` returned always sees its event. Every range the reader unregisters by itself is
//! also published, so a registration that loses its watch that way is always dropped.
//!
//! An event says which addresses changed, not which mapping: the kernel frees the addresses
//! before the reader takes the event, so another thread may map the same addresses again and
//! register them before the old mapping's event is applied. That registration is then dropped
//! as changed: one needless registration later, never a stale one kept.
//!
//! Other limits: each watched range may split a VMA (counting toward `vm.max_map_count`); if
//! the application closes our descriptor, the reader stops and the caches empty themselves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

// The kernel interface (linux/userfaultfd.h), spelled out.
const UFFD_API: u64 = 0xaa;
const FEATURE_EVENT_REMAP: u64 = 1 << 2;
const FEATURE_EVENT_REMOVE: u64 = 1 << 3;
const FEATURE_EVENT_UNMAP: u64 = 1 << 6;
const FEATURE_MINOR_SHMEM: u64 = 1 << 10;
const EVENT_PAGEFAULT: u8 = 0x12;
const EVENT_REMAP: u8 = 0x14;
const EVENT_REMOVE: u8 = 0x15;
const EVENT_UNMAP: u8 = 0x16;
const MODE_MISSING: u64 = 1 << 0;
const MODE_MINOR: u64 = 1 << 2;
/// `1 << _UFFDIO_ZEROPAGE` in the ioctls a registration reports (absent on hugetlbfs).
const HAS_ZEROPAGE: u64 = 1 << 4;

const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | (0xaa << 8) | nr
}
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;
const UFFDIO_API: u64 = ioc(IOC_READ | IOC_WRITE, 0x3f, 24);
const UFFDIO_REGISTER: u64 = ioc(IOC_READ | IOC_WRITE, 0x00, 32);
const UFFDIO_UNREGISTER: u64 = ioc(IOC_READ, 0x01, 16);
const UFFDIO_WAKE: u64 = ioc(IOC_READ, 0x02, 16);
const UFFDIO_ZEROPAGE: u64 = ioc(IOC_READ | IOC_WRITE, 0x04, 32);
const USERFAULTFD_IOC_NEW: u64 = 0xaa << 8;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioZeropage {
    range: UffdioRange,
    mode: u64,
    zeropage: i64,
}

/// A message is 32 bytes: the event in byte 0, its arguments in the next three 64-bit words.
const MSG_WORDS: usize = 4;
const BATCH: usize = 32;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn ioctl<T>(fd: i32, request: u64, arg: &mut T) -> Result<(), i32> {
    // SAFETY: every request passed here takes a pointer to the matching #[repr(C)] struct,
    // which lives on the caller's stack for the duration of the call.
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

fn unregister(fd: i32, start: u64, len: u64) -> Result<(), i32> {
    ioctl(fd, UFFDIO_UNREGISTER, &mut UffdioRange { start, len })
}

/// Registers `[start, start+len)`; returns the ioctls the kernel offers on it.
fn register(fd: i32, start: u64, len: u64, mode: u64) -> Result<u64, i32> {
    let mut r = UffdioRegister { range: UffdioRange { start, len }, mode, ioctls: 0 };
    ioctl(fd, UFFDIO_REGISTER, &mut r).map(|_| r.ioctls)
}

// ---------------------------------------------------------------------------------------------
// Publishing: the reader's side (lock-free, allocation-free).

const RINGS: usize = 32;
const RING_SLOTS: usize = 128;

/// Changed ranges on their way from the reader to one cache. Single producer (the reader),
/// single consumer (whoever holds that cache's lock).
struct Ring {
    claimed: AtomicBool,
    head: AtomicU64,
    tail: AtomicU64,
    /// Set when a range could not be queued: the consumer then drops everything it watches.
    overflow: AtomicBool,
    slots: [[AtomicU64; 2]; RING_SLOTS],
}

impl Ring {
    const fn new() -> Ring {
        Ring {
            claimed: AtomicBool::new(false),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            overflow: AtomicBool::new(false),
            slots: [const { [AtomicU64::new(0), AtomicU64::new(0)] }; RING_SLOTS],
        }
    }

    fn push(&self, start: u64, end: u64) {
        let h = self.head.load(SeqCst);
        if h - self.tail.load(SeqCst) >= RING_SLOTS as u64 {
            self.overflow.store(true, SeqCst);
            return;
        }
        let slot = &self.slots[(h % RING_SLOTS as u64) as usize];
        slot[0].store(start, SeqCst);
        slot[1].store(end, SeqCst);
        self.head.store(h + 1, SeqCst);
    }
}

static RING_SET: [Ring; RINGS] = [const { Ring::new() }; RINGS];
/// Batches of events the reader started to read, and the last one it finished publishing.
static STARTED: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);
/// Bumped (and futex-woken) after every published batch.
static EVENT_GEN: AtomicU32 = AtomicU32::new(0);
/// The errno that stopped the reader (0 while it runs).
static STOPPED: AtomicU32 = AtomicU32::new(0);
static FORKED: AtomicBool = AtomicBool::new(false);

/// Queues `[start, end)` (page aligned) for every cache. `gone`: the kernel holds no
/// registration of ours there any more (the pages were unmapped, or the reader unregistered
/// them), so a cache that drops its watches there needs no `UFFDIO_UNREGISTER` of its own.
/// It travels in the start's low bit.
fn publish(start: u64, end: u64, gone: bool) {
    for ring in &RING_SET {
        if ring.claimed.load(SeqCst) {
            ring.push(start | u64::from(gone), end);
        }
    }
}

fn publish_everything() {
    for ring in &RING_SET {
        ring.overflow.store(true, SeqCst);
    }
}

fn futex_wake_all() {
    // SAFETY: FUTEX_WAKE on the address of a static atomic; no memory is written.
    unsafe { libc::syscall(libc::SYS_futex, EVENT_GEN.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
}

/// The reader thread. It takes no lock and allocates nothing (see the module comment).
fn reader(fd: i32, page: u64) {
    let mut buf = [0u64; MSG_WORDS * BATCH];
    let stop = loop {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd on the stack.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r < 0 {
            match errno() {
                libc::EINTR => continue,
                e => break e,
            }
        }
        if pfd.revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0 {
            break libc::EBADF;
        }
        let batch = STARTED.fetch_add(1, SeqCst) + 1;
        let mut failed = 0;
        loop {
            // SAFETY: reads at most size_of_val(&buf) bytes into the stack buffer.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), core::mem::size_of_val(&buf)) };
            if n < 0 {
                match errno() {
                    libc::EINTR => continue,
                    libc::EAGAIN => break,
                    e => {
                        failed = e;
                        break;
                    }
                }
            }
            let msgs = n as usize / (8 * MSG_WORDS);
            for m in buf.chunks_exact(MSG_WORDS).take(msgs) {
                handle(fd, page, m);
            }
            if msgs < BATCH {
                break;
            }
        }
        // Finished before the collector is woken: a thread waiting in `settle` goes on without
        // waiting for that system call.
        FINISHED.store(batch, SeqCst);
        EVENT_GEN.fetch_add(1, SeqCst);
        futex_wake_all();
        if failed != 0 {
            break failed;
        }
    };
    STOPPED.store(stop.max(1) as u32, SeqCst);
    if stop != libc::EBADF {
        // Nobody reads the descriptor any more: close it, so that the kernel drops every
        // registration and wakes any thread waiting on a fault (a descriptor that poll called
        // invalid is no longer ours to close).
        close(fd);
    }
    publish_everything();
    FINISHED.store(u64::MAX, SeqCst);
    EVENT_GEN.fetch_add(1, SeqCst);
    futex_wake_all();
}

fn handle(fd: i32, page: u64, m: &[u64]) {
    let event = m[0].to_ne_bytes()[0];
    match event {
        EVENT_UNMAP => publish(m[1], m[2], true),
        EVENT_REMOVE => {
            // Unregister first: a fault on the discarded pages must not wait for anyone.
            let gone = m[2] > m[1] && unregister(fd, m[1], m[2] - m[1]).is_ok();
            publish(m[1], m[2], gone);
        }
        EVENT_REMAP => {
            let (from, to, len) = (m[1], m[2], m[3]);
            let len = len.wrapping_add(page - 1) & !(page - 1);
            // The moved pages keep the registration at their new address: drop it there.
            let gone = len != 0 && unregister(fd, to, len).is_ok();
            publish(from, from.saturating_add(len), true);
            publish(to, to.saturating_add(len), gone);
        }
        EVENT_PAGEFAULT => {
            let start = m[2] & !(page - 1);
            let gone = resolve_fault(fd, start, page);
            publish(start, start + page, gone);
        }
        _ => {}
    }
}

/// Lets a thread blocked on a missing page of a watched range go on (see "Faults"); true if
/// the page is no longer registered.
fn resolve_fault(fd: i32, start: u64, page: u64) -> bool {
    if unregister(fd, start, page).is_ok() {
        return true;
    }
    let mut z = UffdioZeropage { range: UffdioRange { start, len: page }, mode: 0, zeropage: 0 };
    if ioctl(fd, UFFDIO_ZEROPAGE, &mut z).is_ok() {
        return false;
    }
    let _ = ioctl(fd, UFFDIO_WAKE, &mut UffdioRange { start, len: page });
    false
}

// ---------------------------------------------------------------------------------------------
// The consumers' side.

/// A cache's ring, claimed with [`claim_ring`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingId(usize);

pub(crate) fn claim_ring() -> Option<RingId> {
    RING_SET.iter().position(|r| r.claimed.compare_exchange(false, true, SeqCst, SeqCst).is_ok()).map(|i| {
        let r = &RING_SET[i];
        // Ranges queued for a former owner are of no interest to the new one.
        r.tail.store(r.head.load(SeqCst), SeqCst);
        r.overflow.store(false, SeqCst);
        RingId(i)
    })
}

pub(crate) fn release_ring(id: RingId) {
    RING_SET[id.0].claimed.store(false, SeqCst);
}

/// Waits until every event read so far is published (the reader never blocks, so this is
/// short). After it, a change the calling thread made is in its cache's ring.
#[inline(always)]
pub(crate) fn settle() {
    let started = STARTED.load(SeqCst);
    if FINISHED.load(SeqCst) < started {
        settle_wait(started);
    }
}

/// [`settle`] when a batch is in flight.
#[cold]
#[inline(never)]
fn settle_wait(started: u64) {
    let mut spins = 0u32;
    while FINISHED.load(SeqCst) < started {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A changed range: start, end, and whether the kernel already dropped our registration there
/// (see `publish`).
pub(crate) type Changed = (u64, u64, bool);

/// Whether [`drain`] may find something for `id` (a range queued, or one lost).
#[inline(always)]
pub(crate) fn queued(id: RingId) -> bool {
    let r = &RING_SET[id.0];
    r.tail.load(SeqCst) != r.head.load(SeqCst) || r.overflow.load(SeqCst)
}

/// Takes the changed ranges queued for `id` into `out`; true means "everything may have
/// changed" (a range was lost, or the monitor stopped).
pub(crate) fn drain(id: RingId, out: &mut Vec<Changed>) -> bool {
    let r = &RING_SET[id.0];
    let (t, h) = (r.tail.load(SeqCst), r.head.load(SeqCst));
    if t != h {
        for i in t..h {
            let slot = &r.slots[(i % RING_SLOTS as u64) as usize];
            let start = slot[0].load(SeqCst);
            out.push((start & !1, slot[1].load(SeqCst), start & 1 != 0));
        }
        r.tail.store(h, SeqCst);
    }
    // Most lookups find nothing queued: read before the (locked) swap.
    r.overflow.load(SeqCst) && r.overflow.swap(false, SeqCst)
}

pub(crate) fn event_generation() -> u32 {
    EVENT_GEN.load(SeqCst)
}

/// Sleeps until a batch of events was published after `generation` was read, or `timeout`.
pub(crate) fn wait_for_events(generation: u32, timeout: Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: FUTEX_WAIT on a static atomic with a relative timeout on the stack; it only
    // sleeps while the value still equals `generation`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            EVENT_GEN.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            generation,
            &ts as *const libc::timespec,
        )
    };
}

/// Whether this process is a fork child of the one that opened the monitor.
pub(crate) fn forked() -> bool {
    FORKED.load(SeqCst)
}

/// Why the monitor can no longer be used in this process, if it cannot.
pub(crate) fn unusable() -> Option<String> {
    if FORKED.load(SeqCst) {
        return Some("this process is a fork child; the parent's userfaultfd acts on the parent's memory".into());
    }
    match STOPPED.load(SeqCst) {
        0 => None,
        e => Some(format!("the userfaultfd monitor stopped: {}", std::io::Error::from_raw_os_error(e as i32))),
    }
}

/// The monitor, if it was opened and this process may still use it (no fork, reader running);
/// `None` says nothing about why (see [`unusable`] and [`monitor`]).
pub(crate) fn ready() -> Option<&'static Monitor> {
    if FORKED.load(SeqCst) || STOPPED.load(SeqCst) != 0 {
        return None;
    }
    MONITOR.get()?.as_ref().ok()
}

// ---------------------------------------------------------------------------------------------
// Watches: which pages are registered with the userfaultfd, and how many entries want each.

/// Disjoint page ranges with the number of watches covering each.
#[derive(Default, Debug)]
pub(crate) struct WatchSet {
    segs: BTreeMap<u64, (u64, u32)>,
}

impl WatchSet {
    /// Cuts the segment containing `x` (if any) in two at `x`.
    fn split_at(&mut self, x: u64) {
        let found = self.segs.range(..x).next_back().map(|(&s, &(e, c))| (s, e, c));
        if let Some((s, e, c)) = found {
            if e > x {
                self.segs.insert(s, (x, c));
                self.segs.insert(x, (e, c));
            }
        }
    }

    /// The parts of `[s, e)` no watch covers.
    pub(crate) fn uncovered(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = s;
        let first = self.segs.range(..s).next_back().filter(|(_, &(end, _))| end > s).map(|(&k, _)| k).unwrap_or(s);
        for (&ss, &(se, _)) in self.segs.range(first..e) {
            if ss > at {
                out.push((at, ss));
            }
            at = at.max(se);
        }
        if at < e {
            out.push((at, e));
        }
        out
    }

    /// Adds a watch over `[s, e)`.
    pub(crate) fn add(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        let gaps = self.uncovered(s, e);
        self.split_at(s);
        self.split_at(e);
        for (_, v) in self.segs.range_mut(s..e) {
            v.1 += 1;
        }
        for (a, b) in gaps {
            self.segs.insert(a, (b, 1));
        }
    }

    /// Removes a watch over `[s, e)`; returns the ranges no watch covers any more (adjacent
    /// pieces merged).
    pub(crate) fn remove(&mut self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut freed: Vec<(u64, u64)> = Vec::new();
        if s >= e {
            return freed;
        }
        self.split_at(s);
        self.split_at(e);
        let keys: Vec<u64> = self.segs.range(s..e).map(|(&k, _)| k).collect();
        for k in keys {
            let Some(v) = self.segs.get_mut(&k) else { continue };
            v.1 = v.1.saturating_sub(1);
            if v.1 == 0 {
                let end = v.0;
                self.segs.remove(&k);
                match freed.last_mut() {
                    Some(last) if last.1 == k => last.1 = end,
                    _ => freed.push((k, end)),
                }
            }
        }
        freed
    }

    #[cfg(test)]
    pub(crate) fn count_at(&self, x: u64) -> u32 {
        self.segs.range(..=x).next_back().filter(|(_, &(e, _))| e > x).map_or(0, |(_, &(_, c))| c)
    }
}

impl std::fmt::Display for NotWatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotWatched::Kind => f.write_str("shared memory or hugetlbfs"),
            NotWatched::Kernel(e) => write!(f, "UFFDIO_REGISTER: {}", std::io::Error::from_raw_os_error(*e)),
            NotWatched::Range => f.write_str("empty or out-of-range"),
            NotWatched::OwnStack => f.write_str("the stack of one of the library's own threads"),
        }
    }
}

/// Why a range is not watched.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotWatched {
    /// Shared memory or hugetlbfs (see "What is watched").
    Kind,
    /// The kernel refused: errno (EINVAL: not anonymous or not mapped; EBUSY: another
    /// userfaultfd owns it; ENOMEM: too many VMAs).
    Kernel(i32),
    /// Zero length or past the end of the address space.
    Range,
    /// The stack of the reader or collector thread: a fault there could never be served.
    OwnStack,
}

/// The stacks of this module's reader thread and the cache's collector thread. A watched page
/// on one of them would deadlock: the thread that serves faults would wait for itself.
static OWN_STACKS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// A thread's stack recorded by [`note_own_stack`], forgotten when the thread drops it.
pub(crate) struct OwnStack((u64, u64));

impl Drop for OwnStack {
    fn drop(&mut self) {
        let mut v = OWN_STACKS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = v.iter().position(|r| *r == self.0) {
            v.swap_remove(i);
        }
    }
}

/// Records the calling thread's stack as one never to watch, while the guard lives.
pub(crate) fn note_own_stack() -> Option<OwnStack> {
    // SAFETY: plain data, filled by pthread_getattr_np and released with pthread_attr_destroy.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut base: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let mut guard: libc::size_t = 0;
        let mut noted = None;
        if libc::pthread_attr_getstack(&attr, &mut base, &mut size) == 0 {
            // The guard pages below the stack too (part of the same mapping).
            let _ = libc::pthread_attr_getguardsize(&attr, &mut guard);
            let range = ((base as u64).saturating_sub(guard as u64), base as u64 + size as u64);
            OWN_STACKS.lock().unwrap_or_else(|p| p.into_inner()).push(range);
            noted = Some(OwnStack(range));
        }
        libc::pthread_attr_destroy(&mut attr);
        noted
    }
}

fn on_own_stack(s: u64, e: u64) -> bool {
    OWN_STACKS.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|&(lo, hi)| s < hi && lo < e)
}

pub(crate) struct Monitor {
    fd: i32,
    page: u64,
    probe_minor: bool,
    watches: Mutex<WatchSet>,
}

impl Monitor {
    /// The page-rounded range covering `[addr, addr+len)`.
    pub(crate) fn pages(&self, addr: u64, len: u64) -> Option<(u64, u64)> {
        let end = addr.checked_add(len)?.checked_add(self.page - 1)? & !(self.page - 1);
        let start = addr & !(self.page - 1);
        (len > 0 && end > start).then_some((start, end))
    }

    /// How many watches cover the page at `x`.
    #[cfg(test)]
    pub(crate) fn watches_at(&self, x: u64) -> u32 {
        self.watches.lock().unwrap_or_else(|p| p.into_inner()).count_at(x)
    }

    /// Whether shared memory is recognised (and left unwatched): the kernel offers MINOR
    /// registration of shmem.
    #[cfg(test)]
    pub(crate) fn tells_shared_memory(&self) -> bool {
        self.probe_minor
    }

    /// Watches the pages of `[addr, addr+len)`; returns the page range to give back to
    /// [`Monitor::unwatch`].
    pub(crate) fn watch(&self, addr: u64, len: u64) -> Result<(u64, u64), NotWatched> {
        let (s, e) = self.pages(addr, len).ok_or(NotWatched::Range)?;
        if on_own_stack(s, e) {
            return Err(NotWatched::OwnStack);
        }
        let mut set = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        if self.probe_minor {
            match register(self.fd, s, e - s, MODE_MISSING | MODE_MINOR) {
                Ok(_) => {
                    // Only shared memory and hugetlbfs accept MINOR: not for us.
                    for (a, b) in set.uncovered(s, e) {
                        let _ = unregister(self.fd, a, b - a);
                    }
                    return Err(NotWatched::Kind);
                }
                Err(libc::EINVAL) => {}
                Err(e) => return Err(NotWatched::Kernel(e)),
            }
        }
        let ioctls = register(self.fd, s, e - s, MODE_MISSING).map_err(NotWatched::Kernel)?;
        if ioctls & HAS_ZEROPAGE == 0 {
            for (a, b) in set.uncovered(s, e) {
                let _ = unregister(self.fd, a, b - a);
            }
            return Err(NotWatched::Kind);
        }
        set.add(s, e);
        Ok((s, e))
    }

    /// Gives back a watch from [`Monitor::watch`]; pages no other watch covers are unregistered
    /// (errors are ignored: an unmapped range is no longer registered anyway).
    pub(crate) fn unwatch(&self, range: (u64, u64)) {
        self.unwatch_after(range, &[]);
    }

    /// [`Monitor::unwatch`], skipping the pages of `changed` ranges the kernel already
    /// dropped (unmapped ones: most evictions follow an `munmap`, and an unregister there would
    /// be one more system call for nothing). If another thread mapped and watched the same
    /// pages again before the reader took the unmap event, they stay registered without a
    /// watch of ours: a fault there is served as under "Faults" (the page is unregistered),
    /// so this costs a system call later, never a wrong registration.
    pub(crate) fn unwatch_after(&self, range: (u64, u64), changed: &[Changed]) {
        let mut set = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        for (a, b) in set.remove(range.0, range.1) {
            for (x, y) in still_registered((a, b), changed) {
                let _ = unregister(self.fd, x, y - x);
            }
        }
    }
}

/// The parts of `r` outside every changed range marked gone.
pub(crate) fn still_registered(r: (u64, u64), changed: &[Changed]) -> Vec<(u64, u64)> {
    let mut gone = WatchSet::default();
    for &(s, e, _) in changed.iter().filter(|c| c.2) {
        gone.add(s, e);
    }
    gone.uncovered(r.0, r.1)
}

static MONITOR: OnceLock<Result<Monitor, String>> = OnceLock::new();

/// The process's monitor, set up on first use; the error says why there is none.
pub(crate) fn monitor() -> Result<&'static Monitor, String> {
    match MONITOR.get_or_init(open) {
        Ok(m) => Ok(m),
        Err(why) => Err(why.clone()),
    }
}

extern "C" fn note_fork() {
    FORKED.store(true, SeqCst);
}

fn new_fd() -> Result<i32, String> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: userfaultfd(2) takes flags only and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as i32;
    if fd >= 0 {
        return Ok(fd);
    }
    let err = errno();
    // Without CAP_SYS_PTRACE and with vm.unprivileged_userfaultfd = 0, /dev/userfaultfd
    // (if the administrator opened it to us) gives the same kind of descriptor.
    // SAFETY: a constant NUL-terminated path.
    let dev = unsafe { libc::open(c"/dev/userfaultfd".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    let dev_err = if dev >= 0 {
        // SAFETY: USERFAULTFD_IOC_NEW takes the flags as its argument, not a pointer.
        let fd = unsafe { libc::ioctl(dev, USERFAULTFD_IOC_NEW as _, flags) };
        let e = errno();
        // SAFETY: closing the descriptor opened just above.
        unsafe { libc::close(dev) };
        if fd >= 0 {
            return Ok(fd);
        }
        e
    } else {
        errno()
    };
    let dev_why = std::io::Error::from_raw_os_error(dev_err);
    Err(match err {
        libc::EPERM => format!(
            "userfaultfd(2): not permitted (it needs CAP_SYS_PTRACE or sysctl vm.unprivileged_userfaultfd=1; \
             user-mode-only descriptors are not used); /dev/userfaultfd: {dev_why}"
        ),
        libc::ENOSYS => "userfaultfd(2): not available (kernel without CONFIG_USERFAULTFD, or refused by seccomp)".into(),
        e => format!("userfaultfd(2): {}; /dev/userfaultfd: {dev_why}", std::io::Error::from_raw_os_error(e)),
    })
}

fn close(fd: i32) {
    // SAFETY: closes a descriptor this module opened and no one else uses.
    unsafe { libc::close(fd) };
}

fn open() -> Result<Monitor, String> {
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 && (page as u64).is_power_of_two() { page as u64 } else { 4096 };
    // Ask a first descriptor what the kernel offers (the API handshake can be made once per
    // descriptor), then open the real one with what is needed.
    let probe = new_fd()?;
    let mut api = UffdioApi { api: UFFD_API, features: 0, ioctls: 0 };
    let r = ioctl(probe, UFFDIO_API, &mut api);
    close(probe);
    r.map_err(|e| format!("userfaultfd UFFDIO_API: {}", std::io::Error::from_raw_os_error(e)))?;
    let need = FEATURE_EVENT_UNMAP | FEATURE_EVENT_REMAP | FEATURE_EVENT_REMOVE;
    if api.features & need != need {
        return Err(format!("userfaultfd lacks the unmap/remap/remove events (Linux 4.11 or later needed; features {:#x})", api.features));
    }
    let want = need | (api.features & FEATURE_MINOR_SHMEM);
    let fd = new_fd()?;
    let mut api = UffdioApi { api: UFFD_API, features: want, ioctls: 0 };
    if let Err(e) = ioctl(fd, UFFDIO_API, &mut api) {
        close(fd);
        return Err(format!("userfaultfd UFFDIO_API features {want:#x}: {}", std::io::Error::from_raw_os_error(e)));
    }
    let (noted, wait) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("dat2-uffd".into()).stack_size(64 * 1024).spawn(move || {
        let _stack = note_own_stack();
        let _ = noted.send(());
        reader(fd, page)
    });
    if let Err(e) = spawned {
        close(fd);
        return Err(format!("cannot start the userfaultfd reader thread: {e}"));
    }
    // No range is watched before the reader's stack is known.
    let _ = wait.recv();
    // SAFETY: registers a handler that only stores to a static atomic (async-signal-safe).
    unsafe { libc::pthread_atfork(None, None, Some(note_fork)) };
    Ok(Monitor { fd, page, probe_minor: want & FEATURE_MINOR_SHMEM != 0, watches: Mutex::new(WatchSet::default()) })
}

#[cfg(test)]
mod tests {
    use super::{
        UffdioApi, UffdioRegister, UffdioZeropage, WatchSet, UFFDIO_API, UFFDIO_REGISTER, UFFDIO_UNREGISTER, UFFDIO_WAKE, UFFDIO_ZEROPAGE,
        USERFAULTFD_IOC_NEW,
    };

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // Values of the kernel's _IOWR/_IOR macros for these structs on Linux.
        assert_eq!(UFFDIO_API, 0xc018_aa3f);
        assert_eq!(UFFDIO_REGISTER, 0xc020_aa00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_aa01);
        assert_eq!(UFFDIO_WAKE, 0x8010_aa02);
        assert_eq!(UFFDIO_ZEROPAGE, 0xc020_aa04);
        assert_eq!(USERFAULTFD_IOC_NEW, 0xaa00);
        assert_eq!(core::mem::size_of::<UffdioRegister>(), 32);
        assert_eq!(core::mem::size_of::<UffdioZeropage>(), 32);
        assert_eq!(core::mem::size_of::<UffdioApi>(), 24);
    }

    #[test]
    fn watch_set_counts_overlaps() {
        let mut w = WatchSet::default();
        assert_eq!(w.uncovered(0, 10), vec![(0, 10)]);
        w.add(0, 8);
        w.add(4, 12);
        assert_eq!((w.count_at(0), w.count_at(4), w.count_at(7), w.count_at(8), w.count_at(12)), (1, 2, 2, 1, 0));
        assert_eq!(w.uncovered(0, 16), vec![(12, 16)]);
        assert_eq!(w.uncovered(2, 6), vec![]);
        assert_eq!(w.remove(0, 8), vec![(0, 4)]);
        assert_eq!((w.count_at(0), w.count_at(4), w.count_at(11)), (0, 1, 1));
        w.add(4, 12);
        assert_eq!(w.remove(4, 12), vec![]);
        assert_eq!(w.remove(4, 12), vec![(4, 12)]);
        assert!(w.segs.is_empty());
    }

    #[test]
    fn watch_set_gaps_and_merges() {
        let mut w = WatchSet::default();
        w.add(10, 20);
        w.add(30, 40);
        assert_eq!(w.uncovered(0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        w.add(0, 50);
        assert_eq!(w.uncovered(0, 50), vec![]);
        assert_eq!(w.count_at(15), 2);
        assert_eq!(w.count_at(25), 1);
        assert_eq!(w.remove(0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        assert_eq!(w.remove(10, 40), vec![(10, 20), (30, 40)]);
        assert!(w.segs.is_empty());
        // Removing what was never added frees nothing.
        assert_eq!(w.remove(0, 5), vec![]);
    }
}
