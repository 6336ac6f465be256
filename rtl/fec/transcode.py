"""Building blocks of the FEC PCS datapath: the 256b/257b transcoder, the scrambler of the
transcoded stream and the codeword message schedule (docs/fec.md, IEEE 802.3 cl. 91.5.2.5,
cl. 119.2.4).

Conventions (those of :mod:`fusionfabric.sim.transcode` and :mod:`fusionfabric.sim.fec_pcs`):

- A client word is ``(data, ctrl)``: 64 payload bits sent bit 0 first and a control flag
  (sync header ``SYNC_CTRL`` when set, ``SYNC_DATA`` otherwise); a control word has its
  block type in ``data[0:8]``.
- A transcoded block is 257 bits, bit 0 first on the wire, as a 257-bit value.
- The transcoded blocks are scrambled as one bit stream by 1 + x^39 + x^58, state all ones
  after reset; marker areas are not scrambled and do not advance it.
- A codeword message is 5140 bits = 20 slots of 257 bits; beat ``b`` of ``544 / P`` carries
  message bits ``10 P b ..`` (fewer in the beat holding position 513, none after it).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from amaranth import Cat, Const, Module, Mux, Signal, Value

from fusionfabric.formats import fec as code
from fusionfabric.formats.fec_pcs import BLOCKS_PER_CW, MSG_BITS, XBITS
from fusionfabric.formats.pcs import KNOWN_TYPES, BlockType
from fusionfabric.formats.primitives import POLY_CL49, poly_taps

__all__ = ["transcode", "scramble", "Beat", "message_schedule"]

#: Payload of the error block the transmitter sends for an unknown first control type.
_ERROR_PAYLOAD = int(BlockType.ERROR)


def transcode(m: Module, words, name: str = "tc") -> Signal:
    """Combinational 256b/257b transcoder of four words; returns a 257-bit Signal.

    ``words``: four ``(data, ctrl)`` pairs (64-bit and 1-bit values), word 0 first.

    - no control word: ``1``, then the four payloads;
    - otherwise: ``0``, the flags ``~ctrl[0..3]``, then the four payloads where the first
      control word drops payload bits 4..7 (the receiver rebuilds them from bits 0..3).

    A first control word whose type (``data[0:8]``) is not a project block type is sent as
    the error block (type ``ERROR``, body 0). Control words after the first pass unchecked.
    """
    if len(words) != 4:
        raise ValueError(f"words has {len(words)} entries; the transcoder takes 4")
    ctrl = [Value.cast(c) for _, c in words]
    pays = []
    for j, (d, c) in enumerate(words):
        d = Value.cast(d)
        known = Cat(*[d[0:8] == t for t in KNOWN_TYPES]).any()
        first = ctrl[j]
        for i in range(j):
            first = first & ~ctrl[i]
        p = Signal(64, name=f"{name}_p{j}")
        m.d.comb += p.eq(Mux(first & ~known, _ERROR_PAYLOAD, d))
        pays.append(p)
    flags = Cat(*[~c for c in ctrl])
    out = Signal(XBITS, name=name)
    value = Cat(Const(1, 1), *pays)                         # all data
    for j in reversed(range(4)):                            # first control word is j
        body = pays[:j] + [pays[j][0:4], pays[j][8:64]] + pays[j + 1:]
        with_ctrl = Cat(Const(0, 1), flags, *body)
        value = Mux(ctrl[j], with_ctrl, value)
    m.d.comb += out.eq(value)
    return out


_N_SCR, _TAPS = poly_taps(POLY_CL49)


def scramble(m: Module, state: Value, bits: Value, name: str = "scr") -> tuple[Signal, Value]:
    """Scramble ``bits`` (bit 0 first) with 1 + x^39 + x^58 (IEEE 802.3 cl. 49.2.6).

    ``state`` (58 bits) is the history in chronological order: bit ``i`` is the output bit
    ``58 - i`` bits ago (bit 57 the newest; all ones after reset). With ``S = state |
    out << 58`` the recurrence is ``out[j] = bits[j] ^ S[j + 19] ^ S[j]``: a run of 39
    output bits depends only on earlier ones, so the output is computed 39 bits at a time
    from XORs of slices (the word form of :func:`fusionfabric.rtl.pcs.common.scramble64`,
    any width). Returns ``(out, next_state)``, ``next_state`` the last 58 bits of ``S``.
    """
    width = len(bits)
    lag = _N_SCR - _TAPS[0]                                 # 19: S[j + 19] is out[j - 39]
    step = _TAPS[0]                                         # 39 independent bits per run
    hist = Value.cast(state)
    chunks = []
    for j0 in range(0, width, step):
        j1 = min(j0 + step, width)
        s_all = Cat(hist, *chunks)
        chunk = Signal(j1 - j0, name=f"{name}_{j0}")
        m.d.comb += chunk.eq(bits[j0:j1] ^ s_all[j0 + lag:j1 + lag] ^ s_all[j0:j1])
        chunks.append(chunk)
    out = Signal(width, name=name)
    m.d.comb += out.eq(Cat(*chunks))
    s_all = Cat(hist, out)
    return out, s_all[width:width + _N_SCR]


class Beat(NamedTuple):
    """One beat of a codeword's message schedule.

    ``left``: bits of the last slot loaded before this beat still to send (they come
    first); ``slots``: the slots (0..19) whose bits start in this beat, in order;
    ``bits``: message bits this beat carries (``10 P``, fewer in the beat holding message
    position 513, 0 in parity beats).
    """
    left: int
    slots: tuple[int, ...]
    bits: int


@cache
def message_schedule(P: int) -> tuple[Beat, ...]:
    """The ``544 / P`` beats of a codeword message at ``P`` symbols per beat.

    The message is slot aligned (20 slots of 257 bits), so the schedule is the same for
    every codeword: beat ``b`` sends message bits ``e(b-1) .. e(b)-1``,
    ``e(b) = min(10 P (b + 1), 5140)``, taking the ``left`` bits of the previous beat's last
    slot and then the new ``slots`` in order.
    """
    beats = []
    for b in range(code.N // P):
        e0 = min(code.M * P * b, MSG_BITS)
        e1 = min(code.M * P * (b + 1), MSG_BITS)
        s0, s1 = -(-e0 // XBITS), -(-e1 // XBITS)
        beats.append(Beat(XBITS * s0 - e0, tuple(range(s0, s1)), e1 - e0))
    assert sum(len(b.slots) for b in beats) == BLOCKS_PER_CW
    return tuple(beats)
