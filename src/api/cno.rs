//! Consumer notification objects: `dat_cno_create`, `dat_cno_modify_agent`, `dat_cno_query`,
//! `dat_cno_free`, `dat_cno_wait`.

use super::dispatch::call;
use crate::abi::*;
use crate::api::dispatch;
use crate::ffi::guard_try;
use crate::registry::handles::{self, Kind, Tracked};
use crate::registry::{self};

fn cno(handle: DAT_CNO_HANDLE) -> Result<Tracked, DAT_RETURN> {
    handles::check(handle, Kind::Cno, DAT_INVALID_HANDLE_CNO)
}

pub(super) extern "C" fn dat_cno_create(
    ia_handle: DAT_IA_HANDLE,
    agent: DAT_OS_WAIT_PROXY_AGENT,
    cno_out: *mut DAT_CNO_HANDLE,
) -> DAT_RETURN {
    guard_try(|| {
        let ia = registry::ia(ia_handle)?;
        Ok(dispatch::create(cno_out, Kind::Cno, ia.slot, ia.provider, |out| call!(ia.provider, cno_create_func, ia.raw, agent, out)))
    })
}

extern "C" fn dat_cno_modify_agent(handle: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN {
    guard_try(|| Ok(call!(cno(handle)?.provider, cno_modify_agent_func, handle, agent)))
}

extern "C" fn dat_cno_query(handle: DAT_CNO_HANDLE, mask: DAT_CNO_PARAM_MASK, param: *mut DAT_CNO_PARAM) -> DAT_RETURN {
    guard_try(|| Ok(call!(cno(handle)?.provider, cno_query_func, handle, mask, param)))
}

pub(super) extern "C" fn dat_cno_free(handle: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard_try(|| {
        let t = cno(handle)?;
        Ok(dispatch::free(handle, call!(t.provider, cno_free_func, handle)))
    })
}

extern "C" fn dat_cno_wait(handle: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    guard_try(|| Ok(call!(cno(handle)?.provider, cno_wait_func, handle, timeout, evd)))
}

crate::export_c!(dat_cno_create, dat_cno_modify_agent, dat_cno_query, dat_cno_free, dat_cno_wait);
