"""The output side every switch design shares: the reduction units behind columns
n … 2n−1, the crossbar into each output's buffer, credits, locks and the output counters
(docs/switch.md, "Output stage" and "Reduction units")."""

from __future__ import annotations

from amaranth import Const, Module, Signal
from amaranth.lib import fifo

from fusionfabric.formats.switch import Kind
from fusionfabric.rtl.export import ModuleInstance

from .common import UNIT_STATS, SwitchBase
from .crosspoint import OutputBuffer
from .voq import onehot_index

__all__ = ["OutputSide"]


class OutputSide:
    """The output side of a switch: per crossbar column (a port, or a reduction unit's
    contribution input) the crossbar, the output buffer of ``out_depth`` flits and the
    output counters; and the reduction units themselves.

    It is not a submodule: it adds its logic to the switch's own module (see
    :class:`~.ingress.Ingress` for why).

    Parameters
    ----------
    switch : SwitchBase
        The switch design; its parameters and ports are used.
    unchecked_write : bool
        The output buffer writes without a "not full" gate (:class:`~.crosspoint.OutputBuffer`,
        for a design whose credits guarantee the space and whose buffer write must start
        at registers); otherwise ``amaranth.lib.fifo.SyncFIFO``. Both have the same timing.

    Members
    -------
    There are no ports of its own: :meth:`attach_units` adds the units ``unit<u>``;
    :meth:`combinational` and :meth:`registered` add column o's crossbar and output
    buffer ``out<o>`` and drive ``o_port[o]`` (or unit o−n's ``i_contrib``);
    :meth:`counters` drives ``o_credit``/``o_unit_credit`` and updates ``flits_out`` and
    ``out_stalls``.

    Timing
    ------
    A flit written into an output buffer in cycle t is valid on the output from t+1 (the
    buffer is a synchronous FIFO); a handshake in t pops it and returns one credit.
    :meth:`combinational` writes the buffer in the cycle of the grant;
    :meth:`registered` one cycle after the select (a crossbar register in between). The
    units' own timing: docs/reduction.md. Reset empties the buffers and clears the
    counters.
    """

    def __init__(self, switch: SwitchBase, unchecked_write: bool = False):
        if not isinstance(switch, SwitchBase):
            raise TypeError(f"switch={switch!r} is not a SwitchBase")
        self.switch = switch
        self.unchecked_write = bool(unchecked_write)
        self.units = []

    def attach_units(self, m: Module) -> list:
        """With ``reduce=True``, add one reduction unit per port, configured by the same
        ``i_config`` beats as the group table (each an ``Instance`` of the switch's
        ``unit_module`` if it names one); returns them (empty otherwise)."""
        sw = self.switch
        n = sw.n_ports
        units = self.units
        if sw.reduce:
            for u in range(n):
                unit = sw.reduction_unit()
                if sw.unit_module is not None:
                    unit = ModuleInstance(unit, sw.unit_module)
                m.submodules[f"unit{u}"] = unit
                m.d.comb += [unit.i_config.valid.eq(sw.i_config.valid),
                             unit.i_config.payload.eq(sw.i_config.payload)]
                units.append(unit)
                st = sw.o_unit_stats[u]
                for name in UNIT_STATS:
                    m.d.comb += getattr(st, name).eq(getattr(unit, f"o_{name}"))
        return units

    def port(self, o: int):
        """Column ``o``'s stream: ``o_port[o]``, or unit ``o - n``'s contribution input."""
        n = self.switch.n_ports
        return self.switch.o_port[o] if o < n else self.units[o - n].i_contrib

    def combinational(self, m: Module, o: int, heads, grant, credit, lock_v, lock_in):
        """Column ``o`` behind a combinational crossbar: ``grant`` (one-hot over the rows)
        selects the head flit of ``heads`` (an ``Array``) straight into the output buffer
        in the grant cycle; a UNICAST flit sets (``last = 0``) or releases (``last = 1``)
        the output's lock; the credit is charged at the grant and returned on the output
        handshake."""
        sw = self.switch
        N = len(grant)
        layout = sw.flit.layout()
        port = self.port(o)
        ob = fifo.SyncFIFO(width=sw.flit.width, depth=sw.out_depth)
        m.submodules[f"out{o}"] = ob
        sel = onehot_index(grant, N)
        xfer = grant.any()
        moved = Signal(layout, name=f"xbar{o}")
        m.d.comb += [moved.eq(heads[sel]), ob.w_en.eq(xfer), ob.w_data.eq(moved),
                     port.valid.eq(ob.r_rdy), port.payload.eq(ob.r_data),
                     ob.r_en.eq(port.ready)]
        with m.If(xfer & (moved.kind == Kind.UNICAST)):
            m.d.sync += [lock_v[o].eq(~moved.last), lock_in[o].eq(sel)]
        out_hs = port.valid & port.ready
        m.d.sync += credit[o].eq(credit[o] - xfer + out_hs)
        self.counters(m, o, port, out_hs, credit)

    def registered(self, m: Module, o: int, heads, sel, sel_any):
        """Column ``o``'s crossbar register (the one-hot AND-OR of ``heads`` by ``sel``;
        with ``sel`` None an OR, the heads being zero unless selected) and output buffer;
        returns the output stream and its handshake."""
        sw = self.switch
        fw = sw.flit.width
        port = self.port(o)
        moved = Signal(fw, name=f"xbar{o}")
        moved_v = Signal(name=f"xbar_valid{o}")
        acc = Const(0, fw)
        for i, head in enumerate(heads):
            acc = acc | (head if sel is None else head & sel[i].replicate(fw))
        m.d.sync += [moved.eq(acc), moved_v.eq(sel_any)]
        if self.unchecked_write:
            # the credits guarantee space: no "not full" gate on the write (the same
            # timing as SyncFIFO, see OutputBuffer)
            ob = OutputBuffer(fw, sw.out_depth)
            m.submodules[f"out{o}"] = ob
            m.d.comb += [ob.i_we.eq(moved_v), ob.i_wdata.eq(moved),
                         port.valid.eq(ob.o_valid), port.payload.eq(ob.o_data),
                         ob.i_ready.eq(port.ready)]
            return port, port.valid & port.ready
        ob = fifo.SyncFIFO(width=fw, depth=sw.out_depth)
        m.submodules[f"out{o}"] = ob
        m.d.comb += [ob.w_en.eq(moved_v), ob.w_data.eq(moved),
                     port.valid.eq(ob.r_rdy), port.payload.eq(ob.r_data),
                     ob.r_en.eq(port.ready)]
        return port, port.valid & port.ready

    def counters(self, m: Module, o: int, port, out_hs, credit):
        """Column ``o``'s credit output and, for a port, ``flits_out`` and ``out_stalls``."""
        sw = self.switch
        n = sw.n_ports
        if o < n:
            st = sw.o_stats[o]
            m.d.comb += sw.o_credit[o].eq(credit[o])
            with m.If(out_hs):
                m.d.sync += st.flits_out.eq(st.flits_out + 1)
            with m.If(port.valid & ~port.ready):
                m.d.sync += st.out_stalls.eq(st.out_stalls + 1)
        else:
            m.d.comb += sw.o_unit_credit[o - n].eq(credit[o])
