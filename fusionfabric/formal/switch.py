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

3. the allocator (white box: the switch's ``alloc`` submodule is elaborated by the
   harness): at most one output per input and one input per output (``o_match[i]``,
   ``o_grant[o]`` one-hot or zero), ``o_grant[o][i] == o_match[i][o]``, matches only on
   requests; output o's grant pointer changes only in a cycle in which its first-round
   grant was accepted; no request stays up unmatched :data:`WAIT_BOUND` cycles;
4. the request rule the ``switch-alloc`` harness assumes: ``i_req[r]`` is the VOQs with a
   flit, the outputs with a credit and the outputs not locked by another input; a VOQ
   with a flit that is not matched keeps it; an output's lock changes only in a cycle in
   which it was granted, and then to the granted input.

Covers: a full VOQ, a multicast flit to two or more outputs taken at input ``a``, the
``j``-th flit delivered.

Planted bugs: ``voq-drop``: the watched input ``a`` takes a flit whose VOQ is full and
drops that copy (as if written); ``double-out``: output 0 emits every flit twice (the buffer is popped on
every second handshake); ``pointer``: output 0's grant pointer also moves on a grant that
was not accepted (RRM's rule); ``double-grant``: output 0 grants every requesting input.

``switch-alloc`` (:class:`SwitchAllocHarness`): the same allocator under that request rule
with VOQ contents, credits and lock values free, proven by k-induction: one grant per
input and per output, and bounded waiting (a request is matched after at most
``WAIT_BOUND - 1`` = 11 cycles up; a cover reaches 11). Planted: ``pointer``.
"""

from __future__ import annotations

from amaranth.hdl import (Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, ResetSignal,
                          Signal)
from amaranth.asserts import AnyConst, AnySeq

from fusionfabric.formats.switch import Kind, group_entry
from fusionfabric.rtl.switch.islip import ISLIPAllocator, mask_above
from fusionfabric.rtl.switch.top import Switch
from .flow import Harness, driven_signals, register
from .islip import wait_bound

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
#: iSLIP rounds of the switch (its default for 3 ports).
ITERATIONS = 2
#: Longest wait proven (cycles a request to the allocator stays up unmatched: < WAIT_BOUND).
WAIT_BOUND = 12

PLANTED = {
    "voq-drop": "the watched input takes a flit whose VOQ is full and drops that copy",
    "double-out": "output 0 emits every flit twice",
    "pointer": "output 0's grant pointer moves on a grant that was not accepted",
    "double-grant": "output 0 grants every requesting input (two inputs may be matched to it)",
}


def _at_most_one(x):
    return (x & (x - 1)) == 0


def _own_allocator(dm, platform):
    """Elaborate the switch's ``alloc`` submodule here (so that its internal signals can be
    read and overridden) and put the ``Module`` in its place; return the component, the
    module and its driven signals."""
    alloc, loc = dm._named_submodules["alloc"]
    am = alloc.elaborate(platform)
    alloc._MustUse__used = True
    dm._named_submodules["alloc"] = (am, loc)
    return alloc, am, driven_signals(am)


def _plant_allocator(planted, alloc, am, asig, n):
    gmask = [asig[f"gmask{o}"] for o in range(n)]
    grant0 = [asig[f"g0_{o}"] for o in range(n)]
    accept0 = [asig[f"a0_{i}"] for i in range(n)]
    if planted == "pointer":
        # after the RTL's pointer update (the last assignment wins)
        taken = Cat(accept0[i][0] for i in range(n)).any()
        with am.If(grant0[0].any() & ~taken):
            am.d.sync += gmask[0].eq(mask_above(grant0[0], n))
    elif planted == "double-grant":
        am.d.comb += grant0[0].eq(Cat(alloc.i_req[i][0] for i in range(n)))
    return gmask, grant0, accept0


def _one_grant(m, alloc, n):
    for i in range(n):
        m.d.comb += [Assert(_at_most_one(alloc.o_match[i]), "one_output_per_input"),
                     Assert((alloc.o_match[i] & ~alloc.i_req[i]) == 0,
                            "match_only_on_request")]
    for o in range(n):
        m.d.comb += Assert(_at_most_one(alloc.o_grant[o]), "one_input_per_output")
        for i in range(n):
            m.d.comb += Assert(alloc.o_grant[o][i] == alloc.o_match[i][o], "grant_is_match")

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
        lock_v = [sig[f"lock_v{o}"] for o in range(P)]
        lock_in = [sig[f"lock_in{o}"] for o in range(P)]
        alloc, am, asig = _own_allocator(dm, platform)
        gmask, grant0, accept0 = _plant_allocator(self.planted, alloc, am, asig, P)
        if self.planted == "voq-drop":
            # after the RTL's ingress (the last assignment wins): a copy whose VOQ is
            # full counts as written (not written, the flit is taken after its last copy)
            r = self.watch[0]           # the watched input: its losses are visible
            q, port = queues[r], sw.i_port[r]
            pick, rem, done = sig[f"pick{r}"], sig[f"rem{r}"], sig[f"done{r}"]
            last_copy = rem == pick
            with dm.If(port.valid & ~sig[f"drop{r}"] & (pick & ~q.o_notfull).any()):
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

        # ---- the allocator: one grant per input and per output, fairness ----
        _one_grant(m, alloc, P)
        wait_bound(m, alloc, P, WAIT_BOUND)
        started = Signal()
        m.d.sync += started.eq(1)
        for o in range(P):
            prev_gmask = Signal(P, name=f"prev_gmask{o}")
            was_taken = Signal(name=f"was_taken{o}")
            m.d.sync += [prev_gmask.eq(gmask[o]),
                         was_taken.eq(Cat(accept0[i][o] for i in range(P)).any())]
            with m.If(started & ~was_taken):
                m.d.comb += Assert(gmask[o] == prev_gmask, "pointer_moves_on_accept")
        # the request rule the ``switch-alloc`` proof assumes: a request is a flit in the
        # VOQ, a credit and the output's lock; a VOQ empties only by being matched; an
        # output's lock changes only when it is granted, to the granted input
        credit_ok = Cat(c != 0 for c in credit)
        prev_ne = [Signal(P, name=f"prev_nonempty{r}") for r in range(P)]
        prev_match = [Signal(P, name=f"prev_match{r}") for r in range(P)]
        for r in range(P):
            lock_ok = Cat(~lock_v[o] | (lock_in[o] == r) for o in range(P))
            m.d.sync += [prev_ne[r].eq(queues[r].o_nonempty), prev_match[r].eq(alloc.o_match[r])]
            m.d.comb += [
                Assert(alloc.i_req[r] == (queues[r].o_nonempty & credit_ok & lock_ok),
                       "request_is_flit_credit_lock"),
                Assert((prev_ne[r] & ~prev_match[r] & ~queues[r].o_nonempty) == 0,
                       "voq_empties_only_on_match"),
            ]
        for o in range(P):
            pv, pi, pg = (Signal(name=f"prev_lock_v{o}"), Signal(range(P), name=f"prev_lock_in{o}"),
                          Signal(P, name=f"prev_grant{o}"))
            m.d.sync += [pv.eq(lock_v[o]), pi.eq(lock_in[o]), pg.eq(alloc.o_grant[o])]
            with m.If(started & (pg == 0)):
                m.d.comb += Assert((lock_v[o] == pv) & (lock_in[o] == pi), "lock_changes_on_grant")
            with m.If(started & (pg != 0) & ((lock_v[o] != pv) | (lock_in[o] != pi))):
                m.d.comb += Assert(pg.bit_select(lock_in[o], 1), "lock_changes_on_grant")

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
        f"(input, output) in order, once, intact; credits conserved; no buffer overflow; "
        f"one grant per input and output; the allocator's request rule (bounded, {DEPTH} "
        f"steps)",
    build=lambda planted: SwitchHarness(planted),
    planted=PLANTED,
    mode="bmc", depth=DEPTH, cover_depth=COVER_DEPTH, bug_depth=COVER_DEPTH, fast=False,
))


ALLOC_PLANTED = {
    "pointer": PLANTED["pointer"],
}


class SwitchAllocHarness(Elaboratable):
    """The switch's allocator (``ISLIPAllocator``, 3 ports, :data:`ITERATIONS` rounds)
    under the switch's request rule, for all time: ``i_req[i][o] = voq[i][o] & credit[o]
    & lock_ok[i][o]`` where ``voq`` is free except that a VOQ with a flit that was not
    matched keeps it, ``credit[o]`` is free (any credit pattern, the same for every input),
    and output o's lock (``lock_v``, ``lock_in``: reset 0) changes only when o is granted,
    to the granted input (its value free). The rule is what ``switch`` asserts on the
    real switch (``request_is_flit_credit_lock``, ``voq_empties_only_on_match``,
    ``lock_changes_on_grant``)."""

    def __init__(self, planted: str | None = None, wait_bound: int = WAIT_BOUND):
        if planted is not None and planted not in ALLOC_PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(ALLOC_PLANTED)}")
        self.planted = planted
        self.wait_bound = wait_bound

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        n = N_PORTS
        alloc = ISLIPAllocator(n, ITERATIONS)
        am = alloc.elaborate(platform)
        alloc._MustUse__used = True
        _plant_allocator(self.planted, alloc, am, driven_signals(am), n)
        m.submodules.dut = am

        credit_ok = Signal(n)
        m.d.comb += credit_ok.eq(AnySeq(n))
        lock_v = [Signal(name=f"lock_v{o}") for o in range(n)]
        lock_in = [Signal(range(n), name=f"lock_in{o}") for o in range(n)]
        for o in range(n):
            g = alloc.o_grant[o]
            upd, val = Signal(name=f"lock_upd{o}"), Signal(name=f"lock_val{o}")
            m.d.comb += [upd.eq(AnySeq(1)), val.eq(AnySeq(1))]
            with m.If(g.any() & upd):
                m.d.sync += [lock_v[o].eq(val),
                             lock_in[o].eq(sum(g[i] * i for i in range(1, n)))]
        for i in range(n):
            voq = Signal(n, name=f"voq{i}")
            prev_voq = Signal(n, name=f"prev_voq{i}")
            prev_match = Signal(n, name=f"prev_match{i}")
            m.d.comb += voq.eq(AnySeq(n))
            m.d.sync += [prev_voq.eq(voq), prev_match.eq(alloc.o_match[i])]
            m.d.comb += Assume((prev_voq & ~prev_match & ~voq) == 0)
            lock_ok = Cat(~lock_v[o] | (lock_in[o] == i) for o in range(n))
            m.d.comb += alloc.i_req[i].eq(voq & credit_ok & lock_ok)

        _one_grant(m, alloc, n)
        waits = wait_bound(m, alloc, n, self.wait_bound)
        m.d.comb += Cover(Cat(w == self.wait_bound - 1 for w in waits).any(),
                          "wait_bound_reached")
        return m


register(Harness(
    name="switch-alloc",
    doc=f"the VOQ switch's iSLIP allocator ({N_PORTS} ports, {ITERATIONS} iterations) under "
        f"the switch's request rule (VOQ, credit, lock): one grant per input and per "
        f"output, a request up for {WAIT_BOUND - 1} cycles is matched",
    build=lambda planted: SwitchAllocHarness(planted),
    planted=ALLOC_PLANTED,
    mode="prove", depth=16, cover_depth=16, fast=False,
))
