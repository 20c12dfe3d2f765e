//! Coverage-guided fuzzing of the soft device's UD receive path: the datagrams any host that
//! resolved a dat2-soft UD QP (or guessed its port) can send it.
//!
//! The process is both sides. Once, it opens a dat2-soft IA through the library's C entry
//! points, makes a UD EP whose receives land in a window `win` between guard pages, a PSP, and
//! resolves the EP from a UDP socket of its own by speaking UD_HELLO to the PSP (the consumer
//! side accepts with `dat_cr_accept`) and proving its port with a proof datagram; it so learns
//! the QP's number, Q_Key and secret. Then, for every
//! input, it posts receives and sends datagrams as the input says, and ends with a sentinel: a
//! receive posted last, and valid datagrams sent until that receive completes (receives are
//! taken in order, so every receive posted before it has completed by then, and every datagram
//! sent before it has been read).
//!
//! It aborts (a crash for libFuzzer, with the input saved) when:
//! - anything panics, in any thread; an entry point returns DAT_INTERNAL_ERROR;
//! - a completion is not a UD receive that succeeded or failed with a local length error, its
//!   length is not 40 + a payload we sent, the GRH does not name us, or the payloads of the
//!   receives that succeeded are not, in order, payloads of datagrams that `wire::Dgram::parse`
//!   accepts (a datagram with another Q_Key, a lying length, a bad header, lands nowhere);
//! - a byte changed outside what a completed receive reports written (GRH + payload), in the
//!   window or the guards;
//! - the sentinel never lands (the QP stopped reading), or threads or descriptors pile up.
//!
//! # Input
//! A sequence of actions, each introduced by a byte `a`:
//! - `a < 0xa0`: a datagram. Bits 0-1 the keys: 0-1 the QP's, 2 a raw Q_Key (u32) follows, 3
//!   the QP's Q_Key with the secret's bit 0 flipped; bit 2 a raw length field (u32 follows), else the payload's; bit 3 a
//!   raw source QPN (u16 follows), else our port; bit 4 a raw flags byte follows, else 0;
//!   bit 5 a raw version byte follows; bit 6 the magic xor a u8 that follows. Then the payload
//!   length (u16, modulo 4200) and that many bytes from the input (zero-padded).
//! - `0xa0 <= a < 0xf0`: post a receive of (a & 3) + 1 segments, each a size from SIZES (the
//!   next byte, modulo its length), in its own slot of `win`.
//! - `a >= 0xf0`: sleep 1 ms (the receiver reads what came).
#![no_main]

#[macro_use]
#[path = "common.rs"]
mod common;

use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use dat2::abi::*;
use dat2::testing::wire::{flag, op, role, Dgram, Greeting, Hdr, UdHello, DGRAM_MAGIC, GREETING_LEN, HDR_LEN};
use libfuzzer_sys::fuzz_target;

const PAGE: usize = 4096;
/// The receive window: SLOTS slots of SLOT bytes, one per receive segment.
const SLOT: usize = 8192;
const SLOTS: usize = 16;
const WIN: usize = SLOT * SLOTS;
const GUARD: u8 = b'G';
const UNTOUCHED: u8 = b'W';
/// The soft device's largest datagram payload, and the GRH area before it.
const MTU: u32 = 4096;
const GRH: usize = 40;
/// Receive segment sizes: around the GRH, around the MTU.
const SIZES: [u32; 10] = [0, 1, 20, 39, 40, 41, 200, 4095, 4136, 4137];
/// The receives posted at most at once (the EP's max_recv_dtos).
const MAX_RECVS: usize = 64;
const SENTINEL: u64 = u64::MAX;

struct Target {
    dto: DAT_EVD_HANDLE,
    ep: DAT_EP_HANDLE,
    lkey: u32,
    base: usize,
    win: usize,
    peer: UdpSocket,
    /// The QP's number (UDP port) and Q_Key, learned by resolving it.
    qpn: u16,
    qkey: u32,
    secret: u64,
    threads: usize,
    fds: usize,
}

// SAFETY: the handles are the library's, used from the fuzzing thread only.
unsafe impl Send for Target {}
// SAFETY: as above.
unsafe impl Sync for Target {}

fn wait(evd: DAT_EVD_HANDLE, what: &str) -> DAT_EVENT {
    let mut ev = DAT_EVENT::default();
    let mut n = 0;
    // SAFETY: valid out-pointers.
    must(what, unsafe { dat_evd_wait(evd, 10_000_000, 1, &mut ev, &mut n) });
    ev
}

impl Target {
    fn open() -> Target {
        std::panic::set_hook(Box::new(|info| fail!("panic: {info}")));
        let (mut ia, mut async_evd) = (std::ptr::null_mut(), std::ptr::null_mut());
        let name = CString::new("dat2-soft").expect("no NUL");
        // SAFETY: valid name and out-pointers.
        must("dat_ia_open", unsafe {
            dat_ia_openv(name.as_ptr() as DAT_NAME_PTR, 8, &mut async_evd, &mut ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_THREADSAFE)
        });
        // The library's panic hook came with its first entry point: ours replaces it again.
        std::panic::set_hook(Box::new(|info| fail!("panic: {info}")));
        let mut pz = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        must("dat_pz_create", unsafe { dat_pz_create(ia, &mut pz) });
        let (dto, conn, cr) = (evd(ia, DAT_EVD_DTO_FLAG), evd(ia, DAT_EVD_CONNECTION_FLAG), evd(ia, DAT_EVD_CR_FLAG));
        let total = PAGE + WIN + PAGE;
        // SAFETY: a fresh private mapping.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), total, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if base == libc::MAP_FAILED {
            fail!("mmap: {}", std::io::Error::last_os_error());
        }
        let base = base as usize;
        let win = base + PAGE;
        let (mut lmr, mut lkey, mut rkey, mut reg_len, mut reg_addr) = (std::ptr::null_mut(), 0, 0, 0, 0);
        // SAFETY: valid out-pointers; the window stays mapped for the process's life.
        must("dat_lmr_create", unsafe {
            dat_lmr_create(
                ia,
                DAT_MEM_TYPE_VIRTUAL,
                DAT_REGION_DESCRIPTION { for_va: win as DAT_PVOID },
                WIN as u64,
                pz,
                DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                DAT_VA_TYPE_VA,
                &mut lmr,
                &mut lkey,
                &mut rkey,
                &mut reg_len,
                &mut reg_addr,
            )
        });
        let mut attr = DAT_EP_ATTR { service_type: DAT_IB_SERVICE_TYPE_UD, max_message_size: MTU, ..Default::default() };
        attr.max_recv_dtos = MAX_RECVS as DAT_COUNT;
        attr.max_request_dtos = 8;
        attr.max_recv_iov = 4;
        attr.max_request_iov = 4;
        let mut ep = std::ptr::null_mut();
        // SAFETY: valid attributes and out-pointer.
        must("dat_ep_create (UD)", unsafe { dat_ep_create(ia, pz, dto, dto, conn, &attr, &mut ep) });
        let (mut port, mut psp) = (0, std::ptr::null_mut());
        // SAFETY: valid out-pointers.
        must("dat_psp_create_any", unsafe { dat_psp_create_any(ia, &mut port, cr, DAT_PSP_CONSUMER_FLAG, &mut psp) });

        // Resolve the EP as a peer would: UD_HELLO from a UDP socket of ours, the consumer
        // accepts, UD_ACCEPT names the QP and its Q_Key.
        let peer = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap_or_else(|e| fail!("udp bind: {e}"));
        let our_qpn = peer.local_addr().map(|a| u32::from(a.port())).unwrap_or(0);
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port as u16)).unwrap_or_else(|e| fail!("connect to the PSP: {e}"));
        s.write_all(&Greeting::ours(role::ASK)).unwrap_or_else(|e| fail!("greeting: {e}"));
        let mut answer = [0u8; GREETING_LEN];
        s.read_exact(&mut answer).unwrap_or_else(|e| fail!("the PSP's greeting: {e}"));
        if Greeting::decode(&answer).map(|g| g.role) != Some(role::ANSWER) {
            fail!("set-up: the PSP's greeting is {answer:02x?}");
        }
        let token = 0x0f0f_5a5a_0f0f_5a5a_0f0f_5a5a_0f0f_5a5a;
        let body = UdHello { qpn: our_qpn, qkey: 0x0f0f_5a5a, secret: 1, token, conn_qual: port, private_data: b"fuzz".to_vec() }.encode();
        let mut msg = Hdr::message(op::UD_HELLO, body.len()).encode().to_vec();
        msg.extend_from_slice(&body);
        s.write_all(&msg).unwrap_or_else(|e| fail!("UD_HELLO: {e}"));
        let req = wait(cr, "dat_evd_wait (CR)");
        if req.event_number != DAT_IB_UD_CONNECTION_REQUEST_EVENT {
            fail!("set-up: a UD_HELLO arrived as event {:#x}", req.event_number);
        }
        // SAFETY: a connection request event carries CR arrival data.
        let crh = unsafe { req.event_data.cr_arrival_event_data.cr_handle };
        // SAFETY: no private data.
        must("dat_cr_accept", unsafe { dat_cr_accept(crh, ep, 0, std::ptr::null()) });
        let mut hdr = [0u8; HDR_LEN];
        s.read_exact(&mut hdr).unwrap_or_else(|e| fail!("UD_ACCEPT: {e}"));
        let h = Hdr::decode(&hdr);
        let mut body = vec![0u8; (h.payload as usize).min(4096)];
        s.read_exact(&mut body).unwrap_or_else(|e| fail!("UD_ACCEPT body: {e}"));
        let answer = UdHello::decode(&body).filter(|_| h.op == op::UD_ACCEPT).unwrap_or_else(|| fail!("set-up: no UD_ACCEPT"));
        // Our port is ours: a proof from it (the QP answers with its own, which we leave unread).
        let _ = peer.send_to(&Dgram::proof(our_qpn, token), (Ipv4Addr::LOCALHOST, answer.qpn as u16));
        let est = wait(conn, "dat_evd_wait (connection)");
        if est.event_number != DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED {
            fail!("set-up: the accept reported event {:#x}", est.event_number);
        }
        let mut t =
            Target { dto, ep, lkey, base, win, peer, qpn: answer.qpn as u16, qkey: answer.qkey, secret: answer.secret, threads: 0, fds: 0 };
        // SAFETY: the whole mapping is ours.
        unsafe { std::ptr::write_bytes(base as *mut u8, GUARD, total) };
        t.threads = count_dir("/proc/self/task");
        t.fds = count_dir("/proc/self/fd");
        t
    }

    fn mem(&self) -> &mut [u8] {
        // SAFETY: the mapping lives as long as the process; the library writes into it only
        // while a receive is posted, and this harness reads it only once none is.
        unsafe { std::slice::from_raw_parts_mut(self.base as *mut u8, PAGE + WIN + PAGE) }
    }

    fn send(&self, d: &[u8]) {
        let _ = self.peer.send_to(d, (Ipv4Addr::LOCALHOST, self.qpn));
    }

    fn datagram(&self, payload: &[u8]) -> Vec<u8> {
        let h = Dgram { qkey: self.qkey, secret: self.secret, src_qpn: u32::from(self.our_port()), flags: 0, length: payload.len() as u32 };
        let mut d = h.encode().to_vec();
        d.extend_from_slice(payload);
        d
    }

    fn our_port(&self) -> u16 {
        self.peer.local_addr().map(|a| a.port()).unwrap_or(0)
    }
}

static TARGET: OnceLock<Target> = OnceLock::new();

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let take = n.min(self.0.len());
        let mut v = self.0[..take].to_vec();
        self.0 = &self.0[take..];
        v.resize(n, 0);
        v
    }
}

/// A receive posted this input: its cookie and segments (offsets in `win`, lengths).
struct Posted {
    cookie: u64,
    segs: Vec<(usize, usize)>,
}

fn post(t: &Target, cookie: u64, segs: &[(usize, usize)]) -> bool {
    let mut iov: Vec<DAT_LMR_TRIPLET> = segs
        .iter()
        .map(|&(off, len)| DAT_LMR_TRIPLET { lmr_context: t.lkey, virtual_address: (t.win + off) as u64, segment_length: len as u32 })
        .collect();
    // SAFETY: the triplets name memory of the registered window.
    ok("dat_ep_post_recv", unsafe { dat_ep_post_recv(t.ep, iov.len() as DAT_COUNT, iov.as_mut_ptr(), DAT_DTO_COOKIE { as_64: cookie }, 0) })
}

fn run(data: &[u8]) {
    let t = TARGET.get_or_init(Target::open);
    let mem = t.mem();
    mem[PAGE..PAGE + WIN].fill(UNTOUCHED);
    let mut inp = Input(data);
    let mut posted: Vec<Posted> = Vec::new();
    let mut next_slot = 0usize;
    // The payloads of the datagrams the device must accept, in the order sent.
    let mut valid: Vec<Vec<u8>> = Vec::new();
    while !inp.0.is_empty() {
        let a = inp.u8();
        if a < 0xa0 {
            let (qkey, secret) = match a & 3 {
                2 => (inp.u32(), t.secret),
                3 => (t.qkey, t.secret ^ 1),
                _ => (t.qkey, t.secret),
            };
            let length = (a & 4 != 0).then(|| inp.u32());
            let src = if a & 8 != 0 { u32::from(inp.u16()) } else { u32::from(t.our_port()) };
            let flags = if a & 0x10 != 0 { inp.u8() } else { 0 };
            let version = (a & 0x20 != 0).then(|| inp.u8());
            let magic = if a & 0x40 != 0 { DGRAM_MAGIC ^ u32::from(inp.u8()) } else { DGRAM_MAGIC };
            let n = usize::from(inp.u16()) % 4200;
            let payload = inp.bytes(n);
            let mut d = Dgram { qkey, secret, src_qpn: src, flags, length: length.unwrap_or(n as u32) }.encode().to_vec();
            d[0..4].copy_from_slice(&magic.to_le_bytes());
            if let Some(v) = version {
                d[20] = v;
            }
            d.extend_from_slice(&payload);
            // What the device must accept: the wire's own check, from the port it names.
            let lands = |h: Dgram| h.src_qpn == u32::from(t.our_port()) && h.flags != flag::PROOF && h.keys_are(t.qkey, t.secret);
            if Dgram::parse(&d, MTU).is_some_and(lands) {
                valid.push(payload);
            }
            t.send(&d);
        } else if a < 0xf0 {
            let count = usize::from(a & 3) + 1;
            let segs: Vec<(usize, usize)> = (0..count)
                .map(|_| {
                    let len = SIZES[usize::from(inp.u8()) % SIZES.len()] as usize;
                    let off = (next_slot % (SLOTS - 1)) * SLOT;
                    next_slot += 1;
                    (off, len)
                })
                .collect();
            // Slots are reused only once what was posted in them has completed.
            if posted.len() < MAX_RECVS - 1 && next_slot < SLOTS - 1 {
                let cookie = posted.len() as u64;
                if post(t, cookie, &segs) {
                    posted.push(Posted { cookie, segs });
                }
            } else {
                next_slot -= count;
            }
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // The sentinel: the last slot, and valid datagrams until its receive completes.
    let sentinel_slot = (SLOTS - 1) * SLOT;
    let marker = b"dat2-fuzz-sentinel".to_vec();
    if !post(t, SENTINEL, &[(sentinel_slot, SLOT)]) {
        fail!("the sentinel receive could not be posted");
    }
    posted.push(Posted { cookie: SENTINEL, segs: vec![(sentinel_slot, SLOT)] });
    let mut done: Vec<(u64, u32, u32)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    // One marker in flight at a time: each completion (or 20 ms without one) sends the next.
    loop {
        if Instant::now() > deadline {
            fail!("the sentinel never landed: {} receives posted, {} completed", posted.len(), done.len());
        }
        t.send(&t.datagram(&marker));
        let mut ev = DAT_EVENT::default();
        let mut n = 0;
        // SAFETY: valid out-pointers.
        let rc = unsafe { dat_evd_wait(t.dto, 20_000, 1, &mut ev, &mut n) };
        if !ok("dat_evd_wait", rc) {
            continue;
        }
        // SAFETY: the DTO EVD holds DTO (and IB DTO) events.
        let d = unsafe { ev.event_data.dto_completion_event_data };
        // SAFETY: a cookie is plain 64 bits.
        let cookie = unsafe { d.user_cookie.as_64 };
        if ev.event_number != DAT_IB_DTO_EVENT {
            fail!("completion event {:#x} on a UD EP", ev.event_number);
        }
        done.push((cookie, d.status, d.transfered_length));
        if cookie == SENTINEL {
            // Only a marker in the sentinel proves the input's datagrams were all read: one of
            // them may have filled it, with more still to come. Then it is posted again.
            let at = PAGE + sentinel_slot + GRH;
            let len = d.transfered_length as usize;
            if d.status == DAT_DTO_SUCCESS && len == GRH + marker.len() && t.mem()[at..at + marker.len()] == marker[..] {
                break;
            }
            if !post(t, SENTINEL, &[(sentinel_slot, SLOT)]) {
                fail!("the sentinel receive could not be posted again");
            }
            posted.push(Posted { cookie: SENTINEL, segs: vec![(sentinel_slot, SLOT)] });
        }
    }
    check(t, &posted, &done, &valid, &marker);
    let (threads, fds) = (count_dir("/proc/self/task"), count_dir("/proc/self/fd"));
    if threads > t.threads + 2 || fds > t.fds + 8 {
        fail!("threads {} -> {threads}, descriptors {} -> {fds}", t.threads, t.fds);
    }
}

/// Every receive completed in order, each with a payload the device had to accept (or a
/// local length error), landing GRH + payload and nothing else.
fn check(t: &Target, posted: &[Posted], done: &[(u64, u32, u32)], valid: &[Vec<u8>], marker: &[u8]) {
    let mem = t.mem();
    if done.len() != posted.len() || done.iter().zip(posted).any(|(d, p)| d.0 != p.cookie) {
        let got: Vec<u64> = done.iter().map(|d| d.0).collect();
        let want: Vec<u64> = posted.iter().map(|p| p.cookie).collect();
        fail!("receives completed as {got:?}, posted as {want:?}");
    }
    let mut next_valid = 0usize;
    let mut written = vec![false; WIN];
    for ((_, status, len), p) in done.iter().zip(posted) {
        let room: usize = p.segs.iter().map(|s| s.1).sum();
        if *status == DAT_DTO_ERR_LOCAL_LENGTH {
            // What a receive too short for its datagram holds is undefined, as on hardware.
            for &(off, n) in &p.segs {
                written[off..off + n].fill(true);
            }
            continue;
        }
        if *status != DAT_DTO_SUCCESS {
            fail!("a receive completed with status {status:#x}");
        }
        let len = *len as usize;
        if len < GRH || len > room {
            fail!("a receive of {room} bytes completed with length {len}");
        }
        // Gather what landed.
        let mut got = Vec::with_capacity(len);
        for &(off, n) in &p.segs {
            let take = n.min(len - got.len());
            got.extend_from_slice(&mem[PAGE + off..PAGE + off + take]);
            written[off..off + take].fill(true);
        }
        let sgid: [u8; 16] = got[8..24].try_into().unwrap_or_default();
        if got[0] >> 4 != 6 || sgid != Ipv4Addr::LOCALHOST.to_ipv6_mapped().octets() {
            fail!("the GRH does not name the sender: {:02x?}", &got[..GRH]);
        }
        let payload = &got[GRH..];
        if p.cookie == SENTINEL || payload == marker {
            continue;
        }
        match valid[next_valid..].iter().position(|v| v == payload) {
            Some(k) => next_valid += k + 1,
            None => fail!("a receive landed {} payload bytes that no acceptable datagram carried (in order)", payload.len()),
        }
    }
    for (k, &w) in written.iter().enumerate() {
        if !w && mem[PAGE + k] != UNTOUCHED {
            fail!("window byte {k} changed outside what completions report");
        }
    }
    if mem[..PAGE].iter().chain(&mem[PAGE + WIN..]).any(|&b| b != GUARD) {
        fail!("a guard page changed");
    }
}

fuzz_target!(|data: &[u8]| run(data));
