"""The reduction unit (block ``reduce-unit``): collects one contribution per member per
chunk and emits the deterministic tree reduction.

Integration (for the switch)
----------------------------
Instantiate ``ReductionUnit(n_ports=, data_width=, n_chunks=, n_groups=)`` and connect:

``i_config``  — ``stream.Signature(config_layout(n_ports))``, payload ``{group, entry}``
    with ``entry = sim.layouts.group_entry(n_ports)``; always ready. Feed it the same beats
    as the switch's own group table (the layouts are identical), so both copies agree.
``i_contrib`` — ``stream.Signature(switch_flit(data_width).layout())``: REDUCE flits with
    ``dest`` = group, ``chunk``, ``src`` = the contributing port (stamped at ingress),
    ``data`` = ``data_width/32`` 32-bit or ``data_width/16`` 16-bit elements, LSB first.
    One flit is one contribution (``first``/``last`` are ignored). Any chunk can go to any
    unit, e.g. unit ``chunk mod n_units``; all contributions of one (group, chunk) must
    reach the same unit.
``o_result``  — ``stream.Signature(result_layout(n_ports, data_width))``: ``flit`` is a
    RESULT flit (``dest`` = group, ``chunk``, ``first = last = 1``, ``src = 0``, ``data`` =
    the reduced elements) and ``members``/``mode``/``root`` are the group entry's, so the
    switch can replicate it (ALLREDUCE: to every member) or send it to ``root`` (REDUCE)
    without a second table lookup.
``o_*`` counters — 32-bit, wrap, cleared by reset.

The unit never drops silently: a bad flit (not REDUCE, unknown/invalid group, bad op or
dtype code, or a dtype the unit was built without: ``dtypes``) counts in ``o_invalid``, a
non-member contribution in ``o_nonmember``, a second contribution of a member to an open
chunk (or to a complete chunk whose result is not yet out) in ``o_duplicate``; each is dropped. Once a chunk's slot is free again, the same
(group, chunk) starts a new reduction (chunk ids may be reused). When all
``n_chunks`` open-chunk slots are in use and a contribution opens a new chunk, ``i_contrib``
is held (``ready`` low) and ``o_full_cycles`` counts those cycles.

Flow-control contract: the held flit blocks the unit's input, so keep at most ``n_chunks``
chunks in flight per unit (e.g. a source window of ``n_chunks`` chunks per unit). If every
slot is open and the missing contributions sit behind the held flit, nothing can complete
(deadlock). Full line rate needs about two slots more than the live chunks (a completed
chunk keeps its slot while it is streamed, ``k + 2`` cycles); see docs/reduction.md.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.formats.switch import (DEST_BITS, GROUP_BITS, Dtype, Kind, Op, group_entry, switch_flit)

from fusionfabric.rtl.switch.group_table import GroupTable, config_layout

from .lane import OP_BYPASS, LaneAlu
from .simd import ALL_DTYPES, AccToFlit, FlitToAcc, SimdAlu, acc_lanes, check_data_width, \
    dtypes_text, parse_dtypes

__all__ = ["ReductionUnit", "config_layout", "result_layout", "BLOCKS"]


def result_layout(n_ports: int, data_width: int) -> data.StructLayout:
    """Payload of ``o_result``: the RESULT flit plus the group's routing fields."""
    return data.StructLayout({"flit": switch_flit(data_width).layout(), "members": n_ports,
                              "mode": 1, "root": DEST_BITS})


def _popcount(bits):
    total = Const(0, 1)
    for b in bits:
        total = total + b
    return total


def _first_set(bits, n):
    """Index of the lowest set bit of ``bits`` (0 if none), as one expression."""
    out = Const(0, range(n))
    for j in reversed(range(n)):
        out = Mux(bits[j], j, out)
    return out


class ReductionUnit(wiring.Component):
    """SHARP-style in-network reduction of one contribution per member per chunk.

    Contributions are stored by (open-chunk slot, member rank); when a chunk has all its
    members it is streamed in rank order through a pairing pipeline of
    ``depth = ceil(log2(n_ports))`` levels, each one :class:`~rtl.reduce.simd.SimdAlu`:
    level ``d`` combines items 2i and 2i+1 of a chunk and carries an odd last item up
    unchanged (a BYPASS op, so order is kept). That is exactly the balanced pairwise tree
    over member rank of :func:`fusionfabric.sim.reduce.tree_reduce`, so the result is independent of
    arrival order. Numerics: :mod:`fusionfabric.sim.reduce` (docs/reduction.md).

    Parameters
    ----------
    n_ports : int
        Switch ports; members are a bitmap of ``n_ports`` bits (2 … 128).
    data_width : int
        Flit data bits, a multiple of 32.
    n_chunks : int
        Open-chunk table capacity (1 … 64).
    n_groups : int
        Group table entries (1 … 256); group ids ``>= n_groups`` are invalid.
    dtypes : str or set of Dtype
        The dtype paths each SIMD lane builds: ``"all"`` (default) or a comma-separated
        subset of ``int32, uint32, fp32, fp16, bf16`` (:func:`~rtl.reduce.simd.parse_dtypes`).
        A contribution whose group names a dtype that is not built is dropped and counted
        in ``o_invalid``, like a bad dtype code. Without fp16 and bf16 the ALUs have
        ``data_width/32`` lanes instead of ``data_width/16``. Timing and throughput are
        the same for every ``dtypes``.
    add_stages : int
        Pipeline stages of every lane's fp32 adder: 4 (default), 5 (align and add in two
        stages), 6 (also the leading-zero count and the normalizing shift) or 7 (also the
        magnitude order and exponent differences before the operands are ordered). Each stage
        above 4 adds one cycle per pairing level to :meth:`latency`; throughput is
        unchanged.
    cycles_per_flit : int
        1 (default) or a divisor of the ALU lane count: each pairing level has
        ``1/cycles_per_flit`` of the lanes and passes a flit through them in
        ``cycles_per_flit`` slices, one per cycle. Throughput drops to
        ``1/cycles_per_flit`` contributions per cycle and :meth:`latency` grows by
        ``k * (cycles_per_flit - 1)``.
    pipeline : bool
        More register stages for the clock (default ``False``): the per-contribution checks
        (membership, rank, group size, entry validity) and the open-chunk match are computed
        at ingest and registered, with the match forwarded past the slot opened or freed in
        that cycle; the contribution memory and ready FIFO are written one cycle after the
        table update; the memory's output is registered before the widening; each lane
        registers its operands and splits the native rounding in two; the output
        narrowing takes two stages. :meth:`latency` grows by ``4 + 2 * depth``; throughput
        is unchanged. The event counters of the table (``o_contributions``,
        ``o_duplicate``, ``o_nonmember``, ``o_invalid``, ``o_full_cycles``) count one cycle
        after the event.

    Members
    -------
    i_config : In(stream.Signature(config_layout(n_ports)))
        Group table writes; always ready; ``group >= n_groups`` dropped, counted in
        ``o_config_drops``.
    i_contrib : In(stream.Signature(switch_flit(data_width).layout()))
        Contribution flits.
    o_result : Out(stream.Signature(result_layout(n_ports, data_width)))
        One result per completed chunk, in completion order.
    o_contributions, o_results, o_duplicate, o_nonmember, o_invalid, o_full_cycles,
    o_config_drops : Out(32)
        Event counters (see the module docstring).

    Timing
    ------
    Throughput: one contribution accepted per cycle sustained, as long as a slot is free
    (a chunk holds its slot from its first contribution until its last item is streamed,
    about ``k + 2`` cycles after its last contribution). Latency with an idle pipeline:
    the last contribution of a ``k``-member chunk accepted in cycle t gives ``o_result``
    valid in cycle ``t + k + 5 + depth * 5`` (:attr:`latency`); ALU latency 5 per level
    (``add_stages + 1``, ``add_stages + 3`` with ``pipeline``). With
    ``cycles_per_flit = f``: one contribution per ``f`` cycles sustained, latency
    ``t + k * f + 5 + depth * (add_stages + 1)``.
    ``o_result.ready`` low stalls the whole pipeline (slots stay busy, so ``i_contrib``
    eventually stalls too). Synchronous reset empties the table, the pipeline and the
    counters and invalidates every group.

    Standards: IEEE 754-2019 binary32/binary16 arithmetic (RNE, subnormals); bfloat16 as
    in ml_dtypes.
    """

    ALU_LATENCY = SimdAlu.LATENCY

    def __init__(self, n_ports: int = 8, data_width: int = 64, n_chunks: int = 8,
                 n_groups: int = 16, dtypes="all", add_stages: int = 4,
                 cycles_per_flit: int = 1, pipeline: bool = False):
        if not isinstance(n_ports, int) or not 2 <= n_ports <= 128:
            raise ValueError(f"n_ports={n_ports!r} must be an integer in 2..128")
        check_data_width(data_width)
        if not isinstance(n_chunks, int) or not 1 <= n_chunks <= 64:
            raise ValueError(f"n_chunks={n_chunks!r} must be an integer in 1..64")
        if not isinstance(n_groups, int) or not 1 <= n_groups <= 1 << GROUP_BITS:
            raise ValueError(f"n_groups={n_groups!r} must be an integer in 1..256")
        self.n_ports = n_ports
        self.data_width = data_width
        self.n_chunks = n_chunks
        self.n_groups = n_groups
        self.dtypes = parse_dtypes(dtypes)
        if not isinstance(pipeline, bool):
            raise ValueError(f"pipeline={pipeline!r} must be True or False")
        self.pipeline = pipeline
        self.alu_latency = LaneAlu.latency_of(add_stages, pipeline)
        self.add_stages = add_stages
        lanes = acc_lanes(data_width, self.dtypes)
        if isinstance(cycles_per_flit, bool) or not isinstance(cycles_per_flit, int) or \
                cycles_per_flit < 1 or lanes % cycles_per_flit:
            raise ValueError(f"cycles_per_flit={cycles_per_flit!r} must be a positive "
                             f"divisor of the {lanes} ALU lanes (data_width={data_width}, "
                             f"dtypes={dtypes_text(self.dtypes)})")
        self.cycles_per_flit = cycles_per_flit
        self.depth = max(1, (n_ports - 1).bit_length())
        flit = switch_flit(data_width).layout()
        super().__init__({
            "i_config": In(stream.Signature(config_layout(n_ports))),
            "i_contrib": In(stream.Signature(flit)),
            "o_result": Out(stream.Signature(result_layout(n_ports, data_width))),
            "o_contributions": Out(32), "o_results": Out(32), "o_duplicate": Out(32),
            "o_nonmember": Out(32), "o_invalid": Out(32), "o_full_cycles": Out(32),
            "o_config_drops": Out(32),
        })

    def latency(self, k: int) -> int:
        """Cycles from the handshake of a chunk's last contribution to ``o_result.valid``
        (idle pipeline, ready output): 1 ingest + 1 ready FIFO + ``k`` rank-ordered reads
        + 1 memory + 1 widening + ``SimdAlu.LATENCY`` (``add_stages + 1``) per pairing
        level + 1 output register; with ``pipeline`` also 1 memory write, 1 memory output
        register, 2 per level and 2 in the output narrowing. The model's
        :func:`fusionfabric.sim.reduce.unit_latency` states the same timing independently;
        the tests measure both against the simulated unit."""
        if not 1 <= k <= self.n_ports:
            raise ValueError(f"k={k} must be in 1..n_ports={self.n_ports}")
        extra = 4 if self.pipeline else 0
        return 1 + 1 + k * self.cycles_per_flit + 1 + 1 + self.depth * self.alu_latency + 1 + \
            extra

    def _checks(self, m, flit, e, group_ok, prefix=""):
        """What a contribution's flit and group entry alone decide: whether the entry is a
        valid REDUCE entry of a built dtype (an expression), and the signals
        ``{prefix}src_ok`` (the source is a member), ``{prefix}rank`` (its rank among the
        members) and ``{prefix}k`` (the group size)."""
        P = self.n_ports
        src = flit.src
        src_ok = Signal(name=f"{prefix}src_ok")
        m.d.comb += src_ok.eq(Cat(*[e.members[p] & (src == p) for p in range(P)]).any())
        below = Cat(*[e.members[p] & (src > p) for p in range(P)])
        rank = Signal(range(P), name=f"{prefix}rank")
        k = Signal(range(P + 1), name=f"{prefix}k")
        m.d.comb += [rank.eq(_popcount(below)), k.eq(_popcount(e.members))]
        if self.dtypes == ALL_DTYPES:
            dtype_ok = e.dtype <= Dtype.BF16
        else:                               # an unbuilt dtype is invalid like a bad code
            dtype_ok = Cat(*[e.dtype == d for d in sorted(self.dtypes)]).any()
        valid_entry = (flit.kind == Kind.REDUCE) & group_ok & e.valid & (e.op <= Op.MAX) & \
            dtype_ok
        return valid_entry, src_ok, rank, k

    def _bit(self, src):
        """The one-hot member bit of port ``src``."""
        P = self.n_ports
        return Const(1, P) << src[:max(1, (P - 1).bit_length())]

    def elaborate(self, platform):
        m = Module()
        P, C = self.n_ports, self.n_chunks
        entry_l = group_entry(P).layout()
        meta_l = data.StructLayout({"op": 2, "dtype": 3, "native": 1, "mode": 1,
                                    "root": DEST_BITS, "members": P, "group": GROUP_BITS,
                                    "chunk": switch_flit(8).widths["chunk"]})

        # -- group table (registers: reset invalidates every entry) -----------------------
        m.submodules.table = table = GroupTable(P, self.n_groups, n_lookups=1)
        wiring.connect(m, wiring.flipped(self.i_config), table.i_config)
        m.d.comb += self.o_config_drops.eq(table.o_config_drops)

        # -- ingest stage: register the flit and its group entry --------------------------
        ic = self.i_contrib
        s1_valid = Signal()
        s1 = Signal(switch_flit(self.data_width).layout())
        s1_entry = Signal(entry_l)
        s1_group_ok = Signal()
        s1_done = Signal()
        m.d.comb += ic.ready.eq(~s1_valid | s1_done)
        lookup = Signal(entry_l)
        m.d.comb += [table.i_group[0].eq(ic.payload.dest), lookup.eq(table.o_entry[0])]
        with m.If(ic.ready):
            m.d.sync += [s1_valid.eq(ic.valid), s1.eq(ic.payload), s1_entry.eq(lookup),
                         s1_group_ok.eq(ic.payload.dest < self.n_groups)]

        # -- open-chunk table -------------------------------------------------------------
        FREE, OPEN, CLOSED = 0, 1, 2
        state = [Signal(2, name=f"slot{j}_state") for j in range(C)]
        s_group = [Signal(GROUP_BITS, name=f"slot{j}_group") for j in range(C)]
        s_chunk = [Signal(len(s1.chunk), name=f"slot{j}_chunk") for j in range(C)]
        s_arrived = [Signal(P, name=f"slot{j}_arrived") for j in range(C)]
        s_count = [Signal(range(P + 1), name=f"slot{j}_count") for j in range(C)]
        s_k = [Signal(range(P + 1), name=f"slot{j}_k") for j in range(C)]
        s_meta = [Signal(meta_l, name=f"slot{j}_meta") for j in range(C)]

        mem = m.submodules.mem = Memory(shape=self.data_width, depth=C * P, init=[])
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")

        def count(ctr):
            m.d.sync += ctr.eq(ctr + 1)

        freed = Signal(C)       # pipeline: the slot the streamer frees in this cycle
        if self.pipeline:
            fifo = m.submodules.ready_fifo = SyncFIFO(width=max(1, (C - 1).bit_length()), depth=C)
            # At ingest: the checks that need only the flit and its entry, and the open-chunk
            # match against the table as it is after this cycle (a slot s1 opens now
            # matches; a slot the streamer frees now does not), registered beside the flit.
            inc = ic.payload
            pre_ok, pre_src_ok, pre_rank, pre_k = self._checks(
                m, inc, lookup, inc.dest < self.n_groups, prefix="pre_")
            c1_ok, c1_src_ok = Signal(), Signal()
            c1_rank, c1_k, c1_bit = Signal(range(P)), Signal(range(P + 1)), Signal(P)
            c1_match = Signal(C)
            opens = Signal(C)   # the slot s1 opens in this cycle
            same_key = (s1.dest == inc.dest) & (s1.chunk == inc.chunk)
            pre_match = Cat(*[((state[j] != FREE) & ~freed[j] & (s_group[j] == inc.dest) &
                               (s_chunk[j] == inc.chunk)) | (opens[j] & same_key)
                              for j in range(C)])
            with m.If(ic.ready):
                m.d.sync += [c1_ok.eq(pre_ok), c1_src_ok.eq(pre_src_ok), c1_rank.eq(pre_rank),
                             c1_k.eq(pre_k), c1_bit.eq(self._bit(inc.src)),
                             c1_match.eq(pre_match)]
            # s1: at most one slot matches; every slot decides its own update from its bit
            frees = Cat(*[state[j] == FREE for j in range(C)])
            first_free = Cat(*[frees[j] & ~frees[:j].any() if j else frees[0]
                               for j in range(C)])
            any_free = frees.any()
            ok = s1_valid & c1_ok & c1_src_ok
            matched = c1_match.any()
            seen = Cat(*[(s_arrived[j] & c1_bit).any() for j in range(C)])
            dup = (c1_match & seen).any()
            closes = Cat(*[s_count[j] + 1 == s_k[j] for j in range(C)])
            accept = ok & matched & ~dup
            new = ok & ~matched & any_free
            m.d.comb += opens.eq(Mux(new, first_free, 0))
            # The flit waits (table full) when it opens a chunk and no slot is free. That is
            # decided a cycle ahead, from the next flit and the slots free after this cycle,
            # so that i_contrib.ready and the ingest registers' enable come from a register.
            stall = Signal()
            # a slot is free after this cycle if one is freed now, or one stays free: two
            # were free, or one was and the flit in the table stage opens none
            two_free = Cat(*[frees[j] & frees[:j].any() for j in range(1, C)]).any() \
                if C > 1 else Const(0, 1)
            free_next = freed.any() | two_free | (any_free & ~new)
            waits = ic.valid & pre_ok & pre_src_ok & ~pre_match.any()
            m.d.sync += stall.eq(Mux(ic.ready, waits, 1) & ~free_next)
            m.d.comb += s1_done.eq(~stall)
            for j in range(C):
                # the first free slot takes the flit's fields whether or not it opens (a
                # free slot's fields are not read); its state says whether it did
                with m.If(first_free[j]):
                    m.d.sync += [
                        s_group[j].eq(s1.dest), s_chunk[j].eq(s1.chunk),
                        s_arrived[j].eq(c1_bit), s_count[j].eq(1), s_k[j].eq(c1_k),
                        s_meta[j].op.eq(s1_entry.op), s_meta[j].dtype.eq(s1_entry.dtype),
                        s_meta[j].native.eq(s1_entry.native), s_meta[j].mode.eq(s1_entry.mode),
                        s_meta[j].root.eq(s1_entry.root),
                        s_meta[j].members.eq(s1_entry.members),
                        s_meta[j].group.eq(s1.dest), s_meta[j].chunk.eq(s1.chunk),
                    ]
                with m.Elif(ok & c1_match[j] & ~seen[j]):     # = accept, this slot
                    m.d.sync += [s_arrived[j].eq(s_arrived[j] | c1_bit),
                                 s_count[j].eq(s_count[j] + 1)]
                    with m.If(closes[j]):
                        m.d.sync += state[j].eq(CLOSED)
                with m.If(opens[j]):
                    m.d.sync += state[j].eq(Mux(c1_k == 1, CLOSED, OPEN))
            # the event counters count a cycle later, from registered events
            events = [(self.o_invalid, s1_valid & ~c1_ok),
                      (self.o_nonmember, s1_valid & c1_ok & ~c1_src_ok),
                      (self.o_duplicate, ok & matched & dup),
                      (self.o_contributions, accept | new),
                      (self.o_full_cycles, ok & ~matched & ~any_free)]  # held back
            for ctr, cond in events:
                ev = Signal(name=f"ev_{ctr.name[2:]}")
                m.d.sync += ev.eq(cond)
                with m.If(ev):
                    count(ctr)
            # the memory and the ready FIFO are written in the next cycle, from registers
            w_en, w_close = Signal(), Signal()
            w_slot = Signal(range(C))
            w_addr = Signal(range(C * P))
            w_data = Signal(self.data_width)
            slot_now = Mux(matched, _first_set(c1_match, C), _first_set(first_free, C))
            m.d.sync += [w_en.eq(accept | new), w_data.eq(s1.data), w_slot.eq(slot_now),
                         w_addr.eq(slot_now * P + c1_rank),
                         w_close.eq((accept & (c1_match & closes).any()) | (new & (c1_k == 1)))]
            m.d.comb += [wr.en.eq(w_en), wr.addr.eq(w_addr), wr.data.eq(w_data),
                         fifo.w_en.eq(w_close), fifo.w_data.eq(w_slot)]
        else:
            e = s1_entry
            valid_entry, src_ok, rank, k = self._checks(m, s1, e, s1_group_ok)
            src = s1.src
            # An OPEN or CLOSED (complete, not yet streamed) slot matches: a contribution to a
            # CLOSED chunk comes from a member that already contributed, so it is a duplicate.
            match = Cat(*[(state[j] != FREE) & (s_group[j] == s1.dest) & (s_chunk[j] == s1.chunk)
                          for j in range(C)])
            # Priority encoders as pure expressions (continuous assigns): a comb process whose
            # inputs never change after time 0 would stay X in Icarus.
            hit = Signal(range(C))
            free = Signal(range(C))
            any_free = Signal()
            frees = Cat(*[state[j] == FREE for j in range(C)])
            m.d.comb += [hit.eq(_first_set(match, C)), free.eq(_first_set(frees, C)),
                         any_free.eq(frees.any())]
            bit = Signal(P)
            m.d.comb += bit.eq(self._bit(src))

            fifo = m.submodules.ready_fifo = SyncFIFO(width=max(1, (C - 1).bit_length()), depth=C)
            slot_w = Signal(range(C))
            m.d.comb += [wr.addr.eq(slot_w * P + rank), wr.data.eq(s1.data), fifo.w_data.eq(slot_w)]

            with m.If(s1_valid):
                with m.If(~valid_entry):
                    m.d.comb += s1_done.eq(1)
                    count(self.o_invalid)
                with m.Elif(~src_ok):
                    m.d.comb += s1_done.eq(1)
                    count(self.o_nonmember)
                with m.Elif(match.any()):
                    m.d.comb += s1_done.eq(1)
                    arrived = Signal(P)
                    cnt = Signal(range(P + 1))
                    kk = Signal(range(P + 1))
                    with m.Switch(hit):
                        for j in range(C):
                            with m.Case(j):
                                m.d.comb += [arrived.eq(s_arrived[j]), cnt.eq(s_count[j]),
                                             kk.eq(s_k[j])]
                    with m.If((arrived & bit).any()):
                        count(self.o_duplicate)
                    with m.Else():
                        count(self.o_contributions)
                        m.d.comb += [slot_w.eq(hit), wr.en.eq(1)]
                        with m.Switch(hit):
                            for j in range(C):
                                with m.Case(j):
                                    m.d.sync += [s_arrived[j].eq(arrived | bit),
                                                 s_count[j].eq(cnt + 1)]
                                    with m.If(cnt + 1 == kk):
                                        m.d.sync += state[j].eq(CLOSED)
                        with m.If(cnt + 1 == kk):
                            m.d.comb += fifo.w_en.eq(1)
                with m.Elif(any_free):
                    m.d.comb += [s1_done.eq(1), slot_w.eq(free), wr.en.eq(1)]
                    count(self.o_contributions)
                    with m.Switch(free):
                        for j in range(C):
                            with m.Case(j):
                                m.d.sync += [
                                    state[j].eq(Mux(k == 1, CLOSED, OPEN)),
                                    s_group[j].eq(s1.dest), s_chunk[j].eq(s1.chunk),
                                    s_arrived[j].eq(bit), s_count[j].eq(1), s_k[j].eq(k),
                                    s_meta[j].op.eq(e.op), s_meta[j].dtype.eq(e.dtype),
                                    s_meta[j].native.eq(e.native), s_meta[j].mode.eq(e.mode),
                                    s_meta[j].root.eq(e.root), s_meta[j].members.eq(e.members),
                                    s_meta[j].group.eq(s1.dest), s_meta[j].chunk.eq(s1.chunk),
                                ]
                    with m.If(k == 1):
                        m.d.comb += fifo.w_en.eq(1)
                with m.Else():
                    count(self.o_full_cycles)          # held back by flow control

        # -- streamer: read a closed chunk's contributions in rank order ------------------
        adv = Signal()
        m.d.comb += adv.eq(~self.o_result.valid | self.o_result.ready)
        st_active = Signal()
        st_slot = Signal(range(C))
        st_rank = Signal(range(P))
        st_k = Signal(range(P + 1))
        st_meta = Signal(meta_l)
        issue_last = Signal()
        F = self.cycles_per_flit
        if F == 1:
            m.d.comb += issue_last.eq(st_rank == st_k - 1)
            item_last = issue_last
        else:
            # each item is issued F times, one accumulator slice per cycle (st_sub)
            st_sub = Signal(range(F))
            item_last = Signal()
            m.d.comb += [item_last.eq(st_rank == st_k - 1),
                         issue_last.eq(item_last & (st_sub == F - 1))]
        m.d.comb += [rd.addr.eq(st_slot * P + st_rank), rd.en.eq(adv)]
        with m.If(adv):
            with m.If(st_active):
                if F == 1:
                    m.d.sync += st_rank.eq(st_rank + 1)
                else:
                    m.d.sync += st_sub.eq(Mux(st_sub == F - 1, 0, st_sub + 1))
                    with m.If(st_sub == F - 1):
                        m.d.sync += st_rank.eq(st_rank + 1)
                with m.If(issue_last):
                    m.d.sync += st_active.eq(0)
                    if self.pipeline:
                        m.d.comb += freed.eq(Const(1, C) << st_slot)
                    with m.Switch(st_slot):
                        for j in range(C):
                            with m.Case(j):
                                m.d.sync += state[j].eq(FREE)
            with m.If((~st_active | issue_last) & fifo.r_rdy):
                m.d.comb += fifo.r_en.eq(1)
                m.d.sync += [st_active.eq(1), st_rank.eq(0), st_slot.eq(fifo.r_data)]
                if F > 1:
                    m.d.sync += st_sub.eq(0)
                with m.Switch(fifo.r_data):
                    for j in range(C):
                        with m.Case(j):
                            m.d.sync += [st_k.eq(s_k[j]), st_meta.eq(s_meta[j])]

        # memory output stage (aligned with rd.data), then widening stage
        p1_valid, p1_last, p1_meta = Signal(), Signal(), Signal(meta_l)
        with m.If(adv):
            m.d.sync += [p1_valid.eq(st_active), p1_last.eq(item_last), p1_meta.eq(st_meta)]
        mem_data = rd.data
        if self.pipeline:
            # the memory's output registered before the widening
            p2_valid, p2_last, p2_meta = Signal(), Signal(), Signal(meta_l)
            p2_data = Signal(self.data_width)
            with m.If(adv):
                m.d.sync += [p2_valid.eq(p1_valid), p2_last.eq(p1_last), p2_meta.eq(p1_meta),
                             p2_data.eq(rd.data)]
            p1_valid, p1_last, p1_meta, mem_data = p2_valid, p2_last, p2_meta, p2_data
        m.submodules.to_acc = to_acc = FlitToAcc(self.data_width, self.dtypes)
        m.d.comb += [to_acc.data.eq(mem_data), to_acc.dtype.eq(p1_meta.dtype)]
        acc_w = len(to_acc.acc) // F          # the ALU width: one slice of the accumulator
        v, last, meta, acc = Signal(), Signal(), Signal(meta_l), Signal(acc_w)
        sub = None
        if F == 1:
            with m.If(adv):
                m.d.sync += [v.eq(p1_valid), last.eq(p1_last), meta.eq(p1_meta),
                             acc.eq(to_acc.acc)]
        else:
            p1_sub, sub = Signal(range(F)), Signal(range(F))
            acc_sub = p1_sub
            if self.pipeline:
                p2_sub = Signal(range(F))
                with m.If(adv):
                    m.d.sync += p2_sub.eq(p1_sub)
                acc_sub = p2_sub
            with m.If(adv):
                m.d.sync += [p1_sub.eq(st_sub), v.eq(p1_valid), last.eq(p1_last),
                             meta.eq(p1_meta), sub.eq(acc_sub),
                             acc.eq(to_acc.acc.word_select(acc_sub, acc_w))]

        # -- pairing levels -----------------------------------------------------------------
        for d in range(self.depth):
            alu = m.submodules[f"level{d}"] = SimdAlu(self.data_width, self.dtypes,
                                                      self.add_stages, n_lanes=acc_w // 32,
                                                      pipeline=self.pipeline)
            wv = Signal(name=f"level{d}_waiting")
            if F == 1:
                wacc = Signal(acc_w, name=f"level{d}_held")
            else:
                # the first item of a pair, slice by slice: a shift register of F slices
                held = [Signal(acc_w, name=f"level{d}_held{j}") for j in range(F)]
                wacc = held[0]
            m.d.comb += [alu.en.eq(adv), alu.a.eq(Mux(wv, wacc, acc)), alu.b.eq(acc),
                         alu.op.eq(Mux(wv, meta.op, OP_BYPASS)), alu.dtype.eq(meta.dtype),
                         alu.native.eq(meta.native)]
            fire = v & (wv | last)
            if F == 1:
                with m.If(adv & v):
                    with m.If(wv):
                        m.d.sync += wv.eq(0)
                    with m.Elif(~last):
                        m.d.sync += [wv.eq(1), wacc.eq(acc)]
            else:
                with m.If(adv & v):
                    with m.If(wv | ~last):
                        m.d.sync += [held[j].eq(held[j + 1]) for j in range(F - 1)]
                        m.d.sync += held[F - 1].eq(acc)
                    with m.If(sub == F - 1):       # wv changes between items only
                        with m.If(wv):
                            m.d.sync += wv.eq(0)
                        with m.Elif(~last):
                            m.d.sync += wv.eq(1)
            dv, dl, dm, ds = fire, last, meta, sub
            for s in range(self.alu_latency):
                rv = Signal(name=f"level{d}_v{s}")
                rl = Signal(name=f"level{d}_last{s}")
                rm = Signal(meta_l, name=f"level{d}_meta{s}")
                with m.If(adv):
                    m.d.sync += [rv.eq(dv), rl.eq(dl), rm.eq(dm)]
                if F > 1:
                    rs = Signal(range(F), name=f"level{d}_sub{s}")
                    with m.If(adv):
                        m.d.sync += rs.eq(ds)
                    ds = rs
                dv, dl, dm = rv, rl, rm
            v, last, meta, acc, sub = dv, dl, dm, alu.y, ds

        # -- output: narrow, pack the RESULT flit ------------------------------------------
        m.submodules.to_flit = to_flit = AccToFlit(self.data_width, self.dtypes,
                                                   self.pipeline)
        if self.pipeline:
            m.d.comb += to_flit.en.eq(adv)
        if F == 1:
            m.d.comb += [to_flit.acc.eq(acc), to_flit.dtype.eq(meta.dtype)]
            out_valid = v
        else:
            # collect a result's slices; the last one completes it
            parts = [Signal(acc_w, name=f"out_slice{j}") for j in range(F - 1)]
            with m.If(adv & v):
                with m.Switch(sub):
                    for j in range(F - 1):
                        with m.Case(j):
                            m.d.sync += parts[j].eq(acc)
            m.d.comb += [to_flit.acc.eq(Cat(*parts, acc)), to_flit.dtype.eq(meta.dtype)]
            out_valid = v & (sub == F - 1)
        for i in range(to_flit.latency):
            # the result's valid and fields wait beside the pipelined narrowing
            n_valid = Signal(name=f"narrow{i}_valid")
            n_meta = Signal(meta_l, name=f"narrow{i}_meta")
            with m.If(adv):
                m.d.sync += [n_valid.eq(out_valid), n_meta.eq(meta)]
            out_valid, meta = n_valid, n_meta
        o = self.o_result
        with m.If(adv):
            m.d.sync += [
                o.valid.eq(out_valid),
                o.payload.flit.data.eq(to_flit.data), o.payload.flit.first.eq(1),
                o.payload.flit.last.eq(1), o.payload.flit.kind.eq(Kind.RESULT),
                o.payload.flit.dest.eq(meta.group), o.payload.flit.src.eq(0),
                o.payload.flit.chunk.eq(meta.chunk), o.payload.members.eq(meta.members),
                o.payload.mode.eq(meta.mode), o.payload.root.eq(meta.root),
            ]
        with m.If(o.valid & o.ready):
            count(self.o_results)
        return m


BLOCKS = [
    Block("reduce-unit", ReductionUnit,
          doc="SHARP-style reduction unit: one contribution per member per chunk, "
              "deterministic pairwise tree, IEEE 754 fp32/fp16/bf16 and int32/uint32",
          params=[
              Param("n_ports", int, 8, "switch ports (member bitmap width), 2..128"),
              Param("data_width", int, 64, "flit data bits, multiple of 32"),
              Param("n_chunks", int, 8, "open-chunk table capacity, 1..64"),
              Param("n_groups", int, 16, "group table entries, 1..256"),
              Param("dtypes", str, "all", "dtype paths built per lane: all, or a "
                    "comma-separated subset of int32,uint32,fp32,fp16,bf16 (others count "
                    "in o_invalid)"),
              Param("add_stages", int, 4, "fp32 adder pipeline stages, 4, 5, 6 or 7 (each "
                    "above 4: one more cycle of latency per pairing level)",
                    choices=(4, 5, 6, 7)),
              Param("cycles_per_flit", int, 1, "ALU passes per flit: each pairing level "
                    "has 1/cycles_per_flit of the lanes and takes that many cycles per flit "
                    "(a divisor of the lane count; throughput 1/cycles_per_flit)"),
              Param("pipeline", bool, False, "more register stages for the clock (ingest "
                    "checks and match, memory write and output, lane operands, native "
                    "rounding and output narrowing in two): 4 + 2 depth cycles of latency, "
                    "same throughput"),
          ]),
]
