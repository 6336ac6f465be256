"""A test-only component for the verification kit's self-test (not part of rtl/).

A registered stream stage that adds 1 to each word. ``fault`` plants a bug so that the kit's
failure paths can be shown to fire: ``"corrupt"`` flips bit 0 of every 37th word,
``"stall"`` never raises ready after 50 words, ``"drop"`` ignores ``o_data.ready`` (a word
not taken is overwritten by the next one: lost only under backpressure).
"""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class KitIncrement(wiring.Component):
    def __init__(self, width: int = 16, fault: str = "none"):
        if fault not in ("none", "corrupt", "stall", "drop"):
            raise ValueError(f"fault={fault!r} is not none, corrupt, stall or drop")
        self.width = width
        self.fault = fault
        super().__init__({"i_data": In(stream.Signature(width)),
                          "o_data": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        count = Signal(16)
        accept = Signal()
        if self.fault == "drop":
            m.d.comb += accept.eq(1)
        else:
            m.d.comb += accept.eq(~self.o_data.valid | self.o_data.ready)
        if self.fault == "stall":
            m.d.comb += self.i_data.ready.eq(accept & (count < 50))
        else:
            m.d.comb += self.i_data.ready.eq(accept)
        with m.If(accept):
            m.d.sync += self.o_data.valid.eq(self.i_data.valid & self.i_data.ready)
            value = self.i_data.payload + 1
            if self.fault == "corrupt":
                bad = (count % 37) == 36
                value = value ^ bad
            m.d.sync += self.o_data.payload.eq(value)
        with m.If(self.i_data.valid & self.i_data.ready):
            m.d.sync += count.eq(count + 1)
        return m
