//! Checking that memory is really there before it is registered.
//!
//! An HCA pins the pages of a registration and fails on unmapped or read-only memory; the soft
//! device has to find that out without touching the memory (a fault would kill the process).
//! Readability is probed with `process_vm_readv` on our own process, one byte per page: the
//! kernel reports EFAULT instead of delivering SIGSEGV. Writability (for write or atomic
//! access) is read from `/proc/self/maps`.

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
        let n = unsafe { libc::process_vm_readv(libc::getpid(), local.as_ptr(), local.len() as u64, remote.as_ptr(), remote.len() as u64, 0) };
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

#[derive(Clone, Copy)]
struct Mapping {
    start: u64,
    end: u64,
    read: bool,
    write: bool,
}

fn read_maps() -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?.as_bytes();
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                read: perms.first() == Some(&b'r'),
                write: perms.get(1) == Some(&b'w'),
            })
        })
        .collect()
}

/// Whether `maps` (sorted by address) covers `[addr, end)` without gaps with the permission.
fn covered(maps: &[Mapping], addr: u64, end: u64, want_write: bool) -> bool {
    let mut at = addr;
    let start = maps.partition_point(|m| m.end <= at);
    for m in &maps[start..] {
        if at >= end {
            break;
        }
        if m.start > at || !m.read || (want_write && !m.write) {
            return false;
        }
        at = m.end;
    }
    at >= end
}

/// Whether every byte of `[addr, addr+len)` is mapped readable, and writable if asked.
/// Writability is read from a fresh `/proc/self/maps` every time: a cached view could still
/// show memory as writable after the program made it read-only.
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
    covered(&read_maps(), addr, end, write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> u64 {
        // SAFETY: sysconf has no preconditions.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
    }

    #[test]
    fn heap_is_accessible_and_holes_are_not() {
        let v = vec![0u8; 1 << 20];
        assert!(accessible(v.as_ptr() as u64, v.len() as u64, true, page()));
        // SAFETY: mapping fresh anonymous memory for the test.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), 3 * 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(p, libc::MAP_FAILED);
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
