"""cocotb regressions of pcs-tx → lane channel → pcs-rx on Icarus and Verilator
(tb/pcs/test_pcs.py), every cycle against the golden model. Wide sweeps are soak."""

import pytest

from fusionfabric.tb.common import runner
from fusionfabric.tb.pcs.loopback import PcsLoopback

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

#: the per-configuration tests (test_slip_sweep runs on its own, below)
TESTS = ["test_loopback", "test_skew_max", "test_slip_relock", "test_bit_errors_bip",
         "test_header_burst", "test_lane_stuck"]

# (sim, n_lanes, am_period, max_skew, ber_window, serdes_width): Verilator only in soak
# (build time), more on Icarus; small marker periods so that lock and alignment happen
# within a few hundred cycles. W = 32/64: the gearboxes of both ends in the loop.
CONFIGS = [
    ("icarus", 1, 16, 2, 512, 66),
    ("icarus", 2, 32, 4, 512, 66),
    pytest.param(("icarus", 4, 20, 3, 64, 66), marks=pytest.mark.soak),
    pytest.param(("verilator", 4, 32, 4, 512, 66), marks=pytest.mark.soak),
    pytest.param(("verilator", 8, 40, 6, 512, 66), marks=pytest.mark.soak),
    ("icarus", 1, 16, 3, 512, 32),
    ("icarus", 3, 20, 3, 512, 64),
    pytest.param(("verilator", 2, 16, 3, 512, 32), marks=pytest.mark.soak),
    pytest.param(("verilator", 4, 24, 4, 512, 64), marks=pytest.mark.soak),
]

SOAK = [(sim, n, p, s, 512, w) for sim in ("icarus", "verilator") for n in (1, 2, 3, 4, 5, 8)
        for p, s in ((16, 3), (64, 8), (256, 16)) for w in (66, 64, 32)]


def _run(sim, n, period, skew, window, width, args=None, testcase=None):
    params = {"n_lanes": n, "am_period": period, "max_skew": skew, "ber_window": window,
              "serdes_width": width}
    return runner.run("pcs-loopback", "fusionfabric.tb.pcs.test_pcs", params,
                      component=PcsLoopback(**params), sim=sim, testcase=testcase or TESTS,
                      test_args={"ber": 1e-4, **(args or {})})


def _id(c):
    return f"{c[0]}-{c[1]}lanes-am{c[2]}-skew{c[3]}-ber{c[4]}-w{c[5]}"


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_pcs_loopback(cfg):
    result = _run(*cfg)
    assert [t["status"] for t in result.tests] == ["passed"] * len(TESTS)


# (config, tests): cover runs, short enough for CI; the same with the other widths is soak
COVER = [(("icarus", 1, 8, 1, 512, 66), ["test_slip_sweep"]),
         (("icarus", 4, 10, 3, 512, 64), ["test_am_lock_order"])]
COVER_SOAK = [(("icarus", 2, 10, 3, 512, 32), ["test_slip_sweep", "test_am_lock_order"]),
              (("verilator", 8, 10, 3, 512, 64), ["test_slip_sweep", "test_am_lock_order"])]


def _cover(cfg, tests):
    result = _run(*cfg, testcase=tests)
    assert [t["status"] for t in result.tests] == ["passed"] * len(tests)


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg,tests", COVER, ids=[_id(c) for c, _ in COVER])
def test_pcs_cover(cfg, tests):
    """Every slip amount 1..65 in turn, each followed by relock and link-up; every lane as
    first and last to gain marker lock: the pcs.slip_bits and pcs.am_lock_* cover points
    entirely in short CI runs."""
    _cover(cfg, tests)


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("cfg,tests", COVER_SOAK, ids=[_id(c) for c, _ in COVER_SOAK])
def test_pcs_cover_soak(cfg, tests):
    _cover(cfg, tests)


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("cfg", SOAK, ids=_id)
def test_pcs_loopback_soak(cfg):
    result = _run(*cfg, args={"cycles": 3000, "slips": 8})
    assert all(t["status"] == "passed" for t in result.tests)
