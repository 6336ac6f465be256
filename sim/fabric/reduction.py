"""Behavioural timing of an in-switch all-reduce through per-port reduction units.

Follows the integration plan of docs/switch.md and the unit of rtl/reduce/unit.py:

1. every rank streams its ``m`` contribution flits (REDUCE, one per chunk) at ``rho``
   flits per cycle, chunk order rotated by rank (rank i sends chunk ``(k + i) mod m`` as
   its k-th flit), so that the ranks address different units at the same time;
2. chunk c goes to unit ``c mod n``, arriving ``hop`` cycles after it is sent; a unit
   accepts one contribution per cycle (in arrival order);
3. the result is ready ``latency(n) = n + 5 + 5 ceil(log2 n)`` cycles after the chunk's
   last contribution (``ReductionUnit.latency``);
4. the unit replicates the result to the n members one copy per cycle, lowest member
   first, like the switch's multicast ingress;
5. each output takes one flit per cycle (copies from several units queue, oldest first)
   and delivers it ``hop`` cycles later.

Every stage is a queue served one item per cycle, computed in closed form per queue
(``start_j = max(ready_j, start_{j-1} + service)``, i.e. a running maximum of
``ready_j - j * service``), vectorized with numpy: no per-cycle loop. Messages above
``max_flits`` flits per rank are simulated at ``max_flits`` and extended at the steady
rate measured over the second half of that run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["switch_allreduce_cycles", "reduce_unit_latency"]


def reduce_unit_latency(n: int) -> int:
    """rtl/reduce/unit.py ``ReductionUnit.latency(k=n)`` for an n-member chunk on n ports
    (the one formula lives in :func:`fusionfabric.sim.reduce.unit_latency`)."""
    from fusionfabric.sim.reduce import unit_latency

    return unit_latency(n, n)


def _serve(ready: np.ndarray, service: int) -> np.ndarray:
    """Start times of jobs (already in service order) at one server, ``service`` cycles
    each, none starting before its ready time."""
    k = np.arange(ready.size, dtype=np.int64) * service
    return np.maximum.accumulate(ready - k) + k


def _grouped_serve(key: np.ndarray, ready: np.ndarray, service: int) -> np.ndarray:
    """:func:`_serve` per server ``key``, jobs ordered by (ready time, arrival index)."""
    order = np.lexsort((np.arange(ready.size), ready, key))
    k_sorted, r_sorted = key[order], ready[order]
    first = np.r_[True, k_sorted[1:] != k_sorted[:-1]]
    seg_start = np.maximum.accumulate(np.where(first, np.arange(k_sorted.size), 0))
    idx = (np.arange(k_sorted.size) - seg_start).astype(np.int64) * service
    # running max restarted at each segment: offset each segment by a large constant
    big = np.int64(1) << 40
    seg_id = np.cumsum(first) - 1
    v = r_sorted - idx + seg_id * big
    start_sorted = np.maximum.accumulate(v) - seg_id * big + idx
    out = np.empty_like(start_sorted)
    out[order] = start_sorted
    return out


def _simulate(n: int, m: int, rho: float, hop: int) -> tuple[int, np.ndarray]:
    ranks = np.arange(n)
    chunks = np.arange(m)
    # send time of rank i's contribution to chunk c: position (c - i) mod m, paced by rho
    pos = (chunks[None, :] - ranks[:, None]) % m
    send = np.floor(pos / rho).astype(np.int64)
    arrive = (send + hop).reshape(-1)
    chunk = np.broadcast_to(chunks[None, :], (n, m)).reshape(-1)
    unit = chunk % n
    accepted = _grouped_serve(unit, arrive, 1)
    done = np.zeros(m, np.int64)
    np.maximum.at(done, chunk, accepted)
    ready = done + reduce_unit_latency(n)
    # replication: per unit, results in ready order, n copies each (one per cycle)
    rep_start = _grouped_serve(chunks % n, ready, n)
    copy_time = (rep_start[:, None] + ranks[None, :]).reshape(-1)   # lowest member first
    out_port = np.broadcast_to(ranks[None, :], (m, n)).reshape(-1)
    out_time = _grouped_serve(out_port, copy_time, 1)
    deliver = out_time + hop
    return int(deliver.max()) + 1, deliver


def switch_allreduce_cycles(n: int, m: int, rho: float = 1.0, hop: int = 2,
                            max_flits: int = 1 << 14) -> int:
    """Cycles from the first contribution sent to the last result delivered."""
    if m < 1 or n < 2:
        raise ValueError(f"need m >= 1 flits and n >= 2 ranks (got m={m}, n={n})")
    if not 0 < rho <= 1:
        raise ValueError(f"rho={rho} must be in (0, 1]")
    if m <= max_flits:
        return _simulate(n, m, rho, hop)[0]
    half = max_flits // 2
    t_full = _simulate(n, max_flits, rho, hop)[0]
    t_half = _simulate(n, half, rho, hop)[0]
    per_flit = (t_full - t_half) / (max_flits - half)
    return int(round(t_full + (m - max_flits) * per_flit))
