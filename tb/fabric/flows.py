"""Saturated flows on the RTL fabric with endpoints of different lane counts: the runner
call of ``tb/fabric/test_fabric.py::test_flows`` and the victim-flow measurement built on
it (``bench/rtl_victim_flow.py``, ``tests/test_fabric_lanes.py``; docs/fabric.md "Lanes
per endpoint")."""

from __future__ import annotations

import json

__all__ = ["MIXED", "VICTIM", "AGGRESSOR", "CONGESTION", "run_flows", "victim_flows",
           "victim_fraction"]

#: The fabric of the lane tests and the victim flow: endpoints 0 and 1 of 2 lanes per
#: direction (``gpu``), endpoint 2 of 1 lane (``accelerator``).
MIXED = "gpu:2x2,accelerator:1x1"
#: Victim flow 0 -> 1 (fast to fast) and aggressor flow 0 -> 2 (to the slow endpoint)
#: share source endpoint 0, 5 : 2 of its messages (the model bench's 0.5 : 0.2);
#: congestion 1 -> 2 saturates the slow endpoint's output.
VICTIM, AGGRESSOR, CONGESTION = (0, 1, 5.0), (0, 2, 2.0), (1, 2, 1.0)


def run_flows(flows, cycles, warm, seed=None, name=None, endpoints=MIXED, sim="icarus",
              params=None):
    """``test_flows`` on the fabric of ``endpoints`` and the other fabric ``params`` (one
    Verilog build per configuration, shared by every caller); returns its results record
    (``flows``, ``ports``, ``window``, ``seed``, ...)."""
    from fusionfabric.endpoints import parse_endpoints, expand
    from fusionfabric.rtl.blocks import get_block
    from fusionfabric.tb.common import runner
    n = len(expand(parse_endpoints(endpoints)))
    params = get_block("fabric").resolve({**(params or {}), "n_endpoints": n,
                                          "endpoints": endpoints})
    result = runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params, sim=sim,
                        testcase="test_flows", vpi="top", seed=seed, name=name,
                        test_args={"flows": [list(f) for f in flows], "cycles": cycles,
                                   "warm": warm, "idle": 0.0, "backpressure": 0.0,
                                   "stall_cycles": 5000})
    if not result.tests or result.failed:
        raise AssertionError(f"test_flows failed: {result}")
    return json.loads((result.test_dir / "fabric_results.json").read_text())


def victim_flows(congested: bool, victim: float = VICTIM[2],
                 aggressor: float = AGGRESSOR[2]) -> list[tuple[int, int, float]]:
    """The flows of the control run (victim and aggressor, endpoint 0's messages split
    ``victim : aggressor``) or of the congested run (plus the congestion flow)."""
    return ([VICTIM[:2] + (victim,), AGGRESSOR[:2] + (aggressor,)]
            + ([CONGESTION] if congested else []))


def _rate(rec, src, dest) -> float:
    for f in rec["flows"]:
        if (f["src"], f["dest"]) == (src, dest):
            return float(f["bytes_per_cycle"])
    raise KeyError(f"no flow {src}->{dest} in the record")


def victim_fraction(control: dict, congested: dict) -> dict:
    """The victim flow's delivered bytes per cycle in both runs and their ratio (the
    fraction of its own rate it keeps), with the aggressor's and the slow output's."""
    v0, v1 = _rate(control, *VICTIM[:2]), _rate(congested, *VICTIM[:2])
    slow = AGGRESSOR[1]
    return {"victim_control": v0, "victim_congested": v1,
            "fraction": v1 / v0 if v0 else float("nan"),
            "aggressor_control": _rate(control, *AGGRESSOR[:2]),
            "aggressor_congested": _rate(congested, *AGGRESSOR[:2]),
            "slow_out_control": control["ports"][slow]["flits_out_per_cycle"],
            "slow_out_congested": congested["ports"][slow]["flits_out_per_cycle"]}
