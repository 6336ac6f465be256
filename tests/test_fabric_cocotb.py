"""cocotb regressions of the whole fabric (block ``fabric``, tb/fabric/test_fabric.py).

CI: two endpoints on Icarus (one Verilog build shared by the runs). The 4- and
8-endpoint runs, Verilator (the demo's simulator: ``make demo`` builds it too) and the
demo workloads are soak: the 8-endpoint Verilog alone is
~850,000 lines (docs/fabric.md, "Simulation cost")."""

import json

import pytest

from fusionfabric.tb.common import runner

TB = "fusionfabric.tb.fabric.test_fabric"
CI_PARAMS = {"n_endpoints": 2}


def _run(params, testcase, args, sim="icarus"):
    result = runner.run("fabric", TB, params, sim=sim, testcase=testcase,
                        test_args={"stall_cycles": 5000, **args}, vpi="top")
    assert result.tests and not result.failed
    return json.loads((result.test_dir / "fabric_results.json").read_text())


@pytest.mark.cocotb
def test_fabric_traffic_icarus():
    res = _run(CI_PARAMS, "test_traffic", {"messages": 6})
    assert res["bytes_moved"] > 0 and res["replays"] == 0


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_traffic_verilator():
    """Verilator with only the top level's ports public (``vpi="top"``): the build the demo
    uses by default (tb/common/runner.py)."""
    res = _run(CI_PARAMS, "test_traffic", {"messages": 6}, sim="verilator")
    assert res["bytes_moved"] > 0 and res["replays"] == 0 and res["sim"] == "verilator"


@pytest.mark.cocotb
def test_fabric_traffic_multicast_stall_icarus():
    """The seed whose MULTICAST header the ingress bridge swapped for a response while the
    switch was replicating it: the switch input stalled for good at cycle ~1160
    (docs/fabric.md, "Ingress bridge"). Deterministic for this seed and message count."""
    result = runner.run("fabric", TB, CI_PARAMS, sim="icarus", testcase="test_traffic",
                        seed=79491665, test_args={"messages": 30, "stall_cycles": 3000},
                        vpi="top", name="fabric-traffic-multicast-stall")
    assert result.tests and not result.failed
    res = json.loads((result.test_dir / "fabric_results.json").read_text())
    assert res["bytes_moved"] > 0 and res["seed"] == 79491665


@pytest.mark.cocotb
def test_fabric_allreduce_icarus():
    res = _run(CI_PARAMS, "test_allreduce", {"granules": 16})
    assert all(e["results"] > 0 for e in res["endpoints"])


@pytest.mark.cocotb
def test_fabric_faults_icarus():
    res = _run(CI_PARAMS, "test_faults", {"granules": 16, "messages": 6, "ber": 2e-5,
                                          "slip_lane": 1, "slip_at": 200})
    assert res["replays"] > 0 and res["relocks"] >= 1
    slip = res["slip"]          # lock lost, regained, both chiplets ACTIVE, in that order
    assert slip["lane"] == 1 and 0 < slip["loss"] <= slip["relock"] < slip["active"], slip



@pytest.mark.cocotb
def test_fabric_dark_lane_short_icarus():
    """Endpoint 1's up lanes dark for 1,000 cycles in random traffic (well inside the
    link-lost timeout): the PCS relocks, the link retrains without FAILED, and every
    request and completion is delivered exactly once (tb/fabric/test_fabric.py
    ``test_dark_lane``)."""
    res = _run(CI_PARAMS, "test_dark_lane", {"messages": 10, "dark_cycles": 1000,
                                             "dark_at": 200})
    x = res["endpoints"][1]
    assert x["link"]["up_drops"] >= 1 and x["chiplet_sw"]["failures"] == 0, x
    assert 0 < res["retrain_cycles"] < res["bounds"]["lost"], res


#: Three endpoints (two stay live); a link-lost timeout of 1,000 cycles and a completion
#: timer of 6,000, so that the run is short and still keeps the designed order: a request
#: stalled behind the dead port until it is detected completes before its timer expires.
DEAD_PARAMS = {"n_endpoints": 3, "link_timeout": 1000, "cpl_timeout": 6000}


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_dark_lane_permanent_icarus():
    """Endpoint 2's up lanes dark for good: both chiplets of its link FAILED within the
    bounds of docs/protocol.md; every request to or from it completes exactly once (OK,
    ERROR or TIMEOUT, matching the ports' counters), none unreported, duplicated or
    corrupted; endpoints 0 and 1 keep exchanging traffic at >= 95 % of the rate of the
    same traffic before the fault, with no switch drop."""
    res = _run(DEAD_PARAMS, "test_dark_lane", {"messages": 12, "dark_cycles": 0,
                                               "stall_cycles": 20_000})
    b = res["bounds"]
    assert res["detect_cycles"] <= max(b["replay"], b["lost"]) + 200, res
    acct = res["ledger"]
    # refused ones (ERROR) and ones held by the dead link (TIMEOUT) both occurred
    assert acct["unreported"] == 0 and acct["error"] >= 1 and acct["timeout"] >= 1, acct
    assert res["rate_ratio"] >= 0.95, res

@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("n", [4, 8])
def test_fabric_allreduce_soak(n):
    _run({"n_endpoints": n}, "test_allreduce", {"granules": 64})


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("workload", ["allreduce-switch", "allreduce-ring", "moe-alltoall"])
def test_fabric_workload_soak(workload, tmp_path):
    params = {"allreduce-switch": {"n_elems": 512}, "allreduce-ring": {"n_elems": 512},
              "moe-alltoall": {"tokens_per_endpoint": 8, "d_model": 64}}[workload]
    out = tmp_path / "res.json"
    result = runner.run("fabric", TB, {"n_endpoints": 4}, sim="verilator",
                        testcase="test_workload",
                        test_args={"workload": workload, "params": params,
                                   "faults": {"ber": 1e-5, "slip_lane": 1},
                                   "result_file": str(out)}, vpi="top")
    assert result.tests and not result.failed
    assert json.loads(out.read_text())["bit_exact"]


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("workload,params", [
    ("allreduce-switch", {"n_elems": 256}),
    ("moe-alltoall", {"tokens_per_endpoint": 16, "d_model": 64}),
])
def test_fabric_fec_workload_soak(workload, params, tmp_path):
    """The fabric on RS(544,514) lanes (``lane_profile="rs544"``, 2 endpoints, Verilator)
    at BER 1e-4 on every lane, where about one 64b/66b DL flit in five would fail its CRC:
    bit-exact against numpy with no replay, and the FEC counters show the corrections.
    Measured here: the build (about 25 MB of Verilog) takes 5 to 8 min."""
    out = tmp_path / "res.json"
    result = runner.run("fabric", TB, {"n_endpoints": 2, "lane_profile": "rs544"},
                        sim="verilator", testcase="test_workload",
                        test_args={"workload": workload, "params": params,
                                   "faults": {"ber": 1e-4, "slip_lane": -1},
                                   "result_file": str(out)}, vpi="top")
    assert result.tests and not result.failed
    rec = json.loads(out.read_text())
    assert rec["bit_exact"] and rec["lane_profile"] == "rs544"
    fec = rec["fec"]
    assert fec["uncorrectable"] == 0 and rec["replays"] == 0, rec
    # every corrected symbol was hit by at least one injected bit flip
    assert 0 < fec["corrected_symbols"] <= rec["flips"], rec
    assert fec["corrected_codewords"] <= fec["codewords"], rec
