"""All-reduce and all-to-all on the fabric: ring or through the switch's reduction units.

Time is built from cycle-model measurements, NCCL-style bandwidths from the time:

* the steady-state rate ``rho`` (flits per cycle per port) and the zero-load hop latency
  ``l`` of the pattern each algorithm puts on the switch are *measured* with the cycle
  model (:mod:`fusionfabric.sim.fabric.run`), with the configured switch and links (credits and
  framing slots lower ``rho``; link latency raises ``l``);
* ``m = ceil(bytes / payload_bytes)`` flits per rank.

With ports of different rates (``link.ports``) ``rho`` is the *slowest* port's delivered
rate with every source saturated (``traffic.own_rate = false``): the ranks advance step by step
together, so the slowest member bounds the ring and the all-to-all.

``allreduce --algo ring``
    2(n-1) steps of ``ceil(m/n)`` flits to the next rank (ring pattern), flit-level
    cut-through between steps: ``T = 2(n-1) ceil(m/n) / rho_ring + 2(n-1) + l``
    (one cycle per step to turn a received flit around).
``allreduce --algo switch``
    every rank streams its ``m`` flits once as REDUCE contributions (chunk c to unit
    ``c mod n``, rotated order), units reduce (``latency(n) = n + 5 + 5 ceil(log2 n)``,
    rtl/reduce/unit.py) and replicate each result to the members one copy per cycle,
    outputs take one flit per cycle: the queueing behaviour is simulated by
    :mod:`fusionfabric.sim.fabric.reduction` with ``rho`` and a one-way hop of ``l // 2 + 1`` cycles.
    This part is behavioural: the reduction units are not yet integrated in the RTL
    switch (``reduce=True`` is rejected there).
``alltoall``
    ``(n-1)`` blocks of ``ceil(m/n)`` flits, rotating destinations (alltoall pattern):
    ``T = (n-1) ceil(m/n) / rho_a2a + l``.

Physical time. ``cycles`` above count flit times (one model cycle = one flit time, 8.9 ps
at 1.8 TB/s), where the switch's pipeline is a couple of flit times and there is no SerDes,
PCS, FEC or cable. The reported ``seconds`` therefore replace the model's own latency
terms (``l``; for the switch algorithm the two hops and the unit latency) by the physical
latencies of :func:`~fusionfabric.sim.fabric.phys.hop_latency`, once per dependent
traversal of the algorithm:

* ring all-reduce: each of the 2(n-1) steps waits for the previous step's first flit to
  cross one accelerator-to-accelerator path: ``2(n-1) x path_ns``;
* all-to-all: one path (the blocks to different peers overlap);
* in-switch all-reduce: link in, switch, the unit's ``latency(n)`` RTL cycles, switch,
  link out: ``2 link_ns + 2 switch_ns + latency(n) / clock``.

``seconds = (cycles - model latency cycles) x flit time + physical latency``; ``model_seconds
= cycles x flit time`` is the figure without the physical latencies. No software, kernel
launch or synchronisation cost is included.

NCCL definitions: ``algbw = bytes / time``; all-reduce ``busbw = algbw x 2(n-1)/n``;
all-to-all ``busbw = algbw x (n-1)/n``.

With ``--dtype``, one chunk of random data is also reduced both ways with
:mod:`fusionfabric.sim.reduce` (bit patterns): the ring's fixed rank order and the switch's
deterministic tree, each run twice, to report that each is reproducible bit for bit and
how far apart the two orders land (in ulps).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from .config import Config, max_iterations
from .phys import hop_latency, port_rate
from .reduction import reduce_unit_latency, switch_allreduce_cycles
from .run import run_sweep

__all__ = ["collective", "measure_pattern", "reduce_unit_latency", "DTYPES"]

DTYPES = ("bf16", "fp16", "fp32", "int32", "uint32")


_MEASURED: dict[str, tuple[float, float]] = {}


def measure_pattern(cfg: Config, pattern: str, cycles: int = 2000) -> tuple[float, float]:
    """Steady-state throughput at offered load 1.0 and zero-load latency of a pattern
    (memoized per configuration, pattern and cycles)."""
    key = repr((cfg.as_dict(), pattern, cycles))
    if key not in _MEASURED:
        _MEASURED[key] = _measure(cfg, pattern, cycles)
    return _MEASURED[key]


def _measure(cfg: Config, pattern: str, cycles: int) -> tuple[float, float]:
    c = copy.deepcopy(cfg)
    c.traffic.pattern = pattern
    c.traffic.packet_size = 1
    c.run.cycles, c.run.warmup, c.run.drain, c.run.seeds = cycles, cycles // 4, 0, 1
    c.run.loads = "1.0"
    c.traffic.own_rate = False       # every source saturated, a slower one backs up
    pt = run_sweep(c, progress=False)["points"][0]
    # ports of different rates (link.ports): every rank moves in step with the others, so
    # the slowest port's delivered rate bounds the collective, not the mean
    rho = min(pt["per_port"]["accepted"]) if cfg.link.ports else pt["accepted"]
    c.run.loads = "0.01"
    c.run.drain = cycles
    lat = run_sweep(c, progress=False)["points"][0]["latency_p50"]
    return rho, lat


def _numerics(n: int, dtype: str, seed: int) -> dict:
    from fusionfabric.sim import reduce as red
    from fusionfabric.formats.switch import Dtype, Op

    dt = {"bf16": Dtype.BF16, "fp16": Dtype.FP16, "fp32": Dtype.FP32,
          "int32": Dtype.INT32, "uint32": Dtype.UINT32}[dtype]
    rng = np.random.default_rng(seed)
    contribs = red.random_bits(rng, dt, (n, 256), special=0.0)
    tree = red.reduce_bits(contribs, dt, Op.SUM)
    tree2 = red.reduce_bits(contribs.copy(), dt, Op.SUM)
    # ring: rank order 0, 1, ..., n-1, accumulated in fp32 for fp16/bf16 (acc::f32)
    acc = red.widen(contribs[0], dt)
    for r in contribs[1:]:
        acc = red.combine(acc, red.widen(r, dt), Dtype.FP32 if dt in (
            Dtype.FP16, Dtype.BF16) else dt, Op.SUM)
    ring = red.narrow(acc, dt) if dt in (Dtype.FP16, Dtype.BF16) else acc
    ring = np.asarray(ring).astype(tree.dtype)
    if dt in (Dtype.INT32, Dtype.UINT32):
        ulps = int(np.max(np.abs(ring.astype(np.int64) - tree.astype(np.int64))))
    else:
        # distance in representable steps (sign-magnitude to a monotone integer line)
        bits = 16 if dt in (Dtype.FP16, Dtype.BF16) else 32
        def line(x):
            x = x.astype(np.int64)
            sign = x >> (bits - 1)
            mag = x & ((1 << (bits - 1)) - 1)
            return np.where(sign == 1, -mag, mag)
        ulps = int(np.max(np.abs(line(ring) - line(tree))))
    return {"dtype": dtype, "elements": int(contribs.shape[1]),
            "switch_tree_reproducible": bool(np.array_equal(tree, tree2)),
            "ring_vs_switch_max_ulps": ulps,
            "ring_vs_switch_identical": bool(np.array_equal(ring, tree))}


def collective(cfg: Config, op: str, nbytes: int, algo: str, dtype: str | None = None,
               measure_cycles: int = 2000) -> dict:
    n = cfg.switch.n_ports
    if op not in ("allreduce", "alltoall"):
        raise ValueError(f"collective {op!r} is not allreduce or alltoall")
    if algo not in ("ring", "switch"):
        raise ValueError(f"--algo {algo!r} is not ring or switch")
    if op == "alltoall" and algo == "switch":
        raise ValueError("alltoall has no switch algorithm (use --algo ring: the direct "
                         "pairwise exchange is what the switch does)")
    if nbytes < 1:
        raise ValueError(f"--bytes {nbytes} must be positive")
    rate = port_rate(cfg.phys)
    hop_ns = hop_latency(cfg.phys)
    m = math.ceil(nbytes / cfg.phys.payload_bytes)
    block = math.ceil(m / n)
    if op == "allreduce" and algo == "ring":
        rho, lat = measure_pattern(cfg, "ring", measure_cycles)
        cycles = 2 * (n - 1) * block / rho + 2 * (n - 1) + lat
        factor = 2 * (n - 1) / n
        model_lat = lat
        phys_lat_ns = 2 * (n - 1) * hop_ns.path_ns
        detail = {"pattern": "ring", "rho": rho, "hop_latency": lat, "steps": 2 * (n - 1),
                  "flits_per_step": block}
    elif op == "allreduce":
        rho, lat = measure_pattern(cfg, "ring", measure_cycles)  # the link's own limits
        unit = reduce_unit_latency(n)
        hop = int(lat) // 2 + 1
        cycles = switch_allreduce_cycles(n, m, rho, hop)
        model_lat = 2 * hop + unit
        phys_lat_ns = 2 * hop_ns.link_ns + 2 * hop_ns.switch_ns + hop_ns.cycles_ns(unit)
        factor = 2 * (n - 1) / n
        detail = {"pattern": "contributions to units c mod n, results replicated",
                  "rho": rho, "hop_latency": lat, "unit_latency": unit,
                  "behavioural": True}
    else:
        rho, lat = measure_pattern(cfg, "alltoall", measure_cycles)
        cycles = (n - 1) * block / rho + lat
        model_lat = lat
        phys_lat_ns = hop_ns.path_ns
        factor = (n - 1) / n
        detail = {"pattern": "alltoall", "rho": rho, "hop_latency": lat,
                  "flits_per_peer": block}
    model_seconds = cycles * rate.cycle_s
    phys_latency_s = phys_lat_ns * 1e-9
    seconds = max(cycles - model_lat, 0.0) * rate.cycle_s + phys_latency_s
    algbw = nbytes / seconds
    out = {
        "op": op, "algo": algo, "n_ports": n, "bytes": nbytes, "flits_per_rank": m,
        "cycles": cycles, "seconds": seconds, "model_seconds": model_seconds,
        "phys_latency_s": phys_latency_s, "model_latency_cycles": model_lat,
        "hop_latency_ns": hop_ns.as_dict(), "algbw_GBps": algbw / 1e9,
        "busbw_GBps": algbw * factor / 1e9, "busbw_factor": factor,
        "link_GBps_per_direction": rate.payload_Bps / 1e9,
        "busbw_over_link": algbw * factor / rate.payload_Bps,
        "iterations": cfg.switch.iterations or min(3, max_iterations(n)),
        "seed": cfg.run.seed, **detail,
    }
    if dtype:
        if dtype not in DTYPES:
            raise ValueError(f"--dtype {dtype!r} is not one of: {', '.join(DTYPES)}")
        if op == "allreduce":
            out["numerics"] = _numerics(n, dtype, cfg.run.seed)
    return out
