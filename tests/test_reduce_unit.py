"""Amaranth-simulator tests of the ReductionUnit: bit-exact results for every dtype × op over
group sizes 2, 3, 8 and n_ports in random arrival orders, error counters, table-full
backpressure, sustained throughput and the documented latency."""

import numpy as np
import pytest

from fusionfabric.rtl.reduce.unit import ReductionUnit
from fusionfabric.formats.switch import Dtype, Op
from fusionfabric.tb.reduce.amaranth_sim import simulate
from fusionfabric.tb.reduce.traffic import make_traffic, random_groups


def check_results(traffic, got):
    from fusionfabric.formats.switch import Kind
    assert set(got) == set(traffic.expected), "missing or unexpected chunks"
    for key, (data, members, mode, root) in traffic.expected.items():
        f = got[key]
        assert f["kind"] == Kind.RESULT and f["first"] == 1 and f["last"] == 1
        assert (f["members"], f["mode"], f["root"]) == (members, mode, root), key
        assert f["data"] == data, f"{key}: got {f['data']:#x}, want {data:#x}"


ALL = [(d, o) for d in Dtype for o in Op]


@pytest.mark.parametrize("n_ports,sizes", [(8, [2, 3, 8]), (5, [2, 3, 5])],
                         ids=["p8", "p5"])
def test_every_dtype_op_bit_exact(n_ports, sizes):
    rng = np.random.default_rng(n_ports)
    dut = ReductionUnit(n_ports=n_ports, data_width=64, n_chunks=4, n_groups=16)
    dts, ops = zip(*ALL)
    sz = [sizes[i % len(sizes)] for i in range(len(ALL))]
    groups = random_groups(rng, n_ports, sz, dts, ops)
    t = make_traffic(rng, n_ports, 64, groups, 3, window=3, special=0.15)
    got, st = simulate(dut, t, idle=0.2, backpressure=0.3, seed=1)
    check_results(t, got)
    assert st["o_contributions"] == t.n_contributions
    assert st["o_results"] == len(t.expected)
    assert st["o_duplicate"] == st["o_nonmember"] == st["o_invalid"] == 0


def test_errors_counted_never_summed():
    rng = np.random.default_rng(11)
    dut = ReductionUnit(n_ports=4, data_width=32, n_chunks=2, n_groups=4)
    groups = random_groups(rng, 4, [3, 2], [Dtype.INT32, Dtype.FP32], [Op.SUM, Op.SUM])
    t = make_traffic(rng, 4, 32, groups, 6, window=2, duplicates=5, nonmembers=4)
    # a flit to an unconfigured group, one with a bad kind, one to group >= n_groups
    from fusionfabric.formats.switch import Kind, switch_flit
    fl = switch_flit(32)
    t.flits += [fl.pack(kind=int(Kind.REDUCE), dest=3, src=0),
                fl.pack(kind=int(Kind.UNICAST), dest=0, src=0),
                fl.pack(kind=int(Kind.REDUCE), dest=200, src=0)]
    got, st = simulate(dut, t, seed=2)
    check_results(t, got)
    assert t.n_duplicate == 5 and t.n_nonmember > 0
    assert st["o_duplicate"] == t.n_duplicate
    assert st["o_nonmember"] == t.n_nonmember
    assert st["o_invalid"] == 3
    assert st["o_contributions"] == t.n_contributions


def test_duplicate_after_completion_counted():
    """A member's second contribution right after the chunk completed (slot not yet free)
    is a duplicate too; the result is unchanged."""
    rng = np.random.default_rng(14)
    dut = ReductionUnit(n_ports=4, data_width=32, n_chunks=2, n_groups=2)
    groups = random_groups(rng, 4, [4], [Dtype.FP32], [Op.SUM])
    t = make_traffic(rng, 4, 32, groups, 1, window=1)
    t.flits.append(t.flits[0] ^ 1)                     # same member, other data
    got, st = simulate(dut, t, seed=6)
    check_results(t, got)
    assert st["o_duplicate"] == 1 and st["o_contributions"] == 4 and st["o_results"] == 1


@pytest.mark.parametrize("pipeline", [False, True])
def test_table_full_backpressure_counted_not_dropped(pipeline):
    """Two slots, two chunks live at a time (the documented contract: at most n_chunks
    chunks in flight): a completed chunk keeps its slot while it is streamed, so the next
    chunk's first contribution waits; it is held, counted, and nothing is lost."""
    rng = np.random.default_rng(12)
    dut = ReductionUnit(n_ports=4, data_width=32, n_chunks=2, n_groups=2, pipeline=pipeline)
    groups = random_groups(rng, 4, [4], [Dtype.BF16], [Op.SUM], native=False)
    t = make_traffic(rng, 4, 32, groups, 12, window=2)
    got, st = simulate(dut, t, seed=3, max_cycles=5000)
    check_results(t, got)
    assert st["o_full_cycles"] > 0
    assert st["o_contributions"] == t.n_contributions


def test_throughput_and_latency():
    """Back-to-back contributions, no idle, no backpressure: ≥ 0.95 flits/cycle; the
    first result appears exactly at the documented latency."""
    rng = np.random.default_rng(13)
    n_ports = 8
    dut = ReductionUnit(n_ports=n_ports, data_width=32, n_chunks=8, n_groups=2)
    for k in (8, 3):   # latency: one chunk alone (cycle t handshake -> valid in t + L)
        g = random_groups(rng, n_ports, [k], [Dtype.FP32], [Op.SUM])
        t1 = make_traffic(rng, n_ports, 32, g, 1, window=1)
        got, st = simulate(ReductionUnit(n_ports=n_ports, data_width=32, n_chunks=8,
                                         n_groups=2), t1, seed=4)
        check_results(t1, got)
        lat = st["result_cycles"][0] - st["accept_cycles"][-1]
        assert lat == dut.latency(k), (k, lat, dut.latency(k))
        from fusionfabric.sim.reduce import unit_latency
        assert lat == unit_latency(k, n_ports), (k, lat)   # the model states it independently
    groups = random_groups(rng, n_ports, [8], [Dtype.FP32], [Op.SUM])
    # throughput: 40 chunks, members interleaved over 2 live chunks at a time
    t = make_traffic(rng, n_ports, 32, groups, 40, window=2, chunk_base=100)
    got, st = simulate(dut, t, seed=5)
    check_results(t, got)
    acc = st["accept_cycles"]
    rate = (len(acc) - 1) / (acc[-1] - acc[0])
    print(f"reduce-unit throughput: {rate:.3f} contributions/cycle over {len(acc)}")
    assert rate >= 0.95


def test_bad_parameters():
    for kw, msg in [({"n_ports": 1}, "n_ports=1"), ({"data_width": 48}, "data_width=48"),
                    ({"n_chunks": 0}, "n_chunks=0"), ({"n_groups": 300}, "n_groups=300")]:
        with pytest.raises(ValueError, match=msg):
            ReductionUnit(**kw)


@pytest.mark.soak
def test_72_ports_sizes_2_3_8_72():
    rng = np.random.default_rng(72)
    dut = ReductionUnit(n_ports=72, data_width=64, n_chunks=4, n_groups=16)
    sizes = [2, 3, 8, 72] * 4
    dts = [Dtype.BF16, Dtype.FP32, Dtype.FP16, Dtype.INT32] * 4
    ops = [Op.SUM] * 8 + [Op.MIN] * 4 + [Op.MAX] * 4
    groups = random_groups(rng, 72, sizes, dts, ops)
    t = make_traffic(rng, 72, 64, groups, 1, window=3, special=0.15, duplicates=2)
    got, st = simulate(dut, t, idle=0.1, backpressure=0.3, seed=7, max_cycles=50_000)
    check_results(t, got)
    assert st["o_duplicate"] == t.n_duplicate
