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

:func:`clos_allreduce_cycles` is the same for a two-tier Clos (leaves of ``E`` endpoints,
``S`` spines, ``L`` leaves): reduce at the leaf, then at a spine, then multicast down:

1. as above within each leaf, rank order rotated by the endpoint's port ``p`` on its leaf
   (port ``p`` sends chunk ``(k + p) mod m`` as its k-th flit); chunk c goes to the leaf's
   unit ``c mod E``, which takes one contribution per cycle and has the leaf's partial
   ``latency(E members, E + S ports)`` cycles after the last;
2. the partial goes up uplink ``c mod S`` (one flit per cycle per uplink, in ready order)
   and reaches spine ``c mod S`` ``hop2`` cycles later;
3. the spine's unit ``(c div S) mod L`` takes one partial per cycle; the result is ready
   ``latency(L, L)`` cycles after the last of the ``L`` partials;
4. the spine unit replicates the result to the L leaves one copy per cycle, lowest leaf
   first; each spine output takes one flit per cycle and delivers it ``hop2`` cycles later
   to the leaf's uplink input ``E + (c mod S)``;
5. that input replicates it to the leaf's E endpoints one copy per cycle, lowest port
   first (the multicast ingress: ``E`` cycles per result per uplink input, so a leaf with
   fewer uplinks than endpoints, ``E / S > 1``, cannot deliver a result per cycle to every
   endpoint); each endpoint output takes one flit per cycle, delivered ``hop`` later.

With one leaf there is no spine: the leaf's units replicate their results to the E
members as a single switch does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["switch_allreduce_cycles", "clos_allreduce_cycles", "reduce_unit_latency"]


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


def _clos_simulate(E: int, L: int, S: int, m: int, rho: float, hop: int,
                   hop2: int) -> tuple[int, np.ndarray]:
    from fusionfabric.sim.reduce import unit_latency

    ports = np.arange(E)
    chunks = np.arange(m)
    # stage 1: every leaf's endpoints to the leaf's units, (leaf, port, chunk) order
    pos = (chunks[None, :] - ports[:, None]) % m
    send = np.floor(pos / rho).astype(np.int64)                       # (E, m)
    arrive = np.broadcast_to(send + hop, (L, E, m)).reshape(-1)
    leaf = np.repeat(np.arange(L), E * m)
    chunk = np.tile(chunks, L * E)
    accepted = _grouped_serve(leaf * E + chunk % E, arrive, 1)
    done = np.zeros(L * m, np.int64)
    np.maximum.at(done, leaf * m + chunk, accepted)
    ready_leaf = done + unit_latency(E, E + S)                        # (leaf, chunk)
    if L == 1:
        rep = _grouped_serve(chunks % E, ready_leaf, E)
        copy_time = (rep[:, None] + ports[None, :]).reshape(-1)
        out_port = np.broadcast_to(ports[None, :], (m, E)).reshape(-1)
        deliver = _grouped_serve(out_port, copy_time, 1) + hop
        return int(deliver.max()) + 1, deliver
    # stage 2: up the uplink c mod S, one flit per cycle per (leaf, uplink)
    lc = np.tile(chunks, L)
    ll = np.repeat(np.arange(L), m)
    up = _grouped_serve(ll * S + lc % S, ready_leaf, 1) + hop2
    # stage 3: spine c mod S, unit (c div S) mod L, one partial per cycle
    unit = (lc % S) * L + (lc // S) % L
    acc = _grouped_serve(unit, up, 1)
    done_sp = np.zeros(m, np.int64)
    np.maximum.at(done_sp, lc, acc)
    ready_sp = done_sp + unit_latency(L, L)
    # stage 4: the spine unit's copies to the L leaves, then each spine output port
    rep = _grouped_serve((chunks % S) * L + (chunks // S) % L, ready_sp, L)
    leaves = np.arange(L)
    copy_time = (rep[:, None] + leaves[None, :]).reshape(-1)         # (chunk, leaf)
    c2 = np.repeat(chunks, L)
    l2 = np.tile(leaves, m)
    down = _grouped_serve((c2 % S) * L + l2, copy_time, 1) + hop2
    # stage 5: the leaf's uplink input replicates to its E endpoints, then each output
    rep2 = _grouped_serve(l2 * S + c2 % S, down, E)
    copy2 = (rep2[:, None] + ports[None, :]).reshape(-1)             # (chunk, leaf, port)
    out = (np.repeat(l2, E) * E + np.tile(ports, m * L))
    deliver = _grouped_serve(out, copy2, 1) + hop
    return int(deliver.max()) + 1, deliver


def clos_allreduce_cycles(E: int, L: int, S: int, m: int, rho: float = 1.0, hop: int = 2,
                          hop2: int = 3, max_flits: int = 1 << 14) -> int:
    """Cycles of a two-tier in-network all-reduce (module docstring): ``L`` leaves of ``E``
    endpoints, ``S`` spines, ``m`` flits per rank at ``rho`` flits per cycle, ``hop`` cycles
    endpoint to leaf unit, ``hop2`` leaf unit to spine unit."""
    if m < 1 or E < 1 or L < 1 or S < 1 or E * L < 2:
        raise ValueError(f"need m >= 1 flits, E, L, S >= 1 and 2 ranks or more (got m={m}, "
                         f"E={E}, L={L}, S={S})")
    if not 0 < rho <= 1:
        raise ValueError(f"rho={rho} must be in (0, 1]")
    if m <= max_flits:
        return _clos_simulate(E, L, S, m, rho, hop, hop2)[0]
    half = max_flits // 2
    t_full = _clos_simulate(E, L, S, max_flits, rho, hop, hop2)[0]
    t_half = _clos_simulate(E, L, S, half, rho, hop, hop2)[0]
    per_flit = (t_full - t_half) / (max_flits - half)
    return int(round(t_full + (m - max_flits) * per_flit))
