"""Ports of different rates in the fabric model (``link.ports``, sim/fabric).

A port of ``l`` lanes, where a full-rate port has ``R = phys.lanes``, moves a flit each
way in ``l`` of every ``R`` cycles. References: the slot rule counted directly, closed-form
rates of saturated flows (the slower end of a flow bounds it), sums over the port list
for the per-kind report, and the ring collective's closed form with the slowest port's
rate. The cycle-exactness of the rates against the switch RTL is in
tests/test_model_exact.py (``..._with_ports_of_different_rates``).
"""

from fractions import Fraction

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.collective import collective
from fusionfabric.sim.fabric.config import ConfigError, LinkParams, SwitchParams, load_config
from fusionfabric.sim.fabric.engine import Fabric, link_slots
from fusionfabric.sim.fabric.kernel import S
from fusionfabric.sim.fabric.run import run_sweep


@pytest.mark.parametrize("R", [1, 4, 9, 36])
def test_link_slots_are_evenly_spread(R):
    slots = link_slots(R, list(range(1, R + 1)), R)
    for l in range(1, R + 1):
        row = slots[l - 1]
        assert row.sum() == l                        # l slots in every R cycles
        # over any window of w cycles (cyclically) the count is floor or ceil of w*l/R
        twice = np.concatenate([row, row])
        for w in range(1, R + 1):
            counts = {int(twice[s:s + w].sum()) for s in range(R)}
            lo = (w * l) // R
            assert counts <= {lo, lo + 1}, (l, w, counts)


def _saturate(lanes, flows, cycles=4000, latency=0, depth=16):
    """Every source of ``flows`` (src -> dest) offers a 1-flit packet every cycle; the
    delivered flits per cycle at each destination in the last 3/4 of the run."""
    n = len(lanes)
    gdest = np.full((1, cycles, n), -1, np.int64)
    for s, d in flows.items():
        gdest[0, :, s] = d
    gsize = (gdest >= 0).astype(np.int64)
    warm = cycles // 4
    fab = Fabric(SwitchParams(n_ports=n, depth=depth), LinkParams(latency=latency), 1,
                 window=(warm, cycles), src_queue=1 << 14, port_lanes=lanes, full_lanes=4)
    fab.step(gdest, gsize)
    st = fab.s["st"][0]
    return st[:, S["acc_flits"]] / (cycles - warm), st[:, S["inj_flits"]] / (cycles - warm)


@pytest.mark.parametrize("latency", [0, 3])
def test_a_saturated_flow_runs_at_its_slower_end(latency):
    # lanes of 4: 0 -> 1 fast to fast, 2 -> 3 fast to 1 lane, 4 (2 lanes) -> 5 (4 lanes),
    # 6 (1 lane) -> 7 (3 lanes)
    lanes = [4, 4, 4, 1, 2, 4, 1, 3]
    acc, sent = _saturate(lanes, {0: 1, 2: 3, 4: 5, 6: 7}, latency=latency)
    want = {1: Fraction(1), 3: Fraction(1, 4), 5: Fraction(2, 4), 7: Fraction(1, 4)}
    for d, r in want.items():
        assert acc[d] == pytest.approx(float(r), abs=2e-3), (d, acc[d], r)
    assert sent[2] == pytest.approx(0.25, abs=2e-3)       # the slow output backs up input 2


def test_two_fast_inputs_share_a_slow_output_fairly():
    acc, sent = _saturate([4, 4, 4, 1], {0: 3, 1: 3, 2: 3})
    assert acc[3] == pytest.approx(0.25, abs=2e-3)
    for s in range(3):
        assert sent[s] == pytest.approx(0.25 / 3, abs=5e-3)


def test_sweep_reports_each_kind_and_loads_each_source_at_its_own_rate():
    cfg = load_config(None, ["switch.n_ports=6", "phys.lanes=4",
                             "link.ports=accelerator:4x3,gpu:2x1,cpu:1x2",
                             "traffic.pattern=permutation", "run.cycles=4000",
                             "run.loads=0.5", "run.seed=5"])
    p = run_sweep(cfg, progress=False)["points"][0]
    lanes = [4, 4, 4, 2, 1, 1]
    offered = p["per_port"]["offered"]
    for i, l in enumerate(lanes):                    # load 0.5 of each port's own rate
        assert offered[i] == pytest.approx(0.5 * l / 4, rel=0.08), (i, offered[i])
    k = p["per_kind"]
    assert {x: (k[x]["ports"], k[x]["lanes"]) for x in k} == {
        "accelerator": (3, 12), "gpu": (1, 2), "cpu": (2, 2)}
    assert k["accelerator"]["lane_share"] == pytest.approx(12 / 16)
    for kind, idx in (("accelerator", [0, 1, 2]), ("gpu", [3]), ("cpu", [4, 5])):
        assert k[kind]["sent"] == pytest.approx(sum(p["per_port"]["sent"][i] for i in idx))
        assert k[kind]["received_of_line"] == pytest.approx(
            sum(p["per_port"]["accepted"][i] for i in idx) / (sum(lanes[i] for i in idx) / 4))


def test_ring_collective_is_bounded_by_the_slowest_member():
    base = ["switch.n_ports=4", "phys.lanes=4", "phys.flit_bytes=16",
            "phys.payload_bytes=16"]
    mixed = load_config(None, base + ["link.ports=accelerator:4x3,cpu:1x1"])
    slow = load_config(None, base + ["link.ports=cpu:1x4"])
    nbytes = 1 << 16
    tm = collective(mixed, "allreduce", nbytes, "ring")
    ts = collective(slow, "allreduce", nbytes, "ring")
    n, m = 4, nbytes // 16
    steps = 2 * (n - 1) * -(-m // n)
    # closed form at the slowest port's rate, 1/4 flit per cycle, plus the fixed terms
    assert tm["cycles"] >= steps * 4
    assert tm["cycles"] == pytest.approx(steps * 4, rel=0.02)
    assert tm["cycles"] == pytest.approx(ts["cycles"], rel=0.02)


@pytest.mark.parametrize("value, needle", [
    ("accelerator:4x3,router:1x1", "endpoint kind 'router'"),
    ("accelerator:0x4", "lanes=0"),
    ("accelerator:37x4", "above the phys.lanes=36"),
    ("accelerator:4x5", "more than the switch's 4 ports"),
    ("accelerator:4x3", "lists 3 ports, the switch has switch.n_ports=4"),
])
def test_bad_port_list_is_one_line_exit_2(value, needle, capsys):
    assert main(["sweep", "--ports", "4", "--cycles", "100", "--loads", "0.5",
                 "--set", f"link.ports={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_port_list_is_for_one_switch_only():
    with pytest.raises(ConfigError, match="topology.kind=crossbar"):
        load_config(None, ["topology.kind=clos", "topology.endpoints=64",
                           "topology.endpoints_per_leaf=8", "topology.spines=8",
                           "topology.radix=16", "link.ports=accelerator:4x64"])


def test_sweep_table_reports_each_kinds_share_of_the_rack(capsys):
    # 64 accelerators of 36 lanes and 8 cpus of 9 at 400 Gb/s: 2,376 lanes, 237.6 TB/s
    # both directions; the accelerators hold 2,304 of them
    assert main(["sweep", "--ports", "72", "--cycles", "500", "--loads", "0.2",
                 "--set", "link.ports=accelerator:36x64,cpu:9x8"]) == 0
    out = capsys.readouterr().out
    assert "rack aggregate 237.6 TB/s over 2376 lanes" in out
    share = 100 * 2304 / 2376
    assert f"# accelerator: 64 ports, 2304 lanes, 230.40 TB/s = {share:.1f} % of the rack" in out
    assert f"# cpu: 8 ports, 72 lanes, 7.20 TB/s = {100 - share:.1f} % of the rack" in out
