"""PHY adapters between the chiplet's DL (128-bit slots, ``first``, ``err``) and a 2-lane or
1-lane 64b/66b PCS (``rtl/pcs``): :class:`PhyToPcs` (transmit) and :class:`PcsToPhy`
(receive).

DL flits have a fixed length (``4 * tl_per_dl + 1`` slots), so the flit delimiter does not
need a row of its own before every flit: a flit that follows the previous flit back to back
(no IDLE row between them; marker rows do not count, the PCS receiver removes them) is
delimited by position alone, and a START row is sent only before a flit that does not
follow back to back, and at least once every ``start_every`` flits so that a receiver that
lost the count (a lost or extra row, a realignment) finds the boundaries again. The receive
adapter marks (``err``) every slot it makes from a row the PCS delivered damaged and ends a
chain at a damaged row, so PCS-flagged damage fails a flit deterministically instead of by
the chance of its CRC. The rules are those of :class:`fusionfabric.sim.chiplet.PhyTx` /
:class:`fusionfabric.sim.chiplet.PhyRx` (the models the unit tests compare against). See
docs/protocol.md, section "PHY mapping and the PCS".

With ``n_lanes = 2`` a slot is one PCS row of two 64-bit words. With ``n_lanes = 1`` the
same rows go out one word per PCS row: a slot as two rows (low word, then high word), a
START row as one START word, an IDLE row as one IDLE word; the receiver pairs the words
back into rows (a START word, and an IDLE word where a slot's low word would be, are rows
of their own) and applies the 2-lane rules to them. A 1-lane link thus moves a slot every
two cycles: half the rate of a 2-lane link.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import SLOT_BITS, check_phy_params, dl_flit_slots
from fusionfabric.formats.pcs import CONTROL, WORD, BlockType, control_word

from .common import PHY_WORD


def _row_words():
    """A slot as the data words of one PCS row (word 0 in the low bits)."""
    return data.ArrayLayout(WORD.widths["data"], SLOT_BITS // WORD.widths["data"])


def _block_type(word):
    """The block-type field of a control word (``formats.pcs.CONTROL``)."""
    return data.View(CONTROL.layout(), word).type


#: PCS lanes per direction the adapters map a slot onto: 2 (a slot per row) or 1 (a slot
#: in two rows).
PHY_LANES = (1, 2)


def _check_lanes(n_lanes):
    if n_lanes not in PHY_LANES or isinstance(n_lanes, bool):
        raise ValueError(f"n_lanes={n_lanes!r} must be 1 or 2 (a 128-bit slot is one row of "
                         "2 lanes or two rows of 1 lane)")


__all__ = ["PhyToPcs", "PcsToPhy", "PHY_LANES"]


class PhyToPcs(wiring.Component):
    """Chiplet PHY words → 2-lane PCS rows: one data row (two 64-bit data words) per slot,
    and a START row (START block, IDLE block) before a DL flit only when needed. With
    ``n_lanes = 1``: two 1-word rows per slot (low word first) and a START row of one
    START word.

    A flit's first slot (``first``) goes out without a START row when the previous row
    this adapter sent was the last slot of a complete flit (so no IDLE row came between;
    PCS marker rows may) and fewer than ``start_every`` flits have gone out since the last
    START row; otherwise a START row goes first. ``start_every = 1`` puts a START row before
    every flit (the original framing, one extra row per flit).

    Parameters
    ----------
    tl_per_dl : int
        The chiplet's ``tl_per_dl`` (flit length ``4 * tl_per_dl + 1`` slots); 1..32.
    start_every : int
        A START row at least once every this many DL flits (1..4096).
    n_lanes : int
        PCS lanes: 2 (a slot per row) or 1 (a slot in two rows).

    Members
    -------
    i_word : In(stream.Signature(PHY_WORD))
        DL words from the chiplet's ``o_phy`` (``err``, always 0 from the DL, is not
        sent); ``ready`` is low for START rows, while the PCS transmitter sends a marker
        row and (1 lane) while the slot's low word goes out. A word once offered must stay
        (the stream rule; the DL's ``o_phy`` keeps it).
    o_row : Out(stream.Signature(ArrayLayout(WORD, n_lanes)))
        Rows to ``PcsTx.i_data``; ``valid`` low makes the PCS send an IDLE row, which
        breaks the back-to-back chain.

    Timing
    ------
    Combinational (the PCS transmitter registers). Throughput: one slot per row (per two
    rows with 1 lane), plus one START row per ``start_every`` flits when flits are back to
    back (and one per flit otherwise). Reset: no chain (the first flit gets a START row).
    """

    def __init__(self, tl_per_dl: int = 4, start_every: int = 16, n_lanes: int = 2):
        check_phy_params(tl_per_dl, start_every)
        _check_lanes(n_lanes)
        self.tl_per_dl = tl_per_dl
        self.start_every = start_every
        self.n_lanes = n_lanes
        super().__init__({
            "i_word": In(stream.Signature(PHY_WORD.layout())),
            "o_row": Out(stream.Signature(data.ArrayLayout(WORD.layout(), n_lanes))),
        })

    def elaborate(self, platform):
        if self.n_lanes == 1:
            return self._elaborate_1()
        m = Module()
        L = dl_flit_slots(self.tl_per_dl)
        K = self.start_every
        pos = Signal(range(L + 1))       # slots of the current flit sent so far
        chain = Signal()                 # the last row sent ended a complete flit
        since = Signal(range(K + 1))     # flits begun since the last START row (saturating)
        started = Signal()               # START row for the current first slot already sent
        w = self.i_word.payload
        words = data.View(_row_words(), w.data)
        row = self.o_row.payload
        take = self.o_row.valid & self.o_row.ready
        need_start = w.first & ~started & (~chain | (since == K))
        m.d.comb += self.o_row.valid.eq(self.i_word.valid)
        with m.If(need_start):
            m.d.comb += [row[0].data.eq(control_word(BlockType.START)), row[0].ctrl.eq(1),
                         row[1].data.eq(control_word(BlockType.IDLE)), row[1].ctrl.eq(1)]
            with m.If(take):
                m.d.sync += [started.eq(1), since.eq(0), chain.eq(0)]
        with m.Else():
            m.d.comb += [row[0].data.eq(words[0]), row[1].data.eq(words[1]),
                         self.i_word.ready.eq(self.o_row.ready)]
            with m.If(take):
                m.d.sync += started.eq(0)
                with m.If(w.first):
                    m.d.sync += [pos.eq(1), chain.eq(0)]
                    with m.If(since != K):
                        m.d.sync += since.eq(since + 1)
                with m.Elif(pos != 0):
                    m.d.sync += [pos.eq(Mux(pos == L - 1, 0, pos + 1)), chain.eq(pos == L - 1)]
                with m.Else():
                    m.d.sync += chain.eq(0)                  # a word outside a flit
        # an IDLE row goes out (PCS ready, nothing offered): the chain is broken
        with m.If(self.o_row.ready & ~self.o_row.valid):
            m.d.sync += chain.eq(0)
        return m

    def _elaborate_1(self):
        """1 lane: the rows of the 2-lane adapter, one word per row (``half``: the slot's
        low word has gone out)."""
        m = Module()
        L = dl_flit_slots(self.tl_per_dl)
        K = self.start_every
        pos = Signal(range(L + 1))
        chain = Signal()
        since = Signal(range(K + 1))
        started = Signal()
        half = Signal()
        w = self.i_word.payload
        words = data.View(_row_words(), w.data)
        row = self.o_row.payload
        take = self.o_row.valid & self.o_row.ready
        need_start = ~half & w.first & ~started & (~chain | (since == K))
        m.d.comb += self.o_row.valid.eq(self.i_word.valid)
        with m.If(need_start):
            m.d.comb += [row[0].data.eq(control_word(BlockType.START)), row[0].ctrl.eq(1)]
            with m.If(take):
                m.d.sync += [started.eq(1), since.eq(0), chain.eq(0)]
        with m.Elif(~half):
            m.d.comb += row[0].data.eq(words[0])
            with m.If(take):
                m.d.sync += half.eq(1)
        with m.Else():
            m.d.comb += [row[0].data.eq(words[1]), self.i_word.ready.eq(self.o_row.ready)]
            with m.If(take):
                m.d.sync += [half.eq(0), started.eq(0)]
                with m.If(w.first):
                    m.d.sync += [pos.eq(1), chain.eq(0)]
                    with m.If(since != K):
                        m.d.sync += since.eq(since + 1)
                with m.Elif(pos != 0):
                    m.d.sync += [pos.eq(Mux(pos == L - 1, 0, pos + 1)), chain.eq(pos == L - 1)]
                with m.Else():
                    m.d.sync += chain.eq(0)
        with m.If(self.o_row.ready & ~self.o_row.valid):
            m.d.sync += chain.eq(0)
        return m


class PcsToPhy(wiring.Component):
    """2-lane (or 1-lane) PCS rows → chiplet PHY words, finding DL flit boundaries by START
    rows and by position, and flagging (``err``) every slot made from a row the PCS
    delivered damaged.

    A *clean data row* has two data words; a *damaged row* is any other row that is not a
    START row (lane 0 a START block) or an IDLE row (two IDLE blocks): an ERROR word (bad
    sync header, unknown control type) or any other control block in either lane. A START
    row arms ``first`` for the next row (the transmitter always sends the first slot right
    after it). After the last slot of a flit (``4 * tl_per_dl + 1`` slots), a clean data
    row that follows directly is the first slot of the next (chained) flit; an IDLE row or
    a damaged row there ends the chain, and the receiver waits for the next START row (the
    rows until then pass with ``first = 0``, which the DL ignores; it replays what is
    lost). Inside a flit (and for the row after a START row), every non-START row counts as
    one slot, so a damaged row does not shift the boundaries; a slot made from a row that
    is not a clean data row carries ``err = 1``, and the DL fails the whole flit without
    relying on its CRC. Outside a flit, clean data rows pass with ``first = 0`` and
    ``err = 0`` until a START row. If the count is ever wrong (a row lost or added, e.g. at
    a PCS realignment), the next START row (at least one every ``start_every`` flits from
    :class:`PhyToPcs`) restores it. While ``i_link_up`` is low (the PCS receiver lost block
    lock, marker lock or alignment, so rows are being lost) the adapter forgets its place
    and, once rows flow again, waits for a START row: flits after a realignment are never
    misframed.

    With ``n_lanes = 1`` each PCS row is one word and a *pairing* step rebuilds the rows
    above: a START word is a START row; an IDLE word where a slot's low word would be is an
    IDLE row; any other word is held and, with the next word, makes a row (a data word and
    a data word: a clean data row; anything else, e.g. an IDLE or ERROR word in a slot's
    high half: a damaged row). A START word drops a held word; ``i_link_up`` low forgets
    it.

    Parameters
    ----------
    tl_per_dl : int
        The chiplet's ``tl_per_dl``; 1..32 (must equal the transmitter's).
    n_lanes : int
        PCS lanes: 2 or 1 (must equal the transmitter's).

    Members
    -------
    i_row : In(Signature(payload=ArrayLayout(WORD, n_lanes), valid=1))
        Rows from ``PcsRx.o_data`` (always ready).
    o_word : Out(stream.Signature(PHY_WORD))
        Words to the chiplet's ``i_phy`` (which is always ready); ``err`` marks a slot
        made from a damaged row.
    i_link_up : In(1, init=1)
        The PCS receiver's ``o_link_up``; low: rows ignored, no flit, not armed. Left
        unconnected it stays 1 and the adapter relies on the next START row alone.

    Timing
    ------
    1 cycle (registered): a word comes out the cycle after the row (1 lane: the row's
    last word) arrived. One word per row (per two rows with 1 lane). Reset, and
    ``i_link_up`` low: no flit, not armed (waits for a START).
    """

    def __init__(self, tl_per_dl: int = 4, n_lanes: int = 2):
        check_phy_params(tl_per_dl, 1)
        _check_lanes(n_lanes)
        self.tl_per_dl = tl_per_dl
        self.n_lanes = n_lanes
        super().__init__({
            "i_row": In(wiring.Signature({
                "payload": Out(data.ArrayLayout(WORD.layout(), n_lanes)), "valid": Out(1)})),
            "o_word": Out(stream.Signature(PHY_WORD.layout())),
            "i_link_up": In(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        L = dl_flit_slots(self.tl_per_dl)
        armed = Signal()
        pos = Signal(range(L + 1))       # 0: outside a flit; L: a flit just ended
        if self.n_lanes == 2:
            r, row_valid = self.i_row.payload, self.i_row.valid
        else:
            r, row_valid = self._pair(m)
        is_data = ~r[0].ctrl & ~r[1].ctrl
        is_start = r[0].ctrl & (_block_type(r[0].data) == BlockType.START)
        words = data.View(_row_words(), self.o_word.payload.data)
        m.d.sync += self.o_word.valid.eq(0)
        m.d.sync += [words[0].eq(r[0].data), words[1].eq(r[1].data)]

        def slot(first):
            m.d.sync += [self.o_word.valid.eq(1), self.o_word.payload.first.eq(first),
                         self.o_word.payload.err.eq(~is_data)]

        with m.If(~self.i_link_up):
            m.d.sync += [armed.eq(0), pos.eq(0)]             # rows lost: wait for START
        with m.Elif(row_valid):
            with m.If(is_start):
                m.d.sync += [armed.eq(1), pos.eq(0)]
            with m.Elif(armed):
                slot(1)                                      # the row after START: first
                m.d.sync += [armed.eq(0), pos.eq(1)]
            with m.Elif(pos == L):
                with m.If(is_data):
                    slot(1)                                  # chained flit
                    m.d.sync += pos.eq(1)
                with m.Else():
                    m.d.sync += pos.eq(0)                    # IDLE or damaged: wait for START
            with m.Elif(pos != 0):
                slot(0)                                      # inside a flit: always a slot
                m.d.sync += pos.eq(pos + 1)
            with m.Elif(is_data):
                slot(0)                                      # outside a flit: DL ignores
        return m

    def _pair(self, m):
        """1 lane: the 2-word rows (combinational) and their valid, from the 1-word rows."""
        rows = data.ArrayLayout(WORD.layout(), 2)
        pair = Signal(rows)
        valid = Signal()
        held = Signal(WORD.layout())
        have = Signal()                  # a slot's low word is held
        wd = self.i_row.payload[0]
        start = wd.ctrl & (_block_type(wd.data) == BlockType.START)
        idle = wd.ctrl & (_block_type(wd.data) == BlockType.IDLE)
        idle_word = control_word(BlockType.IDLE)
        with m.If(~self.i_link_up):
            m.d.sync += have.eq(0)
        with m.Elif(self.i_row.valid):
            with m.If(start):
                m.d.comb += [valid.eq(1), pair[0].eq(wd), pair[1].data.eq(idle_word),
                             pair[1].ctrl.eq(1)]
                m.d.sync += have.eq(0)
            with m.Elif(have):
                m.d.comb += [valid.eq(1), pair[0].eq(held), pair[1].eq(wd)]
                m.d.sync += have.eq(0)
            with m.Elif(idle):
                m.d.comb += [valid.eq(1), pair[0].eq(wd), pair[1].data.eq(idle_word),
                             pair[1].ctrl.eq(1)]
            with m.Else():
                m.d.sync += [held.eq(wd), have.eq(1)]
        return pair, valid
