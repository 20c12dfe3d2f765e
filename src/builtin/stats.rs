//! Reading the counters ([`super::counters`]): the IB counters extension's ops
//! (`DAT_IB_QUERY_COUNTERS_OP`, `DAT_IB_PRINT_COUNTERS_OP`, `DAT_IB_START_COUNTERS_OP`,
//! `DAT_IB_STOP_COUNTERS_OP`) on an IA, EP or EVD, and the summary `DAT2_STATS` asks for at
//! `dat_ia_close`. What each counter means on each device: docs/counters.md.

use std::io::Write;
use std::sync::Arc;

use super::counters::{self, names, IA_N, OWN, OWN_BYTES};
use super::ep::Ep;
use super::evd::Evd;
use super::ia::Ia;
use super::table;
use crate::abi::*;

/// The IA's counters before the consumer's resets, starts and stops: those counted as they
/// happened, and those derived from them and from the handle table's object counts.
fn ia_raw(ia: &Ia) -> [u64; IA_N] {
    let mut v = ia.counts.events();
    let o = table::object_counts(ia.handle);
    for (made, freed, ty) in [
        (DCNT_IA_PZ_CREATE, DCNT_IA_PZ_FREE, DAT_HANDLE_TYPE_PZ),
        (DCNT_IA_LMR_CREATE, DCNT_IA_LMR_FREE, DAT_HANDLE_TYPE_LMR),
        (DCNT_IA_RMR_CREATE, DCNT_IA_RMR_FREE, DAT_HANDLE_TYPE_RMR),
        (DCNT_IA_PSP_CREATE, DCNT_IA_PSP_FREE, DAT_HANDLE_TYPE_PSP),
        (DCNT_IA_RSP_CREATE, DCNT_IA_RSP_FREE, DAT_HANDLE_TYPE_RSP),
        (DCNT_IA_EVD_CREATE, DCNT_IA_EVD_FREE, DAT_HANDLE_TYPE_EVD),
        (DCNT_IA_EP_CREATE, DCNT_IA_EP_FREE, DAT_HANDLE_TYPE_EP),
        (DCNT_IA_SRQ_CREATE, DCNT_IA_SRQ_FREE, DAT_HANDLE_TYPE_SRQ),
    ] {
        v[made as usize] = o.created[ty as usize];
        v[freed as usize] = o.freed[ty as usize];
    }
    let at = |v: &[u64; IA_N], n: DAT_IA_COUNTERS| v[n as usize];
    // A connection request is a CR object; a listen, a service point.
    let requests = o.created[DAT_HANDLE_TYPE_CR as usize];
    v[DCNT_IA_SP_CR as usize] = requests;
    v[DCNT_IA_CM_REQ_RX as usize] = requests;
    v[DCNT_IA_CM_LISTEN as usize] = o.created[DAT_HANDLE_TYPE_PSP as usize] + o.created[DAT_HANDLE_TYPE_RSP as usize];
    v[DCNT_IA_CM_REP_TX as usize] = at(&v, DCNT_IA_SP_CR_ACCEPTED);
    v[DCNT_IA_CM_USER_REJ_TX as usize] = at(&v, DCNT_IA_SP_CR_REJECTED);
    // The active side's answer and its confirmation are what establishes it there; the
    // passive side's confirmation is what establishes it on that side.
    v[DCNT_IA_CM_REP_RX as usize] = at(&v, DCNT_IA_CM_ACTIVE_EST);
    v[DCNT_IA_CM_RTU_TX as usize] = at(&v, DCNT_IA_CM_ACTIVE_EST);
    v[DCNT_IA_CM_RTU_RX as usize] = at(&v, DCNT_IA_CM_PASSIVE_EST);
    v
}

/// dat2's own counters of the IA: the connections it counted, and the bytes its QPs moved,
/// those gone and those live.
fn own_values(ia: &Ia) -> [u64; OWN.len()] {
    let mut v = ia.counts.own();
    for (_, o) in table::owned_by(ia.handle) {
        let Some(ep) = table::downcast::<Ep>(o) else { continue };
        let qp = ep.lock().qp().cloned();
        if let Some(qp) = qp {
            for (t, m) in v[OWN_BYTES..].iter_mut().zip(qp.moved()) {
                *t += m;
            }
        }
    }
    v
}

/// A counter set: one of the IB extension's, reported on its object.
enum Set {
    Ia(Arc<Ia>),
    Ep(Arc<Ep>),
    Evd(Arc<Evd>),
}

impl Set {
    fn of(handle: DAT_HANDLE) -> Result<Set, DAT_RETURN> {
        let obj = table::get(handle).ok_or(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1))?;
        let bad = dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        Ok(match obj.handle_type() {
            DAT_HANDLE_TYPE_IA => Set::Ia(table::downcast(obj).ok_or(bad)?),
            DAT_HANDLE_TYPE_EP => Set::Ep(table::downcast(obj).ok_or(bad)?),
            DAT_HANDLE_TYPE_EVD => Set::Evd(table::downcast(obj).ok_or(bad)?),
            _ => return Err(bad),
        })
    }

    fn names(&self) -> &'static [&'static str] {
        match self {
            Set::Ia(_) => &names::IA,
            Set::Ep(_) => &names::EP,
            Set::Evd(_) => &names::EVD,
        }
    }

    /// The values, then `reset` (`Some(None)`: all) zeroed.
    fn values(&self, reset: Option<Option<usize>>) -> Vec<u64> {
        match self {
            Set::Ia(ia) => {
                let raw = ia_raw(ia);
                let v = ia.counts.reported(&raw);
                if let Some(which) = reset {
                    ia.counts.reset(&raw, which);
                }
                v.to_vec()
            }
            Set::Ep(ep) => {
                let mut i = ep.lock();
                let v = i.counts().values();
                if let Some(which) = reset {
                    i.counts().reset(which);
                }
                v.to_vec()
            }
            Set::Evd(e) => e.counter_values(&mut e.lock(), reset).to_vec(),
        }
    }
}

/// Which counters `counter` names in a set of `n`: one, or all (`n` itself, the set's
/// `*_ALL_COUNTERS`).
fn which(counter: i32, n: usize) -> Result<Option<usize>, DAT_RETURN> {
    match usize::try_from(counter) {
        Ok(c) if c < n => Ok(Some(c)),
        Ok(c) if c == n => Ok(None),
        _ => Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3)),
    }
}

/// `DAT_IB_QUERY_COUNTERS_OP`: counter `counter` (or all) of `handle`'s set into `out`,
/// then zeroed if `reset`.
pub fn query(handle: DAT_HANDLE, counter: i32, out: *mut u64, reset: bool) -> Result<DAT_RETURN, DAT_RETURN> {
    let set = Set::of(handle)?;
    let which = which(counter, set.names().len())?;
    if out.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    let v = set.values(reset.then_some(which));
    let v = match which {
        Some(c) => &v[c..=c],
        None => &v[..],
    };
    // SAFETY: the consumer's array, of one value or of the whole set as the extension says.
    unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len()) };
    Ok(DAT_SUCCESS)
}

/// `DAT_IB_PRINT_COUNTERS_OP`: as [`query`], printed (one `name value` line each; all of a
/// set: those that are not 0) where `DAT2_STATS` names, or on standard error.
pub fn print(handle: DAT_HANDLE, counter: i32, reset: bool) -> Result<DAT_RETURN, DAT_RETURN> {
    let set = Set::of(handle)?;
    let names = set.names();
    let which = which(counter, names.len())?;
    let v = set.values(reset.then_some(which));
    let mut text = String::new();
    for (n, (name, value)) in names.iter().zip(&v).enumerate() {
        if which == Some(n) || (which.is_none() && *value != 0) {
            text.push_str(&format!("{name} {value}\n"));
        }
    }
    emit(&text);
    Ok(DAT_SUCCESS)
}

/// `DAT_IB_START_COUNTERS_OP` / `DAT_IB_STOP_COUNTERS_OP` on an IA: a group counts again
/// from 0, or holds its values.
pub fn start_stop(handle: DAT_HANDLE, group: i32, start: bool) -> Result<DAT_RETURN, DAT_RETURN> {
    let Ok(Set::Ia(ia)) = Set::of(handle) else {
        return Err(dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
    };
    let range = u32::try_from(group).ok().and_then(counters::group).ok_or(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3))?;
    let raw = ia_raw(&ia);
    if start {
        ia.counts.start(&raw, range);
    } else {
        ia.counts.stop(&raw, range);
    }
    Ok(DAT_SUCCESS)
}

/// The summary of a closing IA: its counters as the consumer would query them, the totals
/// of its EPs and EVDs (all of them are freed by now), dat2's own counters, and the
/// registration cache's (process-wide).
fn summary(ia: &Ia) -> String {
    let mut t = format!("# dat2 stats: IA {} (pid {})\n", ia.builtin.name.to_string_lossy(), std::process::id());
    let mut put = |set: &str, names: &[&str], values: &[u64]| {
        for (name, v) in names.iter().zip(values) {
            if *v != 0 {
                t.push_str(&format!("{set} {name} {v}\n"));
            }
        }
    };
    put("ia", &names::IA, &ia.counts.reported(&ia_raw(ia)));
    put("ep", &names::EP, &ia.counts.gone_eps());
    put("evd", &names::EVD, &ia.counts.gone_evds());
    let mut t2 = String::new();
    for (name, v) in OWN.iter().zip(own_values(ia)) {
        t2.push_str(&format!("dat2 {name} {v}\n"));
    }
    if ia.dev.cache_registrations() {
        let c = super::mr::cache_stats();
        let e = c.evictions;
        let evicted = e.unmap + e.lru + e.collector + e.flush;
        t2.push_str(&format!(
            "dat2 DAT2_MR_CACHE_HITS {}\ndat2 DAT2_MR_CACHE_MISSES {}\ndat2 DAT2_MR_CACHE_EVICTIONS {evicted}\n",
            c.hits, c.misses
        ));
    }
    t + &t2
}

/// Where `DAT2_STATS` sends what is printed: `stderr`, or a file appended to; standard
/// error when it is unset (the consumer asked for a print).
fn emit(text: &str) {
    match crate::util::env::var_os("DAT2_STATS") {
        Some(d) if d != "stderr" && !d.is_empty() => {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(&d);
            match file {
                // One write: lines of processes sharing the file do not interleave.
                Ok(mut f) => {
                    let _ = f.write_all(text.as_bytes());
                }
                Err(e) => crate::dbg_log!(crate::log::DbgType::ERROR, "DAT2_STATS={}: {e}", d.to_string_lossy()),
            }
        }
        _ => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}

/// At `dat_ia_close`, after the IA's objects are freed: the summary, if `DAT2_STATS` asks.
pub fn at_close(ia: &Arc<Ia>) {
    if crate::util::env::var_os("DAT2_STATS").is_some_and(|d| !d.is_empty()) {
        emit(&summary(ia));
    }
}
