"""Minimum and maximum of two values of one dtype (combinational)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import CANONICAL_QNAN, DTYPE_BITS, Dtype

from .convert import Pipelinable

__all__ = ["MinMax", "MinMax32", "order_key"]

_EXP = {Dtype.FP32: (8, 23), Dtype.FP16: (5, 10), Dtype.BF16: (8, 7)}


def order_key(v, dtype):
    """An unsigned key whose order is the value order of ``v``: floats map sign-magnitude
    to a biased integer (so ``-0 < +0``), INT32 flips the sign bit, UINT32 is itself."""
    w = DTYPE_BITS[dtype]
    if dtype == Dtype.UINT32:
        return v
    if dtype == Dtype.INT32:
        return Cat(v[:w - 1], ~v[w - 1])
    return Mux(v[w - 1], ~v, Cat(v[:w - 1], 1))


class MinMax(wiring.Component):
    """``min(a, b)`` or ``max(a, b)`` of one dtype.

    Floats (IEEE 754 binary32, binary16, bfloat16) are ordered totally with ``-0 < +0``
    (so ``min(+0, -0) = -0`` and ``max(+0, -0) = +0``; IEEE 754-2019 §9.6 minimum/maximum
    order zeros the same way); a NaN in either operand gives the canonical quiet NaN.
    INT32 compares signed, UINT32 unsigned.

    Parameters
    ----------
    dtype : Dtype
        Element type (fixes the width: 32 or 16 bits).

    Members
    -------
    a, b : In(width)
    max : In(1)
        0: minimum, 1: maximum.
    y : Out(width)

    Timing
    ------
    Combinational, no state.
    """

    def __init__(self, dtype):
        try:
            self.dtype = Dtype(dtype)
        except ValueError:
            raise ValueError(f"dtype={dtype!r} is not a Dtype code") from None
        self.width = DTYPE_BITS[self.dtype]
        super().__init__({"a": In(self.width), "b": In(self.width), "max": In(1),
                          "y": Out(self.width)})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        ka, kb = Signal(self.width), Signal(self.width)
        m.d.comb += [ka.eq(order_key(a, self.dtype)), kb.eq(order_key(b, self.dtype))]
        a_less = ka < kb
        pick_a = Mux(self.max, ~a_less, a_less)
        m.d.comb += self.y.eq(Mux(pick_a, a, b))
        if self.dtype in _EXP:
            e, f = _EXP[self.dtype]
            w = self.width

            def is_nan(v):
                return (v[f:w - 1] == (1 << e) - 1) & (v[:f] != 0)

            with m.If(is_nan(a) | is_nan(b)):
                m.d.comb += self.y.eq(CANONICAL_QNAN[self.dtype])
        return m


class MinMax32(Pipelinable):
    """``min``/``max`` of two 32-bit words whose dtype is chosen at run time: FP32 (also
    fp16/bf16 widened to fp32), INT32 or UINT32; one comparator for all three.

    Same rules as :class:`MinMax` (``-0 < +0``, NaN → canonical fp32 quiet NaN).

    Parameters
    ----------
    dtypes : str or set of Dtype, optional
        The orders to build (:func:`~rtl.reduce.simd.parse_dtypes`, default all); another
        dtype code gives an undefined result.
    pipelined : bool, optional
        Register the operands with the comparison's choice and the NaN flag (enabled by
        ``en``); ``y`` selects after the register.

    Members
    -------
    en : In(1)
        Only with ``pipelined``: clock enable.
    a, b : In(32)
    max : In(1)
    dtype : In(3)
        :class:`fusionfabric.sim.layouts.Dtype`; FP16 and BF16 are treated as FP32.
    y : Out(32)

    Timing
    ------
    Combinational, no state; with ``pipelined`` ``y`` follows the inputs by :attr:`latency`
    = 1 enabled cycle. No reset.
    """

    def __init__(self, dtypes=None, pipelined=False):
        from .simd import parse_dtypes
        self.dtypes = parse_dtypes(dtypes)
        super().__init__({"a": In(32), "b": In(32), "max": In(1), "dtype": In(3),
                          "y": Out(32)}, pipelined, 1)

    def elaborate(self, platform):
        m = Module()
        a, b, dt = self.a, self.b, self.dtype
        d = self.dtypes
        floats = bool(d & {Dtype.FP32, Dtype.FP16, Dtype.BF16})
        ints = [x for x in (Dtype.INT32, Dtype.UINT32) if x in d]
        if floats and ints:
            is_float = (dt != Dtype.INT32) & (dt != Dtype.UINT32)
        else:
            is_float = Const(int(floats), 1)

        def key(v):
            opts = []
            if floats:
                opts.append((is_float, order_key(v, Dtype.FP32)))
            if Dtype.INT32 in d:
                opts.append((dt == Dtype.INT32, order_key(v, Dtype.INT32)))
            if Dtype.UINT32 in d:
                opts.append((None, v))
            out = opts[-1][1]
            for cond, val in reversed(opts[:-1]):
                out = Mux(cond, val, out)
            return out

        ka, kb = Signal(32), Signal(32)
        m.d.comb += [ka.eq(key(a)), kb.eq(key(b))]
        a_less = ka < kb
        pick_a = Mux(self.max, ~a_less, a_less)

        def is_nan(v):
            return (v[23:31] == 0xFF) & (v[:23] != 0)

        if self.pipelined:
            nan = Const(0, 1) if not floats else (is_nan(a) | is_nan(b)) if not ints else \
                is_float & (is_nan(a) | is_nan(b))
            r_a, r_b, r_pick, r_nan = Signal(32), Signal(32), Signal(), Signal()
            with m.If(self.en):
                m.d.sync += [r_a.eq(a), r_b.eq(b), r_pick.eq(pick_a), r_nan.eq(nan)]
            m.d.comb += self.y.eq(Mux(r_nan, CANONICAL_QNAN[Dtype.FP32],
                                      Mux(r_pick, r_a, r_b)))
        elif not floats:
            m.d.comb += self.y.eq(Mux(pick_a, a, b))
        elif not ints:
            m.d.comb += self.y.eq(Mux(is_nan(a) | is_nan(b), CANONICAL_QNAN[Dtype.FP32],
                                      Mux(pick_a, a, b)))
        else:
            m.d.comb += self.y.eq(Mux(is_float & (is_nan(a) | is_nan(b)),
                                      CANONICAL_QNAN[Dtype.FP32], Mux(pick_a, a, b)))
        return m
