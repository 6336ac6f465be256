"""cocotb regressions of the reduction unit on Icarus and Verilator (tb/reduce/test_unit.py).

Icarus runs the broad set of parameters in CI; Verilator one small configuration and the
wider sweeps in the soak set (the unit is large: 2 lanes × 2 pairing levels of fp32 ALUs
already take ~1 min to build).
"""

import pytest

from fusionfabric.tb.common.runner import run

# (id, params, test_args)
CONFIGS = [
    ("p8-w64-c4", {"n_ports": 8, "data_width": 64, "n_chunks": 4, "n_groups": 16},
     {"chunks": 2, "expect_full": 1}),
    ("p3-w32-c1", {"n_ports": 3, "data_width": 32, "n_chunks": 1, "n_groups": 16},
     {"chunks": 2, "expect_full": 1}),
    ("p5-w128-c3", {"n_ports": 5, "data_width": 128, "n_chunks": 3, "n_groups": 16},
     {"chunks": 1, "idle": 0.0, "backpressure": 0.5}),
    ("p16-w32-c8", {"n_ports": 16, "data_width": 32, "n_chunks": 8, "n_groups": 16},
     {"chunks": 1, "expect_full": 0}),
    ("p5-w64-c2-pipeline", {"n_ports": 5, "data_width": 64, "n_chunks": 2, "n_groups": 16,
                            "pipeline": True, "add_stages": 7},
     {"chunks": 2, "expect_full": 1}),
]
VERILATOR = {"p3-w32-c1"}

# the Verilator case is soak (its C++ build is most of its time); Icarus runs them in CI
CASES = [pytest.param(sim, params, args, id=f"{sim}-{cid}",
                      marks=[pytest.mark.soak] if sim == "verilator" else [])
         for sim in ("icarus", "verilator")
         for cid, params, args in CONFIGS if sim == "icarus" or cid in VERILATOR]

# Wider sweeps, excluded from CI (pytest -m soak).
SOAK = [
    ("verilator", "p8-w64-c4", {"n_ports": 8, "data_width": 64, "n_chunks": 4},
     {"chunks": 6, "expect_full": 1}),
    ("verilator", "p16-w128-c8", {"n_ports": 16, "data_width": 128, "n_chunks": 8},
     {"chunks": 4}),
    ("icarus", "p72-w64-c8", {"n_ports": 72, "data_width": 64, "n_chunks": 8},
     {"chunks": 1, "stall_cycles": 20000}),
    ("icarus", "p8-w256-c16", {"n_ports": 8, "data_width": 256, "n_chunks": 16},
     {"chunks": 4, "idle": 0.6, "backpressure": 0.7}),
]


@pytest.mark.cocotb
@pytest.mark.parametrize("sim,params,args", CASES)
def test_reduce_unit(sim, params, args):
    run("reduce-unit", "fusionfabric.tb.reduce.test_unit", params, sim=sim, test_args=args)


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("sim,params,args", [pytest.param(s, p, a, id=f"{s}-{c}")
                                             for s, c, p, a in SOAK])
def test_reduce_unit_soak(sim, params, args):
    run("reduce-unit", "fusionfabric.tb.reduce.test_unit", {**params, "n_groups": 16}, sim=sim,
        test_args=args)
