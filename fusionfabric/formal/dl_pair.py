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

Properties (in every step, for all time, with two symbolic indices ``i < j``,
``AnyConst`` over all ``2**SEQ_BITS`` residues): the harness numbers the TL flits taken by
the sender and those delivered out of the receiver's FIFOs (a TL flit is 4 slots, one
slot per cycle), mod ``2**SEQ_BITS``; a watched number's data is that of the last TL
flit taken with it, so every TL flit ever taken is watched:

1. in order, exactly once, intact: the ``i``-th and the ``j``-th TL flits delivered carry
   the data and VC of the ``i``-th and ``j``-th TL flits taken (so ``i`` is delivered
   before ``j``, and a flit lost, duplicated or reordered shifts the numbering and shows
   as a mismatch for some ``i``); nothing is delivered that was not sent (the TL flit
   being delivered is one of the last ``replay_depth + 2`` taken); the 4 slots of a TL
   flit leave consecutively on one VC;
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

Proven by k-induction (depth :data:`PAIR_K`) with the white-box invariants of
:mod:`.dl_pair_inv` (assertions themselves: sequence numbers and data of every copy in
the sender's pipeline, the receiver's staging buffer and FIFOs, and the counts).

Planted bugs: ``window``: the sender fills one entry more than the replay buffer holds
(``fill_ptr - ack_ptr <= replay_depth`` instead of ``<``), overwriting an
unacknowledged entry; ``rx-dup``: the receiver commits a good data flit whose sequence
number is one behind the expected one (a duplicate).

**Across peer resets and link resets** (``dl-reset``, :class:`PeerResetPairHarness`;
docs/protocol.md, "Peer reset and link reset"). The same sender, forward channel and
receiver, and the far side's own ``DataLinkTx`` (its TL side idle: it sends no data),
which reads what its receiver checks, gates its commits (``o_rx_accept``), sends the acks
and NAKs back and detects our resets. The far side's receiver and DL TX run in a clock
domain of their own whose reset is a free event (the far side's reset) or its own
link-reset pulse: every register of both back to reset. The reverse channel carries the
far side's DL TX headers: in any step in which it is sending, the header it would put
into a trailer then may be taken, held one at a time, handed over at a free step or lost
(dropped, corrupted or replaced by the next), so headers arrive in order, any of them
lost, with any delay. Every slot of a TL flit carries, above its free
bits, a tag: the sender's link-reset pulses so far mod 4 (instrumentation of the data; the
data path never looks at it), so the harness knows the life of every flit it sees.

A **life** of the sender runs from one ``o_link_reset`` pulse to the next; an **epoch**
of the far side from one of its resets to the next; a life is **doomed** by a reset of
the far side after the sender sent a data flit in it. Properties (every step up to
:data:`RESET_DEPTH`): each epoch delivers a prefix of one life's TL flits (this life or
the last), in order, each once, intact (the epoch's ``n``-th delivered TL flit is that
life's ``n``-th taken, for symbolic ``i < j``); an epoch that began after the sender sent
data in its life commits and delivers nothing of that life; the receiver's expected
number lies in the sender's window while the epoch belongs to the life; and the sender's
statements of ``dl-lives``; and a link reset only in a life in which the far side was reset
(a refresh of the far side with one of its older normal flits delayed past it does not
make us take it for a peer reset: the flit's ``gen_seen`` is not our generation).
Planted bugs: ``rx-stale`` (the far side's gate lets a fresh DL commit anything),
``lr-discard`` (the walk before a link reset does not count what it frees),
``no-gen`` (our DL TX leaves the generation compare out).

**The sender alone** (``dl-lives``, :class:`SenderLivesHarness`): ``DataLinkTx`` with
every input free; its window, the link reset (the life after the pulse starts at zero)
and the discard accounting (every TL flit taken in a life is acknowledged, in the replay
buffer or counted in ``o_discarded``) are proven for all time by k-induction. Planted
bugs: ``window``, ``lr-discard``, ``lr-fill`` (the link reset leaves ``fill_ptr``).
"""

from __future__ import annotations

from amaranth.hdl import (Assert, Assume, Cat, ClockDomain, ClockSignal, Const, Cover,
                          DomainRenamer, Elaboratable, Module, Mux, ResetSignal, Signal, Value)
from amaranth.asserts import AnyConst, AnySeq
from amaranth.lib import data

from fusionfabric.formats.chiplet import DL_HEADER, SEQ_BITS, SLOT_BITS, ChipletParams, LinkState
from fusionfabric.rtl.chiplet import DataLinkRx, DataLinkTx
from .dl_pair_inv import elaborate_fifo, pair_invariants
from .flow import Harness, driven_signals, register

REPLAY_DEPTH = 2
REPLAY_TIMEOUT = 4
LINK_TIMEOUT = 16
#: Fairness of the forward channel: one of every FAIR_K consecutive DL flits is unharmed.
FAIR_K = 3
#: Induction depth of ``dl-pair`` (its white-box invariants make it 1-inductive).
PAIR_K = 1
#: Bound of ``dl-reset``'s proof and of its covers.
RESET_DEPTH = 24
RESET_COVER_DEPTH = 28
#: Induction depth and cover bound of ``dl-lives``.
LIVES_DEPTH = 4
LIVES_COVER_DEPTH = 12
#: Bound of the covers (a second TL flit, and one after FAILED, come late).
COVER_DEPTH = 32
#: Free bits per 128-bit slot of a TL flit (the others are 0): 4 slots of 2 free bits
#: tell any two TL flits apart and any slot from another; the data path is bit-parallel.
DATA_BITS = 2
#: Width of the TL flit numbering (indices ``i < j < 2**IDX_BITS``).
IDX_BITS = 4
#: Width of the life tag carried in every slot of a TL flit (the sender's link-reset
#: pulses so far, mod 4) and of the harness's life counter (saturating).
TAG_BITS = 2
LIFE_BITS = 3

ACTIVE = int(LinkState.ACTIVE)
FAILED = int(LinkState.FAILED)

BUGS = {
    "window": "the sender accepts one more unacknowledged DL flit than the replay buffer "
              "holds",
    "rx-dup": "the receiver commits a data flit one sequence number behind the expected "
              "one (a duplicate)",
    "lr-discard": "the walk before a link reset frees the unacknowledged entries without "
                  "counting their TL flits in discarded",
    "lr-fill": "the link reset leaves fill_ptr: the old life's entries stay filled and are "
               "sent again in the new life",
    "rx-stale": "the far side's DL TX lets its receiver commit while fresh whatever comes "
                "(o_rx_accept 1): the sender's data from before the far side's reset",
    "no-gen": "the sender's DL TX takes every flit as sent after the far side heard "
              "its current generation (heard 1): a normal flit of the far side from "
              "before its refresh takes it for an ACTIVE peer",
}
#: The planted bugs of each harness: ``dl-pair``, ``dl-reset``, ``dl-lives``.
PLANTED = {k: BUGS[k] for k in ("window", "rx-dup")}
RESET_PLANTED = {k: BUGS[k] for k in ("rx-stale", "lr-discard", "no-gen")}
SENDER_PLANTED = {k: BUGS[k] for k in ("window", "lr-discard", "lr-fill")}


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


def _params(replay_depth):
    return ChipletParams(tl_per_dl=1, replay_depth=replay_depth, rx_credits=1,
                         close_timeout=1, replay_timeout=REPLAY_TIMEOUT, replay_limit=1,
                         link_timeout=LINK_TIMEOUT, retrain_holdoff=2)


def _sender(planted, p, platform):
    """The sender's ``DataLinkTx``, elaborated with the planted bugs that live in it and its
    CRC unit stubbed: ``(tx, module, signals by name, crc, walk)``, ``walk`` being true in
    the cycles in which the walk before a link reset counts an entry out."""
    D = p.replay_depth
    d = D.bit_length() - 1
    tx = DataLinkTx(p)
    txm = tx.elaborate(platform)
    tx._MustUse__used = True
    tx_crc = _stub_crc(txm, "crc")
    ts = driven_signals(txm)
    ack_ptr, fill_ptr = ts["ack_ptr"], ts["fill_ptr"]
    state, lr_pend, discarded = ts["state"], ts["lr_pend"], ts["discarded"]
    link_reset = tx.o_link_reset
    # the sender's walk through the unacknowledged entries before a link reset
    walk = (state == FAILED) & lr_pend & (ack_ptr != fill_ptr)
    if planted == "window":
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
    if planted == "lr-discard":
        # the walk before the link reset frees the entries without counting them
        with txm.If(walk):
            txm.d.sync += discarded.eq(discarded)
    if planted == "lr-fill":
        # the link reset leaves the fill pointer: the old life's entries stay "filled"
        with txm.If(link_reset):
            txm.d.sync += fill_ptr.eq(fill_ptr)
    if planted == "no-gen":
        # the generation compare left out (the last assignment wins)
        txm.d.comb += ts["heard"].eq(1)
    return tx, txm, ts, tx_crc, walk


def _forward_channel(m, tx, rx, rx_crc, rs):
    """The forward channel from ``tx.o_phy`` to ``rx.i_phy``: any delay, each DL flit
    passed, dropped whole or corrupted (decided at its first slot; of every
    :data:`FAIR_K` consecutive DL flits one unharmed); the receiver's CRC check abstracted
    to "good exactly for a flit the channel did not corrupt". Returns ``(tx.o_phy,
    drop, hs)``: ``drop``, the flit in progress is dropped (from its second slot on);
    ``hs``, a slot handshake."""
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
    return ph, drop_reg, hs


def _tl_source(m, tl, tag=None, clear=None):
    """The TL side of the sender: TL flits at free steps, each slot :data:`DATA_BITS` free
    low bits (above them ``tag`` if given), the rest 0, free VC, held (valid, data, VC)
    until taken; ``clear`` (a link reset, which clears the TL packer) ends an offer.
    Returns ``(data, vc, held, held_data)``: ``held``, offered in the last step and not
    taken, with ``held_data``."""
    tl_valid = Signal()
    tl_data = Signal(len(tl.payload.data))
    tl_vc = Signal()
    fixed = Cat(tag) if tag is not None else Cat()
    m.d.comb += [tl_valid.eq(AnySeq(1)),
                 tl_data.eq(Cat(Cat(AnySeq(DATA_BITS), fixed,
                                    Const(0, SLOT_BITS - DATA_BITS - len(fixed)))
                                for _ in range(4))),
                 tl_vc.eq(AnySeq(1)),
                 tl.valid.eq(tl_valid), tl.payload.data.eq(tl_data),
                 tl.payload.vc.eq(tl_vc)]
    held = Signal()
    held_data = Signal(len(tl_data))
    held_vc = Signal()
    offer_left = tl.valid & ~tl.ready
    if clear is not None:
        offer_left = offer_left & ~clear
    m.d.sync += [held.eq(offer_left), held_data.eq(tl_data), held_vc.eq(tl_vc)]
    with m.If(held):
        m.d.comb += Assume(tl_valid & (tl_data == held_data) & (tl_vc == held_vc))
    return tl_data, tl_vc, held, held_data


def _link_covers(tx, ts, rx, replay_delivered):
    """The covers both pairs share: a replayed flit delivered, a NAK requested and the
    sender rewinding on it, FAILED by the replay limit and by the link-lost timeout."""
    return [
        Cover(replay_delivered, "replay_then_delivery"),
        Cover(rx.i_nak_sent, "receiver_requests_nak"),
        Cover(ts["nak_rw"], "sender_rewinds_on_nak"),
        Cover(tx.o_fail_replay != 0, "replay_limit_failed"),
        Cover(tx.o_fail_lost != 0, "link_lost_failed"),
    ]


def _receiver(planted, p, platform):
    """The receiver's ``DataLinkRx``, elaborated with the planted bug that lives in it and
    its CRC unit stubbed: ``(rx, module, crc, signals by name)``."""
    rx = DataLinkRx(p)
    rxm = rx.elaborate(platform)
    rx._MustUse__used = True
    rx_crc = _stub_crc(rxm, "crc")
    rs = driven_signals(rxm)
    if planted == "rx-dup":
        expected = rs["expected"]
        h = data.View(DL_HEADER.layout(), rs["h"])
        with rxm.If(rs["chk"] & rx_crc.o_crc.payload.match & h.data
                    & (_dist(h.seq, expected) == (1 << SEQ_BITS) - 1)):
            rxm.d.comb += rs["commit"].eq(h.n_tl != 0)
    return rx, rxm, rx_crc, rs


def _sender_lives(m, tx, ts, walk, took, D):
    """The sender's lives (from one link-reset pulse to the next) and what holds in each:
    adds the ghosts and the sender-side properties to ``m`` and returns ``(life,
    sent_data)``: ``life``, link-reset pulses so far (saturating at ``2**LIFE_BITS - 1``);
    ``sent_data``, the sender has sent a data flit in this life (``hi_ptr`` moves when it
    picks one)."""
    ack_ptr, send_ptr = ts["ack_ptr"], ts["send_ptr"]
    fill_ptr, hi_ptr = ts["fill_ptr"], ts["hi_ptr"]
    lr_pend, discarded, f_j = ts["lr_pend"], ts["discarded"], ts["f_j"]
    link_reset = tx.o_link_reset
    life = Signal(LIFE_BITS)
    lr_q = Signal()                      # the pulse was in the last step
    sent_reg = Signal()
    sent_data = Signal()
    m.d.comb += sent_data.eq(sent_reg | (hi_ptr != 0))
    m.d.sync += lr_q.eq(link_reset)
    with m.If(link_reset):
        m.d.sync += sent_reg.eq(0)
        with m.If(life != (1 << LIFE_BITS) - 1):
            m.d.sync += life.eq(life + 1)
    with m.Else():
        m.d.sync += sent_reg.eq(sent_data)

    # sequence window and replay buffer
    unacked = _dist(fill_ptr, ack_ptr)
    d_hi = _dist(hi_ptr, ack_ptr)
    d_send = _dist(send_ptr, ack_ptr)
    m.d.comb += [
        Assert(unacked <= D, "unacked_within_replay_depth"),
        Assert(lr_pend | ((d_send <= d_hi) & (d_hi <= unacked)), "pointers_ordered"),
        Assert(tx.o_unacked == unacked, "o_unacked_is_window"),
        Assert(~ts["wp__en"] | (unacked < D), "fill_only_into_free_entry"),
        Assert(~lr_pend | (ts["state"] == FAILED), "link_reset_pending_only_while_failed"),
    ]
    # white box, for the induction: at ``tl_per_dl`` 1 an entry is complete with its TL
    # flit (``f_j`` stays 0) and every unacknowledged entry holds one TL flit
    N = tx.params.tl_per_dl
    nb = (N + 1).bit_length()
    d = D.bit_length() - 1
    m.d.comb += Assert(f_j < N, "fill_position_within_entry")
    for e in range(D):
        in_window = _dist(Const(e, SEQ_BITS), ack_ptr)[:d] < unacked if d else unacked != 0
        m.d.comb += Assert(~in_window | (ts["ntl_all"][e * nb:(e + 1) * nb] == N),
                           "unacked_entry_holds_its_tl_flits")

    # The life after the pulse starts at zero; every TL flit taken in a life is
    # acknowledged, in the replay buffer, or counted in ``o_discarded`` (an entry holds
    # one TL flit at ``tl_per_dl`` 1; the entry being filled holds ``f_j``), as long as
    # ``o_discarded`` (16 bits, saturating) is not near its top.
    m.d.comb += Assert(~lr_q | ((Cat(ack_ptr, send_ptr, fill_ptr, hi_ptr, f_j, ts["f_k"],
                                     ts["peer_active"], lr_pend, ts["limit_known"]) == 0)
                                & ts["fresh"] & (tx.o_unacked == 0)),
                       "life_starts_at_zero")
    CW = 8
    taken = Signal(CW)                   # TL flits taken in this life (mod 2**CW)
    acked = Signal(CW)                   # ... freed by acks (up to the last step)
    ack_q = Signal(SEQ_BITS)
    walk_q = Signal()
    disc0 = Signal(16)                   # o_discarded when the life began
    m.d.sync += [ack_q.eq(ack_ptr), walk_q.eq(walk)]
    ack_step = Mux(walk_q | lr_q, 0, _dist(ack_ptr, ack_q))
    acked_now = (acked + ack_step)[:CW]
    with m.If(link_reset):
        m.d.sync += [taken.eq(0), acked.eq(0), disc0.eq(discarded + f_j)]
    with m.Else():
        m.d.sync += [taken.eq(taken + took), acked.eq(acked_now)]
    disc_life = (discarded - disc0)[:CW]
    with m.If(discarded < 0xFFFF - 2 * D - 2):
        m.d.comb += Assert(taken == (acked_now + disc_life + unacked + f_j)[:CW],
                           "taken_is_acked_buffered_or_discarded")
    m.d.comb += [Cover(ts["peer_reset"], "peer_reset_detected"),
                 Cover(link_reset & (discarded != disc0), "link_reset_discards")]
    return life, sent_data


class DataLinkPairHarness(Elaboratable):
    #: the planted bugs this harness knows
    planted_bugs = PLANTED

    def __init__(self, planted: str | None = None, replay_depth: int = REPLAY_DEPTH):
        bugs = self.planted_bugs
        if planted is not None and planted not in bugs:
            raise ValueError(f"planted={planted!r} must be one of {sorted(bugs)}")
        if replay_depth >= 1 << (SEQ_BITS - 1):
            raise ValueError(f"replay_depth={replay_depth} must be < 2**{SEQ_BITS - 1}")
        self.planted = planted
        self.params = _params(replay_depth)

    def _pair(self, platform):
        """The design under test, elaborated with the planted bug: ``(m, D, (tx, txm, ts,
        walk), (rx, rxm, rx_crc, rs))``; ``m`` holds the sender (CRC field 0) and the reset
        assumption, the receiver is left to the caller (its clock domain)."""
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        p = self.params
        tx, txm, ts, tx_crc, walk = _sender(self.planted, p, platform)
        m.submodules.tx = txm
        m.d.comb += [tx_crc.o_crc.valid.eq(0), tx_crc.o_crc.payload.eq(0)]   # CRC field 0
        return m, p.replay_depth, (tx, txm, ts, walk), _receiver(self.planted, p, platform)

    def elaborate(self, platform):
        # ---------------- the design under test ----------------
        m, D, (tx, txm, ts, _), (rx, rxm, rx_crc, rs) = self._pair(platform)
        ack_ptr, send_ptr = ts["ack_ptr"], ts["send_ptr"]
        fill_ptr, hi_ptr = ts["fill_ptr"], ts["hi_ptr"]
        expected = rs["expected"]
        m.submodules.rx = rxm
        fifos = [elaborate_fifo(rxm, f"vc{v}", platform) for v in range(2)]

        # ---------------- TL side of the sender ----------------
        tl = tx.i_tl
        tl_data, tl_vc, held, held_data = _tl_source(m, tl)

        # ---------------- forward channel ----------------
        _, drop_reg, hs = _forward_channel(m, tx, rx, rx_crc, rs)

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
        # the counts wrap (mod 2**SEQ_BITS, as sequence numbers do): ``i < j`` range over
        # every residue, so every TL flit ever taken is watched; a watched flit's data is
        # that of the last TL flit taken with its number
        i = Signal(SEQ_BITS)
        j = Signal(SEQ_BITS)
        m.d.comb += [i.eq(AnyConst(SEQ_BITS)), j.eq(AnyConst(SEQ_BITS)), Assume(i < j)]
        n_in = Signal(SEQ_BITS)
        n_out = Signal(SEQ_BITS)
        took = tl.valid & tl.ready
        with m.If(took):
            m.d.sync += n_in.eq(n_in + 1)
        # the watched TL flits' free bits (the other bits of a slot are 0)
        w_free = [Signal(4 * DATA_BITS, name=f"data_{x}") for x in "ij"]
        w_vc = [Signal(name=f"vc_{x}") for x in "ij"]
        for idx, wf, wv in zip((i, j), w_free, w_vc):
            with m.If(took & (n_in == idx)):
                m.d.sync += [wf.eq(Cat(tl_data.word_select(q, SLOT_BITS)[:DATA_BITS]
                                       for q in range(4))),
                             wv.eq(tl_vc)]
        w_data = [Cat(Cat(wf.word_select(q, DATA_BITS), Const(0, SLOT_BITS - DATA_BITS))
                      for q in range(4)) for wf in w_free]

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
            with m.If(pos == 3):
                m.d.sync += n_out.eq(n_out + 1)
        m.d.comb += Assert(~(s0.valid & s1.valid), "one_slot_per_cycle")
        in_flight = _dist(n_in, n_out)
        with m.If(out_v):
            m.d.comb += Assert(in_flight != 0, "delivered_only_what_was_sent")
        with m.If(out_v):
            m.d.comb += Assert((pos == 0) | (out_vc == cur_vc), "tl_flit_on_one_vc")
            for idx, wd, wv, name in zip((i, j), w_data, w_vc, "ij"):
                with m.If(n_out == idx):
                    m.d.comb += [
                        Assert(out_slot == wd.word_select(pos, SLOT_BITS),
                               f"flit_{name}_data_in_order_once"),
                        Assert(out_vc == wv, f"flit_{name}_vc")]
        m.d.comb += Assert(in_flight <= D + 2, "delivered_count_at_most_sent")

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

        # ---------------- white-box invariants, for the induction ----------------
        pair_invariants(m, D=D, txm=txm, ts=ts, rxm=rxm, rs=rs, fifos=fifos,
                        watched=list(zip((i, j), w_data, w_vc)), n_in=n_in, n_out=n_out,
                        pos=pos, cur_vc=cur_vc, held=held, held_data=held_data,
                        drop_reg=drop_reg, last_ack=last_ack, hs=hs)

        # ---------------- covers ----------------
        replayed = Signal()                 # a replayed flit left the sender
        with m.If(tx.o_tx_replayed != 0):
            m.d.sync += replayed.eq(1)
        was_failed = Signal()
        with m.If(tx.o_state == FAILED):
            m.d.sync += was_failed.eq(1)
        deliver_done = out_v & (pos == 3)
        m.d.comb += _link_covers(tx, ts, rx, replayed & deliver_done) + [
            Cover(was_failed & (tx.o_state == ACTIVE) & deliver_done & (n_out != 0),
                  "active_again_and_delivering"),
            Cover(deliver_done & (n_out == j), "flit_j_delivered"),
        ]
        return m


class PeerResetPairHarness(DataLinkPairHarness):
    """The pair across peer resets and link resets (``dl-reset``)."""

    planted_bugs = RESET_PLANTED

    def elaborate(self, platform):
        # ---------------- the design under test ----------------
        m, D, (tx, txm, ts, walk), (rx, rxm, rx_crc, rs) = self._pair(platform)
        p = self.params
        ack_ptr, hi_ptr = ts["ack_ptr"], ts["hi_ptr"]
        lr_pend = ts["lr_pend"]
        link_reset = tx.o_link_reset
        expected = rs["expected"]
        # The far side: its receiver and its own DL TX (which gates the receiver's commits,
        # ``o_rx_accept``, and detects our resets), in a clock domain of their own whose
        # reset is the free event ``peer_rst`` (the far side's reset) or its own link-reset
        # pulse (every register of both back to reset: the framing, the commit pipeline,
        # the FIFOs, the sequence state, ``fresh``, ``limit_known``, ``peer_active``).
        ptx = DataLinkTx(p)
        ptxm = ptx.elaborate(platform)
        ptx._MustUse__used = True
        _stub_crc(ptxm, "crc")
        if self.planted == "rx-stale":
            # the far side's gate lets a fresh DL commit anything: the peer's flits of a
            # life it has not brought up with (the sender's data from before its reset)
            ptxm.d.comb += ptx.o_rx_accept.eq(1)
        prst_free = Signal(name="peer_rst_free")
        prst = Signal(name="peer_rst")
        m.d.comb += [prst_free.eq(AnySeq(1)), prst.eq(prst_free | ptx.o_link_reset)]
        m.domains.peer = cd_peer = ClockDomain("peer")
        m.d.comb += [cd_peer.clk.eq(ClockSignal("sync")), cd_peer.rst.eq(prst)]
        m.submodules.rx = DomainRenamer({"sync": "peer"})(rxm)
        m.submodules.ptx = DomainRenamer({"sync": "peer"})(ptxm)
        # its DL TX sends no data (its TL side is idle); it reads what its receiver checks
        # and sends its acks and NAKs back (the reverse channel below)
        m.d.comb += [ptx.i_tl.valid.eq(0), ptx.i_tl.payload.eq(0),
                     ptx.o_phy.ready.eq(AnySeq(1)),
                     ptx.i_link_up.eq(rx.i_link_up),
                     ptx.i_rx_good.eq(rx.o_good), ptx.i_rx_hdr.eq(rx.o_hdr),
                     ptx.i_rx_expected.eq(rx.o_expected), ptx.i_rx_nak.eq(rx.o_nak),
                     rx.i_nak_sent.eq(ptx.o_nak_sent),
                     ptx.i_freed0.eq(AnySeq(len(ptx.i_freed0))),
                     ptx.i_freed1.eq(AnySeq(len(ptx.i_freed1))),
                     ptx.i_lr_ready.eq(rx.o_idle),
                     rx.i_accept.eq(ptx.o_rx_accept)]

        # ---------------- the sender's lives ----------------
        tl = tx.i_tl
        took = tl.valid & tl.ready
        life, sent_data = _sender_lives(m, tx, ts, walk, took, D)

        # ---------------- TL side of the sender ----------------
        # each slot: DATA_BITS free low bits, then the life tag, the rest 0 (a link reset
        # clears the TL packer: an offer does not survive it)
        tag = life[:TAG_BITS]
        tl_data, tl_vc, _, _ = _tl_source(m, tl, tag=tag, clear=link_reset)

        # ---------------- forward channel ----------------
        ph, _, _ = _forward_channel(m, tx, rx, rx_crc, rs)

        # ---------------- link up ----------------
        m.d.comb += [tx.i_link_up.eq(AnySeq(1)), rx.i_link_up.eq(AnySeq(1)),
                     tx.i_lr_ready.eq(AnySeq(1)), rx.i_clear.eq(0)]

        # ---------------- the far side's epochs ----------------
        # An epoch of the far side: from one ``peer_rst`` to the next. The life a
        # committed data flit was taken in: the tag of its first slot (latched as the flit
        # enters the receiver; its check and commit come before the next flit's first
        # slot is latched).
        commit = rs["commit"]
        rx_tag = Signal(TAG_BITS)
        with m.If(rx.i_phy.valid & rx.i_link_up & ph.payload.first):
            m.d.sync += rx_tag.eq(ph.payload.data[DATA_BITS:DATA_BITS + TAG_BITS])
        commit_old = commit & (rx_tag != tag)
        # the far side was reset (or performed a link reset) in this life of ours: a link
        # reset of ours needs one
        far_reset = Signal()
        with m.If(link_reset):
            m.d.sync += far_reset.eq(0)
        with m.If(prst):
            m.d.sync += far_reset.eq(1)
        m.d.comb += Assert(~lr_pend | far_reset, "link_reset_only_after_far_side_reset")
        # ``ep_old``: the epoch has committed data of a life before the current one
        # (committed before our link reset, or the old life's last flits after it);
        # ``ep_clean``: the epoch's expected number started with this life (the epoch
        # began before this life, or in it before the sender sent data)
        ep_old = Signal()
        ep_commit = Signal()
        ep_clean = Signal(init=1)
        with m.If(prst):
            m.d.sync += [ep_old.eq(0), ep_commit.eq(0), ep_clean.eq(~sent_data)]
        with m.Else():
            with m.If(commit):
                m.d.sync += ep_commit.eq(1)
            with m.If(link_reset):
                m.d.sync += [ep_old.eq(ep_old | ep_commit | commit), ep_clean.eq(1)]
            with m.Elif(commit_old):
                m.d.sync += ep_old.eq(1)
        # ---------------- reverse channel ----------------
        # The far side's DL flits to us, as our DL TX reads them (their headers). In any
        # step in which its DL TX is sending (``cur_on``), the channel may take the header
        # that DL TX would put into a trailer issued then (its ``hdr``: ack, NAK, bring-up
        # bits, credits); it holds one at a time and hands it over at a free step; a header
        # not taken, or replaced by the next before it was handed over, is lost (dropped or
        # corrupted: our receiver does not pass it on). So the headers arrive in order, any
        # of them lost, with any delay; one survives the far side's reset in the channel.
        # (Every real trailer is one of these; taking a header in any step, not only every
        # 5th, and without the 3-stage pipeline, only adds behaviours, and brings the far
        # side's bring-up within the bound.) Our own receive side is free
        # (``i_rx_expected``, ``i_rx_nak``: the far side sends no data), and so are the
        # credit returns.
        pts = driven_signals(ptxm)
        rv_valid = Signal()
        rv_hdr = Signal(DL_HEADER.width)
        keep, hand = Signal(), Signal()
        m.d.comb += [keep.eq(AnySeq(1)), hand.eq(AnySeq(1)),
                     tx.i_rx_good.eq(rv_valid & hand), tx.i_rx_hdr.eq(rv_hdr),
                     tx.i_rx_expected.eq(AnySeq(SEQ_BITS)), tx.i_rx_nak.eq(AnySeq(1)),
                     tx.i_freed0.eq(AnySeq(len(tx.i_freed0))),
                     tx.i_freed1.eq(AnySeq(len(tx.i_freed1)))]
        with m.If(pts["cur_on"] & keep):
            m.d.sync += [rv_valid.eq(1), rv_hdr.eq(pts["hdr"])]
        with m.Elif(rv_valid & hand):
            m.d.sync += rv_valid.eq(0)

        # ---------------- receive side of the TL ----------------
        m.d.comb += [rx.o_slot0.ready.eq(1), rx.o_slot1.ready.eq(1)]

        # ---------------- numbering and the two watched TL flits ----------------
        # per life of the sender (taken: ``n_in``, reset by the link-reset pulse; the last
        # life's count and watched flits kept in ``pn_in``, ``pw_*``) and per epoch of the
        # receiver (delivered: ``n_out``, reset by ``peer_rst``)
        i = Signal(IDX_BITS)
        j = Signal(IDX_BITS)
        m.d.comb += [i.eq(AnyConst(IDX_BITS)), j.eq(AnyConst(IDX_BITS)), Assume(i < j)]
        top = (1 << (IDX_BITS + 1)) - 1
        n_in = Signal(IDX_BITS + 1)
        pn_in = Signal(IDX_BITS + 1)
        n_out = Signal(IDX_BITS + 1)
        w_data = [Signal(len(tl_data), name=f"data_{x}") for x in "ij"]
        w_vc = [Signal(name=f"vc_{x}") for x in "ij"]
        pw_data = [Signal(len(tl_data), name=f"prev_data_{x}") for x in "ij"]
        pw_vc = [Signal(name=f"prev_vc_{x}") for x in "ij"]
        with m.If(link_reset):
            m.d.sync += [n_in.eq(0), pn_in.eq(n_in)]
            m.d.sync += [a.eq(b) for a, b in zip(pw_data + pw_vc, w_data + w_vc)]
        with m.Elif(took & (n_in != top)):
            m.d.sync += n_in.eq(n_in + 1)
        for idx, wd, wv in zip((i, j), w_data, w_vc):
            with m.If(took & (n_in == idx)):
                m.d.sync += [wd.eq(tl_data), wv.eq(tl_vc)]

        s0, s1 = rx.o_slot0, rx.o_slot1
        out_v = s0.valid | s1.valid
        out_vc = s1.valid
        out_slot = Mux(s1.valid, s1.payload, s0.payload)
        out_tag = out_slot[DATA_BITS:DATA_BITS + TAG_BITS]
        pos = Signal(2)
        cur_vc = Signal()
        # the life a delivered TL flit was taken in: the current one or the last
        from_cur = out_tag == tag
        out_life = Mux(from_cur, life, life - 1)
        # the epoch's life (bound by its first delivery) and the first life it may deliver
        ep_bound = Signal()
        ep_life = Signal(LIFE_BITS)
        ep_min = Signal(LIFE_BITS)
        with m.If(prst):
            m.d.sync += [pos.eq(0), n_out.eq(0), ep_bound.eq(0),
                         ep_min.eq(life + sent_data)]
        with m.Elif(out_v):
            m.d.sync += pos.eq(pos + 1)
            with m.If(pos == 0):
                m.d.sync += [cur_vc.eq(out_vc), ep_bound.eq(1), ep_life.eq(out_life)]
            with m.If((pos == 3) & (n_out != top)):
                m.d.sync += n_out.eq(n_out + 1)
        m.d.comb += Assert(~(s0.valid & s1.valid), "one_slot_per_cycle")
        commit_life = Mux(rx_tag == tag, life, life - 1)
        m.d.comb += Assert(~commit | (commit_life >= ep_min),
                           "nothing_of_a_doomed_life_committed_after_peer_reset")
        with m.If(out_v):
            m.d.comb += [
                Assert(from_cur | ((out_tag == (life - 1)[:TAG_BITS]) & (life != 0)),
                       "delivered_from_this_life_or_the_last"),
                Assert(~ep_bound | (out_life == ep_life), "one_life_per_peer_epoch"),
                Assert(out_life >= ep_min, "nothing_of_a_doomed_life_after_peer_reset"),
                Assert(n_out < Mux(from_cur, n_in, pn_in), "delivered_only_what_was_sent"),
                Assert((pos == 0) | (out_vc == cur_vc), "tl_flit_on_one_vc")]
            for idx, wd, wv, pd, pv, name in zip((i, j), w_data, w_vc, pw_data, pw_vc, "ij"):
                with m.If(n_out == idx):
                    m.d.comb += [
                        Assert(out_slot == Mux(from_cur, wd, pd).word_select(pos, SLOT_BITS),
                               f"flit_{name}_data_in_order_once"),
                        Assert(out_vc == Mux(from_cur, wv, pv), f"flit_{name}_vc")]

        # ---------------- the receiver against the sender's window ----------------
        d_hi = _dist(hi_ptr, ack_ptr)
        # ``synced``: the receiver's expected number belongs to this life of the sender
        # (no peer reset after it sent data; after a link reset, the epoch committed
        # nothing of the old life)
        synced = ep_clean & ~ep_old
        h = rx.o_hdr
        with m.If(synced & ~lr_pend):
            m.d.comb += Assert(_dist(expected, ack_ptr) <= d_hi, "receiver_within_window")
            with m.If(rx.o_good & h.data):
                m.d.comb += Assert((_dist(h.seq, expected) < D)
                                   | (_dist(expected, h.seq) <= D),
                                   "no_sequence_alias_at_receiver")

        # ---------------- covers ----------------
        # (within the bound: a TL flit delivered after a link reset, and a second one in a
        # life, lie beyond it)
        replayed = Signal()                 # a replayed flit left the sender
        with m.If(tx.o_tx_replayed != 0):
            m.d.sync += replayed.eq(1)
        deliver_done = out_v & (pos == 3)
        m.d.comb += _link_covers(tx, ts, rx, replayed & deliver_done) + [
            Cover(ptx.o_link_reset, "far_side_link_reset"),
        ]
        return m


class SenderLivesHarness(Elaboratable):
    """The sender alone, every input free: its window, its link reset and its discard
    accounting hold whatever the far side, the channel and the TL layer do (the
    sender-side statements of :class:`DataLinkPairHarness`, by k-induction)."""

    def __init__(self, planted: str | None = None):
        if planted is not None and planted not in SENDER_PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(SENDER_PLANTED)}")
        self.planted = planted
        self.params = _params(REPLAY_DEPTH)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        p = self.params
        tx, txm, ts, tx_crc, walk = _sender(self.planted, p, platform)
        m.submodules.tx = txm
        m.d.comb += [tx_crc.o_crc.valid.eq(0), tx_crc.o_crc.payload.eq(0)]
        for port in (tx.i_tl.valid, tx.i_tl.payload, tx.o_phy.ready, tx.i_link_up,
                     tx.i_rx_good, tx.i_rx_hdr, tx.i_rx_expected, tx.i_rx_nak,
                     tx.i_freed0, tx.i_freed1, tx.i_lr_ready):
            m.d.comb += port.eq(AnySeq(len(Value.cast(port))))
        took = tx.i_tl.valid & tx.i_tl.ready
        _sender_lives(m, tx, ts, walk, took, p.replay_depth)
        return m


register(Harness(
    name="dl-pair",
    doc=f"DataLinkTx -> lossy channel (drop, corrupt, delay; 1 of {FAIR_K} unharmed) -> "
        f"DataLinkRx, replay_depth={REPLAY_DEPTH}: TL flits in order, once, intact; "
        f"no sequence alias; no replay-buffer overflow, for all time (k-induction)",
    build=lambda planted: DataLinkPairHarness(planted),
    planted=PLANTED,
    mode="prove", depth=PAIR_K, cover_depth=COVER_DEPTH, bug_depth=COVER_DEPTH, fast=False,
))


register(Harness(
    name="dl-reset",
    doc="DataLinkTx -> lossy channel -> DataLinkRx with the far side's DataLinkTx, across "
        "peer resets and link resets: per life and epoch a prefix of the sent TL flits, "
        f"in order, once; nothing of a doomed life after the peer reset (bounded, "
        f"{RESET_DEPTH} steps)",
    build=lambda planted: PeerResetPairHarness(planted),
    planted=RESET_PLANTED,
    mode="bmc", depth=RESET_DEPTH, cover_depth=RESET_COVER_DEPTH,
    bug_depth=RESET_COVER_DEPTH, fast=False,
))


register(Harness(
    name="dl-lives",
    doc="DataLinkTx alone, every input free: replay window, link reset (the life after it "
        "starts at zero) and discard accounting (every TL flit acknowledged, buffered or "
        "counted discarded), for all time (k-induction)",
    build=lambda planted: SenderLivesHarness(planted),
    planted=SENDER_PLANTED,
    mode="prove", depth=LIVES_DEPTH, cover_depth=LIVES_COVER_DEPTH, fast=True,
))
