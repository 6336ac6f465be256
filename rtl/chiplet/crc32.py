"""CRC-32/ISO-HDLC over 128-bit slots, as compact XOR reductions generated from the model."""

from __future__ import annotations

import zlib
from functools import lru_cache

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Crc32Slots", "RESIDUE", "update_matrices"]

#: zlib CRC-32 of any good codeword (message ‖ its CRC little-endian).
RESIDUE = 0x2144DF1C


@lru_cache(maxsize=None)
def update_matrices(data_bytes: int = 16):
    """Affine update ``c' = A·c ⊕ B·d ⊕ k`` of the zlib CRC value over one word.

    Derived from :func:`zlib.crc32` by linearity (``crc32(d, c)``), never typed in.
    Returns ``(a_rows, b_rows, k)``: bit ``i`` of ``c'`` is the parity of
    ``a_rows[i] & c`` xor the parity of ``b_rows[i] & d`` xor bit ``i`` of ``k``.
    """
    zeros = bytes(data_bytes)
    k = zlib.crc32(zeros, 0)
    a_cols = [zlib.crc32(zeros, 1 << j) ^ k for j in range(32)]
    b_cols = [zlib.crc32((1 << j).to_bytes(data_bytes, "little"), 0) ^ k
              for j in range(8 * data_bytes)]
    a_rows = [sum(((a_cols[j] >> i) & 1) << j for j in range(32)) for i in range(32)]
    b_rows = [sum(((b_cols[j] >> i) & 1) << j for j in range(8 * data_bytes))
              for i in range(32)]
    return a_rows, b_rows, k


def _parity(bits_value, mask, width):
    sel = [bits_value[j] for j in range(width) if (mask >> j) & 1]
    return Cat(*sel).xor() if sel else Const(0, 1)


class Crc32Slots(wiring.Component):
    """CRC-32/ISO-HDLC (the zlib CRC) of a message of whole 128-bit slots.

    Byte ``i`` of a slot is bits ``8i..8i+7`` (little-endian, as ``sim.chiplet``). The
    register holds the zlib CRC value of the slots since ``start`` (0 before any), so
    ``crc`` needs no final reflection or XOR, and ``match`` is high when the slots form
    a good codeword (the last four bytes are the little-endian CRC of the rest).
    Same function as ``amaranth.lib.crc.catalog.CRC32_ISO_HDLC(128)`` (checked in
    tests/test_chiplet_rtl.py), written as one XOR reduction per CRC bit so the
    Verilog stays small.

    Members
    -------
    start : In(1)
        Restart at the empty message (with ``valid``: this slot is the first).
    valid : In(1)
    data : In(128)
    crc : Out(32)
        Registered: the CRC after the slots taken up to the previous cycle.
    match : Out(1)
        ``crc == 0x2144DF1C`` (residue of a good codeword).

    Timing
    ------
    1 cycle latency, one slot per cycle. Reset: the empty message.
    """

    def __init__(self):
        super().__init__({"start": In(1), "valid": In(1), "data": In(128),
                          "crc": Out(32), "match": Out(1)})

    def elaborate(self, platform):
        m = Module()
        a_rows, b_rows, k = update_matrices(16)
        reg = Signal(32)
        src = Signal(32)
        m.d.comb += src.eq(Mux(self.start, 0, reg))
        nxt = Cat(*[_parity(src, a_rows[i], 32) ^ _parity(self.data, b_rows[i], 128)
                    ^ ((k >> i) & 1) for i in range(32)])
        with m.If(self.valid):
            m.d.sync += reg.eq(nxt)
        with m.Elif(self.start):
            m.d.sync += reg.eq(0)
        m.d.comb += [self.crc.eq(reg), self.match.eq(reg == RESIDUE)]
        return m
