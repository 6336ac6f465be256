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

On a two-tier Clos (``topology.kind = "clos"``) the ranks are its ``n`` endpoints. The ring
and the all-to-all measure ``rho`` and ``l`` on the Clos itself (the cycle kernel's Clos,
with its routing). ``--algo switch`` is the in-network all-reduce across the tiers:
reduced at the leaf, then at spine ``c mod S``, multicast down
(:func:`~fusionfabric.sim.fabric.reduction.clos_allreduce_cycles`), with ``hop`` measured on
one leaf as a single switch of ``E + S`` ports and ``hop2 = hop - link.latency +
topology.link_latency`` from a leaf's unit to a spine's.

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

On a Clos of more than one leaf the path is the longest one, across the spines (4 links,
3 switch traversals), for the ring and the all-to-all, and the in-network all-reduce pays
4 links, 4 switch traversals and both units: ``4 link_ns + 4 switch_ns + (latency(E, E +
S) + latency(L, L)) / clock``.

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

from fusionfabric.sim.reduce import unit_latency

from .config import Config, max_iterations
from .phys import hop_latency, port_rate
from .reduction import clos_allreduce_cycles, reduce_unit_latency, switch_allreduce_cycles
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


def _numerics(n: int, dtype: str, seed: int, leaf: int | None = None) -> dict:
    from fusionfabric.sim import reduce as red
    from fusionfabric.formats.switch import Dtype, Op

    dt = {"bf16": Dtype.BF16, "fp16": Dtype.FP16, "fp32": Dtype.FP32,
          "int32": Dtype.INT32, "uint32": Dtype.UINT32}[dtype]
    rng = np.random.default_rng(seed)
    contribs = red.random_bits(rng, dt, (n, 256), special=0.0)
    # the switch's order: one tree, or leaf trees then the spine's tree in a Clos
    tree = red.reduce_bits_tiers(contribs, dt, Op.SUM, leaf or n)
    tree2 = red.reduce_bits_tiers(contribs.copy(), dt, Op.SUM, leaf or n)
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


def _leaf_config(cfg: Config) -> Config:
    """One leaf of the Clos as a single switch (its ``E + S`` ports, the ``[switch]`` and
    endpoint ``[link]`` parameters): the endpoint-to-unit hop of the in-network
    all-reduce is measured on it."""
    t = cfg.topology
    c = copy.deepcopy(cfg)
    c.topology.kind = "crossbar"
    c.switch.n_ports = t.endpoints_per_leaf + t.spines
    c.switch.iterations = min(cfg.switch.iterations or 3, max_iterations(c.switch.n_ports))
    return c


def collective(cfg: Config, op: str, nbytes: int, algo: str, dtype: str | None = None,
               measure_cycles: int = 2000) -> dict:
    n = cfg.endpoints
    clos = cfg.topology.kind == "clos"
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
    E, L, S = ((cfg.topology.endpoints_per_leaf, cfg.topology.leaves, cfg.topology.spines)
               if clos else (n, 1, 0))
    # the longest accelerator-to-accelerator path: across the spine tier in a Clos of
    # more than one leaf (4 links, 3 switch traversals), else one switch
    path_ns = (4 * hop_ns.link_ns + 3 * hop_ns.switch_ns) if L > 1 else hop_ns.path_ns
    if op == "allreduce" and algo == "ring":
        rho, lat = measure_pattern(cfg, "ring", measure_cycles)
        cycles = 2 * (n - 1) * block / rho + 2 * (n - 1) + lat
        factor = 2 * (n - 1) / n
        model_lat = lat
        phys_lat_ns = 2 * (n - 1) * path_ns
        detail = {"pattern": "ring", "rho": rho, "hop_latency": lat, "steps": 2 * (n - 1),
                  "flits_per_step": block}
    elif op == "allreduce" and not clos:
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
    elif op == "allreduce":
        # reduce at the leaf, then at spine c mod S, multicast down (reduction.py)
        rho, lat = measure_pattern(_leaf_config(cfg), "ring", measure_cycles)
        hop = int(lat) // 2 + 1
        hop2 = hop - cfg.link.latency + cfg.topology.link_latency
        unit_leaf = unit_latency(E, E + S)
        unit_spine = unit_latency(L, L) if L > 1 else 0
        cycles = clos_allreduce_cycles(E, L, S, m, rho, hop, hop2,
                                       max_flits=max(512, (1 << 22) // n))
        if L > 1:
            model_lat = 2 * hop + 2 * hop2 + unit_leaf + unit_spine
            phys_lat_ns = (4 * hop_ns.link_ns + 4 * hop_ns.switch_ns
                           + hop_ns.cycles_ns(unit_leaf + unit_spine))
        else:
            model_lat = 2 * hop + unit_leaf
            phys_lat_ns = 2 * hop_ns.link_ns + 2 * hop_ns.switch_ns + hop_ns.cycles_ns(
                unit_leaf)
        factor = 2 * (n - 1) / n
        detail = {"pattern": "reduced at the leaf (unit c mod E), at spine c mod S, "
                  "multicast down", "rho": rho, "hop_latency": lat, "hop": hop,
                  "hop2": hop2, "unit_latency": unit_leaf + unit_spine,
                  "unit_latency_leaf": unit_leaf, "unit_latency_spine": unit_spine,
                  "behavioural": True}
    else:
        rho, lat = measure_pattern(cfg, "alltoall", measure_cycles)
        cycles = (n - 1) * block / rho + lat
        model_lat = lat
        phys_lat_ns = path_ns
        factor = (n - 1) / n
        detail = {"pattern": "alltoall", "rho": rho, "hop_latency": lat,
                  "flits_per_peer": block}
    if clos:
        detail["topology"] = {"kind": "clos", "leaves": L, "endpoints_per_leaf": E,
                              "spines": S, "routing": cfg.topology.routing,
                              "oversubscription": cfg.topology.oversubscription}
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
        "iterations": cfg.switch.iterations or min(3, max_iterations(E + S if clos else n)),
        "seed": cfg.run.seed, **detail,
    }
    if dtype:
        if dtype not in DTYPES:
            raise ValueError(f"--dtype {dtype!r} is not one of: {', '.join(DTYPES)}")
        if op == "allreduce":
            out["numerics"] = _numerics(n, dtype, cfg.run.seed, E)
    return out
