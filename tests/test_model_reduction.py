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


def naive_clos(E, L, S, m, rho, hop, hop2):
    """The two-tier stages of sim/fabric/reduction.py's docstring, one job at a time."""
    from fusionfabric.sim.reduce import unit_latency

    def serve(jobs, service):
        """jobs: (ready, tiebreak, payload) for one server; returns [(start, payload)]."""
        t, out = None, []
        for ready, _, payload in sorted(jobs, key=lambda j: (j[0], j[1])):
            t = ready if t is None else max(ready, t + service)
            out.append((t, payload))
        return out

    def by_server(items):
        servers = {}
        for server, job in items:
            servers.setdefault(server, []).append(job)
        return servers

    # leaf units: one contribution per cycle, arrival order, ties in (port, chunk) order
    leaf_jobs = []
    for l in range(L):
        for p in range(E):
            for k in range(m):
                c = (k + p) % m
                leaf_jobs.append(((l, c % E), (math.floor(k / rho) + hop, p * m + c, (l, c))))
    last = {}
    for jobs in by_server(leaf_jobs).values():
        for t, key in serve(jobs, 1):
            last[key] = max(last.get(key, t), t)
    ready = {key: t + unit_latency(E, E + S) for key, t in last.items()}
    copies = []                                     # (output (leaf, port), time)
    if L == 1:
        rep = by_server(((0, c % E), (ready[(0, c)], c, c)) for c in range(m))
        for jobs in rep.values():
            for t, c in serve(jobs, E):
                copies += [((0, p), (t + p, c, c)) for p in range(E)]
    else:
        up = by_server(((l, c % S), (ready[(l, c)], c, (l, c))) for l in range(L)
                       for c in range(m))
        at_spine = []
        for jobs in up.values():
            for t, (l, c) in serve(jobs, 1):
                at_spine.append(((c % S, (c // S) % L), (t + hop2, l * m + c, c)))
        last_sp = {}
        for jobs in by_server(at_spine).values():
            for t, c in serve(jobs, 1):
                last_sp[c] = max(last_sp.get(c, t), t)
        ready_sp = {c: t + unit_latency(L, L) for c, t in last_sp.items()}
        rep = by_server(((c % S, (c // S) % L), (ready_sp[c], c, c)) for c in range(m))
        spine_out = []
        for jobs in rep.values():
            for t, c in serve(jobs, L):
                spine_out += [((c % S, j), (t + j, c * L + j, (j, c))) for j in range(L)]
        at_leaf = []
        for jobs in by_server(spine_out).values():
            for t, (j, c) in serve(jobs, 1):
                at_leaf.append(((j, c % S), (t + hop2, c * L + j, (j, c))))
        for jobs in by_server(at_leaf).values():
            for t, (j, c) in serve(jobs, E):
                copies += [((j, p), (t + p, (c * L + j) * E + p, c)) for p in range(E)]
    end = 0
    for jobs in by_server(copies).values():
        for t, _ in serve(jobs, 1):
            end = max(end, t + hop)
    return end + 1


@pytest.mark.parametrize("E, L, S, m, rho, hop, hop2", [
    (2, 2, 1, 5, 1.0, 2, 3), (3, 2, 2, 7, 1.0, 2, 3), (4, 3, 4, 13, 0.5, 1, 4),
    (4, 4, 2, 20, 1.0, 2, 2), (5, 1, 1, 9, 0.7, 3, 3), (2, 5, 3, 16, 1.0, 0, 1),
    (3, 3, 3, 30, 0.8, 2, 5)])
def test_clos_queues_match_a_job_by_job_simulation(E, L, S, m, rho, hop, hop2):
    from fusionfabric.sim.fabric.reduction import clos_allreduce_cycles

    assert clos_allreduce_cycles(E, L, S, m, rho, hop, hop2) == \
        naive_clos(E, L, S, m, rho, hop, hop2)


def test_one_leaf_clos_is_the_single_switch():
    """With one leaf the leaf is the root: the single switch's stages (unit latencies equal
    when E and E + S need the same pairing depth)."""
    from fusionfabric.sim.fabric.reduction import clos_allreduce_cycles

    for E, S, m, rho, hop in [(6, 2, 50, 1.0, 2), (5, 1, 33, 0.6, 3), (12, 4, 200, 1.0, 2)]:
        assert clos_allreduce_cycles(E, 1, S, m, rho, hop) == \
            switch_allreduce_cycles(E, m, rho, hop)


def test_clos_rate_and_the_leaf_replication_bound():
    """A non-oversubscribed Clos delivers a result per cycle per endpoint in steady state;
    with half as many uplinks as endpoints, each uplink input must replicate E copies of
    twice as many results, so the all-reduce takes twice as long."""
    from fusionfabric.sim.fabric.reduction import clos_allreduce_cycles

    m = 4096
    full = clos_allreduce_cycles(8, 4, 8, m)
    assert m / full == pytest.approx(1.0, abs=0.02)
    half = clos_allreduce_cycles(8, 4, 4, m)
    assert half / m == pytest.approx(2.0, abs=0.02)
    exact = clos_allreduce_cycles(4, 4, 4, 6000, max_flits=1 << 13)
    extrap = clos_allreduce_cycles(4, 4, 4, 6000, max_flits=1 << 10)
    assert abs(exact - extrap) <= 0.01 * exact
