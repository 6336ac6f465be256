"""Framed parallel CRC over ``data_width`` bits per cycle, built on ``amaranth.lib.crc``.

The algorithm comes from ``amaranth.lib.crc.catalog``; the per-beat update matrices are
probed through ``amaranth.lib.crc.Parameters.compute`` and the codeword residue is
``Parameters.residue()``. The XOR network itself is built here as balanced trees:
``amaranth.lib.crc.Processor`` chains one XOR per input bit, which at 512 bits per beat
takes the Amaranth simulator ~26 s to compile and exceeds Python's recursion limit. A last
beat carrying fewer than ``data_width // 8`` bytes is processed with its unused bytes
zeroed, and the result is moved back over those trailing zero bytes with the inverse
zero-byte advance matrix (a power of the Galois register's one-bit step,
:func:`fusionfabric.rtl.hdl.galois_step_matrix`), applied in ``log2`` stages.
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import crc as acrc
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.formats.primitives import ALGORITHMS, get_algorithm, in_fields, out_fields
from fusionfabric.rtl.hdl import galois_step_matrix, gf2_inverse, gf2_power, gf2_product

__all__ = ["Crc", "CATALOG", "BLOCKS"]

#: Our algorithm names -> ``amaranth.lib.crc.catalog`` entries (reveng names).
CATALOG = {
    "crc32": "CRC32_ISO_HDLC",
    "crc32c": "CRC32_ISCSI",
    "crc16-arc": "CRC16_ARC",
    "crc16-umts": "CRC16_UMTS",
}


class Crc(wiring.Component):
    """CRC of framed messages, ``data_width`` bits (``data_width // 8`` bytes) per beat.

    Byte ``i`` of a message sits in bits ``8i .. 8i+7`` of its beat (byte 0 first on the
    wire); reflected algorithms take each byte LSB first, the others MSB first, as the reveng
    catalogue defines them. Algorithms: ``crc32`` (CRC-32/ISO-HDLC, Ethernet, zlib),
    ``crc32c`` (CRC-32/ISCSI), ``crc16-arc`` and ``crc16-umts`` (both x^16 + x^15 + x^2 + 1
    with init 0, the UCIe die-to-die polynomial; reflected and not).

    Parameters
    ----------
    algorithm : str
        One of ``crc32``, ``crc32c``, ``crc16-arc``, ``crc16-umts``.
    data_width : int
        A positive multiple of 8 (8, 32, 64, 128, 512, ...).

    Members
    -------
    i_data : In(stream.Signature(formats.primitives.in_fields(data_width)))
        ``data``, ``first``, ``last`` and ``n_bytes``: the number of valid bytes of a last
        beat (the low ones; 0 means all). A beat after ``last`` starts a new frame even
        without ``first``; ``first`` in the middle of a frame abandons that frame (counted
        in ``o_aborted``).
    o_crc : Out(stream.Signature(formats.primitives.out_fields(crc_width)))
        ``crc`` of each frame, and ``match``: the frame ended with its own valid CRC
        (the register holds the algorithm's residue), for checking received frames.
    o_aborted : Out(16)
        Frames abandoned by a ``first`` in mid-frame (saturating).

    Timing
    ------
    ``o_crc`` is valid 1 cycle after the handshake of a frame's last beat and holds until
    taken. One beat per cycle; ``i_data.ready = ~o_crc.valid | o_crc.ready``, so a pending
    result not yet taken stalls the input. Reset empties the output and the frame state.
    Logic depth: one balanced XOR tree per CRC bit (``log2(crc_width + data_width)`` levels)
    before the register, then on the output path up to ``ceil(log2(data_width // 8))``
    stages of a ``crc_width``-square XOR matrix and a mux, for partial last beats.
    """

    def __init__(self, algorithm: str = "crc32", data_width: int = 64):
        self.model = get_algorithm(algorithm)
        if not isinstance(data_width, int) or data_width < 8 or data_width % 8:
            raise ValueError(f"data_width={data_width!r} must be a positive multiple of 8")
        self.algorithm = algorithm
        self.data_width = data_width
        self.crc_width = self.model.width
        self.n_bytes = data_width // 8
        self.catalog_algorithm = getattr(acrc.catalog, CATALOG[algorithm])
        a, mdl = self.catalog_algorithm, self.model
        if (a.crc_width, a.polynomial, a.initial_crc, a.reflect_input, a.reflect_output,
                a.xor_output) != (mdl.width, mdl.poly, mdl.init, mdl.refin, mdl.refout,
                                  mdl.xorout):
            raise RuntimeError(f"fusionfabric.formats.primitives {algorithm} disagrees with catalog {CATALOG[algorithm]}")
        self.in_fields = in_fields(data_width)
        self.out_fields = out_fields(self.crc_width)
        super().__init__({"i_data": In(stream.Signature(self.in_fields.layout())),
                          "o_crc": Out(stream.Signature(self.out_fields.layout())),
                          "o_aborted": Out(16)})

    def _matrices(self):
        """``(F, G)``: next raw register = F @ register ^ G @ word (MSB-first word), probed
        through ``amaranth.lib.crc.Parameters.compute`` with reflection and xor removed."""
        a, w, cw = self.catalog_algorithm, self.data_width, self.crc_width

        def raw(init, word):
            algo = acrc.Algorithm(crc_width=cw, polynomial=a.polynomial, initial_crc=init,
                                  reflect_input=False, reflect_output=False, xor_output=0)
            return algo(w).compute([word])

        f = np.zeros((cw, cw), dtype=np.uint8)
        g = np.zeros((cw, w), dtype=np.uint8)
        for j in range(cw):
            v = raw(1 << j, 0)
            f[:, j] = [(v >> i) & 1 for i in range(cw)]
        for j in range(w):
            v = raw(0, 1 << j)
            g[:, j] = [(v >> i) & 1 for i in range(cw)]
        return f, g

    def elaborate(self, platform):
        m = Module()
        nb, cw = self.n_bytes, self.crc_width
        params = self.catalog_algorithm(self.data_width)
        beat = self.i_data.payload
        take = Signal()
        m.d.comb += [self.i_data.ready.eq(~self.o_crc.valid | self.o_crc.ready),
                     take.eq(self.i_data.valid & self.i_data.ready)]

        # Zero the unused bytes of a partial last beat: a thermometer ``keep`` of the valid
        # bytes and the count ``back`` of trailing zero bytes to undo on the output (a
        # Switch rather than comparisons keeps the Verilog lint-clean).
        keep = Signal(nb, init=(1 << nb) - 1)
        back_next = Signal(max(1, (nb - 1).bit_length()))
        with m.If(beat.last):
            with m.Switch(beat.n_bytes):
                for k in range(1, min(nb, 1 << len(beat.n_bytes))):
                    with m.Case(k):
                        m.d.comb += [keep.eq((1 << k) - 1), back_next.eq(nb - k)]
        masked = []
        for i in range(nb):
            byte = Signal(8, name=f"byte{i}")
            m.d.comb += byte.eq(beat.data[8 * i:8 * i + 8] & keep[i].replicate(8))
            masked.append(byte)
        # The update takes the word MSB first (as amaranth.lib.crc does). Reflected
        # algorithms: reflect the whole word, so byte 0 bit 0 comes first. Otherwise put
        # byte 0 on top, so byte 0 bit 7 comes first.
        word = Signal(self.data_width)
        if self.model.refin:
            m.d.comb += word.eq(Cat(*masked)[::-1])
        else:
            m.d.comb += word.eq(Cat(*masked[::-1]))
        reg = Signal(cw, init=self.catalog_algorithm.initial_crc)
        source = Signal(cw)
        f, g = self._matrices()
        start = Signal()
        in_frame = Signal()
        m.d.comb += [start.eq(beat.first | ~in_frame),
                     source.eq(Mux(start, self.catalog_algorithm.initial_crc, reg))]
        with m.If(take):
            m.d.sync += reg.eq(gf2_product(m, (f, source), (g, word), name="next_crc"))

        aborted = Signal(16)
        m.d.comb += self.o_aborted.eq(aborted)
        with m.If(take):
            m.d.sync += in_frame.eq(~beat.last)
            with m.If(beat.first & in_frame & (aborted != 0xFFFF)):
                m.d.sync += aborted.eq(aborted + 1)

        # Trailing zero bytes to undo on the output (0 for a full beat).
        back = Signal(len(back_next))
        with m.If(take & beat.last):
            m.d.sync += [self.o_crc.valid.eq(1), back.eq(back_next)]
        with m.Elif(self.o_crc.ready):
            m.d.sync += self.o_crc.valid.eq(0)

        # Undo the zero bytes of a partial beat on the raw register, then finish.
        xor_out = Const(self.model.xorout, cw)
        raw = reg
        step_bit = galois_step_matrix(cw, self.model.poly)
        for j in range(len(back) if nb > 1 else 0):
            inv = gf2_inverse(gf2_power(step_bit, 8 << j))
            step = Signal(cw, name=f"undo_{1 << j}")
            moved = gf2_product(m, (inv, raw), name=f"inv_{1 << j}")
            m.d.comb += step.eq(Mux(back[j], moved, raw))
            raw = step
        fin = raw[::-1] if self.model.refout else raw
        residue = params.residue()
        m.d.comb += [self.o_crc.payload.crc.eq(fin ^ xor_out),
                     self.o_crc.payload.match.eq(
                         ~fin.any() if residue == 0 else fin == residue)]
        return m


BLOCKS = [
    Block("crc", Crc, doc="Framed parallel CRC (amaranth.lib.crc), partial last beats",
          params=[Param("algorithm", str, "crc32", "CRC algorithm (reveng catalogue)",
                        choices=tuple(ALGORITHMS)),
                  Param("data_width", int, 64, "bits per beat, a multiple of 8")]),
]
