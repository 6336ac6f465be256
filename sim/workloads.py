"""Accelerator workloads for the fabric demo: what each endpoint sends and how it reacts.

Pure numpy + ml_dtypes (no amaranth, no cocotb). A :class:`Workload` is an event-driven
accelerator behaviour that a testbench (``tb/fabric``) or the pure-Python
:class:`IdealNetwork` plays on every endpoint of the fabric. It only sees
:class:`fusionfabric.sim.chiplet.Message` objects, exactly as the accelerator port carries them
(docs/protocol.md), so the same workload runs unchanged on the RTL fabric and here.
docs/demo.md describes the workloads, the orders of reduction and the checks.

Interface (the fabric testbench codes against these names)
---------------------------------------------------------

``Workload(n_endpoints, seed, **params)``
    Builds every endpoint's data from ``np.random.default_rng([seed, stream])``.
``config_writes() -> list[dict]``
    Group-table writes to make before traffic: each dict has ``group`` and every field
    of ``fusionfabric.sim.layouts.group_entry(n_endpoints)`` (``members, op, dtype, mode, root,
    native, valid``) as ints, i.e. ``config_layout(n)`` = ``{group, entry}`` with
    ``entry = group_entry(n).pack(**{k: v for k, v in d.items() if k != "group"})``.
``start(e) -> list[Message]``
    What endpoint ``e`` sends first (in this order).
``on_receive(e, msg) -> list[Message]``
    Endpoint ``e`` received ``msg`` (a request on ``o_req``: WRITE, RESULT, ...; or a
    response on ``o_rsp``: WRITE_ACK). Returns what it sends in response, in order:
    messages whose opcode is a response (``>= Opcode.READ_CPL``, e.g. WRITE_ACK) go on
    ``i_rsp``, the others on ``i_req``. ``src`` of a returned message is ``e`` (the node
    id of endpoint ``e`` is ``e``; the chiplet stamps it anyway). Protocol errors
    (unexpected opcode, a result delivered twice, an address out of range) raise
    :class:`AssertionError` at once, with the seed.
``done() -> bool``
    Every endpoint has everything it expects (and every WRITE is acknowledged).
``check()``
    Raises :class:`AssertionError` naming the seed, the endpoint and the first differing
    element if any endpoint's result differs from the numpy reference by one bit.
``stats() -> dict``
    ``bytes_moved`` (payload bytes the endpoints sent into the fabric), ``messages``
    (sent by endpoints), ``tx_bytes`` / ``rx_bytes`` / ``tx_messages`` / ``rx_messages``
    per endpoint (payload bytes: data of WRITE/REDUCE, valid beats of RESULT), and
    ``wire_bytes`` (sent, with 16-byte header slots and acknowledgements).
``result_record(w, cycles, replays, relocks, **extra) -> dict``
    The workload's part of the record the fabric testbench writes (as JSON) to
    ``test_args["result_file"]`` for ``fusionfabric demo``: it runs ``check()`` and never
    raises for a mismatch (``bit_exact`` False, ``error`` the message), so write it, then
    fail.

:data:`WORKLOADS` maps the demo's names to the classes and :func:`make_workload` builds
one from a name and JSON-able parameters (what the testbench gets through ``FF_ARGS``).

Workloads
---------
:class:`AllReduceInNetwork`
    bf16 SUM all-reduce through the switch's reduction units (REDUCE out, RESULT in).
:class:`AllReduceRing`
    The same data reduced as a ring (reduce-scatter + all-gather with WRITEs).
:class:`MoEAllToAll`
    Mixture-of-experts dispatch and combine with a skewed, seeded top-k router.

Example::

    >>> from fusionfabric.sim.workloads import AllReduceInNetwork, IdealNetwork
    >>> w = AllReduceInNetwork(8, seed=1, n_elems=1024)
    >>> res = IdealNetwork(8, seed=1).run(w)
    >>> w.check()                      # bit-exact against sim.reduce, every endpoint
    >>> w.done(), res["cycles"] > 0
    (True, True)
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Callable

import ml_dtypes
import numpy as np

from fusionfabric.sim import reduce as red
from fusionfabric.formats.chiplet import LENGTHS, SLOT_BYTES, Opcode, Status
from fusionfabric.sim.chiplet import Message, data_slots, length_code
from fusionfabric.formats.switch import CHUNK_BITS, Dtype, Mode, Op

__all__ = [
    "Workload", "AllReduceInNetwork", "AllReduceRing", "MoEAllToAll", "HeteroRack",
    "IdealNetwork",
    "WORKLOADS", "make_workload", "result_granules", "result_message", "GRANULE_BYTES",
    "MAX_MESSAGE", "RESULT_BEATS", "Region", "region_addr", "split_addr", "result_record",
    "ring_reference", "expert_fn", "combine_fn",
]

BF16 = np.dtype(ml_dtypes.bfloat16)
#: Bytes of one reduction granule: one 16-byte slot = one switch flit = one chunk id.
GRANULE_BYTES = SLOT_BYTES
#: Largest request payload.
MAX_MESSAGE = LENGTHS[-1]
#: Result beats one RESULT message carries at most (its 64 bytes of data).
RESULT_BEATS = 4
#: Outstanding non-posted requests per endpoint (8-bit tags).
N_TAGS = 256


# -- addresses ---------------------------------------------------------------------------------
class Region:
    """Bits [52:56] of a WRITE address: which buffer of the receiving accelerator."""
    RING_RS = 1       #: ring reduce-scatter: partial sum to add to the local gradient
    RING_AG = 2       #: ring all-gather: final values to store
    MOE_DISPATCH = 3  #: MoE: a token row for the local expert
    MOE_COMBINE = 4   #: MoE: an expert's output row back to the token's owner


def region_addr(region: int, owner: int = 0, index: int = 0, slot: int = 0,
                offset: int = 0) -> int:
    """Address = region [52:56] | owner endpoint [40:48] | index [20:40] | slot [16:20] |
    byte offset [0:16] (57-bit ``addr`` field)."""
    if not (0 <= owner < 256 and 0 <= index < 1 << 20 and 0 <= slot < 16
            and 0 <= offset < 1 << 16):
        raise ValueError(f"address fields out of range: owner={owner} index={index} "
                         f"slot={slot} offset={offset}")
    return (region << 52) | (owner << 40) | (index << 20) | (slot << 16) | offset


def split_addr(addr: int) -> tuple[int, int, int, int, int]:
    """Inverse of :func:`region_addr`: ``(region, owner, index, slot, offset)``."""
    return ((addr >> 52) & 0xF, (addr >> 40) & 0xFF, (addr >> 20) & 0xFFFFF,
            (addr >> 16) & 0xF, addr & 0xFFFF)


# -- RESULT messages ---------------------------------------------------------------------------
def result_granules(msg: Message) -> list[tuple[int, bytes]]:
    """The ``(granule id, 16 bytes)`` pairs of a RESULT message: header ``chunk`` is beat
    0's granule, ``addr`` bits [0:16], [16:32], [32:48] beats 1..3's, ``status`` = count-1."""
    if msg.opcode != Opcode.RESULT:
        raise ValueError(f"opcode {msg.opcode} is not RESULT")
    count = msg.status + 1
    ids = [msg.chunk] + [(msg.addr >> (16 * i)) & 0xFFFF for i in range(count - 1)]
    return [(g, msg.data[16 * i:16 * i + 16]) for i, g in enumerate(ids)]


def result_message(group: int, granules: list[tuple[int, bytes]], src: int = 0) -> Message:
    """A RESULT message (64 bytes of data, unused beats zero) carrying 1..4 granules, as
    the switch side of a fabric link forms it."""
    if not 1 <= len(granules) <= RESULT_BEATS:
        raise ValueError(f"a RESULT carries 1..{RESULT_BEATS} granules, not {len(granules)}")
    ids = [g for g, _ in granules]
    addr = sum(g << (16 * (i - 1)) for i, g in enumerate(ids) if i)
    data = b"".join(d for _, d in granules).ljust(LENGTHS[0], b"\0")
    return Message(Opcode.RESULT, length=0, dest=group, src=src, chunk=ids[0], addr=addr,
                   status=len(granules) - 1, data=data)


def _payload_bytes(msg: Message) -> int:
    if msg.opcode == Opcode.RESULT:
        return GRANULE_BYTES * (msg.status + 1)
    return data_slots(msg.opcode, msg.length) * SLOT_BYTES


def _pieces(nbytes: int) -> list[tuple[int, int]]:
    """Split ``nbytes`` (a multiple of 64) into ``(offset, length)`` messages of <= 256 B."""
    return [(o, min(MAX_MESSAGE, nbytes - o)) for o in range(0, nbytes, MAX_MESSAGE)]


def _gradients(rng: np.random.Generator, n: int, n_elems: int) -> np.ndarray:
    """bf16 bit patterns shaped like gradients: normal values whose scale varies per block
    of 64 elements between 1e-5 and 1e-2 (layers differ), about 2 % exact zeros and a few
    negative zeros. Returns ``uint16`` of shape ``(n, n_elems)``."""
    blocks = -(-n_elems // 64)
    scale = 10.0 ** rng.uniform(-5, -2, (n, blocks))
    vals = rng.normal(0, 1, (n, n_elems)) * np.repeat(scale, 64, axis=1)[:, :n_elems]
    vals[rng.random((n, n_elems)) < 0.02] = 0.0
    vals[rng.random((n, n_elems)) < 0.002] = -0.0
    return vals.astype(np.float32).astype(BF16).view(np.uint16)


def _first_mismatch(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(got) != np.asarray(want))[0])


# -- base class ---------------------------------------------------------------------------------
class Workload:
    """Base class: per-endpoint bookkeeping, tag pool for WRITEs, statistics.

    Subclasses implement ``_start(e)``, ``_on_request(e, msg)``, ``_done()`` and
    ``check()``; they emit WRITEs through :meth:`_write`, which allocates a tag (at most
    256 unacknowledged per endpoint; more wait in a queue and go out as acknowledgements
    free tags). With ``acks=False`` WRITEs are neither acknowledged nor tag-limited.
    """

    name = "workload"

    def __init__(self, n_endpoints: int, seed: int, acks: bool = True):
        if not isinstance(n_endpoints, (int, np.integer)) or not 2 <= n_endpoints <= 255:
            raise ValueError(f"n_endpoints={n_endpoints!r} must be in 2..255")
        self.n = int(n_endpoints)
        self.seed = int(seed)
        self.acks = bool(acks)
        n = self.n
        self._free_tags = [deque(range(N_TAGS)) for _ in range(n)]
        self._outstanding = [dict() for _ in range(n)]   # tag -> (dest, addr)
        self._waiting = [deque() for _ in range(n)]      # WRITEs without a tag yet
        self.tx_bytes = np.zeros(n, np.int64)
        self.rx_bytes = np.zeros(n, np.int64)
        self.tx_messages = np.zeros(n, np.int64)
        self.rx_messages = np.zeros(n, np.int64)
        self.wire_bytes = np.zeros(n, np.int64)

    def rng(self, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, stream])

    def _fail(self, text: str):
        raise AssertionError(f"{self.name}: {text} (seed {self.seed})")

    # -- interface ------------------------------------------------------------------------------
    def config_writes(self) -> list[dict]:
        return []

    def start(self, e: int) -> list[Message]:
        self._check_endpoint(e)
        return self._count(e, self._start(e))

    def on_receive(self, e: int, msg: Message) -> list[Message]:
        self._check_endpoint(e)
        self.rx_messages[e] += 1
        self.rx_bytes[e] += _payload_bytes(msg)
        if msg.opcode == Opcode.WRITE_ACK:
            if msg.tag not in self._outstanding[e]:
                self._fail(f"endpoint {e}: WRITE_ACK for tag {msg.tag}, which is not "
                           f"outstanding")
            del self._outstanding[e][msg.tag]
            self._free_tags[e].append(msg.tag)
            return self._count(e, self._drain(e))
        out = []
        if msg.opcode == Opcode.WRITE and self.acks:
            out.append(Message(Opcode.WRITE_ACK, msg.length, msg.tag, dest=msg.src, src=e))
        out += self._on_request(e, msg)
        return self._count(e, out)

    def done(self) -> bool:
        return (self._done() and not any(self._outstanding)
                and not any(self._waiting))

    def check(self):
        raise NotImplementedError

    def stats(self) -> dict:
        return {"workload": self.name, "seed": self.seed, "n_endpoints": self.n,
                "bytes_moved": int(self.tx_bytes.sum()),
                "messages": int(self.tx_messages.sum()),
                "wire_bytes": int(self.wire_bytes.sum()),
                "tx_bytes": self.tx_bytes.tolist(), "rx_bytes": self.rx_bytes.tolist(),
                "tx_messages": self.tx_messages.tolist(),
                "rx_messages": self.rx_messages.tolist()}

    # -- helpers for subclasses ----------------------------------------------------------------
    def _check_endpoint(self, e):
        if not 0 <= e < self.n:
            raise ValueError(f"endpoint {e} is outside 0..{self.n - 1}")

    def _count(self, e: int, msgs: list[Message]) -> list[Message]:
        for m in msgs:
            self.tx_messages[e] += 1
            if m.opcode < Opcode.READ_CPL:
                self.tx_bytes[e] += _payload_bytes(m)
            self.wire_bytes[e] += SLOT_BYTES * (1 + data_slots(m.opcode, m.length))
        return msgs

    def _write(self, e: int, dest: int, addr: int, data: bytes) -> list[Message]:
        """A WRITE from ``e``: returned now if a tag is free, else queued (returns [])."""
        msg = Message(Opcode.WRITE, length_code(len(data)), 0, dest=dest, src=e, addr=addr,
                      data=bytes(data))
        if not self.acks:
            return [msg]
        self._waiting[e].append(msg)
        return self._drain(e)

    def _drain(self, e: int) -> list[Message]:
        out = []
        while self._waiting[e] and self._free_tags[e]:
            m = self._waiting[e].popleft()
            tag = self._free_tags[e].popleft()
            self._outstanding[e][tag] = (m.dest, m.addr)
            out.append(Message(m.opcode, m.length, tag, m.dest, m.src, m.addr, data=m.data))
        return out

    def _start(self, e):
        raise NotImplementedError

    def _on_request(self, e, msg):
        self._fail(f"endpoint {e}: unexpected {Opcode(msg.opcode).name} message")

    def _done(self):
        raise NotImplementedError


def _check_elems(n_elems, multiple: int, what: str) -> int:
    if not isinstance(n_elems, (int, np.integer)) or n_elems <= 0 or n_elems % multiple:
        raise ValueError(f"n_elems={n_elems!r} must be a positive multiple of {multiple} "
                         f"({what})")
    return int(n_elems)


# -- all-reduce through the switch's reduction units -----------------------------------------------
class AllReduceInNetwork(Workload):
    """bf16 SUM all-reduce through the switch's reduction units.

    Group 0 = ``members`` (default every endpoint; ranks in port order), ALLREDUCE, SUM,
    BF16, ``native = 0`` (fp32 accumulation in
    the fixed pairwise tree over member ranks, one rounding to bf16: docs/reduction.md).
    The vector of ``n_elems`` bf16 is numbered in 16-byte granules (8 elements); granule
    ``g`` is chunk id ``g`` and is reduced by unit ``g mod n``. Each endpoint sends its
    gradients in order as REDUCE messages of ``message_bytes`` (header chunk = first
    granule) and receives RESULT messages (:func:`result_granules`).

    Window: endpoint ``e`` sends a message covering granules ``[g, g + k)`` only while
    ``g + k <= R_e + window``, ``R_e`` being the lowest granule whose result ``e`` has not
    received yet. Every chunk that occupies a unit's table slot is then within
    ``[M, M + window)`` with ``M = max_e R_e`` (no endpoint has its result, and one of
    them sent it), so a unit never holds more than ``ceil(window / n)`` chunks.
    Default ``window = n * (n_chunks - 1)``: below the unit's ``n_chunks`` table. Messages
    carry ``message_bytes / 16`` granules (default 256 B: 16), or the largest multiple of 4
    that fits a smaller window.
    """

    name = "allreduce-switch"

    def __init__(self, n_endpoints: int, seed: int, n_elems: int = 4096, n_chunks: int = 8,
                 window: int | None = None, group: int = 0, message_bytes: int = 256,
                 acks: bool = True, members=None):
        super().__init__(n_endpoints, seed, acks)
        n = self.n
        #: the endpoints that take part (default every one), in rank order
        self.members = tuple(range(n)) if members is None else tuple(sorted(members))
        if len(self.members) < 2 or len(set(self.members)) != len(self.members) or \
                not all(0 <= m < n for m in self.members):
            raise ValueError(f"members={members!r} must be 2 or more distinct endpoints "
                             f"in 0..{n - 1}")
        self.n_elems = _check_elems(n_elems, LENGTHS[0] // 2, "64-byte messages")
        if self.n_elems // 8 > 1 << CHUNK_BITS:
            raise ValueError(f"n_elems={n_elems} needs more than {1 << CHUNK_BITS} chunk ids")
        if not isinstance(n_chunks, (int, np.integer)) or n_chunks < 1:
            raise ValueError(f"n_chunks={n_chunks!r} must be a positive integer")
        self.n_chunks = int(n_chunks)
        self.window = n * max(1, self.n_chunks - 1) if window is None else int(window)
        if not 4 <= self.window <= n * self.n_chunks:
            raise ValueError(f"window={window} must be in 4..{n * self.n_chunks} granules "
                             f"(n * n_chunks)")
        if message_bytes not in LENGTHS:
            raise ValueError(f"message_bytes={message_bytes!r} is not one of {LENGTHS}")
        #: granules per REDUCE message: message_bytes / 16, fewer if the window is smaller
        self.msg_granules = min(message_bytes // GRANULE_BYTES, self.window // 4 * 4)
        if not 0 <= group < 256:
            raise ValueError(f"group={group} must be in 0..255")
        self.group = int(group)
        self.n_granules = self.n_elems // 8
        self.grads = _gradients(self.rng(1), n, self.n_elems)
        self.result = np.zeros((n, self.n_elems), np.uint16)
        self.received = np.zeros((n, self.n_granules), bool)
        self.next_g = [0] * n          # next granule to send
        self.low = [0] * n             # R_e: lowest granule without a result
        self.expected = red.reduce_bits(self.grads[list(self.members)], Dtype.BF16, Op.SUM)

    def config_writes(self):
        mask = sum(1 << m for m in self.members)
        return [{"group": self.group, "members": mask, "op": int(Op.SUM),
                 "dtype": int(Dtype.BF16), "mode": int(Mode.ALLREDUCE), "root": 0,
                 "native": 0, "valid": 1}]

    def _send_window(self, e: int) -> list[Message]:
        out = []
        while self.next_g[e] < self.n_granules:
            g = self.next_g[e]
            k = min(self.msg_granules, self.n_granules - g)
            if g + k > self.low[e] + self.window:
                break
            data = self.grads[e, 8 * g:8 * (g + k)].tobytes()
            out.append(Message(Opcode.REDUCE, length_code(len(data)), dest=self.group,
                               src=e, op=int(Op.SUM), dtype=int(Dtype.BF16), chunk=g,
                               addr=GRANULE_BYTES * g, data=data))
            self.next_g[e] = g + k
        return out

    def _start(self, e):
        return self._send_window(e) if e in self.members else []

    def _on_request(self, e, msg):
        if msg.opcode == Opcode.RESULT and e not in self.members:
            self._fail(f"endpoint {e}: RESULT, but it is not a member of group {self.group}")
        if msg.opcode != Opcode.RESULT:
            return super()._on_request(e, msg)
        if msg.dest != self.group:
            self._fail(f"endpoint {e}: RESULT for group {msg.dest}, not {self.group}")
        for g, data in result_granules(msg):
            if g >= self.n_granules:
                self._fail(f"endpoint {e}: RESULT for granule {g} >= {self.n_granules}")
            if g >= self.next_g[e]:
                self._fail(f"endpoint {e}: RESULT for granule {g} it has not sent yet")
            if self.received[e, g]:
                self._fail(f"endpoint {e}: RESULT for granule {g} delivered twice")
            self.received[e, g] = True
            self.result[e, 8 * g:8 * g + 8] = np.frombuffer(data, "<u2")
        while self.low[e] < self.n_granules and self.received[e, self.low[e]]:
            self.low[e] += 1
        return self._send_window(e)

    def _done(self):
        return bool(self.received[list(self.members)].all())

    def check(self):
        for e in self.members:
            if not self.received[e].all():
                g = int(np.flatnonzero(~self.received[e])[0])
                self._fail(f"endpoint {e}: no result for granule {g} "
                           f"({int((~self.received[e]).sum())} missing)")
            if not np.array_equal(self.result[e], self.expected):
                i = _first_mismatch(self.result[e], self.expected)
                self._fail(f"endpoint {e}: element {i} (granule {i // 8}) is "
                           f"{int(self.result[e, i]):#06x}, reference "
                           f"{int(self.expected[i]):#06x}")


# -- ring all-reduce ---------------------------------------------------------------------------
def _ring_addr(region: int, seg: int, off: int) -> int:
    """Ring WRITE address: the segment in the owner field, the byte offset in the segment
    as index (high bits) and offset (low 16 bits)."""
    return region_addr(region, seg, off >> 16, 0, off & 0xFFFF)


def ring_reference(grads: np.ndarray) -> np.ndarray:
    """The ring's result, computed directly: segment ``j`` (of ``n`` equal segments) is
    ``(((x[j] + x[j+1]) + x[j+2]) + ... + x[j+n-1])`` (endpoints mod n), each ``+`` a bf16
    addition rounded to nearest even (ml_dtypes)."""
    n, m = grads.shape
    seg = m // n
    x = grads.view(BF16)
    out = np.empty(m, BF16)
    for j in range(n):
        sl = slice(j * seg, (j + 1) * seg)
        acc = x[j, sl].copy()
        for i in range(1, n):
            acc = acc + x[(j + i) % n, sl]
        out[sl] = acc
    return out.view(np.uint16)


class AllReduceRing(Workload):
    """bf16 SUM all-reduce as a ring: reduce-scatter then all-gather, WRITEs of 256 bytes
    from endpoint ``e`` to ``(e + 1) mod n``.

    The vector is cut into ``n`` equal segments. Reduce-scatter: endpoint ``j`` starts
    segment ``j`` by writing its own values to ``j + 1`` (region ``RING_RS``); an
    endpoint that receives a block adds its own gradient to it (``received + local``,
    one bf16 RNE addition, ml_dtypes) and forwards the sum, until after ``n - 1`` hops
    endpoint ``j - 1`` holds the final segment ``j``. All-gather: that endpoint stores
    it and writes it on (region ``RING_AG``); each receiver stores and forwards it,
    ``n - 1`` hops. Blocks are forwarded one message at a time (cut-through), so steps
    overlap. The reference is :func:`ring_reference`.
    """

    name = "allreduce-ring"

    def __init__(self, n_endpoints: int, seed: int, n_elems: int = 4096, acks: bool = True):
        super().__init__(n_endpoints, seed, acks)
        n = self.n
        self.n_elems = _check_elems(n_elems, n * LENGTHS[0] // 2,
                                    f"n = {n} segments of 64-byte messages")
        self.seg = self.n_elems // n
        # same data as AllReduceInNetwork with the same seed and size
        self.grads = _gradients(self.rng(1), n, self.n_elems)
        self.result = np.zeros((n, self.n_elems), np.uint16)
        self.have = np.zeros((n, self.n_elems), bool)
        self.expected = ring_reference(self.grads)

    def _start(self, e):
        out = []
        base = e * self.seg
        raw = self.grads[e, base:base + self.seg].tobytes()
        for off, ln in _pieces(len(raw)):
            out += self._write(e, (e + 1) % self.n, _ring_addr(Region.RING_RS, e, off),
                               raw[off:off + ln])
        return out

    def _on_request(self, e, msg):
        if msg.opcode != Opcode.WRITE:
            return super()._on_request(e, msg)
        region, seg, hi, _, lo16 = split_addr(msg.addr)
        off = (hi << 16) | lo16
        n = self.n
        nbytes = LENGTHS[msg.length]
        if seg >= n or off % 2 or off + nbytes > 2 * self.seg:
            self._fail(f"endpoint {e}: WRITE to segment {seg} offset {off} is out of range")
        lo = seg * self.seg + off // 2
        sl = slice(lo, lo + nbytes // 2)
        data = np.frombuffer(msg.data, "<u2")
        nxt = (e + 1) % n
        if region == Region.RING_RS:
            if seg == e:
                self._fail(f"endpoint {e}: reduce-scatter block of its own segment {seg}")
            acc = (data.view(BF16) + self.grads[e, sl].view(BF16)).view(np.uint16)
            if (seg - 1) % n == e:          # n-1 hops done: final value of this block
                return self._store(e, sl, acc, seg, off)
            return self._write(e, nxt, _ring_addr(Region.RING_RS, seg, off),
                               acc.tobytes())
        if region == Region.RING_AG:
            if (seg - 1) % n == e:
                self._fail(f"endpoint {e}: all-gather block of segment {seg}, which it owns")
            return self._store(e, sl, data, seg, off)
        self._fail(f"endpoint {e}: WRITE to unknown region {region}")

    def _store(self, e, sl, values, seg, off):
        if self.have[e, sl].any():
            self._fail(f"endpoint {e}: segment {seg} offset {off} written twice")
        self.result[e, sl] = values
        self.have[e, sl] = True
        if (seg - 2) % self.n == e:         # the last endpoint of the all-gather chain
            return []
        return self._write(e, (e + 1) % self.n, _ring_addr(Region.RING_AG, seg, off),
                           np.asarray(values, "<u2").tobytes())

    def _done(self):
        return bool(self.have.all())

    def check(self):
        for e in range(self.n):
            if not self.have[e].all():
                i = int(np.flatnonzero(~self.have[e])[0])
                self._fail(f"endpoint {e}: element {i} never arrived")
            if not np.array_equal(self.result[e], self.expected):
                i = _first_mismatch(self.result[e], self.expected)
                self._fail(f"endpoint {e}: element {i} (segment {i // self.seg}) is "
                           f"{int(self.result[e, i]):#06x}, reference "
                           f"{int(self.expected[i]):#06x}")


# -- mixture-of-experts all-to-all -------------------------------------------------------------
def expert_fn(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The expert: ``bf16(fp32(x) * fp32(scale) + fp32(bias))``, the product and the sum
    each rounded to fp32 (no fused multiply-add), then one RNE rounding to bf16.
    Arguments are bf16 bit patterns (``uint16``); so is the result."""
    f = np.float32
    y = x.view(BF16).astype(f) * scale.view(BF16).astype(f) + bias.view(BF16).astype(f)
    return y.astype(BF16).view(np.uint16)


def combine_fn(ys: list[np.ndarray], gates: np.ndarray) -> np.ndarray:
    """Combine one token's expert outputs: ``acc = g0 * y0``, then ``acc = acc + g_k * y_k``
    for k = 1, 2, ... in routing order, all in fp32 (products and sums rounded to fp32),
    one RNE rounding to bf16 at the end."""
    f = np.float32
    g = gates.view(BF16).astype(f)
    acc = g[0] * ys[0].view(BF16).astype(f)
    for k in range(1, len(ys)):
        acc = acc + g[k] * ys[k].view(BF16).astype(f)
    return acc.astype(BF16).view(np.uint16)


class MoEAllToAll(Workload):
    """Mixture-of-experts all-to-all: dispatch token rows to experts, combine the outputs.

    Endpoint ``x`` hosts expert ``x``. Every endpoint owns ``tokens_per_endpoint`` tokens
    of ``d_model`` bf16. The router (seeded, stream 2) gives expert ``x`` the popularity
    ``w_x = (1 + r_x) ** -skew`` (``r`` a seeded permutation of ranks; ``skew = 0`` is
    uniform) and picks each token's ``top_k`` distinct experts by the Gumbel-top-k trick on
    ``log w``; the gates are the softmax of the chosen perturbed logits (fp32), rounded to
    bf16. Dispatch: the owner WRITEs the row (256-byte pieces, region ``MOE_DISPATCH``) to
    each chosen expert's endpoint; a token routed to the owner's own expert is computed
    locally and crosses no link. The expert applies :func:`expert_fn` with its own bf16
    ``scale`` and ``bias`` vectors once the whole row has arrived and WRITEs the output
    back (region ``MOE_COMBINE``). Once all ``top_k`` outputs of a token are back, the
    owner computes :func:`combine_fn`. ``check()`` compares every owner's combined rows
    with the same functions applied by numpy to the whole batch.
    """

    name = "moe-alltoall"

    def __init__(self, n_endpoints: int, seed: int, tokens_per_endpoint: int = 64,
                 d_model: int = 128, skew: float = 1.2, top_k: int = 2, acks: bool = True):
        super().__init__(n_endpoints, seed, acks)
        n = self.n
        if not isinstance(tokens_per_endpoint, (int, np.integer)) or \
                not 1 <= tokens_per_endpoint <= 1 << 20:
            raise ValueError(f"tokens_per_endpoint={tokens_per_endpoint!r} must be in "
                             f"1..{1 << 20}")
        if not isinstance(d_model, (int, np.integer)) or d_model <= 0 or d_model % 32 \
                or 2 * d_model > 1 << 16:
            raise ValueError(f"d_model={d_model!r} must be a positive multiple of 32 "
                             f"(64-byte messages) up to 32768")
        if not isinstance(top_k, (int, np.integer)) or not 1 <= top_k <= min(n, 15):
            raise ValueError(f"top_k={top_k!r} must be in 1..{min(n, 15)}")
        skew = float(skew)
        if not 0.0 <= skew <= 10.0:
            raise ValueError(f"skew={skew} must be in 0..10")
        self.tokens, self.d, self.skew, self.top_k = int(tokens_per_endpoint), int(d_model), \
            skew, int(top_k)
        T, d, K = self.tokens, self.d, self.top_k
        rng = self.rng(1)
        self.x = rng.normal(0, 1, (n, T, d)).astype(np.float32).astype(BF16).view(np.uint16)
        self.scale = rng.uniform(0.5, 1.5, (n, d)).astype(np.float32).astype(BF16) \
            .view(np.uint16)
        self.bias = (rng.normal(0, 0.1, (n, d))).astype(np.float32).astype(BF16) \
            .view(np.uint16)
        r = self.rng(2)
        ranks = r.permutation(n)
        self.popularity = (1.0 + ranks) ** -skew
        logits = np.log(self.popularity)[None, None, :] + r.gumbel(size=(n, T, n))
        self.experts = np.argsort(-logits, axis=2, kind="stable")[:, :, :K]   # (n, T, K)
        chosen = np.take_along_axis(logits, self.experts, axis=2).astype(np.float32)
        ex = np.exp(chosen - chosen.max(axis=2, keepdims=True))
        self.gates = (ex / ex.sum(axis=2, keepdims=True)).astype(np.float32) \
            .astype(BF16).view(np.uint16)
        # state
        self.row_bytes = 2 * d
        self.inbox: dict[tuple, np.ndarray] = {}     # (expert, owner, t, k) -> row
        self.inbox_n: dict[tuple, int] = {}          # bytes arrived
        self.y = np.zeros((n, T, K, d), np.uint16)   # at the owner
        self.y_bytes = np.zeros((n, T, K), np.int64)
        self.out = np.zeros((n, T, d), np.uint16)
        self.finished = np.zeros((n, T), bool)
        self.expected = self._reference()

    def _reference(self) -> np.ndarray:
        n, T, K = self.n, self.tokens, self.top_k
        out = np.zeros((n, T, self.d), np.uint16)
        for e in range(n):
            ys = [expert_fn(self.x[e], self.scale[self.experts[e, :, k]],
                            self.bias[self.experts[e, :, k]]) for k in range(K)]
            out[e] = combine_fn(ys, self.gates[e].T[:, :, None])
        return out

    def expert_load(self) -> np.ndarray:
        """Token rows each expert processes (local ones included)."""
        return np.bincount(self.experts.ravel(), minlength=self.n)

    def _start(self, e):
        out = []
        for t in range(self.tokens):
            for k in range(self.top_k):
                x = int(self.experts[e, t, k])
                if x == e:                   # local expert: no network
                    self._arrive_y(e, t, k, 0,
                                   expert_fn(self.x[e, t], self.scale[e], self.bias[e]))
                    continue
                raw = self.x[e, t].tobytes()
                for off, ln in _pieces(self.row_bytes):
                    out += self._write(e, x, region_addr(Region.MOE_DISPATCH, e, t, k, off),
                                       raw[off:off + ln])
        return out

    def _arrive_y(self, e, t, k, off, values):
        lo = off // 2
        self.y[e, t, k, lo:lo + len(values)] = values
        self.y_bytes[e, t, k] += 2 * len(values)
        if self.y_bytes[e, t, k] > self.row_bytes:
            self._fail(f"endpoint {e}: token {t} slot {k} received more than one row")
        if (self.y_bytes[e, t] == self.row_bytes).all():
            ys = [self.y[e, t, j] for j in range(self.top_k)]
            self.out[e, t] = combine_fn(ys, self.gates[e, t][:, None])
            self.finished[e, t] = True

    def _on_request(self, e, msg):
        if msg.opcode != Opcode.WRITE:
            return super()._on_request(e, msg)
        region, owner, t, k, off = split_addr(msg.addr)
        nbytes = LENGTHS[msg.length]
        if owner >= self.n or t >= self.tokens or k >= self.top_k or \
                off + nbytes > self.row_bytes:
            self._fail(f"endpoint {e}: WRITE to owner {owner} token {t} slot {k} offset "
                       f"{off} is out of range")
        values = np.frombuffer(msg.data, "<u2")
        if region == Region.MOE_DISPATCH:
            if int(self.experts[owner, t, k]) != e:
                self._fail(f"endpoint {e}: token {t} of endpoint {owner} slot {k} was "
                           f"routed to expert {int(self.experts[owner, t, k])}, not here")
            key = (owner, t, k)
            row = self.inbox.setdefault(key, np.zeros(self.d, np.uint16))
            row[off // 2:off // 2 + len(values)] = values
            self.inbox_n[key] = self.inbox_n.get(key, 0) + nbytes
            if self.inbox_n[key] < self.row_bytes:
                return []
            if self.inbox_n[key] > self.row_bytes:
                self._fail(f"endpoint {e}: token {t} of endpoint {owner} dispatched twice")
            y = expert_fn(row, self.scale[e], self.bias[e]).tobytes()
            out = []
            for o, ln in _pieces(self.row_bytes):
                out += self._write(e, owner, region_addr(Region.MOE_COMBINE, owner, t, k, o),
                                   y[o:o + ln])
            return out
        if region == Region.MOE_COMBINE:
            if owner != e:
                self._fail(f"endpoint {e}: combine row addressed to owner {owner}")
            self._arrive_y(e, t, k, off, values)
            return []
        self._fail(f"endpoint {e}: WRITE to unknown region {region}")

    def _done(self):
        return bool(self.finished.all())

    def check(self):
        for e in range(self.n):
            if not self.finished[e].all():
                t = int(np.flatnonzero(~self.finished[e])[0])
                self._fail(f"endpoint {e}: token {t} never combined "
                           f"({int((~self.finished[e]).sum())} missing)")
            if not np.array_equal(self.out[e], self.expected[e]):
                i = _first_mismatch(self.out[e].ravel(), self.expected[e].ravel())
                t, c = divmod(i, self.d)
                self._fail(f"endpoint {e}: token {t} element {c} is "
                           f"{int(self.out[e].ravel()[i]):#06x}, reference "
                           f"{int(self.expected[e].ravel()[i]):#06x}")

    def stats(self):
        s = super().stats()
        s["expert_load"] = self.expert_load().tolist()
        return s


# -- a heterogeneous rack: accelerators all-reduce while cpus serve memory --------------------
#: Bytes at the top of a cpu's memory that every accelerator adds to: four counters of 64
#: bytes (16 int32 lanes each, the smallest message), the contended ATOMIC_ADD targets.
SHARED_BYTES = 256
COUNTER_BYTES = 64


class HeteroRack(AllReduceInNetwork):
    """Accelerators all-reduce bf16 through the switch while ``cpu`` endpoints serve their
    memory (the fabric's memory target, docs/fabric.md "Memory target").

    Endpoints ``cpu_endpoints`` (default: the last one) are memory targets of ``mem_bytes``
    each: they never act (the RTL target or :class:`IdealNetwork`'s model answers); every
    other endpoint is an accelerator. The accelerators run :class:`AllReduceInNetwork`
    among themselves (group 0 = the accelerators) and, at the same time, a seeded script of
    ``mem_ops`` memory requests to the cpu ``cpu_endpoints[k % len]`` (``k``: the
    accelerator's rank), all sent at once, in order:

    * WRITE of 64..256 bytes into the accelerator's own region of the cpu's memory (region
      ``k`` of ``(mem_bytes - 256) // accelerators`` bytes, 16-byte aligned), always followed
      by a READ of the same bytes: it must return what was written (READ after WRITE from
      the same source);
    * READ of a random part of its own region: the region's contents at that point of the
      script (only the accelerator writes there, and one source's requests are served in
      order);
    * ATOMIC_ADD of 16 int32 lanes (64 bytes) to one of the four counters in the top 256
      bytes of the memory: every accelerator adds to the same addresses;
    * a READ or WRITE out of range (past the end, or misaligned): it must complete with
      status ERROR (a READ_CPL then carries zeros), and no byte changes.

    Every completion is checked when it arrives (opcode, tag, status, data). In
    :meth:`stats` a cpu's ``rx_bytes`` / ``tx_bytes`` are the payload of the requests it
    served and of its READ completions. When the last
    accelerator has all its completions, it READs the whole memory of every cpu back; the
    contents must equal the reference built from the scripts alone: each region's last
    writes, the shared words the sum of every addend modulo 2**32, zeros elsewhere.
    """

    name = "hetero-rack"

    def __init__(self, n_endpoints: int, seed: int, cpu_endpoints=None, mem_bytes: int = 4096,
                 mem_ops: int = 24, n_elems: int = 1024, n_chunks: int = 8,
                 window: int | None = None, message_bytes: int = 256):
        n = int(n_endpoints)
        cpus = (n - 1,) if cpu_endpoints is None else tuple(int(c) for c in cpu_endpoints)
        if not cpus or len(set(cpus)) != len(cpus) or not all(0 <= c < n for c in cpus):
            raise ValueError(f"cpu_endpoints={cpu_endpoints!r} must be distinct endpoints "
                             f"in 0..{n - 1}")
        accels = tuple(e for e in range(n) if e not in cpus)
        if len(accels) < 2:
            raise ValueError(f"cpu_endpoints={cpus!r} leaves {len(accels)} accelerator(s); "
                             "the all-reduce needs 2")
        from fusionfabric.formats.memory import check_mem_bytes
        self.mem_bytes = check_mem_bytes(mem_bytes)
        region = (self.mem_bytes - SHARED_BYTES) // len(accels) // 16 * 16
        if region < MAX_MESSAGE:
            raise ValueError(f"mem_bytes={mem_bytes}: each of {len(accels)} accelerators "
                             f"needs a region of {MAX_MESSAGE} bytes or more")
        if not isinstance(mem_ops, int) or not 1 <= mem_ops <= 100:
            raise ValueError(f"mem_ops={mem_ops!r} must be an integer in 1..100")
        super().__init__(n, seed, n_elems=n_elems, n_chunks=n_chunks, window=window,
                         message_bytes=message_bytes, members=accels)
        self.cpus, self.accels, self.region = cpus, accels, region
        self.shared = self.mem_bytes - SHARED_BYTES
        self.mem_ops = mem_ops
        self.expected_mem = {c: np.zeros(self.mem_bytes, np.uint8) for c in cpus}
        self.script = {a: self._script(k, a) for k, a in enumerate(accels)}
        self._pending = [dict() for _ in range(n)]    # tag -> (opcode, status, data, what)
        self.readback: dict[int, np.ndarray] = {}    # cpu -> contents read at the end
        self._readback_sent = False
        self.mem_stats = {"reads": 0, "writes": 0, "atomics": 0, "errors": 0,
                          "readback_bytes": 0}
        #: per cpu: payload bytes of the requests it served (received) and of its READ
        #: completions (sent), counted from the checked completions
        self.served_rx = {c: 0 for c in cpus}
        self.served_tx = {c: 0 for c in cpus}

    def cpu_of(self, a: int) -> int:
        return self.cpus[self.accels.index(a) % len(self.cpus)]

    def _script(self, k: int, a: int) -> list[tuple]:
        """``(request Message, expected completion opcode, status, data)`` in send order;
        updates ``expected_mem``."""
        rng = self.rng(1000 + a)
        cpu = self.cpus[k % len(self.cpus)]
        mem = self.expected_mem[cpu]
        base = k * self.region
        out = []

        def within():
            length = int(rng.integers(4))
            nbytes = LENGTHS[length]
            off = 16 * int(rng.integers((self.region - nbytes) // 16 + 1))
            return length, nbytes, base + off

        while len(out) < self.mem_ops:
            r = rng.random()
            if r < 0.35:
                length, nbytes, addr = within()
                data = rng.bytes(nbytes)
                mem[addr:addr + nbytes] = np.frombuffer(data, np.uint8)
                out.append((Message(Opcode.WRITE, length, 0, cpu, a, addr, data=data),
                            Opcode.WRITE_ACK, Status.OK, b"", "write"))
                out.append((Message(Opcode.READ, length, 0, cpu, a, addr),
                            Opcode.READ_CPL, Status.OK, data, "read after write"))
            elif r < 0.55:
                length, nbytes, addr = within()
                out.append((Message(Opcode.READ, length, 0, cpu, a, addr), Opcode.READ_CPL,
                            Status.OK, mem[addr:addr + nbytes].tobytes(), "read"))
            elif r < 0.9:
                addr = self.shared + COUNTER_BYTES * int(rng.integers(SHARED_BYTES //
                                                                      COUNTER_BYTES))
                add = rng.integers(-(1 << 31), 1 << 31, COUNTER_BYTES // 4, dtype=np.int64)
                old = mem[addr:addr + COUNTER_BYTES].view("<u4").astype(np.int64)
                mem[addr:addr + COUNTER_BYTES] = ((old + add) & 0xFFFFFFFF).astype(
                    "<u4").view(np.uint8)
                out.append((Message(Opcode.ATOMIC_ADD, 0, 0, cpu, a, addr,
                                    data=add.astype("<i4").tobytes()),
                            Opcode.ATOMIC_ACK, Status.OK, b"", "atomic add"))
            else:
                length = int(rng.integers(4))
                nbytes = LENGTHS[length]
                addr = (self.mem_bytes - nbytes + 16 if rng.random() < 0.5
                        else base + 16 * int(rng.integers(4)) + int(rng.integers(1, 16)))
                if rng.random() < 0.5:
                    out.append((Message(Opcode.READ, length, 0, cpu, a, addr),
                                Opcode.READ_CPL, Status.ERROR, bytes(nbytes),
                                "read out of range"))
                else:
                    out.append((Message(Opcode.WRITE, length, 0, cpu, a, addr,
                                        data=rng.bytes(nbytes)),
                                Opcode.WRITE_ACK, Status.ERROR, b"", "write out of range"))
        return out

    def _send(self, e: int, items) -> list[Message]:
        out = []
        for msg, cop, status, data, what in items:
            if not self._free_tags[e]:
                self._fail(f"endpoint {e}: more than {N_TAGS} memory requests outstanding")
            tag = self._free_tags[e].popleft()
            self._outstanding[e][tag] = (msg.dest, msg.addr)
            self._pending[e][tag] = (msg, cop, status, data, what)
            out.append(Message(msg.opcode, msg.length, tag, msg.dest, msg.src, msg.addr,
                               data=msg.data))
        return out

    def _start(self, e):
        if e in self.cpus:
            return []
        return super()._start(e) + self._send(e, self.script[e])

    def on_receive(self, e, msg):
        if msg.opcode not in (Opcode.READ_CPL, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK):
            return super().on_receive(e, msg)
        self._check_endpoint(e)
        self.rx_messages[e] += 1
        self.rx_bytes[e] += _payload_bytes(msg)
        if msg.tag not in self._pending[e]:
            self._fail(f"endpoint {e}: {Opcode(msg.opcode).name} for tag {msg.tag}, which "
                       f"is not outstanding")
        req, cop, status, data, what = self._pending[e].pop(msg.tag)
        del self._outstanding[e][msg.tag]
        self.served_rx[req.dest] += len(req.data)
        self.served_tx[req.dest] += len(msg.data)
        self._free_tags[e].append(msg.tag)
        where = (f"endpoint {e}: {what} {Opcode(req.opcode).name} addr {req.addr:#x} "
                 f"({LENGTHS[req.length]} B) tag {msg.tag}")
        if msg.opcode != cop or msg.status != status or msg.src != req.dest:
            self._fail(f"{where}: got {Opcode(msg.opcode).name} status {msg.status} from "
                       f"{msg.src}, expected {Opcode(cop).name} status {int(status)} from "
                       f"{req.dest}")
        if msg.opcode == Opcode.READ_CPL and msg.data != data:
            i = next(k for k in range(len(data)) if msg.data[k] != data[k])
            self._fail(f"{where}: byte {i} is {msg.data[i]:#04x}, expected {data[i]:#04x}")
        if what == "readback":
            self.readback[req.dest][req.addr:req.addr + len(msg.data)] = \
                np.frombuffer(msg.data, np.uint8)
            self.mem_stats["readback_bytes"] += len(msg.data)
        elif status != Status.OK:
            self.mem_stats["errors"] += 1
        else:
            self.mem_stats[{Opcode.READ_CPL: "reads", Opcode.WRITE_ACK: "writes",
                            Opcode.ATOMIC_ACK: "atomics"}[Opcode(msg.opcode)]] += 1
        out = self._drain(e)
        if not self._readback_sent and not any(self._pending[a] for a in self.accels):
            # the last accelerator with its completions reads every cpu's memory back
            self._readback_sent = True
            items = []
            for c in self.cpus:
                self.readback[c] = np.zeros(self.mem_bytes, np.uint8)
                for addr in range(0, self.mem_bytes, MAX_MESSAGE):
                    n = min(MAX_MESSAGE, self.mem_bytes - addr)
                    items.append((Message(Opcode.READ, length_code(n), 0, c, e, addr),
                                  Opcode.READ_CPL, Status.OK,
                                  self.expected_mem[c][addr:addr + n].tobytes(), "readback"))
            out += self._send(e, items)
        return self._count(e, out)

    def _done(self):
        return (super()._done() and self._readback_sent
                and not any(self._pending[a] for a in self.accels))

    def check(self):
        super().check()
        if not self._readback_sent or any(self._pending[a] for a in self.accels):
            left = sum(len(self._pending[a]) for a in self.accels)
            self._fail(f"{left} memory requests without a completion")
        for c in self.cpus:
            got, want = self.readback[c], self.expected_mem[c]
            if not np.array_equal(got, want):
                i = int(np.flatnonzero(got != want)[0])
                self._fail(f"cpu {c}: final memory byte {i:#x} is {int(got[i]):#04x}, "
                           f"reference {int(want[i]):#04x}")

    @property
    def target_counts(self) -> dict:
        """What the memory targets must have counted (``MEM_STATUS``'s fields, summed over
        the cpus): completed READs (the readback's included), WRITEs, ATOMIC_ADDs, and
        requests refused with ERROR; no dropped beat."""
        m = self.mem_stats
        readback = len(self.cpus) * -(-self.mem_bytes // MAX_MESSAGE) if self._readback_sent \
            else 0
        return {"reads": m["reads"] + readback, "writes": m["writes"],
                "atomics": m["atomics"], "errors": m["errors"], "dropped": 0}

    def stats(self):
        s = super().stats()
        s["kinds"] = ["cpu" if e in self.cpus else "accelerator" for e in range(self.n)]
        for c in self.cpus:
            s["tx_bytes"][c] = self.served_tx[c]
            s["rx_bytes"][c] = self.served_rx[c]
        s["bytes_moved"] = int(sum(s["tx_bytes"]))
        s["memory"] = dict(self.mem_stats)
        return s


WORKLOADS = {AllReduceInNetwork.name: AllReduceInNetwork, AllReduceRing.name: AllReduceRing,
             MoEAllToAll.name: MoEAllToAll, HeteroRack.name: HeteroRack}


def make_workload(name: str, n_endpoints: int, seed: int, **params) -> Workload:
    """Build the workload called ``name`` (a key of :data:`WORKLOADS`)."""
    if name not in WORKLOADS:
        raise ValueError(f"workload {name!r} is not one of: {', '.join(WORKLOADS)}")
    return WORKLOADS[name](n_endpoints, seed, **params)


def result_record(w: Workload, cycles: int, replays: int = 0, relocks: int = 0,
                  **extra) -> dict:
    """The results record ``fusionfabric demo`` reads (JSON-able): runs ``w.check()`` and
    returns ``{workload, seed, n_endpoints, cycles, done, bit_exact, error, stats, replays,
    relocks, **extra}``. ``bit_exact`` is False and ``error`` holds the check's message if
    ``w`` is not done or any bit differs. Optional ``extra`` keys the demo shows:
    ``crc_errors``, ``flips``, ``slips`` (ints) and ``tx_bytes``/``rx_bytes`` per port
    (measured at the fabric; otherwise the workload's own counts are used)."""
    error = None
    try:
        w.check()
    except AssertionError as exc:
        error = str(exc)
    if error is None and not w.done():
        error = f"{w.name}: not done (seed {w.seed})"
    return {"workload": w.name, "seed": w.seed, "n_endpoints": w.n, "cycles": int(cycles),
            "done": bool(w.done()), "bit_exact": error is None, "error": error,
            "stats": w.stats(), "replays": int(replays), "relocks": int(relocks), **extra}


# -- ideal network --------------------------------------------------------------------------------
class IdealNetwork:
    """A loss-free fabric in pure Python that plays a :class:`Workload` to completion.

    Timing (an idealisation, not the RTL): every endpoint has an uplink and a downlink that
    each carry one 16-byte slot per cycle (a message is its header slot plus its data
    slots); a message crosses a link in ``link_latency`` cycles after its last slot, the
    switch adds ``switch_latency``, the accelerator answers ``compute_latency`` cycles after
    a delivery. Buffers are unbounded; order per (source, destination) is kept (``jitter``
    adds a seeded random delay at the switch without breaking that order).

    Routing follows the switch: unicast (``dest`` = endpoint), MULTICAST to every member of
    group ``dest``; REDUCE messages are split into 16-byte granules, granule ``k`` being
    chunk ``chunk + k`` of unit ``(chunk + k) mod n``; when every member has contributed,
    the result (``fusionfabric.sim.reduce.reduce_bits`` in member-rank order, the group's op, dtype and
    native) is ready ``fusionfabric.sim.reduce.unit_latency(k, n)`` cycles later and goes to every
    member (ALLREDUCE) or the root (REDUCE), packed on each downlink as RESULT messages of
    up to 4 granules (:func:`result_message`, whatever is waiting). A duplicate
    contribution, a non-member, an invalid group, or more than ``n_chunks`` chunks open
    in one unit (the flow-control contract of docs/switch.md) raise AssertionError.

    ``tamper(i, dest, msg) -> msg`` sees every delivered message (``i`` counts
    deliveries) and may return a changed one: the tests corrupt a byte with it.

    ``cpu_endpoints``: endpoints that are memory targets of ``mem_bytes``
    (:class:`fusionfabric.sim.memory.MemTargetModel`, the golden model of the RTL's): a
    request delivered there is served, and its completion sent back from that endpoint
    ``compute_latency`` cycles later; the workload never sees it. ``memories`` holds the
    models after :meth:`run`.
    """

    def __init__(self, n_endpoints: int, seed: int = 0, link_latency: int = 20,
                 switch_latency: int = 2, compute_latency: int = 2, n_chunks: int = 8,
                 jitter: int = 0, tamper: Callable | None = None,
                 max_events: int = 10_000_000, cpu_endpoints=(), mem_bytes: int = 4096):
        self.n = int(n_endpoints)
        self.seed = int(seed)
        self.link_latency = int(link_latency)
        self.switch_latency = int(switch_latency)
        self.compute_latency = int(compute_latency)
        self.n_chunks = int(n_chunks)
        self.jitter = int(jitter)
        self.tamper = tamper
        self.max_events = max_events
        self.cpu_endpoints = tuple(int(c) for c in cpu_endpoints)
        self.mem_bytes = int(mem_bytes)
        self.memories: dict = {}
        for name in ("link_latency", "switch_latency", "compute_latency", "jitter"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        if self.n_chunks < 1:
            raise ValueError(f"n_chunks={self.n_chunks} must be positive")

    def _fail(self, text):
        raise AssertionError(f"IdealNetwork: {text} (seed {self.seed})")

    def run(self, w: Workload) -> dict:
        """Play ``w`` to completion; returns cycles and per-port slot counts. Raises
        AssertionError if traffic stops before ``w.done()``."""
        if w.n != self.n:
            raise ValueError(f"workload has {w.n} endpoints, the network {self.n}")
        n = self.n
        rng = np.random.default_rng([self.seed, 99])
        groups: dict[int, dict] = {}
        for c in w.config_writes():
            c = dict(c)
            groups[int(c.pop("group"))] = c
        heap: list = []
        seq = [0]

        def push(t, kind, *args):
            seq[0] += 1
            heapq.heappush(heap, (t, seq[0], kind, args))

        up_free = [0] * n
        down_free = [0] * n
        down_q = [deque() for _ in range(n)]    # ("msg", src, msg) | ("res", group, g, data)
        down_busy = [False] * n
        last_arrival: dict[tuple, int] = {}
        up_slots = np.zeros(n, np.int64)
        down_slots = np.zeros(n, np.int64)
        contrib: dict[tuple, dict] = {}          # (group, chunk) -> {rank: bytes}
        open_per_unit = [0] * n
        delivered = [0]
        stats = {"results": 0, "result_messages": 0, "deliveries": 0}

        def inject(t, e, msgs):
            for m in msgs:
                m = m.with_src(e)
                slots = 1 + data_slots(m.opcode, m.length)
                start = max(t, up_free[e])
                up_free[e] = start + slots
                up_slots[e] += slots
                push(up_free[e] + self.link_latency, "switch", e, m)

        def to_down(t, d, item):
            down_q[d].append(item)
            if not down_busy[d]:
                down_busy[d] = True
                push(max(t, down_free[d]), "down", d)

        def members_of(group):
            entry = groups.get(group)
            if entry is None or not entry.get("valid", 0):
                self._fail(f"group {group} is not configured")
            return [p for p in range(n) if (entry["members"] >> p) & 1], entry

        def at_switch(t, src, m):
            op = Opcode(m.opcode)
            if op == Opcode.REDUCE:
                members, entry = members_of(m.dest)
                if src not in members:
                    self._fail(f"endpoint {src} is not a member of group {m.dest}")
                # the unit reduces with the group entry's op, dtype and native (the
                # switch flit carries none of the message's op/dtype fields)
                for k in range(data_slots(m.opcode, m.length)):
                    chunk = (m.chunk + k) & ((1 << CHUNK_BITS) - 1)
                    key = (m.dest, chunk)
                    unit = chunk % n
                    if key not in contrib:
                        if open_per_unit[unit] >= self.n_chunks:
                            self._fail(f"unit {unit} would hold more than n_chunks="
                                       f"{self.n_chunks} open chunks (chunk {chunk})")
                        open_per_unit[unit] += 1
                        contrib[key] = {}
                    ranks = contrib[key]
                    if src in ranks:
                        self._fail(f"duplicate contribution of endpoint {src} to group "
                                   f"{m.dest} chunk {chunk}")
                    ranks[src] = m.data[16 * k:16 * k + 16]
                    if len(ranks) == len(members):
                        push(t + k + 1 + red.unit_latency(len(members), n), "result",
                             m.dest, chunk)
                return
            if op == Opcode.RESULT:
                self._fail(f"endpoint {src} sent a RESULT")
            if op == Opcode.MULTICAST:
                dests, _ = members_of(m.dest)
            else:
                if not 0 <= m.dest < n:
                    self._fail(f"endpoint {src} sent to port {m.dest} >= {n}")
                dests = [m.dest]
            for d in dests:
                arr = t + self.switch_latency + (int(rng.integers(self.jitter + 1))
                                                 if self.jitter else 0)
                arr = max(arr, last_arrival.get((src, d), 0))
                last_arrival[(src, d)] = arr
                push(arr, "queue", d, ("msg", src, m))

        def result(t, group, chunk):
            members, entry = members_of(group)
            ranks = contrib.pop((group, chunk))
            open_per_unit[chunk % n] -= 1
            dtype = Dtype(entry["dtype"])
            st = red.STORAGE[dtype]
            rows = np.stack([np.frombuffer(ranks[p], st.newbyteorder("<")) for p in members])
            data = red.reduce_bits(rows, dtype, Op(entry["op"]), bool(entry.get("native", 0)))
            data = np.asarray(data, st).astype(st.newbyteorder("<")).tobytes()
            stats["results"] += 1
            targets = members if entry["mode"] == Mode.ALLREDUCE else [entry["root"]]
            for d in targets:
                to_down(t, d, ("res", group, chunk, data))

        def down(t, d):
            q = down_q[d]
            if not q:
                down_busy[d] = False
                return
            item = q.popleft()
            if item[0] == "msg":
                m = item[2]
            else:
                group, gran = item[1], [(item[2], item[3])]
                while q and len(gran) < RESULT_BEATS and q[0][0] == "res" and q[0][1] == group:
                    _, _, c, data = q.popleft()
                    gran.append((c, data))
                m = result_message(group, gran, src=gran[0][0] % n)
                stats["result_messages"] += 1
            slots = 1 + data_slots(m.opcode, m.length)
            down_free[d] = t + slots
            down_slots[d] += slots
            push(down_free[d] + self.link_latency, "deliver", d, m)
            push(down_free[d], "down", d)

        from fusionfabric.sim.memory import MemTargetModel
        self.memories = {c: MemTargetModel(self.mem_bytes, node=c) for c in self.cpu_endpoints}

        def deliver(t, d, m):
            if self.tamper is not None:
                m = self.tamper(delivered[0], d, m)
            delivered[0] += 1
            if d in self.memories:
                cop, status, data = self.memories[d].serve(m.opcode, m.length, m.tag, m.src,
                                                           m.addr, m.data)
                cpl = Message(cop, m.length, m.tag, dest=m.src, src=d, status=status,
                              data=data)
                inject(t + self.compute_latency, d, [cpl])
                return
            inject(t + self.compute_latency, d, w.on_receive(d, m))

        for e in range(n):
            inject(0, e, w.start(e))
        t = 0
        events = 0
        last_delivery = 0
        while heap:
            t, _, kind, args = heapq.heappop(heap)
            events += 1
            if events > self.max_events:
                self._fail(f"more than {self.max_events} events")
            if kind == "switch":
                at_switch(t, *args)
            elif kind == "queue":
                to_down(t, args[0], args[1])
            elif kind == "result":
                result(t, *args)
            elif kind == "down":
                down(t, *args)
            elif kind == "deliver":
                deliver(t, *args)
                last_delivery = t
        if contrib:
            (g, c), ranks = next(iter(contrib.items()))
            self._fail(f"traffic stopped with {len(contrib)} reductions open, e.g. group "
                       f"{g} chunk {c} has {len(ranks)} contributions")
        if not w.done():
            self._fail(f"traffic stopped at cycle {t} before {w.name} was done")
        stats["deliveries"] = delivered[0]
        return {"engine": "ideal", "cycles": int(last_delivery), "up_slots": up_slots.tolist(),
                "down_slots": down_slots.tolist(), **stats}
