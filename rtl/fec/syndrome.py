"""P-parallel syndrome computation of RS(544,514)."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.gf import horner_matrix
from fusionfabric.rtl.fec.layouts import SYMBOL_BITS, check_symbols_per_beat
from fusionfabric.rtl.hdl import gf2_product
from fusionfabric.formats import fec as code

__all__ = ["Syndromes"]


class Syndromes(wiring.Component):
    """The 30 syndromes S_j = r(alpha^j), j = 0..29, by a P-parallel Horner rule.

    Per beat, each accumulator becomes ``S_j alpha^(jP) + sum_k d_k alpha^(j(P-1-k))``
    (symbol ``k`` of the beat is the earlier, higher-degree one for smaller ``k``). The
    update of all 30 accumulators is one GF(2) matrix probed from the field tables,
    built as XOR trees (at most ``10 + 10P`` inputs per output bit).

    Parameters
    ----------
    P : int
        Symbols per beat (divides 544).

    Members
    -------
    i_data : In(10 * P)
        The beat's symbols, symbol ``k`` in bits ``10k .. 10k+9``.
    i_start : In(1)
        The beat is the first of a codeword (the accumulators restart from zero).
    i_en : In(1)
        Take the beat.
    o_next : Out(300)
        Combinational: the syndromes including the current beat (S_j in bits
        ``10j .. 10j+9``); after the last beat of a codeword, its syndromes.
    o_syndromes : Out(300)
        The accumulators (registered).

    Timing
    ------
    One beat per cycle; ``o_next`` is valid in the cycle of the codeword's last beat,
    ``o_syndromes`` one cycle later. Reset clears the accumulators.
    """

    def __init__(self, P: int = 8):
        self.P = check_symbols_per_beat(P)
        width = SYMBOL_BITS * code.NPAR
        super().__init__({"i_data": In(SYMBOL_BITS * self.P), "i_start": In(1), "i_en": In(1),
                          "o_next": Out(width), "o_syndromes": Out(width)})

    def elaborate(self, platform):
        m = Module()
        acc = Signal(SYMBOL_BITS * code.NPAR)
        src = Signal.like(acc)
        m.d.comb += src.eq(Mux(self.i_start, 0, acc))
        mat = horner_matrix([code.FIRST_ROOT + j for j in range(code.NPAR)], self.P)
        nxt = gf2_product(m, (mat, Cat(src, self.i_data)), name="horner")
        m.d.comb += [self.o_next.eq(nxt), self.o_syndromes.eq(acc)]
        with m.If(self.i_en):
            m.d.sync += acc.eq(nxt)
        return m
