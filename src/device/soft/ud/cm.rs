//! Address resolution of a UD QP over the soft device's TCP listeners, both sides.
//!
//! Active (resolving.rs): connects to the peer's service point, sends UD_HELLO (our QP
//! number, keys and proof token, and the private data), and reads the answer within the
//! connect's timeout (RESOLVE_TIMEOUT without one): UD_ACCEPT names the peer's QP, keys and
//! token, REJECT carries the peer's private data. After an accept the two QPs prove their
//! ports (proof.rs) within that timeout too, and the peer is reported resolved only once its
//! proof came. The engine drives all of it, each stage with its deadline: no thread per
//! call. Every call reports exactly one event while the QP is open.
//!
//! Passive (`UdPending`): the listener hands the request on with the requester's address as
//! the kernel gave it (the TCP peer): a requester claims only its QP number (a UDP port on
//! that address), its keys and its token. Accepting answers UD_ACCEPT, and the QP reports the
//! requester resolved once a proof from that address and port came, `Broken` if none came in
//! time (proof.rs) or the answer did not go out at once (the accept never waits on the
//! requester); either way the connection closes after the answer.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::proof::{Waiter, PROOF_TIMEOUT};
use super::resolving::{peer, qp_address, token};
use super::SoftUdQp;
use crate::device::soft::wire::{answer_now, op, Hello, UdHello};
use crate::device::{CmEvent, DevError, PendingConnection, Qp};
use crate::util::sync::MutexExt;

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
        let answer = UdHello {
            qpn: ud.qpn(),
            qkey: ud.qkey(),
            secret: ud.secret(),
            token: token(),
            conn_qual: 0,
            private_data: private_data.to_vec(),
        };
        // Reported once the requester proved the port it named is its own (proof.rs): until
        // then nothing is sent there, and the consumer has no handle to send with.
        let from = qp_address(self.remote, self.hello.qpn);
        let resolved =
            CmEvent::UdResolved { private_data: self.hello.private_data.clone(), peer: peer(self.remote, &self.hello), passive: true };
        let waiter = Waiter::Acceptor { answer: answer.token, event: Some(resolved) };
        // The answer goes out now or never (as RC's): the consumer's accept does not wait on
        // the requester, so the proof's time runs from here.
        let waiting = ud.expect_proof(from, self.hello.token, Instant::now() + PROOF_TIMEOUT, waiter);
        let sent = waiting && answer_now(&stream, op::UD_ACCEPT, &answer.encode());
        let _ = stream.shutdown(Shutdown::Both);
        if !sent {
            // A requester gone before our answer, or whose socket did not take it at once (or
            // a QP waiting for too many), is not resolved: the consumer hears of an error.
            ud.proofs.locked().forget_acceptor(from, self.hello.token);
            ud.report(CmEvent::Broken);
        }
        Ok(())
    }

    fn reject(&self, private_data: &[u8]) {
        if let Some(stream) = self.stream.locked().take() {
            // As for RC: only the private data.
            let answer = Hello { private_data: private_data.to_vec(), ..Hello::default() };
            let _ = answer_now(&stream, op::REJECT, &answer.encode());
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
