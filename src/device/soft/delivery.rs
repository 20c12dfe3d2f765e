//! In-order delivery of a QP's events to the consumer side (`QpEvents`), shared by the RC and
//! UD QPs: never while holding the QP's own locks, and re-entrant, since a handler may post or
//! end work whose events join the queue.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::util::sync::MutexExt;

pub struct Delivery<E> {
    state: Mutex<State<E>>,
}

struct State<E> {
    queue: VecDeque<E>,
    /// A thread is delivering: others (and the re-entrant calls of its handlers) only queue.
    busy: bool,
}

impl<E> Default for Delivery<E> {
    fn default() -> Self {
        Delivery { state: Mutex::new(State { queue: VecDeque::new(), busy: false }) }
    }
}

impl<E> Delivery<E> {
    /// Queues `events` without handing any over: called under the lock that orders them, and
    /// followed, once it is released, by a `deliver`.
    pub fn queue(&self, events: impl IntoIterator<Item = E>) {
        self.state.locked().queue.extend(events);
    }

    /// Queues `events`; unless a thread is already delivering, hands every queued event to
    /// `handle` in order, this one included, until the queue is empty.
    pub fn deliver(&self, events: impl IntoIterator<Item = E>, mut handle: impl FnMut(E)) {
        {
            let mut s = self.state.locked();
            s.queue.extend(events);
            if s.busy {
                return;
            }
            s.busy = true;
        }
        loop {
            let next = {
                let mut s = self.state.locked();
                match s.queue.pop_front() {
                    Some(e) => e,
                    None => {
                        s.busy = false;
                        return;
                    }
                }
            };
            handle(next);
        }
    }
}
