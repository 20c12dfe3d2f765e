//! What the fuzz targets share: how they fail (an abort libFuzzer reports, with the reason and
//! a backtrace), the library's C entry points both drive, and small helpers around them.
//! Included by each target with `#[macro_use] #[path = "common.rs"] mod common;`.
#![allow(dead_code)]

use dat2::abi::*;

#[cold]
pub fn fail(why: std::fmt::Arguments) -> ! {
    eprintln!("==dat2-fuzz== {why}\n{}", std::backtrace::Backtrace::force_capture());
    std::process::abort();
}

macro_rules! fail {
    ($($t:tt)*) => { $crate::common::fail(format_args!($($t)*)) };
}

// The consumer: the library's C entry points both targets call.
extern "C" {
    pub fn dat_ia_openv(
        name: DAT_NAME_PTR,
        qlen: DAT_COUNT,
        async_evd: *mut DAT_EVD_HANDLE,
        ia: *mut DAT_IA_HANDLE,
        major: DAT_UINT32,
        minor: DAT_UINT32,
        ts: DAT_BOOLEAN,
    ) -> DAT_RETURN;
    pub fn dat_pz_create(ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE) -> DAT_RETURN;
    pub fn dat_evd_create(
        ia: DAT_IA_HANDLE,
        qlen: DAT_COUNT,
        cno: DAT_CNO_HANDLE,
        flags: DAT_EVD_FLAGS,
        evd: *mut DAT_EVD_HANDLE,
    ) -> DAT_RETURN;
    pub fn dat_evd_wait(
        evd: DAT_EVD_HANDLE,
        timeout: DAT_TIMEOUT,
        threshold: DAT_COUNT,
        event: *mut DAT_EVENT,
        nmore: *mut DAT_COUNT,
    ) -> DAT_RETURN;
    pub fn dat_evd_dequeue(evd: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> DAT_RETURN;
    #[allow(clippy::too_many_arguments)]
    pub fn dat_lmr_create(
        ia: DAT_IA_HANDLE,
        kind: DAT_MEM_TYPE,
        region: DAT_REGION_DESCRIPTION,
        len: DAT_VLEN,
        pz: DAT_PZ_HANDLE,
        privileges: DAT_MEM_PRIV_FLAGS,
        va_type: DAT_VA_TYPE,
        lmr: *mut DAT_LMR_HANDLE,
        lkey: *mut DAT_LMR_CONTEXT,
        rkey: *mut DAT_RMR_CONTEXT,
        reg_len: *mut DAT_VLEN,
        reg_addr: *mut DAT_VADDR,
    ) -> DAT_RETURN;
    pub fn dat_psp_create_any(
        ia: DAT_IA_HANDLE,
        qual: *mut DAT_CONN_QUAL,
        evd: DAT_EVD_HANDLE,
        flags: DAT_PSP_FLAGS,
        psp: *mut DAT_PSP_HANDLE,
    ) -> DAT_RETURN;
    pub fn dat_ep_create(
        ia: DAT_IA_HANDLE,
        pz: DAT_PZ_HANDLE,
        recv: DAT_EVD_HANDLE,
        req: DAT_EVD_HANDLE,
        conn: DAT_EVD_HANDLE,
        attr: *const DAT_EP_ATTR,
        ep: *mut DAT_EP_HANDLE,
    ) -> DAT_RETURN;
    pub fn dat_ep_post_recv(
        ep: DAT_EP_HANDLE,
        n: DAT_COUNT,
        iov: *mut DAT_LMR_TRIPLET,
        cookie: DAT_DTO_COOKIE,
        flags: DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN;
    pub fn dat_cr_accept(cr: DAT_CR_HANDLE, ep: DAT_EP_HANDLE, size: DAT_COUNT, pdata: *const core::ffi::c_void) -> DAT_RETURN;
}

/// Checks an entry point's result: DAT_INTERNAL_ERROR is a panic the library caught.
pub fn ok(what: &str, rc: DAT_RETURN) -> bool {
    if dat_get_type(rc) == DAT_INTERNAL_ERROR {
        fail!("{what} returned DAT_INTERNAL_ERROR ({rc:#x}): a panic inside the library");
    }
    rc == DAT_SUCCESS
}

pub fn must(what: &str, rc: DAT_RETURN) {
    if !ok(what, rc) {
        fail!("set-up: {what} failed: {rc:#x}");
    }
}

pub fn count_dir(path: &str) -> usize {
    std::fs::read_dir(path).map(|d| d.count()).unwrap_or(0)
}

pub fn evd(ia: DAT_IA_HANDLE, flags: DAT_EVD_FLAGS) -> DAT_EVD_HANDLE {
    let mut h = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    must("dat_evd_create", unsafe { dat_evd_create(ia, 1024, std::ptr::null_mut(), flags, &mut h) });
    h
}
