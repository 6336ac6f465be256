"""Data-link layer, receive side: framing, CRC and sequence check, commit to VC buffers."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.crc import Crc
from fusionfabric.formats.chiplet import DL_HEADER, SEQ_BITS, SLOT_BITS
from .common import as_params, phy_layout, sat_inc, seq_dist, trailer_layout

__all__ = ["DataLinkRx"]


class DataLinkRx(wiring.Component):
    """Receives DL flits, keeps only good in-sequence ones, and hands their TL flits on.

    A word with ``first`` starts a flit (one already in progress is abandoned and counted
    in ``o_frame_err``); words outside a flit are ignored while hunting. The
    ``4 * tl_per_dl`` payload slots are written into one bank of a two-bank staging buffer;
    the whole flit, trailer included, goes through CRC-32 (the foundation's framed :class:`fusionfabric.rtl.crc.Crc`, one slot per
    beat), whose residue marks a good codeword. A flit with any word marked ``err`` (a
    slot the PHY adapter made from a row the PCS delivered damaged) fails as if its CRC
    did not match, whatever the residue. A good flit's header is passed to the transmitter
    (``o_good``, ``o_hdr``: acks, NAK, credits, bring-up). A good data flit whose sequence
    number is the expected one is committed: its TL flits are copied, in order, into the
    request (VC 0) or response (VC 1) receive FIFO, each ``4 * rx_credits`` slots deep,
    which the peer's credits guarantee never overflow (an overflow would be counted in
    ``o_overflow``). A good flit ahead of the expected number (a gap) or a failed flit (bad
    CRC or ``err``, counted in ``o_crc_err``) starts an error episode: one NAK is requested
    (``o_nak`` until ``i_nak_sent``); the episode ends when the expected flit arrives.
    Flits behind it (replayed copies) are dropped and counted in ``o_dup``.

    Parameters
    ----------
    params : fusionfabric.formats.chiplet.ChipletParams, optional
        The link parameters (checked when that object was built); None: the defaults.
        Used here: ``tl_per_dl`` (flit length) and ``rx_credits`` (receive FIFO depth);
        kept as ``self.params``.

    Members
    -------
    i_phy : In(stream.Signature(PHY_WORD))
        Received words; ``ready`` is always 1 (nothing is ever refused). ``err`` on any
        word of a flit fails that flit.
    i_link_up : In(1)
        Low: input ignored, framing reset.
    o_slot0, o_slot1 : Out(stream.Signature(128))
        The receive FIFOs of VC 0 and VC 1, toward the transaction layer.
    o_level0, o_level1 : Out(16)
        Slots in each receive FIFO (committed, not yet read).
    o_good, o_hdr : Out(1), Out(DL_HEADER)
        Pulse with the header of each good-CRC flit.
    o_expected : Out(10)
        Next expected sequence number (the cumulative ack).
    o_nak, i_nak_sent : Out(1), In(1)
    o_crc_err, o_seq_err, o_dup, o_frame_err, o_overflow, o_rx_flits : Out
        Saturating counters.
    i_accept : In(1)
        A good data flit may be committed (and sequence-checked); low, it is ignored whole
        (a fresh DL and the peer's old-life flits: docs/protocol.md, "Peer reset and link
        reset"). 1 when left unconnected.
    o_pending0, o_pending1 : Out(8)
        Slots of each VC the commit in progress has still to write (it always completes).
    i_clear, o_idle : In(1), Out(1)
        Link reset: nothing in the check and commit pipeline; the pulse that restarts the
        expected sequence, episode and NAK (the FIFOs are drained by the TL receivers).

    Timing
    ------
    A flit's trailer is checked 1 cycle after it arrives (``o_good`` then); committing
    starts in that cycle and writes TL flit slots into the FIFOs from 2 cycles after the
    trailer, one slot per cycle; first slot readable at ``o_slot*`` 4 cycles after the
    trailer (staging read, FIFO write, buffered FIFO read). So a slot reaches the TL
    ``4 * tl_per_dl + 1 - i + 4`` cycles after payload slot ``i`` arrived (store and
    forward). One word per cycle sustained. Reset clears the sequence state and FIFOs.
    """

    def __init__(self, params=None):
        self.params = as_params(params)
        super().__init__({
            "i_phy": In(stream.Signature(phy_layout())),
            "i_link_up": In(1),
            "o_slot0": Out(stream.Signature(SLOT_BITS)),
            "o_slot1": Out(stream.Signature(SLOT_BITS)),
            "o_level0": Out(16),
            "o_level1": Out(16),
            "o_good": Out(1),
            "o_hdr": Out(DL_HEADER.layout()),
            "o_expected": Out(SEQ_BITS),
            "o_nak": Out(1),
            "i_nak_sent": In(1),
            "o_crc_err": Out(16),
            "o_seq_err": Out(16),
            "o_dup": Out(16),
            "o_frame_err": Out(16),
            "o_overflow": Out(8),
            "o_rx_flits": Out(32),
            "i_accept": In(1, init=1),
            "i_clear": In(1),
            "o_idle": Out(1),
            "o_pending0": Out(8),
            "o_pending1": Out(8),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        N = p.tl_per_dl
        SL = 4 * N

        m.submodules.stage = stage = Memory(shape=SLOT_BITS, depth=2 * SL, init=[])
        wp = stage.write_port()
        rp = stage.read_port()
        fifos = []
        for v in range(2):
            q = fifo.SyncFIFOBuffered(width=SLOT_BITS, depth=4 * p.rx_credits)
            m.submodules[f"vc{v}"] = q
            fifos.append(q)
            o = (self.o_slot0, self.o_slot1)[v]
            m.d.comb += [o.valid.eq(q.r_rdy), o.payload.eq(q.r_data), q.r_en.eq(o.ready),
                         (self.o_level0, self.o_level1)[v].eq(q.level)]

        counters = {n: Signal(len(getattr(self, f"o_{n}")), name=n)
                    for n in ("crc_err", "seq_err", "dup", "frame_err", "overflow", "rx_flits")}
        for n, s in counters.items():
            m.d.comb += getattr(self, f"o_{n}").eq(s)

        # ---------------- framing and staging ----------------
        r_in = Signal()
        r_k = Signal(range(SL + 1))
        r_bank = Signal()
        chk = Signal()
        chk_bank = Signal()
        r_err = Signal()                # an err word in the flit being received
        chk_err = Signal()              # ... in the flit being checked
        hdr_reg = Signal(DL_HEADER.layout())
        w = self.i_phy.payload
        m.d.comb += self.i_phy.ready.eq(1)
        take = self.i_phy.valid & self.i_link_up
        proc = Crc("crc32", SLOT_BITS)
        m.submodules.crc = proc
        m.d.comb += [proc.i_data.valid.eq(take & (w.first | r_in)),
                     proc.i_data.payload.data.eq(w.data),
                     proc.i_data.payload.first.eq(w.first),
                     proc.i_data.payload.last.eq(r_in & ~w.first & (r_k == SL)),
                     proc.o_crc.ready.eq(1),        # so i_data.ready is always 1
                     wp.data.eq(w.data)]
        m.d.sync += chk.eq(0)
        with m.If(~self.i_link_up):
            m.d.sync += r_in.eq(0)
        with m.Elif(take & w.first):
            sat_inc(m, counters["frame_err"], r_in)
            m.d.comb += [wp.en.eq(1), wp.addr.eq(Mux(r_bank, 0, SL))]
            m.d.sync += [r_in.eq(1), r_k.eq(1), r_bank.eq(~r_bank), r_err.eq(w.err)]
        with m.Elif(take & r_in):
            with m.If(r_k == SL):
                m.d.sync += [r_in.eq(0), chk.eq(1), chk_bank.eq(r_bank),
                             chk_err.eq(r_err | w.err),
                             hdr_reg.eq(data.View(trailer_layout(), w.data).hdr)]
            with m.Else():
                m.d.comb += [wp.en.eq(1), wp.addr.eq(Mux(r_bank, SL, 0) + r_k)]
                m.d.sync += [r_k.eq(r_k + 1), r_err.eq(r_err | w.err)]

        # ---------------- check ----------------
        h = Signal(DL_HEADER.layout())
        m.d.comb += h.eq(hdr_reg)
        good = chk & proc.o_crc.payload.match & ~chk_err     # o_crc.valid == chk
        expected = Signal(SEQ_BITS)
        episode = Signal()
        nak = Signal()
        m.d.comb += [self.o_good.eq(good), self.o_hdr.eq(h), self.o_expected.eq(expected),
                     self.o_nak.eq(nak)]
        with m.If(self.i_nak_sent):
            m.d.sync += nak.eq(0)
        commit = Signal()
        dist = seq_dist(h.seq, expected)
        with m.If(good & h.data & self.i_accept):
            with m.If(dist == 0):
                m.d.comb += commit.eq(h.n_tl != 0)
                m.d.sync += [expected.eq(expected + 1), episode.eq(0)]
                sat_inc(m, counters["rx_flits"], 1)
            with m.Elif(dist < (1 << (SEQ_BITS - 1))):
                sat_inc(m, counters["seq_err"], 1)
                with m.If(~episode):
                    m.d.sync += [nak.eq(1), episode.eq(1)]
            with m.Else():
                sat_inc(m, counters["dup"], 1)
        with m.If(chk & (~proc.o_crc.payload.match | chk_err)):
            sat_inc(m, counters["crc_err"], 1)
            with m.If(~episode):
                m.d.sync += [nak.eq(1), episode.eq(1)]

        # ---------------- commit: staging -> VC FIFOs ----------------
        c_busy = Signal()
        c_k = Signal(range(SL + 1))
        c_last = Signal(range(SL + 1))
        c_bank = Signal()
        c_vcb = Signal(N)
        p_valid = Signal()
        p_vc = Signal()
        m.d.comb += [rp.addr.eq(Mux(c_bank, SL, 0) + c_k), rp.en.eq(1)]
        m.d.sync += [p_valid.eq(c_busy), p_vc.eq(c_vcb.bit_select(c_k[2:], 1))]
        with m.If(commit):
            m.d.sync += [c_busy.eq(1), c_k.eq(0), c_last.eq(h.n_tl * 4 - 1),
                         c_bank.eq(chk_bank), c_vcb.eq(h.vc[:N])]
        with m.Elif(c_busy):
            m.d.sync += c_k.eq(c_k + 1)
            with m.If(c_k == c_last):
                m.d.sync += c_busy.eq(0)
        for v, q in enumerate(fifos):
            m.d.comb += [q.w_data.eq(rp.data), q.w_en.eq(p_valid & (p_vc == v))]
            sat_inc(m, counters["overflow"], p_valid & (p_vc == v) & ~q.w_rdy)

        # link reset: nothing in the check or commit pipeline (o_idle), then i_clear
        # restarts the sequence state (the FIFOs are drained by the TL receivers)
        m.d.comb += self.o_idle.eq(~r_in & ~chk & ~c_busy & ~p_valid)

        # slots of each VC the commit in progress has still to write into the FIFO (the
        # commit always runs to its end): a whole-message receiver may count them as there
        for v, out in enumerate((self.o_pending0, self.o_pending1)):
            total = p_valid & (p_vc == v)
            for j in range(N):
                # (no comparison against 0: constant, Verilator UNSIGNED)
                left_j = Mux(c_k >= 4 * (j + 1), 0,
                             Mux(c_k <= 4 * j, 4, (4 * (j + 1) - c_k)[:3]) if j else
                             (4 - c_k)[:3])
                live = c_busy & (c_last >= 4 * j) if j else c_busy
                total = total + Mux(live & (c_vcb[j] == v), left_j, 0)
            m.d.comb += out.eq(total)
        with m.If(self.i_clear):
            m.d.sync += [expected.eq(0), episode.eq(0), nak.eq(0), r_in.eq(0)]
        return m
