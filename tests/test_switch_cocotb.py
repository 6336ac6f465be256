"""cocotb regressions of the switch on Icarus and Verilator (tb/switch/test_switch.py).

CI runs the Icarus cases; the Verilator cases (C++ builds) are in the soak set."""

import pytest

from fusionfabric.tb.common import runner

CASES = [
    # (sim, params)
    ("icarus", {"n_ports": 2, "mode": "voq", "depth": 4}),
    ("icarus", {"n_ports": 3, "mode": "voq", "depth": 2, "iterations": 2, "data_width": 16}),
    ("icarus", {"n_ports": 4, "mode": "fifo", "depth": 2}),
    ("icarus", {"n_ports": 4, "mode": "voq", "depth": 4, "out_depth": 2}),
    ("verilator", {"n_ports": 3, "mode": "fifo", "depth": 1, "out_depth": 1}),
    ("verilator", {"n_ports": 8, "mode": "voq", "depth": 8, "iterations": 3}),
    # pipeline=True: registered iSLIP, block-RAM VOQs, pipelined crossbar
    ("icarus", {"n_ports": 3, "mode": "voq", "depth": 2, "pipeline": True, "data_width": 16}),
    ("icarus", {"n_ports": 4, "mode": "voq", "depth": 4, "pipeline": True, "out_depth": 6}),
    # mode="crosspoint": a buffered crossbar (a FIFO per crosspoint, an arbiter per output)
    ("icarus", {"n_ports": 3, "mode": "crosspoint", "depth": 1, "out_depth": 1,
                "data_width": 16}),
    ("icarus", {"n_ports": 4, "mode": "crosspoint", "depth": 4, "out_depth": 4}),
]


def _id(case):
    sim, p = case
    extra = "".join(f"-{k}{v}" for k, v in p.items() if k not in ("n_ports", "mode"))
    return f"{sim}-n{p['n_ports']}-{p['mode']}{extra}"


@pytest.mark.cocotb
@pytest.mark.parametrize("case", [
    pytest.param(c, id=_id(c), marks=[pytest.mark.soak] if c[0] == "verilator" else [])
    for c in CASES])
def test_switch(case):
    sim, params = case
    packets = 40 if params["n_ports"] <= 4 else 25
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch", params, sim=sim,
                        test_args={"packets": packets})
    assert result.tests and not result.failed


REDUCE_CASES = [
    ("icarus", {"n_ports": 3, "mode": "voq", "depth": 4, "data_width": 64, "reduce": True,
                "n_chunks": 4}),
    ("icarus", {"n_ports": 3, "mode": "voq", "depth": 4, "data_width": 64, "reduce": True,
                "n_chunks": 4, "pipeline": True, "out_depth": 6}),
    ("icarus", {"n_ports": 3, "mode": "crosspoint", "depth": 4, "data_width": 64,
                "reduce": True, "n_chunks": 4, "out_depth": 4}),
    # the reduction units' fast options (docs/reduction.md): same results, more latency
    ("icarus", {"n_ports": 3, "mode": "voq", "depth": 4, "data_width": 64, "reduce": True,
                "n_chunks": 4, "reduce_pipeline": True, "reduce_add_stages": 7}),
]


@pytest.mark.cocotb
@pytest.mark.parametrize("case", REDUCE_CASES, ids=[_id(c) for c in REDUCE_CASES])
def test_switch_reduce(case):
    sim, params = case
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch_reduce", params, sim=sim,
                        test_args={"chunks": 3})
    assert result.tests and not result.failed


@pytest.mark.cocotb
def test_switch_reduce_split_icarus():
    """The same reduction test on the switch's split Verilog (its reduction units as one
    module, instanced per port: ``generate switch --split``), first case's parameters."""
    sim, params = REDUCE_CASES[0]
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch_reduce", params, sim=sim,
                        test_args={"chunks": 3}, split=True, name="reduce_split")
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_switch_reduce_verilator_soak():
    """The switch with its units is large for Verilator (n units of SIMD float pipelines):
    its C++ build alone takes minutes, so this run is soak only."""
    params = {"n_ports": 2, "mode": "voq", "depth": 4, "data_width": 32, "reduce": True,
              "n_chunks": 8}
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch_reduce", params, sim="verilator",
                        test_args={"chunks": 4})
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_switch_pipelined_verilator_soak():
    """The pipelined variant at 8 ports on Verilator (a C++ build of minutes on a shared
    machine, so soak; Icarus covers it at 3 and 4 ports in CI)."""
    params = {"n_ports": 8, "mode": "voq", "depth": 8, "pipeline": True, "out_depth": 8}
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch", params, sim="verilator",
                        test_args={"packets": 25})
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_switch_crosspoint_verilator_soak():
    """The crosspoint variant at 8 ports and 64 bits (the FPGA report's configuration) on
    Verilator, with long packets of traffic."""
    params = {"n_ports": 8, "mode": "crosspoint", "depth": 16, "out_depth": 8}
    result = runner.run("switch", "fusionfabric.tb.switch.test_switch", params, sim="verilator",
                        test_args={"packets": 60})
    assert result.tests and not result.failed
