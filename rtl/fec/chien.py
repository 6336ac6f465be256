"""Chien search and Forney evaluation of RS(544,514), P positions per cycle."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.gf import alpha_pow, linear_matrix, mul
from fusionfabric.rtl.fec.layouts import SYMBOL_BITS, check_symbols_per_beat
from fusionfabric.rtl.hdl import gf2_product
from fusionfabric.formats import fec as code

__all__ = ["ChienForney"]

T, NPAR, SB, N = code.T, code.NPAR, SYMBOL_BITS, code.N


class ChienForney(wiring.Component):
    """Evaluates Lambda and the Forney numerator and denominator at P positions per beat.

    Position ``p`` (0 = first transmitted) has the locator X = alpha^(543 - p). For the
    beat ``b`` (positions ``bP .. bP+P-1``) and each symbol ``k`` of it, this block gives

    - ``o_zero[k]``: Lambda(X^-1) = 0, i.e. ``p`` is an error position;
    - ``o_den[k]`` = X^-1 Lambda'(X^-1), the odd-degree terms of Lambda(X^-1) (in
      characteristic 2 the formal derivative keeps exactly those);
    - ``o_num[k]`` = X^-30 Omega(X^-1) = sum_i omega_i X^-(i+30).

    The error value is ``o_num / o_den`` (the Forney formula for the RiBM evaluator and
    first root alpha^0, :class:`~.keyeq.RiBM`). Each coefficient ``c`` of exponent ``e``
    (``e = i`` for lambda_i, ``i + 30`` for omega_i) sits in a register that holds
    ``c alpha^(e (bP - 543))`` for the current beat: loaded as ``c alpha^(-543 e)``,
    multiplied by ``alpha^(eP)`` per step; symbol ``k`` adds the factor ``alpha^(ek)``.
    Every sum is one GF(2) matrix over all the registers, built as XOR trees.

    Parameters
    ----------
    P : int
        Positions per beat (divides 544).

    Members
    -------
    i_load : In(1)
        Load ``i_lambda``/``i_omega``: the registers then hold beat 0.
    i_step : In(1)
        Advance to the next beat (ignored while ``i_load``).
    i_lambda : In(160)
        lambda_0 .. lambda_15, lowest degree first.
    i_omega : In(150)
        omega_0 .. omega_14.
    o_zero : Out(P)
    o_num, o_den : Out(10 * P)
        Combinational, from the registers (symbol ``k`` in bits ``10k .. 10k+9``).

    Timing
    ------
    The outputs describe the beat loaded or stepped to at the previous clock edge
    (registers, then one XOR tree of at most 310 inputs per output bit). Reset clears the
    registers; the outputs mean nothing until the first load.
    """

    def __init__(self, P: int = 8):
        self.P = check_symbols_per_beat(P)
        super().__init__({"i_load": In(1), "i_step": In(1), "i_lambda": In(SB * (T + 1)),
                          "i_omega": In(SB * T), "o_zero": Out(self.P),
                          "o_num": Out(SB * self.P), "o_den": Out(SB * self.P)})

    def elaborate(self, platform):
        m = Module()
        P = self.P
        exps = list(range(T + 1)) + [NPAR + i for i in range(T)]
        n = len(exps)

        def scale(factors):
            return lambda v: [mul(v[i], factors[i]) for i in range(n)]

        load = linear_matrix(scale([alpha_pow(-(N - 1) * e) for e in exps]), n)
        step = linear_matrix(scale([alpha_pow(e * P) for e in exps]), n)
        regs = Signal(SB * n)
        coeffs = Cat(self.i_lambda, self.i_omega)
        loaded = gf2_product(m, (load, coeffs), name="chien_load")
        stepped = gf2_product(m, (step, regs), name="chien_step")
        with m.If(self.i_load):
            m.d.sync += regs.eq(loaded)
        with m.Elif(self.i_step):
            m.d.sync += regs.eq(stepped)

        def evaluate(k, which):
            def fn(v):
                acc = 0
                for i in which:
                    acc ^= mul(v[i], alpha_pow(exps[i] * k))
                return [acc]
            return linear_matrix(fn, n)

        even = [i for i in range(T + 1) if i % 2 == 0]
        odd = [i for i in range(T + 1) if i % 2 == 1]
        om = list(range(T + 1, n))
        for k in range(P):
            ev = gf2_product(m, (evaluate(k, even), regs), name=f"lam_even{k}")
            od = gf2_product(m, (evaluate(k, odd), regs), name=f"lam_odd{k}")
            nu = gf2_product(m, (evaluate(k, om), regs), name=f"omega{k}")
            m.d.comb += [self.o_zero[k].eq((ev ^ od) == 0),
                         self.o_den[SB * k:SB * (k + 1)].eq(od),
                         self.o_num[SB * k:SB * (k + 1)].eq(nu)]
        return m
