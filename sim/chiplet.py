"""Golden model of the chiplet link: TL packing, DL framing (exact bytes), CRC-32, link model.

Pure numpy / Python (no amaranth, no cocotb). The bit layouts, opcodes, widths and the link
parameters (:class:`~fusionfabric.formats.chiplet.ChipletParams`) are declared once in
:mod:`fusionfabric.formats.chiplet`, shared with the RTL; this model packs and unpacks through
them. The format is documented in ``docs/protocol.md``.

Units
-----
slot
    128 bits (16 bytes): the datapath word of the chiplet and of the PHY interface. A TL header
    is one slot; data is carried 16 bytes per slot.
TL flit
    64 bytes = 4 slots, all of one virtual channel (VC 0 requests, VC 1 responses). Messages of
    one VC are packed back to back at slot granularity; a header slot with opcode ``NULL`` is
    padding (the rest of the TL flit is then padding too).
DL flit
    ``tl_per_dl`` TL flits followed by one trailer slot (96-bit DL header + CRC-32): 
    ``4 * tl_per_dl + 1`` slots on the wire. TL flits past ``n_tl`` are zero padding.

Byte order: a slot is little-endian (byte ``k`` is bits ``8k..8k+7``); a DL flit's bytes are its
slots in transmission order. The CRC is CRC-32/ISO-HDLC (the Ethernet/zlib CRC, check value
``0xCBF43926``) over every byte of the DL flit before the CRC field, stored little-endian in
the last four bytes, so the whole flit is a standard CRC-32 codeword.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import numpy as np

from fusionfabric.formats.chiplet import (ADDR_BITS, CREDIT_BITS, DL_HEADER, GEN_BITS,
                                         LENGTHS, NON_POSTED, POSTED, SEQ_BITS,
                                         SLOT_BITS, SLOT_BYTES, SLOTS_PER_TL, TAG_BITS,
                                         TL_BYTES, TL_HEADER, VC,
                                         ChipletParams, LinkState, Opcode, Status,
                                         check_phy_params, check_tl_per_dl, dl_flit_slots)
from fusionfabric.formats.pcs import BlockType, control_word
from fusionfabric.formats.switch import CHUNK_BITS, Dtype, Kind, Op

__all__ = [
    "length_code", "opcode_vc", "data_slots", "Message", "message_slots", "pack_tl",
    "unpack_tl", "DLHeader", "dl_frame", "dl_parse", "crc32", "crc_syndromes", "switch_kind",
    "PhyTx", "PhyRx", "one_lane_words", "PhyPair", "MemoryModel", "VECTORS", "CompletionTimerModel", "LinkLedger",
    "DlEscalationModel",
]


def length_code(nbytes: int) -> int:
    if nbytes not in LENGTHS:
        raise ValueError(f"length {nbytes} is not one of {LENGTHS} bytes")
    return LENGTHS.index(nbytes)


def opcode_vc(opcode: int) -> VC:
    op = Opcode(opcode)
    if op == Opcode.NULL:
        raise ValueError("opcode NULL has no virtual channel")
    return VC.RSP if op >= Opcode.READ_CPL else VC.REQ


def data_slots(opcode: int, length: int) -> int:
    """Data slots following the header slot (``length`` is the 2-bit code)."""
    op = Opcode(opcode)
    if op in (Opcode.READ, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK, Opcode.NULL):
        return 0
    return (int(length) + 1) * SLOTS_PER_TL


def switch_kind(opcode: int) -> Kind:
    """The ``fusionfabric.sim.layouts.switch_flit`` kind a message travels as through the switch."""
    op = Opcode(opcode)
    return {Opcode.MULTICAST: Kind.MULTICAST, Opcode.REDUCE: Kind.REDUCE}.get(op, Kind.UNICAST)


@dataclass(frozen=True)
class Message:
    """One request or response as the accelerator port sees it."""
    opcode: int
    length: int = 0            # 2-bit code
    tag: int = 0
    dest: int = 0
    src: int = 0
    addr: int = 0
    status: int = 0
    op: int = 0
    dtype: int = 0
    chunk: int = 0
    data: bytes = b""

    def __post_init__(self):
        n = data_slots(self.opcode, self.length) * SLOT_BYTES
        if len(self.data) != n:
            raise ValueError(f"{Opcode(self.opcode).name} length code {self.length} needs "
                             f"{n} data bytes, got {len(self.data)}")
        if self.opcode == Opcode.REDUCE:
            Op(self.op), Dtype(self.dtype)

    @property
    def vc(self) -> VC:
        return opcode_vc(self.opcode)

    def header(self) -> int:
        return TL_HEADER.pack(opcode=self.opcode, length=self.length, status=self.status,
                              tag=self.tag, dest=self.dest, src=self.src, op=self.op,
                              dtype=self.dtype, chunk=self.chunk, addr=self.addr)

    def beats(self) -> list[int]:
        """The accelerator-port beats (``PORT_BEAT`` words) of this message."""
        hdr = self.header()
        n = data_slots(self.opcode, self.length)
        if n == 0:
            return [hdr << SLOT_BITS]
        return [(hdr << SLOT_BITS) | int.from_bytes(self.data[16 * i:16 * i + 16], "little")
                for i in range(n)]

    @classmethod
    def from_header(cls, hdr: int, data: bytes = b"") -> "Message":
        f = TL_HEADER.unpack(hdr)
        return cls(opcode=f["opcode"], length=f["length"], tag=f["tag"], dest=f["dest"],
                   src=f["src"], addr=f["addr"], status=f["status"], op=f["op"],
                   dtype=f["dtype"], chunk=f["chunk"], data=data)

    @classmethod
    def from_beats(cls, beats: list[int]) -> "Message":
        hdr = beats[0] >> SLOT_BITS
        f = TL_HEADER.unpack(hdr)
        n = data_slots(f["opcode"], f["length"])
        mask = (1 << SLOT_BITS) - 1
        data = b"".join((b & mask).to_bytes(16, "little") for b in beats[:n]) if n else b""
        if len(beats) != max(1, n):
            raise ValueError(f"{len(beats)} beats for a message of {max(1, n)}")
        return cls.from_header(hdr, data)

    def with_src(self, src: int) -> "Message":
        return replace(self, src=src)


def message_slots(msg: Message) -> list[int]:
    """Header slot then data slots (128-bit ints)."""
    out = [msg.header()]
    for i in range(data_slots(msg.opcode, msg.length)):
        out.append(int.from_bytes(msg.data[16 * i:16 * i + 16], "little"))
    return out


def pack_tl(msgs: list[Message]) -> list[bytes]:
    """Pack messages of ONE virtual channel back to back into 64-byte TL flits.

    This is what the RTL packer produces when every beat is available (no idle): slots
    follow each other and only the last TL flit is padded with zero (NULL) slots.
    """
    if len({m.vc for m in msgs}) > 1:
        raise ValueError("pack_tl takes messages of one virtual channel")
    slots = [s for m in msgs for s in message_slots(m)]
    while len(slots) % SLOTS_PER_TL:
        slots.append(0)
    return [b"".join(s.to_bytes(16, "little") for s in slots[i:i + 4])
            for i in range(0, len(slots), SLOTS_PER_TL)]


def unpack_tl(flits: list[bytes]) -> list[Message]:
    """Parse a VC's TL flit stream back into messages (NULL header slots skip the flit)."""
    slots = [int.from_bytes(f[16 * i:16 * i + 16], "little") for f in flits for i in range(4)]
    out, i = [], 0
    while i < len(slots):
        f = TL_HEADER.unpack(slots[i])
        if f["opcode"] == Opcode.NULL:
            i = (i // 4 + 1) * 4           # rest of this TL flit is padding
            continue
        n = data_slots(f["opcode"], f["length"])
        if i + 1 + n > len(slots):
            raise ValueError(f"message at slot {i} runs past the end of the flit stream")
        data = b"".join(s.to_bytes(16, "little") for s in slots[i + 1:i + 1 + n])
        out.append(Message.from_header(slots[i], data))
        i += 1 + n
    return out


# -- CRC-32 --------------------------------------------------------------------------------

def crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC (reflected 0x04C11DB7, init and xorout 0xFFFFFFFF); check 0xCBF43926."""
    return zlib.crc32(bytes(data)) & 0xFFFF_FFFF


def crc_syndromes(n_bits: int) -> np.ndarray:
    """CRC change caused by flipping each of the first ``n_bits`` bits of a codeword.

    For a codeword of ``n_bits`` bits (CRC field last), entry ``i`` is the 32-bit syndrome of a
    single flip at bit ``i`` (bit order: byte by byte, LSB first, as transmitted). An error
    pattern goes undetected iff the XOR of its syndromes is zero. Bits inside the CRC field
    have unit syndromes.
    """
    if n_bits % 8 or n_bits < 40:
        raise ValueError(f"n_bits={n_bits} must be a multiple of 8 and at least 40")
    nbytes = n_bits // 8
    msg_len = nbytes - 4
    base = bytes(msg_len)
    c0 = crc32(base)
    syn = np.zeros(n_bits, dtype=np.uint32)
    # linearity: syndrome(bit i in message) = crc(e_i) ^ crc(0); computed with a sliding
    # register: crc of a single 1 bit at position i followed by zeros.
    for i in range(msg_len * 8):
        m = bytearray(msg_len)
        m[i // 8] = 1 << (i % 8)
        syn[i] = crc32(bytes(m)) ^ c0
    for j in range(32):
        syn[msg_len * 8 + j] = 1 << j
    return syn


# -- DL framing ---------------------------------------------------------------------------

@dataclass
class DLHeader:
    seq: int = 0
    data: int = 0
    n_tl: int = 0
    vc: int = 0
    ack: int = 0
    nak: int = 0
    init: int = 0
    init_seen: int = 0
    credit0: int = 0
    credit1: int = 0
    fresh: int = 0
    gen: int = 0
    gen_seen: int = 0

    def pack(self) -> int:
        return DL_HEADER.pack(seq=self.seq, data=self.data, n_tl=self.n_tl, vc=self.vc,
                              ack=self.ack, nak=self.nak, init=self.init,
                              init_seen=self.init_seen, credit0=self.credit0,
                              credit1=self.credit1, fresh=self.fresh, gen=self.gen,
                              gen_seen=self.gen_seen)

    @classmethod
    def unpack(cls, word: int) -> "DLHeader":
        f = DL_HEADER.unpack(word & ((1 << 96) - 1))
        f.pop("rsvd")
        return cls(**f)


def dl_frame(tl_flits: list[tuple[int, bytes]], header: DLHeader, tl_per_dl: int) -> bytes:
    """The exact bytes of one DL flit: TL flits, zero padding, DL header, CRC-32.

    ``tl_flits`` is a list of ``(vc, 64 bytes)``; ``header.n_tl``/``header.vc``/
    ``header.data`` are filled in from it.
    """
    check_tl_per_dl(tl_per_dl)
    if len(tl_flits) > tl_per_dl:
        raise ValueError(f"{len(tl_flits)} TL flits do not fit tl_per_dl={tl_per_dl}")
    body = bytearray()
    vc_bits = 0
    for j, (vc, flit) in enumerate(tl_flits):
        if len(flit) != TL_BYTES:
            raise ValueError(f"TL flit {j} is {len(flit)} bytes, not {TL_BYTES}")
        body += flit
        vc_bits |= (int(vc) & 1) << j
    body += bytes(TL_BYTES * (tl_per_dl - len(tl_flits)))
    h = replace(header, n_tl=len(tl_flits), vc=vc_bits, data=int(bool(tl_flits)))
    if not tl_flits:
        h.seq = 0
    body += h.pack().to_bytes(12, "little")
    return bytes(body) + crc32(body).to_bytes(4, "little")


def dl_parse(flit: bytes, tl_per_dl: int) -> tuple[bool, DLHeader, list[tuple[int, bytes]]]:
    """Check and split one DL flit: ``(crc_ok, header, [(vc, tl_flit), ...])``."""
    check_tl_per_dl(tl_per_dl)
    n = dl_flit_slots(tl_per_dl) * SLOT_BYTES
    if len(flit) != n:
        raise ValueError(f"DL flit is {len(flit)} bytes, not {n} for tl_per_dl={tl_per_dl}")
    ok = crc32(flit[:-4]) == int.from_bytes(flit[-4:], "little")
    h = DLHeader.unpack(int.from_bytes(flit[-16:-4], "little"))
    tls = [((h.vc >> j) & 1, flit[TL_BYTES * j:TL_BYTES * (j + 1)])
           for j in range(min(h.n_tl, tl_per_dl))]
    return ok, h, tls


def slots_to_flit(slots: list[int]) -> bytes:
    return b"".join(int(s).to_bytes(16, "little") for s in slots)


# -- PHY framing over a 2-lane 64b/66b PCS (rtl/chiplet/phy.py) -----------------------------

class PhyTx:
    """Row by row model of :class:`fusionfabric.rtl.chiplet.phy.PhyToPcs`.

    :meth:`row` gets the word offered this row (``(data, first)`` or None) and returns
    ``(row, consumed)``: ``row`` is ``("start",)``, ``("idle",)`` or ``("data", data)``.
    A flit's first word goes out without a START row only if the previous row sent was the
    last slot of a complete flit and fewer than ``start_every`` flits began since the last
    START row. Marker rows (the PCS not ready) are not rows here: they change nothing.
    """

    def __init__(self, tl_per_dl: int = 4, start_every: int = 16):
        check_phy_params(tl_per_dl, start_every)
        self.L = dl_flit_slots(tl_per_dl)
        self.K = start_every
        self.pos = 0
        self.chain = False
        self.since = 0
        self.started = False
        self.start_rows = 0

    def row(self, word):
        if word is None:
            self.chain = False
            return ("idle",), False
        data, first = word
        if first and not self.started and (not self.chain or self.since == self.K):
            self.started, self.since, self.chain = True, 0, False
            self.start_rows += 1
            return ("start",), False
        self.started = False
        if first:
            self.pos, self.chain = 1, False
            self.since = min(self.K, self.since + 1)
        elif self.pos:
            self.chain = self.pos == self.L - 1
            self.pos = 0 if self.chain else self.pos + 1
        else:
            self.chain = False
        return ("data", data), True


class PhyRx:
    """Row by row model of :class:`fusionfabric.rtl.chiplet.phy.PcsToPhy`.

    :meth:`row` takes a received row — ``("start",)``, ``("idle",)``, ``("data", d)`` or
    ``("error", d)`` (anything else: an ERROR block, a damaged row) — and returns the word
    it delivers, ``(data, first, err)``, or None. ``err`` is set on a slot made from a row
    that is not a data row; a row that is neither data nor START right after a flit's last
    slot ends the chain (the receiver waits for a START row). :meth:`link_down` is a cycle
    with the PCS receiver's link down (``PcsToPhy.i_link_up`` low): the place is forgotten.
    """

    def __init__(self, tl_per_dl: int = 4):
        check_phy_params(tl_per_dl, 1)
        self.L = dl_flit_slots(tl_per_dl)
        self.armed = False
        self.pos = 0

    def row(self, row):
        kind = row[0]
        data = row[1] if len(row) > 1 else 0
        err = kind != "data"
        if kind == "start":
            self.armed, self.pos = True, 0
            return None
        if self.armed:
            self.armed, self.pos = False, 1
            return (data, True, err)
        if self.pos == self.L:
            if err:
                self.pos = 0
                return None
            self.pos = 1
            return (data, True, False)
        if self.pos:
            self.pos += 1
            return (data, False, err)
        return (data, False, False) if not err else None

    def link_down(self):
        self.armed, self.pos = False, 0


# -- 1-lane PHY mapping: the rows above, one 64-bit word per PCS row --------------------------

_START, _IDLE = control_word(BlockType.START), control_word(BlockType.IDLE)


def one_lane_words(row) -> list[tuple[int, bool]]:
    """The 1-lane PCS words ``(data, ctrl)`` that carry one :class:`PhyTx` row
    (:class:`fusionfabric.rtl.chiplet.phy.PhyToPcs` with ``n_lanes = 1``): a data row is
    its low word then its high word, a START row one START control word, an IDLE row one
    IDLE control word."""
    if row[0] == "start":
        return [(_START, True)]
    if row[0] == "idle":
        return [(_IDLE, True)]
    d = row[1]
    return [(d & (2**64 - 1), False), (d >> 64, False)]


class PhyPair:
    """Word by word model of the pairing step of
    :class:`fusionfabric.rtl.chiplet.phy.PcsToPhy` with ``n_lanes = 1``.

    :meth:`word` takes one received word ``(data, ctrl)`` and returns the 2-lane row it
    completes for :class:`PhyRx`, with the row's 128-bit raw value (low word first), or
    None: a START word is ``("start",)``; an IDLE word with no word held is ``("idle",)``;
    any other word is held, and the next non-START word completes ``("data", value)`` (two
    data words) or ``("error", value)``. :meth:`link_down` forgets the held word."""

    def __init__(self):
        self.held = None

    @staticmethod
    def _kind(word):
        data, ctrl = word
        return (data & 0xFF) if ctrl else None

    def word(self, word):
        data, ctrl = word
        if ctrl and self._kind(word) == BlockType.START:
            self.held = None
            return ("start",), data | (_IDLE << 64)
        if self.held is not None:
            lo, held, self.held = self.held, self.held, None
            value = lo[0] | (data << 64)
            kind = "data" if not held[1] and not ctrl else "error"
            return (kind, value), value
        if ctrl and self._kind(word) == BlockType.IDLE:
            return ("idle",), data | (_IDLE << 64)
        self.held = word
        return None

    def link_down(self):
        self.held = None


# -- transaction-level link model (scoreboards) ---------------------------------------------

class MemoryModel:
    """The completer behind a chiplet: byte memory, int32 atomics, reads.

    ``respond(msg)`` returns the response Message a completer sends for a request (None for
    posted MULTICAST/REDUCE), updating memory. Addresses are taken modulo ``size``.
    """

    def __init__(self, node: int, size: int = 1 << 16):
        self.node = node
        self.size = size
        self.mem = np.zeros(size, dtype=np.uint8)

    def _span(self, addr, n):
        a = addr % self.size
        return (np.arange(n) + a) % self.size

    def respond(self, msg: Message) -> Message | None:
        op = Opcode(msg.opcode)
        n = LENGTHS[msg.length]
        idx = self._span(msg.addr, n)
        if op == Opcode.WRITE:
            self.mem[idx] = np.frombuffer(msg.data, dtype=np.uint8)
            return Message(Opcode.WRITE_ACK, msg.length, msg.tag, msg.src, self.node)
        if op == Opcode.READ:
            return Message(Opcode.READ_CPL, msg.length, msg.tag, msg.src, self.node,
                           data=self.mem[idx].tobytes())
        if op == Opcode.ATOMIC_ADD:
            cur = self.mem[idx].copy().view("<i4")
            add = np.frombuffer(msg.data, dtype="<i4")
            self.mem[idx] = (cur + add).astype("<i4").view(np.uint8)
            return Message(Opcode.ATOMIC_ACK, msg.length, msg.tag, msg.src, self.node)
        return None


def random_message(rng: np.random.Generator, opcodes=None, tag: int = 0, dest: int = 0,
                   src: int = 0) -> Message:
    """A random request (or response if a response opcode is drawn)."""
    ops = list(opcodes or [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST,
                           Opcode.REDUCE])
    op = Opcode(ops[int(rng.integers(len(ops)))])
    length = int(rng.integers(4))
    n = data_slots(op, length) * SLOT_BYTES
    kw = {}
    if op == Opcode.REDUCE:
        kw = dict(op=int(rng.integers(3)), dtype=int(rng.integers(5)),
                  chunk=int(rng.integers(1 << CHUNK_BITS)))
    if op >= Opcode.READ_CPL:
        kw["status"] = int(rng.integers(3))
    return Message(op, length, tag, dest, src, int(rng.integers(1 << ADDR_BITS)),
                   data=rng.bytes(n), **kw)


# -- fault escalation: the port's completion timer and the link's accounting ---------------

class CompletionTimerModel:
    """When the accelerator port's completion timer (``rtl/chiplet/tracker.py``) decides.

    Cycles count from reset (the RTL's stamp counter is the cycle number). A tag issued in
    cycle ``t`` (its request taken on ``i_req``) is checked by the scan in the cycles ``k``
    with ``k - SCAN_LATENCY ≡ tag (mod 256)`` and ``k - SCAN_LATENCY > t``; the first such
    ``k`` with ``k - t >= timeout`` (any, for a refused request) expires it, unless the
    completion's first beat is accepted on ``o_rsp`` in that same cycle or before (delivery
    wins). An expired tag's error completion is queued at ``k`` and its first beat is
    offered on ``o_rsp`` at ``k + ERR_LATENCY`` if the port is idle then.
    """

    #: cycles from the expiring check to the error completion's first beat on an idle port
    #: (the 2-cycle read latency of the buffered error queue)
    ERR_LATENCY = 2
    #: cycles from the scan's memory read of a tag to its check (the read, then the age
    #: comparison into a register)
    SCAN_LATENCY = 2

    def __init__(self, timeout: int):
        if not 1 <= timeout < 1 << 24:
            raise ValueError(f"timeout={timeout} must be in 1..{(1 << 24) - 1}")
        self.timeout = timeout

    def expiry(self, tag: int, issued: int, refused: bool = False) -> int:
        """The cycle the scan expires ``tag`` issued in cycle ``issued`` (if still
        outstanding and the error queue has room)."""
        n, d = 1 << TAG_BITS, self.SCAN_LATENCY
        c = issued + 1 + (tag - issued - 1) % n          # first read of the tag after issue
        need = 0 if refused else self.timeout
        while c + d - issued < need:
            c += n
        return c + d

    def outcome(self, tag: int, issued: int, accepted: int | None,
                refused: bool = False) -> str:
        """``"ok"`` if the completion's first beat is accepted on ``o_rsp`` in cycle
        ``accepted`` no later than the expiry, else ``"error"`` (refused) or ``"timeout"``
        (and the completion, if it comes, is dropped as late)."""
        if refused:
            return "error"
        if accepted is not None and accepted <= self.expiry(tag, issued):
            return "ok"
        return "timeout"

    def status(self, outcome: str) -> int:
        return {"ok": Status.OK, "error": Status.ERROR, "timeout": Status.TIMEOUT}[outcome]


def error_completion(request: Message, node: int, status: int) -> Message:
    """The completion the requester's own chiplet makes for ``request`` (status TIMEOUT or
    ERROR): the request's completion opcode, length and tag, ``src = dest = node``, a
    READ_CPL's data all zeros."""
    op = {Opcode.READ: Opcode.READ_CPL, Opcode.WRITE: Opcode.WRITE_ACK,
          Opcode.ATOMIC_ADD: Opcode.ATOMIC_ACK}[Opcode(request.opcode)]
    return Message(op, request.length, request.tag, node, node, status=status,
                   data=bytes(data_slots(op, request.length) * SLOT_BYTES))


class LinkLedger:
    """What happened to every message one accelerator sent over a chiplet link.

    ``sent(msg, refused)`` records a request taken on ``i_req`` (``refused``: the port's
    ``failed`` status was set when its first beat was taken); ``delivered(msg)`` a request
    seen on the peer's ``o_req``; ``completed(cpl)`` a completion on the requester's
    ``o_rsp``. :meth:`check` proves the promises of docs/protocol.md ("Fault escalation")
    and returns the accounting:

    * delivered messages are sent ones, in order, each at most once, and a refused one
      never;
    * each non-posted request gets exactly one completion: OK (and then it was
      delivered), ERROR (exactly the refused ones) or TIMEOUT;
    * posted: ``sent = delivered + refused + held``, where the held ones (taken before the
      failure, still in the link's buffers) are the tail of the accepted stream after the
      last delivered one — none is skipped; ``held`` is 0 once the link has recovered.
    """

    def __init__(self):
        self.log = []            # [msg, refused, delivered count]
        self.delivered_msgs = []
        self.cpls = {}

    def sent(self, msg: Message, refused: bool):
        self.log.append([msg, refused, 0])

    def delivered(self, msg: Message):
        self.delivered_msgs.append(msg)

    def completed(self, cpl: Message):
        self.cpls.setdefault(cpl.tag, []).append(cpl)

    def check(self) -> dict:
        accepted = [e for e in self.log if not e[1]]
        nd = len(self.delivered_msgs)
        if nd > len(accepted):
            raise AssertionError(f"{nd} delivered, only {len(accepted)} accepted "
                                 "(a duplicate or a refused message delivered)")
        for i, d in enumerate(self.delivered_msgs):
            if accepted[i][0] != d:
                raise AssertionError(f"delivery {i}: got {d}, expected {accepted[i][0]} "
                                     "(lost, duplicated, reordered or corrupt)")
            accepted[i][2] = 1
        n_held = len(accepted) - nd       # the tail: taken, not (yet) delivered
        acc = {"sent": len(self.log), "delivered": len(self.delivered_msgs),
               "refused": sum(e[1] for e in self.log), "held": n_held,
               "refused_posted": {}, "completions": {"ok": 0, "error": 0, "timeout": 0}}
        tags = {}
        for msg, refused, ndel in self.log:
            if msg.opcode in POSTED:
                if refused:
                    name = Opcode(msg.opcode).name.lower()
                    acc["refused_posted"][name] = acc["refused_posted"].get(name, 0) + 1
                continue
            tags.setdefault(msg.tag, []).append((msg, refused, ndel))
        for tag, reqs in tags.items():
            got = self.cpls.get(tag, [])
            if len(got) != len(reqs):
                raise AssertionError(f"tag {tag}: {len(reqs)} requests, {len(got)} completions")
            for (msg, refused, ndel), cpl in zip(reqs, got):
                st = Status(cpl.status)
                if refused and st != Status.ERROR:
                    raise AssertionError(f"tag {tag}: refused but completed {st.name}")
                if st == Status.ERROR and not refused:
                    raise AssertionError(f"tag {tag}: ERROR for a request that was sent")
                if st == Status.OK and ndel != 1:
                    raise AssertionError(f"tag {tag}: OK completion, delivered {ndel} times")
                acc["completions"][{Status.OK: "ok", Status.ERROR: "error",
                                    Status.TIMEOUT: "timeout"}[st]] += 1
        extra = set(self.cpls) - set(tags)
        if extra:
            raise AssertionError(f"completions for tags never requested: {sorted(extra)}")
        assert acc["sent"] == acc["delivered"] + acc["refused"] + acc["held"]
        return acc


# -- vectors ----------------------------------------------------------------------------------

def _vectors_flit(params: dict, seed: int, count: int) -> dict:
    known = {"tl_per_dl", "vc"}
    for k in params:
        if k not in known:
            raise ValueError(f"unknown parameter {k!r} (known: {', '.join(sorted(known))})")
    try:
        tl_per_dl = int(params.get("tl_per_dl", 4))
        vc = int(params.get("vc", 0))
    except ValueError as exc:
        raise ValueError(f"bad parameter value: {exc}") from None
    check_tl_per_dl(tl_per_dl)
    if vc not in (0, 1):
        raise ValueError(f"vc={vc} must be 0 (requests) or 1 (responses)")
    rng = np.random.default_rng(seed)
    out = []
    seq = 0
    for _ in range(count):
        ops = None if vc == 0 else [Opcode.READ_CPL, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK]
        msgs, tls = [], []
        while True:
            m = random_message(rng, ops, tag=int(rng.integers(256)),
                               dest=int(rng.integers(256)), src=int(rng.integers(256)))
            cand = pack_tl(msgs + [m])
            if len(cand) > tl_per_dl:
                if msgs:
                    break
                continue            # the first message must fit: draw another
            msgs.append(m)
            tls = cand
            if rng.random() < 0.3:
                break
        hdr = DLHeader(seq=seq, ack=int(rng.integers(1 << SEQ_BITS)),
                       credit0=int(rng.integers(1 << CREDIT_BITS)),
                       credit1=int(rng.integers(1 << CREDIT_BITS)))
        flit = dl_frame([(vc, t) for t in tls], hdr, tl_per_dl)
        out.append({
            "messages": [{"opcode": Opcode(m.opcode).name, "length": LENGTHS[m.length],
                          "tag": m.tag, "dest": m.dest, "src": m.src, "addr": m.addr,
                          "data": m.data.hex()} for m in msgs],
            "tl_flits": [t.hex() for t in tls],
            "dl_flit": flit.hex(),
            "crc": f"{int.from_bytes(flit[-4:], 'little'):#010x}",
        })
        seq = (seq + 1) % (1 << SEQ_BITS)
    return {"params": {"tl_per_dl": tl_per_dl, "vc": vc}, "vectors": out}


VECTORS = {"flit": _vectors_flit}


# -- fault escalation: the data-link layer's escalation path ---------------------------------

class DlEscalationModel:
    """Cycle model of a data-link layer's fault escalation (docs/protocol.md, "Bring-up" and
    "Fault escalation"): link state, ``failed``, the failure counters and the rewinds.

    Written from the spec, independent of ``rtl/chiplet/dl_tx.py``. Call :meth:`step` once per
    clock cycle with that cycle's inputs; it returns the outputs visible in that cycle (the
    registers before the clock edge) and then applies the edge. Reset: DOWN, all counts 0.

    Covered:

    * *Bring-up.* DOWN → INIT in the cycle after one with ``link_up`` high; INIT or ACTIVE →
      DOWN after a cycle with ``link_up`` low; INIT → ACTIVE on a taken good flit that is a
      bring-up flit with ``init_seen``, or a normal flit whose ``ack`` lies in the window, once
      the peer's sizes are known (from any taken bring-up flit, this one included). Until its
      first ACTIVE the DL is fresh and takes only bring-up flits with ``fresh`` and normal
      flits with an in-window ``ack`` and ``gen_seen`` equal to its generation, once the
      sizes are known; taking a normal flit ends it being fresh, also when a failure or a
      link drop in that cycle keeps it from ACTIVE. DOWN and FAILED take nothing.
    * *Generation.* 0 at reset, plus one (mod 2**GEN_BITS) on entering FAILED and on
      leaving INIT or ACTIVE for DOWN.
    * *Acks.* A taken flit's ``ack`` is accepted when it lies between the oldest
      unacknowledged sequence and one past the highest sent (mod 2**SEQ_BITS); a different
      accepted ``ack`` is ack progress.
    * *Rewinds.* While ACTIVE: a taken flit with ``nak`` and an accepted ``ack``; and the
      replay timer, which counts the ACTIVE cycles with flits unacknowledged since the last
      ack progress or rewind (a cycle with either restarts it, so does any cycle not ACTIVE
      or with nothing unacknowledged) and asks for a rewind in its ``timeout``-th cycle.
    * *Replay limit.* Rewinds are counted since the last ack progress (a flit with progress
      and ``nak`` counts its own rewind as the first); the ``replay_limit``-th is done, the
      next one due enters FAILED instead (``fail_replay``). The count survives a link drop;
      entering FAILED clears it.
    * *Progress watchdog.* A second count of the cycles since the last ack progress, in
      every state but FAILED, while flits are unacknowledged (a cycle with nothing
      unacknowledged, or with progress, restarts it); in its ``stall_after``-th cycle
      (``replay_limit + 2`` replay timeouts) the DL enters FAILED, counted as
      ``fail_replay``. The replay timer restarts at every bring-up, so without it a PHY that
      drops more often than once per replay timeout would never fail the DL.
    * *Link lost.* Once ``link_up`` has been high in an earlier cycle, a timer counts the
      cycles that are neither FAILED nor ACTIVE with a good flit; in its ``lost_after``-th
      cycle the DL enters FAILED (``fail_lost``). A replay-limit failure and a link-lost
      timeout in the same cycle count as one failure, by the replay limit; a failure wins
      over a link drop in the same cycle.
    * *Hold-off.* FAILED lasts ``holdoff`` cycles whatever ``link_up`` does, then DOWN (one
      cycle at least) and INIT. ``failed`` is set on entering FAILED, cleared on entering
      ACTIVE. Counters saturate at 16 bits.

    Left out (inputs that would need them raise :class:`ValueError`): peer reset, refresh and
    link reset ("Peer reset and link reset": a good bring-up flit with ``fresh`` reaching a
    DL that has been ACTIVE), credits (credit returns are assumed in range: a fresh DL would
    ignore a flit whose returns do not fit), and the send path: when data flits go out is an
    input (``new_send``), not predicted.

    Parameters
    ----------
    params : ChipletParams, optional
        ``tl_per_dl``, ``replay_timeout``, ``replay_limit``, ``link_timeout`` and
        ``retrain_holdoff`` are used; 0 derives a value as the spec's table says. None: the
        defaults.
    **overrides
        Fields of ``ChipletParams`` replacing those of ``params``.

    Raises
    ------
    ValueError
        ``params`` not a ChipletParams, an unknown or out-of-range override (one line).
    """

    #: the keys of :meth:`outputs`: the state, ``failed``, the failure counters, the rewinds
    FIELDS = ("state", "failed", "failures", "fail_replay", "fail_lost", "replays", "timeouts")

    _MOD = 1 << SEQ_BITS
    _TOP = 0xFFFF

    def __init__(self, params=None, **overrides):
        if params is None:
            params = ChipletParams()
        if not isinstance(params, ChipletParams):
            raise ValueError(f"params={params!r} must be a ChipletParams")
        bad = sorted(set(overrides) - set(ChipletParams.__dataclass_fields__))
        if bad:
            raise ValueError(f"unknown ChipletParams field {bad[0]!r}")
        p = replace(params, **overrides) if overrides else params
        self.params = p
        flit = 4 * p.tl_per_dl + 1                        # slots of one DL flit
        self.timeout = p.replay_timeout or 8 * flit + 64
        self.replay_limit = p.replay_limit
        self.lost_after = p.link_timeout or 16 * self.timeout
        self.stall_after = (self.replay_limit + 2) * self.timeout
        self.holdoff = p.retrain_holdoff or self.timeout
        self.state = LinkState.DOWN
        self.failed = 0
        self.count = dict.fromkeys(self.FIELDS[2:], 0)
        self.fresh = True          # not ACTIVE since reset
        self.gen = 0               # drops and failures since reset, mod 2**GEN_BITS
        self.sizes = False         # the peer's buffer sizes are known
        self.up_seen = False       # link_up high in an earlier cycle
        self.acked = 0             # oldest unacknowledged sequence
        self.hi = 0                # one past the highest sequence sent
        self.rewinds = 0           # rewinds since the last ack progress
        self.timer = 0             # replay timer
        self.quiet = 0             # link-lost timer
        self.stall = 0             # progress watchdog
        self.held = 0              # cycles spent FAILED

    def outputs(self) -> dict:
        return {"state": self.state, "failed": self.failed, **self.count}

    def _bump(self, name, cond=True):
        if cond and self.count[name] < self._TOP:
            self.count[name] += 1

    def step(self, link_up, good=False, *, init=False, init_seen=False, fresh=False, ack=0,
             nak=False, gen_seen=0, new_send=False) -> dict:
        """One cycle. ``link_up``: the PHY is locked; ``good``: a good-CRC flit arrived, with
        header fields ``init``, ``init_seen``, ``fresh``, ``ack``, ``nak``,
        ``gen_seen``; ``new_send``: the transmitter picks a data flit never sent before
        (its sequence is one past the highest sent). Returns :meth:`outputs` of this
        cycle."""
        S = LinkState
        out = self.outputs()
        st = self.state
        if new_send and st != S.ACTIVE:
            raise ValueError(f"new_send in state {S(st).name}: data flits go out only while "
                             "ACTIVE")
        ack %= self._MOD
        window = (self.hi - self.acked) % self._MOD
        in_window = (ack - self.acked) % self._MOD <= window
        taken = False
        if good and st in (S.INIT, S.ACTIVE):
            if self.fresh:
                taken = fresh if init else (in_window and self.sizes
                                            and gen_seen == self.gen)
            elif init and fresh:
                raise ValueError("a fresh bring-up flit reached a DL that has been ACTIVE: "
                                 "peer reset or refresh, not covered by this model")
            else:
                taken = True
        accepted = taken and in_window
        progress = accepted and ack != self.acked
        nak_due = accepted and nak and st == S.ACTIVE

        # replay timer
        timer_due = False
        if st != S.ACTIVE or progress or nak_due or self.hi == self.acked:
            self.timer = 0
        else:
            self.timer += 1
            if self.timer == self.timeout:
                timer_due, self.timer = True, 0

        # replay limit
        if progress:
            self.rewinds = 0
        over = False
        if nak_due or timer_due:
            if self.rewinds == self.replay_limit:
                over = True
            else:
                self.rewinds += 1
                self._bump("replays")
                self._bump("timeouts", timer_due)

        # progress watchdog
        if st == S.FAILED or progress or self.hi == self.acked:
            self.stall = 0
        else:
            self.stall += 1
            if self.stall == self.stall_after:
                over, self.stall = True, 0

        # link-lost timer
        lost = False
        if st == S.FAILED or not self.up_seen or (good and st == S.ACTIVE):
            self.quiet = 0
        else:
            self.quiet += 1
            lost = self.quiet == self.lost_after

        # state
        if st == S.FAILED:
            self.held += 1
            if self.held == self.holdoff:
                self.state = S.DOWN
        elif over or lost:
            self.state, self.failed, self.held = S.FAILED, 1, 0
            self.gen = (self.gen + 1) % (1 << GEN_BITS)
            self.rewinds = self.quiet = self.stall = 0
            self._bump("failures")
            self._bump("fail_replay" if over else "fail_lost")
        elif not link_up:
            if st != S.DOWN:
                self.gen = (self.gen + 1) % (1 << GEN_BITS)
            self.state = S.DOWN
        elif st == S.DOWN:
            self.state = S.INIT
        elif (st == S.INIT and taken and (init_seen if init else in_window)
              and (self.sizes or init)):
            self.state, self.failed, self.fresh = S.ACTIVE, 0, False

        if taken and init:
            self.sizes = True
        if taken and not init:
            self.fresh = False
        if accepted:
            self.acked = ack
        if new_send:
            self.hi = (self.hi + 1) % self._MOD
        self.up_seen |= bool(link_up)
        return out
