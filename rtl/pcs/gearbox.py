"""Lane gearboxes between 66-bit blocks and a narrower SerDes word (32 or 64 bits)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.pcs import check_serdes_width

__all__ = ["TxGearbox", "RxGearbox"]


def _check(n_lanes, serdes_width):
    if not isinstance(n_lanes, int) or n_lanes < 1:
        raise ValueError(f"n_lanes={n_lanes!r} must be a positive integer")
    check_serdes_width(serdes_width)


class TxGearbox(wiring.Component):
    """66→W gearbox for ``n_lanes`` lanes with one common fill count.

    Each lane's bit stream is its blocks back to back, bit 0 first; every cycle the next W
    bits go out on ``o_lanes`` (:func:`fusionfabric.sim.pcs.serialize`). ``f`` bits (the same for every
    lane) are buffered; when ``f < W`` the cycle takes the block on ``i_blocks``
    (``o_take`` high, ``f += 66 - W``), else it does not (``f -= W``): :func:`fusionfabric.sim.pcs.tx_takes`,
    rate W/66. The producer must present the next block whenever ``o_take`` is high and
    advance only then; nothing is ever dropped or repeated.

    Parameters
    ----------
    n_lanes : int
        Lanes.
    serdes_width : int
        W: 32, 64 or 66 (66: a plain output register, ``o_take`` always high).

    Members
    -------
    i_blocks : In(66).array(n_lanes)
        The next block of each lane (read in ``o_take`` cycles).
    o_take : Out(1)
        Combinational: this cycle consumes ``i_blocks``.
    o_lanes : Out(serdes_width).array(n_lanes)
        Registered W-bit words, bit 0 first on the wire.

    Timing
    ------
    The first bit of a block taken at cycle ``t`` is on ``o_lanes`` at ``t + 1`` (bit
    position ``f``); its last bit at ``t + ceil((f + 66) / W)``: ``t + 1`` for W = 66,
    ``t + 2`` for W = 64, ``t + 3`` for W = 32 (``f < W`` is even). Reset: ``f = 0``,
    buffer and ``o_lanes`` zero.
    """

    def __init__(self, n_lanes: int = 4, serdes_width: int = 64):
        _check(n_lanes, serdes_width)
        self.n_lanes, self.serdes_width = n_lanes, serdes_width
        super().__init__({
            "i_blocks": In(66).array(n_lanes),
            "o_take": Out(1),
            "o_lanes": Out(serdes_width).array(n_lanes),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.serdes_width
        if W == 66:
            m.d.comb += self.o_take.eq(1)
            m.d.sync += [self.o_lanes[k].eq(self.i_blocks[k]) for k in range(self.n_lanes)]
            return m
        # the fill is always even (66 and W are): keep half of it, and shift by 2*half.
        # A block is only taken when f < W, so the shift needs log2(W) - 1 bits of it.
        half = Signal(range(33), name="fill_half")
        take = self.o_take
        m.d.comb += take.eq(half < W // 2)
        m.d.sync += half.eq(Mux(take, half + (66 - W) // 2, half - W // 2))
        shift = Cat(Const(0, 1), half[:(W // 2 - 1).bit_length()])
        for k in range(self.n_lanes):
            buf = Signal(65, name=f"buf{k}")
            cat = Signal(66 + W, name=f"cat{k}")
            with m.If(take):
                m.d.comb += cat.eq(buf | (self.i_blocks[k] << shift))
            with m.Else():
                m.d.comb += cat.eq(buf)
            m.d.sync += [self.o_lanes[k].eq(cat[:W]), buf.eq(cat[W:W + 65])]
        return m


class RxGearbox(wiring.Component):
    """W→66 gearbox for ``n_lanes`` lanes with one common fill count.

    Every lane brings W bits per cycle, so one fill count ``f`` serves all lanes. With
    ``cat = buf | i_lanes << f``: when ``f + W >= 66`` the oldest 66 bits of each lane are
    registered on ``o_chunks`` with ``o_valid`` high and ``f += W - 66``; else the word is
    appended (``f += W``, ``o_valid`` low). The chunks are unaligned: block alignment is the
    bit slip of :class:`~rtl.pcs.lock.BlockLock` downstream, which cuts the block at its
    ``offset`` (0..65) out of the previous and current chunk, and which runs only in the
    cycles after ``o_valid`` (its clock enable). Bit-exact with :class:`fusionfabric.sim.pcs.RxGearbox`.

    Parameters
    ----------
    n_lanes : int
        Lanes.
    serdes_width : int
        W: 32 or 64 (66 needs no gearbox; it is accepted and gives a plain register).

    Members
    -------
    i_lanes : In(serdes_width).array(n_lanes)
        Raw W-bit words, bit 0 first on the wire.
    o_chunks : Out(66).array(n_lanes)
        66 consecutive bits of each lane's stream (registered).
    o_valid : Out(1)
        ``o_chunks`` was loaded at the last edge (rate W/66).

    Timing
    ------
    A chunk whose last bit arrives on ``i_lanes`` at cycle ``t`` is on ``o_chunks`` at
    ``t + 1``. Reset: ``f = 0``, buffers empty, ``o_valid`` low.
    """

    def __init__(self, n_lanes: int = 4, serdes_width: int = 64):
        _check(n_lanes, serdes_width)
        self.n_lanes, self.serdes_width = n_lanes, serdes_width
        super().__init__({
            "i_lanes": In(serdes_width).array(n_lanes),
            "o_chunks": Out(66).array(n_lanes),
            "o_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.serdes_width
        if W == 66:
            m.d.sync += self.o_valid.eq(1)
            m.d.sync += [self.o_chunks[k].eq(self.i_lanes[k]) for k in range(self.n_lanes)]
            return m
        # the fill is always even (66 and W are): keep half of it, shift by 2*half
        half = Signal(range(33), name="fill_half")
        full = Signal()
        m.d.comb += full.eq(half + W // 2 >= 33)
        m.d.sync += [half.eq(Mux(full, half + W // 2 - 33, half + W // 2)),
                     self.o_valid.eq(full)]
        shift = Cat(Const(0, 1), half)
        for k in range(self.n_lanes):
            buf = Signal(65, name=f"buf{k}")
            cat = Signal(66 + W, name=f"cat{k}")
            m.d.comb += cat.eq(buf | (self.i_lanes[k] << shift))
            with m.If(full):
                m.d.sync += [self.o_chunks[k].eq(cat[:66]), buf.eq(cat[66:])]
            with m.Else():
                m.d.sync += buf.eq(cat[:65])
        return m
