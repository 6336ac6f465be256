"""The reduction unit's area and speed options against the golden model sim/reduce.py.

``dtypes``: a unit built with a subset of the dtype paths reduces every built dtype × op
bit-exact (random arrival order, idle, backpressure) and counts every contribution of an
unbuilt dtype in ``o_invalid``, with no result. ``add_stages = 5, 6, 7``: the fp32 adder is
bit-exact on special, random and near-cancelling pairs; the unit with 6 is bit-exact, its
latency is the default's plus two cycles per pairing level, and its throughput is
unchanged. ``cycles_per_flit = f``: bit-exact, latency ``k * (f - 1)`` cycles above the
default's, throughput 1/f. ``pipeline``: bit-exact with every other option, latency
``4 + 2 depth`` above the unit without it, throughput unchanged; a chunk id reused back to
back. Bad values: ValueError naming the value; the CLI exits 2 with
one line.
"""

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.formats.switch import Dtype, Op
from fusionfabric.rtl.reduce.fpadd import Fp32Add
from fusionfabric.rtl.reduce.lane import LaneAlu
from fusionfabric.rtl.reduce.simd import acc_lanes, parse_dtypes
from fusionfabric.rtl.reduce.unit import ReductionUnit
from fusionfabric.sim import reduce as R
from fusionfabric.sim.reduce import unit_latency
from fusionfabric.tb.reduce.amaranth_sim import simulate
from fusionfabric.tb.reduce.traffic import make_traffic, random_groups
from tests.reduce_harness import run_pipelined
from tests.test_reduce_alu import check, check_lane, pairs
from tests.test_reduce_unit import check_results


def split_unbuilt(t, built, width):
    """Drop the expected results of groups whose dtype is not built; the number of their
    contribution flits (each must count in o_invalid)."""
    from fusionfabric.formats.switch import switch_flit
    fl = switch_flit(width)
    bad = {g.gid for g in t.groups if g.dtype not in built}
    t.expected = {k: v for k, v in t.expected.items() if k[0] not in bad}
    n_bad = sum(fl.unpack(w)["dest"] in bad for w in t.flits)
    t.n_contributions -= n_bad
    return n_bad


# (dtypes text, n_ports, data_width): 16-bit lanes without integers; integers only
# (data_width/32 lanes); one float of each width; everything but fp16
SUBSETS = [("bf16,fp32", 5, 64), ("int32", 4, 64), ("fp32,fp16", 4, 32),
           ("int32,uint32,fp32,bf16", 5, 32)]


@pytest.mark.parametrize("text,n_ports,width", SUBSETS, ids=[s[0] for s in SUBSETS])
def test_dtypes_subset_bit_exact_and_unbuilt_counted(text, n_ports, width):
    built = parse_dtypes(text)
    rng = np.random.default_rng([n_ports, width, len(built)])
    dut = ReductionUnit(n_ports=n_ports, data_width=width, n_chunks=4, n_groups=16,
                        dtypes=text)
    combos = [(d, o) for d in sorted(built) for o in Op]
    unbuilt = [d for d in Dtype if d not in built]
    combos += [(d, Op.SUM) for d in unbuilt]          # one group of each unbuilt dtype
    sizes = [(2, 3, n_ports)[i % 3] for i in range(len(combos))]
    dts, ops = zip(*combos)
    groups = random_groups(rng, n_ports, sizes, dts, ops)
    t = make_traffic(rng, n_ports, width, groups, 2, window=3, special=0.15)
    n_bad = split_unbuilt(t, built, width)
    assert n_bad == 2 * sum(len(g.members) for g in groups if g.dtype not in built) > 0
    got, st = simulate(dut, t, idle=0.2, backpressure=0.3, seed=len(text))
    check_results(t, got)                 # built dtypes bit-exact; no result for the rest
    assert st["o_invalid"] == n_bad
    assert st["o_contributions"] == t.n_contributions
    assert st["o_results"] == len(t.expected)
    assert st["o_duplicate"] == st["o_nonmember"] == 0


def test_dtypes_lane_counts():
    assert acc_lanes(64, "all") == 4 and acc_lanes(64, "bf16,fp32") == 4
    assert acc_lanes(64, "int32") == 2 and acc_lanes(64, "fp32,int32,uint32") == 2
    assert parse_dtypes("FP32, INT32") == {Dtype.FP32, Dtype.INT32}
    assert parse_dtypes([Dtype.BF16]) == {Dtype.BF16} and parse_dtypes("all") == set(Dtype)


@pytest.mark.parametrize("text", ["int32", "bf16,fp32", "uint32,fp16"])
def test_lane_subset_all_ops(text):
    """A LaneAlu with a subset: every op (and BYPASS) and native, switched cycle by cycle,
    over each built dtype in turn."""
    built = sorted(parse_dtypes(text))
    for dtype in built:
        check_lane(lambda: LaneAlu(text), dtype,
                   np.random.default_rng([int(dtype), len(built)]), 400,
                   f"lane[{text}] {dtype.name}")


@pytest.mark.parametrize("stages", [5, 6, 7])
def test_fp32_add_more_stages(stages):
    a, b = pairs(Dtype.FP32, 4000, 17)
    rng = np.random.default_rng(18)
    near = (a[-1500:].astype(np.int64) + rng.integers(-3, 4, 1500)).astype(np.uint32)
    # both operands at the bottom of the exponent range (biased 0..28), where the
    # normalizing shift is limited so that the result stays subnormal
    small = lambda: ((rng.integers(0, 29, 1500) << 23) | rng.integers(0, 1 << 23, 1500) |
                     (rng.integers(0, 2, 1500) << 31)).astype(np.uint32)
    a = np.concatenate([a, a[-1500:], small()])
    b = np.concatenate([b, near ^ np.uint32(0x80000000), small()])
    got = run_pipelined(lambda: Fp32Add(stages), stages, {"a": 32, "b": 32}, {"y": 32},
                        {"a": a.tolist(), "b": b.tolist()}, n=16)["y"]
    check(f"fp32 add, {stages} stages", a, b, got, R.combine(a, b, Dtype.FP32, Op.SUM))


def test_add_stages_6_bit_exact_latency_throughput():
    """Both extra adder registers (align | add, leading zeros | shift) in the unit."""
    rng = np.random.default_rng(55)
    n_ports = 5
    dut = ReductionUnit(n_ports=n_ports, data_width=32, n_chunks=4, n_groups=16,
                        add_stages=6)
    combos = [(d, o) for d in Dtype for o in Op]
    groups = random_groups(rng, n_ports, [(2, 3, 5)[i % 3] for i in range(len(combos))],
                           *zip(*combos))
    t = make_traffic(rng, n_ports, 32, groups, 1, window=3, special=0.15)
    got, st = simulate(dut, t, idle=0.2, backpressure=0.3, seed=9)
    check_results(t, got)
    assert st["o_contributions"] == t.n_contributions and st["o_invalid"] == 0
    # latency: the model's default unit latency plus two cycles per pairing level
    depth = 3
    for k in (5, 2):
        g = random_groups(rng, n_ports, [k], [Dtype.BF16], [Op.SUM])
        t1 = make_traffic(rng, n_ports, 32, g, 1, window=1)
        u = ReductionUnit(n_ports=n_ports, data_width=32, n_chunks=4, n_groups=2,
                          add_stages=6)
        got, st = simulate(u, t1, seed=10)
        check_results(t1, got)
        lat = st["result_cycles"][0] - st["accept_cycles"][-1]
        assert lat == unit_latency(k, n_ports) + 2 * depth == u.latency(k), (k, lat)
    assert [LaneAlu.latency_of(n) for n in (4, 5, 6)] == [5, 6, 7]
    # throughput: back to back, 2 live chunks of 5 members
    g = random_groups(rng, n_ports, [5], [Dtype.FP32], [Op.SUM])
    t2 = make_traffic(rng, n_ports, 32, g, 12, window=2, chunk_base=50)
    got, st = simulate(ReductionUnit(n_ports=n_ports, data_width=32, n_chunks=4,
                                     n_groups=2, add_stages=6), t2, seed=11)
    check_results(t2, got)
    acc = st["accept_cycles"]
    assert (len(acc) - 1) / (acc[-1] - acc[0]) >= 0.95


def idle_latency(rng, kw, n_ports, width, k, dtype, seed):
    """One ``k``-member chunk through an idle unit built with ``kw``, bit-exact; returns
    (cycles from its last contribution to the result, the unit)."""
    g = random_groups(rng, n_ports, [k], [dtype], [Op.SUM])
    t1 = make_traffic(rng, n_ports, width, g, 1, window=1)
    u = ReductionUnit(n_groups=2, **kw)
    got, st = simulate(u, t1, seed=seed)
    check_results(t1, got)
    return st["result_cycles"][0] - st["accept_cycles"][-1], u


def sustained_rate(rng, kw, n_ports, width, seed):
    """20 chunks of every port, two live, back to back, bit-exact; returns (contributions
    per cycle over the second half of the run, the counters). The table takes up to
    ``n_chunks`` chunks ahead of the streamer, so the rate is measured when it is full."""
    g = random_groups(rng, n_ports, [n_ports], [Dtype.FP32], [Op.SUM])
    t2 = make_traffic(rng, n_ports, width, g, 20, window=2, chunk_base=50)
    got, st = simulate(ReductionUnit(n_groups=2, **kw), t2, seed=seed)
    check_results(t2, got)
    acc = st["accept_cycles"][len(st["accept_cycles"]) // 2:]
    return (len(acc) - 1) / (acc[-1] - acc[0]), st


@pytest.mark.parametrize("f,width,n_ports,dtypes", [(2, 32, 5, "all"), (4, 64, 4, "all"),
                                                    (2, 64, 3, "fp32,int32")])
def test_cycles_per_flit_bit_exact_latency_throughput(f, width, n_ports, dtypes):
    """Every built dtype × op bit-exact with idle and backpressure; latency = the model's
    default latency plus (f - 1) cycles per member; sustained throughput 1/f."""
    built = parse_dtypes(dtypes)
    rng = np.random.default_rng([f, width, n_ports])
    kw = dict(n_ports=n_ports, data_width=width, n_chunks=4, dtypes=dtypes,
              cycles_per_flit=f)
    combos = [(d, o) for d in sorted(built) for o in Op]
    groups = random_groups(rng, n_ports, [(2, 3, n_ports)[i % 3] for i in range(len(combos))],
                           *zip(*combos))
    t = make_traffic(rng, n_ports, width, groups, 1, window=3, special=0.15)
    got, st = simulate(ReductionUnit(n_groups=16, **kw), t, idle=0.2, backpressure=0.3,
                       seed=12)
    check_results(t, got)
    assert st["o_contributions"] == t.n_contributions and st["o_invalid"] == 0
    for k in (n_ports, 2):
        lat, u = idle_latency(rng, kw, n_ports, width, k, sorted(built)[-1], seed=13)
        assert lat == unit_latency(k, n_ports) + k * (f - 1) == u.latency(k), (k, lat)
    rate, st = sustained_rate(rng, kw, n_ports, width, seed=14)
    assert 0.95 / f <= rate <= 1.1 / f, rate
    assert st["o_full_cycles"] > 0


@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
def test_lane_pipeline_all_ops(dtype):
    """A lane with ``pipeline`` (operand registers, two-stage native rounding) and the
    7-stage adder: every op, BYPASS and native switched cycle by cycle, bit-exact."""
    assert LaneAlu.latency_of(7, True) == 10
    check_lane(lambda: LaneAlu(add_stages=7, pipeline=True), dtype,
               np.random.default_rng([int(dtype), 7]), 600, f"lane {dtype.name} pipeline",
               latency=10)


@pytest.mark.parametrize("n_ports,width,add_stages,f", [(5, 32, 4, 1), (8, 64, 7, 1),
                                                         (4, 64, 4, 2)])
def test_pipeline_bit_exact_latency_throughput(n_ports, width, add_stages, f):
    """``pipeline``: every dtype × op bit-exact with idle and backpressure, duplicates and
    non-members counted; latency = the model's ``unit_latency(..., pipeline=True)``, 4 +
    2 depth above the same unit without it; throughput unchanged (1/f)."""
    rng = np.random.default_rng([n_ports, width, add_stages, f])
    kw = dict(n_ports=n_ports, data_width=width, n_chunks=4, add_stages=add_stages,
              cycles_per_flit=f, pipeline=True)
    combos = [(d, o) for d in Dtype for o in Op]
    groups = random_groups(rng, n_ports, [(2, 3, n_ports)[i % 3] for i in range(len(combos))],
                           *zip(*combos))
    t = make_traffic(rng, n_ports, width, groups, 1, window=3, special=0.15, duplicates=4,
                     nonmembers=3)
    got, st = simulate(ReductionUnit(n_groups=16, **kw), t, idle=0.2, backpressure=0.3,
                       seed=15)
    check_results(t, got)
    assert st["o_contributions"] == t.n_contributions and st["o_invalid"] == 0
    assert (st["o_duplicate"], st["o_nonmember"]) == (t.n_duplicate, t.n_nonmember)
    depth = max(1, (n_ports - 1).bit_length())
    for k in (n_ports, 2):
        lat, u = idle_latency(rng, kw, n_ports, width, k, Dtype.BF16, seed=16)
        base = unit_latency(k, n_ports, add_stages=add_stages) + k * (f - 1)
        assert lat == u.latency(k) == base + 4 + 2 * depth, (k, lat)
        assert lat == unit_latency(k, n_ports, add_stages=add_stages, pipeline=True) + \
            k * (f - 1), (k, lat)
    rate, _ = sustained_rate(rng, kw, n_ports, width, seed=17)
    assert 0.95 / f <= rate <= 1.1 / f, rate


def test_pipeline_one_slot():
    """``pipeline`` with a one-slot table: every chunk waits for the one before it (the
    stall decided a cycle ahead), bit-exact with idle and backpressure, nothing lost."""
    rng = np.random.default_rng(3)
    g = random_groups(rng, 3, [3, 2], [Dtype.FP32, Dtype.INT32], [Op.SUM, Op.MAX])
    t = make_traffic(rng, 3, 32, g, 4, window=1)
    got, st = simulate(ReductionUnit(n_ports=3, data_width=32, n_chunks=1, n_groups=4,
                                     pipeline=True), t, idle=0.1, backpressure=0.3, seed=4)
    check_results(t, got)
    assert st["o_contributions"] == t.n_contributions and st["o_full_cycles"] > 0


@pytest.mark.parametrize("pipeline", [False, True])
def test_chunk_reuse_back_to_back(pipeline):
    """A chunk id reused right after its chunk completes: one member's next contribution
    is sent 12 times back to back, so that copies reach the table while the old chunk is
    streamed, in the cycle its slot is freed and after the new chunk is open. Every copy
    but one is a duplicate, and both reductions are bit-exact."""
    rng = np.random.default_rng(18)
    g = random_groups(rng, 4, [3], [Dtype.INT32], [Op.SUM])
    t1 = make_traffic(rng, 4, 32, g, 1, window=1, chunk_base=7)
    t2 = make_traffic(rng, 4, 32, g, 1, window=1, chunk_base=7)
    t1.flits += [t2.flits[0]] * 12 + t2.flits[1:]
    got, st = simulate(ReductionUnit(n_ports=4, data_width=32, n_chunks=2, n_groups=2,
                                     pipeline=pipeline), t1, seed=19, n_results=2, reuse=True)
    (key, (want1, *_)), = t1.expected.items()
    assert [f["data"] for f in got[key]] == [want1, t2.expected[key][0]]
    assert (st["o_duplicate"], st["o_contributions"], st["o_results"]) == (11, 6, 2)


@pytest.mark.parametrize("kw,msg", [
    ({"dtypes": "fp64"}, "'fp64'"), ({"dtypes": "bf16,,fp32"}, "bf16,,fp32"),
    ({"dtypes": ""}, "dtypes=''"), ({"dtypes": []}, "empty"), ({"dtypes": [9]}, r"\[9\]"),
    ({"add_stages": 8}, "add_stages=8"), ({"add_stages": True}, "add_stages=True"),
    ({"cycles_per_flit": 3}, "cycles_per_flit=3 .* 2 ALU lanes"),
    ({"cycles_per_flit": 0}, "cycles_per_flit=0"),
    ({"pipeline": 1}, "pipeline=1"),
    ({"cycles_per_flit": 2, "dtypes": "fp32"}, "cycles_per_flit=2 .* 1 ALU lanes"),
])
def test_bad_option_values(kw, msg):
    from fusionfabric.rtl.blocks import disown_failed
    with pytest.raises(ValueError, match=msg) as info:
        ReductionUnit(n_ports=4, data_width=32, **kw)
    disown_failed(info.value)


@pytest.mark.parametrize("setting,needle", [("dtypes=fp64", "fp64"),
                                            ("dtypes=int32;fp32", "int32;fp32"),
                                            ("add_stages=3", "add_stages=3"),
                                            ("cycles_per_flit=3", "cycles_per_flit=3")])
def test_bad_option_values_cli(capsys, setting, needle):
    code = main(["generate", "reduce-unit", "--set", setting])
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("fusionfabric: error:") and needle in lines[0], lines
