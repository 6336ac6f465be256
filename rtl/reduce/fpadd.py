"""IEEE 754 binary32 adder, four to seven pipeline stages, round to nearest even."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import CANONICAL_QNAN, Dtype

__all__ = ["Fp32Add"]

QNAN32 = CANONICAL_QNAN[Dtype.FP32]


class Fp32Add(wiring.Component):
    """IEEE 754-2019 binary32 addition (§5.4.1), pipelined.

    Round to nearest, ties to even (§4.3.1); subnormal inputs and results are kept (no
    flush to zero); overflow gives ±inf (§7.4); ``inf + -inf`` and any NaN input give the
    canonical quiet NaN ``0x7FC00000`` (§7.2 leaves the payload open; we fix it). An exact
    zero sum is ``+0`` unless both operands are ``-0`` (§6.3). Addition is commutative bit
    for bit, so the operand order never matters.

    Stages: (1) unpack, order by magnitude, exponent difference; (2) align the smaller
    significand with guard, round and sticky bits, add or subtract; (3) normalize with a
    leading-zero count, limited so that results below the normal range stay subnormal;
    (4) round, detect overflow, pack. ``stages=5`` splits stage 2: (2a) the aligned
    smaller significand with its sticky bit is registered, (2b) add or subtract.
    ``stages=6`` also splits stage 3: (3a) the leading-zero count is registered, (3b) the
    shift amount is limited and the sum shifted. ``stages=7`` also adds a stage before
    stage 1: (0) the magnitude order of the operands and both exponent differences, each
    limited to 27, are registered with the operands, so that stage 1 only selects; stage
    2a then takes the sticky bit as the OR of the bits shifted out (a mask), beside the
    shift; stage 2b decodes a marker bit from the exponent that caps the leading-zero
    count, so that stage 3a registers the limited shift amount (and whether the sum is
    zero) with no compare after the count; and stage 4 decides overflow beside the
    rounding carry, and takes the carry into bit 23 only, instead of selecting after it.

    Parameters
    ----------
    stages : int, optional
        4 (default), 5, 6 or 7 pipeline stages; the result is the same bit for bit.

    Members
    -------
    en : In(1)
        Clock enable of the whole pipeline (a stalled pipeline holds its contents).
    a, b : In(32)
        Operands, sampled on a rising edge with ``en`` high.
    y : Out(32)
        ``a + b``, :attr:`LATENCY` enabled cycles later.

    Timing
    ------
    Latency :attr:`LATENCY` = 4 enabled cycles (``stages``), one result per enabled
    cycle. No reset needed (pure data pipeline); ``y`` is undefined until the first
    operands have passed.
    """

    LATENCY = 4
    STAGES = (4, 5, 6, 7)

    @classmethod
    def check_stages(cls, stages, name="add_stages"):
        """``stages`` if it is one of :attr:`STAGES`, else a ValueError naming ``name``."""
        if isinstance(stages, bool) or stages not in cls.STAGES:
            raise ValueError(f"{name}={stages!r} must be 4, 5, 6 or 7")
        return stages

    def __init__(self, stages=LATENCY):
        self.stages = self.check_stages(stages)
        self.latency = stages
        super().__init__({"en": In(1), "a": In(32), "b": In(32), "y": Out(32)})

    def _stage(self, m, prefix, **values):
        """Registers (enabled by ``en``) of ``values``, named ``prefix_key``, in order."""
        regs = [Signal.like(v, name=f"{prefix}_{k}") for k, v in values.items()]
        with m.If(self.en):
            m.d.sync += [r.eq(v) for r, v in zip(regs, values.values())]
        return regs

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        st = m.d.sync
        # -- stage 1: unpack, order by magnitude ------------------------------------------
        def is_nan(v):
            return (v[23:31] == 0xFF) & (v[:23] != 0)

        def is_inf(v):
            return (v[23:31] == 0xFF) & (v[:23] == 0)

        fast = self.stages == 7
        if fast:
            # stage 0: magnitude order and both exponent differences, limited to 27
            def exp1(v):
                return Mux(v[23:31] == 0, 1, v[23:31])

            def limited(dv):
                return Mux(dv > 27, 27, dv)

            nan0 = is_nan(a) | is_nan(b) | (is_inf(a) & is_inf(b) & (a[31] != b[31]))
            a, b, swap, d_ab, d_ba, nan0 = self._stage(
                m, "s0", a=a, b=b, swap=b[:31] > a[:31],
                d_ab=limited((exp1(a) - exp1(b))[:8]), d_ba=limited((exp1(b) - exp1(a))[:8]),
                nan=nan0)
        else:
            swap = b[:31] > a[:31]
        x = Mux(swap, b, a)
        y_ = Mux(swap, a, b)
        ex, ey = x[23:31], y_[23:31]
        ex1 = Mux(ex == 0, 1, ex)
        ey1 = Mux(ey == 0, 1, ey)
        s1_sx, s1_sy, s1_e = Signal(), Signal(), Signal(8)
        s1_mx, s1_my, s1_d = Signal(24), Signal(24), Signal(8)
        s1_nan, s1_inf = Signal(), Signal()
        with m.If(self.en):
            st += [
                s1_sx.eq(x[31]), s1_sy.eq(y_[31]), s1_e.eq(ex1),
                s1_mx.eq(Cat(x[:23], ex != 0)), s1_my.eq(Cat(y_[:23], ey != 0)),
                s1_d.eq(Mux(swap, d_ba, d_ab) if fast else ex1 - ey1),
                s1_nan.eq(nan0 if fast else
                          is_nan(a) | is_nan(b) | (is_inf(a) & is_inf(b) & (a[31] != b[31]))),
                s1_inf.eq(ex == 0xFF),
            ]
        # -- stage 2: align with guard/round/sticky, add or subtract ----------------------
        d = Signal(5)
        m.d.comb += d.eq(s1_d[:5] if fast else Mux(s1_d > 27, 27, s1_d))
        mx27 = Cat(Const(0, 3), s1_mx)
        my27 = Signal(27)
        m.d.comb += my27.eq(Cat(Const(0, 3), s1_my))
        shifted = Signal(27)
        m.d.comb += shifted.eq(my27 >> d)
        sticky = Signal()
        if fast:                # the bits below position d, beside the shift
            m.d.comb += sticky.eq((my27 & ~(Const((1 << 27) - 1, 27) << d)[:27]) != 0)
        else:
            m.d.comb += sticky.eq((shifted << d)[:27] != my27)
        my_al = Cat(shifted[0] | sticky, shifted[1:])
        if self.stages >= 5:
            # stage 2a: register the aligned operands
            my_al, mx27, s1_sx, s1_sy, s1_e, s1_nan, s1_inf = self._stage(
                m, "s2a", my=my_al, mx=mx27, sx=s1_sx, sy=s1_sy, e=s1_e, nan=s1_nan,
                inf=s1_inf)
        s2_sum = Signal(28)
        s2_sx, s2_zsign, s2_e, s2_nan, s2_inf = Signal(), Signal(), Signal(8), Signal(), Signal()
        with m.If(self.en):
            st += [
                s2_sum.eq(Mux(s1_sx ^ s1_sy, mx27 - my_al, mx27 + my_al)),
                s2_sx.eq(s1_sx), s2_zsign.eq(s1_sx & s1_sy), s2_e.eq(s1_e),
                s2_nan.eq(s1_nan), s2_inf.eq(s1_inf),
            ]
        if fast:
            # a marker bit at 27 - e caps the leading-zero count at e - 1 (results below
            # the normal range stay subnormal), decoded beside the add
            s2_marker = Signal(27)
            with m.If(self.en):
                st += s2_marker.eq(Mux(s1_e <= 27, Const(1, 27) << (27 - s1_e)[:5], 0))
        # -- stage 3: normalize ------------------------------------------------------------
        lz = Signal(range(28))
        m.d.comb += lz.eq(27)
        lz_of = (s2_sum[:27] | s2_marker) if fast else s2_sum
        for i in range(27):
            with m.If(lz_of[i]):
                m.d.comb += lz.eq(26 - i)
        if fast:
            # stage 3a: register the limited shift amount (the leading-zero count with the
            # marker) and whether the sum is zero, beside the sum
            s2_sum, lz, sum_zero, s2_sx, s2_zsign, s2_e, s2_nan, s2_inf = self._stage(
                m, "s3a", sum=s2_sum, lz=lz, zero=s2_sum == 0, sx=s2_sx, zsign=s2_zsign,
                e=s2_e, nan=s2_nan, inf=s2_inf)
        elif self.stages == 6:
            # stage 3a: register the leading-zero count beside the sum
            s2_sum, lz, s2_sx, s2_zsign, s2_e, s2_nan, s2_inf = self._stage(
                m, "s3a", sum=s2_sum, lz=lz, sx=s2_sx, zsign=s2_zsign, e=s2_e, nan=s2_nan,
                inf=s2_inf)
        sh = Signal(range(28))
        m.d.comb += sh.eq(lz if fast else Mux(lz > s2_e - 1, s2_e - 1, lz))
        s3_n, s3_e = Signal(27), Signal(9)
        s3_s, s3_zero, s3_nan, s3_inf = Signal(), Signal(), Signal(), Signal()
        with m.If(self.en):
            with m.If(s2_sum[27]):
                st += [s3_n.eq(Cat(s2_sum[0] | s2_sum[1], s2_sum[2:28])), s3_e.eq(s2_e + 1)]
            with m.Else():
                st += [s3_n.eq((s2_sum << sh)[:27]), s3_e.eq(s2_e - sh)]
            zero = sum_zero if fast else s2_sum == 0
            st += [
                s3_zero.eq(zero),
                s3_s.eq(Mux(zero, s2_zsign, s2_sx)),
                s3_nan.eq(s2_nan), s3_inf.eq(s2_inf),
            ]
        # -- stage 4: round to nearest even, pack ------------------------------------------
        guard = s3_n[2]
        rest = s3_n[1] | s3_n[0]
        up = guard & (rest | s3_n[3])
        mant = Signal(25)
        m.d.comb += mant.eq(s3_n[3:27] + up)
        mant_n = Signal(24)
        e_n = Signal(9)
        if fast:
            # a carry out of the rounding leaves mant[:24] = 0: only bit 23 takes it
            m.d.comb += [mant_n.eq(Cat(mant[:23], mant[23] | mant[24])),
                         e_n.eq(Mux(mant[24], s3_e + 1, s3_e))]
        else:
            with m.If(mant[24]):
                m.d.comb += [mant_n.eq(mant[1:25]), e_n.eq(s3_e + 1)]
            with m.Else():
                m.d.comb += [mant_n.eq(mant[:24]), e_n.eq(s3_e)]
        if fast:                # overflow from the exponent beside the rounding carry
            overflow = (s3_e >= 0xFF) | (mant[24] & (s3_e == 0xFE))
        else:
            overflow = e_n >= 0xFF
        with m.If(self.en):
            with m.If(s3_nan):
                st += self.y.eq(QNAN32)
            with m.Elif(s3_inf | overflow):
                st += self.y.eq(Cat(Const(0, 23), Const(0xFF, 8), s3_s))
            with m.Elif(s3_zero):
                st += self.y.eq(Cat(Const(0, 31), s3_s))
            with m.Else():
                st += self.y.eq(Cat(mant_n[:23], Mux(mant_n[23], e_n[:8], 0), s3_s))
        return m
