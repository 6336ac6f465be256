"""Buffered-crossbar building blocks of :class:`~.crosspoint_switch.CrosspointSwitch`
(docs/switch.md, "Crosspoint-buffered variant"): a row writer per input and a small FIFO
at every (input, output) crosspoint.

With one buffer per crosspoint, every output reads its own column without asking the
inputs: there is no input-output matching, only an arbiter per output over its column
(after Rojas-Cessa, Oki, Jing and Chao, "CIXB-1: combined input-one-cell-crosspoint
buffered switch", IEEE HPSR 2001). Every loop stays within one row, one crosspoint or one
output: the row's credits per crosspoint (the buffer's free RAM slots, returned through a
register), the crosspoint's own pointers, the output's arbiter, lock and output-buffer
credits. The wires between them (a row's write to its crosspoints and to the outputs, an
output's pop to its crosspoints, a column's popped flits to its output's crossbar
register) start and end at registers, with at most a few LUTs on the way. Whether
nextpnr keeps each loop's cells together is another matter (docs/fpga.md).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CrosspointRow", "Crosspoint", "OutputBuffer"]


class CrosspointRow(wiring.Component):
    """The write side of one input: credits for its ``n_ports`` crosspoint buffers and the
    registered write that fans out to them.

    Parameters
    ----------
    n_ports : int
        Crosspoints in the row (columns).
    width : int
        Bits per flit.
    depth : int
        RAM slots per crosspoint buffer (the credits per crosspoint).

    Members
    -------
    i_we, i_wdata, i_wmeta : In
        Write one flit into every crosspoint of the column mask ``i_we`` (allowed only
        where ``o_notfull`` is set); ``i_wmeta`` = its lock bits (UNICAST, not ``last``),
        passed on to the outputs.
    o_notfull : Out(n_ports)
        Registers: the crosspoint has a free RAM slot for a write in this cycle.
    o_we, o_wdata, o_wmeta : Out
        The write, registered (one cycle after ``i_we``), to the crosspoints (and the
        write bits and lock bits to the outputs' own views).
    i_freed : In(n_ports)
        A crosspoint's RAM slot became free (one credit back), from its register; the row
        registers it before use, so the credit counts a cycle later.
    """

    def __init__(self, n_ports: int, width: int, depth: int):
        self.n_ports = n_ports
        self.width = width
        self.depth = depth
        super().__init__({
            "i_we": In(n_ports), "i_wdata": In(width), "i_wmeta": In(2),
            "o_notfull": Out(n_ports, init=(1 << n_ports) - 1),
            "o_we": Out(n_ports), "o_wdata": Out(width), "o_wmeta": Out(2),
            "i_freed": In(n_ports),
        })

    def elaborate(self, platform):
        m = Module()
        back = Signal(self.n_ports, name="freed_r")
        m.d.sync += back.eq(self.i_freed)
        for o in range(self.n_ports):
            # ``lag`` = the free slots before last cycle's write is taken off: it takes
            # the write from its register (``o_we``), so its carry chain starts at
            # registers; the free slots now are ``lag - o_we``.
            lag = Signal(range(self.depth + 1), init=self.depth, name=f"free_lag{o}")
            ge2 = Signal(name=f"free_ge2_{o}")
            nf = self.o_notfull[o]
            m.d.comb += ge2.eq(Mux(self.o_we[o], lag >= 3, lag >= 2))
            # free >= 1 next cycle: a credit back always leaves one; otherwise free >= 2,
            # or >= 1 and no write now
            m.d.sync += [lag.eq(lag - self.o_we[o] + back[o]),
                         nf.eq(back[o] | ge2 | (nf & ~self.i_we[o]))]
        m.d.sync += [self.o_we.eq(self.i_we), self.o_wdata.eq(self.i_wdata),
                     self.o_wmeta.eq(self.i_wmeta)]
        return m


class Crosspoint(wiring.Component):
    """One crosspoint buffer: ``depth`` flits of LUT RAM (synchronous write, asynchronous
    read) between a write register and a read register, read by its output.

    Every wire to and from the crosspoint ends at one of its registers: the row's write
    (``i_we``, ``i_wdata``) is registered here before the RAM write, the output's pop
    (``i_pop``) is registered here (``popped``), and the flit read at the read pointer
    after a pop is registered here (``o_popped``, all zero in other cycles, so the
    output's crossbar is an OR of its column).

    Members
    -------
    i_we, i_wdata : In
        Write (from the row's register); the row's credits guarantee a free RAM slot.
    i_pop : In(1)
        The oldest flit leaves in this cycle, from the output's ``sel`` register.
    o_popped : Out
        Register: the flit popped two cycles ago; zero if there was no pop then.
    o_freed : Out(1)
        Register: a flit was popped last cycle and is read now (a credit for the row: its
        slot is not written before the next cycle).

    Parameters
    ----------
    layout : StructLayout
        The flit; its ``src`` field is not stored.
    depth : int
        RAM slots.
    src : int
        The row's source port: every flit of the row carries it (the switch stamps it at
        ingress), so the RAM keeps the other fields and the read register puts it back.

    Timing: a flit written in cycle t (``i_we``) is in the RAM from t+2. The output never
    pops it before t+4: it counts the row's writes a cycle after the row's register
    (``Switch._crosspoint``).
    """

    def __init__(self, layout, depth: int, src: int):
        self.layout = layout
        self.depth = depth
        self.src = src
        width = layout.size
        super().__init__({
            "i_we": In(1), "i_wdata": In(width), "i_pop": In(1),
            "o_popped": Out(width), "o_freed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.layout.size
        field = self.layout["src"]
        lo, hi = field.offset, field.offset + field.width
        m.submodules.ram = ram = memory.Memory(shape=width - (hi - lo), depth=self.depth,
                                               init=[])
        wr = ram.write_port()
        rd = ram.read_port(domain="comb")
        wptr = Signal(range(self.depth))
        rptr = Signal(range(self.depth))
        we = Signal()
        wdata = Signal(width - (hi - lo), reset_less=True)   # used only with ``we``
        popped = Signal()                         # the output popped in the last cycle
        m.d.sync += [we.eq(self.i_we),
                     wdata.eq(Cat(self.i_wdata[:lo], self.i_wdata[hi:])),
                     popped.eq(self.i_pop),
                     self.o_popped.eq(Mux(popped, Cat(rd.data[:lo], Const(self.src, hi - lo),
                                                      rd.data[lo:]), 0))]
        m.d.comb += [wr.addr.eq(wptr), wr.en.eq(we), wr.data.eq(wdata),
                     rd.addr.eq(rptr), self.o_freed.eq(popped)]
        with m.If(we):
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(popped):
            m.d.sync += rptr.eq(rptr + 1)
        return m


class OutputBuffer(wiring.Component):
    """An output's buffer of ``depth`` flits (LUT RAM) for a writer that holds credits.

    ``amaranth.lib.fifo.SyncFIFO`` gates every write with its own "not full", computed from
    its level; in the 8-port switch that put the level, the write gate beside the RAM and
    the level again on one path across the device (docs/fpga.md). Here the writer's
    credits guarantee a free slot, so the write enable drives the RAM and the write
    pointer directly, and the level only serves the read side.

    Members
    -------
    i_we, i_wdata : In
        Write one flit (only with a credit: at most ``depth`` flits held).
    o_valid, o_data, i_ready : stream-like read side
        ``o_valid`` is a register; ``o_data`` the oldest flit (the RAM, read
        asynchronously); the flit leaves when ``o_valid`` and ``i_ready``.

    Timing: a flit written in cycle t can be read in t+1, as with ``SyncFIFO``.
    """

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"depth={depth!r} must be at least 1")
        self.width = width
        self.depth = depth
        super().__init__({
            "i_we": In(1), "i_wdata": In(width),
            "o_valid": Out(1), "o_data": Out(width), "i_ready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        m.submodules.ram = ram = memory.Memory(shape=self.width, depth=d, init=[])
        wr = ram.write_port()
        rd = ram.read_port(domain="comb")
        wptr = Signal(range(d))
        rptr = Signal(range(d))
        level = Signal(range(d + 1))
        take = Signal()

        def step(ptr):
            return Mux(ptr == d - 1, 0, ptr + 1)

        m.d.comb += [wr.addr.eq(wptr), wr.en.eq(self.i_we), wr.data.eq(self.i_wdata),
                     rd.addr.eq(rptr), self.o_data.eq(rd.data),
                     take.eq(self.o_valid & self.i_ready)]
        with m.If(self.i_we):
            m.d.sync += wptr.eq(step(wptr))
        with m.If(take):
            m.d.sync += rptr.eq(step(rptr))
        # o_valid = "level >= 1", as a register. Written as branches, as SyncFIFO is: the
        # arithmetic form (level + write - take) came out X from time 0 in an Icarus run
        # (docs/fabric.md, "Icarus note").
        with m.If(self.i_we & ~take):
            m.d.sync += [level.eq(level + 1), self.o_valid.eq(1)]
        with m.Elif(~self.i_we & take):
            m.d.sync += [level.eq(level - 1), self.o_valid.eq(level >= 2)]
        return m
