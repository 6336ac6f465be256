"""RS(544,514) systematic encoder, ``P`` symbols per cycle (IEEE 802.3 cl. 91.5.2.7)."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.gf import linear_matrix, mul
from fusionfabric.rtl.fec.layouts import (SYMBOL_BITS, check_symbols_per_beat, enc_out_fields,
                                          in_fields)
from fusionfabric.rtl.hdl import gf2_product
from fusionfabric.formats import fec as code

__all__ = ["RsEncoder", "lfsr_step"]


def lfsr_step(state: list[int], symbols: list[int]) -> list[int]:
    """The division register of cl. 91 Figure 91-6 after shifting in ``symbols``.

    ``state[0]`` is the x^29 coefficient of the running remainder (the first parity symbol
    once the message is in); the generator is ``formats.fec.GENERATOR``.
    """
    g = [int(c) for c in code.GENERATOR]
    s = list(state)
    for u in symbols:
        fb = int(u) ^ s[0]
        s = [s[i + 1] ^ mul(fb, g[i + 1]) for i in range(code.NPAR - 1)] \
            + [mul(fb, g[code.NPAR])]
    return s


class RsEncoder(wiring.Component):
    """Systematic RS(544,514) encoder over GF(2^10), ``P`` symbols per beat, at line rate.

    A codeword is ``544 / P`` beats (layout: :mod:`fusionfabric.rtl.fec.layouts`). The
    input carries the whole codeword frame: the 514 message symbols in positions 0..513
    and any value in positions 514..543, which the encoder overwrites with the parity
    p(x) = m(x) x^30 mod g(x), g(x) = prod_{i=0}^{29} (x - alpha^i) (cl. 91.5.2.7;
    generator and field from :mod:`fusionfabric.formats.fec`). When 514 is not a multiple of
    ``P``, the beat holding position 513 carries ``514 mod P`` message symbols followed by
    the first parity symbols. The division register advances ``P`` symbols per beat through
    one GF(2) matrix probed from :func:`lfsr_step`, the division step (another for the short last
    message beat), built as balanced XOR trees.

    ``P`` and line rates at 10 bits per symbol: one codeword is 5,440 bits. A 66-bit PCS
    word per cycle (one lane) needs ``P = 8`` (80 bits per cycle, 68 cycles per codeword);
    4 lanes of 66 bits (264 bits per cycle, a codeword every 20.6 cycles) need ``P = 32``
    (17 cycles per codeword); 8 lanes (528 bits) need ``P = 68`` (8 cycles).

    Parameters
    ----------
    P : int
        Symbols per beat; must divide 544 (1, 2, 4, 8, 16, 17, 32, 34, 68, 136, 272, 544).

    Members
    -------
    i_data : In(stream.Signature(layouts.in_fields(P)))
        ``data`` (P symbols) and ``first``: the first beat of a codeword. The encoder
        counts ``544 / P`` beats from a ``first``; a ``first`` in mid-codeword starts a new
        codeword (the partial one is output as it stands, with no valid parity).
    o_data : Out(stream.Signature(layouts.enc_out_fields(P)))
        The codeword: ``data`` with the parity filled in, ``first`` and ``last``.

    Timing
    ------
    Latency 1 cycle (each beat leaves one cycle after its handshake); one beat per cycle,
    so a new codeword every ``544 / P`` cycles with no stall.
    ``i_data.ready = ~o_data.valid | o_data.ready``. Reset empties the output register and
    restarts the beat count.
    """

    def __init__(self, P: int = 8):
        self.P = check_symbols_per_beat(P)
        self.n_beats = code.N // self.P
        #: Beat holding the last message symbol (position 513), and its message symbols.
        self.last_msg_beat = (code.K - 1) // self.P
        self.n_msg_last = code.K - self.last_msg_beat * self.P
        super().__init__({"i_data": In(stream.Signature(in_fields(self.P).layout())),
                          "o_data": Out(stream.Signature(enc_out_fields(self.P).layout()))})

    def elaborate(self, platform):
        m = Module()
        P, B, sb, np_ = self.P, self.n_beats, SYMBOL_BITS, code.NPAR
        beat = self.i_data.payload
        count = Signal(range(B), init=0)
        idx = Signal(range(B))
        m.d.comb += idx.eq(Mux(beat.first, 0, count))
        take = Signal()
        m.d.comb += [self.i_data.ready.eq(~self.o_data.valid | self.o_data.ready),
                     take.eq(self.i_data.valid & self.i_data.ready)]

        state = Signal(sb * np_)
        src = Signal(sb * np_)
        m.d.comb += src.eq(Mux(idx == 0, 0, state))

        def full(v):
            return lfsr_step(v[:np_], v[np_:])

        nxt_full = gf2_product(m, (linear_matrix(full, np_ + P), Cat(src, beat.data)),
                               name="lfsr_full")
        nxt = nxt_full
        if self.n_msg_last != P:
            n = self.n_msg_last
            mat = linear_matrix(lambda v: lfsr_step(v[:np_], v[np_:]), np_ + n)
            nxt_part = gf2_product(m, (mat, Cat(src, beat.data[:sb * n])), name="lfsr_last")
            nxt = Signal(sb * np_)
            m.d.comb += nxt.eq(Mux(idx == self.last_msg_beat, nxt_part, nxt_full))
        parity = Signal(sb * np_)
        with m.If(take):
            m.d.sync += count.eq(Mux(idx == B - 1, 0, idx + 1))
            with m.If(idx <= self.last_msg_beat):
                m.d.sync += state.eq(nxt)
            with m.If(idx == self.last_msg_beat):
                m.d.sync += parity.eq(nxt)

        # Parity positions of this beat take the remainder: just computed in the beat that
        # holds position 513, from the parity register in the later beats.
        par_src = Signal(sb * np_)
        m.d.comb += par_src.eq(Mux(idx == self.last_msg_beat, nxt, parity))
        out_syms = []
        for k in range(P):
            sym = Signal(sb, name=f"sym{k}")
            d = beat.data[sb * k:sb * (k + 1)]
            cases = {}
            for b in range(B):
                pos = b * P + k
                if pos >= code.K:
                    cases[b] = par_src[sb * (pos - code.K):sb * (pos - code.K + 1)]
            # A Mux chain, not a Switch: no combinational process for Icarus to leave X
            # (docs/fabric.md, "Icarus note").
            value = d
            for b, v in cases.items():
                value = Mux(idx == b, v, value)
            m.d.comb += sym.eq(value)
            out_syms.append(sym)

        out = self.o_data.payload
        with m.If(self.i_data.ready):
            m.d.sync += self.o_data.valid.eq(self.i_data.valid)
            with m.If(self.i_data.valid):
                m.d.sync += [out.data.eq(Cat(*out_syms)), out.first.eq(idx == 0),
                             out.last.eq(idx == B - 1)]
        return m
