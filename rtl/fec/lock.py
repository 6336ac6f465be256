"""Per-lane alignment of the FEC PCS receiver: bit slip, lane-marker hunt, marker lock.

One :class:`LaneLock` per physical lane turns a raw lane word stream (``10 S`` bits per
cycle, bit 0 first, at an unknown bit offset) into a stream of *lane beats*: ``S`` whole
symbols per cycle whose boundaries coincide with the lane's codeword beats (a lane marker
starts a beat), and says which beats start a marker codeword.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats import fec as code
from fusionfabric.formats.fec_pcs import AM_SYMBOLS, MARKER_MAX_BAD, marker_symbols
from fusionfabric.rtl.hdl import popcount

__all__ = ["LaneLock", "LOSS_LIMIT", "HUNT_PERIODS", "ID_BITS"]

SB = code.M
#: Consecutive missing markers at their expected place that lose a lane's marker lock
#: (the count of cl. 82.2.18.3, ``AM_BAD_LIMIT`` of the 64b/66b PCS).
LOSS_LIMIT = 4
#: Marker periods a lane hunts at one bit offset before it slips one bit: one period to
#: see a marker, one more to confirm it.
HUNT_PERIODS = 2
#: Width of a lane id.
ID_BITS = 5

HUNT, CAND, LOCK = 0, 1, 2


class LaneLock(wiring.Component):
    """Bit alignment and marker lock of one physical FEC lane.

    The lane's bits pass a bit slipper (``slip`` = 0..9 bits of delay, from the previous
    and the current word) and a window of the last ``K = ceil(7 / S) + 1`` slipped words.
    Every cycle each of the ``S`` eight-symbol windows that end in the current word (ending
    at symbol ``j``) is compared with the markers of lanes ``0..n_lanes-1``
    (:func:`fusionfabric.formats.fec_pcs.marker_symbols`); a window *matches* lane ``k``
    when at most ``MARKER_MAX_BAD`` = 2 of its symbols differ. A hit is the match with the
    lowest ``j`` (then the lowest id; two markers differ in more than 4 symbols, so a
    window matches at most one id).

    States:

    - **hunt**: on a hit, remember ``(j, id)`` and go to *candidate*. ``HUNT_PERIODS``
      marker periods plus ``K + 2`` cycles after the last slip (or the lock loss) without
      a lock, slip one bit (``slip`` + 1 mod 10: one more bit of delay) and hunt again;
      ten slips cover every bit offset of a symbol, the ``S`` window ends every symbol
      offset of a word. A lane whose markers come back within that time after a lock
      loss relocks at the same bit offset.
    - **candidate**: exactly one marker period later (``am_period * 544 / n_lanes`` symbols
      = ``am_period * 544 / P`` cycles, the same ``j``) the window at ``j`` must match the
      same id: then *locked*. Otherwise a hit in that cycle is the new candidate, or the
      lane hunts again (without slipping before its hunt time is up).
    - **locked**: the window at ``j`` is checked once per marker period at the marker's
      expected place; ``LOSS_LIMIT`` = 4 consecutive misses lose the lock (``o_lost``
      pulses, the lane hunts from the same bit offset).

    This is the lock of :func:`fusionfabric.sim.fec_pcs.receive` (the first pair of
    matches one period apart with the same id) as a state machine; the model and this
    lock differ only where the model pairs markers that a single candidate misses (a
    false hit within one period before the true marker), which clean or random lanes do
    not produce.

    Lane beats: the ``S`` symbols that end at symbol ``e = (j - 8) mod S`` of each slipped
    word (``j`` of the candidate), so the marker starts a beat, delayed by
    ``L = ceil(8 / S)`` cycles (the marker's first beat has left the window when its
    eighth symbol arrives). ``o_marker`` is high on the beat that starts a marker
    codeword, once locked.

    Members
    -------
    i_word : In(10 S)
        The raw lane word, bit 0 first on the wire.
    o_beat : Out(10 S)
        The lane beat (symbol ``i`` in bits ``10 i .. 10 i + 9``).
    o_marker, o_locked : Out(1)
        ``o_beat`` starts a marker codeword (locked lanes only); the lane is locked.
    o_id : Out(5)
        Lane id of the marker (valid while locked).
    o_offset : Out(range(S))
        ``e``, the symbol of the slipped word where beats end (the deskew's sub-beat skew).
    o_lost : Out(1)
        Pulses when the lock is lost.
    o_slip : Out(4)
        The bit slip in use.
    """

    def __init__(self, n_lanes: int, S: int, am_period: int):
        self.n_lanes, self.S, self.am_period = n_lanes, S, am_period
        self.B = code.N // (n_lanes * S)          # beats per codeword
        self.per = am_period * self.B             # cycles per marker period
        self.K = -(-(AM_SYMBOLS - 1) // S) + 1
        self.L = -(-AM_SYMBOLS // S)
        self.hunt_cycles = HUNT_PERIODS * self.per + self.K + 2
        super().__init__({
            "i_word": In(SB * S),
            "o_beat": Out(SB * S),
            "o_marker": Out(1),
            "o_locked": Out(1),
            "o_id": Out(ID_BITS),
            "o_offset": Out(range(max(S, 2))),
            "o_lost": Out(1),
            "o_slip": Out(4),
        })

    def _d(self, j: int) -> int:
        """Cycles from the marker's first (undelayed) beat to its match at ``j``."""
        return -1 - ((j - AM_SYMBOLS) // self.S)

    def elaborate(self, platform):
        m = Module()
        n, S, K, L, per = self.n_lanes, self.S, self.K, self.L, self.per
        W = SB * S

        # ---- bit slip ----------------------------------------------------------------------
        prev = Signal(W)
        slip = Signal(range(10))
        m.d.sync += prev.eq(self.i_word)
        both = Cat(prev, self.i_word)
        sw = Signal(W)
        with m.Switch(slip):
            for s in range(10):
                with m.Case(s):
                    m.d.comb += sw.eq(both[W - s:2 * W - s])

        # ---- symbol window and marker matches -----------------------------------------------
        hist = [Signal(W, name=f"hist{i}") for i in range(K - 1)]   # hist[-1] newest
        for i in range(K - 1):
            m.d.sync += hist[i].eq(hist[i + 1] if i + 1 < K - 1 else sw)
        window = Cat(*hist, sw)
        syms = [window[SB * i:SB * (i + 1)] for i in range(K * S)]
        markers = [marker_symbols(k) for k in range(n)]
        match = [[Signal(name=f"match_{j}_{k}") for k in range(n)] for j in range(S)]
        for j in range(S):
            start = (K - 1) * S + j - (AM_SYMBOLS - 1)
            for k in range(n):
                bad = Cat(*[syms[start + t] != markers[k][t] for t in range(AM_SYMBOLS)])
                m.d.comb += match[j][k].eq(popcount(bad) <= MARKER_MAX_BAD)
        hit = Signal()
        hit_j = Signal(range(max(S, 2)))
        hit_id = Signal(ID_BITS)
        for j in reversed(range(S)):
            for k in reversed(range(n)):
                with m.If(match[j][k]):
                    m.d.comb += [hit.eq(1), hit_j.eq(j), hit_id.eq(k)]

        # ---- lane beats: S symbols ending at symbol e of the slipped word, delayed L --------
        e = Signal(range(max(S, 2)))
        two = Cat(hist[-1], sw)
        beat0 = Signal(W)
        with m.Switch(e):
            for v in range(S):
                with m.Case(v):
                    m.d.comb += beat0.eq(two[SB * (v + 1):SB * (v + 1 + S)])
        chain = [beat0]
        for i in range(L):
            r = Signal(W, name=f"beat_d{i + 1}")
            m.d.sync += r.eq(chain[-1])
            chain.append(r)
        m.d.comb += self.o_beat.eq(chain[-1])

        # ---- state machine ------------------------------------------------------------------
        state = Signal(range(3))
        j_reg = Signal(range(max(S, 2)))
        id_reg = Signal(ID_BITS)
        ph = Signal(range(per))       # 0 on the delayed beat that starts a marker codeword
        timer = Signal(range(self.hunt_cycles + 1))
        miss = Signal(range(LOSS_LIMIT))

        def phase_after_match(j):     # ph in the cycle after a match at j
            return (self._d(j) + 1 - L) % per

        def phase_at_match(j):        # ph in the cycle of a (later) match at j
            return (self._d(j) - L) % per

        at_check = Signal()
        here = Signal()               # the window at j_reg matches id_reg
        with m.Switch(j_reg):
            for j in range(S):
                with m.Case(j):
                    m.d.comb += at_check.eq(ph == phase_at_match(j))
                    for k in range(n):
                        with m.If(id_reg == k):
                            m.d.comb += here.eq(match[j][k])
        m.d.sync += ph.eq(Mux(ph == per - 1, 0, ph + 1))
        with m.If(timer != self.hunt_cycles):
            m.d.sync += timer.eq(timer + 1)

        def candidate():
            m.d.sync += [state.eq(CAND), j_reg.eq(hit_j), id_reg.eq(hit_id), e.eq(0)]
            with m.Switch(hit_j):
                for j in range(S):
                    with m.Case(j):
                        m.d.sync += [ph.eq(phase_after_match(j)),
                                     e.eq((j - AM_SYMBOLS) % S)]

        with m.Switch(state):
            with m.Case(HUNT):
                with m.If(hit):
                    candidate()
                with m.Elif(timer == self.hunt_cycles):
                    m.d.sync += [slip.eq(Mux(slip == 9, 0, slip + 1)), timer.eq(0)]
            with m.Case(CAND):
                with m.If(at_check):
                    with m.If(here):
                        m.d.sync += [state.eq(LOCK), miss.eq(0), timer.eq(0)]
                    with m.Elif(hit):
                        candidate()
                    with m.Else():
                        m.d.sync += state.eq(HUNT)
            with m.Case(LOCK):
                m.d.sync += timer.eq(0)
                with m.If(at_check):
                    with m.If(here):
                        m.d.sync += miss.eq(0)
                    with m.Elif(miss == LOSS_LIMIT - 1):
                        m.d.sync += state.eq(HUNT)
                    with m.Else():
                        m.d.sync += miss.eq(miss + 1)
        m.d.sync += self.o_lost.eq((state == LOCK) & at_check & ~here & (miss == LOSS_LIMIT - 1))

        m.d.comb += [self.o_locked.eq(state == LOCK), self.o_marker.eq((state == LOCK) & (ph == 0)),
                     self.o_id.eq(id_reg), self.o_offset.eq(e), self.o_slip.eq(slip)]
        return m
