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
  value between the last one the peer sent and the peer's current ``o_freed`` (the peer's
  returns are cumulative and in order, so never older than the last); a bring-up flit
  (``init``) carries the buffer size :data:`RX_CREDITS`. Every other input (link up, acks,
  NAKs, sequence numbers) is free.

Assumption on the sender's TL layer: it offers a TL flit of VC ``v`` only while
``o_credit_ok[v]`` (what ``TransactionTx``'s arbiter does).

Properties (every step, per VC; ``-`` is mod 4096, ``owed = peer_freed - freed_rx``
are credits consumed by the peer that the sender has not yet seen, ``free = limit -
(sent - freed_rx)``):

1. conservation: ``sent == peer_freed + held + in_flight``;
2. ``freed_rx <= last returned <= peer_freed`` (cyclically): the sender never counts a
   credit the peer has not returned;
3. ``limit`` is 0 before bring-up and :data:`RX_CREDITS` after;
4. after bring-up, ``held + in_flight + owed + free == RX_CREDITS``, with ``free >= 0``;
5. no overflow: ``held + in_flight <= RX_CREDITS`` (the peer's FIFO, ``4 * rx_credits``
   slots, never overflows), and the harness's slot count agrees with the TransactionRx's
   position inside its TL flit.

Covers: each VC's buffer full (``held == RX_CREDITS``) and a TL flit delivered after the
sender had no credit left.

Planted bugs: ``double-return``: the peer's ``TransactionRx`` adds 2 to its returned count
per consumed TL flit of VC 0 (a credit returned twice); ``dl-double``: the sender's
``DataLinkTx`` applies each credit return of VC 0 twice.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, ResetSignal, Signal
from amaranth.asserts import AnySeq

from fusionfabric.formats.chiplet import CREDIT_BITS, ChipletParams
from fusionfabric.rtl.chiplet import DataLinkTx, TransactionRx
from .flow import Harness, driven_signals, register

RX_CREDITS = 3

PLANTED = {
    "double-return": "the peer's TransactionRx returns two credits per consumed VC 0 TL flit",
    "dl-double": "DataLinkTx applies each VC 0 credit return twice",
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
        if self.planted == "dl-double":
            # after the RTL's own update (last assignment wins): apply the return twice
            cred = tx.i_rx_hdr.credit0
            d_c = _mod(cred - freed_rx[0])
            d_o = _mod(sent[0] - freed_rx[0])
            state = tx.o_state
            good = tx.i_rx_good & (state != 0) & (state != 3)
            with txm.If(good & ~tx.i_rx_hdr.init & (d_c <= d_o)):
                txm.d.sync += freed_rx[0].eq(_mod(cred + d_c))
        m.submodules.tx = txm

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
        ]
        # the peer is never reset alone (a peer reset and its link reset, which clears
        # these counters on both sides, are not explored); the invariant below closes the
        # induction over the link-reset state
        m.d.comb += [Assume(~ts["peer_reset"]), tx.i_lr_ready.eq(AnySeq(1)),
                     Assert(~ts["lr_pend"], "no_link_reset_without_peer_reset")]
        vc = tx.i_tl.payload.vc
        # the TL layer offers a flit only with a credit of its VC
        m.d.comb += Assume(~tx.i_tl.valid | tx.o_credit_ok.bit_select(vc, 1))
        took = tx.i_tl.valid & tx.i_tl.ready

        full = []
        starved = []
        for v in range(2):
            rx, rs = rxs[v]
            cred = hdr.credit0 if v == 0 else hdr.credit1
            in_flight = Signal(range(4 * R + 8), name=f"in_flight{v}")
            held = Signal(range(4 * R + 8), name=f"held{v}")
            slots = Signal(range(16 * R + 32), name=f"slots{v}")
            pos = Signal(2, name=f"pos{v}")
            ret = Signal(CREDIT_BITS, name=f"ret{v}")
            deliver = Signal(name=f"deliver{v}")
            m.d.comb += [deliver.eq(AnySeq(1)), Assume(~deliver | (in_flight != 0))]
            took_v = took & (vc == v)
            m.d.sync += in_flight.eq(in_flight + took_v - deliver)
            pop = rx.i_slot.valid & rx.i_slot.ready
            done = pop & (pos == 3)
            m.d.comb += [rx.i_slot.valid.eq(slots != 0),
                         rx.i_slot.payload.eq(AnySeq(len(rx.i_slot.payload))),
                         rx.o_beat.ready.eq(AnySeq(1))]
            m.d.sync += [slots.eq(slots + 4 * deliver - pop), held.eq(held + deliver - done)]
            with m.If(pop):
                m.d.sync += pos.eq(pos + 1)
            peer = rx.o_freed
            # the peer's credit returns: cumulative, in order, never ahead of its count
            with m.If(tx.i_rx_good & hdr.init):
                m.d.comb += Assume(cred == R)
            with m.If(tx.i_rx_good & ~hdr.init):
                m.d.comb += Assume(_mod(cred - ret) <= _mod(peer - ret))
                m.d.sync += ret.eq(cred)

            out = _mod(sent[v] - freed_rx[v])
            owed = _mod(peer - freed_rx[v])
            free = _mod(limit[v] - out)
            m.d.comb += [
                Assert(_mod(peer + held + in_flight) == sent[v], "conservation"),
                Assert(_mod(ret - freed_rx[v]) <= owed, "sender_not_ahead_of_returns"),
                Assert(owed <= out, "returns_not_ahead_of_sent"),
                Assert(limit[v] == (limit_known * R), "limit_is_advertised_size"),
                Assert(held + in_flight <= R, "no_rx_overflow"),
                Assert(slots == 4 * held - pos, "slots_match_tl_flits"),
                Assert(pos == rs["k"], "rx_position"),
                Assert(limit_known | ((out == 0) & (owed == 0)), "nothing_out_before_bring_up"),
            ]
            with m.If(limit_known):
                m.d.comb += [Assert(out <= limit[v], "free_not_negative"),
                             Assert(_mod(held + in_flight + owed + free) == R,
                                    "held_inflight_owed_free_is_initial")]
            full.append(held == R)
            starved.append(limit_known & ~tx.o_credit_ok[v] & deliver)
        m.d.comb += [Cover(full[0], "vc0_buffer_full"), Cover(full[1], "vc1_buffer_full"),
                     Cover(Cat(*starved).any(), "delivered_while_out_of_credit")]
        return m


register(Harness(
    name="credits",
    doc=f"chiplet credit loop (DataLinkTx + peer TransactionRx, rx_credits={RX_CREDITS}): "
        "held + in flight + owed + free == advertised, no receive-buffer overflow",
    build=lambda planted: CreditHarness(planted),
    planted=PLANTED,
    mode="prove", depth=4, cover_depth=24, fast=True,
))
