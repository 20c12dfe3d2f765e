//! CNO semantics: a notification point for several EVDs, either waited on with
//! `dat_cno_wait` or delivered to a proxy agent function.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Instant;

use super::ia::{self, Ia};
use super::table::{self, Object};
use super::{deadline, put};
use crate::abi::*;
use crate::util::sync::{CondvarExt, MutexExt};

/// What a CNO knows of an EVD attached to it (`evd.rs` implements it for its EVDs).
pub trait Source: Send + Sync {
    fn handle(&self) -> usize;
    /// Whether the EVD is enabled and holds events.
    fn ready(&self) -> bool;
}

pub struct CnoState {
    pub agent: DAT_OS_WAIT_PROXY_AGENT,
    /// The EVDs attached to this CNO.
    pub evds: Vec<Weak<dyn Source>>,
    /// Where the next scan starts, so that no attached EVD starves the others.
    pub next: usize,
    /// Threads in dat_cno_wait.
    pub waiters: u32,
}

// SAFETY: the agent's instance data is the consumer's opaque pointer, passed back unchanged.
unsafe impl Send for CnoState {}

pub struct Cno {
    pub handle: usize,
    pub ia: Arc<Ia>,
    pub state: Mutex<CnoState>,
    pub cond: Condvar,
    /// EVDs attached to this CNO.
    pub users: AtomicU32,
    pub context: Mutex<u64>,
}

impl Object for Cno {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_CNO
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.ia.handle
    }
    fn destroy(&self) {
        drop_agent(self);
    }
}

/// CNOs with a proxy agent, in the whole process (a CNO may serve EVDs of another IA).
static AGENTS: AtomicUsize = AtomicUsize::new(0);

/// Whether a consumer's proxy agent may be called now: then a call the consumer makes from
/// it may run in the middle of any dequeue's poll on its thread (see `Evd::poll_each_source`).
#[inline]
pub fn agents() -> bool {
    AGENTS.load(Ordering::SeqCst) != 0
}

/// Counts a CNO's agent gained or given up, and has the device deliver as for a waiter while
/// it is there (an agent is called as events arrive).
fn agent_changes(c: &Cno, has: bool) {
    if has {
        AGENTS.fetch_add(1, Ordering::SeqCst);
    } else {
        AGENTS.fetch_sub(1, Ordering::SeqCst);
    }
    c.ia.dev.consumer_waits(has);
}

/// The CNO goes: its agent, if it still has one, is given up (taken under the lock, so that a
/// racing `modify_agent` and the free count it once).
fn drop_agent(c: &Cno) {
    let had = std::mem::replace(&mut c.state.locked().agent, DAT_OS_WAIT_PROXY_AGENT_NULL);
    if had.proxy_agent_func.is_some() {
        agent_changes(c, false);
    }
}

pub fn cno(handle: DAT_CNO_HANDLE) -> Result<Arc<Cno>, DAT_RETURN> {
    table::lookup(handle, DAT_INVALID_HANDLE_CNO)
}

/// An attached EVD got an event: call the proxy agent, or wake a waiter.
pub fn trigger(c: &Cno, evd: usize) {
    let agent = {
        let s = c.state.locked();
        if s.agent.proxy_agent_func.is_none() {
            c.cond.notify_all();
            return;
        }
        s.agent
    };
    if let Some(f) = agent.proxy_agent_func {
        // SAFETY: the consumer's agent function with its own instance data, as DAT specifies.
        unsafe { f(agent.instance_data, evd as DAT_EVD_HANDLE) };
    }
}

/// Attaches or detaches an EVD (its own CNO field is kept by the EVD).
pub fn attach<E: Source + 'static>(c: &Cno, evd: &Arc<E>) {
    let evd: Weak<E> = Arc::downgrade(evd);
    c.state.locked().evds.push(evd as Weak<dyn Source>);
}

/// Detaches the EVD whose handle is `evd`.
pub fn detach(c: &Cno, evd: usize) {
    c.state.locked().evds.retain(|w| w.upgrade().is_some_and(|e| e.handle() != evd));
}

/// The first attached, enabled EVD holding events, starting after the last one reported.
fn ready(s: &mut CnoState) -> Option<usize> {
    s.evds.retain(|w| w.strong_count() > 0);
    let n = s.evds.len();
    for k in 0..n {
        let i = (s.next + k) % n;
        if let Some(e) = s.evds[i].upgrade() {
            if e.ready() {
                s.next = i + 1;
                return Some(e.handle());
            }
        }
    }
    None
}

pub fn create(ia_handle: DAT_IA_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT, out: *mut DAT_CNO_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia::ia(ia_handle)?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    let handle = table::reserve(ia.provider());
    let c = Arc::new(Cno {
        handle,
        ia,
        state: Mutex::new(CnoState { agent, evds: Vec::new(), next: 0, waiters: 0 }),
        cond: Condvar::new(),
        users: AtomicU32::new(0),
        context: Mutex::new(0),
    });
    if agent.proxy_agent_func.is_some() {
        // A proxy agent is called as events arrive: a waiter for the CNO's life (or until
        // the agent is removed).
        agent_changes(&c, true);
    }
    table::insert(handle, c);
    // SAFETY: checked non-NULL.
    unsafe { put(out, handle as DAT_CNO_HANDLE) };
    Ok(DAT_SUCCESS)
}

pub fn modify_agent(handle: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cno(handle)?;
    let had = std::mem::replace(&mut c.state.locked().agent, agent).proxy_agent_func.is_some();
    let has = agent.proxy_agent_func.is_some();
    if had != has {
        agent_changes(&c, has);
    }
    Ok(DAT_SUCCESS)
}

pub fn query(handle: DAT_CNO_HANDLE, mask: DAT_CNO_PARAM_MASK, param: *mut DAT_CNO_PARAM) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cno(handle)?;
    super::query_args(u64::from(mask), u64::from(DAT_CNO_FIELD_ALL | DAT_CNO_FIELD_PROXY), param)?;
    let agent = c.state.locked().agent;
    let proxy_type = if agent.proxy_agent_func.is_some() { DAT_PROXY_TYPE_AGENT } else { DAT_PROXY_TYPE_NONE };
    // SAFETY: checked non-NULL; the whole parameter block is filled.
    unsafe { put(param, DAT_CNO_PARAM { ia_handle: c.ia.consumer_handle(), proxy_type, proxy: DAT_CNO_PARAM_PROXY { agent } }) };
    Ok(DAT_SUCCESS)
}

pub fn wait(handle: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd_out: *mut DAT_EVD_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cno(handle)?;
    if evd_out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    let deadline = deadline(timeout);
    // The device delivers what is ready and keeps completion wake-ups on while we wait.
    c.ia.dev.consumer_waits(true);
    let mut s = c.state.locked();
    // Level-triggered: any attached EVD with events satisfies the wait, so a notification is
    // never lost because a waiter was after another EVD.
    s.waiters += 1;
    let result = loop {
        if let Some(evd) = ready(&mut s) {
            // SAFETY: checked non-NULL.
            unsafe { put(evd_out, evd as DAT_EVD_HANDLE) };
            break Ok(DAT_SUCCESS);
        }
        match deadline {
            None => s = c.cond.wait_locked(s),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break Err(dat_error(DAT_TIMEOUT_EXPIRED, 0));
                }
                s = c.cond.wait_timeout_locked(s, d - now).0;
            }
        }
    };
    s.waiters -= 1;
    drop(s);
    c.ia.dev.consumer_waits(false);
    result
}

pub fn free(handle: DAT_CNO_HANDLE) -> Result<DAT_RETURN, DAT_RETURN> {
    let c = cno(handle)?;
    if c.users.load(Ordering::SeqCst) != 0 || c.state.locked().waiters != 0 {
        return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE));
    }
    table::remove(c.handle);
    drop_agent(&c);
    Ok(DAT_SUCCESS)
}
