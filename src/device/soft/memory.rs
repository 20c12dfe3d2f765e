//! Checking that memory is really there before it is registered.
//!
//! An HCA pins the pages of a registration and fails on unmapped or read-only memory; the soft
//! device has to find that out without touching the memory (a fault would kill the process).
//! Readability is probed with `process_vm_readv` on our own process, one byte per page: the
//! kernel reports EFAULT instead of delivering SIGSEGV. Writability (for write or atomic
//! access) is asked of `/proc/self/maps` one mapping at a time with the `PROCMAP_QUERY` ioctl
//! (Linux 6.11), or, on older kernels, read from its text. The text lists every mapping of the
//! process with its path, which costs tens of microseconds per registration; the ioctl answers
//! for one address in about one.

/// Whether every page of `[addr, addr+len)` is mapped and readable.
pub fn readable(addr: u64, len: u64, page: u64) -> Result<bool, ()> {
    const BATCH: usize = 1024;
    let first = addr & !(page - 1);
    let end = addr.checked_add(len).ok_or(())?;
    let mut scratch = [0u8; BATCH];
    let mut local = Vec::with_capacity(BATCH);
    let mut remote = Vec::with_capacity(BATCH);
    let mut p = first;
    while p < end {
        local.clear();
        remote.clear();
        while p < end && remote.len() < BATCH {
            let at = p.max(addr);
            let i = remote.len();
            local.push(libc::iovec { iov_base: scratch[i..].as_mut_ptr().cast(), iov_len: 1 });
            remote.push(libc::iovec { iov_base: at as *mut libc::c_void, iov_len: 1 });
            p += page;
        }
        // SAFETY: `local` points into our scratch buffer (one byte each); the kernel only reads
        // the remote ranges and reports faults as a short count or EFAULT.
        let n =
            unsafe { libc::process_vm_readv(libc::getpid(), local.as_ptr(), local.len() as u64, remote.as_ptr(), remote.len() as u64, 0) };
        if n < 0 {
            let err = std::io::Error::last_os_error().raw_os_error();
            return match err {
                Some(libc::EFAULT) => Ok(false),
                // The kernel forbids cross-memory access here: the caller falls back to maps.
                _ => Err(()),
            };
        }
        if n as usize != remote.len() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether every byte of `[addr, addr+len)` is mapped readable, and writable if asked.
/// Writability is asked afresh every time: a cached view could still show memory as writable
/// after the program made it read-only.
pub fn accessible(addr: u64, len: u64, write: bool, page: u64) -> bool {
    let Some(end) = addr.checked_add(len) else { return false };
    if addr == 0 {
        return false;
    }
    match readable(addr, len, page) {
        Ok(false) => return false,
        Ok(true) if !write => return true,
        _ => {}
    }
    Mappings::open().covered(addr, end, write)
}

/// One mapping of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub shared: bool,
    /// File offset of `start` (0 for anonymous memory).
    pub offset: u64,
    pub inode: u64,
    pub dev: u64,
}

/// `struct procmap_query` (include/uapi/linux/fs.h), 104 bytes.
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const _: () = assert!(core::mem::size_of::<ProcmapQuery>() == 104);
/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: u64 = 0xC068_6611;
const VMA_READABLE: u64 = 0x01;
const VMA_WRITABLE: u64 = 0x02;
const VMA_SHARED: u64 = 0x08;

/// Whether this kernel answers `PROCMAP_QUERY` (0 unknown, 1 yes, 2 no).
static QUERY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The process's mappings, looked up by address: asked of `/proc/self/maps` with
/// `PROCMAP_QUERY` (its descriptor is opened per use, closed on drop: one kept open would go on
/// describing the parent's memory in a fork child), or, on kernels without it, its text read
/// once.
pub enum Mappings {
    Query(i32),
    Text(Vec<Vma>),
}

impl Mappings {
    pub fn open() -> Mappings {
        use std::sync::atomic::Ordering::Relaxed;
        if QUERY.load(Relaxed) != 2 {
            // SAFETY: a constant NUL-terminated path; the descriptor is ours.
            let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd >= 0 {
                let maps = Mappings::Query(fd);
                if QUERY.load(Relaxed) == 1 {
                    return maps;
                }
                // Ask about an address that is surely mapped: this function's own code.
                let works = maps.at(Mappings::open as fn() -> Mappings as usize as u64).is_some();
                QUERY.store(if works { 1 } else { 2 }, Relaxed);
                if works {
                    return maps;
                }
            }
        }
        Mappings::Text(read_maps())
    }

    /// The mapping holding `addr`, if one does.
    pub fn at(&self, addr: u64) -> Option<Vma> {
        match self {
            Mappings::Query(fd) => {
                let mut q = ProcmapQuery { size: core::mem::size_of::<ProcmapQuery>() as u64, query_addr: addr, ..Default::default() };
                // SAFETY: PROCMAP_QUERY reads and writes the struct on our stack, whose size it
                // is told; no name or build id buffers are asked for (their sizes are 0).
                let rc = unsafe { libc::ioctl(*fd, PROCMAP_QUERY as _, &mut q as *mut ProcmapQuery) };
                (rc == 0).then(|| Vma {
                    start: q.vma_start,
                    end: q.vma_end,
                    read: q.vma_flags & VMA_READABLE != 0,
                    write: q.vma_flags & VMA_WRITABLE != 0,
                    shared: q.vma_flags & VMA_SHARED != 0,
                    offset: q.vma_offset,
                    inode: q.inode,
                    dev: libc::makedev(q.dev_major, q.dev_minor),
                })
            }
            Mappings::Text(maps) => maps.get(maps.partition_point(|m| m.end <= addr)).filter(|m| m.start <= addr).copied(),
        }
    }

    /// Whether mappings cover `[addr, end)` without gaps, readable (and writable if asked).
    fn covered(&self, addr: u64, end: u64, want_write: bool) -> bool {
        let mut at = addr;
        while at < end {
            match self.at(at) {
                Some(v) if v.read && (v.write || !want_write) && v.end > at => at = v.end,
                _ => return false,
            }
        }
        true
    }
}

impl Drop for Mappings {
    fn drop(&mut self) {
        if let Mappings::Query(fd) = self {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(*fd) };
        }
    }
}

/// The text of `/proc/self/maps`, sorted by address as the kernel writes it.
fn read_maps() -> Vec<Vma> {
    let Ok(text) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (s, e) = f.next()?.split_once('-')?;
            let perms = f.next()?.as_bytes();
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let (maj, min) = f.next()?.split_once(':')?;
            Some(Vma {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                read: perms.first() == Some(&b'r'),
                write: perms.get(1) == Some(&b'w'),
                shared: perms.get(3) == Some(&b's'),
                offset,
                dev: libc::makedev(u32::from_str_radix(maj, 16).ok()?, u32::from_str_radix(min, 16).ok()?),
                inode: f.next()?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{accessible, read_maps, Mappings};

    fn page() -> u64 {
        // SAFETY: sysconf has no preconditions.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
    }

    /// The ioctl and the text agree, mapping by mapping.
    #[test]
    fn procmap_query_agrees_with_the_text() {
        let maps = Mappings::open();
        if !matches!(maps, Mappings::Query(_)) {
            eprintln!("procmap_query_agrees_with_the_text: skipped, this kernel has no PROCMAP_QUERY (before 6.11)");
            return;
        }
        let v = vec![7u8; 1 << 20];
        // SAFETY: fresh anonymous memory for the test: 3 pages, the middle one read-only.
        let p = unsafe {
            libc::mmap(core::ptr::null_mut(), 3 * 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        let a = p as u64;
        // SAFETY: our own mapping.
        unsafe { libc::mprotect((a + 4096) as *mut _, 4096, libc::PROT_READ) };
        let text = Mappings::Text(read_maps());
        for &(addr, len) in &[(v.as_ptr() as u64, v.len() as u64), (a, 4096), (a, 3 * 4096), (a + 4096, 4096), (a + 8192, 4096)] {
            for write in [false, true] {
                assert_eq!(
                    maps.covered(addr, addr + len, write),
                    text.covered(addr, addr + len, write),
                    "[{addr:#x}, +{len:#x}) write {write}"
                );
            }
        }
        // Mappings no other thread can change: our read-only page, and the library's own code
        // (file-backed: offset, device and inode).
        let code = Mappings::open as fn() -> Mappings as usize as u64;
        for addr in [a + 4096, code] {
            assert_eq!(maps.at(addr), text.at(addr), "mapping at {addr:#x}");
        }
        assert!(maps.at(code).is_some_and(|v| v.inode != 0 && !v.shared && !v.write));
        assert!(!maps.covered(a, a + 3 * 4096, true) && maps.covered(a, a + 3 * 4096, false));
        let mid = maps.at(a + 4096).expect("mapped");
        assert_eq!((mid.start, mid.end, mid.read, mid.write, mid.shared), (a + 4096, a + 8192, true, false, false));
        // SAFETY: our own mapping.
        unsafe { libc::munmap(p, 3 * 4096) };
    }

    #[test]
    fn heap_is_accessible_and_holes_are_not() {
        let v = vec![0u8; 1 << 20];
        assert!(accessible(v.as_ptr() as u64, v.len() as u64, true, page()));
        // Far below where the kernel places mappings made without a hint: once this one is
        // unmapped, no other test's thread maps the same addresses meanwhile.
        let hint = 0x2000_0000_0000usize as *mut libc::c_void;
        // SAFETY: mapping fresh anonymous memory for the test; MAP_FIXED_NOREPLACE never replaces
        // an existing mapping.
        let p = unsafe {
            libc::mmap(hint, 3 * 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap at {hint:?}: {}", std::io::Error::last_os_error());
        let a = p as u64;
        assert!(accessible(a, 3 * 4096, false, page()));
        assert!(!accessible(a, 3 * 4096, true, page()), "read-only memory must not register for write");
        // SAFETY: the middle page of our own mapping.
        unsafe { libc::mprotect((a + 4096) as *mut _, 4096, libc::PROT_NONE) };
        assert!(!accessible(a, 3 * 4096, false, page()));
        assert!(accessible(a, 4096, false, page()));
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(p, 3 * 4096) };
        assert!(!accessible(a, 4096, false, page()));
        assert!(!accessible(0, 10, false, page()));
    }
}
