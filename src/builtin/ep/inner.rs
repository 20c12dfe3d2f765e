//! What the rest of the built-in layer may do with an EP's state ([`EpInner`], whose fields
//! are private to the `ep` module): read it, move it from one connection state to the next,
//! and account for the requests it holds. Each change keeps these true:
//! - `sendq` holds the requests posted to the current connection and not completed (see
//!   [`SendQueue`]); `recvs` the receives, at most `max_recv_dtos`; a request's slot id is its
//!   work request's id at the device.
//! - `unposted` names receives posted before a QP existed, in order; they go to the next QP.
//! - `breaking` is set only while a connection is being ended by us (a dead key, a hard
//!   watermark): its end is then reported as BROKEN.
//! - `remote_*` describe the current or last connection; `active` says which side made it.

use std::net::SocketAddr;
use std::sync::Arc;

use super::sendq::SendQueue;
use super::{check_watermarks, Crossing, EpInner, UdState};
use crate::abi::*;
use crate::builtin::evd::Evd;
use crate::builtin::events::PendingSend;
use crate::builtin::iov::PostedRecv;
use crate::builtin::pz::Pz;
use crate::builtin::srq::Srq;
use crate::device::Qp;
use crate::util::sockaddr;

/// A send-queue request refused because the queue is full (`max_request_dtos`).
pub struct Full;

impl EpInner {
    pub fn state(&self) -> DAT_EP_STATE {
        self.state
    }

    pub fn attr(&self) -> &DAT_EP_ATTR {
        &self.attr
    }

    pub fn is_ud(&self) -> bool {
        super::is_ud(&self.attr)
    }

    /// The QP of the current (or last) connection, if one was made.
    pub fn qp(&self) -> Option<&Arc<dyn Qp>> {
        self.qp.as_ref()
    }

    pub fn pz(&self) -> Option<&Arc<Pz>> {
        self.pz.as_ref()
    }

    pub fn srq(&self) -> Option<&Arc<Srq>> {
        self.srq.as_ref()
    }

    pub fn recv_evd(&self) -> Option<&Arc<Evd>> {
        self.recv_evd.as_ref()
    }

    pub fn request_evd(&self) -> Option<&Arc<Evd>> {
        self.request_evd.as_ref()
    }

    pub fn connect_evd(&self) -> Option<&Arc<Evd>> {
        self.connect_evd.as_ref()
    }

    /// The peer of the current or last connection and the qualifier it was made to, when this
    /// side made it (`dat_ep_connect`): what `dat_ep_dup_connect` connects to again.
    pub fn connected_to(&self) -> Option<(SocketAddr, DAT_CONN_QUAL)> {
        if self.state != DAT_EP_STATE_CONNECTED || !self.active {
            return None;
        }
        // SAFETY: the EP's own copy of its peer's address, a sockaddr_storage.
        let addr = unsafe { sockaddr::from_c(&*self.remote_address as *const libc::sockaddr_storage as *const libc::sockaddr) };
        addr.map(|a| (a, self.remote_port))
    }

    /// The peer a UD EP resolved last (what `dat_ep_query` reports).
    pub fn set_remote(&mut self, addr: SocketAddr, conn_qual: DAT_CONN_QUAL) {
        *self.remote_address = sockaddr::to_c(addr);
        self.remote_port = conn_qual;
    }

    /// An active connection to `addr`, qualifier `conn_qual`, begins.
    pub fn begin_connect(&mut self, addr: SocketAddr, conn_qual: DAT_CONN_QUAL) {
        self.state = DAT_EP_STATE_ACTIVE_CONNECTION_PENDING;
        self.breaking = false;
        self.set_remote(addr, conn_qual);
        self.active = true;
    }

    /// The device refused to start the connection `begin_connect` began.
    pub fn connect_refused(&mut self) {
        self.state = DAT_EP_STATE_UNCONNECTED;
    }

    /// The EP accepts a request from `remote`.
    pub fn begin_accept(&mut self, remote: SocketAddr) {
        self.set_remote(remote, DAT_CONN_QUAL::from(remote.port()));
        self.active = false;
        self.state = DAT_EP_STATE_COMPLETION_PENDING;
        self.breaking = false;
    }

    /// The device refused the accept `begin_accept` began: the connection is over.
    pub fn accept_refused(&mut self) {
        self.state = DAT_EP_STATE_DISCONNECTED;
    }

    /// The state an RSP reserves the EP in, if it may.
    pub fn reserved_state(&self) -> Result<DAT_EP_STATE, DAT_RETURN> {
        match self.state {
            DAT_EP_STATE_UNCONNECTED => Ok(DAT_EP_STATE_RESERVED),
            DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => Ok(DAT_EP_STATE_UNCONFIGURED_RESERVED),
            s => Err(dat_error(DAT_INVALID_STATE, super::ep_state_subtype(s))),
        }
    }

    /// An RSP reserved the EP, in the state [`EpInner::reserved_state`] said.
    pub fn reserve(&mut self, reserved: DAT_EP_STATE) {
        self.state = reserved;
    }

    /// The RSP that reserved the EP goes: an EP still reserved is free again.
    pub fn unreserve(&mut self) {
        self.state = match self.state {
            DAT_EP_STATE_RESERVED => DAT_EP_STATE_UNCONNECTED,
            DAT_EP_STATE_UNCONFIGURED_RESERVED => DAT_EP_STATE_UNCONFIGURED_UNCONNECTED,
            s => s,
        };
    }

    /// The consumer ends the connection: the QP to tell, if there is one. The caller checked
    /// that the state allows it.
    pub fn begin_disconnect(&mut self) -> Option<Arc<dyn Qp>> {
        self.state = DAT_EP_STATE_DISCONNECT_PENDING;
        self.qp.clone()
    }

    /// We end a connection (a dead key, a hard watermark): its end is reported as BROKEN. The
    /// QP to disconnect, when the EP is connected (an RC EP: a datagram EP breaks nothing).
    pub fn break_connection(&mut self) -> Option<Arc<dyn Qp>> {
        if self.state != DAT_EP_STATE_CONNECTED || self.is_ud() {
            return None;
        }
        let qp = self.qp.clone()?;
        self.state = DAT_EP_STATE_DISCONNECT_PENDING;
        self.breaking = true;
        Some(qp)
    }

    /// The connection is established: false when it ended meanwhile (its event is not news).
    /// Records the addresses the QP reports; the hard watermark applies from now on.
    pub fn established(&mut self) -> Option<Crossing> {
        if self.state == DAT_EP_STATE_DISCONNECT_PENDING || self.state == DAT_EP_STATE_DISCONNECTED {
            return None;
        }
        self.state = DAT_EP_STATE_CONNECTED;
        if let Some(remote) = self.qp.as_ref().and_then(|q| q.remote()) {
            *self.remote_address = sockaddr::to_c(remote);
            if self.remote_port == 0 {
                self.remote_port = DAT_CONN_QUAL::from(remote.port());
            }
        }
        self.local_port = self.qp.as_ref().map_or(0, |q| DAT_CONN_QUAL::from(q.local_port()));
        let held = self.recvs.len();
        Some(check_watermarks(self, held))
    }

    /// The connection ended with `number`: the number to report (BROKEN for an end we caused),
    /// or `None` when it had already ended (one connection ends once).
    pub fn ended(&mut self, number: DAT_EVENT_NUMBER) -> Option<DAT_EVENT_NUMBER> {
        let number = if std::mem::take(&mut self.breaking) && number == DAT_CONNECTION_EVENT_DISCONNECTED {
            DAT_CONNECTION_EVENT_BROKEN
        } else {
            number
        };
        if self.state == DAT_EP_STATE_DISCONNECTED {
            return None;
        }
        self.state = DAT_EP_STATE_DISCONNECTED;
        Some(number)
    }

    /// A UD EP resolved its first peer: it is connected from now on.
    pub fn ud_connected(&mut self) {
        if self.state == DAT_EP_STATE_UNCONNECTED {
            self.state = DAT_EP_STATE_CONNECTED;
        }
    }

    /// The UD EP's address handles and connection records.
    pub fn ud(&mut self) -> &mut UdState {
        &mut self.ud
    }

    // The request queues.

    /// The current (or last) connection's send queue.
    pub fn send_queue(&self) -> Option<&Arc<SendQueue>> {
        self.sendq.as_ref()
    }

    /// Takes a send-queue slot for `s`: its id is the work request's id.
    #[inline]
    pub fn add_send(&self, s: PendingSend) -> Result<u64, Full> {
        self.sendq.as_ref().and_then(|q| q.add_send(self, s)).ok_or(Full)
    }

    /// Takes a send-queue slot for a memory window bind, which is ordered with the sends but
    /// is not one of the consumer's `max_request_dtos`, on the queue of connection `serial`.
    pub fn add_bind(&self, serial: u64, s: PendingSend) -> Result<u64, Full> {
        self.sendq.as_ref().filter(|q| q.serial() == serial).and_then(|q| q.add_bind(self, s)).ok_or(Full)
    }

    /// The send-queue request `wr_id` of connection `serial` never reached the device: its
    /// slot is given back (if that connection's queue is still the EP's; one made since
    /// holds other requests under the same ids).
    pub fn take_send(&self, serial: u64, wr_id: u64) -> Option<PendingSend> {
        self.sendq.as_ref().filter(|q| q.serial() == serial)?.take(wr_id)
    }

    /// Whether no send-queue request is outstanding.
    pub fn sends_idle(&self) -> bool {
        self.sendq.as_ref().is_none_or(|q| q.idle())
    }

    /// Receives posted to the EP and not completed (what it holds, for the watermarks).
    pub fn recvs_held(&self) -> usize {
        self.recvs.len()
    }

    pub fn recvs_full(&self) -> bool {
        self.recvs.len() >= self.attr.max_recv_dtos.max(0) as usize
    }

    /// Takes a receive slot for `r` (the caller checked the room): its id is the work
    /// request's id. Without a QP yet, the receive waits for the next one, in order.
    pub fn add_recv(&mut self, r: PostedRecv) -> u64 {
        let wr_id = self.recvs.insert(r);
        if self.qp.is_none() {
            self.unposted.push_back(wr_id);
        }
        wr_id
    }

    /// The receive `wr_id` completed (or the device refused it).
    pub fn take_recv(&mut self, wr_id: u64) -> Option<PostedRecv> {
        self.recvs.remove(wr_id)
    }

    /// Hands the receives posted before there was a QP to `qp`, in order. One the QP refuses
    /// because its LMR was freed meanwhile (`refused` says so) completes as refused, its event
    /// kept for [`EpInner::take_refused`]; another error stops here.
    pub fn hand_unposted(
        &mut self,
        mut post: impl FnMut(u64, &PostedRecv) -> Result<(), bool>,
        refused_event: impl Fn(DAT_DTO_COOKIE) -> DAT_EVENT,
    ) -> Result<(), ()> {
        while let Some(wr_id) = self.unposted.pop_front() {
            let Some(r) = self.recvs.get_mut(wr_id) else { continue };
            match post(wr_id, r) {
                Ok(()) => r.handed(),
                Err(true) => {
                    let cookie = r.cookie();
                    self.recvs.remove(wr_id);
                    self.refused.push(refused_event(cookie));
                }
                Err(false) => return Err(()),
            }
        }
        Ok(())
    }

    /// The events of receives a new QP refused, and the EVD to post them on.
    pub fn take_refused(&mut self) -> Option<(Option<Arc<Evd>>, Vec<DAT_EVENT>)> {
        if self.refused.is_empty() {
            return None;
        }
        Some((self.recv_evd.clone(), std::mem::take(&mut self.refused)))
    }

    /// The EP's QP from now on (the one of a failed connect before it is given up), and its
    /// send queue.
    pub fn set_qp(&mut self, ia: &crate::builtin::ia::Ia, qp: &Arc<dyn Qp>, sendq: Arc<SendQueue>) {
        if let Some(old) = self.qp.take() {
            super::forget_qp(self, &old);
        }
        super::watch_qp(ia, self, qp);
        self.qp = Some(qp.clone());
        self.sendq = Some(sendq);
    }
}
