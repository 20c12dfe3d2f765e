#!/usr/bin/env python3
"""A hostile peer of dat2-soft: it speaks the soft device's wire protocol itself (the
48-byte header and the HELLO of src/providers/soft/wire.rs) and attacks a dat2 process
(target.c) as a server, and as a client.

Each case prints "PASS hostile:<name>", "FAIL hostile:<name> <why>" or "SKIP ...". After every
case the target must still be alive, its unregistered memory ('secret') and a third process's
memory unchanged, and nothing of the attacker's choosing may have landed in its registered
memory unless the case is the honest control.

Usage: hostile.py TARGET_BINARY PORT_BASE   (LD_LIBRARY_PATH must name the library)
       hostile.py --remote ADDR TARGET_BINARY PORT_BASE
The second form runs the cases of a peer on another host: this script runs in one network
namespace, the targets in another (HOSTILE_TARGET_NETNS) with a soft IA (TARGET_IA) on ADDR,
and the two are joined by a veth pair (run.sh sets this up).
Environment: HOSTILE_WIRE_VERSION overrides the protocol version the attacker speaks (to run
the suite against an older library), HOSTILE_ONLY runs the named cases only.
"""
import ctypes
import os
import select
import socket
import struct
import subprocess
import sys
import time

HDR = struct.Struct("<BBBxIIQIIIQQ")  # op flags status payload length raddr rkey imm acks a b
HELLO = struct.Struct("<IIIIQQIIQII")  # magic version pid reaches canary_addr canary keytab pd qp sock_fd pad
MAGIC = 0x64617432
VERSION = int(os.environ.get("HOSTILE_WIRE_VERSION", "5"))
OP_HELLO, OP_ACCEPT, OP_REJECT, OP_READY, OP_ESTABLISHED = 1, 2, 3, 4, 5
OP_SEND, OP_WRITE, OP_READ = 10, 11, 12
OP_RESPONSE, OP_ACK, OP_DISCONNECT = 20, 21, 30
F_CMA, F_SHM = 0x1, 0x10
SECRET_HEX = "53" * 16  # 'S'

args = sys.argv[1:]
remote = None
if args[0] == "--remote":
    remote, args = args[1], args[2:]
target_bin = args[0]
port_base = int(args[1])
target_host = remote or "127.0.0.1"
target_prefix = ["ip", "netns", "exec", os.environ["HOSTILE_TARGET_NETNS"]] if remote else []
only = os.environ.get("HOSTILE_ONLY", "").split()
results = []


class Proc:
    """A target.c process: its 'ready' line, its commands and its events."""

    def __init__(self, *args):
        self.p = subprocess.Popen([*target_prefix, target_bin, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.buf = b""
        self.events = []
        line = self.line(10)
        if not line or not line.startswith("ready "):
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
        return line.decode(errors="replace")

    def expect(self, prefix, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            line = self.line(end - time.time())
            if line is None:
                break
            if line.startswith("event "):
                self.events.append(line[6:])
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


def hdr(op, flags=0, payload=0, length=0, raddr=0, rkey=0, status=0, acks=0):
    return HDR.pack(op, flags, status, payload, length, raddr, rkey, 0, acks, 0, 0)


def hello(pid=0, sock_fd=0, canary=(0, 0), reaches=0, keytab=0, pd=0, qp=0, private=b""):
    return HELLO.pack(MAGIC, VERSION, pid, reaches, canary[0], canary[1], keytab, pd, qp, sock_fd, 0) + private


def parse_hello(body):
    f = HELLO.unpack_from(body.ljust(HELLO.size, b"\0"))  # an older version has no sock_fd
    return {"pid": f[2], "reaches": f[3], "canary_addr": f[4], "canary": f[5], "keytab": f[6], "pd": f[7], "qp": f[8], "sock_fd": f[9]}


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


def recv_msg(s):
    h = HDR.unpack(recv_exact(s, HDR.size))
    return h, recv_exact(s, h[3]) if h[3] else b""


def connect(port, claim=None, canary=(0, 0), reaches=1, private=b""):
    """Connects as an active side; `claim`: (pid, fd) or 'honest' (ours). Returns the socket
    and the target's ACCEPT, or (None, REJECT body)."""
    s = socket.create_connection((target_host, port), timeout=10)
    if claim == "honest":
        claim = (os.getpid(), s.fileno())
    pid, fd = claim or (0, 0)
    body = hello(pid, fd, canary, 0, private=private)
    s.sendall(message(OP_HELLO, body))
    h, answer = recv_msg(s)
    if h[0] == OP_REJECT:
        s.close()
        return None, parse_hello(answer)
    if h[0] != OP_ACCEPT:
        raise RuntimeError(f"answer op {h[0]}")
    s.sendall(message(OP_READY, hello(pid, fd, canary, reaches)))
    h, _ = recv_msg(s)
    if h[0] != OP_ESTABLISHED:
        raise RuntimeError(f"expected ESTABLISHED, got op {h[0]}")
    return s, parse_hello(answer)


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


def case(name, server=True, where="local"):
    """A case; `server`: it attacks a target server (started on its port), else it starts
    what it needs itself; `where`: whether it runs with the target on this host ("local") or
    on another ("remote", the --remote form)."""
    def wrap(fn):
        if (not only or name in only) and where == ("remote" if remote else "local"):
            results.append((name, fn, server))
        return fn
    return wrap


def verdict(name, ok, why=""):
    print(f"PASS hostile:{name}" if ok else f"FAIL hostile:{name} {why}", flush=True)


# A buffer in our own memory, and a canary word, for the cases that use our real identity.
ours = ctypes.create_string_buffer(b"A" * 4096, 4096)
our_addr = ctypes.addressof(ours)
canary_word = ctypes.c_uint64(0x0123456789ABCDEF)
our_canary = (ctypes.addressof(canary_word), canary_word.value)


def attempt(t, port, claim, canary, op=OP_WRITE, segs=((our_addr, 64),), flags=F_CMA, payload=None):
    """One connection: the handshake with `claim` and `canary`, then one request flagged
    `flags` for 64 bytes of the target's registered memory, naming `segs` (or carrying
    `payload`). Returns the target's ACCEPT and what it did with the request."""
    s, acc = connect(port, claim, canary)
    try:
        cma_request(s, op, t.info["rkey"], t.info["win"], 64, segs, flags, payload)
        return acc, outcome(s)
    finally:
        s.close()


def target_state(t, name, want_win=None, forbid_win=SECRET_HEX):
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


@case("claim_target_pid_read")
def _(t, port):
    """Claims to be the target itself (its pid from any ACCEPT, and every descriptor number up
    to 24) and asks it to copy from 'its own' unregistered memory into registered memory."""
    for fd in range(0, 25):
        s, acc = connect(port)  # learn the canary, as an attacker would
        s.close()
        _, got = attempt(t, port, (t.info["pid"], fd), (acc["canary_addr"], acc["canary"]), segs=[(t.info["secret"], 64)])
        if got != "closed":
            return False, f"claiming fd {fd}: the target answered {got} instead of ending the connection"
    return target_state(t, "")


@case("claim_target_pid_write")
def _(t, port):
    """Claims the target's pid and asks it to copy registered memory into its own unregistered
    memory (an RDMA READ whose scatter list names the target's secret)."""
    t.cmd("fill W", "filled")
    _, got = attempt(t, port, (t.info["pid"], 5), (0x1000, 1), OP_READ, [(t.info["secret"], 64)])
    if got != "closed":
        return False, f"the target answered {got}"
    return target_state(t, "", want_win="57" * 16)


@case("claim_third_pid")
def _(t, port):
    """Claims the pid of a third process (a victim of the same user) and makes the target read
    from it and write into it."""
    v = Proc("victim")
    try:
        t.cmd("fill W", "filled")
        for op in (OP_WRITE, OP_READ):
            _, got = attempt(t, port, (v.info["pid"], 3), (0, 0), op, [(v.info["secret"], 64)])
            if got != "closed":
                return False, f"op {op}: the target answered {got}"
        vs = v.check()
        if vs is None or vs["secret"] != "ok":
            return False, "the third process's memory changed"
        return target_state(t, "", want_win="57" * 16)
    finally:
        v.stop()


@case("honest_pid_forged_canary")
def _(t, port):
    """Our true pid and descriptor (the kernel confirms them), but a canary value that is not
    in our memory: the target cannot show that it reaches us, so no cross-memory request."""
    t.cmd("fill W", "filled")
    acc, got = attempt(t, port, "honest", (our_canary[0], our_canary[1] ^ 0xFF))
    if acc["reaches"]:
        return False, "the target says it reaches us with a wrong canary"
    if got != "closed":
        return False, f"the target answered {got}"
    return target_state(t, "", want_win="57" * 16)


@case("honest_peer_cma_works")
def _(t, port):
    """The control: our true pid, descriptor and canary. The path is agreed and a
    cross-memory write from our own memory lands (so the refusals above are not malformed
    frames)."""
    t.cmd("fill W", "filled")
    acc, got = attempt(t, port, "honest", our_canary)
    if not acc["reaches"] or acc["pid"] != t.info["pid"]:
        return False, f"the target does not verify us: {acc}"
    if got != "ok":
        return False, f"the target answered {got}"
    return target_state(t, "", want_win="41" * 16)


@case("flags_without_agreement")
def _(t, port):
    """CMA or SHM flags on connections where that path was not agreed (no identity given), and
    SHM without CMA, from an unverified peer and from a verified one."""
    t.cmd("fill W", "filled")
    tries = [
        ("no identity, CMA", None, (0, 0), F_CMA, segments((our_addr, 64))),
        ("no identity, CMA|SHM", None, (0, 0), F_CMA | F_SHM, struct.pack("<QIIQQ", our_addr, 64, 3, 1, 0)),
        ("verified, SHM without CMA", "honest", our_canary, F_SHM, b"A" * 64),
        ("no identity, SHM", None, (0, 0), F_SHM, b"A" * 64),
    ]
    for what, claim, canary, flags, payload in tries:
        _, got = attempt(t, port, claim, canary, flags=flags, payload=payload)
        if got != "closed":
            return False, f"{what}: the target answered {got}"
    return target_state(t, "", want_win="57" * 16)


@case("reject_tells_nothing")
def _(t, port):
    """A rejected peer learns nothing about the target's process: no pid, no descriptor, no
    canary and no address in the REJECT."""
    s, rej = connect(port, None, private=b"reject me")
    if s is not None:
        s.close()
        return False, "the target accepted"
    leaked = {k: v for k, v in rej.items() if v}
    if leaked:
        return False, f"the REJECT carries {leaked}"
    return target_state(t, "")


def listener(host, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    ls.settimeout(10)
    return ls


def no_identity(h):
    """The fields of a HELLO that say something about the sender's process, when non-zero."""
    return {k: v for k, v in h.items() if v and k != "reaches"}


@case("remote_learns_nothing", where="remote")
def _(t, port):
    """A peer on another host, even one that claims the target's pid or its own true pid,
    descriptor and canary: the target's ACCEPT and REJECT carry nothing about its process,
    it does not claim to reach us, and a cross-memory request breaks the connection."""
    t.cmd("fill W", "filled")
    for claim, canary in ((None, (0, 0)), ((t.info["pid"], 4), (0, 0)), ("honest", our_canary)):
        acc, got = attempt(t, port, claim, canary)
        if no_identity(acc) or acc["reaches"]:
            return False, f"claiming {claim}: the ACCEPT carries {acc}"
        if got != "closed":
            return False, f"claiming {claim}: the target answered {got}"
    s, rej = connect(port, "honest", our_canary, private=b"reject")
    if s is not None or no_identity(rej):
        return False, f"the REJECT carries {rej}"
    return target_state(t, "", want_win="57" * 16)


@case("remote_client_says_nothing", server=False, where="remote")
def _(t, port):
    """A dat2 client connecting to a server on another host tells it nothing about its
    process in its HELLO."""
    ls = listener("0.0.0.0", port)
    me = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    me.connect((target_host, 9))
    c = Proc("client", str(port), me.getsockname()[0])
    me.close()
    try:
        s, _ = ls.accept()
        h, body = recv_msg(s)
        s.close()
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        if no_identity(parse_hello(body)):
            return False, f"the client's HELLO carries {no_identity(parse_hello(body))}"
        return target_state(c, "", forbid_win=None)
    finally:
        c.stop()
        ls.close()


def malicious_server(name, port, op):
    """We are the server: a dat2 client connects and says who it is; we claim to be the
    client itself (its pid, descriptor and canary, all from its HELLO) and send it a
    cross-memory request naming its unregistered memory."""
    ls = listener("127.0.0.1", port)
    c = Proc("client", str(port))
    try:
        c.cmd("fill W", "filled")
        s, _ = ls.accept()
        h, body = recv_msg(s)
        if h[0] != OP_HELLO:
            return False, f"the client sent op {h[0]}"
        them = parse_hello(body)
        answer = hello(them["pid"], them["sock_fd"], (them["canary_addr"], them["canary"]), 1, them["keytab"], them["pd"], them["qp"])
        s.sendall(message(OP_ACCEPT, answer))
        h, body = recv_msg(s)
        if h[0] != OP_READY:
            return False, f"the client sent op {h[0]} instead of READY"
        if parse_hello(body)["reaches"]:
            return False, "the client believes it reaches us as itself"
        s.sendall(message(OP_ESTABLISHED, b""))
        ev = c.wait_event()
        if ev != "ESTABLISHED":
            return False, f"client event {ev}"
        cma_request(s, op, c.info["rkey"], c.info["win"], 64, [(c.info["secret"], 64)])
        got = outcome(s)
        s.close()
        if got != "closed":
            return False, f"the client answered {got}"
        ev = c.wait_event()
        if ev not in ("BROKEN", "DISCONNECTED"):
            return False, f"the client reports {ev} instead of the connection's end"
        return target_state(c, "", want_win="57" * 16)
    finally:
        c.stop()
        ls.close()


@case("malicious_server_read", server=False)
def _(t, port):
    return malicious_server("read", port, OP_WRITE)


@case("malicious_server_write", server=False)
def _(t, port):
    return malicious_server("write", port, OP_READ)


def main():
    n = 0
    for name, fn, server in results:
        n += 1
        port = port_base + n
        t, rc = None, 0
        try:
            t = Proc("server", str(port)) if server else None
            ok, why = fn(t, port)
            if ok and t and t.check() is None:
                ok, why = False, "the target died"
        except Exception as e:  # a hang or a protocol surprise is a failure of the case
            ok, why = False, f"{type(e).__name__}: {e}"
        finally:
            rc = t.stop() if t else 0
        if ok and rc != 0:
            ok, why = False, f"the target exited with {rc}"
        verdict(name, ok, why)


main()
