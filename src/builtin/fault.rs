//! Test builds only: a panic forced at one point of the data path, on the calling thread, so
//! that a test can check what the exported functions' panic guard (`crate::ffi::guard`) makes
//! of a panic in the built-in layer when the API reaches it directly, with a pin held. There is
//! no such point in a shipped build: the module and its calls are `#[cfg(test)]`.

use std::cell::Cell;

/// Where a forced panic fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The top of [`super::dto::post_on`]: every post on an EP (send, receive, RDMA).
    Post,
    /// The top of [`super::evd::dequeue::dequeue_on`].
    Dequeue,
}

thread_local! {
    static ARMED: Cell<Option<Point>> = const { Cell::new(None) };
}

/// The next time this thread reaches `point`, it panics (once).
pub fn arm(point: Point) {
    ARMED.with(|a| a.set(Some(point)));
}

/// Whether this thread's forced panic is still to fire (false once it has).
pub fn armed() -> bool {
    ARMED.with(|a| a.get().is_some())
}

/// Called at `point`: panics if this thread armed it, disarming it first.
pub fn hit(point: Point) {
    if ARMED.with(|a| a.get()) == Some(point) {
        ARMED.with(|a| a.set(None));
        panic!("forced panic at {point:?} (test)");
    }
}
