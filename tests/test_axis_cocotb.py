"""cocotb regressions of the AXI4-Stream wrappers (tb/axis/) on Icarus, driven by
cocotbext-axi's AxiStreamSource and AxiStreamSink."""

import pytest

from fusionfabric.tb.common import runner

SWITCH_CASES = [
    # (sim, params)
    ("icarus", {"n_ports": 4, "mode": "voq", "depth": 4, "data_width": 32, "keep": True}),
    ("icarus", {"n_ports": 4, "mode": "crosspoint", "depth": 4, "data_width": 64,
                "keep": False}),
]


def _id(case):
    sim, p = case
    extra = "".join(f"-{k}{v}" for k, v in p.items() if k not in ("n_ports", "mode"))
    return f"{sim}-n{p['n_ports']}-{p['mode']}{extra}"


@pytest.mark.cocotb
@pytest.mark.parametrize("case", SWITCH_CASES, ids=[_id(c) for c in SWITCH_CASES])
def test_switch_axis(case):
    sim, params = case
    result = runner.run("switch-axis", "fusionfabric.tb.axis.test_switch_axis", params,
                        sim=sim, test_args={"frames": 30})
    assert result.tests and not result.failed


@pytest.mark.cocotb
def test_chiplet_axis_pair():
    """Two chiplet-axis blocks back to back (tb/axis/harness.py, a test harness passed as
    a component): requests, completions and the framing counter through cocotbext-axi."""
    from fusionfabric.tb.axis.harness import ChipletAxisPair

    params = {"tl_per_dl": 2}
    result = runner.run("chiplet-axis-pair", "fusionfabric.tb.axis.test_chiplet_axis",
                        params, component=ChipletAxisPair(**params), sim="icarus",
                        test_args={"n": 24})
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_switch_axis_verilator_soak():
    """The same switch test on Verilator (about 40 s with its C++ build here)."""
    params = {"n_ports": 4, "mode": "voq", "depth": 4, "data_width": 32, "keep": True}
    result = runner.run("switch-axis", "fusionfabric.tb.axis.test_switch_axis", params,
                        sim="verilator", test_args={"frames": 60})
    assert result.tests and not result.failed
