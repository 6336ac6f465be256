"""Victim flow on the RTL fabric with endpoints of different lane counts, beside the
fabric model's run of the same flows.

The fabric ``gpu:2x2,accelerator:1x1`` (``fusionfabric.tb.fabric.flows.MIXED``): endpoints
0 and 1 of 2 lanes per direction, endpoint 2 of 1 lane (half the rate). Endpoint 0 sends
back to back, 5 of 7 WRITEs (random lengths 64..256 bytes, seeded) to endpoint 1 (the
victim flow, fast to fast) and 2 of 7 to endpoint 2 (the aggressor flow, to the slow
endpoint); in the congested run endpoint 1 also sends back to back to endpoint 2, so the
slow endpoint's output is offered more than its rate. The victim's delivered bytes per
cycle in the congested run over the same in the control run (no congestion flow, same
seed) is the fraction of its own rate it keeps; the product target is 0.95. Both RTL runs
are cocotb ``test_flows`` on Icarus (every request and completion checked).

The model run: ``fusionfabric.sim.fabric`` with ports of 2, 2, 1 lanes (full = 2), 1-flit
packets, input 0 offering 5/7 and 2/7 of its line rate to outputs 1 and 2, input 1
offering its full rate to output 2 in the congested run, admission ``fifo`` (one source
queue per input, as the RTL's chiplet) and ``voq`` (per destination; model only).

``--victim``/``--aggressor`` set the split of endpoint 0's messages (default 5 : 2).

    python bench/rtl_victim_flow.py [--cycles 3000] [--warm 1000] [--seed 1]
        [--victim 5] [--aggressor 2]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fusionfabric.tb.fabric.flows import (AGGRESSOR, CONGESTION, MIXED, VICTIM, run_flows,
                                          victim_flows, victim_fraction)


def model_run(cycles, warm, seed, congested, admission, victim=VICTIM[2],
              aggressor=AGGRESSOR[2]):
    """The victim flow's delivered flits per cycle in the fabric model (1-flit packets)."""
    from fusionfabric.sim.fabric.config import LinkParams, SwitchParams
    from fusionfabric.sim.fabric.engine import Fabric
    from fusionfabric.sim.fabric.kernel import S
    lanes = [2, 2, 1]
    sw = SwitchParams(n_ports=len(lanes), depth=16)
    fab = Fabric(sw, LinkParams(latency=0, admission=admission), 1, window=(warm, cycles),
                 src_queue=1 << 16, port_lanes=lanes)
    rng = np.random.default_rng(seed)
    u = rng.random((cycles, len(lanes)))
    gdest = np.full((1, cycles, len(lanes)), -1, np.int64)
    share = victim / (victim + aggressor)
    gdest[0, u[:, 0] < share, 0] = VICTIM[1]
    gdest[0, u[:, 0] >= share, 0] = AGGRESSOR[1]
    if congested:
        gdest[0, :, CONGESTION[0]] = CONGESTION[1]
    fab.step(gdest, (gdest >= 0).astype(np.int64))
    return fab.s["st"][0][VICTIM[1], S["acc_flits"]] / (cycles - warm)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=3000, help="traffic cycles per RTL run")
    ap.add_argument("--warm", type=int, default=1000, help="cycles before the window")
    ap.add_argument("--seed", type=int, default=1, help="cocotb seed of both RTL runs")
    ap.add_argument("--victim", type=float, default=VICTIM[2],
                    help="weight of the victim flow among endpoint 0's messages")
    ap.add_argument("--aggressor", type=float, default=AGGRESSOR[2],
                    help="weight of the aggressor flow among endpoint 0's messages")
    ap.add_argument("--model-cycles", type=int, default=20000)
    a = ap.parse_args(argv)
    if not 0 <= a.warm < a.cycles:
        print(f"rtl_victim_flow: error: --warm {a.warm} must be in 0..{a.cycles - 1}",
              file=sys.stderr)
        return 2
    for name in ("victim", "aggressor"):
        if not getattr(a, name) > 0:
            print(f"rtl_victim_flow: error: --{name} {getattr(a, name)} must be above 0",
                  file=sys.stderr)
            return 2
    print(f"# RTL victim flow: fabric endpoints={MIXED}, flows victim {VICTIM[0]}->"
          f"{VICTIM[1]}, aggressor {AGGRESSOR[0]}->{AGGRESSOR[1]} ({a.victim:g}:"
          f"{a.aggressor:g} of endpoint 0's messages), congestion {CONGESTION[0]}->"
          f"{CONGESTION[1]}; seed {a.seed}, window {a.warm}..{a.cycles} cycles, Icarus")
    recs = {}
    for congested in (False, True):
        t = time.time()
        name = "rtl-victim-" + ("congested" if congested else "control")
        recs[congested] = run_flows(victim_flows(congested, a.victim, a.aggressor),
                                    a.cycles, a.warm, seed=a.seed, name=name)
        print(f"  {name}: {time.time() - t:.0f} s wall")
    r = victim_fraction(recs[False], recs[True])
    print(f"RTL   control (no congestion): victim {r['victim_control']:.3f} B/cycle, "
          f"aggressor {r['aggressor_control']:.3f}, slow output {r['slow_out_control']:.3f} "
          "flits/cycle")
    print(f"RTL   congested slow output:   victim {r['victim_congested']:.3f} B/cycle, "
          f"aggressor {r['aggressor_congested']:.3f}, slow output "
          f"{r['slow_out_congested']:.3f} flits/cycle")
    print(f"RTL   victim keeps {r['fraction']:.3f} of its own rate (target 0.95); "
          "reference: the control run above, same seed")
    for adm in ("fifo", "voq"):
        args = (a.model_cycles, a.model_cycles // 4, a.seed)
        c0 = model_run(*args, False, adm, a.victim, a.aggressor)
        c1 = model_run(*args, True, adm, a.victim, a.aggressor)
        print(f"model admission {adm}: victim {c1:.4f} / {c0:.4f} flits/cycle, keeps "
              f"{c1 / c0:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
