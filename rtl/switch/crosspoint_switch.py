"""The crosspoint-buffered switch: a LUT-RAM FIFO at every input-output crosspoint, a
round-robin arbiter per output and no input-output matching; every loop is local, which
makes it the design for FPGA clock rates (docs/switch.md, "Crosspoint-buffered
variant")."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory

from fusionfabric.formats.switch import Kind

from .common import SwitchBase
from .crosspoint import Crosspoint, CrosspointRow
from .ingress import Ingress
from .islip import next_pointer, round_robin_index
from .output import OutputSide

__all__ = ["CrosspointSwitch"]


class CrosspointSwitch(SwitchBase):
    """A buffered crossbar: a FIFO of ``depth`` flits at every crosspoint (i, o), written
    by input i, read by output o's round-robin arbiter (after Rojas-Cessa, Oki, Jing and
    Chao, "CIXB-1", IEEE HPSR 2001).

    Routing, drops, locks, credits toward each output and the counters follow the VOQ
    switch's rules. Each input registers its flit and group-table entry, routes it into a
    two-entry input stage and writes a multicast flit into all its members' crosspoints
    at once; each output arbitrates over its column, keeps a unicast packet's flits
    together and charges a credit of its output buffer at the pop.

    Parameters
    ----------
    n_ports : int
        Ports, 2 … 256.
    data_width : int
        Bits of ``data`` per flit (``fusionfabric.formats.switch.switch_flit``).
    depth : int
        RAM slots per crosspoint buffer (power of two); one input to one output at line
        rate needs ``depth >= 8``.
    out_depth : int
        Output buffer slots = credits per output; one output at line rate needs
        ``out_depth >= 7``.
    n_groups : int
        Group-table entries (multicast and reduction groups).
    reduce : bool
        Per-port reduction units (``fusionfabric.rtl.reduce.unit``, docs/switch.md); 4n²
        crosspoints.
    n_chunks : int
        Open-chunk slots per reduction unit.

    Members
    -------
    i_port, o_port, i_config, o_credit, o_stats, o_config_drops, o_unit_credit, o_unit_stats
        As :class:`~.common.SwitchBase`.

    Timing
    ------
    Input handshake in t → ``o_port`` valid in t+10 without contention: the flit and its
    group-table entry are registered at the handshake; t+1: its route into an
    input-stage entry; t+2: the input stage writes the flit into every crosspoint of its
    target mask at once, through the row's write register; t+3: the crosspoints register
    the write, and the output registers the write bit; t+4: the crosspoint RAM write, and
    the output counts it; t+5: the output's arbiter selects the crosspoint; t+6: the pop
    (``sel``); t+7: the crosspoint registers the pop and reads its RAM into its read
    register; t+8: the crossbar register (an OR of the column's read registers); t+9: the
    output buffer write. A credit is charged at the pop and returns on the output
    handshake. One flit per cycle per input (multicast included) and per output. An
    input takes ``out_depth + depth + 3`` flits toward a stopped output, then stalls. The
    counters ``flits_in``, ``drop_*`` and ``in_stalls`` count one cycle after the flit
    leaves the input stage. Reset empties every buffer, fills the credits and clears
    pointers, locks, the group table and the counters.
    """

    mode = "crosspoint"
    #: no matching, so no iSLIP rounds
    iterations = 0

    def elaborate(self, platform):
        m = Module()
        N = self.n_rows
        ingress = Ingress(self, input_register=True)
        output = OutputSide(self, unchecked_write=True)

        table = ingress.attach_table(m)
        output.attach_units(m)
        rows = []
        for r in range(N):
            q = CrosspointRow(N, self.flit.width, self.depth)
            m.submodules[f"row{r}"] = q
            rows.append(q)

        credit = [Signal(range(self.out_depth + 1), init=self.out_depth, name=f"credit{o}")
                  for o in range(N)]

        for r in range(N):
            rt = ingress.route(m, r, table, output.units)
            self._crosspoint_ingress(m, r, rows[r], rt.port, rt.valid, rt.flit, rt.target,
                                     Cat(rt.drop_dest, rt.drop_group, rt.drop_kind),
                                     ingress, rt.stall)
        self._crosspoint(m, rows, output, credit)
        return m

    def _crosspoint_ingress(self, m, r, q, port, valid, flit, target, drops, ingress,
                            stall=None):
        """Ingress of row ``r``: the routed flit (``target`` mask and
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
        ingress.count_late(m, r, take, h_drops,
                               valid & ~ready if stall is None else stall)


    def _crosspoint(self, m, rows, output, credit):
        """The core: a buffer at every crosspoint (i, o), fed by row i's
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
            port, hs = output.registered(m, o, [c.o_popped for c in col], None,
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
            output.counters(m, o, port, hs, credit)

