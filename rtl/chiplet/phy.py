"""PHY adapters between the chiplet's DL (128-bit slots + ``first``) and a 2-lane 64b/66b
PCS (``rtl/pcs``): :class:`PhyToPcs` (transmit) and :class:`PcsToPhy` (receive).

See docs/protocol.md, section "PHY mapping and the PCS".
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sim.pcs import WORD, BlockType, control_word

from .common import PHY_WORD

__all__ = ["PhyToPcs", "PcsToPhy"]


class PhyToPcs(wiring.Component):
    """Chiplet PHY words → 2-lane PCS rows: a START row before each DL flit, then one data
    row (two 64-bit data words) per slot. ``first`` becomes the START block (the flit
    delimiter in the block type); ``o_phy.ready`` drops for the START row and marker rows.

    Timing: combinational (the PCS transmitter registers); one START row per DL flit."""

    def __init__(self):
        super().__init__({
            "i_word": In(stream.Signature(PHY_WORD.layout())),
            "o_row": Out(stream.Signature(data.ArrayLayout(WORD.layout(), 2))),
        })

    def elaborate(self, platform):
        m = Module()
        started = Signal()          # START row of the current first slot already sent
        w = self.i_word.payload
        row = self.o_row.payload
        m.d.comb += self.o_row.valid.eq(self.i_word.valid)
        with m.If(w.first & ~started):
            m.d.comb += [row[0].data.eq(control_word(BlockType.START)), row[0].ctrl.eq(1),
                         row[1].data.eq(control_word(BlockType.IDLE)), row[1].ctrl.eq(1)]
            with m.If(self.i_word.valid & self.o_row.ready):
                m.d.sync += started.eq(1)
        with m.Else():
            m.d.comb += [row[0].data.eq(w.data[:64]), row[1].data.eq(w.data[64:]),
                         self.i_word.ready.eq(self.o_row.ready)]
            with m.If(self.i_word.valid & self.o_row.ready):
                m.d.sync += started.eq(0)
        return m


class PcsToPhy(wiring.Component):
    """2-lane PCS rows → chiplet PHY words: a START row arms ``first`` for the next data
    row; data rows become slots; IDLE, ERROR and other rows are dropped (a lost row shows
    up at the DL as a short flit or a sequence gap). Timing: 1 cycle (registered)."""

    def __init__(self):
        super().__init__({
            "i_row": In(wiring.Signature({
                "payload": Out(data.ArrayLayout(WORD.layout(), 2)), "valid": Out(1)})),
            "o_word": Out(stream.Signature(PHY_WORD.layout())),
        })

    def elaborate(self, platform):
        m = Module()
        armed = Signal()
        r = self.i_row.payload
        m.d.sync += self.o_word.valid.eq(0)
        with m.If(self.i_row.valid):
            with m.If(~r[0].ctrl & ~r[1].ctrl):
                m.d.sync += [self.o_word.valid.eq(1), self.o_word.payload.data.eq(
                    Cat(r[0].data, r[1].data)), self.o_word.payload.first.eq(armed),
                    armed.eq(0)]
            with m.Elif(r[0].ctrl & (r[0].data[:8] == BlockType.START)):
                m.d.sync += armed.eq(1)
        return m
