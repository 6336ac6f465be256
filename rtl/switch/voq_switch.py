"""The VOQ + iSLIP switch: virtual output queues, a combinational iSLIP allocator and
crossbar, credit-based output buffers (docs/switch.md; the cycle-level model in sim/fabric
follows it cycle for cycle)."""

from __future__ import annotations

from amaranth import Array, Cat, Module, Signal

from .common import SwitchBase
from .ingress import Ingress
from .islip import ISLIPAllocator, max_iterations
from .output import OutputSide
from .voq import InputQueue

__all__ = ["VoqSwitch"]


class VoqSwitch(SwitchBase):
    """An ``n_ports`` crossbar with virtual output queues, iSLIP, credits and multicast.

    Each input keeps one queue per output (VOQ); every cycle an iSLIP allocator (McKeown,
    IEEE/ACM ToN 7(2), 1999) matches inputs with outputs that have a credit, and the
    matched head flits cross a combinational crossbar into the output buffers.

    Parameters
    ----------
    n_ports : int
        Ports, 2 … 256.
    data_width : int
        Bits of ``data`` per flit (``fusionfabric.formats.switch.switch_flit``).
    depth : int
        Flits per VOQ (power of two); each input has ``n_ports`` VOQs.
    iterations : int or None
        iSLIP rounds per cycle, 1 … ``max(1, ceil(log2 n_ports))``; None or 0: the
        smaller of 3 and that maximum.
    out_depth : int
        Output buffer slots = credits per output (>= 2 sustains line rate).
    n_groups : int
        Group-table entries (multicast and reduction groups).
    reduce : bool
        Per-port reduction units (``fusionfabric.rtl.reduce.unit``, docs/switch.md).
    n_chunks : int
        Open-chunk slots per reduction unit.

    Members
    -------
    i_port, o_port, i_config, o_credit, o_stats, o_config_drops, o_unit_credit, o_unit_stats
        As :class:`~.common.SwitchBase`.

    Timing
    ------
    Input handshake in cycle t → ``o_port`` valid in t+2 without contention (VOQ write at
    the end of t, then request/grant/transfer in t+1, then the output buffer shows the
    flit in t+2). One flit per cycle per input and per output; a multicast flit to k
    members is accepted after k cycles (one copy per cycle, lowest member first). With
    ``out_depth >= 2`` a single stream runs at line rate. Reset empties all queues, fills
    the credits, clears the iSLIP pointers, locks, the group table and the counters.
    """

    mode = "voq"

    def __init__(self, n_ports: int = 4, data_width: int = 64, depth: int = 16,
                 iterations: int | None = None, out_depth: int = 4, n_groups: int = 16,
                 reduce: bool = False, n_chunks: int = 16, reduce_add_stages: int = 4,
                 reduce_pipeline: bool = False):
        super().__init__(n_ports=n_ports, data_width=data_width, depth=depth,
                         out_depth=out_depth, n_groups=n_groups, reduce=reduce,
                         n_chunks=n_chunks, reduce_add_stages=reduce_add_stages,
                         reduce_pipeline=reduce_pipeline)
        top = max_iterations(n_ports)
        if iterations is None or iterations == 0:
            iterations = min(3, top)
        if not isinstance(iterations, int) or not 1 <= iterations <= top:
            raise ValueError(f"iterations={iterations!r} must be in 1..{top} "
                             f"for n_ports={n_ports}")
        self.iterations = iterations

    # The places where the FIFO baseline (FifoSwitch) differs. ``state`` is a dict, new
    # for each elaboration, where a design keeps signals of one row between the hooks.

    def _queue_width(self) -> int:
        """Bits per queue entry."""
        return self.flit.width

    def _write(self, m, r, q, route, ingress):
        """Ingress of row ``r`` into its queues; drives ``route.port.ready``."""
        write, last_copy = ingress.replicate(m, r, q, route.valid, route.target, route.drop)
        m.d.comb += [q.i_wdata.eq(route.flit),
                     route.port.ready.eq(route.drop | (write & last_copy))]

    def _available(self, m, r, q, state):
        """The outputs row ``r`` has a flit for (before credits and locks)."""
        return q.o_nonempty

    def _pop(self, m, r, q, match, state):
        """Pop row ``r``'s queue on a match (``match``: one-hot over the outputs)."""
        m.d.comb += q.i_pop.eq(match.any())

    def elaborate(self, platform):
        m = Module()
        N = self.n_rows
        fw = self.flit.width
        layout = self.flit.layout()
        ingress = Ingress(self)
        output = OutputSide(self)

        table = ingress.attach_table(m)
        m.submodules.alloc = alloc = ISLIPAllocator(N, self.iterations)
        units = output.attach_units(m)
        queues = []
        for r in range(N):
            q = InputQueue(N, self._queue_width(), self.depth, self.mode)
            m.submodules[f"queue{r}"] = q
            queues.append(q)

        credit = [Signal(range(self.out_depth + 1), init=self.out_depth, name=f"credit{o}")
                  for o in range(N)]
        lock_v = [Signal(name=f"lock_v{o}") for o in range(N)]
        lock_in = [Signal(range(N), name=f"lock_in{o}") for o in range(N)]  # lock holder

        # ingress: routing, drops, replication, counters
        for r in range(N):
            route = ingress.route(m, r, table, units)
            self._write(m, r, queues[r], route, ingress)
            ingress.count(m, r, route)

        # requests: a flit, a credit and the output's lock
        credit_ok = Cat(c != 0 for c in credit)
        state = {}
        for r in range(N):
            q = queues[r]
            lock_ok = Cat(~lock_v[o] | (lock_in[o] == r) for o in range(N))
            avail = self._available(m, r, q, state)
            m.d.comb += alloc.i_req[r].eq(avail & credit_ok & lock_ok)

        # crossbar transfer of the matched heads
        heads = []
        for r in range(N):
            q = queues[r]
            match = alloc.o_match[r]
            head = Signal(layout, name=f"head{r}")
            m.d.comb += [head.eq(q.o_rdata[:fw]), q.i_rsel.eq(match)]
            heads.append(head)
            self._pop(m, r, q, match, state)

        head_arr = Array(heads)
        for o in range(N):
            output.combinational(m, o, head_arr, alloc.o_grant[o], credit, lock_v, lock_in)
        return m
