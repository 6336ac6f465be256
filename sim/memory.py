"""Golden model of the memory target of a ``cpu`` endpoint (docs/fabric.md, "Memory target").

Pure numpy, written from the spec, not from the RTL (:mod:`fusionfabric.rtl.fabric.memory`):
a byte array, requests served in arrival order, int32 little-endian lanes for ATOMIC_ADD.

Rules
-----
* A message starts with a beat whose opcode is WRITE (``length`` bytes follow in
  ``length / 16`` beats, the first beat included), READ (one beat) or ATOMIC_ADD (like
  WRITE); the header is taken from that first beat. Any other opcode there: that one beat
  is dropped and counted (``dropped``), the next beat starts a message again.
* The request is in range when ``addr % 16 == 0`` and ``addr + length <= mem_bytes``.
  Out of range: no byte of memory changes, the completion has status ERROR (a READ_CPL
  then carries ``length`` zero bytes).
* Completions: READ_CPL (the bytes), WRITE_ACK, ATOMIC_ACK; ``length`` and ``tag`` of the
  request, ``dest`` = the request's ``src``, ``src`` = the target's node id; every other
  header field zero.
"""

from __future__ import annotations

import numpy as np

from fusionfabric.formats.chiplet import LENGTHS, PORT_BEAT, SLOT_BITS, Opcode, Status
from fusionfabric.formats.memory import check_mem_bytes
from fusionfabric.sim.chiplet import Message

__all__ = ["MemTargetModel", "request_beats"]

_SERVED = {Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD}
SLOT_MASK = (1 << SLOT_BITS) - 1


class MemTargetModel:
    """The memory target, request by request or beat by beat.

    Parameters
    ----------
    mem_bytes : int
        Memory size (power of two, 64..2**20).
    node : int
        The target's node id (``src`` of its completions).

    Members
    -------
    mem : numpy.ndarray of uint8
        The memory contents.
    counts : dict
        ``reads``, ``writes``, ``atomics`` (completed OK), ``errors``, ``dropped`` (beats).
    """

    def __init__(self, mem_bytes: int, node: int = 0):
        self.mem_bytes = check_mem_bytes(mem_bytes)
        self.node = int(node)
        self.mem = np.zeros(mem_bytes, dtype=np.uint8)
        self.counts = {"reads": 0, "writes": 0, "atomics": 0, "errors": 0, "dropped": 0}

    def in_range(self, addr: int, nbytes: int) -> bool:
        return addr % 16 == 0 and addr + nbytes <= self.mem_bytes

    def serve(self, opcode: int, length: int, tag: int, src: int, addr: int,
              payload: bytes = b"") -> tuple[int, int, bytes]:
        """Execute one request; returns ``(completion opcode, status, completion data)``."""
        nbytes = LENGTHS[length]
        good = self.in_range(addr, nbytes)
        status = int(Status.OK if good else Status.ERROR)
        if not good:
            self.counts["errors"] += 1
        if opcode == Opcode.READ:
            out = self.mem[addr:addr + nbytes].tobytes() if good else bytes(nbytes)
            self.counts["reads"] += good
            return int(Opcode.READ_CPL), status, out
        if len(payload) != nbytes:
            raise ValueError(f"{Opcode(opcode).name}: {len(payload)} payload bytes for "
                             f"length {nbytes}")
        if opcode == Opcode.WRITE:
            if good:
                self.mem[addr:addr + nbytes] = np.frombuffer(payload, dtype=np.uint8)
            self.counts["writes"] += good
            return int(Opcode.WRITE_ACK), status, b""
        if opcode == Opcode.ATOMIC_ADD:
            if good:
                old = self.mem[addr:addr + nbytes].view("<i4").astype(np.int64)
                add = np.frombuffer(payload, dtype="<i4").astype(np.int64)
                total = (old + add) & 0xFFFFFFFF          # two's-complement wrap-around
                self.mem[addr:addr + nbytes] = total.astype("<u4").view(np.uint8)
            self.counts["atomics"] += good
            return int(Opcode.ATOMIC_ACK), status, b""
        raise ValueError(f"opcode {opcode} is not served")

    def completion_beats(self, opcode: int, status: int, length: int, tag: int, dest: int,
                         data: bytes) -> list[int]:
        """The ``PORT_BEAT`` words of a completion."""
        hdr = dict(opcode=opcode, length=length, status=status, tag=tag, dest=dest,
                   src=self.node)
        if opcode != Opcode.READ_CPL:
            return [PORT_BEAT.pack(data=0, **hdr)]
        return [PORT_BEAT.pack(data=int.from_bytes(data[i:i + 16], "little"), **hdr)
                for i in range(0, len(data), 16)]

    def run_beats(self, beats) -> list[int]:
        """Feed request beats (``PORT_BEAT`` words, in arrival order) and return every
        completion beat in order. A message cut short at the end of ``beats`` is an error."""
        beats = [int(b) for b in beats]
        out: list[int] = []
        i = 0
        while i < len(beats):
            f = PORT_BEAT.unpack(beats[i])
            op = f["opcode"]
            if op not in _SERVED:
                self.counts["dropped"] += 1
                i += 1
                continue
            n = 1 if op == Opcode.READ else LENGTHS[f["length"]] // 16
            if i + n > len(beats):
                raise ValueError(f"message at beat {i} needs {n} beats, {len(beats) - i} left")
            payload = b"" if op == Opcode.READ else b"".join(
                (b & SLOT_MASK).to_bytes(16, "little") for b in beats[i:i + n])
            cop, status, data = self.serve(op, f["length"], f["tag"], f["src"], f["addr"],
                                           payload)
            out += self.completion_beats(cop, status, f["length"], f["tag"], f["src"], data)
            i += n
        return out


# -- random request streams (for the tests and the cocotb testbench) ------------------------

def _addr(rng, mem_bytes, nbytes, hot):
    """An address: mostly a few hot words (collisions), some anywhere in range, some out
    of range (past the end, above the memory, misaligned)."""
    r = rng.random()
    if r < 0.55 and hot:
        return int(hot[int(rng.integers(len(hot)))])
    if r < 0.80:
        top = (mem_bytes - nbytes) // 16
        return 16 * int(rng.integers(top + 1)) if top >= 0 else 0
    if r < 0.88:                                  # aligned, but runs past the end
        return max(0, mem_bytes - nbytes + 16 * int(rng.integers(1, nbytes // 16 + 1)))
    if r < 0.94:                                  # above the memory (high address bits)
        return (1 << int(rng.integers(20, 57))) | 16 * int(rng.integers(mem_bytes // 16))
    return 16 * int(rng.integers(mem_bytes // 16)) + int(rng.integers(1, 16))  # misaligned


def _message(rng, op, length, addr, tag, src):
    n = 0 if op == Opcode.READ else LENGTHS[length]
    if op == Opcode.ATOMIC_ADD:                   # int32 addends, big ones so sums wrap
        data = rng.integers(-(1 << 31), 1 << 31, n // 4, dtype=np.int64).astype("<i4")
        payload = data.tobytes()
    else:
        payload = rng.bytes(n)
    return Message(op, length, tag, 0, src, addr, data=payload)


def request_beats(rng: np.random.Generator, mem_bytes: int, n_requests: int, *,
                  unserved: bool = True):
    """``(beats, kinds)``: request beats (``PORT_BEAT`` words) of ``n_requests`` or a few more
    messages and the opcode name of each message.

    WRITE, READ and ATOMIC_ADD of every length, mostly to three hot addresses; runs of 2..5
    back-to-back ATOMIC_ADDs to one address; an ATOMIC_ADD starting on the previous one's
    last word; a READ right after a WRITE to the same address from the same source;
    MULTICAST/REDUCE/RESULT messages (not served); addresses past the end, above the
    memory and misaligned; and on 30 % of the plain requests header fields changed on
    every beat after the first (the target samples the first). ``unserved=False`` leaves
    out the messages the target does not serve.
    """
    hot = [16 * int(rng.integers(max(1, mem_bytes // 16 - 15))) for _ in range(3)]
    beats, kinds = [], []
    tag = 0

    def add(msg, scramble=False):
        nonlocal tag
        bs = msg.beats()
        if scramble and len(bs) > 1:              # later beats' header fields are ignored
            junk = int(rng.integers(1 << 62)) | int(rng.integers(1 << 62)) << 64
            bs = [bs[0]] + [(b & SLOT_MASK) | (junk << 128) for b in bs[1:]]
        beats.extend(bs)
        kinds.append(Opcode(msg.opcode).name)
        tag = (tag + 1) & 0xFF

    while len(kinds) < n_requests:
        r = rng.random()
        length = int(rng.integers(4))
        nbytes = LENGTHS[length]
        src = int(rng.integers(256))
        if r < 0.08:                              # back-to-back atomics to one address
            addr = _addr(rng, mem_bytes, nbytes, hot)
            for _ in range(int(rng.integers(2, 6))):
                add(_message(rng, Opcode.ATOMIC_ADD, length, addr, tag, src))
        elif r < 0.13:                            # the next atomic starts on the last word
            a = _addr(rng, mem_bytes, nbytes, hot)
            add(_message(rng, Opcode.ATOMIC_ADD, length, a, tag, src))
            add(_message(rng, Opcode.ATOMIC_ADD, int(rng.integers(4)),
                         (a + nbytes - 16) % (1 << 57), tag, src))
        elif r < 0.20:                            # READ right after a WRITE, same source
            a = _addr(rng, mem_bytes, nbytes, hot)
            add(_message(rng, Opcode.WRITE, length, a, tag, src))
            add(_message(rng, Opcode.READ, int(rng.integers(4)), a, tag, src))
        elif r < 0.27 and not unserved:
            continue
        elif r < 0.27:                            # opcodes the target does not serve
            op = [Opcode.MULTICAST, Opcode.REDUCE, Opcode.RESULT][int(rng.integers(3))]
            add(Message(op, length, tag, int(rng.integers(16)), src, 0,
                        data=rng.bytes(nbytes)))
        else:
            op = [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD][int(rng.integers(3))]
            add(_message(rng, op, length, _addr(rng, mem_bytes, nbytes, hot), tag, src),
                scramble=rng.random() < 0.3)
    return beats, kinds
