"""The SIMD reduction ALU over a flit, and the flit ↔ accumulator conversions."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import CANONICAL_QNAN, Dtype

from .convert import Narrow, Widen
from .lane import LaneAlu

__all__ = ["SimdAlu", "FlitToAcc", "AccToFlit", "check_data_width"]


def check_data_width(data_width):
    if not isinstance(data_width, int) or data_width <= 0 or data_width % 32:
        raise ValueError(f"data_width={data_width!r} must be a positive multiple of 32")
    return data_width


class FlitToAcc(wiring.Component):
    """Flit data → accumulator lanes (combinational).

    A ``data_width``-bit flit holds ``data_width/32`` INT32/UINT32/FP32 or
    ``data_width/16`` FP16/BF16 elements, LSB first. The accumulator has
    ``n_lanes = data_width/16`` lanes of 32 bits: element i goes to lane i, fp16/bf16
    widened exactly to fp32; lanes without an element are zero.

    Members
    -------
    data : In(data_width)
    dtype : In(3)
    acc : Out(2 * data_width)

    Timing
    ------
    Combinational.
    """

    def __init__(self, data_width):
        self.data_width = check_data_width(data_width)
        self.n_lanes = data_width // 16
        super().__init__({"data": In(data_width), "dtype": In(3),
                          "acc": Out(32 * self.n_lanes)})

    def elaborate(self, platform):
        m = Module()
        lanes = []
        for i in range(self.n_lanes):
            h = self.data[16 * i:16 * i + 16]
            wf = m.submodules[f"widen_fp16_{i}"] = Widen(Dtype.FP16)
            wb = m.submodules[f"widen_bf16_{i}"] = Widen(Dtype.BF16)
            m.d.comb += [wf.a.eq(h), wb.a.eq(h)]
            word = self.data[32 * i:32 * i + 32] if i < self.n_lanes // 2 else Const(0, 32)
            lanes.append(Mux(self.dtype == Dtype.FP16, wf.y,
                             Mux(self.dtype == Dtype.BF16, wb.y, word)))
        m.d.comb += self.acc.eq(Cat(*lanes))
        return m


class AccToFlit(wiring.Component):
    """Accumulator lanes → flit data (combinational): FP16/BF16 lanes rounded to nearest
    even (:class:`~rtl.reduce.convert.Narrow`), FP32 NaN made canonical, INT32/UINT32 as
    they are.

    Members
    -------
    acc : In(2 * data_width)
    dtype : In(3)
    data : Out(data_width)

    Timing
    ------
    Combinational.
    """

    def __init__(self, data_width):
        self.data_width = check_data_width(data_width)
        self.n_lanes = data_width // 16
        super().__init__({"acc": In(32 * self.n_lanes), "dtype": In(3),
                          "data": Out(data_width)})

    def elaborate(self, platform):
        m = Module()
        halves, words = [], []
        qnan = CANONICAL_QNAN[Dtype.FP32]
        for i in range(self.n_lanes):
            lane = self.acc[32 * i:32 * i + 32]
            nf = m.submodules[f"narrow_fp16_{i}"] = Narrow(Dtype.FP16)
            nb = m.submodules[f"narrow_bf16_{i}"] = Narrow(Dtype.BF16)
            m.d.comb += [nf.a.eq(lane), nb.a.eq(lane)]
            halves.append(Mux(self.dtype == Dtype.FP16, nf.y, nb.y))
            if i < self.n_lanes // 2:
                nan = (lane[23:31] == 0xFF) & (lane[:23] != 0)
                words.append(Mux((self.dtype == Dtype.FP32) & nan, qnan, lane))
        narrow = (self.dtype == Dtype.FP16) | (self.dtype == Dtype.BF16)
        m.d.comb += self.data.eq(Mux(narrow, Cat(*halves), Cat(*words)))
        return m


class SimdAlu(wiring.Component):
    """``a op b`` on every accumulator lane of a flit (``data_width/16`` :class:`LaneAlu`).

    Parameters
    ----------
    data_width : int
        Flit data width (multiple of 32); the accumulator is ``2 * data_width`` bits.

    Members
    -------
    en : In(1)
    a, b : In(2 * data_width)
        Accumulator vectors (:class:`FlitToAcc`).
    op : In(2)
        :class:`fusionfabric.sim.layouts.Op` or :data:`~rtl.reduce.lane.OP_BYPASS`.
    dtype : In(3)
    native : In(1)
    y : Out(2 * data_width)

    Timing
    ------
    Latency :attr:`LATENCY` = :attr:`LaneAlu.LATENCY` = 5 enabled cycles, one op per
    enabled cycle. No reset.
    """

    LATENCY = LaneAlu.LATENCY

    def __init__(self, data_width):
        self.data_width = check_data_width(data_width)
        self.n_lanes = data_width // 16
        w = 32 * self.n_lanes
        super().__init__({"en": In(1), "a": In(w), "b": In(w), "op": In(2), "dtype": In(3),
                          "native": In(1), "y": Out(w)})

    def elaborate(self, platform):
        m = Module()
        ys = []
        for i in range(self.n_lanes):
            lane = m.submodules[f"lane_{i}"] = LaneAlu()
            m.d.comb += [lane.en.eq(self.en), lane.op.eq(self.op), lane.dtype.eq(self.dtype),
                         lane.native.eq(self.native),
                         lane.a.eq(self.a[32 * i:32 * i + 32]),
                         lane.b.eq(self.b[32 * i:32 * i + 32])]
            ys.append(lane.y)
        m.d.comb += self.y.eq(Cat(*ys))
        return m
