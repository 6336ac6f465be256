"""Transaction layer, receive side: a VC's TL-flit slots → accelerator beats."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import CREDIT_BITS, SLOT_BITS, TL_HEADER, Opcode
from .common import beat_slots_layout, data_slots, port_layout

__all__ = ["TransactionRx", "WHOLE_MIN_CREDITS"]

#: The smallest ``rx_credits`` with which a receiver may wait for whole messages: a message
#: of 17 slots spans up to 5 TL flits, and the sender must hold credits for the rest while
#: the first ones wait in the buffer.
WHOLE_MIN_CREDITS = 5


class TransactionRx(wiring.Component):
    """Parses the slot stream of one virtual channel back into messages.

    Slots come from the VC's receive buffer four per TL flit. A header slot with opcode NULL
    skips the rest of its TL flit; otherwise the header is held and repeated on each of its
    ``length / 16`` data beats (one beat for a message without data).

    With ``whole`` (the switch side of a fabric link) a message's header is taken only once
    all its slots are in the receive buffer (``i_avail``, slots committed there, at least
    ``1 + length / 16``), so a message is delivered as one burst and a link that fails in
    the middle of a message never leaves ``o_beat`` inside it (the switch's ingress would
    hold its output for good). The buffer must hold a whole message with room for the
    sender to finish it: ``rx_credits >= 5`` (:data:`WHOLE_MIN_CREDITS`).

    Members
    -------
    i_slot : In(stream.Signature(128))
        Slots of committed TL flits, in order (from the receive FIFO).
    o_beat : Out(stream.Signature(sim.chiplet.PORT_BEAT))
        Delivered messages, header fields on every beat.
    o_freed : Out(12)
        Cumulative count of TL flits consumed (mod 4096): the credits to return.
    i_avail : In(16)
        With ``whole``: slots in the receive buffer, the one on ``i_slot`` included.
    i_drain, i_clear, o_clean : In(1), In(1), Out(1)
        Link reset (docs/protocol.md, "Peer reset and link reset"): while ``i_drain`` the
        message in progress is finished (without ``whole``, with zero beats where its tail
        never came) and every later slot is discarded; ``o_clean``: at a message boundary
        with no slot waiting; ``i_clear`` restarts the parse state and ``o_freed``.

    Timing
    ------
    One slot per cycle; a data-carrying message's header slot takes a cycle without an
    output beat. Combinational from ``i_slot`` to ``o_beat`` (no register): latency 0
    cycles beyond the FIFO. Reset clears the parse state and ``o_freed``.
    """

    def __init__(self, whole: bool = False):
        if not isinstance(whole, bool):
            raise TypeError(f"whole={whole!r} must be a bool")
        self.whole = whole
        super().__init__({
            "i_slot": In(stream.Signature(SLOT_BITS)),
            "o_beat": Out(stream.Signature(port_layout())),
            "o_freed": Out(CREDIT_BITS),
            "i_avail": In(16),
            "i_drain": In(1),
            "i_clear": In(1),
            "o_clean": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k = Signal(2)            # slot position inside the TL flit
        rem = Signal(5)          # data slots left in the current message
        skip = Signal()          # padding until the end of this TL flit
        hdr = Signal(TL_HEADER.layout())
        freed = Signal(CREDIT_BITS)
        m.d.comb += self.o_freed.eq(freed)
        slot = self.i_slot.payload
        head = data.View(TL_HEADER.layout(), slot)        # the slot read as a header
        out = data.View(beat_slots_layout(), self.o_beat.payload.as_value())
        nds = Signal(5)
        m.d.comb += nds.eq(data_slots(head.opcode, head.length))
        pop = Signal()
        emit = Signal()     # this slot makes an output beat (X-safe: gated by valid)
        # link reset (docs/protocol.md, "Peer reset and link reset"): with ``i_drain`` the
        # message in progress is finished and every slot after it is discarded; without
        # ``whole`` a message whose tail never came is finished with zero beats (``cut``)
        cut = Signal()
        if not self.whole:
            m.d.comb += cut.eq(self.i_drain & ~self.i_slot.valid & (rem != 0))
        m.d.comb += [self.o_beat.valid.eq((self.i_slot.valid | cut) & emit),
                     self.o_clean.eq((rem == 0) & ~self.i_slot.valid)]
        with m.If(self.i_drain & (rem == 0)):
            m.d.comb += [self.i_slot.ready.eq(1), pop.eq(self.i_slot.valid)]
        with m.Elif(skip):
            m.d.comb += [self.i_slot.ready.eq(1), pop.eq(self.i_slot.valid)]
            with m.If(pop & (k == 3)):
                m.d.sync += skip.eq(0)
        with m.Elif(rem != 0):
            m.d.comb += [emit.eq(1),
                         out.data.eq(Mux(cut, 0, slot)), out.hdr.eq(hdr),
                         self.i_slot.ready.eq(self.o_beat.ready),
                         pop.eq(self.i_slot.valid & self.o_beat.ready)]
            with m.If(pop | (cut & self.o_beat.ready)):
                m.d.sync += rem.eq(rem - 1)
        with m.Elif(head.opcode == Opcode.NULL):
            m.d.comb += [self.i_slot.ready.eq(1), pop.eq(self.i_slot.valid)]
            with m.If(pop & (k != 3)):
                m.d.sync += skip.eq(1)
        with m.Elif(nds == 0):
            m.d.comb += [emit.eq(1),
                         out.data.eq(0), out.hdr.eq(head),
                         self.i_slot.ready.eq(self.o_beat.ready),
                         pop.eq(self.i_slot.valid & self.o_beat.ready)]
        with m.Else():
            ready = (self.i_avail > nds) if self.whole else 1
            m.d.comb += [self.i_slot.ready.eq(ready), pop.eq(self.i_slot.valid & ready)]
            with m.If(pop):
                m.d.sync += [hdr.eq(slot), rem.eq(nds)]
        with m.If(pop):
            m.d.sync += k.eq(k + 1)
            with m.If(k == 3):
                m.d.sync += freed.eq(freed + 1)
        with m.If(self.i_clear):
            m.d.sync += [k.eq(0), rem.eq(0), skip.eq(0), freed.eq(0)]
        return m
