#!/usr/bin/env python3
"""A hostile peer of dat2-soft: it speaks the soft device's wire protocol itself (the
greeting, the 48-byte header and the HELLO of src/device/soft/wire.rs, and the claims at the
Unix-socket rendezvous of rendezvous.rs) and attacks a dat2 process (target.c) as a server, and as a
client.

The UD cases (ud.py) resolve the target's UD QP and send it forged datagrams; the engine cases
(engine.py) check that one peer's traffic never holds up another's.

Each case prints "PASS hostile:<name>", "FAIL hostile:<name> <why>" or "SKIP ...". After every
case the target must still be alive, its unregistered memory ('secret') and a third process's
memory unchanged, and nothing of the attacker's choosing may have landed in its registered
memory unless the case is the honest control.

Usage: hostile.py TARGET_BINARY PORT_BASE   (LD_LIBRARY_PATH must name the library)
       hostile.py --remote ADDR TARGET_BINARY PORT_BASE
The second form runs the cases of a peer on another host: this script runs in one network
namespace, the targets in another (HOSTILE_TARGET_NETNS) with a soft IA (TARGET_IA) on ADDR,
and the two are joined by a veth pair (run.sh sets this up).
Environment: HOSTILE_ONLY runs the named cases only.
"""
import contextlib
import ctypes
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HDR = struct.Struct("<BBBxIIQIIIQQ")  # op flags status payload length raddr rkey imm acks a b
HELLO = struct.Struct("<IIIIQQ")  # magic version reaches rd_in rendezvous conn_qual
CLAIMS = struct.Struct("<IIQIIQIIQ")  # magic sock_fd canary keytab_fd pd qp ring (pad) ring_gen
MAGIC = 0x64617432
VERSION = 8
GREETING_MAGIC, ASK, ANSWER = b"DAT2SOFT", 1, 2
REJECT_NO_SERVICE = 1  # a REJECT's status: no service point with the HELLO's qualifier
OP_HELLO, OP_ACCEPT, OP_REJECT, OP_READY, OP_ESTABLISHED = 1, 2, 3, 4, 5
OP_SEND, OP_WRITE, OP_READ, OP_CMP_SWAP, OP_FETCH_ADD = 10, 11, 12, 13, 14
OP_RESPONSE, OP_ACK, OP_DISCONNECT = 20, 21, 30
F_CMA, F_SHM, F_PLACED = 0x1, 0x10, 0x40
SECRET_HEX = "53" * 16  # 'S'
# The targets' address-space limit (RLIMIT_AS); none under AddressSanitizer, whose shadow
# memory reserves terabytes (the sanitize pass builds target.c with it).
TARGET_AS = None if os.environ.get("DAT2_PASS") == "sanitize" else 3 << 30
# The bounds of src/device/soft (docs/security.md): what a peer may make the target hold.
STALL_BYTES = 4 << 20  # requests waiting for a receive, per connection
STALL_TOTAL = 64 << 20  # ... and for all the connections of the target together
RNR_WAIT = 1.0  # seconds such a request that does not fit waits for a receive
RD_IN = 4  # READ/atomic requests outstanding (the EP's default max_rdma_read_in)
HALF_OPEN_MAX = 128  # connections whose HELLO has not arrived, per listening socket
HANDSHAKE_TIMEOUT = 5.0  # seconds a HELLO may take
READY_WAIT = 5.0  # seconds the target waits for READY after its ACCEPT, or for the answer to its READY
GROWTH_KB = 16 << 10  # what a case may add to the target's resident memory
SETTLE_S = 10  # how long ended connections' threads may take to exit
RNR_STATUS = 9  # DAT_DTO_ERR_RECEIVER_NOT_READY

args = sys.argv[1:]
remote = None
honest_attempt = None
if args[0] == "--remote":
    remote, args = args[1], args[2:]
elif args[0] == "--honest-attempt":
    # One honest handshake and cross-memory write against PORT RKEY WIN (other_user_peer runs
    # this as another user); prints "agreed=N outcome=WORD".
    honest_attempt, args = args[1:4], ["", "0"]
target_bin = args[0]
port_base = int(args[1])
target_host = remote or "127.0.0.1"
target_prefix = ["ip", "netns", "exec", os.environ["HOSTILE_TARGET_NETNS"]] if remote else []
only = os.environ.get("HOSTILE_ONLY", "").split()
results = []


class Proc:
    """A target.c process: its 'ready' line, its commands and its events."""

    def __init__(self, *args, address_space=None, env=None):
        def limit():
            if address_space:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        self.p = subprocess.Popen([*target_prefix, target_bin, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=limit,
                                  env={**os.environ, **(env or {})})
        self.buf = b""
        self.events = []
        self.dtos = []
        self.lines = []  # every line read, for the cases that look for a log line
        # (debug log lines, when a case asks for them, may come first)
        line = self.expect("ready ", 10)
        if not line:
            raise RuntimeError(f"target did not start: {line!r}")
        self.info = {k: int(v, 0) for k, v in (w.split("=") for w in line.split()[1:])}

    def line(self, timeout):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.p.stdout.fileno(), 4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        self.lines.append(line.decode(errors="replace"))
        return self.lines[-1]

    def expect(self, prefix, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            line = self.line(end - time.time())
            if line is None:
                break
            if line.startswith("event "):
                self.events.append(line[6:])
            if line.startswith("dto "):
                self.dtos.append(dict(w.split("=", 1) for w in line.split()[1:]))
            if line.startswith(prefix):
                return line
        return None

    def cmd(self, text, prefix):
        if self.p.poll() is not None:
            return None
        try:
            self.p.stdin.write((text + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            return None
        return self.expect(prefix)

    def check(self):
        """The target's state: {'secret': ..., 'win': ...}, or None when it died."""
        line = self.cmd("check", "check ")
        if line is None:
            return None
        return dict(w.split("=", 1) for w in line.split()[1:])

    def wait_event(self, timeout=5):
        end = time.time() + timeout
        while not self.events and time.time() < end:
            line = self.line(end - time.time())
            if line is None:
                break
            if line.startswith("event "):
                self.events.append(line[6:])
        return self.events.pop(0) if self.events else None

    def said(self, prefix, timeout=2):
        """Whether the process printed a line starting with `prefix` (so far, or within
        `timeout`)."""
        return any(l.startswith(prefix) for l in self.lines) or self.expect(prefix, timeout) is not None

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b"quit\n")
                self.p.stdin.flush()
                self.p.wait(5)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def hdr(op, flags=0, payload=0, length=0, raddr=0, rkey=0, status=0, acks=0, a=0):
    return HDR.pack(op, flags, status, payload, length, raddr, rkey, 0, acks, a, 0)


def hello(rendezvous=0, reaches=0, private=b"", rd_in=4, qual=0):
    return HELLO.pack(MAGIC, VERSION, reaches, rd_in, rendezvous, qual) + private


def parse_hello(body):
    f = HELLO.unpack_from(body)
    return {"reaches": f[2], "rendezvous": f[4], "qual": f[5], "private": body[HELLO.size:]}


def greeting(role, version=VERSION):
    """The first bytes each side sends (wire.rs, Greeting): 48 bytes."""
    return GREETING_MAGIC + struct.pack("<II", version, role) + bytes(32)


def dial(port, host=None):
    """A connection to the service point on `port`, greeted and answered as dat2-soft."""
    s = socket.create_connection((host or target_host, port), timeout=10)
    s.sendall(greeting(ASK))
    got = recv_exact(s, 48)
    if got != greeting(ANSWER):
        s.close()
        raise RuntimeError(f"the greeting was answered with {got.hex()}")
    return s


def answer_greeting(s):
    """Our part of the greeting as a listener: the peer's must come first, and be dat2-soft's."""
    got = recv_exact(s, 48)
    if got != greeting(ASK):
        raise RuntimeError(f"the first bytes are {got.hex()}, not a greeting")
    s.sendall(greeting(ANSWER))


class Rendezvous:
    """Our side of the Unix-socket rendezvous: an abstract listener, as dat2's active side has."""

    def __init__(self):
        self.token = int.from_bytes(os.urandom(8), "little") | 1
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(b"\0dat2-soft-%016x" % self.token)
        self.ls.listen(4)
        self.ls.setblocking(False)

    def take(self):
        """The connection the target made (before its ACCEPT), with the claims it wrote."""
        try:
            c, _ = self.ls.accept()
        except BlockingIOError:
            return None, None
        c.settimeout(2)
        try:
            return c, CLAIMS.unpack(recv_exact(c, CLAIMS.size))
        except (EOFError, OSError):  # it came, and left without a word: it did not come
            c.close()
            return None, None

    def close(self):
        self.ls.close()


def message(op, body):
    return hdr(op, payload=len(body), length=len(body)) + body


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError
        b += chunk
    return b


def peer_closed(s, timeout=2, drain=False):
    """Whether the peer ends the connection on `s` within `timeout` seconds (0: has ended it
    already). A byte before its end means it is still open, unless `drain`: then what it sends
    before its end is read and dropped."""
    s.settimeout(timeout)
    try:
        while s.recv(4096 if drain else 1):
            if not drain:
                return False
        return True
    except ConnectionError:
        return True
    except (socket.timeout, BlockingIOError):
        return False


def recv_msg(s):
    h = HDR.unpack(recv_exact(s, HDR.size))
    return h, recv_exact(s, h[3]) if h[3] else b""


def connect(port, claims=None, reaches=1, private=b"", token=None, qual=None):
    """Connects as an active side. `claims`: None (no rendezvous), or (sock_fd, canary) to
    write at our rendezvous ("honest" for sock_fd: our descriptor of the connection);
    `token`: the rendezvous name to send instead of our own; `qual`: the qualifier to ask for
    (default `port`). Returns the socket (None when
    rejected) and what happened: the ACCEPT or REJECT, whether the target came to our
    rendezvous, and the path it agreed (the ESTABLISHED status)."""
    s = dial(port)
    rv = Rendezvous() if claims is not None else None
    try:
        s.sendall(message(OP_HELLO, hello(token if token is not None else (rv.token if rv else 0), private=private, qual=port if qual is None else qual)))
        h, answer = recv_msg(s)
        came, their_claims = rv.take() if rv else (None, None)
        info = {"answer": parse_hello(answer), "came": came is not None, "agreed": 0}
        if h[0] == OP_REJECT:
            s.close()
            return None, info
        if h[0] != OP_ACCEPT:
            raise RuntimeError(f"answer op {h[0]}")
        if came and claims is not None:
            fd, canary = claims
            came.sendall(CLAIMS.pack(MAGIC, s.fileno() if fd == "honest" else fd, canary, 0, 0, 0, 0, 0, 0))
        s.sendall(message(OP_READY, hello(reaches=reaches)))
        h, _ = recv_msg(s)
        if h[0] != OP_ESTABLISHED:
            raise RuntimeError(f"expected ESTABLISHED, got op {h[0]}")
        info["agreed"] = h[2]
        return s, info
    finally:
        if rv:
            rv.close()


def outcome(s, timeout=5):
    """What the peer did with our last request: 'ok' (a success response or acknowledgement),
    'error' (an error response), or 'closed' (it ended the connection)."""
    s.settimeout(timeout)
    try:
        while True:
            h, _ = recv_msg(s)
            if h[0] == OP_RESPONSE:
                return "ok" if h[2] == 0 else "error"
            if h[8] > 0:  # acks
                return "ok"
            if h[0] == OP_DISCONNECT:
                return "closed"
    except (EOFError, ConnectionError):
        return "closed"
    except socket.timeout:
        return "timeout"


def segments(*segs):
    return b"".join(struct.pack("<QI", a, l) for a, l in segs)


def cma_request(s, op, rkey, raddr, length, segs, flags=F_CMA, list_bytes=None):
    payload = list_bytes if list_bytes is not None else segments(*segs)
    s.sendall(hdr(op, flags, len(payload), length, raddr, rkey) + payload)


def case(name, server=True, where="local", env=None):
    """A case; `server`: it attacks a target server (started on its port; a string names
    another mode of target.c, "ud"), else it starts what it needs itself; `where`: whether it runs with the target on this host ("local") or
    on another ("remote", the --remote form); `env`: variables the target server gets besides ours."""
    def wrap(fn):
        if (not only or name in only) and where == ("remote" if remote else "local"):
            results.append((name, fn, server, env))
        return fn
    return wrap


def verdict(name, ok, why=""):
    """ok: True, False, or None (the case could not run here: SKIP)."""
    word = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
    print(f"{word} hostile:{name}" + (f" {why}" if why and not ok else ""), flush=True)


def overflow_uid():
    try:
        with open("/proc/sys/kernel/overflowuid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65534


# The target runs as we do: as the overflow uid (nobody) it believes no peer is the same user,
# so the cases that need a verified peer cannot run.
NO_VERIFIED_PEER = ("cross-memory attach is off for the overflow uid (nobody), which the target runs as"
                    if os.geteuid() == overflow_uid() else None)


# A buffer in our own memory, and a canary word, for the cases that use our real identity.
ours = ctypes.create_string_buffer(b"A" * 4096, 4096)
our_addr = ctypes.addressof(ours)
canary_word = ctypes.c_uint64(0x0123456789ABCDEF)
our_canary = ctypes.addressof(canary_word)


def attempt(t, port, claims, op=OP_WRITE, segs=((our_addr, 64),), flags=F_CMA, payload=None, **kw):
    """One connection: the handshake (see connect), then one request flagged `flags` for 64
    bytes of the target's registered memory, naming `segs` (or carrying `payload`). Returns
    what connect saw and what the target did with the request."""
    s, info = connect(port, claims, **kw)
    try:
        cma_request(s, op, t.info["rkey"], t.info["win"], 64, segs, flags, payload)
        return info, outcome(s)
    finally:
        s.close()


def target_state(t, want_win=None, forbid_win=SECRET_HEX):
    st = t.check()
    if st is None:
        return False, "the target died"
    if st["secret"] != "ok":
        return False, "the target's unregistered memory changed"
    if want_win is not None and st["win"] != want_win:
        return False, f"registered memory holds {st['win']}, expected {want_win}"
    if forbid_win is not None and st["win"] == forbid_win:
        return False, "the target's secret was copied into its registered memory"
    return True, ""


def refused(t, port, claims, what, **kw):
    """A cross-memory write (from our memory) and read (into our memory) after a handshake
    with `claims`: each must end the connection, without an agreed path."""
    for op in (OP_WRITE, OP_READ):
        info, got = attempt(t, port, claims, op, **kw)
        if info["agreed"] or got != "closed":
            return f"{what}: the target agreed the path ({info['agreed']}) or answered {got}"
    return None


@contextlib.contextmanager
def helper(code, *args):
    """A third process (Python) that prints one line when it is ready: yields it and the
    words of that line, and kills it at the end."""
    p = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield p, p.stdout.readline().split()
    finally:
        p.kill()
        p.wait()


@case("wrong_descriptor")
def _(t, port):
    """We come to our rendezvous as ourselves, but name a descriptor that is not our end of
    the connection (every one from 0 to 24 but the true one, our listener's among them): the
    target must not take us for its peer."""
    t.cmd("fill W", "filled")
    for fd in range(0, 25):
        s = socket.socket()
        true_fd = s.fileno()
        s.close()
        if fd == true_fd:
            continue
        why = refused(t, port, (fd, our_canary), f"claiming fd {fd}")
        if why:
            return False, why
    return target_state(t, want_win="57" * 16)


@case("relayed_speaker")
def _(t, port):
    """Our stream goes through a relay of the same user (a port forwarder): the relay holds
    the other end of the target's connection, we come to the rendezvous, and whatever
    descriptor we name, we are not the process that holds it."""
    code = r"""
import socket, sys, threading
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(8)
print("ready", flush=True)
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    for x in (a, b):
        try: x.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    u = socket.create_connection((sys.argv[2], int(sys.argv[3])))
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
"""
    with helper(code, port + 500, target_host, port):
        t.cmd("fill W", "filled")
        for fd in list(range(0, 12)) + ["honest"]:
            why = refused(t, port + 500, (fd, our_canary), f"through the relay, claiming fd {fd}", qual=port)
            if why:
                return False, why
        return target_state(t, want_win="57" * 16)


@case("third_process_rendezvous")
def _(t, port):
    """Our HELLO names the rendezvous of a third process of the same user, which answers the
    target with claims about itself and a canary in its memory: the kernel names that process
    to the target, and it does not hold the connection, so the target neither reads nor
    writes its memory."""
    code = r"""
import ctypes, os, socket, struct, sys, threading
secret = ctypes.create_string_buffer(b"V" * 64, 64)
token = int.from_bytes(os.urandom(8), "little") | 1
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(b"\0dat2-soft-%016x" % token); ls.listen(4)
def serve():
    while True:
        c, _ = ls.accept()
        c.recv(64)
        for fd in range(3, 8):
            c.sendall(struct.pack("<IIQIIQIIQ", 0x64617432, fd, ctypes.addressof(secret), 0, 0, 0, 0, 0, 0))
threading.Thread(target=serve, daemon=True).start()
print("ready", token, ctypes.addressof(secret), flush=True)
sys.stdin.readline()
print("secret", secret.raw == b"V" * 64, flush=True)
"""
    with helper(code) as (victim, (_, token, vsecret)):
        t.cmd("fill W", "filled")
        why = refused(t, port, None, "naming the third process's rendezvous", token=int(token), segs=[(int(vsecret), 64)])
        if why:
            return False, why
        victim.stdin.write("check\n")
        victim.stdin.flush()
        if victim.stdout.readline().split() != ["secret", "True"]:
            return False, "the third process's memory changed"
        return target_state(t, want_win="57" * 16)


@case("unreadable_canary")
def _(t, port):
    """Our true descriptor, but a canary the target cannot read (no memory there): it cannot
    show that it reaches us, so no cross-memory path."""
    t.cmd("fill W", "filled")
    why = refused(t, port, ("honest", 0x10), "canary at 0x10") or refused(t, port, ("honest", 0), "no canary")
    return (False, why) if why else target_state(t, want_win="57" * 16)


@case("no_path_unless_both_reach")
def _(t, port):
    """We are verified and readable, but say in READY that we cannot reach the target: the
    path is cross-memory only when both sides agreed it."""
    t.cmd("fill W", "filled")
    why = refused(t, port, ("honest", our_canary), "READY without reach", reaches=0)
    return (False, why) if why else target_state(t, want_win="57" * 16)


@case("honest_peer_cma_works")
def _(t, port):
    """The control: our true descriptor and a readable canary at our rendezvous. The path is
    agreed, and a cross-memory write from our own memory lands (so the refusals here are not
    malformed frames)."""
    if NO_VERIFIED_PEER:
        return None, NO_VERIFIED_PEER
    t.cmd("fill W", "filled")
    info, got = attempt(t, port, ("honest", our_canary))
    if not info["came"] or info["agreed"] != 1:
        return False, f"the target did not verify us: {info}"
    if got != "ok":
        return False, f"the target answered {got}"
    return target_state(t, want_win="41" * 16)


@case("placed_send_lies")
def _(t, port):
    """A peer says it placed a send into one of the target's receives itself (flag PLACED, as
    a same-host dat2 does, recvring.rs). The target has four receives of 4096 bytes posted.
    Each lie must end the connection: on a connection without the verified path (unverified,
    or verified with the path not agreed); naming
    another receive than the next; longer than the receive; with a payload; on a WRITE. The
    control: a true one (receive 0, 8 bytes), then an ordinary send, which takes receive 1
    and is acknowledged."""
    if NO_VERIFIED_PEER:
        return None, NO_VERIFIED_PEER
    lies = [
        ("unverified", None, hdr(OP_SEND, F_PLACED, 0, 8)),
        # Verified (the target came to our rendezvous and took a ring for us) but the path not
        # agreed: a TCP connection, where nobody places anything.
        ("verified, path not agreed", ("honest", our_canary, 0), hdr(OP_SEND, F_PLACED, 0, 8)),
        ("receive 1 first", ("honest", our_canary), hdr(OP_SEND, F_PLACED, 0, 8, a=1)),
        ("receive 64, not published", ("honest", our_canary), hdr(OP_SEND, F_PLACED, 0, 8, a=64)),
        ("longer than the receive", ("honest", our_canary), hdr(OP_SEND, F_PLACED, 0, 4097)),
        ("with a payload", ("honest", our_canary), hdr(OP_SEND, F_PLACED, 8, 8) + b"P" * 8),
        ("on a WRITE", ("honest", our_canary), hdr(OP_WRITE, F_PLACED, 0, 8, t.info["win"], t.info["rkey"])),
        ("with CMA", ("honest", our_canary), hdr(OP_SEND, F_PLACED | F_CMA, 0, 8)),
    ]
    for what, claims, frame in lies:
        reaches = claims[2] if claims and len(claims) > 2 else 1
        s, info = connect(port, claims and claims[:2], reaches=reaches)
        try:
            if claims and info["agreed"] != reaches:
                return False, f"{what}: the target did not verify us: {info}"
            s.sendall(frame)
            got = outcome(s)
        finally:
            s.close()
        if got != "closed":
            return False, f"{what}: the target answered {got}"
    s, info = connect(port, ("honest", our_canary))
    try:
        if info["agreed"] != 1:
            return False, f"control: the target did not verify us: {info}"
        s.sendall(hdr(OP_SEND, F_PLACED, 0, 8, a=0))
        s.sendall(hdr(OP_SEND, 0, 8, 8) + b"Q" * 8)
        got = outcome(s)
        if got != "ok":
            return False, f"control: the send after a true placed one was answered {got}"
        s.sendall(hdr(OP_SEND, F_PLACED, 0, 8, a=0))
        got = outcome(s)
        if got != "closed":
            return False, f"receive 0 again, once taken: the target answered {got}"
    finally:
        s.close()
    return target_state(t)


@case("verified_peer_names_target_memory")
def _(t, port):
    """A verified peer names the target's unregistered memory in its scatter lists: those are
    addresses in the peer's own memory, so the target's memory stays untouched (the copy
    fails and the connection ends, or it moves the peer's own bytes)."""
    if NO_VERIFIED_PEER:
        return None, NO_VERIFIED_PEER
    t.cmd("fill W", "filled")
    for op in (OP_WRITE, OP_READ):
        info, got = attempt(t, port, ("honest", our_canary), op, [(t.info["secret"], 64)])
        if info["agreed"] != 1:
            return False, f"the target did not verify us: {info}"
    return target_state(t)


@case("flags_without_agreement")
def _(t, port):
    """CMA or SHM flags on connections where that path was not agreed (no rendezvous), and
    SHM without CMA, from an unverified peer and from a verified one."""
    t.cmd("fill W", "filled")
    tries = [
        ("no rendezvous, CMA", None, F_CMA, segments((our_addr, 64))),
        ("no rendezvous, CMA|SHM", None, F_CMA | F_SHM, struct.pack("<QIIQQ", our_addr, 64, 3, 1, 0)),
        ("verified, SHM without CMA", ("honest", our_canary), F_SHM, b"A" * 64),
        ("no rendezvous, SHM", None, F_SHM, b"A" * 64),
    ]
    for what, claims, flags, payload in tries:
        _, got = attempt(t, port, claims, flags=flags, payload=payload)
        if got != "closed":
            return False, f"{what}: the target answered {got}"
    return target_state(t, want_win="57" * 16)


@case("request_before_ready")
def _(t, port):
    """A plain RDMA write (valid key, inline data) sent after ACCEPT but before READY, the
    handshake's last message: the target must end the connection without executing it."""
    t.cmd("fill W", "filled")
    s = dial(port)
    try:
        s.sendall(message(OP_HELLO, hello(qual=port)))
        h, _ = recv_msg(s)
        if h[0] != OP_ACCEPT:
            return False, f"answer op {h[0]}"
        s.sendall(hdr(OP_WRITE, 0, 64, 64, t.info["win"], t.info["rkey"]) + b"E" * 64)
        s.sendall(message(OP_READY, hello()))
        got = outcome(s)
    finally:
        s.close()
    if got != "closed":
        return False, f"the target answered {got}"
    return target_state(t, want_win="57" * 16)


@case("reject_tells_nothing")
def _(t, port):
    """A rejected peer learns nothing about the target: the REJECT carries only the private
    data, and the target never came to our rendezvous."""
    s, info = connect(port, ("honest", our_canary), private=b"reject me")
    if s is not None:
        s.close()
        return False, "the target accepted"
    if info["came"] or info["answer"]["reaches"] or info["answer"]["rendezvous"]:
        return False, f"the target came to our rendezvous or says something: {info}"
    return target_state(t)


def resources(t):
    """The target's threads and resident kilobytes (None when it died)."""
    st = t.check()
    return (int(st["threads"]), int(st["rss_kb"])) if st else None


def bounded(t, before, what):
    """The target is alive, its memory intact, and it holds no more threads or memory than
    before `what` (within GROWTH_KB). A connection's thread exits a moment after the peer
    sees the connection end, so the count is read again for up to SETTLE_S seconds."""
    deadline = time.time() + SETTLE_S
    while True:
        after = resources(t)
        if after is None:
            return False, f"{what}: the target died"
        over = after[0] > before[0] + 1 or after[1] > before[1] + GROWTH_KB
        if not over or time.time() > deadline:
            break
        time.sleep(0.1)
    if over:
        return False, f"{what}: the target went from {before[0]} threads and {before[1]} kB to {after[0]} and {after[1]}"
    return target_state(t, forbid_win=None)


def each_ends_connection(port, tries, claims=None):
    """Sends each (what, bytes) on a connection of its own (verified when `claims`, see
    connect): the target must end each. Returns why not, or None."""
    for what, frame in tries:
        s, info = connect(port, claims)
        try:
            if claims and info["agreed"] != 1:
                return f"the target did not verify us: {info}"
            s.sendall(frame)
            got = outcome(s)
        finally:
            s.close()
        if got != "closed":
            return f"{what}: the target answered {got}"
    return None


@case("malformed_requests")
def _(t, port):
    """Headers whose lengths or operations are not what the request carries, each on its own
    connection, with at most the first bytes of what they announce: the target ends the
    connection before it allocates or reads anything for them. (Under RLIMIT_AS the old
    allocation of an announced 4 GiB payload aborted the target.)"""
    rkey, win = t.info["rkey"], t.info["win"]
    before = resources(t)
    tries = [
        ("a 4 GiB send", hdr(OP_SEND, payload=0xFFFFFFFF, length=0xFFFFFFFF)),
        ("a send whose payload is not its length", hdr(OP_SEND, payload=0xFFFFFFF0, length=16)),
        ("a write past max_message", hdr(OP_WRITE, payload=0x80000001, length=0x80000001, raddr=win, rkey=rkey)),
        ("a write whose payload is not its length", hdr(OP_WRITE, payload=1 << 30, length=64, raddr=win, rkey=rkey)),
        ("a read that carries a payload", hdr(OP_READ, payload=1 << 30, length=64, raddr=win, rkey=rkey)),
        ("an atomic of 16 bytes", hdr(OP_FETCH_ADD, length=16, raddr=win, rkey=rkey)),
        ("an atomic with a payload", hdr(OP_CMP_SWAP, payload=1 << 20, length=8, raddr=win, rkey=rkey)),
        ("an unknown operation", hdr(99, payload=1 << 20, length=1 << 20)),
        ("a response to nothing", hdr(OP_RESPONSE, payload=1 << 30)),
        ("an acknowledgement of nothing", hdr(OP_ACK, acks=5)),
        ("a second READY", message(OP_READY, hello())),
        ("a CMA list from an unverified peer", hdr(OP_WRITE, F_CMA, 1 << 30, 64, win, rkey)),
    ]
    why = each_ends_connection(port, [(what, frame + b"X" * 4096) for what, frame in tries])
    return (False, why) if why else bounded(t, before, "malformed requests")


@case("inconsistent_lists")
def _(t, port):
    """A verified peer (cross-memory path agreed) whose scatter lists do not add up: partial
    elements, more than 16, empty elements, a sum other than the length, a list that wraps
    the address space. Each ends the connection; nothing is copied."""
    if NO_VERIFIED_PEER:
        return None, NO_VERIFIED_PEER
    t.cmd("fill W", "filled")
    rkey, win = t.info["rkey"], t.info["win"]
    tries = [
        ("a partial element", segments((our_addr, 64))[:-1]),
        ("17 elements", segments(*[(our_addr + 4 * k, 4) for k in range(16)]) + segments((our_addr, 0))),
        ("an empty element", segments((our_addr, 64), (our_addr, 0))),
        ("a sum short of the length", segments((our_addr, 32))),
        ("a sum past the length", segments((our_addr, 64), (our_addr, 64))),
        ("a wrapping element", segments((2**64 - 16, 64))),
    ]
    why = each_ends_connection(port, [(what, hdr(OP_WRITE, F_CMA, len(p), 64, win, rkey) + p) for what, p in tries], ("honest", our_canary))
    return (False, why) if why else target_state(t, want_win="57" * 16)


@case("truncated_frames")
def _(t, port):
    """Frames cut short by the peer's close: half a header, a header without its payload, a
    write with part of its data. The target survives, and the connection's end is reported."""
    rkey, win = t.info["rkey"], t.info["win"]
    for what, frame in [
        ("half a header", hdr(OP_SEND, payload=8, length=8)[:20]),
        ("a header without its payload", hdr(OP_SEND, payload=4096, length=4096)),
        ("a write cut short", hdr(OP_WRITE, payload=4096, length=4096, raddr=win, rkey=rkey) + b"T" * 1000),
    ]:
        s, _ = connect(port)
        if t.wait_event() != "ESTABLISHED":
            return False, f"{what}: no ESTABLISHED"
        s.sendall(frame)
        s.close()
        ev = t.wait_event()
        if ev not in ("DISCONNECTED", "BROKEN"):
            return False, f"{what}: the target reported {ev}"
    return target_state(t, forbid_win=None)


def flood(s, frames, until):
    """Sends `frames` (an iterator of bytes) without reading, until they run out, the
    connection ends, or `until` seconds pass; returns how many went out."""
    s.setblocking(False)
    sent, end, pending = 0, time.time() + until, b""
    try:
        while time.time() < end:
            if not pending:
                pending = next(frames, None)
                if pending is None:
                    break
            if not select.select([], [s], [], 0.2)[1]:
                continue
            n = s.send(pending)
            pending = pending[n:]
            if not pending:
                sent += 1
    except (BrokenPipeError, ConnectionError):
        pass
    s.setblocking(True)
    return sent


def responses(s, timeout):
    """The statuses of the responses and the acknowledgements that arrive within `timeout`
    (until the connection ends): a list of statuses, 0 for each acknowledgement."""
    got, end = [], time.time() + timeout
    s.settimeout(0.5)
    while time.time() < end:
        try:
            h, _ = recv_msg(s)
        except socket.timeout:
            continue
        except (EOFError, ConnectionError):
            break
        got += [0] * h[8]
        if h[0] == OP_RESPONSE:
            got.append(h[2])
    return got


@case("send_flood")
def _(t, port):
    """Four sends fill the four receives the target posted; then 64 sends of 1 MiB come with
    no receive for them. The target holds at most STALL_BYTES of them, waits RNR_WAIT for a
    receive, then answers 'receiver not ready' and ends the connection (the old device held
    all 64: +66 MB)."""
    before = resources(t)
    s, _ = connect(port)
    try:
        frames = iter([hdr(OP_SEND, payload=64, length=64) + b"s" * 64] * 4 + [hdr(OP_SEND, payload=1 << 20, length=1 << 20) + b"F" * (1 << 20)] * 64)
        sent = flood(s, frames, 10)
        statuses = responses(s, RNR_WAIT + 5)
    finally:
        s.close()
    if statuses[:4] != [0] * 4 or statuses[4:] != [RNR_STATUS]:
        return False, f"after {sent} sends the target answered {statuses} (4 successes, then receiver not ready)"
    if t.wait_event() != "ESTABLISHED" or t.wait_event() not in ("BROKEN", "DISCONNECTED"):
        return False, f"the target's events: {t.events}"
    return bounded(t, before, "64 MiB of sends without receives")


@case("send_flood_many_connections")
def _(t, port):
    """40 connections, each filling the target's four receives, then sending three 1 MiB sends
    with no receive for them: within STALL_BYTES each, 120 MiB in all. The target holds at
    most STALL_TOTAL of them for all its connections together; a connection that finds no
    room waits RNR_WAIT and ends (the device before held every connection's 3 MiB)."""
    before = resources(t)
    socks, pending = [], {}
    big = hdr(OP_SEND, payload=1 << 20, length=1 << 20) + b"F" * (1 << 20)
    try:
        for _ in range(40):
            s, _ = connect(port)
            s.setblocking(False)
            socks.append(s)
            pending[s] = memoryview((hdr(OP_SEND, payload=64, length=64) + b"s" * 64) * 4 + big * 3)
        end = time.time() + 3
        while time.time() < end and any(len(v) for v in pending.values()):
            _, ready, _ = select.select([], [s for s in socks if len(pending[s])], [], 0.1)
            for s in ready:
                try:
                    n = s.send(pending[s])
                except BlockingIOError:
                    continue
                except ConnectionError:
                    n = len(pending[s])  # ended: nothing more goes
                pending[s] = pending[s][n:]
        # Connections that found no room have ended after RNR_WAIT; the rest hold theirs.
        time.sleep(RNR_WAIT + 1)
        mid = resources(t)
        if mid is None:
            return False, "the target died"
        grew = mid[1] - before[1]
        if grew > (STALL_TOTAL >> 10) + GROWTH_KB:
            return False, f"the target grew by {grew} kB holding sends for 40 connections (at most {STALL_TOTAL >> 10} kB, and {GROWTH_KB} kB more)"
    finally:
        for s in socks:
            s.close()
    return bounded(t, before, f"40 connections of held sends (grew {grew} kB meanwhile)")


@case("read_flood")
def _(t, port):
    """RDMA READ requests for 64 KiB of registered memory, and we never read a response: the
    target answers at most RD_IN at a time beyond what the socket took, and a peer that has
    more outstanding loses its connection (the old device took 400 k: +47 MB)."""
    before = resources(t)
    s, _ = connect(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        read = hdr(OP_READ, length=64 << 10, raddr=t.info["win"], rkey=t.info["rkey"])
        sent = flood(s, iter([read] * 400000), 20)
        s.settimeout(10)
        ended = outcome(s, 10)
    finally:
        s.close()
    if sent >= 400000:
        return False, "the target took 400000 reads whose responses were never read"
    return bounded(t, before, f"{sent} reads never read")


@case("half_open_flood")
def _(t, port):
    """500 connections that never finish their greeting (half of them send part of one), then
    an oversized HELLO after a greeting: the target spends no thread on them, keeps at most HALF_OPEN_MAX, still
    accepts an honest peer meanwhile, and closes the rest after HANDSHAKE_TIMEOUT (the old
    device held a thread each: 500 threads and 1 GB of address space)."""
    before = resources(t)
    socks = []
    try:
        for k in range(500):
            c = socket.create_connection((target_host, port), timeout=10)
            if k % 2:
                c.sendall(hdr(OP_HELLO, payload=HELLO.size, length=HELLO.size)[:30])
            socks.append(c)
        time.sleep(0.5)
        now = resources(t)
        if now is None or now[0] > before[0] + 1:
            return False, f"threads went from {before[0]} to {now and now[0]} with 500 half-open connections"
        s, info = connect(port)
        s.close()
        if t.wait_event() != "ESTABLISHED":
            return False, "an honest peer was not accepted during the flood"
        big = dial(port)
        big.sendall(hdr(OP_HELLO, payload=1 << 30, length=1 << 30) + b"H" * 4096)
        if outcome(big, 5) != "closed":
            return False, "an oversized HELLO was not refused"
        big.close()
        # The ones still waiting are closed once their time is up.
        time.sleep(HANDSHAKE_TIMEOUT + 1)
        open_ = 0
        for c in socks:
            open_ += not peer_closed(c, 0)
        if open_:
            return False, f"{open_} half-open connections were still open after {HANDSHAKE_TIMEOUT + 1} s"
    finally:
        for c in socks:
            c.close()
    return bounded(t, before, "500 half-open connections")


@case("ready_never_sent")
def _(t, port):
    """20 peers send HELLO, take the ACCEPT and never send READY. Within READY_WAIT each
    accepted EP hears DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR and its connection ends; the
    target frees the EPs, holds no thread or memory for them, and then closes its IA
    gracefully (the old device held two threads per connection, with no event, until the
    peer closed)."""
    before = resources(t)
    socks = []
    try:
        for _ in range(20):
            s = dial(port)
            s.sendall(message(OP_HELLO, hello(qual=port)))
            socks.append(s)
        started = time.time()
        for s in socks:
            h, _ = recv_msg(s)
            if h[0] != OP_ACCEPT:
                return False, f"answer op {h[0]}"
        events = [t.wait_event(READY_WAIT + 3 - (time.time() - started)) for _ in socks]
        took = time.time() - started
        if events != ["ACCEPT_COMPLETION_ERROR"] * len(socks):
            return False, f"after {took:.1f} s the target's events are {events}"
        closed = sum(outcome(s, 2) == "closed" for s in socks)
        if closed != len(socks):
            return False, f"{len(socks) - closed} connections were still open after their ACCEPT_COMPLETION_ERROR"
    finally:
        for s in socks:
            s.close()
    ok, why = bounded(t, before, "20 connections without READY")
    if not ok:
        return ok, why
    line = t.cmd("close", "closed ")
    if line is None or int(dict(w.split("=") for w in line.split()[1:])["rc"], 0) != 0 or " at=" in line:
        return False, f"the IA did not close gracefully: {line}"
    return True, ""


@case("established_never_sent", server=False)
def _(t, port):
    """We are the server: we accept a dat2 client's HELLO and take its READY, but never answer
    it. The client's connect hears DAT_CONNECTION_EVENT_TIMED_OUT within READY_WAIT of its
    READY, not only when its own 10 s timeout runs out."""
    ls = listener("127.0.0.1", port)
    c = Proc("client", str(port))
    try:
        s, _ = ls.accept()
        answer_greeting(s)
        h, _ = recv_msg(s)
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        s.sendall(message(OP_ACCEPT, hello()))
        h, _ = recv_msg(s)
        if h[0] != OP_READY:
            return False, f"the client sent op {h[0]} instead of READY"
        started = time.time()
        ev = c.wait_event(READY_WAIT + 3)
        took = time.time() - started
        s.close()
        if ev != "TIMED_OUT" or took > READY_WAIT + 2:
            return False, f"the client's event {ev} after {took:.1f} s"
        return target_state(c, forbid_win=None)
    finally:
        c.stop()
        ls.close()


def unrelated_service(port, reply):
    """A plain TCP service on `port` that is not dat2 (it sends `reply` on each connection,
    if any, and reads). Yields a function that returns what the connections sent it."""
    got = []
    ls = listener("127.0.0.1", port)

    def serve():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            with c:
                if reply:
                    c.sendall(reply)
                c.settimeout(2 * HANDSHAKE_TIMEOUT)
                data = b""
                try:
                    while chunk := c.recv(4096):
                        data += chunk
                except OSError:
                    pass
                got.append(data)
    import threading
    threading.Thread(target=serve, daemon=True).start()
    return ls, got


PRIVATE = "the-consumer's-private-data"


def connect_fails_at_once(qual, env=None):
    """Runs a target client to host 127.0.0.1 alone (port 0) and qualifier `qual`; returns
    its output when dat_ep_connect failed at once with DAT_INVALID_PARAMETER naming the
    qualifier (argument 3), else None."""
    r = subprocess.run([*target_prefix, target_bin, "client", hex(qual)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env={**os.environ, **(env or {})}, timeout=30)
    out = r.stdout.decode(errors="replace")
    ok = r.returncode == 2 and any(l.startswith("error dat_ep_connect") and l.endswith("DAT_INVALID_PARAMETER DAT_INVALID_ARG3")
                                   for l in out.splitlines())
    return out if ok else None


@case("qualifier_above_16_bits_reaches_no_service", server=False)
def _(t, port):
    """An unrelated TCP service (one silent, one that speaks first, like SMTP) listens on
    `port`. A consumer that names the host alone (port 0: the qualifier is the port, as with
    rdma_cm) and qualifier 0x1_0000_0000 | port fails at once with DAT_INVALID_PARAMETER, and
    the service sees no connection (before, the qualifier was folded to its low 16 bits and
    the HELLO with the private data went to the service). One that names the service's port
    with that qualifier sends it our greeting and nothing else: no private data; it hears
    NON_PEER_REJECTED within the greeting's 5 s, and with DAT_DBG_TYPE=1 a line naming the
    address and that it is no dat2-soft peer of this wire version."""
    for k, reply in enumerate((b"", b"220 mail.example ESMTP\r\n")):
        port += k
        ls, got = unrelated_service(port, reply)
        c = None
        try:
            if connect_fails_at_once(0x1_0000_0000 | port, {"TARGET_PDATA": PRIVATE}) is None:
                return False, "a host-only connect to a qualifier above 16 bits did not fail with DAT_INVALID_PARAMETER"
            time.sleep(0.3)
            if got:
                return False, f"a host-only connect to a qualifier above 16 bits reached the service: {got!r}"
            c = Proc("client", hex(0x1_0000_0000 | port), "127.0.0.1", str(port), env={"TARGET_PDATA": PRIVATE, "DAT_DBG_TYPE": "1"})
            started = time.time()
            ev = c.wait_event(HANDSHAKE_TIMEOUT + 3)
            took = time.time() - started
            said = c.said(f"DAT Registry: dat2-soft: 127.0.0.1:{port} is not a dat2-soft peer of wire version {VERSION}")
            c.stop()
            deadline = time.time() + 3
            while not got and time.time() < deadline:
                time.sleep(0.1)
            sent = b"".join(got)
            if PRIVATE.encode() in sent or sent != greeting(ASK):
                return False, f"{'speaking' if reply else 'silent'} service received {sent[:120]!r}"
            if ev != "NON_PEER_REJECTED" or took > HANDSHAKE_TIMEOUT + 2:
                return False, f"{'speaking' if reply else 'silent'} service: the consumer's event {ev} after {took:.1f} s"
            if not said:
                return False, "no DAT_DBG_TYPE line names the address and the protocol"
        finally:
            if c:
                c.stop()
            with contextlib.suppress(OSError):
                ls.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept
            ls.close()
    return True, ""


@case("qualifier_above_16_bits_is_another_service_point")
def _(t, port):
    """The target has a PSP at qualifier `port`; a dat2 consumer connects to the target's IA
    address (its port, from dat_ia_query) and qualifier 0x1_0000_0000 | port: it is refused
    (NON_PEER_REJECTED) and the target's consumer never hears of it. The controls, accepted:
    `port` through the IA's address, and `port` with the host alone (the qualifier's own
    port, as rdma_cm programs connect)."""
    ia_port = str(t.info["ia_port"])
    c = Proc("client", hex(0x1_0000_0000 | port), "127.0.0.1", ia_port, env={"TARGET_PDATA": PRIVATE})
    try:
        ev = c.wait_event(HANDSHAKE_TIMEOUT + 3)
        if ev != "NON_PEER_REJECTED":
            return False, f"the consumer's event for the wrong qualifier: {ev}"
        if t.expect("event ", 1):
            return False, f"the target heard of a request for another qualifier: {t.events}"
    finally:
        c.stop()
    for how in (("127.0.0.1", ia_port), ()):
        c = Proc("client", str(port), *how, env={"TARGET_PDATA": PRIVATE})
        try:
            if c.wait_event() != "ESTABLISHED" or t.wait_event() != "ESTABLISHED":
                return False, f"the control {how or 'host alone'} did not connect: {c.events} {t.events}"
        finally:
            c.stop()
        t.wait_event(3)  # the control's end
    return target_state(t, forbid_win=None)


@case("ia_port_unknown_qualifier_flood")
def _(t, port):
    """400 connections to the target's IA port (dat_ia_query's), 50 at a time, each greeted
    and sending a HELLO for a qualifier no service point has (random 64-bit values, and
    `port` + 1): each gets REJECT NO_SERVICE and its connection ends; the target's consumer
    hears of none, holds no thread or memory for them, and an honest connect through the IA
    port to its PSP is accepted afterwards."""
    import random
    ia_port = t.info["ia_port"]
    if not ia_port:
        return False, "dat_ia_query reports port 0"
    before = resources(t)
    rng = random.Random(22)
    for _ in range(8):
        socks = []
        try:
            for k in range(50):
                s = dial(ia_port)
                qual = port + 1 if k == 0 else rng.getrandbits(64)
                qual = qual if qual != port else port + 2
                s.sendall(message(OP_HELLO, hello(private=b"flood", qual=qual)))
                socks.append((s, qual))
            for s, qual in socks:
                s.settimeout(5)
                h, _ = recv_msg(s)
                if h[0] != OP_REJECT or h[2] != REJECT_NO_SERVICE:
                    return False, f"qualifier {qual:#x}: answer op {h[0]} status {h[2]}"
                if outcome(s, 2) != "closed":
                    return False, f"qualifier {qual:#x}: the connection stayed open after its REJECT"
        finally:
            for s, _ in socks:
                s.close()
    if t.expect("event ", 1):
        return False, f"the target heard of the flood: {t.events}"
    ok, why = bounded(t, before, "400 HELLOs for unknown qualifiers")
    if not ok:
        return ok, why
    s, info = connect(ia_port, qual=port)
    if s is None:
        return False, f"an honest connect through the IA port was refused: {info}"
    s.close()
    if t.wait_event() != "ESTABLISHED":
        return False, f"the target did not accept the honest connect: {t.events}"
    return True, ""


@case("older_dat2_fails_cleanly", server=False)
def _(t, port):
    """Both ways between this dat2 and one of wire version 7 (played here): our client to an
    old listener (which reads our greeting as a header it does not take and closes) hears
    NON_PEER_REJECTED at once, with a DAT_DBG_TYPE line naming the address; an old client's
    HELLO to our PSP is closed unanswered, and our consumer hears nothing."""
    old_hdr = struct.Struct("<BBBxIIQIIIQQ")
    ls = listener("127.0.0.1", port)
    c = Proc("client", str(port), env={"TARGET_PDATA": PRIVATE, "DAT_DBG_TYPE": "1"})
    try:
        s, _ = ls.accept()
        first = recv_exact(s, 48)
        op = old_hdr.unpack(first)[0]
        if op in (OP_HELLO, 6):
            return False, f"our greeting reads as op {op} to an old listener"
        s.close()
        started = time.time()
        ev = c.wait_event(3)
        if ev != "NON_PEER_REJECTED" or time.time() - started > 2:
            return False, f"the consumer's event {ev} after {time.time() - started:.1f} s"
        if not c.said(f"DAT Registry: dat2-soft: 127.0.0.1:{port} is not a dat2-soft peer of wire version {VERSION}"):
            return False, "no DAT_DBG_TYPE line names the address and the protocol"
    finally:
        c.stop()
        ls.close()
    srv = Proc("server", str(port + 1))
    try:
        s = socket.create_connection((target_host, port + 1), timeout=10)
        old = struct.pack("<IIIIQ", MAGIC, 7, 0, 4, 0) + PRIVATE.encode()
        s.sendall(message(OP_HELLO, old))
        s.settimeout(HANDSHAKE_TIMEOUT + 2)
        try:
            answer = s.recv(4096)
        except ConnectionError:
            answer = b""
        s.close()
        if answer:
            return False, f"the old client got an answer: {answer[:64].hex()}"
        if srv.expect("event ", 1):
            return False, f"our consumer heard of the old client: {srv.events}"
        return target_state(srv, forbid_win=None)
    finally:
        srv.stop()


@case("free_ends_a_stalled_connect", server=False)
def _(t, port):
    """We are the server: we take a dat2 client's greeting and HELLO and never answer (its
    connect waits for our consumer, up to its 10 s timeout). The handshake runs on the
    process's engine, not on a thread of its own: while it waits the client runs its main
    thread and the engine's, no more. The client frees its EP: the connection ends at once,
    not when the timeout runs out (before, dat_ep_free left a handshake thread waiting on our
    socket)."""
    ls = listener("127.0.0.1", port)
    c = Proc("client", str(port))
    try:
        s, _ = ls.accept()
        answer_greeting(s)
        h, _ = recv_msg(s)
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        time.sleep(0.3)
        during = resources(c)
        freed = c.cmd("epfree", "epfreed ")
        if freed is None or int(dict(w.split("=", 1) for w in freed.split()[1:])["rc"], 0) != 0:
            return False, f"dat_ep_free: {freed}"
        ended = peer_closed(s)
        after = resources(c)
        s.close()
        if not ended or during is None or during[0] > 2 or after is None or after[0] > during[0]:
            return False, f"after dat_ep_free the connection ended: {ended}; threads {during and during[0]} -> {after and after[0]} (at most 2: main and engine)"
        return target_state(c, forbid_win=None)
    finally:
        c.stop()
        ls.close()


@case("held_payload_cannot_hold_post_recv")
def _(t, port):
    """We use up the target's four receives, send a fifth message that must wait for a receive,
    then the header and part of a sixth's payload, and hold the rest back. The target posts a
    receive: dat_ep_post_recv returns at once (it used to wait, behind the reader reading our
    payload, until we sent the rest), and once we do, the waiting message lands in it."""
    s, _ = connect(port)
    if s is None:
        return False, "the target rejected us"
    try:
        for k in range(5):
            s.sendall(hdr(OP_SEND, payload=64, length=64) + bytes([0x41 + k]) * 64)
        s.sendall(hdr(OP_SEND, payload=4096, length=4096) + b"h" * 100)
        time.sleep(0.3)
        why = timed(t, "rpost", "rposted", 100)
        s.sendall(b"h" * (4096 - 100))
        if why:
            return False, f"dat_ep_post_recv waited for our payload: {why}"
        deadline = time.time() + 5
        while True:
            seen = t.cmd("peek 20480 4", "peek ")
            if seen is not None and seen.split()[1] == "45454545":
                break
            if time.time() > deadline:
                return False, f"the waiting message did not land in the new receive: {seen}"
            time.sleep(0.05)
        return target_state(t, forbid_win=None)
    finally:
        s.close()


@case("held_payload_cannot_hold_other_connection")
def _(t, port):
    """Two connections to the target: on the first we send an RDMA write of 64 KiB into its
    registered memory and hold the second half back; on the second we then ask for 64-byte
    RDMA reads, one at a time. Each is answered within 200 ms (the connections share the
    target's progress engine, which must never wait on one peer); once we send the rest on
    the first, its write is acknowledged."""
    held, _ = connect(port)
    other, _ = connect(port)
    if held is None or other is None:
        return False, "the target rejected us"
    try:
        half = 32 << 10
        held.sendall(hdr(OP_WRITE, payload=2 * half, length=2 * half, raddr=t.info["win"], rkey=t.info["rkey"]) + b"Z" * half)
        time.sleep(0.2)
        other.settimeout(5)
        slowest = 0.0
        for _ in range(20):
            start = time.time()
            other.sendall(hdr(OP_READ, length=64, raddr=t.info["win"], rkey=t.info["rkey"]))
            try:
                h, body = recv_msg(other)
            except (socket.timeout, EOFError, ConnectionError) as e:
                return False, f"no answer to a read on the other connection while a payload was held back ({e!r})"
            if h[0] != OP_RESPONSE or h[2] != 0 or len(body) != 64:
                return False, f"the read got op {h[0]} status {h[2]} with {len(body)} bytes"
            slowest = max(slowest, time.time() - start)
        if slowest > 0.2:
            return False, f"a read on the other connection took {slowest * 1000:.0f} ms while a payload was held back"
        held.sendall(b"Z" * half)
        got = outcome(held)
        if got != "ok":
            return False, f"the held-back write, once sent whole, got {got!r}"
        return target_state(t, want_win="5a" * 16)
    finally:
        held.close()
        other.close()


@case("stalled_write_cannot_hold_free")
def _(t, port):
    """We send an RDMA write of 64 KiB into the target's registered memory and stop halfway.
    The target frees that LMR: dat_lmr_free must return at once (the copy waiting on our
    socket is cut, not waited for), and nothing we send afterwards lands in the memory."""
    t.cmd("fill W", "filled")
    s, _ = connect(port)
    try:
        half = 32 << 10
        s.sendall(hdr(OP_WRITE, payload=2 * half, length=2 * half, raddr=t.info["win"], rkey=t.info["rkey"]) + b"Z" * half)
        time.sleep(0.3)
        freed = t.cmd("free", "freed ")
        if freed is None:
            return False, "the target died"
        info = dict(w.split("=") for w in freed.split()[1:])
        if int(info["rc"], 0) != 0 or int(info["ms"]) > 1000:
            return False, f"dat_lmr_free: {freed}"
        t.cmd("fill F", "filled")
        try:
            s.sendall(b"Y" * half)
        except ConnectionError:
            pass
        time.sleep(0.3)
    finally:
        s.close()
    if t.check().get("uniform") != "1":
        return False, "bytes landed in the window after dat_lmr_free returned"
    return target_state(t, want_win="46" * 16)


def listener(host, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    ls.settimeout(10)
    return ls


@case("remote_learns_nothing", where="remote")
def _(t, port):
    """A peer on another host, with or without a rendezvous of its own: the target does not
    come to it, says nothing in ACCEPT or REJECT, agrees no path, and a cross-memory request
    ends the connection."""
    t.cmd("fill W", "filled")
    for claims in (None, ("honest", our_canary)):
        why = refused(t, port, claims, f"with claims {claims}")
        if why:
            return False, why
        s, info = connect(port, claims)
        s.close()
        if info["came"] or info["answer"]["reaches"] or info["answer"]["rendezvous"]:
            return False, f"the target came to our rendezvous or says something: {info}"
    s, info = connect(port, ("honest", our_canary), private=b"reject")
    if s is not None or info["came"] or info["answer"]["rendezvous"]:
        return False, f"the REJECT: {info}"
    return target_state(t, want_win="57" * 16)


@case("remote_client_says_nothing", server=False, where="remote")
def _(t, port):
    """A dat2 client connecting to a server on another host offers it no rendezvous."""
    ls = listener("0.0.0.0", port)
    me = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    me.connect((target_host, 9))
    c = Proc("client", str(port), me.getsockname()[0])
    me.close()
    try:
        s, _ = ls.accept()
        answer_greeting(s)
        h, body = recv_msg(s)
        s.close()
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        if parse_hello(body)["rendezvous"]:
            return False, f"the client's HELLO offers a rendezvous: {parse_hello(body)}"
        return target_state(c, forbid_win=None)
    finally:
        c.stop()
        ls.close()


def malicious_server(port, op, come):
    """We are the server: a dat2 client connects and offers its rendezvous. `come`: we come to
    it as ourselves (true descriptor, readable canary) and are verified, else we stay away.
    Then we send a cross-memory request naming the client's unregistered memory: without a
    path the client ends the connection; with one, the addresses are in *our* memory, and the
    client's own memory stays untouched either way."""
    ls = listener("127.0.0.1", port)
    c = Proc("client", str(port))
    try:
        c.cmd("fill W", "filled")
        s, _ = ls.accept()
        answer_greeting(s)
        h, body = recv_msg(s)
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        token = parse_hello(body)["rendezvous"]
        if not token:
            return False, "the client offers no rendezvous to a server on its host"
        ch = None
        if come:
            ch = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            ch.connect(b"\0dat2-soft-%016x" % token)
            ch.sendall(CLAIMS.pack(MAGIC, s.fileno(), our_canary, 0, 0, 0, 0, 0, 0))
        s.sendall(message(OP_ACCEPT, hello()))
        h, body = recv_msg(s)
        if h[0] != OP_READY:
            return False, f"the client sent op {h[0]} instead of READY"
        if bool(parse_hello(body)["reaches"]) != come:
            return False, f"the client's READY says reaches={parse_hello(body)['reaches']}"
        s.sendall(hdr(OP_ESTABLISHED, status=1 if come else 0))
        ev = c.wait_event()
        if ev != "ESTABLISHED":
            return False, f"client event {ev}"
        cma_request(s, op, c.info["rkey"], c.info["win"], 64, [(c.info["secret"], 64)])
        got = outcome(s)
        s.close()
        if ch:
            ch.close()
        if not come and got != "closed":
            return False, f"the client answered {got}"
        return target_state(c)
    finally:
        c.stop()
        ls.close()


@case("malicious_server_read", server=False)
def _(t, port):
    return malicious_server(port, OP_WRITE, False)


@case("malicious_server_write", server=False)
def _(t, port):
    return malicious_server(port, OP_READ, False)


@case("verified_server_names_client_memory", server=False)
def _(t, port):
    if NO_VERIFIED_PEER:
        return None, NO_VERIFIED_PEER
    for n, op in enumerate((OP_WRITE, OP_READ)):
        ok, why = malicious_server(port + 300 + n, op, True)
        if not ok:
            return ok, why
    return True, ""

BIG = 16 << 20  # what the stalled_peer cases post
POST_MS = 100  # how long a post may stay in the call while the peer does not read
PATTERN = bytes(range(251)) * ((64 << 20) // 251 + 1)  # target.c's big buffer: byte i = i % 251
DTO_FLUSHED = 1


def stalled_listener(port):
    """A listener whose connections have a small receive buffer (set before listen, so that the
    kernel's autotuning does not grow it): a peer that does not read is soon full."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    ls.settimeout(10)
    return ls


def stalled_peer(ls):
    """A target client connected to us through `ls` on the TCP path (we do not come to its
    rendezvous), established; then we read nothing until a case says so. Returns (the
    client, our socket)."""
    c = Proc("client", str(ls.getsockname()[1]))
    try:
        s, _ = ls.accept()
        answer_greeting(s)
        if recv_msg(s)[0][0] != OP_HELLO:
            raise RuntimeError("the client did not say HELLO")
        s.sendall(message(OP_ACCEPT, hello()))
        if recv_msg(s)[0][0] != OP_READY:
            raise RuntimeError("the client did not say READY")
        s.sendall(hdr(OP_ESTABLISHED))
        if c.wait_event() != "ESTABLISHED":
            raise RuntimeError(f"client events {c.events}")
    except Exception:
        c.stop()
        raise
    return c, s


def read_to_end(s):
    """Everything the peer sends us until its end (or 5 s without a byte)."""
    s.settimeout(5)
    data = bytearray()
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except (ConnectionError, socket.timeout):
        pass
    return data


def posted(c, what, length):
    """Has the client post `what` (send, write) of `length` bytes: its "posted" fields once the
    call returned, or None when it did not within 2 s."""
    if c.cmd(f"post {what} {length}", "posting") is None:
        return None
    line = c.expect("posted ", 2)
    return dict(w.split("=", 1) for w in line.split()[1:]) if line else None


def timed(c, command, prefix, ms):
    """Runs a timed command of the client: why it failed (its rc, or over `ms`), or None."""
    line = c.cmd(command, prefix)
    if line is None:
        return f"{command}: no answer"
    got = dict(w.split("=", 1) for w in line.split()[1:])
    if int(got["rc"], 0) != 0 or int(got["ms"]) > ms:
        return f"{command}: {line}"
    return None


def wait_dto(c, cookie, timeout=5):
    """The client's completion of `cookie`, or None."""
    end = time.time() + timeout
    while time.time() < end:
        for d in c.dtos:
            if int(d["cookie"]) == cookie:
                return d
        c.expect("no such line", 0.1)
    return None


def recv_big(s, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if not k:
            raise EOFError
        got += k
    return bytes(buf)


@case("stalled_peer_post", server=False)
def _(t, port):
    """A peer that does not read while the consumer posts 16 MiB, then 64 bytes (sends, then
    RDMA writes, each on a connection of its own): each post returns at once (the old device
    held the first in the call until the peer read or closed: 11.8 s). Once the peer reads,
    both frames arrive whole and in order, and complete when it acknowledges them."""
    ls = stalled_listener(port)
    try:
        for what, op in (("send", OP_SEND), ("write", OP_WRITE)):
            c, s = stalled_peer(ls)
            try:
                for length in (BIG, 64):
                    got = posted(c, what, length)
                    if not got or int(got["rc"], 0) != 0 or int(got["ms"]) > POST_MS:
                        return False, f"a {what} of {length} bytes to a peer that does not read: {got}"
                s.settimeout(10)
                for length in (BIG, 64):
                    h = HDR.unpack(recv_exact(s, HDR.size))
                    if h[0] != op or h[3] != length:
                        return False, f"{what}: a frame of op {h[0]} with {h[3]} bytes, not op {op} with {length}"
                    if recv_big(s, length) != PATTERN[:length]:
                        return False, f"{what}: the {length} bytes that came are not those posted"
                s.sendall(hdr(OP_ACK, acks=2))
                for cookie in (100, 101):
                    d = wait_dto(c, cookie)
                    if not d or int(d["status"]) != 0:
                        return False, f"{what}: completion of {cookie}: {d}"
                ok, why = target_state(c, forbid_win=None)
                if not ok:
                    return ok, why
            finally:
                c.stop()
                s.close()
        return True, ""
    finally:
        ls.close()


@case("stalled_peer_disconnect", server=False)
def _(t, port):
    """dat_ep_disconnect(ABRUPT) while 16 MiB are posted to a peer that does not read: the
    disconnect returns at once, so does the post (the old device kept it in the call until
    dat_ep_free), which completes flushed; the EP frees and the IA closes, promptly."""
    ls = stalled_listener(port)
    c, s = stalled_peer(ls)
    try:
        if c.cmd(f"post send {BIG}", "posting") is None:
            return False, "the client did not post"
        returned = c.expect("posted ", 0.3)
        why = timed(c, "disconnect", "disconnected", POST_MS)
        if why:
            return False, why
        if (returned or c.expect("posted ", 2)) is None:
            return False, "the post stayed in the call after dat_ep_disconnect(ABRUPT)"
        d = wait_dto(c, 100)
        if not d or int(d["status"]) != DTO_FLUSHED:
            return False, f"the post's completion: {d}"
        if "DISCONNECTED" not in c.events:
            return False, f"client events {c.events}"
        why = timed(c, "epfree", "epfreed", 500) or timed(c, "closeabrupt", "closed", 1000)
        if why:
            return False, why
        return target_state(c, forbid_win=None)
    finally:
        c.stop()
        s.close()
        ls.close()


@case("stalled_peer_read_disconnect", server=False)
def _(t, port):
    """A peer that asks for 16 MiB with an RDMA read and does not read the answer, which holds
    the target's send queue; then dat_ep_disconnect(ABRUPT): it returns at once and cuts
    the connection, so that the peer, reading now, gets only the part of the answer that was
    already on its way, and then the end (before, the writer went on with the whole answer
    and DISCONNECT after it, for as long as the peer liked)."""
    ls = stalled_listener(port)
    c, s = stalled_peer(ls)
    try:
        line = c.cmd("big", "big ")
        if line is None:
            return False, "the client registered no buffer"
        big = {k: int(v, 0) for k, v in (w.split("=") for w in line.split()[1:])}
        s.sendall(hdr(OP_READ, length=BIG, raddr=big["addr"], rkey=big["rkey"]))
        time.sleep(0.5)
        why = timed(c, "disconnect", "disconnected", POST_MS)
        if why:
            return False, why
        data = read_to_end(s)
        h = HDR.unpack(bytes(data[:HDR.size]))
        if h[0] != OP_RESPONSE or h[3] != BIG:
            return False, f"the answer: {h}"
        if len(data) >= HDR.size + BIG:
            return False, f"the whole answer came after the disconnect ({len(data)} bytes): the connection was not cut"
        if data[HDR.size:] != PATTERN[:len(data) - HDR.size]:
            return False, "the part of the answer that came is not the buffer's"
        why = timed(c, "epfree", "epfreed", 500)
        return (False, why) if why else target_state(c, forbid_win=None)
    finally:
        c.stop()
        s.close()
        ls.close()


@case("stalled_peer_free_midframe", server=False)
def _(t, port):
    """16 MiB posted to a peer that does not read, then the buffer's LMR freed and the buffer
    overwritten: dat_lmr_free returns at once, and what the peer then reads is a prefix of the
    frame as posted (nothing read after the free); the connection ends and the send completes
    in error."""
    ls = stalled_listener(port)
    c, s = stalled_peer(ls)
    try:
        got = posted(c, "send", BIG)
        if not got or int(got["rc"], 0) != 0 or int(got["ms"]) > POST_MS:
            return False, f"the post: {got}"
        time.sleep(0.2)
        why = timed(c, "bigfree", "bigfreed", 1000)
        if why:
            return False, why
        data = read_to_end(s)
        h = HDR.unpack(bytes(data[:HDR.size]))
        if h[0] != OP_SEND or h[3] != BIG or len(data) >= HDR.size + BIG or data[HDR.size:] != PATTERN[:len(data) - HDR.size]:
            return False, f"the peer read {len(data)} bytes, not a prefix of the frame as posted"
        d = wait_dto(c, 100)
        if not d or int(d["status"]) == 0:
            return False, f"the post's completion: {d}"
        return target_state(c, forbid_win=None)
    finally:
        c.stop()
        s.close()
        ls.close()


def main():
    n = 0
    for name, fn, server, env in results:
        n += 1
        port = port_base + n
        t, rc = None, 0
        try:
            # Under a limit on its address space, an allocation of what a peer announces fails
            # (and aborts the target) instead of quietly reserving it.
            mode = "server" if server is True else server
            t = Proc(mode, str(port), address_space=TARGET_AS, env=env) if server else None
            ok, why = fn(t, port)
            if ok and t and t.check() is None:
                ok, why = False, "the target died"
        except Exception as e:  # a hang or a protocol surprise is a failure of the case
            ok, why = False, f"{type(e).__name__}: {e}"
        finally:
            rc = t.stop() if t else 0
        if ok is not False and rc != 0:
            ok, why = False, f"the target exited with {rc}"
        verdict(name, ok, why)


@case("other_user_peer")
def _(t, port):
    """A peer of another user on this host, honest in every claim and readable: the target
    runs as root and could reach it, but goes on only with a process of its own uid."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None, "needs root and setpriv to run a peer as another user"
    t.cmd("fill W", "filled")
    # A python3 that user may run (sys.executable may be under a home it cannot enter).
    python = next((p for p in ("/usr/bin/python3", sys.executable) if os.access(p, os.X_OK)), sys.executable)
    # And a copy of this script it may read (the checkout may be under such a home too).
    d = tempfile.mkdtemp()
    os.chmod(d, 0o755)
    script = shutil.copy(os.path.abspath(__file__), d)
    os.chmod(script, 0o644)
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, script,
                            "--honest-attempt", str(port), str(t.info["rkey"]), str(t.info["win"])], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(d)
    if r.stdout.split() != ["agreed=0", "outcome=closed"]:
        return False, f"as uid 65534: {r.stdout.strip()} {r.stderr.strip()[-300:]}"
    return target_state(t, want_win="57" * 16)


if honest_attempt:
    port, rkey, win = map(int, honest_attempt)
    s, info = connect(port, ("honest", our_canary))
    cma_request(s, OP_WRITE, rkey, win, 64, [(our_addr, 64)])
    print(f"agreed={info['agreed']} outcome={outcome(s)}")
else:
    # The UD cases live in ud.py, beside this script.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ud  # noqa: E402
    ud.register(sys.modules[__name__])
    # And the progress-engine cases in engine.py.
    import engine  # noqa: E402
    engine.register(sys.modules[__name__])
    # And the active-handshake and IA-port cases in handshake.py.
    import handshake  # noqa: E402
    handshake.register(sys.modules[__name__])
    main()
