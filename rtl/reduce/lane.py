"""One 32-bit lane of the reduction ALU: every op × dtype in the fp32 accumulator domain."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import Dtype, Op

from .convert import RoundNarrow
from .fpadd import Fp32Add
from .minmax import MinMax32

__all__ = ["LaneAlu", "OP_BYPASS"]

#: ALU op code beside :class:`fusionfabric.sim.layouts.Op`: ``y = a`` (a lone tree node carried up).
OP_BYPASS = 3


class LaneAlu(wiring.Component):
    """``a op b`` on one 32-bit accumulator lane, pipelined.

    The accumulator domain is fp32 for every float dtype: fp16/bf16 values are widened
    exactly before they reach the ALU (:class:`~rtl.reduce.convert.Widen`) and narrowed
    once at the end (``acc::f32``). With ``native`` set, each fp16/bf16 result is rounded
    to the nearest narrow value (:class:`~rtl.reduce.convert.RoundNarrow`, kept in fp32
    format) before it leaves the lane, so every tree step rounds like ml_dtypes native
    arithmetic. INT32/UINT32 are plain 32-bit words.

    Members
    -------
    en : In(1)
        Clock enable of the pipeline.
    a, b : In(32)
        Operands (accumulator domain).
    op : In(2)
        :class:`fusionfabric.sim.layouts.Op` code or :data:`OP_BYPASS`.
    dtype : In(3)
        :class:`fusionfabric.sim.layouts.Dtype` code.
    native : In(1)
        fp16/bf16: round to the narrow type after this op.
    y : Out(32)
        Result, :attr:`LATENCY` enabled cycles after the operands.

    Timing
    ------
    Latency :attr:`LATENCY` = 5 enabled cycles (4 for :class:`~rtl.reduce.fpadd.Fp32Add`,
    1 for the optional native rounding); one op per enabled cycle. No reset.
    """

    LATENCY = Fp32Add.LATENCY + 1

    def __init__(self):
        super().__init__({"en": In(1), "a": In(32), "b": In(32), "op": In(2),
                          "dtype": In(3), "native": In(1), "y": Out(32)})

    def elaborate(self, platform):
        m = Module()
        en = self.en
        a, b, op, dtype = self.a, self.b, self.op, self.dtype
        m.submodules.add = add = Fp32Add()
        m.d.comb += [add.en.eq(en), add.a.eq(a), add.b.eq(b)]
        m.submodules.minmax = mm = MinMax32()
        m.d.comb += [mm.a.eq(a), mm.b.eq(b), mm.max.eq(op == Op.MAX), mm.dtype.eq(dtype)]
        is_float = (dtype == Dtype.FP32) | (dtype == Dtype.FP16) | (dtype == Dtype.BF16)
        other = Signal(32)          # every result but the float sum, ready in cycle 0
        with m.Switch(op):
            with m.Case(Op.SUM):
                m.d.comb += other.eq((a + b)[:32])
            with m.Case(Op.MIN, Op.MAX):
                m.d.comb += other.eq(mm.y)
            with m.Default():
                m.d.comb += other.eq(a)
        use_add = Signal()
        m.d.comb += use_add.eq(is_float & (op == Op.SUM))
        narrow_to = Signal(2)       # 0: none, 1: fp16, 2: bf16
        m.d.comb += narrow_to.eq(Mux(self.native & (dtype == Dtype.FP16), 1,
                                     Mux(self.native & (dtype == Dtype.BF16), 2, 0)))
        # delay line for everything but the adder: Fp32Add.LATENCY stages
        d_other, d_use, d_nar = other, use_add, narrow_to
        for i in range(Fp32Add.LATENCY):
            r_other, r_use, r_nar = Signal(32), Signal(), Signal(2)
            with m.If(en):
                m.d.sync += [r_other.eq(d_other), r_use.eq(d_use), r_nar.eq(d_nar)]
            d_other, d_use, d_nar = r_other, r_use, r_nar
        sel = Signal(32)
        m.d.comb += sel.eq(Mux(d_use, add.y, d_other))
        # native rounding stage: round to the narrow format, kept in fp32
        m.submodules.round_fp16 = r16 = RoundNarrow(Dtype.FP16)
        m.submodules.round_bf16 = rbf = RoundNarrow(Dtype.BF16)
        m.d.comb += [r16.a.eq(sel), rbf.a.eq(sel)]
        with m.If(en):
            m.d.sync += self.y.eq(Mux(d_nar == 1, r16.y, Mux(d_nar == 2, rbf.y, sel)))
        return m
