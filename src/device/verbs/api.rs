//! rdma-core, loaded at run time.
//!
//! `libdat2.so.2` has no link-time dependency on `libibverbs.so.1` or `librdmacm.so.1`: the
//! verbs device opens them with `dlopen` the first time it needs them, through [`api`]. On a
//! host without them the load fails once, the failure is kept, and every later call reports
//! the same error, naming the library and what `dlerror` said.
//!
//! Each exported function is looked up by its plain name, which gives the symbol version the
//! library marks as default (for example `ibv_query_port@@IBVERBS_1.1`), the one a program
//! built against the installed headers would bind to.
//!
//! Several verbs are not exported at all: rdma-core's header defines them inline, calling
//! through the operations table of the device context. [`post_send`], [`post_recv`],
//! [`post_srq_recv`], [`poll_cq`], [`req_notify_cq`], [`alloc_mw`], [`dealloc_mw`],
//! [`bind_mw`], [`inc_rkey`] and [`Api::query_port`] do the same here.

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;
use std::fmt;
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use super::sys::*;

/// The soname of rdma-core's verbs library.
pub const LIBIBVERBS: &str = "libibverbs.so.1";
/// The soname of rdma-core's connection manager library.
pub const LIBRDMACM: &str = "librdmacm.so.1";

/// Why rdma-core could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed; `reason` is what `dlerror` said.
    Open { library: String, reason: String },
    /// The library was found but does not export a function the device needs.
    Symbol { library: String, symbol: &'static str, reason: String },
}

#[cfg(test)]
impl LoadError {
    /// The library file the error is about.
    pub fn library(&self) -> &str {
        match self {
            LoadError::Open { library, .. } | LoadError::Symbol { library, .. } => library,
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // dlerror usually names the file already (as asked for, or the path found for
            // it: "/lib/x86_64-linux-gnu/libibverbs.so.1: file too short"); do not say it twice.
            LoadError::Open { library, reason } if reason.contains(library.as_str()) => f.write_str(reason),
            LoadError::Open { library, reason } => write!(f, "{library}: {reason}"),
            LoadError::Symbol { library, symbol, reason } if reason.is_empty() => {
                write!(f, "{library}: missing symbol {symbol}")
            }
            LoadError::Symbol { library, symbol, reason } => {
                write!(f, "{library}: missing symbol {symbol} ({reason})")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// The address of `name` in `lib`; on failure what `dlerror` said (empty when the symbol
/// exists but is NULL).
fn address(lib: &Library, name: &str) -> Result<*mut c_void, String> {
    // SAFETY: the symbol is only read as an address (`*mut c_void`), which any symbol has;
    // it is given a function type by the callers, each of which states why that type is right.
    match unsafe { lib.get::<*mut c_void>(name.as_bytes()) } {
        Ok(sym) if !(*sym).is_null() => Ok(*sym),
        Ok(_) => Err(String::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Reinterprets a non-null symbol address as the function pointer type `F`.
///
/// # Safety
/// `F` must be an `unsafe extern "C" fn` type matching the C declaration of the symbol.
unsafe fn as_fn<F: Copy>(addr: *mut c_void) -> F {
    const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
    // SAFETY: `F` is a function pointer of pointer size (checked above) and `addr` is the
    // non-null address of a function with that signature (the caller's promise).
    unsafe { core::mem::transmute_copy::<*mut c_void, F>(&addr) }
}

/// Looks `name` up in `lib`, failing the load if it is missing.
///
/// # Safety
/// As [`as_fn`].
unsafe fn required<F: Copy>(lib: &Library, library: &str, name: &'static str) -> Result<F, LoadError> {
    match address(lib, name) {
        // SAFETY: forwarded to the caller.
        Ok(addr) => Ok(unsafe { as_fn(addr) }),
        Err(reason) => Err(LoadError::Symbol { library: library.to_owned(), symbol: name, reason }),
    }
}

/// Looks `name` up in `lib`; `None` when this rdma-core release does not have it.
///
/// # Safety
/// As [`as_fn`].
unsafe fn optional<F: Copy>(lib: &Library, name: &'static str) -> Option<F> {
    // SAFETY: forwarded to the caller.
    address(lib, name).ok().map(|addr| unsafe { as_fn(addr) })
}

/// Declares a table of library functions: one field per function, named as the C function
/// without its prefix, and a loader that fills it. Functions under `optional` are `Option`s
/// that stay `None` when the library predates them.
macro_rules! functions {
    (
        $(#[$attr:meta])*
        pub struct $table:ident, prefix $prefix:literal {
            $( $(#[$doc:meta])* $field:ident: $ty:ty, )*
        }
        optional {
            $( $(#[$odoc:meta])* $ofield:ident: $oty:ty, )*
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy)]
        pub struct $table {
            $( $(#[$doc])* pub $field: $ty, )*
            $( $(#[$odoc])* pub $ofield: Option<$oty>, )*
        }

        impl $table {
            /// The C names of the functions in this table, required ones first.
            #[cfg(test)]
            pub const SYMBOLS: &'static [&'static str] = &[
                $( concat!($prefix, stringify!($field)), )*
                $( concat!($prefix, stringify!($ofield)), )*
            ];

            /// Fills the table from `lib` (opened from the file `library`).
            fn load(lib: &Library, library: &str) -> Result<Self, LoadError> {
                // SAFETY: every field's type is written from the C declaration of the
                // function of the same name in rdma-core's installed headers.
                unsafe {
                    Ok(Self {
                        $( $field: required(lib, library, concat!($prefix, stringify!($field)))?, )*
                        $( $ofield: optional(lib, concat!($prefix, stringify!($ofield))), )*
                    })
                }
            }
        }
    };
}

functions! {
    /// The functions of `libibverbs.so.1` that the verbs device calls (`query_srq`,
    /// `wc_status_str` and `destroy_comp_channel` only its device tests, so far).
    #[cfg_attr(not(test), allow(dead_code))]
    pub struct Ibv, prefix "ibv_" {
        get_device_list: unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut ibv_device,
        free_device_list: unsafe extern "C" fn(list: *mut *mut ibv_device),
        get_device_name: unsafe extern "C" fn(device: *mut ibv_device) -> *const c_char,
        open_device: unsafe extern "C" fn(device: *mut ibv_device) -> *mut ibv_context,
        close_device: unsafe extern "C" fn(context: *mut ibv_context) -> c_int,
        query_device:
            unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int,
        /// The exported `ibv_query_port`. It fills only the fields of the oldest port
        /// attribute layout (up to `flags`, not `port_cap_flags2`) and leaves the rest as it
        /// was; prefer [`Api::query_port`], which does what the header does.
        query_port: unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            attr: *mut ibv_port_attr,
        ) -> c_int,
        query_gid: unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            index: c_int,
            gid: *mut ibv_gid,
        ) -> c_int,
        alloc_pd: unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_pd,
        dealloc_pd: unsafe extern "C" fn(pd: *mut ibv_pd) -> c_int,
        reg_mr: unsafe extern "C" fn(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            length: usize,
            access: c_int,
        ) -> *mut ibv_mr,
        dereg_mr: unsafe extern "C" fn(mr: *mut ibv_mr) -> c_int,
        create_comp_channel:
            unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_comp_channel,
        destroy_comp_channel: unsafe extern "C" fn(channel: *mut ibv_comp_channel) -> c_int,
        create_cq: unsafe extern "C" fn(
            context: *mut ibv_context,
            cqe: c_int,
            cq_context: *mut c_void,
            channel: *mut ibv_comp_channel,
            comp_vector: c_int,
        ) -> *mut ibv_cq,
        destroy_cq: unsafe extern "C" fn(cq: *mut ibv_cq) -> c_int,
        get_cq_event: unsafe extern "C" fn(
            channel: *mut ibv_comp_channel,
            cq: *mut *mut ibv_cq,
            cq_context: *mut *mut c_void,
        ) -> c_int,
        ack_cq_events: unsafe extern "C" fn(cq: *mut ibv_cq, nevents: c_uint),
        create_qp:
            unsafe extern "C" fn(pd: *mut ibv_pd, init_attr: *mut ibv_qp_init_attr) -> *mut ibv_qp,
        modify_qp:
            unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int,
        destroy_qp: unsafe extern "C" fn(qp: *mut ibv_qp) -> c_int,
        create_srq: unsafe extern "C" fn(
            pd: *mut ibv_pd,
            init_attr: *mut ibv_srq_init_attr,
        ) -> *mut ibv_srq,
        modify_srq: unsafe extern "C" fn(
            srq: *mut ibv_srq,
            attr: *mut ibv_srq_attr,
            attr_mask: c_int,
        ) -> c_int,
        query_srq: unsafe extern "C" fn(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int,
        destroy_srq: unsafe extern "C" fn(srq: *mut ibv_srq) -> c_int,
        /// A UD address handle in `pd` (ud.rs).
        create_ah: unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah,
        destroy_ah: unsafe extern "C" fn(ah: *mut ibv_ah) -> c_int,
        get_async_event:
            unsafe extern "C" fn(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int,
        ack_async_event: unsafe extern "C" fn(event: *mut ibv_async_event),
        wc_status_str: unsafe extern "C" fn(status: ibv_wc_status) -> *const c_char,
    }
    optional {
        /// `ibv_reg_mr_iova2` (rdma-core 29 and later): registration at a chosen I/O
        /// virtual address, for zero-based regions.
        reg_mr_iova2: unsafe extern "C" fn(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            length: usize,
            iova: u64,
            access: c_uint,
        ) -> *mut ibv_mr,
    }
}

functions! {
    /// The functions of `librdmacm.so.1` that the verbs device calls (`event_str` only its
    /// device tests, so far).
    #[cfg_attr(not(test), allow(dead_code))]
    pub struct Cm, prefix "rdma_" {
        create_event_channel: unsafe extern "C" fn() -> *mut rdma_event_channel,
        create_id: unsafe extern "C" fn(
            channel: *mut rdma_event_channel,
            id: *mut *mut rdma_cm_id,
            context: *mut c_void,
            ps: rdma_port_space,
        ) -> c_int,
        destroy_id: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
        bind_addr: unsafe extern "C" fn(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int,
        resolve_addr: unsafe extern "C" fn(
            id: *mut rdma_cm_id,
            src_addr: *mut sockaddr,
            dst_addr: *mut sockaddr,
            timeout_ms: c_int,
        ) -> c_int,
        resolve_route: unsafe extern "C" fn(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int,
        connect:
            unsafe extern "C" fn(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int,
        listen: unsafe extern "C" fn(id: *mut rdma_cm_id, backlog: c_int) -> c_int,
        accept:
            unsafe extern "C" fn(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int,
        reject: unsafe extern "C" fn(
            id: *mut rdma_cm_id,
            private_data: *const c_void,
            private_data_len: u8,
        ) -> c_int,
        disconnect: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
        get_cm_event: unsafe extern "C" fn(
            channel: *mut rdma_event_channel,
            event: *mut *mut rdma_cm_event,
        ) -> c_int,
        ack_cm_event: unsafe extern "C" fn(event: *mut rdma_cm_event) -> c_int,
        /// The QP attributes for moving a QP rdma_cm did not create to `attr.qp_state`.
        init_qp_attr: unsafe extern "C" fn(id: *mut rdma_cm_id, attr: *mut ibv_qp_attr, mask: *mut c_int) -> c_int,
        /// Completes an active connection whose QP the caller moved to RTS.
        establish: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
        /// The port in network byte order.
        get_src_port: unsafe extern "C" fn(id: *mut rdma_cm_id) -> __be16,
        /// The port in network byte order.
        get_dst_port: unsafe extern "C" fn(id: *mut rdma_cm_id) -> __be16,
        event_str: unsafe extern "C" fn(event: rdma_cm_event_type) -> *const c_char,
    }
    optional {}
}

/// rdma-core's two libraries, loaded.
pub struct Api {
    pub ibv: Ibv,
    pub cm: Cm,
    /// Kept open for as long as the tables above are used (for the life of the process when
    /// the `Api` is the one [`api`] returns).
    _libs: [Library; 2],
}

/// rdma-core, loaded on first use. The outcome, success or failure, is kept for the life of
/// the process.
pub fn api() -> Result<&'static Api, LoadError> {
    static API: OnceLock<Result<Api, LoadError>> = OnceLock::new();
    API.get_or_init(|| {
        let loaded = load(LIBIBVERBS, LIBRDMACM);
        if let Err(e) = &loaded {
            crate::dbg_log!(crate::log::DbgType::PROVIDER_API, "verbs: cannot load rdma-core: {e}");
        }
        loaded
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Opens the verbs library `ibv` and the connection manager library `cm` (file names or
/// paths, as `dlopen` takes them) and looks up every function the device needs.
pub fn load(ibv: &str, cm: &str) -> Result<Api, LoadError> {
    let ibv_lib = open(ibv)?;
    let cm_lib = open(cm)?;
    Ok(Api { ibv: Ibv::load(&ibv_lib, ibv)?, cm: Cm::load(&cm_lib, cm)?, _libs: [ibv_lib, cm_lib] })
}

fn open(library: &str) -> Result<Library, LoadError> {
    // SAFETY: loading runs the library's initialisers. rdma-core's only set up their own
    // state; providers and the kernel are reached later, from ibv_get_device_list.
    // RTLD_LOCAL keeps rdma-core's symbols out of the global namespace, so they can clash
    // with nothing the application loads.
    unsafe { Library::open(Some(library), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| LoadError::Open { library: library.to_owned(), reason: e.to_string() })
}

/// `abi_compat` of a context that libibverbs embedded in a `verbs_context` (its value is
/// all ones, as the header defines it).
const ABI_IS_EXTENDED: usize = usize::MAX;

/// The `verbs_context` that holds `ctx`, if libibverbs made one (every release of the last
/// years does).
///
/// # Safety
/// `ctx` must point to a live context opened by libibverbs.
unsafe fn extended(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: the caller guarantees `ctx` is live.
    let compat = unsafe { ptr::addr_of!((*ctx).abi_compat).read() };
    if compat as usize != ABI_IS_EXTENDED {
        return None;
    }
    // The context is the last member of the extended one; the fields before it are at
    // fixed distances below it whatever the library's release, because new fields are
    // added at the front.
    Some(ctx.cast::<u8>().wrapping_sub(offset_of!(verbs_context, context)).cast())
}

/// Whether the library's `verbs_context` reaches back far enough to hold the member that
/// sits at `offset` in ours: `sz` is the size of the library's structure, which grows
/// towards lower addresses.
///
/// # Safety
/// `vctx` must come from [`extended`] for a live context.
unsafe fn reaches(vctx: *mut verbs_context, offset: usize) -> bool {
    // SAFETY: `sz` sits just before the context in every release (the caller's promise).
    let sz = unsafe { ptr::addr_of!((*vctx).sz).read() };
    sz >= size_of::<verbs_context>() - offset
}

/// Sets `errno`, as the inline verbs do when they fail before reaching the provider.
fn set_errno(value: c_int) {
    // SAFETY: __errno_location returns this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = value };
}

impl Api {
    /// `ibv_query_port` as rdma-core's header defines it: through the extended context's
    /// `query_port`, which fills every field of `attr` this crate knows of, when the
    /// library has it; otherwise `attr` is zeroed and the exported function fills the
    /// fields of the oldest layout. Returns 0 or an errno value.
    ///
    /// # Safety
    /// `context` must be a live context opened through `self`.
    pub unsafe fn query_port(&self, context: *mut ibv_context, port_num: u8, attr: &mut ibv_port_attr) -> c_int {
        // SAFETY: the caller guarantees `context` is live.
        if let Some(vctx) = unsafe { extended(context) } {
            // SAFETY: `vctx` comes from `extended` for a live context, and the member is
            // read only once `reaches` says the library's structure has it.
            let op = unsafe {
                if reaches(vctx, offset_of!(verbs_context, query_port)) {
                    ptr::addr_of!((*vctx).query_port).read()
                } else {
                    None
                }
            };
            if let Some(op) = op {
                // SAFETY: the operation takes the live context and a writable attribute
                // structure of the size passed, which is the size of `attr`.
                return unsafe { op(context, port_num, attr, size_of::<ibv_port_attr>()) };
            }
        }
        *attr = ibv_port_attr::default();
        // SAFETY: the exported function writes at most the oldest layout, a prefix of `attr`.
        unsafe { (self.ibv.query_port)(context, port_num, attr) }
    }
}

/// `ibv_post_send`: the provider's `post_send` from the context's operations table.
/// Returns 0 or an errno value, with `*bad` naming the first request not posted.
///
/// # Safety
/// `qp` must be a live QP; `wr` a valid chain of send requests; `bad` writable.
pub unsafe fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    // SAFETY: a live QP points to its live context, whose operations table the provider
    // filled when the context was opened and never changes.
    match unsafe { (*(*qp).context).ops.post_send } {
        // SAFETY: the provider's function, called with the arguments the caller vouches for.
        Some(op) => unsafe { op(qp, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_recv`: the provider's `post_recv` from the context's operations table.
///
/// # Safety
/// `qp` must be a live QP; `wr` a valid chain of receive requests; `bad` writable.
pub unsafe fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: as in `post_send`.
    match unsafe { (*(*qp).context).ops.post_recv } {
        // SAFETY: as in `post_send`.
        Some(op) => unsafe { op(qp, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_srq_recv`: the provider's `post_srq_recv` from the context's operations table.
///
/// # Safety
/// `srq` must be a live SRQ; `wr` a valid chain of receive requests; `bad` writable.
pub unsafe fn post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: a live SRQ points to its live context; its operations table is fixed.
    match unsafe { (*(*srq).context).ops.post_srq_recv } {
        // SAFETY: the provider's function, called with the arguments the caller vouches for.
        Some(op) => unsafe { op(srq, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_poll_cq`: up to `num_entries` completions into `wc`. Returns how many, or a
/// negative value on error.
///
/// # Safety
/// `cq` must be a live CQ and `wc` must have room for `num_entries` entries.
pub unsafe fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: a live CQ points to its live context; its operations table is fixed.
    match unsafe { (*(*cq).context).ops.poll_cq } {
        // SAFETY: the provider's function, called with the arguments the caller vouches for.
        Some(op) => unsafe { op(cq, num_entries, wc) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            -1
        }
    }
}

/// `ibv_req_notify_cq`: arms `cq` so that its next completion (the next solicited one with
/// `solicited_only`) raises an event on its completion channel. Returns 0 or an errno value.
///
/// # Safety
/// `cq` must be a live CQ.
pub unsafe fn req_notify_cq(cq: *mut ibv_cq, solicited_only: bool) -> c_int {
    // SAFETY: a live CQ points to its live context; its operations table is fixed.
    match unsafe { (*(*cq).context).ops.req_notify_cq } {
        // SAFETY: the provider's function, called on a live CQ.
        Some(op) => unsafe { op(cq, c_int::from(solicited_only)) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_alloc_mw`: a memory window of `mw_type` (`IBV_MW_TYPE_1` or `IBV_MW_TYPE_2`) in
/// `pd`. NULL with `errno` set on failure, `EOPNOTSUPP` when the device has no windows.
///
/// # Safety
/// `pd` must be a live protection domain.
pub unsafe fn alloc_mw(pd: *mut ibv_pd, mw_type: ibv_mw_type) -> *mut ibv_mw {
    // SAFETY: a live PD points to its live context; its operations table is fixed.
    match unsafe { (*(*pd).context).ops.alloc_mw } {
        // SAFETY: the provider's function, called on a live PD.
        Some(op) => unsafe { op(pd, mw_type) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_mw`. Returns 0 or an errno value.
///
/// # Safety
/// `mw` must be a live window from [`alloc_mw`]; it is gone afterwards.
pub unsafe fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: a live window points to its live context; its operations table is fixed.
    match unsafe { (*(*mw).context).ops.dealloc_mw } {
        // SAFETY: the provider's function, called on a live window.
        Some(op) => unsafe { op(mw) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_bind_mw`: binds a **type 1** window through the provider's `bind_mw`, with the
/// header's checks. Type 2 windows are not bound here but by a work request of opcode
/// `IBV_WR_BIND_MW` posted with [`post_send`]; for them this returns `EINVAL`, as the
/// header does. Returns 0 or an errno value; on success the window's new rkey is in
/// `(*mw).rkey` once the bind completes.
///
/// # Safety
/// `qp` and `mw` must be live and `bind` valid for reads.
#[cfg(test)]
pub unsafe fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    // SAFETY: the caller guarantees all three are valid; only plain fields are read.
    let (mw_type, mw_pd, info) = unsafe { ((*mw).type_, (*mw).pd, (*bind).bind_info) };
    if mw_type != IBV_MW_TYPE_1 {
        return libc::EINVAL;
    }
    if info.mr.is_null() {
        if info.addr != 0 || info.length != 0 {
            return libc::EINVAL;
        }
    // SAFETY: a non-null `mr` in a bind request names a live region (the caller's promise).
    } else if mw_pd != unsafe { (*info.mr).pd } {
        return libc::EPERM;
    }
    // SAFETY: a live window points to its live context; its operations table is fixed.
    match unsafe { (*(*mw).context).ops.bind_mw } {
        // SAFETY: the provider's function, called with the arguments the caller vouches for.
        Some(op) => unsafe { op(qp, mw, bind) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_inc_rkey`: the next rkey for a window, the low 8 bits (the key's tag, which the
/// consumer owns) incremented with wrap-around and the upper 24 (the index) kept.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// The devices libibverbs found, freed when dropped (the device tests list them; the device
/// itself finds its port in sysfs).
#[cfg(test)]
pub struct DeviceList<'a> {
    api: &'a Api,
    list: *mut *mut ibv_device,
    len: usize,
}

#[cfg(test)]
impl<'a> DeviceList<'a> {
    /// `ibv_get_device_list`; on failure the `errno` value: `ENOSYS` when the kernel has no
    /// RDMA support at all (no `/sys/class/infiniband_verbs`), which is not the same as an
    /// empty list (RDMA in the kernel, no device).
    pub fn new(api: &'a Api) -> Result<Self, c_int> {
        let mut n: c_int = 0;
        // SAFETY: the function only writes the count through the pointer it is given.
        let list = unsafe { (api.ibv.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        Ok(DeviceList { api, list, len: usize::try_from(n).unwrap_or(0) })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The devices, valid while the list lives (open the ones to keep before dropping it).
    pub fn devices(&self) -> &[*mut ibv_device] {
        // SAFETY: libibverbs returned an array of `len` device pointers (plus a NULL), which
        // stays allocated until `free_device_list` in `drop`.
        unsafe { std::slice::from_raw_parts(self.list, self.len) }
    }

    /// The kernel name (`rxe0`, `mlx5_0`) of the device at `index` in the list.
    pub fn name(&self, index: usize) -> Option<String> {
        let device = *self.devices().get(index)?;
        // SAFETY: `device` comes from this list, which is still alive.
        let name = unsafe { (self.api.ibv.get_device_name)(device) };
        if name.is_null() {
            return None;
        }
        // SAFETY: libibverbs returns a NUL-terminated name stored in the device.
        Some(unsafe { core::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
impl Drop for DeviceList<'_> {
    fn drop(&mut self) {
        // SAFETY: the list came from `get_device_list` of the same library and is freed once.
        unsafe { (self.api.ibv.free_device_list)(self.list) };
    }
}

#[cfg(test)]
mod tests {
    use core::ffi::c_void;
    use core::mem::offset_of;
    use core::ptr;

    use super::{
        alloc_mw, api, bind_mw, dealloc_mw, extended, inc_rkey, load, poll_cq, post_recv, post_send, post_srq_recv, reaches, req_notify_cq,
        set_errno, Api, Cm, DeviceList, Ibv, LoadError, ABI_IS_EXTENDED, LIBIBVERBS, LIBRDMACM,
    };
    use crate::device::verbs::sys::{
        ibv_context, ibv_cq, ibv_mr, ibv_mw, ibv_mw_bind, ibv_pd, ibv_port_attr, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_srq, ibv_wc,
        verbs_context, IBV_MW_TYPE_1, IBV_MW_TYPE_2, IBV_WC_SUCCESS, RDMA_CM_EVENT_ESTABLISHED,
    };

    #[test]
    fn inc_rkey_bumps_only_the_tag() {
        assert_eq!(inc_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(inc_rkey(0x1234_56fe), 0x1234_56ff);
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(inc_rkey(0xffff_ffff), 0xffff_ff00);
        assert_eq!(inc_rkey(0), 1);
        for k in [0u32, 0x80, 0xabcd_ef7f, 0xdead_beef] {
            assert_eq!(inc_rkey(k) >> 8, k >> 8);
            assert_eq!(inc_rkey(k) & 0xff, (k as u8).wrapping_add(1) as u32);
        }
    }

    #[test]
    fn tables_name_every_function() {
        assert_eq!(Ibv::SYMBOLS.len(), 31);
        assert_eq!(Cm::SYMBOLS.len(), 18);
        assert!(Ibv::SYMBOLS.contains(&"ibv_reg_mr_iova2"));
        assert!(Cm::SYMBOLS.contains(&"rdma_get_dst_port"));
        assert!(Ibv::SYMBOLS.iter().all(|s| s.starts_with("ibv_")));
        assert!(Cm::SYMBOLS.iter().all(|s| s.starts_with("rdma_")));
    }

    #[test]
    fn loads_on_this_host_and_lists_devices() {
        let api = api().unwrap_or_else(|e| panic!("rdma-core should load here: {e}"));
        assert!(api.ibv.reg_mr_iova2.is_some(), "rdma-core 44 has ibv_reg_mr_iova2");
        // A second call returns the same tables.
        assert!(std::ptr::eq(api, api_ok()));
        // Without RDMA in the kernel (this build host: no /sys/class/infiniband_verbs),
        // libibverbs returns NULL with ENOSYS. With it, a NULL-terminated list, empty when
        // there is no device (the Soft-RoCE VM has rxe0), which must be freed either way.
        let uverbs = std::path::Path::new("/sys/class/infiniband_verbs").exists();
        match DeviceList::new(api) {
            Ok(list) => {
                assert!(uverbs, "a device list without kernel support");
                assert_eq!(list.devices().len(), list.len());
                // SAFETY: the list holds its `len` entries plus the terminating NULL.
                assert!(unsafe { *list.list.add(list.len) }.is_null());
                for i in 0..list.len() {
                    assert!(list.name(i).is_some_and(|n| !n.is_empty()));
                }
                assert_eq!(list.name(list.len()), None);
                drop(list);
            }
            Err(errno) => {
                assert_eq!(errno, libc::ENOSYS);
                assert!(!uverbs, "no device list although the kernel has RDMA");
            }
        }
        // Strings of the libraries answer without a device.
        // SAFETY: both take an enum value and return a static string.
        let (wc, ev) = unsafe { ((api.ibv.wc_status_str)(IBV_WC_SUCCESS), (api.cm.event_str)(RDMA_CM_EVENT_ESTABLISHED)) };
        // SAFETY: both are NUL-terminated static strings.
        let (wc, ev) = unsafe { (core::ffi::CStr::from_ptr(wc), core::ffi::CStr::from_ptr(ev)) };
        assert_eq!(wc.to_str(), Ok("success"));
        assert_eq!(ev.to_str(), Ok("RDMA_CM_EVENT_ESTABLISHED"));
    }

    fn api_ok() -> &'static Api {
        api().expect("loaded before")
    }

    #[test]
    fn plain_lookup_gives_the_default_symbol_version() {
        let api = api().expect("rdma-core loads here");
        // SAFETY: dlopen with RTLD_NOLOAD only finds the library `api` already holds open;
        // dlvsym reads the symbol table. The handle is released at the end.
        unsafe {
            let handle = libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            assert!(!handle.is_null());
            let v11 = libc::dlvsym(handle, c"ibv_query_port".as_ptr(), c"IBVERBS_1.1".as_ptr());
            let v10 = libc::dlvsym(handle, c"ibv_query_port".as_ptr(), c"IBVERBS_1.0".as_ptr());
            assert_eq!(api.ibv.query_port as usize, v11 as usize);
            assert_ne!(v10 as usize, v11 as usize);
            let v18 = libc::dlvsym(handle, c"ibv_reg_mr_iova2".as_ptr(), c"IBVERBS_1.8".as_ptr());
            assert_eq!(api.ibv.reg_mr_iova2.map(|f| f as usize), Some(v18 as usize));
            libc::dlclose(handle);
        }
    }

    #[test]
    fn a_missing_library_is_named() {
        let Err(e) = load("libdat2-no-such-verbs.so.1", LIBRDMACM) else { panic!("loaded a library that does not exist") };
        assert_eq!(e.library(), "libdat2-no-such-verbs.so.1");
        let text = e.to_string();
        assert!(text.starts_with("libdat2-no-such-verbs.so.1: "), "{text}");
        assert!(text.contains("cannot open shared object file"), "{text}");

        let Err(e) = load(LIBIBVERBS, "/nonexistent/librdmacm.so.1") else { panic!("loaded a library that does not exist") };
        assert_eq!(e.library(), "/nonexistent/librdmacm.so.1");
        assert!(e.to_string().starts_with("/nonexistent/librdmacm.so.1: "), "{e}");
    }

    #[test]
    fn a_missing_symbol_is_named() {
        // libc is a real library that lacks every verbs function.
        let Err(e) = load("libc.so.6", LIBRDMACM) else { panic!("libc passed for libibverbs") };
        assert!(matches!(e, LoadError::Symbol { symbol: "ibv_get_device_list", .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.starts_with("libc.so.6: missing symbol ibv_get_device_list"), "{text}");
    }

    // A context made here, with an operations table of test functions, shows that each
    // inline verb calls the right entry with its arguments, without a device.
    mod fake {
        use core::ffi::c_int;
        use std::cell::Cell;

        use crate::device::verbs::sys::{
            ibv_context, ibv_cq, ibv_mw, ibv_mw_bind, ibv_port_attr, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_srq, ibv_wc,
        };

        thread_local! {
            /// The entry last called and the integer argument it got.
            pub static CALLED: Cell<(&'static str, c_int)> = const { Cell::new(("", 0)) };
        }

        fn called(name: &'static str, arg: c_int) {
            CALLED.with(|c| c.set((name, arg)));
        }

        pub extern "C" fn post_send(_: *mut ibv_qp, _: *mut ibv_send_wr, _: *mut *mut ibv_send_wr) -> c_int {
            called("post_send", 0);
            11
        }
        pub extern "C" fn post_recv(_: *mut ibv_qp, _: *mut ibv_recv_wr, _: *mut *mut ibv_recv_wr) -> c_int {
            called("post_recv", 0);
            12
        }
        pub extern "C" fn post_srq_recv(_: *mut ibv_srq, _: *mut ibv_recv_wr, _: *mut *mut ibv_recv_wr) -> c_int {
            called("post_srq_recv", 0);
            13
        }
        pub extern "C" fn poll_cq(_: *mut ibv_cq, n: c_int, _: *mut ibv_wc) -> c_int {
            called("poll_cq", n);
            n - 1
        }
        pub extern "C" fn req_notify_cq(_: *mut ibv_cq, solicited_only: c_int) -> c_int {
            called("req_notify_cq", solicited_only);
            0
        }
        pub extern "C" fn dealloc_mw(_: *mut ibv_mw) -> c_int {
            called("dealloc_mw", 0);
            0
        }
        pub extern "C" fn bind_mw(_: *mut ibv_qp, _: *mut ibv_mw, _: *mut ibv_mw_bind) -> c_int {
            called("bind_mw", 0);
            0
        }
        pub extern "C" fn query_port(_: *mut ibv_context, port: u8, attr: *mut ibv_port_attr, len: usize) -> c_int {
            called("query_port", c_int::from(port));
            assert_eq!(len, size_of::<ibv_port_attr>());
            // SAFETY: the caller passed a whole structure, as `len` says.
            unsafe { (*attr).port_cap_flags2 = 0x77 };
            0
        }

        pub fn last() -> (&'static str, c_int) {
            CALLED.with(|c| c.replace(("", 0)))
        }
    }

    #[test]
    fn inline_verbs_go_through_the_operations_table() {
        let mut vctx: Box<verbs_context> = Box::default();
        vctx.sz = size_of::<verbs_context>();
        vctx.query_port = Some(fake::query_port);
        vctx.context.abi_compat = ABI_IS_EXTENDED as *mut c_void;
        let ops = &mut vctx.context.ops;
        ops.post_send = Some(fake::post_send);
        ops.post_recv = Some(fake::post_recv);
        ops.post_srq_recv = Some(fake::post_srq_recv);
        ops.poll_cq = Some(fake::poll_cq);
        ops.req_notify_cq = Some(fake::req_notify_cq);
        ops.dealloc_mw = Some(fake::dealloc_mw);
        ops.bind_mw = Some(fake::bind_mw);
        // As libibverbs does, hand out a context pointer that may reach the whole structure.
        let base = Box::into_raw(vctx);
        // SAFETY: `base` is a live allocation, freed at the end of the test.
        let ctx: *mut ibv_context = unsafe { ptr::addr_of_mut!((*base).context) };
        let mut pd = ibv_pd { context: ctx, handle: 0 };
        let mut qp = ibv_qp { context: ctx, pd: &mut pd, ..Default::default() };
        let mut cq = ibv_cq { context: ctx, ..Default::default() };
        let mut srq = ibv_srq { context: ctx, pd: &mut pd, ..Default::default() };
        let mut mw = ibv_mw { context: ctx, pd: &mut pd, rkey: 0, handle: 0, type_: IBV_MW_TYPE_1 };
        let mut mr = ibv_mr { context: ctx, pd: &mut pd, ..Default::default() };
        let (mut swr, mut rwr, mut wc) = (ibv_send_wr::default(), ibv_recv_wr::default(), ibv_wc::default());
        let (mut bad_s, mut bad_r) = (ptr::null_mut(), ptr::null_mut());

        // SAFETY: every object points to the context above, whose operations are the test
        // functions, which touch nothing but their own bookkeeping (and the port attributes).
        unsafe {
            assert_eq!(post_send(&mut qp, &mut swr, &mut bad_s), 11);
            assert_eq!(fake::last().0, "post_send");
            assert_eq!(post_recv(&mut qp, &mut rwr, &mut bad_r), 12);
            assert_eq!(fake::last().0, "post_recv");
            assert_eq!(post_srq_recv(&mut srq, &mut rwr, &mut bad_r), 13);
            assert_eq!(fake::last().0, "post_srq_recv");
            assert_eq!(poll_cq(&mut cq, 1, &mut wc), 0);
            assert_eq!(fake::last(), ("poll_cq", 1));
            assert_eq!(req_notify_cq(&mut cq, true), 0);
            assert_eq!(fake::last(), ("req_notify_cq", 1));
            assert_eq!(req_notify_cq(&mut cq, false), 0);
            assert_eq!(fake::last(), ("req_notify_cq", 0));
            assert_eq!(dealloc_mw(&mut mw), 0);
            assert_eq!(fake::last().0, "dealloc_mw");

            // bind_mw: the header's checks come first.
            let mut bind = ibv_mw_bind::default();
            assert_eq!(bind_mw(&mut qp, &mut mw, &mut bind), 0, "an unbind (no MR, empty range)");
            assert_eq!(fake::last().0, "bind_mw");
            bind.bind_info.length = 1;
            assert_eq!(bind_mw(&mut qp, &mut mw, &mut bind), libc::EINVAL, "a range without an MR");
            bind.bind_info.mr = &mut mr;
            assert_eq!(bind_mw(&mut qp, &mut mw, &mut bind), 0);
            assert_eq!(fake::last().0, "bind_mw");
            let mut other_pd = ibv_pd { context: ctx, handle: 1 };
            (*bind.bind_info.mr).pd = &mut other_pd;
            assert_eq!(bind_mw(&mut qp, &mut mw, &mut bind), libc::EPERM, "an MR of another PD");
            mw.type_ = IBV_MW_TYPE_2;
            assert_eq!(bind_mw(&mut qp, &mut mw, &mut bind), libc::EINVAL, "type 2 is bound by post_send");
            assert_eq!(fake::last().0, "", "no call after a refused check");

            // alloc_mw without the operation: NULL and EOPNOTSUPP, as the header does.
            set_errno(0);
            assert!(alloc_mw(&mut pd, IBV_MW_TYPE_2).is_null());
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
            // Absent entries are refused instead of called.
            (*ctx).ops.post_send = None;
            assert_eq!(post_send(&mut qp, &mut swr, &mut bad_s), libc::EOPNOTSUPP);
            (*ctx).ops.poll_cq = None;
            assert_eq!(poll_cq(&mut cq, 1, &mut wc), -1);

            // query_port takes the extended operation, with the whole structure.
            let mut attr = ibv_port_attr::default();
            let api = api().expect("rdma-core loads here");
            assert_eq!(api.query_port(ctx, 3, &mut attr), 0);
            assert_eq!(fake::last(), ("query_port", 3));
            assert_eq!(attr.port_cap_flags2, 0x77);

            // The extended members exist only as far back as the library's `sz` reaches.
            let vp = extended(ctx).expect("marked as extended");
            assert_eq!(vp, base);
            let at = offset_of!(verbs_context, query_port);
            assert!(reaches(vp, at));
            (*vp).sz = size_of::<verbs_context>() - at - 1;
            assert!(!reaches(vp, at));
            assert!(reaches(vp, offset_of!(verbs_context, advise_mr)));
            (*ctx).abi_compat = ptr::null_mut();
            assert!(extended(ctx).is_none());
            drop(Box::from_raw(base));
        }
    }

    #[test]
    fn error_text_does_not_repeat_the_file() {
        let e = LoadError::Open { library: "libx.so".into(), reason: "libx.so: cannot open shared object file".into() };
        assert_eq!(e.to_string(), "libx.so: cannot open shared object file");
        let e = LoadError::Open { library: "libx.so".into(), reason: "/lib/libx.so: file too short".into() };
        assert_eq!(e.to_string(), "/lib/libx.so: file too short");
        let e = LoadError::Open { library: "libx.so".into(), reason: "boom".into() };
        assert_eq!(e.to_string(), "libx.so: boom");
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod device_tests;
