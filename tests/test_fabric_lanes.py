"""Endpoints of different lane counts on the RTL fabric (block ``fabric``, endpoint list
``gpu:2x2,accelerator:1x1``: endpoints 0 and 1 of 2 lanes per direction, endpoint 2 of 1;
docs/fabric.md "Lanes per endpoint").

Construction (no simulation): each endpoint's PCS, lanes, fault injectors and PHY
adapters are sized by its lanes; bad lane counts are refused with one line naming them.
cocotb (Icarus, ``tb/fabric/test_fabric.py::test_flows``): saturated WRITE flows 0 -> 1
(2-lane links only) and 2 -> 0 (a 1-lane up link), every request and completion checked
against the scoreboards and ``MemoryModel``; the 1-lane flow's measured rate against the
2-lane flow's, compared with the ratio of their lane counts taken from the configuration.
"""

import pytest

from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
from fusionfabric.rtl.fabric import Fabric
from fusionfabric.rtl.fabric.fabric import endpoint_lanes, lane_index
from fusionfabric.tb.fabric.flows import MIXED, run_flows

from fusionfabric.rtl.blocks import disown_failed



def test_lanes_per_endpoint_are_built():
    f = Fabric(endpoints=MIXED)
    assert f.lanes == (2, 2, 1) == endpoint_lanes({"endpoints": MIXED})
    # 2 directions x lanes per endpoint, numbered endpoint by endpoint
    assert f.n_fault_lanes == 2 * (2 + 2 + 1) == len(f.o_flips)
    idx = [lane_index(e, d, k, lanes=f.lanes) for e in range(3) for d in (0, 1)
           for k in range(f.lanes[e])]
    assert idx == list(range(f.n_fault_lanes))
    # uniform lanes: the same numbering as the n_lanes formula
    assert [lane_index(e, d, k, lanes=(2,) * 4) for e in range(4) for d in (0, 1)
            for k in range(2)] == [lane_index(e, d, k, 2) for e in range(4) for d in (0, 1)
                                   for k in range(2)]
    # the 1-lane link's chiplets count the derived replay timer at its rate
    fast, slow = f.link_params[0].timeout, f.link_params[2].timeout
    assert slow - 64 == 2 * (fast - 64)
    f1 = Fabric(n_endpoints=2, n_lanes=1)
    assert f1.lanes == (1, 1) and f1.n_fault_lanes == 4


@pytest.mark.parametrize("kw,needle", [
    ({"endpoints": "gpu:4x2"}, r"lanes=4 in endpoint item 'gpu:4x2'.*1 or 2 lanes"),
    ({"endpoints": "gpu:0x2"}, r"lanes=0 in endpoint item 'gpu:0x2'"),
    ({"endpoints": "gpu:21x2"}, r"lanes=21 .*maximum of 20"),
    ({"endpoints": "gpu:1x2", "lane_profile": "rs544"}, r"lanes=1 .*rs544 links take 2"),
    ({"n_endpoints": 2, "n_lanes": 1, "lane_profile": "rs544"}, r"n_lanes=1: .*rs544"),
    ({"n_endpoints": 2, "n_lanes": 3}, r"n_lanes=3: .*1 or 2"),
    ({"n_endpoints": 2, "n_lanes": 0}, r"n_lanes=0: "),
    ({"endpoints": "gpu:1x2", "n_lanes": 1}, r"n_lanes=1: give the lanes in endpoints="),
    ({"n_endpoints": 2, "endpoint_lanes": (2, 2, 1)}, r"endpoint_lanes=.*3 entries"),
    ({"n_endpoints": 2, "endpoint_lanes": (2, 3)}, r"lanes=3 of endpoint 1"),
])
def test_bad_lanes(kw, needle):
    with pytest.raises(ValueError, match=needle) as info:
        Fabric(**kw)
    disown_failed(info.value)
    assert "\n" not in str(info.value)


def test_fabric_kwargs_lanes():
    assert fabric_kwargs(parse_endpoints(MIXED))["endpoint_lanes"] == (2, 2, 1)


@pytest.mark.cocotb
@pytest.mark.soak
def test_one_lane_link_carries_half_the_rate_icarus():
    """Flow 0 -> 1 crosses 2-lane links only; flow 2 -> 0 starts on a 1-lane up link.
    Both saturated: the switch ports' measured flits per cycle (each port takes its own
    link's flits) are in the ratio of the lane counts (1/2 here, from the configuration)
    within 0.06. The flows' delivered bytes per cycle follow it with a known upward
    bias: endpoint 0's 2-lane up link also carries the WRITE_ACKs of flow 2 -> 0, which
    slows flow 0 -> 1 (0.55 and 0.57 measured on two seeds), so their ratio must lie in
    [1/2 - 0.06, 1/2 + 0.12]."""
    rec = run_flows([[0, 1, 1.0], [2, 0, 1.0]], cycles=1600, warm=400)
    lanes = endpoint_lanes({"endpoints": MIXED})
    fast, slow = rec["flows"]
    want = lanes[slow["src"]] / lanes[fast["src"]]
    ratio = slow["bytes_per_cycle"] / fast["bytes_per_cycle"]
    assert fast["bytes_per_cycle"] > 4.0, rec["flows"]       # a 2-lane link moves > 1/4 slot
    ports = rec["ports"]
    flit_ratio = ports[2]["flits_in_per_cycle"] / ports[0]["flits_in_per_cycle"]
    assert abs(flit_ratio - want) <= 0.06, (flit_ratio, want, ports, rec["seed"])
    assert want - 0.06 <= ratio <= want + 0.12, (ratio, want, rec["flows"], rec["seed"])
    assert rec["replays"] == 0


@pytest.mark.parametrize("sets,needle", [
    (["endpoints=gpu:4x2"], "lanes=4 in endpoint item 'gpu:4x2'"),
    (["endpoints=gpu:0x2"], "lanes=0 in endpoint item 'gpu:0x2'"),
    (["endpoints=gpu:1x2", "lane_profile=rs544"], "lanes=1 in endpoint item 'gpu:1x2'"),
    (["n_lanes=1", "lane_profile=rs544", "n_endpoints=2"], "n_lanes=1"),
    (["n_lanes=3"], "n_lanes=3"),
    (["n_lanes=0"], "n_lanes=0"),
    # dest_credits below one 256-byte message (17 flits) or above the VOQ depth (16)
    (["n_endpoints=2", "dest_credits=16"], "dest_credits=16"),
    (["n_endpoints=2", "dest_credits=32"], "dest_credits=32"),
    (["n_endpoints=2", "dest_credits=-1"], "dest_credits=-1"),
])
def test_generate_refuses_bad_lanes(sets, needle, capsys, tmp_path):
    """``fusionfabric generate fabric --set ...`` with a lane count the fabric does not
    build, or admission credits it refuses: exit 2 and one line naming the value, before
    any Verilog is written."""
    from fusionfabric.cli import main
    out = tmp_path / "f.v"
    argv = ["generate", "fabric", "-o", str(out)]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not out.exists()


def test_admission_sits_between_accelerator_and_chiplet():
    """With ``dest_credits`` each endpoint has a ``DestAdmission`` of the fabric's endpoint
    count and credits, and the fabric an ``o_dest_ready`` per endpoint; without, neither."""
    from amaranth import Fragment
    from fusionfabric.rtl.fabric.admission import DestAdmission
    from fusionfabric.rtl.fabric.fabric import Fabric
    for credits in (0, 32):
        fab = Fabric(endpoints="gpu:2x1,accelerator:1x1", depth=32, dest_credits=credits)
        frag = Fragment.get(fab, None)
        units = [sub for sub, _name, _loc in frag.subfragments
                 if isinstance(getattr(sub, "origins", None), tuple)
                 and any(isinstance(o, DestAdmission) for o in sub.origins)]
        assert len(units) == (2 if credits else 0), credits
        assert hasattr(fab, "o_dest_ready") == bool(credits)
        if credits:
            assert len(fab.o_dest_ready) == 2 and len(fab.o_dest_ready[0]) == 2
            adm = next(o for o in units[0].origins if isinstance(o, DestAdmission))
            assert (adm.n_dests, adm.credits) == (2, 32)


def test_victim_fraction_picks_the_flows():
    """The victim-flow arithmetic on hand-made records: the victim's rate in the congested
    run over the control run's, each read from its own flow entry."""
    from fusionfabric.tb.fabric.flows import AGGRESSOR, VICTIM, victim_flows, victim_fraction

    def rec(victim, aggressor, slow_out):
        flows = [{"src": a, "dest": b, "bytes_per_cycle": r}
                 for (a, b, _), r in ((AGGRESSOR, aggressor), (VICTIM, victim))]
        ports = [{"flits_out_per_cycle": 0.0} for _ in range(3)]
        ports[AGGRESSOR[1]]["flits_out_per_cycle"] = slow_out
        return {"flows": flows, "ports": ports}

    r = victim_fraction(rec(8.0, 3.0, 0.2), rec(2.0, 1.0, 0.45))
    assert r["fraction"] == 0.25 and r["victim_control"] == 8.0
    assert r["aggressor_congested"] == 1.0 and r["slow_out_congested"] == 0.45
    assert len(victim_flows(True)) == len(victim_flows(False)) + 1


@pytest.mark.cocotb
@pytest.mark.soak
def test_rtl_victim_flow_machinery_icarus():
    """Both runs of bench/rtl_victim_flow.py, shortened: in the control run endpoint 0's
    two flows split its delivered bytes by their weights (5 : 2, within 25 %), the slow
    endpoint's output never carries more than its 1-lane share, and the victim's fraction
    is a rate ratio in (0, 1.1]; the figure itself is reported, not judged."""
    from fusionfabric.tb.fabric.flows import (AGGRESSOR, VICTIM, victim_flows,
                                              victim_fraction)
    ctl = run_flows(victim_flows(False), cycles=1600, warm=400, seed=5, name="victim-ctl")
    con = run_flows(victim_flows(True), cycles=1600, warm=400, seed=5, name="victim-con")
    r = victim_fraction(ctl, con)
    split = r["victim_control"] / r["aggressor_control"]
    assert abs(split / (VICTIM[2] / AGGRESSOR[2]) - 1) <= 0.25, r
    lanes = endpoint_lanes({"endpoints": MIXED})
    assert r["slow_out_congested"] <= lanes[AGGRESSOR[1]] / max(lanes) + 0.02, r
    assert 0 < r["fraction"] <= 1.1, r


@pytest.mark.cocotb
@pytest.mark.soak
def test_rtl_victim_flow_with_admission_icarus():
    """The aggressor above its share of the slow output (half of endpoint 0's messages):
    with per-destination admission (``dest_credits`` = ``depth`` = 128) the victim keeps at
    least 0.95 of its control run's rate, and that control rate is at least 0.9 of the
    control rate with one source queue (the fabric's defaults, no admission); the
    aggressor and the congestion flow still move (no flow starves)."""
    from fusionfabric.tb.fabric.flows import VICTIM, victim_flows, victim_fraction
    adm = {"depth": 128, "dest_credits": 128}
    base = run_flows(victim_flows(False, 1, 1), cycles=2400, warm=800, seed=5,
                     name="victim-fifo-ctl-11")
    ctl = run_flows(victim_flows(False, 1, 1), cycles=2400, warm=800, seed=5,
                    name="victim-adm-ctl-11", params=adm)
    con = run_flows(victim_flows(True, 1, 1), cycles=2400, warm=800, seed=5,
                    name="victim-adm-con-11", params=adm)
    r = victim_fraction(ctl, con)
    assert r["fraction"] >= 0.95, r
    v_base = next(f["bytes_per_cycle"] for f in base["flows"]
                  if (f["src"], f["dest"]) == VICTIM[:2])
    assert r["victim_control"] >= 0.9 * v_base, (r, v_base)
    assert r["aggressor_congested"] > 0 and all(f["bytes_per_cycle"] > 0
                                                for f in con["flows"]), con["flows"]
    assert con["replays"] == 0


@pytest.mark.cocotb
@pytest.mark.soak
def test_mixed_lanes_workload_with_faults_icarus(tmp_path):
    """The in-network bf16 all-reduce (``test_workload`` ``allreduce-switch``) on the mixed
    fabric at BER 1e-5 on every lane and a one-bit slip on the 1-lane endpoint's up lane:
    bit-exact against fusionfabric.sim.reduce (the damaged flits replayed)."""
    import json

    from fusionfabric.tb.common import runner
    params = get_block_params()
    slip = lane_index(2, 0, 0, lanes=endpoint_lanes({"endpoints": MIXED}))
    out = tmp_path / "res.json"
    result = runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params,
                        sim="icarus", testcase="test_workload", vpi="top",
                        test_args={"workload": "allreduce-switch",
                                   "params": {"n_elems": 384},
                                   "faults": {"ber": 1e-5, "slip_lane": slip,
                                              "slip_at": 200},
                                   "result_file": str(out)})
    assert result.tests and not result.failed
    rec = json.loads(out.read_text())
    assert rec["bit_exact"], rec.get("error")
    assert rec["flips"] > 0, rec


def get_block_params():
    from fusionfabric.rtl.blocks import get_block
    return get_block("fabric").resolve({"n_endpoints": 3, "endpoints": MIXED})


def _bench_exit_2(script, argv, needle):
    """``bench/<script> argv``: one line naming the bad value, exit 2, before any build."""
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench" / script
    proc = subprocess.run([sys.executable, str(bench), *argv], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize("argv,needle", [
    (["--credits", "16,0"], "--credits '16,0'"),
    (["--credits", "many"], "--credits 'many'"),
    (["--replay-depth", "8,x"], "--replay-depth '8,x'"),
    (["--warm", "1600"], "--warm 1600"),
])
def test_rtl_flow_credits_bad_arguments_exit_2(argv, needle):
    """bench/rtl_flow_credits.py refuses a bad argument (:func:`_bench_exit_2`)."""
    _bench_exit_2("rtl_flow_credits.py", argv, needle)


@pytest.mark.parametrize("argv,needle", [
    (["--dest-credits", "8"], "--dest-credits 8"),
    (["--dest-credits", "512"], "--dest-credits 512"),
    (["--depth", "100"], "--depth 100"),
])
def test_rtl_victim_flow_bad_arguments_exit_2(argv, needle):
    """bench/rtl_victim_flow.py refuses a bad argument (:func:`_bench_exit_2`)."""
    _bench_exit_2("rtl_victim_flow.py", argv, needle)
