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

        # next values of the shared state (the registers below follow them)
        d0_next = Signal(SB)
        gamma_next = Signal(SB)
        k_next = Signal(signed(7))
        running_next = Signal()
        # Timing: delta_0, gamma, k and the run flag reach every processing element (each
        # bit of delta_0 and gamma feeds about 460 gate inputs). The upper half of the
        # elements reads copies of them, registers without reset that take the same next
        # value every cycle: equal to the originals from the first cycle after reset on,
        # and read only once a load has set both. (A copy without reset is a different cell from its original, so
        # synthesis does not merge them.)
        half = n // 2
        c_d0 = Signal(SB, reset_less=True)
        c_gamma = Signal(SB, init=1, reset_less=True)
        c_k = Signal(signed(7), reset_less=True)
        c_running = Signal(reset_less=True)
        m.d.sync += [c_d0.eq(d0_next), c_gamma.eq(gamma_next), c_k.eq(k_next),
                     c_running.eq(running_next)]

        # the step swaps theta for the shifted delta when delta_0 != 0 and k >= 0
        lower = (running, delta[0], gamma, (delta[0] != 0) & (k >= 0))
        upper = (c_running, c_d0, c_gamma, (c_d0 != 0) & (c_k >= 0))
        for i in range(n):
            run, d0, gam, swap = lower if i < half else upper
            init = self.i_syndromes[SB * i:SB * (i + 1)] if i < NPAR else int(i == 3 * T)
            term = gf_mul(m, d0, theta[i], name=f"dth{i}")
            if i + 1 < n:
                up = gf_mul(m, gam, delta[i + 1], name=f"gd{i}")
                upd = up ^ term
            else:
                upd = term
            nxt = Signal(SB, name=f"delta{i}_next")
            m.d.comb += nxt.eq(delta[i])
            with m.If(self.i_load):
                m.d.comb += nxt.eq(init)
                m.d.sync += theta[i].eq(init)
            with m.Elif(run):
                m.d.comb += nxt.eq(upd)
                with m.If(swap):
                    m.d.sync += theta[i].eq(delta[i + 1] if i + 1 < n else 0)
            m.d.sync += delta[i].eq(nxt)
            if i == 0:
                m.d.comb += d0_next.eq(nxt)

        _, d0, _, swap = lower
        m.d.comb += [gamma_next.eq(gamma), k_next.eq(k), running_next.eq(running)]
        with m.If(self.i_load):
            m.d.comb += [gamma_next.eq(1), k_next.eq(0), running_next.eq(1)]
            m.d.sync += r.eq(0)
        with m.Elif(running):
            with m.If(swap):
                m.d.comb += [gamma_next.eq(d0), k_next.eq(-k - 1)]
            with m.Else():
                m.d.comb += k_next.eq(k + 1)
            m.d.sync += r.eq(r + 1)
            with m.If(r == NPAR - 1):
                m.d.comb += running_next.eq(0)
                m.d.sync += done.eq(1)
        m.d.sync += [gamma.eq(gamma_next), k.eq(k_next), running.eq(running_next)]
        with m.If(self.i_take):
            m.d.sync += done.eq(0)
        return m
