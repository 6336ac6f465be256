"""Buffered-crossbar building blocks (``Switch(mode="crosspoint")``, docs/switch.md,
"Crosspoint-buffered variant"): a row writer per input and a small FIFO at every
(input, output) crosspoint.

With one buffer per crosspoint, every output reads its own column without asking the
inputs: there is no input-output matching, only an arbiter per output over its column
(after Rojas-Cessa, Oki, Jing and Chao, "CIXB-1: combined input-one-cell-crosspoint
buffered switch", IEEE HPSR 2001). Every loop stays within one row, one crosspoint or one
output: the row's credits per crosspoint (the buffer's free RAM slots, returned through a
register), the crosspoint's own pointers, the output's arbiter, lock and output-buffer
credits. The wires between them (a row's write to its crosspoints and to the outputs, a
column's heads to its output's crossbar register) start and end at registers. Whether
nextpnr keeps each loop's cells together is another matter (docs/fpga.md).
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CrosspointRow", "Crosspoint"]


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
    read) in front of a head register, read by its output's arbiter.

    Members
    -------
    i_we, i_wdata : In
        Write (from the row's register); the row's credits guarantee a free slot.
    i_pop : In(1)
        The head leaves in this cycle (only while ``o_valid``).
    o_valid, o_head : Out
        The head register and its valid bit.
    o_freed : Out(1)
        Register: a flit moved from the RAM to the head last cycle (a credit for the row).

    Timing: a flit written in cycle t (``i_we``) is in the RAM in t+1 and in the head in
    t+2 if the head was free. The output never pops an empty head: it counts the row's
    writes a cycle after the crosspoint does (``Switch._crosspoint``).
    """

    def __init__(self, layout, depth: int):
        self.layout = layout
        self.depth = depth
        width = layout.size
        super().__init__({
            "i_we": In(1), "i_wdata": In(width), "i_pop": In(1),
            "o_valid": Out(1), "o_head": Out(width), "o_freed": Out(1),
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
        refill = Signal()
        m.d.comb += refill.eq(nonempty & (~self.o_valid | self.i_pop))
        with m.If(self.i_we):
            m.d.sync += wptr.eq(wptr + 1)
        flit = rd.data
        with m.If(refill):
            m.d.sync += [self.o_head.eq(flit), self.o_valid.eq(1), rptr.eq(rptr + 1)]
        with m.Elif(self.i_pop):
            m.d.sync += self.o_valid.eq(0)
        # the same next-state rule as the row's credits
        m.d.sync += [count.eq(count + self.i_we - refill),
                     nonempty.eq(self.i_we | (count >= 2) | (nonempty & ~refill)),
                     self.o_freed.eq(refill)]
        return m
