"""The switch with reduction units (``switch.reduce = true``) in the fabric model, cycle for
cycle against its RTL (``Switch(reduce=True)``: the 2n x 2n crossbar with one
rtl/reduce/unit.py unit per port), with the RTL harness of tests/test_model_exact.py
(tb/model/test_switch_exact.py): every departure (results included, logged with their
group and chunk), the per-port and per-unit counters and every credit must be equal, and
each result's data equal to sim/reduce.py over its members' contributions.

Traces: the differential test's own (random, hotspot, permutation, multicast storm,
stalled output) and a reduction-heavy one (``reduction``): several groups (an all-reduce
over every port, a two-member MAX, a one-member group, a reduce to a root, a reduce to a
root that is no port, whose results are dropped), each member sending its contributions in
its own order within a window of chunks, chunks of all groups interleaved, packets of one to
three contributions, duplicates, non-member and invalid-group contributions, unicast and
multicast beside them, and output stalls; results multicast to the members; and a burst of
one-member chunks whose results back up behind a stopped output until the result FIFO is
full and the unit stalls.
"""

import numpy as np
import pytest

from fusionfabric.sim.fabric.config import ConfigError, LinkParams, SwitchParams, load_config
from fusionfabric.sim.fabric.engine import Fabric
from fusionfabric.sim.fabric.exact import ready_pattern, run_trace
from fusionfabric.sim.fabric.kernel import RESULT_TAG
from fusionfabric.formats.switch import Dtype, Mode, Op

from .test_model_exact import _trace as _base_trace


def _params(n, n_chunks=16, depth=4, out_depth=4):
    from fusionfabric.sim.fabric.config import max_iterations
    return {"n_ports": n, "data_width": 64, "depth": depth,
            "iterations": min(3, max_iterations(n)), "mode": "voq", "out_depth": out_depth,
            "n_groups": 8, "reduce": True, "n_chunks": n_chunks, "pipeline": False}


def _groups(n):
    """Reduction groups (and multicast groups: every group is one) of the heavy trace."""
    evens = list(range(0, n, 2))
    return {
        0: {"members": list(range(n)), "mode": Mode.ALLREDUCE, "op": Op.SUM,
            "dtype": Dtype.INT32},
        1: {"members": [1, n - 1], "mode": Mode.ALLREDUCE, "op": Op.MAX,
            "dtype": Dtype.UINT32},
        2: {"members": [0], "mode": Mode.ALLREDUCE, "op": Op.SUM, "dtype": Dtype.INT32},
        3: {"members": evens, "mode": Mode.REDUCE, "root": 1, "op": Op.SUM,
            "dtype": Dtype.FP32},
        4: {"members": [0, 1, 2], "mode": Mode.REDUCE, "root": n + 1, "op": Op.MIN,
            "dtype": Dtype.BF16},
    }


def reduction_trace(n, seed, chunks=6, window=3):
    """The reduction-heavy trace: per group ``chunks`` chunks (ids ``40 g + c``), each
    member sending them in its own order, shuffled within windows of ``window`` chunks,
    some as 2- or 3-flit packets of consecutive chunks; duplicates, non-member and
    invalid-group contributions; unicast and multicast beside them; 20 one-member chunks
    of unit 0 (ids ``96 + n k``) whose results back up behind output 0, stopped for 200
    cycles."""
    rng = np.random.default_rng(seed)
    groups = _groups(n)
    packets = []
    for g, spec in groups.items():
        base = 40 * g
        for m in spec["members"]:
            order = []
            for w0 in range(0, chunks, window):
                blk = list(range(w0, min(chunks, w0 + window)))
                rng.shuffle(blk)
                order += blk
            t = int(rng.integers(0, 10))
            k = 0
            while k < len(order):
                c = order[k]
                size = 1
                # a run of consecutive chunks in the order goes as one packet
                while (size < 3 and k + size < len(order) and order[k + size] == c + size
                       and rng.random() < 0.6):
                    size += 1
                packets.append((t, m, g, size, 2, base + c))
                if rng.random() < 0.08:                       # a duplicate right behind
                    packets.append((t, m, g, 1, 2, base + c))
                t += int(rng.integers(1, 12))
                k += size
    for _ in range(2 * n):                                    # non-members, invalid group
        g = int(rng.integers(0, 2))
        non = [p for p in range(n) if p not in groups[1]["members"]]
        src = non[int(rng.integers(0, len(non)))] if g == 1 else int(rng.integers(0, n))
        gg = 1 if g == 1 else 5
        packets.append((int(rng.integers(0, 100)), src, gg, 1, 2, int(rng.integers(0, 200))))
    for _ in range(6 * n):                                    # unicast and multicast
        kind = int(rng.random() < 0.25)
        dest = int(rng.integers(0, 2)) if kind else int(rng.integers(0, n))
        packets.append((int(rng.integers(0, 120)), int(rng.integers(0, n)), dest,
                        int(rng.integers(1, 4)), kind))
    # results backed up: port 0 alone (group 2) completes a chunk of unit 0 with every
    # contribution while its output is stopped, so the result row's VOQ, the result FIFO
    # and the unit's pipeline fill, and the unit holds its input
    packets += [(150 + k, 0, 2, 1, 2, 96 + n * k) for k in range(20)]
    cycles = 500 + 40 * n
    ready = ready_pattern(rng, cycles, n, 0.25)
    ready[150:350, 0] = False
    return packets, cycles, groups, ready


def _trace(kind, n, seed):
    if kind == "reduction":
        return reduction_trace(n, seed)
    return _base_trace(kind, n, seed)


def _args(packets, cycles, groups, ready, **extra):
    def spec(m):
        return {k: int(v) if not isinstance(v, list) else v for k, v in m.items()} \
            if isinstance(m, dict) else m
    return {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): spec(m) for g, m in groups.items()},
            "ready": None if ready is None else ready.astype(int).tolist(), **extra}


def _sw(n, n_chunks=16, depth=4, out_depth=4):
    return SwitchParams(n_ports=n, depth=depth, out_depth=out_depth, n_groups=8,
                        reduce=True, n_chunks=n_chunks)


# -- the model alone: timing rules of docs/switch.md and docs/reduction.md -------------------
def test_result_latency_follows_the_unit_latency():
    """k contributions to one chunk from k ports at cycle 0: the column takes one per cycle
    (ports 0..k-1 matched in turn), the unit's last handshake is at cycle k + 1, its result
    is valid ``unit_latency(k, n)`` cycles later (cycle r), the result row writes its first
    copy into a VOQ in r + 1 (the FIFO shows it a cycle after the handshake), and the
    copies leave one per cycle, lowest member first, two cycles after each VOQ write."""
    from fusionfabric.sim.reduce import unit_latency
    for n in (4, 8):
        groups = {0: list(range(n))}
        rows = run_trace(_sw(n), [(0, i, 0, 1, 2, 3) for i in range(n)], 200, groups=groups)
        last_hs = n + 1
        t_res = last_hs + unit_latency(n, n)
        want = [(t_res + 3 + m, m, 3 % n, RESULT_TAG | 3, 0) for m in range(n)]
        assert rows == want, (n, rows)


def test_no_contribution_is_lost_and_results_reach_every_member():
    """Every chunk of the heavy trace completes (no deadlock with windows of 3 chunks in 16
    slots), each result reaches each member once (ALLREDUCE) or the root (REDUCE), the
    dropped-root group's results are counted, and credits come back."""
    n = 4
    packets, cycles, groups, ready = reduction_trace(n, seed=11)
    out = []
    rows = run_trace(_sw(n), packets, cycles + 400, groups=groups, fabric_out=out,
                     ready=np.vstack([ready, np.ones((400, n), bool)]))
    fab = out[0]
    res = [(r[1], (r[3] >> 16) & 0xFF, r[3] & 0xFFFF) for r in rows if r[3] & RESULT_TAG]
    assert len(res) == len(set(res))
    for g, spec in groups.items():
        dests = spec["members"] if spec["mode"] == Mode.ALLREDUCE else [spec["root"]]
        for c in range(6):
            got = sorted(o for o, gg, ch in res if gg == g and ch == 40 * g + c)
            assert got == (sorted(dests) if spec.get("root", 0) < n else []), (g, c, got)
    ust = fab.rstate.ust[0]
    assert ust[:, 6].sum() == 6                       # group 4's results, root n + 1
    assert ust[:, 3].sum() > 0 and ust[:, 4].sum() > 0
    assert fab.credits_ok() and fab.in_flight()[0] == 0


def test_full_table_holds_the_unit_input():
    """With n_chunks = 4 the units' tables fill (``full_cycles`` counts the cycles a flit
    that opens a chunk waits) and, as the flow-control caveat of docs/switch.md says,
    chunks whose missing contributions queue behind such a flit never complete; with 16
    slots every chunk of the same trace completes and no unit waits."""
    n = 8
    packets, cycles, groups, ready = reduction_trace(n, seed=5)
    got = {}
    for nc in (4, 16):
        out = []
        run_trace(_sw(n, n_chunks=nc), packets, cycles, groups=groups, fabric_out=out,
                  ready=ready)
        got[nc] = out[0].rstate.ust[0]
    assert got[4][:, 5].sum() > 0 and got[16][:, 5].sum() == 0
    assert got[4][:, 1].sum() < got[16][:, 1].sum() == 5 * 6 + 20


@pytest.mark.soak
@pytest.mark.parametrize("n, lat, credits, frame", [(4, 0, 0, 0), (6, 2, 3, 5)])
def test_threaded_and_sequential_batch_points_agree_bit_for_bit(n, lat, credits, frame):
    """Batch points on numba threads against the same points one after the other, on every
    state array and every unit register; a point of the batch against the same traffic
    run alone with the departure log (seeded traffic: unicast, multicast, REDUCE to
    chunks 0..7 of valid and invalid groups). Soak: compiling the threaded kernel takes
    minutes on the shared machine."""
    seed = 97 * n + lat
    print(f"traffic seed {seed}")
    rng = np.random.default_rng(seed)
    sw = _sw(n, n_chunks=16)
    link = LinkParams(latency=lat, credits=credits, frame_period=frame)
    groups = {0: [0, 1], 1: list(range(n)), 3: {"members": [1, n - 1], "mode": 1, "root": 0}}
    B, C = 4, 250
    fabs = [Fabric(sw, link, B, groups=groups, window=(100, 700), src_queue=8,
                   parallel=par) for par in (True, False)]
    alone = Fabric(sw, link, 1, groups=groups, log=True, window=(100, 700), src_queue=8)
    for _ in range(3):
        size = np.where(rng.random((B, C, n)) < 0.3, rng.integers(1, 4, (B, C, n)), 0)
        u = rng.random((B, C, n))
        kind = np.where(u < 0.15, 1, np.where(u < 0.55, 2, 0))
        dest = np.where(kind == 0, rng.integers(0, n + 1, (B, C, n)),
                        rng.choice([0, 1, 3, 4], (B, C, n)))
        dest = np.where(kind == 2, dest | rng.integers(0, 8, (B, C, n)) << 8, dest)
        ready = rng.random((B, C, n)) < 0.8
        for f in fabs:
            f.step(dest, size, kind, ready)
        alone.step(dest[2:3], size[2:3], kind[2:3], ready[2:3])
    a, b = fabs
    assert a.rstate.ust[:, :, 1].sum() > 10 and a.stat("flits_out").sum() > 500
    for k in a.s:
        assert np.array_equal(a.s[k], b.s[k]), k
        assert np.array_equal(a.s[k][2:3], alone.s[k]), k
    for k, x in a.rstate._asdict().items():
        if k in ("gmode", "groot"):
            continue
        assert np.array_equal(x, getattr(b.rstate, k)), k
        assert np.array_equal(x[2:3], getattr(alone.rstate, k)), k
    assert len(alone.departures()) == alone.stat("flits_out").sum()


@pytest.mark.parametrize("n, m", [(4, 64), (8, 256)])
def test_behavioural_allreduce_is_one_cycle_short_of_the_kernel(n, m):
    """sim/fabric/reduction.py (``fusionfabric collective --algo switch``) against the cycle
    kernel on its own schedule: rank i sends chunk (k + i) mod m as its k-th flit, one per
    cycle from cycle 0, links of latency 0 (hop 2). The queue model ends one cycle early on
    every case measured (n = 4, 8; m = 64, 256; n_chunks 16 and 64): it hands a result to
    the replication in the cycle it is ready, where the switch first passes it through the
    result FIFO (a cycle)."""
    from fusionfabric.sim.fabric.reduction import switch_allreduce_cycles
    pk = [(0, i, 0, m - i, 2, i) for i in range(n)]
    pk += [(m - i, i, 0, i, 2, 0) for i in range(1, n)]
    sw = SwitchParams(n_ports=n, depth=16, out_depth=4, n_groups=4, reduce=True,
                      n_chunks=16)
    rows = run_trace(sw, pk, 6 * m + 400, groups={0: list(range(n))})
    res = [r for r in rows if r[3] & RESULT_TAG]
    assert len(res) == n * m
    assert res[-1][0] + 1 - switch_allreduce_cycles(n, m, 1.0, 2) == 1


@pytest.mark.parametrize("sets, msg", [
    (["switch.reduce=true", "switch.mode=fifo"], "mode=voq and switch.pipeline=false"),
    (["switch.reduce=true", "switch.mode=crosspoint"], "mode=voq and switch.pipeline=false"),
    (["switch.reduce=true", "switch.pipeline=true", "switch.iterations=1"],
     "mode=voq and switch.pipeline=false"),
    (["switch.reduce=true", "topology.kind=clos"], "one switch"),
    (["switch.reduce=true", "link.admission=voq"], "reduce=false only"),
    (["switch.reduce=true", "switch.data_width=48"], "multiple of 32"),
    (["switch.n_chunks=65"], "n_chunks"),
])
def test_unsupported_combinations_are_one_line_errors(sets, msg):
    with pytest.raises(ConfigError, match=msg) as ei:
        load_config(None, sets)
    assert "\n" not in str(ei.value)


def test_engine_refuses_other_designs():
    with pytest.raises(ConfigError, match="switch.mode=voq"):
        Fabric(SwitchParams(n_ports=4, mode="fifo", reduce=True))
    with pytest.raises(ConfigError, match="reduce=false only"):
        Fabric(_sw(4), LinkParams(admission="voq"))


# -- against the RTL --------------------------------------------------------------------------
CASES = [
    # (n, trace, n_chunks)
    (4, "reduction", 16),
    (8, "reduction", 4),
    (4, "random", 16),
    (4, "reduction", 2),
    (8, "reduction", 16),
    (4, "multicast_storm", 16),
    (4, "stalled_output", 16),
    (8, "random", 16),
    (8, "hotspot", 16),
    (8, "permutation", 16),
]
#: CI runs the 8-port reduction trace with 4 open-chunk slots (the tables fill); the others
#: are soak.
CI = {(8, "reduction", 4)}
#: Planted faults checked in the same run against the RTL's departures: at 8 ports with
#: 4 open-chunk slots, a model with 5 (one slot more) must diverge.
FAULTS = {(8, "reduction", 4): [{"n_chunks": 5}]}


def _run_rtl(n, kind, n_chunks, seed, override=None, sim="icarus", faults=()):
    from fusionfabric.tb.common.runner import run
    packets, cycles, groups, ready = _trace(kind, n, seed)
    if kind != "reduction":                     # the base traces' groups as dicts
        groups = {g: {"members": m} for g, m in groups.items()}
    extra = {"model_override": override} if override else {}
    if faults:
        extra["planted_faults"] = list(faults)
    print(f"trace {kind}, {n} ports, n_chunks {n_chunks}, seed {seed}")
    run("switch", "fusionfabric.tb.model.test_switch_exact", _params(n, n_chunks), sim=sim,
        test_args=_args(packets, cycles, groups, ready, **extra),
        planted_fault=bool(override))


@pytest.mark.cocotb
@pytest.mark.parametrize("n, kind, n_chunks", [
    pytest.param(*c, id=f"{c[0]}ports-{c[1]}-chunks{c[2]}",
                 marks=[] if c in CI else [pytest.mark.soak]) for c in CASES])
def test_model_matches_rtl_cycle_for_cycle(n, kind, n_chunks):
    _run_rtl(n, kind, n_chunks, seed=2000 + 7 * n + len(kind),
             faults=FAULTS.get((n, kind, n_chunks), ()))


@pytest.mark.soak
@pytest.mark.cocotb
@pytest.mark.parametrize("override", [{"n_chunks": 3}], ids=["n_chunks-3-vs-2"])
def test_planted_model_fault_is_caught(override):
    """The harness's own failure path: a model whose units have 3 open-chunk slots against
    the RTL's 2 fails the run with the first diverging departure (CI checks a planted
    fault inside the 8-port run, ``FAULTS``)."""
    from fusionfabric.tb.common.runner import CocotbFailure
    with pytest.raises(CocotbFailure, match=r"diverge at departure #\d+, cycle \d+"):
        _run_rtl(4, "reduction", 2, seed=5, override=override)
