"""cocotb: BIST generators → real switch → BIST checkers (tb/bist/harness.py), counters
only, on Icarus and Verilator; planted faults at checker 0 counted exactly."""

import pytest

from fusionfabric.tb.bist.harness import BistHarness
from fusionfabric.tb.common import runner

SIMS = ["icarus", "verilator"]

CASES = {  # id: (harness params, test args, {sim: "ci" or "soak"})
    "p2-len1-full": (dict(n_ports=2, max_len=1, seed=3),
                     dict(load=256, stall=0, budget=300),
                     {"icarus": "ci", "verilator": "soak"}),
    "p4-len4-uniform": (dict(n_ports=4, max_len=4, seed=1),
                        dict(load=200, stall=40, budget=150),
                        {"icarus": "ci", "verilator": "soak"}),
    "p3-len7-perm": (dict(n_ports=3, max_len=7, pattern="permutation", offset=1, seed=9),
                     dict(load=128, stall=100, budget=60),
                     {"icarus": "ci", "verilator": "soak"}),
    "p4-fifo-hol": (dict(n_ports=4, max_len=3, mode="fifo", seed=5),
                    dict(load=150, stall=60, budget=80),
                    {"icarus": "ci"}),
    "p4-long": (dict(n_ports=4, max_len=4, seed=1),
                dict(load=256, stall=20, budget=20000, poll=5000),
                {"verilator": "soak"}),
}


def _run(sim, params, args, **kw):
    return runner.run("bist-harness", "fusionfabric.tb.bist.test_bist", params,
                      component=BistHarness(**params), sim=sim,
                      test_args={"poll": 500, **args}, **kw)


# Verilator builds of the switch harness take 1 to 2.5 minutes each on a loaded 2-core
# machine, so CI runs the smallest set there (2 ports, line rate); the rest are soak.
RUNS = [pytest.param(case, sim, id=f"{case}-{sim}",
                     marks=[pytest.mark.soak] if where == "soak" else [])
        for case, (_, _, sims) in CASES.items() for sim, where in sims.items()]


@pytest.mark.cocotb
@pytest.mark.parametrize("case, sim", RUNS)
def test_bist_through_switch(case, sim):
    params, args, _ = CASES[case]
    result = _run(sim, params, args)
    assert [t["status"] for t in result.tests] == ["passed"]


@pytest.mark.cocotb
@pytest.mark.parametrize("fault", ["drop", "flip", "last"])
def test_bist_planted_fault_counted_once(fault):
    # the harness corrupts packet 5 leaving switch output 0; the cocotb test asserts
    # exactly one error of that class at checker 0 and none elsewhere
    params = dict(n_ports=3, max_len=4, seed=2, fault=fault)
    result = _run("icarus", params, dict(load=200, stall=30, budget=60))
    assert [t["status"] for t in result.tests] == ["passed"]


@pytest.mark.cocotb
def test_bist_planted_fault_fails_a_clean_expectation():
    # the same drop, but the test is told nothing was planted: it must fail, naming it
    params = dict(n_ports=3, max_len=4, seed=2, fault="drop")
    with pytest.raises(runner.CocotbFailure, match=r"checker 0 errors \(1, 0, 0\)"):
        runner.run("bist-harness", "fusionfabric.tb.bist.test_bist", {**params, "fault": "none"},
                   component=BistHarness(**params), sim="icarus",
                   test_args=dict(load=200, stall=30, budget=60, poll=500),
                   planted_fault=True)


@pytest.mark.cocotb
def test_bench_reference_tests_still_run():
    # the two reference tests of bench/bist_speed.py, short: the per-cycle-Python test of
    # the bare switch (model traffic, KeyedScoreboard) and the cocotb wait-only floor
    from fusionfabric.rtl.blocks import get_block
    sw = dict(n_ports=4, data_width=64, depth=4, mode="voq", out_depth=4)
    runner.run("switch", "fusionfabric.tb.bist.test_speed", sw, component=get_block("switch").build(**sw),
               sim="icarus", testcase="test_python_scoreboard",
               test_args=dict(budget=20, max_len=4, load=200, stall=40))
    params, _, _ = CASES["p4-len4-uniform"]
    runner.run("bist-harness", "fusionfabric.tb.bist.test_speed", params,
               component=BistHarness(**params), sim="icarus", testcase="test_wait_only",
               test_args=dict(cycles=1000, load=200, stall=40))
