"""Switch saturation throughput and latency versus offered load, VOQ + iSLIP against the
FIFO (head-of-line blocking) baseline, side by side in one run, in RTL simulation.

Path: the 8-port switch RTL (rtl/switch) wrapped in tb/switch/traffic.py (per-input
xorshift Bernoulli arrivals, uniform destinations, source queues, always-ready outputs,
latency counters, all synthesizable Amaranth), converted to Verilog and run on Verilator
through cocotb; Python only sets the load, waits and reads the counters.

    .venv/bin/python bench/switch_throughput.py [--ports 8] [--cycles 20000] ...

Writes build/bench/switch_throughput.json and .png (latency versus offered load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionfabric.tb.common import runner  # noqa: E402
from fusionfabric.tb.switch.allreduce import AllReduceHarness  # noqa: E402
from fusionfabric.tb.switch.traffic import TrafficHarness  # noqa: E402

LOADS = [0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]


def run_mode(label, params, loads, cycles, warmup, sim, seed):
    out = ROOT / "build" / "bench" / f"switch_{label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    harness = TrafficHarness(seed=seed, **params)
    t0 = time.time()
    runner.run(f"switch-bench-{label}", "fusionfabric.tb.switch.bench_switch",
               {**params, "seed": seed}, component=harness, sim=sim, name=label,
               test_args={"loads": loads, "cycles": cycles, "warmup": warmup,
                          "out": str(out)})
    rows = json.loads(out.read_text())
    return rows, time.time() - t0


def run_allreduce(n, flits, depth, iterations, sim, data_width=32, n_chunks=16):
    """In-network versus ring all-reduce of ``flits`` flits per port on one build."""
    params = {"n_ports": n, "data_width": data_width, "depth": depth,
              "iterations": iterations, "out_depth": 4, "n_chunks": n_chunks}
    out = ROOT / "build" / "bench" / "switch_allreduce.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    runner.run("switch-bench-allreduce", "fusionfabric.tb.switch.bench_allreduce",
               {**params, "flits": flits}, component=AllReduceHarness(flits=flits, **params),
               sim=sim, name="allreduce", test_args={"out": str(out), "timeout": 50 * flits})
    res = json.loads(out.read_text())
    return params, res, time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--depth", type=int, default=32, help="flits per VOQ")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=20000, help="measured cycles per point")
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--sim", default="verilator")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--modes", default="",
                    help="comma-separated subset of the variants (default: all)")
    ap.add_argument("--loads", default="",
                    help="comma-separated offered loads (default: the standard sweep)")
    ap.add_argument("--pipe-depth", type=int, default=64,
                    help="flits per VOQ of the pipelined variant (default 64: its VOQs "
                         "are block RAM, where 8 x 64 flits of 100 bits take the same "
                         "three DP16KD per input as 8 x 16; 0: --depth)")
    ap.add_argument("--pipe-out-depth", type=int, default=16,
                    help="output buffer (credits) of the pipelined variant (its credit "
                         "loop is 11 cycles, so >= 11 for line rate; 16 slots are the same "
                         "LUT RAM as 4)")
    ap.add_argument("--xp-depth", type=int, default=16,
                    help="RAM slots per crosspoint buffer of the crosspoint variant "
                         "(default 16: one LUT-RAM row, the depth of an ECP5 DPR16X4)")
    ap.add_argument("--xp-out-depth", type=int, default=8,
                    help="output buffer (credits) of the crosspoint variant (its credit "
                         "loop is 7 cycles)")
    ap.add_argument("--allreduce-flits", type=int, default=2048,
                    help="vector length per port of the all-reduce comparison (0: skip)")
    ap.add_argument("--only-allreduce", action="store_true")
    ap.add_argument("--allreduce-sim", default="icarus",
                    help="simulator of the all-reduce run (the switch with 8 reduction "
                         "units is a long Verilator C++ build; Icarus starts faster)")
    args = ap.parse_args(argv)

    n = args.ports
    loads = [float(x) for x in args.loads.split(",")] if args.loads else LOADS
    if 1.0 not in loads:
        ap.error("--loads must include 1.0 (the saturation point)")
    if args.allreduce_flits:
        params, res, secs = run_allreduce(n, args.allreduce_flits, args.depth,
                                          args.iterations, args.allreduce_sim)
        a, r = res["in_network"], res["ring"]
        S = args.allreduce_flits
        print(f"all-reduce of {S} flits per port, {n} ports, switch {params} "
              f"(reduce=True), {args.allreduce_sim}, build+sim {secs:.0f} s:")
        print(f"  in-network: {a['cycles']:7d} cycles  done={a['done']}  "
              f"{100 * S / max(1, a['cycles']):5.1f} % of line rate  "
              f"({a['results']} result flits, {a['bad']} wrong)")
        print(f"  ring      : {r['cycles']:7d} cycles  done={r['done']}  "
              f"(2(n-1) = {2 * (n - 1)} steps of {S // n} flits)")
        print(f"  speed-up in-network / ring = {r['cycles'] / max(1, a['cycles']):.3f}  "
              f"(theory 2(n-1)/n = {2 * (n - 1) / n:.3f})")
        print()
        if args.only_allreduce:
            return 0
    common = {"n_ports": n, "data_width": 32, "depth": args.depth, "out_depth": 4}
    modes = {
        f"voq_islip{args.iterations}": {**common, "mode": "voq",
                                        "iterations": args.iterations},
        "voq_islip1": {**common, "mode": "voq", "iterations": 1},
        "fifo": {**common, "mode": "fifo", "iterations": 1},
        "voq_pipelined": {**common, "mode": "voq", "iterations": 1, "pipeline": True,
                          "depth": args.pipe_depth or args.depth,
                          "out_depth": args.pipe_out_depth},
        "crosspoint": {**common, "mode": "crosspoint", "iterations": 0,
                       "depth": args.xp_depth, "out_depth": args.xp_out_depth},
    }
    if args.modes:
        keep = args.modes.split(",")
        bad = [k for k in keep if k not in modes]
        if bad:
            ap.error(f"--modes {bad[0]!r} is not one of {', '.join(modes)}")
        modes = {k: v for k, v in modes.items() if k in keep}
    results = {}
    for label, params in modes.items():
        rows, secs = run_mode(label, params, loads, args.cycles, args.warmup, args.sim,
                              args.seed)
        results[label] = {"params": params, "rows": rows, "seconds": secs}

    print(f"switch {n} ports, uniform Bernoulli unicast, single-flit packets, "
          f"{args.cycles} measured cycles per point after {args.warmup} warm-up, "
          f"{args.sim}, seed {args.seed}")
    print(f"VOQ depth {args.depth} flits per VOQ ({args.depth * n} per input); FIFO mode "
          f"holds the same {args.depth * n} flits in one queue; output buffers 4 flits")
    print()
    print("saturation throughput at offered load 1.0 (delivered flits / port / cycle):")
    sat = {}
    for label, r in results.items():
        row = [x for x in r["rows"] if x["load"] == 1.0][0]
        sat[label] = row["delivered"] / (n * row["cycles"])
        print(f"  {label:<12} {100 * sat[label]:6.2f} %   (sim {r['seconds']:.0f} s)")
    best = f"voq_islip{args.iterations}"
    if best in sat and "fifo" in sat:
        print(f"  ratio {best} / fifo = {sat[best] / sat['fifo']:.3f}  "
              f"(FIFO theory at {n} ports: 61.8 % at 8, 58.6 % as n grows)")
    if best in sat and "voq_pipelined" in sat:
        print(f"  ratio voq_pipelined / {best} = {sat['voq_pipelined'] / sat[best]:.3f}")
    if best in sat and "crosspoint" in sat:
        print(f"  ratio crosspoint / {best} = {sat['crosspoint'] / sat[best]:.3f}")
    for label, r in results.items():
        p = r["params"]
        print(f"    {label}: depth {p['depth']}, out_depth {p['out_depth']}, "
              f"iterations {p['iterations']}, pipeline {p.get('pipeline', False)}")
    print()
    print("mean / max latency in cycles, arrival to output handshake "
          "(includes the source queue; minimum 3 = 1 source FIFO + 2 switch, "
          "13 = 1 + 12 for the pipelined variant, 11 = 1 + 10 for the crosspoint variant):")
    hdr = "  load  " + "".join(f"{lab:>26}" for lab in results)
    print(hdr)
    for k, load in enumerate(loads):
        cells = []
        for label, r in results.items():
            x = r["rows"][k]
            mean = x["lat_sum"] / max(1, x["delivered"])
            thr = x["delivered"] / (n * x["cycles"])
            cells.append(f"{mean:9.1f} /{x['lat_max']:6d} ({100 * thr:5.1f}%)")
        print(f"  {load:4.2f}  " + "".join(f"{c:>26}" for c in cells))
    out = ROOT / "build" / "bench" / "switch_throughput.json"
    out.write_text(json.dumps(results, indent=1))
    if not args.no_plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, r in results.items():
            xs = [x["load"] for x in r["rows"] if x["load"] < 1.0]
            ys = [x["lat_sum"] / max(1, x["delivered"]) for x in r["rows"] if x["load"] < 1.0]
            ax.plot(xs, ys, marker="o", label=label)
        ax.set_yscale("log")
        ax.set_xlabel("offered load (flits / port / cycle)")
        ax.set_ylabel("mean latency (cycles)")
        ax.set_title(f"{n}-port switch, uniform Bernoulli traffic (RTL, {args.sim})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        png = out.with_suffix(".png")
        fig.tight_layout()
        fig.savefig(png, dpi=120)
        print(f"\nwrote {out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
