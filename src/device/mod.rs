//! The device interface the built-in providers run on, modelled on verbs: protection domains, memory
//! regions, memory windows, queue pairs, shared receive queues and a connection manager.
//! Completions are not queues of the device: a QP hands each to its `QpEvents` as it happens,
//! and the built-in layer queues them on EVDs. A built-in provider is that layer plus one device.

pub mod address;
pub mod soft;
pub mod verbs;

use std::sync::Arc;

use crate::abi::*;

/// Every device the built-in providers offer, in the order their IAs are listed. Adding a
/// device is one folder beside `soft/` and `verbs/`, and one line here.
pub static DRIVERS: &[&dyn Driver] = &[&soft::DRIVER, &verbs::DRIVER];

/// The driver a dat.conf lib_path `builtin:<name>` names.
pub fn driver(lib_path: &[u8]) -> Option<&'static dyn Driver> {
    driver_named(lib_path.strip_prefix(b"builtin:")?)
}

/// The driver called `name` (`soft`, `verbs`).
pub fn driver_named(name: &[u8]) -> Option<&'static dyn Driver> {
    DRIVERS.iter().copied().find(|d| d.name().as_bytes() == name)
}

/// A kind of device, as the built-in providers know it before any is opened: its name, the IAs
/// it offers without a dat.conf, the attributes it reports, and how to open one. What a
/// device reports once open is [`Device::attributes`].
pub trait Driver: Sync {
    /// The word after `builtin:` in a dat.conf lib_path, and `DAT2_DEVICE`'s value.
    fn name(&self) -> &'static str;
    /// The IAs offered when dat.conf does not name them: (IA name, ia_params).
    fn probe(&self) -> Vec<(String, String)>;
    /// The ia_params a dat.conf entry that leaves them empty gets.
    fn params_or_default(&self, params: &str) -> String {
        params.to_string()
    }
    /// Provider-specific attributes known before the device opens, for an IA on `params`.
    fn attributes(&self, params: &str) -> Vec<(&'static str, String)>;
    /// Opens a device on `params`; the error says why not (with the device or address).
    fn open(&self, params: &str) -> Result<Arc<dyn Device>, String>;
}

/// The provider-specific attributes every built-in device reports first: the DAT IB
/// extension interface, its connectivity mode and its driver's name. What the open device
/// can do (atomics, immediate data, ...) follows from [`capability_attributes`].
pub fn common_attributes(driver: &dyn Driver, mode: &str) -> Vec<(&'static str, String)> {
    vec![("DAT_IB_RDMA_READ", "TRUE".into()), ("DAT_IB_CONNECTIVITY_MODE", mode.into()), ("DAT2_DEVICE", driver.name().into())]
}

/// The IB extensions an open device offers, as `TRUE`/`FALSE` attributes: a consumer reads
/// them before it posts what the device would refuse (zero-based addressing is
/// `DAT_IA_ATTR.zb_supported`).
pub fn capability_attributes(l: &DeviceLimits) -> Vec<(String, String)> {
    let b = |v: bool| if v { "TRUE" } else { "FALSE" }.to_string();
    vec![
        ("DAT_EXTENSION_INTERFACE".into(), b(l.ib_extensions())),
        ("DAT_IB_CMP_AND_SWAP".into(), b(l.atomics)),
        ("DAT_IB_FETCH_AND_ADD".into(), b(l.atomics)),
        ("DAT_IB_IMMED_DATA".into(), b(l.immediate)),
    ]
}

bitflags::bitflags! {
    /// Access rights of a registration, in DAT's privilege bits (`DAT_MEM_PRIV_*`, plus
    /// `DAT_IB_MEM_PRIV_REMOTE_ATOMIC`). Local read is always implied.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        const LOCAL_READ = DAT_MEM_PRIV_LOCAL_READ_FLAG;
        const REMOTE_READ = DAT_MEM_PRIV_REMOTE_READ_FLAG;
        const LOCAL_WRITE = DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
        const REMOTE_WRITE = DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        const REMOTE_ATOMIC = DAT_IB_MEM_PRIV_REMOTE_ATOMIC;
        const REMOTE = Self::REMOTE_READ.bits() | Self::REMOTE_WRITE.bits() | Self::REMOTE_ATOMIC.bits();
    }
}

impl Access {
    pub fn is_remote(self) -> bool {
        self.intersects(Self::REMOTE)
    }
    /// Whether the memory must be writable: local or remote write, or atomics.
    pub fn needs_write(self) -> bool {
        self.intersects(Self::LOCAL_WRITE | Self::REMOTE_WRITE | Self::REMOTE_ATOMIC)
    }
}

/// A protection domain of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);

/// A memory registration's keys and range as the device reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    /// Device-private identity of this registration (one per key set).
    pub id: u64,
    pub lkey: u32,
    /// 0 when no remote access was asked for.
    pub rkey: u32,
    /// The registered range, which covers the request (a device that pins pages may round it).
    pub addr: u64,
    pub len: u64,
}

/// A memory window (an RMR's device object).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mw {
    pub id: u64,
    pub rkey: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevError {
    /// The range is not mapped, or lacks the access asked for.
    Fault,
    /// The device ran out of something (keys, memory, a limit).
    NoResources,
    /// A registration would pin more memory than the process's locked-memory limit
    /// (`RLIMIT_MEMLOCK`) allows.
    LockedMemory,
    /// The device does not do this.
    NotSupported,
    /// The port or address is taken.
    InUse,
    /// The QP is not in a state that allows this.
    State,
    /// A work queue is full.
    QueueFull,
    /// The device cannot name this connection qualifier (rdma_cm's 16-bit ports).
    BadQualifier,
}

/// Limits the device reports; the built-in layer turns them into `DAT_IA_ATTR`.
#[derive(Clone, Debug)]
pub struct DeviceLimits {
    pub max_pds: u32,
    pub max_mrs: u32,
    pub max_mr_size: u64,
    pub max_mws: u32,
    pub max_qps: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    /// Scatter entries of an RDMA read's sink (1 on iWARP).
    pub max_sge_rd: u32,
    pub max_cqs: u32,
    pub max_cqe: u32,
    /// RDMA reads and atomics a QP answers at a time (as responder).
    pub max_rd_in: u32,
    /// RDMA reads and atomics a QP has outstanding at a time (as initiator).
    pub max_rd_out: u32,
    pub max_msg_size: u32,
    pub max_srqs: u32,
    pub max_srq_wr: u32,
    pub mtu: u32,
    pub page_size: u64,
    /// The most private data a connect, accept or reject carries.
    pub max_private_data: u32,
    /// The largest datagram payload of a UD QP (the path MTU); 0 when the device has no UD.
    pub max_ud_msg: u32,
    /// Compare-and-swap and fetch-and-add (iWARP has neither).
    pub atomics: bool,
    /// 32 bits of immediate data on a send or an RDMA write (iWARP has none).
    pub immediate: bool,
    /// Zero-based registrations (`DAT_VA_TYPE_ZB`) whose remote addresses are offsets
    /// (`DAT_IA_ATTR.zb_supported`).
    pub zero_based: bool,
}

impl DeviceLimits {
    /// Whether the device can carry out `op` at all: a request it cannot is refused with
    /// `DAT_MODEL_NOT_SUPPORTED` before anything is queued.
    pub fn supports(&self, op: &WrOp) -> bool {
        match op {
            WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => self.atomics,
            WrOp::SendImm(_) | WrOp::WriteImm(_) => self.immediate,
            _ => true,
        }
    }
    /// Whether any operation of the IB extensions is there: `DAT_IA_ATTR.extension_supported`
    /// is `DAT_EXTENSION_NONE` otherwise (iWARP), as Debian's dapl reports, so that programs
    /// such as dtest fall back to plain operations.
    pub fn ib_extensions(&self) -> bool {
        self.atomics || self.immediate || self.max_ud_msg > 0
    }
}

pub trait Device: Send + Sync {
    /// The adapter name reported in `DAT_IA_ATTR.adapter_name`.
    fn name(&self) -> &str;
    fn vendor(&self) -> &str;
    fn limits(&self) -> &DeviceLimits;
    /// Provider-specific attributes of the open device, after the driver's
    /// ([`Driver::attributes`]) and the transport MTU.
    fn attributes(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The device's configured address (an open IA's is its [`IaPort::address`]).
    fn address(&self) -> std::net::SocketAddr;

    /// Delivers the completions that are ready now, on the calling thread: an EVD dequeue that
    /// finds its queue empty calls it, so that polling consumers do not wait for a device's
    /// progress thread to wake up.
    fn progress(&self) {}

    /// Whether a QP's completions wait for someone to poll it ([`Qp::poll`]), as a verbs CQ's
    /// do: then an EVD polls the QPs that report to it, and only those, when it finds its
    /// queue empty. A device whose completions arrive by themselves (the soft device's
    /// threads) says no, and an empty EVD asks only [`Device::progress`].
    fn polled_qps(&self) -> bool {
        false
    }

    /// A consumer begins (`true`) or ends (`false`) a blocking wait: `dat_evd_wait`,
    /// `dat_cno_wait`, or a CNO with a proxy agent (which waits for as long as it has one).
    /// A device whose completions cost a wake-up of their own (verbs: an armed CQ, an event on
    /// the completion channel, the progress thread) asks for those only while someone waits;
    /// consumers that poll get their completions through `progress`. On `true` the device
    /// also delivers what is ready now.
    fn consumer_waits(&self, _begins: bool) {}

    fn alloc_pd(&self) -> Result<Pd, DevError>;
    fn dealloc_pd(&self, pd: Pd);

    /// Registers `[addr, addr+len)` in `pd`. `zero_based` makes remote addresses offsets from
    /// the region's start.
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError>;
    /// A second key set over the memory of `mr`, in `pd` with `access`: used to share one
    /// registration between LMRs while each keeps keys of its own, so that freeing one LMR
    /// revokes exactly its keys.
    fn alias_mr(&self, mr: &Mr, pd: Pd, access: Access, zero_based: bool) -> Result<Mr, DevError>;
    /// Revokes the keys of `mr` at once; the memory registration goes with its last key set.
    fn dereg_mr(&self, mr: &Mr);
    /// Whether the built-in layer may keep this device's local-only registrations after their last LMR
    /// is freed, for a later LMR of the same range to reuse (the registration cache, see
    /// `crate::builtin::mr::cache`). A device that pins memory, and pays for each registration, says
    /// yes. When it does, it also shares a registration between LMRs only while the
    /// memory under it is watched; a kept MR stays registered (its lkey valid) until the built-in
    /// layer deregisters it, and flushes a PD's kept MRs before `dealloc_pd`.
    fn cache_registrations(&self) -> bool {
        false
    }
    /// The rights the registration behind an LMR's lkey really grants on this device. On
    /// iWARP RNICs the sink of an RDMA read is written by the peer's read response as by an
    /// RDMA write, so local write brings remote write with it (not on siw, which checks local
    /// write only); the rkey handed out still carries exactly `access` (the verbs device then
    /// registers twice), but the lkey is the sink's tag each read request shows the peer, so
    /// the registration cache treats such a registration as a remote one (never shared or kept
    /// after its LMR).
    fn wire_access(&self, access: Access) -> Access {
        access
    }
    /// Whether a request posted with `mr`'s lkey may still be outstanding on a QP or SRQ of
    /// the device. The registration cache keeps an MR after its last LMR is freed only when
    /// not: a kept MR's lkey stays valid, and a request still queued with it would touch the
    /// memory after `dat_lmr_free` returned. Asked only of devices that cache registrations.
    fn mr_in_use(&self, _mr: &Mr) -> bool {
        false
    }

    fn alloc_mw(&self, pd: Pd) -> Result<Mw, DevError>;
    fn dealloc_mw(&self, mw: &Mw);

    /// A QP; with `srq`, its receives come from that shared receive queue.
    fn create_qp(
        &self,
        pd: Pd,
        caps: QpCaps,
        srq: Option<std::sync::Arc<dyn Srq>>,
        events: std::sync::Arc<dyn QpEvents>,
    ) -> Result<std::sync::Arc<dyn Qp>, DevError>;
    fn create_srq(
        &self,
        pd: Pd,
        max_wr: u32,
        max_sge: u32,
        events: std::sync::Arc<dyn SrqEvents>,
    ) -> Result<std::sync::Arc<dyn Srq>, DevError>;
    /// What an IA of this device holds while it is open: its address, and the service points
    /// it listens for. The soft device binds the IA's own TCP port here.
    fn open_ia(&self) -> Result<Box<dyn IaPort>, DevError>;
    /// Where a connect to the service point `conn_qual` of the IA at `addr` (as the consumer
    /// gave it) goes, or None when this device cannot name that pair: the port is the
    /// device's choice (soft: `addr`'s own port, else the qualifier as the port; verbs: the
    /// qualifier's low 16 bits, rdma_cm's ports).
    fn service_address(&self, addr: std::net::SocketAddr, conn_qual: u64) -> Option<std::net::SocketAddr>;
}

// ---------------------------------------------------------------------------------------------
// The data path: queue pairs, their completions, and the connection manager.

/// A scatter/gather element of local memory, named by its lkey.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

/// A request's scatter list: up to four segments inline, more on the heap.
pub type Sges = smallvec::SmallVec<[Sge; 4]>;

/// What a send-queue work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrOp {
    Send,
    /// A send that also invalidates the peer's memory window `rkey`.
    SendInv(u32),
    /// A send with 32 bits of immediate data.
    SendImm(u32),
    Write,
    WriteImm(u32),
    Read,
    CmpSwap {
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        add: u64,
    },
}

/// A send-queue work request.
#[derive(Clone, Debug)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: WrOp,
    pub sges: Sges,
    /// Remote address and key (RDMA and atomics).
    pub remote: Option<(u64, u32)>,
    /// UD: where the datagram goes (an address handle of this device, which names the peer's
    /// QP and its Q_Key). The request holds it until it completes.
    pub ah: Option<Arc<dyn AddressHandle>>,
    /// Wait for earlier RDMA reads and atomics to complete first.
    pub fence: bool,
    pub solicited: bool,
}

/// What a completion reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOp {
    Send,
    Write,
    Read,
    Recv,
    /// A receive consumed by an RDMA write with immediate data.
    RecvImm,
    CmpSwap,
    FetchAdd,
    /// A memory window bind or unbind.
    Bind,
}

/// A work completion. `status` is a DAT_DTO_COMPLETION_STATUS.
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    pub wr_id: u64,
    pub status: u32,
    pub op: WcOp,
    pub byte_len: u32,
    pub imm: Option<u32>,
    /// The rkey a received send-with-invalidate invalidated.
    pub invalidated: Option<u32>,
    /// Receives: the sender posted the message with the solicited flag (`SendWr::solicited`),
    /// so it wakes a solicited-wait waiter. A device that cannot tell reports true, so that a
    /// waiter is woken too often rather than never.
    pub solicited: bool,
}

impl Completion {
    /// A completion that carries no data and no flags: a send-side request, a bind, or a
    /// receive that is flushed or failed.
    pub fn bare(wr_id: u64, status: u32, op: WcOp) -> Completion {
        Completion { wr_id, status, op, byte_len: 0, imm: None, invalidated: None, solicited: false }
    }
}

/// Connection events of a QP. A UD QP's connect and accept resolve an address instead of
/// making a connection: each success is a `UdResolved`, and a UD QP never disconnects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEvent {
    Established {
        private_data: Vec<u8>,
    },
    /// UD: the peer answered a connect (`passive` false) or this side accepted its request
    /// (`passive` true); datagrams reach it through `peer`.
    UdResolved {
        private_data: Vec<u8>,
        peer: UdPeer,
        passive: bool,
    },
    PeerRejected {
        private_data: Vec<u8>,
    },
    NonPeerRejected,
    Unreachable,
    TimedOut,
    Disconnected,
    Broken,
    /// Passive side: the consumer accepted, and the requester did not complete the
    /// connection (it went away, or did not answer in time).
    AcceptCompletionError,
}

/// Where a QP reports completions and connection events, and whom it asks about keys.
pub trait QpEvents: Send + Sync {
    fn completion(&self, c: Completion);
    fn cm(&self, ev: CmEvent);
    /// Whether `lkey` names a live LMR of the QP's protection zone. A post asks it of every
    /// segment that moves bytes, under the lock the device counts outstanding keys with
    /// ([`Device::mr_in_use`]), and refuses the request with [`DevError::Fault`] otherwise:
    /// a registration the cache kept keeps its lkey valid in the device, so without this
    /// check a freed LMR's lmr_context would still move bytes. Asked under that lock, a post
    /// racing `dat_lmr_free` either sees the key revoked or is seen by `mr_in_use`.
    fn key_live(&self, lkey: u32) -> bool;
    /// The QP is destroyed: what it moved, by path ([`Qp::moved`]), for its owner's totals.
    fn moved(&self, _bytes: Moved) {}
}

/// Bytes a QP's own requests moved, by path: over its TCP connection, by cross-memory
/// attach, through shared memory (the soft device's paths; a device without paths of its
/// own reports none).
pub type Moved = [u64; 3];
pub const MOVED_TCP: usize = 0;
pub const MOVED_CMA: usize = 1;
pub const MOVED_SHM: usize = 2;

/// The bytes a scatter list spans.
#[inline]
pub fn sges_len(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.len)).sum()
}

/// Whether every segment of a request that moves bytes passes `live` (see
/// [`QpEvents::key_live`]).
pub fn keys_live(sges: &[Sge], live: impl Fn(u32) -> bool) -> bool {
    sges.iter().all(|s| s.len == 0 || live(s.lkey))
}

/// The service a QP gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Reliable connected: one peer, ordered, RDMA and atomics.
    Rc,
    /// Unreliable datagram: any resolved peer, messages of at most `max_ud_msg` bytes, each
    /// receive starting with a 40-byte GRH area (see [`GRH_LEN`]).
    Ud,
}

/// The bytes a UD receive gives to the global routing header before the payload, as on
/// InfiniBand: the completed length counts them.
pub const GRH_LEN: u32 = 40;

/// A UD address handle: how this device reaches one resolved peer QP (its address, QP number
/// and Q_Key). Dropping the last reference frees it; a send posted with it holds one.
pub trait AddressHandle: Send + Sync + std::fmt::Debug {
    /// For a device to recognise its own address handles.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A peer a UD address resolution produced.
#[derive(Clone, Debug)]
pub struct UdPeer {
    pub ah: Arc<dyn AddressHandle>,
    /// The peer QP's number, as `DAT_IB_ADDR_HANDLE.qpn` reports it.
    pub qpn: u32,
    /// The peer's IA address (its port is not meaningful).
    pub addr: std::net::SocketAddr,
}

impl PartialEq for UdPeer {
    fn eq(&self, o: &UdPeer) -> bool {
        Arc::ptr_eq(&self.ah, &o.ah) && self.qpn == o.qpn && self.addr == o.addr
    }
}
impl Eq for UdPeer {}

/// The limits a QP is created with.
#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    pub service: Service,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_rd_atomic: u32,
    /// RDMA READ and atomic requests the peer may have outstanding at this QP (the EP's
    /// `max_rdma_read_in`).
    pub max_rd_in: u32,
    pub max_message: u32,
}

/// A queue pair: reliable connected, or (`Service::Ud`) a datagram QP whose connect resolves
/// a peer's address and whose sends each carry an address handle (`SendWr::ah`). A UD QP
/// takes any number of connects and accepts, each reported once as `UdResolved` or a failure.
pub trait Qp: Send + Sync {
    /// Starts an active connection to `addr` (from [`Device::service_address`]), to the
    /// service point `conn_qual` there (see [`IaPort::listen`]); the outcome arrives as a
    /// [`CmEvent`].
    fn connect(
        &self,
        addr: std::net::SocketAddr,
        conn_qual: u64,
        private_data: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<(), DevError>;
    /// Fails with [`DevError::Fault`], posting nothing, when a segment's key is not live
    /// ([`QpEvents::key_live`]); so does `post_recv`, and an SRQ's.
    fn post_send(&self, wr: &SendWr) -> Result<(), DevError>;
    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError>;
    /// Delivers this QP's completions that are ready now, on the calling thread (see
    /// [`Device::polled_qps`]).
    fn poll(&self) {}
    /// A consumer begins a blocking wait that this QP's completions end (`dat_evd_wait` on an
    /// EVD the QP reports to, on a device whose QPs are polled): until [`Qp::wait_ends`], each
    /// of its completions wakes the device. Takes no lock a completion takes.
    fn wait_begins(&self) {}
    fn wait_ends(&self) {}
    /// Delivers what is ready now, after [`Qp::wait_begins`] and before the consumer blocks:
    /// unlike [`Qp::poll`], in turn with another thread that is polling, so that nothing that
    /// completed before the arm is left behind.
    fn deliver_before_wait(&self) {}
    /// Graceful (after outstanding work) or abrupt disconnect; posted work is flushed.
    fn disconnect(&self, graceful: bool);
    /// The QP's EP is being freed: an abrupt disconnect, and when it returns no request of the
    /// QP touches memory again.
    fn destroy(&self) {
        self.disconnect(false);
    }
    /// Binds memory window `mw` of this QP's PD over part of an LMR's registration, for this
    /// QP only; returns the window's new rkey (the old one stops working). The bind completes
    /// as work request `wr_id`, in order with the requests posted before it.
    #[allow(clippy::too_many_arguments)]
    fn bind_mw(&self, wr_id: u64, mw: &Mw, mr: &Mr, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<u32, DevError>;
    /// Unbinds a window (its rkey stops working at once), completing as work request `wr_id`.
    fn unbind_mw(&self, wr_id: u64, mw: &Mw);
    /// The peer's address and port, once connected.
    fn remote(&self) -> Option<std::net::SocketAddr>;
    /// The local port of the connection.
    fn local_port(&self) -> u16;
    /// How data moves on this connection (for `dat_ep_query`'s provider attributes).
    fn path(&self) -> &'static str;
    /// What the QP's requests moved so far, by path, until it is destroyed (then its
    /// [`QpEvents::moved`] has it).
    fn moved(&self) -> Moved {
        [0; 3]
    }
    /// For a device to recognise its own QPs.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A connection request waiting for the passive side's answer.
pub trait PendingConnection: Send + Sync {
    fn private_data(&self) -> &[u8];
    /// Whether a UD QP asks: only a UD QP accepts it, and the accepting QP reports
    /// `UdResolved { passive: true }` naming the requester.
    fn datagram(&self) -> bool {
        false
    }
    fn remote(&self) -> std::net::SocketAddr;
    /// Accepts on `qp` (created by this device); the QP then reports Established.
    fn accept(&self, qp: &std::sync::Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError>;
    fn reject(&self, private_data: &[u8]);
}

/// Where a listener reports connection requests.
pub trait ListenEvents: Send + Sync {
    fn request(&self, conn: std::sync::Arc<dyn PendingConnection>);
}

/// A listening endpoint of the connection manager; dropping it stops listening.
pub trait Listener: Send + Sync {
    /// The qualifier it listens for (the one chosen, when asked for any).
    fn conn_qual(&self) -> u64;
}

/// An open IA's side of its device ([`Device::open_ia`]); dropping it stops its listening.
pub trait IaPort: Send + Sync {
    /// The IA's address, as `dat_ia_query` reports it and peers connect to it.
    fn address(&self) -> std::net::SocketAddr;
    /// Listens for the service point `conn_qual` (0: one the device chooses) of this IA.
    /// [`DevError::InUse`]: the qualifier is taken; [`DevError::BadQualifier`]: the device
    /// cannot name it.
    fn listen(&self, conn_qual: u64, events: std::sync::Arc<dyn ListenEvents>) -> Result<Box<dyn Listener>, DevError>;
}

/// Where an SRQ reports that its receives fell below the limit set with [`Srq::set_limit`].
pub trait SrqEvents: Send + Sync {
    fn limit_reached(&self);
    /// As [`QpEvents::key_live`], for the SRQ's protection zone.
    fn key_live(&self, lkey: u32) -> bool;
}

/// A shared receive queue: receives any of its QPs may consume.
pub trait Srq: Send + Sync {
    fn post_recv(&self, wr_id: u64, sges: Sges) -> Result<(), DevError>;
    /// Arms the limit event: it fires once when fewer than `limit` receives remain (0 disarms).
    fn set_limit(&self, limit: u32);
    fn resize(&self, max_wr: u32) -> Result<(), DevError>;
    /// Receives posted and not yet consumed.
    fn available(&self) -> usize;
    fn as_any(&self) -> &dyn std::any::Any;
}
