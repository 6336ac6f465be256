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