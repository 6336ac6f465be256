"""Run a configuration: a sweep of offered loads (x seeds) as one batch of switches."""

from __future__ import annotations

import sys
import time

import numpy as np

from .config import Config, parse_loads
from .engine import Fabric
from .stats import point_stats, sweep_summary
from .traffic import load_trace, make_generator, point_rng

__all__ = ["run_sweep", "CHUNK"]

#: Cycles per kernel call (traffic is generated one chunk ahead of the kernel).
CHUNK = 2048


def _progress(total: int, enabled: bool | None):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="cyc", file=sys.stderr, leave=False)


def run_sweep(cfg: Config, *, progress: bool | None = None, log: bool = False) -> dict:
    """Simulate every (load, seed index) point of ``cfg`` together; return the results.

    The result holds the configuration, the seed, the kernel (``engine``: numba), wall
    time, simulated cycles and sweep-point-cycles per second, one dict per point (see
    :mod:`fusionfabric.sim.fabric.stats`) and the saturation summary.
    """
    sw, run, tr = cfg.switch, cfg.run, cfg.traffic
    n = sw.n_ports
    loads = parse_loads(run.loads) if tr.pattern != "trace" else [1.0]
    points = [(load, k) for k in range(run.seeds) for load in loads]
    B = len(points)
    warm = run.warmup if run.warmup >= 0 else run.cycles // 4
    drain = run.drain if run.drain >= 0 else run.cycles
    w0, w1 = warm, warm + run.cycles
    trace = load_trace(tr.trace_file, n) if tr.pattern == "trace" else None
    gens = [make_generator(tr, n, load, point_rng(run.seed, k, load), trace=trace)
            for load, k in points]
    fab = Fabric(sw, cfg.link, B, window=(w0, w1), src_queue=run.src_queue, log=log)
    bar = _progress(w1 + drain, progress)
    t0 = time.perf_counter()
    t = 0
    from .kernel import S
    while True:
        if t >= w1:
            st = fab.s["st"]
            missing = st[:, :, S["exp_deliv"]].sum(1) - st[:, :, S["lat_cnt"]].sum(1)
            if not missing.any() or t >= w1 + drain:
                break
            c = min(CHUNK, w1 + drain - t)
        else:
            c = min(CHUNK, w1 - t)
        chunks = [g.chunk(t, c) for g in gens]
        fab.step(np.stack([x[0] for x in chunks]), np.stack([x[1] for x in chunks]))
        t += c
        if bar is not None:
            bar.update(c)
    wall = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    out_points = []
    for b, (load, k) in enumerate(points):
        d = {"load": load, "seed": k}
        d.update(point_stats(fab, b, run.cycles))
        d["offered_nominal"] = gens[b].offered
        out_points.append(d)
    return {
        "config": cfg.as_dict(),
        "seed": run.seed,
        "engine": "numba",
        "iterations": fab.iterations,
        "window": [w0, w1],
        "cycles_simulated": t,
        "batch": B,
        "wall_seconds": wall,
        "point_cycles_per_second": B * t / wall if wall > 0 else None,
        "points": out_points,
        "summary": sweep_summary(out_points),
        "fabric": fab,
    }
