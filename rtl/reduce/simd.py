"""The SIMD reduction ALU over a flit, and the flit ↔ accumulator conversions."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import CANONICAL_QNAN, Dtype

from .convert import Narrow, Pipelinable, Widen
from .lane import LaneAlu

__all__ = ["SimdAlu", "FlitToAcc", "AccToFlit", "check_data_width", "parse_dtypes",
           "dtypes_text", "acc_lanes", "ALL_DTYPES"]

#: Every dtype path (the default build).
ALL_DTYPES = frozenset(Dtype)
_NAMES = {d.name.lower(): d for d in Dtype}


def check_data_width(data_width):
    if not isinstance(data_width, int) or data_width <= 0 or data_width % 32:
        raise ValueError(f"data_width={data_width!r} must be a positive multiple of 32")
    return data_width


def parse_dtypes(dtypes) -> frozenset:
    """The dtype paths to build: ``"all"`` (or None), a comma-separated list of names
    (``"bf16,fp32"``, case-insensitive), or an iterable of :class:`Dtype`; ValueError
    naming the value unless it is a non-empty set of known dtypes."""
    if dtypes is None:
        return ALL_DTYPES
    if isinstance(dtypes, str):
        text = dtypes.strip().lower()
        if text == "all":
            return ALL_DTYPES
        names = [n.strip() for n in text.split(",")]
        bad = [n for n in names if n not in _NAMES]
        if bad or not names:
            raise ValueError(f"dtypes={dtypes!r}: {', '.join(map(repr, bad)) or 'empty'} "
                             f"is not a dtype; give 'all' or a comma-separated subset of "
                             f"{', '.join(_NAMES)}")
        return frozenset(_NAMES[n] for n in names)
    try:
        out = frozenset(Dtype(d) for d in dtypes)
    except (TypeError, ValueError):
        raise ValueError(f"dtypes={dtypes!r} is not a set of Dtype codes") from None
    if not out:
        raise ValueError(f"dtypes={dtypes!r} is empty: build at least one dtype")
    return out


def dtypes_text(dtypes) -> str:
    """``"all"`` or the built dtypes' names in code order, e.g. ``"fp32,bf16"``."""
    d = parse_dtypes(dtypes)
    return "all" if d == ALL_DTYPES else ",".join(x.name.lower() for x in sorted(d))


def acc_lanes(data_width, dtypes) -> int:
    """Accumulator lanes of 32 bits for a flit: ``data_width/16`` when a 16-bit dtype is
    built (one lane per fp16/bf16 element), else ``data_width/32``."""
    d = parse_dtypes(dtypes)
    narrow = bool(d & {Dtype.FP16, Dtype.BF16})
    return check_data_width(data_width) // (16 if narrow else 32)


def _chain(options):
    """``Mux(c0, v0, Mux(c1, v1, ... v_last))`` from ``[(c0, v0), ..., (None, v_last)]``."""
    out = options[-1][1]
    for cond, val in reversed(options[:-1]):
        out = Mux(cond, val, out)
    return out


class FlitToAcc(wiring.Component):
    """Flit data → accumulator lanes (combinational).

    A ``data_width``-bit flit holds ``data_width/32`` INT32/UINT32/FP32 or
    ``data_width/16`` FP16/BF16 elements, LSB first. The accumulator has
    ``n_lanes = data_width/16`` lanes of 32 bits: element i goes to lane i, fp16/bf16
    widened exactly to fp32; lanes without an element are zero. With ``dtypes`` (default
    all) only those dtypes' paths are built, and without fp16/bf16 the accumulator has
    ``data_width/32`` lanes (:func:`acc_lanes`); another dtype code gives undefined lanes.

    Members
    -------
    data : In(data_width)
    dtype : In(3)
    acc : Out(2 * data_width)

    Timing
    ------
    Combinational.
    """

    def __init__(self, data_width, dtypes=None):
        self.data_width = check_data_width(data_width)
        self.dtypes = parse_dtypes(dtypes)
        self.n_lanes = acc_lanes(data_width, self.dtypes)
        super().__init__({"data": In(data_width), "dtype": In(3),
                          "acc": Out(32 * self.n_lanes)})

    def elaborate(self, platform):
        m = Module()
        d = self.dtypes
        n_words = self.data_width // 32
        has32 = bool(d & {Dtype.INT32, Dtype.UINT32, Dtype.FP32})
        lanes = []
        for i in range(self.n_lanes):
            h = self.data[16 * i:16 * i + 16]
            opts = []
            for dt, name in ((Dtype.FP16, "fp16"), (Dtype.BF16, "bf16")):
                if dt in d:
                    w = m.submodules[f"widen_{name}_{i}"] = Widen(dt)
                    opts.append((self.dtype == dt, w.y))
            for dt in (Dtype.FP16, Dtype.BF16):
                if dt in d:
                    m.d.comb += m.submodules[f"widen_{dt.name.lower()}_{i}"].a.eq(h)
            if has32:
                word = self.data[32 * i:32 * i + 32] if i < n_words else Const(0, 32)
                opts.append((None, word))
            lanes.append(_chain(opts))
        m.d.comb += self.acc.eq(Cat(*lanes))
        return m


class AccToFlit(Pipelinable):
    """Accumulator lanes → flit data (combinational): FP16/BF16 lanes rounded to nearest
    even (:class:`~rtl.reduce.convert.Narrow`), FP32 NaN made canonical, INT32/UINT32 as
    they are. With ``dtypes`` only those dtypes' paths are built (:class:`FlitToAcc`).
    With ``pipelined`` the narrowing takes two register stages
    (:class:`~rtl.reduce.convert.Narrow`) and the 32-bit words and ``dtype`` wait beside it.

    Members
    -------
    en : In(1)
        Only with ``pipelined``: clock enable.
    acc : In(2 * data_width)
    dtype : In(3)
    data : Out(data_width)

    Timing
    ------
    Combinational; with ``pipelined`` ``data`` follows ``acc`` by :attr:`latency` = 2
    enabled cycles.
    """

    def __init__(self, data_width, dtypes=None, pipelined=False):
        self.data_width = check_data_width(data_width)
        self.dtypes = parse_dtypes(dtypes)
        self.n_lanes = acc_lanes(data_width, self.dtypes)
        super().__init__({"acc": In(32 * self.n_lanes), "dtype": In(3),
                          "data": Out(data_width)}, pipelined, 2)

    def elaborate(self, platform):
        m = Module()
        d = self.dtypes
        acc, dtype = self.acc, self.dtype
        if self.pipelined:
            # the words and dtype wait beside the two stages of the narrowing
            for i in range(2):
                r_acc, r_dtype = Signal(len(acc), name=f"acc{i}"), Signal(3, name=f"dtype{i}")
                with m.If(self.en):
                    m.d.sync += [r_acc.eq(acc), r_dtype.eq(dtype)]
                acc, dtype = r_acc, r_dtype
        narrows = [dt for dt in (Dtype.FP16, Dtype.BF16) if dt in d]
        ints = bool(d & {Dtype.INT32, Dtype.UINT32})
        has32 = ints or Dtype.FP32 in d
        n_words = self.data_width // 32
        halves, words = [], []
        qnan = CANONICAL_QNAN[Dtype.FP32]
        for i in range(self.n_lanes):
            lane = acc[32 * i:32 * i + 32]
            ys = []
            for dt in narrows:
                n = m.submodules[f"narrow_{dt.name.lower()}_{i}"] = Narrow(dt, self.pipelined)
                ys.append(n.y)
            for dt in narrows:
                n = m.submodules[f"narrow_{dt.name.lower()}_{i}"]
                m.d.comb += n.a.eq(self.acc[32 * i:32 * i + 32])
                if self.pipelined:
                    m.d.comb += n.en.eq(self.en)
            if narrows:
                halves.append(Mux(dtype == Dtype.FP16, ys[0], ys[1]) if len(ys) == 2
                              else ys[0])
            if has32 and i < n_words:
                if Dtype.FP32 in d:
                    nan = (lane[23:31] == 0xFF) & (lane[:23] != 0)
                    words.append(Mux((dtype == Dtype.FP32) & nan if ints else nan,
                                     qnan, lane))
                else:
                    words.append(lane)
        if narrows and has32:
            narrow = (dtype == narrows[0]) if len(narrows) == 1 else \
                (dtype == Dtype.FP16) | (dtype == Dtype.BF16)
            m.d.comb += self.data.eq(Mux(narrow, Cat(*halves), Cat(*words)))
        else:
            m.d.comb += self.data.eq(Cat(*(halves or words)))
        return m


class SimdAlu(wiring.Component):
    """``a op b`` on every accumulator lane of a flit (``data_width/16`` :class:`LaneAlu`).

    Parameters
    ----------
    data_width : int
        Flit data width (multiple of 32); the accumulator is ``2 * data_width`` bits
        (``data_width`` bits without fp16/bf16, :func:`acc_lanes`).
    dtypes : str or set of Dtype, optional
        The dtype paths each lane builds (:func:`parse_dtypes`; default all).
    add_stages : int, optional
        Pipeline stages of each lane's fp32 adder (:class:`~rtl.reduce.fpadd.Fp32Add`).
    n_lanes : int, optional
        Lanes built (default :func:`acc_lanes`): fewer when the unit passes a flit through
        the ALU in slices (``cycles_per_flit``).
    pipeline : bool, optional
        Each lane registers its operands and rounds to fp16/bf16 in two stages
        (:class:`LaneAlu`, two more cycles).

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
    Latency :attr:`LATENCY` = :attr:`LaneAlu.LATENCY` = 5 enabled cycles (``add_stages +
    1 + 2 * pipeline``: :attr:`latency`), one op per enabled cycle. No reset.
    """

    LATENCY = LaneAlu.LATENCY

    def __init__(self, data_width, dtypes=None, add_stages=4, n_lanes=None, pipeline=False):
        self.data_width = check_data_width(data_width)
        self.dtypes = parse_dtypes(dtypes)
        self.add_stages = add_stages
        self.pipeline = bool(pipeline)
        self.n_lanes = n_lanes or acc_lanes(data_width, self.dtypes)
        self.latency = LaneAlu.latency_of(add_stages, pipeline)
        w = 32 * self.n_lanes
        super().__init__({"en": In(1), "a": In(w), "b": In(w), "op": In(2), "dtype": In(3),
                          "native": In(1), "y": Out(w)})

    def elaborate(self, platform):
        m = Module()
        ys = []
        for i in range(self.n_lanes):
            lane = m.submodules[f"lane_{i}"] = LaneAlu(self.dtypes, self.add_stages,
                                                       self.pipeline)
            m.d.comb += [lane.en.eq(self.en), lane.op.eq(self.op), lane.dtype.eq(self.dtype),
                         lane.native.eq(self.native),
                         lane.a.eq(self.a[32 * i:32 * i + 32]),
                         lane.b.eq(self.b[32 * i:32 * i + 32])]
            ys.append(lane.y)
        m.d.comb += self.y.eq(Cat(*ys))
        return m
