"""The ingress every switch design shares: the group table, routing of each crossbar row
(target mask and drop causes), multicast replication into VOQs and the ingress counters
(docs/switch.md, "Routing" and "Ingress")."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import fifo, stream

from fusionfabric.formats.switch import GROUP_BITS, Kind, Mode
from fusionfabric.rtl.reduce.unit import result_layout

from .common import RESULT_FIFO_DEPTH, SwitchBase
from .group_table import GroupTable
from .islip import lowest_bit

__all__ = ["Ingress", "Route"]


@dataclass(frozen=True)
class Route:
    """Row ``r``'s flit as routed in this cycle (all values combinational).

    ``port`` is the stream whose ``ready`` the design drives (the input port, the input
    register's stage, or the head of a reduction unit's result FIFO); ``valid`` and
    ``flit`` (with ``src`` set) are what it offers; ``target`` is the target mask over the
    crossbar's columns; ``drop_*`` the drop causes, ``drop`` any of them; ``stall`` a flit
    offered and not taken at the switch input (``None``: ``valid & ~port.ready``)."""

    port: object
    valid: object
    flit: object
    target: object
    drop_dest: object
    drop_group: object
    drop_kind: object
    drop: object
    stall: object = None

    @property
    def drops(self):
        """The three drop causes, LSB first: ``drop_dest``, ``drop_group``, ``drop_kind``."""
        return Cat(self.drop_dest, self.drop_group, self.drop_kind)


class Ingress:
    """The routing side of a switch: its group table and, per crossbar row, the target mask
    and drop causes of the flit offered, multicast replication into VOQs and the ingress
    counters.

    It is not a submodule: it adds its logic to the switch's own module (the names of its
    signals are those of the switch's netlist, so every design keeps one flat level around
    its queues and crossbar, which the FPGA placements in docs/fpga.md were measured on).

    Parameters
    ----------
    switch : SwitchBase
        The switch design; its parameters and ports are used.
    input_register : bool
        Register each switch input's flit and its group-table entry before routing (the
        crosspoint switch, so that the shared table's lookup ends at a register). The
        route then starts from those registers, one cycle after the handshake, and the
        input takes a flit when the register is empty or its flit leaves.

    Members
    -------
    There are no ports of its own: :meth:`attach_table` adds the group table ``table``
    (fed by ``i_config``, with ``o_config_drops``); :meth:`route` returns a :class:`Route`
    per row; :meth:`replicate` writes one copy per cycle into VOQs; :meth:`count` and
    :meth:`count_late` update ``o_stats`` (and ``o_unit_stats.result_drops``).

    Timing
    ------
    The table is read in cycle t from its state at the start of t; a configuration write
    in t is visible from t+1. Without the input register, routing is combinational from
    the input port; with it, from the register loaded at the handshake. :meth:`count`
    counts in the handshake cycle, :meth:`count_late` one cycle after the flit leaves.
    Reset: table invalid, replication state and counters cleared.
    """

    def __init__(self, switch: SwitchBase, input_register: bool = False):
        if not isinstance(switch, SwitchBase):
            raise TypeError(f"switch={switch!r} is not a SwitchBase")
        self.switch = switch
        self.input_register = bool(input_register)

    def attach_table(self, m: Module) -> GroupTable:
        """Add the group table (one lookup per port) fed by ``i_config``."""
        sw = self.switch
        n = sw.n_ports
        m.submodules.table = table = GroupTable(n, sw.n_groups, n)
        m.d.comb += [table.i_config.valid.eq(sw.i_config.valid),
                     table.i_config.payload.eq(sw.i_config.payload),
                     sw.i_config.ready.eq(1)]
        m.d.comb += sw.o_config_drops.eq(table.o_config_drops)
        return table

    def route(self, m: Module, r: int, table: GroupTable, units) -> Route:
        """Route row ``r``: a switch input (``r < n``) through the group table, or the
        results of reduction unit ``r - n`` (through a FIFO of ``RESULT_FIFO_DEPTH``)."""
        sw = self.switch
        n = sw.n_ports
        N = sw.n_rows
        layout = sw.flit.layout()
        flit = Signal(layout, name=f"in_flit{r}")
        target = Signal(N, name=f"target{r}")
        drop_dest = Signal(name=f"drop_dest{r}")
        drop_group = Signal(name=f"drop_group{r}")
        drop_kind = Signal(name=f"drop_kind{r}")
        stall = None
        if r < n:
            port = sw.i_port[r]
            if self.input_register:
                # The flit and its group-table entry are registered first (``in_pipe``),
                # so that the shared table's lookup ends at a register and the route
                # below starts from registers of this input.
                m.d.comb += table.i_group[r].eq(port.payload.dest[:GROUP_BITS])
                p_valid = Signal(name=f"in_pipe_valid{r}")
                p_flit = Signal(layout, name=f"in_pipe_flit{r}")
                p_entry = Signal.like(table.o_entry[r], name=f"in_pipe_entry{r}")
                stage = stream.Signature(layout).create(path=(f"in_pipe{r}",))
                m.d.comb += port.ready.eq(~p_valid | stage.ready)
                with m.If(port.ready):
                    m.d.sync += [p_valid.eq(port.valid), p_flit.eq(port.payload),
                                 p_entry.eq(table.o_entry[r])]
                stall = port.valid & ~port.ready
                port, valid, payload, entry = stage, p_valid, p_flit, p_entry
                m.d.comb += [flit.eq(payload), flit.src.eq(r)]
                kind, dest = payload.kind, payload.dest
            else:
                valid, payload = port.valid, port.payload
                m.d.comb += [flit.eq(payload), flit.src.eq(r)]
                kind, dest = payload.kind, payload.dest
                m.d.comb += table.i_group[r].eq(dest[:GROUP_BITS])
                entry = table.o_entry[r]
            with m.Switch(kind):
                with m.Case(Kind.UNICAST):
                    m.d.comb += [target.eq(Cat(dest == o for o in range(n))),
                                 drop_dest.eq(dest >= n)]
                with m.Case(Kind.MULTICAST):
                    m.d.comb += [target.eq(entry.members),
                                 drop_group.eq((dest >= sw.n_groups) | ~entry.valid
                                               | (entry.members == 0))]
                if sw.reduce:
                    with m.Case(Kind.REDUCE):
                        # to the unit of this chunk: column n + chunk mod n
                        cu = Signal(range(n), name=f"chunk_unit{r}")
                        m.d.comb += [cu.eq(payload.chunk % n),
                                     target.eq(Cat(cu == u for u in range(n)) << n)]
                with m.Default():
                    m.d.comb += drop_kind.eq(1)
        else:
            # unit u's results pass through a small FIFO, so that replicating one result
            # (one copy per cycle) never stalls the unit's pipeline
            u = r - n
            res = units[u].o_result
            rlay = result_layout(n, sw.data_width)
            rq = fifo.SyncFIFO(width=rlay.size, depth=RESULT_FIFO_DEPTH)
            m.submodules[f"result_fifo{u}"] = rq
            payload = Signal(rlay, name=f"result{u}")
            m.d.comb += [rq.w_en.eq(res.valid), rq.w_data.eq(res.payload),
                         res.ready.eq(rq.w_rdy), payload.eq(rq.r_data)]
            port = stream.Signature(rlay).create(path=(f"result_head{u}",))
            m.d.comb += [port.valid.eq(rq.r_rdy), rq.r_en.eq(port.ready)]
            valid = port.valid
            m.d.comb += [flit.eq(payload.flit), flit.src.eq(u)]
            root_hot = Cat(payload.root == o for o in range(n))
            m.d.comb += target.eq(Mux(payload.mode == Mode.ALLREDUCE,
                                      payload.members, root_hot))
            m.d.comb += drop_dest.eq(target[:n] == 0)
        drop = Signal(name=f"drop{r}")
        m.d.comb += drop.eq(drop_dest | drop_group | drop_kind)
        return Route(port, valid, flit, target, drop_dest, drop_group, drop_kind, drop,
                     stall)

    def replicate(self, m: Module, r: int, q, valid, target, drop):
        """Write a flit into input queue ``q``'s VOQs, one copy per cycle, lowest target
        first; returns ``(write, last_copy)`` (the flit is done after the last copy)."""
        N = len(target)
        done = Signal(N, name=f"done{r}")
        rem = Signal(N, name=f"rem{r}")
        pick = Signal(N, name=f"pick{r}")
        m.d.comb += [rem.eq(target & ~done), pick.eq(lowest_bit(rem, N))]
        write = valid & ~drop & (pick & q.o_notfull).any()
        last_copy = rem == pick
        m.d.comb += [q.i_wen.eq(write), q.i_wsel.eq(pick)]
        with m.If(write):
            m.d.sync += done.eq(Mux(last_copy, 0, done | pick))
        return write, last_copy

    def count(self, m: Module, r: int, route: Route):
        """Row ``r``'s ingress counters in the handshake cycle: ``flits_in`` and the drop
        cause of each flit taken, ``in_stalls`` per cycle offered and not taken."""
        sw = self.switch
        n = sw.n_ports
        valid, port, drop = route.valid, route.port, route.drop
        st = sw.o_stats[r] if r < n else sw.o_unit_stats[r - n]
        with m.If(valid & port.ready):
            if r < n:
                m.d.sync += [st.flits_in.eq(st.flits_in + ~drop),
                             st.drop_dest.eq(st.drop_dest + route.drop_dest),
                             st.drop_group.eq(st.drop_group + route.drop_group),
                             st.drop_kind.eq(st.drop_kind + route.drop_kind)]
            else:
                m.d.sync += st.result_drops.eq(st.result_drops + drop)
        if r < n:
            with m.If(valid & ~port.ready):
                m.d.sync += st.in_stalls.eq(st.in_stalls + 1)

    def count_late(self, m: Module, r: int, take, drops, stall):
        """Row ``r``'s ingress counters, one cycle late (their carry chains start at a
        register): ``take`` = the head flit leaves (written or dropped), ``drops`` its
        three drop causes, ``stall`` = a flit offered and not taken."""
        sw = self.switch
        n = sw.n_ports
        took = Signal(name=f"in_took{r}")
        took_route = Signal(3, name=f"in_took_drops{r}")
        stalled = Signal(name=f"in_stalled{r}")
        m.d.sync += [took.eq(take), took_route.eq(drops), stalled.eq(stall)]
        st = sw.o_stats[r] if r < n else sw.o_unit_stats[r - n]
        with m.If(took):
            if r < n:
                m.d.sync += [st.flits_in.eq(st.flits_in + ~took_route.any()),
                             st.drop_dest.eq(st.drop_dest + took_route[0]),
                             st.drop_group.eq(st.drop_group + took_route[1]),
                             st.drop_kind.eq(st.drop_kind + took_route[2])]
            else:
                m.d.sync += st.result_drops.eq(st.result_drops + took_route.any())
        if r < n:
            with m.If(stalled):
                m.d.sync += st.in_stalls.eq(st.in_stalls + 1)
