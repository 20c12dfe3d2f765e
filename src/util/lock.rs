//! A mutex and a condition variable on futexes that never poison, for the data path.
//!
//! std's `Mutex` checks the thread's panic count when a guard is made and again when it drops
//! (poisoning), about ten instructions a call that `util::sync::MutexExt` then throws away:
//! every exported function runs behind a panic guard and takes a lock poisoned anyway. Here a
//! guard dropped while unwinding simply unlocks; what the lock protects is kept consistent by
//! its users between statements that can panic, as for `MutexExt`.
//!
//! The lock word: 0 free, 1 held, 2 held with a thread asleep on it (the unlock wakes one).
//! The condition variable is a sequence number: a waiter reads it under the lock, lets the
//! lock go and sleeps while it is unchanged; a notifier bumps it (after changing the state
//! under the lock) and wakes the sleepers, so a notification between the two is not missed.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const FREE: u32 = 0;
const HELD: u32 = 1;
const SLEEPERS: u32 = 2;

/// A mutex without poisoning (see the module's comment).
pub struct Lock<T: ?Sized> {
    word: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which exists on one thread at a time.
unsafe impl<T: ?Sized + Send> Send for Lock<T> {}
// SAFETY: as above: a shared `Lock` hands the value to one thread at a time.
unsafe impl<T: ?Sized + Send> Sync for Lock<T> {}

/// The lock held; unlocks when dropped.
pub struct LockGuard<'a, T: ?Sized> {
    lock: &'a Lock<T>,
}

impl<T> Lock<T> {
    pub const fn new(value: T) -> Lock<T> {
        Lock { word: AtomicU32::new(FREE), value: UnsafeCell::new(value) }
    }
}

impl<T: ?Sized> Lock<T> {
    /// Takes the lock, waiting for it if need be.
    #[inline]
    pub fn lock(&self) -> LockGuard<'_, T> {
        if self.word.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        LockGuard { lock: self }
    }

    /// Takes the lock if it is free now.
    #[inline]
    pub fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        // Not `then_some`: a guard made for a failed attempt would unlock the holder's lock
        // when dropped.
        if self.word.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            Some(LockGuard { lock: self })
        } else {
            None
        }
    }

    /// The value, through a unique borrow of the lock (no other thread can hold it).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        // A holder is usually out within a few hundred instructions: spin a little first.
        for _ in 0..100 {
            if self.word.load(Ordering::Relaxed) == FREE
                && self.word.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
            core::hint::spin_loop();
        }
        // Marked as slept on: whoever unlocks wakes one (this thread, or another, which marks
        // it again when it takes the lock this way).
        while self.word.swap(SLEEPERS, Ordering::Acquire) != FREE {
            futex_wait(&self.word, SLEEPERS, None);
        }
    }

    #[inline]
    fn unlock(&self) {
        if self.word.swap(FREE, Ordering::Release) == SLEEPERS {
            futex_wake(&self.word, 1);
        }
    }
}

impl<T: Default> Default for Lock<T> {
    fn default() -> Lock<T> {
        Lock::new(T::default())
    }
}

impl<T: ?Sized> Deref for LockGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> DerefMut for LockGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: ?Sized> Drop for LockGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

/// A condition variable for [`Lock`] (see the module's comment). Wake-ups may be spurious:
/// a waiter checks its condition again.
#[derive(Default)]
pub struct Cond {
    seq: AtomicU32,
}

impl Cond {
    pub const fn new() -> Cond {
        Cond { seq: AtomicU32::new(0) }
    }

    /// Lets `guard`'s lock go, sleeps until notified, takes the lock again.
    pub fn wait<'a, T: ?Sized>(&self, guard: LockGuard<'a, T>) -> LockGuard<'a, T> {
        self.wait_timeout(guard, None).0
    }

    /// [`Cond::wait`] for at most `limit` (`None`: no limit); true with the guard when the
    /// time ran out (the caller checks its condition and its clock anyway).
    pub fn wait_timeout<'a, T: ?Sized>(&self, guard: LockGuard<'a, T>, limit: Option<Duration>) -> (LockGuard<'a, T>, bool) {
        // Read under the lock: a notifier changes the state under it, and bumps the number
        // after, so that a notification from here on changes what the sleep compares with.
        let seq = self.seq.load(Ordering::Relaxed);
        let lock = guard.lock;
        drop(guard);
        let timed_out = futex_wait(&self.seq, seq, limit);
        (lock.lock(), timed_out)
    }

    /// [`Cond::wait`] until `deadline` at the latest; true with the guard when it passed (the
    /// kernel compares it with the clock: no clock is read here). A notification that comes
    /// first returns false whatever the time: a caller that goes on waiting after it asks
    /// [`Deadline::passed`].
    pub fn wait_until<'a, T: ?Sized>(&self, guard: LockGuard<'a, T>, deadline: &Deadline) -> (LockGuard<'a, T>, bool) {
        let seq = self.seq.load(Ordering::Relaxed);
        let lock = guard.lock;
        drop(guard);
        let timed_out = futex_wait_until(&self.seq, seq, &deadline.0);
        (lock.lock(), timed_out)
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        futex_wake(&self.seq, i32::MAX);
    }
}

/// Sleeps while `word` holds `expected`, for at most `limit`; true when the time ran out.
fn futex_wait(word: &AtomicU32, expected: u32, limit: Option<Duration>) -> bool {
    let ts = limit
        .map(|d| libc::timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long });
    let tsp = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the word lives as long as the borrow; the timeout, when there is one, is a
    // timespec on this stack (FUTEX_WAIT reads it as relative).
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, tsp) };
    // SAFETY: reads this thread's errno.
    r < 0 && unsafe { *libc::__errno_location() } == libc::ETIMEDOUT
}

/// A moment on CLOCK_MONOTONIC (std's `Instant` cannot be handed to the kernel), for
/// [`Cond::wait_until`].
pub struct Deadline(libc::timespec);

impl Deadline {
    /// `after` from now (saturating).
    pub fn after(after: Duration) -> Deadline {
        let now = monotonic();
        let mut secs = (now.tv_sec as u64).saturating_add(after.as_secs());
        let mut nsec = now.tv_nsec as u64 + u64::from(after.subsec_nanos());
        if nsec >= 1_000_000_000 {
            nsec -= 1_000_000_000;
            secs = secs.saturating_add(1);
        }
        Deadline(libc::timespec { tv_sec: secs.min(i64::MAX as u64) as libc::time_t, tv_nsec: nsec as libc::c_long })
    }

    /// Whether it is past (reads the clock).
    pub fn passed(&self) -> bool {
        let now = monotonic();
        (now.tv_sec, now.tv_nsec) >= (self.0.tv_sec, self.0.tv_nsec)
    }
}

fn monotonic() -> libc::timespec {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the timespec on this stack; CLOCK_MONOTONIC cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

/// Sleeps while `word` holds `expected`, until `deadline` on CLOCK_MONOTONIC at the latest;
/// true when it passed.
fn futex_wait_until(word: &AtomicU32, expected: u32, deadline: &libc::timespec) -> bool {
    // SAFETY: the word lives as long as the borrow; the deadline is a timespec the caller
    // holds (FUTEX_WAIT_BITSET reads it as absolute, on CLOCK_MONOTONIC without
    // FUTEX_CLOCK_REALTIME).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            deadline as *const libc::timespec,
            core::ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        )
    };
    // SAFETY: reads this thread's errno.
    r < 0 && unsafe { *libc::__errno_location() } == libc::ETIMEDOUT
}

fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: the word lives as long as the borrow; FUTEX_WAKE only reads its address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n) };
}

#[cfg(test)]
mod tests {
    use super::{Cond, Deadline, Lock};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn try_lock_takes_only_a_free_lock() {
        let mut l = Lock::new(5);
        {
            let g = l.try_lock().expect("free");
            assert!(l.try_lock().is_none(), "held");
            assert!(l.try_lock().is_none(), "still held after a failed attempt");
            drop(g);
        }
        assert_eq!(*l.try_lock().expect("free again"), 5);
        *l.get_mut() = 6;
        assert_eq!(*l.lock(), 6);
    }

    #[test]
    fn contended_increments_are_not_lost() {
        let l = Arc::new(Lock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 80_000);
    }

    #[test]
    fn a_panic_while_held_leaves_the_lock_usable() {
        let l = Arc::new(Lock::new(1));
        let l2 = l.clone();
        let r = std::thread::spawn(move || {
            let mut g = l2.lock();
            *g = 2;
            panic!("while held");
        })
        .join();
        assert!(r.is_err());
        *l.lock() += 1;
        assert_eq!(*l.lock(), 3);
    }

    #[test]
    fn a_waiter_wakes_on_notify_and_times_out_without() {
        let pair = Arc::new((Lock::new(false), Cond::new()));
        let t = {
            let pair = pair.clone();
            std::thread::spawn(move || {
                let (l, c) = &*pair;
                let mut g = l.lock();
                while !*g {
                    g = c.wait(g);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        *pair.0.lock() = true;
        pair.1.notify_all();
        t.join().unwrap();

        let (l, c) = (Lock::new(()), Cond::new());
        let start = Instant::now();
        let (_g, timed_out) = c.wait_timeout(l.lock(), Some(Duration::from_millis(30)));
        assert!(timed_out);
        assert!(start.elapsed() >= Duration::from_millis(25));
    }

    #[test]
    fn a_waiter_until_a_deadline_wakes_on_notify_and_times_out_at_it() {
        // Notified long before the deadline: woken, not timed out.
        let pair = Arc::new((Lock::new(false), Cond::new()));
        let t = {
            let pair = pair.clone();
            std::thread::spawn(move || {
                let (l, c) = &*pair;
                let deadline = Deadline::after(Duration::from_secs(20));
                let mut g = l.lock();
                while !*g {
                    let (g2, timed_out) = c.wait_until(g, &deadline);
                    assert!(!timed_out, "timed out 20 s early");
                    g = g2;
                }
                assert!(!deadline.passed());
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        *pair.0.lock() = true;
        pair.1.notify_all();
        t.join().unwrap();

        // Not notified: wakes at the deadline, not before (an absolute time on the clock
        // Instant reads), and a deadline already past returns at once.
        let (l, c) = (Lock::new(()), Cond::new());
        let start = Instant::now();
        let deadline = Deadline::after(Duration::from_millis(30));
        assert!(!deadline.passed());
        let (g, timed_out) = c.wait_until(l.lock(), &deadline);
        assert!(timed_out);
        assert!(deadline.passed());
        assert!(start.elapsed() >= Duration::from_millis(30));
        let again = Instant::now();
        let (_g, timed_out) = c.wait_until(g, &deadline);
        assert!(timed_out);
        assert!(again.elapsed() < Duration::from_secs(1));
        // Carries into the seconds, and saturates.
        assert!(!Deadline::after(Duration::from_nanos(999_999_999)).passed());
        assert!(!Deadline::after(Duration::MAX).passed());
    }
}
