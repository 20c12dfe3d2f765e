"""The active-handshake and IA-port cases of hostile.py (imported by it, register() adds
them). We play the server a dat2 client (target.c client) connects to, and misbehave at each
stage of its handshake (src/device/soft/qp/opening.rs): the greeting's answer, the answer to
HELLO, ESTABLISHED. Whatever we do, the client's connect ends with one connection event of
the right kind, in time, and leaves no descriptor behind; what we send after ESTABLISHED
reaches its reader intact. And an IA's ports (listener.rs) close with the IA.
"""
import os
import socket
import struct
import time


def register(h):
    """Adds the handshake cases to hostile.py's (`h` is its module)."""

    def fds(c):
        """The client's open descriptors (None when it is gone)."""
        try:
            return len(os.listdir(f"/proc/{c.info['pid']}/fd"))
        except OSError:
            return None

    def idle_fds():
        """The descriptors of a client whose connect failed at once (refused): what a client
        holds with no connection."""
        c = h.Proc("client", "1", "127.0.0.1", "1")
        try:
            c.wait_event(2)
            return fds(c)
        finally:
            c.stop()

    def reset(s):
        """Ends `s` with a reset (RST), not a FIN."""
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()

    def to_stage(ls, stage):
        """Accepts the client's connection and plays the server up to `stage`: "greeting" (its
        greeting read, not answered), "answer" (its HELLO read, not answered), "ready" (its
        READY read, ESTABLISHED not sent)."""
        s, _ = ls.accept()
        s.settimeout(10)
        if stage == "greeting":
            h.recv_exact(s, 48)
            return s
        h.answer_greeting(s)
        hd, _ = h.recv_msg(s)
        if hd[0] != h.OP_HELLO:
            raise RuntimeError(f"the client sent op {hd[0]}, not HELLO")
        if stage == "answer":
            return s
        s.sendall(h.message(h.OP_ACCEPT, h.hello()))
        hd, _ = h.recv_msg(s)
        if hd[0] != h.OP_READY:
            raise RuntimeError(f"the client sent op {hd[0]}, not READY")
        return s

    @h.case("active_handshake_peer_ends_each_stage", server=False)
    def _(t, port):
        """At each stage of the client's handshake we close the connection, or reset it. The
        client hears at once: NON_PEER_REJECTED while greeting or awaiting the answer to
        HELLO; once it sent READY (we accepted), ESTABLISHED and then the connection's end.
        No second event comes, and the connection's descriptor is closed."""
        want = {"greeting": ["NON_PEER_REJECTED"], "answer": ["NON_PEER_REJECTED"], "ready": ["ESTABLISHED", "end"]}
        for k, (stage, how) in enumerate((st, hw) for st in want for hw in ("close", "reset")):
            ls = h.listener("127.0.0.1", port + 10 + k)
            c = h.Proc("client", str(port + 10 + k), env={"TARGET_PDATA": h.PRIVATE})
            try:
                s = to_stage(ls, stage)
                if how == "close":
                    s.close()
                else:
                    reset(s)
                started = time.time()
                events = [c.wait_event(3) for _ in want[stage]]
                took = time.time() - started
                events = ["end" if e in ("DISCONNECTED", "BROKEN") and w == "end" else e for e, w in zip(events, want[stage])]
                if events != want[stage] or took > 2:
                    return False, f"{how} at {stage}: events {events} after {took:.1f} s, wanted {want[stage]}"
                extra = c.wait_event(0.5)
                if extra:
                    return False, f"{how} at {stage}: a second event {extra}"
                if stage == "ready":
                    # The connection is over: the EP goes, and with it the stream.
                    if c.cmd("epfree", "epfreed ") is None:
                        return False, f"{how} at {stage}: no epfree"
                ls.close()
                before, base = fds(c), idle_fds()
                if before is None or base is None or before > base:
                    return False, f"{how} at {stage}: the client holds {before} descriptors, a client whose connect was refused {base}"
            finally:
                c.stop()
                ls.close()
        return True, ""

    @h.case("active_handshake_trickled_then_data", server=False)
    def _(t, port):
        """We answer the client's greeting, HELLO and READY one byte at a time, and send a
        16-byte SEND in the same write as the last byte of ESTABLISHED. The client hears
        ESTABLISHED and its first receive completes with those 16 bytes, exactly: only each
        message's bytes are read by the handshake, the rest is the reader's."""
        ls = h.listener("127.0.0.1", port)
        c = h.Proc("client", str(port))
        try:
            s, _ = ls.accept()
            s.settimeout(10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def trickle(data):
                for b in data:
                    s.sendall(bytes([b]))
                    time.sleep(0.002)

            if h.recv_exact(s, 48) != h.greeting(h.ASK):
                return False, "no greeting"
            trickle(h.greeting(h.ANSWER))
            hd, _ = h.recv_msg(s)
            if hd[0] != h.OP_HELLO:
                return False, f"the client sent op {hd[0]}"
            trickle(h.message(h.OP_ACCEPT, h.hello()))
            hd, _ = h.recv_msg(s)
            if hd[0] != h.OP_READY:
                return False, f"the client sent op {hd[0]} instead of READY"
            est = h.hdr(h.OP_ESTABLISHED)
            trickle(est[:-1])
            body = b"after-established"[:16]
            s.sendall(est[-1:] + h.hdr(h.OP_SEND, payload=16, length=16) + body)
            ev = c.wait_event()
            if ev != "ESTABLISHED":
                return False, f"the client's event {ev}"
            d = h.wait_dto(c, 0)
            if not d or int(d["status"]) != 0 or int(d["len"]) != 16:
                return False, f"the first receive's completion: {d}"
            peek = c.cmd("peek 4096 16", "peek ")
            if peek is not None and peek.split()[1] != body.hex():
                return False, f"the receive holds {peek}"
            return h.target_state(c, forbid_win=None)
        finally:
            c.stop()
            ls.close()

    @h.case("active_handshake_oversized_answer", server=False)
    def _(t, port):
        """Our answer to HELLO announces a payload of 1 GiB (then 289 bytes, one past the
        largest HELLO), or is no answer at all (a SEND): the client ends its connect at once
        with NON_PEER_REJECTED, reading and allocating nothing of it."""
        for k, head in enumerate((h.hdr(h.OP_ACCEPT, payload=1 << 30), h.hdr(h.OP_ACCEPT, payload=289) + bytes(289),
                                  h.message(h.OP_SEND, b"x" * 16))):
            ls = h.listener("127.0.0.1", port + k)
            c = h.Proc("client", str(port + k), address_space=h.TARGET_AS)
            try:
                s = to_stage(ls, "answer")
                s.sendall(head)
                started = time.time()
                ev = c.wait_event(3)
                if ev != "NON_PEER_REJECTED" or time.time() - started > 2:
                    return False, f"answer {k}: the client's event {ev} after {time.time() - started:.1f} s"
                s.close()
                ok, why = h.target_state(c, forbid_win=None)
                if not ok:
                    return ok, why
            finally:
                c.stop()
                ls.close()
        return True, ""

    @h.case("active_handshake_disconnect_each_stage", server=False)
    def _(t, port):
        """While the client's handshake waits for us at each stage (and while its connect is
        refused and retried), its consumer calls dat_ep_disconnect: it returns at once, the
        consumer hears DISCONNECTED once and nothing after, our end of the connection sees it
        end, and dat_ep_free then finds nothing left: the client's descriptors come back to
        those of a client that never connected."""
        for k, stage in enumerate(("refused", "greeting", "answer", "ready")):
            p = port + 20 + k
            ls = h.listener("127.0.0.1", p) if stage != "refused" else None
            c = h.Proc("client", str(p))
            s = None
            try:
                if ls:
                    s = to_stage(ls, stage)
                line = c.cmd("disconnect", "disconnected ")
                if line is None or int(dict(w.split("=", 1) for w in line.split()[1:])["rc"], 0) != 0:
                    return False, f"{stage}: dat_ep_disconnect: {line}"
                ev = c.wait_event(2)
                if ev != "DISCONNECTED":
                    return False, f"{stage}: the client's event {ev}"
                extra = c.wait_event(1.5)
                if extra:
                    return False, f"{stage}: after DISCONNECTED, {extra}"
                if s and not h.peer_closed(s):
                    return False, f"{stage}: our end of the connection stayed open after the disconnect"
                if c.cmd("epfree", "epfreed ") is None:
                    return False, f"{stage}: no epfree"
                n, base = fds(c), idle_fds()
                if n is None or base is None or n > base:
                    return False, f"{stage}: after disconnect and free the client holds {n} descriptors, one that never connected {base}"
                ok, why = h.target_state(c, forbid_win=None)
                if not ok:
                    return ok, why
            finally:
                c.stop()
                if s:
                    s.close()
                if ls:
                    ls.close()
        return True, ""

    @h.case("active_handshake_answer_never_comes", server=False)
    def _(t, port):
        """We take the client's greeting and HELLO and never answer, reading nothing more: its
        connect (timeout 10 s, target.c) ends with TIMED_OUT when that timeout runs out, not
        before and not much after, and its connection to us is closed then."""
        ls = h.listener("127.0.0.1", port)
        started = time.time()
        c = h.Proc("client", str(port))
        try:
            s = to_stage(ls, "answer")
            ev = c.wait_event(14)
            took = time.time() - started
            if ev != "TIMED_OUT" or not 9 <= took <= 12:
                return False, f"the client's event {ev} after {took:.1f} s (its timeout: 10 s)"
            if not h.peer_closed(s, drain=True):
                return False, "the connection stayed open after TIMED_OUT"
            s.close()
            return h.target_state(c, forbid_win=None)
        finally:
            c.stop()
            ls.close()

    @h.case("ia_close_closes_its_ports")
    def _(t, port):
        """The target's PSP listens on `port` and its IA on its own port. An honest peer
        connects (and stays connected); the target frees everything and closes its IA: from
        then on both ports refuse connections, and a connection that was half-open on the IA
        port (greeted, no HELLO yet) is closed."""
        ia_port = t.info["ia_port"]
        s, info = h.connect(ia_port, qual=port)
        if s is None:
            return False, f"the honest connect was refused: {info}"
        if t.wait_event() != "ESTABLISHED":
            return False, f"the target did not accept: {t.events}"
        half = h.dial(ia_port)
        line = t.cmd("close", "closed ")
        if line is None or int(dict(w.split("=", 1) for w in line.split()[1:3])["rc"], 0) != 0 or " at=" in line:
            return False, f"the IA did not close: {line}"
        try:
            for p in (ia_port, port):
                try:
                    socket.create_connection(("127.0.0.1", p), timeout=2).close()
                    return False, f"port {p} ({'the IA' if p == ia_port else 'the PSP'}'s) still accepts connections after dat_ia_close"
                except ConnectionRefusedError:
                    pass
            if not h.peer_closed(half):
                return False, "a half-open connection on the IA port stayed open after dat_ia_close"
        finally:
            half.close()
            s.close()
        return True, ""
