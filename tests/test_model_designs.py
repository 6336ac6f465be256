"""The registered switch designs in the fabric model: the crosspoint-buffered switch
(``switch.mode = "crosspoint"``) and the pipelined VOQ switch (``switch.pipeline = true``).
The timing rules of docs/switch.md ("Crosspoint-buffered variant", "Pipelined variant")
on the model, the saturation throughput against the RTL's measured figures, and the
configurations they refuse. Cycle-exactness against the RTL: tests/test_model_exact.py."""

import pytest

from fusionfabric.sim.fabric.config import ConfigError, LinkParams, SwitchParams, load_config
from fusionfabric.sim.fabric.engine import Fabric
from fusionfabric.sim.fabric.exact import run_trace
from fusionfabric.sim.fabric.run import run_sweep


def _sw(n=4, depth=16, out_depth=8):
    return SwitchParams(n_ports=n, mode="crosspoint", depth=depth, out_depth=out_depth,
                        n_groups=4)


def test_zero_load_latency_is_ten_cycles():
    """Input handshake in t -> o_port valid in t + 10; a multicast flit reaches every
    member in the same cycle."""
    assert run_trace(_sw(), [(3, 1, 2, 1, 0)], 40) == [(13, 2, 1, 0, 0)]
    rows = run_trace(_sw(), [(3, 1, 0, 1, 1)], 40, groups={0: [0, 2, 3]})
    assert rows == [(13, 0, 1, 0, 0), (13, 2, 1, 0, 0), (13, 3, 1, 0, 0)]


@pytest.mark.parametrize("depth, out_depth, full", [(8, 7, True), (4, 7, False),
                                                     (8, 6, False)])
def test_line_rate_needs_depth_8_and_out_depth_7(depth, out_depth, full):
    """One input to one output at one flit per cycle needs depth >= 8 (the row's credit
    loop) and out_depth >= 7 (the output's credit loop)."""
    packets = [(c, 0, 1, 1, 0) for c in range(200)]
    rows = run_trace(_sw(depth=depth, out_depth=out_depth), packets, 600)
    cycles = [t for t, *_ in rows]
    assert len(rows) == 200
    assert (cycles[-1] - cycles[0] == 199) == full


def test_stopped_output_buffers_out_depth_plus_depth_plus_3():
    """An input takes out_depth + depth + 3 flits toward a stopped output, then stalls."""
    import numpy as np
    n, depth, out_depth = 4, 8, 4
    packets = [(c, 0, 1, 1, 0) for c in range(60)]
    ready = np.ones((80, n), bool)
    ready[:, 1] = False
    out = []
    assert run_trace(_sw(n, depth, out_depth), packets, 80, ready=ready,
                     fabric_out=out) == []
    fab = out[0]
    taken = int(fab.s["seq_next"][0, 0]) - int(fab.s["sq_cnt"][0, 0]) \
        - int(fab.s["rx_cnt"][0, 0])
    assert taken == out_depth + depth + 3


def test_saturation_near_the_rtl_figure():
    """8 ports, uniform single-flit packets at load 1, depth 16, out_depth 8: docs/switch.md
    measures 98.11 % on the RTL (bench/switch_throughput.py, Verilator); the model's
    seeds land within a point of it."""
    cfg = load_config(None, ["switch.mode=crosspoint", "n_ports=8", "depth=16",
                             "out_depth=8", "loads=1.0", "cycles=20000", "seeds=3"])
    acc = [p["accepted"] for p in run_sweep(cfg, progress=False)["points"]]
    assert all(0.97 <= a <= 0.99 for a in acc), acc


@pytest.mark.parametrize("sets, msg", [
    (["switch.mode=crosspoint", "switch.iterations=2"], "has no iSLIP"),
    (["switch.mode=crosspoint", "link.admission=voq"], "needs switch.mode=voq"),
    (["switch.mode=crosspoint", "topology.kind=clos"], "models voq switches only"),
    (["switch.mode=pipelined"], "is not one of"),
    (["switch.pipeline=true", "switch.mode=fifo"], "needs switch.mode=voq"),
    (["switch.pipeline=true", "switch.mode=crosspoint"], "needs switch.mode=voq"),
    (["switch.pipeline=true", "switch.iterations=2"], "one iSLIP round"),
    (["switch.pipeline=true", "link.admission=voq"], "pipeline=false only"),
    (["switch.pipeline=true", "topology.kind=clos"], "one switch"),
])
def test_unsupported_combinations_are_one_line_errors(sets, msg):
    with pytest.raises(ConfigError, match=msg) as ei:
        load_config(None, sets)
    assert "\n" not in str(ei.value)


def test_engine_refuses_iterations_and_admission():
    with pytest.raises(ConfigError, match="has no iSLIP"):
        Fabric(SwitchParams(n_ports=4, mode="crosspoint", iterations=2))
    with pytest.raises(ConfigError, match="needs switch.mode=voq"):
        Fabric(_sw(), LinkParams(admission="voq"))


def _pl(n=4, depth=16, out_depth=16):
    return SwitchParams(n_ports=n, mode="voq", pipeline=True, depth=depth,
                        out_depth=out_depth, n_groups=4)


def test_pipelined_zero_load_latency_is_twelve_cycles():
    assert run_trace(_pl(), [(3, 1, 2, 1, 0)], 40) == [(15, 2, 1, 0, 0)]
    # a flit to k members takes k cycles of VOQ writes, lowest member first
    rows = run_trace(_pl(), [(3, 1, 0, 1, 1)], 40, groups={0: [0, 2, 3]})
    assert rows == [(15, 0, 1, 0, 0), (16, 2, 1, 0, 0), (17, 3, 1, 0, 0)]


@pytest.mark.parametrize("out_depth, full", [(11, True), (10, True), (9, False)])
def test_pipelined_line_rate_of_one_input_to_one_output(out_depth, full):
    """One input to one output runs at one flit per cycle from out_depth = 10 (the RTL
    on the same trace at 10: the same departures, tb/model)."""
    packets = [(c, 0, 1, 1, 0) for c in range(200)]
    rows = run_trace(_pl(out_depth=out_depth), packets, 600)
    cycles = [t for t, *_ in rows]
    assert len(rows) == 200
    assert (cycles[-1] - cycles[0] == 199) == full


def test_pipelined_saturation_near_the_rtl_figure():
    """8 ports, uniform single-flit packets at load 1, depth 64, out_depth 16: docs/switch.md
    measures 95.37 % on the RTL; the model's seeds land within about a point of it."""
    cfg = load_config(None, ["switch.pipeline=true", "n_ports=8", "depth=64",
                             "out_depth=16", "loads=1.0", "cycles=20000", "seeds=3"])
    acc = [p["accepted"] for p in run_sweep(cfg, progress=False)["points"]]
    assert all(0.935 <= a <= 0.965 for a in acc), acc
