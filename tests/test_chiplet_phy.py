"""PHY adapters (rtl/chiplet/phy.py): the row framing model (sim.chiplet.PhyTx/PhyRx) and the
RTL against it, cycle by cycle, in the Amaranth simulator."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.chiplet import PcsToPhy, PhyToPcs
from fusionfabric.formats import chiplet as F
from fusionfabric.sim import chiplet as C
from fusionfabric.formats.pcs import BlockType, control_word
from fusionfabric.tb.common.amaranth_stream import StreamSender


def _flits(rng, n_flits, tl_per_dl, p_gap):
    """Word stream of ``n_flits`` DL flits (random slots), None rows (no word) between
    flits with probability ``p_gap`` (the DL never pauses inside a flit)."""
    L = F.dl_flit_slots(tl_per_dl)
    out = []
    for _ in range(n_flits):
        while rng.random() < p_gap:
            out.append(None)
        for k in range(L):
            out.append((int.from_bytes(rng.bytes(16), "little"), k == 0))
    return out


def _frame(words, tl_per_dl, start_every):
    tx = C.PhyTx(tl_per_dl, start_every)
    rows = []
    i = 0
    while i < len(words):
        row, used = tx.row(words[i])
        rows.append(row)
        i += 1 if used or words[i] is None else 0
    return rows, tx


def _deframe(rows, tl_per_dl):
    """The ``(data, first)`` words PhyRx delivers from clean rows (none carries ``err``)."""
    rx = C.PhyRx(tl_per_dl)
    out = [w for w in (rx.row(r) for r in rows) if w is not None]
    assert not any(err for _, _, err in out)
    return [(d, first) for d, first, _ in out]


@pytest.mark.parametrize("tl_per_dl,start_every", [(1, 1), (4, 16), (4, 3), (32, 16)])
def test_model_round_trip_and_start_rows(tl_per_dl, start_every):
    """Every word comes out once with its ``first``; START rows: one per flit that does
    not follow back to back, plus at most one per ``start_every`` chained flits."""
    rng = np.random.default_rng([tl_per_dl, start_every])
    for p_gap in (0.0, 0.3):
        words = _flits(rng, 60, tl_per_dl, p_gap)
        rows, tx = _frame(words, tl_per_dl, start_every)
        sent = [w for w in words if w is not None]
        got = _deframe(rows, tl_per_dl)
        assert got == sent
        # flits after a gap (or the first) need a START; back-to-back runs one per K
        runs, run = [], 0
        for i, w in enumerate(words):
            if w is not None and w[1]:
                if i == 0 or words[i - 1] is None:
                    if run:
                        runs.append(run)
                    run = 1
                else:
                    run += 1
        runs.append(run)
        assert tx.start_rows == sum(-(-r // start_every) for r in runs)
        if p_gap == 0.0:
            assert tx.start_rows == -(-60 // start_every)


@pytest.mark.parametrize("damage", ["error", "drop", "extra", "start_lost"])
def test_model_resynchronises_within_start_every(damage):
    """One damaged row (replaced by an ERROR row, deleted, an extra row inserted, or a
    START row turned into an ERROR row): the receiver delivers every word of every flit
    that begins after the next START row exactly as sent; a damaged data row inside a
    flit shifts nothing (only that slot differs, marked ``err``); one in the first row of
    a chained flit ends the chain until the next START row."""
    tl, K = 2, 4
    rng = np.random.default_rng([7, len(damage)])
    for trial in range(30):
        words = _flits(rng, 40, tl, 0.02)
        rows, _ = _frame(words, tl, K)
        if damage == "start_lost":
            starts = [i for i, r in enumerate(rows) if r[0] == "start"]
            j = starts[int(rng.integers(1, len(starts)))] if len(starts) > 1 else starts[0]
        else:
            j = int(rng.integers(5, len(rows) - 5))
        bad = list(rows)
        if damage in ("error", "start_lost"):
            bad[j] = ("error", 0)
        elif damage == "drop":
            del bad[j]
        else:
            bad.insert(j, ("data", 0))
        # reference: the words the good rows carry, tagged by the row they came from
        rx = C.PhyRx(tl)
        good = C.PhyRx(tl)
        got = [rx.row(r) for r in bad]
        ref = [good.row(r) for r in rows]
        nxt = next((i for i in range(j + 1, len(rows)) if rows[i][0] == "start"), None)
        if nxt is None:
            continue
        # the next START row comes within start_every flits of the damage
        assert sum(1 for r in rows[j:nxt] if r[0] == "data") <= K * F.dl_flit_slots(tl)
        shift = {"drop": -1, "extra": 1}.get(damage, 0)
        assert got[nxt + 1 + shift:] == ref[nxt + 1:], (damage, trial, j, nxt)
        if damage == "error" and rows[j][0] == "data":
            if ref[j][1] and rows[j - 1][0] != "start":
                # the first row of a chained flit: the chain ends there, and the rows up
                # to the next START row pass outside any flit (first = 0, err = 0)
                assert got[j] is None and got[:j] == ref[:j], (trial, j)
                assert got[j + 1:nxt + 1] == [None if r is None else (r[0], False, False)
                                              for r in ref[j + 1:nxt + 1]], (trial, j)
            else:
                # a damaged slot inside the count (marked err) or a row outside a flit
                # (dropped): everything else identical
                assert got[j] in (None, (0, ref[j][1], True)), (trial, j)
                assert [g for i, g in enumerate(got) if i != j] == \
                    [r for i, r in enumerate(ref) if i != j]


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="tl_per_dl=33"):
        PhyToPcs(tl_per_dl=33)
    with pytest.raises(ValueError, match="start_every=0"):
        PhyToPcs(start_every=0)
    with pytest.raises(ValueError, match="tl_per_dl=0"):
        PcsToPhy(tl_per_dl=0)


def _row_value(row):
    """Model row -> (lane0 data, ctrl, lane1 data, ctrl)."""
    if row[0] == "start":
        return control_word(BlockType.START), 1, control_word(BlockType.IDLE), 1
    if row[0] == "idle":
        return control_word(BlockType.IDLE), 1, control_word(BlockType.IDLE), 1
    if row[0] == "error":
        return control_word(BlockType.ERROR), 1, control_word(BlockType.ERROR), 1
    d = row[1]
    return d & (2**64 - 1), 0, d >> 64, 0


@pytest.mark.parametrize("tl_per_dl,start_every", [(1, 3), (2, 1)])
def test_phy_to_pcs_matches_model(tl_per_dl, start_every):
    """Random gaps between flits and random PCS stalls (marker rows): every row the RTL
    sends (taken, or an IDLE row when nothing is offered) equals PhyTx's."""
    dut = PhyToPcs(tl_per_dl, start_every)
    rng = np.random.default_rng(11)
    words = _flits(rng, 50, tl_per_dl, 0.25)
    model = C.PhyTx(tl_per_dl, start_every)
    rows = []

    # hand-written: each cycle's row is checked against the model's, idle rows (valid low)
    # included, with the model deciding per cycle whether the offered word is used
    async def bench(ctx):
        i = 0
        while i < len(words):
            ready = rng.random() > 0.1
            w = words[i]
            ctx.set(dut.o_row.ready, ready)
            ctx.set(dut.i_word.valid, w is not None)
            if w is not None:
                ctx.set(dut.i_word.payload.data, w[0])
                ctx.set(dut.i_word.payload.first, w[1])
            await ctx.delay(1e-10)
            if ready:
                want, used = model.row(w)
                r = dut.o_row.payload
                got = (ctx.get(r[0].data), ctx.get(r[0].ctrl), ctx.get(r[1].data),
                       ctx.get(r[1].ctrl))
                if ctx.get(dut.o_row.valid):
                    assert got == _row_value(want), (i, want)
                else:
                    assert want == ("idle",)
                if w is not None:
                    assert bool(ctx.get(dut.i_word.ready)) == used
                rows.append(want)
                if w is None or used:
                    i += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert _deframe(rows, tl_per_dl) == [w for w in words if w is not None]


def test_pcs_to_phy_matches_model():
    """Rows from the framing model with random damage (ERROR rows, lost and extra rows,
    IDLE rows inside flits) and no-row cycles: the RTL delivers PhyRx's words, 1 cycle
    later."""
    tl = 1
    dut = PcsToPhy(tl)
    rng = np.random.default_rng(5)
    rows, _ = _frame(_flits(rng, 60, tl, 0.2), tl, 3)
    for _ in range(12):
        j = int(rng.integers(len(rows)))
        kind = int(rng.integers(3))
        if kind == 0:
            rows[j] = ("error", 0)
        elif kind == 1:
            del rows[j]
        else:
            rows.insert(j, ("idle",))
    model = C.PhyRx(tl)
    gaps = []                   # marker rows (no row out) before each row
    for _ in rows:
        gaps.append(0)
        while rng.random() < 0.2:
            gaps[-1] += 1
    layout = dut.i_row.payload.shape()
    packed = []
    for row in rows:
        d0, c0, d1, c1 = _row_value(row)
        packed.append(layout.const([{"data": d0, "ctrl": c0},
                                    {"data": d1, "ctrl": c1}]).as_value().value)

    def on_cycle(ctx, valid, ready):
        if not valid:
            assert not ctx.get(dut.o_word.valid), f"word out after a no-row cycle {tx.cycles}"

    def on_beat(ctx, word):             # the row taken at this edge: its word is out now
        row = rows[len(tx.sent) - 1]
        got = model.row(row)
        if got is None:
            assert not ctx.get(dut.o_word.valid), row
        else:
            assert ctx.get(dut.o_word.valid), row
            assert ctx.get(dut.o_word.payload.first) == got[1], row
            d0, _, d1, _ = _row_value(row)
            assert ctx.get(dut.o_word.payload.data) == d0 | (d1 << 64)

    tx = StreamSender(dut.i_row, packed, idle=gaps, on_beat=on_beat, on_cycle=on_cycle)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run)
    sim.run()
    assert tx.sent == packed


# -- 1 lane: a slot in two PCS rows of one word ---------------------------------------------

def _start_idle():
    """The words of the START row and the IDLE row on one lane, from the PCS's block types
    (independent of the model's mapping)."""
    return ((control_word(BlockType.START), 1), (control_word(BlockType.IDLE), 1))


@pytest.mark.parametrize("tl_per_dl,start_every", [(1, 3), (2, 1), (4, 16)])
def test_one_lane_phy_to_pcs_matches_model(tl_per_dl, start_every):
    """1 lane: with random gaps between flits and random PCS stalls, the RTL sends, word
    by word, PhyTx's rows with a data row split into its low then high word and a START
    (IDLE) row as one START (IDLE) word; the DL's word is taken with its high half."""
    dut = PhyToPcs(tl_per_dl, start_every, n_lanes=1)
    rng = np.random.default_rng([12, tl_per_dl])
    words = _flits(rng, 40, tl_per_dl, 0.25)
    model = C.PhyTx(tl_per_dl, start_every)
    start, idle = _start_idle()
    rows = []

    async def bench(ctx):
        i = 0
        pending = []          # the current model row's words not yet sent, and its "used"
        used = False
        while i < len(words):
            ready = rng.random() > 0.1
            w = words[i]
            ctx.set(dut.o_row.ready, ready)
            ctx.set(dut.i_word.valid, w is not None)
            if w is not None:
                ctx.set(dut.i_word.payload.data, w[0])
                ctx.set(dut.i_word.payload.first, w[1])
            await ctx.delay(1e-10)
            if ready:
                if not pending:
                    row, used = model.row(w)
                    rows.append(row)
                    if row[0] == "data":
                        pending = [(row[1] & (2**64 - 1), 0), (row[1] >> 64, 0)]
                    else:
                        pending = [start if row[0] == "start" else idle]
                want = pending.pop(0)
                r = dut.o_row.payload[0]
                if ctx.get(dut.o_row.valid):
                    assert (ctx.get(r.data), ctx.get(r.ctrl)) == want, (i, rows[-1])
                else:
                    assert rows[-1] == ("idle",) and want == idle
                if w is not None:
                    assert bool(ctx.get(dut.i_word.ready)) == (used and not pending), i
                if not pending and (w is None or used):
                    i += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert _deframe(rows, tl_per_dl) == [w for w in words if w is not None]


def test_one_lane_model_words():
    """The model's 1-lane mapping: a data row is its low word then its high word, START
    and IDLE rows one control word each; PhyPair gives the rows back."""
    d = (7 << 64) | 5
    assert C.one_lane_words(("data", d)) == [(5, False), (7, False)]
    assert C.one_lane_words(("start",)) == [(control_word(BlockType.START), True)]
    assert C.one_lane_words(("idle",)) == [(control_word(BlockType.IDLE), True)]
    rng = np.random.default_rng(3)
    rows, _ = _frame(_flits(rng, 20, 2, 0.3), 2, 4)
    pair = C.PhyPair()
    back = [r for r in (pair.word(w) for row in rows for w in C.one_lane_words(row))
            if r is not None]
    assert [r for r, _ in back] == rows


@pytest.mark.parametrize("seed", [5, 6])
def test_one_lane_pcs_to_phy_matches_model(seed):
    """1 lane: words from the framing model with random damage (ERROR words, lost and
    extra words, IDLE words inside flits) and no-word cycles: the RTL delivers what
    PhyPair + PhyRx deliver, 1 cycle after the word that completes the row."""
    tl = 1
    dut = PcsToPhy(tl, n_lanes=1)
    rng = np.random.default_rng(seed)
    rows, _ = _frame(_flits(rng, 60, tl, 0.2), tl, 3)
    words = [w for row in rows for w in C.one_lane_words(row)]
    for _ in range(16):
        j = int(rng.integers(len(words)))
        kind = int(rng.integers(3))
        if kind == 0:
            words[j] = (control_word(BlockType.ERROR), True)
        elif kind == 1:
            del words[j]
        else:
            words.insert(j, (control_word(BlockType.IDLE), True))
    pair, model = C.PhyPair(), C.PhyRx(tl)
    gaps = []
    for _ in words:
        gaps.append(0)
        while rng.random() < 0.2:
            gaps[-1] += 1
    layout = dut.i_row.payload.shape()
    packed = [layout.const([{"data": d, "ctrl": int(c)}]).as_value().value for d, c in words]
    delivered = []

    def on_cycle(ctx, valid, ready):
        if not valid:
            assert not ctx.get(dut.o_word.valid), "word out after a no-word cycle"

    def on_beat(ctx, _):
        word = words[len(tx.sent) - 1]
        got = pair.word(word)
        out = None if got is None else model.row(got[0])
        if out is None:
            assert not ctx.get(dut.o_word.valid), word
        else:
            assert ctx.get(dut.o_word.valid), word
            assert ctx.get(dut.o_word.payload.first) == out[1], word
            assert ctx.get(dut.o_word.payload.err) == out[2], word
            assert ctx.get(dut.o_word.payload.data) == got[1]
            delivered.append(out)

    tx = StreamSender(dut.i_row, packed, idle=gaps, on_beat=on_beat, on_cycle=on_cycle)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run)
    sim.run()
    assert tx.sent == packed
    assert sum(1 for o in delivered if o[1]) >= 10      # flits were found, not only damage


def test_one_lane_round_trip_rtl():
    """PhyToPcs and PcsToPhy on 1 lane back to back (random PCS stalls, an IDLE word
    whenever no row is offered): every DL word arrives once, with its ``first``, and no
    ``err``."""
    from amaranth import Module, Mux, Signal
    tl = 2
    tx, rx = PhyToPcs(tl, 4, n_lanes=1), PcsToPhy(tl, n_lanes=1)
    m = Module()
    m.submodules.tx, m.submodules.rx = tx, rx
    ready = Signal()
    row = tx.o_row.payload[0]
    m.d.comb += [tx.o_row.ready.eq(ready), rx.i_row.valid.eq(ready),
                 rx.i_row.payload[0].data.eq(Mux(tx.o_row.valid, row.data,
                                                 control_word(BlockType.IDLE))),
                 rx.i_row.payload[0].ctrl.eq(Mux(tx.o_row.valid, row.ctrl, 1))]
    rng = np.random.default_rng(21)
    words = _flits(rng, 30, tl, 0.2)
    got = []

    async def bench(ctx):
        i = 0
        for _ in range(4 * len(words) + 20):
            w = words[i] if i < len(words) else None
            ctx.set(ready, rng.random() > 0.1)
            ctx.set(tx.i_word.valid, w is not None)
            if w is not None:
                ctx.set(tx.i_word.payload.data, w[0])
                ctx.set(tx.i_word.payload.first, w[1])
            await ctx.delay(1e-10)
            if ctx.get(rx.o_word.valid):
                assert not ctx.get(rx.o_word.payload.err)
                got.append((ctx.get(rx.o_word.payload.data),
                            bool(ctx.get(rx.o_word.payload.first))))
            took = w is None or (ctx.get(tx.i_word.ready) and ctx.get(ready))
            await ctx.tick()
            if i < len(words) and took:
                i += 1
        assert i == len(words)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [w for w in words if w is not None]


def test_one_lane_bad_lanes():
    for cls in (PhyToPcs, PcsToPhy):
        with pytest.raises(ValueError, match="n_lanes=4"):
            cls(n_lanes=4)
