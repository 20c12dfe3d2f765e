//! Registrations in shared memory: the same-host path without a system call per transfer.
//!
//! Cross-memory attach copies through the kernel, which pins every page of both sides on every
//! call (about 12 GB/s on this machine kind, whatever the message size). When a registered range
//! lies in a shared mapping of a memfd sealed against shrinking (`F_SEAL_SHRINK`), as programs
//! that allocate their buffers in shared memory have it, the device keeps a mapping of the
//! range of its own (an alias), and a peer on the same host maps the same file: an RDMA write
//! between two such registrations is one `memcpy` between two mappings the library owns.
//!
//! Nothing here can fault: the library only copies between its own mappings, of files that
//! cannot shrink under them, within the bounds of the file; the program's mappings are never
//! touched directly, so memory it unmaps while registered cannot crash the library. The peer's
//! file is the peer's own descriptor, taken with `pidfd_getfd` from the verified peer process
//! (peer.rs; the same permission as cross-memory attach), with the access mode the peer opened
//! it with; our own files are published as descriptor numbers in our process (`Backing::fd`),
//! which a peer takes the same way. The request also carries the ordinary scatter list, so a target that
//! cannot map the initiator's file pulls the data with `process_vm_readv` as before.
//! `DAT2_SOFT_SHM=0` turns the path off.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::peer::PeerProcess;
use crate::util::sync::MutexExt;

/// Smaller registrations are not worth a look at /proc (and small transfers gain little).
pub const MIN_LEN: u64 = 64 << 10;

/// A registered range in a sealed memfd, and the library's own mapping of it.
pub struct Backing {
    /// Our duplicate of the program's descriptor: peers take it with pidfd_getfd, and it keeps
    /// the file alive while the registration is.
    file: File,
    ino: u64,
    /// The file offset of the range's first byte.
    offset: u64,
    /// The program's address of the range, and its length.
    addr: u64,
    len: u64,
    /// Our mapping, from the page holding `offset`.
    map: *mut u8,
    map_len: usize,
    /// `offset`'s distance from the mapping's start.
    delta: usize,
    /// The alias is writable (the registration had write access when it was made).
    writable: bool,
}

// SAFETY: the mapping is shared memory the library only copies into and out of; the rest is
// plain data and a file.
unsafe impl Send for Backing {}
// SAFETY: as above.
unsafe impl Sync for Backing {}

impl Drop for Backing {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// How a peer names the memory behind one scatter element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    pub fd: u32,
    pub ino: u64,
    pub offset: u64,
}

impl Backing {
    /// Where the program's bytes at `[addr, addr+len)` are in the file, if inside the range.
    pub fn source(&self, addr: u64, len: u64) -> Option<Source> {
        let end = addr.checked_add(len)?;
        (addr >= self.addr && end <= self.addr + self.len).then(|| Source {
            fd: self.file.as_raw_fd() as u32,
            ino: self.ino,
            offset: self.offset + (addr - self.addr),
        })
    }

    /// Our alias of the program's bytes at `[addr, addr+len)` for reading, if inside the range.
    pub fn view(&self, addr: u64, len: usize) -> Option<*const u8> {
        let end = addr.checked_add(len as u64)?;
        // SAFETY: inside our mapping, as in `alias`.
        (addr >= self.addr && end <= self.addr + self.len)
            .then(|| unsafe { self.map.add(self.delta + (addr - self.addr) as usize) } as *const u8)
    }

    /// Our writable alias of the program's bytes at `[addr, addr+len)`, if inside the range.
    pub fn alias(&self, addr: u64, len: usize) -> Option<*mut u8> {
        let end = addr.checked_add(len as u64)?;
        if !self.writable {
            return None;
        }
        // SAFETY: inside our mapping: `addr - self.addr + len <= self.len` and the mapping
        // covers `delta + self.len` bytes.
        (addr >= self.addr && end <= self.addr + self.len).then(|| unsafe { self.map.add(self.delta + (addr - self.addr) as usize) })
    }
}

pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::util::env::var("DAT2_SOFT_SHM").as_deref() != Some("0"))
}

fn page() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64
}

/// The mapping holding `[addr, addr+len)`, if it is shared, file-backed, and covers the whole
/// range. Returns (file offset of `addr`, device, inode).
fn shared_mapping(addr: u64, len: u64) -> Option<(u64, u64, u64)> {
    let end = addr.checked_add(len)?;
    let v = super::memory::Mappings::open().at(addr)?;
    (end <= v.end && v.shared && v.inode != 0).then(|| (v.offset + (addr - v.start), v.dev, v.inode))
}

/// A descriptor of ours for the file (`dev`, `ino`), sealed against shrinking: a duplicate of
/// one the program holds.
fn sealed_descriptor(dev: u64, ino: u64) -> Option<File> {
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        // SAFETY: plain data.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on a descriptor number; a closed or foreign one just fails.
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_ino != ino || st.st_dev != dev {
            continue;
        }
        // SAFETY: as above.
        let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return None;
        }
        // SAFETY: duplicating a descriptor the program holds; the new one is ours.
        // (3 or above: 0 means "no file" in the key table)
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if dup < 0 {
            return None;
        }
        // SAFETY: `dup` is a new descriptor we own.
        return Some(unsafe { File::from_raw_fd(dup) });
    }
    None
}

/// Maps `[offset, offset+len)` of `file` shared (read-write when `write`); returns the mapping,
/// its length and `offset`'s distance from its start. The file must be at least that long.
fn map(file: &File, offset: u64, len: u64, write: bool) -> Option<(*mut u8, usize, usize)> {
    let size = file.metadata().ok()?.len();
    if offset.checked_add(len)? > size {
        return None;
    }
    let first = offset & !(page() - 1);
    let delta = (offset - first) as usize;
    let map_len = delta + len as usize;
    let prot = if write { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
    // SAFETY: a new shared mapping of a file we hold, within its size.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), map_len, prot, libc::MAP_SHARED, file.as_raw_fd(), first as libc::off_t) };
    (p != libc::MAP_FAILED).then_some((p as *mut u8, map_len, delta))
}

/// The backing of a registration of `[addr, addr+len)`, when it is in a sealed memfd the
/// program holds a descriptor of.
pub fn backing(addr: u64, len: u64, write: bool) -> Option<Arc<Backing>> {
    if !enabled() || len < MIN_LEN {
        return None;
    }
    let (offset, dev, ino) = shared_mapping(addr, len)?;
    let file = sealed_descriptor(dev, ino)?;
    let (map, map_len, delta) = map(&file, offset, len, write)?;
    Some(Arc::new(Backing { file, ino, offset, addr, len, map, map_len, delta, writable: write }))
}

/// A peer's file, mapped read-only in whole (as long as it was when mapped).
struct PeerFile {
    pid: u32,
    fd: u32,
    ino: u64,
    writable: bool,
    map: *mut u8,
    len: usize,
}

// SAFETY: read-only shared memory, only copied from.
unsafe impl Send for PeerFile {}
// SAFETY: as above.
unsafe impl Sync for PeerFile {}

impl Drop for PeerFile {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

/// Peer files mapped by this process. A connection holds the ones it used (`Peers`), so a
/// file is unmapped when the last connection to that peer that used it ends.
fn mapped() -> &'static Mutex<Vec<Weak<PeerFile>>> {
    static FILES: OnceLock<Mutex<Vec<Weak<PeerFile>>>> = OnceLock::new();
    FILES.get_or_init(|| Mutex::new(Vec::new()))
}

/// The peer's file `src`, mapped for reading, or for writing too. It is the peer's own
/// descriptor (`pidfd_getfd`), never a reopening of the file with our rights: it must be open
/// for reading, and for writing too when we write into it (the peer may write with it).
fn open_peer(peer: &PeerProcess, src: Source, write: bool) -> Option<Arc<PeerFile>> {
    let pid = peer.pid()?;
    let mut files = mapped().locked();
    files.retain(|w| w.strong_count() > 0);
    if let Some(f) =
        files.iter().filter_map(|w| w.upgrade()).find(|f| f.pid == pid && f.fd == src.fd && f.ino == src.ino && f.writable == write)
    {
        return Some(f);
    }
    let file = File::from(peer.get_fd(src.fd)?);
    // SAFETY: fcntl on our own descriptor.
    let mode = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    let access = mode & libc::O_ACCMODE;
    if mode < 0 || mode & libc::O_PATH != 0 || access == libc::O_WRONLY || (write && access != libc::O_RDWR) {
        return None;
    }
    let meta = file.metadata().ok()?;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: fcntl on our own descriptor.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if meta.ino() != src.ino || seals < 0 || seals & libc::F_SEAL_SHRINK == 0 || meta.len() == 0 {
        return None;
    }
    let (map, len, _) = map(&file, 0, meta.len(), write)?;
    let f = Arc::new(PeerFile { pid, fd: src.fd, ino: src.ino, writable: write, map, len });
    files.push(Arc::downgrade(&f));
    Some(f)
}

/// The most peer files one connection keeps mapped.
const MAX_PEER_FILES: usize = 64;

/// The peer files one connection has used.
#[derive(Default)]
pub struct Peers(Vec<Arc<PeerFile>>);

impl Peers {
    fn file(&mut self, peer: &PeerProcess, src: Source, write: bool) -> Option<Arc<PeerFile>> {
        let pid = peer.pid()?;
        if let Some(f) = self.0.iter().find(|f| f.pid == pid && f.fd == src.fd && f.ino == src.ino && f.writable == write) {
            return Some(f.clone());
        }
        let f = open_peer(peer, src, write)?;
        // A long connection whose peer registers and frees many buffers keeps only the
        // latest files mapped.
        if self.0.len() >= MAX_PEER_FILES {
            self.0.remove(0);
        }
        self.0.push(f.clone());
        Some(f)
    }

    /// Copies the peer's bytes named by `srcs` (each with its length) into `dsts`, in order,
    /// the last `tail` bytes after the rest (with a release fence between, for programs that
    /// poll the end of a buffer). False when a file cannot be mapped or a range is outside
    /// it, or the lists differ in length: then part of the data may have been copied, and the
    /// caller moves all of it the ordinary way.
    pub fn copy(&mut self, peer: &PeerProcess, srcs: &[(Source, usize)], dsts: &[(*mut u8, usize)], tail: usize) -> bool {
        let total: usize = dsts.iter().map(|d| d.1).sum();
        if srcs.iter().map(|s| s.1).sum::<usize>() != total {
            return false;
        }
        let mut from = Vec::with_capacity(srcs.len());
        for &(src, len) in srcs {
            let Some(f) = self.file(peer, src, false) else { return false };
            if src.offset.checked_add(len as u64).is_none_or(|end| end > f.len as u64) {
                return false;
            }
            // SAFETY: inside our read-only mapping of a file that cannot shrink (checked
            // above); `f` is kept alive by `self`.
            from.push((unsafe { f.map.add(src.offset as usize) } as *const u8, len));
        }
        let cut = total.saturating_sub(tail);
        let (mut si, mut so, mut di, mut dof, mut done) = (0, 0, 0, 0, 0);
        while done < total {
            if done == cut {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            }
            let (s, sl) = from[si];
            let (d, dl) = dsts[di];
            let mut n = (sl - so).min(dl - dof);
            if done < cut {
                n = n.min(cut - done);
            }
            // SAFETY: the source range is inside a mapping checked above; the caller guarantees
            // each destination is a mapping of its own with room for its length (an alias,
            // see `Backing::alias`); the two never overlap (different mappings).
            unsafe { std::ptr::copy_nonoverlapping(s.add(so), d.add(dof), n) };
            so += n;
            dof += n;
            done += n;
            if so == sl {
                si += 1;
                so = 0;
            }
            if dof == dl {
                di += 1;
                dof = 0;
            }
        }
        true
    }

    /// Copies `srcs` (our own aliases, each with its length) into the peer's file at `dst`,
    /// in order, the last `tail` bytes last (as in `copy`). False when the file cannot be
    /// mapped writable or the range is outside it: nothing was copied.
    pub fn put(&mut self, peer: &PeerProcess, dst: Source, srcs: &[(*const u8, usize)], tail: usize) -> bool {
        let total: usize = srcs.iter().map(|s| s.1).sum();
        let Some(f) = self.file(peer, dst, true) else { return false };
        if dst.offset.checked_add(total as u64).is_none_or(|end| end > f.len as u64) {
            return false;
        }
        let cut = total.saturating_sub(tail);
        let mut done = 0;
        for &(s, l) in srcs {
            let mut at = 0;
            while at < l {
                if done == cut {
                    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                }
                let n = if done < cut { (l - at).min(cut - done) } else { l - at };
                // SAFETY: the destination lies inside our writable mapping of a file that
                // cannot shrink (checked above), kept alive by `self`; the caller guarantees
                // each source is a mapping of its own with its length readable.
                unsafe { std::ptr::copy_nonoverlapping(s.add(at), f.map.add(dst.offset as usize + done), n) };
                at += n;
                done += n;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd};

    use super::{backing, Peers, Source};
    use crate::device::soft::peer::PeerProcess;

    fn sealed_memfd(len: u64) -> (File, *mut u8) {
        // SAFETY: memfd_create with a static name.
        let fd = unsafe { libc::memfd_create(c"dat2-shm-test".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor we own.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        // SAFETY: fcntl on our descriptor.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) }, 0);
        // SAFETY: mapping our own file.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        (f, p as *mut u8)
    }

    #[test]
    fn finds_sealed_memfd_and_copies_through_aliases() {
        let len = 1u64 << 20;
        let (_f1, a) = sealed_memfd(len);
        let (_f2, b) = sealed_memfd(len);
        // SAFETY: our own mappings, of `len` bytes each.
        unsafe {
            for i in 0..len as usize {
                *a.add(i) = (i % 251) as u8;
            }
        }
        let off = 4096 + 100;
        let src = backing(a as u64 + off, len - off, false).expect("a sealed memfd is found");
        let dst = backing(b as u64, len, true).expect("and the other");
        let s = src.source(a as u64 + off, 1000).expect("inside");
        assert_eq!(s.offset, off);
        assert!(src.source(a as u64, 10).is_none(), "before the range");
        let me = &PeerProcess::own();
        let mut peers = Peers::default();
        let to = dst.alias(b as u64 + 8, 1000).unwrap();
        // Two source pieces into two destination pieces, cut differently.
        let s2 = Source { offset: s.offset + 300, ..s };
        let to2 = dst.alias(b as u64 + 8 + 600, 400).unwrap();
        assert!(peers.copy(me, &[(s, 300), (s2, 700)], &[(to, 600), (to2, 400)], 64));
        // SAFETY: our own mapping.
        unsafe {
            for i in 0..1000 {
                assert_eq!(*b.add(8 + i), ((off as usize + i) % 251) as u8);
            }
        }
        // Out of the file: refused, nothing read.
        assert!(!peers.copy(me, &[(Source { offset: len - 10, ..s }, 100)], &[(to, 100)], 64));
        // Writing into the other file through its descriptor, as a peer initiator does.
        let d = dst.source(b as u64 + 2000, 100).unwrap();
        let from = src.view(a as u64 + off, 100).unwrap();
        assert!(peers.put(me, d, &[(from, 40), (from.wrapping_add(40), 60)], 64));
        // SAFETY: our own mapping.
        unsafe {
            for i in 0..100 {
                assert_eq!(*b.add(2000 + i), ((off as usize + i) % 251) as u8);
            }
        }
        assert!(!peers.put(me, Source { offset: len - 50, ..d }, &[(from, 100)], 0), "past the end of the file");
        // A descriptor of the same file open read-only: never written through.
        let ro = File::open(format!("/proc/self/fd/{}", d.fd)).unwrap();
        assert!(!Peers::default().put(me, Source { fd: ro.as_raw_fd() as u32, ..d }, &[(from, 10)], 0), "a read-only descriptor");
        assert!(Peers::default().copy(me, &[(Source { fd: ro.as_raw_fd() as u32, ..d }, 10)], &[(to, 10)], 0), "but read through");
        // Nor read through a write-only one, or an O_PATH one: the peer could not read with it.
        let wo = std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", d.fd)).unwrap();
        assert!(!Peers::default().copy(me, &[(Source { fd: wo.as_raw_fd() as u32, ..d }, 10)], &[(to, 10)], 0), "a write-only descriptor");
        let path = CString::new(format!("/proc/self/fd/{}", d.fd)).unwrap();
        // SAFETY: open with O_PATH of a C string; the descriptor is ours.
        let op = unsafe { File::from_raw_fd(libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC)) };
        assert!(!Peers::default().copy(me, &[(Source { fd: op.as_raw_fd() as u32, ..d }, 10)], &[(to, 10)], 0), "an O_PATH descriptor");
        // Lists of different lengths, and an inode that does not match: refused.
        assert!(!peers.copy(me, &[(s, 100)], &[(to, 99)], 0));
        assert!(!Peers::default().copy(me, &[(Source { ino: s.ino + 1, ..s }, 10)], &[(to, 10)], 0));
    }

    #[test]
    fn private_and_unsealed_memory_has_no_backing() {
        let v = vec![0u8; 1 << 20];
        assert!(backing(v.as_ptr() as u64, v.len() as u64, true).is_none());
        // SAFETY: memfd_create with a static name, no sealing allowed.
        let fd = unsafe { libc::memfd_create(c"dat2-unsealed".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: a new descriptor we own.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(1 << 20).unwrap();
        // SAFETY: mapping our own file.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), 1 << 20, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        assert!(backing(p as u64, 1 << 20, true).is_none(), "a file that may shrink is not used");
        // SAFETY: our mapping.
        unsafe { libc::munmap(p, 1 << 20) };
    }
}
