"""Physical mapping (NVLink 6 figures) and NCCL-style collective bandwidths."""

import pytest

from fusionfabric.sim.fabric.collective import collective
from fusionfabric.sim.fabric.reduction import reduce_unit_latency
from fusionfabric.sim.fabric.config import PhysParams, load_config
from fusionfabric.sim.fabric.phys import packet_efficiency, port_rate, rack_report


def test_nvlink6_rack_aggregate_is_259_2_TBps():
    """FACTS: 3.6 TB/s per ASIC, 72 ASICs, 72 x 3.6 = 259.2 ("260 TB/s")."""
    r = rack_report(PhysParams(), 72, 1.0)
    assert r["per_accelerator_TBps"] == pytest.approx(3.6)
    assert r["rack_aggregate_TBps"] == pytest.approx(259.2)
    assert r["fraction_of_aggregate"] == pytest.approx(1.0)
    assert rack_report(PhysParams(), 72, 0.586)["achieved_TBps"] == pytest.approx(
        259.2 * 0.586)


def test_encoding_markers_and_headers():
    base = port_rate(PhysParams())
    r = port_rate(PhysParams(encoding="64b66b", align_markers=True))
    assert r.line_Bps / base.line_Bps == pytest.approx(64 / 66 * 16383 / 16384)
    assert port_rate(PhysParams(encoding="256b257b")).efficiency == pytest.approx(256 / 257)
    # NVLink 1: 256 B payload = 16 data flits + 1 header flit of 16 B -> 94.12 %
    assert packet_efficiency(17, 1) == pytest.approx(0.9412, abs=1e-4)
    assert port_rate(PhysParams(flit_bytes=20, payload_bytes=16)).efficiency == 0.8
    with pytest.raises(ValueError, match="header_flits=4"):
        packet_efficiency(4, 4)


def test_allreduce_busbw_ring_vs_switch_and_alltoall():
    cfg = load_config(None, ["n_ports=8"])
    n = 8
    big = 1 << 30
    ring = collective(cfg, "allreduce", big, "ring")
    sw = collective(cfg, "allreduce", big, "switch")
    a2a = collective(cfg, "alltoall", big, "ring")
    link = ring["link_GBps_per_direction"]
    # NCCL: busbw = algbw * 2(n-1)/n; a ring saturates at the link rate, the in-switch
    # reduction sends and receives each byte once: 2(n-1)/n = 1.75x the ring at 8 ports
    assert ring["busbw_GBps"] == pytest.approx(ring["algbw_GBps"] * 2 * (n - 1) / n)
    assert ring["busbw_GBps"] == pytest.approx(link, rel=0.01)
    assert sw["busbw_GBps"] / ring["busbw_GBps"] == pytest.approx(2 * (n - 1) / n, rel=0.01)
    assert a2a["busbw_GBps"] == pytest.approx(a2a["algbw_GBps"] * (n - 1) / n)
    assert a2a["busbw_GBps"] == pytest.approx(link, rel=0.01)
    # small messages are latency bound
    small = collective(cfg, "allreduce", 256, "ring")
    assert small["busbw_GBps"] < 0.8 * link


def test_link_limits_show_in_collectives():
    cfg = load_config(None, ["n_ports=4", "link.latency=3", "link.credits=2"])
    r = collective(cfg, "allreduce", 1 << 26, "ring")
    assert r["rho"] == pytest.approx(2 / 7, abs=0.01)   # credits / (2L+1)
    assert r["busbw_over_link"] == pytest.approx(2 / 7, rel=0.03)


def test_reduce_unit_latency_matches_rtl_formula():
    """The model's unit latency and ReductionUnit.latency against k + 5 + 5*ceil(log2 n)
    (docs/reduction.md, Timing) evaluated by hand; 19, 28 and 41 cycles at 4, 8 and 16
    ports are also the RTL's measured latencies (bench/reduce_unit.py)."""
    from fusionfabric.rtl.reduce.unit import ReductionUnit
    by_hand = {2: 2 + 5 + 5, 3: 3 + 5 + 10, 4: 19, 8: 28, 16: 41, 72: 72 + 5 + 35}
    for n, want in by_hand.items():
        assert reduce_unit_latency(n) == want, n
        assert ReductionUnit(n_ports=n).latency(n) == want, n

def test_fec_profile_rates_by_hand():
    """256b/257b + RS(544,514) at 400 Gb/s per lane, worked by hand:
    since 514 = 2 x 257, 256/257 x 514/544 = 512/544 = 16/17 exactly, so a lane carries
    400 x 16/17 = 376.4706 Gb/s; 36 lanes x 2 directions / 8 bits = 3.38824 TB/s per
    accelerator; x 72 = 243.953 TB/s; and the signalling that carries 400 Gb/s of data is
    400 x 17/16 = 425.0 Gb/s (200 x 17/16 = 212.5 Gb/s, the signalling rate of IEEE 802.3's
    200G lanes with the same code)."""
    from fusionfabric.sim.fabric.phys import lane_rate_for
    fec = PhysParams(encoding="256b257b", fec="rs544")
    r = port_rate(fec)
    assert r.line_Bps * 8 / 36 / 1e9 == pytest.approx(376.4706, abs=1e-4)
    assert 2 * r.line_Bps / 1e12 == pytest.approx(3.38824, abs=1e-5)
    assert 72 * 2 * r.line_Bps / 1e12 == pytest.approx(243.953, abs=1e-3)
    assert lane_rate_for(400.0, fec) == pytest.approx(425.0, abs=1e-9)
    assert lane_rate_for(200.0, fec) == pytest.approx(212.5, abs=1e-9)
    assert port_rate(PhysParams(fec="rs544")).efficiency == pytest.approx(514 / 544)
