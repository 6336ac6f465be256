"""Speed of the cycle-level fabric model, against BookSim 2 and against the RTL.

Prints, side by side in one run:

1. the model on a 72-port uniform sweep (offered loads 0.1 ... 1.0 = 10 batch points):
   **sweep-point-cycles per second** = (points x cycles simulated) / seconds, wall and
   CPU, for the 10 points on numba threads and for one point alone, and the ratio to
   BookSim 2's 72-port crossbar figure (3,000-7,000 cycles/s on this class of machine
   with its input-queued router and 8 VCs; the ratio is taken against 7,000, the fast
   end);
2. the RTL switch at 8 ports driven cycle by cycle by the cocotb differential testbench
   (tb/model/test_switch_exact.py) on Icarus and Verilator, and the model on the very
   same trace: cycles per second and the model-versus-RTL ratio.

The machine is shared: CPU seconds (process time) are printed next to wall seconds.
Usage: ``.venv/bin/python bench/model_speed.py [--cycles N] [--no-rtl]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionfabric.sim.fabric.config import SwitchParams, load_config  # noqa: E402
from fusionfabric.sim.fabric.exact import random_trace, run_trace  # noqa: E402
from fusionfabric.sim.fabric.run import run_sweep  # noqa: E402

BOOKSIM_72 = (3_000, 7_000)


def sweep_speed(label, cycles, loads="0.1:1.0:0.1", ports=72):
    cfg = load_config(None, [f"n_ports={ports}", "pattern=uniform", f"loads={loads}",
                             f"cycles={cycles}", f"warmup={cycles // 4}", "drain=0",
                             "seed=1"])
    c0 = time.process_time()
    r = run_sweep(cfg, progress=False)
    cpu = time.process_time() - c0
    pc = r["batch"] * r["cycles_simulated"]
    return {"run": label, "points": r["batch"], "cycles": r["cycles_simulated"],
            "wall": r["wall_seconds"], "cpu": cpu, "pcps_wall": pc / r["wall_seconds"],
            "pcps_cpu": pc / cpu,
            "sat": max(p["accepted"] for p in r["points"])}


def rtl_speed(sim, n, cycles, packets):
    from fusionfabric.tb.common.runner import run

    from fusionfabric.sim.fabric.config import max_iterations
    params = {"n_ports": n, "data_width": 64, "depth": 16,
              "iterations": min(3, max_iterations(n)), "mode": "voq", "out_depth": 4,
              "n_groups": 4, "reduce": False}
    with tempfile.TemporaryDirectory() as d:
        rate = Path(d) / "rate.json"
        run("switch", "fusionfabric.tb.model.test_switch_exact", params, sim=sim, name=f"bench-{n}",
            test_args={"packets": [list(map(int, p)) for p in packets], "cycles": cycles,
                       "groups": {}, "ready": None, "rate_file": str(rate)})
        r = json.loads(rate.read_text())
    return r["cycles"] / r["wall"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20_000, help="sample cycles (72 ports)")
    ap.add_argument("--no-rtl", action="store_true", help="skip the RTL comparison")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    sweep_speed("warm-up", 200, ports=72)              # compile / load the numba cache first
    rows = [sweep_speed("threads", a.cycles),
            sweep_speed("one point", a.cycles, loads="0.5")]
    print("\n72-port uniform sweep, sweep-point-cycles per second (points x cycles / s)")
    print(f"{'run':<12} {'points':>6} {'cycles':>7} {'wall s':>7} {'cpu s':>7} "
          f"{'pc/s wall':>10} {'pc/s cpu':>10} {'x BookSim(7k)':>13} {'x BookSim(3k)':>13}")
    for r in rows:
        print(f"{r['run']:<12} {r['points']:>6} {r['cycles']:>7} {r['wall']:>7.2f} "
              f"{r['cpu']:>7.2f} {r['pcps_wall']:>10.0f} {r['pcps_cpu']:>10.0f} "
              f"{r['pcps_wall'] / BOOKSIM_72[1]:>13.1f} {r['pcps_wall'] / BOOKSIM_72[0]:>13.1f}")
    target = 10 * BOOKSIM_72[1]
    print(f"target >= 10 x 7,000 = {target:,} point-cycles/s: "
          f"{'MET' if rows[0]['pcps_wall'] >= target else 'NOT met'} on wall time "
          f"({rows[0]['pcps_wall']:,.0f}), "
          f"{'MET' if rows[0]['pcps_cpu'] >= target else 'NOT met'} on CPU time "
          f"({rows[0]['pcps_cpu']:,.0f})")
    if a.no_rtl:
        return 0
    n, cycles = 8, 3000
    rng = np.random.default_rng(11)
    packets = random_trace(rng, n, int(0.5 * n * 2500 / 2.5), 2500, max_size=4)
    sw = SwitchParams(n_ports=n, depth=16)
    run_trace(sw, [(0, 0, 1, 1, 0)], 10)               # warm
    t0 = time.perf_counter()
    reps = 20
    for _ in range(reps):
        run_trace(sw, packets, cycles)
    model = reps * cycles / (time.perf_counter() - t0)
    print(f"\n8-port switch, one random trace ({len(packets)} packets, {cycles} cycles, "
          f"load ~0.5)")
    print(f"model (batch 1, incl. trace set-up): "
          f"{model:,.0f} cycles/s")
    for sim in ("verilator", "icarus"):
        try:
            rtl = rtl_speed(sim, n, cycles, packets)
        except Exception as exc:  # report, do not hide
            print(f"RTL on {sim}: failed: {str(exc).splitlines()[0]}")
            continue
        print(f"RTL on {sim:<9} (cocotb, cycle-by-cycle driver): {rtl:,.0f} cycles/s; "
              f"model / RTL = {model / rtl:,.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
