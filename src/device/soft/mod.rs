//! `soft`: a software RDMA device inside the library, needing no kernel support or hardware.
//! Like Soft-RoCE, it enforces in software what an HCA enforces in hardware: registrations
//! cover only memory that is really mapped with the access asked for, keys are unpredictable
//! capabilities, and every key names its protection domain, bounds and rights.
//!
//! # Threads
//!
//! The device's own, each named (`ps -T`):
//! - `dat2-soft-engine`, one per process, from the first IA on: the progress engine
//!   of every connected RC QP, over its one non-blocking socket (epoll): reads the peer's
//!   frames, runs its requests, completes ours, delivers events (qp/reader.rs), continues the
//!   frames a full socket did not take (qp/tx.rs), and serves the connections' deadlines
//!   (READY_WAIT, RNR_WAIT). It never waits on a peer: a payload lands as it comes, in
//!   pieces; lives as long as the process (engine.rs). Connections cost no thread.
//!   It also runs the active side of every RC handshake, each stage with its deadline
//!   (qp/opening.rs), and serves every listening socket (each open IA's port, and the own
//!   port of a service point whose qualifier is a port number): accepts, greets and reads
//!   the connections' HELLOs, with their deadlines, and hands each request to the service
//!   point of its qualifier in the IA's table (listener.rs); IAs and service points cost no
//!   thread either. And every UD QP: its datagrams, in turns of at
//!   most TURN_DATAGRAMS, and its proofs' deadlines and resends (ud/mod.rs, ud/proof.rs);
//!   `disconnect` and `destroy` unregister the socket and wait for a turn under way, so
//!   nothing lands after they return. And every UD resolution (`connect` of a UD QP): its TCP
//!   exchange, each stage with its deadline, holding the QP only weakly (ud/resolving.rs),
//!   then the proofs as a wait of the QP's. No connect, RC or UD, has a thread of its own.
//! - `dat2-soft-peers`, one per process, from the first verified peer on: marks peers gone
//!   when their processes exit; lives as long as the process (peer.rs).
//!
//! On the consumer's own thread:
//! - posts: key checks; RC: the same-host direct write (fast.rs, `write_direct`) or send
//!   placed into the peer's receive (`send_direct`, recvring.rs), else what the socket takes
//!   at once, never waiting (as any thread that queues a frame does); UD: the `sendmsg` (up
//!   to SEND_WAIT for room). Direct writes and sends and UD sends are completed by the post
//!   itself. A frame takes its place in the stream under `inner` (tx.rs `send_frame_after`).
//! - `post_recv`, of an EP or an SRQ: runs peer requests that waited for it (`drain_stalled`)
//!   if `exec` is free, else its holder runs them once done; kicks the engine when the reader
//!   stopped for want of a receive (RNR).
//! - `dat_evd_dequeue`/`dat_evd_wait`: `progress` runs the ready RC QPs' handlers on the
//!   consumer's thread (engine.rs `poll_here`; a listener's or UD QP's go back to the engine
//!   thread), or yields the CPU when none is ready.
//! - disconnect: DISCONNECT as far as the socket takes it, then the flushed completions;
//!   accept: the rendezvous, then registers the connection with the engine.
//! - free and deregistration: wait for the copies of the QP or key set (lease.rs), a verified
//!   peer's up to PEER_WAIT; a UD QP's `destroy` waits for the engine's turn on it. A
//!   disconnect or free made on the engine thread (from a delivery: a CNO proxy agent) waits
//!   for a verified peer's answers by taking its QP's read turns itself (qp/cm.rs
//!   `await_peer_copies`): only the engine reads them; a revoke there (`dat_lmr_free`) serves
//!   the engine while it waits (engine.rs `serve_nested`, lease.rs), its locks released; a
//!   handler whose turn is up the stack then kicks itself for later.
//!
//! # Lock order
//!
//! Outer before inner; a leaf takes no other lock. No lock is held while a QP's events go to
//! the consumer (delivery.rs), so a handler may call back in; builtin's `key_live` (a leaf)
//! runs under a QP's or SRQ's lock, and an SRQ's limit event under `exec` (builtin posts it).
//! - RC `reader` (qp/reader.rs): the read side's state, for one turn of the connection, on
//!   the engine thread or a polling consumer's, and never waited for (a thread that finds it
//!   taken leaves a note for the holder); outermost. Another QP's is only tried under it (a
//!   free from a delivery, `try_read_turn`). Under it: everything below, and `deliver` (not a
//!   lock: the reader's events go to the consumer under it, never under another).
//! - RC `exec` (qp/mod.rs): one peer request runs at a time, on the engine or in
//!   `drain_stalled` (which only tries it), and each piece of a payload landing from the
//!   socket; `disconnect_now` takes it, once reading is shut down, to wait for that one.
//!   Under it: `inner` and all under that; without `inner`: the SRQ's state, `dev.state`
//!   (read; written by a send with invalidate, which then revokes), `dev.atomics`,
//!   `shm_peers`, `out.queue`.
//! - RC `inner` (`room` waits on it). Under it: the key table's ring allocator (a leaf,
//!   `claims`), the SRQ's state (`has_recv`), `dev.state`
//!   read (a post's key lookups), `shm_peers` (a direct write), `out.queue` (deferred
//!   requests, `on_response`), `SetLease::sockets` (leases taken or dropped), the watcher's
//!   flags (a replaced peer dropped).
//! - `shm_peers` -> shm.rs `mapped()`.
//! - An RC active handshake's `hs` (qp/opening.rs), for one turn of its exchange on the
//!   engine. Under it: RC `inner` (the QP's state checked, its stream noted, `claims`), the
//!   engine's handler map, timers and kicks. Its outcome is reported once it is released.
//! - A UD resolution's `state` (ud/resolving.rs), for one turn of its exchange on the engine,
//!   and taken by its QP's `disconnect` (under no lock) to end it. Under it: the QP's
//!   `resolving` (a leaf), the engine's handler map, timers and kicks. Its outcome is reported
//!   (and its proofs awaited: `proofs`, `reg`) once it is released.
//! - UD `rx` (ud/mod.rs): the datagram buffer, taken by the engine for one turn of the QP;
//!   outermost, its events go to the consumer under it. Under it: `proofs`, UD `inner`, the
//!   SRQ's state, `reg` (a leaf: the engine's kicks and timers under it).
//! - A listening socket's `state` (listener.rs), for one turn of its socket or of a half-open
//!   connection; never held while a request goes to the consumer. Under it: the engine's
//!   handler map and timers. An IA's service point table (a leaf) is taken under no lock.
//! - Leaves: `out.queue` (only non-blocking writes and shutdowns under it; a frame's own write
//!   is made without it, under its `busy`, taking leases), the engine's handler map (never held
//!   while a handler runs), its timers and kicks (under `inner`), `SetLease::sockets`,
//!   `dev.state`, `dev.atomics`, the SRQ's state, UD `inner`, `Delivery`, `Violations`, the
//!   `Pending` streams, `peer_table`'s map (taken before `inner`), peer.rs `known` (the
//!   verified processes, also taken when one drops), the watcher's flags.
//! - Withdrawing a receive ring (dropping `OwnRing`, in `flush`) waits for a peer's pin (a
//!   placement of at most 64 KiB; PEER_WAIT at most) holding no lock but, on the engine or a
//!   polling thread, the QP's read turn.
//! - A revoke (`SetLease::revoke`, `wait_unpinned`) waits under no lock but `exec`: a copy
//!   holding a lease may take `inner` or `shm_peers` (exec.rs `land_leased`). A join holds none.

pub mod delivery;
pub mod engine;
pub mod exchange;
pub mod io;
pub mod keys;
pub mod keytab;
pub mod lease;
pub mod listener;
pub mod memory;
pub mod peer;
pub mod qp;
pub mod recvring;
pub mod rendezvous;
pub mod shm;
pub mod srq;
pub mod ud;
pub mod wire;

/// The soft device's driver: `builtin:soft` in dat.conf, and the IA `dat2-soft` without one.
pub static DRIVER: SoftDriver = SoftDriver;

/// The IA name of the default soft device.
pub const IA_NAME: &str = "dat2-soft";
/// The ia_params of `dat2-soft`, and of a `builtin:soft` entry that gives none.
pub const DEFAULT_PARAMS: &str = "127.0.0.1 0";

pub struct SoftDriver;

impl crate::device::Driver for SoftDriver {
    fn name(&self) -> &'static str {
        "soft"
    }
    fn probe(&self) -> Vec<(String, String)> {
        vec![(IA_NAME.to_string(), DEFAULT_PARAMS.to_string())]
    }
    fn params_or_default(&self, params: &str) -> String {
        if params.trim().is_empty() {
            DEFAULT_PARAMS.to_string()
        } else {
            params.to_string()
        }
    }
    fn attributes(&self, params: &str) -> Vec<(&'static str, String)> {
        let mut v = crate::device::common_attributes(self, "DIRECT");
        v.push(("DAT2_SOFT_PARAMS", params.into()));
        v
    }
    fn open(&self, params: &str) -> Result<Arc<dyn Device>, String> {
        SoftDevice::new(params).map(|d| d as Arc<dyn Device>)
    }
}

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::device::{Access, DevError, Device, DeviceLimits, IaPort, Mr, Mw, Pd, Qp, QpCaps, QpEvents, Service, Sge, Srq, SrqEvents};
use crate::util::idmap::IdMap;
use crate::util::sync::RwLockExt;
use keys::KeyGen;

/// One key set: what an lkey or rkey grants.
#[derive(Clone)]
pub struct KeySet {
    pub region: u64,
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub zero_based: bool,
    pub lkey: u32,
    pub rkey: u32,
    /// For a memory window: the QP it is bound to (it works on that connection only).
    pub bound_qp: Option<u64>,
    /// What every copy admitted by the set holds (lease.rs).
    pub lease: Arc<lease::SetLease>,
}

/// The key sets of a scatter list: inline for a few elements (nothing allocated on a post).
pub type Keys = smallvec::SmallVec<[KeySet; 1]>;

struct Region {
    writable: bool,
    sets: u32,
    /// The registered range's shared file and our alias of it, when it has one (shm.rs).
    shm: Option<Arc<shm::Backing>>,
}

#[derive(Default)]
struct State {
    next_pd: u32,
    pds: HashSet<u32>,
    next_id: u64,
    regions: IdMap<u64, Region>,
    sets: IdMap<u64, KeySet>,
    lkeys: IdMap<u32, u64>,
    rkeys: IdMap<u32, u64>,
    /// Memory windows: their PD and current binding (a key set).
    mws: IdMap<u64, (u32, Option<u64>)>,
    next_qp: u64,
}

pub struct SoftDevice {
    this: Weak<SoftDevice>,
    name: String,
    limits: DeviceLimits,
    address: std::net::SocketAddr,
    keys: KeyGen,
    state: RwLock<State>,
    /// Makes remote atomics atomic with respect to each other.
    pub atomics: Mutex<()>,
    /// Our remote keys, published to peers on this host (see keytab.rs).
    pub keytab: Option<Arc<keytab::KeyTable>>,
}

// SAFETY: all mutable state is behind the RwLock.
unsafe impl Send for SoftDevice {}
// SAFETY: as above.
unsafe impl Sync for SoftDevice {}

impl SoftDevice {
    /// A device on the address `params` names (`"<address or netdev> <port>"`).
    pub fn new(params: &str) -> Result<Arc<SoftDevice>, String> {
        let address = crate::device::address::resolve(params)?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        Ok(Arc::new_cyclic(|this| SoftDevice {
            this: this.clone(),
            name: "soft0".into(),
            limits: DeviceLimits {
                max_pds: 1 << 16,
                max_mrs: 1 << 22,
                max_mr_size: 1 << 40,
                max_mws: 1 << 20,
                max_qps: 1 << 14,
                max_qp_wr: 1 << 14,
                max_sge: 16,
                max_sge_rd: 16,
                max_cqs: 1 << 14,
                max_cqe: 1 << 20,
                max_rd_in: 16,
                max_rd_out: 16,
                max_msg_size: 1 << 31,
                max_srqs: 1 << 10,
                max_srq_wr: 1 << 14,
                mtu: 4096,
                page_size: page,
                max_private_data: 256,
                // A datagram is at most the MTU, as on a fabric (see ud/).
                max_ud_msg: ud::MTU,
                atomics: true,
                immediate: true,
                zero_based: true,
            },
            address,
            keys: KeyGen::new(),
            state: RwLock::new(State::default()),
            atomics: Mutex::new(()),
            keytab: keytab::KeyTable::create().map(Arc::new),
        }))
    }

    fn me(&self) -> Arc<SoftDevice> {
        self.this.upgrade().expect("a device in use is alive")
    }

    /// Binds window `mw` over part of registration `mr` for QP `qp`; returns its new rkey.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_mw(
        &self,
        mw: &Mw,
        mr: &Mr,
        pd: u32,
        qp: u64,
        addr: u64,
        len: u64,
        access: Access,
        zero_based: bool,
    ) -> Result<u32, DevError> {
        let mut s = self.write();
        let (mw_pd, old) = *s.mws.get(&mw.id).ok_or(DevError::Fault)?;
        let region = s.sets.get(&mr.id).ok_or(DevError::Fault)?.region;
        if mw_pd != pd {
            return Err(DevError::Fault);
        }
        let revoked = old.and_then(|old| self.drop_set(&mut s, old));
        s.next_id += 1;
        let id = s.next_id;
        let rkey = self.keys.next();
        let set = KeySet { region, pd, addr, len, access, zero_based, lkey: 0, rkey, bound_qp: Some(qp), lease: Default::default() };
        self.publish(&set, s.regions.get(&region).and_then(|r| r.shm.as_deref()));
        s.sets.insert(id, set);
        s.rkeys.insert(rkey, id);
        if let Some(r) = s.regions.get_mut(&region) {
            r.sets += 1;
        }
        s.mws.insert(mw.id, (mw_pd, Some(id)));
        drop(s);
        self.revoke(revoked);
        Ok(rkey)
    }

    /// Unbinds a window: its rkey stops working at once.
    pub fn unbind_mw(&self, mw: &Mw) {
        let mut s = self.write();
        let mut revoked = None;
        if let Some((pd, Some(set))) = s.mws.get(&mw.id).copied() {
            revoked = self.drop_set(&mut s, set);
            s.mws.insert(mw.id, (pd, None));
        }
        drop(s);
        self.revoke(revoked);
    }

    /// A received send-with-invalidate on QP `qp`: the window `rkey`, bound to that QP in PD
    /// `pd`, stops working.
    pub fn invalidate(&self, rkey: u32, pd: u32, qp: u64) -> bool {
        let mut s = self.write();
        let Some(&set) = s.rkeys.get(&rkey) else { return false };
        if s.sets.get(&set).is_none_or(|k| k.pd != pd || k.bound_qp != Some(qp)) {
            return false;
        }
        let revoked = self.drop_set(&mut s, set);
        if let Some(entry) = s.mws.values_mut().find(|(_, b)| *b == Some(set)) {
            entry.1 = None;
        }
        drop(s);
        self.revoke(revoked);
        true
    }

    /// Publishes a key set to peers on this host: its rkey, and its lkey with LOCAL_WRITE alone
    /// when it has it (a receive's memory, which a peer places sends into, recvring.rs; no
    /// remote right, so it never admits an RDMA operation).
    fn publish(&self, set: &KeySet, shared: Option<&shm::Backing>) {
        let Some(t) = &self.keytab else { return };
        let file = shared.and_then(|b| b.source(set.addr, set.len));
        let grant = keytab::Grant {
            pd: set.pd,
            access: set.access,
            bound_qp: set.bound_qp.unwrap_or(0),
            addr: set.addr,
            len: set.len,
            zero_based: set.zero_based,
            file,
        };
        if set.rkey != 0 {
            t.publish(set.rkey, grant);
        }
        if set.lkey != 0 && set.access.contains(Access::LOCAL_WRITE) {
            t.publish(set.lkey, keytab::Grant { access: Access::LOCAL_WRITE, zero_based: false, ..grant });
        }
    }

    /// Removes a key set: its keys stop working at once. The caller revokes its leases once
    /// the state's lock is released (`revoke`): copies that the set admitted end first.
    #[must_use]
    fn drop_set(&self, s: &mut State, id: u64) -> Option<Revoked> {
        let set = s.sets.remove(&id)?;
        let slots = self.keytab.as_ref().map_or([None, None], |t| [t.withdraw(set.rkey), t.withdraw(set.lkey)]);
        if set.lkey != 0 {
            s.lkeys.remove(&set.lkey);
        }
        if set.rkey != 0 {
            s.rkeys.remove(&set.rkey);
        }
        let last = match s.regions.get_mut(&set.region) {
            Some(r) => {
                r.sets -= 1;
                r.sets == 0
            }
            None => false,
        };
        if last {
            s.regions.remove(&set.region);
        }
        Some(Revoked { lease: set.lease, slots })
    }

    /// Waits until nothing a removed key set admitted still runs: our copies (lease.rs), and
    /// peers' direct writes through its published rkey (keytab.rs).
    fn revoke(&self, r: Option<Revoked>) {
        let Some(r) = r else { return };
        r.lease.revoke();
        if let Some(t) = &self.keytab {
            r.slots.into_iter().flatten().for_each(|slot| t.wait_unpinned(slot, lease::PEER_WAIT));
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write_locked()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read_locked()
    }

    /// What a local key grants, if it is live.
    pub fn lkey(&self, lkey: u32) -> Option<KeySet> {
        let s = self.read();
        s.lkeys.get(&lkey).and_then(|id| s.sets.get(id)).cloned()
    }

    /// What a local key grants, if it is live, and the shared file its registration is in
    /// (shm.rs), if it is in one.
    pub fn lkey_shared(&self, lkey: u32) -> Option<(KeySet, Option<Arc<shm::Backing>>)> {
        let s = self.read();
        let k = s.lkeys.get(&lkey).and_then(|id| s.sets.get(id))?;
        Some((k.clone(), s.regions.get(&k.region).and_then(|r| r.shm.clone())))
    }

    /// The key sets of a local scatter list's non-empty elements, when each lies within a live
    /// lkey of PD `pd`: its bounds, and LOCAL_WRITE when the element is written.
    ///
    /// On every post: one read lock for the whole list, and a plain loop (a generic
    /// `Option` collect into the inline vector cost twice as much).
    pub fn local_keys(&self, pd: u32, sges: &[Sge], write: bool) -> Option<Keys> {
        let mut keys = Keys::new();
        let s = self.read();
        for sge in sges.iter().filter(|s| s.len > 0) {
            let k = s.lkeys.get(&sge.lkey).and_then(|id| s.sets.get(id))?;
            let inside = sge.addr >= k.addr && sge.addr.checked_add(u64::from(sge.len)).is_some_and(|e| e <= k.addr + k.len);
            if k.pd != pd || !inside || (write && !k.access.contains(Access::LOCAL_WRITE)) {
                return None;
            }
            keys.push(k.clone());
        }
        Some(keys)
    }

    /// The shared file behind a registration, if it has one (shm.rs).
    pub fn shared(&self, region: u64) -> Option<Arc<shm::Backing>> {
        self.read().regions.get(&region).and_then(|r| r.shm.clone())
    }

    /// What a remote key grants, if it is live.
    pub fn rkey(&self, rkey: u32) -> Option<KeySet> {
        let s = self.read();
        s.rkeys.get(&rkey).and_then(|id| s.sets.get(id)).cloned()
    }

    #[allow(clippy::too_many_arguments)]
    fn new_set(&self, s: &mut State, region: u64, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if !s.pds.contains(&pd.0) {
            return Err(DevError::Fault);
        }
        if s.sets.len() >= self.limits.max_mrs as usize {
            return Err(DevError::NoResources);
        }
        s.next_id += 1;
        let id = s.next_id;
        let lkey = self.keys.next();
        let rkey = if access.is_remote() { self.keys.next() } else { 0 };
        let set = KeySet { region, pd: pd.0, addr, len, access, zero_based, lkey, rkey, bound_qp: None, lease: Default::default() };
        self.publish(&set, s.regions.get(&region).and_then(|r| r.shm.as_deref()));
        s.sets.insert(id, set);
        s.lkeys.insert(lkey, id);
        if rkey != 0 {
            s.rkeys.insert(rkey, id);
        }
        if let Some(r) = s.regions.get_mut(&region) {
            r.sets += 1;
        }
        Ok(Mr { id, lkey, rkey, addr, len })
    }
}

/// A removed key set, to be revoked once the state's lock is released.
struct Revoked {
    lease: Arc<lease::SetLease>,
    /// Its rkey's and lkey's slots in our published key table.
    slots: [Option<usize>; 2],
}

impl AsRef<lease::SetLease> for KeySet {
    fn as_ref(&self) -> &lease::SetLease {
        &self.lease
    }
}

impl Device for SoftDevice {
    /// A consumer that polls an empty EVD runs what its connections have ready itself
    /// (engine.rs `poll_here`): a spinning consumer that shares its CPU with the engine thread
    /// would otherwise keep that thread off the CPU for its whole time slice (with both
    /// processes of a ping-pong on one CPU, 4 ms one way instead of 31 µs when both block).
    /// Only when nothing was ready does it yield the CPU. An EVD calls this
    /// on one empty dequeue in eight (the others it answers from its handle's cell), so that
    /// a consumer with a CPU to spare pays a system call only now and then.
    fn progress(&self) {
        if !engine::started().is_some_and(|e| e.poll_here()) {
            std::thread::yield_now();
        }
    }

    fn attributes(&self) -> Vec<(String, String)> {
        let shm = if shm::enabled() {
            format!("on: registrations of {} bytes or more in memfds sealed with F_SEAL_SHRINK", shm::MIN_LEN)
        } else {
            "off: DAT2_SOFT_SHM=0".to_string()
        };
        let cma = match peer::cma_state() {
            Ok(()) => {
                "on: with peers of this user on this host that the kernel confirms (Unix-socket rendezvous, SO_PEERCRED, NETLINK_SOCK_DIAG)"
                    .to_string()
            }
            Err(why) => format!("off: {why}"),
        };
        vec![("DAT2_SOFT_SHM".into(), shm), ("DAT2_SOFT_CMA".into(), cma)]
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn vendor(&self) -> &str {
        "dat2 software RDMA"
    }
    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }
    fn address(&self) -> std::net::SocketAddr {
        self.address
    }

    fn alloc_pd(&self) -> Result<Pd, DevError> {
        let mut s = self.write();
        if s.pds.len() >= self.limits.max_pds as usize {
            return Err(DevError::NoResources);
        }
        s.next_pd += 1;
        let pd = s.next_pd;
        s.pds.insert(pd);
        Ok(Pd(pd))
    }

    fn dealloc_pd(&self, pd: Pd) {
        self.write().pds.remove(&pd.0);
    }

    /// No: the soft device pins nothing, so a registration costs little to make again. A
    /// library built with the `bench-soft-cache` feature (`make bench` builds one apart, never
    /// installed) says yes, to time the registration cache's hit through the whole DAT call on
    /// a host without RDMA hardware; this device does not track the lkeys of outstanding
    /// requests ([`Device::mr_in_use`]), so such a build is for measuring only.
    fn cache_registrations(&self) -> bool {
        cfg!(feature = "bench-soft-cache")
    }

    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        if len == 0 || len > self.limits.max_mr_size {
            return Err(DevError::NoResources);
        }
        // Validate outside the lock: it may take a while for a large range.
        if !memory::accessible(addr, len, access.needs_write(), self.limits.page_size) {
            return Err(DevError::Fault);
        }
        let shm = shm::backing(addr, len, access.needs_write());
        let mut s = self.write();
        s.next_id += 1;
        let region = s.next_id;
        s.regions.insert(region, Region { writable: access.needs_write(), sets: 0, shm });
        let mr = self.new_set(&mut s, region, pd, addr, len, access, zero_based);
        if mr.is_err() {
            s.regions.remove(&region);
        }
        mr
    }

    fn alias_mr(&self, mr: &Mr, pd: Pd, access: Access, zero_based: bool) -> Result<Mr, DevError> {
        let (region, addr, len, writable) = {
            let s = self.read();
            let set = s.sets.get(&mr.id).ok_or(DevError::Fault)?;
            let r = s.regions.get(&set.region).ok_or(DevError::Fault)?;
            (set.region, set.addr, set.len, r.writable)
        };
        // The memory may have changed since the first registration: check it again, as an HCA
        // pins it again for every registration.
        if !memory::accessible(addr, len, access.needs_write(), self.limits.page_size) {
            return Err(DevError::Fault);
        }
        if access.needs_write() && !writable {
            if let Some(r) = self.write().regions.get_mut(&region) {
                r.writable = true;
            }
        }
        let mut s = self.write();
        if !s.regions.contains_key(&region) {
            return Err(DevError::Fault);
        }
        self.new_set(&mut s, region, pd, addr, len, access, zero_based)
    }

    fn dereg_mr(&self, mr: &Mr) {
        let revoked = self.drop_set(&mut self.write(), mr.id);
        self.revoke(revoked);
    }

    fn alloc_mw(&self, pd: Pd) -> Result<Mw, DevError> {
        let mut s = self.write();
        if !s.pds.contains(&pd.0) {
            return Err(DevError::Fault);
        }
        if s.mws.len() >= self.limits.max_mws as usize {
            return Err(DevError::NoResources);
        }
        s.next_id += 1;
        let id = s.next_id;
        let rkey = self.keys.next();
        s.mws.insert(id, (pd.0, None));
        Ok(Mw { id, rkey })
    }

    fn dealloc_mw(&self, mw: &Mw) {
        let mut s = self.write();
        let revoked = match s.mws.remove(&mw.id) {
            Some((_, Some(set))) => self.drop_set(&mut s, set),
            _ => None,
        };
        drop(s);
        self.revoke(revoked);
    }

    fn create_qp(&self, pd: Pd, caps: QpCaps, srq: Option<Arc<dyn Srq>>, events: Arc<dyn QpEvents>) -> Result<Arc<dyn Qp>, DevError> {
        let srq = match srq {
            Some(s) => Some(s.as_any().downcast_ref::<srq::SoftSrq>().map(|_| s.clone()).ok_or(DevError::NotSupported)?),
            None => None,
        };
        // Turn the checked trait object back into the concrete type.
        let srq = srq.map(|s| {
            let raw = Arc::into_raw(s) as *const srq::SoftSrq;
            // SAFETY: the trait object was checked above to be a SoftSrq; the pointer comes
            // from Arc::into_raw of that same allocation.
            unsafe { Arc::from_raw(raw) }
        });
        let id = {
            let mut s = self.write();
            if !s.pds.contains(&pd.0) {
                return Err(DevError::Fault);
            }
            s.next_qp += 1;
            s.next_qp
        };
        if caps.service == Service::Ud {
            return ud::SoftUdQp::new(self.me(), pd.0, caps, srq, events).map(|q| q as Arc<dyn Qp>);
        }
        Ok(qp::SoftQp::new(self.me(), id, pd.0, caps, srq, events))
    }

    fn create_srq(&self, pd: Pd, max_wr: u32, max_sge: u32, events: Arc<dyn SrqEvents>) -> Result<Arc<dyn Srq>, DevError> {
        if !self.read().pds.contains(&pd.0) {
            return Err(DevError::Fault);
        }
        if max_wr > self.limits.max_srq_wr || max_sge > self.limits.max_sge {
            return Err(DevError::NoResources);
        }
        Ok(Arc::new(srq::SoftSrq::new(max_wr, max_sge, events)))
    }

    /// The IA's own port: the configured address's (0: one the system picks).
    fn open_ia(&self) -> Result<Box<dyn IaPort>, DevError> {
        listener::SoftIaPort::open(self.address).map(|p| Box::new(p) as Box<dyn IaPort>)
    }

    /// An IA's port when the address has one; else (only the host named, as rdma_cm programs
    /// do) the qualifier is the port, where a service point of a port-sized qualifier listens
    /// too (listener.rs). A larger qualifier needs the IA's port.
    fn service_address(&self, addr: std::net::SocketAddr, conn_qual: u64) -> Option<std::net::SocketAddr> {
        if addr.port() != 0 {
            return Some(addr);
        }
        let port = u16::try_from(conn_qual).ok().filter(|p| *p != 0)?;
        // set_port, not a new address from the IP: a link-local peer's scope id stays.
        let mut at = addr;
        at.set_port(port);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::SoftDevice;
    use crate::device::Device;
    use std::net::{SocketAddr, SocketAddrV6};

    /// A host-only address (port 0) keeps what names the host besides its IP: a link-local
    /// peer's scope id (its interface), and the flow label.
    #[test]
    fn a_host_only_address_keeps_its_scope() {
        let dev = SoftDevice::new("127.0.0.1 0").expect("device");
        let ip = "fe80::1".parse().expect("ip");
        let host = SocketAddr::V6(SocketAddrV6::new(ip, 0, 7, 3));
        assert_eq!(dev.service_address(host, 0x1234), Some(SocketAddr::V6(SocketAddrV6::new(ip, 0x1234, 7, 3))));
        let named = SocketAddr::V6(SocketAddrV6::new(ip, 4791, 0, 3));
        assert_eq!(dev.service_address(named, 1 << 40), Some(named));
        assert_eq!(dev.service_address(host, 1 << 40), None);
    }
}
