"""Per-lane bit alignment, block lock and BER monitor (IEEE 802.3 cl. 49.2.13.2)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.hdl import eq
from fusionfabric.formats.pcs import HI_BER_LIMIT, LOCK_BAD, LOCK_WINDOW, check_params

__all__ = ["BlockLock"]


class BlockLock(wiring.Component):
    """Find the 66-bit block boundary in a raw lane by sync-header hunting with bit slip.

    The receive word is an unaligned 66-bit chunk per cycle (bit 0 first on the wire). A
    barrel shifter cuts the block at ``offset`` out of the previous and current chunk. The
    lock state machine is Figure 49-12 with one header tested per cycle: 64 consecutive
    valid headers (``01``/``10``) give ``block_lock``; while unlocked every invalid header
    slips one bit; while locked, 16 invalid headers within a window of 64 lose lock and slip.
    The BER monitor (Figure 49-13) counts invalid headers while locked and raises
    ``o_hi_ber`` when 16 fall in one window of ``ber_window`` blocks (125 us at 10.3125 GBd
    is :data:`fusionfabric.formats.pcs.BER_WINDOW_10G` = 19531 blocks); it clears at the end of a window with
    fewer than 16.

    Parameters
    ----------
    ber_window : int
        BER monitor window in blocks (cycles).

    Members
    -------
    i_chunk : In(66)
        Raw lane bits of this cycle.
    o_block : Out(66)
        The block tested in the previous cycle (registered).
    o_ok : Out(1)
        ``block_lock`` as it was when ``o_block`` was tested.
    o_lock, o_hi_ber : Out(1)
        Block lock and high-BER flag.
    o_offset : Out(range(66))
        Current bit offset of the block boundary.
    o_slips : Out(16)
        Bit slips performed since reset (saturating).

    Timing
    ------
    ``o_block`` is the block whose last bit arrived on ``i_chunk`` one cycle earlier at
    offset 0 (``offset > 0`` takes ``66 - offset`` bits of the previous chunk and ``offset``
    of the current one, so the block is complete one cycle earlier in wire time). ``o_lock``
    changes the cycle after the header that decides it; a slip takes effect on the next
    block. Relock after a slip of ``k`` bits: typically ``~2 min(k, 66-k) + 64`` blocks
    after the loss (the hunt moves one bit per invalid header). Reset: offset 0, unlocked.
    """

    def __init__(self, ber_window: int = 19531):
        check_params(ber_window=ber_window)
        self.ber_window = ber_window
        super().__init__({
            "i_chunk": In(66),
            "o_block": Out(66),
            "o_ok": Out(1),
            "o_lock": Out(1),
            "o_hi_ber": Out(1),
            "o_offset": Out(range(66)),
            "o_slips": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        prev = Signal(66)
        offset = self.o_offset
        lock = self.o_lock
        sh_cnt = Signal(range(LOCK_WINDOW))
        sh_bad = Signal(range(LOCK_BAD))
        ber_cnt = Signal(range(HI_BER_LIMIT + 1))
        ber_timer = Signal(range(self.ber_window))
        blk = Signal(66)
        valid = Signal()
        # the header test reads one bit of a register of adjacent-bit XORs of the previous
        # chunk (its bits offset and offset + 1 are the header for every offset but 65,
        # whose second header bit is the current chunk's first), not the barrel shifter's
        # output (timing: the test decides lock and slip in this cycle)
        prev_x = Signal(65)
        m.d.comb += [
            blk.eq((Cat(prev, self.i_chunk) >> offset)[:66]),
            valid.eq(Mux(offset == 65, prev[65] ^ self.i_chunk[0],
                         prev_x.bit_select(offset, 1))),
        ]
        m.d.sync += [prev.eq(self.i_chunk), prev_x.eq(self.i_chunk[:65] ^ self.i_chunk[1:]),
                     self.o_block.eq(blk), self.o_ok.eq(lock)]
        # every comparison below is made on registers alone, so the header test only
        # selects between ready results (timing)
        cnt1 = sh_cnt + 1
        window_end = Signal()
        m.d.comb += window_end.eq(sh_cnt == LOCK_WINDOW - 1)
        with m.If(valid):
            with m.If(window_end):
                m.d.sync += [sh_cnt.eq(0), sh_bad.eq(0)]
                with m.If(eq(sh_bad, 0)):
                    m.d.sync += lock.eq(1)
            with m.Else():
                m.d.sync += sh_cnt.eq(cnt1)
        with m.Else():
            with m.If((sh_bad == LOCK_BAD - 1) | ~lock):
                m.d.sync += [offset.eq(Mux(offset == 65, 0, offset + 1)), lock.eq(0),
                             sh_cnt.eq(0), sh_bad.eq(0)]
                with m.If(self.o_slips != 0xFFFF):
                    m.d.sync += self.o_slips.eq(self.o_slips + 1)
            with m.Elif(window_end):
                m.d.sync += [sh_cnt.eq(0), sh_bad.eq(0)]
            with m.Else():
                m.d.sync += [sh_cnt.eq(cnt1), sh_bad.eq(sh_bad + 1)]
        # BER monitor
        # count = min(ber_cnt + invalid, HI_BER_LIMIT); hit = ber_cnt + invalid >= HI_BER_LIMIT
        ber_full = Signal()
        ber_hit = Signal()
        ber_sat = Signal(range(HI_BER_LIMIT + 1))
        m.d.comb += [
            ber_full.eq(ber_cnt == HI_BER_LIMIT),
            ber_hit.eq((ber_cnt >= HI_BER_LIMIT) | ((ber_cnt == HI_BER_LIMIT - 1) & ~valid)),
            ber_sat.eq(Mux(valid | ber_full, ber_cnt, ber_cnt + 1)),
        ]
        with m.If(~lock):
            m.d.sync += [ber_cnt.eq(0), ber_timer.eq(0), self.o_hi_ber.eq(0)]
        with m.Elif(ber_timer == self.ber_window - 1):
            m.d.sync += [ber_timer.eq(0), ber_cnt.eq(0), self.o_hi_ber.eq(ber_hit)]
        with m.Else():
            m.d.sync += [ber_timer.eq(ber_timer + 1), ber_cnt.eq(ber_sat),
                         self.o_hi_ber.eq(self.o_hi_ber | ber_hit)]
        return m
