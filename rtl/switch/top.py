"""The switch top: ingress routing and multicast replication, VOQs, iSLIP, crossbar,
credit-based output buffers, counters. The cycle-level contract is docs/switch.md."""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.reduce.unit import ReductionUnit, result_layout
from fusionfabric.formats.switch import GROUP_BITS, Kind, Mode, switch_flit

from .group_table import GroupTable, config_layout
from .islip import (ISLIPAllocator, lowest_bit, max_iterations, next_pointer,
                    round_robin_index)
from .crosspoint import Crosspoint, CrosspointRow, OutputBuffer
from .voq import InputQueue, PipelinedQueue, onehot_index

__all__ = ["Switch", "STATS", "UNIT_STATS", "stats_layout", "unit_stats_layout", "BLOCKS"]

#: Per-port counters, LSB first, 32 bits each (``o_stats[p]``).
STATS = ("flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
         "drop_kind")


def stats_layout() -> data.StructLayout:
    return data.StructLayout({name: 32 for name in STATS})


#: Results buffered between a reduction unit and its crossbar row (``reduce=True``).
RESULT_FIFO_DEPTH = 4

#: Per-unit counters with ``reduce=True`` (``o_unit_stats[u]``): the unit's own counters
#: plus ``result_drops`` (results whose target set is empty, e.g. root >= n_ports).
UNIT_STATS = ("contributions", "results", "duplicate", "nonmember", "invalid",
              "full_cycles")


def unit_stats_layout() -> data.StructLayout:
    return data.StructLayout({name: 32 for name in UNIT_STATS + ("result_drops",)})


class Switch(wiring.Component):
    """An ``n_ports`` crossbar: VOQ (or FIFO) input queues, iSLIP, credits, multicast.

    Parameters
    ----------
    n_ports : int
        Ports, 2 … 256.
    data_width : int
        Bits of ``data`` per flit (``fusionfabric.sim.layouts.switch_flit``).
    depth : int
        Flits per VOQ (power of two); FIFO mode: the input FIFO holds ``n_ports * depth``;
        crosspoint mode: RAM slots per crosspoint buffer.
    iterations : int
        iSLIP rounds per cycle, 1 … ``max(1, ceil(log2 n_ports))`` (none in crosspoint
        mode: 0 or None).
    mode : str
        ``"voq"`` (virtual output queues), ``"fifo"`` (head-of-line blocking baseline) or
        ``"crosspoint"`` (a buffered crossbar: a LUT-RAM FIFO of ``depth`` flits at every
        input-output crosspoint, an input register for the group-table lookup, a
        two-entry input stage that writes a multicast flit to all its members at once,
        a round-robin arbiter per output and no matching; every loop is local, which is
        the variant for FPGA clock rates; full rate needs ``out_depth >= 7`` and
        ``depth >= 8``).
    out_depth : int
        Output buffer slots = credits per output (>= 2 sustains line rate).
    n_groups : int
        Group-table entries (multicast and reduction groups).
    reduce : bool
        Per-port reduction units (``fusionfabric.rtl.reduce.unit``, docs/switch.md).
    n_chunks : int
        Open-chunk slots per reduction unit.
    pipeline : bool
        The pipelined variant (VOQ mode only): a registered request matrix, one iSLIP
        round split into a grant and an accept stage (two interleaved sub-schedulers),
        VOQs in one block RAM per input with registered writes and read address, the flit
        read registered, the crossbar registered before the output buffer; every stage
        starts and ends at registers. ``iterations`` must be 1 (the default here). Full
        rate needs ``out_depth >= 11`` (16 costs the same LUT RAM as 4).

    Members
    -------
    i_port : In(stream.Signature(switch_flit(data_width).layout())).array(n_ports)
        Ingress; ``src`` is overwritten with the port index.
    o_port : Out(stream.Signature(switch_flit(data_width).layout())).array(n_ports)
        Egress.
    i_config : In(stream.Signature(config_layout(n_ports)))
        Group-table writes, always ready.
    o_credit : Out(range(out_depth + 1)).array(n_ports)
        Credits held for each output (``out_depth`` when the switch is idle).
    o_stats : Out(stats_layout()).array(n_ports)
        Counters per port, see :data:`STATS`.
    o_config_drops : Out(32)
        Configuration writes to a group >= ``n_groups``.

    Timing
    ------
    Input handshake in cycle t → ``o_port`` valid in t+2 without contention (VOQ write,
    then request/grant/transfer, then the output buffer). One flit per cycle per input and
    per output; a multicast flit to k members is accepted after k cycles (one copy per
    cycle; in crosspoint mode all k copies in one cycle). iSLIP after McKeown, IEEE/ACM
    ToN 7(2) 1999. Reset empties all queues, fills the credits, clears pointers, the
    group table and the counters.

    ``mode="crosspoint"``: handshake in t → ``o_port`` valid in t+10 (the flit and its
    group-table entry are registered at the handshake; t+1: its route into an input-stage
    entry; t+2: the input stage writes the flit into every crosspoint of its target mask
    at once, through the row's write register; t+3: the crosspoints register the write,
    and the output registers the write bit; t+4: the crosspoint RAM write, and the output
    counts it; t+5: the output's arbiter selects the crosspoint; t+6: the pop (``sel``);
    t+7: the crosspoint registers the pop and reads its RAM into its read register; t+8:
    the crossbar register (an OR of the column's read registers); t+9: the output buffer
    write). A credit is charged at the pop and returns on the output handshake, so one
    output runs at line rate with ``out_depth >= 7``; one input to one output at line
    rate needs ``depth >= 8``.

    ``pipeline=True``: handshake in t → ``o_port`` valid in t+12 (input register; VOQ
    write in t+1; requests in t+2; grant in t+3; accept = match in t+4; read address
    registers in t+5 and t+6; RAM read in t+7; flit registers in t+8 and t+9; crossbar
    register in t+10; output buffer write in t+11). A credit taken at a match can serve
    a match again 11 cycles later, so one output runs at line rate with
    ``out_depth >= 11``. Ingress, drops, what may be
    requested, pointers, locks and credits follow the default variant's rules
    (docs/switch.md, "Pipelined variant"); the default variant is the one the
    cycle-level model (sim/fabric) reproduces.
    """

    def __init__(self, n_ports: int = 4, data_width: int = 64, depth: int = 16,
                 iterations: int | None = None, mode: str = "voq", out_depth: int = 4,
                 n_groups: int = 16, reduce: bool = False,
                 n_chunks: int = 16, pipeline: bool = False):
        if not isinstance(n_ports, int) or not 2 <= n_ports <= 256:
            raise ValueError(f"n_ports={n_ports!r} must be an integer in 2..256")
        if not isinstance(data_width, int) or data_width < 1:
            raise ValueError(f"data_width={data_width!r} must be a positive integer")
        if not isinstance(depth, int) or depth < 1 or depth & (depth - 1):
            raise ValueError(f"depth={depth!r} must be a power of two >= 1")
        if pipeline not in (False, True):
            raise ValueError(f"pipeline={pipeline!r} must be True or False")
        if pipeline and mode != "voq":
            raise ValueError(f"pipeline=True needs mode='voq' (got mode={mode!r})")
        top = max_iterations(n_ports)
        if mode == "crosspoint":
            if iterations not in (None, 0):
                raise ValueError(f"iterations={iterations!r}: mode='crosspoint' has no "
                                 f"iSLIP (0 or None)")
        elif iterations is None or iterations == 0:
            iterations = 1 if pipeline else min(3, top)
        if pipeline and iterations != 1:
            raise ValueError(f"iterations={iterations!r}: pipeline=True runs one iSLIP "
                             f"round (split over two cycles)")
        if mode not in ("voq", "fifo", "crosspoint"):
            raise ValueError(f"mode={mode!r} is not 'voq', 'fifo' or 'crosspoint'")
        if mode == "crosspoint":
            iterations = 0
        elif not isinstance(iterations, int) or not 1 <= iterations <= top:
            raise ValueError(f"iterations={iterations!r} must be in 1..{top} "
                             f"for n_ports={n_ports}")
        if not isinstance(out_depth, int) or out_depth < 1:
            raise ValueError(f"out_depth={out_depth!r} must be a positive integer")
        if not isinstance(n_groups, int) or not 1 <= n_groups <= 1 << GROUP_BITS:
            raise ValueError(f"n_groups={n_groups!r} must be in 1..{1 << GROUP_BITS}")
        if not isinstance(n_chunks, int) or not 1 <= n_chunks <= 64:
            raise ValueError(f"n_chunks={n_chunks!r} must be an integer in 1..64")
        if reduce and (data_width % 32 or n_ports > 128):
            raise ValueError(f"reduce=True needs data_width a multiple of 32 (got "
                             f"{data_width}) and n_ports <= 128 (got {n_ports})")
        self.n_ports = n_ports
        self.data_width = data_width
        self.depth = depth
        self.iterations = iterations
        self.mode = mode
        self.out_depth = out_depth
        self.n_groups = n_groups
        self.reduce = reduce
        self.n_chunks = n_chunks
        self.pipeline = bool(pipeline)
        self.flit = switch_flit(data_width)
        layout = self.flit.layout()
        members = {
            "i_port": In(stream.Signature(layout)).array(n_ports),
            "o_port": Out(stream.Signature(layout)).array(n_ports),
            "i_config": In(stream.Signature(config_layout(n_ports))),
            "o_credit": Out(range(out_depth + 1)).array(n_ports),
            "o_stats": Out(stats_layout()).array(n_ports),
            "o_config_drops": Out(32),
        }
        if reduce:
            members["o_unit_credit"] = Out(range(out_depth + 1)).array(n_ports)
            members["o_unit_stats"] = Out(unit_stats_layout()).array(n_ports)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.n_ports
        # Crossbar size: rows 0..n-1 are the ports, rows n..2n-1 the reduction units'
        # results; columns 0..n-1 the ports, columns n..2n-1 the units' contribution inputs.
        N = 2 * n if self.reduce else n
        fw = self.flit.width
        layout = self.flit.layout()
        voq = self.mode == "voq"
        xbuf = self.mode == "crosspoint"
        qwidth = fw if voq else fw + N          # FIFO mode stores the target mask too

        m.submodules.table = table = GroupTable(n, self.n_groups, n)
        m.d.comb += [table.i_config.valid.eq(self.i_config.valid),
                     table.i_config.payload.eq(self.i_config.payload),
                     self.i_config.ready.eq(1)]
        m.d.comb += self.o_config_drops.eq(table.o_config_drops)
        if not (self.pipeline or xbuf):
            m.submodules.alloc = alloc = ISLIPAllocator(N, self.iterations)

        units = []
        if self.reduce:
            for u in range(n):
                unit = ReductionUnit(n_ports=n, data_width=self.data_width,
                                     n_chunks=self.n_chunks, n_groups=self.n_groups)
                m.submodules[f"unit{u}"] = unit
                m.d.comb += [unit.i_config.valid.eq(self.i_config.valid),
                             unit.i_config.payload.eq(self.i_config.payload)]
                units.append(unit)
                st = self.o_unit_stats[u]
                for name in UNIT_STATS:
                    m.d.comb += getattr(st, name).eq(getattr(unit, f"o_{name}"))

        queues = []
        for r in range(N):
            if xbuf:
                q = CrosspointRow(N, fw, self.depth)
                m.submodules[f"row{r}"] = q
                queues.append(q)
                continue
            if self.pipeline:
                q = PipelinedQueue(N, qwidth, self.depth, meta_width=2)
            else:
                q = InputQueue(N, qwidth, self.depth, self.mode)
            m.submodules[f"queue{r}"] = q
            queues.append(q)

        credit = [Signal(range(self.out_depth + 1), init=self.out_depth, name=f"credit{o}")
                  for o in range(N)]
        lock_v = [Signal(name=f"lock_v{o}") for o in range(N)]
        # the input holding each output's lock (pipelined: one-hot)
        lock_in = [Signal(N if self.pipeline else range(N), name=f"lock_in{o}")
                   for o in range(N)]

        # ---- ingress: routing, drops, replication ------------------------------------
        for r in range(N):
            q = queues[r]
            flit = Signal(layout, name=f"in_flit{r}")
            target = Signal(N, name=f"target{r}")
            drop_dest = Signal(name=f"drop_dest{r}")
            drop_group = Signal(name=f"drop_group{r}")
            drop_kind = Signal(name=f"drop_kind{r}")
            stall = None
            if r < n:
                port = self.i_port[r]
                if xbuf:
                    # Crosspoint mode registers the flit and its group-table entry first
                    # (``in_pipe``), so that the shared table's lookup ends at a register
                    # and the route below starts from registers of this input.
                    m.d.comb += table.i_group[r].eq(port.payload.dest[:GROUP_BITS])
                    p_valid = Signal(name=f"in_pipe_valid{r}")
                    p_flit = Signal(layout, name=f"in_pipe_flit{r}")
                    p_entry = Signal.like(table.o_entry[r], name=f"in_pipe_entry{r}")
                    stage = stream.Signature(layout).create(path=(f"in_pipe{r}",))
                    m.d.comb += port.ready.eq(~p_valid | stage.ready)
                    with m.If(port.ready):
                        m.d.sync += [p_valid.eq(port.valid), p_flit.eq(port.payload),
                                     p_entry.eq(table.o_entry[r])]
                    stall = port.valid & ~port.ready
                    port, valid, payload, entry = stage, p_valid, p_flit, p_entry
                    m.d.comb += [flit.eq(payload), flit.src.eq(r)]
                    kind, dest = payload.kind, payload.dest
                else:
                    valid, payload = port.valid, port.payload
                    m.d.comb += [flit.eq(payload), flit.src.eq(r)]
                    kind, dest = payload.kind, payload.dest
                    m.d.comb += table.i_group[r].eq(dest[:GROUP_BITS])
                    entry = table.o_entry[r]
                with m.Switch(kind):
                    with m.Case(Kind.UNICAST):
                        m.d.comb += [target.eq(Cat(dest == o for o in range(n))),
                                     drop_dest.eq(dest >= n)]
                    with m.Case(Kind.MULTICAST):
                        m.d.comb += [target.eq(entry.members),
                                     drop_group.eq((dest >= self.n_groups) | ~entry.valid
                                                   | (entry.members == 0))]
                    if self.reduce:
                        with m.Case(Kind.REDUCE):
                            # to the unit of this chunk: column n + chunk mod n
                            cu = Signal(range(n), name=f"chunk_unit{r}")
                            m.d.comb += [cu.eq(payload.chunk % n),
                                         target.eq(Cat(cu == u for u in range(n)) << n)]
                    with m.Default():
                        m.d.comb += drop_kind.eq(1)
            else:
                # unit u's results pass through a small FIFO, so that replicating one
                # result (one copy per cycle) never stalls the unit's pipeline
                u = r - n
                res = units[u].o_result
                rlay = result_layout(n, self.data_width)
                rq = fifo.SyncFIFO(width=rlay.size, depth=RESULT_FIFO_DEPTH)
                m.submodules[f"result_fifo{u}"] = rq
                payload = Signal(rlay, name=f"result{u}")
                m.d.comb += [rq.w_en.eq(res.valid), rq.w_data.eq(res.payload),
                             res.ready.eq(rq.w_rdy), payload.eq(rq.r_data)]
                port = stream.Signature(rlay).create(path=(f"result_head{u}",))
                m.d.comb += [port.valid.eq(rq.r_rdy), rq.r_en.eq(port.ready)]
                valid = port.valid
                m.d.comb += [flit.eq(payload.flit), flit.src.eq(u)]
                root_hot = Cat(payload.root == o for o in range(n))
                m.d.comb += target.eq(Mux(payload.mode == Mode.ALLREDUCE,
                                          payload.members, root_hot))
                m.d.comb += drop_dest.eq(target[:n] == 0)
            drop = Signal(name=f"drop{r}")
            m.d.comb += drop.eq(drop_dest | drop_group | drop_kind)

            if xbuf:
                self._crosspoint_ingress(m, r, q, port, valid, flit, target,
                                         Cat(drop_dest, drop_group, drop_kind), stall)
                continue
            if self.pipeline:
                self._pipelined_ingress(m, r, q, port, valid, flit,
                                        Cat(target, drop_dest, drop_group, drop_kind))
                continue
            if voq:
                write, last_copy = self._replicate(m, r, q, valid, target, drop)
                m.d.comb += [q.i_wdata.eq(flit), port.ready.eq(drop | (write & last_copy))]
            else:
                write = valid & ~drop & q.o_notfull[0]
                m.d.comb += [q.i_wen.eq(write), q.i_wsel.eq(0),
                             q.i_wdata.eq(Cat(flit.as_value(), target)),
                             port.ready.eq(drop | write)]

            st = self.o_stats[r] if r < n else self.o_unit_stats[r - n]
            with m.If(valid & port.ready):
                if r < n:
                    m.d.sync += [st.flits_in.eq(st.flits_in + ~drop),
                                 st.drop_dest.eq(st.drop_dest + drop_dest),
                                 st.drop_group.eq(st.drop_group + drop_group),
                                 st.drop_kind.eq(st.drop_kind + drop_kind)]
                else:
                    m.d.sync += st.result_drops.eq(st.result_drops + drop)
            if r < n:
                with m.If(valid & ~port.ready):
                    m.d.sync += st.in_stalls.eq(st.in_stalls + 1)

        if self.pipeline:
            self._pipelined(m, queues, units, credit, lock_v, lock_in)
            return m
        if xbuf:
            self._crosspoint(m, queues, units, credit)
            return m

        # ---- requests --------------------------------------------------------------
        credit_ok = Cat(c != 0 for c in credit)
        hdone = []
        head_target = []
        for r in range(N):
            q = queues[r]
            lock_ok = Cat(~lock_v[o] | (lock_in[o] == r) for o in range(N))
            if voq:
                avail = q.o_nonempty
            else:
                hd = Signal(N, name=f"hdone{r}")
                ht = Signal(N, name=f"head_target{r}")
                m.d.comb += ht.eq(q.o_rdata[fw:])
                hdone.append(hd)
                head_target.append(ht)
                avail = q.o_nonempty & ht & ~hd
            m.d.comb += alloc.i_req[r].eq(avail & credit_ok & lock_ok)

        # ---- crossbar transfer -------------------------------------------------------
        heads = []
        for r in range(N):
            q = queues[r]
            match = alloc.o_match[r]
            head = Signal(layout, name=f"head{r}")
            m.d.comb += [head.eq(q.o_rdata[:fw]), q.i_rsel.eq(match)]
            heads.append(head)
            if voq:
                m.d.comb += q.i_pop.eq(match.any())
            else:
                rem = head_target[r] & ~hdone[r]
                final = rem == match
                m.d.comb += q.i_pop.eq(match.any() & final)
                with m.If(match.any()):
                    m.d.sync += hdone[r].eq(Mux(final, 0, hdone[r] | match))

        head_arr = Array(heads)
        for o in range(N):
            if o < n:
                port = self.o_port[o]
            else:
                port = units[o - n].i_contrib
            ob = fifo.SyncFIFO(width=fw, depth=self.out_depth)
            m.submodules[f"out{o}"] = ob
            grant = alloc.o_grant[o]
            sel = onehot_index(grant, N)
            xfer = grant.any()
            moved = Signal(layout, name=f"xbar{o}")
            m.d.comb += [moved.eq(head_arr[sel]), ob.w_en.eq(xfer), ob.w_data.eq(moved),
                         port.valid.eq(ob.r_rdy), port.payload.eq(ob.r_data),
                         ob.r_en.eq(port.ready)]
            with m.If(xfer & (moved.kind == Kind.UNICAST)):
                m.d.sync += [lock_v[o].eq(~moved.last), lock_in[o].eq(sel)]
            out_hs = port.valid & port.ready
            m.d.sync += credit[o].eq(credit[o] - xfer + out_hs)
            self._output_counters(m, o, port, out_hs, credit)
        return m

    def _replicate(self, m, r, q, valid, target, drop):
        """Write a flit into input queue ``q``'s VOQs, one copy per cycle, lowest target
        first; returns ``(write, last_copy)`` (the flit is done after the last copy)."""
        N = len(target)
        done = Signal(N, name=f"done{r}")
        rem = Signal(N, name=f"rem{r}")
        pick = Signal(N, name=f"pick{r}")
        m.d.comb += [rem.eq(target & ~done), pick.eq(lowest_bit(rem, N))]
        write = valid & ~drop & (pick & q.o_notfull).any()
        last_copy = rem == pick
        m.d.comb += [q.i_wen.eq(write), q.i_wsel.eq(pick)]
        with m.If(write):
            m.d.sync += done.eq(Mux(last_copy, 0, done | pick))
        return write, last_copy

    def _pipelined_ingress(self, m, r, q, port, valid, flit, route):
        """``pipeline=True`` ingress of row ``r``: the routed flit (``route`` = target mask
        and the three drop causes, from the same rules as the default variant) is
        registered first, in one of two entries; the VOQ writes (one copy per cycle,
        lowest member first) and the counters work from the older entry (the head).
        ``port.ready`` = an entry is free (registers only): with two entries a flit can
        be taken in every cycle while the head leaves in every cycle. Each entry keeps the
        copies still to write, the next one and whether it is the last, computed when
        the flit is taken in or a copy is written, so the write and the head's departure
        are a few gates from registers and the 100-bit flit registers load on the input
        handshake alone."""
        n = self.n_ports
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
        self._ingress_counters(m, r, take, h_drops, valid & ~port.ready)

    def _ingress_counters(self, m, r, take, drops, stall):
        """Row ``r``'s ingress counters, one cycle late (their carry chains start at a
        register): ``take`` = the head flit leaves (written or dropped), ``drops`` its
        three drop causes, ``stall`` = a flit offered and not taken."""
        n = self.n_ports
        took = Signal(name=f"in_took{r}")
        took_route = Signal(3, name=f"in_took_drops{r}")
        stalled = Signal(name=f"in_stalled{r}")
        m.d.sync += [took.eq(take), took_route.eq(drops), stalled.eq(stall)]
        st = self.o_stats[r] if r < n else self.o_unit_stats[r - n]
        with m.If(took):
            if r < n:
                m.d.sync += [st.flits_in.eq(st.flits_in + ~took_route.any()),
                             st.drop_dest.eq(st.drop_dest + took_route[0]),
                             st.drop_group.eq(st.drop_group + took_route[1]),
                             st.drop_kind.eq(st.drop_kind + took_route[2])]
            else:
                m.d.sync += st.result_drops.eq(st.result_drops + took_route.any())
        if r < n:
            with m.If(stalled):
                m.d.sync += st.in_stalls.eq(st.in_stalls + 1)

    def _crosspoint_ingress(self, m, r, q, port, valid, flit, target, drops, stall=None):
        """``mode="crosspoint"`` ingress of row ``r``: the routed flit (``target`` mask and
        the three ``drops`` causes) is registered in one of two entries; the older entry
        (the head) leaves in one cycle, written at once into every crosspoint of its
        target mask when each of them has a free slot (a multicast flit is not split
        into copies), or dropped.

        The head's control works from registers of its own: whether it leaves is the
        target mask against the row's ``o_notfull`` registers (a few LUTs), and
        ``port.ready``, the entry a new flit goes to and the data path's head select are
        register copies of functions of the entries' valid bits and the head, computed
        from their next state. The flit registers load on the input handshake alone,
        and the row's write register takes the head flit in every cycle. ``stall`` (a
        flit offered and not taken, for ``in_stalls``) defaults to ``valid & ~ready``;
        a switch input passes its own, as its flit reaches here through ``in_pipe``."""
        N = q.n_ports
        layout = self.flit.layout()
        e_valid = [Signal(name=f"in_valid{r}_{k}") for k in (0, 1)]
        e_flit = [Signal(layout, name=f"in_flit{r}_{k}") for k in (0, 1)]
        e_drops = [Signal(3, name=f"in_drops{r}_{k}") for k in (0, 1)]
        # ``e_drop`` = any of ``e_drops``, kept as its own register so that the head's
        # departure reads one bit, not an OR of three
        e_drop = [Signal(name=f"in_drop{r}_{k}") for k in (0, 1)]
        e_target = [Signal(N, name=f"in_target{r}_{k}") for k in (0, 1)]
        hsel = Signal(name=f"in_head{r}")               # the entry holding the head
        # register copies (see the docstring); the head select of the data path is kept
        # inverted, so that Yosys does not merge it with ``hsel``
        ready = Signal(init=1, name=f"in_ready{r}")
        fill = Signal(name=f"in_fill{r}")
        hsel_dn = Signal(init=1, name=f"in_head_data_n{r}")
        # per entry: would it leave now if it were the head, and the columns it writes
        fits = [~(e_target[k] & ~q.o_notfull).any() for k in (0, 1)]
        leave = [e_valid[k] & (e_drop[k] | fits[k]) for k in (0, 1)]
        wcols = [e_target[k] & (e_valid[k] & ~e_drop[k] & fits[k]).replicate(N)
                 for k in (0, 1)]
        take = Signal(name=f"in_take{r}")               # the head leaves this cycle
        h_flit = Signal(layout, name=f"in_head_flit{r}")
        h_drops = Signal(3, name=f"in_head_drops{r}")
        m.d.comb += [take.eq(Mux(hsel, leave[1], leave[0])),
                     q.i_we.eq(Mux(hsel, wcols[1], wcols[0])),
                     h_flit.eq(Mux(hsel_dn, e_flit[0], e_flit[1])),
                     h_drops.eq(Mux(hsel, e_drops[1], e_drops[0])),
                     q.i_wdata.eq(h_flit),
                     # packet-lock bits, seen by the outputs without the flit
                     q.i_wmeta.eq(Cat(h_flit.kind == Kind.UNICAST, ~h_flit.last)),
                     port.ready.eq(ready)]
        enq = valid & ready
        v_next = [Signal(name=f"in_valid_next{r}_{k}") for k in (0, 1)]
        h_next = Signal(name=f"in_head_next{r}")
        for k in (0, 1):
            m.d.comb += v_next[k].eq(Mux(enq & (fill == k), 1,
                                         Mux((hsel == k) & take, 0, e_valid[k])))
        m.d.comb += h_next.eq(hsel ^ take)
        m.d.sync += [e_valid[0].eq(v_next[0]), e_valid[1].eq(v_next[1]),
                     hsel.eq(h_next), hsel_dn.eq(~h_next),
                     ready.eq(~(v_next[0] & v_next[1])),
                     # a new flit goes to the head entry if it is empty, else the other
                     fill.eq(Mux(Mux(h_next, v_next[1], v_next[0]), ~h_next, h_next))]
        for k in (0, 1):
            with m.If(enq & (fill == k)):
                m.d.sync += [e_flit[k].eq(flit), e_target[k].eq(target),
                             e_drops[k].eq(drops), e_drop[k].eq(drops.any())]
        self._ingress_counters(m, r, take, h_drops,
                               valid & ~ready if stall is None else stall)

    def _pipelined(self, m, queues, units, credit, lock_v, lock_in):
        """``pipeline=True``: a one-round iSLIP split over two cycles (grant, then accept)
        on a registered request matrix, then two read-address registers, RAM read, two
        flit registers, crossbar register, each in its own cycle (docs/switch.md, "Pipelined variant").

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
            port, hs = self._crossbar_output(m, o, units, heads, sel, sel.any())
            m.d.sync += credit[o].eq(credit[o] - gany1[o] + hs)
            self._output_counters(m, o, port, hs, credit)

    def _crosspoint(self, m, rows, units, credit):
        """``mode="crosspoint"``: a buffer at every crosspoint (i, o), fed by row i's
        registered write; per output, a round-robin arbiter over its column that keeps a
        packet's flits together, a crossbar register and the output buffer
        (docs/switch.md, "Crosspoint-buffered variant").

        Output o in cycle t: ``sel`` (registered, one-hot) names the crosspoint whose
        head leaves now (its ``i_pop``); the crosspoint reads it in t+1 into its read
        register, and the crossbar register takes it in t+2 (an OR of the column). The
        arbiter reads only this output's own registers: per crosspoint, the row's writes
        registered here (in the cycle the crosspoint registers them), a count of its
        flits with ">= 1" and ">= 2", and the lock bits of its front flit (the ones behind
        it wait in a LUT-RAM queue read one ahead).
        It picks ``sel`` for t+1 from the crosspoints that will still hold a flit, if an
        output-buffer credit is left after this cycle's transfer, and by the lock as it
        stands after this cycle's transfer: a UNICAST flit that is not ``last`` keeps the
        output on its crosspoint, the ``last`` one frees it. Credits are charged when the
        head leaves (``sel``) and returned on the output handshake, both from registers."""
        N = len(rows)
        layout = self.flit.layout()
        rng = range(N)
        pb = max(1, (N - 1).bit_length())
        # (row i's flits carry src = i, or i - n for a reduction unit's results)
        xps = [[Crosspoint(layout, self.depth, src=i % self.n_ports) for o in rng]
               for i in rng]
        for i in rng:
            for o in rng:
                xp = xps[i][o]
                m.submodules[f"xp{i}_{o}"] = xp
                m.d.comb += [xp.i_we.eq(rows[i].o_we[o]), xp.i_wdata.eq(rows[i].o_wdata),
                             rows[i].i_freed[o].eq(xp.o_freed)]
        for o in rng:
            col = [xps[i][o] for i in rng]
            sel = Signal(N, name=f"sel{o}")             # the head leaving now
            sel_any = Signal(name=f"sel_any{o}")
            lock_v = Signal(name=f"lock_v{o}")
            lock_k = Signal(N, name=f"lock_k{o}")       # one-hot owner
            ptr = Signal(pb, name=f"ptr{o}")
            # credit >= 1 and >= 2, registers beside the counter
            c1 = Signal(init=self.out_depth >= 1, name=f"credit_ge1_{o}")
            c2 = Signal(init=self.out_depth >= 2, name=f"credit_ge2_{o}")
            m.d.comb += sel_any.eq(sel.any())
            avail = Signal(N, name=f"avail{o}")
            hu = Signal(N, name=f"head_unicast{o}")
            hop = Signal(N, name=f"head_open{o}")
            g1s = Signal(N, name=f"seen_ge1_{o}")
            g2s = Signal(N, name=f"seen_ge2_{o}")
            for i in rng:
                m.d.comb += col[i].i_pop.eq(sel[i])
                # The output's own view of crosspoint (i, o): the row's write (and the
                # flit's lock bits) registered here, as the crosspoint registers it
                # before its RAM write, so everything the arbiter reads is a register
                # of this output.
                # (the write bit is kept inverted here, so that Yosys does not merge it
                # with the crosspoint's own write register, placed at the crosspoint)
                we_n = Signal(init=1, name=f"seen_we_n{i}_{o}")
                we = Signal(name=f"seen_we{i}_{o}")
                wm = Signal(2, name=f"seen_meta{i}_{o}")
                m.d.sync += we_n.eq(~rows[i].o_we[o])
                m.d.comb += we.eq(~we_n)
                # (the lock bits only count with the write: held otherwise, so that each
                # output keeps its own register and Yosys does not merge the n copies)
                with m.If(rows[i].o_we[o]):
                    m.d.sync += wm.eq(rows[i].o_wmeta)
                # lock bits as stored: UNICAST, and UNICAST and not ``last``
                wl = Signal(2, name=f"seen_lock{i}_{o}")
                m.d.comb += wl.eq(Cat(wm[0], wm[0] & wm[1]))
                # The lock bits of the flits behind the front one, a LUT-RAM queue read
                # one ahead; the front flit's in ``front`` (a register).
                meta = memory.Memory(shape=2, depth=2 * self.depth, init=[])
                m.submodules[f"meta{i}_{o}"] = meta
                mw = meta.write_port()
                mr = meta.read_port(domain="comb")
                mwp = Signal(range(2 * self.depth), name=f"meta_w{i}_{o}")
                mrp = Signal(range(2 * self.depth), init=1, name=f"meta_r{i}_{o}")
                front = Signal(2, name=f"front{i}_{o}")
                cnt = Signal(range(self.depth + 2), name=f"seen{i}_{o}")
                g1 = Signal(name=f"seen_ge1_{i}_{o}")
                g2 = Signal(name=f"seen_ge2_{i}_{o}")
                m.d.comb += [mw.en.eq(we), mw.addr.eq(mwp), mw.data.eq(wl),
                             mr.addr.eq(mrp), hu[i].eq(front[0]), hop[i].eq(front[1]),
                             avail[i].eq(g2 | (g1 & ~sel[i]))]
                with m.If(we):
                    m.d.sync += mwp.eq(mwp + 1)
                # the front after this cycle: on a pop the next flit's bits (from the
                # queue, or the one written now if it was the only one left); without
                # one, the flit written now if there was none
                with m.If(sel[i]):
                    m.d.sync += [mrp.eq(mrp + 1), front.eq(Mux(g2, mr.data, wl))]
                with m.Elif(~g1):
                    m.d.sync += front.eq(wl)
                cn = Signal.like(cnt, name=f"seen_next{i}_{o}")
                m.d.comb += cn.eq(cnt + we - sel[i])
                m.d.sync += [cnt.eq(cn), g1.eq(cn >= 1), g2.eq(cn >= 2)]
                m.d.comb += [g1s[i].eq(g1), g2s[i].eq(g2)]
            # The front flit of the crosspoint leaving now opens the lock on it (UNICAST,
            # not ``last``) or closes it (UNICAST, ``last``); other flits leave it as is.
            opens = Signal(name=f"lock_opens{o}")
            closes = Signal(name=f"lock_closes{o}")
            m.d.comb += [opens.eq((sel & hop).any()), closes.eq((sel & hu & ~hop).any())]
            m.d.sync += [lock_v.eq(opens | (lock_v & ~closes)),
                         lock_k.eq(Mux(opens | closes, sel, lock_k))]
            # a credit left after this cycle's transfer (charged below, a cycle late)
            cok = Signal(name=f"credit_ok{o}")
            m.d.comb += cok.eq(c2 | (c1 & ~sel_any))
            # Round robin over ``avail`` from ``ptr``. ``ptr`` is one past ``sel`` whenever
            # ``sel`` is set (a grant moves it there, a locked grant repeats the owner the
            # round robin picked), so ``sel``'s crosspoint comes last and the pick over
            # the registers ``seen_ge1`` alone serves, unless it is ``sel``'s crosspoint
            # without a second flit: then nothing else was there either.
            rr = Signal(N, name=f"rr{o}")
            m.d.comb += rr.eq(round_robin_index(g1s, ptr, N) & (~sel | g2s))
            # (Muxes, not If: a combinational process is a Verilog ``always @*`` that
            # Icarus does not run at time 0, and nothing here changes during reset)
            nxt = Signal(N, name=f"sel_next{o}")
            m.d.comb += nxt.eq(Mux(opens, sel & g2s,
                                   Mux(closes | ~lock_v, rr, lock_k & avail)))
            m.d.sync += sel.eq(nxt & cok.replicate(N))
            # (``rr`` is not empty exactly when ``avail`` is not: see above; ``avail``
            # is a few gates from registers, the round robin is not)
            with m.If(cok & ~opens & (closes | ~lock_v) & avail.any()):
                m.d.sync += ptr.eq(next_pointer(rr, N))
            # the crossbar register takes the flit two cycles after its pop: the
            # crosspoint registers the pop, then the flit it read (``o_popped``, zero
            # without a pop), so the crossbar is an OR of the column
            popped_any = Signal(name=f"popped_any{o}")
            xbar_any = Signal(name=f"xbar_any{o}")
            m.d.sync += [popped_any.eq(sel_any), xbar_any.eq(popped_any)]
            port, hs = self._crossbar_output(m, o, units, [c.o_popped for c in col], None,
                                             xbar_any)
            # Credits: ``lag`` takes the charge (``sel_any``) and the return (the output
            # handshake) from registers a cycle late, so its carry chain starts at
            # registers; the credits now are ``lag - charged + returned``. ``c1``/``c2``
            # for the next cycle leave out this cycle's return (it counts a cycle later)
            # and pick among compares of ``lag`` by the three one-bit corrections.
            lag = Signal(range(self.out_depth + 1), init=self.out_depth,
                         name=f"credit_lag{o}")
            charged = Signal(name=f"credit_charged{o}")
            returned = Signal(name=f"credit_returned{o}")
            m.d.sync += [lag.eq(lag - charged + returned), charged.eq(sel_any),
                         returned.eq(hs)]
            m.d.comb += credit[o].eq(lag - charged + returned)
            ge = [Const(1)] + [lag >= k for k in range(1, 5)]

            def at_least(c):
                # lag - charged + returned - sel_any >= c
                return Mux(returned,
                           Mux(charged, Mux(sel_any, ge[c + 1], ge[c]),
                               Mux(sel_any, ge[c], ge[c - 1])),
                           Mux(charged, Mux(sel_any, ge[c + 2], ge[c + 1]),
                               Mux(sel_any, ge[c + 1], ge[c])))
            m.d.sync += [c1.eq(at_least(1)), c2.eq(at_least(2))]
            self._output_counters(m, o, port, hs, credit)

    def _crossbar_output(self, m, o, units, heads, sel, sel_any):
        """Output o's crossbar register (the one-hot AND-OR of ``heads`` by ``sel``) and
        output buffer, as both registered variants build them; returns the output stream
        (a port or a unit's contribution input) and its handshake."""
        n = self.n_ports
        fw = self.flit.width
        port = self.o_port[o] if o < n else units[o - n].i_contrib
        moved = Signal(fw, name=f"xbar{o}")
        moved_v = Signal(name=f"xbar_valid{o}")
        acc = Const(0, fw)
        for i, head in enumerate(heads):
            # (crosspoint: ``sel`` is None, the heads are zero unless popped)
            acc = acc | (head if sel is None else head & sel[i].replicate(fw))
        m.d.sync += [moved.eq(acc), moved_v.eq(sel_any)]
        if self.mode == "crosspoint":
            # the credits guarantee space: no "not full" gate on the write (the same
            # timing as SyncFIFO, see OutputBuffer)
            ob = OutputBuffer(fw, self.out_depth)
            m.submodules[f"out{o}"] = ob
            m.d.comb += [ob.i_we.eq(moved_v), ob.i_wdata.eq(moved),
                         port.valid.eq(ob.o_valid), port.payload.eq(ob.o_data),
                         ob.i_ready.eq(port.ready)]
            return port, port.valid & port.ready
        ob = fifo.SyncFIFO(width=fw, depth=self.out_depth)
        m.submodules[f"out{o}"] = ob
        m.d.comb += [ob.w_en.eq(moved_v), ob.w_data.eq(moved),
                     port.valid.eq(ob.r_rdy), port.payload.eq(ob.r_data),
                     ob.r_en.eq(port.ready)]
        return port, port.valid & port.ready

    def _output_counters(self, m, o, port, out_hs, credit):
        n = self.n_ports
        if o < n:
            st = self.o_stats[o]
            m.d.comb += self.o_credit[o].eq(credit[o])
            with m.If(out_hs):
                m.d.sync += st.flits_out.eq(st.flits_out + 1)
            with m.If(port.valid & ~port.ready):
                m.d.sync += st.out_stalls.eq(st.out_stalls + 1)
        else:
            m.d.comb += self.o_unit_credit[o - n].eq(credit[o])


def _build(n_ports, data_width, depth, iterations, mode, out_depth, n_groups, reduce,
           n_chunks, pipeline=False):
    return Switch(n_ports=n_ports, data_width=data_width, depth=depth,
                  iterations=iterations or None, mode=mode, out_depth=out_depth,
                  n_groups=n_groups, reduce=reduce, n_chunks=n_chunks, pipeline=pipeline)


#: Lint sets beyond the defaults (sim/lint.py): the two registered variants at 8 ports, and
#: the crosspoint one with reduction units and one-slot buffers.
LINT_PARAMS = {
    "switch": [{"n_ports": 8, "pipeline": True, "depth": 64, "out_depth": 16},
               {"n_ports": 8, "mode": "crosspoint", "out_depth": 8},
               {"n_ports": 3, "mode": "crosspoint", "depth": 1, "reduce": True}],
}

BLOCKS = [
    Block("switch", _build, doc="VOQ + iSLIP crossbar with credits and multicast "
          "(docs/switch.md)", params=[
              Param("n_ports", int, 4, "ports (2..256; tested 2, 3, 4, 8; lint to 72)"),
              Param("data_width", int, 64, "data bits per flit"),
              Param("depth", int, 16, "flits per VOQ or crosspoint buffer (power of two)"),
              Param("iterations", int, 0, "iSLIP rounds, 1..ceil(log2 n); 0 = min(3, max)"),
              Param("mode", str, "voq", "input queueing (crosspoint: a buffered "
                    "crossbar, docs/switch.md)", choices=("voq", "fifo", "crosspoint")),
              Param("out_depth", int, 4, "output buffer slots = credits per output"),
              Param("n_groups", int, 16, "group-table entries (1..256)"),
              Param("reduce", bool, False, "per-port reduction units (rtl/reduce)"),
              Param("n_chunks", int, 16, "open-chunk slots per reduction unit (1..64)"),
              Param("pipeline", bool, False, "registered iSLIP, block-RAM VOQs, pipelined "
                    "crossbar (docs/switch.md; full rate needs out_depth >= 11)"),
          ]),
]
