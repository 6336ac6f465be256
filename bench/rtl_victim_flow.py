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

The pair of RTL runs is made twice: with the fabric's defaults (one source queue: the
accelerator sends its messages in the order drawn, 16-flit VOQs) and with per-destination
admission (``dest_credits`` and ``depth``, default 256 and 256; docs/fabric.md, "Admission
per destination": each flow has its own message stream and the next message comes from a
flow whose destination has credit, drawn by weight). ``--dest-credits 0`` runs only the
first pair.

The model run: ``fusionfabric.sim.fabric`` with ports of 2, 2, 1 lanes (full = 2), 1-flit
packets, input 0 offering 5/7 and 2/7 of its line rate to outputs 1 and 2, input 1
offering its full rate to output 2 in the congested run, admission ``fifo`` (one source
queue per input, as the RTL's chiplet) and ``voq`` (per destination, credits per VOQ
pop; the RTL's admission returns them with the completion).

``--victim``/``--aggressor`` set the split of endpoint 0's messages (default 5 : 2).

    python bench/rtl_victim_flow.py [--cycles 3000] [--warm 1000] [--seed 1]
        [--victim 5] [--aggressor 2] [--depth 256] [--dest-credits 256]
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
    ap.add_argument("--depth", type=int, default=256,
                    help="switch flits per VOQ of the admission runs (power of two)")
    ap.add_argument("--dest-credits", type=int, default=256,
                    help="fabric dest_credits of the admission runs (17..depth; 0: only "
                    "the runs with one source queue)")
    a = ap.parse_args(argv)
    if not 0 <= a.warm < a.cycles:
        print(f"rtl_victim_flow: error: --warm {a.warm} must be in 0..{a.cycles - 1}",
              file=sys.stderr)
        return 2
    if a.depth < 1 or a.depth & (a.depth - 1):
        print(f"rtl_victim_flow: error: --depth {a.depth} must be a power of two",
              file=sys.stderr)
        return 2
    if a.dest_credits and not 17 <= a.dest_credits <= a.depth:
        print(f"rtl_victim_flow: error: --dest-credits {a.dest_credits} must be 0 or in "
              f"17..{a.depth} (--depth)", file=sys.stderr)
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
    configs = [("one source queue", "rtl-victim", {})]
    if a.dest_credits:
        configs.append((f"admission {a.dest_credits} flits/destination, VOQ {a.depth}",
                        f"rtl-victim-adm{a.dest_credits}-d{a.depth}",
                        {"depth": a.depth, "dest_credits": a.dest_credits}))
    for label, stem, params in configs:
        recs = {}
        for congested in (False, True):
            t = time.time()
            name = f"{stem}-" + ("congested" if congested else "control")
            recs[congested] = run_flows(victim_flows(congested, a.victim, a.aggressor),
                                        a.cycles, a.warm, seed=a.seed, name=name,
                                        params=params)
            print(f"  {name}: {time.time() - t:.0f} s wall")
        r = victim_fraction(recs[False], recs[True])
        print(f"RTL {label}:")
        print(f"  control (no congestion): victim {r['victim_control']:.3f} B/cycle, "
              f"aggressor {r['aggressor_control']:.3f}, slow output "
              f"{r['slow_out_control']:.3f} flits/cycle")
        print(f"  congested slow output:   victim {r['victim_congested']:.3f} B/cycle, "
              f"aggressor {r['aggressor_congested']:.3f}, slow output "
              f"{r['slow_out_congested']:.3f} flits/cycle")
        print(f"  victim keeps {r['fraction']:.3f} of its own rate (target 0.95); "
              "reference: the control run above, same seed and configuration")
    for adm in ("fifo", "voq"):
        args = (a.model_cycles, a.model_cycles // 4, a.seed)
        c0 = model_run(*args, False, adm, a.victim, a.aggressor)
        c1 = model_run(*args, True, adm, a.victim, a.aggressor)
        print(f"model admission {adm}: victim {c1:.4f} / {c0:.4f} flits/cycle, keeps "
              f"{c1 / c0:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
