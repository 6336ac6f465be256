"""iSLIP allocator (:class:`fusionfabric.rtl.switch.islip.ISLIPAllocator`): a matching, fair.

Configuration: ``n_ports`` 3, ``iterations`` 2 (the largest allowed for 3 ports).
Environment: every ``i_req[i]`` is free (``AnySeq``), with one assumption, the VOQ rule:
a request ``i → o`` that was up and not matched stays up the next cycle (a virtual output
queue empties only by being served). Requests may rise at any time and may drop after
a match.

Properties (every cycle, from reset):

1. ``o_match[i]`` has at most one bit set (an input is matched to one output at most);
2. ``o_grant[o]`` has at most one bit set (an output is matched to one input at most);
3. ``o_grant[o][i] == o_match[i][o]`` and a match only where there is a request;
4. bounded waiting: a request ``i → o`` is matched within :data:`WAIT_BOUND` cycles of
   being raised (McKeown 1999: an output keeps granting its highest-priority requester
   until it accepts, so no connection starves);
5. the pointer rule (white box: the allocator's grant masks ``gmask<o>``): the grant
   pointer of output ``o`` changes only in a cycle in which o's first-round grant was
   accepted.

Covers: a cycle with ``n_ports`` matches; a request that waited ``WAIT_BOUND - 1`` cycles
(the bound is tight, not vacuous).

Planted bugs (applied to the elaborated allocator, whose source is not changed):
``pointer``: output 0's grant pointer also moves when its grant was not accepted (RRM's
rule, which iSLIP replaced); ``double``: output 0 grants every requesting input in the
first round, so two inputs can accept it.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, ResetSignal, Signal
from amaranth.asserts import AnySeq

from fusionfabric.rtl.switch.islip import ISLIPAllocator, mask_above
from .flow import Harness, driven_signals, register

N_PORTS = 3
ITERATIONS = 2
#: Longest wait (cycles from raising a request to its match, exclusive) proven.
WAIT_BOUND = 12

PLANTED = {
    "pointer": "output 0's grant pointer moves on a grant that was not accepted",
    "double": "output 0 grants every requesting input (two inputs may be matched to it)",
}


def _at_most_one(x):
    return (x & (x - 1)) == 0


def wait_bound(m, alloc, n, bound):
    """For an allocator with ``i_req``/``o_match`` of ``n`` ports: per (input, output),
    the cycles its request has been up and unmatched, asserted ``< bound``; returns the
    counters."""
    waits = []
    for i in range(n):
        for o in range(n):
            w = Signal(range(bound + 1), name=f"wait_{i}_{o}")
            waits.append(w)
            with m.If(alloc.i_req[i][o] & ~alloc.o_match[i][o]):
                with m.If(w != bound):
                    m.d.sync += w.eq(w + 1)
            with m.Else():
                m.d.sync += w.eq(0)
            m.d.comb += Assert(w < bound, "wait_bound")
    return waits


class ISLIPHarness(Elaboratable):
    def __init__(self, planted: str | None = None, n_ports: int = N_PORTS,
                 iterations: int = ITERATIONS, wait_bound: int = WAIT_BOUND,
                 pointer_rule: bool = True):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        self.planted = planted
        self.n = n_ports
        self.iterations = iterations
        self.wait_bound = wait_bound
        self.pointer_rule = pointer_rule

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        n = self.n
        dut = ISLIPAllocator(n, self.iterations)
        dm = dut.elaborate(platform)
        dut._MustUse__used = True        # elaborated here, added as its Module
        sig = driven_signals(dm)
        gmask = [sig[f"gmask{o}"] for o in range(n)]
        grant0 = [sig[f"g0_{o}"] for o in range(n)]
        accept0 = [sig[f"a0_{i}"] for i in range(n)]
        if self.planted == "pointer":
            taken = Cat(accept0[i][0] for i in range(n)).any()
            with dm.If(grant0[0].any() & ~taken):
                dm.d.sync += gmask[0].eq(mask_above(grant0[0], n))
        elif self.planted == "double":
            dm.d.comb += grant0[0].eq(Cat(dut.i_req[i][0] for i in range(n)))
        m.submodules.dut = dm

        for i in range(n):
            m.d.comb += dut.i_req[i].eq(AnySeq(n))

        # VOQ rule: an unmatched request stays up
        prev_req = [Signal(n, name=f"prev_req{i}") for i in range(n)]
        prev_match = [Signal(n, name=f"prev_match{i}") for i in range(n)]
        for i in range(n):
            m.d.sync += [prev_req[i].eq(dut.i_req[i]), prev_match[i].eq(dut.o_match[i])]
            m.d.comb += Assume((prev_req[i] & ~prev_match[i] & ~dut.i_req[i]) == 0)

        # 1-3: a matching, consistent views, only on requests
        for i in range(n):
            m.d.comb += [Assert(_at_most_one(dut.o_match[i]), "one_output_per_input"),
                         Assert((dut.o_match[i] & ~dut.i_req[i]) == 0, "match_only_on_request")]
        for o in range(n):
            m.d.comb += Assert(_at_most_one(dut.o_grant[o]), "one_input_per_output")
            for i in range(n):
                m.d.comb += Assert(dut.o_grant[o][i] == dut.o_match[i][o], "grant_is_match")

        # 4: bounded waiting
        B = self.wait_bound
        waits = wait_bound(m, dut, n, B)
        m.d.comb += Cover(Cat(w == B - 1 for w in waits).any())

        # 5: pointer rule
        prev_gmask = [Signal(n, name=f"prev_gmask{o}") for o in range(n)]
        was_taken = [Signal(name=f"was_taken{o}") for o in range(n)]
        started = Signal()
        m.d.sync += started.eq(1)
        for o in range(n):
            m.d.sync += [prev_gmask[o].eq(gmask[o]),
                         was_taken[o].eq(Cat(accept0[i][o] for i in range(n)).any())]
            with m.If(started & ~was_taken[o] & self.pointer_rule):
                m.d.comb += Assert(gmask[o] == prev_gmask[o], "pointer_moves_on_accept")

        m.d.comb += Cover(Cat(dut.o_match[i].any() for i in range(n)).all())
        return m


register(Harness(
    name="islip",
    doc=f"iSLIP {N_PORTS}x{N_PORTS}, {ITERATIONS} iterations: a matching, o_grant/o_match "
        f"consistent, wait < {WAIT_BOUND} cycles, pointers move only on accepted grants",
    build=lambda planted: ISLIPHarness(planted),
    planted=PLANTED,
    mode="prove", depth=16, cover_depth=16, fast=True,
))
