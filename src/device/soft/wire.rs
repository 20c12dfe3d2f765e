//! The soft device's wire format: a fixed 48-byte header, then the payload it announces.
//!
//! A new connection starts with a [`Greeting`] each way, before anything of either consumer's:
//! the connecting side's first bytes say "dat2-soft, this wire version" and nothing else, and
//! its HELLO (private data, rendezvous name, the qualifier it wants) goes only to a peer that
//! answered the same. An unrelated service that a qualifier's port reaches learns nothing.
//!
//! Every request (send, write, read, atomic) is answered by exactly one response, in order,
//! so the initiator completes its work requests in the order it posted them. A plain success
//! (no data, no error) may travel as a count instead of a frame of its own: any frame's `acks`
//! field stands for that many such responses sent just before the frame, and an ACK frame
//! carries nothing else. With
//! cross-memory attach, a request carries the initiator's scatter list instead of its data
//! and the target moves the bytes itself.
//!
//! The unreliable datagram service (ud/) resolves addresses over the same TCP listeners
//! (UD_HELLO, answered by UD_ACCEPT or REJECT, see [`UdHello`]) and sends its datagrams over
//! UDP (see [`Dgram`]).

pub const HDR_LEN: usize = 48;
pub const MAGIC: u32 = 0x6461_7432; // "dat2"
/// The wire version: both sides' greetings must name it. 8 added the greeting and the
/// 64-bit qualifier in HELLO; a dat2 of version 7 or before and this one do not connect.
pub const VERSION: u32 = 8;

/// A greeting's size: that of a frame header, so that a dat2 of wire version 7 or before,
/// which reads a header first, finds no operation it takes and closes at once.
pub const GREETING_LEN: usize = HDR_LEN;
/// A greeting's first bytes: never a header's (its op would be 0x44, none of ours).
pub const GREETING_MAGIC: [u8; 8] = *b"DAT2SOFT";

/// The two greetings: the connecting side's, and the listener's answer (so that a service
/// that echoes what it gets is not taken for a listener).
pub mod role {
    pub const ASK: u32 = 1;
    pub const ANSWER: u32 = 2;
}

/// The first bytes each side sends (GREETING_LEN): GREETING_MAGIC, then the sender's wire
/// version and role (u32, little endian); the rest zero, and ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Greeting {
    pub version: u32,
    pub role: u32,
}

impl Greeting {
    /// This side's greeting in `role`.
    pub fn ours(role: u32) -> [u8; GREETING_LEN] {
        let mut b = [0u8; GREETING_LEN];
        b[..8].copy_from_slice(&GREETING_MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&role.to_le_bytes());
        b
    }

    /// The greeting `b` is, if it is a dat2-soft greeting of any version.
    pub fn decode(b: &[u8; GREETING_LEN]) -> Option<Greeting> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (b[..8] == GREETING_MAGIC).then(|| Greeting { version: u32_at(8), role: u32_at(12) })
    }
}

/// The status of a REJECT: the consumer's (its private data follows), or no service point
/// with the qualifier the HELLO named listens on that port (the consumer never saw it).
pub mod reject {
    pub const CONSUMER: u8 = 0;
    pub const NO_SERVICE: u8 = 1;
}

pub mod op {
    pub const HELLO: u8 = 1;
    pub const ACCEPT: u8 = 2;
    pub const REJECT: u8 = 3;
    pub const READY: u8 = 4;
    /// The passive side's answer to READY: it has reported ESTABLISHED. The active side
    /// reports its own ESTABLISHED only after this, so that everything it does once connected
    /// (a disconnect of another connection included) reaches the passive side's consumer after
    /// that side's ESTABLISHED, as with the RTU of an IB connection.
    pub const ESTABLISHED: u8 = 5;
    /// UD address resolution: a UD QP asks a service point for a peer QP (body: [`super::UdHello`]
    /// with the requester's QP number, keys and proof token). Answered by UD_ACCEPT or REJECT,
    /// then the connection closes; an accept is then proven by datagrams (ud/proof.rs).
    pub const UD_HELLO: u8 = 6;
    /// The accepting UD QP's number, keys and proof token ([`super::UdHello`]) and the private
    /// data.
    pub const UD_ACCEPT: u8 = 7;
    pub const SEND: u8 = 10;
    pub const WRITE: u8 = 11;
    pub const READ: u8 = 12;
    pub const CMP_SWAP: u8 = 13;
    pub const FETCH_ADD: u8 = 14;
    pub const RESPONSE: u8 = 20;
    /// Only acknowledgements (the header's `acks`).
    pub const ACK: u8 = 21;
    pub const DISCONNECT: u8 = 30;
}

pub mod flag {
    /// The payload is the initiator's scatter list (cross-memory attach), not data.
    pub const CMA: u8 = 0x1;
    pub const IMM: u8 = 0x2;
    pub const SOLICITED: u8 = 0x4;
    pub const INVALIDATE: u8 = 0x8;
    /// With CMA: each scatter element also names the shared file that holds it (see shm.rs).
    pub const SHM: u8 = 0x10;
    /// A UD datagram that proves its source owns its address and port: no keys, and a payload
    /// of exactly PROOF_LEN bytes, a token (see [`super::Dgram`] and ud/proof.rs).
    pub const PROOF: u8 = 0x20;
    /// A SEND whose data the initiator placed itself into the receive its `a` numbers (same
    /// host, recvring.rs): no payload; the target completes that receive.
    pub const PLACED: u8 = 0x40;
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hdr {
    pub op: u8,
    pub flags: u8,
    pub status: u8,
    /// Bytes that follow the header on the wire.
    pub payload: u32,
    /// Bytes the operation moves (equal to `payload` unless CMA).
    pub length: u32,
    pub raddr: u64,
    pub rkey: u32,
    pub imm: u32,
    /// Plain success responses that precede this frame (see the module text).
    pub acks: u32,
    pub a: u64,
    pub b: u64,
}

impl Hdr {
    /// The header of a handshake message of `len` bytes.
    pub fn message(kind: u8, len: usize) -> Hdr {
        Hdr { op: kind, payload: len as u32, length: len as u32, ..Hdr::default() }
    }

    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0] = self.op;
        b[1] = self.flags;
        b[2] = self.status;
        b[4..8].copy_from_slice(&self.payload.to_le_bytes());
        b[8..12].copy_from_slice(&self.length.to_le_bytes());
        b[12..20].copy_from_slice(&self.raddr.to_le_bytes());
        b[20..24].copy_from_slice(&self.rkey.to_le_bytes());
        b[24..28].copy_from_slice(&self.imm.to_le_bytes());
        b[28..32].copy_from_slice(&self.acks.to_le_bytes());
        b[32..40].copy_from_slice(&self.a.to_le_bytes());
        b[40..48].copy_from_slice(&self.b.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HDR_LEN]) -> Hdr {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        Hdr {
            op: b[0],
            flags: b[1],
            status: b[2],
            payload: u32_at(4),
            length: u32_at(8),
            raddr: u64_at(12),
            rkey: u32_at(20),
            imm: u32_at(24),
            acks: u32_at(28),
            a: u64_at(32),
            b: u64_at(40),
        }
    }
}

/// The connection handshake's payload (HELLO, ACCEPT, REJECT, READY). It says nothing about
/// the sender's process: two ends on one host learn who the other is at a Unix-socket
/// rendezvous, from the kernel (rendezvous.rs, peer.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    /// HELLO: the name of the active side's rendezvous (0: none, the peer is not on this host).
    pub rendezvous: u64,
    /// HELLO: the service point's connection qualifier, all 64 bits (its port is only the low
    /// 16): the listener takes the request only when it is its own.
    pub conn_qual: u64,
    /// READY: the active side verified the passive side's process at the rendezvous and can
    /// reach its memory.
    pub reaches_peer: bool,
    /// HELLO and ACCEPT: how many RDMA READ and atomic requests the sender takes at a time (its
    /// EP's `max_rdma_read_in`). The other side never has more outstanding; a peer that does
    /// loses the connection.
    pub rd_in: u32,
    pub private_data: Vec<u8>,
}

/// A HELLO's fixed part; private data follows it.
pub const HELLO_LEN: usize = 32;

/// The most private data a handshake message carries (the device's `max_private_data`).
pub const PRIVATE_DATA_MAX: usize = 256;

/// The longest handshake message body; a longer one ends the connection unread.
pub const HELLO_MAX: u32 = (HELLO_LEN + PRIVATE_DATA_MAX) as u32;

/// The most elements in a request's scatter list (cross-memory attach): the device's `max_sge`.
pub const LIST_MAX: usize = 16;

/// Bytes per scatter-list element: plain (address, length), or with its shared file.
pub const SEG_LEN: usize = 12;
pub const SHARED_SEG_LEN: usize = 32;

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HELLO_LEN + self.private_data.len());
        v.extend_from_slice(&MAGIC.to_le_bytes());
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&(self.reaches_peer as u32).to_le_bytes());
        v.extend_from_slice(&self.rd_in.to_le_bytes());
        v.extend_from_slice(&self.rendezvous.to_le_bytes());
        v.extend_from_slice(&self.conn_qual.to_le_bytes());
        v.extend_from_slice(&self.private_data);
        v
    }

    pub fn decode(b: &[u8]) -> Option<Hello> {
        if b.len() < HELLO_LEN || b.len() > HELLO_MAX as usize {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if u32_at(0) != MAGIC || u32_at(4) != VERSION {
            return None;
        }
        Some(Hello {
            reaches_peer: u32_at(8) != 0,
            rd_in: u32_at(12),
            rendezvous: u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()),
            conn_qual: u64::from_le_bytes(b[24..32].try_into().unwrap_or_default()),
            private_data: b[HELLO_LEN..].to_vec(),
        })
    }
}

/// The body of UD_HELLO and UD_ACCEPT: magic, version, the sender's UD QP number (its UDP
/// port, 1 to 65535), Q_Key and 64-bit datagram secret, a 128-bit proof token, the service
/// point's 64-bit qualifier (UD_HELLO; 0 in UD_ACCEPT), then private data (at most
/// PRIVATE_DATA_MAX bytes). The requester's address is never in it: the passive
/// side takes it from the kernel (the TCP peer address), so a requester can name only its own
/// host; and its QP number is believed only once a datagram carrying its token has come from
/// that address and port (ud/proof.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdHello {
    pub qpn: u32,
    pub qkey: u32,
    /// The sender QP's datagram secret: every datagram to it carries this besides the Q_Key.
    pub secret: u64,
    /// A random token of the sender's: the sender's own proof datagram carries it.
    pub token: u128,
    /// UD_HELLO: the qualifier of the service point resolved (see [`Hello::conn_qual`]).
    pub conn_qual: u64,
    pub private_data: Vec<u8>,
}

/// A UdHello's fixed part; private data follows it.
pub const UD_HELLO_LEN: usize = 48;

/// The longest UD_HELLO or UD_ACCEPT body; a longer one ends the connection unread.
pub const UD_HELLO_MAX: u32 = (UD_HELLO_LEN + PRIVATE_DATA_MAX) as u32;

impl UdHello {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(UD_HELLO_LEN + self.private_data.len());
        v.extend_from_slice(&MAGIC.to_le_bytes());
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&self.qpn.to_le_bytes());
        v.extend_from_slice(&self.qkey.to_le_bytes());
        v.extend_from_slice(&self.secret.to_le_bytes());
        v.extend_from_slice(&self.token.to_le_bytes());
        v.extend_from_slice(&self.conn_qual.to_le_bytes());
        v.extend_from_slice(&self.private_data);
        v
    }

    pub fn decode(b: &[u8]) -> Option<UdHello> {
        if b.len() < UD_HELLO_LEN || b.len() > UD_HELLO_MAX as usize {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let qpn = u32_at(8);
        if u32_at(0) != MAGIC || u32_at(4) != VERSION || !(1..=u32::from(u16::MAX)).contains(&qpn) {
            return None;
        }
        Some(UdHello {
            qpn,
            qkey: u32_at(12),
            secret: u64::from_le_bytes(b[16..24].try_into().ok()?),
            token: u128::from_le_bytes(b[24..40].try_into().ok()?),
            conn_qual: u64::from_le_bytes(b[40..48].try_into().ok()?),
            private_data: b[UD_HELLO_LEN..].to_vec(),
        })
    }
}

/// The header of a UD datagram (one UDP datagram each, between two UD QPs), 28 bytes, little
/// endian, then exactly `length` bytes of payload:
///
/// | bytes | field |
/// | --- | --- |
/// | 0..4 | DGRAM_MAGIC |
/// | 4..8 | the destination QP's Q_Key |
/// | 8..16 | the destination QP's secret |
/// | 16..20 | the source QP's number (its UDP port, which the datagram must come from) |
/// | 20 | DGRAM_VERSION |
/// | 21 | flags: `flag::SOLICITED`, or `flag::PROOF` alone |
/// | 22..24 | zero |
/// | 24..28 | payload length |
///
/// A receiver drops, silently and before it takes a receive, every datagram that is not
/// exactly this: a short one, another magic or version, unknown flags, a length that is not
/// the datagram's size or is above the path MTU, a source QPN that is not the UDP source
/// port; and, counting it (ud/proof.rs), one with another Q_Key or secret. The Q_Key is 32
/// bits as on InfiniBand; the secret makes the key a datagram must show 96 bits, so that it
/// cannot be guessed (at 200,000 datagrams a second, 2^95 tries take about 6 * 10^18 years).
/// A peer learns both only by resolving the QP (UD_HELLO), which the QP's consumer accepts.
///
/// A proof datagram (`flag::PROOF`) carries no keys (both zero) and a payload of PROOF_LEN
/// bytes: the sender's token, as its UD_HELLO or UD_ACCEPT gave it. It never lands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dgram {
    pub qkey: u32,
    pub secret: u64,
    pub src_qpn: u32,
    pub flags: u8,
    pub length: u32,
}

pub const DGRAM_HDR_LEN: usize = 28;
pub const DGRAM_MAGIC: u32 = 0x6461_7455; // "Utad" on the wire: dat2's datagrams
pub const DGRAM_VERSION: u8 = 2;
/// A proof datagram's payload: a token.
pub const PROOF_LEN: usize = 16;

impl Dgram {
    pub fn encode(&self) -> [u8; DGRAM_HDR_LEN] {
        let mut b = [0u8; DGRAM_HDR_LEN];
        b[0..4].copy_from_slice(&DGRAM_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.qkey.to_le_bytes());
        b[8..16].copy_from_slice(&self.secret.to_le_bytes());
        b[16..20].copy_from_slice(&self.src_qpn.to_le_bytes());
        b[20] = DGRAM_VERSION;
        b[21] = self.flags;
        b[24..28].copy_from_slice(&self.length.to_le_bytes());
        b
    }

    /// A proof datagram from QP `src_qpn` carrying `token`.
    pub fn proof(src_qpn: u32, token: u128) -> [u8; DGRAM_HDR_LEN + PROOF_LEN] {
        let mut b = [0u8; DGRAM_HDR_LEN + PROOF_LEN];
        let h = Dgram { qkey: 0, secret: 0, src_qpn, flags: flag::PROOF, length: PROOF_LEN as u32 };
        b[..DGRAM_HDR_LEN].copy_from_slice(&h.encode());
        b[DGRAM_HDR_LEN..].copy_from_slice(&token.to_le_bytes());
        b
    }

    /// The header of `datagram` (header and payload, as received) when it is well formed for a
    /// QP whose payloads are at most `max` bytes (see the type); its keys are not checked here
    /// ([`Dgram::keys_are`]).
    pub fn parse(datagram: &[u8], max: u32) -> Option<Dgram> {
        let b = datagram.get(..DGRAM_HDR_LEN)?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let secret = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let d = Dgram { qkey: u32_at(4), secret, src_qpn: u32_at(16), flags: b[21], length: u32_at(24) };
        let proof_ok = d.flags != flag::PROOF || (d.qkey == 0 && d.secret == 0 && d.length as usize == PROOF_LEN);
        let well_formed = u32_at(0) == DGRAM_MAGIC
            && b[20] == DGRAM_VERSION
            && b[22..24] == [0, 0]
            && (d.flags & !flag::SOLICITED == 0 || d.flags == flag::PROOF);
        let sized = d.length <= max && d.length as usize == datagram.len() - DGRAM_HDR_LEN;
        (well_formed && proof_ok && sized).then_some(d)
    }

    /// Whether the datagram shows the keys `qkey` and `secret` (without stopping at the first
    /// differing bit, so its timing tells nothing).
    pub fn keys_are(&self, qkey: u32, secret: u64) -> bool {
        ((u64::from(self.qkey ^ qkey)) | (self.secret ^ secret)) == 0
    }

    /// The token of a proof datagram (its payload, after the header).
    pub fn token(datagram: &[u8]) -> Option<u128> {
        Some(u128::from_le_bytes(datagram.get(DGRAM_HDR_LEN..DGRAM_HDR_LEN + PROOF_LEN)?.try_into().ok()?))
    }
}

/// Sends one handshake answer (a header, then `body`) without waiting on the peer: one
/// non-blocking write, true only if the socket took it whole. The answers are small and the
/// socket new, so it takes them unless the peer or the host is in trouble; a part taken
/// is no answer (the caller closes the socket).
pub fn answer_now(stream: &std::net::TcpStream, kind: u8, body: &[u8]) -> bool {
    use std::io::Write;
    let message = [&Hdr::message(kind, body.len()).encode()[..], body].concat();
    stream.set_nonblocking(true).is_ok() && (&*stream).write(&message).is_ok_and(|n| n == message.len())
}

/// Writes one handshake message (a header, then `body`).
pub fn write_message(stream: &std::net::TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let hdr = Hdr::message(kind, body.len());
    let mut s = stream;
    s.write_all(&hdr.encode())?;
    s.write_all(body)
}

/// Whether a handshake step failed for want of time (a connect or a read past its timeout).
pub fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

/// Reads one handshake message whose body is at most `max` bytes.
pub fn read_message(stream: &std::net::TcpStream, max: u32) -> std::io::Result<(Hdr, Vec<u8>)> {
    use std::io::Read;
    let mut s = stream;
    let mut h = [0u8; HDR_LEN];
    s.read_exact(&mut h)?;
    let hdr = Hdr::decode(&h);
    if hdr.payload > max {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut body = vec![0u8; hdr.payload as usize];
    s.read_exact(&mut body)?;
    Ok((hdr, body))
}

/// Whether a request header is well formed, before anything is allocated or read for it: a
/// known operation, a length within `max_message`, and a payload that is exactly what the
/// operation carries (its data, or with `flag::CMA` a scatter list of at most LIST_MAX
/// elements). The list itself is checked once read (`list_total`).
pub fn request_shape_ok(h: &Hdr, max_message: u32) -> bool {
    if h.length > max_message {
        return false;
    }
    let cma = h.flags & flag::CMA != 0;
    let shm = h.flags & flag::SHM != 0;
    if shm && !cma {
        return false;
    }
    let entry = if shm { SHARED_SEG_LEN } else { SEG_LEN };
    let list_ok = h.payload as usize % entry == 0 && h.payload as usize <= LIST_MAX * entry && (h.payload > 0 || h.length == 0);
    match h.op {
        op::SEND | op::WRITE => {
            if cma {
                list_ok
            } else {
                h.payload == h.length
            }
        }
        op::READ => {
            if cma {
                list_ok
            } else {
                h.payload == 0
            }
        }
        op::CMP_SWAP | op::FETCH_ADD => !cma && h.payload == 0 && h.length == 8,
        _ => false,
    }
}

/// The bytes a decoded scatter list names, when every element is non-empty and the sum fits.
pub fn list_total(segs: &[(u64, u32)]) -> Option<u32> {
    segs.iter().try_fold(0u32, |t, &(a, l)| (l > 0 && a.checked_add(u64::from(l)).is_some()).then(|| t.checked_add(l)).flatten())
}

/// A scatter list on the wire (cross-memory attach): (address, length) pairs.
pub fn encode_segments(segs: &[(u64, u32)]) -> Vec<u8> {
    let mut v = Vec::with_capacity(segs.len() * 12);
    for (a, l) in segs {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
    }
    v
}

pub fn decode_segments(b: &[u8]) -> Vec<(u64, u32)> {
    b.chunks_exact(12)
        .map(|c| (u64::from_le_bytes(c[..8].try_into().unwrap_or_default()), u32::from_le_bytes(c[8..12].try_into().unwrap_or_default())))
        .collect()
}

/// A scatter list whose elements also name their shared file: address, length, descriptor,
/// inode, file offset (32 bytes each).
pub fn encode_shared(segs: &[(u64, u32)], srcs: &[super::shm::Source]) -> Vec<u8> {
    let mut v = Vec::with_capacity(segs.len() * 32);
    for ((a, l), s) in segs.iter().zip(srcs) {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
        v.extend_from_slice(&s.fd.to_le_bytes());
        v.extend_from_slice(&s.ino.to_le_bytes());
        v.extend_from_slice(&s.offset.to_le_bytes());
    }
    v
}

pub fn decode_shared(b: &[u8]) -> (Vec<(u64, u32)>, Vec<super::shm::Source>) {
    let u64_at = |c: &[u8], i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap_or_default());
    let u32_at = |c: &[u8], i: usize| u32::from_le_bytes(c[i..i + 4].try_into().unwrap_or_default());
    b.chunks_exact(32)
        .map(|c| ((u64_at(c, 0), u32_at(c, 8)), super::shm::Source { fd: u32_at(c, 12), ino: u64_at(c, 16), offset: u64_at(c, 24) }))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::{
        decode_segments, decode_shared, encode_segments, encode_shared, flag, list_total, op, request_shape_ok, role, Dgram, Greeting, Hdr,
        Hello, UdHello, DGRAM_HDR_LEN, HELLO_LEN, LIST_MAX, PRIVATE_DATA_MAX, PROOF_LEN, SEG_LEN, SHARED_SEG_LEN, UD_HELLO_LEN, VERSION,
    };

    #[test]
    fn round_trips() {
        let h = Hdr {
            op: op::WRITE,
            flags: flag::CMA,
            status: 6,
            payload: 24,
            length: 4096,
            raddr: 1 << 40,
            rkey: 0xdead_beef,
            imm: 7,
            acks: 3,
            a: 1,
            b: u64::MAX,
        };
        assert_eq!(Hdr::decode(&h.encode()), h);
        let segs = vec![(0x1000u64, 7u32), (1 << 40, u32::MAX)];
        let srcs = vec![
            super::super::shm::Source { fd: 3, ino: 99, offset: 5 },
            super::super::shm::Source { fd: 1 << 20, ino: u64::MAX, offset: 1 << 33 },
        ];
        assert_eq!(decode_shared(&encode_shared(&segs, &srcs)), (segs, srcs));
        let hello =
            Hello { rendezvous: 0x1234_5678_9abc, conn_qual: 0x1_0000_6249, reaches_peer: true, rd_in: 4, private_data: vec![1, 2, 3] };
        assert_eq!(Hello::decode(&hello.encode()), Some(hello));
        assert_eq!(Hello::decode(&[0u8; 64]), None);
        let big = Hello { private_data: vec![0; PRIVATE_DATA_MAX + 1], ..Hello::default() };
        assert_eq!(Hello::decode(&big.encode()), None);
        assert_eq!(Hello::decode(&Hello::default().encode()[..HELLO_LEN - 1]), None);
        let mut old = Hello::default().encode();
        old[4] = 4;
        assert_eq!(Hello::decode(&old), None);
        let segs = vec![(0x1000u64, 10u32), (0x2000, 20)];
        assert_eq!(decode_segments(&encode_segments(&segs)), segs);
        assert_eq!(list_total(&segs), Some(30));
        assert_eq!(list_total(&[(1, 0)]), None);
        assert_eq!(list_total(&[(u64::MAX, 1)]), None);
        assert_eq!(list_total(&[(1, u32::MAX), (2, 1)]), None);
    }

    #[test]
    fn greetings() {
        let ask = Greeting::ours(role::ASK);
        assert_eq!(Greeting::decode(&ask), Some(Greeting { version: VERSION, role: role::ASK }));
        assert_eq!(Greeting::decode(&Greeting::ours(role::ANSWER)).map(|g| g.role), Some(role::ANSWER));
        // Another magic is not a greeting: an older dat2's first bytes (a HELLO's header), or
        // another protocol's.
        let old_hello = Hdr::message(op::HELLO, HELLO_LEN).encode();
        assert_eq!(Greeting::decode(&old_hello), None);
        let mut b = ask;
        b[0] ^= 0x20;
        assert_eq!(Greeting::decode(&b), None);
        // An older dat2 listener reads our greeting as a header whose op it does not take.
        let h = Hdr::decode(&ask);
        assert!(![op::HELLO, op::UD_HELLO].contains(&h.op));
    }

    #[test]
    fn ud_hello_round_trips_and_bounds() {
        let h = UdHello {
            qpn: 40000,
            qkey: 0xdead_beef,
            secret: u64::MAX - 5,
            token: u128::MAX / 3,
            conn_qual: u64::MAX - 1,
            private_data: vec![1, 2, 3, 4],
        };
        assert_eq!(UdHello::decode(&h.encode()), Some(h.clone()));
        // A QP number is a UDP port: not 0, not above 65535.
        assert_eq!(UdHello::decode(&UdHello { qpn: 0, ..h.clone() }.encode()), None);
        assert_eq!(UdHello::decode(&UdHello { qpn: 65536, ..h.clone() }.encode()), None);
        // Short, too much private data, another magic or version.
        assert_eq!(UdHello::decode(&h.encode()[..UD_HELLO_LEN - 1]), None);
        assert_eq!(UdHello::decode(&UdHello { private_data: vec![0; PRIVATE_DATA_MAX + 1], ..h.clone() }.encode()), None);
        assert!(UdHello::decode(&UdHello { private_data: vec![0; PRIVATE_DATA_MAX], ..h.clone() }.encode()).is_some());
        for at in [0, 4] {
            let mut b = h.encode();
            b[at] ^= 1;
            assert_eq!(UdHello::decode(&b), None);
        }
        // An RC HELLO is not a UD_HELLO (the header's op tells the listener which to decode).
        assert_eq!(UdHello::decode(&Hello::default().encode()), None);
    }

    #[test]
    fn datagram_headers() {
        let (qkey, secret, max) = (0x1234_5678, 0x0bad_cafe_f00d_d00d, 4096);
        let datagram = |d: Dgram, payload: usize| {
            let mut v = d.encode().to_vec();
            v.resize(DGRAM_HDR_LEN + payload, b'p');
            v
        };
        let good = Dgram { qkey, secret, src_qpn: 5000, flags: flag::SOLICITED, length: 100 };
        assert_eq!(Dgram::parse(&datagram(good, 100), max), Some(good));
        assert!(good.keys_are(qkey, secret));
        assert_eq!(Dgram::parse(&datagram(Dgram { length: 0, ..good }, 0), max), Some(Dgram { length: 0, ..good }));
        assert_eq!(Dgram::parse(&datagram(Dgram { length: max, ..good }, max as usize), max).map(|d| d.length), Some(max));
        // Another Q_Key, or the right Q_Key with another secret, never lands.
        for (q, s) in [(qkey ^ 1, secret), (qkey, secret ^ 1), (qkey, secret ^ (1 << 63)), (qkey, 0), (0, 0)] {
            assert!(!good.keys_are(q, s), "{q:#x} {s:#x}");
        }
        // A length that is not the datagram's size, either way, or above the MTU.
        assert_eq!(Dgram::parse(&datagram(good, 99), max), None);
        assert_eq!(Dgram::parse(&datagram(good, 101), max), None);
        assert_eq!(Dgram::parse(&datagram(Dgram { length: max + 1, ..good }, max as usize + 1), max), None);
        assert_eq!(Dgram::parse(&datagram(Dgram { length: u32::MAX, ..good }, 8), max), None);
        // Truncated headers, down to nothing.
        for n in 0..DGRAM_HDR_LEN {
            assert_eq!(Dgram::parse(&good.encode()[..n], max), None);
        }
        // Magic, version, reserved bytes and unknown flags.
        for (at, bit) in [(0, 1), (20, 1), (22, 1), (23, 0x80), (21, flag::IMM), (21, flag::PROOF)] {
            let mut b = datagram(good, 100);
            b[at] ^= bit;
            assert_eq!(Dgram::parse(&b, max), None, "byte {at}");
        }
        // A proof: no keys, exactly a token; nothing else may be flagged a proof.
        let p = Dgram::proof(5000, 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        let d = Dgram::parse(&p, max).expect("a proof");
        assert_eq!((d.flags, d.src_qpn, d.qkey, d.secret), (flag::PROOF, 5000, 0, 0));
        assert_eq!(Dgram::token(&p), Some(0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00));
        let proof = Dgram { qkey: 0, secret: 0, src_qpn: 1, flags: flag::PROOF, length: PROOF_LEN as u32 };
        assert!(Dgram::parse(&datagram(proof, PROOF_LEN), max).is_some());
        assert_eq!(Dgram::parse(&datagram(Dgram { qkey: 1, ..proof }, PROOF_LEN), max), None);
        assert_eq!(Dgram::parse(&datagram(Dgram { secret: 1, ..proof }, PROOF_LEN), max), None);
        assert_eq!(Dgram::parse(&datagram(Dgram { length: 15, ..proof }, 15), max), None);
        assert_eq!(Dgram::parse(&datagram(Dgram { flags: flag::PROOF | flag::SOLICITED, ..proof }, PROOF_LEN), max), None);
    }

    #[test]
    fn request_shapes() {
        let max = 1 << 20;
        let send = Hdr { op: op::SEND, payload: 100, length: 100, ..Hdr::default() };
        assert!(request_shape_ok(&send, max));
        // A payload that is not the data, a length past the limit.
        assert!(!request_shape_ok(&Hdr { payload: u32::MAX, ..send }, max));
        assert!(!request_shape_ok(&Hdr { payload: max + 1, length: max + 1, ..send }, max));
        // Scatter lists: whole elements, at most LIST_MAX, none for an empty transfer.
        let list = Hdr { flags: flag::CMA, payload: 2 * SEG_LEN as u32, length: 5000, ..send };
        assert!(request_shape_ok(&list, max));
        assert!(!request_shape_ok(&Hdr { payload: 13, ..list }, max));
        assert!(!request_shape_ok(&Hdr { payload: (LIST_MAX as u32 + 1) * SEG_LEN as u32, ..list }, max));
        assert!(!request_shape_ok(&Hdr { payload: 0, ..list }, max));
        assert!(request_shape_ok(&Hdr { flags: flag::CMA | flag::SHM, payload: SHARED_SEG_LEN as u32, ..list }, max));
        assert!(!request_shape_ok(&Hdr { flags: flag::SHM, ..list }, max));
        // READ carries nothing but a list; atomics nothing, and move 8 bytes.
        assert!(request_shape_ok(&Hdr { op: op::READ, payload: 0, length: 4096, ..send }, max));
        assert!(!request_shape_ok(&Hdr { op: op::READ, payload: 8, length: 4096, ..send }, max));
        assert!(request_shape_ok(&Hdr { op: op::FETCH_ADD, payload: 0, length: 8, ..send }, max));
        assert!(!request_shape_ok(&Hdr { op: op::CMP_SWAP, payload: 0, length: 16, ..send }, max));
        assert!(!request_shape_ok(&Hdr { op: 99, payload: 0, length: 0, ..send }, max));
    }
}
