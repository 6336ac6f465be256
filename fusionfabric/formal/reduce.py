"""Reduction unit (:class:`fusionfabric.rtl.reduce.unit.ReductionUnit`): each chunk's
result once, after every member contributed exactly once.

Configuration: ``n_ports`` 3, ``data_width`` 32, ``n_chunks`` 2, ``n_groups`` 2.

Environment: one watched (group, chunk) pair ``(g, c)`` and its group-table entry ``E``
are free constants (``AnyConst``); ``E`` is valid with an op and dtype in range and at
least one member. ``E`` is written to ``g`` in the first cycle; later configuration beats
are free but never address ``g``. Contributions are free flits (``AnySeq``: any kind,
group, chunk, source, data; duplicates, non-members and other groups' chunks included),
and ``o_result.ready`` is free. One assumption, the unit's flow-control contract as seen by
the watched chunk: once every member of ``g`` has contributed to ``(g, c)``, no new flit
for ``(g, c)`` is offered until its result has left (a chunk id is reused only after its
result).

The harness keeps its own record of the watched chunk: the set of members whose first
contribution to ``(g, c)`` was handed over since the last result (a contribution counts at
its ``i_contrib`` handshake, when the group entry is ``E``).

Properties (bounded: every cycle up to :data:`DEPTH` steps from reset; the pipeline, the
ready FIFO and a stalled output make the state too deep for induction, and BMC steps past
22 take minutes each):

1. a RESULT flit for ``(g, c)`` leaves only when the record holds every member of ``E``
   (each member counted, none missing), and carries ``E``'s members, mode and root;
2. at most one result per round: after it leaves the record is empty, so a second result
   for the same round fails property 1;
3. every result flit is a single flit (``first = last = 1``) of kind RESULT from source 0.

Covers: a result for ``(g, c)`` with two or more members; a duplicate contribution
(``o_duplicate`` counts) before a result.

Planted bug: ``dup-summed``: a duplicate contribution is counted as a new one (the slot's
count goes up, so the chunk closes with a member missing and one summed twice).
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Elaboratable, Module, Mux, ResetSignal, Signal
from amaranth.asserts import AnyConst, AnySeq

from amaranth.lib import data

from fusionfabric.formats.switch import GROUP_BITS, Dtype, Kind, Op, group_entry, switch_flit
from fusionfabric.rtl.reduce.unit import ReductionUnit
from .flow import Harness, driven_signals, register

N_PORTS = 3
DEPTH = 22

PLANTED = {
    "dup-summed": "a duplicate contribution is counted as a new one (summed twice)",
}


class ReduceHarness(Elaboratable):
    def __init__(self, planted: str | None = None):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        self.planted = planted

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        P = N_PORTS
        dut = ReductionUnit(n_ports=P, data_width=32, n_chunks=2, n_groups=2)
        dm = dut.elaborate(platform)
        dut._MustUse__used = True
        if self.planted == "dup-summed":
            sig = driven_signals(dm)
            fifo = dm._named_submodules["ready_fifo"][0]
            s1 = data.View(switch_flit(32).layout(), sig["s1"])
            # after the RTL's own statements (the last assignment wins): a duplicate to an
            # open slot counts as a new contribution, and may close the chunk
            for j in range(dut.n_chunks):
                cnt, kk, st = sig[f"slot{j}_count"], sig[f"slot{j}_k"], sig[f"slot{j}_state"]
                dup_j = (sig["s1_valid"] & (st == 1) & (sig[f"slot{j}_group"] == s1.dest)
                         & (sig[f"slot{j}_chunk"] == s1.chunk)
                         & sig[f"slot{j}_arrived"].bit_select(s1.src[:2], 1))
                with dm.If(dup_j):
                    dm.d.sync += cnt.eq(cnt + 1)
                    with dm.If(cnt + 1 == kk):
                        dm.d.sync += st.eq(2)
                        dm.d.comb += [sig["slot_w"].eq(j), fifo.w_en.eq(1)]
        m.submodules.dut = dm

        entry_l = group_entry(P).layout()
        g = Signal(GROUP_BITS)
        c = Signal(len(dut.i_contrib.payload.chunk))
        E = Signal(entry_l)
        m.d.comb += [g.eq(AnyConst(GROUP_BITS)), c.eq(AnyConst(len(c))),
                     E.eq(AnyConst(len(E.as_value())))]
        m.d.comb += [Assume(g < dut.n_groups), Assume(E.valid), Assume(E.op <= Op.MAX),
                     Assume(E.dtype <= Dtype.BF16), Assume(E.members != 0)]

        first = Signal(init=1)
        m.d.sync += first.eq(0)
        cfg = dut.i_config
        with m.If(first):
            m.d.comb += [cfg.valid.eq(1), cfg.payload.group.eq(g), cfg.payload.entry.eq(E)]
        with m.Else():
            m.d.comb += [cfg.valid.eq(AnySeq(1)),
                         cfg.payload.eq(AnySeq(len(cfg.payload.as_value())))]
            m.d.comb += Assume(~cfg.valid | (cfg.payload.group != g))

        ic = dut.i_contrib
        f = ic.payload
        m.d.comb += [ic.valid.eq(AnySeq(1)), f.eq(AnySeq(len(f.as_value()))),
                     dut.o_result.ready.eq(AnySeq(1))]

        arrived = Signal(P)
        complete = arrived == E.members
        ours = (f.kind == Kind.REDUCE) & (f.dest == g) & (f.chunk == c)
        with m.If(complete):
            m.d.comb += Assume(~(ic.valid & ours))
        src_bit = Signal(P)
        m.d.comb += src_bit.eq(Mux(f.src < P, Const(1, P) << f.src[:2], 0))
        take = ic.valid & ic.ready & ours & ~first & ((src_bit & E.members) != 0)

        o = dut.o_result
        out = o.valid & o.ready
        res_ours = (o.payload.flit.dest == g) & (o.payload.flit.chunk == c)
        with m.If(out & res_ours):
            m.d.sync += arrived.eq(0)
        with m.Elif(take):
            m.d.sync += arrived.eq(arrived | src_bit)

        m.d.comb += Assert(~(out & res_ours) | complete, "result_after_every_member_once")
        with m.If(out & res_ours):
            m.d.comb += [Assert(o.payload.members == E.members, "result_members"),
                         Assert(o.payload.mode == E.mode, "result_mode"),
                         Assert(o.payload.root == E.root, "result_root")]
        with m.If(o.valid):
            m.d.comb += Assert(o.payload.flit.first & o.payload.flit.last
                               & (o.payload.flit.kind == Kind.RESULT)
                               & (o.payload.flit.src == 0), "result_is_one_flit")
        two = (E.members & (E.members - 1)) != 0
        m.d.comb += [Cover(out & res_ours & two, "result_of_two_or_more"),
                     Cover((dut.o_duplicate != 0) & out & res_ours, "duplicate_then_result")]
        return m


register(Harness(
    name="reduce",
    doc=f"reduction unit ({N_PORTS} ports, 2 slots): a chunk's result leaves once, after "
        f"every member contributed once (bounded, {DEPTH} steps)",
    build=lambda planted: ReduceHarness(planted),
    planted=PLANTED,
    mode="bmc", depth=DEPTH, cover_depth=DEPTH, bug_depth=DEPTH, fast=False,
))
