"""Key-equation solver of RS(544,514): the reformulated inversionless Berlekamp-Massey."""

from __future__ import annotations

from amaranth import Array, Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.gf import gf_mul
from fusionfabric.rtl.fec.layouts import SYMBOL_BITS
from fusionfabric.formats import fec as code

__all__ = ["RiBM"]

T, NPAR, SB = code.T, code.NPAR, SYMBOL_BITS


class RiBM(wiring.Component):
    """Error locator and evaluator from the 30 syndromes, one iteration per cycle.

    The reformulated inversionless Berlekamp-Massey algorithm (RiBM; D. V. Sarwate and
    N. R. Shanbhag, "High-speed architectures for Reed-Solomon decoders", IEEE Trans.
    VLSI Systems 9(5), 2001): 3t + 1 = 46 identical processing elements, each holding one
    symbol of the discrepancy vector ``delta`` and one of ``theta``, updated by two
    general multipliers and an XOR. It needs no inversion and its critical path is one
    multiplier and one XOR whatever t, so it is chosen over the textbook BM (a division per
    step and a discrepancy sum of t + 1 products) and over Euclid (a degree comparison and a
    division per step). After 2t = 30 iterations ``lambda_i = delta_{t+i}`` (i = 0..15) and
    ``omega_i = delta_i`` (i = 0..14) hold c Lambda(x) and the RiBM's modified error
    evaluator, for one non-zero constant c; with first root alpha^0 the Forney step then
    reads e = X^-30 Omega(X^-1) / (X^-1 Lambda'(X^-1)) (:class:`~.chien.ChienForney`).

    Members
    -------
    i_load : In(1)
        Start on ``i_syndromes`` (S_j in bits ``10j .. 10j+9``). Only while not busy.
    i_syndromes : In(300)
    i_take : In(1)
        The result has been taken; the solver becomes free.
    o_busy : Out(1)
        Loaded and the result not yet taken.
    o_done : Out(1)
        ``o_lambda``/``o_omega`` hold the result.
    o_lambda : Out(160)
        lambda_0 .. lambda_15 (10 bits each, lowest degree first).
    o_omega : Out(150)
        omega_0 .. omega_14.

    Timing
    ------
    ``o_done`` rises 31 cycles after the cycle of ``i_load`` (30 iterations) and stays
    until ``i_take``; a new load is accepted in the cycle after ``i_take``. Reset makes it
    free.
    """

    #: Cycles from the ``i_load`` cycle until ``o_done`` is high.
    LATENCY = NPAR + 1

    def __init__(self):
        super().__init__({"i_load": In(1), "i_syndromes": In(SB * NPAR), "i_take": In(1),
                          "o_busy": Out(1), "o_done": Out(1),
                          "o_lambda": Out(SB * (T + 1)), "o_omega": Out(SB * T)})

    def elaborate(self, platform):
        m = Module()
        n = 3 * T + 1
        delta = [Signal(SB, name=f"delta{i}") for i in range(n)]
        theta = [Signal(SB, name=f"theta{i}") for i in range(n)]
        gamma = Signal(SB, init=1)
        k = Signal(signed(7))
        r = Signal(range(NPAR))
        running = Signal()
        done = Signal()
        m.d.comb += [self.o_busy.eq(running | done), self.o_done.eq(done),
                     self.o_lambda.eq(Cat(*delta[T:2 * T + 1])),
                     self.o_omega.eq(Cat(*delta[:T]))]

        with m.If(self.i_load):
            for i in range(n):
                init = self.i_syndromes[SB * i:SB * (i + 1)] if i < NPAR else int(i == 3 * T)
                m.d.sync += [delta[i].eq(init), theta[i].eq(init)]
            m.d.sync += [gamma.eq(1), k.eq(0), r.eq(0), running.eq(1)]
        with m.Elif(running):
            d0 = delta[0]
            for i in range(n):
                term = gf_mul(m, d0, theta[i], name=f"dth{i}")
                if i + 1 < n:
                    up = gf_mul(m, gamma, delta[i + 1], name=f"gd{i}")
                    m.d.sync += delta[i].eq(up ^ term)
                else:
                    m.d.sync += delta[i].eq(term)
            with m.If((d0 != 0) & (k >= 0)):
                for i in range(n):
                    m.d.sync += theta[i].eq(delta[i + 1] if i + 1 < n else 0)
                m.d.sync += [gamma.eq(d0), k.eq(-k - 1)]
            with m.Else():
                m.d.sync += k.eq(k + 1)
            m.d.sync += r.eq(r + 1)
            with m.If(r == NPAR - 1):
                m.d.sync += [running.eq(0), done.eq(1)]
        with m.If(self.i_take):
            m.d.sync += done.eq(0)
        return m
