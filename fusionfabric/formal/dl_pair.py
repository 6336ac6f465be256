"""Chiplet data link, end to end: :class:`~fusionfabric.rtl.chiplet.DataLinkTx` on one side,
:class:`~fusionfabric.rtl.chiplet.DataLinkRx` on the other, joined by a lossy channel.

Configuration (the smallest): ``tl_per_dl`` 1 (a DL flit is 5 slots), ``replay_depth``
:data:`REPLAY_DEPTH`, ``rx_credits`` 1, ``close_timeout`` 1, ``replay_timeout``
:data:`REPLAY_TIMEOUT`, ``replay_limit`` 1, ``link_timeout`` :data:`LINK_TIMEOUT`,
``retrain_holdoff`` 2. Sequence numbers keep the design's fixed width (``SEQ_BITS`` = 10;
it is not a parameter of the RTL).

The design under test is the sender's ``DataLinkTx`` (sequence numbers, replay buffer,
go-back-N on NAK and timer, bring-up, FAILED escalation and retrain) and the receiver's
``DataLinkRx`` (framing, sequence check, NAK request, commit into the VC FIFOs).
The harness supplies the rest:

* **forward channel** (TX ``o_phy`` to RX ``i_phy``): it takes a slot whenever it likes
  (``o_phy.ready`` free: any delay), and decides per DL flit, at its first slot, to pass
  it, drop it whole, or corrupt it. Corruption is a flag on the flit, not flipped bits:
  both CRC units are abstracted (the TX's CRC field is a constant, the RX's check says
  "good" exactly for a flit the channel did not corrupt; CRC-32 detecting the errors is
  the CRC block's own subject). Fairness, the one assumption on the channel: of every
  :data:`FAIR_K` consecutive DL flits (control flits included) at least one is passed
  unharmed. The link-up inputs of both sides are free (drops and retrains at any time).
* **reverse channel** (what the receiver's side sends back, abstracted to the headers the
  sender's DL TX reads): a good flit may arrive at any step (``i_rx_good`` free); its
  ``ack`` is any value between the last delivered ack and the receiver's current
  ``o_expected`` (acks are cumulative and the channel keeps order), and it carries a NAK
  only when the receiver has asked for one (``o_nak``, handed over at a free step through
  ``i_nak_sent``) that was not yet delivered; bring-up bits, credits and everything else
  are free. The sender's receive-side inputs (``i_rx_expected``, ``i_rx_nak``,
  ``i_freed*``) are free.
* **TL side**: TL flits offered at free steps with free data and VC, held (valid and data)
  until taken (the stream contract ``TransactionTx`` keeps; the DL TX writes a TL flit
  slot by slot); the receive FIFOs are drained at once (``ready`` 1: credits are the
  ``credits`` harness's subject).

Properties (every step up to the bound, with two symbolic indices ``i < j``,
``AnyConst``): the harness numbers the TL flits taken by the sender and those delivered
out of the receiver's FIFOs (a TL flit is 4 slots, one slot per cycle):

1. in order, exactly once, intact: the ``i``-th and the ``j``-th TL flits delivered carry
   the data and VC of the ``i``-th and ``j``-th TL flits taken (so ``i`` is delivered
   before ``j``, and a flit lost, duplicated or reordered shifts the numbering and shows
   as a mismatch for some ``i``); nothing is delivered that was not sent; the 4 slots of
   a TL flit leave consecutively on one VC;
2. no sequence aliasing: unacknowledged entries ``fill_ptr - ack_ptr <= replay_depth``
   (< 2**SEQ_BITS / 2, the receiver's ahead/behind split); the pointers stay ordered
   ``ack <= send <= hi <= fill`` in the window; the receiver's expected number lies in
   ``[ack_ptr, hi_ptr]``; every good data flit reaching the receiver is fewer than
   ``replay_depth`` ahead or at most ``replay_depth`` behind its expected number;
3. the replay buffer never overflows: a TL flit is written only into an entry whose
   sequence number is inside the window (``fill_ptr - ack_ptr < replay_depth``).

Covers: a replayed DL flit delivered (go-back-N), the receiver asking for a NAK and the
sender rewinding on it, the replay limit reached and FAILED entered, the link-lost
timeout, and ACTIVE again after FAILED with a TL flit delivered afterwards.

Bounded (:data:`DEPTH` steps): the pipeline, replay buffer, staging buffer and FIFOs
hold data that an induction would need invariants over memory contents for.

Planted bugs: ``window``: the sender fills one entry more than the replay buffer holds
(``fill_ptr - ack_ptr <= replay_depth`` instead of ``<``), overwriting an
unacknowledged entry; ``rx-dup``: the receiver commits a good data flit whose sequence
number is one behind the expected one (a duplicate).
"""

from __future__ import annotations

from amaranth.hdl import (Assert, Assume, Cat, Const, Cover, Elaboratable, Module, Mux,
                          ResetSignal, Signal)
from amaranth.asserts import AnyConst, AnySeq
from amaranth.lib import data

from fusionfabric.formats.chiplet import DL_HEADER, SEQ_BITS, SLOT_BITS, ChipletParams, LinkState
from fusionfabric.rtl.chiplet import DataLinkRx, DataLinkTx
from .flow import Harness, driven_signals, register

REPLAY_DEPTH = 2
REPLAY_TIMEOUT = 4
LINK_TIMEOUT = 16
#: Fairness of the forward channel: one of every FAIR_K consecutive DL flits is unharmed.
FAIR_K = 3
#: Bound of the proof (steps from reset).
DEPTH = 21
#: Bound of the covers (a second TL flit, and one after FAILED, come late).
COVER_DEPTH = 32
#: Free bits per 128-bit slot of a TL flit (the others are 0): 4 slots of 2 free bits
#: tell any two TL flits apart and any slot from another; the data path is bit-parallel.
DATA_BITS = 2
#: Width of the TL flit numbering (indices ``i < j < 2**IDX_BITS``).
IDX_BITS = 4

ACTIVE = int(LinkState.ACTIVE)
FAILED = int(LinkState.FAILED)

PLANTED = {
    "window": "the sender accepts one more unacknowledged DL flit than the replay buffer "
              "holds",
    "rx-dup": "the receiver commits a data flit one sequence number behind the expected "
              "one (a duplicate)",
}


def _dist(a, b):
    return (a - b)[:SEQ_BITS]


def _stub_crc(module, name):
    """Replace the ``Crc`` submodule ``name`` of an elaborated module by an empty one and
    return the ``Crc`` component (its outputs are then driven by the harness, or left at
    their reset value)."""
    crc, loc = module._named_submodules[name]
    crc._MustUse__used = True
    module._named_submodules[name] = (Module(), loc)
    return crc


class DataLinkPairHarness(Elaboratable):
    def __init__(self, planted: str | None = None, replay_depth: int = REPLAY_DEPTH):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        if replay_depth >= 1 << (SEQ_BITS - 1):
            raise ValueError(f"replay_depth={replay_depth} must be < 2**{SEQ_BITS - 1}")
        self.planted = planted
        self.params = ChipletParams(tl_per_dl=1, replay_depth=replay_depth, rx_credits=1,
                                    close_timeout=1, replay_timeout=REPLAY_TIMEOUT,
                                    replay_limit=1, link_timeout=LINK_TIMEOUT,
                                    retrain_holdoff=2)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        p = self.params
        D = p.replay_depth
        d = D.bit_length() - 1

        # ---------------- the design under test ----------------
        tx = DataLinkTx(p)
        txm = tx.elaborate(platform)
        tx._MustUse__used = True
        tx_crc = _stub_crc(txm, "crc")
        ts = driven_signals(txm)
        ack_ptr, send_ptr = ts["ack_ptr"], ts["send_ptr"]
        fill_ptr, hi_ptr = ts["fill_ptr"], ts["hi_ptr"]
        if self.planted == "window":
            # after the RTL's fill (the last assignment wins): with the window full, fill
            # anyway, as if the room test were ``<= D``
            f_k, f_idle = ts["f_k"], ts["f_idle"]
            nb = 2
            with txm.If((_dist(fill_ptr, ack_ptr) == D) & tx.i_tl.valid):
                txm.d.comb += ts["wp__en"].eq(1)
                txm.d.sync += [f_k.eq(f_k + 1), f_idle.eq(0)]
                with txm.If(f_k == 3):
                    txm.d.comb += tx.i_tl.ready.eq(1)
                    for v in range(2):
                        with txm.If(tx.i_tl.payload.vc == v):
                            txm.d.sync += ts[f"sent{v}"].eq(ts[f"sent{v}"] + 1)
                    for e in range(D):
                        with txm.If(fill_ptr[:d] == e):
                            txm.d.sync += [ts["ntl_all"][e * nb:(e + 1) * nb].eq(1),
                                           ts["vcb_all"][e].eq(ts["vc_next"])]
                    txm.d.sync += [fill_ptr.eq(fill_ptr + 1), ts["f_j"].eq(0),
                                   ts["f_vc"].eq(0)]
        m.submodules.tx = txm
        m.d.comb += [tx_crc.o_crc.valid.eq(0), tx_crc.o_crc.payload.eq(0)]   # CRC field 0

        rx = DataLinkRx(p)
        rxm = rx.elaborate(platform)
        rx._MustUse__used = True
        rx_crc = _stub_crc(rxm, "crc")
        rs = driven_signals(rxm)
        expected = rs["expected"]
        if self.planted == "rx-dup":
            h = data.View(DL_HEADER.layout(), rs["h"])
            with rxm.If(rs["chk"] & rx_crc.o_crc.payload.match & h.data
                        & (_dist(h.seq, expected) == (1 << SEQ_BITS) - 1)):
                rxm.d.comb += rs["commit"].eq(h.n_tl != 0)
        m.submodules.rx = rxm

        # ---------------- TL side of the sender ----------------
        tl = tx.i_tl
        tl_valid = Signal()
        tl_data = Signal(len(tl.payload.data))
        tl_vc = Signal()
        # each slot: DATA_BITS free low bits, the rest 0
        m.d.comb += [tl_valid.eq(AnySeq(1)),
                     tl_data.eq(Cat(Cat(AnySeq(DATA_BITS), Const(0, SLOT_BITS - DATA_BITS))
                                    for _ in range(4))),
                     tl_vc.eq(AnySeq(1)),
                     tl.valid.eq(tl_valid), tl.payload.data.eq(tl_data),
                     tl.payload.vc.eq(tl_vc)]
        held = Signal()                      # offered last step and not taken
        held_data = Signal(len(tl_data))
        held_vc = Signal()
        m.d.sync += [held.eq(tl.valid & ~tl.ready), held_data.eq(tl_data), held_vc.eq(tl_vc)]
        with m.If(held):
            m.d.comb += Assume(tl_valid & (tl_data == held_data) & (tl_vc == held_vc))

        # ---------------- forward channel ----------------
        ph = tx.o_phy
        ch_take = Signal()
        m.d.comb += [ch_take.eq(AnySeq(1)), ph.ready.eq(ch_take)]
        hs = ph.valid & ph.ready
        start = hs & ph.payload.first
        drop_new, bad_new = Signal(), Signal()
        m.d.comb += [drop_new.eq(AnySeq(1)), bad_new.eq(AnySeq(1))]
        drop_reg, bad_reg = Signal(), Signal()
        drop_now = Mux(start, drop_new, drop_reg)
        bad_now = Mux(start, bad_new & ~drop_new, bad_reg)
        with m.If(start):
            m.d.sync += [drop_reg.eq(drop_new), bad_reg.eq(bad_new & ~drop_new)]
        harmed_run = Signal(range(FAIR_K))
        with m.If(start):
            m.d.comb += Assume(~((drop_new | bad_new) & (harmed_run == FAIR_K - 1)))
            m.d.sync += harmed_run.eq(Mux(drop_new | bad_new, harmed_run + 1, 0))
        m.d.comb += [rx.i_phy.valid.eq(hs & ~drop_now), rx.i_phy.payload.eq(ph.payload)]
        # the abstracted CRC check: a flit's trailer is checked one step after it arrived
        bad_q = Signal()
        m.d.sync += bad_q.eq(bad_now)
        m.d.comb += [rx_crc.o_crc.valid.eq(rs["chk"]), rx_crc.o_crc.payload.match.eq(~bad_q)]

        # ---------------- link up ----------------
        m.d.comb += [tx.i_link_up.eq(AnySeq(1)), rx.i_link_up.eq(AnySeq(1))]

        # ---------------- peer reset: not explored ----------------
        # the far side is never reset alone (no bring-up flit of its reaches a sender past
        # its own bring-up as a peer reset, so no link reset starts), and its receiver
        # takes every good data flit (its own sender is past bring-up: ``i_accept``)
        m.d.comb += [Assume(~ts["peer_reset"]), rx.i_accept.eq(1), rx.i_clear.eq(0),
                     tx.i_lr_ready.eq(1)]
        m.d.comb += Assert(~ts["lr_pend"], "no_link_reset_without_peer_reset")

        # ---------------- reverse channel ----------------
        rh = tx.i_rx_hdr
        good = Signal()
        m.d.comb += [good.eq(AnySeq(1)), tx.i_rx_good.eq(good),
                     rh.eq(AnySeq(len(rh.as_value()))),
                     tx.i_rx_expected.eq(AnySeq(SEQ_BITS)), tx.i_rx_nak.eq(AnySeq(1)),
                     tx.i_freed0.eq(AnySeq(len(tx.i_freed0))),
                     tx.i_freed1.eq(AnySeq(len(tx.i_freed1)))]
        last_ack = Signal(SEQ_BITS)
        with m.If(good):
            m.d.comb += Assume(_dist(rh.ack, last_ack) <= _dist(expected, last_ack))
            m.d.sync += last_ack.eq(rh.ack)
        nak_go = Signal()
        m.d.comb += [nak_go.eq(AnySeq(1)), rx.i_nak_sent.eq(nak_go & rx.o_nak)]
        naks = Signal(2)                     # NAKs handed over, not yet delivered (sat.)
        nak_in = rx.i_nak_sent & (naks != 3)
        nak_out = good & rh.nak
        m.d.comb += Assume(~nak_out | (naks != 0))
        m.d.sync += naks.eq(naks + nak_in - nak_out)

        # ---------------- receive side of the TL ----------------
        m.d.comb += [rx.o_slot0.ready.eq(1), rx.o_slot1.ready.eq(1)]

        # ---------------- numbering and the two watched TL flits ----------------
        i = Signal(IDX_BITS)
        j = Signal(IDX_BITS)
        m.d.comb += [i.eq(AnyConst(IDX_BITS)), j.eq(AnyConst(IDX_BITS)), Assume(i < j)]
        n_in = Signal(IDX_BITS + 1)
        n_out = Signal(IDX_BITS + 1)
        took = tl.valid & tl.ready
        with m.If(took & (n_in != (1 << (IDX_BITS + 1)) - 1)):
            m.d.sync += n_in.eq(n_in + 1)
        w_data = [Signal(len(tl_data), name=f"data_{x}") for x in "ij"]
        w_vc = [Signal(name=f"vc_{x}") for x in "ij"]
        for idx, wd, wv in zip((i, j), w_data, w_vc):
            with m.If(took & (n_in == idx)):
                m.d.sync += [wd.eq(tl_data), wv.eq(tl_vc)]

        s0, s1 = rx.o_slot0, rx.o_slot1
        out_v = s0.valid | s1.valid
        out_vc = s1.valid
        out_slot = Mux(s1.valid, s1.payload, s0.payload)
        pos = Signal(2)
        cur_vc = Signal()
        with m.If(out_v):
            m.d.sync += pos.eq(pos + 1)
            with m.If(pos == 0):
                m.d.sync += cur_vc.eq(out_vc)
            with m.If((pos == 3) & (n_out != (1 << (IDX_BITS + 1)) - 1)):
                m.d.sync += n_out.eq(n_out + 1)
        m.d.comb += Assert(~(s0.valid & s1.valid), "one_slot_per_cycle")
        with m.If(out_v):
            m.d.comb += [Assert(n_out < n_in, "delivered_only_what_was_sent"),
                         Assert((pos == 0) | (out_vc == cur_vc), "tl_flit_on_one_vc")]
            for idx, wd, wv, name in zip((i, j), w_data, w_vc, "ij"):
                with m.If(n_out == idx):
                    m.d.comb += [
                        Assert(out_slot == wd.word_select(pos, SLOT_BITS),
                               f"flit_{name}_data_in_order_once"),
                        Assert(out_vc == wv, f"flit_{name}_vc")]
        m.d.comb += Assert(n_out <= n_in, "delivered_count_at_most_sent")

        # ---------------- sequence window and replay buffer ----------------
        unacked = _dist(fill_ptr, ack_ptr)
        d_hi = _dist(hi_ptr, ack_ptr)
        d_send = _dist(send_ptr, ack_ptr)
        m.d.comb += [
            Assert(unacked <= D, "unacked_within_replay_depth"),
            Assert((d_send <= d_hi) & (d_hi <= unacked), "pointers_ordered"),
            Assert(_dist(expected, ack_ptr) <= d_hi, "receiver_within_window"),
            Assert(tx.o_unacked == unacked, "o_unacked_is_window"),
            Assert(~ts["wp__en"] | (unacked < D), "fill_only_into_free_entry"),
        ]
        h = rx.o_hdr
        with m.If(rx.o_good & h.data):
            m.d.comb += Assert((_dist(h.seq, expected) < D) | (_dist(expected, h.seq) <= D),
                               "no_sequence_alias_at_receiver")

        # ---------------- covers ----------------
        replayed = Signal()                 # a replayed flit left the sender
        with m.If(tx.o_tx_replayed != 0):
            m.d.sync += replayed.eq(1)
        was_failed = Signal()
        with m.If(tx.o_state == FAILED):
            m.d.sync += was_failed.eq(1)
        deliver_done = out_v & (pos == 3)
        m.d.comb += [
            Cover(replayed & deliver_done, "replay_then_delivery"),
            Cover(rx.i_nak_sent, "receiver_requests_nak"),
            Cover(ts["nak_rw"], "sender_rewinds_on_nak"),
            Cover(tx.o_fail_replay != 0, "replay_limit_failed"),
            Cover(tx.o_fail_lost != 0, "link_lost_failed"),
            Cover(was_failed & (tx.o_state == ACTIVE) & deliver_done & (n_out != 0),
                  "active_again_and_delivering"),
            Cover(deliver_done & (n_out == j), "flit_j_delivered"),
        ]
        return m


register(Harness(
    name="dl-pair",
    doc=f"DataLinkTx -> lossy channel (drop, corrupt, delay; 1 of {FAIR_K} unharmed) -> "
        f"DataLinkRx, replay_depth={REPLAY_DEPTH}: TL flits in order, once, intact; "
        f"no sequence alias; no replay-buffer overflow (bounded, {DEPTH} steps)",
    build=lambda planted: DataLinkPairHarness(planted),
    planted=PLANTED,
    mode="bmc", depth=DEPTH, cover_depth=COVER_DEPTH, bug_depth=COVER_DEPTH, fast=False,
))
