"""Physical time of the fabric model: per-hop latencies in ns and collective times that
include them. Expected values are summed by hand from the documented cycle counts
(docs/fec.md, docs/pcs.md, docs/switch.md, rtl/reduce/unit.py) and the configured ns."""

import math

import pytest

from fusionfabric.sim.fabric.collective import collective
from fusionfabric.sim.fabric.config import ConfigError, PhysParams, load_config
from fusionfabric.sim.fabric.phys import fec_latency_cycles, hop_latency, port_rate


def test_fec_latency_cycles():
    assert fec_latency_cycles(8) == 1 + 68 + 33
    assert fec_latency_cycles(68) == 1 + 8 + 33
    assert fec_latency_cycles(0) == 0
    with pytest.raises(ValueError, match="fec_symbols=40"):
        fec_latency_cycles(40)
    with pytest.raises(ConfigError, match="phys.fec_symbols=40"):
        load_config(None, ["phys.fec_symbols=40"])


def test_hop_latency_defaults_and_clock_by_hand():
    h = hop_latency(PhysParams())
    link = 26.3 + 5 + 42 + 1.0 * 4.9
    assert h.link_ns == pytest.approx(link)
    assert h.path_ns == pytest.approx(2 * link + 2)
    assert h.port_to_port_ns == pytest.approx(26.3 + 5 + 42 + 2)
    h2 = hop_latency(PhysParams(clock_ghz=2.0, cable_m=3.0, fec_symbols=0, switch_cycles=12))
    assert h2.link_ns == pytest.approx(26.3 + 2.5 + 0 + 3 * 4.9)
    assert h2.switch_ns == pytest.approx(6.0)


def cfg(n, *extra):
    return load_config(None, [f"n_ports={n}", *extra])


def test_ring_allreduce_time_includes_one_path_per_step():
    n = 16
    r = collective(cfg(n), "allreduce", 1024, "ring", measure_cycles=600)
    flit_s = 16 / (36 * 400e9 / 8)                       # one 16 B flit at 1.8 TB/s
    assert port_rate(PhysParams()).cycle_s == pytest.approx(flit_s)
    path_s = (2 * (26.3 + 5 + 42 + 4.9) + 2) * 1e-9
    expected = (r["cycles"] - r["hop_latency"]) * flit_s + 2 * (n - 1) * path_s
    assert r["seconds"] == pytest.approx(expected, rel=1e-12)
    assert r["seconds"] > 4.7e-6                         # not the flit-time 0.001 us
    assert r["model_seconds"] < 2e-9
    # the cycle model is untouched by the latencies
    r2 = collective(cfg(n, "phys.serdes_ns=0", "phys.fec_symbols=0"), "allreduce", 1024,
                    "ring", measure_cycles=600)
    assert r2["cycles"] == r["cycles"] and r2["seconds"] < r["seconds"]


def test_switch_allreduce_and_alltoall_latency_terms():
    n = 16
    link_ns, sw_ns = 26.3 + 5 + 42 + 4.9, 2.0
    unit = n + 5 + 5 * math.ceil(math.log2(n))          # rtl/reduce/unit.py
    r = collective(cfg(n), "allreduce", 1024, "switch", measure_cycles=600)
    assert r["phys_latency_s"] == pytest.approx((2 * link_ns + 2 * sw_ns + unit) * 1e-9)
    a = collective(cfg(n), "alltoall", 1024, "ring", measure_cycles=600)
    assert a["phys_latency_s"] == pytest.approx((2 * link_ns + sw_ns) * 1e-9)


def test_large_messages_stay_bandwidth_bound():
    r = collective(cfg(16), "allreduce", 1 << 30, "ring", measure_cycles=600)
    assert r["busbw_over_link"] == pytest.approx(1.0, abs=0.01)
