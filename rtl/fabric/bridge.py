"""Bridges between a switch-side chiplet's accelerator port (``fusionfabric.formats.chiplet.PORT_BEAT``) and a
switch port (``fusionfabric.formats.switch.switch_flit(128)``). Formats: docs/fabric.md."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.chiplet.common import beat_slots_layout, data_slots, port_layout
from fusionfabric.formats.chiplet import SLOT_BITS, Opcode
from fusionfabric.formats.switch import CHUNK_BITS, Kind, switch_flit

__all__ = ["IngressBridge", "EgressBridge", "ResultPacker", "Reassembly", "beat_layout",
           "SWITCH_SRC", "RESULT_BEATS"]

#: ``src`` of the RESULT messages the switch side sends (no endpoint has this id).
SWITCH_SRC = 0xFF
#: Beats (16-byte results) of one RESULT message: length code 0 = 64 bytes.
RESULT_BEATS = 4
#: Most data beats of one message (256 bytes).
MAX_DATA_BEATS = 16


def beat_layout() -> data.StructLayout:
    """A port beat plus ``last`` (the message's final beat), inside the egress bridge."""
    return data.StructLayout({"beat": port_layout(), "last": 1})


def _switch_kind(opcode):
    """RTL twin of :func:`fusionfabric.sim.chiplet.switch_kind`."""
    return Mux(opcode == Opcode.MULTICAST, Kind.MULTICAST,
               Mux(opcode == Opcode.REDUCE, Kind.REDUCE, Kind.UNICAST))


class IngressBridge(wiring.Component):
    """Switch-side chiplet ``o_req``/``o_rsp`` beats → switch flits (docs/fabric.md).

    The two streams are merged at message granularity, alternating when both have a
    message. A REDUCE message of ``L`` bytes with chunk ``c`` becomes ``L/16`` single-flit
    contributions (kind REDUCE, ``dest`` = group, ``chunk`` = ``c + k`` for beat ``k``,
    ``first = last = 1``). Every other message becomes one packet: a header flit (``data``
    = the 128-bit TL header, ``src`` kept; ``first``; ``last`` if the message has no data),
    then one flit per data beat (``last`` on the final one); ``kind`` =
    :func:`fusionfabric.sim.chiplet.switch_kind`, ``dest`` = header ``dest``.

    Members
    -------
    i_req, i_rsp : In(stream.Signature(PORT_BEAT))
    o_flit : Out(stream.Signature(switch_flit(128)))

    Timing
    ------
    Combinational (no register between a beat and its flit; the state is the message
    position). A message of ``n`` data beats takes ``n + 1`` flit cycles (``n`` for REDUCE),
    a message without data one. A flit offered on ``o_flit`` stays (same stream, same
    payload) until it is taken. Reset: idle, requests preferred first.
    """

    def __init__(self):
        self.flit = switch_flit(SLOT_BITS)
        super().__init__({
            "i_req": In(stream.Signature(port_layout())),
            "i_rsp": In(stream.Signature(port_layout())),
            "o_flit": Out(stream.Signature(self.flit.layout())),
        })

    def elaborate(self, platform):
        m = Module()
        req, rsp, o = self.i_req, self.i_rsp, self.o_flit
        active = Signal()           # inside a message (its stream is locked)
        cur = Signal()              # 0: req, 1: rsp (while active)
        prefer_rsp = Signal()       # round robin between messages
        hdr_done = Signal()         # header flit of the current message sent
        k = Signal(range(MAX_DATA_BEATS))

        # combinational logic as expressions only (no m.If/m.Switch in comb): Icarus never
        # evaluates an ``always @*`` block whose inputs stay constant after time 0
        sel = Signal()
        m.d.comb += sel.eq(Mux(active, cur, Mux(req.valid & rsp.valid, prefer_rsp, rsp.valid)))
        beat = Signal(port_layout())
        valid = Signal()
        m.d.comb += [beat.eq(Mux(sel, rsp.payload, req.payload)),
                     valid.eq(Mux(sel, rsp.valid, req.valid))]
        n_data = Signal(5)
        m.d.comb += n_data.eq(data_slots(beat.opcode, beat.length))
        is_reduce = Signal()
        emit_hdr = Signal()
        m.d.comb += [is_reduce.eq(beat.opcode == Opcode.REDUCE),
                     emit_hdr.eq(~is_reduce & ~hdr_done)]
        last_beat = k == n_data - 1
        header = beat.as_value()[SLOT_BITS:]

        f = o.payload
        kind = _switch_kind(beat.opcode)
        consume = Signal()
        m.d.comb += [
            o.valid.eq(valid), f.dest.eq(beat.dest), f.src.eq(beat.src),
            f.data.eq(Mux(emit_hdr, header, beat.data)),
            f.first.eq(is_reduce | emit_hdr),
            f.last.eq(Mux(is_reduce, 1, Mux(emit_hdr, n_data == 0, last_beat))),
            f.kind.eq(Mux(is_reduce, Kind.REDUCE, kind)),
            f.chunk.eq(Mux(is_reduce, beat.chunk + k, 0)),
            consume.eq(o.ready & (~emit_hdr | (n_data == 0))),
            req.ready.eq(consume & ~sel), rsp.ready.eq(consume & sel),
        ]

        with m.If(o.valid & o.ready):
            msg_end = Mux(emit_hdr, n_data == 0, last_beat)
            with m.If(msg_end):
                m.d.sync += [active.eq(0), hdr_done.eq(0), k.eq(0), prefer_rsp.eq(~sel)]
            with m.Else():
                m.d.sync += [active.eq(1), cur.eq(sel)]
                with m.If(emit_hdr):
                    m.d.sync += hdr_done.eq(1)
                with m.Else():
                    m.d.sync += k.eq(k + 1)
        with m.Elif(o.valid):
            # a flit offered and not taken stays until it is taken (stream rule): lock
            # the choice now, or the other stream becoming valid would swap the flit. The
            # switch replicates a MULTICAST flit one copy per cycle and keeps the copies
            # it has written; a swapped flit left it waiting forever (docs/fabric.md).
            m.d.sync += [active.eq(1), cur.eq(sel)]
        return m


class Reassembly(wiring.Component):
    """Switch packets (header flit + data flits) → whole messages, store and forward.

    The switch keeps a unicast packet contiguous at its output, but the flits of a
    multi-flit MULTICAST packet may be interleaved with other inputs' flits
    (docs/switch.md), so packets are reassembled per source (the flit's ``src``). Each
    source has two buffers of ``16`` data flits plus a header (double buffering: the next
    packet of a source is written while the previous one is read). A packet whose last flit
    has arrived is queued (``2 * n_ports`` deep, in arrival order of last flits) and read
    out as port beats, one per cycle. A flit whose source has both buffers full waits
    (``i_flit.ready`` low).

    Members
    -------
    i_flit : In(stream.Signature(switch_flit(128)))
        UNICAST and MULTICAST flits only (the egress bridge routes RESULT flits apart).
    o_beat : Out(stream.Signature(beat_layout()))
        Port beats of whole messages, ``last`` on each message's final beat.

    Timing
    ------
    The last flit of a packet accepted in cycle t → its first beat on ``o_beat`` in t+2 if
    nothing is queued before it (queue write, then the read). One beat per cycle out, one
    flit per cycle in. Reset: buffers empty.
    """

    def __init__(self, n_ports: int):
        if not isinstance(n_ports, int) or n_ports < 1:
            raise ValueError(f"n_ports={n_ports!r} must be a positive integer")
        self.n_ports = n_ports
        super().__init__({
            "i_flit": In(stream.Signature(switch_flit(SLOT_BITS).layout())),
            "o_beat": Out(stream.Signature(beat_layout())),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_ports
        nb = 2 * n
        m.submodules.dmem = dmem = Memory(shape=SLOT_BITS, depth=nb * MAX_DATA_BEATS, init=[])
        m.submodules.hmem = hmem = Memory(shape=SLOT_BITS, depth=nb, init=[])
        dw, hw = dmem.write_port(), hmem.write_port()
        dr, hr = dmem.read_port(domain="comb"), hmem.read_port(domain="comb")
        m.submodules.done = done = fifo.SyncFIFO(width=(nb - 1).bit_length() or 1, depth=nb)

        full = Signal(nb)
        wbuf = [Signal(name=f"wbuf{s}") for s in range(n)]
        widx = [Signal(range(MAX_DATA_BEATS + 1), name=f"widx{s}") for s in range(n)]

        # ---- write side
        fl = self.i_flit.payload
        s = Signal(range(n))
        m.d.comb += s.eq(fl.src)
        b = Signal(range(nb))        # buffer id = 2 * src + wbuf[src]
        idx = Signal(range(MAX_DATA_BEATS + 1))
        sel_idx = widx[0]
        for i in range(1, n):
            sel_idx = Mux(s == i, widx[i], sel_idx)
        m.d.comb += [b.eq(Cat((Cat(*wbuf) >> s)[0], s)), idx.eq(sel_idx)]
        busy = (full >> b)[0]
        m.d.comb += self.i_flit.ready.eq(~busy & done.w_rdy)
        take = self.i_flit.valid & self.i_flit.ready
        m.d.comb += [hw.addr.eq(b), hw.data.eq(fl.data), hw.en.eq(take & fl.first),
                     dw.addr.eq(Cat(idx[:4], b)), dw.data.eq(fl.data),
                     dw.en.eq(take & ~fl.first),
                     done.w_data.eq(b), done.w_en.eq(take & fl.last)]
        set_full = Signal(nb)
        m.d.comb += set_full.eq(Mux(take & fl.last, Const(1, nb) << b, 0))
        with m.If(take):
            with m.Switch(s):
                for i in range(n):
                    with m.Case(i):
                        with m.If(fl.last):
                            m.d.sync += [widx[i].eq(0), wbuf[i].eq(~wbuf[i])]
                        with m.Elif(~fl.first):
                            m.d.sync += widx[i].eq(widx[i] + 1)

        # ---- read side
        rb = done.r_data
        ridx = Signal(range(MAX_DATA_BEATS))
        hdr = Signal(port_layout())
        m.d.comb += [hr.addr.eq(rb), dr.addr.eq(Cat(ridx, rb))]
        slots = data.View(beat_slots_layout(), hdr.as_value())    # data slot, header slot
        m.d.comb += [slots.data.eq(dr.data), slots.hdr.eq(hr.data)]
        n_data = Signal(5)
        m.d.comb += n_data.eq(data_slots(hdr.opcode, hdr.length))
        last = Mux(n_data == 0, 1, ridx == n_data - 1)
        o = self.o_beat
        out = Signal(port_layout())
        m.d.comb += [out.eq(hdr), out.data.eq(Mux(n_data == 0, 0, dr.data))]
        m.d.comb += [o.valid.eq(done.r_rdy), o.payload.beat.eq(out), o.payload.last.eq(last)]
        clr_full = Signal(nb)
        pop = o.valid & o.ready & last
        m.d.comb += [done.r_en.eq(pop), clr_full.eq(Mux(pop, Const(1, nb) << rb, 0))]
        with m.If(o.valid & o.ready):
            m.d.sync += ridx.eq(Mux(last, 0, ridx + 1))
        m.d.sync += full.eq((full | set_full) & ~clr_full)
        return m


class ResultPacker(wiring.Component):
    """RESULT flits → RESULT messages of up to four 16-byte results (docs/fabric.md).

    Results of one group are collected; a message is formed when four are collected, when
    ``timeout`` cycles have passed since the first one of the collection, or when a result
    of another group arrives. The message (``fusionfabric.formats.chiplet.Opcode.RESULT``, length code 0 =
    four beats, ``src`` = :data:`SWITCH_SRC`) has ``dest`` = group, ``chunk`` = chunk of
    beat 0, ``addr`` bits [0:16], [16:32], [32:48] = chunks of beats 1..3, ``status`` =
    count − 1; beats past the count carry zeros. A formed message moves to an output
    register set while the next one is collected.

    Parameters
    ----------
    timeout : int
        Cycles from the first result of a collection until it is sent with fewer than 4
        (1..255).

    Members
    -------
    i_flit : In(stream.Signature(switch_flit(128)))
        RESULT flits.
    o_beat : Out(stream.Signature(beat_layout()))

    Timing
    ------
    The fourth result accepted in cycle t → first beat on ``o_beat`` in t+2 (hand-over to
    the output set, then the output); a lone result waits ``timeout`` cycles more.
    Sustains 4 results per 4 beats (one per cycle). Reset: empty.
    """

    def __init__(self, timeout: int = 8):
        if not isinstance(timeout, int) or not 1 <= timeout <= 255:
            raise ValueError(f"timeout={timeout!r} must be an integer in 1..255")
        self.timeout = timeout
        super().__init__({
            "i_flit": In(stream.Signature(switch_flit(SLOT_BITS).layout())),
            "o_beat": Out(stream.Signature(beat_layout())),
        })

    def elaborate(self, platform):
        m = Module()
        R = RESULT_BEATS
        # collection set
        cdata = [Signal(SLOT_BITS, name=f"cdata{i}") for i in range(R)]
        cchunk = [Signal(CHUNK_BITS, name=f"cchunk{i}") for i in range(R)]
        cgroup = Signal(8)
        count = Signal(range(R + 1))
        timer = Signal(range(self.timeout + 1))
        # output set
        odata = [Signal(SLOT_BITS, name=f"odata{i}") for i in range(R)]
        ochunk = [Signal(CHUNK_BITS, name=f"ochunk{i}") for i in range(R)]
        ogroup = Signal(8)
        ocount = Signal(range(R + 1))
        ofull = Signal()
        obeat = Signal(range(R))

        fl = self.i_flit.payload
        other_group = (count != 0) & (fl.dest != cgroup)
        flush = (count == R) | ((count != 0) & (timer == self.timeout)) | \
            (self.i_flit.valid & other_group)
        o = self.o_beat
        o_free = ~ofull | (o.ready & (obeat == R - 1))
        move = flush & o_free
        # accept into the collection set when there is room and the group fits (or the
        # set is moving out this cycle and the flit starts the next collection)
        can_take = Mux(move, 1, (count != R) & ~other_group)
        m.d.comb += self.i_flit.ready.eq(can_take)
        take = self.i_flit.valid & can_take
        with m.If(move):
            m.d.sync += [ofull.eq(1), ogroup.eq(cgroup), ocount.eq(count)]
            for i in range(R):
                m.d.sync += [odata[i].eq(cdata[i]), ochunk[i].eq(cchunk[i])]
        with m.Elif(o.valid & o.ready & (obeat == R - 1)):
            m.d.sync += ofull.eq(0)
        base = Mux(move, 0, count)
        with m.If(take):
            for i in range(R):
                with m.If(base == i):
                    m.d.sync += [cdata[i].eq(fl.data), cchunk[i].eq(fl.chunk)]
            m.d.sync += [count.eq(base + 1), cgroup.eq(fl.dest)]
        with m.Elif(move):
            m.d.sync += count.eq(0)
        with m.If(move | (count == 0)):
            m.d.sync += timer.eq(0)
        with m.Elif(timer != self.timeout):
            m.d.sync += timer.eq(timer + 1)

        beat = o.payload.beat
        m.d.comb += [o.valid.eq(ofull), o.payload.last.eq(obeat == R - 1),
                     beat.opcode.eq(Opcode.RESULT), beat.length.eq(0),
                     beat.status.eq(ocount - 1), beat.dest.eq(ogroup),
                     beat.src.eq(SWITCH_SRC), beat.chunk.eq(ochunk[0]),
                     beat.addr.eq(Cat(ochunk[1], ochunk[2], ochunk[3]))]
        bdata = Const(0, SLOT_BITS)
        for i in range(R):
            bdata = Mux((obeat == i) & (i < ocount), odata[i], bdata)
        m.d.comb += beat.data.eq(bdata)
        with m.If(o.valid & o.ready):
            m.d.sync += obeat.eq(Mux(obeat == R - 1, 0, obeat + 1))
        return m


class EgressBridge(wiring.Component):
    """Switch egress flits → switch-side chiplet ``i_req``/``i_rsp`` (docs/fabric.md).

    UNICAST/MULTICAST packets go through :class:`Reassembly`; responses (opcode ≥ 8) leave
    on ``o_rsp``, requests on ``o_req``. RESULT flits go through :class:`ResultPacker`,
    whose RESULT messages share ``o_req`` with the reassembled requests (message
    granularity, alternating when both wait at a message boundary). Flits of other
    kinds (REDUCE never reaches an output) are dropped and counted in ``o_drops``.

    Parameters
    ----------
    n_ports : int
        Switch ports (sources to reassemble).
    result_timeout : int
        :class:`ResultPacker` ``timeout``.

    Members
    -------
    i_flit : In(stream.Signature(switch_flit(128)))
    o_req, o_rsp : Out(stream.Signature(PORT_BEAT))
    o_drops : Out(16)

    Timing
    ------
    A unicast packet's last flit accepted in t → first beat in t+2 (store and forward, see
    :class:`Reassembly`); results as :class:`ResultPacker`. A beat offered on ``o_req`` or
    ``o_rsp`` stays until it is taken. Reset: empty.
    """

    def __init__(self, n_ports: int, result_timeout: int = 8):
        self.n_ports = n_ports
        self.result_timeout = result_timeout
        super().__init__({
            "i_flit": In(stream.Signature(switch_flit(SLOT_BITS).layout())),
            "o_req": Out(stream.Signature(port_layout())),
            "o_rsp": Out(stream.Signature(port_layout())),
            "o_drops": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.reasm = ra = Reassembly(self.n_ports)
        m.submodules.packer = pk = ResultPacker(self.result_timeout)
        fl = self.i_flit
        is_res = fl.payload.kind == Kind.RESULT
        is_pkt = (fl.payload.kind == Kind.UNICAST) | (fl.payload.kind == Kind.MULTICAST)
        m.d.comb += [ra.i_flit.payload.eq(fl.payload), pk.i_flit.payload.eq(fl.payload),
                     ra.i_flit.valid.eq(fl.valid & is_pkt),
                     pk.i_flit.valid.eq(fl.valid & is_res),
                     fl.ready.eq(Mux(is_res, pk.i_flit.ready,
                                     Mux(is_pkt, ra.i_flit.ready, 1)))]
        with m.If(fl.valid & ~is_res & ~is_pkt & (self.o_drops != 0xFFFF)):
            m.d.sync += self.o_drops.eq(self.o_drops + 1)

        rb = ra.o_beat
        to_rsp = rb.payload.beat.opcode >= Opcode.READ_CPL
        # o_req: reassembled requests and RESULT messages, locked per message
        owner = Signal(2)            # 0 none, 1 reassembly, 2 packer
        pick_pk = Signal()
        last_pk = Signal()           # the previous message on o_req was a RESULT
        rb_req = rb.valid & ~to_rsp
        m.d.comb += pick_pk.eq(Mux(owner == 0, pk.o_beat.valid & ~(rb_req & last_pk),
                                   owner == 2))
        req = self.o_req
        m.d.comb += [req.valid.eq(Mux(pick_pk, pk.o_beat.valid, rb.valid & ~to_rsp)),
                     req.payload.eq(Mux(pick_pk, pk.o_beat.payload.beat, rb.payload.beat)),
                     pk.o_beat.ready.eq(pick_pk & req.ready)]
        m.d.comb += [self.o_rsp.valid.eq(rb.valid & to_rsp),
                     self.o_rsp.payload.eq(rb.payload.beat),
                     rb.ready.eq(Mux(to_rsp, self.o_rsp.ready, ~pick_pk & req.ready))]
        with m.If(req.valid & req.ready):
            last = Mux(pick_pk, pk.o_beat.payload.last, rb.payload.last)
            m.d.sync += owner.eq(Mux(last, 0, Mux(pick_pk, 2, 1)))
            with m.If(last):
                m.d.sync += last_pk.eq(pick_pk)
        with m.Elif(req.valid):
            # a beat offered and not taken stays until it is taken (stream rule): the
            # chiplet's packer stores a message's header slot before it takes the beat,
            # so a swap here would put the other message's data under that header
            m.d.sync += owner.eq(Mux(pick_pk, 2, 1))
        return m
