//! Address resolution of a UD QP over the soft device's TCP listeners, both sides.
//!
//! Active (`resolve`): a thread per call connects to the peer's service point, sends UD_HELLO
//! (our QP number and Q_Key, and the private data), and reads the answer within the connect's
//! timeout (RESOLVE_TIMEOUT without one): UD_ACCEPT names the peer's QP and Q_Key, REJECT
//! carries the peer's private data. Every call reports exactly one event while the QP is open.
//!
//! Passive (`UdPending`): the listener hands the request on with the requester's address as
//! the kernel gave it (the TCP peer): a requester claims only its QP number (a UDP port on
//! that address) and its Q_Key. Accepting answers UD_ACCEPT and reports the requester as
//! resolved; either way the connection then closes.

use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{SoftAh, SoftUdQp};
use crate::device::soft::listener::connect_service;
use crate::device::soft::wire::{op, read_message, timed_out, write_message, Hello, UdHello, HELLO_MAX, UD_HELLO_MAX};
use crate::device::{CmEvent, DevError, PendingConnection, Qp, UdPeer};
use crate::util::sync::MutexExt;

/// How long a resolution without a timeout of its own may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the passive side waits to write its answer.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// The peer a resolution names: QP number `qpn` and Q_Key `qkey` on `addr`'s host.
fn peer(addr: SocketAddr, qpn: u32, qkey: u32) -> UdPeer {
    let mut dest = addr;
    dest.set_port(qpn as u16);
    let mut ia = addr;
    ia.set_port(0);
    UdPeer { ah: Arc::new(SoftAh { dest, qkey }), qpn, addr: ia }
}

/// Starts resolving the service point `addr` for `qp`; the outcome is reported as one event.
pub(super) fn resolve(qp: &SoftUdQp, addr: SocketAddr, private_data: &[u8], timeout: Option<Duration>) -> Result<(), DevError> {
    let hello = UdHello { qpn: qp.qpn(), qkey: qp.qkey(), private_data: private_data.to_vec() };
    // The thread keeps no QP alive: a QP destroyed meanwhile hears nothing.
    let weak = qp.this.clone();
    // The request comes from the IA's address: the passive side takes the requester's address
    // from the kernel and sends its datagrams there.
    let local = qp.local_ip();
    std::thread::Builder::new()
        .name("dat2-soft-connect".into())
        .stack_size(256 << 10)
        .spawn(move || {
            let ev = ask(local, addr, &hello, timeout.unwrap_or(RESOLVE_TIMEOUT)).unwrap_or_else(|e| e);
            if let Some(qp) = weak.upgrade() {
                qp.report(ev);
            }
        })
        .map(|_| ())
        .map_err(|_| DevError::NoResources)
}

/// One resolution: Ok(UdResolved), or the failure's event.
fn ask(local: IpAddr, addr: SocketAddr, hello: &UdHello, limit: Duration) -> Result<CmEvent, CmEvent> {
    let started = Instant::now();
    let left = || limit.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
    let stream = connect_service(local, addr, Some(limit))?;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(left()));
    let _ = stream.set_write_timeout(Some(left()));
    write_message(&stream, op::UD_HELLO, &hello.encode())
        .map_err(|e| if timed_out(&e) { CmEvent::TimedOut } else { CmEvent::Unreachable })?;
    let (hdr, body) = read_message(&stream, UD_HELLO_MAX.max(HELLO_MAX)).map_err(|e| {
        if timed_out(&e) {
            CmEvent::TimedOut
        } else {
            CmEvent::NonPeerRejected
        }
    })?;
    let _ = stream.shutdown(Shutdown::Both);
    match hdr.op {
        op::UD_ACCEPT => {
            let answer = UdHello::decode(&body).ok_or(CmEvent::NonPeerRejected)?;
            // The peer is on the host we connected to, whatever it says.
            Ok(CmEvent::UdResolved { private_data: answer.private_data, peer: peer(addr, answer.qpn, answer.qkey), passive: false })
        }
        op::REJECT => Err(CmEvent::PeerRejected { private_data: Hello::decode(&body).ok_or(CmEvent::NonPeerRejected)?.private_data }),
        _ => Err(CmEvent::NonPeerRejected),
    }
}

/// A UD resolution request received by a listener, waiting for accept or reject.
pub struct UdPending {
    stream: Mutex<Option<TcpStream>>,
    hello: UdHello,
    /// The requester's address, from the kernel.
    remote: SocketAddr,
}

impl UdPending {
    pub fn new(stream: TcpStream, hello: UdHello, remote: SocketAddr) -> UdPending {
        UdPending { stream: Mutex::new(Some(stream)), hello, remote }
    }
}

impl PendingConnection for UdPending {
    fn private_data(&self) -> &[u8] {
        &self.hello.private_data
    }

    fn datagram(&self) -> bool {
        true
    }

    fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn accept(&self, qp: &Arc<dyn Qp>, private_data: &[u8]) -> Result<(), DevError> {
        let ud = qp.as_any().downcast_ref::<SoftUdQp>().ok_or(DevError::NotSupported)?;
        if ud.is_closed() {
            return Err(DevError::State);
        }
        let stream = self.stream.locked().take().ok_or(DevError::State)?;
        let answer = UdHello { qpn: ud.qpn(), qkey: ud.qkey(), private_data: private_data.to_vec() };
        let _ = stream.set_write_timeout(Some(ANSWER_WAIT));
        let sent = write_message(&stream, op::UD_ACCEPT, &answer.encode()).is_ok();
        let _ = stream.shutdown(Shutdown::Both);
        // A requester gone before our answer is not resolved: the consumer hears of an error.
        ud.report(if sent {
            CmEvent::UdResolved {
                private_data: self.hello.private_data.clone(),
                peer: peer(self.remote, self.hello.qpn, self.hello.qkey),
                passive: true,
            }
        } else {
            CmEvent::Broken
        });
        Ok(())
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(stream) = self.stream.locked().take() {
            // As for RC: only the private data.
            let answer = Hello { private_data: private_data.to_vec(), ..Hello::default() };
            let _ = stream.set_write_timeout(Some(ANSWER_WAIT));
            let _ = write_message(&stream, op::REJECT, &answer.encode());
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
