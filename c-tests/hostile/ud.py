"""The UD cases of hostile.py (imported by it, register() adds them): a peer that resolves the
target's UD QP legitimately over its service point (UD_HELLO, answered by UD_ACCEPT with the
QP's number, Q_Key, secret and proof token, see src/device/soft/wire.rs; then each side proves
its port with a proof datagram carrying its own token, src/device/soft/ud/proof.rs), then
sends datagrams of its own making to the QP's UDP port; a peer that sends malformed
UD_HELLOs; a requester and an acceptor that name a UDP port they do not own; and a search of
the key space.

The datagram header (wire.rs, `Dgram`): magic, the destination's Q_Key and 64-bit secret, the
source QPN (the UDP port it comes from), version, flags (SOLICITED, or PROOF alone), two zero
bytes, payload length; then the payload. A receive lands 40 bytes of GRH, then the payload.
"""
import os
import socket
import struct
import time

OP_UD_HELLO, OP_UD_ACCEPT = 6, 7
UD_HELLO = struct.Struct("<IIIIQ16sQ")  # magic version qpn qkey secret token conn_qual, then private data
DGRAM = struct.Struct("<IIQIBBHI")  # magic qkey secret src_qpn version flags reserved length
DGRAM_MAGIC, DGRAM_VERSION = 0x64617455, 2
F_SOLICITED, F_IMM, F_PROOF = 0x4, 0x2, 0x20
PROOF_TIMEOUT = 5.0  # how long the target waits for a peer's proof (proof.rs)
PROOF_SENDS = 5  # the most proofs a requester sends to the port an acceptor named
MTU = 4096  # the largest payload (the soft device's max_ud_msg)
GRH = 40
SLOT = 8192  # the target's receive k lands at win + SLOT * (1 + k % 7)
QUIET = 0.5  # how long a datagram that must not land is given to land
PRIVATE_DATA_MAX = 256


def register(h):
    """Adds the UD cases to hostile.py's (`h` is its module)."""

    def hello(qpn, qkey=1, secret=1, token=b"T" * 16, private=b"", qual=0):
        return UD_HELLO.pack(h.MAGIC, h.VERSION, qpn, qkey, secret, token, qual) + private

    def proof(qpn, token):
        return DGRAM.pack(DGRAM_MAGIC, 0, 0, qpn, DGRAM_VERSION, F_PROOF, 0, 16) + token

    class Peer:
        """A UD QP of our own (a UDP socket: its port is our QPN, a Q_Key and a secret), which
        has resolved the target's QP through its service point `port` and proven its port
        (`prove`: False leaves that out)."""

        def __init__(self, port, private=b"ud-peer", prove=True):
            self.u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.u.bind((h.target_host, 0))
            self.qpn = self.u.getsockname()[1]
            self.qkey = int.from_bytes(os.urandom(4), "little") | 1
            self.token = os.urandom(16)
            s = h.dial(port)
            try:
                s.sendall(h.message(OP_UD_HELLO, hello(self.qpn, self.qkey, 7, self.token, private, qual=port)))
                hd, body = h.recv_msg(s)
            finally:
                s.close()
            if hd[0] != OP_UD_ACCEPT:
                raise RuntimeError(f"UD_HELLO answered with op {hd[0]}")
            _, _, self.their_qpn, self.their_qkey, self.their_secret, self.their_token, _ = UD_HELLO.unpack_from(body)
            self.private = body[UD_HELLO.size:]
            if prove:
                self.prove()

        def prove(self):
            """Our proof, until the target's comes (from its QP, with its token)."""
            self.u.settimeout(0.3)
            try:
                for _ in range(10):
                    self.send(proof(self.qpn, self.token))
                    try:
                        d, src = self.u.recvfrom(65536)
                    except socket.timeout:
                        continue
                    if src == (h.target_host, self.their_qpn) and d == proof(self.their_qpn, self.their_token):
                        return
                    raise RuntimeError(f"the target's proof is {d.hex()} from {src}")
                raise RuntimeError("the target sent no proof")
            finally:
                self.u.settimeout(None)

        def datagram(self, payload, qkey=None, length=None, src=None, flags=0, version=DGRAM_VERSION, magic=DGRAM_MAGIC, reserved=0, secret=None):
            qkey = self.their_qkey if qkey is None else qkey
            secret = self.their_secret if secret is None else secret
            return DGRAM.pack(magic, qkey, secret, self.qpn if src is None else src, version, flags, reserved, len(payload) if length is None else length) + payload

        def send(self, data):
            self.u.sendto(data, (h.target_host, self.their_qpn))

        def close(self):
            self.u.close()

    def resolved(t, port):
        """A Peer, once the target reported the resolution; or raises."""
        p = Peer(port)
        if p.private != b"ud-ok":
            raise RuntimeError(f"UD_ACCEPT carries {p.private!r}")
        ev = t.wait_event()
        if ev != "UD_ESTABLISHED":
            raise RuntimeError(f"the target reported {ev} for a resolution")
        return p

    def completion(t, timeout=5):
        """The target's next completion {'cookie', 'status', 'len'}, or None."""
        line = t.expect("dto ", timeout)
        return {k: int(v) for k, v in (w.split("=") for w in line.split()[1:])} if line else None

    def lands(t, p, payload, cookie):
        """An honest datagram lands in receive `cookie`, GRH first (version 6, next header
        0x1B, the source GID our address IPv4-mapped, the destination the target's): None, or
        why not."""
        p.send(p.datagram(payload, flags=F_SOLICITED))
        c = completion(t)
        if c != {"cookie": cookie, "status": 0, "len": GRH + len(payload)}:
            return f"an honest datagram of {len(payload)} bytes completed {c}"
        off, n = SLOT * (1 + cookie % 7), min(GRH + len(payload), 256)
        got = bytes.fromhex(t.cmd(f"peek {off} {n}", "peek ").split()[1])
        gid = b"\0" * 10 + b"\xff\xff" + socket.inet_aton(h.target_host)
        want = b"\x60\0\0\0" + len(payload).to_bytes(2, "big") + b"\x1b"
        if got[:7] != want or got[8:24] != gid or got[24:40] != gid or got[GRH:] != payload[:n - GRH]:
            return f"receive {cookie} holds {got[:64].hex()}..."
        return None

    @h.case("ud_wrong_qkey", server="ud")
    def _(t, port):
        """Datagrams with a Q_Key other than the QP's (flipped bits, zero, our own) never land:
        the receive posted stays posted, and an honest datagram then takes it."""
        p = resolved(t, port)
        try:
            t.cmd("recv 1 8192", "posted")
            for k in {p.their_qkey ^ 1, p.their_qkey ^ 0x80000000, 0, p.qkey} - {p.their_qkey}:
                p.send(p.datagram(b"W" * 64, qkey=k))
            c = completion(t, QUIET)
            if c is not None:
                return False, f"a datagram with another Q_Key completed {c}"
            why = lands(t, p, b"G" * 100, 0)
            return (False, why) if why else h.target_state(t, forbid_win=None)
        finally:
            p.close()

    @h.case("ud_malformed_datagrams", server="ud")
    def _(t, port):
        """Datagrams with the right Q_Key that are not what their header says: truncated
        headers, a length field that lies either way, payloads past the MTU (one byte past,
        and 60000 bytes), another magic or version, unknown flags, non-zero reserved bytes, a
        source QPN other than the port they come from. None lands or costs memory; the receive
        posted stays posted."""
        p = resolved(t, port)
        # After the resolution, which made the QP (and registered its socket with the engine).
        before = h.resources(t)
        try:
            t.cmd("recv 1 8192", "posted")
            good = p.datagram(b"M" * 64)
            tries = [good[:n] for n in (0, 1, 12, DGRAM.size - 1)] + [
                p.datagram(b"M" * 64, length=65),
                p.datagram(b"M" * 64, length=63),
                p.datagram(b"M" * 64, length=0xFFFFFFFF),
                p.datagram(b"M" * 8, length=0),
                p.datagram(b"O" * (MTU + 1)),
                p.datagram(b"O" * 60000),
                p.datagram(b"M" * 64, magic=DGRAM_MAGIC ^ 1),
                p.datagram(b"M" * 64, version=DGRAM_VERSION + 1),
                p.datagram(b"M" * 64, flags=F_IMM),
                p.datagram(b"M" * 64, flags=0x80),
                p.datagram(b"M" * 64, reserved=1),
                p.datagram(b"M" * 64, src=p.qpn ^ 1),
            ]
            for d in tries:
                p.send(d)
            c = completion(t, QUIET)
            if c is not None:
                return False, f"a malformed datagram completed {c}"
            why = lands(t, p, b"G" * MTU, 0)
            if why:
                return False, why
        finally:
            p.close()
        return h.bounded(t, before, "malformed datagrams")

    @h.case("ud_flood_no_receive", server="ud")
    def _(t, port):
        """For 3 s, datagrams of the MTU as fast as we can send them, half of them with the
        right Q_Key, and no receive posted: the target drops them all without a thread or
        memory more, and its QP then still takes an honest datagram."""
        p = resolved(t, port)
        before = h.resources(t)
        try:
            right, wrong = p.datagram(b"F" * MTU), p.datagram(b"F" * MTU, qkey=p.their_qkey ^ 1)
            sent, end = 0, time.time() + 3
            while time.time() < end:
                for _ in range(100):
                    p.send(right)
                    p.send(wrong)
                sent += 200
            # What the kernel still holds for the target is read (and dropped) first.
            time.sleep(1)
            c = completion(t, QUIET)
            if c is not None:
                return False, f"a datagram completed with no receive posted: {c}"
            ok, why = h.bounded(t, before, f"{sent} datagrams without a receive")
            if not ok:
                return ok, why
            t.cmd("recv 1 8192", "posted")
            why = lands(t, p, b"C" * 100, 0)
            return (False, f"after the flood: {why}") if why else (True, "")
        finally:
            p.close()

    @h.case("ud_malformed_hello", server="ud")
    def _(t, port):
        """UD_HELLOs that are not one, each on a connection of its own: another magic or
        version, a QPN that is no UDP port, a short body, private data past 256 bytes, a
        body of 1 GiB announced, acknowledgements in the header, a UD_ACCEPT sent to the
        listener, an RC HELLO's body. The listener closes each without an answer, the
        consumer hears of none, and an honest resolution still works."""
        before = h.resources(t)

        def body(magic=h.MAGIC, version=h.VERSION, qpn=5000, qkey=1, private=b""):
            return UD_HELLO.pack(magic, version, qpn, qkey, 1, b"T" * 16, port) + private

        tries = [
            ("another magic", h.message(OP_UD_HELLO, body(magic=h.MAGIC ^ 1))),
            ("another version", h.message(OP_UD_HELLO, body(version=h.VERSION + 1))),
            ("QPN 0", h.message(OP_UD_HELLO, body(qpn=0))),
            ("QPN 70000", h.message(OP_UD_HELLO, body(qpn=70000))),
            ("a short body", h.message(OP_UD_HELLO, body()[:12])),
            ("257 bytes of private data", h.message(OP_UD_HELLO, body(private=b"p" * (PRIVATE_DATA_MAX + 1)))),
            ("a body of 1 GiB announced", h.hdr(OP_UD_HELLO, payload=1 << 30, length=1 << 30) + b"H" * 4096),
            ("acknowledgements in the header", h.hdr(OP_UD_HELLO, payload=UD_HELLO.size, length=UD_HELLO.size, acks=1) + body()),
            ("a UD_ACCEPT", h.message(OP_UD_ACCEPT, body())),
            ("an RC HELLO's body", h.message(OP_UD_HELLO, h.hello())),
        ]
        for what, frame in tries:
            s = h.dial(port)
            try:
                s.sendall(frame)
                s.settimeout(h.HANDSHAKE_TIMEOUT + 2)
                try:
                    got = s.recv(4096)
                except ConnectionResetError:
                    got = b""
            finally:
                s.close()
            if got:
                return False, f"{what}: the target answered {got[:16].hex()}"
        line = t.expect("event ", QUIET)
        if line:
            return False, f"the target's consumer heard of a malformed UD_HELLO: {line}"
        p = resolved(t, port)
        p.close()
        return h.bounded(t, before, "malformed UD_HELLOs")

    def victim_socket():
        """An unrelated UDP service on the target's host (ours: we see what it receives)."""
        v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        v.bind((h.target_host, 0))
        v.settimeout(QUIET)
        return v, v.getsockname()[1]

    def drain(v):
        got = []
        while True:
            try:
                got.append(v.recv(65536))
            except (socket.timeout, BlockingIOError):
                return got

    def after_resolution(t, v, what):
        """The target's next connection event (within the proof's deadline) and, if it was
        told of a resolution, its reply to that peer: None when the target was told of an
        error and sent the victim nothing, else why not."""
        ev = t.wait_event(PROOF_TIMEOUT + 3)
        line = t.cmd("reply target-payload", "repl")
        got = [d for d in drain(v) if b"target-payload" in d]
        if got:
            return f"{what}: the unrelated service received the target's datagram {got[0][:48].hex()}"
        if ev != "UD_ERROR":
            return f"{what}: the target reported {ev} (its reply: {line})"
        if line != "reply none":
            return f"{what}: the target has a peer to reply to: {line}"
        return None

    @h.case("ud_requester_names_foreign_port", server="ud")
    def _(t, port):
        """A requester names as its QPN the port of an unrelated UDP service on its host, and
        sends a proof with the right token, from a port of its own: the target's consumer is
        told of an error (never of a resolution, so it has no handle to send with), and the
        service receives nothing at all."""
        v, vport = victim_socket()
        own = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        own.bind((h.target_host, 0))
        try:
            token = os.urandom(16)
            s = h.dial(port)
            try:
                s.sendall(h.message(OP_UD_HELLO, hello(vport, 0x41414141, 0x4242, token, b"redirect", qual=port)))
                hd, body = h.recv_msg(s)
            finally:
                s.close()
            if hd[0] != OP_UD_ACCEPT:
                return False, f"UD_HELLO answered with op {hd[0]}"
            their_qpn = UD_HELLO.unpack_from(body)[2]
            own.sendto(proof(own.getsockname()[1], token), (h.target_host, their_qpn))
            why = after_resolution(t, v, "a QPN not the requester's")
            if why:
                return False, why
            # Nothing came later either (the acceptor sends nothing to an unproven port).
            got = drain(v)
            if got:
                return False, f"the unrelated service received {len(got)} datagram(s), the first {got[0][:48].hex()}"
            # An honest peer still resolves the target.
            p = resolved(t, port)
            p.close()
            return h.target_state(t, forbid_win=None)
        finally:
            v.close()
            own.close()

    @h.case("ud_acceptor_names_foreign_port", server=False)
    def _(t, port):
        """We are the service point a dat2 UD client resolves, and our UD_ACCEPT names as our
        QPN the port of an unrelated UDP service on our host: the client is told of an error,
        has no handle, and the service receives at most PROOF_SENDS proofs of the client's own
        (44 bytes: no key, the client's token), never a datagram of the client's consumer nor
        anything of our choosing."""
        ls = h.listener(h.target_host, port)
        v, vport = victim_socket()
        c = h.Proc("udclient", str(port), h.target_host)
        try:
            s, _ = ls.accept()
            s.settimeout(10)
            h.answer_greeting(s)
            hd, body = h.recv_msg(s)
            if hd[0] != OP_UD_HELLO:
                return False, f"the client sent op {hd[0]}"
            _, _, qpn, _, _, token, _ = UD_HELLO.unpack_from(body)
            s.sendall(h.message(OP_UD_ACCEPT, hello(vport, 0x41414141, 0x4242, b"A" * 16, b"ud-ok")))
            s.close()
            why = after_resolution(c, v, "a QPN not the acceptor's")
            if why:
                return False, why
            got = drain(v)
            want = proof(qpn, token)
            if len(got) > PROOF_SENDS or any(d != want for d in got):
                return False, f"the unrelated service received {len(got)} datagram(s): {[d[:48].hex() for d in got[:3]]}"
            return h.target_state(c, forbid_win=None)
        finally:
            c.stop()
            v.close()
            ls.close()

    @h.case("ud_key_search_is_counted", server="ud", env={"DAT_DBG_TYPE": "1"})
    def _(t, port):
        """A resolved peer searches the key space for 2 s as fast as it can (random Q_Keys and
        secrets, and the right Q_Key with random secrets), a receive posted: none lands, and
        the target leaves a trace, rate-limited (at most a line a second, counting them)."""
        p = resolved(t, port)
        try:
            t.cmd("recv 1 8192", "posted")
            batch = [p.datagram(b"K" * 32, qkey=int.from_bytes(os.urandom(4), "little"), secret=int.from_bytes(os.urandom(8), "little")) for _ in range(64)]
            batch += [p.datagram(b"K" * 32, secret=int.from_bytes(os.urandom(8), "little")) for _ in range(64)]
            sent, end = 0, time.time() + 2
            while time.time() < end:
                for d in batch:
                    p.send(d)
                sent += len(batch)
            time.sleep(0.5)
            lines = []
            while True:
                line = t.expect("DAT Registry: soft UD QP", 1.5)
                if line is None:
                    break
                lines.append(line)
            c = completion(t, QUIET)
            if c is not None:
                return False, f"a datagram with wrong keys completed {c}"
            if not lines:
                return False, f"{sent} datagrams with wrong keys left no trace"
            if len(lines) > 5:
                return False, f"{len(lines)} log lines for a 2 s search (not rate-limited)"
            total = int(lines[-1].split("(")[1].split()[0])
            if not 0 < total <= sent:
                return False, f"the target counted {total} of {sent}: {lines[-1]}"
            why = lands(t, p, b"G" * 100, 0)
            return (False, why) if why else (True, "")
        finally:
            p.close()
