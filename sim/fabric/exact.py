"""Trace-driven runs for exactness checks: packets in, every departure out.

A trace is a list of packets ``(cycle, src, dest, size, kind)`` or ``(cycle, src, dest,
size, kind, chunk)``: from ``cycle`` on, the packet's flits are offered on ``i_port[src]``
back to back, behind the earlier packets of the same source (``kind`` 0 unicast, 1
multicast to group ``dest``, 2 REDUCE and 3 RESULT to group ``dest``; flit ``f`` of a
reduction packet carries chunk ``chunk + f``, 0..255 in the model). A RESULT flit that a
reduction unit sends is logged with ``seq`` = ``RESULT_TAG | group << 16 | chunk`` and
``flit`` 0 (:mod:`fusionfabric.sim.fabric.kernel`).
The same trace drives the RTL testbench (tb/model/), and both sides log every
``o_port`` handshake as ``(cycle, out, src, seq, flit)`` where ``seq`` numbers a source's
packets from 0 in trace order and ``flit`` is the flit's index in its packet.
"""

from __future__ import annotations

import numpy as np

from .config import LinkParams, SwitchParams
from .engine import Fabric

__all__ = ["run_trace", "random_trace", "first_divergence", "ready_pattern"]


def _dense(packets, n, cycles):
    gdest = np.full((1, cycles, n), -1, np.int64)
    gsize = np.zeros((1, cycles, n), np.int64)
    gkind = np.zeros((1, cycles, n), np.int64)
    last = {}
    for pk in sorted(packets, key=lambda p: (p[1], p[0])):
        cyc, src, dest, size, kind = pk[:5]
        c = max(int(cyc), last.get(src, -1) + 1)   # same-cycle packets: next cycles
        if c >= cycles:
            raise ValueError(f"packet at cycle {cyc} from {src} does not fit in {cycles}")
        last[src] = c
        if kind >= 2 and len(pk) > 5:       # a reduction packet's first chunk
            chunk = int(pk[5])
            if not (0 <= chunk and chunk + size <= 256):
                raise ValueError(f"chunks {chunk}..{chunk + size - 1} of a packet from "
                                 f"{src} are outside 0..255 (the model's chunk field)")
            dest = int(dest) | chunk << 8
        gdest[0, c, src], gsize[0, c, src], gkind[0, c, src] = dest, size, kind
    return gdest, gsize, gkind


def run_trace(switch: SwitchParams, packets, cycles: int, *, link: LinkParams | None = None,
              ready=None, groups=None, fabric_out: list | None = None, port_lanes=None,
              full_lanes: int | None = None):
    """Run one trace; return the departures as ``(cycle, out, src, seq, flit)`` tuples.

    ``ready``: optional ``(cycles, n_ports)`` bool array, ``o_port`` ready per cycle.
    ``port_lanes`` / ``full_lanes``: ports of different rates (:class:`Fabric`).
    """
    n = switch.n_ports
    gdest, gsize, gkind = _dense(packets, n, cycles)
    fab = Fabric(switch, link or LinkParams(), 1, groups=groups, log=True,
                 log_capacity=max(1024, 4 * int(gsize.sum()) * n),
                 src_queue=max(16, len(packets) + 1), port_lanes=port_lanes,
                 full_lanes=full_lanes)
    rdy = None if ready is None else np.asarray(ready, bool)[None, :cycles]
    fab.step(gdest, gsize, gkind, rdy)
    if fabric_out is not None:
        fabric_out.append(fab)
    return fab.departures().rows(0)


def ready_pattern(rng, cycles, n, p_stall):
    """A seeded random output-ready pattern (stall with probability ``p_stall``)."""
    return rng.random((cycles, n)) >= p_stall


def random_trace(rng, n, packets, span, *, max_size=4, multicast_groups=0, p_bad=0.0):
    """A random trace: ``packets`` packets over ``span`` cycles, sizes 1..max_size,
    optional multicast to groups ``0..multicast_groups-1`` and a fraction ``p_bad`` of
    packets that the switch must drop (bad destination, invalid group, reduction kind)."""
    out = []
    for _ in range(packets):
        cyc = int(rng.integers(0, span))
        src = int(rng.integers(0, n))
        size = int(rng.integers(1, max_size + 1))
        kind, dest = 0, int(rng.integers(0, n))
        u = rng.random()
        if multicast_groups and u < 0.2:
            kind, dest = 1, int(rng.integers(0, multicast_groups))
        elif u > 1 - p_bad:
            kind, dest = [(0, n + int(rng.integers(0, 256 - n))), (1, 200), (2, 0)][
                int(rng.integers(0, 3))]
        out.append((cyc, src, dest, size, kind))
    return out


def first_divergence(a, b):
    """Index and both rows of the first difference between two departure lists."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k, x, y
    if len(a) != len(b):
        k = min(len(a), len(b))
        return k, (a[k] if k < len(a) else None), (b[k] if k < len(b) else None)
    return None
