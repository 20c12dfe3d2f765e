#!/usr/bin/env python3
"""Writes the seed corpus of the soft_wire fuzz target (fuzz/corpus/soft_wire/): handshakes
followed by representative frames, in the target's input format (see the top of
fuzz_targets/soft_wire.rs). The wire's MAGIC and VERSION, for the seeds that send a raw
greeting and HELLO, are read from src/device/soft/wire.rs.

Usage: fuzz/seeds.py   (rewrites the directory; commit the result)
"""
import os
import re
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "soft_wire")
wire = open(os.path.join(here, "..", "src", "device", "soft", "wire.rs")).read()
MAGIC = int(re.search(r"pub const MAGIC: u32 = (0x[0-9a-fA-F_]+)", wire).group(1).replace("_", ""), 16)
VERSION = int(re.search(r"pub const VERSION: u32 = (\d+)", wire).group(1))

# wire::op (below 0x80 a frame's first byte is the op itself).
for name, value in re.findall(r"pub const ([A-Z_]+): u8 = (\d+);", wire):
    globals()[name] = int(value)
# wire::flag
CMA, IMM, SOLICITED, INVALIDATE, SHM, PLACED = 0x1, 0x2, 0x4, 0x8, 0x10, 0x40
# rkey choices (sel bits 0-2)
K_RAW, K_WIN, K_RO, K_OTHER, K_ZB, K_FREED, K_MW = 0, 1, 2, 3, 4, 5, 7
# consumer actions (in place of a frame's op byte)
POST_RECV, POST_REQUESTS, POST_READS, BIND_RW, BIND_R, BIND_W, BIND_ALL, DISCONNECT_GRACEFUL, DISCONNECT_ABRUPT, PAUSE = (
    0xE0, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA, 0xEB, 0xEC, 0xED, 0xEE)


def act(*what):
    return bytes(what)
# raddr choices (sel bits 3-4)
A_RAW, A_OFF, A_END, A_BASE = 0, 1, 2, 3


def setup(mode=0, cma=False, recvs=4, requests=False, private=None, rd_in=4):
    b = bytes([mode | (4 if cma else 0) | (recvs << 3) | (0x40 if requests else 0) | (0x80 if private is not None else 0)])
    if mode != 3:
        b += bytes([rd_in])
    if private is not None:
        b += bytes([len(private)]) + private
    return b


def frame(op, flags=0, key=K_WIN, addr=A_BASE, length=0, status=0, rkey=0, raddr=0, off=0, imm=0, acks=None, a=0, b=0, data=b"", segs=None):
    sel = key | (addr << 3) | (0x80 if acks is not None else 0)
    f = bytes([op, flags, sel, status]) + struct.pack("<H", length)
    if key == 0:
        f += struct.pack("<I", rkey)
    if addr == A_RAW:
        f += struct.pack("<Q", raddr)
    elif addr == A_OFF:
        f += struct.pack("<H", off)
    elif addr == A_END:
        f += bytes([off])
    f += bytes([imm])
    if acks is not None:
        f += bytes([acks])
    if op in (CMP_SWAP, FETCH_ADD):
        f += struct.pack("<QQ", a, b)
    if segs is not None:  # flag CMA: a scatter list in the target's scratch memory
        f += bytes([len(segs)]) + b"".join(struct.pack("<HH", o, n) for o, n in segs)
    elif op in (SEND, WRITE, RESPONSE):
        f += data
    return f


def hdr(op, payload=0, length=None, flags=0, status=0, raddr=0, rkey=0, imm=0, acks=0, a=0, b=0):
    return struct.pack("<BBBxIIQIIIQQ", op, flags, status, payload, payload if length is None else length, raddr, rkey, imm, acks, a, b)


def hello(reaches=0, private=b"", qual=0):
    return struct.pack("<IIIIQQ", MAGIC, VERSION, reaches, 0, 0, qual) + private


def greeting(version=VERSION, role=1):
    """wire::Greeting: the first 48 bytes each way (role 1 the connecting side's)."""
    return b"DAT2SOFT" + struct.pack("<II", version, role) + bytes(32)


data16 = bytes(range(16))
seeds = {
    "handshake": setup(),
    "handshake-no-reads-in": setup(rd_in=0, requests=True) + frame(ACK, acks=2),
    "handshake-private-data": setup(private=b"hello") + frame(DISCONNECT),
    "send": setup() + frame(SEND, length=16, data=data16),
    "send-three-receives": setup(recvs=3) + b"".join(frame(SEND, length=n, data=bytes(n)) for n in (4096, 3100, 64)),
    "send-too-long": setup(recvs=1) + frame(SEND, length=5000, data=b"x" * 64),
    "send-no-receive": setup(recvs=0) + frame(SEND, length=16, data=data16) + frame(SEND, flags=IMM, imm=7),
    "send-invalidate-solicited": setup() + frame(SEND, flags=INVALIDATE | SOLICITED, key=K_WIN, length=8, data=bytes(8)),
    "write": setup() + frame(WRITE, addr=A_OFF, off=0x100, length=64, data=b"w" * 64),
    "write-imm": setup() + frame(WRITE, flags=IMM, addr=A_OFF, off=0x200, length=32, imm=9, data=b"i" * 32),
    "write-end-of-window": setup() + frame(WRITE, addr=A_END, off=16, length=16, data=data16),
    "write-past-end": setup() + frame(WRITE, addr=A_END, off=8, length=16, data=data16),
    "write-read-only": setup() + frame(WRITE, key=K_RO, length=8, data=bytes(8)),
    "write-other-pz": setup() + frame(WRITE, key=K_OTHER, length=8, data=bytes(8)),
    "write-zero-based": setup() + frame(WRITE, key=K_ZB, addr=A_RAW, raddr=0x40, length=8, data=bytes(8)),
    "write-freed-key": setup() + frame(WRITE, key=K_FREED, length=8, data=bytes(8)),
    "write-raw-key": setup() + frame(WRITE, key=K_RAW, rkey=0xdeadbeef, addr=A_RAW, raddr=0x1000, length=8, data=bytes(8)),
    "read": setup() + frame(READ, length=128),
    "read-read-only": setup() + frame(READ, key=K_RO, addr=A_OFF, off=64, length=256),
    "cmp-swap": setup() + frame(CMP_SWAP, length=8, a=0, b=42),
    "fetch-add": setup() + frame(FETCH_ADD, addr=A_OFF, off=8, length=8, a=5),
    "atomic-unaligned": setup() + frame(FETCH_ADD, addr=A_OFF, off=3, length=8, a=5),
    "response-ack": setup(requests=True) + frame(RESPONSE, length=256, data=b"r" * 256) + frame(ACK, acks=2),
    "response-error": setup(requests=True) + frame(RESPONSE, status=6),
    "ack-too-many": setup(requests=True) + frame(ACK, acks=5),
    "ready-again": setup() + frame(READY),
    "disconnect": setup() + frame(WRITE, length=8, data=bytes(8)) + frame(DISCONNECT),
    "many-writes": setup() + b"".join(frame(WRITE, addr=A_OFF, off=i * 64, length=64, data=bytes([i]) * 64) for i in range(20)),
    "cma-write": setup(cma=True) + frame(WRITE, flags=CMA, addr=A_OFF, off=0x400, segs=[(0, 300), (4096, 200)]),
    "cma-send-shm": setup(cma=True) + frame(SEND, flags=CMA | SHM, segs=[(100, 1000)]),
    "cma-read": setup(cma=True) + frame(READ, flags=CMA, addr=A_OFF, off=0x800, segs=[(8192, 512)]),
    "cma-read-shm": setup(cma=True) + frame(READ, flags=CMA | SHM, segs=[(0, 64)]),
    # A send the peer says it placed into our receive (same host, recvring.rs): on the agreed
    # path, then the same receive named again; off it; with immediate data and no bytes.
    "placed-send": setup(cma=True) + frame(SEND, flags=PLACED, length=8) + frame(SEND, flags=PLACED, length=8),
    "placed-send-no-cma": setup() + frame(SEND, flags=PLACED, length=8),
    "placed-send-imm": setup(cma=True) + frame(SEND, flags=PLACED | IMM | SOLICITED, imm=5) + frame(WRITE, length=8, data=bytes(8)),
    "stalled-send-then-receive": setup(recvs=0) + frame(SEND, length=16, data=data16) + frame(WRITE, flags=IMM, addr=A_OFF, off=64, length=8, data=bytes(8))
    + act(PAUSE, POST_RECV, POST_RECV),
    "window-write-invalidate": setup(recvs=2) + act(BIND_RW) + frame(WRITE, key=K_MW, addr=A_OFF, off=8, length=8, data=bytes(8))
    + frame(SEND, flags=INVALIDATE, key=K_MW, length=4, data=bytes(4)) + frame(WRITE, key=K_MW, length=8, data=bytes(8)),
    "window-read-only": setup() + act(BIND_R) + frame(READ, key=K_MW, length=64) + frame(WRITE, key=K_MW, length=8, data=bytes(8)),
    "window-atomic": setup() + act(BIND_ALL) + frame(FETCH_ADD, key=K_MW, length=8, a=1),
    "reads-deferred": setup(rd_in=2) + act(POST_READS) + b"".join(frame(RESPONSE, length=256, data=bytes(256)) for _ in range(8)),
    "disconnect-graceful-outstanding": setup(requests=True) + act(DISCONNECT_GRACEFUL) + frame(RESPONSE, length=256, data=bytes(256))
    + frame(ACK, acks=2),
    "disconnect-abrupt": setup(requests=True) + frame(WRITE, length=8, data=bytes(8)) + act(DISCONNECT_ABRUPT) + frame(WRITE, length=8, data=bytes(8)),
    "raw-after-handshake": setup(mode=1) + hdr(21, acks=1) + hdr(10, payload=8) + bytes(8),
    "raw-instead-of-ready": setup(mode=2) + hdr(4, payload=len(hello())) + hello(),
    # From the very start: the greeting, then a HELLO for qualifier 0, which is not the PSP's
    # (refused unseen), READY and DISCONNECT.
    "raw-hello": setup(mode=3) + greeting() + hdr(1, payload=len(hello())) + hello() + hdr(4, payload=len(hello())) + hello() + hdr(30),
    "raw-hello-bad-version": setup(mode=3) + greeting() + hdr(1, payload=len(hello())) + hello()[:4] + b"\xff\xff\xff\xff" + hello()[8:],
    "raw-greeting-only": setup(mode=3) + greeting(),
    "raw-greeting-old-version": setup(mode=3) + greeting(version=7) + hdr(1, payload=len(hello())) + hello(),
    "raw-greeting-answer-role": setup(mode=3) + greeting(role=2),
    "raw-old-hello": setup(mode=3) + hdr(1, payload=24) + struct.pack("<IIIIQ", MAGIC, 7, 0, 4, 0),
}

os.makedirs(out, exist_ok=True)
for f in os.listdir(out):
    os.remove(os.path.join(out, f))
for name, b in sorted(seeds.items()):
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
print(f"{len(seeds)} seeds in {os.path.relpath(out)} (wire version {VERSION})")
