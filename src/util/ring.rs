//! Ring: a FIFO of plain values in a power-of-two buffer that doubles when full. Taking the
//! oldest is a load of the head, a copy and a masked increment, with no wrap-around
//! arithmetic: an EVD's dequeue does that under its lock.

pub struct Ring<T> {
    /// Empty, or a power of two long.
    buf: Box<[T]>,
    /// Where the oldest value is (always inside `buf` when it is not empty).
    head: usize,
    len: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Ring<T> {
        Ring { buf: Box::new([]), head: 0, len: 0 }
    }
}

impl<T: Copy> Ring<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `v` after the others.
    #[inline]
    pub fn push_back(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        let i = (self.head + self.len) & (self.buf.len() - 1);
        self.buf[i] = v;
        self.len += 1;
    }

    /// Queues `v` before the others (a value taken and given back).
    pub fn push_front(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        self.head = self.head.wrapping_sub(1) & (self.buf.len() - 1);
        self.buf[self.head] = v;
        self.len += 1;
    }

    /// Hands the oldest value to `f` where it lies (no copy out first), then drops it from
    /// the ring; false, and `f` not called, when the ring is empty.
    #[inline]
    pub fn take_front(&mut self, f: impl FnOnce(&T)) -> bool {
        if self.len == 0 {
            return false;
        }
        f(&self.buf[self.head]);
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
        true
    }

    /// Twice the room (at least 4), the values moved to its start in order; `fill` fills
    /// the room not yet used.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, fill: T) {
        let cap = (self.buf.len() * 2).max(4);
        let mut buf = vec![fill; cap].into_boxed_slice();
        let old = self.buf.len();
        for (k, slot) in buf.iter_mut().take(self.len).enumerate() {
            *slot = self.buf[(self.head + k) & (old - 1)];
        }
        self.buf = buf;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    fn take(r: &mut Ring<u32>) -> Option<u32> {
        let mut out = None;
        r.take_front(|v| out = Some(*v));
        out
    }

    #[test]
    fn fifo_across_wrap_and_growth() {
        let mut r = Ring::default();
        assert!(r.is_empty());
        assert_eq!(take(&mut r), None);
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        // Pushes outpace takes, so the values wrap around the buffer before each growth.
        for round in 0..200u32 {
            for _ in 0..(round % 5 + 1) {
                r.push_back(next_in);
                next_in += 1;
            }
            for _ in 0..(round % 3 + 1) {
                if let Some(v) = take(&mut r) {
                    assert_eq!(v, next_out);
                    next_out += 1;
                }
            }
            assert_eq!(r.len() as u32, next_in - next_out);
        }
        while let Some(v) = take(&mut r) {
            assert_eq!(v, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(r.is_empty());
    }

    #[test]
    fn growth_keeps_order_when_the_head_is_not_at_the_start() {
        let mut r = Ring::default();
        for v in 0..4 {
            r.push_back(v);
        }
        assert_eq!(take(&mut r), Some(0));
        assert_eq!(take(&mut r), Some(1));
        for v in 4..10 {
            r.push_back(v);
        }
        for want in 2..10 {
            assert_eq!(take(&mut r), Some(want));
        }
        assert_eq!(take(&mut r), None);
    }

    #[test]
    fn push_front_goes_before_the_oldest_across_wrap_and_growth() {
        let mut r = Ring::default();
        r.push_front(1);
        r.push_back(2);
        r.push_front(0);
        for v in 3..5 {
            r.push_back(v);
        }
        // Full (4) with the head not at the start: this one grows the ring.
        assert_eq!(take(&mut r), Some(0));
        r.push_back(5);
        r.push_front(0);
        r.push_front(-1i32 as u32);
        assert_eq!(r.len(), 7);
        for want in [u32::MAX, 0, 1, 2, 3, 4, 5] {
            assert_eq!(take(&mut r), Some(want));
        }
        assert_eq!(take(&mut r), None);
    }
}
