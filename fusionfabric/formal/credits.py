"""Chiplet credit loop: :class:`~fusionfabric.rtl.chiplet.DataLinkTx` credit counters and the
peer's :class:`~fusionfabric.rtl.chiplet.TransactionRx` consumption count, per VC.

Configuration (small): ``tl_per_dl`` 1, ``replay_depth`` 2, ``rx_credits`` :data:`RX_CREDITS`,
``close_timeout`` 1, ``replay_timeout`` 4, ``link_timeout`` 8, ``retrain_holdoff`` 2; the
credit counters keep their real width (12 bits, mod 4096).

The design under test is the sender's ``DataLinkTx`` (its ``sent<v>``, ``freed_rx<v>``,
``limit<v>`` registers) and, on the far side, one ``TransactionRx`` per VC whose
``o_freed`` is the cumulative count the peer returns. Between them the harness models the
link abstractly, per VC:

* ``in_flight``: TL flits the DL TX has taken (``i_tl`` handshake with ``vc == v``) and not
  yet delivered; the harness delivers one at any step it likes (``AnySeq``), so any
  delay, including a link that is down for a long time, is covered;
* the peer's receive FIFO as a slot count (+4 per delivered TL flit), read by the
  ``TransactionRx`` with free slot contents and a free ``o_beat.ready``; ``held``: TL flits
  delivered and not yet consumed (a TL flit is consumed with its fourth slot);
* credit returns: a good received flit (``i_rx_good``, free) carries in ``credit<v>`` any
  value between the last one the peer sent and the peer's current count (the peer's
  returns are cumulative and in order, so never older than the last); a bring-up flit
  (``init``) carries the buffer size :data:`RX_CREDITS`. Every other input (link up, acks,
  NAKs, sequence numbers, ``fresh``, ``init_seen``, ``i_lr_ready``) is free.

Peer reset and link reset (docs/protocol.md, "Peer reset and link reset"). A free event
``peer_rst`` is the peer's reset or its own link reset, at any step: the peer's
``TransactionRx`` is cleared (``i_clear``; its ``i_drain`` is free in every step) and so
is its receive FIFO; the TL flits it held are ``lost``. If the sender has ``peer_active``
(it may have sent data to the peer's old life), its life is ``doom``ed: from then on none
of its TL flits is delivered (those in flight, and those it still takes, are discarded by
its link reset: the peer, fresh, commits no data before the sender's fresh bring-up
flits), the peer's count in the sender's life is frozen at the value it had
(``peer_freed_old``), and received credit returns lie between the last one and that value
(the old peer life's flits; the new one sends bring-up flits only until the sender's link
reset). The sender detects a peer reset (a good fresh bring-up flit while ``peer_active``,
the RTL's ``peer_reset``) only in a doomed life: the peer's fresh flits of the life that
made it ``peer_active`` came before that flit (the link is in order). The sender's
``o_link_reset`` pulse starts a new life: the harness's ghost counts (in flight, held,
lost, last return) restart at 0 with the DL's counters, and the link being in order, no
credit return of an older peer life arrives after it. A TL flit is delivered only while
the sender has ``peer_active`` (data flits go out only then) and its life is not doomed.
A peer reset while the sender has no ``peer_active`` changes nothing here: nothing of the
sender's life has been delivered (asserted), its TL flits wait in the replay buffer for
the new peer life.

Assumption on the sender's TL layer: it offers a TL flit of VC ``v`` only while
``o_credit_ok[v]`` (what ``TransactionTx``'s arbiter does).

Properties (every step, per VC, within each life of the sender; ``-`` is mod 4096,
``peer_freed`` is the peer's count (frozen in a doomed life), ``owed = peer_freed -
freed_rx`` are credits consumed by the peer that the sender has not yet seen, ``free =
limit - (sent - freed_rx)``):

1. conservation: ``sent == peer_freed + held + in_flight + lost`` (``lost`` is 0 but in a
   doomed life);
2. ``freed_rx <= last returned <= peer_freed`` (cyclically): the sender never counts a
   credit the peer has not returned;
3. ``limit`` is 0 before bring-up and :data:`RX_CREDITS` after; a TL flit is taken only
   after bring-up (``limit_known``) of the life;
4. after bring-up, ``held + in_flight + lost + owed + free == RX_CREDITS``, with ``free >=
   0``;
5. no overflow: ``held + in_flight + lost <= RX_CREDITS`` (the peer's FIFO, ``4 *
   rx_credits`` slots, never overflows), and the harness's slot count agrees with the
   TransactionRx's position inside its TL flit;
6. the life after a link reset starts at zero: in the step after ``o_link_reset``,
   ``sent``, ``freed_rx``, ``limit``, ``limit_known`` and ``peer_active`` are 0;
7. the lives themselves: a link reset is under way (``lr_pend``) only in a doomed life, a
   doomed life has ``peer_active``, the peer is empty in it, and nothing is delivered or
   returned before ``peer_active``.

Covers: each VC's buffer full (``held == RX_CREDITS``), a TL flit delivered after the
sender had no credit left, TL flits lost by a peer reset, the peer reset detected, FAILED
with a link reset under way, the link-reset pulse, ACTIVE again with a credit after it,
and a TL flit delivered after it.

Planted bugs: ``double-return``: the peer's ``TransactionRx`` adds 2 to its returned count
per consumed TL flit of VC 0 (a credit returned twice); ``dl-double``: the sender's
``DataLinkTx`` applies each credit return of VC 0 twice; ``lr-sent``, ``lr-limit``: the
link reset leaves ``sent0`` or ``limit0`` as they are (statements after the RTL's own).
"""

from __future__ import annotations

from amaranth.hdl import (Assert, Assume, Cat, Cover, Elaboratable, Module, Mux,
                          ResetSignal, Signal)
from amaranth.asserts import AnySeq

from fusionfabric.formats.chiplet import CREDIT_BITS, ChipletParams
from fusionfabric.rtl.chiplet import DataLinkTx, TransactionRx
from fusionfabric.rtl.chiplet.common import LINK_ACTIVE, LINK_FAILED
from .flow import Harness, driven_signals, register

RX_CREDITS = 3

PLANTED = {
    "double-return": "the peer's TransactionRx returns two credits per consumed VC 0 TL flit",
    "dl-double": "DataLinkTx applies each VC 0 credit return twice",
    "lr-sent": "the link reset leaves sent0 (the old life's TL flits taken on VC 0)",
    "lr-limit": "the link reset leaves limit0 (the old life's advertised VC 0 buffer size)",
}


def _mod(x):
    return x[:CREDIT_BITS]


class CreditHarness(Elaboratable):
    def __init__(self, planted: str | None = None, rx_credits: int = RX_CREDITS):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        self.planted = planted
        self.R = rx_credits
        self.params = ChipletParams(tl_per_dl=1, replay_depth=2, rx_credits=rx_credits,
                                    close_timeout=1, replay_timeout=4, link_timeout=8,
                                    retrain_holdoff=2)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        R = self.R
        tx = DataLinkTx(self.params)
        txm = tx.elaborate(platform)
        tx._MustUse__used = True
        ts = driven_signals(txm)
        sent = [ts[f"sent{v}"] for v in range(2)]
        freed_rx = [ts[f"freed_rx{v}"] for v in range(2)]
        limit = [ts[f"limit{v}"] for v in range(2)]
        limit_known = ts["limit_known"]
        peer_active = ts["peer_active"]
        lr_pend = ts["lr_pend"]
        link_reset = tx.o_link_reset
        if self.planted == "dl-double":
            # after the RTL's own update (last assignment wins): apply the return twice
            cred = tx.i_rx_hdr.credit0
            d_c = _mod(cred - freed_rx[0])
            d_o = _mod(sent[0] - freed_rx[0])
            state = tx.o_state
            good = tx.i_rx_good & (state != 0) & (state != 3)
            with txm.If(good & ~tx.i_rx_hdr.init & (d_c <= d_o)):
                txm.d.sync += freed_rx[0].eq(_mod(cred + d_c))
        if self.planted == "lr-sent":
            # after the RTL's link reset (last assignment wins): sent0 keeps its count
            with txm.If(link_reset):
                txm.d.sync += sent[0].eq(sent[0])
        if self.planted == "lr-limit":
            with txm.If(link_reset):
                txm.d.sync += limit[0].eq(limit[0])
        m.submodules.tx = txm

        # the peer's reset (or its own link reset): its receive side is cleared at once
        prst = Signal(name="peer_rst")
        m.d.comb += prst.eq(AnySeq(1))
        rxs = []
        for v in range(2):
            rx = TransactionRx()
            rm = rx.elaborate(platform)
            rx._MustUse__used = True
            if self.planted == "double-return" and v == 0:
                rs = driven_signals(rm)
                with rm.If(rs["pop"] & (rs["k"] == 3)):
                    rm.d.sync += rs["freed"].eq(rs["freed"] + 2)
            m.submodules[f"rx{v}"] = rm
            m.d.comb += [rx.i_clear.eq(prst), rx.i_drain.eq(AnySeq(1))]
            rxs.append((rx, driven_signals(rm)))

        # free inputs of the sender
        hdr = tx.i_rx_hdr
        m.d.comb += [
            tx.i_tl.valid.eq(AnySeq(1)),
            tx.i_tl.payload.eq(AnySeq(len(tx.i_tl.payload.as_value()))),
            tx.o_phy.ready.eq(AnySeq(1)),
            tx.i_link_up.eq(AnySeq(1)),
            tx.i_rx_good.eq(AnySeq(1)),
            hdr.eq(AnySeq(len(hdr.as_value()))),
            tx.i_rx_expected.eq(AnySeq(len(tx.i_rx_expected))),
            tx.i_rx_nak.eq(AnySeq(1)),
            tx.i_freed0.eq(AnySeq(CREDIT_BITS)),
            tx.i_freed1.eq(AnySeq(CREDIT_BITS)),
            tx.i_lr_ready.eq(AnySeq(1)),
        ]
        # Lives. ``doom``: the peer was reset while the sender had ``peer_active`` (it may
        # have sent the peer data of this life): every TL flit of the sender's life is lost
        # (consumed in the old peer life, or gone), none is delivered any more, and the
        # life ends with the sender's link reset. The sender detects a peer reset (a fresh
        # bring-up flit while ``peer_active``) only after one (the peer's fresh flits of
        # the life that made it ``peer_active`` all came before that flit: in order).
        doom = Signal(name="doom")
        after_lr = Signal(name="after_link_reset")     # a link reset happened (covers)
        lr_q = Signal(name="link_reset_q")             # the pulse was in the last step
        m.d.sync += lr_q.eq(link_reset)
        with m.If(link_reset):
            m.d.sync += [doom.eq(0), after_lr.eq(1)]
        with m.Elif(prst & peer_active):
            m.d.sync += doom.eq(1)
        m.d.comb += Assume(~ts["peer_reset"] | doom)
        vc = tx.i_tl.payload.vc
        # the TL layer offers a flit only with a credit of its VC
        m.d.comb += Assume(~tx.i_tl.valid | tx.o_credit_ok.bit_select(vc, 1))
        took = tx.i_tl.valid & tx.i_tl.ready

        m.d.comb += [
            Assert(~lr_pend | doom, "link_reset_only_after_peer_reset"),
            Assert(~doom | peer_active, "doomed_life_had_peer_active"),
            # the life after a link reset starts at zero: no credit of the old life
            Assert(~lr_q | ((Cat(*sent, *freed_rx, *limit) == 0) & ~limit_known
                            & ~peer_active), "life_starts_at_zero"),
        ]

        full = []
        starved = []
        new_life = []
        lost_any = []
        for v in range(2):
            rx, rs = rxs[v]
            cred = hdr.credit0 if v == 0 else hdr.credit1
            in_flight = Signal(range(4 * R + 8), name=f"in_flight{v}")
            held = Signal(range(4 * R + 8), name=f"held{v}")
            lost = Signal(range(4 * R + 8), name=f"lost{v}")
            slots = Signal(range(16 * R + 32), name=f"slots{v}")
            pos = Signal(2, name=f"pos{v}")
            ret = Signal(CREDIT_BITS, name=f"ret{v}")
            pfo = Signal(CREDIT_BITS, name=f"peer_freed_old{v}")
            deliver = Signal(name=f"deliver{v}")
            # a TL flit is delivered only from a data flit (sent once ``peer_active``),
            # never into a peer life later than the sender's (``doom``)
            m.d.comb += [deliver.eq(AnySeq(1)),
                         Assume(~deliver | ((in_flight != 0) & peer_active & ~doom & ~prst))]
            took_v = took & (vc == v)
            pop = rx.i_slot.valid & rx.i_slot.ready
            done = pop & (pos == 3)
            m.d.comb += [rx.i_slot.valid.eq(slots != 0),
                         rx.i_slot.payload.eq(AnySeq(len(rx.i_slot.payload))),
                         rx.o_beat.ready.eq(AnySeq(1))]
            with m.If(link_reset):
                # the sender's link reset: its TL flits in flight were discarded
                m.d.sync += [in_flight.eq(0), held.eq(0), lost.eq(0), ret.eq(0),
                             slots.eq(0), pos.eq(0)]
            with m.Elif(prst):
                # the peer's receive buffer is cleared: what it held is lost
                m.d.sync += [in_flight.eq(in_flight + took_v), held.eq(0), slots.eq(0),
                             pos.eq(0), lost.eq(lost + held)]
                with m.If(peer_active & ~doom):
                    m.d.sync += pfo.eq(rx.o_freed)
            with m.Else():
                m.d.sync += [in_flight.eq(in_flight + took_v - deliver),
                             slots.eq(slots + 4 * deliver - pop), held.eq(held + deliver - done)]
                with m.If(pop):
                    m.d.sync += pos.eq(pos + 1)
            # the peer's consumption count in the sender's life
            peer = Signal(CREDIT_BITS, name=f"peer_freed{v}")
            m.d.comb += peer.eq(Mux(doom, pfo, rx.o_freed))
            # the peer's credit returns: cumulative, in order, never ahead of its count
            # (in a doomed life: the old peer life's flits, the new one sends only bring-up
            # flits until the sender's link reset)
            with m.If(tx.i_rx_good & hdr.init):
                m.d.comb += Assume(cred == R)
            with m.If(tx.i_rx_good & ~hdr.init):
                m.d.comb += Assume(_mod(cred - ret) <= _mod(peer - ret))
                with m.If(~link_reset):
                    m.d.sync += ret.eq(cred)

            out = _mod(sent[v] - freed_rx[v])
            owed = _mod(peer - freed_rx[v])
            free = _mod(limit[v] - out)
            m.d.comb += [
                Assert(_mod(peer + held + in_flight + lost) == sent[v], "conservation"),
                Assert(_mod(ret - freed_rx[v]) <= owed, "sender_not_ahead_of_returns"),
                Assert(owed <= out, "returns_not_ahead_of_sent"),
                Assert(limit[v] == (limit_known * R), "limit_is_advertised_size"),
                Assert(held + in_flight + lost <= R, "no_rx_overflow"),
                Assert(slots == 4 * held - pos, "slots_match_tl_flits"),
                Assert(pos == rs["k"], "rx_position"),
                Assert(limit_known | ((out == 0) & (owed == 0)), "nothing_out_before_bring_up"),
                Assert(~took_v | limit_known, "takes_only_after_bring_up"),
                Assert(doom | (lost == 0), "lost_only_in_doomed_life"),
                Assert(~doom | ((held == 0) & (rx.o_freed == 0) & (rs["rem"] == 0)
                                & (rs["skip"] == 0)), "peer_empty_in_doomed_life"),
                Assert(peer_active | ((held == 0) & (peer == 0) & (ret == 0)
                                      & (rs["rem"] == 0) & (rs["skip"] == 0)),
                       "nothing_delivered_before_peer_active"),
            ]
            with m.If(limit_known):
                m.d.comb += [Assert(out <= limit[v], "free_not_negative"),
                             Assert(_mod(held + in_flight + lost + owed + free) == R,
                                    "held_inflight_owed_free_is_initial")]
            full.append(held == R)
            starved.append(limit_known & ~tx.o_credit_ok[v] & deliver)
            new_life.append(after_lr & deliver)
            lost_any.append(lost != 0)
        state = tx.o_state
        m.d.comb += [Cover(full[0], "vc0_buffer_full"), Cover(full[1], "vc1_buffer_full"),
                     Cover(Cat(*starved).any(), "delivered_while_out_of_credit"),
                     Cover(lr_pend & Cat(*lost_any).any(), "flits_lost_by_peer_reset"),
                     Cover(ts["peer_reset"], "peer_reset_detected"),
                     Cover((state == LINK_FAILED) & lr_pend, "failed_by_peer_reset"),
                     Cover(link_reset, "link_reset_pulse"),
                     Cover(after_lr & (state == LINK_ACTIVE) & tx.o_credit_ok.any(),
                           "active_with_credit_after_link_reset"),
                     Cover(Cat(*new_life).any(), "delivered_after_link_reset")]
        return m


register(Harness(
    name="credits",
    doc=f"chiplet credit loop (DataLinkTx + peer TransactionRx, rx_credits={RX_CREDITS}): "
        "held + in flight + owed + free == advertised, no receive-buffer overflow, "
        "per life across peer resets and link resets",
    build=lambda planted: CreditHarness(planted),
    planted=PLANTED,
    mode="prove", depth=4, cover_depth=24, fast=True,
))
