"""Built-in self-test: golden model of the traffic generator and checker (``rtl/bist.py``).

Pure numpy. Formats, seeds and parameter checks are declared in :mod:`fusionfabric.formats.bist`.
The RTL (:mod:`fusionfabric.rtl.bist`) derives its LFSR and filler XOR networks from the
recurrence; the matrices here are probed from the bit-serial reference :func:`lfsr_step` (a
test compares the two), and the checker's counters follow exactly the rules below, so
the model predicts the generator's flits bit for bit and the checker's counters count
for count.

LFSR
----
Every random choice comes from the PRBS31 polynomial x^31 + x^28 + 1 (ITU-T O.150, the
project's PRBS convention of :mod:`fusionfabric.sim.prbs`): a Fibonacci LFSR whose 31-bit state holds
the last 31 bits in time, bit k = ``b[t-1-k]`` (bit 0 the newest), stepping
``b[t] = b[t-31] ^ b[t-28]``. "Advancing by k" runs k steps; the hardware does it in one
cycle through a GF(2) matrix (:func:`advance_matrix`) probed from the per-bit reference
:func:`lfsr_step`.

Seeds: the initial state of LFSR ``stream`` of port ``port`` is
``1 + splitmix64(seed * 2**16 + port * 4 + stream) mod (2**31 - 1)`` (``seed_state`` of
:mod:`fusionfabric.formats.bist`;
SplitMix64, Steele, Lea, Flood, OOPSLA 2014), never zero.

Generator (``TrafficGen``, block ``bist-gen``)
---------------------------------------------
- Packet LFSR (stream 0): advanced by 31 bits once per packet, so packet k (k = 0, 1, ...)
  uses ``r_k``, the state after k + 1 advances (31 fresh bits). Destination: ``uniform``:
  ``((r_k & 0xFFFF) * n_ports) >> 16``; ``permutation``: ``(port + offset) % n_ports``.
  Length in flits: ``1 + ((((r_k >> 16) & 0xFF) * max_len) >> 8)``, in 1 .. max_len.
- Load LFSR (stream 1): advanced by 8 bits every cycle; when the generator may start a
  packet it does so iff the 8 newest bits, as an integer, are ``< load`` (load 0 .. 256,
  so the probability is load/256). This only decides *when*; the flit sequence does not
  depend on it, nor on backpressure.
- A sequence number per destination (``BIST_SEQ_BITS`` = 16, wrapping), taken and incremented
  when a packet starts.
- Flit ``b`` of a packet: ``kind`` = UNICAST, ``dest``, ``src`` = port, ``chunk`` = 0,
  ``first`` = (b == 0), ``last`` = (b == length - 1), and ``data`` = :func:`make_data`.

Data signature
--------------
``data`` bits 0..39 hold the signature :data:`SIGNATURE` (LSB first: ``beat`` 8, ``seq``
16, ``dest`` 8, ``src`` 8); the ``data_width - 40`` bits above hold the filler, an affine
GF(2) function of the signature: ``s = (sig ^ (sig >> 31) ^ FILL_SALT) & (2**31 - 1)``
seeds a PRBS31 LFSR, which runs ``FILL_WARMUP`` = 62 steps, then emits one filler bit per
step (filler bit 0 first). The checker recomputes the whole word from the flit's ``src``,
its own port, the packet's sequence number and the beat index, so a flipped bit anywhere
in ``data`` is caught. ``data_width`` must be >= 40; from 62 bits on, every signature bit
feeds at least one filler bit (so a corrupted sequence number is a data error, not a
silent resynchronisation). In hardware each filler bit is an XOR of about 4 to 8
signature bits.

Checker (``TrafficCheck``, block ``bist-check``)
-----------------------------------------------
For every accepted flit, in order (``in_pkt``, ``beat``, ``pkt_seq`` are its state):

1. ``starts = first or not in_pkt``. Framing error if ``first and in_pkt`` (the previous
   packet lost its ``last``) or ``not first and not in_pkt`` (a packet without ``first``:
   the flit is taken as its beat 0). ``beat`` = 0 if ``starts`` else ``beat + 1`` (mod
   256).
2. ``seq`` = the signature's ``seq`` if ``starts`` else ``pkt_seq``. The flit is good iff
   ``data == make_data(data_width, src, port, seq, beat)`` with ``src`` the flit's sideband
   ``src`` (< n_ports), ``kind`` is UNICAST and ``dest == port``; otherwise one data error.
3. On a start with ``src < n_ports``: if the flit is good, a sequence error if
   ``seq != expected[src]``, then ``expected[src] = seq + 1``; if it is not good (its
   sequence number cannot be trusted), ``expected[src] += 1``. ``packets`` counts starts.
4. ``flits`` counts every flit; ``in_pkt = not last``.

So one dropped packet gives one sequence error (a gap), a duplicated one gives one, a
flipped data bit one data error, a lost ``first`` or ``last`` one framing error; two
swapped packets give three sequence errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusionfabric.formats.bist import (BEAT_BITS, BIST_SEQ_BITS, COUNTER_MAX, FILL_SALT,
                                      FILL_WARMUP, LFSR_ORDER, LFSR_TAP, PORT_BEATS_PER_CODE,
                                      PORT_DATA_BITS, PORT_FLIP_BIT, PORT_LENGTHS, PORT_STREAMS,
                                      SIG_BITS, SIGNATURE, check_params, check_port_gen_params,
                                      check_port_params, check_width, seed_state)
from fusionfabric.formats.switch import Kind, switch_flit

__all__ = ["lfsr_step", "advance_matrix", "apply_matrix", "filler_matrix", "filler_ref",
           "make_data", "make_data_array", "GenPacket", "TrafficGenModel",
           "TrafficCheckModel", "CheckCounters"]

_MASK31 = (1 << LFSR_ORDER) - 1



# -- LFSR ------------------------------------------------------------------------------------
def lfsr_step(state: int, nbits: int) -> tuple[int, list[int]]:
    """Per-bit PRBS31 reference: run ``nbits`` steps from ``state``; return
    ``(state_after, bits)`` with ``bits`` in time order."""
    state = int(state) & _MASK31
    out = []
    for _ in range(nbits):
        b = ((state >> (LFSR_ORDER - 1)) ^ (state >> (LFSR_TAP - 1))) & 1
        out.append(b)
        state = ((state << 1) | b) & _MASK31
    return state, out


def advance_matrix(k: int) -> np.ndarray:
    """The 31×31 GF(2) matrix A with ``state_after_k_steps = A @ state`` (bit vectors,
    row i = new bit i), probed column by column from :func:`lfsr_step`."""
    if k < 0:
        raise ValueError(f"k={k} must be >= 0")
    a = np.zeros((LFSR_ORDER, LFSR_ORDER), dtype=np.uint8)
    for j in range(LFSR_ORDER):
        after, _ = lfsr_step(1 << j, k)
        for i in range(LFSR_ORDER):
            a[i, j] = (after >> i) & 1
    return a


def apply_matrix(matrix: np.ndarray, value: int) -> int:
    """``matrix @ bits(value)`` over GF(2), as an integer (row i → bit i)."""
    bits = np.array([(int(value) >> j) & 1 for j in range(matrix.shape[1])], dtype=np.uint8)
    res = (matrix.astype(np.int64) @ bits) & 1
    return int(sum(int(b) << i for i, b in enumerate(res)))


# -- data signature and filler ---------------------------------------------------------------
def _fill_seed(sig: int) -> int:
    return (sig ^ (sig >> LFSR_ORDER) ^ FILL_SALT) & _MASK31


def filler_ref(data_width: int, sig: int) -> int:
    """Per-bit reference of the filler (bits above the signature) of signature ``sig``."""
    check_width(data_width)
    n = data_width - SIG_BITS
    state, _ = lfsr_step(_fill_seed(int(sig)), FILL_WARMUP)
    _, bits = lfsr_step(state, n)
    return sum(b << i for i, b in enumerate(bits))


def filler_matrix(data_width: int) -> tuple[np.ndarray, int]:
    """``(M, c)``: filler bits = ``M @ sig_bits ^ c`` over GF(2); M is
    ``(data_width - 40) × 40``, c an integer. Probed from :func:`filler_ref`."""
    check_width(data_width)
    n = data_width - SIG_BITS
    c = filler_ref(data_width, 0)
    m = np.zeros((n, SIG_BITS), dtype=np.uint8)
    for j in range(SIG_BITS):
        col = filler_ref(data_width, 1 << j) ^ c
        for i in range(n):
            m[i, j] = (col >> i) & 1
    return m, c


_FILLER_CACHE: dict[int, tuple[np.ndarray, int]] = {}


def _filler(data_width: int) -> tuple[np.ndarray, int]:
    if data_width not in _FILLER_CACHE:
        _FILLER_CACHE[data_width] = filler_matrix(data_width)
    return _FILLER_CACHE[data_width]


def make_data(data_width: int, src: int, dest: int, seq: int, beat: int) -> int:
    """The ``data`` word of beat ``beat`` of packet ``seq`` from ``src`` to ``dest``."""
    sig = SIGNATURE.pack(beat=int(beat) % (1 << BEAT_BITS), seq=int(seq) % (1 << BIST_SEQ_BITS),
                         dest=dest, src=src)
    m, c = _filler(data_width)
    return sig | (apply_matrix(m, sig) ^ c) << SIG_BITS if m.shape[0] else sig


def make_data_array(data_width: int, src, dest, seq, beat) -> list[int]:
    """Vectorized :func:`make_data` over equal-length integer arrays."""
    cols = {"src": src, "dest": dest, "seq": seq, "beat": beat}
    sig = np.zeros(len(np.asarray(src)), dtype=np.int64)
    for name, width in SIGNATURE:
        col = np.asarray(cols[name], dtype=np.int64) % (1 << width)
        sig |= col << SIGNATURE.offsets[name]
    m, c = _filler(data_width)
    if not m.shape[0]:
        return [int(s) for s in sig]
    bits = ((sig[:, None] >> np.arange(SIG_BITS)) & 1).astype(np.int64)
    fill = (bits @ m.T.astype(np.int64)) & 1
    packed = np.packbits(fill.astype(np.uint8), axis=1, bitorder="little")
    return [int(s) | ((int.from_bytes(row.tobytes(), "little") ^ c) << SIG_BITS)
            for s, row in zip(sig, packed)]


@dataclass(frozen=True)
class GenPacket:
    dest: int
    seq: int
    length: int


class TrafficGenModel:
    """The packets and flits a ``TrafficGen`` with these parameters emits, in order.

    Parameters are those of :class:`fusionfabric.rtl.bist.TrafficGen`. :meth:`packets` and
    :meth:`flits` continue where the previous call stopped.
    """

    def __init__(self, data_width: int = 64, n_ports: int = 4, port: int = 0,
                 max_len: int = 4, pattern: str = "uniform", offset: int = 1,
                 seed: int = 1):
        check_params(data_width, n_ports, port, max_len, pattern, offset, seed)
        self.data_width, self.n_ports, self.port = data_width, n_ports, port
        self.max_len, self.pattern, self.offset, self.seed = max_len, pattern, offset, seed
        self.layout = switch_flit(data_width)
        self.state = seed_state(seed, port, 0)
        self.next_seq = [0] * n_ports

    def packets(self, n: int) -> list[GenPacket]:
        out = []
        for _ in range(int(n)):
            self.state, _ = lfsr_step(self.state, LFSR_ORDER)
            r = self.state
            if self.pattern == "uniform":
                dest = ((r & 0xFFFF) * self.n_ports) >> 16
            else:
                dest = (self.port + self.offset) % self.n_ports
            length = 1 + ((((r >> 16) & 0xFF) * self.max_len) >> 8)
            seq = self.next_seq[dest]
            self.next_seq[dest] = (seq + 1) % (1 << BIST_SEQ_BITS)
            out.append(GenPacket(dest, seq, length))
        return out

    def flits_of(self, packets) -> list[int]:
        """Packed ``switch_flit`` words of ``packets`` (vectorized data)."""
        dest, seq, beat, first, last = [], [], [], [], []
        for p in packets:
            for b in range(p.length):
                dest.append(p.dest)
                seq.append(p.seq)
                beat.append(b)
                first.append(int(b == 0))
                last.append(int(b == p.length - 1))
        data = make_data_array(self.data_width, [self.port] * len(dest), dest, seq, beat)
        return [self.layout.pack(data=d, first=f, last=la, kind=int(Kind.UNICAST), dest=t,
                                 src=self.port, chunk=0)
                for d, f, la, t in zip(data, first, last, dest)]

    def flits(self, n_packets: int) -> list[int]:
        return self.flits_of(self.packets(n_packets))


# -- checker model ---------------------------------------------------------------------------
@dataclass
class CheckCounters:
    packets: int = 0
    flits: int = 0
    seq_errors: int = 0
    data_errors: int = 0
    framing_errors: int = 0
    expected: list[int] = field(default_factory=list)


def _sat(x: int) -> int:
    return min(x, COUNTER_MAX)


class TrafficCheckModel:
    """Counters of a ``TrafficCheck`` at ``port`` after the flits fed so far."""

    def __init__(self, data_width: int = 64, n_ports: int = 4, port: int = 0):
        check_port_params(data_width, n_ports, port)
        self.data_width, self.n_ports, self.port = data_width, n_ports, port
        self.layout = switch_flit(data_width)
        self.c = CheckCounters(expected=[0] * n_ports)
        self.in_pkt = False
        self.beat = 0
        self.pkt_seq = 0

    def feed(self, words) -> CheckCounters:
        c = self.c
        for w in words:
            f = self.layout.unpack(w)
            first, last = f["first"], f["last"]
            starts = bool(first) or not self.in_pkt
            if (first and self.in_pkt) or (not first and not self.in_pkt):
                c.framing_errors = _sat(c.framing_errors + 1)
            self.beat = 0 if starts else (self.beat + 1) % (1 << BEAT_BITS)
            sig = SIGNATURE.unpack(f["data"] & ((1 << SIG_BITS) - 1))
            seq = sig["seq"] if starts else self.pkt_seq
            src = f["src"]
            good = (src < self.n_ports and f["kind"] == Kind.UNICAST and f["dest"] == self.port
                    and f["data"] == make_data(self.data_width, src, self.port, seq, self.beat))
            if not good:
                c.data_errors = _sat(c.data_errors + 1)
            if starts:
                c.packets = (c.packets + 1) & COUNTER_MAX
                self.pkt_seq = seq
                if src < self.n_ports:
                    if good:
                        if seq != c.expected[src]:
                            c.seq_errors = _sat(c.seq_errors + 1)
                        c.expected[src] = (seq + 1) % (1 << BIST_SEQ_BITS)
                    else:
                        c.expected[src] = (c.expected[src] + 1) % (1 << BIST_SEQ_BITS)
            c.flits = (c.flits + 1) & COUNTER_MAX
            self.in_pkt = not last
        return c


# -- fusionfabric vectors bist-gen -----------------------------------------------------------
_GEN_DEFAULTS = {"data_width": 64, "n_ports": 4, "port": 0, "max_len": 4,
                 "pattern": "uniform", "offset": 1}


def _vectors_gen(params: dict, seed: int, count: int) -> dict:
    """The first ``count`` packets of a generator (``--set seed=`` overrides ``--seed``),
    each with its flits' fields; ``data`` as a hex string."""
    p = dict(_GEN_DEFAULTS)
    for key, text in params.items():
        if key not in {*_GEN_DEFAULTS, "seed"}:
            raise ValueError(f"unknown parameter {key!r} (known: "
                             f"{', '.join([*_GEN_DEFAULTS, 'seed'])})")
        if key == "pattern":
            p[key] = text
            continue
        try:
            p[key] = int(text, 0)
        except ValueError:
            raise ValueError(f"{key}={text!r} is not an integer") from None
    p.setdefault("seed", int(seed) & 0xFFFF_FFFF)
    g = TrafficGenModel(**p)
    lay = switch_flit(p["data_width"])
    out = []
    for k, pk in enumerate(g.packets(count)):
        flits = [lay.unpack(w) for w in g.flits_of([pk])]
        for f in flits:
            f["data"] = f"{f['data']:#x}"
        out.append({"packet": k, "dest": pk.dest, "seq": pk.seq, "length": pk.length,
                    "flits": flits})
    return {"params": {**p, "lfsr": "x^31 + x^28 + 1 (PRBS31)",
                       "signature": "data[39:0] = src:8 dest:8 seq:16 beat:8 (MSB..LSB)"},
            "vectors": out}


VECTORS = {"bist-gen": _vectors_gen}


# -- fabric BIST at the accelerator port (rtl/fabric/bist.py) ----------------------------------
@dataclass(frozen=True)
class PortMessage:
    dest: int
    seq: int
    code: int           # 2-bit length code: PORT_LENGTHS[code] bytes

    @property
    def beats(self) -> int:
        return PORT_BEATS_PER_CODE * (self.code + 1)


class PortGenModel:
    """The WRITE messages a ``fusionfabric.rtl.fabric.bist.PortTrafficGen`` issues, in order.

    Message k uses ``r_k``, the message LFSR's state after k + 1 advances of 31 bits
    (stream 3 of :func:`seed_state`): destination ``d = ((r_k & 0xFFFF) * (n - 1)) >> 16``,
    plus one if ``d >= endpoint`` (every other endpoint, never itself); length code
    ``(((r_k >> 16) & 0xFF) * n_codes) >> 8`` with ``n_codes`` = the codes up to
    ``max_bytes``. Sequence numbers count per destination (16 bits). Load, backpressure
    and the fabric do not change the sequence; a planted ``skip`` does (as documented in
    :data:`PORT_FAULTS`), a ``flip`` only changes data.
    """

    def __init__(self, n_endpoints: int = 2, endpoint: int = 0, max_bytes: int = 256,
                 seed: int = 1, fault: str = "none", fault_at: int = 0):
        check_port_gen_params(n_endpoints, endpoint, max_bytes, seed, fault, fault_at)
        self.n, self.endpoint, self.max_bytes, self.seed = n_endpoints, endpoint, max_bytes, seed
        self.fault, self.fault_at = fault, fault_at
        self.n_codes = PORT_LENGTHS.index(max_bytes) + 1
        self.state = seed_state(seed, endpoint, PORT_STREAMS["message"])
        self.next_seq = [0] * n_endpoints
        self.count = 0

    def messages(self, n: int) -> list[PortMessage]:
        """The next ``n`` messages (continues where the previous call stopped)."""
        out = []
        for _ in range(int(n)):
            self.state, _ = lfsr_step(self.state, LFSR_ORDER)
            r = self.state
            d = ((r & 0xFFFF) * (self.n - 1)) >> 16
            dest = d + (d >= self.endpoint)
            code = (((r >> 16) & 0xFF) * self.n_codes) >> 8
            skip = int(self.fault == "skip" and self.count == self.fault_at)
            seq = (self.next_seq[dest] + skip) % (1 << BIST_SEQ_BITS)
            self.next_seq[dest] = (seq + 1) % (1 << BIST_SEQ_BITS)
            out.append(PortMessage(dest, seq, code))
            self.count += 1
        return out

    def beats_of(self, msgs) -> list[int]:
        """``fusionfabric.sim.chiplet.PORT_BEAT`` words of ``msgs``: a WRITE with ``tag = seq & 0xFF``,
        ``addr = seq``, ``src`` = endpoint, data beat b = ``make_data(128, src, dest, seq,
        b)`` (``flip``: bit :data:`PORT_FLIP_BIT` inverted in message ``fault_at``). The
        caller numbers messages from 0 in ``msgs``' order for the planted flip."""
        from fusionfabric.formats.chiplet import PORT_BEAT, Opcode
        out = []
        for k, m in enumerate(msgs):
            flip = (1 << PORT_FLIP_BIT) if self.fault == "flip" and k == self.fault_at else 0
            data = make_data_array(PORT_DATA_BITS, [self.endpoint] * m.beats,
                                   [m.dest] * m.beats, [m.seq] * m.beats, range(m.beats))
            for d in data:
                out.append(PORT_BEAT.pack(data=d ^ flip, opcode=int(Opcode.WRITE),
                                          length=m.code, status=0, tag=m.seq & 0xFF,
                                          dest=m.dest, src=self.endpoint, op=0, dtype=0,
                                          rsvd0=0, chunk=0, addr=m.seq, rsvd1=0))
        return out


class PortCheckModel:
    """Counters of a ``fusionfabric.rtl.fabric.bist.PortTrafficCheck`` at ``endpoint`` after the
    ``fusionfabric.sim.chiplet.PORT_BEAT`` words fed so far (the rules of its docstring)."""

    def __init__(self, n_endpoints: int = 2, endpoint: int = 0):
        check_port_gen_params(n_endpoints, endpoint, PORT_LENGTHS[-1], 1)
        self.n, self.endpoint = n_endpoints, endpoint
        self.c = {"messages": 0, "beats": 0, "seq_errors": 0, "data_errors": 0,
                  "unexpected": 0, "rsp_beats": 0, "expected": [0] * n_endpoints}
        self.left = 0           # beats still to come of the current message
        self.beat = self.seq = self.src = self.write = 0

    def feed(self, words) -> dict:
        from fusionfabric.formats.chiplet import PORT_BEAT, Opcode
        no_data = (Opcode.NULL, Opcode.READ, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK)
        c = self.c
        for w in words:
            f = PORT_BEAT.unpack(w)
            starts = self.left == 0
            if starts:
                # sim.chiplet.data_slots, for any 4-bit opcode (as the RTL frames them)
                self.left = 1 if f["opcode"] in no_data else 4 * (f["length"] + 1)
                self.beat, self.seq, self.src = 0, f["addr"] & 0xFFFF, f["src"]
                self.write = f["opcode"] == Opcode.WRITE
                c["messages"] = (c["messages"] + 1) & COUNTER_MAX
                if not self.write:
                    c["unexpected"] = _sat(c["unexpected"] + 1)
            else:
                self.beat += 1
            self.left -= 1
            c["beats"] = (c["beats"] + 1) & COUNTER_MAX
            if not self.write:
                continue
            good = (self.src < self.n and f["dest"] == self.endpoint and f["data"]
                    == make_data(PORT_DATA_BITS, self.src, self.endpoint, self.seq, self.beat))
            if not good:
                c["data_errors"] = _sat(c["data_errors"] + 1)
            if starts and self.src < self.n:
                exp = c["expected"]
                if good:
                    if self.seq != exp[self.src]:
                        c["seq_errors"] = _sat(c["seq_errors"] + 1)
                    exp[self.src] = (self.seq + 1) % (1 << BIST_SEQ_BITS)
                else:
                    exp[self.src] = (exp[self.src] + 1) % (1 << BIST_SEQ_BITS)
        return c

    def feed_rsp(self, n_beats: int) -> dict:
        self.c["rsp_beats"] = _sat(self.c["rsp_beats"] + int(n_beats))
        return self.c


def port_traffic(n_endpoints: int, budget: int, max_bytes: int = 256, seed: int = 1,
                 faults: dict | None = None) -> dict:
    """What ``n_endpoints`` port generators with ``budget`` messages each send, per (source,
    destination): ``count[s][d]`` messages, ``beats[s][d]`` beats and ``next_seq[s][d]``
    (the generator's final sequence number to ``d``). ``faults``: ``{endpoint: (fault,
    fault_at)}``. The reference of the fabric BIST tests."""
    n = n_endpoints
    count = [[0] * n for _ in range(n)]
    beats = [[0] * n for _ in range(n)]
    next_seq = []
    msgs = []
    for s in range(n):
        fault, at = (faults or {}).get(s, ("none", 0))
        g = PortGenModel(n, s, max_bytes, seed, fault, at)
        ms = g.messages(budget)
        for m in ms:
            count[s][m.dest] += 1
            beats[s][m.dest] += m.beats
        next_seq.append(list(g.next_seq))
        msgs.append(ms)
    return {"count": count, "beats": beats, "next_seq": next_seq, "messages": msgs}


__all__ += ["PortMessage", "PortGenModel", "PortCheckModel", "port_traffic"]
