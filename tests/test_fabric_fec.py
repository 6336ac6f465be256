"""The fabric's ``rs544`` lane profile: its ports, lane widths and parameter checks
(docs/fabric.md, "Lane profiles"). The fabric on FEC lanes in simulation is
tests/test_fabric_cocotb.py (soak: its Verilog is about 25 MB) and ``fusionfabric demo``'s
FEC run."""

from __future__ import annotations

import pytest

from fusionfabric.formats.chiplet import ChipletParams
from fusionfabric.portdoc import disown
from fusionfabric.rtl.fabric.fabric import FEC_STATUS, Fabric, lane_bits
from fusionfabric.rtl.fec import FecPcsRx


def _fabric(**kw):
    fab = Fabric(n_endpoints=2, **kw)
    disown(fab)               # never elaborated here
    return fab


def test_rs544_ports_and_lane_width():
    fab = _fabric(lane_profile="rs544")
    members = fab.signature.members
    assert "o_fec" in members
    assert len(fab.o_fec) == 2
    # 2 directions x 6 counters of 32 bits
    assert len(fab.o_fec[0].as_value()) == FEC_STATUS.width == 2 * 6 * 32
    # a 2-lane direction carries P = 8 symbols of 10 bits per cycle: 40 bits per lane
    assert fab.lane_bits == 40
    assert "o_fec" not in _fabric().signature.members
    assert _fabric().lane_bits == 66


@pytest.mark.parametrize("P,bits", [(4, 20), (8, 40)])
def test_lane_bits(P, bits):
    assert lane_bits("rs544", P) == bits
    assert _fabric(lane_profile="rs544", fec_symbols=P).lane_bits == bits


def test_replay_timer_waits_for_the_fec_round_trip():
    """With ``replay_timeout = 0`` the timer must outlast a flit's round trip through two
    FEC receivers (the chiplet default alone would fire on flits still in the decoder)."""
    fab = _fabric(lane_profile="rs544", latency=4)
    rx = FecPcsRx(n_lanes=2, symbols=8, n_words=2, am_period=8, max_skew=2)
    disown(rx)
    base = ChipletParams(tl_per_dl=fab.chiplet_params.tl_per_dl).timeout
    assert fab.chiplet_params.timeout >= base + 2 * (rx.latency + 4)
    assert _fabric(lane_profile="rs544", replay_timeout=3000).chiplet_params.timeout == 3000
    assert _fabric().chiplet_params.timeout == base


@pytest.mark.parametrize("kw,name", [
    ({"lane_profile": "kp4"}, "lane_profile='kp4'"),
    ({"lane_profile": "rs544", "fec_symbols": 16}, "fec_symbols=16"),
    ({"fec_symbols": 2}, "fec_symbols=2"),
    ({"fec_am_period": 1}, "fec_am_period=1"),
    ({"fec_am_period": -1}, "fec_am_period=-1"),
    ({"lane_profile": "rs544", "max_skew": 10_000}, "max_skew=10000"),
])
def test_bad_parameters(kw, name):
    with pytest.raises(ValueError, match=name.replace("(", r"\(")) as exc:
        Fabric(n_endpoints=2, **kw)
    assert "\n" not in str(exc.value)
