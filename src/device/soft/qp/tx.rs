//! The send side of a soft QP: frames queued for the writer thread (the reader's way: it
//! never blocks), or written at once by the posting thread when the socket is idle; the
//! writer thread itself; acknowledgements riding on frames (see wire.rs).

use super::*;
use crate::util::sync::{CondvarExt, MutexExt};

impl SoftQp {
    /// Queues a frame for the writer thread (the reader thread's way: it must never block).
    pub(super) fn send_frame(&self, frame: Frame) {
        self.queue_frame(frame, false);
    }

    pub(super) fn queue_frame(&self, mut frame: Frame, hold: bool) {
        let mut q = self.out.queue.locked();
        if q.closed || !stamp(&mut q, &mut frame) {
            return;
        }
        push_frame(&mut q, frame);
        q.held |= hold;
        self.out.cv.notify_one();
    }

    /// Queues `frame` and holds it, and everything queued after it, until `release_frames`:
    /// frames that other threads send meanwhile queue behind it (the queue is not empty).
    pub(super) fn hold_frame(&self, frame: Frame) {
        self.queue_frame(frame, true);
    }

    pub(super) fn release_frames(&self) {
        let mut q = self.out.queue.locked();
        q.held = false;
        self.out.cv.notify_one();
    }

    /// A response that carries data (a READ's or an atomic's) has gone to the socket: the peer
    /// may have another read in flight (see `reads_in`).
    pub(super) fn answered(&self, frame: &Frame) {
        if frame.hdr.op == op::RESPONSE && matches!(frame.data, FrameData::Memory(..) | FrameData::Bytes(_)) {
            let _ = self.reads_in.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    /// Stamps a frame entering the stream; returns it with the queue's lock when the caller may
    /// write it itself (nobody is writing, nothing waits before it), and otherwise queues it
    /// for the writer thread (or drops it when the connection is closed, or it is an ACK with
    /// nothing left to carry).
    fn idle_or_queue(&self, mut frame: Frame) -> Option<(MutexGuard<'_, OutState>, Frame)> {
        let mut q = self.out.queue.locked();
        if q.closed || !stamp(&mut q, &mut frame) {
            return None;
        }
        if q.busy || !q.frames.is_empty() || q.fd < 0 {
            push_frame(&mut q, frame);
            self.out.cv.notify_one();
            return None;
        }
        Some((q, frame))
    }

    /// Sends a small frame (no memory payload) from the reader thread without blocking: what the
    /// socket does not take at once is queued, in order, for the writer thread.
    pub(super) fn send_frame_now(&self, frame: Frame) {
        if matches!(frame.data, FrameData::Memory(..)) || frame.last {
            return self.send_frame(frame);
        }
        let Some((mut q, frame)) = self.idle_or_queue(frame) else { return };
        let mut bytes = frame.hdr.encode().to_vec();
        if let FrameData::Bytes(b) = &frame.data {
            bytes.extend_from_slice(b);
        }
        // Held under the queue lock: a non-blocking send is short, and nobody else may write.
        let sent = io::try_write(q.fd, &[(bytes.as_ptr() as u64, bytes.len())]);
        if sent.is_ok() {
            self.answered(&frame);
        }
        match sent {
            Ok(n) if n == bytes.len() => {}
            Ok(n) => {
                // The rest goes out as raw bytes first, before anything queued later.
                let rest = bytes[n..].to_vec();
                q.frames.push_front(Frame { hdr: Hdr::default(), data: FrameData::Raw(rest), last: false });
                self.out.cv.notify_one();
            }
            Err(_) => {
                q.closed = true;
                q.frames.clear();
                self.out.cv.notify_all();
            }
        }
    }

    /// Sends a frame from the posting thread itself when nothing else is being written (no
    /// hand-off to the writer thread on the latency path); otherwise queues it.
    pub(super) fn send_frame_direct(&self, frame: Frame) {
        let Some((mut q, frame)) = self.idle_or_queue(frame) else { return };
        q.busy = true;
        let fd = q.fd;
        drop(q);
        let ok = self.write_frame(fd, &frame);
        let mut q = self.out.queue.locked();
        q.busy = false;
        if !ok || frame.last {
            q.closed = true;
            q.frames.clear();
            // SAFETY: shutting down our own connected socket.
            unsafe { libc::shutdown(fd, if ok { libc::SHUT_WR } else { libc::SHUT_RDWR }) };
            self.out.cv.notify_all();
        } else if !q.frames.is_empty() {
            // Frames queued meanwhile: the writer thread takes over (it is not woken otherwise).
            self.out.cv.notify_one();
        }
    }

    /// Writes one frame (header and data); false when the connection failed, or when memory
    /// the frame carries was revoked before it went out (lease.rs).
    pub(super) fn write_frame(&self, fd: i32, frame: &Frame) -> bool {
        if let FrameData::Raw(b) = &frame.data {
            return io::write_all(fd, &[(b.as_ptr() as u64, b.len())]).is_ok();
        }
        let hdr = frame.hdr.encode();
        let mut parts = vec![(hdr.as_ptr() as u64, HDR_LEN)];
        let mut leases = None;
        match &frame.data {
            FrameData::None | FrameData::Raw(_) => {}
            FrameData::Bytes(b) => parts.push((b.as_ptr() as u64, b.len())),
            FrameData::Memory(m, sets) => {
                leases = self.leases(sets, Via::Socket(fd));
                if leases.is_none() {
                    crate::dbg_log!(
                        crate::log::DbgType::PROVIDER_API,
                        "soft QP {}: memory revoked before it was sent: the connection ends",
                        self.id
                    );
                    return false;
                }
                parts.extend_from_slice(m);
            }
        }
        let ok = io::write_all(fd, &parts).is_ok();
        drop(leases);
        ok
    }

    // -----------------------------------------------------------------------------------------
    // The writer.

    pub(super) fn writer(&self, stream: TcpStream) {
        let fd = stream.as_raw_fd();
        self.out.queue.locked().fd = fd;
        loop {
            let frame = {
                let mut q = self.out.queue.locked();
                loop {
                    if !q.busy && !q.held {
                        if let Some(f) = q.frames.pop_front() {
                            q.busy = true;
                            break Some(f);
                        }
                    }
                    if q.closed && !q.busy {
                        break None;
                    }
                    q = self.out.cv.wait_locked(q);
                }
            };
            let Some(frame) = frame else { return };
            let ok = self.write_frame(fd, &frame);
            if ok {
                self.answered(&frame);
            }
            let mut q = self.out.queue.locked();
            q.busy = false;
            if !ok || frame.last {
                q.closed = true;
                q.frames.clear();
                drop(q);
                let _ = stream.shutdown(if ok { Shutdown::Write } else { Shutdown::Both });
                self.out.cv.notify_all();
                return;
            }
        }
    }
}

/// Queues a frame; an ACK right behind another queued ACK joins it, so that acknowledgements
/// a peer makes us owe while it does not read never grow the queue.
pub(super) fn push_frame(q: &mut OutState, frame: Frame) {
    if frame.hdr.op == op::ACK {
        if let Some(last) = q.frames.back_mut().filter(|l| l.hdr.op == op::ACK && matches!(l.data, FrameData::None) && !l.last) {
            last.hdr.acks = last.hdr.acks.saturating_add(frame.hdr.acks);
            return;
        }
    }
    q.frames.push_back(frame);
}

/// Gives a frame entering the stream the acknowledgements pending before it; false when the
/// frame is an ACK left with nothing to carry (another frame took them).
pub(super) fn stamp(q: &mut OutState, frame: &mut Frame) -> bool {
    if matches!(frame.data, FrameData::Raw(_)) {
        return true;
    }
    frame.hdr.acks = frame.hdr.acks.saturating_add(q.acks);
    q.acks = 0;
    frame.hdr.op != op::ACK || frame.hdr.acks > 0
}
