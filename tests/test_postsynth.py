"""Post-synthesis simulation: Yosys's ECP5 netlist (``synth_ecp5``, ``write_verilog``) of
the switch BIST harness (tb/bist/harness.py: BIST generators → the real switch → BIST
checkers), run with the same cocotb BIST test as the RTL (tb/bist/test_bist.py, counters
on the top level's ports only) on Icarus with Yosys's ECP5 cell models
(``fusionfabric.synth.ecp5_sim_library``). What the FPGA gets behaves as the RTL did: every
message counted exactly as the generator model predicts, and a planted fault counted
exactly once, so the netlist run is not vacuous.

Not simulated here: the board slice's own netlist (chiplets, PCS, lanes, UART report).
A reduced slice took 846 s of Yosys and more than 7 minutes of Icarus compilation without
finishing on the shared 2-core machine (docs/board.md, "Tests").
"""

import re

import pytest

from fusionfabric.tb.bist.harness import BistHarness
from fusionfabric.tb.common import runner


def _run(params, args):
    return runner.run("bist-harness", "fusionfabric.tb.bist.test_bist", params,
                      component=BistHarness(**params), sim="icarus",
                      test_args={"poll": 500, **args}, netlist="ecp5")


@pytest.mark.cocotb
def test_bist_through_switch_netlist_ecp5():
    result = _run(dict(n_ports=2, max_len=1, seed=3), dict(load=256, stall=0, budget=300))
    assert [t["status"] for t in result.tests] == ["passed"]


@pytest.mark.cocotb
def test_bist_planted_drop_netlist_ecp5():
    """The harness drops packet 5 leaving switch output 0: the netlist's checker 0 counts
    exactly one sequence error and nothing else (the test's own expectation)."""
    result = _run(dict(n_ports=3, max_len=4, seed=2, fault="drop"),
                  dict(load=200, stall=30, budget=60))
    assert [t["status"] for t in result.tests] == ["passed"]


def test_ecp5_sim_library_declares_each_cell_once(tmp_path):
    from fusionfabric.synth import ecp5_sim_library
    text = ecp5_sim_library(tmp_path).read_text()
    modules = re.findall(r"^\s*module\s+(\\?\S+?)\s*[(#]", text, re.M)
    assert len(modules) == len(set(modules)), "a cell is declared twice"
    for cell in ("LUT4", "CCU2C", "TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "PFUMX",
                 "L6MUX21"):
        assert cell in modules, cell
    assert "`include" not in text and "$error" not in text


def test_netlist_option_checks_its_arguments():
    with pytest.raises(ValueError, match="netlist='ice40'"):
        runner.run("scrambler", "x", sim="icarus", netlist="ice40")
    with pytest.raises(ValueError, match="Icarus only"):
        runner.run("scrambler", "x", sim="verilator", netlist="ecp5")
