//! The soft device's connection manager, passive side: a TCP listener per service point.
//! Each accepted connection sends its request (HELLO) and waits for accept or reject.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::qp::Pending;
use super::wire::{op, Hdr, Hello, HDR_LEN};
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
                        let mut s = &stream;
                        let mut h = [0u8; HDR_LEN];
                        if std::io::Read::read_exact(&mut s, &mut h).is_err() {
                            return;
                        }
                        let hdr = Hdr::decode(&h);
                        if hdr.op != op::HELLO || hdr.payload > 1 << 16 {
                            return;
                        }
                        let mut body = vec![0u8; hdr.payload as usize];
                        if std::io::Read::read_exact(&mut s, &mut body).is_err() {
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
