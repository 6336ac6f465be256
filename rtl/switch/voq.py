"""Input queues of one switch port: virtual output queues, or one FIFO (HOL baseline)."""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["InputQueue", "PipelinedQueue", "onehot_index"]


def onehot_index(onehot, n: int):
    """Index of the set bit of a one-hot ``n``-bit value (0 when zero), an OR tree."""
    bits = max(1, (n - 1).bit_length())
    return Cat(Cat(onehot[o] for o in range(n) if (o >> b) & 1).any()
               if any((o >> b) & 1 for o in range(n)) else Const(0, 1)
               for b in range(bits))


class InputQueue(wiring.Component):
    """The flit store of one input: ``n_ports`` VOQs of ``depth`` flits, or one FIFO.

    Parameters
    ----------
    n_ports : int
        Outputs of the switch (one VOQ each).
    width : int
        Bits per stored word.
    depth : int
        Flits per VOQ, a power of two. In FIFO mode the single queue holds
        ``n_ports * depth`` words.
    mode : str
        ``"voq"`` or ``"fifo"``.

    Members
    -------
    i_wen : In(1)
        Write ``i_wdata`` this cycle (into VOQ ``i_wsel``; ``i_wsel`` ignored in FIFO mode).
    i_wsel : In(n_ports)
        One-hot VOQ to write.
    i_wdata : In(width)
    o_nonempty : Out(n_ports)
        VOQ mode: bit o = VOQ o holds a flit. FIFO mode: all bits = the FIFO holds one.
    o_notfull : Out(n_ports)
        Same, for "has room for one more".
    i_pop : In(1)
        Pop the head of VOQ ``i_rsel`` (FIFO mode: of the FIFO) this cycle.
    i_rsel : In(n_ports)
        One-hot VOQ whose head ``o_rdata`` shows.
    o_rdata : Out(width)
        Head word of the selected VOQ (FIFO mode: of the FIFO), combinational.

    Timing
    ------
    A word written in cycle t counts in ``o_nonempty`` from t+1; a pop in t frees its slot
    in ``o_notfull`` from t+1 (both flags are functions of the registered pointers only).
    One memory per input, one write port and one asynchronous read port.
    Reset empties every queue.
    """

    def __init__(self, n_ports: int, width: int, depth: int, mode: str = "voq"):
        if mode not in ("voq", "fifo"):
            raise ValueError(f"mode={mode!r} is not 'voq' or 'fifo'")
        if not isinstance(depth, int) or depth < 1 or depth & (depth - 1):
            raise ValueError(f"depth={depth!r} must be a power of two >= 1")
        self.n_ports = n_ports
        self.width = width
        self.depth = depth
        self.mode = mode
        super().__init__({
            "i_wen": In(1), "i_wsel": In(n_ports), "i_wdata": In(width),
            "o_nonempty": Out(n_ports), "o_notfull": Out(n_ports),
            "i_pop": In(1), "i_rsel": In(n_ports), "o_rdata": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        n, depth = self.n_ports, self.depth
        ab = (depth - 1).bit_length()          # address bits within one VOQ
        m.submodules.mem = mem = Memory(shape=self.width, depth=n * depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        m.d.comb += [wp.data.eq(self.i_wdata), self.o_rdata.eq(rp.data)]

        if self.mode == "voq":
            wptr = [Signal(ab + 1, name=f"wptr{o}") for o in range(n)]
            rptr = [Signal(ab + 1, name=f"rptr{o}") for o in range(n)]
            for o in range(n):
                m.d.comb += [
                    self.o_nonempty[o].eq(wptr[o] != rptr[o]),
                    self.o_notfull[o].eq((wptr[o] - rptr[o])[:ab + 1] != depth),
                ]
                with m.If(self.i_wen & self.i_wsel[o]):
                    m.d.sync += wptr[o].eq(wptr[o] + 1)
                with m.If(self.i_pop & self.i_rsel[o]):
                    m.d.sync += rptr[o].eq(rptr[o] + 1)
            widx = onehot_index(self.i_wsel, n)
            ridx = onehot_index(self.i_rsel, n)
            wsel_ptr = Array(wptr)[widx]
            rsel_ptr = Array(rptr)[ridx]
            m.d.comb += [
                wp.addr.eq(Cat(wsel_ptr[:ab], widx)),
                wp.en.eq(self.i_wen),
                rp.addr.eq(Cat(rsel_ptr[:ab], ridx)),
            ]
        else:
            cap = n * depth
            w = Signal(range(cap))
            r = Signal(range(cap))
            count = Signal(range(cap + 1))
            m.d.comb += [
                self.o_nonempty.eq(Mux(count != 0, (1 << n) - 1, 0)),
                self.o_notfull.eq(Mux(count != cap, (1 << n) - 1, 0)),
                wp.addr.eq(w), wp.en.eq(self.i_wen), rp.addr.eq(r),
            ]
            with m.If(self.i_wen):
                m.d.sync += w.eq(Mux(w == cap - 1, 0, w + 1))
            with m.If(self.i_pop):
                m.d.sync += r.eq(Mux(r == cap - 1, 0, r + 1))
            m.d.sync += count.eq(count + self.i_wen - self.i_pop)
        return m


class PipelinedQueue(wiring.Component):
    """The flit store of one input of :class:`~.pipelined.PipelinedSwitch`: ``n_ports``
    VOQs of ``depth`` flits in one block RAM with a synchronous read port.

    Each VOQ has three pointers: ``wptr`` (ingress), ``sptr`` (scheduled: advanced when
    the allocator matches the VOQ) and ``rptr`` (read: advanced when the matched flit's
    read starts, one cycle after the match). A small side memory per VOQ holds
    ``meta_width`` bits per flit, read combinationally at ``sptr``, so the allocator can see
    what it is about to schedule (the switch keeps the packet-lock bits there) without
    waiting for the block RAM. Every path into a memory starts at a register: the writes
    (address, data, enable) are registered on their way in (twice for the block RAM),
    the read address twice.

    Parameters
    ----------
    n_ports : int
        Outputs of the switch (one VOQ each).
    width : int
        Bits per stored flit.
    depth : int
        Flits per VOQ, a power of two.
    meta_width : int
        Bits of side information per flit.

    Members
    -------
    i_wen : In(1)
        Write ``i_wdata`` / ``i_wmeta`` into VOQ ``i_wsel`` this cycle.
    i_wsel : In(n_ports)
        One-hot VOQ to write.
    i_wdata : In(width)
    i_wmeta : In(meta_width)
    o_nonempty : Out(n_ports)
        Bit o: VOQ o holds a flit not yet scheduled (``wptr != sptr``).
    o_single : Out(n_ports)
        Bit o: VOQ o holds exactly one flit not yet scheduled.
    o_notfull : Out(n_ports)
        Bit o: VOQ o has a free slot (``wptr - rptr != depth``; a slot is free once its
        read has started), a register.
    o_meta : Out(meta_width).array(n_ports)
        Side bits of the next flit to schedule in each VOQ (at ``sptr``), combinational.
    o_meta_any : Out(meta_width).array(n_ports)
        Registered: the side bits at ``sptr`` and at ``sptr + 1`` of last cycle, ORed,
        so a superset (for a monotone test of the bits) of those of the flit at ``sptr``
        now, whether or not ``i_sched`` moved it in last cycle.
    i_sched : In(n_ports)
        One-hot (or zero): advance ``sptr`` of that VOQ.
    i_read : In(n_ports)
        One-hot (or zero): read the head (at ``rptr``) of that VOQ and advance ``rptr``.
    o_rdata : Out(width)
        The flit whose read was requested three cycles before.

    Timing
    ------
    A write in cycle t counts in ``o_nonempty`` from t+1 (the side memory takes it in
    t+1 and the block RAM in t+2, from registers); ``i_sched`` in t clears it from t+1 if
    that was the last unscheduled flit; ``i_read`` in t registers the read address (twice),
    the block RAM reads it in t+2 and ``o_rdata`` shows the flit in t+3; the slot counts
    as free in ``o_notfull`` from t+1 (its next write reaches the RAM in t+3 at the
    earliest, after the read). ``o_notfull``
    is registered (computed from this cycle's writes and reads). The RAM has one write
    port and one synchronous read port (``ram_style = "block"``: a block RAM on FPGAs).
    Reset empties every queue.
    """

    def __init__(self, n_ports: int, width: int, depth: int, meta_width: int = 1):
        if not isinstance(depth, int) or depth < 1 or depth & (depth - 1):
            raise ValueError(f"depth={depth!r} must be a power of two >= 1")
        self.n_ports = n_ports
        self.width = width
        self.depth = depth
        self.meta_width = meta_width
        super().__init__({
            "i_wen": In(1), "i_wsel": In(n_ports), "i_wdata": In(width),
            "i_wmeta": In(meta_width),
            "o_nonempty": Out(n_ports), "o_single": Out(n_ports),
            "o_notfull": Out(n_ports, init=(1 << n_ports) - 1),
            "o_meta": Out(meta_width).array(n_ports),
            "o_meta_any": Out(meta_width).array(n_ports),
            "i_sched": In(n_ports), "i_read": In(n_ports), "o_rdata": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        n, depth = self.n_ports, self.depth
        ab = (depth - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=self.width, depth=n * depth, init=[],
                                        attrs={"ram_style": "block", "no_rw_check": 1})
        wp = mem.write_port()
        rp = mem.read_port()               # synchronous, not transparent
        m.d.comb += self.o_rdata.eq(rp.data)

        # one-hot AND-OR selects (shallower than an indexed mux; also keeps Icarus from
        # leaving a never-triggered always @* block at X after time zero)
        def pick(sel, ptrs):
            acc = Const(0, max(ab, 1))
            for o in range(n):
                acc = acc | (ptrs[o][:ab] & sel[o].replicate(ab))
            return acc[:ab]

        wptr = [Signal(ab + 1, name=f"wptr{o}") for o in range(n)]
        sptr = [Signal(ab + 1, name=f"sptr{o}") for o in range(n)]
        rptr = [Signal(ab + 1, name=f"rptr{o}") for o in range(n)]
        # the write, registered on its way to the memories
        w_en = Signal()
        w_sel = Signal(n)
        w_slot = Signal(max(ab, 1))
        w_data = Signal(self.width)
        w_meta = Signal(self.meta_width)
        m.d.sync += [w_en.eq(self.i_wen), w_sel.eq(self.i_wsel),
                     w_slot.eq(pick(self.i_wsel, wptr)), w_data.eq(self.i_wdata),
                     w_meta.eq(self.i_wmeta)]
        # the block RAM's write and read address pass a second register: the RAM sits at
        # a fixed site, and this logic next to the allocator
        w2_en = Signal()
        w2_addr = Signal(len(wp.addr))
        w2_data = Signal(self.width)
        m.d.sync += [w2_en.eq(w_en), w2_addr.eq(Cat(w_slot[:ab], onehot_index(w_sel, n))),
                     w2_data.eq(w_data)]
        m.d.comb += [wp.addr.eq(w2_addr), wp.data.eq(w2_data), wp.en.eq(w2_en)]
        r_addr = Signal(len(rp.addr))
        r2_addr = Signal(len(rp.addr))
        m.d.sync += [r_addr.eq(Cat(pick(self.i_read, rptr), onehot_index(self.i_read, n))),
                     r2_addr.eq(r_addr)]
        m.d.comb += rp.addr.eq(r2_addr)

        for o in range(n):
            meta = Memory(shape=self.meta_width, depth=depth, init=[])
            m.submodules[f"meta{o}"] = meta
            mw = meta.write_port()
            wr = self.i_wen & self.i_wsel[o]
            rd = self.i_read[o]
            # side bits at sptr and at sptr + 1, the write on its way to the memory
            # bypassed: o_meta is the first, o_meta_any both ORed, registered
            got = []
            for k in (0, 1):
                mr = meta.read_port(domain="comb")
                addr = Signal(max(ab, 1), name=f"meta_addr{k}_{o}")
                m.d.comb += [addr.eq(sptr[o] + k), mr.addr.eq(addr[:ab])]
                hit = w_en & w_sel[o] & (w_slot[:ab] == addr[:ab])
                bits = Signal(self.meta_width, name=f"meta{k}_{o}")
                m.d.comb += bits.eq(Mux(hit, w_meta, mr.data))
                got.append(bits)
            m.d.comb += self.o_meta[o].eq(got[0])
            m.d.sync += self.o_meta_any[o].eq(got[0] | got[1])
            used = Signal(ab + 1, name=f"used{o}")      # wptr - rptr
            m.d.comb += [
                mw.addr.eq(w_slot[:ab]), mw.data.eq(w_meta), mw.en.eq(w_en & w_sel[o]),
                self.o_nonempty[o].eq(wptr[o] != sptr[o]),
                self.o_single[o].eq((wptr[o] - sptr[o])[:ab + 1] == 1),
                used.eq(wptr[o] - rptr[o]),
            ]
            # full next cycle: full now and no read, or one short, a write and no read
            full_next = ~rd & ((used == depth) | ((used == depth - 1) & wr))
            m.d.sync += self.o_notfull[o].eq(~full_next)
            with m.If(wr):
                m.d.sync += wptr[o].eq(wptr[o] + 1)
            with m.If(self.i_sched[o]):
                m.d.sync += sptr[o].eq(sptr[o] + 1)
            with m.If(rd):
                m.d.sync += rptr[o].eq(rptr[o] + 1)
        return m
