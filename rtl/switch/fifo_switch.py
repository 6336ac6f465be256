"""The FIFO input-queued switch: the head-of-line blocking baseline of the VOQ switch
(docs/switch.md)."""

from __future__ import annotations

from amaranth import Cat, Mux, Signal

from .voq_switch import VoqSwitch

__all__ = ["FifoSwitch"]


class FifoSwitch(VoqSwitch):
    """The VOQ switch with one FIFO per input instead of its VOQs: the baseline whose
    head-of-line blocking limits it to 2 − √2 ≈ 58.6 % of line rate under uniform traffic
    (Karol, Hluchyj, Morgan, IEEE Trans. Commun. 35(12), 1987; 61.8 % at 8 ports).

    Everything but the queues is the VOQ switch's: routing, drops, iSLIP over the head
    flits' requests, crossbar, credits, locks, output buffers and counters.

    Parameters
    ----------
    depth : int
        The input FIFO holds ``n_ports * depth`` flits (the storage of the VOQ switch's
        ``n_ports`` queues of ``depth``), each with its target mask.
    n_ports, data_width, iterations, out_depth, n_groups, reduce, n_chunks
        As :class:`~.voq_switch.VoqSwitch`.

    Members
    -------
    i_port, o_port, i_config, o_credit, o_stats, o_config_drops, o_unit_credit, o_unit_stats
        As :class:`~.common.SwitchBase`.

    Timing
    ------
    As the VOQ switch: input handshake in t → ``o_port`` valid in t+2 without contention.
    A flit is written once with its target mask, in the handshake cycle; a multicast head
    is served one member per match (in whatever order the allocator matches them) and
    pops after its last member, so an input's queue is blocked behind its head. Reset as
    the VOQ switch.
    """

    mode = "fifo"

    def _queue_width(self) -> int:
        return self.flit.width + self.n_rows            # the flit and its target mask

    def _write(self, m, r, q, route, ingress):
        write = route.valid & ~route.drop & q.o_notfull[0]
        m.d.comb += [q.i_wen.eq(write), q.i_wsel.eq(0),
                     q.i_wdata.eq(Cat(route.flit.as_value(), route.target)),
                     route.port.ready.eq(route.drop | write)]

    def _available(self, m, r, q, state):
        # the members of the head flit not yet served (``hdone``)
        N = self.n_rows
        hd = Signal(N, name=f"hdone{r}")
        ht = Signal(N, name=f"head_target{r}")
        m.d.comb += ht.eq(q.o_rdata[self.flit.width:])
        state.setdefault("hdone", []).append(hd)
        state.setdefault("head_target", []).append(ht)
        return q.o_nonempty & ht & ~hd

    def _pop(self, m, r, q, match, state):
        hdone = state["hdone"]
        rem = state["head_target"][r] & ~hdone[r]
        final = rem == match
        m.d.comb += q.i_pop.eq(match.any() & final)
        with m.If(match.any()):
            m.d.sync += hdone[r].eq(Mux(final, 0, hdone[r] | match))
