"""Victim flow on a switch with ports of different rates (the fabric model, link.ports).

Eight ports: 0-5 of 4 lanes (full rate, 1 flit per cycle), 6-7 of 1 lane (1/4). Input 0
carries a victim flow to the fast output 1 (``--victim`` of its line rate) and an
aggressor flow to the slow output 6 (``--aggressor``); inputs 2 and 3 send
``--congestion`` each to output 6 too, so output 6 is offered more than its 0.25. The
victim's delivered rate is measured against the same run without the congestion flows
(inputs 2 and 3 idle, the aggressor kept): the ratio is the figure; the issue's target is
0.95. Both runs use the same seeded arrivals.

    python bench/victim_flow.py [--cycles 20000] [--seed 1] [--depth 16]

Prints the victim's delivered flits per cycle in both runs, their ratio, the aggressor's
and output 6's rates, and input 0's stalls.
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


def run(cycles, seed, victim, aggressor, congestion, depth, latency):
    sw = SwitchParams(n_ports=len(LANES), depth=depth)
    warm = cycles // 4
    fab = Fabric(sw, LinkParams(latency=latency), 1, window=(warm, cycles),
                 src_queue=1 << 16, port_lanes=LANES)
    gdest, gsize = arrivals(cycles, seed, victim, aggressor, congestion)
    fab.step(gdest, gsize)
    st = fab.s["st"][0]
    span = cycles - warm
    return {"victim": st[VICTIM_OUT, S["acc_flits"]] / span,
            "slow_out": st[SLOW_OUT, S["acc_flits"]] / span,
            "input0_sent": st[0, S["inj_flits"]] / span,
            "input0_stalls": int(st[0, S["in_stalls"]]),
            "src_queue0": int(fab.s["sq_cnt"][0, 0])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--victim", type=float, default=0.5)
    ap.add_argument("--aggressor", type=float, default=0.2)
    ap.add_argument("--congestion", type=float, default=0.5)
    ap.add_argument("--depth", type=int, default=16, help="switch VOQ depth")
    ap.add_argument("--latency", type=int, default=0, help="link latency, cycles")
    a = ap.parse_args(argv)
    print(f"# victim flow, ports {LANES} lanes (full = 4), seed {a.seed}, {a.cycles} "
          f"cycles, VOQ depth {a.depth}, link latency {a.latency}")
    ctl = run(a.cycles, a.seed, a.victim, a.aggressor, 0.0, a.depth, a.latency)
    con = run(a.cycles, a.seed, a.victim, a.aggressor, a.congestion, a.depth, a.latency)
    for name, r in (("control (no congestion)", ctl), ("congested slow output", con)):
        print(f"{name:>24}: victim {r['victim']:.4f} flits/cycle, output 6 "
              f"{r['slow_out']:.4f}, input 0 sent {r['input0_sent']:.4f}, input 0 stalls "
              f"{r['input0_stalls']}, input 0 source queue at end {r['src_queue0']}")
    ratio = con["victim"] / ctl["victim"]
    print(f"victim keeps {ratio:.3f} of its uncongested rate (target 0.95); reference: the "
          f"control run above, same seed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
