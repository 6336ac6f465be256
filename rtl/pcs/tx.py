"""Multi-lane 64b/66b PCS transmitter (IEEE 802.3 cl. 49 encoding, cl. 82 distribution)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.pcs import (BlockType, SCRAMBLER_INIT, SYNC_CTRL, SYNC_DATA, WORD,
                                      check_params, check_serdes_width, control_word,
                                      marker_payload)
from fusionfabric.rtl.hdl import eq

from .common import bip8, scramble64
from .gearbox import TxGearbox

__all__ = ["PcsTx"]


class PcsTx(wiring.Component):
    """Encode, scramble, stripe and mark a word stream onto ``n_lanes`` PCS lanes.

    Each accepted beat is one row of ``n_lanes`` words (word ``k`` of the beat is the
    ``k``-th in stream order and goes to lane ``k``). Each word becomes a 66-bit block
    (sync ``01`` data / ``10`` control in transmission order, IEEE 802.3 cl. 49.2.4); the
    payloads are scrambled in stream order with G(x) = 1 + x^39 + x^58 (cl. 49.2.6, state
    all ones after reset); every ``am_period`` rows one row of alignment markers
    (cl. 82.2.7, Table 82-2 values, BIP3 per Table 82-4 over the lane's blocks from and
    including the previous marker) replaces the data row. Bit-exact with
    :func:`fusionfabric.sim.pcs.transmit`.

    Parameters
    ----------
    n_lanes : int
        PCS lanes, 1..20 (one marker value per lane from Table 82-2).
    am_period : int
        Rows per marker period: one marker row then ``am_period - 1`` data rows
        (16384 in 802.3 cl. 82).
    serdes_width : int
        Bits per lane per cycle on ``o_lanes``: 66 (one block per lane per cycle) or 32/64
        through a :class:`~rtl.pcs.gearbox.TxGearbox` per lane (each W-bit word is the next
        W bits of the lane's block stream, :func:`fusionfabric.sim.pcs.serialize`).

    Members
    -------
    i_data : In(stream.Signature(ArrayLayout(WORD, n_lanes)))
        Client words: ``data`` (64 bits, bit 0 first on the wire) and ``ctrl``. A control
        word carries a :class:`fusionfabric.formats.pcs.BlockType` in its low octet.
    o_lanes : Out(serdes_width).array(n_lanes)
        One W-bit word per lane per cycle, bit 0 first on the wire (W = 66: one block).

    Timing
    ------
    A beat accepted at cycle ``t`` appears on ``o_lanes`` at cycle ``t + 1`` (latency 1).
    With a gearbox a row register sits before it (the encoder runs one row ahead): the
    beat's first bit is on ``o_lanes`` at the next row cycle after ``t`` plus one (``t + 2``
    or ``t + 3``) and its last bit one (W = 64) or two (W = 32) cycles later. Row cycles are the cycles where the gearbox takes a block
    (:func:`fusionfabric.sim.pcs.tx_takes`: every cycle for W = 66, else W/66 of them); ``i_data.ready``
    is high in row cycles except marker rows (one row in ``am_period``), and low in the
    cycles where the gearbox has no room, so no word is ever lost. When the client offers
    nothing in a row cycle, a row of IDLE blocks is sent. Throughput: ``n_lanes * W/66``
    words per cycle, efficiency ``64/66 * (1 - 1/am_period)`` of the line bits for every W.
    Reset: row counter 0 (the first row after reset is a marker row with BIP3 = 0),
    scrambler state all ones, gearbox empty.
    """

    def __init__(self, n_lanes: int = 4, am_period: int = 16384, serdes_width: int = 66):
        check_params(n_lanes, am_period)
        check_serdes_width(serdes_width)
        self.n_lanes = n_lanes
        self.am_period = am_period
        self.serdes_width = serdes_width
        super().__init__({
            "i_data": In(stream.Signature(data.ArrayLayout(WORD.layout(), n_lanes))),
            "o_lanes": Out(serdes_width).array(n_lanes),
        })

    def elaborate(self, platform):
        m = Module()
        n, P = self.n_lanes, self.am_period
        # W < 66: a row register ("pend") between the encoder and the gearbox keeps the
        # scrambler chain and the gearbox's shifter in different cycles. It starts out
        # holding row 0 (the first marker row, BIP3 = 0: a constant), so the line carries
        # exactly the same bits as without it; the encoder runs one row ahead.
        piped = self.serdes_width != 66
        marker_bip = 0x08  # BIP8 of any marker: its octets cancel, sync '10' sets bit 3
        row = Signal(range(P), init=1 % P if piped else 0)
        state = Signal(58, init=SCRAMBLER_INIT)
        # BIP3 accumulators (timing: lagging one row, so the scrambler's output is only
        # registered in its cycle): a lane's BIP over the blocks sent since its last marker
        # is acc ^ bip8(last), "last" being its block of the last row cycle (0, whose BIP8
        # is 0, after a marker row: the marker's own part is in acc)
        accs = [Signal(8, name=f"bip{k}", init=marker_bip if piped else 0) for k in range(n)]
        lasts = [Signal(66, name=f"bip_last{k}") for k in range(n)]
        # is_marker registered (row == 0 after the next row cycle's count)
        is_marker = Signal(init=int(not piped or P == 1))
        take = Signal()
        gearbox = m.submodules.gearbox = TxGearbox(n, self.serdes_width)
        advance = gearbox.o_take      # a row cycle: the gearbox takes a row of blocks
        m.d.comb += [
            self.i_data.ready.eq(advance & ~is_marker),
            take.eq(self.i_data.valid & advance & ~is_marker),
        ]
        for k in range(n):
            m.d.comb += self.o_lanes[k].eq(gearbox.o_lanes[k])
        with m.If(advance):
            m.d.sync += [row.eq(Mux(row == P - 1, 0, row + 1)), is_marker.eq(row == P - 1)]
        idle = control_word(BlockType.IDLE)
        words, syncs = [], []
        for k in range(n):
            w = self.i_data.payload[k]
            d = Signal(64, name=f"word{k}")
            c = Signal(name=f"ctrl{k}")
            with m.If(take):
                m.d.comb += [d.eq(w.data), c.eq(w.ctrl)]
            with m.Else():
                m.d.comb += [d.eq(idle), c.eq(1)]
            words.append(d)
            syncs.append(Signal(2, name=f"sync{k}"))
            m.d.comb += syncs[k].eq(Mux(c, SYNC_CTRL, SYNC_DATA))
        # one 64-bit scrambler step per lane in stream order, word-level XORs of slices
        # (state kept in chronological bit order; all ones after reset either way)
        scr = Signal(64 * n)
        st = state
        for k in range(n):
            out, st_next = scramble64(st, words[k])
            st = Signal(58, name=f"scr_state{k}")
            m.d.comb += [scr[64 * k:64 * k + 64].eq(out), st.eq(st_next)]
        next_state = st
        for k in range(n):
            block = Signal(66, name=f"block{k}")
            m.d.comb += block.eq(Cat(syncs[k], scr[64 * k:64 * k + 64]))
            base = marker_payload(k, 0)
            bip = Signal(8, name=f"bip_sum{k}")
            m.d.comb += bip.eq(accs[k] ^ bip8(lasts[k]))
            marker = Cat(Const(SYNC_CTRL, 2),
                         Const(base & 0xFFFFFF, 24), bip,
                         Const((base >> 32) & 0xFFFFFF, 24), ~bip)
            out = Signal(66, name=f"out{k}")
            if piped:
                first = marker_payload(k, 0)
                pend = Signal(66, name=f"pend{k}", init=SYNC_CTRL | first << 2)
                m.d.comb += gearbox.i_blocks[k].eq(pend)
                with m.If(advance):
                    m.d.sync += pend.eq(out)
            else:
                m.d.comb += gearbox.i_blocks[k].eq(out)
            with m.If(is_marker):
                m.d.comb += out.eq(marker)
                with m.If(advance):
                    m.d.sync += [accs[k].eq(marker_bip), lasts[k].eq(0)]
            with m.Else():
                m.d.comb += out.eq(block)
                with m.If(advance):
                    m.d.sync += [accs[k].eq(bip), lasts[k].eq(block)]
        with m.If(~is_marker & advance):
            m.d.sync += state.eq(next_state)
        return m

