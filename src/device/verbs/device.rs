//! The verbs device: DAT's objects on an rdma-core device port. PDs, MRs and memory windows
//! are the device's own; QPs, SRQs and the connection manager live in qp.rs, srq.rs and cm.rs.
//! One progress thread per device waits on the completion channel, the rdma_cm event channel
//! and the device's async event fd, and hands what arrives to the QPs and SRQs it belongs to.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::api::{self, Api};
use super::cm::{self, CmTarget};
use super::errno::{dev_error, errno, last_error};
use super::qp::VerbsQp;
use super::srq::VerbsSrq;
use super::sys;
use super::{probe, Ptr};
use crate::dbg_log;
use crate::device::{Access, DevError, Device, DeviceLimits, IaPort, Mr, Mw, Pd, Qp, QpCaps, QpEvents, Srq, SrqEvents};
use crate::log::DbgType;
use crate::util::idmap::IdMap;
use crate::util::slots::Slots;
use crate::util::sync::MutexExt;

#[derive(Clone, Copy)]
pub(super) struct MwState {
    pub mw: Ptr<sys::ibv_mw>,
    pub rkey: u32,
    pub bound: bool,
}

/// The registrations behind one key set. On a device whose read sinks need remote write
/// (`sink_remote_write`), an MR asked for remote rights is registered twice: `local`, with the
/// remote write a sink needs, gives the lkey (every post, and the sink tag a read request
/// carries); `exact`, with exactly the rights asked for, gives the rkey handed out as
/// `rmr_context` and takes window bindings. Otherwise `local` alone gives both keys.
#[derive(Clone, Copy)]
struct MrPair {
    local: Ptr<sys::ibv_mr>,
    exact: Option<Ptr<sys::ibv_mr>>,
}

#[derive(Default)]
pub(super) struct State {
    next_id: u64,
    pds: IdMap<u32, Ptr<sys::ibv_pd>>,
    /// The PD found last ([`State::pd`]): a program's registrations are mostly in one PD,
    /// and each looks it up.
    last_pd: Option<(u32, Ptr<sys::ibv_pd>)>,
    /// MRs by `Mr::id`, a slot's index and generation: a registration and a deregistration
    /// each store or take one slot, with no hashing, and a stale id finds nothing.
    mrs: Slots<MrPair>,
    /// Memory windows: the rkey of their latest binding, and whether it is bound now (a
    /// type-2 window must be invalidated before it is bound again).
    mws: IdMap<u64, MwState>,
    /// Every QP of the device (each with a CQ of its own), as a list shared with pollers:
    /// a polling consumer's empty dequeue takes it without allocating. A QP adds itself when
    /// made and removes itself when dropped; a list a poller holds is never changed (a change
    /// copies it then).
    pub polled: Arc<Vec<Weak<VerbsQp>>>,
    /// QPs by QP number (async events).
    pub qps: IdMap<u32, Weak<VerbsQp>>,
    pub srqs: IdMap<usize, Weak<VerbsSrq>>,
    /// rdma_cm ids by address: what their events are for.
    pub ids: IdMap<usize, CmTarget>,
}

impl State {
    /// The PD `id` names.
    fn pd(&mut self, id: u32) -> Option<Ptr<sys::ibv_pd>> {
        if let Some((last, p)) = self.last_pd {
            if last == id {
                return Some(p);
            }
        }
        let p = self.pds.get(&id).copied()?;
        self.last_pd = Some((id, p));
        Some(p)
    }

    fn add_pd(&mut self, p: Ptr<sys::ibv_pd>) -> u32 {
        self.next_id += 1;
        let id = self.next_id as u32;
        self.pds.insert(id, p);
        id
    }

    fn remove_pd(&mut self, id: u32) -> Option<Ptr<sys::ibv_pd>> {
        if self.last_pd.is_some_and(|(last, _)| last == id) {
            self.last_pd = None;
        }
        self.pds.remove(&id)
    }
}

pub struct VerbsDevice {
    pub(super) this: Weak<VerbsDevice>,
    pub(super) api: &'static Api,
    pub(super) ctx: Ptr<sys::ibv_context>,
    pub(super) port: u8,
    name: String,
    vendor: String,
    limits: DeviceLimits,
    pub(super) address: std::net::SocketAddr,
    pub(super) cm_channel: Ptr<sys::rdma_event_channel>,
    pub(super) comp_channel: Ptr<sys::ibv_comp_channel>,
    /// Whether the device binds type-2 memory windows.
    pub(super) mw_type2: bool,
    /// An iWARP device (rdma_cm connections only, no UD, no immediate data).
    pub(super) iwarp: bool,
    /// Whether an RDMA read's sink must be registered with remote write: iWARP places a read
    /// response by the sink's tag, as an RDMA write, and RNICs check remote write on it (the
    /// kernel's own RDMA read/write API, `rdma_rw`, registers iWARP sinks so). Not siw: it
    /// places the response through the request's own scatter entry and checks local write
    /// only (`siw_proc_rresp`), so there the sink's tag gives a peer nothing.
    /// `DAT2_VERBS_SINK_REMOTE_WRITE=1` asks for it on any iWARP device (tests of the two
    /// registrations on siw).
    pub(super) sink_remote_write: bool,
    /// Soft-iWARP, whose kernel driver has bugs the device works around (qp.rs).
    pub(super) siw: bool,
    /// "InfiniBand", "RoCE" or "iWARP" (`DAT2_VERBS_TRANSPORT`).
    transport: &'static str,
    /// The port as the UD service needs to know it (ud.rs).
    pub(super) ud: super::ud::Port,
    /// Consumers in a blocking wait (`Device::consumer_waits`): a CQ is armed again after its
    /// event only while there are any, so that completions a consumer polls for do not also
    /// wake the progress thread.
    pub(super) waiters: AtomicUsize,
    pub(super) state: Mutex<State>,
}

// SAFETY: the rdma-core objects behind the pointers are thread safe (libibverbs and librdmacm
// serialise internally); our own mutable state is behind the mutex.
unsafe impl Send for VerbsDevice {}
// SAFETY: as above.
unsafe impl Sync for VerbsDevice {}

/// The remote rights of DAT privileges as verbs access flags.
fn remote_access(a: Access) -> u32 {
    let flag = |bit: Access, flag: u32| if a.contains(bit) { flag } else { 0 };
    flag(Access::REMOTE_READ, sys::IBV_ACCESS_REMOTE_READ)
        | flag(Access::REMOTE_WRITE, sys::IBV_ACCESS_REMOTE_WRITE)
        | flag(Access::REMOTE_ATOMIC, sys::IBV_ACCESS_REMOTE_ATOMIC)
}

/// DAT privileges as verbs access flags. Local read is implicit; remote write and atomics need
/// local write; every MR may carry memory windows.
fn mr_access(a: Access) -> u32 {
    let local = if a.needs_write() { sys::IBV_ACCESS_LOCAL_WRITE } else { 0 };
    sys::IBV_ACCESS_MW_BIND | local | remote_access(a)
}

/// The access flags of a window binding (remote rights only).
pub(super) fn mw_access(a: Access, zero_based: bool) -> u32 {
    remote_access(a) | if zero_based { sys::IBV_ACCESS_ZERO_BASED } else { 0 }
}

/// `ibv_device_attr.vendor_id` of Soft-iWARP (siw).
const SIW_VENDOR_ID: u32 = 0x626d74;

fn mtu_bytes(mtu: u32) -> u32 {
    // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5
    if (1..=5).contains(&mtu) {
        128 << mtu
    } else {
        1024
    }
}

impl VerbsDevice {
    /// Opens the device port named by ia_params `"<device> <port>"`. The error says why not:
    /// no libibverbs, no such device, the port is down, no IP address on it.
    pub fn new(params: &str) -> Result<Arc<VerbsDevice>, String> {
        let (dev_name, port) = probe::parse_params(params)?;
        let api = api::api().map_err(|e| e.to_string())?;
        if let Some(why) = probe::unusable(&dev_name, port) {
            return Err(why);
        }
        let ctx = open_by_name(api, &dev_name)?;
        super::memlock::raise_to_hard(&dev_name);
        // SAFETY: plain data, filled by the calls below.
        let mut dattr: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: an open context and a writable attribute struct.
        if unsafe { (api.ibv.query_device)(ctx.0, &mut dattr) } != 0 {
            let e = std::io::Error::last_os_error();
            close(api, ctx);
            return Err(format!("{dev_name}: ibv_query_device: {e}"));
        }
        // SAFETY: plain data.
        let mut pattr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: an open context, a port number and a writable attribute struct.
        if unsafe { api.query_port(ctx.0, port, &mut pattr) } != 0 {
            let e = std::io::Error::last_os_error();
            close(api, ctx);
            return Err(format!("{dev_name} port {port}: ibv_query_port: {e}"));
        }
        if pattr.state != sys::IBV_PORT_ACTIVE {
            close(api, ctx);
            return Err(format!("{dev_name} port {port}: port is not active (state {})", pattr.state));
        }
        let netdev = probe::ports().into_iter().find(|p| p.device == dev_name && p.port == port).and_then(|p| p.netdev);
        let Some(netdev) = netdev else {
            close(api, ctx);
            return Err(format!("{dev_name} port {port}: no network device behind the port, so no IP address for rdma_cm"));
        };
        let address = match crate::device::address::resolve(&format!("{netdev} 0")) {
            Ok(a) => a,
            Err(_) => {
                close(api, ctx);
                return Err(format!("{dev_name} port {port}: network device {netdev} has no IP address"));
            }
        };
        // SAFETY: creating a channel has no preconditions.
        let cm_channel = unsafe { (api.cm.create_event_channel)() };
        // SAFETY: an open context.
        let comp_channel = unsafe { (api.ibv.create_comp_channel)(ctx.0) };
        if cm_channel.is_null() || comp_channel.is_null() {
            close(api, ctx);
            return Err(format!("{dev_name}: cannot create the rdma_cm or completion channel: {}", std::io::Error::last_os_error()));
        }
        let vendor = format!("verbs vendor {:#x} part {:#x} fw {}", dattr.vendor_id, dattr.vendor_part_id, cstr_field(&dattr.fw_ver));
        let page = {
            // SAFETY: sysconf has no preconditions.
            unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64
        };
        let mw_type2 = dattr.max_mw > 0 && dattr.device_cap_flags & sys::IBV_DEVICE_MEM_WINDOW_TYPE_2B != 0;
        // UD on InfiniBand and RoCE (not iWARP): a datagram is at most the path MTU.
        // SAFETY: an open context points to its device.
        let transport = unsafe { (*(*ctx.0).device).transport_type };
        let ib_transport = transport == sys::IBV_TRANSPORT_IB;
        let iwarp = transport == sys::IBV_TRANSPORT_IWARP;
        let limits = DeviceLimits {
            max_pds: dattr.max_pd.max(0) as u32,
            max_mrs: dattr.max_mr.max(0) as u32,
            max_mr_size: dattr.max_mr_size,
            max_mws: if mw_type2 { dattr.max_mw.max(0) as u32 } else { 0 },
            max_qps: dattr.max_qp.max(0) as u32,
            max_qp_wr: dattr.max_qp_wr.max(0) as u32,
            max_sge: dattr.max_sge.max(0) as u32,
            // iWARP reads into one sink segment (siw reports max_sge_rd 1).
            max_sge_rd: dattr.max_sge_rd.clamp(0, dattr.max_sge.max(0)) as u32,
            max_cqs: dattr.max_cq.max(0) as u32,
            max_cqe: dattr.max_cqe.max(0) as u32,
            max_rd_in: dattr.max_qp_rd_atom.max(0) as u32,
            max_rd_out: dattr.max_qp_init_rd_atom.max(0) as u32,
            max_msg_size: pattr.max_msg_sz,
            max_srqs: dattr.max_srq.max(0) as u32,
            max_srq_wr: dattr.max_srq_wr.max(0) as u32,
            mtu: mtu_bytes(pattr.active_mtu),
            page_size: page,
            // An rdma_cm connect request over IB or RoCE carries 56 bytes (accept 196, reject
            // 148), less the trailer that keeps its length (cm.rs): DAT has one limit for all.
            max_private_data: (super::cm::PDATA_REQ - super::cm::TRAILER) as u32,
            max_ud_msg: if ib_transport { mtu_bytes(pattr.active_mtu) } else { 0 },
            atomics: dattr.atomic_cap != sys::IBV_ATOMIC_NONE,
            // iWARP's DDP has no immediate data (siw refuses such requests).
            immediate: !iwarp,
            // Soft-iWARP registers the virtual address whatever iova it is given
            // (siw_reg_user_mr), so its zero-based remote addresses would miss the region.
            zero_based: api.ibv.reg_mr_iova2.is_some() && dattr.vendor_id != SIW_VENDOR_ID,
        };
        let dev = Arc::new_cyclic(|this| VerbsDevice {
            this: this.clone(),
            api,
            ctx,
            port,
            name: dev_name.clone(),
            vendor,
            limits,
            address,
            cm_channel: Ptr(cm_channel),
            comp_channel: Ptr(comp_channel),
            mw_type2,
            iwarp,
            sink_remote_write: iwarp
                && (dattr.vendor_id != SIW_VENDOR_ID
                    || crate::util::env::var("DAT2_VERBS_SINK_REMOTE_WRITE").is_some_and(|v| v.trim() == "1")),
            siw: dattr.vendor_id == SIW_VENDOR_ID,
            transport: if iwarp {
                "iWARP"
            } else if pattr.link_layer == sys::IBV_LINK_LAYER_ETHERNET as u8 {
                "RoCE"
            } else {
                "InfiniBand"
            },
            ud: super::ud::Port::new(&pattr),
            waiters: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        });
        super::progress::start(&dev).map_err(|e| format!("{dev_name}: cannot start the progress thread: {e}"))?;
        dbg_log!(DbgType::PROVIDER_API, "verbs: opened {dev_name} port {port} ({netdev}), mw type 2: {mw_type2}");
        Ok(dev)
    }

    pub(super) fn name_str(&self) -> &str {
        &self.name
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    pub(super) fn me(&self) -> Arc<VerbsDevice> {
        self.this.upgrade().expect("a device in use is alive")
    }

    pub(super) fn pd_ptr(&self, pd: Pd) -> Result<Ptr<sys::ibv_pd>, DevError> {
        self.lock().pd(pd.0).ok_or(DevError::Fault)
    }

    /// The MR a window over `mr` binds to: the one with exactly the rights its LMR asked for.
    pub(super) fn mr_ptr(&self, mr: &Mr) -> Option<Ptr<sys::ibv_mr>> {
        self.lock().mrs.get(mr.id).map(|p| p.exact.unwrap_or(p.local))
    }

    /// A window's pointer, the rkey it has now and whether it is bound.
    pub(super) fn mw_state(&self, mw: &Mw) -> Option<MwState> {
        self.lock().mws.get(&mw.id).copied()
    }

    pub(super) fn set_mw(&self, mw: &Mw, rkey: u32, bound: bool) {
        if let Some(e) = self.lock().mws.get_mut(&mw.id) {
            e.rkey = rkey;
            e.bound = bound;
        }
    }

    /// Retires a bound window for a rebind: its rkey stops working at once, and the RMR goes
    /// on with a fresh window of the same PD. (rxe does not bind a type-2 window again after a
    /// local invalidation, so a rebind cannot reuse it.)
    pub(super) fn replace_mw(&self, mw: &Mw) -> Result<MwState, DevError> {
        let old = self.mw_state(mw).ok_or(DevError::Fault)?;
        // SAFETY: a live window; its PD outlives it.
        let pd = unsafe { (*old.mw.0).pd };
        // SAFETY: a live PD of this device.
        let fresh = unsafe { api::alloc_mw(pd, sys::IBV_MW_TYPE_2) };
        if fresh.is_null() {
            return Err(last_error());
        }
        // SAFETY: the old window, replaced in the table below so it is released once.
        unsafe { api::dealloc_mw(old.mw.0) };
        // SAFETY: a window just allocated.
        let st = MwState { mw: Ptr(fresh), rkey: unsafe { (*fresh).rkey }, bound: false };
        if let Some(e) = self.lock().mws.get_mut(&mw.id) {
            *e = st;
        }
        Ok(st)
    }

    /// The peer invalidated the window whose rkey is `rkey` (a received send-with-invalidate).
    pub(super) fn mw_invalidated(&self, rkey: u32) {
        if let Some(e) = self.lock().mws.values_mut().find(|e| e.bound && e.rkey == rkey) {
            e.bound = false;
        }
    }

    /// rxe reports a received send-with-invalidate with the kernel's flag bit (1 << 2) instead
    /// of IBV_WC_WITH_INV (1 << 3); in user space that bit is IBV_WC_IP_CSUM_OK, which an RC
    /// receive never carries.
    pub(super) fn inv_flags(&self) -> u32 {
        if self.name.starts_with("rxe") {
            sys::IBV_WC_WITH_INV | sys::IBV_WC_IP_CSUM_OK
        } else {
            sys::IBV_WC_WITH_INV
        }
    }

    fn register(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if zero_based && addr % self.limits.page_size != 0 {
            // Verbs keeps the page offset between address and iova: an unaligned region cannot
            // start at remote address 0.
            dbg_log!(DbgType::ERROR, "verbs {}: a zero-based LMR must start on a page boundary ({addr:#x} does not)", self.name);
            return Err(DevError::NotSupported);
        }
        let wire = self.wire_access(access);
        let local = self.register_one(pd, addr, len, access, zero_based, mr_access(wire))?;
        // The rkey handed out carries exactly the rights asked for: when the lkey's
        // registration grants more (a read sink's remote write), a second registration
        // with the asked rights gives the rkey.
        let exact = if wire != access && access.is_remote() {
            match self.register_one(pd, addr, len, access, zero_based, mr_access(access)) {
                Ok(e) => Some(e),
                Err(e) => {
                    // SAFETY: the registration just made, in no table yet.
                    unsafe { (self.api.ibv.dereg_mr)(local.0) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        // SAFETY: registrations just returned by rdma-core.
        let lkey = unsafe { (*local.0).lkey };
        // SAFETY: as above.
        let rkey = unsafe { (*exact.unwrap_or(local).0).rkey };
        let id = self.lock().mrs.insert(MrPair { local, exact });
        Ok(Mr { id, lkey, rkey: if access.is_remote() { rkey } else { 0 }, addr, len })
    }

    /// One `ibv_dereg_mr` of a registration taken out of the table.
    fn dereg_one(&self, m: Ptr<sys::ibv_mr>) {
        // SAFETY: a registration we made, removed from the table so it is released once.
        let rc = unsafe { (self.api.ibv.dereg_mr)(m.0) };
        if rc != 0 {
            dbg_log!(DbgType::ERROR, "verbs {}: ibv_dereg_mr: {}", self.name, std::io::Error::from_raw_os_error(rc));
        }
    }

    /// One `ibv_reg_mr` with `flags`.
    fn register_one(
        &self,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
        flags: u32,
    ) -> Result<Ptr<sys::ibv_mr>, DevError> {
        match self.register_with(pd, addr, len, zero_based, flags) {
            // Windows need MW_BIND, which the kernel pins as writable: read-only memory is
            // registered without it (no window can then be bound over it).
            Err(DevError::Fault) if !access.needs_write() => {
                self.register_with(pd, addr, len, zero_based, flags & !sys::IBV_ACCESS_MW_BIND)
            }
            r => r,
        }
    }

    fn register_with(&self, pd: Pd, addr: u64, len: u64, zero_based: bool, flags: u32) -> Result<Ptr<sys::ibv_mr>, DevError> {
        let pdp = self.pd_ptr(pd)?;
        let flags = flags as i32;
        let mr = if zero_based {
            if !self.limits.zero_based {
                dbg_log!(DbgType::ERROR, "verbs {}: zero-based registrations are not supported on this device", self.name);
                return Err(DevError::NotSupported);
            }
            let f = self.api.ibv.reg_mr_iova2.ok_or(DevError::NotSupported)?;
            // SAFETY: a live PD; the range is the consumer's (the kernel checks it is mapped).
            unsafe { f(pdp.0, addr as *mut libc::c_void, len as usize, 0, flags as u32) }
        } else {
            // SAFETY: as above.
            unsafe { (self.api.ibv.reg_mr)(pdp.0, addr as *mut libc::c_void, len as usize, flags) }
        };
        if mr.is_null() {
            let e = errno();
            dbg_log!(DbgType::ERROR, "verbs {}: ibv_reg_mr({addr:#x}, {len}) failed: {}", self.name, std::io::Error::from_raw_os_error(e));
            if e == libc::ENOMEM && super::memlock::refused(&self.name, len) {
                return Err(DevError::LockedMemory);
            }
            return Err(dev_error(e));
        }
        Ok(Ptr(mr))
    }
}

fn cstr_field(b: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn close(api: &Api, ctx: Ptr<sys::ibv_context>) {
    // SAFETY: a context we opened and nothing else uses.
    unsafe { (api.ibv.close_device)(ctx.0) };
}

fn open_by_name(api: &Api, name: &str) -> Result<Ptr<sys::ibv_context>, String> {
    let mut n = 0;
    // SAFETY: returns a list we free below.
    let list = unsafe { (api.ibv.get_device_list)(&mut n) };
    if list.is_null() {
        return Err(format!("ibv_get_device_list: {}", std::io::Error::last_os_error()));
    }
    let mut ctx = std::ptr::null_mut();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list has n entries.
        let d = unsafe { *list.add(i) };
        // SAFETY: a device of the list; its name is a NUL-terminated string.
        let dn = unsafe { std::ffi::CStr::from_ptr((api.ibv.get_device_name)(d)) };
        if dn.to_bytes() == name.as_bytes() {
            // SAFETY: a device of the list, opened before the list is freed.
            ctx = unsafe { (api.ibv.open_device)(d) };
            break;
        }
    }
    let e = std::io::Error::last_os_error();
    // SAFETY: the list returned above.
    unsafe { (api.ibv.free_device_list)(list) };
    if ctx.is_null() {
        return Err(if n == 0 {
            "libibverbs finds no RDMA devices (is the driver's rdma-core provider installed?)".to_string()
        } else {
            format!("{name}: cannot open the device: {e}")
        });
    }
    Ok(Ptr(ctx))
}

impl Device for VerbsDevice {
    fn attributes(&self) -> Vec<(String, String)> {
        let sink = if self.sink_remote_write { "TRUE" } else { "FALSE" };
        vec![
            ("DAT_IB_DEVICE_NAME".into(), self.name.clone()),
            ("DAT2_VERBS_TRANSPORT".into(), self.transport.into()),
            ("DAT2_MEMLOCK".into(), super::memlock::describe()),
            // Whether an lmr_context shown as a read's sink accepts the peer's RDMA writes.
            ("DAT2_VERBS_SINK_REMOTE_WRITE".into(), sink.into()),
        ]
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn vendor(&self) -> &str {
        &self.vendor
    }
    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }
    fn address(&self) -> std::net::SocketAddr {
        self.address
    }
    fn cache_registrations(&self) -> bool {
        true
    }

    fn wire_access(&self, access: Access) -> Access {
        if self.sink_remote_write && access.contains(Access::LOCAL_WRITE) {
            access | Access::REMOTE_WRITE
        } else {
            access
        }
    }

    fn mr_in_use(&self, mr: &Mr) -> bool {
        // Collected first: a queue's lock is never taken under the device's.
        let (qps, srqs): (Vec<_>, Vec<_>) = {
            let s = self.lock();
            (s.qps.values().cloned().collect(), s.srqs.values().cloned().collect())
        };
        qps.iter().filter_map(Weak::upgrade).any(|q| q.uses_lkey(mr.lkey))
            || srqs.iter().filter_map(Weak::upgrade).any(|s| s.uses_lkey(mr.lkey))
    }

    fn progress(&self) {
        super::progress::poll_now(self);
    }

    fn polled_qps(&self) -> bool {
        true
    }

    fn consumer_waits(&self, begins: bool) {
        if begins {
            // Counted before arming (see VerbsQp::arm), then armed before polling: whatever
            // completes after the poll raises an event.
            self.waiters.fetch_add(1, Ordering::SeqCst);
            super::progress::arm_all(self);
            super::progress::poll_before_blocking(self);
        } else {
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn alloc_pd(&self) -> Result<Pd, DevError> {
        // SAFETY: an open context.
        let pd = unsafe { (self.api.ibv.alloc_pd)(self.ctx.0) };
        if pd.is_null() {
            return Err(last_error());
        }
        Ok(Pd(self.lock().add_pd(Ptr(pd))))
    }

    fn dealloc_pd(&self, pd: Pd) {
        let Some(p) = self.lock().remove_pd(pd.0) else { return };
        // SAFETY: a PD we allocated; the core frees its objects first.
        let rc = unsafe { (self.api.ibv.dealloc_pd)(p.0) };
        if rc != 0 {
            dbg_log!(DbgType::ERROR, "verbs {}: ibv_dealloc_pd: {}", self.name, std::io::Error::from_raw_os_error(rc));
        }
    }

    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if len == 0 || len > self.limits.max_mr_size {
            return Err(DevError::NoResources);
        }
        self.register(pd, addr, len, access, zero_based)
    }

    fn alias_mr(&self, mr: &Mr, pd: Pd, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        // Keys of its own for the same memory: a second registration (in the same or another PD).
        self.register(pd, mr.addr, mr.len, access, zero_based)
    }

    fn dereg_mr(&self, mr: &Mr) {
        let Some(p) = self.lock().mrs.remove(mr.id) else { return };
        // The rkey first: it is the one a peer was given.
        if let Some(exact) = p.exact {
            self.dereg_one(exact);
        }
        self.dereg_one(p.local);
    }

    fn alloc_mw(&self, pd: Pd) -> Result<Mw, DevError> {
        if !self.mw_type2 {
            return Err(DevError::NotSupported);
        }
        let pdp = self.pd_ptr(pd)?;
        // SAFETY: a live PD.
        let mw = unsafe { api::alloc_mw(pdp.0, sys::IBV_MW_TYPE_2) };
        if mw.is_null() {
            return Err(last_error());
        }
        // SAFETY: a window just allocated.
        let rkey = unsafe { (*mw).rkey };
        let mut s = self.lock();
        s.next_id += 1;
        let id = s.next_id;
        s.mws.insert(id, MwState { mw: Ptr(mw), rkey, bound: false });
        Ok(Mw { id, rkey })
    }

    fn dealloc_mw(&self, mw: &Mw) {
        let Some(e) = self.lock().mws.remove(&mw.id) else { return };
        // SAFETY: a window we allocated, removed from the table so it is released once.
        unsafe { api::dealloc_mw(e.mw.0) };
    }

    fn create_qp(&self, pd: Pd, caps: QpCaps, srq: Option<Arc<dyn Srq>>, events: Arc<dyn QpEvents>) -> Result<Arc<dyn Qp>, DevError> {
        let srq = match srq {
            Some(s) => Some(VerbsSrq::downcast(s).ok_or(DevError::NotSupported)?),
            None => None,
        };
        VerbsQp::create(&self.me(), pd, caps, srq, events).map(|q| q as Arc<dyn Qp>)
    }

    fn create_srq(&self, pd: Pd, max_wr: u32, max_sge: u32, events: Arc<dyn SrqEvents>) -> Result<Arc<dyn Srq>, DevError> {
        VerbsSrq::create(&self.me(), pd, max_wr, max_sge, events).map(|s| s as Arc<dyn Srq>)
    }

    fn open_ia(&self) -> Result<Box<dyn IaPort>, DevError> {
        Ok(Box::new(cm::VerbsIaPort::new(self.me())))
    }

    // rdma_cm's ports are 16 bits: the qualifier's low 16 bits are the port.
    fn service_address(&self, addr: std::net::SocketAddr, conn_qual: u64) -> Option<std::net::SocketAddr> {
        let port = cm::port_of(conn_qual);
        // set_port: a link-local peer's scope id stays (rdma_cm resolves with it).
        (port != 0).then(|| {
            let mut at = addr;
            at.set_port(port);
            at
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{MrPair, Ptr, State};

    /// A pointer value for the table only (never dereferenced).
    fn fake<T>(n: usize) -> Ptr<T> {
        Ptr(n as *mut T)
    }

    #[test]
    fn privileges_map_to_the_verbs_access_flags() {
        use super::{mr_access, sys};
        use crate::device::Access;
        let bind = sys::IBV_ACCESS_MW_BIND;
        assert_eq!(mr_access(Access::LOCAL_READ), bind);
        assert_eq!(mr_access(Access::LOCAL_WRITE), bind | sys::IBV_ACCESS_LOCAL_WRITE);
        assert_eq!(mr_access(Access::LOCAL_WRITE | Access::REMOTE_READ), bind | sys::IBV_ACCESS_LOCAL_WRITE | sys::IBV_ACCESS_REMOTE_READ);
        // Remote write and atomics need local write (verbs refuses them without it).
        let all = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        let remote = sys::IBV_ACCESS_REMOTE_READ | sys::IBV_ACCESS_REMOTE_WRITE | sys::IBV_ACCESS_REMOTE_ATOMIC;
        assert_eq!(mr_access(all), bind | sys::IBV_ACCESS_LOCAL_WRITE | remote);
        assert_eq!(super::mw_access(Access::REMOTE_WRITE, true), sys::IBV_ACCESS_REMOTE_WRITE | sys::IBV_ACCESS_ZERO_BASED);
    }

    #[test]
    fn a_freed_pd_is_not_found_through_the_last_one_looked_up() {
        let mut s = State::default();
        let (a, b) = (s.add_pd(fake(0x10)), s.add_pd(fake(0x20)));
        assert_eq!(s.pd(a).map(|p| p.0 as usize), Some(0x10));
        assert_eq!(s.pd(a).map(|p| p.0 as usize), Some(0x10));
        assert_eq!(s.pd(b).map(|p| p.0 as usize), Some(0x20));
        assert_eq!(s.pd(a).map(|p| p.0 as usize), Some(0x10));
        assert!(s.remove_pd(a).is_some());
        assert!(s.pd(a).is_none(), "the PD looked up last was freed");
        assert_eq!(s.pd(b).map(|p| p.0 as usize), Some(0x20));
        assert!(s.remove_pd(b).is_some() && s.pd(b).is_none());
        assert!(s.pd(0).is_none() && s.remove_pd(b).is_none());
    }

    #[test]
    fn an_mr_is_deregistered_once_and_a_stale_id_finds_nothing() {
        let mut s = State::default();
        let a = s.mrs.insert(MrPair { local: fake(0x100), exact: None });
        let b = s.mrs.insert(MrPair { local: fake(0x200), exact: Some(fake(0x300)) });
        assert_ne!(a, b);
        assert_eq!(s.mrs.get(b).and_then(|p| p.exact).map(|p| p.0 as usize), Some(0x300));
        assert_eq!(s.mrs.remove(a).map(|p| p.local.0 as usize), Some(0x100));
        assert!(s.mrs.remove(a).is_none(), "removed once");
        // The slot is taken again under another id; the old one still finds nothing.
        let c = s.mrs.insert(MrPair { local: fake(0x400), exact: None });
        assert_ne!(c, a);
        assert!(s.mrs.get(a).is_none() && s.mrs.remove(a).is_none());
        assert_eq!(s.mrs.get(c).map(|p| p.local.0 as usize), Some(0x400));
    }
}
