"""Buffered-crossbar building blocks (``Switch(mode="crosspoint")``, docs/switch.md,
"Crosspoint-buffered variant"): a row writer per input and a small FIFO at every
(input, output) crosspoint.

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

from amaranth import Module, Mux, Signal
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
    i_wen, i_wsel, i_wdata, i_wmeta : In
        Write one flit into the crosspoint of the one-hot column ``i_wsel`` (allowed only
        where ``o_notfull`` is set); ``i_wmeta`` = its lock bits (UNICAST, not ``last``),
        passed on to the outputs.
    o_notfull : Out(n_ports)
        Registers: the crosspoint has a free RAM slot for a write in this cycle.
    o_we, o_wdata, o_wmeta : Out
        The write, registered (one cycle after ``i_wen``), to the crosspoints (and the
        write bit and lock bits to the outputs' own views).
    i_freed : In(n_ports)
        A crosspoint moved a flit out of its RAM (one credit back), from its register.
    """

    def __init__(self, n_ports: int, width: int, depth: int):
        self.n_ports = n_ports
        self.width = width
        self.depth = depth
        super().__init__({
            "i_wen": In(1), "i_wsel": In(n_ports), "i_wdata": In(width), "i_wmeta": In(2),
            "o_notfull": Out(n_ports, init=(1 << n_ports) - 1),
            "o_we": Out(n_ports), "o_wdata": Out(width), "o_wmeta": Out(2),
            "i_freed": In(n_ports),
        })

    def elaborate(self, platform):
        m = Module()
        for o in range(self.n_ports):
            free = Signal(range(self.depth + 1), init=self.depth, name=f"free{o}")
            w = Signal(name=f"w{o}")
            back = self.i_freed[o]
            nf = self.o_notfull[o]
            m.d.comb += w.eq(self.i_wen & self.i_wsel[o])
            # free >= 1 next cycle, without the subtraction on the path from the write:
            # a credit back always leaves one; otherwise free >= 2, or >= 1 and no write
            m.d.sync += [free.eq(free - w + back),
                         nf.eq(back | (free >= 2) | (nf & ~w))]
        m.d.sync += [self.o_we.eq(self.i_wsel & self.i_wen.replicate(self.n_ports)),
                     self.o_wdata.eq(self.i_wdata), self.o_wmeta.eq(self.i_wmeta)]
        return m


class Crosspoint(wiring.Component):
    """One crosspoint buffer: ``depth`` flits of LUT RAM (synchronous write, asynchronous
    read) in front of two head slots, read by its output.

    The output's pop reaches the crosspoint through a register here, so the wire from the
    output's arbiter starts and ends at a register; the crosspoint learns of a pop one
    cycle late, and the output's crossbar register takes the popped flit then, from the
    slot it left (``o_popped``: the slot chosen by a register, one LUT). The second slot
    covers that cycle: the slot popped in cycle t is read in t+1 and refilled from the RAM
    at the end of t+1, in time for a pop in t+2, while a pop in t+1 takes the other slot.

    Members
    -------
    i_we, i_wdata : In
        Write (from the row's register); the row's credits guarantee a free RAM slot.
    i_pop : In(1)
        The oldest flit leaves in this cycle (only while it is in a slot), from the
        output's ``sel`` register.
    o_popped : Out
        The flit popped in the last cycle (from registers, one LUT).
    o_freed : Out(1)
        Register: a flit moved from the RAM to a slot last cycle (a credit for the row).

    Timing: a flit written in cycle t (``i_we``) is in the RAM in t+1 and in a slot in t+2
    if a slot was free in t+1 (empty, or popped in t or before). The output never pops an
    empty slot: it counts the row's writes a cycle after the crosspoint does and pops
    flit k no earlier than a cycle after flit k-1 (``Switch._crosspoint``), so flit k-2's
    slot is free by then.
    """

    def __init__(self, layout, depth: int):
        self.layout = layout
        self.depth = depth
        width = layout.size
        super().__init__({
            "i_we": In(1), "i_wdata": In(width), "i_pop": In(1),
            "o_popped": Out(width), "o_freed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = memory.Memory(shape=self.layout, depth=self.depth, init=[])
        wr = ram.write_port()
        rd = ram.read_port(domain="comb")
        wptr = Signal(range(self.depth))
        rptr = Signal(range(self.depth))
        count = Signal(range(self.depth + 1))     # flits in the RAM
        nonempty = Signal()                       # count != 0, as a register
        m.d.comb += [wr.addr.eq(wptr), wr.en.eq(self.i_we), wr.data.eq(self.i_wdata),
                     rd.addr.eq(rptr)]
        with m.If(self.i_we):
            m.d.sync += wptr.eq(wptr + 1)
        slot = [Signal(self.layout.size, name=f"slot{k}") for k in (0, 1)]
        full = Signal(2)                          # the slot holds a flit not yet popped
        popped = Signal()                         # the output popped in the last cycle
        older = Signal()                          # the head slot before that pop
        fill_at = Signal()                        # the slot the next flit goes to
        m.d.sync += popped.eq(self.i_pop)
        # the slot popped last cycle: refilled at the end of this one, read by the
        # output's crossbar register now
        m.d.comb += self.o_popped.eq(Mux(older, slot[1], slot[0]))
        m.d.sync += older.eq(older ^ popped)
        free = Signal(2)
        for k in (0, 1):
            m.d.comb += free[k].eq(~full[k] | (popped & (older == k)))
        refill = Signal()
        m.d.comb += refill.eq(nonempty & Mux(fill_at, free[1], free[0]))
        for k in (0, 1):
            with m.If(refill & (fill_at == k)):
                m.d.sync += [slot[k].eq(rd.data), full[k].eq(1)]
            with m.Elif(popped & (older == k)):
                m.d.sync += full[k].eq(0)
        with m.If(refill):
            m.d.sync += [fill_at.eq(~fill_at), rptr.eq(rptr + 1)]
        # the same next-state rule as the row's credits
        m.d.sync += [count.eq(count + self.i_we - refill),
                     nonempty.eq(self.i_we | (count >= 2) | (nonempty & ~refill)),
                     self.o_freed.eq(refill)]
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
