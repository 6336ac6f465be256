"""Cycle-exact differential test: fabric model vs the switch RTL (tb/model/).

For one configuration and one trace, the RTL (cocotb on Icarus/Verilator) and the model
must hand out the same flits at the same outputs in the same cycles, and end with the
same per-port counters and credits. Traces: random (mixed sizes, multicast, drops,
random output backpressure) and adversarial (every input hammering one output with long
packets; a permutation at full rate; multicast storms into full VOQs; an output stalled
for long stretches). Every switch design is compared: voq, fifo, crosspoint (the buffered
crossbar, 10 cycles input to output) and pipelined (the RTL's voq with pipeline=True, 12
cycles). A mismatch prints the first diverging departure and its cycle.
"""

import numpy as np
import pytest

from fusionfabric.sim.fabric.exact import random_trace, ready_pattern
from fusionfabric.tb.common.runner import run

pytestmark = pytest.mark.cocotb


def _params(n, mode="voq", depth=4, iterations=0, out_depth=4):
    """RTL parameters of a case; ``mode`` is a model switch design: voq, fifo, crosspoint
    or pipelined (the RTL's mode="voq" with pipeline=True)."""
    from fusionfabric.sim.fabric.config import max_iterations
    pipeline = mode == "pipelined"
    if mode == "crosspoint":        # no iSLIP: the RTL takes 0 (its default) only
        iterations = 0
    elif pipeline:                  # one iSLIP round
        mode, iterations = "voq", 1
    else:
        iterations = iterations or min(3, max_iterations(n))
    return {"n_ports": n, "data_width": 64, "depth": depth,
            "iterations": iterations, "mode": mode,
            "out_depth": out_depth, "n_groups": 4, "reduce": False, "pipeline": pipeline}


def _trace(kind, n, seed):
    rng = np.random.default_rng(seed)
    groups = {0: list(range(n)), 1: [1, n - 1], 2: [0]}
    ready = None
    if kind == "random":
        packets = random_trace(rng, n, 60 * n, 300, max_size=4, multicast_groups=3,
                               p_bad=0.05)
        cycles = 700
        ready = ready_pattern(rng, cycles, n, 0.3)
    elif kind == "hotspot":        # every input -> output 0, long packets, full rate
        packets = [(c, i, 0, 8, 0) for i in range(n) for c in range(0, 160, 8)]
        cycles = 200 * n
    elif kind == "permutation":    # full-rate shift, 1-flit packets, then a reversal
        packets = [(c, i, (i + 1) % n, 1, 0) for i in range(n) for c in range(150)]
        packets += [(c, i, n - 1 - i, 2, 0) for i in range(n) for c in range(150, 250, 2)]
        cycles = 400
    elif kind == "multicast_storm":  # broadcasts and unicasts into small VOQs, stalls
        packets = [(c, i, 0, 1 + (c % 3), 1) for i in range(n) for c in range(0, 120, 4)]
        packets += [(c, i, int(rng.integers(0, n)), 3, 0) for i in range(n)
                    for c in range(2, 120, 4)]
        cycles = 40 * n * 6
        ready = ready_pattern(rng, cycles, n, 0.5)
    elif kind == "stalled_output":  # output 0 dead for long stretches: locks and credits
        packets = [(c, i, int(rng.integers(0, 2)), int(rng.integers(1, 6)), 0)
                   for i in range(n) for c in range(0, 200, 5)]
        cycles = 900
        ready = np.ones((cycles, n), bool)
        ready[50:300, 0] = False
        ready[400:600, :] = rng.random((200, n)) < 0.2
    else:
        raise ValueError(kind)
    return packets, cycles, groups, ready


CASES = [
    # (n, mode, trace, sim)
    (4, "voq", "random", "icarus"),
    (4, "voq", "hotspot", "icarus"),
    (4, "voq", "multicast_storm", "icarus"),
    (4, "fifo", "random", "icarus"),
    (4, "fifo", "stalled_output", "icarus"),
    (8, "voq", "random", "icarus"),
    (8, "voq", "permutation", "icarus"),
    (8, "voq", "stalled_output", "icarus"),
    (8, "fifo", "multicast_storm", "icarus"),
    (8, "voq", "random", "verilator"),
    (4, "crosspoint", "random", "icarus"),
    (4, "crosspoint", "multicast_storm", "icarus"),
    (4, "crosspoint", "stalled_output", "icarus"),
    (8, "crosspoint", "hotspot", "icarus"),
    (8, "crosspoint", "permutation", "icarus"),
    (8, "crosspoint", "random", "icarus"),
    (4, "crosspoint", "hotspot", "icarus"),
    (4, "crosspoint", "permutation", "icarus"),
    (8, "crosspoint", "multicast_storm", "icarus"),
    (8, "crosspoint", "stalled_output", "icarus"),
    (8, "crosspoint", "random", "verilator"),
    (4, "pipelined", "random", "icarus"),
    (4, "pipelined", "hotspot", "icarus"),
    (8, "pipelined", "multicast_storm", "icarus"),
    (8, "pipelined", "stalled_output", "icarus"),
    (8, "pipelined", "permutation", "icarus"),
    (4, "pipelined", "permutation", "icarus"),
    (4, "pipelined", "multicast_storm", "icarus"),
    (4, "pipelined", "stalled_output", "icarus"),
    (8, "pipelined", "random", "icarus"),
    (8, "pipelined", "hotspot", "icarus"),
    (8, "pipelined", "random", "verilator"),
]
#: The cases CI runs: each design and each trace at least once, at 4 and 8 ports (the
#: Verilator cases take minutes); every other case is in the soak set.
CI_CASES = {(4, "voq", "hotspot", "icarus"), (8, "voq", "random", "icarus"),
            (8, "voq", "permutation", "icarus"), (4, "fifo", "stalled_output", "icarus"),
            (4, "crosspoint", "multicast_storm", "icarus"),
            (8, "crosspoint", "random", "icarus"), (4, "pipelined", "hotspot", "icarus"),
            (8, "pipelined", "stalled_output", "icarus")}


@pytest.mark.parametrize("n, mode, kind, sim", [
    pytest.param(*c, id=f"{c[0]}ports-{c[1]}-{c[2]}-{c[3]}",
                 marks=[] if c in CI_CASES else [pytest.mark.soak]) for c in CASES])
def test_model_matches_rtl_cycle_for_cycle(n, mode, kind, sim):
    packets, cycles, groups, ready = _trace(kind, n, seed=1000 + 7 * n + len(kind))
    args = {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): m for g, m in groups.items()},
            "ready": None if ready is None else ready.astype(int).tolist()}
    run("switch", "fusionfabric.tb.model.test_switch_exact", _params(n, mode), sim=sim, test_args=args)


def test_planted_model_fault_is_caught_with_first_diverging_cycle():
    """The checker's own test: a model with 1 iSLIP round against RTL with 2 must fail,
    naming the first diverging cycle."""
    from fusionfabric.tb.common.runner import CocotbFailure

    packets, cycles, groups, ready = _trace("random", 4, seed=5)
    args = {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): m for g, m in groups.items()},
            "ready": ready.astype(int).tolist(), "model_override": {"iterations": 1}}
    with pytest.raises(CocotbFailure, match=r"diverge at departure #\d+, cycle \d+"):
        run("switch", "fusionfabric.tb.model.test_switch_exact", _params(4, "voq", iterations=2),
            sim="icarus", test_args=args, planted_fault=True)


@pytest.mark.parametrize("mode, override", [("crosspoint", {"depth": 8}),
                                            ("pipelined", {"out_depth": 5})])
def test_planted_model_fault_is_caught_for_each_registered_design(mode, override):
    """The same check for the crosspoint and pipelined switches: a model whose crosspoint
    buffers are twice the RTL's (8 flits against 4: the rows' credits differ), or whose
    output buffers hold one flit more (5 against 4: the credits differ), must fail."""
    from fusionfabric.tb.common.runner import CocotbFailure

    packets, cycles, groups, ready = _trace("random", 4, seed=5)
    args = {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): m for g, m in groups.items()},
            "ready": ready.astype(int).tolist(), "model_override": override}
    with pytest.raises(CocotbFailure, match=r"diverge at departure #\d+, cycle \d+"):
        run("switch", "fusionfabric.tb.model.test_switch_exact", _params(4, mode),
            sim="icarus", test_args=args, planted_fault=True)


#: Ports of different rates (the model's ``link.ports``): lanes per port, a full port 4.
MIXED = {4: [4, 4, 2, 1], 8: [4, 4, 4, 4, 2, 2, 1, 1]}
MIXED_CASES = [(8, "voq", "slow_hotspot", 1), (4, "fifo", "random", 1)]
MIXED_SOAK = [(n, mode, kind, seed) for n in (4, 8)
              for mode in ("voq", "fifo", "crosspoint", "pipelined")
              for kind in ("random", "slow_hotspot", "stalled_output") for seed in (2, 3)
              ] + [(8, "voq", "random", 1)]


def _mixed_trace(kind, n, seed):
    if kind != "slow_hotspot":
        return _trace(kind, n, seed)
    # every input into the slowest port (1 lane of 4) with long packets, and unicasts to
    # the fast ports behind them in the same inputs: the rate gap backs up the VOQs
    rng = np.random.default_rng(seed)
    packets = [(c, i, n - 1, 6, 0) for i in range(n) for c in range(0, 120, 12)]
    packets += [(c, i, int(rng.integers(0, n // 2)), 2, 0) for i in range(n)
                for c in range(3, 120, 6)]
    return packets, 130 * n, {0: list(range(n))}, None


def _mixed_run(n, mode, kind, seed):
    packets, cycles, groups, ready = _mixed_trace(kind, n, seed=seed * 7919 + 3 * n)
    args = {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): m for g, m in groups.items()},
            "ready": None if ready is None else ready.astype(int).tolist(),
            "port_lanes": MIXED[n], "full_lanes": 4}
    run("switch", "fusionfabric.tb.model.test_switch_exact", _params(n, mode), sim="icarus",
        test_args=args)


@pytest.mark.parametrize("n, mode, kind, seed", MIXED_CASES,
                         ids=[f"{n}ports-{m}-{k}-seed{e}" for n, m, k, e in MIXED_CASES])
def test_model_matches_rtl_with_ports_of_different_rates(n, mode, kind, seed):
    """Inputs offer and outputs take flits only in their port's link slots (lanes
    ``MIXED[n]`` of 4); departures, counters and credits must still match cycle for
    cycle."""
    _mixed_run(n, mode, kind, seed)


@pytest.mark.soak
@pytest.mark.parametrize("n, mode, kind, seed", MIXED_SOAK,
                         ids=[f"{n}ports-{m}-{k}-seed{e}" for n, m, k, e in MIXED_SOAK])
def test_soak_model_matches_rtl_with_ports_of_different_rates(n, mode, kind, seed):
    _mixed_run(n, mode, kind, seed)


SOAK = [(n, mode, kind, sim, seed) for n in (2, 3, 5, 8)
        for mode in ("voq", "fifo", "crosspoint", "pipelined")
        for kind in ("random", "multicast_storm", "stalled_output") for sim in ("icarus",)
        for seed in (1, 2)]


@pytest.mark.soak
@pytest.mark.parametrize("n, mode, kind, sim, seed", SOAK,
                         ids=[f"{n}ports-{m}-{k}-{s}-seed{e}" for n, m, k, s, e in SOAK])
def test_soak_model_matches_rtl(n, mode, kind, sim, seed):
    packets, cycles, groups, ready = _trace(kind, n, seed=seed * 7919 + n)
    args = {"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
            "groups": {str(g): m for g, m in groups.items()},
            "ready": None if ready is None else ready.astype(int).tolist()}
    run("switch", "fusionfabric.tb.model.test_switch_exact", _params(n, mode), sim=sim, test_args=args)
