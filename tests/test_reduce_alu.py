"""Amaranth-simulator unit tests of every reduction arithmetic unit against sim.reduce
(random + special values; exhaustive widening; narrowing over every rounding boundary)."""

import numpy as np
import pytest

from fusionfabric.rtl.reduce.convert import Narrow, RoundNarrow, Widen
from fusionfabric.rtl.reduce.fpadd import Fp32Add
from fusionfabric.rtl.reduce.lane import OP_BYPASS, LaneAlu
from fusionfabric.rtl.reduce.minmax import MinMax, MinMax32
from fusionfabric.rtl.reduce.simd import AccToFlit, FlitToAcc, SimdAlu
from fusionfabric.sim import reduce as R
from fusionfabric.formats.switch import Dtype, Op
from tests.reduce_harness import run_parallel, run_pipelined
from tests.test_reduce_model import edge_f32

NARROW = [Dtype.FP16, Dtype.BF16]


def pairs(dtype, n, seed, special=0.25):
    """Random operands plus every pair of special values."""
    rng = np.random.default_rng(seed)
    sp = R.special_values(dtype)
    a = np.concatenate([np.repeat(sp, len(sp)), R.random_bits(rng, dtype, n, special)])
    b = np.concatenate([np.tile(sp, len(sp)), R.random_bits(rng, dtype, n, special)])
    return a, b


def check(name, a, b, got, want):
    bad = np.nonzero(np.asarray(got, np.uint64) != np.asarray(want, np.uint64))[0]
    if len(bad):
        i = bad[0]
        pytest.fail(f"{name}: {len(bad)} mismatches; first: a={int(a[i]):#x} b={int(b[i]):#x}"
                    f" got {int(got[i]):#x} want {int(want[i]):#x}")


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_widen_exhaustive(dtype):
    x = np.arange(1 << 16, dtype=np.uint32)
    got = run_parallel(lambda: Widen(dtype), {"a": 16}, {"y": 32}, {"a": x.tolist()},
                       n=256)["y"]
    want = R.widen(x.astype(np.uint16), dtype)
    nan = np.isnan(want.view(np.float32))
    check(f"widen {dtype.name}", x, x, np.array(got)[~nan], want[~nan])
    assert np.all(np.isnan(np.array(got, np.uint32)[nan].view(np.float32)))


@pytest.mark.parametrize("pipelined", [False, True], ids=["comb", "pipelined"])
@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_narrow_edges_and_random(dtype, pipelined):
    x = edge_f32()
    if pipelined:       # two register stages, one pattern set per cycle
        got = run_pipelined(lambda: Narrow(dtype, pipelined=True), 2, {"a": 32}, {"y": 16},
                            {"a": x.tolist()}, n=256)["y"]
    else:
        got = run_parallel(lambda: Narrow(dtype), {"a": 32}, {"y": 16}, {"a": x.tolist()},
                           n=256)["y"]
    check(f"narrow {dtype.name}", x, x, got, R.narrow(x, dtype))


@pytest.mark.parametrize("pipelined", [False, True], ids=["comb", "pipelined"])
@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_round_narrow_equals_widen_of_narrow(dtype, pipelined):
    # plus ties and near-ties at every rounding position of the fp16 subnormal range
    ties = [(e << 23) | f for e in range(98, 118) for r in range(1, 24)
            for f in ((1 << (r - 1)), (1 << (r - 1)) + 1, (1 << (r - 1)) - 1, (3 << (r - 1)),
                      (3 << (r - 1)) & 0x7FFFFF, (1 << r), 0x7FFFFF ^ (1 << (r - 1)))]
    x = np.concatenate([edge_f32(), np.array(ties, np.uint32),
                        np.array(ties, np.uint32) | np.uint32(0x80000000)])
    if pipelined:       # one register stage
        got = run_pipelined(lambda: RoundNarrow(dtype, pipelined=True), 1, {"a": 32},
                            {"y": 32}, {"a": x.tolist()}, n=128)["y"]
    else:
        got = run_parallel(lambda: RoundNarrow(dtype), {"a": 32}, {"y": 32},
                           {"a": x.tolist()}, n=128)["y"]
    check(f"round to {dtype.name}", x, x, got, R.widen(R.narrow(x, dtype), dtype))


@pytest.mark.parametrize("dtype", [Dtype.FP32, Dtype.FP16, Dtype.BF16, Dtype.INT32,
                                   Dtype.UINT32], ids=lambda d: d.name)
@pytest.mark.parametrize("op", [Op.MIN, Op.MAX], ids=lambda o: o.name)
def test_minmax(dtype, op):
    a, b = pairs(dtype, 3000, [int(dtype), int(op)])
    got = run_parallel(lambda: MinMax(dtype), {"a": a.itemsize * 8, "b": b.itemsize * 8},
                       {"y": a.itemsize * 8}, {"a": a.tolist(), "b": b.tolist()},
                       consts={"max": int(op == Op.MAX)})["y"]
    check(f"{op.name} {dtype.name}", a, b, got, R.combine(a, b, dtype, op))


def test_minmax32_dynamic_dtype():
    """The lane's shared comparator: dtype and min/max switch on every vector."""
    rng = np.random.default_rng(5)
    parts = {d: pairs(d, 800, int(d) + 40) for d in (Dtype.FP32, Dtype.INT32, Dtype.UINT32)}
    a = np.concatenate([p[0] for p in parts.values()])
    b = np.concatenate([p[1] for p in parts.values()])
    dt = np.concatenate([np.full(len(p[0]), int(d)) for d, p in parts.items()])
    mx = rng.integers(0, 2, len(a))
    got = run_parallel(MinMax32, {"a": 32, "b": 32, "dtype": 3, "max": 1}, {"y": 32},
                       {"a": a.tolist(), "b": b.tolist(), "dtype": dt.tolist(),
                        "max": mx.tolist()})["y"]
    want = [int(R.combine(a[i:i + 1], b[i:i + 1], Dtype(int(dt[i])),
                          Op.MAX if mx[i] else Op.MIN)[0]) for i in range(len(a))]
    check("minmax32", a, b, got, want)


def test_fp32_add():
    a, b = pairs(Dtype.FP32, 6000, 7)
    # cancellation-heavy pairs: b close to -a
    rng = np.random.default_rng(8)
    near = (a[-2000:].astype(np.int64) + rng.integers(-3, 4, 2000)).astype(np.uint32)
    a = np.concatenate([a, a[-2000:]])
    b = np.concatenate([b, near ^ np.uint32(0x80000000)])
    got = run_pipelined(Fp32Add, Fp32Add.LATENCY, {"a": 32, "b": 32}, {"y": 32},
                        {"a": a.tolist(), "b": b.tolist()}, n=16)["y"]
    check("fp32 add", a, b, got, R.combine(a, b, Dtype.FP32, Op.SUM))


def lane_expected(a, b, dtype, op, native):
    """What one LaneAlu step must give in the fp32 accumulator domain."""
    if dtype in NARROW:
        r = a if op == OP_BYPASS else R.combine(a, b, Dtype.FP32, op)
        return R.widen(R.narrow(r, dtype), dtype) if native else r
    return a if op == OP_BYPASS else R.combine(a, b, dtype, op)


def check_lane(make, dtype, rng, n, name, latency=LaneAlu.LATENCY):
    """``n`` random steps of a LaneAlu from ``make`` (of ``latency`` cycles): every op (and
    BYPASS) and native on/off, switched cycle by cycle, against :func:`lane_expected`."""
    if dtype in NARROW:
        a = R.widen(R.random_bits(rng, dtype, n, 0.2), dtype)
        b = R.widen(R.random_bits(rng, dtype, n, 0.2), dtype)
    else:
        a, b = (R.random_bits(rng, dtype, n, 0.2) for _ in range(2))
    ops = rng.integers(0, 4, n)
    nat = rng.integers(0, 2, n)
    got = run_pipelined(make, latency, {"a": 32, "b": 32, "op": 2, "native": 1},
                        {"y": 32}, {"a": a.tolist(), "b": b.tolist(), "op": ops.tolist(),
                                    "native": nat.tolist()},
                        consts={"dtype": int(dtype)}, n=4)["y"]
    want = np.array([int(lane_expected(a[i:i + 1], b[i:i + 1], dtype, int(ops[i]),
                                       bool(nat[i]))[0]) for i in range(n)], np.uint64)
    check(name, a, b, got, want)


@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
def test_lane_alu_all_ops(dtype):
    """Every op (and BYPASS) and native on/off, switched cycle by cycle."""
    check_lane(LaneAlu, dtype, np.random.default_rng(int(dtype) + 20), 1200,
               f"lane {dtype.name}")


@pytest.mark.parametrize("data_width", [32, 64])
@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
def test_simd_flit_path(data_width, dtype):
    """FlitToAcc → SimdAlu → AccToFlit on whole flits equals the model's flit reduction
    of two contributions."""
    from amaranth import Elaboratable, Module, Signal
    from amaranth.sim import Simulator

    rng = np.random.default_rng([data_width, int(dtype)])
    ne = R.elements_per_flit(data_width, dtype)
    n = 150

    class H(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.fa = self.fa = FlitToAcc(data_width)
            m.submodules.fb = self.fb = FlitToAcc(data_width)
            m.submodules.alu = self.alu = SimdAlu(data_width)
            m.submodules.out = self.out = AccToFlit(data_width)
            m.d.comb += [self.fa.data.eq(self.a), self.fb.data.eq(self.b),
                         self.fa.dtype.eq(self.dt), self.fb.dtype.eq(self.dt),
                         self.alu.a.eq(self.fa.acc), self.alu.b.eq(self.fb.acc),
                         self.alu.en.eq(1), self.alu.op.eq(self.op),
                         self.alu.dtype.eq(self.dt), self.alu.native.eq(self.nat),
                         self.out.acc.eq(self.alu.y), self.out.dtype.eq(self.dt)]
            return m

    h = H()
    h.a, h.b = Signal(data_width), Signal(data_width)
    h.op, h.dt, h.nat = Signal(2), Signal(3), Signal()
    va = [R.pack_flit(R.random_bits(rng, dtype, ne, 0.2), dtype) for _ in range(n)]
    vb = [R.pack_flit(R.random_bits(rng, dtype, ne, 0.2), dtype) for _ in range(n)]
    ops = rng.integers(0, 3, n).tolist()
    nat = rng.integers(0, 2, n).tolist()
    got = []
    L = SimdAlu.LATENCY

    async def bench(ctx):
        ctx.set(h.dt, int(dtype))
        h.alu  # noqa: B018
        for t in range(n + L):
            if t < n:
                ctx.set(h.a, va[t])
                ctx.set(h.b, vb[t])
                ctx.set(h.op, ops[t])
                ctx.set(h.nat, nat[t])
            await ctx.tick()
            if L - 1 <= t < n + L - 1:
                got.append(ctx.get(h.out.data))

    sim = Simulator(h)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for i in range(n):
        want = R.reduce_flits([va[i], vb[i]], data_width, dtype, Op(ops[i]), bool(nat[i]))
        assert got[i] == want, (f"flit {i} {dtype.name} {Op(ops[i]).name} native={nat[i]}: "
                                f"{va[i]:#x} op {vb[i]:#x} = {got[i]:#x}, want {want:#x}")


def test_bad_parameters():
    with pytest.raises(ValueError, match="dtype=FP32"):
        Widen(Dtype.FP32)
    with pytest.raises(ValueError, match="dtype=9"):
        Narrow(9)
    with pytest.raises(ValueError, match="data_width=48"):
        SimdAlu(48)
