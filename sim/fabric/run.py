"""Run a configuration: a sweep of offered loads (x seeds) as one batch of switches.

:func:`run_sweep` simulates one rack: every point uses the same MoE expert placement
(``traffic.placement_seed``, default the run seed). :func:`run_placements` repeats the
sweep for ``K`` placements (seeds ``s, s+1, ..., s+K-1``) and reports the spread of the
accepted throughput per load and each placement's output-bound throughput.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .config import Config, parse_loads
from .engine import Fabric
from .stats import kind_stats, point_stats, sweep_summary
from .traffic import load_trace, make_generator, output_bound, point_rng, resolve_placement_seed

__all__ = ["run_sweep", "run_placements", "CHUNK"]

#: Cycles per kernel call (traffic is generated one chunk ahead of the kernel).
CHUNK = 2048


def _progress(total: int, enabled: bool | None):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="cyc", file=sys.stderr, leave=False)


def run_sweep(cfg: Config, *, progress: bool | None = None, log: bool = False,
              points: list[tuple[float, int]] | None = None) -> dict:
    """Simulate every (load, seed index) point of ``cfg`` together; return the results.

    ``points``: simulate only these ``(load, seed index)`` points (loads as
    :func:`~fusionfabric.sim.fabric.config.parse_loads` gives them), e.g. one point per
    task on a cluster (:mod:`fusionfabric.sim.fabric.cluster`). Each point's statistics
    are taken at its own end of run (the first chunk boundary after the sample period at
    which all its sampled packets are delivered, or the drain limit), so a point's result
    does not depend on the other points of the batch.

    The result holds the configuration, the seed, the placement seed, the kernel
    (``engine``: numba), wall time, simulated cycles and sweep-point-cycles per second,
    one dict per point (see :mod:`fusionfabric.sim.fabric.stats`), the saturation summary
    and ``output_bound``: the accepted throughput at which the hottest output saturates
    under the pattern's law (:func:`~fusionfabric.sim.fabric.traffic.output_bound`;
    ``None`` for a trace).
    """
    if cfg.topology.kind == "clos":          # a two-tier Clos of these switches
        from .clos import run_clos_sweep
        return run_clos_sweep(cfg, progress=progress, log=log, points=points)
    sw, run, tr = cfg.switch, cfg.run, cfg.traffic
    n = sw.n_ports
    loads = parse_loads(run.loads) if tr.pattern != "trace" else [1.0]
    points = ([(load, k) for k in range(run.seeds) for load in loads] if points is None
              else [(float(load), int(k)) for load, k in points])
    B = len(points)
    warm = run.warmup if run.warmup >= 0 else run.cycles // 4
    drain = run.drain if run.drain >= 0 else run.cycles
    w0, w1 = warm, warm + run.cycles
    trace = load_trace(tr.trace_file, n) if tr.pattern == "trace" else None
    pseed = resolve_placement_seed(tr, run.seed)
    ports = cfg.port_table()            # parses link.ports (validated by load_config)
    lanes = [l for _, l in ports]
    kinds = [kind for kind, _ in ports]
    mixed = bool(cfg.link.ports)
    rates = np.array(lanes, float) / cfg.phys.lanes if mixed and tr.own_rate else None
    gens = [make_generator(tr, n, load, point_rng(run.seed, k, load), trace=trace,
                           placement_seed=pseed, rates=rates, kinds=kinds)
            for load, k in points]
    fab = Fabric(sw, cfg.link, B, window=(w0, w1), src_queue=run.src_queue, log=log,
                 port_lanes=lanes if mixed else None, full_lanes=cfg.phys.lanes)
    bar = _progress(w1 + drain, progress)
    t0 = time.perf_counter()
    t = 0
    from .kernel import S
    ends: dict[int, tuple] = {}   # point -> (cycle, st, hist, latmax) at its own end of run
    while True:
        if t >= w1:
            st = fab.s["st"]
            missing = st[:, :, S["exp_deliv"]].sum(1) - st[:, :, S["lat_cnt"]].sum(1)
            stop = not missing.any() or t >= w1 + drain
            for b in np.flatnonzero((missing == 0) | stop):
                if int(b) not in ends:
                    ends[int(b)] = (t, st[b].copy(), fab.s["hist"][b].copy(),
                                    fab.s["latmax"][b].copy())
            if stop:
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
    from types import SimpleNamespace
    view = SimpleNamespace(n=n, s={"st": np.stack([ends[b][1] for b in range(B)]),
                                   "hist": np.stack([ends[b][2] for b in range(B)]),
                                   "latmax": np.stack([ends[b][3] for b in range(B)])})
    out_points = []
    for b, (load, k) in enumerate(points):
        d = {"load": load, "seed": k}
        d.update(point_stats(view, b, run.cycles))
        d["offered_nominal"] = gens[b].offered
        d["end_cycle"] = ends[b][0]      # the point's own end of run
        if mixed:
            d["per_kind"] = kind_stats(ports, cfg.phys.lanes, d["per_port"])
        out_points.append(d)
    # the popularity law's bound assumes equal ports: not derived for link.ports
    bound = None if mixed else output_bound(tr, n, pseed)
    summary = sweep_summary(out_points)
    for v in summary.values():
        v["output_bound"] = bound
    return {
        "config": cfg.as_dict(),
        "seed": run.seed,
        "placement_seed": pseed,
        "output_bound": bound,
        "engine": "numba",
        "iterations": fab.iterations,
        "window": [w0, w1],
        "cycles_simulated": t,
        "batch": B,
        "wall_seconds": wall,
        "point_cycles_per_second": B * t / wall if wall > 0 else None,
        "points": out_points,
        "summary": summary,
        "fabric": fab,
    }


def run_placements(cfg: Config, placements: int, *, progress: bool | None = None,
                   sweep=None) -> dict:
    """Run the sweep of ``cfg`` for ``placements`` expert placements.

    Placement ``j`` uses placement seed ``s + j`` with ``s`` the configured one (default:
    the run seed); the traffic streams of the points stay those of ``cfg``, so the
    placements differ in where the experts sit and nothing else. Returns ``placements``
    (per placement: its seed, output bound, saturation throughput and accepted throughput
    per load, seed index 0), ``spread`` (per load: min / median / max accepted over the
    placements) and ``output_bound`` (min / median / max over the placements).
    """
    import copy

    sweep = sweep or run_sweep   # ``sweep(cfg, progress=...)``: the cluster passes its own
    if int(placements) < 1:
        raise ValueError(f"placements={placements} must be at least 1")
    base = resolve_placement_seed(cfg.traffic, cfg.run.seed)
    rows, results = [], []
    for j in range(int(placements)):
        c = copy.deepcopy(cfg)
        c.traffic.placement_seed = base + j
        r = sweep(c, progress=progress)
        r.pop("fabric", None)
        pts = sorted((p for p in r["points"] if p["seed"] == 0), key=lambda p: p["load"])
        rows.append({"placement_seed": base + j, "output_bound": r["output_bound"],
                     "saturation_throughput": r["summary"]["0"]["saturation_throughput"],
                     "loads": [p["load"] for p in pts],
                     "accepted": [p["accepted"] for p in pts],
                     "saturated": [p["saturated"] for p in pts],
                     "wall_seconds": r["wall_seconds"]})
        results.append(r)
    loads = rows[0]["loads"]
    acc = np.array([row["accepted"] for row in rows])          # placements x loads
    spread = [{"load": load, "accepted_min": float(acc[:, i].min()),
               "accepted_median": float(np.median(acc[:, i])),
               "accepted_max": float(acc[:, i].max())} for i, load in enumerate(loads)]
    bounds = [row["output_bound"] for row in rows]
    ob = (None if any(b is None for b in bounds) else
          {"min": float(min(bounds)), "median": float(np.median(bounds)),
           "max": float(max(bounds))})
    sat = [row["saturation_throughput"] for row in rows]
    return {
        "config": cfg.as_dict(),
        "seed": cfg.run.seed,
        "placements": rows,
        "spread": spread,
        "output_bound": ob,
        "saturation_throughput": {"min": float(min(sat)), "median": float(np.median(sat)),
                                  "max": float(max(sat))},
        "wall_seconds": sum(r["wall_seconds"] for r in results),
        "iterations": results[0]["iterations"],
    }
