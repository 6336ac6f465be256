"""Test harness: ``n_ports`` BIST generators → the real switch (block ``switch``) →
``n_ports`` BIST checkers, with every counter on a top-level port.

Not a registered block (it is only built by tests and the benchmark, through
``fusionfabric.tb.common.runner.run(..., component=BistHarness(...))``).

Ports
-----
``i_enable`` (1), ``i_budget`` (32, packets per generator, 0 = forever), ``i_load`` (9,
offered load /256 of every generator), ``i_stall`` (8, backpressure /256 of every
checker); per generator ``o_gen_packets[s]``, ``o_gen_flits[s]``, ``o_gen_done`` (bit s),
``o_gen_next_seq[s][d]``; per checker ``o_chk_packets[d]``, ``o_chk_flits[d]``,
``o_seq_errors[d]``, ``o_data_errors[d]``, ``o_framing_errors[d]``,
``o_chk_expected[d][s]``. Exactly-once delivery at the end of a run means
``o_chk_expected[d][s] == o_gen_next_seq[s][d]`` for every (s, d) and no errors.

A planted fault (``fault`` parameter) sits between switch output 0 and checker 0:
``"drop"`` swallows the packet number ``fault_at`` (counting from 0) leaving output 0,
``"flip"`` flips data bit 45 of its first flit, ``"last"`` clears ``last`` on its final
flit. Each must show as exactly one error of its class at checker 0.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.bist import TrafficCheck, TrafficGen
from fusionfabric.rtl.switch.top import Switch
from fusionfabric.formats.bist import BIST_SEQ_BITS

__all__ = ["BistHarness", "FAULTS"]

FAULTS = ("none", "drop", "flip", "last")


class BistHarness(wiring.Component):
    def __init__(self, n_ports: int = 4, data_width: int = 64, max_len: int = 4,
                 pattern: str = "uniform", offset: int = 1, seed: int = 1, depth: int = 4,
                 mode: str = "voq", out_depth: int = 4, fault: str = "none",
                 fault_at: int = 5):
        if fault not in FAULTS:
            raise ValueError(f"fault={fault!r} is not one of {', '.join(FAULTS)}")
        self.n_ports, self.data_width, self.max_len = n_ports, data_width, max_len
        self.pattern, self.offset, self.seed = pattern, offset, seed
        self.depth, self.mode, self.out_depth = depth, mode, out_depth
        self.fault, self.fault_at = fault, fault_at
        n = n_ports
        self.gens = [TrafficGen(data_width, n, s, max_len, pattern, offset, seed)
                     for s in range(n)]
        self.chks = [TrafficCheck(data_width, n, d, seed) for d in range(n)]
        self.switch = Switch(n_ports=n, data_width=data_width, depth=depth, mode=mode,
                             out_depth=out_depth)
        super().__init__({
            "i_enable": In(1), "i_budget": In(32), "i_load": In(9), "i_stall": In(8),
            "o_gen_packets": Out(32).array(n), "o_gen_flits": Out(32).array(n),
            "o_gen_done": Out(n), "o_gen_next_seq": Out(BIST_SEQ_BITS).array(n, n),
            "o_chk_packets": Out(32).array(n), "o_chk_flits": Out(32).array(n),
            "o_seq_errors": Out(32).array(n), "o_data_errors": Out(32).array(n),
            "o_framing_errors": Out(32).array(n),
            "o_chk_expected": Out(BIST_SEQ_BITS).array(n, n),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_ports
        m.submodules.switch = sw = self.switch
        for s, g in enumerate(self.gens):
            m.submodules[f"gen{s}"] = g
            m.d.comb += [g.i_enable.eq(self.i_enable), g.i_budget.eq(self.i_budget),
                         g.i_load.eq(self.i_load),
                         self.o_gen_packets[s].eq(g.o_packets),
                         self.o_gen_flits[s].eq(g.o_flits),
                         self.o_gen_done[s].eq(g.o_done)]
            m.d.comb += [self.o_gen_next_seq[s][d].eq(g.o_next_seq[d]) for d in range(n)]
            wiring.connect(m, g.o_flit, sw.i_port[s])
        for d, c in enumerate(self.chks):
            m.submodules[f"chk{d}"] = c
            m.d.comb += [c.i_stall.eq(self.i_stall),
                         self.o_chk_packets[d].eq(c.o_packets),
                         self.o_chk_flits[d].eq(c.o_flits),
                         self.o_seq_errors[d].eq(c.o_seq_errors),
                         self.o_data_errors[d].eq(c.o_data_errors),
                         self.o_framing_errors[d].eq(c.o_framing_errors)]
            m.d.comb += [self.o_chk_expected[d][s].eq(c.o_expected[s]) for s in range(n)]
            if d == 0 and self.fault != "none":
                self._fault(m, sw.o_port[0], c.i_flit)
            else:
                wiring.connect(m, sw.o_port[d], c.i_flit)
        return m

    def _fault(self, m, src, dst):
        """Copy stream ``src`` to ``dst`` with the planted fault on packet ``fault_at``."""
        packet = Signal(32)           # packets fully passed on output 0
        hit = Signal()
        m.d.comb += hit.eq(packet == self.fault_at)
        xfer = src.valid & src.ready
        with m.If(xfer & src.payload.last):
            m.d.sync += packet.eq(packet + 1)
        m.d.comb += dst.payload.eq(src.payload)
        if self.fault == "drop":
            m.d.comb += [dst.valid.eq(src.valid & ~hit), src.ready.eq(dst.ready | hit)]
        else:
            m.d.comb += [dst.valid.eq(src.valid), src.ready.eq(dst.ready)]
            if self.fault == "flip":
                with m.If(hit & src.payload.first):
                    m.d.comb += dst.payload.data.eq(src.payload.data ^ (1 << 45))
            else:  # "last"
                with m.If(hit):
                    m.d.comb += dst.payload.last.eq(0)
