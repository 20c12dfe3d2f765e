//! Coverage-guided fuzzing of the soft device's connection manager and progress engine: what any
//! peer on the network can send a dat2-soft service point.
//!
//! The process is both sides. Once, it opens a dat2-soft IA through the library's C entry
//! points, the way a C consumer does (a PSP, EVDs, LMRs over memory laid out below), and the
//! consumer side is driven from here. Then, for every input, it connects to the PSP over
//! loopback TCP as a peer would, and speaks the wire protocol (`dat2::testing::wire`):
//! the greeting each way, HELLO, the consumer's `dat_cr_accept` on a fresh EP with receives posted, the ACCEPT, our
//! READY, the ESTABLISHED; then the input's frames. It then closes its sending half and waits
//! until the library closes the connection, reports the connection's end and completes every
//! work request, and frees the EP.
//!
//! It aborts (a crash for libFuzzer, with the input saved) when:
//! - anything panics, in any thread (the library's guard would turn a panic inside an entry
//!   point into DAT_INTERNAL_ERROR, and the engine thread would die silently: both abort here);
//!   an entry point returns DAT_INTERNAL_ERROR; SIGPIPE is raised;
//! - one allocation exceeds `-malloc_limit_mb` (default: `-rss_limit_mb`, default 2048; this
//!   allocator enforces it, as libFuzzer's own check needs a sanitizer runtime), or the RSS
//!   exceeds `-rss_limit_mb` after an input (libFuzzer also checks it every second);
//! - memory the peer must never change changed: unregistered guards, a registration without
//!   remote write, one in another protection zone, one whose LMR was freed;
//! - the library does not close a connection whose peer closed its half, or does not report
//!   its end, or loses or duplicates a completion; it stops reading an open connection; a
//!   call into it does not return within 12 s; threads or descriptors pile up.
//!
//! # Input
//! byte 0, the set-up:
//!   bits 0-1 what follows the handshake: 0 frames (below); 1 raw bytes; 2 raw bytes instead of
//!            READY; 3 raw bytes from the very start (in place of the greeting and the HELLO)
//!   bit 2    cross-memory attach: a rendezvous in the HELLO (this process is its own peer, so
//!            the path is agreed and CMA/SHM frames are served). Frames only, kept aligned
//!            with what the library consumes, scatter lists always inside our scratch memory:
//!            otherwise a READ's list would let the library write anywhere in this process,
//!            which is the peer's own memory, not the library's bug
//!   bits 3-5 receives posted before accepting (0-7)
//!   bit 6    once established, the consumer posts an RDMA read, a send and an RDMA write
//!            (so that RESPONSE and ACK frames have requests to answer)
//!   bit 7    the HELLO carries private data: a length byte and the bytes (after rd_in)
//! byte 1, unless bits 0-1 are 3: the HELLO's rd_in (how many RDMA reads and atomics we take
//!   at a time)
//! frames, each:
//!   op       u8: below 0x80 the op itself (wire::op); 0x80-0xdf an entry of OPS (modulo);
//!            0xe0-0xef a consumer action instead of a frame (below); else the next byte is
//!            the op
//!   flags    u8 (wire::flag bits)
//!   sel      u8: bits 0-2 the rkey: 0 raw u32 follows, 1 the window, 2 read-only, 3 another
//!            protection zone, 4 zero-based, 5 freed, 6 the window, 7 the memory window
//!            bound on this EP (raw when none is);
//!            bits 3-4 raddr: 0 raw u64 follows, 1 the key's base + u16, 2 the key's end - u8,
//!            3 the key's base;
//!            bit 5 raw payload length (u32 follows; the bytes sent are what the input has
//!            left up to it), else consistent with the op;
//!            bit 6 raw length (u32), else u16;
//!            bit 7 acks (u8 follows), else 0
//!   status u8, then the length, raddr, rkey as `sel` says, imm u8, acks, and for atomics a, b
//!   (u64); then the payload: data from the input (zero-padded when consistent), or with
//!   flag CMA a scatter list made from a count u8 and (u16 offset, u16 length) pairs.
//! consumer actions, once the frames before them are sent: 0xe0-0xe5 post a receive; 0xe6
//!   post an RDMA read, a send and an RDMA write; 0xe7 post 8 RDMA reads; 0xe8-0xeb bind the
//!   memory window (16 KiB into the window, 16 KiB long) on the EP with remote read+write,
//!   read, write, or all and atomics; 0xec/0xed dat_ep_disconnect graceful/abrupt; 0xee/0xef
//!   sleep 1 ms (the library reads what came).
#![no_main]

#[macro_use]
#[path = "common.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use dat2::abi::*;
use dat2::testing::peer;
use dat2::testing::rendezvous::{Claims, Rendezvous};
use dat2::testing::shm::Source;
use dat2::testing::wire::{self, flag, op, role, Greeting, Hdr, Hello, GREETING_LEN, HDR_LEN};
use libfuzzer_sys::fuzz_target;

// ---------------------------------------------------------------------------------------------
// Limits: one allocation, the RSS, threads and descriptors.

/// Aborts on an allocation larger than `-malloc_limit_mb`.
struct Limited;

static MALLOC_LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

#[cold]
fn too_big(size: usize) {
    // Let the report itself allocate.
    MALLOC_LIMIT.store(usize::MAX, Ordering::SeqCst);
    eprintln!("==dat2-fuzz== malloc limit: one allocation of {size} bytes\n{}", std::backtrace::Backtrace::force_capture());
    std::process::abort();
}

fn check_size(size: usize) {
    if size > MALLOC_LIMIT.load(Ordering::Relaxed) {
        too_big(size);
    }
}

// SAFETY: forwards to the system allocator unchanged; only looks at the size first.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        check_size(l.size());
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        check_size(l.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        check_size(new);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Limited = Limited;

/// A libFuzzer flag's value (`-name=N`) from our command line.
fn flag_mb(name: &str) -> Option<usize> {
    let prefix = format!("-{name}=");
    std::env::args().filter_map(|a| a.strip_prefix(&prefix).and_then(|v| v.parse().ok())).last()
}

fn rss_mb() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096 >> 20
}

/// The process's threads and descriptors may grow for a while (a connect thread finishing), but
/// not without bound.
const MAX_THREADS: usize = 256;
const MAX_FDS: usize = 512;

// ---------------------------------------------------------------------------------------------
// The consumer: the library's C entry points.

extern "C" {
    fn dat_lmr_free(lmr: DAT_LMR_HANDLE) -> DAT_RETURN;
    fn dat_ep_post_send(
        ep: DAT_EP_HANDLE,
        n: DAT_COUNT,
        iov: *mut DAT_LMR_TRIPLET,
        cookie: DAT_DTO_COOKIE,
        flags: DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN;
    fn dat_ep_post_rdma_read(
        ep: DAT_EP_HANDLE,
        n: DAT_COUNT,
        iov: *mut DAT_LMR_TRIPLET,
        cookie: DAT_DTO_COOKIE,
        remote: *const DAT_RMR_TRIPLET,
        flags: DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN;
    fn dat_ep_post_rdma_write(
        ep: DAT_EP_HANDLE,
        n: DAT_COUNT,
        iov: *mut DAT_LMR_TRIPLET,
        cookie: DAT_DTO_COOKIE,
        remote: *const DAT_RMR_TRIPLET,
        flags: DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN;
    fn dat_ep_free(ep: DAT_EP_HANDLE) -> DAT_RETURN;
    fn dat_ep_disconnect(ep: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN;
    fn dat_rmr_create(pz: DAT_PZ_HANDLE, rmr: *mut DAT_RMR_HANDLE) -> DAT_RETURN;
    #[allow(clippy::too_many_arguments)]
    fn dat_rmr_bind(
        rmr: DAT_RMR_HANDLE,
        lmr: DAT_LMR_HANDLE,
        triplet: *const DAT_LMR_TRIPLET,
        privileges: DAT_MEM_PRIV_FLAGS,
        va_type: DAT_VA_TYPE,
        ep: DAT_EP_HANDLE,
        cookie: DAT_RMR_COOKIE,
        flags: DAT_COMPLETION_FLAGS,
        context: *mut DAT_RMR_CONTEXT,
    ) -> DAT_RETURN;
}

// ---------------------------------------------------------------------------------------------
// Memory. One reservation, laid out as
//   guard | win (64 KiB, a sealed memfd: all privileges; its second half also zero-based) |
//   guard | ro (remote read only) | guard | other (another PZ) | guard | freed (its LMR freed) | guard
// Only `win` may change.

const PAGE: usize = 4096;
const WIN: usize = 64 << 10;
const SMALL: usize = 4 * PAGE;
const GUARD_BYTE: u8 = b'G';

struct Region {
    addr: usize,
    len: usize,
    fill: u8,
}

/// A sealed memfd of `len` bytes mapped shared at `at` (MAP_FIXED) or anywhere; returns the
/// mapping, the descriptor and its inode.
fn sealed_memfd(len: usize, at: Option<usize>) -> (usize, i32, u64) {
    // SAFETY: memfd_create with a static name.
    let fd = unsafe { libc::memfd_create(c"dat2-fuzz".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    // SAFETY: ftruncate and fcntl on the descriptor just made.
    if fd < 0
        || unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0
        || unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } != 0
    {
        fail!("memfd: {}", std::io::Error::last_os_error());
    }
    let flags = libc::MAP_SHARED | if at.is_some() { libc::MAP_FIXED } else { 0 };
    // SAFETY: maps our own file; with MAP_FIXED, over our own reservation.
    let p = unsafe { libc::mmap(at.unwrap_or(0) as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        fail!("mmap memfd: {}", std::io::Error::last_os_error());
    }
    // SAFETY: plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on our descriptor.
    unsafe { libc::fstat(fd, &mut st) };
    (p as usize, fd, st.st_ino)
}

fn fill(r: &Region) {
    // SAFETY: our own mapping, `len` bytes.
    unsafe { std::ptr::write_bytes(r.addr as *mut u8, r.fill, r.len) };
}

fn unchanged(r: &Region) -> bool {
    // SAFETY: our own mapping, `len` bytes.
    unsafe { std::slice::from_raw_parts(r.addr as *const u8, r.len) }.iter().all(|&b| b == r.fill)
}

/// A remote key the frames may name, with the range it covers in the peer's addressing.
#[derive(Clone, Copy)]
struct Key {
    rkey: u32,
    base: u64,
    len: u64,
}

struct Target {
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    dto: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    cr: DAT_EVD_HANDLE,
    addr: SocketAddr,
    win: usize,
    win_lmr: DAT_LMR_HANDLE,
    lkey: u32,
    /// A memory window, bound on each connection's EP when the input asks (`Conn::window`).
    rmr: DAT_RMR_HANDLE,
    /// Indexed by `sel & 7` (0 is raw, 7 the window bound on the EP).
    keys: [Key; 8],
    /// Memory that must never change.
    fixed: Vec<Region>,
    /// Our memory as the peer's, for scatter lists (a sealed memfd), its descriptor and inode.
    scratch: usize,
    scratch_fd: i32,
    scratch_ino: u64,
    /// Whether this process can be its own verified peer (cross-memory attach agreed).
    cma: bool,
    rss_limit: usize,
}

// SAFETY: the handles are the library's opaque values, used from the fuzzing thread only.
unsafe impl Send for Target {}
// SAFETY: as above.
unsafe impl Sync for Target {}

const SCRATCH: usize = 64 << 10;
/// Where in `win` the memory window is bound.
const WINDOW_AT: usize = 16 << 10;

fn lmr(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    addr: usize,
    len: usize,
    privileges: DAT_MEM_PRIV_FLAGS,
    va: DAT_VA_TYPE,
) -> (DAT_LMR_HANDLE, u32, u32) {
    let (mut h, mut lkey, mut rkey, mut reg_len, mut reg_addr) = (std::ptr::null_mut(), 0, 0, 0, 0);
    let region = DAT_REGION_DESCRIPTION { for_va: addr as DAT_PVOID };
    // SAFETY: all out-pointers are valid locals; the memory is ours and stays mapped.
    must("dat_lmr_create", unsafe {
        dat_lmr_create(
            ia,
            DAT_MEM_TYPE_VIRTUAL,
            region,
            len as u64,
            pz,
            privileges,
            va,
            &mut h,
            &mut lkey,
            &mut rkey,
            &mut reg_len,
            &mut reg_addr,
        )
    });
    (h, lkey, rkey)
}

extern "C" fn on_sigpipe(_: libc::c_int) {
    let msg = b"==dat2-fuzz== SIGPIPE: a write to a closed socket without MSG_NOSIGNAL\n";
    // SAFETY: write(2) and abort(3) are async-signal-safe.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort();
    }
}

impl Target {
    fn open() -> Target {
        let rss_limit = flag_mb("rss_limit_mb").unwrap_or(2048);
        let malloc_limit = flag_mb("malloc_limit_mb").filter(|&m| m > 0).unwrap_or(rss_limit);
        if malloc_limit > 0 {
            MALLOC_LIMIT.store(malloc_limit << 20, Ordering::SeqCst);
        }
        // A C program does not ignore SIGPIPE: the library must never raise it.
        // SAFETY: installing a handler that only writes and aborts.
        unsafe { libc::signal(libc::SIGPIPE, on_sigpipe as *const () as libc::sighandler_t) };

        let (mut ia, mut async_evd) = (std::ptr::null_mut(), std::ptr::null_mut());
        let name = CString::new(std::env::var("DAT2_FUZZ_IA").unwrap_or_else(|_| "dat2-soft".into())).expect("no NUL");
        // SAFETY: valid name and out-pointers.
        must("dat_ia_open", unsafe {
            dat_ia_openv(name.as_ptr() as DAT_NAME_PTR, 8, &mut async_evd, &mut ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_THREADSAFE)
        });
        // The library installed its panic hook with the first entry point; ours replaces it,
        // so that a panic anywhere (the engine thread, or inside an entry point's guard) aborts.
        std::panic::set_hook(Box::new(|info| fail!("panic: {info}")));
        watchdog();
        let (mut pz, mut pz2) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers.
        must("dat_pz_create", unsafe { dat_pz_create(ia, &mut pz) });
        // SAFETY: as above.
        must("dat_pz_create", unsafe { dat_pz_create(ia, &mut pz2) });
        let dto = evd(ia, DAT_EVD_DTO_FLAG);
        let conn = evd(ia, DAT_EVD_CONNECTION_FLAG);
        let cr = evd(ia, DAT_EVD_CR_FLAG);

        let total = PAGE + WIN + PAGE + 3 * (SMALL + PAGE);
        // SAFETY: a fresh private reservation.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), total, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if base == libc::MAP_FAILED {
            fail!("mmap: {}", std::io::Error::last_os_error());
        }
        let base = base as usize;
        let win = base + PAGE;
        sealed_memfd(WIN, Some(win));
        let ro = win + WIN + PAGE;
        let other = ro + SMALL + PAGE;
        let freed = other + SMALL + PAGE;
        let mut fixed = vec![Region { addr: base, len: PAGE, fill: GUARD_BYTE }];
        for (addr, byte) in [(ro, b'R'), (other, b'O'), (freed, b'F')] {
            fixed.push(Region { addr: addr - PAGE, len: PAGE, fill: GUARD_BYTE });
            fixed.push(Region { addr, len: SMALL, fill: byte });
        }
        fixed.push(Region { addr: freed + SMALL, len: PAGE, fill: GUARD_BYTE });
        fixed.iter().for_each(fill);

        let all = DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC;
        let (win_lmr, lkey, rkey_win) = lmr(ia, pz, win, WIN, all, DAT_VA_TYPE_VA);
        let (_, _, rkey_zb) = lmr(ia, pz, win + WIN / 2, WIN / 2, all, DAT_VA_TYPE_ZB);
        let (_, _, rkey_ro) = lmr(ia, pz, ro, SMALL, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA);
        let (_, _, rkey_other) = lmr(ia, pz2, other, SMALL, all, DAT_VA_TYPE_VA);
        let (h, _, rkey_freed) = lmr(ia, pz, freed, SMALL, all, DAT_VA_TYPE_VA);
        // SAFETY: an LMR we created.
        must("dat_lmr_free", unsafe { dat_lmr_free(h) });
        let k = |rkey, base: usize, len: usize| Key { rkey, base: base as u64, len: len as u64 };
        let window = k(rkey_win, win, WIN);
        let keys = [
            window,
            window,
            k(rkey_ro, ro, SMALL),
            k(rkey_other, other, SMALL),
            Key { rkey: rkey_zb, base: 0, len: (WIN / 2) as u64 },
            k(rkey_freed, freed, SMALL),
            window,
            window,
        ];

        let (mut qual, mut psp): (DAT_CONN_QUAL, _) = (0, std::ptr::null_mut());
        // SAFETY: valid out-pointers.
        must("dat_psp_create_any", unsafe { dat_psp_create_any(ia, &mut qual, cr, DAT_PSP_CONSUMER_FLAG, &mut psp) });
        let addr = SocketAddr::from(([127, 0, 0, 1], qual as u16));
        let (scratch, scratch_fd, scratch_ino) = sealed_memfd(SCRATCH, None);
        let cma = !peer::off() && peer::cma_state().is_ok();
        let mut rmr = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        must("dat_rmr_create", unsafe { dat_rmr_create(pz, &mut rmr) });
        let t =
            Target { ia, pz, dto, conn, cr, addr, win, win_lmr, lkey, rmr, keys, fixed, scratch, scratch_fd, scratch_ino, cma, rss_limit };
        eprintln!(
            "dat2-fuzz: dat2-soft service point on {addr}, wire version {}, cross-memory attach {}",
            wire::VERSION,
            if t.cma { "available" } else { "off" }
        );
        t
    }

    fn wait(&self, evd: DAT_EVD_HANDLE, timeout: Duration) -> Option<DAT_EVENT> {
        // SAFETY: DAT_EVENT is plain data; all-zero is valid.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        let mut nmore = 0;
        // SAFETY: valid out-pointers.
        let rc = unsafe { dat_evd_wait(evd, timeout.as_micros() as DAT_TIMEOUT, 1, &mut ev, &mut nmore) };
        ok("dat_evd_wait", rc).then_some(ev)
    }

    fn dequeue(&self, evd: DAT_EVD_HANDLE) -> Option<DAT_EVENT> {
        // SAFETY: as in `wait`.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-pointer.
        ok("dat_evd_dequeue", unsafe { dat_evd_dequeue(evd, &mut ev) }).then_some(ev)
    }

    /// A fresh EP with `n` receives posted into the window.
    fn endpoint(&self, n: u8) -> Conn {
        let mut ep = std::ptr::null_mut();
        // SAFETY: valid handles and out-pointer; default attributes.
        must("dat_ep_create", unsafe { dat_ep_create(self.ia, self.pz, self.dto, self.dto, self.conn, std::ptr::null(), &mut ep) });
        let mut c = Conn { ep, posted: 0, recvs: 0, window: None };
        for _ in 0..n {
            self.post_recv(&mut c);
        }
        c
    }

    /// Posts a receive into the window: of one segment, two, or a small one, in turn.
    fn post_recv(&self, c: &mut Conn) {
        let i = c.recvs;
        c.recvs += 1;
        let at = (self.win + (i % 8) * 4096) as u64;
        let seg = |offset: u64, len: u32| DAT_LMR_TRIPLET { virtual_address: at + offset, segment_length: len, lmr_context: self.lkey };
        let mut iov = match i % 3 {
            0 => vec![seg(0, 4096)],
            1 => vec![seg(0, 100), seg(1000, 3000)],
            _ => vec![seg(0, 64)],
        };
        let cookie = DAT_DTO_COOKIE { as_64: i as u64 };
        // SAFETY: iov is valid for its length.
        let rc = unsafe { dat_ep_post_recv(c.ep, iov.len() as DAT_COUNT, iov.as_mut_ptr(), cookie, DAT_COMPLETION_DEFAULT_FLAG) };
        c.posted += ok("dat_ep_post_recv", rc) as usize;
    }

    /// Requests of our own, for the peer's RESPONSE and ACK frames to answer: an RDMA read, a
    /// send and an RDMA write, or `reads` RDMA reads (more than may be outstanding at once).
    fn post_requests(&self, c: &mut Conn, reads: usize) {
        let at = (self.win + WIN - 4096) as u64;
        let remote = DAT_RMR_TRIPLET { virtual_address: 0x10_0000, segment_length: 256, rmr_context: 0x1234 };
        let mut iov = [DAT_LMR_TRIPLET { virtual_address: at, segment_length: 256, lmr_context: self.lkey }];
        let cookie = DAT_DTO_COOKIE { as_64: 100 };
        for _ in 0..reads.max(1) {
            // SAFETY: iov and remote are valid; the memory is registered.
            let rc = unsafe { dat_ep_post_rdma_read(c.ep, 1, iov.as_mut_ptr(), cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG) };
            c.posted += ok("dat_ep_post_rdma_read", rc) as usize;
        }
        if reads > 0 {
            return;
        }
        iov[0].segment_length = 16;
        // SAFETY: as above.
        let rc = unsafe { dat_ep_post_send(c.ep, 1, iov.as_mut_ptr(), cookie, DAT_COMPLETION_DEFAULT_FLAG) };
        c.posted += ok("dat_ep_post_send", rc) as usize;
        iov[0].segment_length = 32;
        // SAFETY: as above.
        let rc = unsafe { dat_ep_post_rdma_write(c.ep, 1, iov.as_mut_ptr(), cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG) };
        c.posted += ok("dat_ep_post_rdma_write", rc) as usize;
    }

    /// Binds the memory window over part of `win` on this EP (a fresh rmr_context each time):
    /// key 7 of the frames that follow.
    fn bind_window(&self, c: &mut Conn, privileges: DAT_MEM_PRIV_FLAGS) {
        let at = self.win + WINDOW_AT;
        let triplet = DAT_LMR_TRIPLET { virtual_address: at as u64, segment_length: SMALL as u32, lmr_context: self.lkey };
        let mut context = 0;
        // SAFETY: valid handles, triplet and out-pointer.
        let rc = unsafe {
            dat_rmr_bind(
                self.rmr,
                self.win_lmr,
                &triplet,
                privileges,
                DAT_VA_TYPE_VA,
                c.ep,
                DAT_RMR_COOKIE { as_64: 7 },
                DAT_COMPLETION_DEFAULT_FLAG,
                &mut context,
            )
        };
        if ok("dat_rmr_bind", rc) {
            c.posted += 1;
            c.window = Some(Key { rkey: context, base: at as u64, len: SMALL as u64 });
        }
    }

    fn check_memory(&self) {
        for r in &self.fixed {
            if !unchanged(r) {
                fail!("memory the peer may not change changed: {} bytes at {:#x} (filled with {:?})", r.len, r.addr, r.fill as char);
            }
        }
    }
}

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(Target::open)
}

// ---------------------------------------------------------------------------------------------
// The input.

struct Input<'a> {
    d: &'a [u8],
}

impl<'a> Input<'a> {
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.d.split_at(n.min(self.d.len()));
        self.d = b;
        a
    }
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    fn le<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let b = self.bytes(N);
        a[..b.len()].copy_from_slice(b);
        a
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.le())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.le())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.le())
    }
    fn is_empty(&self) -> bool {
        self.d.is_empty()
    }
}

const OPS: [u8; 11] = [
    op::SEND,
    op::WRITE,
    op::READ,
    op::CMP_SWAP,
    op::FETCH_ADD,
    op::RESPONSE,
    op::ACK,
    op::DISCONNECT,
    op::READY,
    op::ESTABLISHED,
    op::HELLO,
];

/// The next frame of the input, encoded. `aligned`: keep the stream as the library parses it
/// (cross-memory attach: see the module text).
fn frame(t: &Target, c: &Conn, sel_op: u8, inp: &mut Input, aligned: bool) -> Vec<u8> {
    let op = match sel_op {
        0..0x80 => sel_op,
        0x80..0xe0 => OPS[sel_op as usize % OPS.len()],
        _ => inp.u8(),
    };
    let mut flags = inp.u8();
    let sel = inp.u8();
    let status = inp.u8();
    let length = if sel & 0x40 != 0 && !aligned { inp.u32() } else { u32::from(inp.u16()) };
    let key = match (sel & 7, c.window) {
        (7, Some(w)) => w,
        (0 | 7, _) => Key { rkey: inp.u32(), base: 0, len: 0 },
        (k, _) => t.keys[k as usize],
    };
    let raddr = match (sel >> 3) & 3 {
        0 => inp.u64(),
        1 => key.base.wrapping_add(u64::from(inp.u16())),
        2 => key.base.wrapping_add(key.len).wrapping_sub(u64::from(inp.u8())),
        _ => key.base,
    };
    let imm = u32::from(inp.u8());
    let acks = if sel & 0x80 != 0 { u32::from(inp.u8()) } else { 0 };
    let (a, b) = if matches!(op, op::CMP_SWAP | op::FETCH_ADD) { (inp.u64(), inp.u64()) } else { (0, 0) };
    let mut hdr = Hdr { op, flags, status, length, raddr, rkey: key.rkey, imm, acks, a, b, ..Hdr::default() };
    let raw_payload = sel & 0x20 != 0 && !aligned;
    let scatter = flags & flag::CMA != 0 && matches!(op, op::SEND | op::WRITE | op::READ);
    let body: Vec<u8> = if scatter && (aligned || !raw_payload) {
        // A scatter list in our scratch memory (the peer's memory, to the library).
        let n = (inp.u8() % 5) as usize;
        let mut segs = Vec::with_capacity(n);
        let mut srcs = Vec::with_capacity(n);
        for _ in 0..n {
            let off = inp.u16() as usize % SCRATCH;
            let len = (inp.u16() as usize).min(SCRATCH - off);
            segs.push(((t.scratch + off) as u64, len as u32));
            srcs.push(Source { fd: t.scratch_fd as u32, ino: t.scratch_ino, offset: off as u64 });
        }
        if !raw_payload && sel & 0x40 == 0 {
            hdr.length = segs.iter().map(|s| s.1).sum();
        }
        if flags & flag::SHM != 0 {
            wire::encode_shared(&segs, &srcs)
        } else {
            wire::encode_segments(&segs)
        }
    } else if raw_payload {
        let claimed = inp.u32();
        hdr.payload = claimed;
        return [&hdr.encode()[..], inp.bytes(claimed as usize)].concat();
    } else {
        if aligned {
            // Only what the library reads: flags it would take as a scatter list on another
            // op are dropped, and so is the SHM flag without CMA.
            if !scatter {
                flags &= !(flag::CMA | flag::SHM);
                hdr.flags = flags;
            }
        }
        match op {
            op::SEND | op::WRITE | op::RESPONSE => {
                // The data: the input's bytes, zero-padded up to PAD_MAX; a longer frame is
                // cut short, and the stream ends inside it.
                let mut d = inp.bytes(length as usize).to_vec();
                d.resize(d.len().max((length as usize).min(PAD_MAX)), 0);
                hdr.payload = length;
                return [&hdr.encode()[..], &d].concat();
            }
            op::READY | op::HELLO | op::ESTABLISHED => {
                Hello { private_data: inp.bytes(inp_len(length)).to_vec(), ..Hello::default() }.encode()
            }
            _ => Vec::new(),
        }
    };
    hdr.payload = body.len() as u32;
    [&hdr.encode()[..], &body].concat()
}

/// The most zero bytes a frame's data is padded with.
const PAD_MAX: usize = 256 << 10;

fn inp_len(length: u32) -> usize {
    (length % 64) as usize
}

// ---------------------------------------------------------------------------------------------
// One connection.

const STEP: Duration = Duration::from_secs(5);

fn read_exact(s: &mut TcpStream, n: usize) -> Option<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).ok().map(|_| b)
}

/// One handshake message from the library: its header and body.
fn message(s: &mut TcpStream) -> Option<(Hdr, Vec<u8>)> {
    let h = Hdr::decode(&read_exact(s, HDR_LEN)?.try_into().ok()?);
    if h.payload > 1 << 16 {
        fail!("the library sent a handshake message of {} bytes", h.payload);
    }
    Some((h, read_exact(s, h.payload as usize)?))
}

/// How long a write may wait for the library to read.
const WRITE_STALL: Duration = Duration::from_secs(8);

fn send(s: &mut TcpStream, b: &[u8]) {
    let _ = s.set_write_timeout(Some(WRITE_STALL));
    match s.write_all(b) {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            fail!("the library read nothing of an open connection for {WRITE_STALL:?}")
        }
        // The library may have closed the connection already: not our concern here.
        _ => {}
    }
}

/// Reads what the library sends, in a thread of its own (so that neither side waits on the
/// other's writes), until the library closes the connection.
struct Drain(std::sync::mpsc::Receiver<()>);

impl Drain {
    fn start(s: &TcpStream) -> Drain {
        let (tx, rx) = std::sync::mpsc::channel();
        let Ok(mut r) = s.try_clone() else { fail!("cannot clone a socket") };
        let _ = r.set_read_timeout(None);
        let spawned = std::thread::Builder::new().name("dat2-fuzz-drain".into()).stack_size(64 << 10).spawn(move || {
            let mut buf = [0u8; 16384];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
        if spawned.is_err() {
            fail!("cannot start a thread");
        }
        Drain(rx)
    }

    /// Waits until the library closed the connection (we closed our half).
    fn until_closed(self) {
        if self.0.recv_timeout(STEP).is_err() {
            fail!("the library did not close a connection whose peer had closed its half, within {STEP:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A watchdog: a call into the library that does not return.

/// The harness's current step, and since when (None: not in the library).
static PHASE: std::sync::Mutex<(&str, Option<Instant>)> = std::sync::Mutex::new(("", None));
const CALL_LIMIT: Duration = Duration::from_secs(12);

/// Enters a step that calls into the library (replacing the previous one).
fn phase(what: &'static str) {
    *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = (what, Some(Instant::now()));
}

fn idle() {
    PHASE.lock().unwrap_or_else(|e| e.into_inner()).1 = None;
}

fn watchdog() {
    let spawned = std::thread::Builder::new().name("dat2-fuzz-watch".into()).spawn(|| loop {
        std::thread::sleep(Duration::from_millis(250));
        let (what, since) = *PHASE.lock().unwrap_or_else(|e| e.into_inner());
        if since.is_some_and(|t| t.elapsed() > CALL_LIMIT) {
            fail!("{what} has not returned within {CALL_LIMIT:?}");
        }
    });
    if spawned.is_err() {
        fail!("cannot start the watchdog");
    }
}

/// One connection's EP, and what the consumer did with it.
struct Conn {
    ep: DAT_EP_HANDLE,
    /// Work requests posted (each must complete once).
    posted: usize,
    /// Receives posted (where the next one goes).
    recvs: usize,
    /// The memory window bound on this EP, if it is.
    window: Option<Key>,
}

fn accept(t: &Target, ev: &DAT_EVENT, recvs: u8) -> Conn {
    if ev.event_number != DAT_CONNECTION_REQUEST_EVENT {
        fail!("a CR EVD event {:#x}", ev.event_number);
    }
    // SAFETY: the union member of a connection request event.
    let cr = unsafe { ev.event_data.cr_arrival_event_data.cr_handle };
    phase("dat_ep_create, dat_ep_post_recv");
    let c = t.endpoint(recvs);
    phase("dat_cr_accept");
    let pdata = b"dat2-fuzz";
    // SAFETY: valid handles and private data.
    must("dat_cr_accept", unsafe { dat_cr_accept(cr, c.ep, pdata.len() as DAT_COUNT, pdata.as_ptr().cast()) });
    c
}

/// After the connection closed: its end event, then every work request's completion (by the
/// time the EP is freed; with DAT2_FUZZ_STRICT_FLUSH=1 already when the end is reported, as an
/// HCA flushes its queues when the QP enters the error state), then no more.
fn finish(t: &Target, ep: Conn) {
    let deadline = Instant::now() + STEP;
    let left = || deadline.saturating_duration_since(Instant::now());
    loop {
        let Some(ev) = t.wait(t.conn, left()) else {
            fail!("no end of connection reported within {STEP:?} after the connection closed");
        };
        // SAFETY: the union member of a connection event.
        let data = unsafe { ev.event_data.connect_event_data };
        if data.ep_handle != ep.ep {
            fail!("a connection event {:#x} for another EP", ev.event_number);
        }
        if ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED {
            break;
        }
    }
    let take = |ev: DAT_EVENT| {
        if ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT {
            return;
        }
        // Receives with immediate data complete as the IB extension's DTO event, whose data
        // starts the same way.
        if ev.event_number != DAT_DTO_COMPLETION_EVENT && ev.event_number != DAT_IB_DTO_EVENT {
            fail!("a DTO EVD event {:#x}", ev.event_number);
        }
        // SAFETY: the union member of both kinds.
        let c = unsafe { ev.event_data.dto_completion_event_data };
        if c.ep_handle != ep.ep {
            fail!("a completion for another EP");
        }
        // (An RDMA write with immediate data reports the write's length, not a buffer's.)
        let receive = ev.event_number == DAT_DTO_COMPLETION_EVENT && c.operation == DAT_DTO_RECEIVE;
        if receive && c.status == DAT_DTO_SUCCESS && c.transfered_length > 4096 {
            fail!("a receive of {} bytes, more than any buffer posted", c.transfered_length);
        }
    };
    let mut done = 0;
    if strict_flush() {
        while done < ep.posted {
            let Some(ev) = t.wait(t.dto, left()) else {
                fail!("{done} of {} work requests completed when the end of the connection was reported", ep.posted);
            };
            take(ev);
            done += 1;
        }
    }
    phase("dat_ep_free");
    // SAFETY: our EP.
    ok("dat_ep_free", unsafe { dat_ep_free(ep.ep) });
    phase("collecting completions after dat_ep_free");
    while done < ep.posted {
        let Some(ev) = t.wait(t.dto, left()) else {
            fail!("{done} of {} work requests completed by dat_ep_free", ep.posted);
        };
        take(ev);
        done += 1;
    }
    if let Some(ev) = t.dequeue(t.dto) {
        fail!("an extra DTO event {:#x} after {} of {} work requests: one completed twice", ev.event_number, done, ep.posted);
    }
}

fn strict_flush() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var("DAT2_FUZZ_STRICT_FLUSH").is_ok_and(|v| v == "1"))
}

fn run(data: &[u8]) {
    let t = target();
    let mut inp = Input { d: data };
    let setup = inp.u8();
    let mode = setup & 3;
    let cma = setup & 4 != 0 && mode == 0 && t.cma;
    let recvs = (setup >> 3) & 7;
    let Ok(mut s) = TcpStream::connect(t.addr) else { fail!("cannot connect to {}", t.addr) };
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(STEP));

    if mode == 3 {
        // Anything at all in place of the HELLO: a request it makes is accepted.
        send(&mut s, inp.bytes(usize::MAX));
        let _ = s.shutdown(Shutdown::Write);
        let deadline = Instant::now() + STEP;
        let _ = s.set_nonblocking(true);
        let mut ep = None;
        let mut buf = [0u8; 4096];
        loop {
            if let (None, Some(ev)) = (&ep, t.dequeue(t.cr)) {
                ep = Some(accept(t, &ev, recvs));
            }
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_micros(200)),
                Err(_) => break,
            }
            if Instant::now() > deadline {
                fail!("the library neither closed a connection nor reported its request within {STEP:?}");
            }
        }
        if let Some(ep) = ep {
            finish(t, ep);
        }
        idle();
        return;
    }

    send(&mut s, &Greeting::ours(role::ASK));
    let mut answer = [0u8; GREETING_LEN];
    if s.read_exact(&mut answer).is_err() || Greeting::decode(&answer).map(|g| g.role) != Some(role::ANSWER) {
        fail!("no greeting answered ours within {STEP:?}");
    }
    let rendezvous = if cma { Rendezvous::open() } else { None };
    let rd_in = u32::from(inp.u8());
    let private_data = if setup & 0x80 != 0 {
        let n = inp.u8();
        inp.bytes(n as usize).to_vec()
    } else {
        Vec::new()
    };
    let conn_qual = u64::from(t.addr.port());
    let hello =
        Hello { rendezvous: rendezvous.as_ref().map_or(0, |r| r.token), conn_qual, rd_in, private_data, ..Hello::default() }.encode();
    send(&mut s, &[&Hdr::message(op::HELLO, hello.len()).encode()[..], &hello].concat());
    let Some(ev) = t.wait(t.cr, STEP) else { fail!("no connection request for a valid HELLO within {STEP:?}") };
    let mut c = accept(t, &ev, recvs);
    idle();
    let Some((h, body)) = message(&mut s) else { fail!("no ACCEPT after dat_cr_accept") };
    if h.op != op::ACCEPT || Hello::decode(&body).is_none() {
        fail!("the answer to an accepted HELLO is op {} ({} bytes), not an ACCEPT", h.op, body.len());
    }
    let drain;
    if mode == 2 {
        drain = Drain::start(&s);
        send(&mut s, inp.bytes(usize::MAX));
    } else {
        let mut reaches = false;
        if let Some(r) = &rendezvous {
            // The library came to our rendezvous before its ACCEPT; we verify it and say who
            // we are (this process: so the library reaches our memory, and we its).
            let verified = peer::other_end(&s).and_then(|end| r.take(end));
            if let Some((p, c, channel)) = verified {
                let claims =
                    Claims { sock_fd: s.as_raw_fd() as u32, canary: peer::canary(), keytab_fd: 0, pd: 0, qp: 0, ring: 0, ring_gen: 0 };
                reaches = channel.send(&claims) && p.reaches(c.canary);
            }
        }
        let ready = Hello { reaches_peer: reaches, ..Hello::default() }.encode();
        send(&mut s, &[&Hdr::message(op::READY, ready.len()).encode()[..], &ready].concat());
        let Some((h, _)) = message(&mut s) else { fail!("no ESTABLISHED after READY") };
        if h.op != op::ESTABLISHED {
            fail!("the answer to READY is op {}, not ESTABLISHED", h.op);
        }
        let agreed = h.status == 1;
        if cma && reaches && !agreed {
            fail!("cross-memory attach with ourselves was not agreed");
        }
        match t.wait(t.conn, STEP) {
            Some(ev) if ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED => {}
            Some(ev) => fail!("connection event {:#x} instead of ESTABLISHED", ev.event_number),
            None => fail!("no ESTABLISHED event within {STEP:?} of the ESTABLISHED frame"),
        }
        drain = Drain::start(&s);
        if setup & 0x40 != 0 {
            phase("dat_ep_post_rdma_read, dat_ep_post_send, dat_ep_post_rdma_write");
            t.post_requests(&mut c, 0);
        }
        idle();
        if mode == 1 {
            send(&mut s, inp.bytes(usize::MAX));
        } else {
            let mut out = Vec::new();
            while !inp.is_empty() {
                let sel_op = inp.u8();
                if !(0xe0..0xf0).contains(&sel_op) {
                    out.extend(frame(t, &c, sel_op, &mut inp, cma));
                    continue;
                }
                // The consumer acts: on what the frames so far did (when the library has read
                // them: with 0xee/0xef it gets a moment).
                send(&mut s, &out);
                out.clear();
                act(t, &mut c, sel_op);
                idle();
            }
            send(&mut s, &out);
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    drain.until_closed();
    finish(t, c);
    idle();
}

/// The most work requests the consumer actions post on one connection.
const MAX_POSTED: usize = 512;

/// A consumer action between frames (see the module text).
fn act(t: &Target, c: &mut Conn, what: u8) {
    if c.posted > MAX_POSTED {
        // The DTO EVD holds 1024 events, and completions are collected at the end.
        return;
    }
    phase(match what {
        0xe0..=0xe5 => "dat_ep_post_recv",
        0xe6 | 0xe7 => "dat_ep_post_rdma_read, dat_ep_post_send, dat_ep_post_rdma_write",
        0xe8..=0xeb => "dat_rmr_bind",
        0xec | 0xed => "dat_ep_disconnect",
        _ => "a pause",
    });
    match what {
        0xe0..=0xe5 => t.post_recv(c),
        0xe6 => t.post_requests(c, 0),
        0xe7 => t.post_requests(c, 8),
        0xe8 => t.bind_window(c, DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG),
        0xe9 => t.bind_window(c, DAT_MEM_PRIV_REMOTE_READ_FLAG),
        0xea => t.bind_window(c, DAT_MEM_PRIV_REMOTE_WRITE_FLAG),
        0xeb => t.bind_window(c, DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC),
        0xec | 0xed => {
            let flags = if what == 0xec { DAT_CLOSE_GRACEFUL_FLAG } else { DAT_CLOSE_ABRUPT_FLAG };
            // SAFETY: our EP.
            ok("dat_ep_disconnect", unsafe { dat_ep_disconnect(c.ep, flags) });
        }
        _ => std::thread::sleep(Duration::from_millis(1)),
    }
}

fn after(t: &Target) {
    t.check_memory();
    let rss = rss_mb();
    if t.rss_limit > 0 && rss > t.rss_limit {
        fail!("RSS {rss} MB, above -rss_limit_mb={}", t.rss_limit);
    }
    let (threads, fds) = (count_dir("/proc/self/task"), count_dir("/proc/self/fd"));
    if threads > MAX_THREADS || fds > MAX_FDS {
        fail!("{threads} threads and {fds} descriptors: they pile up");
    }
}

fuzz_target!(|data: &[u8]| {
    run(data);
    after(target());
});
