"""cocotb regressions of pcs-tx → lane channel → pcs-rx on Icarus and Verilator
(tb/pcs/test_pcs.py), every cycle against the golden model. Wide sweeps are soak."""

import pytest

from tb.common import runner
from tb.pcs.loopback import PcsLoopback

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

# (sim, n_lanes, am_period, max_skew, ber_window): few on Verilator (build time), more on
# Icarus; small marker periods so that lock and alignment happen within a few hundred cycles.
CONFIGS = [
    ("icarus", 1, 16, 2, 512),
    ("icarus", 2, 32, 4, 512),
    ("icarus", 4, 20, 3, 64),
    ("verilator", 4, 32, 4, 512),
    ("verilator", 8, 40, 6, 512),
]

SOAK = [(sim, n, p, s, 512) for sim in ("icarus", "verilator") for n in (1, 2, 3, 4, 5, 8)
        for p, s in ((16, 3), (64, 8), (256, 16))]


def _run(sim, n, period, skew, window, args=None):
    params = {"n_lanes": n, "am_period": period, "max_skew": skew, "ber_window": window}
    return runner.run("pcs-loopback", "tb.pcs.test_pcs", params,
                      component=PcsLoopback(**params), sim=sim,
                      test_args={"ber": 1e-4, **(args or {})})


def _id(c):
    return f"{c[0]}-{c[1]}lanes-am{c[2]}-skew{c[3]}-ber{c[4]}"


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_pcs_loopback(cfg):
    result = _run(*cfg)
    assert [t["status"] for t in result.tests] == ["passed"] * 6


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("cfg", SOAK, ids=_id)
def test_pcs_loopback_soak(cfg):
    result = _run(*cfg, args={"cycles": 3000, "slips": 8})
    assert all(t["status"] == "passed" for t in result.tests)
