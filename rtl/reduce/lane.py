"""One 32-bit lane of the reduction ALU: every op × dtype in the fp32 accumulator domain."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal
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

    Parameters
    ----------
    dtypes : str or set of Dtype, optional
        The dtype paths to build (:func:`~rtl.reduce.simd.parse_dtypes`, default all):
        without a float dtype there is no fp32 adder, without fp16/bf16 no native
        rounding of that format, without INT32/UINT32 no integer adder; the min/max
        comparator keeps only the built orders. Another dtype code gives an undefined
        result (the unit rejects it before it reaches a lane).
    add_stages : int, optional
        Pipeline stages of the fp32 adder, 4 (default), 5, 6 or 7
        (:class:`~rtl.reduce.fpadd.Fp32Add`); the lane's latency is ``add_stages + 1``.
    pipeline : bool, optional
        Register the operands (with ``op``, ``dtype`` and ``native``) as they enter, and
        split the native rounding in two (:class:`~rtl.reduce.convert.RoundNarrow` with
        ``pipelined``): two more cycles (latency ``add_stages + 3``), so that no path runs
        from the lane's inputs into the adder, the comparator or the integer adder, or from
        the adder's packing through the whole rounding.

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
    1 for the optional native rounding; ``add_stages + 1 + 2 * pipeline`` in general,
    :attr:`latency`);
    one op per enabled cycle, for every ``dtypes``. No reset.
    """

    LATENCY = Fp32Add.LATENCY + 1

    @staticmethod
    def latency_of(add_stages: int = Fp32Add.LATENCY, pipeline: bool = False) -> int:
        """The lane's latency with an ``add_stages``-stage adder, and with ``pipeline``
        (ValueError naming a bad value)."""
        return Fp32Add.check_stages(add_stages) + 1 + (2 if pipeline else 0)

    def __init__(self, dtypes=None, add_stages=Fp32Add.LATENCY, pipeline=False):
        from .simd import parse_dtypes
        self.dtypes = parse_dtypes(dtypes)
        self.add_stages = Fp32Add.check_stages(add_stages)
        self.pipeline = bool(pipeline)
        self.latency = self.latency_of(add_stages, pipeline)
        super().__init__({"en": In(1), "a": In(32), "b": In(32), "op": In(2),
                          "dtype": In(3), "native": In(1), "y": Out(32)})

    def elaborate(self, platform):
        m = Module()
        en = self.en
        a, b, op, dtype, native = self.a, self.b, self.op, self.dtype, self.native
        if self.pipeline:
            i_a, i_b, i_op, i_dtype, i_native = (Signal(32), Signal(32), Signal(2), Signal(3),
                                                 Signal())
            with m.If(en):
                m.d.sync += [i_a.eq(a), i_b.eq(b), i_op.eq(op), i_dtype.eq(dtype),
                             i_native.eq(native)]
            a, b, op, dtype, native = i_a, i_b, i_op, i_dtype, i_native
        d = self.dtypes
        floats = [dt for dt in (Dtype.FP32, Dtype.FP16, Dtype.BF16) if dt in d]
        has_int = bool(d & {Dtype.INT32, Dtype.UINT32})
        if floats:
            m.submodules.add = add = Fp32Add(self.add_stages)
            m.d.comb += [add.en.eq(en), add.a.eq(a), add.b.eq(b)]
        m.submodules.minmax = mm = MinMax32(d, self.pipeline)
        m.d.comb += [mm.a.eq(a), mm.b.eq(b), mm.max.eq(op == Op.MAX), mm.dtype.eq(dtype)]
        if self.pipeline:
            m.d.comb += mm.en.eq(en)
        if not has_int:
            is_float = Const(1, 1)
        elif not floats:
            is_float = Const(0, 1)
        else:
            is_float = dtype == floats[0]
            for dt in floats[1:]:
                is_float = is_float | (dtype == dt)
        def results_but_add(op, sum_, a0):
            other = Signal(32, name="other")    # every result but the float sum
            with m.Switch(op):
                with m.Case(Op.SUM):
                    m.d.comb += other.eq(sum_)
                with m.Case(Op.MIN, Op.MAX):
                    m.d.comb += other.eq(mm.y)
                with m.Default():
                    m.d.comb += other.eq(a0)
            return other

        if not self.pipeline:       # ready in cycle 0
            other = results_but_add(op, (a + b)[:32] if has_int else a, a)
        use_add = Signal()
        m.d.comb += use_add.eq(is_float & (op == Op.SUM))
        narrow_to = Signal(2)       # 0: none, 1: fp16, 2: bf16
        nar = 0
        if Dtype.BF16 in d:
            nar = Mux(native & (dtype == Dtype.BF16), 2, nar)
        if Dtype.FP16 in d:
            nar = Mux(native & (dtype == Dtype.FP16), 1, nar)
        m.d.comb += narrow_to.eq(nar)
        first = 0
        if self.pipeline:
            # the comparator and the integer adder end in registers (the comparator's own,
            # beside the sum), the first stage of the delay line
            i_sum, i_a0, i_op0, i_use, i_nar = (Signal(32), Signal(32), Signal(2), Signal(),
                                                Signal(2))
            with m.If(en):
                m.d.sync += [i_sum.eq((a + b)[:32] if has_int else a), i_a0.eq(a),
                             i_op0.eq(op), i_use.eq(use_add), i_nar.eq(narrow_to)]
            use_add, narrow_to = i_use, i_nar
            other = results_but_add(i_op0, i_sum, i_a0)
            first = 1
        # delay line for everything but the adder: add_stages stages
        d_other, d_use, d_nar = other, use_add, narrow_to
        for i in range(first, self.add_stages):
            r_other, r_use, r_nar = Signal(32), Signal(), Signal(2)
            with m.If(en):
                m.d.sync += [r_other.eq(d_other), r_use.eq(d_use), r_nar.eq(d_nar)]
            d_other, d_use, d_nar = r_other, r_use, r_nar
        sel = Signal(32)
        m.d.comb += sel.eq(Mux(d_use, add.y, d_other) if floats else d_other)
        # native rounding stage: round to the narrow format, kept in fp32; with pipeline
        # the rounders register their first half, and the result that is not rounded
        # waits beside them
        rounders = []
        for dt, code in ((Dtype.FP16, 1), (Dtype.BF16, 2)):
            if dt in d:
                r = m.submodules[f"round_{dt.name.lower()}"] = RoundNarrow(dt, self.pipeline)
                rounders.append((r, code))
        if rounders:
            m.d.comb += [r.a.eq(sel) for r, _ in rounders]
            if self.pipeline:
                m.d.comb += [r.en.eq(en) for r, _ in rounders]
        if self.pipeline:
            r_sel, r_nar = Signal(32), Signal(2)
            with m.If(en):
                m.d.sync += [r_sel.eq(sel), r_nar.eq(d_nar)]
            sel, d_nar = r_sel, r_nar
        out = sel
        for r, code in reversed(rounders):
            out = Mux(d_nar == code, r.y, out)
        with m.If(en):
            m.d.sync += self.y.eq(out)
        return m
