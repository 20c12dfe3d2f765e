//! One handshake message each way over a non-blocking stream, as the engine advances an active
//! side's handshake (RC's, qp/opening.rs; a UD resolution's, ud/resolving.rs): what is left
//! of ours is written, then exactly the bytes of the message awaited are read, so that what
//! the peer sends after it stays on the socket. Never waits: a socket with no more for now
//! says so, and the caller's next turn goes on.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use super::wire::Hdr;

/// Why exchanging a message stopped (`Exchange::flush_and_fill`).
pub enum Stop {
    /// The socket has no more for now.
    Wait,
    /// The stage's deadline passed.
    Late,
    /// The peer closed or reset the connection.
    Closed,
    WriteFailed,
    ReadFailed,
}

/// A message going out, how much of it went, and what has come of the one awaited.
#[derive(Default)]
pub struct Exchange {
    out: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
}

impl Exchange {
    /// Starts a stage: `msg` to send, nothing received yet.
    pub fn start(&mut self, msg: Vec<u8>) {
        self.out = msg;
        self.sent = 0;
        self.got.clear();
    }

    /// What has come of the message awaited.
    pub fn got(&self) -> &[u8] {
        &self.got
    }

    /// Writes what is left of our message to `stream`, then reads until `got` holds `want`
    /// bytes. `late`: the stage's deadline has passed (a socket that would block is then
    /// `Late`, not `Wait`).
    pub fn flush_and_fill(&mut self, stream: &TcpStream, want: usize, late: bool) -> Result<(), Stop> {
        let wait = || if late { Stop::Late } else { Stop::Wait };
        let mut s = stream;
        while self.sent < self.out.len() {
            match s.write(&self.out[self.sent..]) {
                Ok(0) => return Err(Stop::WriteFailed),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(wait()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Stop::WriteFailed),
            }
        }
        while self.got.len() < want {
            let start = self.got.len();
            self.got.resize(want, 0);
            let r = s.read(&mut self.got[start..]);
            self.got.truncate(start + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(0) => return Err(Stop::Closed),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(wait()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => return Err(Stop::Closed),
                Err(_) => return Err(Stop::ReadFailed),
            }
        }
        Ok(())
    }
}

/// One handshake message: a header, then `body`.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = Hdr::message(kind, body.len()).encode().to_vec();
    m.extend_from_slice(body);
    m
}
