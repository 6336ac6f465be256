"""Data-link layer, transmit side: DL flits, replay buffer, go-back-N, credits, bring-up."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.crc import Crc
from fusionfabric.formats.chiplet import CREDIT_BITS, DL_HEADER, GEN_BITS, SEQ_BITS, SLOT_BITS
from .common import (LINK_ACTIVE, LINK_DOWN, LINK_FAILED, LINK_INIT, as_params, phy_layout, sat_inc,
                     seq_dist, tl_layout, tl_slots_layout, trailer_layout)

__all__ = ["DataLinkTx"]


class DataLinkTx(wiring.Component):
    """Frames TL flits into sequenced, CRC-protected DL flits and replays them go-back-N.

    **Fill.** TL flits from ``i_tl`` are written, one slot per cycle, into the replay buffer
    entry of sequence ``fill_ptr`` (``replay_depth`` entries of ``tl_per_dl`` TL flits). An
    entry is complete when full, or when no TL flit has come for ``close_timeout`` cycles
    after its first one; it then becomes sendable. Filling stops while ``replay_depth``
    entries are unacknowledged (the input simply stalls). Taking a TL flit consumes one
    credit of its VC; ``o_credit_ok`` bit ``v`` is ``(sent_v - freed_v) mod 4096 <
    limit_v``, where ``freed_v`` is the peer's last cumulative credit return and
    ``limit_v`` the buffer size it advertised at bring-up, so the count of TL flits in
    flight never goes below 0 or above the limit. A credit return outside ``[freed_v,
    sent_v]`` is ignored and counted.

    **Send.** Between DL flits the sender starts the next sendable entry (``send_ptr``) if
    the link is active, else a control flit (no TL flits, no sequence number, never
    replayed) while the link is in bring-up or active; nothing while down. Every flit's
    trailer carries the receiver's cumulative ``ack`` (next expected sequence), a pending
    NAK, the cumulative credit returns (or, in bring-up flits, the buffer sizes) and the
    CRC-32 of the whole flit (:class:`fusionfabric.rtl.crc.Crc`). A good received ``ack`` frees entries; a NAK rewinds
    ``send_ptr`` to the ack (go-back-N); so does the replay timer when no ack progress has
    been seen for ``replay_timeout`` cycles while flits are unacknowledged.

    **Fault escalation** (docs/protocol.md, "Fault escalation"). ``replay_limit`` rewinds
    (NAK or timer) without ack progress are allowed; the next rewind due puts the DL in
    FAILED instead (``o_fail_replay``); so does the progress watchdog after
    ``params.stall_after`` cycles without ack progress while flits are unacknowledged, in
    any state but FAILED (a link that drops restarts the replay timer at each bring-up).
    Once ``i_link_up`` has been high since reset, a
    timer counts cycles since the last good received flit (``i_rx_good``) taken while
    ACTIVE, or since leaving FAILED, through DOWN, INIT and ACTIVE; at
    ``params.lost_after`` the DL goes FAILED (``o_fail_lost``). FAILED sends
    nothing (a flit in progress is finished) for ``params.holdoff`` cycles, then goes DOWN
    and, with ``i_link_up`` high, INIT: the DL retrains by itself. Sequence numbers, the
    replay buffer and credits survive FAILED as they survive a link drop, so a retrain
    resends exactly what the peer has not acknowledged. ``o_failed`` is set on entering
    FAILED and cleared when the DL is ACTIVE again.

    **Bring-up.** ``i_link_up`` low: DOWN. Rising: INIT, sending control flits with
    ``init=1``, the buffer sizes and ``init_seen``. INIT → ACTIVE on a good flit from the
    peer that is either ``init`` with ``init_seen`` (it has heard us) or a normal flit (it
    is active) whose ``ack`` lies in our window, once the peer's sizes are known;
    ``send_ptr`` is then rewound to the acked point, so every unacknowledged flit is resent
    and the receiver drops the copies it already has (sequence numbers survive a link drop;
    only reset and a link reset clear them).

    **Peer reset** (docs/protocol.md, "Peer reset and link reset"). Every flit carries the
    DL's ``gen`` (its drops, failures and refreshes since reset, mod 16) and
    ``gen_seen`` (the generation of the last flit it took from the peer). Bring-up flits
    carry ``fresh`` until the DL first reaches ACTIVE after its reset, a link reset or a
    refresh (below), or sets ``peer_active``. A fresh DL takes only fresh bring-up flits
    and normal flits whose ack and credit returns fit its empty window and whose
    ``gen_seen`` is its generation (``o_rx_accept`` tells the receiver whether a data
    flit may be committed). Data flits go out only after a good flit without ``fresh``
    and with ``gen_seen`` equal to the DL's generation came from the peer since the last
    reset or link reset (``peer_active``). A DL that is not fresh and gets a good fresh
    bring-up flit: with ``peer_active``, goes FAILED
    (``o_fail_peer``); without it and with the flit's ``init_seen`` = 0, becomes fresh
    again and returns to INIT (a refresh: it has sent no data and taken none, so its state
    is that of a fresh DL but for TL flits waiting to be sent). While FAILED by a peer reset
    it stops filling, counts the unacknowledged entries'
    TL flits out of the replay buffer (``o_discarded``), asks the receive side to drain to
    a message boundary (``o_lr_drain``, answered by ``i_lr_ready``), and at the end of the
    hold-off pulses ``o_link_reset``, clearing pointers, credits and bring-up state of both
    layers before it goes DOWN.

    Parameters
    ----------
    params : fusionfabric.formats.chiplet.ChipletParams, optional
        The link parameters (checked when that object was built); None: the defaults.
        Used here: ``tl_per_dl``, ``replay_depth``, ``rx_credits``, ``replay_timeout``
        (through ``params.timeout``) and ``close_timeout``; kept as ``self.params``.

    Members
    -------
    i_tl : In(stream.Signature(TL_FLIT))
        TL flits from the transaction layer.
    o_credit_ok : Out(2)
        Credit available, per VC.
    o_phy : Out(stream.Signature(PHY_WORD))
        DL flit slots, ``first`` on slot 0, ``err`` always 0; ``4 * tl_per_dl + 1`` slots
        per flit.
    i_link_up : In(1)
        The PHY's receive side is locked.
    i_rx_good, i_rx_hdr : In(1), In(DL_HEADER)
        Pulse from the receiver: a good-CRC flit with this header arrived.
    i_rx_expected : In(10)
        The receiver's next expected sequence number (sent as ``ack``).
    i_rx_nak, o_nak_sent : In(1), Out(1)
        The receiver wants a NAK sent; pulse when a trailer carried it.
    i_freed0, i_freed1 : In(12)
        Cumulative TL flits consumed from our receive buffers (sent as credit returns).
    o_state : Out(2)
        ``LinkState``: 0 down, 1 bring-up, 2 active, 3 failed.
    o_failed : Out(1)
        FAILED was entered and the DL has not been ACTIVE since.
    o_failures, o_fail_replay, o_fail_lost : Out(16)
        Entries into FAILED: all, by the replay limit, by the link-lost timeout.
    o_unacked : Out(7)
        Replay-buffer entries filled and not yet acknowledged.
    o_fail_peer, o_discarded : Out(16)
        Entries into FAILED by a peer reset; TL flits discarded by link resets.
    o_rx_accept : Out(1)
        The receiver may commit the good data flit of this cycle (0 only while fresh).
    o_lr_drain, i_lr_ready, o_link_reset : Out(1), In(1), Out(1)
        Link reset: drain request, receive side drained, the clearing pulse.
    o_replays, o_timeouts, o_credit_err, o_tx_flits, o_tx_replayed, o_replay_pos : Out
        Saturating counters (see ``fusionfabric.rtl.chiplet.common.STATUS``).

    Timing
    ------
    A complete entry starts on ``o_phy`` at the next flit boundary (at most one flit,
    ``4 * tl_per_dl + 1`` cycles, when a control flit is in progress), its first slot 3
    cycles after the sender picks it (buffer read, CRC stage, output register). An entry
    is complete 4 cycles after its last TL flit is offered, or ``close_timeout`` cycles
    after its last TL flit if it is not full. Throughput: one slot per cycle, so a
    ``tl_per_dl`` flit carries ``4 * tl_per_dl`` payload slots in ``4 * tl_per_dl + 1``
    cycles. Reset: all pointers, credits and counters to 0, state DOWN.
    """

    def __init__(self, params=None):
        self.params = as_params(params)
        super().__init__({
            "i_tl": In(stream.Signature(tl_layout())),
            "o_credit_ok": Out(2),
            "o_phy": Out(stream.Signature(phy_layout())),
            "i_link_up": In(1),
            "i_rx_good": In(1),
            "i_rx_hdr": In(DL_HEADER.layout()),
            "i_rx_expected": In(SEQ_BITS),
            "i_rx_nak": In(1),
            "o_nak_sent": Out(1),
            "i_freed0": In(CREDIT_BITS),
            "i_freed1": In(CREDIT_BITS),
            "o_state": Out(2),
            "o_replays": Out(16),
            "o_timeouts": Out(16),
            "o_credit_err": Out(8),
            "o_tx_flits": Out(32),
            "o_tx_replayed": Out(32),
            "o_replay_pos": Out(6),
            "o_failed": Out(1),
            "o_failures": Out(16),
            "o_fail_replay": Out(16),
            "o_fail_lost": Out(16),
            "o_unacked": Out(7),
            "o_fail_peer": Out(16),
            "o_discarded": Out(16),
            "o_rx_accept": Out(1),
            "o_lr_drain": Out(1),
            "i_lr_ready": In(1),
            "o_link_reset": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        N = p.tl_per_dl
        D = p.replay_depth
        d = D.bit_length() - 1
        SL = 4 * N                                  # payload slots per DL flit
        T = p.timeout

        m.submodules.mem = mem = Memory(shape=SLOT_BITS, depth=D * SL, init=[])
        wp = mem.write_port()
        rp = mem.read_port()
        # Per-entry TL-flit count and VC bits, as flat registers read with word_select
        # (an Array of registers becomes a memory in Yosys, which Icarus reads stale).
        nb = (N + 1).bit_length()
        ntl_all = Signal(D * nb)
        vcb_all = Signal(D * N)

        ack_ptr = Signal(SEQ_BITS)
        send_ptr = Signal(SEQ_BITS)
        fill_ptr = Signal(SEQ_BITS)
        hi_ptr = Signal(SEQ_BITS)                   # one past the highest seq ever sent

        state = Signal(2, init=LINK_DOWN)
        m.d.comb += self.o_state.eq(state)

        # ---------------- credits ----------------
        sent = [Signal(CREDIT_BITS, name=f"sent{v}") for v in range(2)]
        freed = [Signal(CREDIT_BITS, name=f"freed_rx{v}") for v in range(2)]
        limit = [Signal(CREDIT_BITS, name=f"limit{v}") for v in range(2)]
        limit_known = Signal()
        for v in range(2):
            m.d.comb += self.o_credit_ok[v].eq((sent[v] - freed[v])[:CREDIT_BITS] < limit[v])

        # ---------------- fill ----------------
        f_j = Signal(range(N + 1))
        f_k = Signal(2)
        f_vc = Signal(N)
        f_idle = Signal(range(p.close_timeout + 1))
        lr_pend = Signal()                          # a link reset is under way (FAILED)
        room = (seq_dist(fill_ptr, ack_ptr) < D) & ~lr_pend
        fill_idx = fill_ptr[:d] if d else Const(0, 1)
        tl = self.i_tl.payload
        vc_next = Signal(N)
        m.d.comb += vc_next.eq(f_vc | (tl.vc << f_j)[:N])
        m.d.comb += [wp.addr.eq(fill_idx * SL + f_j * 4 + f_k),
                     wp.data.eq(data.View(tl_slots_layout(), tl.data)[f_k])]

        def complete(n, bits):
            for i in range(D):
                with m.If(fill_idx == i):
                    m.d.sync += [ntl_all[i * nb:(i + 1) * nb].eq(n),
                                 vcb_all[i * N:(i + 1) * N].eq(bits)]
            m.d.sync += [fill_ptr.eq(fill_ptr + 1), f_j.eq(0), f_vc.eq(0), f_idle.eq(0)]

        with m.If(room):
            with m.If(self.i_tl.valid):
                m.d.comb += wp.en.eq(1)
                m.d.sync += [f_k.eq(f_k + 1), f_idle.eq(0)]
                with m.If(f_k == 3):
                    m.d.comb += self.i_tl.ready.eq(1)
                    for v in range(2):
                        with m.If(tl.vc == v):
                            m.d.sync += sent[v].eq(sent[v] + 1)
                    with m.If(f_j == N - 1):
                        complete(N, vc_next)
                    with m.Else():
                        m.d.sync += [f_j.eq(f_j + 1), f_vc.eq(vc_next)]
            with m.Elif((f_j != 0) & (f_k == 0) & ~lr_pend):
                with m.If(f_idle == p.close_timeout - 1):   # never above (lint-clean at 1)
                    complete(f_j, f_vc)
                with m.Else():
                    m.d.sync += f_idle.eq(f_idle + 1)

        # ---------------- send: stage A (pick word) ----------------
        c_valid = Signal()
        adv = Signal()
        m.d.comb += adv.eq(~c_valid | self.o_phy.ready)
        busy = Signal()
        k = Signal(range(SL + 1))
        s_seq = Signal(SEQ_BITS)
        s_data = Signal()
        s_ntl = Signal(range(N + 1))
        s_vcb = Signal(N)
        send_idx = send_ptr[:d] if d else Const(0, 1)
        # data flits go out only once the peer has shown it is ACTIVE in the life we know
        # (``peer_active``): until then nothing of ours can have been committed over there
        peer_active = Signal()        # a good flit without ``fresh`` came from the peer
        have_data = (state == LINK_ACTIVE) & peer_active & (send_ptr != fill_ptr)
        cur_on = Signal()
        sending = (state != LINK_DOWN) & (state != LINK_FAILED)
        cur_k = Signal(range(SL + 1))
        cur_seq = Signal(SEQ_BITS)
        cur_data = Signal()
        cur_ntl = Signal(range(N + 1))
        cur_vcb = Signal(N)
        m.d.comb += [
            cur_on.eq(busy | sending),
            cur_k.eq(Mux(busy, k, 0)),
            cur_seq.eq(Mux(busy, s_seq, Mux(have_data, send_ptr, 0))),
            cur_data.eq(Mux(busy, s_data, have_data)),
            cur_ntl.eq(Mux(busy, s_ntl, Mux(have_data, ntl_all.word_select(send_idx, nb), 0))),
            cur_vcb.eq(Mux(busy, s_vcb, Mux(have_data, vcb_all.word_select(send_idx, N), 0))),
        ]
        cur_idx = cur_seq[:d] if d else Const(0, 1)
        m.d.comb += [rp.addr.eq(cur_idx * SL + cur_k), rp.en.eq(adv)]

        # trailer header, sampled when the trailer is issued
        hdr = Signal(DL_HEADER.layout())
        seen = Signal()
        fresh = Signal(init=1)        # not ACTIVE since reset, the last link reset or refresh
        # ``gen``: drops, failures and refreshes since reset (mod 2**GEN_BITS), sent
        # in every flit; ``gen_seen``: the generation of the last flit taken from the
        # peer, sent back. A peer flit whose ``gen_seen`` is our generation was sent after
        # the peer took a flit of ours sent since our last drop, failure or refresh.
        gen = Signal(GEN_BITS)
        gen_seen = Signal(GEN_BITS)
        # a flit finished after entering FAILED, or after the link went DOWN, goes out as a
        # bring-up flit without init_seen (``seen`` is cleared there), so a peer never
        # takes it for an active link (nor for one past its first bring-up while fresh)
        is_init = state != LINK_ACTIVE
        m.d.comb += [
            hdr.seq.eq(cur_seq), hdr.data.eq(cur_data), hdr.n_tl.eq(cur_ntl),
            hdr.vc.eq(cur_vcb), hdr.ack.eq(self.i_rx_expected), hdr.nak.eq(self.i_rx_nak),
            hdr.init.eq(is_init), hdr.init_seen.eq(seen),
            hdr.credit0.eq(Mux(is_init, p.rx_credits, self.i_freed0)),
            hdr.credit1.eq(Mux(is_init, p.rx_credits, self.i_freed1)),
            hdr.fresh.eq(fresh & is_init),
            hdr.gen.eq(gen), hdr.gen_seen.eq(gen_seen),
        ]

        # stage B registers
        b_valid = Signal()
        b_first = Signal()
        b_pad = Signal()
        b_trailer = Signal()
        b_hdr = Signal(DL_HEADER.layout())
        tx_flits = Signal(32)
        tx_replayed = Signal(32)
        m.d.comb += [self.o_tx_flits.eq(tx_flits), self.o_tx_replayed.eq(tx_replayed)]
        with m.If(adv):
            m.d.sync += b_valid.eq(cur_on)
            with m.If(cur_on):
                m.d.sync += [b_first.eq(cur_k == 0),
                             b_pad.eq(~cur_data | (cur_k >= cur_ntl * 4)),
                             b_trailer.eq(cur_k == SL),
                             b_hdr.eq(hdr)]
                with m.If(~busy):
                    m.d.sync += [busy.eq(1), k.eq(1), s_seq.eq(cur_seq), s_data.eq(cur_data),
                                 s_ntl.eq(cur_ntl), s_vcb.eq(cur_vcb)]
                    with m.If(have_data):
                        m.d.sync += send_ptr.eq(send_ptr + 1)
                        with m.If(send_ptr == hi_ptr):
                            m.d.sync += hi_ptr.eq(hi_ptr + 1)
                            sat_inc(m, tx_flits, 1)
                        with m.Else():
                            sat_inc(m, tx_replayed, 1)
                with m.Elif(k == SL):
                    m.d.sync += busy.eq(0)
                with m.Else():
                    m.d.sync += k.eq(k + 1)
        m.d.comb += self.o_nak_sent.eq(adv & cur_on & (cur_k == SL) & self.i_rx_nak)

        # stage B -> C (CRC): the foundation's framed CRC-32 (rtl.crc, amaranth.lib.crc
        # catalogue CRC32_ISO_HDLC), one slot per beat; the trailer is a partial last beat of
        # its 12 header bytes, so the result is the CRC of everything before the CRC field.
        proc = Crc("crc32", SLOT_BITS)
        m.submodules.crc = proc
        b_word = Signal(SLOT_BITS)
        m.d.comb += b_word.eq(Mux(b_trailer, b_hdr, Mux(b_pad, 0, rp.data)))
        m.d.comb += [proc.i_data.valid.eq(adv & b_valid),
                     proc.i_data.payload.data.eq(b_word),
                     proc.i_data.payload.first.eq(b_first),
                     proc.i_data.payload.last.eq(b_trailer),
                     proc.i_data.payload.n_bytes.eq(Mux(b_trailer, DL_HEADER.width // 8, 0)),
                     proc.o_crc.ready.eq(1)]        # so i_data.ready is always 1
        c_first = Signal()
        c_trailer = Signal()
        c_word = Signal(SLOT_BITS)
        with m.If(adv):
            m.d.sync += [c_valid.eq(b_valid), c_first.eq(b_first), c_trailer.eq(b_trailer),
                         c_word.eq(b_word)]
        # the trailer leaves with its CRC field filled in; the CRC is held until the next
        # flit's first slot is taken
        trailer = Signal(trailer_layout())
        m.d.comb += [trailer.hdr.eq(data.View(trailer_layout(), c_word).hdr),
                     trailer.crc.eq(proc.o_crc.payload.crc)]
        m.d.comb += [
            self.o_phy.valid.eq(c_valid),
            self.o_phy.payload.first.eq(c_first),
            self.o_phy.payload.err.eq(0),
            self.o_phy.payload.data.eq(Mux(c_trailer, trailer, c_word)),
        ]

        # ---------------- receive side effects: acks, naks, credits, bring-up --------------
        rh = self.i_rx_hdr
        good_raw = self.i_rx_good & (state != LINK_DOWN) & (state != LINK_FAILED)
        d_new = seq_dist(rh.ack, ack_ptr)
        d_hi = seq_dist(hi_ptr, ack_ptr)
        d_send = seq_dist(send_ptr, ack_ptr)
        ack_ok = d_new <= d_hi
        cred_ok = Signal()
        m.d.comb += cred_ok.eq(
            (((rh.credit0 - freed[0])[:CREDIT_BITS] <= (sent[0] - freed[0])[:CREDIT_BITS])
             & ((rh.credit1 - freed[1])[:CREDIT_BITS] <= (sent[1] - freed[1])[:CREDIT_BITS])))
        # Peer reset (docs/protocol.md, "Peer reset and link reset"): a good bring-up flit
        # marked ``fresh`` reaching a DL that is not fresh itself comes from a peer whose
        # state is zero. With ``peer_active`` we may have sent it data and taken its data
        # and acks: a peer reset, ended by a link reset. Without it we have sent no data
        # and taken none, so nothing of ours is beyond zero but what waits to be sent: if
        # the peer has not heard us (``init_seen`` = 0: a new life, or one that lost the
        # PHY before its own bring-up completed) we become fresh again and go through
        # bring-up (``refresh``); with ``init_seen`` it is the same life as ours, still in
        # bring-up, and the flit is taken as usual.
        fresh_in = good_raw & rh.init & rh.fresh & ~fresh
        peer_reset = Signal()
        refresh = Signal()
        m.d.comb += [peer_reset.eq(fresh_in & peer_active),
                     refresh.eq(fresh_in & ~peer_active & ~rh.init_seen)]
        # A fresh DL takes only what the peer sent in the same life: fresh bring-up flits,
        # and normal flits whose ack and credit returns fit its empty window, sent after
        # the peer heard this generation of ours (``heard``: the peer is ACTIVE after hearing
        # us, not a normal flit of its own from before its refresh, delayed in the
        # channel). Anything else is ignored whole.
        heard = Signal()
        m.d.comb += heard.eq(rh.gen_seen == gen)
        accept_normal = ~rh.init & ack_ok & cred_ok & limit_known & heard
        accept = ~fresh | Mux(rh.init, rh.fresh, accept_normal)
        good = Signal()
        m.d.comb += good.eq(good_raw & accept & ~peer_reset)
        m.d.comb += self.o_rx_accept.eq(~fresh | accept_normal)
        replays = Signal(16)
        timeouts = Signal(16)
        credit_err = Signal(8)
        m.d.comb += [self.o_replays.eq(replays), self.o_timeouts.eq(timeouts),
                     self.o_credit_err.eq(credit_err)]
        timer = Signal(range(T + 1))
        replay_pos = Signal(6)
        m.d.comb += self.o_replay_pos.eq(replay_pos)
        progress = Signal()
        nak_rw = Signal()             # a NAK asks for a rewind
        tmr_rw = Signal()             # the replay timer asks for one
        rewind = Signal()

        with m.If(good & ack_ok):
            m.d.sync += ack_ptr.eq(rh.ack)
            m.d.comb += progress.eq(d_new != 0)
            with m.If(d_new > d_send):
                m.d.sync += send_ptr.eq(rh.ack)
            m.d.comb += nak_rw.eq(rh.nak & (state == LINK_ACTIVE))

        # replay limit: rewinds since the last ack progress
        nprog = Signal(range(p.replay_limit + 1))
        over = Signal()
        m.d.comb += [rewind.eq(nak_rw | tmr_rw),
                     over.eq(rewind & ~progress & (nprog == p.replay_limit))]
        with m.If(rewind & ~over):
            m.d.sync += [send_ptr.eq(Mux(nak_rw, rh.ack, ack_ptr)),
                         replay_pos.eq(Mux(nak_rw, rh.ack, ack_ptr)[:d] if d else 0)]
            sat_inc(m, replays, 1)
            sat_inc(m, timeouts, tmr_rw)
        with m.If(state == LINK_FAILED):
            m.d.sync += nprog.eq(0)
        with m.Elif(progress):
            m.d.sync += nprog.eq(rewind)
        with m.Elif(rewind & ~over):
            m.d.sync += nprog.eq(nprog + 1)

        for v, cred in enumerate((rh.credit0, rh.credit1)):
            d_c = (cred - freed[v])[:CREDIT_BITS]
            d_o = (sent[v] - freed[v])[:CREDIT_BITS]
            with m.If(good & ~rh.init):
                with m.If(d_c <= d_o):
                    m.d.sync += freed[v].eq(cred)
                with m.Else():
                    sat_inc(m, credit_err, 1)
            with m.If(good & rh.init):
                m.d.sync += limit[v].eq(cred)
        with m.If(good & rh.init):
            m.d.sync += limit_known.eq(1)

        # replay timer
        with m.If((state != LINK_ACTIVE) | progress | nak_rw | (ack_ptr == hi_ptr)):
            m.d.sync += timer.eq(0)
        with m.Elif(timer == T - 1):      # never above: reset there (lint-clean at T = 1)
            m.d.sync += timer.eq(0)
            m.d.comb += tmr_rw.eq(1)
        with m.Else():
            m.d.sync += timer.eq(timer + 1)

        # progress watchdog: cycles without ack progress while flits are unacknowledged, in
        # every state but FAILED; the replay timer restarts at every bring-up, so a PHY that
        # drops more often than once per replay timeout would never reach the replay limit
        W = p.stall_after
        stall = Signal(range(W + 1))
        stall_fire = Signal()
        with m.If((state == LINK_FAILED) | progress | (ack_ptr == hi_ptr)):
            m.d.sync += stall.eq(0)
        with m.Elif(stall == W - 1):
            m.d.sync += stall.eq(0)
            m.d.comb += stall_fire.eq(1)
        with m.Else():
            m.d.sync += stall.eq(stall + 1)

        # link-lost timer: cycles without a good flit while ACTIVE, once the PHY has been up
        # since reset; in DOWN and INIT it keeps counting (a bring-up that does not reach
        # ACTIVE in time fails too, even while the peer's bring-up flits arrive)
        L = p.lost_after
        armed = Signal()
        lost = Signal(range(L + 1))
        lost_fire = Signal()
        with m.If(self.i_link_up):
            m.d.sync += armed.eq(1)
        with m.If((state == LINK_FAILED) | ~armed | (self.i_rx_good & (state == LINK_ACTIVE))):
            m.d.sync += lost.eq(0)
        with m.Elif(lost == L - 1):       # never above (lint-clean at L = 1)
            m.d.sync += lost.eq(0)
            m.d.comb += lost_fire.eq(1)
        with m.Else():
            m.d.sync += lost.eq(lost + 1)

        failed = Signal()
        failures = Signal(16)
        fail_replay = Signal(16)
        fail_lost = Signal(16)
        fail_peer = Signal(16)
        discarded = Signal(16)
        m.d.comb += [self.o_failed.eq(failed), self.o_failures.eq(failures),
                     self.o_fail_replay.eq(fail_replay), self.o_fail_lost.eq(fail_lost),
                     self.o_fail_peer.eq(fail_peer), self.o_discarded.eq(discarded),
                     self.o_unacked.eq(seq_dist(fill_ptr, ack_ptr))]
        H = p.holdoff
        hold = Signal(range(H + 1))
        no_progress = over | stall_fire      # both count as replay-limit failures
        fail = (no_progress | lost_fire | peer_reset) & (state != LINK_FAILED)

        # Link reset, prepared while FAILED: the fill stops (``room``), the unacknowledged
        # entries are counted out of the replay buffer one per cycle (``discarded``: their
        # TL flits), the receive side drains to a message boundary (``o_lr_drain``, ready
        # on ``i_lr_ready``); at the end of the hold-off the pulse ``o_link_reset`` clears
        # the sequence and credit state of both layers and both directions.
        walk = (state == LINK_FAILED) & lr_pend & (ack_ptr != fill_ptr)
        with m.If(walk):
            m.d.sync += ack_ptr.eq(ack_ptr + 1)
            sat_add = discarded + ntl_all.word_select(ack_ptr[:d] if d else Const(0, 1), nb)
            m.d.sync += discarded.eq(Mux(sat_add > 0xFFFF, 0xFFFF, sat_add))
        lr_done = lr_pend & (ack_ptr == fill_ptr) & self.i_lr_ready
        m.d.comb += [self.o_lr_drain.eq(lr_pend & (state == LINK_FAILED)),
                     self.o_link_reset.eq((state == LINK_FAILED) & (hold == H - 1) & lr_done)]

        # link state
        with m.If(state == LINK_FAILED):
            m.d.sync += seen.eq(0)
            with m.If(hold == H - 1):     # never above (lint-clean at H = 1)
                with m.If(~lr_pend | lr_done):
                    m.d.sync += [state.eq(LINK_DOWN), hold.eq(0)]
            with m.Else():
                m.d.sync += hold.eq(hold + 1)
        with m.Elif(fail):
            m.d.sync += [state.eq(LINK_FAILED), seen.eq(0), failed.eq(1), hold.eq(0),
                         gen.eq(gen + 1)]
            sat_inc(m, failures, 1)
            sat_inc(m, fail_replay, no_progress)
            sat_inc(m, fail_lost, lost_fire & ~no_progress)
            sat_inc(m, fail_peer, peer_reset & ~no_progress & ~lost_fire)
            with m.If(peer_reset):
                m.d.sync += lr_pend.eq(1)
        with m.Elif(~self.i_link_up):
            m.d.sync += [state.eq(LINK_DOWN), seen.eq(0)]
            with m.If(state != LINK_DOWN):
                m.d.sync += gen.eq(gen + 1)
        with m.Elif(state == LINK_DOWN):
            m.d.sync += [state.eq(LINK_INIT), seen.eq(0)]
        with m.Elif(refresh):
            m.d.sync += [state.eq(LINK_INIT), seen.eq(1), fresh.eq(1),
                         gen.eq(gen + 1)]
        with m.Elif(good):
            m.d.sync += seen.eq(1)
            # ACTIVE on a normal flit only if its ack lies in our window: a DL that lost
            # its state (a fresh one) is not taken ACTIVE by the peer's old-life flits
            with m.If((state == LINK_INIT) & Mux(rh.init, rh.init_seen, ack_ok)
                      & (limit_known | rh.init)):
                m.d.sync += [state.eq(LINK_ACTIVE), failed.eq(0), fresh.eq(0),
                             send_ptr.eq(Mux(ack_ok, rh.ack, ack_ptr))]
        with m.If(good):
            m.d.sync += gen_seen.eq(rh.gen)
        # the peer is ACTIVE in a life we share: a flit without ``fresh`` that it sent
        # after hearing this generation of ours. Our state is then the shared life's, not
        # zero, so we are not fresh any more (a fresh DL takes such a flit only as it goes
        # ACTIVE, unless a failure or a link drop wins in that cycle)
        with m.If(good & ~rh.fresh & heard):
            m.d.sync += [peer_active.eq(1), fresh.eq(0)]

        # the link reset itself (last: it overrides every other update of these registers)
        with m.If(self.o_link_reset):
            m.d.sync += [ack_ptr.eq(0), send_ptr.eq(0), fill_ptr.eq(0), hi_ptr.eq(0),
                         limit_known.eq(0), f_j.eq(0), f_k.eq(0), f_vc.eq(0), f_idle.eq(0),
                         nprog.eq(0), timer.eq(0), stall.eq(0), fresh.eq(1),
                         peer_active.eq(0), lr_pend.eq(0)]
            for v in range(2):
                m.d.sync += [sent[v].eq(0), freed[v].eq(0), limit[v].eq(0)]
            # the TL flits of the entry being filled
            sat_add = discarded + f_j
            m.d.sync += discarded.eq(Mux(sat_add > 0xFFFF, 0xFFFF, sat_add))
        return m
