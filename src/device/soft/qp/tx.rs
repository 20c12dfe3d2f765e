//! The send side of a soft QP. Whoever queues a frame (a posting thread, the reader, a
//! disconnect) writes what the socket takes at once, without blocking; what the socket does
//! not take stays queued, in order, and the engine (engine.rs) continues it once the socket
//! has room again. Acknowledgements ride on frames (see wire.rs).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Frame, FrameData, Inner, MemSegs, OutState, Outbound, SoftQp};
use crate::device::soft::io;
use crate::device::soft::lease::{Leases, SetLease, Via};
use crate::device::soft::wire::{op, Hdr, HDR_LEN};
use crate::util::sync::MutexExt;

impl Outbound {
    pub(super) fn new() -> Outbound {
        let state =
            OutState { frames: VecDeque::new(), closed: false, busy: false, carrying: false, held: false, kicked: false, fd: -1, acks: 0 };
        Outbound { queue: Mutex::new(state) }
    }
}

impl SoftQp {
    /// Queues a frame and writes what the socket takes of the queue now (never blocking).
    pub(super) fn send_frame(&self, frame: Frame) {
        self.queue_frame(frame, false);
    }

    pub(super) fn queue_frame(&self, mut frame: Frame, hold: bool) {
        {
            let mut q = self.out.queue.locked();
            if q.closed || !stamp(&mut q, &mut frame) {
                return;
            }
            push_frame(&mut q, frame);
            q.held |= hold;
        }
        self.pump();
    }

    /// Queues `frame` and holds it, and everything queued after it, until `release_frames`:
    /// frames that other threads send meanwhile queue behind it (the queue is not empty).
    pub(super) fn hold_frame(&self, frame: Frame) {
        self.queue_frame(frame, true);
    }

    pub(super) fn release_frames(&self) {
        self.out.queue.locked().held = false;
        self.pump();
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
    /// and writes what it can of the queue (or drops it when the connection is closed, or it
    /// is an ACK with nothing left to carry).
    fn idle_or_queue(&self, frame: Frame) -> Option<(MutexGuard<'_, OutState>, Frame)> {
        self.idle_or_queue_in(self.out.queue.locked(), frame)
    }

    fn idle_or_queue_in<'a>(&'a self, mut q: MutexGuard<'a, OutState>, mut frame: Frame) -> Option<(MutexGuard<'a, OutState>, Frame)> {
        if q.closed || !stamp(&mut q, &mut frame) {
            return None;
        }
        if q.busy || !q.frames.is_empty() || q.fd < 0 {
            push_frame(&mut q, frame);
            drop(q);
            self.pump();
            return None;
        }
        Some((q, frame))
    }

    /// Sends a small frame (no memory payload) without blocking and without a hand-off: what
    /// the socket does not take at once is queued, in order, for the engine.
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
                // The socket is full (one short piece went out only in part): the rest goes out
                // as raw bytes first, before anything queued later, once the engine sees room.
                let rest = bytes[n..].to_vec();
                q.frames.push_front(Frame { hdr: Hdr::default(), data: FrameData::Raw(rest), last: false });
            }
            Err(_) => {
                q.closed = true;
                q.frames.clear();
            }
        }
    }

    /// Sends a frame from the posting thread, never blocking: when nothing else is being
    /// written or waits, this thread writes what the socket takes at once (no hand-off on the
    /// latency path); the rest of the frame, or the whole frame otherwise, is queued, in
    /// order, ahead of anything queued meanwhile, for the engine. A peer that stops reading
    /// therefore never holds a post (or a disconnect) in the call.
    /// The frame takes its place in the stream while `i` is held (frames go out in the order
    /// their requests took the QP's lock, which the peer relies on: responses complete our
    /// requests in that order, and a placed send names the receive it took); it is written
    /// after `i` is released.
    pub(super) fn send_frame_after(&self, i: MutexGuard<'_, Inner>, frame: Frame) {
        let q = self.out.queue.locked();
        drop(i);
        let Some((q, frame)) = self.idle_or_queue_in(q, frame) else { return };
        self.write_out(q, Some(frame));
    }

    /// Writes the queue, in order, as far as the socket takes it without blocking (see
    /// `write_out`).
    pub(super) fn pump(&self) {
        self.write_out(self.out.queue.locked(), None);
    }

    /// Writes `first` (a frame that nothing waits before), then the queued frames, in order,
    /// until the queue is empty, held, or the socket full. One thread writes at a time
    /// (`busy`), without the queue's lock; another that comes meanwhile (the engine told of
    /// room) leaves it a note (`kicked`) to try once more, since the room it was told of may
    /// have come after this thread's write found the socket full. A socket found full has an
    /// edge on its way to the engine, which then continues here.
    fn write_out<'a>(&'a self, mut q: MutexGuard<'a, OutState>, mut first: Option<Frame>) {
        loop {
            if q.busy {
                q.kicked = true;
                return;
            }
            let frame = match first.take() {
                Some(f) => f,
                None => {
                    if q.held || q.closed || q.fd < 0 {
                        return;
                    }
                    let Some(f) = q.frames.pop_front() else { return };
                    f
                }
            };
            q.busy = true;
            q.kicked = false;
            q.carrying = carries_request(&frame);
            let fd = q.fd;
            drop(q);
            let sent = self.try_frame(fd, &frame);
            if sent.is_some_and(|n| n > 0) {
                self.answered(&frame);
            }
            q = self.out.queue.locked();
            q.busy = false;
            q.carrying = false;
            if q.closed {
                // Cut meanwhile (a disconnect, a failure): nothing more of it goes out.
                return;
            }
            match sent {
                Some(n) if n == frame_len(&frame) => {
                    if frame.last {
                        q.closed = true;
                        q.frames.clear();
                        // SAFETY: shutting down our own connected socket.
                        unsafe { libc::shutdown(fd, libc::SHUT_WR) };
                        return;
                    }
                }
                Some(0) => {
                    // Full: the frame waits whole (so that a disconnect may still drop it,
                    // see `send_disconnect`), first in line.
                    q.frames.push_front(frame);
                    if !q.kicked {
                        return;
                    }
                }
                Some(n) => {
                    // The rest is next in the stream: before anything queued meanwhile, and
                    // with no header of its own (the peer is in the middle of this frame).
                    // Tried again at once: only a write that finds the socket full is sure to
                    // be followed by the engine's event.
                    for piece in rest(frame, n).into_iter().rev() {
                        q.frames.push_front(piece);
                    }
                }
                None => {
                    q.closed = true;
                    q.frames.clear();
                    // SAFETY: shutting down our own connected socket.
                    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
                    return;
                }
            }
        }
    }

    /// Writes what the socket takes of a frame at once; how many bytes went out, or None
    /// when the connection failed or memory the frame carries was revoked (lease.rs).
    fn try_frame(&self, fd: i32, frame: &Frame) -> Option<usize> {
        let hdr = frame.hdr.encode();
        let (parts, _leases) = self.frame_parts(fd, frame, &hdr)?;
        io::try_write(fd, &parts).ok()
    }

    /// A frame's pieces for one vectored write: its header (`hdr`, its encoding; none for
    /// what is left of a frame) and its data, with the leases a memory payload is read under
    /// (held until the write is over); None when that memory was revoked (the connection
    /// ends).
    fn frame_parts(&self, fd: i32, frame: &Frame, hdr: &[u8; HDR_LEN]) -> Option<Parts> {
        let head = (hdr.as_ptr() as u64, HDR_LEN);
        Some(match &frame.data {
            FrameData::None => (smallvec::smallvec![head], None),
            FrameData::Bytes(b) => (smallvec::smallvec![head, (b.as_ptr() as u64, b.len())], None),
            FrameData::Raw(b) => (smallvec::smallvec![(b.as_ptr() as u64, b.len())], None),
            FrameData::Memory(m, sets) => {
                let leases = self.payload_leases(sets, fd)?;
                let mut parts = smallvec::SmallVec::new();
                parts.push(head);
                parts.extend_from_slice(m);
                (parts, Some(leases))
            }
            FrameData::Tail(m, sets) => (m.iter().copied().collect(), Some(self.payload_leases(sets, fd)?)),
        })
    }

    /// Leases on the key sets of a memory payload written to `fd`; None (and the connection
    /// ends) when one was revoked.
    fn payload_leases(&self, sets: &[Arc<SetLease>], fd: i32) -> Option<Leases> {
        let leases = self.leases(sets, Via::Socket(fd));
        if leases.is_none() {
            crate::dbg_log!(
                crate::log::DbgType::PROVIDER_API,
                "soft QP {}: memory revoked before it was sent: the connection ends",
                self.id
            );
        }
        leases
    }

    /// Sends DISCONNECT, the connection's last frame, without ever blocking. Our requests still
    /// queued whole are dropped first: they complete flushed, so their memory is not read
    /// after that. A request of ours partly written can neither be finished (that reads its
    /// memory) nor followed by another frame, so then the connection is cut at once (the peer
    /// sees it end mid-frame). Otherwise DISCONNECT goes from this thread when the socket is
    /// idle and takes it, else after what is queued (responses and acknowledgements, which an
    /// HCA would have sent long before), continued by the engine; an abrupt disconnect
    /// (`cut_if_stalled`) and `dat_ep_free` (see `destroy`) cut that short when the peer does
    /// not take it.
    pub(super) fn send_disconnect(&self) {
        let mut q = self.out.queue.locked();
        if q.closed {
            return;
        }
        let mut acks = 0u32;
        q.frames.retain(|f| {
            let request = matches!(f.hdr.op, op::SEND | op::WRITE | op::READ | op::CMP_SWAP | op::FETCH_ADD)
                && !matches!(f.data, FrameData::Raw(_) | FrameData::Tail(..));
            if request {
                // What it carried is still owed to the peer.
                acks = acks.saturating_add(f.hdr.acks);
            }
            !request
        });
        q.acks = q.acks.saturating_add(acks);
        let fd = q.fd;
        if q.carrying || q.frames.iter().take(2).any(|f| matches!(f.data, FrameData::Tail(..))) {
            return self.cut(q);
        }
        let mut frame = Frame { hdr: Hdr { op: op::DISCONNECT, ..Hdr::default() }, data: FrameData::None, last: true };
        stamp(&mut q, &mut frame);
        if q.busy || !q.frames.is_empty() || fd < 0 {
            push_frame(&mut q, frame);
            drop(q);
            return self.pump();
        }
        // A header's worth, under the queue's lock: a non-blocking send is short.
        let hdr = frame.hdr.encode();
        match io::try_write(fd, &[(hdr.as_ptr() as u64, HDR_LEN)]) {
            Ok(HDR_LEN) => {
                q.closed = true;
                // SAFETY: shutting down our own connected socket.
                unsafe { libc::shutdown(fd, libc::SHUT_WR) };
            }
            // The socket is full: the engine continues it.
            Ok(n) => q.frames.extend(rest(frame, n)),
            Err(_) => {
                q.closed = true;
                // SAFETY: as above.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
        }
    }

    /// After an abrupt disconnect: when what is still to go to the peer (DISCONNECT last)
    /// waits for a peer that takes nothing now (the socket is full), the connection is cut
    /// instead. (A connection not started yet, `fd` still -1, waits on nothing.)
    pub(super) fn cut_if_stalled(&self) {
        let q = self.out.queue.locked();
        if !q.closed && q.fd >= 0 && (q.busy || !q.frames.is_empty()) && !io::writable(q.fd) {
            self.cut(q);
        }
    }

    /// Ends the connection at once: nothing more is written.
    fn cut(&self, mut q: MutexGuard<'_, OutState>) {
        q.closed = true;
        q.frames.clear();
        // SAFETY: shutting down our own connected socket, open while the QP is (its stream
        // closes only when the QP is dropped).
        unsafe { libc::shutdown(q.fd, libc::SHUT_RDWR) };
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

/// A frame's pieces for a vectored write, and the leases its memory is read under.
type Parts = (smallvec::SmallVec<[(u64, usize); 3]>, Option<Leases>);

/// Whether a frame carries the memory of one of our requests (not a response's).
fn carries_request(f: &Frame) -> bool {
    match f.data {
        FrameData::Tail(..) => true,
        FrameData::Memory(..) => f.hdr.op != op::RESPONSE,
        _ => false,
    }
}

/// A frame's length on the wire: its header (unless it is what is left of a frame) and data.
fn frame_len(f: &Frame) -> usize {
    match &f.data {
        FrameData::None => HDR_LEN,
        FrameData::Bytes(b) => HDR_LEN + b.len(),
        FrameData::Memory(m, _) => HDR_LEN + m.iter().map(|s| s.1).sum::<usize>(),
        FrameData::Raw(b) => b.len(),
        FrameData::Tail(m, _) => m.iter().map(|s| s.1).sum(),
    }
}

/// What is left of a frame once its first `n` bytes are out: the header's unsent bytes (a
/// piece of a frame has none), then the data's; the last piece keeps the frame's `last`.
fn rest(frame: Frame, n: usize) -> Vec<Frame> {
    let piece = |data| Frame { hdr: Hdr::default(), data, last: false };
    let mut pieces = Vec::with_capacity(2);
    let head = if matches!(frame.data, FrameData::Raw(_) | FrameData::Tail(..)) { 0 } else { HDR_LEN };
    if n < head {
        pieces.push(piece(FrameData::Raw(frame.hdr.encode()[n..].to_vec())));
    }
    let skip = n.saturating_sub(head);
    match frame.data {
        FrameData::None => {}
        FrameData::Bytes(b) | FrameData::Raw(b) => pieces.push(piece(FrameData::Raw(b[skip.min(b.len())..].to_vec()))),
        FrameData::Memory(m, sets) | FrameData::Tail(m, sets) => {
            pieces.push(piece(FrameData::Tail(MemSegs::from_vec(io::split_at(&m, skip).1), sets)))
        }
    }
    pieces.retain(|p| frame_len(p) > 0);
    if let Some(p) = pieces.last_mut() {
        p.last = frame.last;
    }
    pieces
}

/// Gives a frame entering the stream the acknowledgements pending before it; false when the
/// frame is an ACK left with nothing to carry (another frame took them).
pub(super) fn stamp(q: &mut OutState, frame: &mut Frame) -> bool {
    if matches!(frame.data, FrameData::Raw(_) | FrameData::Tail(..)) {
        return true;
    }
    frame.hdr.acks = frame.hdr.acks.saturating_add(q.acks);
    q.acks = 0;
    frame.hdr.op != op::ACK || frame.hdr.acks > 0
}

#[cfg(test)]
mod tests {
    use super::{frame_len, rest, Frame, FrameData, Hdr, HDR_LEN};
    use crate::device::soft::qp::MemSets;
    use crate::device::soft::wire::op;

    fn send(last: bool) -> Frame {
        let hdr = Hdr { op: op::SEND, payload: 300, length: 300, ..Hdr::default() };
        Frame { hdr, data: FrameData::Memory(smallvec::smallvec![(0x1000, 100), (0x9000, 200)], MemSets::new()), last }
    }

    /// What `rest` leaves: header bytes as raw, payload segments, which piece is last.
    type Shape = (Option<Vec<u8>>, Vec<(u64, usize)>, Vec<bool>);

    fn shape(pieces: &[Frame]) -> Shape {
        let mut raw = None;
        let mut tail = Vec::new();
        for p in pieces {
            match &p.data {
                FrameData::Raw(b) => raw = Some(b.clone()),
                FrameData::Tail(m, _) => tail = m.to_vec(),
                _ => panic!("a piece of a frame is raw bytes or a tail"),
            }
        }
        (raw, tail, pieces.iter().map(|p| p.last).collect())
    }

    #[test]
    fn the_rest_of_a_frame_resumes_where_the_socket_stopped() {
        let hdr = send(false).hdr.encode();
        assert_eq!(frame_len(&send(false)), HDR_LEN + 300);
        // Nothing went out: the whole header, then all the data.
        let (raw, tail, last) = shape(&rest(send(false), 0));
        assert_eq!(raw.as_deref(), Some(&hdr[..]));
        assert_eq!(tail, vec![(0x1000, 100), (0x9000, 200)]);
        assert_eq!(last, vec![false, false]);
        // Part of the header: its other bytes, then the data; `last` on the final piece.
        let (raw, tail, last) = shape(&rest(send(true), 10));
        assert_eq!(raw.as_deref(), Some(&hdr[10..]));
        assert_eq!(tail.len(), 2);
        assert_eq!(last, vec![false, true]);
        // The header and part of the data: the header is not sent again.
        let (raw, tail, last) = shape(&rest(send(true), HDR_LEN + 150));
        assert_eq!(raw, None);
        assert_eq!(tail, vec![(0x9000 + 50, 150)]);
        assert_eq!(last, vec![true]);
        // A frame without data cut in its header.
        let ack = Frame { hdr: Hdr { op: op::ACK, acks: 3, ..Hdr::default() }, data: FrameData::None, last: true };
        let enc = ack.hdr.encode();
        let (raw, tail, last) = shape(&rest(ack, 47));
        assert_eq!((raw.as_deref(), tail.len(), last), (Some(&enc[47..]), 0, vec![true]));
        // A piece of a frame, itself cut again: no header is made up for it.
        let tail = rest(send(true), HDR_LEN + 150).pop().expect("a tail");
        let (raw, tail, last) = shape(&rest(tail, 100));
        assert_eq!((raw, tail, last), (None, vec![(0x9000 + 150, 50)], vec![true]));
        let raw = Frame { hdr: Hdr::default(), data: FrameData::Raw(vec![1, 2, 3]), last: false };
        let (raw, tail, _) = shape(&rest(raw, 1));
        assert_eq!((raw.as_deref(), tail.len()), (Some(&[2u8, 3][..]), 0));
    }
}
