"""fp16/bf16 ↔ fp32 conversion (IEEE 754-2019 §5.4.2 formatOf-convert), combinational or,
for the narrowing, pipelined.

Widening is exact (fp16 subnormals are normalized, bf16 is the top half of fp32).
Narrowing rounds to nearest, ties to even, keeps subnormals, overflows to infinity and
returns the canonical quiet NaN (:data:`fusionfabric.sim.layouts.CANONICAL_QNAN`) for any NaN.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import CANONICAL_QNAN, Dtype

__all__ = ["FORMATS", "Pipelinable", "Widen", "Narrow", "RoundNarrow"]

#: (exponent bits, fraction bits) of the narrow float formats.
FORMATS = {Dtype.FP16: (5, 10), Dtype.BF16: (8, 7)}


def _check(dtype):
    try:
        dtype = Dtype(dtype)
    except ValueError:
        raise ValueError(f"dtype={dtype!r} is not a Dtype code") from None
    if dtype not in FORMATS:
        raise ValueError(f"dtype={dtype.name} is not FP16 or BF16")
    return dtype


class Pipelinable(wiring.Component):
    """A component that is combinational or, with ``pipelined``, has ``stages`` register
    stages: then it has one more input, the clock enable ``en`` (:attr:`latency` is
    ``stages``, else 0), and :meth:`_reg` registers values."""

    def __init__(self, ports, pipelined, stages):
        self.pipelined = bool(pipelined)
        self.latency = stages if self.pipelined else 0
        if self.pipelined:
            ports = {**ports, "en": In(1)}
        super().__init__(ports)

    def _reg(self, m, *values):
        """``values`` registered (enabled by ``en``) when pipelined, else themselves."""
        if not self.pipelined:
            return values
        regs = [Signal.like(v) if isinstance(v, Signal) else Signal(len(v)) for v in values]
        with m.If(self.en):
            m.d.sync += [r.eq(v) for r, v in zip(regs, values)]
        return regs


class Widen(wiring.Component):
    """fp16 or bf16 → fp32, exact (combinational).

    Parameters
    ----------
    dtype : Dtype
        ``Dtype.FP16`` or ``Dtype.BF16``.

    Members
    -------
    a : In(16)
        Narrow bit pattern.
    y : Out(32)
        fp32 bit pattern of the same value (a NaN stays a NaN, payload shifted up).

    Timing
    ------
    Combinational, no state.
    """

    def __init__(self, dtype):
        self.dtype = _check(dtype)
        super().__init__({"a": In(16), "y": Out(32)})

    def elaborate(self, platform):
        m = Module()
        E, M = FORMATS[self.dtype]
        a, y = self.a, self.y
        if E == 8:                      # bf16: the top half of an fp32
            m.d.comb += y.eq(Cat(Const(0, 16), a))
            return m
        bias = (1 << (E - 1)) - 1
        s, e, f = a[15], a[M:M + E], a[:M]
        frac_hi = Cat(Const(0, 23 - M), f)
        with m.If(e == (1 << E) - 1):
            m.d.comb += y.eq(Cat(frac_hi, Const(0xFF, 8), s))
        with m.Elif(e != 0):
            m.d.comb += y.eq(Cat(frac_hi, (e + (127 - bias))[:8], s))
        with m.Elif(f == 0):
            m.d.comb += y.eq(Cat(Const(0, 31), s))
        with m.Else():
            # subnormal: value = f * 2^(1-bias-M); MSB of f at position p
            p = Signal(range(M))
            for i in range(M):
                with m.If(f[i]):
                    m.d.comb += p.eq(i)
            shamt = Signal(range(24))
            m.d.comb += shamt.eq(23 - p)
            norm = Signal(23)
            m.d.comb += norm.eq((f << shamt)[:23])     # drops the leading one
            m.d.comb += y.eq(Cat(norm, (p + (1 - bias - M + 127))[:8], s))
        return m


class Narrow(Pipelinable):
    """fp32 → fp16 or bf16, round to nearest even (combinational, or in two stages).

    Parameters
    ----------
    dtype : Dtype
        ``Dtype.FP16`` or ``Dtype.BF16``.
    pipelined : bool, optional
        Two register stages (enabled by ``en``): (1) the significand, the right shift and
        the exponent field; (2) the shifted significand and the round-up bit; ``y`` then
        adds them and decides overflow.

    Members
    -------
    en : In(1)
        Only with ``pipelined``: clock enable of both stages.
    a : In(32)
        fp32 bit pattern.
    y : Out(16)
        Rounded narrow bit pattern: RNE, subnormals kept, overflow → ±inf, NaN → canonical
        quiet NaN.

    Timing
    ------
    Combinational, no state; with ``pipelined`` ``y`` follows ``a`` by :attr:`latency` = 2
    enabled cycles. No reset.
    """

    def __init__(self, dtype, pipelined=False):
        self.dtype = _check(dtype)
        super().__init__({"a": In(32), "y": Out(16)}, pipelined, 2)

    def elaborate(self, platform):
        m = Module()
        E, M = FORMATS[self.dtype]
        bias = (1 << (E - 1)) - 1
        a, y = self.a, self.y
        s, e, f = a[31], a[23:31], a[:23]
        base = 23 - M                                   # fraction bits dropped when normal
        lim = 128 - bias                # fp32 biased exponent of the narrow format's 2^emin
        sig = Signal(24)
        m.d.comb += sig.eq(Cat(f, e != 0))
        e1 = Mux(e == 0, 1, e)
        normal = e1 >= lim
        # right shift of the significand: base in the normal range, more below it (one
        # 8-bit subtract), capped at 25 (everything sticky). Short carry chains on purpose:
        # this sits in the unit's output stage.
        sh = Signal(range(26))
        if lim <= 1:                                    # bf16: same exponent range as fp32
            m.d.comb += sh.eq(base)
        else:
            far = Signal()
            m.d.comb += far.eq(e1 <= lim - (25 - base))
            m.d.comb += sh.eq(Mux(normal, base, Mux(far, 25, ((base + lim) - e1)[:5])))
        if self.pipelined:
            exp_part = Signal(8)
            m.d.comb += exp_part.eq(Mux(normal, (e1 - lim)[:8], 0))
            nan, einf = (e == 0xFF) & (f != 0), e == 0xFF
            sig, sh, exp_part, nan, einf, s = self._reg(m, sig, sh, exp_part, nan, einf, s)
        q = Signal(24)
        m.d.comb += q.eq(sig >> sh)
        # guard bit and the bits below it, selected by constant masks (no subtraction)
        def table(fn):
            out = Const(fn(base), 25)
            for v in range(base + 1, 26):
                out = Mux(sh == v, Const(fn(v), 25), out)
            return out
        half = Signal(25)
        below = Signal(25)
        m.d.comb += [half.eq(table(lambda v: 1 << (v - 1))),
                     below.eq(table(lambda v: (1 << (v - 1)) - 1))]
        guard = (sig & half[:24]) != 0
        sticky = (sig & below[:24]) != 0
        up = guard & (sticky | q[0])
        if self.pipelined:
            q, up, exp_part, nan, einf, s = self._reg(m, q, up, exp_part, nan, einf, s)
        else:
            exp_part = Signal(8)
            m.d.comb += exp_part.eq(Mux(normal, (e1 - lim)[:8], 0))
            nan, einf = (e == 0xFF) & (f != 0), e == 0xFF
        field = Signal(20)
        m.d.comb += field.eq((exp_part << M) + q + up)
        inf_field = ((1 << E) - 1) << M
        with m.If(nan):
            m.d.comb += y.eq(CANONICAL_QNAN[self.dtype])
        with m.Elif(einf | (field >= inf_field)):
            m.d.comb += y.eq(Cat(Const(inf_field, 15), s))
        with m.Else():
            m.d.comb += y.eq(Cat(field[:15], s))
        return m


class RoundNarrow(Pipelinable):
    """Round an fp32 value to the nearest fp16 or bf16 value, result kept in fp32 format
    (``Widen(Narrow(a))`` in one cheaper step; the native-accumulation rounding).

    Round to nearest even, subnormals of the narrow format kept, overflow → ±inf, NaN →
    the canonical fp32 quiet NaN. The magnitude bits are rounded as an integer at the
    narrow format's grid (``r`` low bits: 16 for bf16; 13 for fp16 normals, up to 23 in the
    fp16 subnormal range); a carry into the exponent is the correct next binade.

    Parameters
    ----------
    dtype : Dtype
        ``Dtype.FP16`` or ``Dtype.BF16``.
    pipelined : bool, optional
        One register stage (enabled by ``en``): the magnitude, its sign and what the
        exponent decides (NaN, and for fp16 the mask of the bits to drop, the LSB that is
        kept and the ranges that give zero, the smallest subnormal or infinity) are
        registered; ``y`` then adds the rounding constant and masks.

    Members
    -------
    en : In(1)
        Only with ``pipelined``: clock enable.
    a : In(32)
    y : Out(32)

    Timing
    ------
    Combinational, no state; with ``pipelined`` ``y`` follows ``a`` by :attr:`latency` = 1
    enabled cycle. No reset.
    """

    def __init__(self, dtype, pipelined=False):
        self.dtype = _check(dtype)
        super().__init__({"a": In(32), "y": Out(32)}, pipelined, 1)

    def elaborate(self, platform):
        m = Module()
        a, y = self.a, self.y
        s, e = a[31], a[23:31]
        mag = a[:31]
        nan = (e == 0xFF) & (a[:23] != 0)
        qnan = CANONICAL_QNAN[Dtype.FP32]
        rounded = Signal(32)
        if self.pipelined:
            return self._elaborate_pipelined(m, a, s, e, mag, nan, qnan, rounded)
        if self.dtype == Dtype.BF16:
            m.d.comb += rounded.eq(((mag + 0x7FFF + mag[16]) >> 16) << 16)
            with m.If(nan):
                m.d.comb += y.eq(qnan)
            with m.Else():
                m.d.comb += y.eq(Cat(rounded[:31], s))
            return m
        # fp16: grid 2^-24 below 2^-14 (fp32 exponent 113), else 13 dropped fraction bits.
        # r = 126 - e bits are dropped for e in 103..112; the constants are selected by
        # comparing e with constants (no subtract), and overflow is decided on the input
        # (|a| >= 65520 rounds to inf), in parallel with the rounding add.
        def by_e(fn):
            out = Const(fn(13), 32)
            for ev in range(103, 113):
                out = Mux(e == ev, Const(fn(126 - ev), 32), out)
            return out

        half_m1 = Signal(32)
        keep = Signal(32)
        m.d.comb += [half_m1.eq(by_e(lambda r: (1 << (r - 1)) - 1)),
                     keep.eq(by_e(lambda r: (0x7FFFFFFF >> r) << r))]
        lsb = Signal()
        bit = mag[13]
        for ev in range(103, 113):
            bit = Mux(e == ev, mag[126 - ev], bit)
        m.d.comb += lsb.eq(bit)
        m.d.comb += rounded.eq((mag + half_m1 + lsb) & keep)
        with m.If(nan):
            m.d.comb += y.eq(qnan)
        with m.Elif(e < 102):                   # below half the smallest subnormal: ±0
            m.d.comb += y.eq(Cat(Const(0, 31), s))
        with m.Elif(e == 102):                  # [2^-25, 2^-24): tie → 0, above → 2^-24
            m.d.comb += y.eq(Cat(Mux(a[:23] != 0, Const(0x33800000, 31), 0), s))
        with m.Elif(mag >= 0x477FF000):         # 65520 and above round to inf (RNE)
            m.d.comb += y.eq(Cat(Const(0x7F800000, 31), s))
        with m.Else():
            m.d.comb += y.eq(Cat(rounded[:31], s))
        return m

    def _elaborate_pipelined(self, m, a, s, e, mag, nan, qnan, rounded):
        """The same rounding with the exponent's decisions registered first."""
        y = self.y
        if self.dtype == Dtype.BF16:
            mag, s, nan = self._reg(m, mag, s, nan)
            # mag + 0x7FFF + lsb in one carry chain: the LSB enters as the carry in
            m.d.comb += rounded.eq(((Cat(mag[16], mag) + Cat(Const(1, 1), Const(0x7FFF, 31)))
                                    [1:] >> 16) << 16)
            m.d.comb += y.eq(Mux(nan, qnan, Cat(rounded[:31], s)))
            return m
        # r = dropped bits: 13 for normals, 126 - e for e in 103..112. Registered: the
        # bits 13..22 of the dropped-bits mask (1 << r) - 1 (bit i set when r > i) and the
        # LSB that is kept, mag[r]; the rounding constant and the mask follow from them
        # after the register with no decoding
        low = Cat(*[(e >= 103) & (e < 126 - i) for i in range(13, 23)])
        lsb = Signal()
        with m.Switch(e):
            for ev in range(103, 113):
                with m.Case(ev):
                    m.d.comb += lsb.eq(mag[126 - ev])
            with m.Default():
                m.d.comb += lsb.eq(mag[13])
        zero, tiny = e < 102, e == 102
        tiny_up = a[:23] != 0
        inf = mag >= 0x477FF000
        mag, s, nan, low, lsb, zero, tiny, tiny_up, inf = self._reg(
            m, mag, s, nan, low, lsb, zero, tiny, tiny_up, inf)
        dropped = Cat(Const((1 << 13) - 1, 13), low, Const(0, 8))     # (1 << r) - 1
        # mag + (2^(r-1) - 1) + lsb in one carry chain: the LSB enters as the carry in
        m.d.comb += rounded.eq((Cat(lsb, mag) + Cat(Const(1, 1), dropped[1:]))[1:] &
                               ~dropped)
        with m.If(nan):
            m.d.comb += y.eq(qnan)
        with m.Elif(zero):
            m.d.comb += y.eq(Cat(Const(0, 31), s))
        with m.Elif(tiny):
            m.d.comb += y.eq(Cat(Mux(tiny_up, Const(0x33800000, 31), 0), s))
        with m.Elif(inf):
            m.d.comb += y.eq(Cat(Const(0x7F800000, 31), s))
        with m.Else():
            m.d.comb += y.eq(Cat(rounded[:31], s))
        return m
