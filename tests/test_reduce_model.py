"""fusionfabric.sim.reduce against independent references: Python doubles, struct's binary16, integer
bit tricks, and ml_dtypes native arithmetic; IEEE 754 known answers; the tree order."""

import json
import math
import struct

import ml_dtypes
import numpy as np
import pytest

from fusionfabric.sim import reduce as R
from fusionfabric.cli import main
from fusionfabric.formats.switch import CANONICAL_QNAN, Dtype, Op

F32 = Dtype.FP32


def f2b(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def b2f(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


# -- scalar references, written independently of numpy ------------------------------------
def ref_round_f32(x: float) -> int:
    """A double (exact sum of two fp32) rounded to fp32 RNE via struct (C cast)."""
    try:
        return f2b(x)
    except OverflowError:
        return 0x7F800000 if x > 0 else 0xFF800000


def is_nan32(b):
    return (b & 0x7F800000) == 0x7F800000 and (b & 0x7FFFFF) != 0


def ref_key(b, width=32):
    sign = 1 << (width - 1)
    return (~b & (2 * sign - 1)) if b & sign else b | sign


def ref_f32(a: int, b: int, op: Op) -> int:
    if is_nan32(a) or is_nan32(b):
        return 0x7FC00000
    if op == Op.SUM:
        fa, fb = b2f(a), b2f(b)
        if math.isinf(fa) and math.isinf(fb) and fa != fb:
            return 0x7FC00000
        s = fa + fb       # exact in double: two fp32 have at most 24+24+~280 span? no:
        # a double holds the sum of two fp32 exactly unless the exponents are far apart,
        # and then the small one only acts as a sticky bit, which double keeps (53 > 2*24+2).
        if s == 0:
            return 0x80000000 if (a & b) >> 31 else 0
        return ref_round_f32(s)
    ka, kb = ref_key(a), ref_key(b)
    return (a if ka <= kb else b) if op == Op.MIN else (a if ka >= kb else b)


def ref_int(a: int, b: int, op: Op, signed: bool) -> int:
    if op == Op.SUM:
        return (a + b) & 0xFFFFFFFF
    conv = (lambda v: v - (1 << 32) if v >> 31 else v) if signed else (lambda v: v)
    pick = min if op == Op.MIN else max
    return pick((a, b), key=conv)


def ref_tree(values, fn):
    """The padded power-of-two tree (what the RTL streams): level by level, pairs of the
    same parent combine, a lone left child passes through."""
    k = len(values)
    depth = max(1, math.ceil(math.log2(k))) if k > 1 else 0
    level = {i: v for i, v in enumerate(values)}
    for _ in range(depth):
        nxt = {}
        for i in sorted(level):
            p = i // 2
            nxt[p] = fn(nxt[p], level[i]) if p in nxt else level[i]
        level = nxt
    assert list(level) == [0]
    return level[0]


# -- the order ------------------------------------------------------------------------------
def test_tree_order_documented_examples():
    assert R.tree_shape(1) == "v0"
    assert R.tree_shape(2) == "(v0+v1)"
    assert R.tree_shape(3) == "((v0+v1)+v2)"
    assert R.tree_shape(5) == "(((v0+v1)+(v2+v3))+v4)"
    assert R.tree_shape(6) == "(((v0+v1)+(v2+v3))+(v4+v5))"


@pytest.mark.parametrize("k", list(range(1, 73)))
def test_tree_equals_padded_pow2_tree(k):
    names = [f"v{i}" for i in range(k)]
    fn = lambda a, b: f"({a}+{b})"  # noqa: E731
    assert R.tree_reduce(names, fn) == ref_tree(names, fn)


# -- IEEE 754 known answers (binary32) ---------------------------------------------------------
KNOWN_F32 = [
    (0x3F800000, 0x33800000, Op.SUM, 0x3F800000),   # 1 + 2^-24: tie, to even -> 1
    (0x3F800001, 0x33800000, Op.SUM, 0x3F800002),   # 1+ulp + 2^-24: tie, to even -> up
    (0x3F800000, 0x33C00000, Op.SUM, 0x3F800001),   # 1 + 1.5*2^-24 -> above tie, up
    (0x7F7FFFFF, 0x7F7FFFFF, Op.SUM, 0x7F800000),   # max + max -> inf
    (0x00000001, 0x00000001, Op.SUM, 0x00000002),   # subnormals kept, no flush
    (0x007FFFFF, 0x00000001, Op.SUM, 0x00800000),   # largest subnormal + min -> min normal
    (0x00800000, 0x80000001, Op.SUM, 0x007FFFFF),   # normal - min subnormal -> subnormal
    (0x7F800000, 0xFF800000, Op.SUM, 0x7FC00000),   # inf + -inf -> canonical qNaN
    (0x7F800000, 0x3F800000, Op.SUM, 0x7F800000),
    (0x00000000, 0x80000000, Op.SUM, 0x00000000),   # +0 + -0 = +0 (RNE)
    (0x80000000, 0x80000000, Op.SUM, 0x80000000),   # -0 + -0 = -0
    (0x3F800000, 0xBF800000, Op.SUM, 0x00000000),   # x - x = +0
    (0xFFC00001, 0x3F800000, Op.SUM, 0x7FC00000),   # NaN payload/sign -> canonical
    (0x7F800001, 0x3F800000, Op.MAX, 0x7FC00000),   # sNaN -> canonical qNaN
    (0x00000000, 0x80000000, Op.MIN, 0x80000000),   # -0 < +0
    (0x00000000, 0x80000000, Op.MAX, 0x00000000),
    (0xFF800000, 0x3F800000, Op.MIN, 0xFF800000),
]


@pytest.mark.parametrize("a,b,op,want", KNOWN_F32, ids=lambda v: hex(v) if isinstance(v, int)
                         and not isinstance(v, Op) else str(v))
def test_fp32_known_answers(a, b, op, want):
    got = int(R.combine(np.uint32(a), np.uint32(b), F32, op))
    assert got == want, f"{a:#x} {op.name} {b:#x} = {got:#x}, want {want:#x}"
    assert ref_f32(a, b, op) == want


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_fp32_random_against_double_reference(op):
    rng = np.random.default_rng(1)
    a = R.random_bits(rng, F32, 4000, special=0.2)
    b = R.random_bits(rng, F32, 4000, special=0.2)
    got = R.combine(a, b, F32, op)
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist()):
        assert g == ref_f32(x, y, op), f"{x:#x} {op.name} {y:#x}: {g:#x}"


@pytest.mark.parametrize("dtype", [Dtype.INT32, Dtype.UINT32], ids=lambda d: d.name)
@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_int_against_python(dtype, op):
    rng = np.random.default_rng(2)
    a = R.random_bits(rng, dtype, 3000, special=0.3)
    b = R.random_bits(rng, dtype, 3000, special=0.3)
    got = R.combine(a, b, dtype, op)
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist()):
        assert g == ref_int(x, y, op, dtype == Dtype.INT32)
    # wrap: 0x7FFFFFFF + 1 = 0x80000000; 0xFFFFFFFF + 1 = 0
    assert int(R.combine(np.uint32(0x7FFFFFFF), np.uint32(1), dtype, Op.SUM)) == 0x80000000
    assert int(R.combine(np.uint32(0xFFFFFFFF), np.uint32(1), dtype, Op.SUM)) == 0


# -- conversions ------------------------------------------------------------------------------
def ref_narrow_bf16(b: int) -> int:
    if is_nan32(b):
        return 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def ref_narrow_fp16(b: int) -> int:
    if is_nan32(b):
        return 0x7E00
    f = b2f(b)
    try:
        return struct.unpack("<H", struct.pack("<e", f))[0]
    except OverflowError:
        return 0xFC00 if b >> 31 else 0x7C00


def edge_f32():
    """Patterns around every rounding boundary of fp16/bf16 plus random ones."""
    rng = np.random.default_rng(3)
    base = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    exps = np.arange(0, 256, dtype=np.uint32) << 23
    lows = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x7FFF, 0x8000,
                     0x8001, 0xFFFF, 0x18000, 0x7FE000, 0x7FF000, 0x7FFFFF, 0x7FC000],
                    np.uint32)
    grid = (exps[:, None] | lows[None, :]).ravel()
    return np.concatenate([base, grid, grid | 0x80000000])


@pytest.mark.parametrize("dtype,ref", [(Dtype.BF16, ref_narrow_bf16),
                                       (Dtype.FP16, ref_narrow_fp16)], ids=["bf16", "fp16"])
def test_narrowing_against_independent_rounding(dtype, ref):
    x = edge_f32()
    got = R.narrow(x, dtype)
    for v, g in zip(x.tolist(), got.tolist()):
        assert g == ref(v), f"{v:#010x} -> {g:#06x}, want {ref(v):#06x}"


@pytest.mark.parametrize("dtype", [Dtype.BF16, Dtype.FP16], ids=["bf16", "fp16"])
def test_widening_exhaustive_and_exact(dtype):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    w = R.widen(x, dtype)
    back = R.narrow(w, dtype)
    nan = np.isnan(w.view(np.float32))
    assert np.array_equal(back[~nan], x[~nan])               # exact round trip
    assert np.all(back[nan] == CANONICAL_QNAN[dtype])
    if dtype == Dtype.BF16:
        assert np.array_equal(w, x.astype(np.uint32) << 16)  # bf16 is the top half
    else:
        ref = [f2b(struct.unpack("<e", struct.pack("<H", int(v)))[0]) for v in x.tolist()]
        assert np.array_equal(w[~nan], np.array(ref, np.uint32)[~nan])


# -- native fp16/bf16 ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [Dtype.BF16, Dtype.FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_native_step_is_fp32_op_then_round(dtype, op):
    """ml_dtypes native arithmetic == fp32 op then RNE to the narrow type (what the RTL
    does); fp32 has >= 2p+2 bits so the double rounding is innocuous."""
    rng = np.random.default_rng(4)
    a = R.random_bits(rng, dtype, 20000, special=0.1)
    b = R.random_bits(rng, dtype, 20000, special=0.1)
    native = R.combine(a, b, dtype, op, native=True)
    via32 = R.narrow(R.combine(R.widen(a, dtype), R.widen(b, dtype), F32, op), dtype)
    assert np.array_equal(native, via32)


def test_native_differs_from_acc_f32():
    """bf16: 1 + 2^-9 + 2^-9 ... rounds away natively but not in fp32."""
    one, tiny = 0x3F80, 0x3B00        # 1.0 and 2^-9 (below half an ulp of 1.0 in bf16)
    rows = np.array([[one], [tiny], [tiny], [tiny]], np.uint16)
    # tree: (1 + t) + (t + t): natively 1 + t -> 1, t + t = 2t -> 1 + 2t = tie -> 1.0;
    # in fp32: 1 + 4t = 1 + 2^-7 = bf16 exactly representable 0x3F81.
    assert int(R.reduce_bits(rows, Dtype.BF16, Op.SUM, native=False)[0]) == 0x3F81
    assert int(R.reduce_bits(rows, Dtype.BF16, Op.SUM, native=True)[0]) == 0x3F80


# -- whole groups ----------------------------------------------------------------------------
def scalar_ref(dtype, op, native, column):
    if dtype in (Dtype.INT32, Dtype.UINT32):
        return ref_tree(column, lambda a, b: ref_int(a, b, op, dtype == Dtype.INT32))
    if dtype == F32:
        r = ref_tree(column, lambda a, b: ref_f32(a, b, op))
        return 0x7FC00000 if is_nan32(r) else r
    nar = ref_narrow_bf16 if dtype == Dtype.BF16 else ref_narrow_fp16
    wid = [int(v) for v in R.widen(np.array(column, np.uint16), dtype).tolist()]
    if native:
        r = ref_tree(wid, lambda a, b: int(R.widen(np.uint16(nar(ref_f32(a, b, op))),
                                                   dtype)))
    else:
        r = ref_tree(wid, lambda a, b: ref_f32(a, b, op))
    return nar(r)


@pytest.mark.parametrize("k", [1, 2, 3, 8, 72])
@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_group_reduction_against_scalar_reference(k, dtype, op):
    rng = np.random.default_rng([k, int(dtype), int(op)])
    c = R.random_bits(rng, dtype, (k, 24), special=0.15)
    for native in ((False, True) if dtype in (Dtype.FP16, Dtype.BF16) else (False,)):
        got = R.reduce_bits(c, dtype, op, native)
        for e in range(c.shape[1]):
            want = scalar_ref(dtype, op, native, [int(v) for v in c[:, e].tolist()])
            assert int(got[e]) == want, (k, dtype.name, op.name, native, e)


def test_acc_f32_sum_keeps_what_bf16_would_lose():
    """8 × bf16 1.0 plus 8 × 2^-9: acc::f32 reaches 8 + 8·2^-9 rounded once."""
    rows = np.array([[0x3F80]] * 8 + [[0x3B00]] * 8, np.uint16)
    got = int(R.reduce_bits(rows, Dtype.BF16, Op.SUM)[0])
    want = int(np.float32(8 + 8 * 2.0 ** -9).astype(ml_dtypes.bfloat16).view(np.uint16))
    assert got == want


def test_flit_packing_lsb_first():
    assert R.unpack_flit(0x0002_0001, 32, Dtype.FP16).tolist() == [1, 2]
    assert R.pack_flit([1, 2], Dtype.FP16) == 0x0002_0001
    w = [0x3F80_4000, 0x4000_3F80]          # bf16 (2, 1) and (1, 2)
    assert R.reduce_flits(w, 32, Dtype.BF16, Op.SUM) == 0x4040_4040


def test_vectors_command(capsys):
    assert main(["vectors", "reduce", "--dtype", "bf16", "--op", "sum", "--members", "8",
                 "--seed", "5", "--count", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"]["members"] == 8 and len(doc["vectors"]) == 3
    for v in doc["vectors"]:
        c = np.array(v["contributions"], np.uint16)
        assert c.shape == (8, 8)
        assert v["result"] == [scalar_ref(Dtype.BF16, Op.SUM, False,
                                          c[:, e].tolist()) for e in range(8)]


@pytest.mark.parametrize("bad,msg", [(["--dtype", "fp64"], "fp64"), (["--op", "avg"], "avg"),
                                     (["--members", "0"], "members=0")])
def test_vectors_bad_values(bad, msg, capsys):
    assert main(["vectors", "reduce", *bad]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


# k + 5 + 5 * ceil(log2 n_ports) for a k = n_ports chunk (docs/reduction.md, Timing), worked
# out by hand: n=2: 2+5+5*1; n=3: 3+5+5*2; n=4: 4+5+5*2; n=5: 5+5+5*3; n=8: 8+5+5*3;
# n=16: 16+5+5*4; n=72: 72+5+5*7. The 4-, 8- and 16-port rows are also the latencies that
# bench/reduce_unit.py measured on the RTL (docs/reduction.md's table).
UNIT_LATENCY_BY_HAND = {2: 12, 3: 18, 4: 19, 5: 25, 8: 28, 16: 41, 72: 112}


@pytest.mark.parametrize("n", sorted(UNIT_LATENCY_BY_HAND))
def test_unit_latency_known_answers(n):
    """sim.reduce.unit_latency and the fabric model's reduce_unit_latency against the
    documented formula, evaluated by hand."""
    from fusionfabric.sim.fabric.reduction import reduce_unit_latency
    assert R.unit_latency(n, n) == UNIT_LATENCY_BY_HAND[n], n
    assert reduce_unit_latency(n) == UNIT_LATENCY_BY_HAND[n], n


def test_unit_latency_fewer_members_than_ports():
    """k < n_ports: only the k streamer reads change (3 + 5 + 5*3 = 23 at 8 ports, the
    value test_throughput_and_latency measures on the RTL)."""
    assert R.unit_latency(3, 8) == 23
    assert R.unit_latency(1, 1) == 1 + 5 + 5 * 1   # one port still has one ALU level
