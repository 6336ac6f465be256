"""Per-destination admission in the fabric model (``link.admission = voq``, sim/fabric).

In ``voq`` mode every source keeps one queue per destination and one credit per free slot
of its VOQ in the switch, so the link never carries a flit that its VOQ cannot take.
References: the same run without congestion (victim flow), the packet list written into
the traffic arrays (order, loss, duplication), the credit invariant counted over the
registers flit by flit, closed forms of the absorbed packets behind a stopped output and
of the credit loop's rate, and the configuration rules. ``fifo`` mode (the default) is
the RTL's endpoint and is checked flit for flit against the RTL in
tests/test_model_exact.py; ``voq`` is model only.
"""

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.clos import ClosFabric
from fusionfabric.sim.fabric.config import (ConfigError, LinkParams, SwitchParams,
                                            TopologyParams, load_config)
from fusionfabric.sim.fabric.engine import Fabric
from fusionfabric.sim.fabric.kernel import S
from fusionfabric.sim.fabric.run import run_sweep

VICTIM_LANES = [4, 4, 4, 4, 4, 4, 1, 1]


def _victim_run(admission, congestion, cycles=8000, seed=3):
    """Input 0: 0.5 to fast output 1 (victim) and 0.2 to slow output 6; inputs 2, 3:
    ``congestion`` each to output 6. The victim's delivered flits per cycle."""
    n = len(VICTIM_LANES)
    u = np.random.default_rng(seed).random((cycles, n))
    gdest = np.full((1, cycles, n), -1, np.int64)
    gdest[0, u[:, 0] < 0.5, 0] = 1
    gdest[0, (u[:, 0] >= 0.5) & (u[:, 0] < 0.7), 0] = 6
    for i in (2, 3):
        gdest[0, u[:, i] < congestion, i] = 6
    warm = cycles // 4
    fab = Fabric(SwitchParams(n_ports=n, depth=16), LinkParams(admission=admission), 1,
                 window=(warm, cycles), src_queue=1 << 15, port_lanes=VICTIM_LANES)
    fab.step(gdest, (gdest >= 0).astype(np.int64))
    return fab.s["st"][0, 1, S["acc_flits"]] / (cycles - warm), fab


def test_victim_flow_keeps_its_rate_with_voq_admission_only():
    ratio = {}
    for mode in ("fifo", "voq"):
        ctl, _ = _victim_run(mode, 0.0)
        con, fab = _victim_run(mode, 0.5)
        assert ctl == pytest.approx(0.5, abs=0.02)       # the offered victim rate
        ratio[mode] = con / ctl
        if mode == "voq":
            assert fab.stat("in_stalls").sum() == 0      # the ingress never refuses
            assert fab.s["st"][0, 6, S["acc_flits"]] > 0
    assert ratio["voq"] >= 0.95, ratio
    assert ratio["fifo"] < 0.6, ratio                    # head-of-line blocking at the link


def _random_packets(rng, n, cycles, p, max_size):
    """Traffic arrays plus, per source, its packets ``(dest, size)`` in creation order."""
    gdest = np.full((1, cycles, n), -1, np.int64)
    gsize = np.zeros((1, cycles, n), np.int64)
    sent = {i: [] for i in range(n)}
    for c in range(cycles):
        for i in range(n):
            if rng.random() < p:
                d, sz = int(rng.integers(0, n)), int(rng.integers(1, max_size + 1))
                gdest[0, c, i], gsize[0, c, i] = d, sz
                sent[i].append((d, sz))
    return gdest, gsize, sent


def _credit_residue(fab):
    """``sc + credits returning + flits on the link + in the receive FIFO + in the VOQ``
    per (source, destination), counted register by register; ``depth`` when conserved."""
    s, n = fab.s, fab.n
    tot = s["sc"][0].copy() + s["q_cnt"][0]
    for i in range(n):
        for d in s["sc_ret"][0, i]:
            if d >= 0:
                tot[i, d] += 1
        for k in np.flatnonzero(s["lp_valid"][0, i]):
            tot[i, (s["lp_info"][0, i, k] >> 48) & 0xFF] += 1
        K = s["rx_info"].shape[2]
        for j in range(s["rx_cnt"][0, i]):
            tot[i, (s["rx_info"][0, i, (s["rx_head"][0, i] + j) % K] >> 48) & 0xFF] += 1
    return tot


@pytest.mark.parametrize("depth, latency, lanes", [
    (2, 0, None),                 # packets longer than the VOQ: credits mid-packet
    (4, 3, [4, 4, 2, 1, 4, 4]),
    (16, 1, None),
])
def test_order_kept_nothing_lost_or_duplicated_credits_conserved(depth, latency, lanes):
    n, cycles, drain = 6, 1500, 6000
    rng = np.random.default_rng(depth * 10 + latency)
    gdest, gsize, sent = _random_packets(rng, n, cycles, 0.25, 5)
    ready = np.ones((1, cycles + drain, n), bool)
    ready[0, :cycles, :] = rng.random((cycles, n)) >= 0.3          # outputs stall
    ready[0, :cycles, 2] = rng.random(cycles) >= 0.8               # a congested output
    fab = Fabric(SwitchParams(n_ports=n, depth=depth),
                 LinkParams(latency=latency, admission="voq", src_voq_depth=512), 1,
                 log=True, log_capacity=1 << 16, port_lanes=lanes, full_lanes=4)
    for c0 in range(0, cycles, 100):                               # the invariant mid-run
        fab.step(gdest[:, c0:c0 + 100], gsize[:, c0:c0 + 100], None,
                 ready[:, c0:c0 + 100])
        assert (_credit_residue(fab) == depth).all()
        assert (fab.s["sc"][0] >= 0).all()
    idle = np.full((1, drain, n), -1, np.int64)
    fab.step(idle, np.zeros_like(idle), None, ready[:, cycles:])
    assert fab.stat("src_drop_pkts").sum() == 0 and fab.backlog()[0] == 0
    assert fab.in_flight()[0] == 0
    # drained: every credit home, nothing in the switch
    assert (fab.s["sc"][0] == depth).all() and (fab.s["sc_ret"][0] == -1).all()
    assert (_credit_residue(fab) == depth).all()
    assert fab.stat("in_stalls").sum() == 0

    dep = fab.departures()
    rows = list(zip(dep.out.tolist(), dep.src.tolist(), dep.seq.tolist(),
                    dep.flit.tolist(), dep.dest.tolist(), dep.last.tolist()))
    # the reference: seq k of source i is its k-th packet in the traffic arrays
    want = {(i, k, f): d for i in range(n) for k, (d, sz) in enumerate(sent[i])
            for f in range(sz)}
    got = [(s, q, f) for _, s, q, f, _, _ in rows]
    assert len(got) == len(set(got)), "a flit delivered twice"
    assert set(got) == set(want), "a flit lost or invented"
    for o, s, q, f, d, last in rows:
        assert o == d == want[(s, q, f)]
        assert last == (f == sent[s][q][1] - 1)
    # per (source, destination): packets and flits in creation order
    for i in range(n):
        for d in range(n):
            seqs = [(q, f) for o, s, q, f, _, _ in rows if s == i and o == d]
            ref = [(k, f) for k, (dd, sz) in enumerate(sent[i]) if dd == d
                   for f in range(sz)]
            assert seqs == ref, (i, d)
    # packets stay contiguous at each output (the output lock)
    for o in range(n):
        seq = [(s, q, last) for oo, s, q, _, _, last in rows if oo == o]
        for a, b in zip(seq, seq[1:]):
            if not a[2]:
                assert b[:2] == a[:2], (o, a, b)


@pytest.mark.parametrize("admission", ["voq", "fifo"])
def test_source_overflow_is_counted_and_a_stopped_output_blocks_only_its_flows(admission):
    # source 0 alternates 2-flit packets to output 3 (never ready) and 1-flit packets to
    # output 1; nothing else
    n, cycles, depth, out_depth, sv = 4, 2000, 4, 2, 8
    gdest = np.full((1, cycles, n), -1, np.int64)
    gdest[0, 0::2, 0] = 3
    gdest[0, 1::2, 0] = 1
    gsize = np.select([gdest == 3, gdest == 1], [2, 1], 0)
    ready = np.ones((1, cycles, n), bool)
    ready[0, :, 3] = False
    fab = Fabric(SwitchParams(n_ports=n, depth=depth, out_depth=out_depth),
                 LinkParams(admission=admission, src_voq_depth=sv), 1, src_queue=4 * sv)
    fab.step(gdest, gsize, None, ready)
    to3, to1 = cycles // 2, cycles // 2
    drops = fab.stat("src_drop_pkts")[0, 0]
    got1 = fab.stat("flits_out")[0, 1]
    if admission == "voq":
        # output 3's buffer holds out_depth flits, VOQ (0, 3) depth, the source queue sv
        # packets; every other packet to 3 is refused at the source, none to 1
        absorbed = (out_depth + depth) // 2 + sv
        assert drops == to3 - absorbed
        assert fab.stat("src_drop_flits")[0, 0] == 2 * drops
        assert fab.s["sv_cnt"][0, 0, 3] == sv and fab.backlog()[0] == sv
        assert fab.stat("flits_out")[0, 3] == 0
        assert got1 >= to1 - 3                          # the flow to 1 flows
    else:
        # one source FIFO of 4 * sv packets: the flow to 1 waits behind the stopped
        # output, and nearly everything is refused at the source
        assert got1 < 10
        assert drops >= cycles - 4 * sv - 10
        assert drops < fab.stat("src_drop_flits")[0, 0] < 2 * drops


@pytest.mark.parametrize("depth, latency", [(1, 0), (3, 2), (2, 4), (8, 2)])
def test_a_flow_is_bounded_by_its_credit_loop(depth, latency):
    # a credit returns 2 * latency + 2 cycles after its flit left the source (link,
    # ingress, allocator pop, link back, usable one cycle later): min(1, depth / (2L + 2))
    n, cycles = 2, 6000
    gdest = np.full((1, cycles, n), -1, np.int64)
    gdest[0, :, 0] = 1
    warm = cycles // 4
    fab = Fabric(SwitchParams(n_ports=n, depth=depth),
                 LinkParams(latency=latency, admission="voq"), 1, window=(warm, cycles))
    fab.step(gdest, (gdest >= 0).astype(np.int64))
    rate = fab.s["st"][0, 1, S["acc_flits"]] / (cycles - warm)
    assert rate == pytest.approx(min(1.0, depth / (2 * latency + 2)), abs=2e-3)


def test_voq_admission_sweep_at_72_ports_batch_10():
    cfg = load_config(None, ["switch.n_ports=72", "run.cycles=400", "run.warmup=100",
                             "run.loads=0.1:1.0:0.1", "link.admission=voq",
                             "link.src_voq_depth=64", "run.seed=2"])
    r = run_sweep(cfg, progress=False)
    fab = r["fabric"]
    assert r["batch"] == 10
    assert fab.s["sv_size"].shape == (10, 72, 72, 64)
    assert fab.s["sq_dest"].shape == (10, 72, 1)                   # the FIFO queue unused
    mb = sum(a.nbytes for a in fab.s.values()) / 2 ** 20
    assert mb < 150, mb
    for p in r["points"][:5]:                                      # below saturation
        assert p["accepted"] == pytest.approx(p["offered"], abs=0.03), p["load"]


@pytest.mark.parametrize("sets, needle", [
    (["link.admission=lifo"], "link.admission='lifo' is not one of: fifo, voq"),
    (["link.admission=voq", "link.src_voq_depth=0"], "link.src_voq_depth=0 is below"),
    (["link.admission=voq", "switch.mode=fifo"], "link.admission='voq' needs switch.mode=voq"),
    (["link.admission=voq", "topology.kind=clos", "topology.radix=8",
      "topology.endpoints=16", "topology.endpoints_per_leaf=4", "topology.spines=4"],
     "link.admission='voq': per-destination admission is modelled on one switch"),
])
def test_bad_admission_config_is_one_line_exit_2(sets, needle, capsys):
    argv = ["sweep", "--ports", "4", "--cycles", "100", "--loads", "0.5"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    with pytest.raises(ConfigError):
        load_config(None, sets)


def test_fabric_refuses_what_voq_admission_does_not_model():
    with pytest.raises(ConfigError, match="switch.mode=voq"):
        Fabric(SwitchParams(n_ports=4, mode="fifo"), LinkParams(admission="voq"))
    with pytest.raises(ConfigError, match="topology.kind=crossbar"):
        ClosFabric(SwitchParams(), LinkParams(admission="voq"),
                   TopologyParams(radix=8, endpoints=16, endpoints_per_leaf=4, spines=4))
    fab = Fabric(SwitchParams(n_ports=4), LinkParams(admission="voq"), groups={0: [1, 2]})
    g = np.full((1, 4, 4), -1, np.int64)
    g[0, 0, 0] = 0
    size = (g >= 0).astype(np.int64)
    with pytest.raises(ValueError, match="unicast traffic only"):
        fab.step(g, size, np.where(g >= 0, 1, 0))                  # multicast
    g[0, 0, 0] = 9
    with pytest.raises(ValueError, match="destination 9 is outside 0..3"):
        fab.step(g, size)
