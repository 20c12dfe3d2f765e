//! The soft device's connection manager, passive side: a TCP listener per service point.
//! Each accepted connection sends its request (HELLO) and waits for accept or reject.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::qp::{read_message, Pending};
use super::wire::{op, Hello};
use crate::device::{DevError, ListenEvents, Listener};

pub struct SoftListener {
    socket: TcpListener,
    port: u16,
    closed: Arc<AtomicBool>,
}

impl SoftListener {
    pub fn bind(addr: SocketAddr, events: Arc<dyn ListenEvents>) -> Result<SoftListener, DevError> {
        let socket = TcpListener::bind(addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => DevError::InUse,
            _ => DevError::NoResources,
        })?;
        let port = socket.local_addr().map_err(|_| DevError::NoResources)?.port();
        let accepting = socket.try_clone().map_err(|_| DevError::NoResources)?;
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::Builder::new()
            .name("dat2-soft-listen".into())
            .stack_size(256 << 10)
            .spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    let Ok((stream, peer)) = accepting.accept() else { break };
                    if flag.load(Ordering::SeqCst) {
                        break;
                    }
                    let events = events.clone();
                    let _ = std::thread::Builder::new().name("dat2-soft-req".into()).stack_size(256 << 10).spawn(move || {
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                        let _ = stream.set_nodelay(true);
                        let Ok((hdr, body)) = read_message(&stream, 1 << 16) else { return };
                        if hdr.op != op::HELLO {
                            return;
                        }
                        if let Some(hello) = Hello::decode(&body) {
                            events.request(Arc::new(Pending::new(stream, hello, peer)));
                        }
                    });
                }
            })
            .map_err(|_| DevError::NoResources)?;
        Ok(SoftListener { socket, port, closed })
    }
}

impl Listener for SoftListener {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for SoftListener {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // SAFETY: shutting down our own listening socket wakes the thread blocked in accept.
        unsafe { libc::shutdown(self.socket.as_raw_fd(), libc::SHUT_RDWR) };
    }
}
