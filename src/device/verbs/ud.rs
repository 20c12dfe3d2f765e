//! The unreliable datagram (UD) service of the verbs device: UD QPs, their address handles and
//! sends. Resolving a peer through rdma_cm is udcm.rs.
//!
//! A UD QP is created like an RC one (qp.rs) but with `IBV_QPT_UD`, and goes to RTS at once
//! with the Q_Key of rdma_cm's UDP port space (`RDMA_UDP_QKEY`), which is also the Q_Key the
//! peers' SIDR exchange names: every QP of both sides uses that one Q_Key.
//!
//! An address handle ([`VerbsAh`]) is an `ibv_ah` plus the peer QP's number and Q_Key; a send
//! carries all three. On RoCE every packet needs a GRH (the IP header is made from it), so an
//! address vector without one is given one here: the peer's GID as the destination, the entry
//! of our GID table that holds our address (RoCE v2 preferred) as the source. On InfiniBand a
//! peer on our subnet is reached by its LID alone.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::device::VerbsDevice;
use super::errno::{dev_error, last_error};
use super::qp::VerbsQp;
use super::{probe, sys, Ptr};
use crate::dbg_log;
use crate::device::{sges_len, AddressHandle, DevError, SendWr, Service, WcOp, WrOp, GRH_LEN};
use crate::log::DbgType;
use crate::util::idmap::IdMap;
use crate::util::sync::MutexExt;

/// The hop limit of a GRH we make (the IPv4 TTL on RoCE v2): the usual IP default.
const HOP_LIMIT: u8 = 64;

/// What a UD QP holds besides an RC QP's state (in `qp::Inner`).
#[derive(Default)]
pub(super) struct UdState {
    /// Connects under way: cm id (by address) -> the consumer's private data. Whoever takes an
    /// id out of here owns it: destroys it and reports the connect's outcome (udcm.rs).
    pub pending: IdMap<usize, Vec<u8>>,
}

/// What UD needs to know of the device's port.
pub(super) struct Port {
    /// RoCE (Ethernet link layer): every address vector carries a GRH.
    pub ethernet: bool,
    pub lid: u16,
    gid_tbl_len: u32,
    /// Our GIDs looked up so far, with the table index chosen for each.
    found: Mutex<Vec<([u8; 16], u8)>>,
}

impl Port {
    pub(super) fn new(attr: &sys::ibv_port_attr) -> Port {
        Port {
            ethernet: u32::from(attr.link_layer) == sys::IBV_LINK_LAYER_ETHERNET,
            lid: attr.lid,
            gid_tbl_len: attr.gid_tbl_len.max(0) as u32,
            found: Mutex::new(Vec::new()),
        }
    }
}

/// The 16 bytes of a GID.
pub(super) fn gid_bytes(g: &sys::ibv_gid) -> [u8; 16] {
    // SAFETY: both members of the union are plain data of the same 16 bytes.
    unsafe { g.raw }
}

/// The GID RoCE v2 gives an IP address (IPv4 mapped into IPv6).
pub(super) fn ip_gid(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The GID the passive side sends a UD requester's datagrams to: on RoCE the GID of the IP
/// address the request came from as rdma_cm reports it (from the header the requester's kernel
/// writes), whatever the request's trailer says. None on InfiniBand, where nothing but the
/// requester's own trailer names its GID and LID (udcm.rs): the request is refused.
pub(super) fn requester_gid(ethernet: bool, remote: IpAddr) -> Option<[u8; 16]> {
    ethernet.then(|| ip_gid(remote))
}

/// The index of `gid` in our port's GID table: on RoCE the entry of type RoCE v2 when the
/// address has one of each type. Looked up once per GID (a table has up to 1024 entries).
/// A zero `gid` means our own address's.
pub(super) fn local_gid_index(dev: &VerbsDevice, gid: [u8; 16]) -> Option<u8> {
    let gid = if gid == [0; 16] { ip_gid(dev.address.ip()) } else { gid };
    if let Some(&(_, i)) = dev.ud.found.locked().iter().find(|(g, _)| *g == gid) {
        return Some(i);
    }
    let mut hits = Vec::new();
    for i in 0..dev.ud.gid_tbl_len.min(1024) {
        let mut g = sys::ibv_gid::default();
        // SAFETY: an open context, our port, an index below the table's length and a local GID.
        if unsafe { (dev.api.ibv.query_gid)(dev.ctx.0, dev.port, i as i32, &mut g) } == 0 && gid_bytes(&g) == gid {
            hits.push(i as u8);
        }
    }
    let v2 = hits.iter().copied().find(|&i| probe::gid_type(dev.name_str(), dev.port, i).is_some_and(|t| t.contains("v2")));
    let index = v2.or(hits.first().copied())?;
    dev.ud.found.locked().push((gid, index));
    Some(index)
}

/// The address vector to a peer: `given` is what rdma_cm computed (the active side's), else
/// one is made from the peer's GID and LID (the passive side's). `sgid` is our GID on the
/// route (zero: our address's). None when RoCE needs a GRH and our GID is not in the table.
pub(super) fn address_vector(
    dev: &VerbsDevice,
    given: Option<sys::ibv_ah_attr>,
    sgid: [u8; 16],
    dgid: [u8; 16],
    dlid: u16,
) -> Option<sys::ibv_ah_attr> {
    let mut a = given.unwrap_or_default();
    a.port_num = dev.port;
    let grh = |a: &mut sys::ibv_ah_attr, index: u8| {
        a.is_global = 1;
        a.grh.dgid = sys::ibv_gid { raw: dgid };
        a.grh.sgid_index = index;
        a.grh.hop_limit = HOP_LIMIT;
    };
    if dev.ud.ethernet {
        if a.is_global == 0 || gid_bytes(&a.grh.dgid) == [0; 16] {
            grh(&mut a, local_gid_index(dev, sgid)?);
        }
        if a.grh.hop_limit == 0 {
            a.grh.hop_limit = HOP_LIMIT;
        }
    } else if given.is_none() {
        a.dlid = dlid;
        // Another subnet (its prefix is the GID's first half): routed by GRH.
        if dgid[..8] != sgid[..8] {
            grh(&mut a, local_gid_index(dev, sgid).unwrap_or(0));
        }
    }
    Some(a)
}

/// A UD address handle: an `ibv_ah` in the PD of the QP that resolved the peer, and the peer
/// QP's number and Q_Key. Dropping it destroys the `ibv_ah`; it holds the device, and the
/// built-in layer drops an EP's handles (and a send's, which its request keeps until it completes) before its PD.
pub struct VerbsAh {
    dev: Arc<VerbsDevice>,
    ah: Ptr<sys::ibv_ah>,
    pub(super) pd: Ptr<sys::ibv_pd>,
    pub(super) qpn: u32,
    pub(super) qkey: u32,
    /// The address vector it was made from.
    pub(super) attr: sys::ibv_ah_attr,
}

// SAFETY: an ibv_ah may be used from any thread; the rest is plain data.
unsafe impl Send for VerbsAh {}
// SAFETY: as above.
unsafe impl Sync for VerbsAh {}

impl VerbsAh {
    pub(super) fn create(
        dev: &Arc<VerbsDevice>,
        pd: Ptr<sys::ibv_pd>,
        attr: sys::ibv_ah_attr,
        qpn: u32,
        qkey: u32,
    ) -> Result<Arc<VerbsAh>, DevError> {
        let mut a = attr;
        // SAFETY: a live PD of this device and an initialised address vector.
        let ah = unsafe { (dev.api.ibv.create_ah)(pd.0, &mut a) };
        if ah.is_null() {
            let e = last_error();
            dbg_log!(DbgType::ERROR, "verbs {}: ibv_create_ah: {}", dev.name_str(), std::io::Error::last_os_error());
            return Err(e);
        }
        Ok(Arc::new(VerbsAh { dev: dev.clone(), ah: Ptr(ah), pd, qpn, qkey, attr }))
    }

    /// Whether packets to the peer carry a GRH.
    pub(super) fn is_global(&self) -> bool {
        self.attr.is_global != 0
    }
}

impl Drop for VerbsAh {
    fn drop(&mut self) {
        // SAFETY: our address handle, destroyed once; no send uses it any more (each holds
        // the handle until it completes).
        let rc = unsafe { (self.dev.api.ibv.destroy_ah)(self.ah.0) };
        if rc != 0 {
            dbg_log!(DbgType::ERROR, "verbs {}: ibv_destroy_ah: {}", self.dev.name_str(), std::io::Error::from_raw_os_error(rc));
        }
    }
}

impl std::fmt::Debug for VerbsAh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerbsAh {{ qpn: {:#x}, qkey: {:#x}, dlid: {}, grh: ", self.qpn, self.qkey, self.attr.dlid)?;
        if self.is_global() {
            let dgid = std::net::Ipv6Addr::from(gid_bytes(&self.attr.grh.dgid));
            write!(f, "to {dgid} from GID index {} }}", self.attr.grh.sgid_index)
        } else {
            write!(f, "none }}")
        }
    }
}

impl AddressHandle for VerbsAh {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Moves a new UD QP to RTS: INIT with our port and the UDP port space's Q_Key, RTR, RTS.
pub(super) fn ready(qp: &VerbsQp) -> Result<(), DevError> {
    let steps = [
        (sys::IBV_QPS_INIT, sys::IBV_QP_STATE | sys::IBV_QP_PKEY_INDEX | sys::IBV_QP_PORT | sys::IBV_QP_QKEY),
        (sys::IBV_QPS_RTR, sys::IBV_QP_STATE),
        (sys::IBV_QPS_RTS, sys::IBV_QP_STATE | sys::IBV_QP_SQ_PSN),
    ];
    for (state, mask) in steps {
        let mut a =
            sys::ibv_qp_attr { qp_state: state, pkey_index: 0, port_num: qp.dev.port, qkey: sys::RDMA_UDP_QKEY, ..Default::default() };
        // SAFETY: our QP and an initialised attribute struct.
        let rc = unsafe { (qp.dev.api.ibv.modify_qp)(qp.qp.0, &mut a, mask as i32) };
        if rc != 0 {
            dbg_log!(DbgType::ERROR, "verbs UD QP {}: to state {state}: {}", qp.qp_num, std::io::Error::from_raw_os_error(rc));
            return Err(dev_error(rc));
        }
    }
    Ok(())
}

/// A datagram arrived (for the debug log): its payload follows the GRH area, which the
/// completed length counts.
pub(super) fn received(qp: &VerbsQp, wc: &sys::ibv_wc) {
    let grh = if wc.wc_flags & sys::IBV_WC_GRH != 0 { "with" } else { "without" };
    dbg_log!(
        DbgType::PROVIDER_API,
        "verbs UD QP {}: {} bytes from QP {:#x} ({grh} a GRH)",
        qp.qp_num,
        wc.byte_len.saturating_sub(GRH_LEN),
        wc.src_qp
    );
}

/// The PD a QP was created in.
pub(super) fn qp_pd(qp: &VerbsQp) -> Ptr<sys::ibv_pd> {
    // SAFETY: our live QP; its PD is set at creation and never changes.
    Ptr(unsafe { (*qp.qp.0).pd })
}

/// A datagram to the peer `wr.ah` names (an address handle of this device, made in the QP's
/// PD). The request holds the handle until it completes.
pub(super) fn post_send(qp: &VerbsQp, wr: &SendWr) -> Result<(), DevError> {
    let Some(held) = wr.ah.clone() else { return Err(DevError::NotSupported) };
    let ah = held.as_any().downcast_ref::<VerbsAh>().ok_or(DevError::NotSupported)?;
    if qp.caps.service != Service::Ud || !Arc::ptr_eq(&ah.dev, &qp.dev) || ah.pd.0 != qp_pd(qp).0 {
        return Err(DevError::NotSupported);
    }
    let (opcode, imm) = match wr.op {
        WrOp::Send => (sys::IBV_WR_SEND, None),
        WrOp::SendImm(imm) => (sys::IBV_WR_SEND_WITH_IMM, Some(imm)),
        _ => return Err(DevError::NotSupported),
    };
    // Not above the QP's datagram size (some devices, rxe among them, would send it).
    let len = sges_len(&wr.sges);
    if len > u64::from(qp.caps.max_message.min(crate::device::Device::limits(qp.dev.as_ref()).max_ud_msg)) {
        return Err(DevError::NoResources);
    }
    let flags = if wr.solicited { sys::IBV_SEND_SOLICITED } else { 0 };
    let (ptr, qpn, qkey) = (ah.ah, ah.qpn, ah.qkey);
    qp.post(wr.wr_id, Some(WcOp::Send), &wr.sges, flags, Some(held.clone()), |w| {
        w.opcode = opcode;
        if let Some(imm) = imm {
            w.__bindgen_anon_1.imm_data = imm;
        }
        w.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 { ah: ptr.0, remote_qpn: qpn, remote_qkey: qkey };
    })
}

// ---------------------------------------------------------------------------------------------
// The private data of a UD connect request.
//
// A SIDR request does not carry the requester's QP number, and rdma_cm gives the passive side
// no address vector for it: the requester puts both its QP number and its address (GID and
// LID) in a trailer of the request's private data, which the passive side needs to answer.

/// A UD connect request's private data on IB and RoCE: a SIDR REQ's 216 bytes less rdma_cm's
/// 40-byte header, padded with zeros to this size.
pub(super) const PDATA_UD_REQ: usize = 176;
/// A SIDR REP's private data (an accept's or a reject's), padded to this size.
pub(super) const PDATA_UD_REP: usize = 136;
/// The trailer of a UD request: GID 16, LID 2, QP number 4, length 1, check 1, magic 2.
const UD_TRAILER: usize = 26;
const UD_MAGIC: [u8; 2] = *b"U2";

/// Who sends a UD connect request: where its datagrams come from and answers go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requester {
    pub qpn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

fn check(payload: &[u8], who: &[u8]) -> u8 {
    payload.iter().chain(who).fold(0x5a ^ payload.len() as u8, |c, b| c.rotate_left(1) ^ b)
}

fn who_bytes(r: &Requester) -> Vec<u8> {
    let mut v = r.gid.to_vec();
    v.extend_from_slice(&r.lid.to_be_bytes());
    v.extend_from_slice(&r.qpn.to_be_bytes());
    v
}

/// The request's private data: the consumer's `payload`, zeros, and the requester's trailer.
/// None when the payload does not fit.
pub(super) fn frame_request(payload: &[u8], me: &Requester) -> Option<Vec<u8>> {
    let room = PDATA_UD_REQ - UD_TRAILER;
    if payload.len() > room {
        return None;
    }
    let mut v = payload.to_vec();
    v.resize(room, 0);
    let who = who_bytes(me);
    v.extend_from_slice(&who);
    v.extend_from_slice(&[payload.len() as u8, check(payload, &who)]);
    v.extend_from_slice(&UD_MAGIC);
    Some(v)
}

/// The consumer's private data and the requester from a request's private data; None when it
/// has no valid trailer (not a dat2 requester: nothing says where to answer).
pub(super) fn unframe_request(data: &[u8]) -> Option<(Vec<u8>, Requester)> {
    if data.len() < PDATA_UD_REQ || data[PDATA_UD_REQ - 2..PDATA_UD_REQ] != UD_MAGIC {
        return None;
    }
    let room = PDATA_UD_REQ - UD_TRAILER;
    let (len, sum) = (usize::from(data[PDATA_UD_REQ - 4]), data[PDATA_UD_REQ - 3]);
    let who = &data[room..room + 22];
    if len > room || data[len..room].iter().any(|&b| b != 0) || check(&data[..len], who) != sum {
        return None;
    }
    let mut gid = [0; 16];
    gid.copy_from_slice(&who[..16]);
    let lid = u16::from_be_bytes([who[16], who[17]]);
    let qpn = u32::from_be_bytes([who[18], who[19], who[20], who[21]]);
    Some((data[..len].to_vec(), Requester { qpn, lid, gid }))
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::{frame_request, ip_gid, requester_gid, unframe_request, Requester, PDATA_UD_REQ, UD_TRAILER};

    #[test]
    fn a_request_carries_the_requester() {
        let me = Requester { qpn: 0x12_3456, lid: 0x1f, gid: ip_gid("10.0.2.15".parse().unwrap()) };
        for n in [0usize, 4, 52, PDATA_UD_REQ - UD_TRAILER] {
            let p: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(13) | 1).collect();
            let f = frame_request(&p, &me).expect("fits");
            assert_eq!(f.len(), PDATA_UD_REQ);
            assert_eq!(&f[..n], &p[..], "the payload comes first, where any reader looks");
            assert_eq!(unframe_request(&f), Some((p, me)));
        }
        assert_eq!(frame_request(&[1; PDATA_UD_REQ - UD_TRAILER + 1], &me), None);
        assert_eq!(&ip_gid("10.0.2.15".parse().unwrap())[10..], &[0xff, 0xff, 10, 0, 2, 15]);
    }

    #[test]
    fn a_requester_is_reached_where_its_request_came_from_never_where_it_says() {
        let from: IpAddr = "10.0.2.15".parse().unwrap();
        // Whatever a trailer names (a third party's GID and LID), RoCE answers the address the
        // request came from, and InfiniBand, with nothing else to go by, refuses.
        let claim = Requester { qpn: 7, lid: 0x2a, gid: ip_gid("10.0.2.99".parse().unwrap()) };
        let f = frame_request(b"pd", &claim).unwrap();
        let (_, who) = unframe_request(&f).unwrap();
        assert_eq!(who.gid, claim.gid);
        assert_eq!(requester_gid(true, from), Some(ip_gid(from)));
        assert_eq!(requester_gid(false, from), None);
    }

    #[test]
    fn a_request_without_a_valid_trailer_names_nobody() {
        let me = Requester { qpn: 7, lid: 0, gid: [0xfe; 16] };
        let f = frame_request(&[1, 2, 3, 4], &me).unwrap();
        // Any other requester (rdma_cm's udaddy sends nothing) or a damaged trailer.
        assert_eq!(unframe_request(&[0; PDATA_UD_REQ]), None);
        assert_eq!(unframe_request(&f[..PDATA_UD_REQ - 1]), None);
        for at in [0, 3, 150, 160, 171, PDATA_UD_REQ - 4, PDATA_UD_REQ - 3] {
            let mut bad = f.clone();
            bad[at] ^= 0x40;
            assert_eq!(unframe_request(&bad), None, "byte {at} changed");
        }
        // Longer data (a transport that pads further) still holds the trailer at its place.
        let mut long = f.clone();
        long.resize(PDATA_UD_REQ + 20, 0);
        assert_eq!(unframe_request(&long).map(|(p, r)| (p, r.qpn)), Some((vec![1, 2, 3, 4], 7)));
    }
}
