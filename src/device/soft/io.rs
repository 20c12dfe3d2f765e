//! Moving bytes between sockets and registered memory without ever faulting: the kernel copies
//! to and from user memory for `recv`/`writev` and for cross-memory attach, and reports a bad
//! address as EFAULT instead of a signal.

use std::io;
use std::os::fd::RawFd;

/// Receives exactly `len` bytes into memory at `addr`.
pub fn recv_into(fd: RawFd, addr: u64, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        // SAFETY: the kernel writes at most `len - done` bytes at addr+done, which the caller
        // validated against a registration; a bad address fails with EFAULT.
        let n = unsafe { libc::recv(fd, (addr as usize + done) as *mut libc::c_void, len - done, libc::MSG_WAITALL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n as usize;
    }
    Ok(())
}

/// Receives what has come, up to `len` bytes, into memory at `addr`, without waiting; how
/// many bytes (0: nothing has come). The end of the stream is an error.
pub fn recv_some(fd: RawFd, addr: u64, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: the kernel writes at most `len` bytes at addr, which the caller validated
        // against a registration; a bad address fails with EFAULT.
        let n = unsafe { libc::recv(fd, addr as *mut libc::c_void, len, libc::MSG_DONTWAIT) };
        if n > 0 {
            return Ok(n as usize);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// Receives and discards `len` bytes.
pub fn discard(fd: RawFd, mut len: usize) -> io::Result<()> {
    let mut scratch = vec![0u8; len.min(1 << 16)];
    while len > 0 {
        let n = len.min(scratch.len());
        recv_into(fd, scratch.as_mut_ptr() as u64, n)?;
        len -= n;
    }
    Ok(())
}

/// A few scatter elements stay on the stack (the data path allocates nothing for them).
type Iovecs = smallvec::SmallVec<[libc::iovec; 4]>;

/// Up to four filled in place: a filtered collect goes through SmallVec's generic `extend`,
/// which costs several times as much on every send.
fn iovecs(segs: &[(u64, usize)]) -> Iovecs {
    let iovec = |&(a, l): &(u64, usize)| libc::iovec { iov_base: a as *mut libc::c_void, iov_len: l };
    let mut buf = [libc::iovec { iov_base: core::ptr::null_mut(), iov_len: 0 }; 4];
    if segs.len() > buf.len() {
        return segs.iter().filter(|s| s.1 > 0).map(iovec).collect();
    }
    let mut n = 0;
    for s in segs.iter().filter(|s| s.1 > 0) {
        buf[n] = iovec(s);
        n += 1;
    }
    Iovecs::from_buf_and_len(buf, n)
}

fn total(segs: &[(u64, usize)]) -> usize {
    segs.iter().map(|s| s.1).sum()
}

/// Copies from process `pid`'s memory `remote` into our memory `local`
/// (cross-memory attach). Both lists must hold the same number of bytes.
pub fn pull(pid: u32, local: &[(u64, usize)], remote: &[(u64, usize)]) -> io::Result<()> {
    let (l, r) = (iovecs(local), iovecs(remote));
    // SAFETY: the kernel checks both address lists and reports faults as errors.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, l.as_ptr(), l.len() as u64, r.as_ptr(), r.len() as u64, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != total(local) {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(())
}

/// Copies our memory `local` into process `pid`'s memory `remote`.
pub fn push(pid: u32, local: &[(u64, usize)], remote: &[(u64, usize)]) -> io::Result<()> {
    let (l, r) = (iovecs(local), iovecs(remote));
    // SAFETY: as in `pull`.
    let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, l.as_ptr(), l.len() as u64, r.as_ptr(), r.len() as u64, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != total(local) {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(())
}

/// Reads a u64 from our own memory without risking a fault.
pub fn read_u64(addr: u64) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: pid is our own; `v` is a local of the right size.
    pull(unsafe { libc::getpid() } as u32, &[(&mut v as *mut u64 as u64, 8)], &[(addr, 8)])?;
    Ok(v)
}

/// Writes a u64 into our own memory without risking a fault.
pub fn write_u64(addr: u64, v: u64) -> io::Result<()> {
    // SAFETY: pid is our own.
    push(unsafe { libc::getpid() } as u32, &[(&v as *const u64 as u64, 8)], &[(addr, 8)])
}

/// Copies a buffer into our own memory (a receive filled from buffered data).
pub fn scatter(buf: &[u8], segs: &[(u64, usize)]) -> io::Result<()> {
    let mut off = 0;
    let mut parts = Vec::new();
    for &(a, l) in segs {
        let n = l.min(buf.len() - off);
        if n == 0 {
            break;
        }
        parts.push((a, n));
        off += n;
    }
    // SAFETY: pid is our own; the source is `buf`.
    push(unsafe { libc::getpid() } as u32, &[(buf.as_ptr() as u64, off)], &parts)
}

/// Sends `parts` without blocking; returns how many bytes went out (possibly 0, or fewer than
/// all when there are more than IOV_MAX parts).
pub fn try_write(fd: RawFd, parts: &[(u64, usize)]) -> io::Result<usize> {
    let mut iov = iovecs(parts);
    // SAFETY: an all-zero msghdr is valid; we then point it at our iovecs.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len().min(1024);
    loop {
        // SAFETY: the iovecs name our own buffers; MSG_DONTWAIT never blocks, MSG_NOSIGNAL never
        // raises SIGPIPE.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// Whether a socket takes more data now (no peer holding it full); false on any error.
pub fn writable(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one pollfd of our own; a zero timeout never waits.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLOUT != 0
}

/// The receiving side of a connection: frames are read through a small buffer, so that one
/// `recv` usually brings a header together with a small payload (and often the next frames).
/// Buffered payload bytes reach registered memory through `scatter` (never faulting); what
/// the buffer does not hold is received straight into place.
pub struct Rx {
    fd: RawFd,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

/// The receive buffer's size: a few small frames, not bulk data.
pub const RX_BUF: usize = 4096;

impl Rx {
    pub fn new(fd: RawFd) -> Rx {
        Rx { fd, buf: vec![0u8; RX_BUF].into_boxed_slice(), start: 0, end: 0 }
    }

    /// The socket.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Bytes buffered and not consumed yet.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Receives what the socket holds into the buffer (waiting for at least one byte when
    /// `block`); Ok(false): nothing came without waiting.
    pub fn fill(&mut self, block: bool) -> io::Result<bool> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let room = self.buf.len() - self.end;
        let flags = if block { 0 } else { libc::MSG_DONTWAIT };
        loop {
            // SAFETY: the kernel writes at most `room` bytes into our own buffer's free part.
            let n = unsafe { libc::recv(self.fd, self.buf[self.end..].as_mut_ptr() as *mut libc::c_void, room, flags) };
            if n > 0 {
                self.end += n as usize;
                return Ok(true);
            }
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock if !block => return Ok(false),
                _ => return Err(e),
            }
        }
    }

    /// The first `n` bytes buffered, when that many are.
    pub fn peek(&self, n: usize) -> Option<&[u8]> {
        (self.buffered() >= n).then(|| &self.buf[self.start..self.start + n])
    }

    /// The next `N` bytes (a header), waiting for them.
    pub fn take_array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        while self.buffered() < N {
            self.fill(true)?;
        }
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[self.start..self.start + N]);
        self.start += N;
        Ok(a)
    }

    /// The next `len` bytes, as a vector.
    pub fn take_vec(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        let n = self.buffered().min(len);
        v[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        if n < len {
            recv_into(self.fd, v[n..].as_mut_ptr() as u64, len - n)?;
        }
        Ok(v)
    }

    /// Moves the next bytes of the stream into memory at `segs`, in order: what is buffered
    /// in one copy, the rest straight from the socket.
    pub fn land(&mut self, segs: &[(u64, usize)]) -> io::Result<()> {
        let want = total(segs);
        let n = self.buffered().min(want);
        let (inbuf, rest) = split_at(segs, n);
        if n > 0 {
            scatter(&self.buf[self.start..self.start + n], &inbuf)?;
            self.start += n;
        }
        for (a, l) in rest {
            recv_into(self.fd, a, l)?;
        }
        Ok(())
    }

    /// Moves what has come of the stream (up to `max` bytes) into the first of `segs`,
    /// without waiting: from the buffer, else straight from the socket. How many bytes moved
    /// (0: none have come); the segments left are trimmed accordingly.
    pub fn land_some(&mut self, segs: &mut Segs, max: usize) -> io::Result<usize> {
        let Some(&(addr, len)) = segs.first() else { return Ok(0) };
        let want = len.min(max);
        let n = if self.buffered() > 0 {
            let n = self.buffered().min(want);
            scatter(&self.buf[self.start..self.start + n], &[(addr, n)])?;
            self.start += n;
            n
        } else {
            match recv_some(self.fd, addr, want)? {
                0 => return Ok(0),
                n => n,
            }
        };
        if n == len {
            segs.remove(0);
        } else {
            segs[0] = (addr + n as u64, len - n);
        }
        Ok(n)
    }

    /// Consumes up to `len` bytes without using them, without waiting; how many.
    pub fn discard_some(&mut self, len: usize) -> io::Result<usize> {
        if self.buffered() == 0 && !self.fill(false)? {
            return Ok(0);
        }
        let n = self.buffered().min(len);
        self.start += n;
        Ok(n)
    }

    /// Appends to `v` what has come of the stream, until it holds `len` bytes, without
    /// waiting; whether it does.
    pub fn take_some(&mut self, v: &mut Vec<u8>, len: usize) -> io::Result<bool> {
        while v.len() < len {
            if self.buffered() == 0 && !self.fill(false)? {
                return Ok(false);
            }
            let n = self.buffered().min(len - v.len());
            v.extend_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
        }
        Ok(true)
    }

    /// Consumes `len` bytes without using them.
    pub fn discard(&mut self, len: usize) -> io::Result<()> {
        let n = self.buffered().min(len);
        self.start += n;
        if n < len {
            discard(self.fd, len - n)?;
        }
        Ok(())
    }
}

/// How many bytes at the end of a transfer land in a copy of their own.
pub const TAIL: usize = 64;

/// A scatter list: (address, length) segments.
pub type Segs = Vec<(u64, usize)>;

/// Splits a scatter list at byte offset `at`: (the first `at` bytes, the rest).
pub fn split_at(segs: &[(u64, usize)], at: usize) -> (Segs, Segs) {
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let mut off = 0;
    for &(a, l) in segs {
        if off + l <= at {
            head.push((a, l));
        } else if off >= at {
            tail.push((a, l));
        } else {
            let k = at - off;
            head.push((a, k));
            tail.push((a + k as u64, l - k));
        }
        off += l;
    }
    (head, tail)
}

/// Splits a transfer into (everything but the last TAIL bytes, the last TAIL bytes).
///
/// Programs commonly poll the last byte of an RDMA target to learn that the data arrived.
/// The kernel copies with fast string instructions, whose stores may become visible out of
/// order, so the last bytes are copied separately, after the rest, as an HCA's in-order DMA
/// would make them visible.
pub fn split_tail(segs: &[(u64, usize)]) -> (Segs, Segs) {
    let total: usize = segs.iter().map(|s| s.1).sum();
    split_at(segs, total.saturating_sub(TAIL))
}

#[cfg(test)]
mod tests {
    use super::{split_at, split_tail};

    #[test]
    fn splits() {
        let segs = vec![(100u64, 50usize), (1000, 50)];
        assert_eq!(split_at(&segs, 70), (vec![(100, 50), (1000, 20)], vec![(1020, 30)]));
        assert_eq!(split_tail(&segs), (vec![(100, 36)], vec![(136, 14), (1000, 50)]));
        assert_eq!(split_tail(&[(5, 10)]), (vec![], vec![(5, 10)]));
    }
}
