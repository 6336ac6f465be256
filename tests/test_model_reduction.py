"""Behavioural in-switch all-reduce timing (sim/fabric/reduction.py) against a plain
cycle-by-cycle simulation of the same stages, written independently with Python loops."""

import math

import pytest

from fusionfabric.sim.fabric.reduction import reduce_unit_latency, switch_allreduce_cycles


def naive(n, m, rho, hop):
    lat = reduce_unit_latency(n)
    # contributions: (arrival cycle, unit, chunk); send of rank i's k-th flit at k/rho
    arrivals = []
    for i in range(n):
        for k in range(m):
            c = (k + i) % m
            arrivals.append((math.floor(k / rho) + hop, c % n, c, i))
    got = {c: 0 for c in range(m)}
    ready = {}
    # serve each unit in arrival order (ties: rank order, as the vectorized code)
    for u in range(n):
        jobs = sorted((a for a in arrivals if a[1] == u), key=lambda a: (a[0], a[3]))
        t = -1
        for arr, _, c, _ in jobs:
            t = max(arr, t + 1)
            got[c] += 1
            if got[c] == n:
                ready[c] = t + lat
    copies = []
    for u in range(n):
        t = -10**9
        for c in sorted((c for c in range(m) if c % n == u), key=lambda c: (ready[c], c)):
            t = max(ready[c], t + n)
            for o in range(n):
                copies.append((t + o, o, c))
    last = 0
    for o in range(n):
        t = -1
        for ct, _, c in sorted(x for x in copies if x[1] == o):
            t = max(ct, t + 1)
            last = max(last, t + hop)
    return last + 1


@pytest.mark.parametrize("n, m, rho, hop", [(2, 1, 1.0, 2), (3, 7, 1.0, 2), (4, 9, 0.5, 3),
                                            (5, 40, 1.0, 0), (8, 17, 0.7, 4),
                                            (6, 64, 1.0, 2)])
def test_closed_form_queues_match_a_cycle_by_cycle_simulation(n, m, rho, hop):
    assert switch_allreduce_cycles(n, m, rho, hop) == naive(n, m, rho, hop)


def test_large_messages_reach_one_flit_per_cycle_and_extrapolate():
    t = switch_allreduce_cycles(72, 1 << 20, max_flits=1 << 13)
    assert (1 << 20) / t == pytest.approx(1.0, abs=0.005)
    exact = switch_allreduce_cycles(8, 5000, max_flits=1 << 14)
    extrap = switch_allreduce_cycles(8, 5000, max_flits=1 << 11)
    assert abs(exact - extrap) <= 0.01 * exact


def test_agrees_with_the_rtl_all_reduce_benchmark():
    """docs/switch.md (bench/switch_throughput.py, reduce=True RTL at 8 ports, 2,048
    flits per port, every port in the same chunk order): 2,095 cycles in-network and
    3,586 for the ring. The behavioural model must land within 1 %."""
    from fusionfabric.sim.fabric.collective import collective
    from fusionfabric.sim.fabric.config import load_config

    assert abs(switch_allreduce_cycles(8, 2048, 1.0, 2) - 2095) <= 0.01 * 2095
    cfg = load_config(None, ["n_ports=8", "phys.payload_bytes=4", "phys.flit_bytes=4"])
    ring = collective(cfg, "allreduce", 2048 * 4, "ring")
    assert abs(ring["cycles"] - 3586) <= 0.01 * 3586
