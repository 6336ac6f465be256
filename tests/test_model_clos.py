"""Two-tier Clos domains in the cycle model (sim/fabric/clos.py): the same kernel as the
single switch (a one-leaf Clos equals the switch departure for departure), the three
routing rules against small independent calculations, conservation and order on small
Clos domains, and bad topologies refused in one line with exit status 2."""

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.config import (ConfigError, LinkParams, SwitchParams,
                                            TopologyParams, load_config)
from fusionfabric.sim.fabric.clos import run_clos_trace
from fusionfabric.sim.fabric.exact import random_trace, run_trace

MASK64 = (1 << 64) - 1


def splitmix_flow_hash(src, dest):
    """The ECMP rule of docs/model.md, written out here: splitmix64's finalizer of
    ``src * 2**32 + dest``, top 31 bits."""
    z = (src * 2**32 + dest) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z >> 33


def hops(fab):
    """Every logged departure as a dict of numpy columns, decoded: the switch, whether it
    is a leaf, the port, the flit's source endpoint, source-local sequence, flit index,
    destination."""
    d = fab.departures()
    return {"t": d.cycle, "sw": d.batch, "port": d.out, "src": d.seq >> 20,
            "seq": d.seq & 0xFFFFF, "flit": d.flit, "dest": d.dest, "last": d.last}


def clos(leaves, epl, spines, routing="deterministic", **kw):
    return TopologyParams(kind="clos", radix=max(epl + spines, leaves), endpoints=leaves * epl,
                          endpoints_per_leaf=epl, spines=spines, routing=routing, **kw)


# -- one leaf = the single switch ------------------------------------------------------------

@pytest.mark.parametrize("n, spines, lat, credits, frame", [(6, 2, 2, 3, 7), (8, 1, 0, 0, 0),
                                                            (5, 3, 1, 0, 5)])
def test_one_leaf_clos_equals_the_single_switch(n, spines, lat, credits, frame):
    """All endpoints on one leaf (its uplinks to 1-port spines never used): every departure
    (cycle, output, input, packet, flit), every per-port counter, the latency histogram and
    the largest latency equal the single-switch run of the same trace, with link latency,
    credits, framing slots, random output stalls and packets to missing endpoints."""
    rng = np.random.default_rng(100 + n)
    packets = [p for p in random_trace(rng, n, 300, 300, max_size=4, p_bad=0.1) if p[4] == 0]
    assert any(d >= n for _, _, d, _, _ in packets)          # some must be dropped
    sw = SwitchParams(n_ports=n, depth=2, out_depth=2, iterations=3)
    link = LinkParams(latency=lat, credits=credits, frame_period=frame)
    ready = rng.random((900, n)) >= 0.3
    out = []
    rows = run_trace(sw, packets, 900, link=link, ready=ready, fabric_out=out)
    fab = run_clos_trace(sw, clos(1, n, spines), [p[:4] for p in packets], 900, link=link,
                         ready=ready)
    h = hops(fab)
    assert (h["sw"] == 0).all()                               # nothing left the leaf
    d = fab.departures()
    got = list(zip(d.cycle.tolist(), d.out.tolist(), d.src.tolist(), h["seq"].tolist(),
                   d.flit.tolist()))
    assert len(rows) > 400 and got == rows
    single = out[0].s
    assert np.array_equal(fab.s["st"][0, :n], single["st"][0])
    assert np.array_equal(fab.s["hist"][0], single["hist"][0])
    assert fab.s["latmax"][0] == single["latmax"][0]


# -- routing ---------------------------------------------------------------------------------

def _uniform_trace(rng, n, packets, span, max_size=3):
    return [(int(rng.integers(0, span)), int(rng.integers(0, n)), int(rng.integers(0, n)),
             int(rng.integers(1, max_size + 1))) for _ in range(packets)]


def test_deterministic_routing_goes_up_to_spine_dest_mod_spines():
    L, E, S = 3, 3, 2
    rng = np.random.default_rng(11)
    packets = _uniform_trace(rng, L * E, 500, 400)
    fab = run_clos_trace(SwitchParams(depth=4), clos(L, E, S, "deterministic"), packets, 2000)
    h = hops(fab)
    up = (h["sw"] < L) & (h["port"] >= E)
    assert up.sum() > 200
    assert np.array_equal(h["port"][up] - E, h["dest"][up] % S)
    spine = h["sw"] >= L
    assert np.array_equal(h["port"][spine], h["dest"][spine] // E)   # down to the leaf
    assert np.array_equal(h["sw"][spine] - L, h["dest"][spine] % S)  # the spine it chose
    remote = sum(z for _, s, d, z in packets if s // E != d // E)
    assert up.sum() == spine.sum() == remote                    # up once, down once


def test_ecmp_is_the_flow_hash_stable_per_flow_and_spread():
    L, E, S = 4, 4, 4
    rng = np.random.default_rng(12)
    packets = _uniform_trace(rng, L * E, 1500, 1200)
    fab = run_clos_trace(SwitchParams(depth=4), clos(L, E, S, "ecmp"), packets, 4000)
    h = hops(fab)
    up = (h["sw"] < L) & (h["port"] >= E)
    flows = {}
    for s, d, o in zip(h["src"][up].tolist(), h["dest"][up].tolist(), h["port"][up].tolist()):
        flows.setdefault((s, d), set()).add(o - E)
    assert len(flows) > 150
    for (s, d), ups in flows.items():
        assert ups == {splitmix_flow_hash(s, d) % S}, (s, d, ups)   # one uplink per flow
    per_spine = np.bincount([next(iter(v)) for v in flows.values()], minlength=S)
    assert per_spine.min() > 0.6 * per_spine.mean(), per_spine       # spread over spines
    # every remote flow of the domain, from the hash alone
    every = np.bincount([splitmix_flow_hash(s, d) % S for s in range(L * E)
                         for d in range(L * E) if s // E != d // E], minlength=S)
    assert every.max() < 1.3 * every.mean() and every.min() > 0.7 * every.mean(), every


def adaptive_reference(occupancy, requests):
    """Independent statement of the adaptive rule for packets whose first flits reach the
    leaf's ingress in the same cycle, in input order: each (source, destination) takes the
    uplink with the fewest flits queued, ties to the first in cyclic order from the flow's
    ECMP uplink (``splitmix_flow_hash`` mod spines), and adds its flit there."""
    occ = list(occupancy)
    S = len(occ)
    out = []
    for src, dest in requests:
        s0 = splitmix_flow_hash(src, dest) % S
        k = min(range(S), key=lambda j: (occ[j], (j - s0) % S))
        out.append(k)
        occ[k] += 1
    return out


def test_adaptive_takes_the_least_occupied_uplink():
    """Leaf 0 (8 endpoints, 4 uplinks, VOQ depth 8, output buffers 4): all 8 endpoints
    start a packet to leaf 1 in cycle 0; endpoint 0's is 200 flits to endpoint 8, which
    never accepts a flit, so its uplink fills (VOQ + output buffer, 12 flits) and stays
    locked to it, with the 1-flit packets that also took that uplink waiting behind it. In
    cycle 100 endpoints 1-7 start 1-flit packets: the other uplinks are empty again by
    then. Every destination is 0 mod 4: deterministic routing would use uplink 0 for all."""
    L, E, S, depth, out_depth = 2, 8, 4, 8, 4
    wave1 = [(0, 0, 8, 200)] + [(0, i, 12, 1) for i in range(1, E)]
    wave2 = [(100, i, 12, 1) for i in range(1, E)]
    ready = np.ones((300, L * E), bool)
    ready[:, 8] = False
    fab = run_clos_trace(SwitchParams(depth=depth, out_depth=out_depth),
                         clos(L, E, S, "adaptive"), wave1 + wave2, 300, ready=ready)
    h = hops(fab)
    up = (h["sw"] == 0) & (h["port"] >= E)
    first = (h["sw"] == 0) & (h["flit"] == 0)
    chosen = {(s, q): o - E for s, q, o in zip(h["src"][up & first].tolist(),
                                              h["seq"][up & first].tolist(),
                                              h["port"][up & first].tolist())}
    ref1 = adaptive_reference([0] * S, [(0, 8)] + [(i, 12) for i in range(1, E)])
    assert sorted(ref1) == [0, 0, 1, 1, 2, 2, 3, 3]            # empty uplinks: spread
    u0 = ref1[0]                                               # the long packet's uplink
    stuck = [i for i in range(1, E) if ref1[i] == u0]
    assert len(stuck) == 1
    for i in stuck:
        # never left the leaf: its flit waits in input i's VOQ for the locked uplink
        assert not ((h["src"] == i) & (h["seq"] == 0)).any()
        assert fab.s["q_cnt"][0, i].tolist() == [0] * (E + u0) + [1] + [0] * (S - u0 - 1)
        chosen[(i, 0)] = u0
    assert [chosen[(i, 0)] for i in range(E)] == ref1
    second = [chosen[(i, 1)] for i in range(1, E)]
    occ = [0] * S
    occ[u0] = depth + out_depth + len(stuck)
    assert second == adaptive_reference(occ, [(i, 12) for i in range(1, E)])
    long_up = up & (h["src"] == 0)
    assert set(h["port"][long_up].tolist()) == {E + u0}        # one uplink per packet


def test_adaptive_spreads_what_deterministic_funnels_into_one_uplink():
    """Leaf 0's 8 endpoints send to the even endpoints of leaf 1 (dest mod 2 = 0, 2
    spines), 0.25 flits per cycle each = 2 flits per cycle: deterministic routing puts all
    of it on uplink 0 (1 flit per cycle at most), adaptive uses both uplinks."""
    L, E, S, T = 2, 8, 2, 1600
    packets = [(c, i, E + 2 * ((i + c // 4) % 4), 1) for i in range(E) for c in range(0, T, 4)]
    got = {}
    for routing in ("deterministic", "adaptive"):
        fab = run_clos_trace(SwitchParams(depth=8), clos(L, E, S, routing), packets, T)
        up = fab.uplink_flits()[0, 0]
        got[routing] = up
    assert got["deterministic"][1] == 0 and got["deterministic"][0] <= T
    assert got["adaptive"].sum() > 0.95 * len(packets)          # offered 2 per cycle: kept up
    assert got["adaptive"].min() > 0.4 * got["adaptive"].sum()


# -- conservation and order ----------------------------------------------------------------

@pytest.mark.parametrize("routing", ["deterministic", "ecmp", "adaptive"])
def test_every_flit_delivered_once_to_its_endpoint_in_order(routing):
    """3 leaves x 3 endpoints, 2 spines; leaf-spine links of latency 2 with 2 credits
    (below the 5-cycle round trip), endpoint links of latency 1, 30 % random stalls at the
    endpoints. Per (source, destination) the flits arrive in the trace's order (adaptive
    routing may reorder packets of a flow across uplinks: there, each flit once and each
    packet's flits in order); packets stay contiguous at every endpoint; nothing is left."""
    L, E, S = 3, 3, 2
    n = L * E
    rng = np.random.default_rng(5)
    packets = _uniform_trace(rng, n, 600, 400, max_size=4)
    ready = rng.random((5000, n)) >= 0.3
    fab = run_clos_trace(SwitchParams(depth=3, out_depth=2),
                         clos(L, E, S, routing, link_latency=2, link_credits=2), packets, 5000,
                         link=LinkParams(latency=1), ready=ready)
    expect, seq = {}, [0] * n
    for cyc, src, dest, size in sorted(packets, key=lambda p: (p[1], p[0])):
        expect.setdefault((src, dest), []).extend((seq[src], f) for f in range(size))
        seq[src] += 1
    h = hops(fab)
    at = (h["sw"] < L) & (h["port"] < E)                      # deliveries to endpoints
    endpoint = h["sw"][at] * E + h["port"][at]
    assert np.array_equal(endpoint, h["dest"][at])            # the right endpoint
    got = {}
    for s, d, q, f in zip(h["src"][at].tolist(), h["dest"][at].tolist(),
                          h["seq"][at].tolist(), h["flit"][at].tolist()):
        got.setdefault((s, d), []).append((q, f))
    if routing == "adaptive":
        assert {k: sorted(v) for k, v in got.items()} == expect
        for v in got.values():
            for q in {q for q, _ in v}:
                fl = [f for qq, f in v if qq == q]
                assert fl == sorted(fl)
    else:
        assert got == expect
    for e in range(n):                                        # contiguous packets
        m = endpoint == e
        pk = list(zip(h["src"][at][m].tolist(), h["seq"][at][m].tolist()))
        runs = [pk[k] for k in range(len(pk)) if k == 0 or pk[k] != pk[k - 1]]
        assert len(runs) == len(set(runs))
    assert fab.in_flight().sum() == 0 and fab.backlog().sum() == 0 and fab.credits_ok()


# -- configuration and CLI -----------------------------------------------------------------

CLOS = ["--set", "topology.kind=clos"]


@pytest.mark.parametrize("sets, fragment", [
    (["topology.radix=40"], "topology.radix=40 is too small"),
    (["topology.endpoints=4096"], "topology.endpoints=4096 is more than radix x"),
    (["topology.endpoints=1000"], "topology.endpoints=1000 is not a multiple"),
    (["topology.spines=1"], "= 32 is outside 0.5..16"),
    (["topology.routing=valiant"], "topology.routing='valiant' is not one of"),
    (["topology.link_latency=0"], "topology.link_latency=0 is below the minimum 1"),
    (["switch.mode=fifo"], "switch.mode='fifo': topology.kind=clos"),
    (["topology.kind=torus"], "topology.kind='torus' is not one of: crossbar, clos"),
])
def test_bad_topology_is_one_line_and_exit_2(capsys, sets, fragment):
    argv = ["sweep", *CLOS]
    for s in sets:
        argv += ["--set", s]
    rc = main(argv)
    _, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("fusionfabric: error")]
    assert rc == 2 and len(lines) == 1 and fragment in lines[0], err
    assert "Traceback" not in err
    with pytest.raises(ConfigError, match=None):
        load_config(None, ["topology.kind=clos", *sets])


def test_crossbar_default_ignores_topology_keys():
    cfg = load_config(None, ["n_ports=8", "topology.radix=4"])   # crossbar: not checked
    assert cfg.topology.kind == "crossbar" and cfg.endpoints == 8


def test_sweep_set_topology_clos_runs_the_clos(capsys):
    import json

    rc = main(["sweep", "--set", "topology.kind=clos", "--set", "topology.radix=8",
               "--set", "topology.endpoints=16", "--set", "topology.endpoints_per_leaf=4",
               "--set", "topology.spines=4", "--loads", "0.4", "--cycles", "1500",
               "--seed", "3", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and "seed 3" in err
    doc = json.loads(out)
    assert doc["topology"]["leaves"] == 4 and doc["endpoints"] == 16
    (pt,) = doc["points"]
    assert len(pt["per_port"]["accepted"]) == 16
    assert abs(pt["accepted"] - pt["offered"]) < 0.02 and abs(pt["offered"] - 0.4) < 0.03
    assert pt["uplink_flits"]["min"] > 0                      # every uplink used


def test_sweep_topology_flag_prints_the_clos_table(capsys):
    rc = main(["sweep", "--topology", "clos", "--set", "topology.radix=8",
               "--set", "topology.endpoints=16", "--set", "topology.endpoints_per_leaf=4",
               "--set", "topology.spines=4", "--set", "topology.routing=ecmp", "--loads",
               "0.4", "--cycles", "1500", "--seed", "3"])
    out, err = capsys.readouterr()
    assert rc == 0 and "seed 3" in err
    assert "# uniform on 16 ports" in out
    assert ("# clos: 4 leaves x 4 endpoints + 4 spines, radix 8, oversubscription 1, "
            "routing ecmp") in out
    row = next(x for x in out.splitlines() if x.lstrip().startswith("0.40"))
    offered, accepted = float(row.split()[2]), float(row.split()[3])
    assert abs(accepted - offered) < 0.02 and abs(offered - 0.4) < 0.03
    assert "rack aggregate 57.6 TB/s = 16 x 3.60 TB/s" in out


def test_threaded_batch_equals_points_run_alone():
    """A sweep's points on numba threads (handed out one at a time, each no longer
    simulated after its own end of run) give each point exactly what it gives alone; the
    light point ends while the overloaded one (half the traffic to endpoint 0) drains."""
    from fusionfabric.sim.fabric.run import run_sweep

    base = ["topology.kind=clos", "topology.radix=6", "topology.endpoints=12",
            "topology.endpoints_per_leaf=3", "topology.spines=3", "cycles=3000", "seed=4",
            "pattern=hotspot", "hotspot_fraction=0.5"]
    both = run_sweep(load_config(None, base + ["loads=0.05,1.0"]), progress=False)
    for pt in both["points"]:
        alone = run_sweep(load_config(None, base + [f"loads={pt['load']}"]), progress=False)
        assert alone["points"][0] == pt
    light, heavy = both["points"]
    assert heavy["saturated"] and not light["saturated"]
    assert light["end_cycle"] < heavy["end_cycle"] == both["cycles_simulated"]


@pytest.mark.soak
@pytest.mark.parametrize("routing, floor", [("adaptive", 0.90), ("deterministic", 0.90),
                                            ("ecmp", 0.85)])
def test_uniform_saturation_throughput_of_a_non_oversubscribed_clos(routing, floor):
    """256 endpoints (16 leaves x 16 + 16 spines, radix 32), uniform traffic at load 1.0,
    10,000 cycles: the saturation throughput target of docs/model.md (adaptive >= 0.90;
    the 1,024-endpoint figures are bench/clos_sweep.py's)."""
    from fusionfabric.sim.fabric.run import run_sweep

    cfg = load_config(None, ["topology.kind=clos", "topology.radix=32",
                             "topology.endpoints=256", "topology.endpoints_per_leaf=16",
                             "topology.spines=16", f"topology.routing={routing}",
                             "loads=1.0", "cycles=10000", "seed=1"])
    (pt,) = run_sweep(cfg, progress=False)["points"]
    assert pt["accepted"] >= floor, (routing, pt["accepted"], "seed 1")
