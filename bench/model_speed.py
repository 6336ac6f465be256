"""Speed of the cycle-level fabric model against references measured in the same run.

Prints, side by side in one run:

1. the model on a 72-port uniform sweep (offered loads 0.1 ... 1.0 = 10 batch points):
   **sweep-point-cycles per second** = (points x cycles simulated) / seconds, wall and
   CPU, for the 10 points on numba threads and for one point alone, and the same per
   **port-cycle** (x 72: one port for one cycle is the unit of work of any switch model);
2. the model's own pure-Python reference engine: the same kernel source
   (sim/fabric/kernel.py) run by CPython with numba's JIT off (``NUMBA_DISABLE_JIT=1``,
   in a subprocess), on one 72-port point and one 8-port point, against the compiled
   kernel on exactly the same configuration; both must give the same accepted throughput
   and mean latency (they run the same rules), and the ratio is the JIT's gain;
3. optionally (``--booksim PATH``), BookSim 2 itself on bench/booksim/crossbar72.cfg (a
   72-port crossbar, input-queued router, 8 VCs, uniform traffic at load 0.5): the
   simulated cycles it reports divided by the wall time of the run; bench/booksim/README.md
   names the commit, the build and what was measured on the project machine;
4. the RTL switch at 8 ports driven cycle by cycle by the cocotb differential testbench
   (tb/model/test_switch_exact.py) on Icarus and Verilator, and the model on the very
   same trace: cycles per second and the model-versus-RTL ratio.

The machine is shared: CPU seconds (process time) are printed next to wall seconds, and
the load average first.
Usage: ``.venv/bin/python bench/model_speed.py [--cycles N] [--ref-cycles N]
[--booksim PATH] [--no-rtl]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
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

BOOKSIM_CFG = ROOT / "bench" / "booksim" / "crossbar72.cfg"


def sweep_speed(label, cycles, loads="0.1:1.0:0.1", ports=72):
    cfg = load_config(None, [f"n_ports={ports}", "pattern=uniform", f"loads={loads}",
                             f"cycles={cycles}", f"warmup={cycles // 4}", "drain=0",
                             "seed=1"])
    c0 = time.process_time()
    r = run_sweep(cfg, progress=False)
    cpu = time.process_time() - c0
    pc = r["batch"] * r["cycles_simulated"]
    return {"run": label, "ports": ports, "points": r["batch"],
            "cycles": r["cycles_simulated"], "wall": r["wall_seconds"], "cpu": cpu,
            "pcps_wall": pc / r["wall_seconds"], "pcps_cpu": pc / cpu,
            "sat": max(p["accepted"] for p in r["points"])}


_ONE_POINT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")          # uint64 products wrap by design (de Bruijn scan)
sys.path.insert(0, {root!r})
from fusionfabric.sim.fabric.config import load_config
from fusionfabric.sim.fabric.run import run_sweep
cfg = load_config(None, ["n_ports={n}", "pattern=uniform", "loads=0.5", "cycles={c}",
                         "warmup=0", "drain=0", "seed=1"])
run_sweep(cfg, progress=False) if {warm} else None
c0 = time.process_time()
r = run_sweep(cfg, progress=False)
p = r["points"][0]
print(json.dumps({{"wall": r["wall_seconds"], "cpu": time.process_time() - c0,
                  "cycles": r["cycles_simulated"], "accepted": p["accepted"],
                  "latency_mean": p["latency_mean"]}}))
"""


def one_point(n, cycles, jit):
    """One uniform point at load 0.5 in a subprocess, compiled (``jit``) or interpreted."""
    env = dict(os.environ)
    if jit:
        env.pop("NUMBA_DISABLE_JIT", None)
    else:
        env["NUMBA_DISABLE_JIT"] = "1"
    code = _ONE_POINT.format(root=str(ROOT), n=n, c=cycles, warm=bool(jit))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["cps_wall"] = r["cycles"] / r["wall"]
    return r


def booksim_speed(binary, cfg=BOOKSIM_CFG):
    """Run BookSim 2 on ``cfg``; simulated cycles (its "Time taken is N cycles") per wall
    second of the whole run, and its accepted rate."""
    import resource

    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0 = time.perf_counter()
    proc = subprocess.run([str(binary), str(cfg)], capture_output=True, text=True)
    wall = time.perf_counter() - c0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
    out = proc.stdout
    # BookSim's main returns -1 (status 255) when the simulation succeeds, 0 when it fails
    if proc.returncode not in (0, 255) or "Overall Traffic Statistics" not in out:
        raise RuntimeError(f"BookSim exited with {proc.returncode}: "
                           f"{(proc.stderr or out).strip().splitlines()[-1:]}")
    m = re.findall(r"Time taken is (\d+) cycles", out)
    acc = re.findall(r"Accepted flit rate average = ([0-9.]+)", out)
    if not m:
        raise RuntimeError("BookSim printed no 'Time taken is N cycles'")
    cycles = int(m[-1])
    return {"cycles": cycles, "wall": wall, "cpu": cpu, "cps_wall": cycles / wall,
            "cps_cpu": cycles / cpu, "accepted": float(acc[-1]) if acc else None}


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
    ap.add_argument("--ref-cycles", type=int, default=200,
                    help="cycles of the pure-Python reference runs")
    ap.add_argument("--booksim", metavar="PATH", help="BookSim 2 binary to run on "
                    "bench/booksim/crossbar72.cfg")
    ap.add_argument("--no-rtl", action="store_true", help="skip the RTL comparison")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    sweep_speed("warm-up", 200, ports=72)              # compile / load the numba cache first
    rows = [sweep_speed("threads", a.cycles),
            sweep_speed("one point", a.cycles, loads="0.5")]
    print("\n72-port uniform sweep: sweep-point-cycles and port-cycles per second")
    print(f"{'run':<12} {'points':>6} {'cycles':>7} {'wall s':>7} {'cpu s':>7} "
          f"{'pc/s wall':>10} {'pc/s cpu':>10} {'port-c/s wall':>14}")
    for r in rows:
        print(f"{r['run']:<12} {r['points']:>6} {r['cycles']:>7} {r['wall']:>7.2f} "
              f"{r['cpu']:>7.2f} {r['pcps_wall']:>10.0f} {r['pcps_cpu']:>10.0f} "
              f"{r['pcps_wall'] * r['ports']:>14.3g}")

    print(f"\nreference: the same kernel interpreted (NUMBA_DISABLE_JIT=1), one point, "
          f"load 0.5, {a.ref_cycles} cycles")
    print(f"{'ports':>5} {'engine':<12} {'cycles/s':>10} {'port-c/s':>10} {'accepted':>9} "
          f"{'lat_mean':>9}  same")
    for n in (8, 72):
        ref = one_point(n, a.ref_cycles, jit=False)
        jit = one_point(n, a.ref_cycles, jit=True)
        same = ref["accepted"] == jit["accepted"] and ref["latency_mean"] == jit["latency_mean"]
        for name, r in (("pure Python", ref), ("numba", jit)):
            print(f"{n:>5} {name:<12} {r['cps_wall']:>10.0f} {r['cps_wall'] * n:>10.3g} "
                  f"{r['accepted']:>9.4f} {r['latency_mean']:>9.3f}  {same}")
        print(f"{n:>5} numba / pure Python = {jit['cps_wall'] / ref['cps_wall']:,.0f}x "
              f"(short run: the numba figure includes per-chunk set-up)")
    if a.booksim:
        try:
            b = booksim_speed(a.booksim)
            print(f"\nBookSim 2 ({a.booksim}, {BOOKSIM_CFG.relative_to(ROOT)}): "
                  f"{b['cycles']} cycles in {b['wall']:.2f} s wall, {b['cpu']:.2f} s CPU = "
                  f"{b['cps_wall']:,.0f} cycles/s wall ({b['cps_wall'] * 72:.3g} "
                  f"port-cycles/s), {b['cps_cpu']:,.0f} per CPU second; accepted "
                  f"{b['accepted']}")
            print(f"model one point / BookSim = {rows[1]['pcps_wall'] / b['cps_wall']:.1f}x "
                  f"wall, {rows[1]['pcps_cpu'] / b['cps_cpu']:.1f}x CPU; model threads "
                  f"(10 points) / BookSim = {rows[0]['pcps_wall'] / b['cps_wall']:.1f}x wall")
        except Exception as exc:  # report, do not hide
            print(f"BookSim: failed: {str(exc).splitlines()[0]}")
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
