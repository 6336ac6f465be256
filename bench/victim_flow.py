"""Victim flow on a switch with ports of different rates (the fabric model, link.ports).

Eight ports: 0-5 of 4 lanes (full rate, 1 flit per cycle), 6-7 of 1 lane (1/4). Input 0
carries a victim flow to the fast output 1 (``--victim`` of its line rate) and an
aggressor flow to the slow output 6 (``--aggressor``); inputs 2 and 3 send
``--congestion`` each to output 6 too, so output 6 is offered more than its 0.25. The
victim's delivered rate is measured against the same run without the congestion flows
(inputs 2 and 3 idle, the aggressor kept), in the same admission mode: the ratio is the
figure; the target is 0.95. Both runs use the same seeded arrivals.

``--admission`` (``link.admission``): ``fifo``, one source queue and one link receive FIFO
per input (the RTL's endpoint); ``voq``, one source queue per destination
(``--src-voq-depth`` packets each) and per-VOQ credits from the switch (model only);
``both`` (the default) runs each mode against its own control run.

    python bench/victim_flow.py [--cycles 20000] [--seed 1] [--depth 16] [--admission both]

Prints, per mode, the victim's delivered flits per cycle in both runs, their ratio, output
6's rate, input 0's stalls, source drops and source backlog.
"""

from __future__ import annotations

import argparse

import numpy as np

from fusionfabric.sim.fabric.config import LinkParams, SwitchParams
from fusionfabric.sim.fabric.engine import Fabric
from fusionfabric.sim.fabric.kernel import S

LANES = [4, 4, 4, 4, 4, 4, 1, 1]
VICTIM_OUT, SLOW_OUT = 1, 6


def arrivals(cycles, seed, victim, aggressor, congestion):
    """``(gdest, gsize)`` of one run: input 0 victim + aggressor, inputs 2, 3 congestion
    (0 for the control run), 1-flit packets, Bernoulli per cycle."""
    n = len(LANES)
    rng = np.random.default_rng(seed)
    u = rng.random((cycles, n))
    gdest = np.full((1, cycles, n), -1, np.int64)
    gdest[0, u[:, 0] < victim, 0] = VICTIM_OUT
    gdest[0, (u[:, 0] >= victim) & (u[:, 0] < victim + aggressor), 0] = SLOW_OUT
    for i in (2, 3):
        gdest[0, u[:, i] < congestion, i] = SLOW_OUT
    gsize = (gdest >= 0).astype(np.int64)
    return gdest, gsize


def run(cycles, seed, victim, aggressor, congestion, depth, latency, admission="fifo",
        src_voq_depth=64):
    sw = SwitchParams(n_ports=len(LANES), depth=depth)
    warm = cycles // 4
    link = LinkParams(latency=latency, admission=admission, src_voq_depth=src_voq_depth)
    fab = Fabric(sw, link, 1, window=(warm, cycles), src_queue=1 << 16, port_lanes=LANES)
    gdest, gsize = arrivals(cycles, seed, victim, aggressor, congestion)
    fab.step(gdest, gsize)
    st = fab.s["st"][0]
    span = cycles - warm
    return {"victim": st[VICTIM_OUT, S["acc_flits"]] / span,
            "slow_out": st[SLOW_OUT, S["acc_flits"]] / span,
            "input0_sent": st[0, S["inj_flits"]] / span,
            "input0_stalls": int(st[0, S["in_stalls"]]),
            "src_drops0": int(st[0, S["src_drop_pkts"]]),
            "src_queue0": int(fab.s["sv_cnt"][0, 0].sum() if admission == "voq"
                              else fab.s["sq_cnt"][0, 0])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--victim", type=float, default=0.5)
    ap.add_argument("--aggressor", type=float, default=0.2)
    ap.add_argument("--congestion", type=float, default=0.5)
    ap.add_argument("--depth", type=int, default=16, help="switch VOQ depth")
    ap.add_argument("--latency", type=int, default=0, help="link latency, cycles")
    ap.add_argument("--admission", choices=("fifo", "voq", "both"), default="both",
                    help="link.admission: fifo, voq, or both side by side (default)")
    ap.add_argument("--src-voq-depth", type=int, default=64,
                    help="admission voq: packets per source queue per destination")
    a = ap.parse_args(argv)
    modes = ("fifo", "voq") if a.admission == "both" else (a.admission,)
    print(f"# victim flow, ports {LANES} lanes (full = 4), seed {a.seed}, {a.cycles} "
          f"cycles, VOQ depth {a.depth}, link latency {a.latency}, source VOQ depth "
          f"{a.src_voq_depth} (admission voq)")
    ratios = {}
    for mode in modes:
        args = (a.depth, a.latency, mode, a.src_voq_depth)
        ctl = run(a.cycles, a.seed, a.victim, a.aggressor, 0.0, *args)
        con = run(a.cycles, a.seed, a.victim, a.aggressor, a.congestion, *args)
        for name, r in (("control (no congestion)", ctl), ("congested slow output", con)):
            print(f"{mode:>4} {name:>24}: victim {r['victim']:.4f} flits/cycle, output 6 "
                  f"{r['slow_out']:.4f}, input 0 sent {r['input0_sent']:.4f}, input 0 "
                  f"stalls {r['input0_stalls']}, input 0 source drops {r['src_drops0']}, "
                  f"input 0 source backlog at end {r['src_queue0']}")
        ratios[mode] = con["victim"] / ctl["victim"]
    for mode, ratio in ratios.items():
        print(f"admission {mode}: victim keeps {ratio:.3f} of its uncongested rate (target "
              f"0.95); reference: the control run above in the same mode, same seed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
