"""The pipelined VOQ switch: registered ingress, block-RAM VOQs, one iSLIP round split into
grant and accept stages run by two interleaved schedulers, a registered crossbar; every
stage starts and ends at registers (docs/switch.md, "Pipelined variant")."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal

from fusionfabric.formats.switch import Kind

from .common import SwitchBase
from .ingress import Ingress
from .islip import lowest_bit, next_pointer, round_robin_index
from .output import OutputSide
from .voq import PipelinedQueue

__all__ = ["PipelinedSwitch"]


class PipelinedSwitch(SwitchBase):
    """The VOQ + iSLIP switch spread over registered stages, for FPGA clock rates.

    It keeps the VOQ switch's rules (routing, ingress and replication, drops, what may be
    requested: a VOQ not empty, a credit, the output's lock; round-robin grant and accept
    with pointers that move only on an accepted grant; credits, locks, counters) and
    registers them: the routed flit in a two-entry input stage, a registered request
    matrix, one iSLIP round (McKeown, IEEE/ACM ToN 7(2), 1999) split into a grant and an
    accept stage run by two interleaved sub-schedulers, the VOQs in one block RAM per
    input with registered writes and read address, the flit read registered twice, the
    crossbar registered before the output buffer.

    Parameters
    ----------
    n_ports : int
        Ports, 2 … 256.
    data_width : int
        Bits of ``data`` per flit (``fusionfabric.formats.switch.switch_flit``).
    depth : int
        Flits per VOQ (power of two); each input has ``n_ports`` VOQs in one block RAM.
    iterations : int or None
        iSLIP rounds: 1 (None or 0 mean 1); the round is split over two cycles.
    out_depth : int
        Output buffer slots = credits per output; one stream runs at line rate with
        ``out_depth >= 10`` (16 costs the same LUT RAM as 4).
    n_groups : int
        Group-table entries (multicast and reduction groups).
    reduce : bool
        Per-port reduction units (``fusionfabric.rtl.reduce.unit``, docs/switch.md).
    n_chunks : int
        Open-chunk slots per reduction unit.

    Members
    -------
    i_port, o_port, i_config, o_credit, o_stats, o_config_drops, o_unit_credit, o_unit_stats
        As :class:`~.common.SwitchBase`.

    Timing
    ------
    Input handshake in t → ``o_port`` valid in t+12 without contention: input stage
    register; VOQ write in t+1; requests in t+2; grant in t+3; accept = match in t+4; read
    address registers in t+5 and t+6; RAM read in t+7; flit registers in t+8 and t+9;
    crossbar register in t+10; output buffer write in t+11. A credit taken at a match comes
    back with the output handshake in t+12; one input streaming to one output runs at line
    rate with ``out_depth >= 10``, and an output with one credit moves a flit every 11
    cycles. A flit to k members takes k cycles of VOQ writes, then the next
    flit follows without a gap. The counters ``flits_in``, ``drop_*`` and ``in_stalls``
    count one cycle later than in the VOQ switch, with the same totals. Reset as the VOQ
    switch.
    """

    mode = "voq"
    pipeline = True

    def __init__(self, n_ports: int = 4, data_width: int = 64, depth: int = 16,
                 iterations: int | None = None, out_depth: int = 4, n_groups: int = 16,
                 reduce: bool = False, n_chunks: int = 16, reduce_add_stages: int = 4,
                 reduce_pipeline: bool = False):
        if iterations is None or iterations == 0:
            iterations = 1
        if iterations != 1:
            raise ValueError(f"iterations={iterations!r}: pipeline=True runs one iSLIP "
                             f"round (split over two cycles)")
        super().__init__(n_ports=n_ports, data_width=data_width, depth=depth,
                         out_depth=out_depth, n_groups=n_groups, reduce=reduce,
                         n_chunks=n_chunks, reduce_add_stages=reduce_add_stages,
                         reduce_pipeline=reduce_pipeline)
        self.iterations = iterations

    def elaborate(self, platform):
        m = Module()
        N = self.n_rows
        ingress = Ingress(self)
        output = OutputSide(self)

        table = ingress.attach_table(m)
        output.attach_units(m)
        queues = []
        for r in range(N):
            q = PipelinedQueue(N, self.flit.width, self.depth, meta_width=2)
            m.submodules[f"queue{r}"] = q
            queues.append(q)

        credit = [Signal(range(self.out_depth + 1), init=self.out_depth, name=f"credit{o}")
                  for o in range(N)]
        lock_v = [Signal(name=f"lock_v{o}") for o in range(N)]
        lock_in = [Signal(N, name=f"lock_in{o}") for o in range(N)]    # one-hot holder

        for r in range(N):
            rt = ingress.route(m, r, table, output.units)
            self._pipelined_ingress(m, r, queues[r], rt.port, rt.valid, rt.flit,
                                    Cat(rt.target, rt.drop_dest, rt.drop_group,
                                        rt.drop_kind), ingress)
        self._pipelined(m, queues, output, credit, lock_v, lock_in)
        return m

    def _pipelined_ingress(self, m, r, q, port, valid, flit, route, ingress):
        """Ingress of row ``r``: the routed flit (``route`` = target mask and the three
        drop causes, from :class:`~.ingress.Ingress`, the rules of the VOQ switch) is
        registered first, in one of two entries; the VOQ writes (one copy per cycle,
        lowest member first) and the counters work from the older entry (the head).
        ``port.ready`` = an entry is free (registers only): with two entries a flit can
        be taken in every cycle while the head leaves in every cycle. Each entry keeps the
        copies still to write, the next one and whether it is the last, computed when
        the flit is taken in or a copy is written, so the write and the head's departure
        are a few gates from registers and the 100-bit flit registers load on the input
        handshake alone."""
        N = q.n_ports
        layout = self.flit.layout()
        e_valid = [Signal(name=f"in_valid{r}_{k}") for k in (0, 1)]
        e_flit = [Signal(layout, name=f"in_flit{r}_{k}") for k in (0, 1)]
        e_drops = [Signal(3, name=f"in_drops{r}_{k}") for k in (0, 1)]
        e_rem = [Signal(N, name=f"in_rem{r}_{k}") for k in (0, 1)]
        e_pick = [Signal(N, name=f"in_pick{r}_{k}") for k in (0, 1)]
        e_last = [Signal(name=f"in_last_copy{r}_{k}") for k in (0, 1)]
        hsel = Signal(name=f"in_head{r}")       # the entry holding the head
        h_valid = Signal(name=f"in_head_valid{r}")
        h_flit = Signal(layout, name=f"in_head_flit{r}")
        h_drops = Signal(3, name=f"in_head_drops{r}")
        h_rem = Signal(N, name=f"in_head_rem{r}")
        h_pick = Signal(N, name=f"in_head_pick{r}")
        h_last = Signal(name=f"in_head_last{r}")
        for h, e in ((h_valid, e_valid), (h_flit, e_flit), (h_drops, e_drops),
                     (h_rem, e_rem), (h_pick, e_pick), (h_last, e_last)):
            m.d.comb += h.eq(Mux(hsel, e[1], e[0]))
        drop = h_drops.any()
        write = h_valid & ~drop & (h_pick & q.o_notfull).any()
        take = Signal(name=f"in_take{r}")       # the head leaves this cycle
        m.d.comb += [take.eq(h_valid & (drop | (write & h_last))),
                     q.i_wen.eq(write), q.i_wsel.eq(h_pick),
                     q.i_wdata.eq(h_flit),
                     # packet-lock bits, seen by the allocator (the crosspoint switch:
                     # the outputs) without the flit
                     q.i_wmeta.eq(Cat(h_flit.kind == Kind.UNICAST, ~h_flit.last)),
                     port.ready.eq(~(e_valid[0] & e_valid[1]))]
        rest = Signal(N, name=f"in_rest{r}")
        m.d.comb += rest.eq(h_rem & ~h_pick)

        def plan(k, targets):
            low = lowest_bit(targets, N)
            last = targets == low
            return [e_rem[k].eq(targets), e_pick[k].eq(low), e_last[k].eq(last)]

        enq = valid & port.ready
        fill = Mux(h_valid, ~hsel, hsel)        # the entry a new flit goes to
        for k in (0, 1):
            with m.If(enq & (fill == k)):
                m.d.sync += [e_valid[k].eq(1), e_flit[k].eq(flit),
                             e_drops[k].eq(route[N:N + 3])]
                m.d.sync += plan(k, route[:N])
            with m.Elif((hsel == k) & take):
                m.d.sync += e_valid[k].eq(0)
            with m.Elif((hsel == k) & write):
                m.d.sync += plan(k, rest)
        with m.If(take):
            m.d.sync += hsel.eq(~hsel)
        ingress.count_late(m, r, take, h_drops, valid & ~port.ready)


    def _pipelined(self, m, queues, output, credit, lock_v, lock_in):
        """The core: a one-round iSLIP split over two cycles (grant, then accept) on a
        registered request matrix, then two read-address registers, RAM read, two flit
        registers, crossbar register, each in its own cycle (docs/switch.md, "Pipelined
        variant").

        Cycle t: ``valid`` (the requests) = ``valid_r`` (computed in t-1 from the state
        after the matches up to t-2) minus what the match of t-1 (``match1``) may have
        taken away: the last unscheduled flit of a VOQ (exact: ``match1 & single_r``), and,
        from the grants that match was made of (``kill_r``, registered in t-1, a superset
        of the exact rule): the last credit of an output, an output locked by another
        input. Stage G: every output grants one valid request (grant pointer) into
        ``grant_r``. Stage A: every input accepts one of last cycle's grants that is still
        valid (accept pointer): that is the match M of cycle t, registered as is. The
        accept stage ends at registers: everything else that depends on M (credits, locks,
        read address, accept pointers) works from ``match1`` in t+1; only the grant
        pointers move at the end of t (their sub-scheduler grants again in t+1).
        """
        N = len(queues)
        fw = self.flit.width
        rng = range(N)
        pb = max(1, (N - 1).bit_length())
        match1 = [Signal(N, name=f"match1_{i}") for i in rng]     # M of last cycle, by input
        meta1 = [[Signal(2, name=f"meta1_{i}_{o}") for o in rng] for i in rng]
        valid_r = [Signal(N, name=f"valid_r{i}") for i in rng]
        single_r = [Signal(N, name=f"single_r{i}") for i in rng]  # exactly one flit left
        kill_r = Signal(N, name="kill_r")     # output o: its last credit may be gone
        grant_r = [Signal(N, name=f"grant_r{o}") for o in rng]    # stage G, over inputs
        # Two interleaved sub-schedulers, each with its own iSLIP pointers (binary): the
        # one whose grant stage runs in this cycle (phase ph) accepts in the next, so its
        # pointers have always seen its own previous match when it grants again.
        ph = Signal(name="phase")
        m.d.sync += ph.eq(~ph)
        gptr = [[Signal(pb, name=f"gptr{s}_{o}") for o in rng] for s in (0, 1)]
        aptr = [[Signal(pb, name=f"aptr{s}_{i}") for i in rng] for s in (0, 1)]

        # requests of this cycle
        valid = []
        for i in rng:
            v = Signal(N, name=f"valid{i}")
            m.d.comb += v.eq(valid_r[i] & ~kill_r & ~(match1[i] & single_r[i]))
            valid.append(v)
        # stage G: grants (one per output) for next cycle's accept. An output granted
        # last cycle to input g whose flit opens a packet (UNICAST, not last) is not
        # granted to another input now: if that grant is accepted in this cycle, the
        # output is locked by g for the match that this grant becomes.
        for o in rng:
            opening = Signal(name=f"opening{o}")
            m.d.comb += opening.eq(Cat(grant_r[o][g] & queues[g].o_meta_any[o][0]
                                       & queues[g].o_meta_any[o][1] for g in rng).any())
            req_o = Signal(N, name=f"greq{o}")
            gp = Signal(pb, name=f"gptr_now{o}")
            m.d.comb += [req_o.eq(Cat(valid[i][o] & ~(opening & ~grant_r[o][i]) for i in rng)),
                         gp.eq(Mux(ph, gptr[1][o], gptr[0][o]))]
            m.d.sync += grant_r[o].eq(round_robin_index(req_o, gp, N))
        # stage A: accept one still-valid grant per input -> the match M
        match = []
        for i in rng:
            a = Signal(N, name=f"match{i}")
            offers = Signal(N, name=f"offers{i}")
            ap = Signal(pb, name=f"aptr_now{i}")        # the sub-scheduler of last cycle
            m.d.comb += [offers.eq(Cat(grant_r[o][i] & valid[i][o] for o in rng)),
                         ap.eq(Mux(ph, aptr[0][i], aptr[1][i]))]
            m.d.comb += a.eq(round_robin_index(offers, ap, N))
            match.append(a)
            m.d.comb += queues[i].i_sched.eq(a)
            m.d.sync += match1[i].eq(a)
            for o in rng:
                m.d.sync += meta1[i][o].eq(queues[i].o_meta[o])
        for o in rng:
            # grant pointer of the sub-scheduler that accepts now: one past the granted
            # input if the grant was accepted
            with m.If(Cat(match[i][o] for i in rng).any()):
                with m.If(ph):
                    m.d.sync += gptr[0][o].eq(next_pointer(grant_r[o], N))
                with m.Else():
                    m.d.sync += gptr[1][o].eq(next_pointer(grant_r[o], N))
        # t+1, from match1: accept pointers of the sub-scheduler that accepted in t (it
        # accepts again in t+2), locks and credits
        for i in rng:
            with m.If(match1[i].any()):
                with m.If(ph):
                    m.d.sync += aptr[1][i].eq(next_pointer(match1[i], N))
                with m.Else():
                    m.d.sync += aptr[0][i].eq(next_pointer(match1[i], N))
        gany1 = Signal(N, name="gany1")        # output o was matched last cycle
        sets1 = Signal(N, name="sets1")        # ... by a UNICAST flit (lock changes)
        opens1 = Signal(N, name="opens1")      # ... which is not the last of its packet
        cols1 = []
        for o in rng:
            col = Signal(N, name=f"mcol1_{o}")
            m.d.comb += [
                col.eq(Cat(match1[i][o] for i in rng)),
                gany1[o].eq(col.any()),
                sets1[o].eq(Cat(col[i] & meta1[i][o][0] for i in rng).any()),
                opens1[o].eq(Cat(col[i] & meta1[i][o][0] & meta1[i][o][1]
                                 for i in rng).any()),
            ]
            cols1.append(col)
            with m.If(sets1[o]):
                m.d.sync += [lock_v[o].eq(opens1[o]), lock_in[o].eq(col)]
        # locks and credits after the match of t-1, for the requests of t+1
        lv = [Mux(sets1[o], opens1[o], lock_v[o]) for o in rng]
        lo = [Mux(sets1[o], cols1[o], lock_in[o]) for o in rng]       # one-hot owner
        cr = []
        for o in rng:
            c = Signal(len(credit[o]), name=f"credit_after{o}")
            m.d.comb += c.eq(credit[o] - gany1[o])
            cr.append(c)
        # what the match of t may take away, from the grants it is made of (grant_r):
        # the last credit of a granted output
        for i in rng:
            q = queues[i]
            ok = Cat((cr[o] != 0) & (~lv[o] | lo[o][i]) for o in rng)
            m.d.sync += [valid_r[i].eq(q.o_nonempty & ok), single_r[i].eq(q.o_single)]
        for o in rng:
            m.d.sync += kill_r[o].eq(grant_r[o].any() & (cr[o] == 1))

        # t+1, t+2: register the read address (twice); t+3: read the RAM; t+4: register
        # the flit (next to the block RAM, whose clock-to-output takes most of a cycle);
        # t+5: register it again (towards the crossbar); t+6: crossbar into a register;
        # t+7: into the output buffer
        heads = [Signal(fw, name=f"head{i}") for i in rng]
        for i in rng:
            ram_out = Signal(fw, name=f"ram_out{i}")
            m.d.comb += queues[i].i_read.eq(match1[i])
            m.d.sync += [ram_out.eq(queues[i].o_rdata), heads[i].eq(ram_out)]
        for o in rng:
            sel = cols1[o]
            for k in (2, 3, 4, 5, 6):           # the match column, aligned with heads
                nxt = Signal(N, name=f"xsel{k}_{o}")
                m.d.sync += nxt.eq(sel)
                sel = nxt
            port, hs = output.registered(m, o, heads, sel, sel.any())
            m.d.sync += credit[o].eq(credit[o] - gany1[o] + hs)
            output.counters(m, o, port, hs, credit)

