"""The VOQ switch (:func:`fusionfabric.rtl.switch.Switch`, ``mode="voq"``: a
:class:`~fusionfabric.rtl.switch.VoqSwitch`): no flit lost, duplicated or reordered per
(input, output), credits conserved.

Configuration (the smallest): ``n_ports`` 3, ``depth`` 2 (flits per VOQ), ``data_width``
:data:`DATA_WIDTH`, ``out_depth`` 2, ``n_groups`` 1, no reduction units, iSLIP with its
default 2 iterations.

Environment: every input offers free flits (``AnySeq``: any kind, destination, chunk,
``first``/``last`` and data) at free steps and holds a flit (valid and payload) until it
is taken, the stream contract the ingress's multicast replication relies on (it writes
one copy per cycle of the flit it is offered); every ``o_port.ready`` is free. The group
table's one entry is a free constant ``E`` (``AnyConst``), written in the first step; no
configuration beat follows. One input ``a`` and one output ``b`` are watched,
:data:`WATCH` = (2, 1) (fixed: with ``a`` and ``b`` free constants the solver did not
finish step 6 in 3 minutes, with them fixed 8 steps take ~25 s); the harness decides itself which flits of ``a`` go to ``b``: a UNICAST flit with
``dest == b``, or a MULTICAST flit to group 0 once ``E`` is written, with ``E`` valid and
``b`` a member (other kinds, and groups that do not exist, are dropped).

Properties (bounded: every step up to :data:`DEPTH` from reset), with two symbolic
indices ``i < j`` (``AnyConst``) over the flits ``a`` sends to ``b``:

1. per (input, output), in order and exactly once: the ``i``-th and ``j``-th flits with
   ``src == a`` leaving output ``b`` equal the ``i``-th and ``j``-th flits ``a`` offered
   to ``b`` (data, first, last, kind, dest, chunk); no more flits of ``a`` leave ``b``
   than ``a`` has sent there (a flit counts as sent from the first step it is offered:
   a multicast copy may leave before the input's handshake, which waits for the last
   copy). A flit lost, duplicated or reordered shifts the numbering and is caught for
   some ``i``;
2. credits conserved, per output: ``credit + flits in the output buffer == out_depth``,
   ``o_credit == credit``; the output buffer is never written when full, and a VOQ never
   when full (both would lose a flit).

Covers: a full VOQ, a multicast flit to two or more outputs taken at input ``a``, the
``j``-th flit delivered.

Planted bugs: ``voq-drop``: input 0 takes a flit whose VOQ is full and drops that copy
(as if written); ``double-out``: output 0 emits every flit twice (the buffer is popped on
every second handshake).
"""

from __future__ import annotations

from amaranth.hdl import (Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, ResetSignal,
                          Signal)
from amaranth.asserts import AnyConst, AnySeq

from fusionfabric.formats.switch import Kind, group_entry
from fusionfabric.rtl.switch.top import Switch
from .flow import Harness, driven_signals, register

N_PORTS = 3
DATA_WIDTH = 2
VOQ_DEPTH = 2
OUT_DEPTH = 2
#: Bound of the proof (steps from reset).
DEPTH = 8
#: Bound of the covers.
COVER_DEPTH = 14
#: The watched (input, output): the last input (lowest iSLIP priority from reset) and
#: an output that is not the first copy of a multicast (copies go lowest member first).
WATCH = (2, 1)
#: Width of the flit numbering per (input, output).
IDX_BITS = 3

PLANTED = {
    "voq-drop": "input 0 takes a flit whose VOQ is full and drops that copy",
    "double-out": "output 0 emits every flit twice",
}

#: Flit fields compared between the watched input and output (``src`` is stamped).
FIELDS = ("data", "first", "last", "kind", "dest", "chunk")


class SwitchHarness(Elaboratable):
    def __init__(self, planted: str | None = None, watch: tuple = WATCH):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        if (not isinstance(watch, tuple) or len(watch) != 2
                or not all(isinstance(x, int) and 0 <= x < N_PORTS for x in watch)):
            raise ValueError(f"watch={watch!r} must be (input, output), each in 0..{N_PORTS - 1}")
        self.planted = planted
        self.watch = watch

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        P = N_PORTS
        sw = Switch(n_ports=P, data_width=DATA_WIDTH, depth=VOQ_DEPTH, out_depth=OUT_DEPTH,
                    n_groups=1)
        dm = sw.elaborate(platform)
        sw._MustUse__used = True
        sig = driven_signals(dm)
        queues = [dm._named_submodules[f"queue{r}"][0] for r in range(P)]
        outs = [dm._named_submodules[f"out{o}"][0] for o in range(P)]
        credit = [sig[f"credit{o}"] for o in range(P)]
        if self.planted == "voq-drop":
            # after the RTL's ingress (the last assignment wins): a copy whose VOQ is
            # full counts as written (not written, the flit is taken after its last copy)
            q, port = queues[0], sw.i_port[0]
            pick, rem, done = sig["pick0"], sig["rem0"], sig["done0"]
            last_copy = rem == pick
            with dm.If(port.valid & ~sig["drop0"] & (pick & ~q.o_notfull).any()):
                dm.d.sync += done.eq(Mux(last_copy, 0, done | pick))
                dm.d.comb += port.ready.eq(last_copy)
        elif self.planted == "double-out":
            again = Signal()
            port = sw.o_port[0]
            with dm.If(port.valid & port.ready):
                dm.d.sync += again.eq(~again)
                dm.d.comb += outs[0].r_en.eq(again)
        m.submodules.dut = dm

        # ---- configuration: group 0 = E, written in the first step ----
        entry_l = group_entry(P).layout()
        E = Signal(entry_l)
        m.d.comb += E.eq(AnyConst(len(E.as_value())))
        first = Signal(init=1)
        m.d.sync += first.eq(0)
        cfg = sw.i_config
        m.d.comb += [cfg.valid.eq(first), cfg.payload.group.eq(0), cfg.payload.entry.eq(E)]

        # ---- inputs: free flits, held until taken; outputs: free ready ----
        flit_w = len(sw.i_port[0].payload.as_value())
        for r in range(P):
            port = sw.i_port[r]
            m.d.comb += [port.valid.eq(AnySeq(1)), port.payload.eq(AnySeq(flit_w))]
            held = Signal(name=f"held{r}")
            held_flit = Signal(flit_w, name=f"held_flit{r}")
            m.d.sync += [held.eq(port.valid & ~port.ready), held_flit.eq(port.payload)]
            with m.If(held):
                m.d.comb += Assume(port.valid & (port.payload.as_value() == held_flit))
        for o in range(P):
            m.d.comb += sw.o_port[o].ready.eq(AnySeq(1))

        # ---- the watched pair (a, b) and flits i < j ----
        a = Signal(range(P))
        b = Signal(range(P))
        i = Signal(IDX_BITS)
        j = Signal(IDX_BITS)
        m.d.comb += [a.eq(self.watch[0]), b.eq(self.watch[1]),
                     i.eq(AnyConst(IDX_BITS)), j.eq(AnyConst(IDX_BITS)),
                     Assume(i < j)]
        layout = sw.flit.layout()
        a_valid, a_ready, fa = Signal(), Signal(), Signal(layout)
        b_valid, b_ready, fb = Signal(), Signal(), Signal(layout)
        for r in range(P):
            with m.If(a == r):
                m.d.comb += [a_valid.eq(sw.i_port[r].valid), a_ready.eq(sw.i_port[r].ready),
                             fa.eq(sw.i_port[r].payload)]
            with m.If(b == r):
                m.d.comb += [b_valid.eq(sw.o_port[r].valid), b_ready.eq(sw.o_port[r].ready),
                             fb.eq(sw.o_port[r].payload)]
        members = E.members.bit_select(b, 1)
        to_b = a_valid & (((fa.kind == Kind.UNICAST) & (fa.dest == b))
                             | ((fa.kind == Kind.MULTICAST) & (fa.dest == 0) & ~first
                                & E.valid & members))
        CAP = (1 << (IDX_BITS + 1)) - 1
        n_in = Signal(IDX_BITS + 1)
        n_out = Signal(IDX_BITS + 1)
        with m.If(to_b & a_ready & (n_in != CAP)):
            m.d.sync += n_in.eq(n_in + 1)
        watched = []
        for idx, name in ((i, "i"), (j, "j")):
            rec = Signal(flit_w, name=f"flit_{name}")
            with m.If(to_b & (n_in == idx)):
                m.d.sync += rec.eq(fa.as_value())
            watched.append((idx, name, rec))

        from_a = b_valid & b_ready & (fb.src == a)
        with m.If(from_a & (n_out != CAP)):
            m.d.sync += n_out.eq(n_out + 1)
        with m.If(from_a):
            m.d.comb += Assert(n_out < n_in + to_b, "delivered_only_what_was_sent")
            for idx, name, rec in watched:
                rv = layout(rec)
                with m.If(n_out == idx):
                    m.d.comb += Assert(Cat(getattr(fb, f) == getattr(rv, f)
                                           for f in FIELDS).all(),
                                       f"flit_{name}_in_order_once")

        # ---- credits and buffers ----
        for o in range(P):
            ob = outs[o]
            m.d.comb += [
                Assert(credit[o] + ob.level == OUT_DEPTH, "credit_plus_buffered_is_depth"),
                Assert(sw.o_credit[o] == credit[o], "o_credit_is_credit"),
                Assert(~ob.w_en | ob.w_rdy, "no_output_overflow"),
            ]
        for r in range(P):
            q = queues[r]
            m.d.comb += Assert(~q.i_wen | (q.i_wsel & q.o_notfull).any(), "no_voq_overflow")

        # ---- covers ----
        full = Cat((q.o_notfull != (1 << P) - 1) for q in queues).any()
        two = (E.members & (E.members - 1)) != 0
        m.d.comb += [
            Cover(full, "voq_full"),
            Cover(a_valid & a_ready & (fa.kind == Kind.MULTICAST) & (fa.dest == 0)
                  & ~first & E.valid & two, "multicast_replicated"),
            Cover(from_a & (n_out == j), "flit_j_delivered"),
        ]
        return m


register(Harness(
    name="switch",
    doc=f"VOQ switch {N_PORTS} ports, VOQ depth {VOQ_DEPTH}, out_depth {OUT_DEPTH}: per "
        f"(input, output) in order, once, intact; credits conserved; no buffer overflow "
        f"(bounded, {DEPTH} steps)",
    build=lambda planted: SwitchHarness(planted),
    planted=PLANTED,
    mode="bmc", depth=DEPTH, cover_depth=COVER_DEPTH, bug_depth=COVER_DEPTH, fast=False,
))
