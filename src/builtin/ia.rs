//! IA semantics: query (honest attributes from the device) and close (graceful refuses while
//! objects remain; abrupt frees everything, each object through its own teardown). Opening
//! an IA, which makes its async EVD, is in `ia_open.rs`, above the EVDs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::provider::Builtin;
use super::table::{self, Object};
use super::{fill_cstr, put};
use crate::abi::*;
use crate::device::{Device, DeviceLimits, IaPort};
use crate::util::sync::MutexExt;

/// The most private data a connect, accept or reject may carry.
pub const MAX_PRIVATE_DATA: DAT_COUNT = 256;

pub struct Ia {
    /// The provider-side IA handle (a table cell), as the registry holds it.
    pub handle: usize,
    pub builtin: &'static Builtin,
    pub thread_safe: bool,
    pub dev: Arc<dyn Device>,
    /// The device's limits, copied at open (a device's are fixed): a post reads them with a
    /// load, not a call through the device's table.
    limits: DeviceLimits,
    /// The async EVD, and whether this IA created it (then it dies with the IA).
    pub async_evd: AtomicUsize,
    pub owns_async_evd: bool,
    /// The IA address `DAT_IA_ATTR.ia_address_ptr` points at: its port's.
    pub address: Box<libc::sockaddr_storage>,
    /// The IA's side of its device: its address and its service points' listening.
    pub port: Box<dyn IaPort>,
    pub context: Mutex<u64>,
    /// The provider-specific attributes of the latest `dat_ia_query` (the consumer's copy of
    /// DAT_PROVIDER_ATTR points into them until the next query or the IA's close).
    pub named: Mutex<NamedAttrs>,
    /// The consumer's handle of this IA (its registry slot) once this library's own API layer
    /// has opened it ([`note_consumer_handle`]); 0 when unknown.
    pub(super) consumer: AtomicUsize,
    /// The IB counters extension's IA counters and dat2's own (`super::stats` reads them).
    pub counts: super::counters::IaCounts,
}

#[derive(Default)]
pub struct NamedAttrs {
    strings: Vec<std::ffi::CString>,
    list: Vec<DAT_NAMED_ATTR>,
}

// SAFETY: the pointers in `list` point into `strings`, owned alongside them.
unsafe impl Send for NamedAttrs {}

impl Ia {
    /// The small-integer handle the consumer knows this IA by, asked of the registry the way
    /// every provider asks it: through libdat2's `dats_get_ia_handle`. The built-in providers
    /// reach the registry only through its C API, as C providers do. NULL if the IA is not
    /// (or no longer) open.
    pub fn consumer_handle(&self) -> DAT_IA_HANDLE {
        extern "C" {
            fn dats_get_ia_handle(handle: DAT_IA_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN;
        }
        let mut out: DAT_IA_HANDLE = core::ptr::null_mut();
        // SAFETY: this library's own export (api/registry.rs), given our IA's handle and a
        // local to write.
        let status = unsafe { dats_get_ia_handle(self.handle as DAT_IA_HANDLE, &mut out) };
        if status == DAT_SUCCESS {
            out
        } else {
            core::ptr::null_mut()
        }
    }

    pub fn provider(&self) -> *const DAT_PROVIDER {
        self.builtin.table(self.thread_safe)
    }
}

impl Object for Ia {
    fn handle_type(&self) -> DAT_HANDLE_TYPE {
        DAT_HANDLE_TYPE_IA
    }
    fn context(&self) -> &Mutex<u64> {
        &self.context
    }
    fn owner(&self) -> usize {
        self.handle
    }
}

pub fn ia(handle: DAT_IA_HANDLE) -> Result<Arc<Ia>, DAT_RETURN> {
    table::lookup(handle, DAT_INVALID_HANDLE_IA)
}

/// Tells the built-in IA `raw` (if it is one) the handle the consumer knows it by, so that
/// calls given both an IA and one of its objects can check the pair without asking the
/// registry ([`Ia::is_consumer_handle`]).
pub fn note_consumer_handle(raw: DAT_IA_HANDLE, consumer: usize) {
    if let Ok(ia) = ia(raw) {
        ia.consumer.store(consumer, Ordering::Release);
    }
}

impl Ia {
    /// Builds an IA of `dev` (published by the caller).
    pub(super) fn new(
        handle: usize,
        builtin: &'static Builtin,
        thread_safe: bool,
        dev: Arc<dyn Device>,
        port: Box<dyn IaPort>,
        async_evd: usize,
        owns_async_evd: bool,
    ) -> Ia {
        Ia {
            handle,
            builtin,
            thread_safe,
            address: Box::new(crate::util::sockaddr::to_c(port.address())),
            port,
            limits: dev.limits().clone(),
            dev,
            async_evd: AtomicUsize::new(async_evd),
            owns_async_evd,
            context: Mutex::new(0),
            named: Mutex::new(NamedAttrs::default()),
            consumer: AtomicUsize::new(0),
            counts: Default::default(),
        }
    }

    /// The device's limits.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Whether `handle` is the consumer's handle of this IA, as noted when it was opened; false
    /// when none was (the caller then asks the registry).
    pub fn is_consumer_handle(&self, handle: DAT_IA_HANDLE) -> bool {
        let mine = self.consumer.load(Ordering::Acquire);
        mine != 0 && mine == handle as usize
    }
}

/// The most private data a connection message of `ia`'s device carries.
pub fn max_private_data(ia: &Ia) -> DAT_COUNT {
    (ia.dev.limits().max_private_data as DAT_COUNT).min(MAX_PRIVATE_DATA)
}

pub fn query(
    handle: DAT_IA_HANDLE,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    provider_mask: DAT_PROVIDER_ATTR_MASK,
    provider_attr: *mut DAT_PROVIDER_ATTR,
) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia(handle)?;
    if ia_mask & !DAT_IA_FIELD_ALL != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    if ia_mask != 0 && ia_attr.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    }
    if provider_mask & !DAT_PROVIDER_FIELD_ALL != 0 {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5));
    }
    if provider_mask != 0 && provider_attr.is_null() {
        return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6));
    }
    if !async_evd.is_null() {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { put(async_evd, ia.async_evd.load(Ordering::SeqCst) as DAT_EVD_HANDLE) };
    }
    if ia_mask != 0 {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { put(ia_attr, ia_attributes(&ia)) };
    }
    if provider_mask != 0 {
        // SAFETY: non-NULL consumer out-pointer.
        unsafe { put(provider_attr, provider_attributes(&ia)) };
    }
    Ok(DAT_SUCCESS)
}

fn clamp(v: u64) -> DAT_COUNT {
    v.min(i32::MAX as u64) as DAT_COUNT
}

fn ia_attributes(ia: &Ia) -> DAT_IA_ATTR {
    let l = ia.dev.limits();
    let mut a = DAT_IA_ATTR::default();
    fill_cstr(&mut a.adapter_name, ia.dev.name());
    fill_cstr(&mut a.vendor_name, ia.dev.vendor());
    a.hardware_version_major = 2;
    a.hardware_version_minor = 0;
    a.firmware_version_major = 2;
    a.firmware_version_minor = 0;
    a.ia_address_ptr = &*ia.address as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR;
    a.max_eps = clamp(l.max_qps.into());
    a.max_dto_per_ep = clamp(l.max_qp_wr.into());
    a.max_rdma_read_per_ep_in = clamp(l.max_rd_in.into());
    a.max_rdma_read_per_ep_out = clamp(l.max_rd_out.into());
    a.max_evds = clamp(l.max_cqs.into());
    a.max_evd_qlen = clamp(l.max_cqe.into());
    a.max_iov_segments_per_dto = clamp(l.max_sge.into());
    a.max_lmrs = clamp(l.max_mrs.into());
    a.max_lmr_block_size = l.max_mr_size.min(u64::from(u32::MAX)) as DAT_SEG_LENGTH;
    a.max_lmr_virtual_address = u64::MAX;
    a.max_pzs = clamp(l.max_pds.into());
    a.max_message_size = l.max_msg_size;
    a.max_rdma_size = l.max_msg_size;
    a.max_rmrs = clamp(l.max_mws.into());
    a.max_rmr_target_address = u64::MAX;
    a.max_srqs = clamp(l.max_srqs.into());
    a.max_ep_per_srq = clamp(l.max_qps.into());
    a.max_recv_per_srq = clamp(l.max_srq_wr.into());
    a.max_iov_segments_per_rdma_read = clamp(l.max_sge_rd.into());
    a.max_iov_segments_per_rdma_write = clamp(l.max_sge.into());
    a.max_rdma_read_in = clamp(l.max_rd_in.into());
    a.max_rdma_read_out = clamp(l.max_rd_out.into());
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a.zb_supported = if l.zero_based { DAT_TRUE } else { DAT_FALSE };
    a.extension_supported = if l.ib_extensions() { DAT_EXTENSION_IB } else { DAT_EXTENSION_NONE };
    a.extension_version = DAT_IB_EXTENSION_VERSION;
    a
}

fn provider_attributes(ia: &Ia) -> DAT_PROVIDER_ATTR {
    let mut p = DAT_PROVIDER_ATTR::default();
    fill_cstr(&mut p.provider_name, &format!("dat2 {}", ia.builtin.driver.name()));
    p.provider_version_major = 2;
    p.provider_version_minor = 0;
    p.dapl_version_major = DAT_VERSION_MAJOR;
    p.dapl_version_minor = DAT_VERSION_MINOR;
    p.lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL;
    p.iov_ownership_on_return = DAT_IOV_CONSUMER;
    p.dat_qos_supported = DAT_QOS_BEST_EFFORT;
    p.completion_flags_supported = DAT_COMPLETION_SUPPRESS_FLAG
        | DAT_COMPLETION_SOLICITED_WAIT_FLAG
        | DAT_COMPLETION_UNSIGNALLED_FLAG
        | DAT_COMPLETION_BARRIER_FENCE_FLAG
        | DAT_COMPLETION_EVD_THRESHOLD_FLAG;
    p.is_thread_safe = ia.thread_safe as DAT_BOOLEAN;
    p.max_private_data_size = max_private_data(ia);
    p.supports_multipath = DAT_FALSE;
    p.ep_creator = DAT_PSP_CREATES_EP_NEVER;
    p.pz_support = DAT_PZ_UNIQUE;
    p.optimal_buffer_alignment = ia.dev.limits().page_size as u32;
    p.evd_stream_merging_supported = [[DAT_TRUE; 6]; 6];
    p.srq_supported = DAT_TRUE;
    p.srq_watermarks_supported = DAT_TRUE as DAT_COUNT;
    p.srq_ep_pz_difference_supported = DAT_TRUE;
    p.srq_info_supported = DAT_TRUE as DAT_COUNT;
    p.ep_recv_info_supported = DAT_TRUE as DAT_COUNT;
    p.lmr_sync_req = DAT_FALSE;
    p.dto_async_return_guaranteed = DAT_FALSE;
    p.rdma_write_for_rdma_read_req = DAT_FALSE;
    p.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    p.rmr_scope_supported = DAT_RMR_SCOPE_EP;
    p.is_signal_safe = DAT_FALSE;
    p.ha_supported = DAT_FALSE;
    p.ha_loadbalancing = DAT_FALSE;
    let pairs = ia.builtin.provider_specific(&*ia.dev);
    let mut named = ia.named.locked();
    let mut strings = Vec::with_capacity(pairs.len() * 2);
    for (n, v) in pairs {
        strings.push(std::ffi::CString::new(n).unwrap_or_default());
        strings.push(std::ffi::CString::new(v).unwrap_or_default());
    }
    // Unchanged attributes keep their storage, so earlier copies stay valid.
    if named.strings != strings {
        let list: Vec<DAT_NAMED_ATTR> = strings.chunks(2).map(|c| DAT_NAMED_ATTR { name: c[0].as_ptr(), value: c[1].as_ptr() }).collect();
        *named = NamedAttrs { strings, list };
    }
    p.num_provider_specific_attr = named.list.len() as DAT_COUNT;
    p.provider_specific_attr = named.list.as_ptr() as *mut DAT_NAMED_ATTR;
    p
}

/// Frees every object of `ia`, children before parents; its service points first of all, and
/// the rest as they are once those are gone, so that no request becomes a CR (and, at a PSP
/// with the provider flag, an EP) that nobody frees (a CR outlives its service point anyway).
fn free_all(ia: &Arc<Ia>) {
    let is_sp = |o: &Arc<dyn Object>| matches!(o.handle_type(), DAT_HANDLE_TYPE_PSP | DAT_HANDLE_TYPE_RSP);
    for (handle, obj) in table::owned_by(ia.handle).into_iter().filter(|(_, o)| is_sp(o)) {
        table::destroy(handle as DAT_HANDLE, obj);
    }
    let mut objs = table::owned_by(ia.handle);
    let rank = |o: &Arc<dyn Object>| match o.handle_type() {
        DAT_HANDLE_TYPE_CR => 0,
        DAT_HANDLE_TYPE_RMR => 0,
        DAT_HANDLE_TYPE_SRQ => 3,
        DAT_HANDLE_TYPE_EP => 2,
        DAT_HANDLE_TYPE_LMR => 3,
        DAT_HANDLE_TYPE_PZ => 5,
        DAT_HANDLE_TYPE_EVD => 6,
        DAT_HANDLE_TYPE_CNO => 7,
        _ => 8,
    };
    objs.sort_by_key(|(_, o)| rank(o));
    for (handle, obj) in objs {
        table::destroy(handle as DAT_HANDLE, obj);
    }
}

pub fn close(handle: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> Result<DAT_RETURN, DAT_RETURN> {
    close_then(handle, flags, |_| {})
}

/// [`close`], with `last` run once the IA's objects are freed and before the IA goes (the
/// layer above reports its counters there).
pub fn close_then(handle: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS, last: impl FnOnce(&Arc<Ia>)) -> Result<DAT_RETURN, DAT_RETURN> {
    let ia = ia(handle)?;
    match flags {
        DAT_CLOSE_ABRUPT_FLAG => free_all(&ia),
        DAT_CLOSE_GRACEFUL_FLAG => {
            let own_async = if ia.owns_async_evd { ia.async_evd.load(Ordering::SeqCst) } else { 0 };
            if table::owned_by(ia.handle).iter().any(|(h, _)| *h != own_async) {
                return Err(dat_error(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE));
            }
            free_all(&ia);
        }
        _ => return Err(dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)),
    }
    // Every PZ flushed its cached registrations as it went; this catches any left on the device.
    crate::builtin::mr::flush(&ia.dev, None);
    last(&ia);
    table::remove(ia.handle);
    Ok(DAT_SUCCESS)
}
