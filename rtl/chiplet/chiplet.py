"""The chiplet endpoint: accelerator port, transaction layer, data-link layer."""

from __future__ import annotations

from dataclasses import asdict

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from fusionfabric.formats.chiplet import SRC_BITS, ChipletParams
from fusionfabric.formats.chiplet import Opcode
from .common import (LINK_FAILED, STATUS, data_slots, phy_layout, port_layout, register_fifo,
                     sat_inc)
from .dl_rx import DataLinkRx
from .dl_tx import DataLinkTx
from .tl_rx import WHOLE_MIN_CREDITS, TransactionRx
from .tl_tx import TransactionTx
from .tracker import CompletionTracker

__all__ = ["Chiplet"]


class Chiplet(wiring.Component):
    """One NVLink-Fusion-style chiplet endpoint (docs/protocol.md).

    The accelerator sends requests on ``i_req`` and the responses it owes on ``i_rsp``; it
    receives the peer's requests on ``o_req`` and the responses to its own requests on
    ``o_rsp`` (matched by tag; completions may return in any order). Requests ride VC 0
    and responses VC 1, each with its own packer, credits and receive buffer, so responses
    never wait behind requests. Requests stay in order per (source, destination): one
    source feeds one ordered DL stream. The DL delivers every TL flit exactly once and in
    order across bit errors, lost flits and link drops (UALink 1.0 and NVLink 1 style
    link-level replay: sequence numbers, cumulative ACK, NAK, go-back-N, replay timer).

    Parameters
    ----------
    tl_per_dl : int
        TL flits (64 B) per DL flit; a DL flit is ``4 * tl_per_dl + 1`` slots of 16 B.
    replay_depth : int
        DL flits kept for replay (power of two, 2..64).
    rx_credits : int
        Receive buffer per VC in TL flits (advertised to the peer at bring-up).
    replay_timeout : int
        Cycles without ack progress before replaying; 0 derives ``8 * flit + 64``.
    close_timeout : int
        Idle cycles before a partly filled DL flit is sent as it is.
    stamp_src : bool
        True for an accelerator endpoint (``src`` = ``i_node_id``); False on the switch side
        of a fabric link, where the forwarded messages keep their source.
    replay_limit, link_timeout, retrain_holdoff : int
        Fault escalation of the data link (docs/protocol.md, "Fault escalation"): rewinds
        without ack progress allowed before FAILED; cycles without a good flit before
        FAILED (0: ``16 * replay timeout``); cycles spent FAILED before retraining
        (0: one replay timeout).
    cpl_timeout : int
        Cycles a non-posted request waits for its completion before the chiplet completes
        it with status TIMEOUT (:class:`~fusionfabric.rtl.chiplet.tracker.CompletionTracker`);
        0, or ``stamp_src=False``: no completion timer (completions pass through).

    While the data link is FAILED and until it is ACTIVE again (``o_status.failed``), new
    requests on ``i_req`` are refused: posted ones dropped and counted per opcode
    (``failed_multicast``/``_reduce``/``_result``), non-posted ones answered with an ERROR
    completion (when the completion timer exists; without it they are dropped and only
    ``cpl_refused`` counts them).

    A chiplet reset alone is detected by its peer, which then performs a link reset
    clearing the state of both sides (docs/protocol.md, "Peer reset and link reset"); with
    ``rx_credits >= 5`` both receivers deliver whole messages only, so a message cut by a
    peer reset never leaves ``o_req``/``o_rsp`` inside it.

    The ten are checked and kept as one
    :class:`~fusionfabric.formats.chiplet.ChipletParams`, ``self.params`` (a bad value
    raises ValueError naming it), which both data-link layers share;
    :meth:`from_params` builds a chiplet from such an object.

    Members
    -------
    i_req, i_rsp : In(stream.Signature(sim.chiplet.PORT_BEAT))
    o_req, o_rsp : Out(stream.Signature(sim.chiplet.PORT_BEAT))
    o_phy : Out(stream.Signature(PHY_WORD))
        Transmit words toward the PHY (128-bit slot, ``first``; ``err`` = 0).
    i_phy : In(stream.Signature(PHY_WORD))
        Received words from the PHY (``ready`` is always 1); a flit with an ``err`` word
        fails as a CRC error.
    i_link_up : In(1)
        The PHY's receiver is locked; a drop restarts bring-up without losing flits.
    i_node_id : In(8)
        Source id stamped into every message sent.
    o_status : Out(rtl.chiplet.common.STATUS)
        Link state and counters.

    Timing
    ------
    Request accepted on ``i_req`` to delivered on the peer's ``o_req``, idle link,
    ``tl_per_dl = 4``, zero channel delay: measured by ``bench/link_goodput.py`` and
    documented in docs/protocol.md ("Latency"); it is the sum of the TL packer (2), the
    DL fill (up to ``close_timeout`` for a partial DL flit), waiting for a control flit in
    progress (< ``4 * tl_per_dl + 1``), DL pipeline (3), the flit itself
    (``4 * tl_per_dl + 1``, store and forward), the channel, the receive commit (4) and
    two 2-entry register FIFOs per VC, one between the receive FIFO and the transaction
    receiver and one after it (1 each; they keep the receive FIFO's read enable and the
    message parse off the port's hold and the completion tracker). Responses take the same
    path to ``o_rsp`` (the completion tracker passes them on without delay).
    Throughput: one 16-byte slot per cycle each way; a 256-byte write takes 17 slots.
    Reset: all state cleared; the link comes up when ``i_link_up`` is high on both sides.
    """

    def __init__(self, tl_per_dl=4, replay_depth=8, rx_credits=16, replay_timeout=0,
                 close_timeout=8, stamp_src=True, replay_limit=16, link_timeout=0,
                 retrain_holdoff=0, cpl_timeout=65536):
        self.params = ChipletParams(tl_per_dl=tl_per_dl, replay_depth=replay_depth,
                                    rx_credits=rx_credits, replay_timeout=replay_timeout,
                                    close_timeout=close_timeout, stamp_src=stamp_src,
                                    replay_limit=replay_limit, link_timeout=link_timeout,
                                    retrain_holdoff=retrain_holdoff, cpl_timeout=cpl_timeout)
        super().__init__({
            "i_req": In(stream.Signature(port_layout())),
            "o_req": Out(stream.Signature(port_layout())),
            "i_rsp": In(stream.Signature(port_layout())),
            "o_rsp": Out(stream.Signature(port_layout())),
            "o_phy": Out(stream.Signature(phy_layout())),
            "i_phy": In(stream.Signature(phy_layout())),
            "i_link_up": In(1),
            "i_node_id": In(SRC_BITS),
            "o_status": Out(STATUS.layout()),
        })

    @classmethod
    def from_params(cls, params: ChipletParams) -> "Chiplet":
        """A chiplet built from a :class:`~fusionfabric.formats.chiplet.ChipletParams`."""
        if not isinstance(params, ChipletParams):
            raise TypeError(f"params={params!r} must be a fusionfabric.formats.chiplet.ChipletParams")
        return cls(**asdict(params))

    def elaborate(self, platform):
        m = Module()
        m.submodules.tl_tx = tltx = TransactionTx(stamp_src=self.params.stamp_src)
        m.submodules.dl_tx = dltx = DataLinkTx(self.params)
        m.submodules.dl_rx = dlrx = DataLinkRx(self.params)
        # whole messages only (TransactionRx ``whole``) wherever the buffer allows it: a
        # link that fails mid-message must not hold the switch's ingress inside it, and a
        # peer reset must not leave a message half delivered at an endpoint's port (its
        # tail is gone with the peer's replay buffer)
        whole = self.params.rx_credits >= WHOLE_MIN_CREDITS
        m.submodules.tl_rx0 = tlrx0 = TransactionRx(whole=whole)
        m.submodules.tl_rx1 = tlrx1 = TransactionRx(whole=whole)
        track = self.params.tracks_completions
        if track:
            m.submodules.tracker = trk = CompletionTracker(self.params.cpl_timeout)

        connect(m, flipped(self.i_req), tltx.i_req)
        connect(m, flipped(self.i_rsp), tltx.i_rsp)
        connect(m, tltx.o_tl, dltx.i_tl)
        connect(m, dltx.o_phy, flipped(self.o_phy))
        connect(m, flipped(self.i_phy), dlrx.i_phy)
        # Each VC's receive FIFO is read through a 2-entry register FIFO (one cycle): the
        # block-RAM FIFO's read enable then depends on registers only, not on the TL parse
        # and the completion tracker behind it (that loop limited Fmax).
        settled = []       # per VC: no slot on its way from the receive FIFO to the TL
        for v, tlrx in enumerate((tlrx0, tlrx1)):
            sl = register_fifo(m, f"rx_slice{v}", (dlrx.o_slot0, dlrx.o_slot1)[v], tlrx.i_slot)
            level = (dlrx.o_level0, dlrx.o_level1)[v]
            settled.append(Signal(name=f"rx_settled{v}"))
            m.d.comb += [
                settled[v].eq(sl.r_rdy | (level == 0)),
                # link reset: a slot in transit is neither drained nor clean
                tlrx.i_drain.eq(dltx.o_lr_drain & dlrx.o_idle & settled[v]),
                # an endpoint counts the slots the commit in progress will still write (a
                # message inside one DL flit is not held back); the switch side only
                # committed ones
                tlrx.i_avail.eq(level + sl.level + ((dlrx.o_pending0, dlrx.o_pending1)[v]
                                                    if self.params.stamp_src else 0)),
            ]
        # Each VC's messages leave its TL receiver through a second 2-entry register FIFO
        # (one cycle): the parse's handshake then ends in registers, not in the port's hold
        # (o_req) or the completion tracker's decision (o_rsp) behind it.
        req, rsp = (stream.Signature(port_layout()).create(path=(f"rx_beat{v}",))
                    for v in range(2))
        for v, (tlrx, out) in enumerate(((tlrx0, req), (tlrx1, rsp))):
            register_fifo(m, f"beat_slice{v}", tlrx.o_beat, out)
        # link reset: the receive side idle and both TL receivers clean, as of the last cycle
        # (a register, off the link reset's fan-out) and still idle now: nothing then can
        # have entered the FIFOs since, so they are still empty and the parse at a boundary
        rx_clean = Signal()
        m.d.sync += rx_clean.eq(dlrx.o_idle & settled[0] & tlrx0.o_clean
                                & settled[1] & tlrx1.o_clean)
        # o_req: a non-posted request whose tag is still owed a response from before a link
        # reset waits at its first beat (TransactionTx ``o_hold``); delivered ones are owed
        beat = req.payload
        left = Signal(5)              # beats left in the o_req message after this one
        first = left == 0
        nonposted = ((beat.opcode == Opcode.WRITE) | (beat.opcode == Opcode.READ)
                     | (beat.opcode == Opcode.ATOMIC_ADD))
        hold = Signal()
        if self.params.stamp_src:
            m.d.comb += [tltx.i_hold_tag.eq(beat.tag),
                         hold.eq(first & nonposted & tltx.o_hold)]
        m.d.comb += [self.o_req.valid.eq(req.valid & ~hold),
                     self.o_req.payload.eq(beat),
                     req.ready.eq(self.o_req.ready & ~hold)]
        took = self.o_req.valid & self.o_req.ready
        with m.If(took):
            nb = data_slots(beat.opcode, beat.length)
            m.d.sync += left.eq(Mux(first, Mux(nb == 0, 0, nb - 1), left - 1))
        m.d.comb += [tltx.i_owed_set.eq(took & first & nonposted),
                     tltx.i_owed_tag.eq(beat.tag)]
        if track:
            connect(m, rsp, trk.i_cpl)
            connect(m, trk.o_rsp, flipped(self.o_rsp))
            m.d.comb += [trk.i_issue.eq(tltx.o_issue), trk.i_issue_tag.eq(tltx.o_issue_tag),
                         trk.i_issue_op.eq(tltx.o_issue_op),
                         trk.i_issue_len.eq(tltx.o_issue_len),
                         trk.i_issue_refused.eq(tltx.o_issue_refused),
                         trk.i_node_id.eq(self.i_node_id)]
        else:
            connect(m, rsp, flipped(self.o_rsp))
        m.d.comb += [
            tltx.i_node_id.eq(self.i_node_id),
            tltx.i_credit_ok.eq(dltx.o_credit_ok),
            dltx.i_link_up.eq(self.i_link_up),
            # a FAILED data link ignores what it receives until it retrains
            dlrx.i_link_up.eq(self.i_link_up & (dltx.o_state != LINK_FAILED)),
            tltx.i_refuse.eq(dltx.o_failed),
            # peer reset: the link reset (docs/protocol.md, "Peer reset and link reset")
            dlrx.i_accept.eq(dltx.o_rx_accept),
            dltx.i_lr_ready.eq(rx_clean & dlrx.o_idle),
            dlrx.i_clear.eq(dltx.o_link_reset),
            tlrx0.i_clear.eq(dltx.o_link_reset),
            tlrx1.i_clear.eq(dltx.o_link_reset),
            tltx.i_clear.eq(dltx.o_link_reset),
            dltx.i_rx_good.eq(dlrx.o_good),
            dltx.i_rx_hdr.eq(dlrx.o_hdr),
            dltx.i_rx_expected.eq(dlrx.o_expected),
            dltx.i_rx_nak.eq(dlrx.o_nak),
            dlrx.i_nak_sent.eq(dltx.o_nak_sent),
            dltx.i_freed0.eq(tlrx0.o_freed),
            dltx.i_freed1.eq(tlrx1.o_freed),
        ]
        s = self.o_status
        m.d.comb += [
            s.state.eq(dltx.o_state), s.replays.eq(dltx.o_replays),
            s.timeouts.eq(dltx.o_timeouts), s.crc_err.eq(dlrx.o_crc_err),
            s.seq_err.eq(dlrx.o_seq_err), s.dup.eq(dlrx.o_dup),
            s.frame_err.eq(dlrx.o_frame_err), s.credit_err.eq(dltx.o_credit_err),
            s.bad_op.eq(tltx.o_bad_op), s.overflow.eq(dlrx.o_overflow),
            s.tx_flits.eq(dltx.o_tx_flits), s.tx_replayed.eq(dltx.o_tx_replayed),
            s.rx_flits.eq(dlrx.o_rx_flits), s.replay_pos.eq(dltx.o_replay_pos),
            s.failed.eq(dltx.o_failed), s.failures.eq(dltx.o_failures),
            s.fail_replay.eq(dltx.o_fail_replay), s.fail_lost.eq(dltx.o_fail_lost),
            s.unacked.eq(dltx.o_unacked),
            s.failed_multicast.eq(tltx.o_failed_multicast),
            s.failed_reduce.eq(tltx.o_failed_reduce),
            s.failed_result.eq(tltx.o_failed_result),
            s.failed_cpl.eq(tltx.o_failed_cpl),
            s.fail_peer.eq(dltx.o_fail_peer),
            s.stale_rsp.eq(tltx.o_stale_rsp),
        ]
        disc = Signal(17)
        m.d.comb += [disc.eq(dltx.o_discarded + tltx.o_discarded),
                     s.discarded.eq(Mux(disc[16], 0xFFFF, disc[:16]))]
        if track:
            m.d.comb += [s.cpl_timeouts.eq(trk.o_timeouts), s.cpl_refused.eq(trk.o_refused),
                         s.late_cpl.eq(trk.o_late)]
        else:
            refused = Signal(16)
            sat_inc(m, refused, tltx.o_issue & tltx.o_issue_refused)
            m.d.comb += s.cpl_refused.eq(refused)
        return m


#: Edge set the lint (``python -m fusionfabric.lint chiplet``; sim.lint reads it from the factory's
#: module) checks besides the derived ones: the smallest timeouts, where a comparison
#: against ``timeout - 1`` must not become constant (Verilator UNSIGNED, docs/lint.md).
LINT_PARAMS = {
    "chiplet": [{"replay_timeout": 1, "close_timeout": 1},
                {"replay_limit": 1, "link_timeout": 1, "retrain_holdoff": 1, "cpl_timeout": 1}],
}
