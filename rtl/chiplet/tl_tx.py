"""Transaction layer, transmit side: accelerator beats → 64-byte TL flits on two VCs."""

from __future__ import annotations

from amaranth import Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import SLOT_BITS, SRC_BITS, TL_HEADER
from fusionfabric.formats.chiplet import TAG_BITS, Opcode
from .common import (beat_slots_layout, data_slots, nonposted, port_layout, sat_inc,
                     tl_layout, tl_slots_layout, valid_opcode)

__all__ = ["TransactionTx", "FLIT_FIFO_DEPTH"]

#: TL flits buffered per VC between the packer and the DL. A message's header is taken only
#: when every flit the message completes fits ((slots in the open flit + 1 + data slots)
#: // 4, at most 5 for 17 slots), so a started message never waits for the link.
FLIT_FIFO_DEPTH = 8


class TransactionTx(wiring.Component):
    """Packs requests (VC 0) and responses (VC 1) into TL flits and arbitrates by credit.

    Each port's messages become a header slot (the port's header fields with ``src`` set to
    ``i_node_id``) and ``length / 16`` data slots, packed back to back into 64-byte TL flits
    of that port's VC (docs/protocol.md, "Transaction layer"). When a message ends inside a
    TL flit and no next beat is waiting, the flit is closed with zero (NULL) slots. Each VC
    has its own packer and a FIFO of :data:`FLIT_FIFO_DEPTH` TL flits, so a stalled request
    stream never holds up responses. A message's header beat is taken only when the FIFO
    has room for every TL flit the message completes, so once started a message is taken
    to its last beat without waiting for the link: the port always comes back to a message
    boundary, where a failed link refuses. The arbiter hands the DL a TL flit of a VC only
    while ``i_credit_ok`` allows it, alternating between the VCs when both are eligible, and
    holds its choice until the flit is taken.

    **Refusing.** While ``i_refuse`` is high (the data link is FAILED and not yet ACTIVE
    again), every request that starts on ``i_req`` is taken and dropped whole: a posted one
    (MULTICAST, REDUCE, RESULT) is counted in ``o_failed_multicast``/``_reduce``/``_result``,
    a non-posted one is reported on ``o_issue`` with ``refused`` set (the completion tracker
    answers it with an ERROR completion). A message already started is packed to its end
    (its flits have room). Responses (``i_rsp``) are refused the same way only without
    ``stamp_src`` (the switch side of a fabric link, whose egress must keep draining the
    switch), counted in ``o_failed_cpl``; an endpoint's responses wait for the link.

    **Link reset** (``i_clear``, docs/protocol.md "Peer reset and link reset"): the open TL
    flits and both flit FIFOs are discarded (their TL flits counted in ``o_discarded``); a
    message whose beats are still coming on a port is dropped to its end. An endpoint
    (``stamp_src``) keeps the tags of non-posted requests delivered on ``o_req`` and not
    yet answered (``i_owed_set``/``i_owed_tag``, cleared by the response's header on
    ``i_rsp``); a link reset makes them stale: their responses are dropped whole
    (``o_stale_rsp``) and ``o_hold`` (the stale bit of ``i_hold_tag``) holds a new request
    with such a tag on ``o_req``.

    Parameters
    ----------
    stamp_src : bool
        True (an endpoint): ``src`` is overwritten with ``i_node_id``. False (the switch
        side of a fabric link, which forwards other nodes' messages): ``src`` passes through.

    Members
    -------
    i_req, i_rsp : In(stream.Signature(sim.chiplet.PORT_BEAT))
        Accelerator beats. A beat whose opcode is not valid on its port (requests: WRITE,
        READ, ATOMIC_ADD, MULTICAST, REDUCE, RESULT; responses: READ_CPL, WRITE_ACK, ATOMIC_ACK)
        at a message start is dropped and counted in ``o_bad_op``.
    i_node_id : In(8)
        This chiplet's node id, stamped into ``src``.
    i_credit_ok : In(2)
        Bit ``v``: the DL has a credit for one more TL flit on VC ``v``.
    o_tl : Out(stream.Signature(TL_FLIT))
        TL flits (512 bits of data, ``vc``).
    o_bad_op : Out(8)
        Dropped beats (saturating).
    i_refuse : In(1)
        Refuse new requests (see above).
    o_issue : Out(1), o_issue_tag : Out(8), o_issue_op : Out(4), o_issue_len : Out(2),
    o_issue_refused : Out(1)
        Pulse when a non-posted request (WRITE, READ, ATOMIC_ADD) is taken on ``i_req``
        (its header beat accepted), with its tag, opcode and length code; ``refused``: it
        was dropped.
    o_failed_multicast, o_failed_reduce, o_failed_result : Out(16)
        Posted requests refused (saturating).
    o_failed_cpl : Out(16)
        Responses refused (saturating; without ``stamp_src`` only).

    Timing
    ------
    Accepts one beat per cycle per port, except one extra cycle per data-carrying message
    for its header slot. A TL flit reaches ``o_tl`` 2 cycles after the beat that completes
    it (packer register, FIFO). Reset empties the packers and FIFOs.
    """

    def __init__(self, stamp_src: bool = True):
        self.stamp_src = stamp_src
        super().__init__({
            "i_req": In(stream.Signature(port_layout())),
            "i_rsp": In(stream.Signature(port_layout())),
            "i_node_id": In(SRC_BITS),
            "i_credit_ok": In(2),
            "o_tl": Out(stream.Signature(tl_layout())),
            "o_bad_op": Out(8),
            "i_refuse": In(1),
            "o_issue": Out(1),
            "o_issue_tag": Out(TAG_BITS),
            "o_issue_op": Out(4),
            "o_issue_len": Out(2),
            "o_issue_refused": Out(1),
            "o_failed_multicast": Out(16),
            "o_failed_reduce": Out(16),
            "o_failed_result": Out(16),
            "o_failed_cpl": Out(16),
            "i_clear": In(1),
            "o_discarded": Out(16),
            "i_owed_set": In(1),
            "i_owed_tag": In(TAG_BITS),
            "i_hold_tag": In(TAG_BITS),
            "o_hold": Out(1),
            "o_stale_rsp": Out(16),
        })

    def _packer(self, m, vc, port, bad, drop, can_refuse):
        q = fifo.SyncFIFOBuffered(width=4 * SLOT_BITS, depth=FLIT_FIFO_DEPTH)
        # a link reset empties the FIFO (its TL flits are counted as discarded)
        m.submodules[f"flits{vc}"] = ResetInserter(self.i_clear)(q)
        slots = [Signal(SLOT_BITS, name=f"p{vc}_slot{i}") for i in range(3)]
        pos = Signal(2, name=f"p{vc}_pos")
        rem = Signal(5, name=f"p{vc}_rem")       # data slots left in the current message
        beat = port.payload
        # the header slot: the beat's header fields, src = node id when stamping
        hdr = Signal(TL_HEADER.layout(), name=f"p{vc}_hdr")
        m.d.comb += hdr.eq(data.View(beat_slots_layout(), beat.as_value()).hdr)
        if self.stamp_src:
            m.d.comb += hdr.src.eq(self.i_node_id)
        nds = Signal(5, name=f"p{vc}_nds")
        m.d.comb += nds.eq(data_slots(beat.opcode, beat.length))
        ok_op = valid_opcode(beat.opcode, vc)
        refusing = Signal(name=f"p{vc}_refusing")
        m.d.comb += refusing.eq((drop != 0) | (port.valid & self.i_refuse & can_refuse))
        # endpoint responses to requests delivered before a link reset (``stale``)
        stale_hit = Signal(name=f"p{vc}_stale_hit")
        if vc == 1 and self.stamp_src:
            m.d.comb += stale_hit.eq(port.valid & self._stale.bit_select(beat.tag, 1))
        # room for every TL flit the message completes, reserved before its header is
        # taken: once started, a message is packed to its end without waiting for the link
        need = Signal(range(FLIT_FIFO_DEPTH + 1), name=f"p{vc}_need")
        room = Signal(name=f"p{vc}_room")
        m.d.comb += [need.eq((pos + 1 + nds) >> 2),
                     room.eq(q.level + need <= FLIT_FIFO_DEPTH)]

        wr = Signal(name=f"p{vc}_wr")
        word = Signal(SLOT_BITS, name=f"p{vc}_word")
        can = Signal(name=f"p{vc}_can")
        m.d.comb += can.eq((pos != 3) | q.w_rdy)
        padding = Signal(name=f"p{vc}_padding")   # NULL until the end of this TL flit
        # the slot written when ``wr``: a data beat, the header, or NULL (padding, closing).
        # Chosen by registers and ``port.valid`` only: where the priority chain below
        # refuses, drops or skips a beat nothing is written, so the opcode check, the
        # refusal and the stale-tag lookup stay off the slot's data path.
        m.d.comb += word.eq(Mux(rem != 0, beat.data,
                                Mux(~padding & port.valid, hdr.as_value(), 0)))
        go = Signal(name=f"p{vc}_go")             # a message header is taken
        with m.If(rem != 0):
            # data slot of the current message
            m.d.comb += [wr.eq(port.valid & can), port.ready.eq(can)]
            with m.If(port.valid & can):
                m.d.sync += rem.eq(rem - 1)
        with m.Elif(port.valid & ~ok_op):
            m.d.comb += port.ready.eq(1)
            sat_inc(m, bad, 1)
        with m.Elif(refusing):
            # a message dropped whole while i_refuse: its first beat here, the rest
            # counted down in ``drop`` (requests; responses too without ``stamp_src``;
            # and the tail of a message cut by a link reset).
            # Before the padding: a flit that cannot be closed (its FIFO full while the
            # link is failed) must not hold the port
            self._refuse(m, port, beat, nds, drop, vc)
        with m.Elif(stale_hit):
            # dropped whole; the request it answers was delivered before a link reset
            m.d.comb += port.ready.eq(1)
            m.d.sync += drop.eq(Mux(nds == 0, 0, nds - 1))
            sat_inc(m, self._stale_cnt, 1)
        with m.Elif(padding):
            m.d.comb += wr.eq(can)
            with m.If(can & (pos == 3)):
                m.d.sync += padding.eq(0)
        with m.Elif(port.valid):
            # header slot, once the message's flits have room; a message without data is
            # consumed with it
            m.d.comb += [go.eq(can & room), wr.eq(go),
                         port.ready.eq(go & (nds == 0))]
            with m.If(go):
                m.d.sync += rem.eq(nds)
            if vc == 0:
                m.d.comb += self.o_issue.eq(go & nonposted(beat.opcode))
        with m.Elif(pos != 0):
            # message boundary inside a flit and nothing waiting: close with NULL slots
            m.d.comb += wr.eq(can)
            with m.If(can & (pos != 3)):
                m.d.sync += padding.eq(1)
        with m.If(wr):
            m.d.sync += pos.eq(pos + 1)
            for i in range(3):
                with m.If(pos == i):
                    m.d.sync += slots[i].eq(word)
        flit = Signal(tl_slots_layout(), name=f"p{vc}_flit")     # slots 0..2 held, 3 = word
        m.d.comb += [*(flit[i].eq(slots[i]) for i in range(3)), flit[3].eq(word)]
        m.d.comb += [q.w_data.eq(flit), q.w_en.eq(wr & (pos == 3))]
        if vc == 1 and self.stamp_src:
            # plain expressions (continuous assignments): Icarus would leave a process
            # whose inputs keep their time-0 values at X, and X would stick in the vectors
            at_start = (rem == 0) & ok_op & ~refusing
            m.d.comb += [
                self._stale_clr.eq(Mux(at_start & stale_hit, 1 << beat.tag, 0)),
                self._owed_clr.eq(Mux(at_start & ~stale_hit & ~padding & port.valid & can
                                      & room, 1 << beat.tag, 0))]
        # link reset: the open TL flit and the FIFO are discarded; a message whose beats
        # are still coming on the port is dropped to its end (``drop``), so packing
        # resumes at a message boundary
        with m.If(self.i_clear):
            m.d.sync += [pos.eq(0), padding.eq(0)]
            with m.If(rem != 0):
                m.d.sync += [rem.eq(0), drop.eq(rem - (port.valid & port.ready))]
            with m.Elif(go):
                m.d.sync += [rem.eq(0), drop.eq(nds)]
        self._flushed.append(q.level + (pos != 0))
        return q

    def _refuse(self, m, port, beat, nds, drop, vc):
        m.d.comb += port.ready.eq(1)
        with m.If(port.valid):
            with m.If(drop != 0):
                m.d.sync += drop.eq(drop - 1)
            with m.Else():
                m.d.sync += drop.eq(Mux(nds == 0, 0, nds - 1))
                if vc == 0:
                    m.d.comb += [self.o_issue.eq(nonposted(beat.opcode)),
                                 self.o_issue_refused.eq(1)]
                    for name, op in (("multicast", Opcode.MULTICAST),
                                     ("reduce", Opcode.REDUCE), ("result", Opcode.RESULT)):
                        sat_inc(m, self._failed[name], beat.opcode == op)
                else:
                    sat_inc(m, self._failed["cpl"], 1)

    def elaborate(self, platform):
        m = Module()
        self._failed = {n: Signal(16, name=f"failed_{n}") for n in ("multicast", "reduce",
                                                                    "result", "cpl")}
        self._flushed = []
        # Endpoint (``stamp_src``) completer side: ``owed`` tags of non-posted requests
        # delivered on ``o_req`` and not yet answered on ``i_rsp``; a link reset turns them
        # ``stale``: their responses are dropped, and a new request with a stale tag is
        # held on ``o_req`` (``o_hold``) until that response has come and gone
        ntag = 1 << TAG_BITS
        owed, stale = Signal(ntag), Signal(ntag)
        self._stale = stale
        self._owed_clr, self._stale_clr = Signal(ntag), Signal(ntag)
        self._stale_cnt = Signal(16)
        m.d.comb += self.o_stale_rsp.eq(self._stale_cnt)
        for n, sig in self._failed.items():
            m.d.comb += getattr(self, f"o_failed_{n}").eq(sig)
        beat = self.i_req.payload
        m.d.comb += [self.o_issue_tag.eq(beat.tag), self.o_issue_op.eq(beat.opcode),
                     self.o_issue_len.eq(beat.length)]
        drop = Signal(5)          # data beats left of a refused request
        bad = Signal(8)
        m.d.comb += self.o_bad_op.eq(bad)
        bad0, bad1 = Signal(8), Signal(8)
        q0 = self._packer(m, 0, self.i_req, bad0, drop, True)
        # the switch side refuses responses too: the switch's egress must keep draining
        drop1 = Signal(5)         # data beats left of a dropped response
        q1 = self._packer(m, 1, self.i_rsp, bad1, drop1, not self.stamp_src)
        m.d.comb += bad.eq(Mux(bad0 + bad1 > 255, 255, bad0 + bad1))

        if self.stamp_src:
            owed_set = Signal(ntag)
            m.d.comb += owed_set.eq(Mux(self.i_owed_set, 1 << self.i_owed_tag, 0))
            with m.If(self.i_clear):
                m.d.sync += [owed.eq(owed_set),
                             stale.eq((stale & ~self._stale_clr) | (owed & ~self._owed_clr))]
            with m.Else():
                m.d.sync += [owed.eq((owed & ~self._owed_clr) | owed_set),
                             stale.eq(stale & ~self._stale_clr)]
            m.d.comb += self.o_hold.eq(stale.bit_select(self.i_hold_tag, 1))
        discarded = Signal(16)
        m.d.comb += self.o_discarded.eq(discarded)
        with m.If(self.i_clear):
            add = discarded + self._flushed[0] + self._flushed[1]
            m.d.sync += discarded.eq(Mux(add > 0xFFFF, 0xFFFF, add))

        # Arbiter: lock a choice until the TL flit is taken; alternate when both eligible.
        locked = Signal()
        sel = Signal()
        last = Signal()
        elig0 = q0.r_rdy & self.i_credit_ok[0]
        elig1 = q1.r_rdy & self.i_credit_ok[1]
        choice = Signal()
        m.d.comb += choice.eq(Mux(elig0 & elig1, ~last, elig1))
        cur = Mux(locked, sel, choice)
        valid = Mux(locked, 1, elig0 | elig1)
        m.d.comb += [
            self.o_tl.valid.eq(valid),
            self.o_tl.payload.data.eq(Mux(cur, q1.r_data, q0.r_data)),
            self.o_tl.payload.vc.eq(cur),
            q0.r_en.eq(valid & self.o_tl.ready & (cur == 0)),
            q1.r_en.eq(valid & self.o_tl.ready & (cur == 1)),
        ]
        with m.If(valid & self.o_tl.ready):
            m.d.sync += [locked.eq(0), last.eq(cur)]
        with m.Elif(valid):
            m.d.sync += [locked.eq(1), sel.eq(cur)]
        with m.If(self.i_clear):
            m.d.sync += locked.eq(0)
        return m
