"""One sweep four ways, side by side in one run: in-process (numba threads over the batch,
then one thread) and as Ray tasks on a local Ray with 1 and with N workers
(sim/fabric/cluster.py). Prints wall times, speedups against the in-process run, the
Ray start time, and whether every run gives the in-process numbers exactly.

    .venv/bin/python bench/cluster_sweep.py                      # 72 ports, 10 loads, 5,000 cycles
    .venv/bin/python bench/cluster_sweep.py --ports 16 --cycles 20000 --workers 2

A Ray run is timed twice on the same Ray: first on fresh worker processes (each imports
the model and loads numba's cached kernel), then again on the warm workers. The machine's
load average is printed with the figures; on a shared machine they vary run to run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _die(msg: str) -> None:
    print(f"cluster_sweep: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", type=int, default=72)
    ap.add_argument("--loads", default="0.1:1.0:0.1")
    ap.add_argument("--cycles", type=int, default=5000)
    ap.add_argument("--pattern", default="uniform")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    try:
        a = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and 2
    if a.workers < 1:
        _die(f"--workers {a.workers} must be at least 1")

    from fusionfabric.sim.fabric.config import ConfigError, load_config
    try:
        cfg = load_config(None, [f"switch.n_ports={a.ports}", f"run.loads={a.loads}",
                                 f"run.cycles={a.cycles}", f"traffic.pattern={a.pattern}",
                                 f"run.seed={a.seed}"])
    except ConfigError as exc:
        _die(str(exc))
    try:
        import ray
    except ImportError:
        _die("Ray is not installed: pip install 'fusionfabric[cluster]'")
    import numba

    from fusionfabric.sim.fabric.cluster import run_study
    from fusionfabric.sim.fabric.run import run_sweep
    from fusionfabric.sim.fabric.stats import to_json

    def numbers(r):
        drop = ("wall_seconds", "point_cycles_per_second", "port_cycles_per_second",
                "study", "fabric")
        return json.loads(to_json({k: v for k, v in r.items() if k not in drop}))

    # compile (or load) both kernels first: no run below pays numba's compilation
    warm = load_config(None, [f"switch.n_ports={a.ports}", "run.cycles=20", "run.loads=0.5"])
    run_sweep(warm, progress=False)
    run_sweep(load_config(None, [f"switch.n_ports={a.ports}", "run.cycles=20",
                                 "run.loads=0.2,0.4,0.6,0.8"]), progress=False)

    rows = []

    def timed(name, fn):
        t0 = time.perf_counter()
        r = fn()
        rows.append((name, time.perf_counter() - t0, r))
        return r

    threads = numba.get_num_threads()
    ref = timed(f"in-process batch, numba {threads} threads", lambda: run_sweep(
        cfg, progress=False))
    ref.pop("fabric")
    numba.set_num_threads(1)
    timed("in-process batch, numba 1 thread", lambda: run_sweep(cfg, progress=False))
    numba.set_num_threads(threads)

    starts = []
    for n in sorted({1, a.workers}):
        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=n, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        starts.append((n, time.perf_counter() - t0))
        timed(f"Ray, {n} worker(s), fresh workers", lambda: run_study(
            cfg, executor="ray", workers=n))
        timed(f"Ray, {n} worker(s), warm workers", lambda: run_study(
            cfg, executor="ray", workers=n))
        ray.shutdown()

    points = len(ref["points"])
    load = os.getloadavg()
    print(f"# {a.pattern} on {a.ports} ports, {points} points x {a.cycles} sample cycles "
          f"(up to {ref['cycles_simulated']} simulated), seed {a.seed}; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    for n, s in starts:
        print(f"# ray.init with {n} CPU(s): {s:.1f} s (not included below)")
    base = rows[0][1]
    print(f"{'run':<42} {'wall s':>8} {'vs first':>8}  identical")
    for name, wall, r in rows:
        same = numbers(r) == numbers(ref)
        print(f"{name:<42} {wall:>8.2f} {base / wall:>7.2f}x  {'yes' if same else 'NO'}")
    return 0 if all(numbers(r) == numbers(ref) for _, _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
