"""FEC PCS transmitter: client words -> 256b/257b -> scramble -> markers -> RS(544,514) ->
FEC lanes (IEEE 802.3 cl. 119 order, docs/fec.md), bit-exact with
:func:`fusionfabric.sim.fec_pcs.transmit`."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats import fec as code
from fusionfabric.formats.fec_pcs import (AM_PERIOD, XBITS, am_blocks, check_params,
                                          marker_area)
from fusionfabric.formats.pcs import WORD, BlockType, control_word
from fusionfabric.rtl.fec.encoder import RsEncoder
from fusionfabric.rtl.fec.transcode import message_schedule, scramble, transcode
from fusionfabric.rtl.hdl import sat_inc

__all__ = ["FecPcsTx", "plan"]

_IDLE = control_word(BlockType.IDLE)


def _loads(P: int, n_lanes: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Data blocks each beat takes: ``(normal, marker)`` codeword, one entry per beat."""
    nam = am_blocks(n_lanes)
    sched = message_schedule(P)
    normal = tuple(len(b.slots) for b in sched)
    marker = tuple(sum(s >= nam for s in b.slots) for b in sched)
    return normal, marker


def _feeds(C: int, D: int, n_words: int, am_period: int, loads) -> bool:
    """Whether a word buffer of ``C`` words and a start delay of ``D`` cycles always hold
    the words the scrambler stage takes (the fill process of :class:`FecPcsTx`).

    Each cycle the buffer takes a row of ``n_words`` when its fill is at most
    ``C - n_words`` and gives ``4 L`` words to the stage, ``L`` the data blocks of the beat
    the gearbox sends next. The process does not depend on the client, so it is checked
    here once: codeword by codeword, skipping to the next marker codeword once a normal
    codeword starts and ends with the same fill, until a marker codeword starts with a
    fill seen before (from then on it repeats).
    """
    normal, marker = loads
    B = len(normal)
    fill = 0

    def step(demand: int) -> bool:
        nonlocal fill
        if fill < demand:
            return False
        ready = fill <= C - n_words
        fill += (n_words if ready else 0) - demand
        return True

    if D == 0:
        if marker[0]:
            return False
    else:
        for _ in range(D - 1):
            step(0)
    seen = set()
    cw = 0
    first = 1 if D == 0 else 0
    while True:
        pos = cw % am_period
        if pos == 0:
            if cw and fill in seen:
                return True
            seen.add(fill)
        start = fill
        for b in range(first, B):
            if not step(4 * (marker if pos == 0 else normal)[b]):
                return False
        first = 0
        if pos and fill == start:
            cw += am_period - pos
        else:
            cw += 1


def plan(n_lanes: int, symbols: int, n_words: int, am_period: int) -> tuple[int, int, int]:
    """``(K, C, D)`` of a :class:`FecPcsTx`: at most ``K`` data blocks per cycle, a word
    buffer of ``C`` words (the smallest that never runs dry) and ``D`` cycles from reset
    to the first gearbox beat (the smallest for that ``C``)."""
    check_params(n_lanes, symbols, n_words, am_period)
    loads = _loads(symbols, n_lanes)
    K = max(max(loads[0]), 1)
    B = code.N // symbols
    for C in range(max(4 * K, n_words), 4 * K + 2 * n_words + 64):
        for D in range(0, 4 * B):
            if _feeds(C, D, n_words, am_period, loads):
                return K, C, D
    raise ValueError(f"no word buffer feeds n_lanes={n_lanes}, symbols={symbols}, "
                     f"n_words={n_words}, am_period={am_period}")


class FecPcsTx(wiring.Component):
    """Transmit side of the FEC PCS profile: rows of client words in, FEC lanes out.

    The datapath, in cl. 119 order, one stage per register:

    1. **Word buffer** (``C`` words, a shift register): takes a row when its fill is at
       most ``C - n_words``; that is ``i_data.ready``. A cycle with ``ready`` and no
       ``valid`` takes a row of IDLE control words, so the words sent are the rows of the
       ``valid & ready`` handshakes and IDLE rows in the ``ready & ~valid`` cycles, in
       cycle order.
    2. **Transcode and scramble**: each cycle the stage takes the ``L`` blocks (4 words
       each, ``L <= K``) that the gearbox's next beat needs (a static per-beat table),
       transcodes them (:func:`~fusionfabric.rtl.fec.transcode.transcode`) and scrambles
       them as one bit stream (1 + x^39 + x^58, state all ones at reset) into the block
       register.
    3. **Gearbox**: beat ``b`` of a codeword sends message bits ``10 P b ..``: the bits left
       of the previous beat's last slot, then this beat's new slots (the marker area's
       constant slots in a marker codeword, blocks from stage 2 otherwise; the schedule of
       :func:`~fusionfabric.rtl.fec.transcode.message_schedule` is static per beat, so
       every slice is a constant one chosen by the beat number), into the message beat
       register. Codeword ``c`` is a marker codeword when ``c % am_period == 0``; its
       marker area (``fusionfabric.formats.fec_pcs.marker_area``) is neither scrambled nor
       advances the scrambler.
    4. **RS encoder** (:class:`~fusionfabric.rtl.fec.encoder.RsEncoder`, latency 1): fills
       the 30 parity symbols; its output register drives the lanes directly.

    Parameters
    ----------
    n_lanes : int
        FEC lanes: 1, 2, 4, 8 or 16.
    symbols : int
        P, codeword symbols per cycle over all lanes: divides 544, a multiple of
        ``n_lanes``. Each lane carries ``S = P / n_lanes`` symbols per cycle.
    n_words : int
        Client words per row: ``n_words * 544 >= 80 * P`` (the client capacity of the
        line; e.g. 2 for P = 8, 3 for P = 16).
    am_period : int
        Codewords per marker period, >= 2.

    Members
    -------
    i_data : In(stream.Signature(ArrayLayout(WORD, n_words)))
        Rows of client words, word 0 first.
    o_lanes : Out(10 * S).array(n_lanes)
        Lane ``k``'s next ``S`` symbols every cycle: codeword position ``bP + k + j
        n_lanes`` in bits ``10j .. 10j+9`` (symbol bit 0 first on the wire).
    o_codewords : Out(32)
        Codewords sent (saturating), counted in the cycle after a codeword's last beat
        was on ``o_lanes``.

    Timing
    ------
    After reset the gearbox waits ``D`` cycles (``self.start_delay``: the smallest delay
    for which the buffer never runs dry, from :func:`plan`; 0 when the first beats send
    only the marker area, e.g. P = 8) for the word buffer to fill; from cycle ``first_beat_cycle = D + 2``
    (``self.first_beat_cycle``; cycle 0 is the first after reset, the lanes are 0 before)
    ``o_lanes`` carries codeword 0 (a marker codeword) and then one beat every cycle, a
    codeword every ``544 / P`` cycles, with no gap. ``i_data.ready`` depends only on the
    cycle number since reset (never on ``valid``). A row taken at cycle ``t`` is in the
    buffer at ``t + 1``; its block is transcoded the cycle before the beat that starts
    sending it, and that beat reaches ``o_lanes`` 2 cycles later, so a row's first symbol
    is on a lane 4 or more cycles after its handshake; the wait in the buffer varies with
    the codeword schedule (marker areas and parity beats take no words): 5 to 12 cycles
    measured for n_lanes=2, P=8, n_words=2, and 5 to 11 for n_lanes=4, P=16, n_words=4.
    """

    def __init__(self, n_lanes: int = 2, symbols: int = 8, n_words: int = 2,
                 am_period: int = AM_PERIOD):
        self.K, self.C, self.start_delay = plan(n_lanes, symbols, n_words, am_period)
        self.n_lanes, self.P, self.n_words, self.am_period = n_lanes, symbols, n_words, am_period
        self.S = symbols // n_lanes
        self.n_beats = code.N // symbols
        self.first_beat_cycle = self.start_delay + 2
        super().__init__({
            "i_data": In(stream.Signature(data.ArrayLayout(WORD.layout(), n_words))),
            "o_lanes": Out(code.M * self.S).array(n_lanes),
            "o_codewords": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n, K, C, D = self.n_words, self.K, self.C, self.start_delay
        B, P, M = self.n_beats, self.P, code.M
        sched = message_schedule(P)
        normal, marker = _loads(P, self.n_lanes)
        nam = am_blocks(self.n_lanes)
        area = marker_area(self.n_lanes)

        # -- stage 1 target: the beat the gearbox sends in the next cycle ---------------
        s1_on = Signal(init=int(D <= 1))
        b1 = Signal(range(B), init=(1 % B) if D == 0 else 0)
        pc1 = Signal(range(self.am_period), init=int(D == 0 and B == 1))
        if D > 1:
            pre = Signal(range(D), init=D - 2)
            with m.If(pre == 0):
                m.d.sync += s1_on.eq(1)
            with m.Else():
                m.d.sync += pre.eq(pre - 1)
        with m.If(s1_on):
            m.d.sync += b1.eq(Mux(b1 == B - 1, 0, b1 + 1))
            with m.If(b1 == B - 1):
                m.d.sync += pc1.eq(Mux(pc1 == self.am_period - 1, 0, pc1 + 1))
        kw = max(K, 1).bit_length()
        tab_n = Const(sum(v << (kw * b) for b, v in enumerate(normal)), kw * B)
        tab_m = Const(sum(v << (kw * b) for b, v in enumerate(marker)), kw * B)
        L = Signal(range(K + 1))
        m.d.comb += L.eq(Mux(s1_on, Mux(pc1 == 0, tab_m, tab_n).word_select(b1, kw), 0))

        # -- word buffer ----------------------------------------------------------------
        wdata = [Signal(64, name=f"wdata{s}") for s in range(C)]
        wctrl = [Signal(name=f"wctrl{s}") for s in range(C)]
        wfill = Signal(range(C + 1))
        ready = self.i_data.ready
        m.d.comb += ready.eq(wfill <= C - n)
        rows = []
        for i in range(n):
            w = self.i_data.payload[i]
            rows.append((Mux(self.i_data.valid, w.data, _IDLE),
                         Mux(self.i_data.valid, w.ctrl, 1)))
        base = Signal(range(C + 1))
        m.d.comb += base.eq(wfill - 4 * L)
        m.d.sync += wfill.eq(base + Mux(ready, n, 0))
        for s in range(C):
            d, c = wdata[s], wctrl[s]
            for k in range(1, K + 1):
                if s + 4 * k < C:
                    d = Mux(L == k, wdata[s + 4 * k], d)
                    c = Mux(L == k, wctrl[s + 4 * k], c)
            # a row lands above the words kept; slots above the fill are free either way
            for i in range(min(n, s + 1)):
                hit = base == s - i
                d = Mux(hit, rows[i][0], d)
                c = Mux(hit, rows[i][1], c)
            m.d.sync += [wdata[s].eq(d), wctrl[s].eq(c)]

        # -- stage 2: transcode and scramble L blocks -------------------------------------
        state = Signal(58, init=(1 << 58) - 1)
        sblk = [Signal(XBITS, name=f"sblk{j}") for j in range(K)]
        st = state
        states = [state]
        for j in range(K):
            words = [(wdata[4 * j + i], wctrl[4 * j + i]) for i in range(4)]
            tc = transcode(m, words, name=f"tc{j}")
            out, st_next = scramble(m, st, tc, name=f"scr{j}")
            st = Signal(58, name=f"scr_state{j}")
            m.d.comb += st.eq(st_next)
            states.append(st)
            m.d.sync += sblk[j].eq(out)
        nxt_state = states[0]
        for k in range(1, K + 1):
            nxt_state = Mux(L == k, states[k], nxt_state)
        m.d.sync += state.eq(nxt_state)

        # -- stage 3: gearbox -------------------------------------------------------------
        g_on = Signal(init=int(D == 0))
        gb = Signal(range(B))
        gmark = Signal(init=1)
        m.d.sync += [g_on.eq(s1_on), gb.eq(b1), gmark.eq(pc1 == 0)]
        left_w = max(max(bt.left for bt in sched), 1)
        gbuf = Signal(left_w)
        msg = Signal(M * P)
        first = Signal()
        valid = Signal()
        m.d.sync += valid.eq(g_on)

        def beat_expr(bt, is_marker):
            parts = [gbuf[:bt.left]] if bt.left else []
            j = 0
            for s in bt.slots:
                if is_marker and s < nam:
                    parts.append(Const((area >> (XBITS * s)) & ((1 << XBITS) - 1), XBITS))
                else:
                    parts.append(sblk[j])
                    j += 1
            return Cat(*parts)

        def load(bt, nxt_left, e):
            if bt.bits:
                m.d.sync += msg.eq(e[:bt.bits])
            if nxt_left:
                m.d.sync += gbuf.eq(e[bt.bits:bt.bits + nxt_left])

        with m.If(g_on):
            m.d.sync += first.eq(gb == 0)
            with m.Switch(gb):
                for b, bt in enumerate(sched):
                    nxt_left = sched[(b + 1) % B].left
                    with m.Case(b):
                        if any(s < nam for s in bt.slots):
                            with m.If(gmark):
                                load(bt, nxt_left, beat_expr(bt, True))
                            with m.Else():
                                load(bt, nxt_left, beat_expr(bt, False))
                        else:
                            load(bt, nxt_left, beat_expr(bt, False))

        # -- stage 4: RS encoder and lanes ----------------------------------------------------
        enc = m.submodules.encoder = RsEncoder(P)
        m.d.comb += [enc.i_data.valid.eq(valid), enc.i_data.payload.data.eq(msg),
                     enc.i_data.payload.first.eq(first), enc.o_data.ready.eq(1)]
        out = enc.o_data.payload.data
        for lane in range(self.n_lanes):
            m.d.comb += self.o_lanes[lane].eq(
                Cat(*[out[M * (j * self.n_lanes + lane):M * (j * self.n_lanes + lane + 1)]
                      for j in range(self.S)]))
        sat_inc(m, self.o_codewords, enc.o_data.valid & enc.o_data.payload.last)
        return m
