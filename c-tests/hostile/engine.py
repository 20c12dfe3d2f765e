"""The progress-engine cases of hostile.py (imported by it, register() adds them): one peer
misbehaves on its connection while an honest peer measures how long the target takes to
answer an 8-byte RDMA READ on a connection of its own. However the target drives its
connections (a thread each, or a fixed number of threads for all), one peer's traffic must
never hold another's up:
- a peer that streams small RDMA writes as fast as its socket takes them, and never reads
  their acknowledgements (an engine that reads a connection until it runs dry never comes
  back to the others);
- a peer that sends a write's header and then its payload one byte at a time (an engine that
  waits for a frame to arrive whole waits on that peer);
- both at once, from several connections.
"""
import socket
import threading
import time

PROBES = 40  # reads the honest peer times
PROBE_LIMIT = 0.25  # seconds the slowest of them may take (a loaded 2-core host, ASan off)


def register(h):
    """Adds the engine cases to hostile.py's (`h` is its module)."""

    def probe(s, t):
        """The slowest of PROBES 8-byte RDMA READs of the target's window on `s`, one at a time
        (None: one was not answered with its data within 5 s)."""
        read = h.hdr(h.OP_READ, length=8, raddr=t.info["win"], rkey=t.info["rkey"])
        worst = 0.0
        s.settimeout(5)
        for _ in range(PROBES):
            t0 = time.monotonic()
            s.sendall(read)
            try:
                while True:
                    hd, body = h.recv_msg(s)
                    if hd[0] == h.OP_RESPONSE:
                        break
            except (OSError, EOFError):
                return None
            if hd[2] != 0 or len(body) != 8:
                return None
            worst = max(worst, time.monotonic() - t0)
        return worst

    class Misbehaving:
        """A connection of ours that runs `act(socket, stop)` on a thread until stopped."""

        def __init__(self, port, act):
            self.s, _ = h.connect(port)
            self.stop = threading.Event()
            self.t = threading.Thread(target=self.run, args=(act,), daemon=True)
            self.t.start()

        def run(self, act):
            try:
                act(self.s, self.stop)
            except OSError:
                pass

        def close(self):
            self.stop.set()
            self.t.join(10)
            self.s.close()

    def streamer(t):
        def act(s, stop):
            # Valid 64-byte RDMA writes to the target's window, a megabyte of them at a time, as
            # fast as they go; their acknowledgements are never read.
            write = h.hdr(h.OP_WRITE, payload=64, length=64, raddr=t.info["win"], rkey=t.info["rkey"]) + b"F" * 64
            chunk = write * ((1 << 20) // len(write))
            s.settimeout(0.5)
            while not stop.is_set():
                try:
                    s.sendall(chunk)
                except socket.timeout:
                    continue
        return act

    def trickler(t):
        def act(s, stop):
            # A 64 KiB write to the target's window, its payload one byte every 20 ms.
            s.sendall(h.hdr(h.OP_WRITE, payload=64 << 10, length=64 << 10, raddr=t.info["win"], rkey=t.info["rkey"]))
            while not stop.wait(0.02):
                s.sendall(b"E")
        return act

    def attack(t, port, acts):
        """The honest peer's slowest read while `acts` misbehave, each on a connection of its
        own; then the target must still be whole."""
        honest, _ = h.connect(port)
        bad = []
        try:
            if probe(honest, t) is None:
                return False, "the honest peer's reads failed before any attack"
            bad = [Misbehaving(port, act) for act in acts]
            time.sleep(0.5)
            worst = probe(honest, t)
            if worst is None:
                return False, "an honest read was not answered while another peer misbehaved"
            if worst > PROBE_LIMIT:
                return False, f"the slowest honest read took {worst * 1000:.0f} ms (at most {PROBE_LIMIT * 1000:.0f})"
        finally:
            for b in bad:
                b.close()
            honest.close()
        return h.target_state(t, forbid_win=None)

    @h.case("engine_streamer_starves_nobody")
    def _(t, port):
        """A peer streams small writes without pause: the honest peer's reads are answered
        promptly all the same."""
        return attack(t, port, [streamer(t)])

    @h.case("engine_trickler_holds_nobody")
    def _(t, port):
        """A peer sends a write's header, then its payload a byte at a time: the honest peer's
        reads are answered promptly all the same."""
        return attack(t, port, [trickler(t)])

    @h.case("engine_mixed_misbehaviour")
    def _(t, port):
        """Two streamers and three tricklers at once."""
        return attack(t, port, [streamer(t), streamer(t)] + [trickler(t)] * 3)
