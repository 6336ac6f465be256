"""A PRBS generator wired to a PRBS checker, with an error-injection input.

Used by ``bench/sim_speed.py`` to measure how fast a simulator runs a design that needs no
per-cycle Python: the testbench resets it, lets it run, and reads the counters at the end.

Members
-------
i_inject : In(1)
    While high, bit 0 of the word on the link is flipped (one bit error per cycle).
o_locked : Out(1)
    The checker is locked.
o_errors : Out(32)
    Bit errors the checker counted while locked.
o_words : Out(32)
    Words that crossed the link.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.prbs import PrbsChecker, PrbsGenerator


class PrbsPair(wiring.Component):
    i_inject: In(1)
    o_locked: Out(1)
    o_errors: Out(32)
    o_words: Out(32)

    def __init__(self, order: int = 31, data_width: int = 64):
        self.order = order
        self.data_width = data_width
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen = gen = PrbsGenerator(self.order, self.data_width)
        m.submodules.check = check = PrbsChecker(self.order, self.data_width)
        m.d.comb += [check.i_data.payload.eq(gen.o_data.payload ^ self.i_inject),
                     check.i_data.valid.eq(gen.o_data.valid),
                     gen.o_data.ready.eq(check.i_data.ready),
                     self.o_locked.eq(check.o_locked), self.o_errors.eq(check.o_errors)]
        words = Signal(32)
        with m.If(gen.o_data.valid & check.i_data.ready):
            m.d.sync += words.eq(words + 1)
        m.d.comb += self.o_words.eq(words)
        return m
