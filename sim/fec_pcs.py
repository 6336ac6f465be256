"""The FEC PCS profile: 64b/66b words -> 256b/257b -> RS(544,514) -> FEC lanes, numpy.

The transmit path follows the order of IEEE 802.3 cl. 119 (200GBASE-R/400GBASE-R PCS):
64b/66b encode, 256b/257b transcode (:mod:`fusionfabric.sim.transcode`), scramble, insert
alignment markers, RS(544,514) encode (:mod:`fusionfabric.sim.fec`), deal the 10-bit
symbols round robin to the FEC lanes. docs/fec.md is the specification; the choices that
802.3 does not make for this profile (marker period, marker contents, lane counts) are
listed there.

Transmit (:func:`transmit`):

- the client words (``data`` 64 bits, ``ctrl`` flag, :data:`fusionfabric.sim.pcs.WORD`) are
  padded with IDLE control words to whole codewords, taken four at a time and transcoded;
- the 257-bit blocks are scrambled as one bit stream by G(x) = 1 + x^39 + x^58
  (cl. 49.2.6, state :data:`SCRAMBLER_INIT` after reset); markers are not scrambled;
- codeword ``c`` with ``c % am_period == 0`` is a *marker codeword*: its message starts
  with :func:`am_blocks` x 257 bits of marker area (lane ``k``'s 8-symbol marker in the
  symbols ``k, k + n_lanes, ...``, then a 1010... pad), then ``20 - am_blocks`` data
  blocks; every other codeword carries 20 data blocks;
- message bits fill symbols as :func:`fusionfabric.sim.fec.bits_symbols` says, the
  codeword is encoded, and symbol ``i`` goes to FEC lane ``i % n_lanes``.

Receive (:func:`receive`, a stream model, vectorized over codewords): each physical lane is
searched for a lane marker (at most :data:`MARKER_MAX_BAD` of its 8 symbols wrong); a lane
locks when the same lane's marker appears again one marker period later, and the lane's
stream is used from that second marker on. Lanes are reordered by their marker ids and
deskewed on the markers; codewords are rebuilt, decoded and counted (:class:`Counters`).
The descrambler has no history after lock, so the first data block after the lock marker
is dropped. A codeword that cannot be corrected delivers every block it carried, and the
first block after it (whose descrambling reads the wrong bits), as error words
(``BlockType.ERROR`` control words, flagged in ``error``). A lane that does not lock, a
missing or repeated lane id, or skew above ``max_skew`` delivers nothing and is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusionfabric.formats.primitives import POLY_CL49, poly_taps
from fusionfabric.sim import fec
from fusionfabric.sim import transcode as tc
from fusionfabric.formats.pcs import MARKERS_100G, BlockType, control_word

__all__ = ["LANE_COUNTS", "AM_SYMBOLS", "MARKER_MAX_BAD", "SCRAMBLER_INIT", "AM_PERIOD",
           "BLOCKS_PER_CW", "check_params", "am_blocks", "marker_symbols", "marker_area",
           "words_per_period", "lock_offset_words", "scramble_bits", "descramble_bits",
           "TxResult", "transmit", "Counters", "RxResult", "receive"]

#: FEC lane counts the symbol distribution supports (each divides 544).
LANE_COUNTS = (1, 2, 4, 8, 16)
#: Symbols of one lane's marker.
AM_SYMBOLS = 8
#: A marker still matches with this many of its 8 symbols wrong.
MARKER_MAX_BAD = 2
#: Scrambler state after reset (all ones, as the 64b/66b PCS).
SCRAMBLER_INIT = (1 << 58) - 1
#: Default marker period in codewords (802.3 cl. 91: one marker group every 4096 codewords).
AM_PERIOD = 4096
#: 257-bit blocks in a codeword's message: 5140 / 257.
BLOCKS_PER_CW = fec.K * fec.M // tc.XBITS

_N_SCR, _TAPS = poly_taps(POLY_CL49)
_IDLE = control_word(BlockType.IDLE)
_ERROR = control_word(BlockType.ERROR)


def check_params(n_lanes: int, am_period: int, max_skew: int | None = None) -> None:
    """Raise ``ValueError`` naming a bad FEC PCS parameter."""
    if isinstance(n_lanes, bool) or not isinstance(n_lanes, (int, np.integer)) \
            or n_lanes not in LANE_COUNTS:
        raise ValueError(f"n_lanes={n_lanes!r} must be one of {LANE_COUNTS}")
    if isinstance(am_period, bool) or not isinstance(am_period, (int, np.integer)) \
            or am_period < 2:
        raise ValueError(f"am_period={am_period!r} must be an integer >= 2 (codewords)")
    if max_skew is not None:
        half = am_period * fec.N // n_lanes // 2
        if not isinstance(max_skew, (int, np.integer)) or not 0 <= max_skew < half:
            raise ValueError(f"max_skew={max_skew!r} must be an integer in 0..{half - 1} "
                             "symbols (under half a marker period)")


def am_blocks(n_lanes: int) -> int:
    """257-bit block slots the marker area takes: ceil(80 n_lanes / 257)."""
    return -(-AM_SYMBOLS * fec.M * n_lanes // tc.XBITS)


def marker_symbols(lane: int) -> np.ndarray:
    """The 8 symbols of lane ``lane``'s marker: octets M0 M1 M2 ~M0 ~M1 ~M2 M0 M1 M2 ~M0
    (M0..M2 of IEEE 802.3 Table 82-2 for PCS lane ``lane``), each octet LSB first."""
    m0, m1, m2 = MARKERS_100G[lane]
    octets = [m0, m1, m2, m0 ^ 0xFF, m1 ^ 0xFF, m2 ^ 0xFF, m0, m1, m2, m0 ^ 0xFF]
    bits = np.unpackbits(np.array(octets, dtype=np.uint8), bitorder="little")
    return fec.bits_symbols(bits)


def marker_area(n_lanes: int) -> np.ndarray:
    """The unscrambled marker area of a marker codeword: ``am_blocks * 257`` bits."""
    nbits = am_blocks(n_lanes) * tc.XBITS
    sym = np.stack([marker_symbols(k) for k in range(n_lanes)], axis=1).reshape(-1)
    head = fec.symbol_bits(sym)
    pad = (np.arange(nbits - head.size) + 1) % 2
    return np.concatenate([head, pad]).astype(np.uint8)


def words_per_period(n_lanes: int, am_period: int) -> int:
    """Client words one marker period carries."""
    return 4 * (BLOCKS_PER_CW * am_period - am_blocks(n_lanes))


def lock_offset_words(n_lanes: int, am_period: int, period: int = 1) -> int:
    """Index in the transmitted word stream of the first word a receiver delivers when it
    locks on the marker of ``period`` (1 when every lane is clean from reset: the marker
    at codeword 0 is seen, the one at ``am_period`` confirms it), after the dropped block."""
    return period * words_per_period(n_lanes, am_period) + 4


def scramble_bits(bits, state: int = SCRAMBLER_INIT) -> tuple[np.ndarray, int]:
    """Scramble a bit stream with 1 + x^39 + x^58 (cl. 49.2.6); returns (bits, state)."""
    from fusionfabric.sim.scrambler import iir_fill
    data = np.asarray(bits, dtype=np.uint8).reshape(-1)
    hist = np.array([(state >> (_N_SCR - 1 - i)) & 1 for i in range(_N_SCR)], dtype=np.uint8)
    buf = np.concatenate([hist, np.zeros(data.size, dtype=np.uint8)])
    iir_fill(buf, _N_SCR, data, _TAPS)
    last = buf[-_N_SCR:]
    new_state = 0
    for b in last:
        new_state = (new_state << 1) | int(b)
    return buf[_N_SCR:].copy(), new_state


def descramble_bits(bits) -> np.ndarray:
    """Self-synchronizing descramble with no history (the first 58 bits are unreliable)."""
    data = np.asarray(bits, dtype=np.uint8).reshape(-1)
    out = data.copy()
    for k in _TAPS:
        out[k:] ^= data[:-k]
    return out


@dataclass
class TxResult:
    """``lanes[k]``: FEC lane ``k``'s symbols in time order; ``codewords`` (C, 544);
    ``n_words``: client words sent including ``n_pad`` IDLE words appended at the end."""
    lanes: np.ndarray
    codewords: np.ndarray
    n_words: int
    n_pad: int
    state: int


def transmit(data, ctrl, n_lanes: int = 4, am_period: int = AM_PERIOD,
             state: int = SCRAMBLER_INIT) -> TxResult:
    """Encode client words (any shape; taken in row-major order) into FEC lanes."""
    check_params(n_lanes, am_period)
    d = np.asarray(data, dtype=np.uint64).reshape(-1)
    c = np.asarray(ctrl, dtype=bool).reshape(-1)
    if d.shape != c.shape:
        raise ValueError(f"data has {d.size} words but ctrl {c.size}")
    nam = am_blocks(n_lanes)
    nblk = -(-d.size // 4)
    # codewords needed: the marker codewords carry BLOCKS_PER_CW - nam blocks
    ncw = 0
    cap = 0
    while cap < nblk or ncw == 0:
        cap += BLOCKS_PER_CW - (nam if ncw % am_period == 0 else 0)
        ncw += 1
    npad = cap * 4 - d.size
    d = np.concatenate([d, np.full(npad, _IDLE, dtype=np.uint64)])
    c = np.concatenate([c, np.ones(npad, dtype=bool)])
    xb = tc.encode_words(d, c)                              # (cap, 257)
    scr, new_state = scramble_bits(xb.reshape(-1), state)
    msg = np.zeros((ncw, fec.K * fec.M), dtype=np.uint8)
    is_am = np.arange(ncw) % am_period == 0
    area = marker_area(n_lanes)
    pos = 0
    for i in range(ncw):
        off = area.size if is_am[i] else 0
        take = msg.shape[1] - off
        if is_am[i]:
            msg[i, :off] = area
        msg[i, off:] = scr[pos:pos + take]
        pos += take
    cw = fec.encode(fec.bits_symbols(msg))
    lanes = np.stack([cw[:, k::n_lanes].reshape(-1) for k in range(n_lanes)])
    return TxResult(lanes, cw, d.size, npad, new_state)


@dataclass
class Counters:
    """Receiver counters (cl. 91.6 names in brackets).

    ``codewords``: codewords decoded; ``corrected_codewords`` [FEC_corrected_cw_counter];
    ``uncorrectable_codewords`` [FEC_uncorrected_cw_counter]; ``corrected_symbols``:
    symbols changed by the decoder; ``symbol_errors_per_lane`` [FEC_symbol_error_counter_i],
    by logical FEC lane; ``lanes_locked``: physical lanes with marker lock; ``aligned``:
    all lanes locked, their ids a permutation and the skew within ``max_skew``;
    ``lane_map[p]``: logical lane of physical lane ``p`` (-1: no lock); ``skew``: symbols
    by which each physical lane's marker came later than the earliest.
    """
    codewords: int = 0
    corrected_codewords: int = 0
    uncorrectable_codewords: int = 0
    corrected_symbols: int = 0
    symbol_errors_per_lane: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lanes_locked: int = 0
    aligned: bool = False
    lane_map: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    skew: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class RxResult:
    """Delivered words (``data`` uint64, ``ctrl`` bool, ``error`` bool) and the counters;
    ``codewords``: the corrected codewords, ``ok`` their decode status."""
    data: np.ndarray
    ctrl: np.ndarray
    error: np.ndarray
    counters: Counters
    codewords: np.ndarray
    ok: np.ndarray


_MARKERS = np.stack([marker_symbols(k) for k in range(max(LANE_COUNTS))])


def _find_markers(stream: np.ndarray, n_lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and lane ids of marker matches in one lane's symbol stream."""
    if stream.size < AM_SYMBOLS:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    win = np.lib.stride_tricks.sliding_window_view(stream, AM_SYMBOLS)
    bad = (win[:, None, :] != _MARKERS[None, :n_lanes, :]).sum(axis=-1)   # (L, n)
    best = bad.argmin(axis=1)
    hit = bad[np.arange(bad.shape[0]), best] <= MARKER_MAX_BAD
    pos = np.flatnonzero(hit)
    return pos, best[pos]


def _lock(stream: np.ndarray, n_lanes: int, per: int) -> tuple[int, int]:
    """(position of the confirming marker, lane id), or (-1, -1)."""
    pos, ids = _find_markers(stream, n_lanes)
    where = dict(zip(pos.tolist(), ids.tolist()))
    for p, k in zip(pos.tolist(), ids.tolist()):
        if where.get(p + per) == k:
            return p + per, k
    return -1, -1


def receive(lanes, n_lanes: int = 4, am_period: int = AM_PERIOD,
            max_skew: int | None = None) -> RxResult:
    """Lock, deskew, reorder, decode and deliver (see the module docstring).

    ``lanes``: a sequence of ``n_lanes`` symbol arrays, one per physical lane, in time
    order, of any lengths; values outside 0..1023 are a ``ValueError``.
    """
    check_params(n_lanes, am_period, max_skew)
    if len(lanes) != n_lanes:
        raise ValueError(f"got {len(lanes)} lanes, n_lanes={n_lanes}")
    streams = [fec.check_symbols(np.asarray(s).reshape(-1), f"lanes[{i}]")
               for i, s in enumerate(lanes)]
    chunk = fec.N // n_lanes
    per = am_period * chunk
    if max_skew is None:
        max_skew = per // 2 - 1
    cnt = Counters(symbol_errors_per_lane=np.zeros(n_lanes, np.int64),
                   lane_map=np.full(n_lanes, -1, np.int64), skew=np.zeros(n_lanes, np.int64))
    empty = RxResult(np.zeros(0, np.uint64), np.zeros(0, bool), np.zeros(0, bool), cnt,
                     np.zeros((0, fec.N), np.int64), np.zeros(0, bool))
    locks = [_lock(s, n_lanes, per) for s in streams]
    cnt.lane_map = np.array([k for _, k in locks], dtype=np.int64)
    cnt.lanes_locked = int((cnt.lane_map >= 0).sum())
    if cnt.lanes_locked < n_lanes or sorted(cnt.lane_map.tolist()) != list(range(n_lanes)):
        return empty
    # deskew: bring every lane's lock marker to the marker of the same period as the latest
    q = np.array([p for p, _ in locks], dtype=np.int64)
    ref = q.max()
    q = q + np.round((ref - q) / per).astype(np.int64) * per
    cnt.skew = q - q.min()
    if cnt.skew.max() > max_skew:
        return empty
    cnt.aligned = True
    order = np.argsort(cnt.lane_map)                        # logical lane -> physical lane
    ncw = min((streams[p].size - q[p]) // chunk for p in range(n_lanes))
    if ncw <= 0:
        return empty
    rx = np.zeros((ncw, fec.N), dtype=np.int64)
    for k in range(n_lanes):
        p = order[k]
        rx[:, k::n_lanes] = streams[p][q[p]:q[p] + ncw * chunk].reshape(ncw, chunk)
    res = fec.decode_batch(rx)
    diff = (res.codewords != rx) & res.ok[:, None]
    cnt.codewords = ncw
    cnt.uncorrectable_codewords = int((~res.ok).sum())
    cnt.corrected_codewords = int((res.ok & diff.any(axis=1)).sum())
    cnt.corrected_symbols = int(diff.sum())
    cnt.symbol_errors_per_lane = diff.reshape(ncw, chunk, n_lanes).sum(axis=(0, 1))
    # message bits, marker areas removed; each data block remembers its codeword
    msg = fec.symbol_bits(res.codewords[:, :fec.K])
    nam = am_blocks(n_lanes)
    is_am = np.arange(ncw) % am_period == 0               # the lock marker is codeword 0
    nblk = np.where(is_am, BLOCKS_PER_CW - nam, BLOCKS_PER_CW)
    blocks = msg.reshape(ncw, BLOCKS_PER_CW, tc.XBITS)
    keep = np.ones((ncw, BLOCKS_PER_CW), dtype=bool)
    keep[is_am, :nam] = False
    data_bits = blocks[keep]                                # (total, 257)
    cw_of = np.repeat(np.arange(ncw), nblk)
    bad_blk = ~res.ok[cw_of]
    first_of_cw = np.r_[True, cw_of[1:] != cw_of[:-1]]
    prev_bad = np.r_[False, bad_blk[:-1]]
    bad_blk |= first_of_cw & prev_bad                      # descrambler error propagation
    plain = descramble_bits(data_bits.reshape(-1)).reshape(-1, tc.XBITS)
    plain, bad_blk = plain[1:], bad_blk[1:]                # the descrambler-priming block
    d, c, e = tc.decode_words(plain)
    bad_w = np.repeat(bad_blk, 4)
    d, c, e = d.reshape(-1), c.reshape(-1), e.reshape(-1) | bad_w
    d = np.where(bad_w, np.uint64(_ERROR), d)
    c = c | bad_w
    return RxResult(d, c, e, cnt, res.codewords, res.ok)
