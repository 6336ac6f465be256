"""Two-tier Clos scale-up domain in the cycle model: run time and saturation throughput.

Prints, in one run:

1. the timed sweep: a Clos of ``--leaves`` leaves x ``--epl`` endpoints with ``--spines``
   spines (default 32 x 32 + 32, radix 64: 1,024 endpoints, not oversubscribed), uniform
   traffic, ``--loads`` (default 0.1:1.0:0.1, 10 points) x ``--cycles`` sample cycles (default
   20,000; warm-up cycles/4, drain up to ``--drain``, default cycles, as ``fusionfabric
   sweep``) with ``--routing`` (default adaptive): wall and CPU seconds, switch
   port-cycles per second, and the per-load table (with each point's end of run and the
   flits sent on its least and most used leaf uplink);
2. the routing comparison: the same domain with each of ``--compare`` (default
   deterministic, ecmp; adaptive is taken from the timed sweep when its loads cover
   ``--compare-loads``) at ``--compare-loads`` (default 0.9,1.0) for ``--compare-cycles``
   (default the timed sweep's cycles): saturation throughput = the largest accepted
   throughput over those loads.

Usage: ``.venv/bin/python bench/clos_sweep.py [--leaves 32 --epl 32 --spines 32 --radix 64]
[--loads 0.1:1.0:0.1] [--cycles 20000] [--drain N] [--routing adaptive] [--compare
deterministic,ecmp] [--compare-loads 0.9,1.0] [--compare-cycles N] [--seed 1]
[--no-compare]``. The same sweep from the CLI: ``fusionfabric sweep --topology clos
--pattern uniform --loads 0.1:1.0:0.1 --cycles 20000 --seed 1`` (the [topology] defaults
are this domain).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionfabric.sim.fabric.clos import run_clos_sweep  # noqa: E402
from fusionfabric.sim.fabric.config import ConfigError, load_config, parse_loads  # noqa: E402


def config(a, routing, loads, cycles, drain):
    sets = ["topology.kind=clos", f"topology.radix={a.radix}",
            f"topology.endpoints={a.leaves * a.epl}", f"topology.endpoints_per_leaf={a.epl}",
            f"topology.spines={a.spines}", f"topology.routing={routing}",
            f"topology.link_latency={a.link_latency}", "pattern=uniform", f"loads={loads}",
            f"cycles={cycles}", f"seed={a.seed}"]
    if drain is not None:
        sets.append(f"drain={drain}")
    return load_config(None, sets)


def timed(cfg):
    c0, w0 = time.process_time(), time.perf_counter()
    r = run_clos_sweep(cfg, progress=False)
    return r, time.perf_counter() - w0, time.process_time() - c0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--leaves", type=int, default=32)
    p.add_argument("--epl", type=int, default=32, help="endpoints per leaf")
    p.add_argument("--spines", type=int, default=32)
    p.add_argument("--radix", type=int, default=64)
    p.add_argument("--link-latency", type=int, default=1, help="leaf-spine link, cycles")
    p.add_argument("--loads", default="0.1:1.0:0.1")
    p.add_argument("--cycles", type=int, default=20000)
    p.add_argument("--drain", type=int, default=None, help="default: cycles")
    p.add_argument("--routing", default="adaptive")
    p.add_argument("--compare", default="deterministic,ecmp")
    p.add_argument("--compare-loads", default="0.9,1.0")
    p.add_argument("--compare-cycles", type=int, default=None)
    p.add_argument("--no-compare", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    try:
        cfg = config(a, a.routing, a.loads, a.cycles, a.drain)
        cmp_loads = parse_loads(a.compare_loads)
    except ConfigError as exc:
        print(f"clos_sweep: {exc}", file=sys.stderr)
        return 2
    t = cfg.topology
    print(f"# load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; seed {a.seed}")
    print(f"# Clos: {t.endpoints} endpoints = {t.leaves} leaves x {t.endpoints_per_leaf} + "
          f"{t.spines} spines, radix {t.radix}, oversubscription {t.oversubscription:g}, "
          f"leaf-spine link latency {t.link_latency}; switch depth {cfg.switch.depth}, "
          f"out_depth {cfg.switch.out_depth}, iSLIP iterations 3")
    r, wall, cpu = timed(cfg)
    pc = r["batch"] * r["cycles_simulated"] * r["topology"]["switch_ports"]
    print(f"## timed sweep, routing {a.routing}: {r['batch']} points x "
          f"{r['cycles_simulated']:,} cycles (warm-up {r['window'][0]:,}, sample "
          f"{a.cycles:,}, drain {r['cycles_simulated'] - r['window'][1]:,}) = {pc:.3g} "
          f"switch port-cycles: wall {wall:.1f} s, CPU {cpu:.1f} s, {pc / wall:.3g} "
          f"port-cycles/s wall, {pc / cpu:.3g} per CPU second; load average "
          f"{os.getloadavg()[0]:.2f} at its end")
    print(f"{'load':>5} {'offered':>8} {'accepted':>8} {'lat_mean':>9} {'p99':>6} "
          f"{'end':>6} {'up_min':>7} {'up_max':>7}  sat")
    for q in r["points"]:
        lm = q["latency_mean"]
        print(f"{q['load']:>5.2f} {q['offered']:>8.4f} {q['accepted']:>8.4f} "
              f"{(f'{lm:.2f}' if lm == lm else '-'):>9} {q['latency_p99']:>6.0f} "
              f"{q['end_cycle']:>6} {q['uplink_flits']['min']:>7} "
              f"{q['uplink_flits']['max']:>7}  {'SAT' if q['saturated'] else ''}")
    print("# end: the point's end of run (cycle); up_min / up_max: flits sent on the least "
          "and the most used leaf uplink by then")
    sat = {a.routing: (r["summary"]["0"]["saturation_throughput"], "timed sweep")}
    if not a.no_compare:
        cc = a.compare_cycles or a.cycles
        routings = [x.strip() for x in a.compare.split(",") if x.strip()]
        for routing in routings:
            try:
                c = config(a, routing, a.compare_loads, cc, a.drain)
            except ConfigError as exc:
                print(f"clos_sweep: {exc}", file=sys.stderr)
                return 2
            rr, w, cp = timed(c)
            acc = {q["load"]: q["accepted"] for q in rr["points"]}
            sat[routing] = (rr["summary"]["0"]["saturation_throughput"],
                            f"loads {a.compare_loads}, {cc:,} cycles, wall {w:.1f} s; "
                            + ", ".join(f"{k:g}: {v:.4f}" for k, v in acc.items()))
    print("## uniform saturation throughput (largest accepted, flits/cycle/endpoint)")
    for k, (v, how) in sat.items():
        print(f"{k:>13}: {v:.4f}   ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
