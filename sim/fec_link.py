"""The chiplet's data-link layer on top of the FEC profile: a fast numpy link model.

What it models (docs/fec.md, "The link on top of FEC", is the specification):

- **Lane and codewords.** The forward lane is a sequence of RS(544,514) codewords
  (:mod:`fusionfabric.sim.fec`) of 5,440 raw bits. A codeword's message, 5,140 bits =
  20 transcoded 257-bit blocks of four 64-bit blocks, carries :data:`SLOTS_PER_CW` = 40 DL
  slots of 128 bits. A marker codeword (``c % am_period == 0``, :mod:`fusionfabric.sim.
  fec_pcs`) loses ``am_blocks(n_lanes)`` blocks to the marker area, i.e. ``2 * am_blocks``
  slots. Time is counted in slot times (one DL cycle moves one slot): a codeword lasts
  :data:`SLOTS_PER_CW` slot times.
- **Channel** (:class:`Channel`): seeded random bit errors at ``ber`` (the number of errors
  per codeword drawn from the binomial distribution, their positions uniform without
  replacement), or solid bursts of ``burst_len`` bits (every bit of a burst flipped; burst
  starts at rate ``ber / burst_len`` per bit, so the raw BER is ``ber``; a burst may run
  into the next codeword). Bits are counted in codeword order, symbol ``i`` bits ``10 i``
  to ``10 i + 9``: the model ignores which FEC lane carries a symbol, which only matters
  for bursts that cross codewords on one lane.
- **Decoding.** RS codes are linear, so the decoder's outcome depends only on the error
  pattern: each codeword hit by at least one error is decoded as error pattern alone
  (the all-zero codeword plus the errors) by :func:`fusionfabric.sim.fec.decode_batch`;
  a codeword without errors is not decoded. Outcomes: clean, corrected, uncorrectable
  (the decoder flags it; the errors stay), miscorrected (the decoder returns another
  codeword without a flag). The residual message-bit errors give the post-FEC BER.
- **Damage.** An uncorrectable or miscorrected codeword damages every slot it carried and
  the first 257-bit block (2 slots) of the next codeword, whose descrambling reads the
  wrong bits (the receiver rule of docs/fec.md). A DL flit with a damaged slot is dropped:
  by the FEC flag (uncorrectable) or by its CRC-32 (miscorrected; the model counts these
  separately and takes the CRC to catch them, which it misses with probability 2^-32 for
  a pattern beyond its guaranteed detection).
- **Framing** (``framing``): ``"straddle"``: DL flits of ``4 tl_per_dl + 1`` slots back to
  back in the slot stream, across codeword boundaries, with a START row (one slot) before
  every ``start_every``-th flit, as on the 64b/66b lanes (docs/protocol.md); a damaged
  START row loses the framing of its group of ``start_every`` flits (the next START row
  restores it). ``"aligned"``: every DL flit starts a codeword and fills
  ``cw_per_flit`` codewords (``tl_per_dl`` = the most TL flits that fit, the rest zero
  pad); marker codewords carry no flit; the codeword boundary delimits flits, so there are
  no START rows.
- **Go-back-N** (docs/protocol.md, "Replay"): ``replay_depth`` entries, the entry being
  filled counting as one (a new flit may be sent only if it was within the window when its
  fill began, one flit time earlier); control flits whenever no data flit may be sent; a
  bad flit or a sequence gap starts an error episode and one NAK; the replay timer
  (``replay_timeout`` slot times, 0: ``8 F + 64`` with ``F`` the flit time) rewinds when
  ACKs stop. Sequence numbers are ``SEQ_BITS`` = 10 bits at the receiver and in ACKs.
  The reverse direction is a second seeded channel of the same kind: ACK and NAK ride in
  the trailer of reverse flits (sampled when the trailer is issued, applied when that
  flit has been decoded), and a reverse flit damaged by the FEC loses them.
- **Delay**: ``rtt_codewords``, the round trip of wire, PCS and decoder (both directions,
  without the flits' own serialization), in codewords; each direction takes half.

The source is saturated with 256-byte writes (17 slots each, header slot plus 16 data
slots, packed back to back into TL flits); goodput is delivered payload bits / raw lane
bits.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from fusionfabric.formats.chiplet import MAX_TL_PER_DL, SEQ_BITS, SLOT_BITS, SLOTS_PER_TL
from fusionfabric.sim import fec
from fusionfabric.sim import fec_pcs

__all__ = ["CW_BITS", "MSG_BITS", "SLOTS_PER_CW", "WRITE_SLOTS", "FRAMINGS", "LinkParams",
           "Channel", "LinkResult", "run", "format_bound", "binomial_tail",
           "symbol_error_prob"]

#: Raw bits of one codeword on the lane.
CW_BITS = fec.N * fec.M
#: Message bits of one codeword (20 transcoded blocks of 257 bits).
MSG_BITS = fec.K * fec.M
#: DL slots (128 bits) carried by a codeword: 20 blocks x 4 x 64 bits / 128.
SLOTS_PER_CW = fec_pcs.BLOCKS_PER_CW * 4 * 64 // SLOT_BITS
#: Slots of one 256-byte write: the TL header slot and 16 data slots.
WRITE_SLOTS = 17
#: Slots of a 257-bit block (damaged after an uncorrectable codeword by the descrambler).
_BLOCK_SLOTS = 4 * 64 // SLOT_BITS
FRAMINGS = ("straddle", "aligned")

# codeword outcomes
CLEAN, CORRECTED, UNCORRECTABLE, MISCORRECTED = 0, 1, 2, 3


def _int(name, value, lo, hi=None):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{name}={value!r} must be an int")
    if value < lo or (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValueError(f"{name}={value!r} must be in {rng}")
    return int(value)


def _prob(name, value, hi=1.0):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name}={value!r} must be a number")
    if not (0.0 <= float(value) <= hi) or math.isnan(float(value)):
        raise ValueError(f"{name}={value!r} must be in 0..{hi}")
    return float(value)


@dataclass(frozen=True)
class LinkParams:
    """Parameters of the link model (names as the chiplet RTL's where they exist).

    ``tl_per_dl`` (straddle framing; aligned framing derives it from ``cw_per_flit``),
    ``replay_depth`` (power of two 2..64, as the RTL), ``replay_timeout`` (slot times; 0:
    ``8 F + 64``), ``start_every`` (straddle only), ``framing``, ``cw_per_flit`` (aligned
    only), ``rtt_codewords`` (round trip of wire, PCS and decoder in codewords, default
    2 x (10 + 33) cycles of 40 slots: the PCS channel of docs/protocol.md and the decoder's
    33 cycles each way), ``n_lanes`` and ``am_period`` (marker codewords, as fec_pcs).
    """
    tl_per_dl: int = 32
    replay_depth: int = 8
    replay_timeout: int = 0
    start_every: int = 16
    framing: str = "straddle"
    cw_per_flit: int = 1
    rtt_codewords: float = 2 * (10 + 33) / 40
    n_lanes: int = 4
    am_period: int = fec_pcs.AM_PERIOD

    def __post_init__(self):
        if self.framing not in FRAMINGS:
            raise ValueError(f"framing={self.framing!r} must be one of {FRAMINGS}")
        _int("tl_per_dl", self.tl_per_dl, 1, MAX_TL_PER_DL)
        d = _int("replay_depth", self.replay_depth, 2, 64)
        if d & (d - 1):
            raise ValueError(f"replay_depth={d} must be a power of two in 2..64")
        _int("replay_timeout", self.replay_timeout, 0, 65535)
        _int("start_every", self.start_every, 1, 4096)
        _int("cw_per_flit", self.cw_per_flit, 1, 4)
        if self.framing == "aligned" and self.aligned_tl(self.cw_per_flit) < 1:
            raise ValueError(f"cw_per_flit={self.cw_per_flit} holds no TL flit")
        r = self.rtt_codewords
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1e6:
            raise ValueError(f"rtt_codewords={r!r} must be a number in 0..1e6")
        if self.n_lanes not in fec_pcs.LANE_COUNTS:
            raise ValueError(f"n_lanes={self.n_lanes!r} must be one of {fec_pcs.LANE_COUNTS}")
        _int("am_period", self.am_period, 2)
        if self.framing == "aligned" and self.am_period - 1 < self.cw_per_flit:
            raise ValueError(f"am_period={self.am_period} leaves no room for a flit of "
                             f"cw_per_flit={self.cw_per_flit} codewords")

    @staticmethod
    def aligned_tl(cw_per_flit: int) -> int:
        """Most TL flits of a DL flit (plus its trailer slot) in ``cw_per_flit`` codewords."""
        return min(MAX_TL_PER_DL, (SLOTS_PER_CW * cw_per_flit - 1) // SLOTS_PER_TL)

    @property
    def n_tl(self) -> int:
        """TL flits per DL flit under this framing."""
        return self.aligned_tl(self.cw_per_flit) if self.framing == "aligned" else self.tl_per_dl

    @property
    def flit_slots(self) -> int:
        """Slots of a DL flit with its trailer (without padding)."""
        return SLOTS_PER_TL * self.n_tl + 1

    @property
    def marker_slots(self) -> int:
        """Slots a marker codeword loses to the marker area."""
        return fec_pcs.am_blocks(self.n_lanes) * _BLOCK_SLOTS

    @property
    def flit_time(self) -> int:
        """Slot times between flit starts (straddle: the flit; aligned: its codewords)."""
        if self.framing == "aligned":
            return SLOTS_PER_CW * self.cw_per_flit
        return self.flit_slots

    @property
    def timeout(self) -> int:
        return self.replay_timeout or 8 * self.flit_time + 64


def format_bound(p: LinkParams) -> dict:
    """Factors of the goodput bound of back-to-back 256-byte writes against raw lane bits."""
    tl = 256 / (WRITE_SLOTS * 16)
    dl = SLOTS_PER_TL * p.n_tl / (p.flit_slots if p.framing == "straddle" else p.flit_time)
    cw = (MSG_BITS - fec_pcs.BLOCKS_PER_CW) / CW_BITS   # 256/257 x 514/544
    P = p.am_period
    if p.framing == "straddle":
        K, F = p.start_every, p.flit_slots
        start = K * F / (K * F + 1)
        markers = 1 - p.marker_slots / (SLOTS_PER_CW * P)
    else:
        start = 1.0
        k = p.cw_per_flit
        markers = (P - 1) // k * k / P
    total = tl * dl * start * cw * markers
    return {"tl_header": tl, "dl_header_crc": dl, "start_rows": start, "fec_257_544": cw,
            "markers": markers, "bound": total}


def symbol_error_prob(ber: float) -> float:
    """Probability that a 10-bit symbol holds at least one of independent bit errors."""
    return -math.expm1(fec.M * math.log1p(-ber)) if ber < 1 else 1.0


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(X > k) for X ~ Binomial(n, p), summed in log space from k + 1 to n."""
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0 if n > k else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp
             + (n - i) * lq for i in range(k + 1, n + 1)]
    if not terms:
        return 0.0
    m = max(terms)
    return math.exp(m) * sum(math.exp(t - m) for t in terms)


class Channel:
    """Codeword outcomes of one lane direction, drawn in order, chunk by chunk.

    Parameters
    ----------
    ber : raw bit error rate (random errors, or the mean rate of the bursts).
    burst_len : 0 for independent bit errors; L > 0 for solid bursts of L bits.
    rng : ``numpy.random.Generator`` (seeded by the caller).
    planted : ``{codeword index: "uncorrectable" | "miscorrected"}``: outcomes forced on
        these codewords (for tests), in place of what the channel drew.

    Members
    -------
    ``status`` (per codeword: 0 clean, 1 corrected, 2 uncorrectable, 3 miscorrected),
    counters ``codewords``, ``decoded`` (decoder calls), ``corrected``,
    ``uncorrectable``, ``miscorrected``, ``over_t`` (codewords with more than 15 symbol
    errors), ``raw_bit_errors``, ``residual_bit_errors`` (message bits wrong after
    decoding).
    """

    CHUNK = 256

    def __init__(self, ber: float = 0.0, burst_len: int = 0, rng=None, planted=None):
        self.ber = _prob("ber", ber, 0.5)
        self.burst_len = _int("burst_len", burst_len, 0, CW_BITS)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.planted = dict(planted or {})
        for c, kind in self.planted.items():
            if kind not in ("uncorrectable", "miscorrected"):
                raise ValueError(f"planted outcome {kind!r} must be 'uncorrectable' or "
                                 "'miscorrected'")
        self.status = np.zeros(0, dtype=np.int8)
        self._carry = np.zeros(0, dtype=np.int64)   # burst bits beyond the drawn codewords
        self.codewords = self.decoded = self.corrected = 0
        self.uncorrectable = self.miscorrected = self.over_t = 0
        self.raw_bit_errors = self.residual_bit_errors = 0

    def ensure(self, n_cw: int) -> None:
        """Draw outcomes until at least ``n_cw`` codewords are known."""
        if len(self.status) < n_cw:
            self._draw(max(self.CHUNK, n_cw - len(self.status)))

    def _error_bits(self, c0: int, count: int) -> np.ndarray:
        """Global bit positions in error in codewords ``c0 .. c0 + count - 1``, sorted."""
        rng, nbits = self.rng, count * CW_BITS
        base = c0 * CW_BITS
        if self.ber == 0:
            return np.zeros(0, dtype=np.int64)
        if self.burst_len == 0:
            per = rng.binomial(CW_BITS, self.ber, size=count)
            cw = np.repeat(np.arange(count), per)
            pos = rng.integers(0, CW_BITS, size=cw.size)
            while True:     # positions without replacement inside a codeword
                key = cw * CW_BITS + pos
                order = np.argsort(key, kind="stable")
                dup = np.zeros(key.size, dtype=bool)
                dup[order[1:]] = key[order[1:]] == key[order[:-1]]
                if not dup.any():
                    break
                pos[dup] = rng.integers(0, CW_BITS, size=int(dup.sum()))
            return np.sort(base + key)
        L = self.burst_len
        per = rng.binomial(CW_BITS, self.ber / L, size=count)
        cw = np.repeat(np.arange(count), per)
        starts = base + cw * CW_BITS + rng.integers(0, CW_BITS, size=cw.size)
        bits = (starts[:, None] + np.arange(L)[None, :]).reshape(-1)
        bits = np.unique(np.concatenate([self._carry, bits]))
        self._carry = bits[bits >= base + nbits]
        return bits[bits < base + nbits]

    def _draw(self, count: int) -> None:
        c0 = len(self.status)
        bits = self._error_bits(c0, count)
        status = np.zeros(count, dtype=np.int8)
        self.raw_bit_errors += int(bits.size)
        if bits.size:
            local = bits - c0 * CW_BITS
            cw = local // CW_BITS
            within = local % CW_BITS
            hit, row = np.unique(cw, return_inverse=True)
            err = np.zeros((hit.size, fec.N), dtype=np.int64)
            sym = within // fec.M
            shift = within % fec.M if fec.SYMBOL_LSB_FIRST else fec.M - 1 - within % fec.M
            np.bitwise_or.at(err, (row, sym), np.left_shift(1, shift))
            self.over_t += int((np.count_nonzero(err, axis=1) > fec.T).sum())
            for s in range(0, hit.size, 512):
                e = err[s:s + 512]
                res = fec.decode_batch(e)
                self.decoded += e.shape[0]
                resid = np.where(res.ok[:, None], res.codewords, e)
                nbad = _popcount(resid[:, :fec.K])
                st = np.where(~res.ok, UNCORRECTABLE,
                              np.where(resid.any(axis=1), MISCORRECTED, CORRECTED))
                status[hit[s:s + 512]] = st
                self.residual_bit_errors += int(nbad.sum())
        for c, kind in self.planted.items():
            if c0 <= c < c0 + count:
                status[c - c0] = UNCORRECTABLE if kind == "uncorrectable" else MISCORRECTED
        self.status = np.concatenate([self.status, status])
        self.codewords += count
        self.corrected += int((status == CORRECTED).sum())
        self.uncorrectable += int((status == UNCORRECTABLE).sum())
        self.miscorrected += int((status == MISCORRECTED).sum())


def _popcount(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.int64)
    n = np.zeros(a.shape[0], dtype=np.int64)
    for b in range(fec.M):
        n += ((a >> b) & 1).sum(axis=1)
    return n


class _Lane:
    """Flit positions of one direction and their damage, from a :class:`Channel`."""

    def __init__(self, p: LinkParams, channel: Channel):
        self.p, self.ch = p, channel
        self.per = SLOTS_PER_CW * p.am_period - p.marker_slots   # data slots per period
        self.flits_per_period = (p.am_period - 1) // p.cw_per_flit

    def data_time(self, j):
        """Slot time of data slot ``j`` (straddle): marker areas open every period."""
        j = np.asarray(j, dtype=np.int64)
        return j + self.p.marker_slots * (j // self.per + 1)

    def span(self, k):
        """(first slot time, last slot time, START slot time or -1) of flit slot ``k``."""
        p = self.p
        k = np.asarray(k, dtype=np.int64)
        if p.framing == "aligned":
            per, rem = np.divmod(k, self.flits_per_period)
            cw0 = per * p.am_period + 1 + rem * p.cw_per_flit
            t0 = cw0 * SLOTS_PER_CW
            return t0, t0 + p.flit_slots - 1, np.full(k.shape, -1)
        K, F = p.start_every, p.flit_slots
        first = k * F + k // K + 1
        start = np.where(k % K == 0, self.data_time(first - 1), -1)
        return self.data_time(first), self.data_time(first + F - 1), start

    def damaged(self, k0: int, k1: int):
        """Per flit slot ``k0 .. k1 - 1``: (damage 0 none / 2 FEC flag / 3 CRC, arrival cw)."""
        p = self.p
        k = np.arange(k0, k1)
        t0, t1, ts = self.span(k)
        c0, c1 = t0 // SLOTS_PER_CW, t1 // SLOTS_PER_CW
        self.ch.ensure(int(c1.max()) + 2)
        st = self.ch.status
        bad_cw = np.flatnonzero(st >= UNCORRECTABLE)
        dmg = np.zeros(k.size, dtype=np.int8)
        if bad_cw.size:
            # damaged slot-time intervals: the bad codeword and the next one's first block
            lo = bad_cw * SLOTS_PER_CW
            hi = (bad_cw + 1) * SLOTS_PER_CW + _BLOCK_SLOTS + self._marker_at(bad_cw + 1)
            kind = st[bad_cw]
            # a flit [t0, t1] meets interval i iff lo_i <= t1 and hi_i > t0
            i1 = np.searchsorted(lo, t1, side="right")          # intervals with lo <= t1
            i0 = np.searchsorted(hi, t0, side="right")          # first with hi > t0
            for a in np.flatnonzero(i1 > i0):
                dmg[a] = kind[i0[a]:i1[a]].min()                 # FEC flag wins over CRC
            if p.framing == "straddle":
                hs = ts >= 0
                j = np.searchsorted(lo, ts[hs], side="right") - 1
                ok = j >= 0
                lost = np.zeros(hs.sum(), dtype=bool)
                lost[ok] = hi[j[ok]] > ts[hs][ok]
                group_lost = np.zeros(k.size, dtype=bool)
                group_lost[np.flatnonzero(hs)[lost]] = True
                # a damaged START row loses the framing of its group of start_every flits
                grp = k // p.start_every
                bad_groups = np.unique(grp[group_lost])
                extra = np.isin(grp, bad_groups) & (dmg == 0)
                dmg[extra] = UNCORRECTABLE
        return dmg, c1

    def _marker_at(self, cw):
        """Marker-area slot times at the start of codeword ``cw`` (0 if not a marker one)."""
        return np.where(cw % self.p.am_period == 0, self.p.marker_slots, 0)


@dataclass
class LinkResult:
    """Counters of one :func:`run` (see docs/fec.md, "The link on top of FEC")."""
    params: LinkParams
    ber: float
    burst_len: int
    seed: int
    flits: int                  #: data DL flits delivered in order
    writes: int                 #: 256-byte writes delivered whole
    payload_bits: float
    lane_bits: int              #: raw forward lane bits of the measured window
    goodput: float
    bound: float
    tx_data: int                #: data flit transmissions (first and replays)
    tx_control: int
    replays: int                #: go-back-N rewinds (NAK or timer)
    timeouts: int
    nak_sent: int
    fec_dropped: int            #: received flits dropped by the FEC flag or lost framing
    crc_dropped: int            #: received flits with a miscorrected codeword (CRC-32)
    rx_dup_dropped: int         #: replayed copies of accepted flits, dropped by the receiver
    rev_lost: int               #: reverse flits (ACK/NAK) lost to the FEC
    lost: int
    duplicated: int
    corrupted: int
    replay_from: list = field(default_factory=list)   #: sequence each rewind restarted at
    fwd: dict = field(default_factory=dict)
    rev: dict = field(default_factory=dict)

    @property
    def post_fec_ber(self) -> float:
        bits = self.fwd["codewords"] * MSG_BITS
        return self.fwd["residual_bit_errors"] / bits if bits else 0.0


def _counters(ch: Channel) -> dict:
    return {k: getattr(ch, k) for k in ("codewords", "decoded", "corrected", "uncorrectable",
                                         "miscorrected", "over_t", "raw_bit_errors",
                                         "residual_bit_errors")}


def run(flits: int, params: LinkParams | None = None, ber: float = 0.0, burst_len: int = 0,
        seed: int = 1, planted=None, planted_rev=None, max_slots: int | None = None
        ) -> LinkResult:
    """Stream ``flits`` data DL flits of 256-byte writes one way; return the counters.

    Parameters
    ----------
    flits : data DL flits to deliver (>= 1).
    params : :class:`LinkParams` (default: ``tl_per_dl = 32``, straddle framing).
    ber, burst_len : the channel of both directions (:class:`Channel`).
    seed : seeds both directions' channels (``[seed, 0]`` forward, ``[seed, 1]`` reverse).
    planted, planted_rev : forced codeword outcomes forward / reverse (:class:`Channel`).
    max_slots : stop with ``RuntimeError`` (naming the seed) past this many slot times
        (default: 1,000 flit times per requested flit).

    The window for the goodput is from time 0 to the end of the codeword holding the last
    slot of the transmission that delivered the last flit.
    """
    p = params or LinkParams()
    flits = _int("flits", flits, 1)
    seed = _int("seed", seed, 0)
    fwd_ch = Channel(ber, burst_len, np.random.default_rng([seed, 0]), planted)
    rev_ch = Channel(ber, burst_len, np.random.default_rng([seed, 1]), planted_rev)
    fwd, rev = _Lane(p, fwd_ch), _Lane(p, rev_ch)
    one_way = p.rtt_codewords * SLOTS_PER_CW / 2
    depth, mod = p.replay_depth, 1 << SEQ_BITS
    ft = p.flit_time
    if max_slots is None:
        max_slots = ft * flits * 1000

    # per flit slot tables, extended in chunks
    tabs = {"fd": np.zeros(0, np.int8), "fc": np.zeros(0, np.int64),
            "ft0": np.zeros(0, np.int64), "rd": np.zeros(0, np.int8),
            "rc": np.zeros(0, np.int64), "rt1": np.zeros(0, np.int64)}

    def extend(n):
        k0 = len(tabs["fd"])
        k1 = max(n, k0 + 256)
        d, c = fwd.damaged(k0, k1)
        t0, _, _ = fwd.span(np.arange(k0, k1))
        rd, rc = rev.damaged(k0, k1)
        _, rt1, _ = rev.span(np.arange(k0, k1))
        for key, v in (("fd", d), ("fc", c), ("ft0", t0), ("rd", rd), ("rc", rc),
                       ("rt1", rt1)):
            tabs[key] = np.concatenate([tabs[key], v])

    extend(1)
    # TX state
    acked = 0               # every flit < acked is acknowledged
    acked_prev = 0          # acked at the previous flit start (fill of the next entry)
    send_ptr = 0            # next sequence to send
    high = 0                # one past the highest sequence sent
    last_progress = 0       # slot time of the last ACK progress (replay timer)
    replays = timeouts = tx_data = tx_control = 0
    replay_from = []
    # RX state
    expected = 0
    episode = False
    nak_pending = False
    nak_sent = fec_dropped = crc_dropped = rx_dup = corrupted = rev_lost = 0
    in_flight = deque()     # (arrival time, seq or -1, damage, flit slot)
    rj = 0                  # next reverse flit slot
    delivered = dup_delivered = 0
    delivered_end = 0

    def receive_until(t):
        nonlocal expected, episode, nak_pending, nak_sent, fec_dropped, crc_dropped, rx_dup
        nonlocal corrupted, delivered_end, delivered, dup_delivered
        while in_flight and in_flight[0][0] <= t:
            _, g, dmg, kslot = in_flight.popleft()
            if dmg:
                if dmg == MISCORRECTED:
                    crc_dropped += 1
                else:
                    fec_dropped += 1
                if not episode:
                    episode, nak_pending = True, True
                continue
            if g < 0:
                continue
            diff = (g - expected) % mod
            if diff == 0:
                # the receiver sees only seq mod 2^10; the flit's content is its global
                # index, checked here: an older flit taken again is a duplicate, a newer
                # one means flits were skipped
                if g == expected:
                    delivered += 1
                elif g < expected:
                    dup_delivered += 1
                else:
                    corrupted += 1
                expected += 1
                episode = False
                delivered_end = kslot
            elif diff < mod // 2:
                if not episode:
                    episode, nak_pending = True, True
            else:
                rx_dup += 1         # a replayed copy of an accepted flit: dropped

    k = 0
    while expected < flits:
        if k >= len(tabs["fd"]):
            extend(k + 1)
        t = int(tabs["ft0"][k])
        if t > max_slots:
            raise RuntimeError(f"fec_link.run: no progress by slot time {t} "
                               f"(expected {expected} of {flits}); seed {seed}")
        # reverse trailers that reach the transmitter by t
        while True:
            if rj >= len(tabs["rd"]):
                extend(rj + 1)
            t_issue = int(tabs["rt1"][rj])
            t_arrive = (int(tabs["rc"][rj]) + 1) * SLOTS_PER_CW + one_way
            if t_arrive > t:
                break
            receive_until(t_issue)
            ack, nak = expected % mod, nak_pending
            if nak_pending:
                nak_sent += 1
                nak_pending = False
            rj += 1
            if tabs["rd"][rj - 1]:
                rev_lost += 1
                continue
            a = acked + (ack - acked) % mod
            if a <= high:
                if a > acked:
                    acked, last_progress = a, t_arrive
                if nak:
                    send_ptr = a
                    replays += 1
                    replay_from.append(a)
                    last_progress = t_arrive
        if acked < high and t - last_progress >= p.timeout:
            send_ptr = acked
            replays += 1
            timeouts += 1
            replay_from.append(acked)
            last_progress = t
        if send_ptr < high or send_ptr < acked_prev + depth:
            if high == acked:       # the timer runs only while flits are unacknowledged
                last_progress = t
            g = send_ptr
            send_ptr += 1
            high = max(high, send_ptr)
            tx_data += 1
        else:
            g = -1
            tx_control += 1
        arrive = (int(tabs["fc"][k]) + 1) * SLOTS_PER_CW + one_way
        in_flight.append((arrive, g, int(tabs["fd"][k]), k))
        acked_prev = acked
        k += 1
        receive_until(t)
    # the window: up to the end of the codeword of the last delivered flit's last slot
    lane_cw = int(tabs["fc"][delivered_end]) + 1
    lane_bits = lane_cw * CW_BITS
    payload_slots = flits * SLOTS_PER_TL * p.n_tl
    writes = payload_slots // WRITE_SLOTS
    payload_bits = flits * SLOTS_PER_TL * p.n_tl * SLOT_BITS * 16 / WRITE_SLOTS
    bound = format_bound(p)["bound"]
    return LinkResult(
        params=p, ber=ber, burst_len=burst_len, seed=seed, flits=delivered, writes=writes,
        payload_bits=payload_bits, lane_bits=lane_bits, goodput=payload_bits / lane_bits,
        bound=bound, tx_data=tx_data, tx_control=tx_control, replays=replays,
        timeouts=timeouts, nak_sent=nak_sent, fec_dropped=fec_dropped,
        crc_dropped=crc_dropped, rx_dup_dropped=rx_dup, rev_lost=rev_lost, lost=flits - delivered - dup_delivered - corrupted,
        duplicated=dup_delivered,
        corrupted=corrupted, replay_from=replay_from, fwd=_counters(fwd_ch), rev=_counters(rev_ch))
