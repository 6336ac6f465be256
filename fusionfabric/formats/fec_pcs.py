"""Constants and parameter checks of the FEC PCS profile's RTL (docs/fec.md).

The profile (64b/66b words -> 256b/257b -> scramble -> markers -> RS(544,514) -> FEC lanes)
is specified by the golden model :mod:`fusionfabric.sim.fec_pcs`; this module holds what
the RTL transmitter and receiver share and may not take from the model (``rtl`` does not
import ``sim``): the sizes, the lane markers re-derived from the public marker table
(:data:`fusionfabric.formats.pcs.MARKERS_100G`) and the checks of the RTL parameters.

- A codeword's message is 5140 bits = :data:`BLOCKS_PER_CW` slots of :data:`XBITS` bits.
- A marker codeword's message starts with the marker area, :func:`am_blocks` slots: lane
  ``k``'s 8-symbol marker (:func:`marker_symbols`) in message symbols ``k, k + n_lanes,
  ...``, then the pad 1010... (:func:`marker_area`).
"""

from __future__ import annotations

from fusionfabric.formats import fec as code
from fusionfabric.formats.pcs import MARKERS_100G

__all__ = ["LANE_COUNTS", "AM_PERIOD", "AM_SYMBOLS", "MARKER_MAX_BAD", "XBITS", "MSG_BITS",
           "BLOCKS_PER_CW", "check_params", "am_blocks", "marker_symbols", "marker_area"]

#: FEC lane counts (each divides 544).
LANE_COUNTS = (1, 2, 4, 8, 16)
#: Default marker period in codewords (802.3 cl. 91: one marker group every 4096 codewords).
AM_PERIOD = 4096
#: Symbols of one lane's marker.
AM_SYMBOLS = 8
#: A marker still matches with this many of its 8 symbols wrong.
MARKER_MAX_BAD = 2
#: Bits of one transcoded block (a message slot).
XBITS = 257
#: Message bits of a codeword.
MSG_BITS = code.K * code.M
#: Transcoded blocks (slots) in a codeword's message.
BLOCKS_PER_CW = MSG_BITS // XBITS


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_params(n_lanes: int, symbols: int, n_words: int, am_period: int) -> None:
    """Raise ``ValueError`` naming a bad parameter of the FEC PCS RTL.

    ``n_lanes`` one of :data:`LANE_COUNTS`; ``symbols`` (P, codeword symbols per cycle)
    divides 544 and is a multiple of ``n_lanes``; ``n_words`` client words per row give at
    least the line's client capacity, ``n_words * 544 >= 80 * P`` (a codeword of ``544/P``
    cycles carries at most 20 blocks = 80 words); ``am_period >= 2`` codewords.
    """
    if not _is_int(n_lanes) or n_lanes not in LANE_COUNTS:
        raise ValueError(f"n_lanes={n_lanes!r} must be one of {LANE_COUNTS}")
    if not _is_int(symbols) or symbols < 1 or code.N % symbols:
        divisors = tuple(d for d in range(1, code.N + 1) if code.N % d == 0)
        raise ValueError(f"symbols={symbols!r} must divide {code.N} (one of {divisors})")
    if symbols % n_lanes:
        raise ValueError(f"symbols={symbols} must be a multiple of n_lanes={n_lanes}")
    if not _is_int(n_words) or n_words < 1:
        raise ValueError(f"n_words={n_words!r} must be a positive integer")
    need = -(-4 * BLOCKS_PER_CW * symbols // code.N)
    if n_words < need:
        raise ValueError(f"n_words={n_words} is too few for symbols={symbols}: a codeword "
                         f"of {code.N // symbols} cycles carries up to {4 * BLOCKS_PER_CW} "
                         f"words, so n_words must be >= {need}")
    if not _is_int(am_period) or am_period < 2:
        raise ValueError(f"am_period={am_period!r} must be an integer >= 2 (codewords)")


def am_blocks(n_lanes: int) -> int:
    """Slots the marker area takes: ceil(80 n_lanes / 257)."""
    return -(-AM_SYMBOLS * code.M * n_lanes // XBITS)


def marker_symbols(lane: int) -> tuple[int, ...]:
    """The 8 symbols of lane ``lane``'s marker: the octets M0 M1 M2 ~M0 ~M1 ~M2 M0 M1 M2 ~M0
    (M0..M2 of IEEE 802.3 Table 82-2, PCS lane ``lane``) as one bit string, octet 0 first,
    each octet LSB first, cut into 10-bit symbols (bit 0 of a symbol first)."""
    m0, m1, m2 = MARKERS_100G[lane]
    octets = [m0, m1, m2, m0 ^ 0xFF, m1 ^ 0xFF, m2 ^ 0xFF, m0, m1, m2, m0 ^ 0xFF]
    value = sum(o << (8 * i) for i, o in enumerate(octets))
    return tuple((value >> (code.M * j)) & ((1 << code.M) - 1) for j in range(AM_SYMBOLS))


def marker_area(n_lanes: int) -> int:
    """The unscrambled marker area as an integer: bit ``i`` is message bit ``i`` of a marker
    codeword, for ``i < am_blocks(n_lanes) * 257``."""
    value = 0
    for i in range(AM_SYMBOLS * n_lanes):
        lane, j = i % n_lanes, i // n_lanes
        value |= marker_symbols(lane)[j] << (code.M * i)
    head = AM_SYMBOLS * n_lanes * code.M
    for i in range(am_blocks(n_lanes) * XBITS - head):
        if not i % 2:
            value |= 1 << (head + i)
    return value
