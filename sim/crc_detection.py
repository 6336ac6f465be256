"""Undetected-error probability of the DL flit CRC behind the 64b/66b PCS (docs/crc.md).

The data path of one link direction: DL flits (:func:`fusionfabric.sim.chiplet.dl_frame`,
CRC-32/ISO-HDLC in the last four bytes) -> PHY rows (one 128-bit slot per row of two 64-bit
data words, :class:`fusionfabric.sim.chiplet.PhyTx`) -> 2-lane 64b/66b PCS
(:func:`fusionfabric.sim.pcs.transmit`): the block payloads are scrambled as one stream, row
by row, lane 0 first, by the self-synchronising scrambler 1 + x^39 + x^58.

**Layout.** Flit bit ``i`` (byte ``i // 8``, bit ``i % 8``: the bit order of the CRC, LSB
first) is slot ``i // 128``, lane ``(i % 128) // 64``, payload bit ``i % 64``; the payload
stream position of that lane bit is ``128 * row + 64 * lane + bit``. So inside a flit the
payload stream *is* the flit's bit stream: flit bit ``i`` is stream position ``p0 + i``
(marker rows are not scrambled and do not advance the scrambler; a START row before the
flit is part of the stream before ``p0``). :func:`flit_bit` gives the map; the tests check
it by flipping every line bit of a flit through the numpy model chain.

**Descrambler.** The receiver computes ``out[t] = in[t] ^ in[t-39] ^ in[t-58]``, so a line
(scrambled payload) error at stream position ``t`` becomes errors at ``t``, ``t+39`` and
``t+58`` (:func:`descrambled_errors`).

**CRC.** Flit bit ``i`` of an ``n``-bit flit is the coefficient of ``x^(n-1-i)`` of the
codeword polynomial (the first bit on the wire is the highest power) and every codeword of
CRC-32 is a multiple of ``g(x) = 0x104C11DB7``; init and xorout cancel in the difference of
two flits of the same length, so an error pattern ``e`` is undetected iff ``e != 0`` and
``g | e(x)`` (:func:`undetected`). The residues ``x^k mod g`` are computed here with Python
integers (carry-less arithmetic), independently of ``zlib``.

Everything here is exact GF(2) arithmetic except :func:`weight_fraction` (sampled) and
:func:`p_undetected`, whose approximations are stated in its docstring and in docs/crc.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fusionfabric.formats.chiplet import SLOT_BITS, dl_flit_slots

__all__ = ["CRC_POLY", "SCRAMBLER_TAPS", "flit_bits", "flit_bit", "descrambled_errors",
           "line_to_flit_errors", "poly_mod", "poly_mulmod", "poly_gcd", "x_pow_mod",
           "is_primitive", "syndromes", "undetected", "line_pattern_syndromes",
           "LowWeightSearch", "min_undetected", "weight_fraction", "p_undetected",
           "p_undetected_rs544", "ModelChain",
           "FlitRate", "flit_rate_64b66b", "flit_rate_rs544"]

#: CRC-32 generator g(x) in normal form (bit k = coefficient of x^k): reflected 0x04C11DB7.
CRC_POLY = 0x1_04C1_1DB7
CRC_BITS = 32
#: Taps of the self-synchronising scrambler 1 + x^39 + x^58 (cl. 49.2.6).
SCRAMBLER_TAPS = (39, 58)
#: Lanes of the 64b/66b profile and payload bits per block.
N_LANES = 2
PAYLOAD_BITS = 64
#: The scrambler polynomial as the error multiplier in the CRC's convention (first bit on
#: the wire = highest power): errors at i, i+39, i+58 are x^(m-i) (1 + x^-39 + x^-58),
#: i.e. x^(m-i-58) (x^58 + x^19 + 1).
T_POLY = (1 << 58) | (1 << 19) | 1


def flit_bits(tl_per_dl: int = 4) -> int:
    """Bits of one DL flit on the wire, CRC included (2176 at ``tl_per_dl = 4``)."""
    return dl_flit_slots(tl_per_dl) * SLOT_BITS


def flit_bit(row: int, lane: int, payload_bit: int) -> int:
    """Flit bit carried by payload bit ``payload_bit`` of lane ``lane`` in the flit's row
    ``row`` (row 0 = the flit's first slot; a negative row is a row before the flit, giving
    a negative position). Bit 0 of the payload is the first bit on the wire."""
    if lane not in range(N_LANES) or payload_bit not in range(PAYLOAD_BITS):
        raise ValueError(f"lane={lane}, payload_bit={payload_bit} out of range")
    return SLOT_BITS * row + PAYLOAD_BITS * lane + payload_bit


def descrambled_errors(line_positions) -> list[int]:
    """Stream positions in error after the descrambler for line (scrambled payload) errors
    at ``line_positions``: the XOR of the triplets ``{t, t+39, t+58}``, sorted."""
    out: set[int] = set()
    for t in line_positions:
        for p in (int(t), int(t) + SCRAMBLER_TAPS[0], int(t) + SCRAMBLER_TAPS[1]):
            out ^= {p}
    return sorted(out)


def line_to_flit_errors(line_positions, n_bits: int) -> list[int]:
    """Flit bits in error for line errors at ``line_positions`` (stream positions relative
    to the flit's first bit, from -58 on): the descrambled errors that fall in
    ``[0, n_bits)``. Errors outside the flit belong to the neighbouring flits."""
    return [p for p in descrambled_errors(line_positions) if 0 <= p < n_bits]


# -- GF(2) polynomials as Python integers (bit k = coefficient of x^k) --------------------------
def poly_mod(a: int, g: int = CRC_POLY) -> int:
    """``a(x) mod g(x)`` over GF(2)."""
    dg = g.bit_length() - 1
    while a.bit_length() - 1 >= dg:
        a ^= g << (a.bit_length() - 1 - dg)
    return a


def poly_mulmod(a: int, b: int, g: int = CRC_POLY) -> int:
    """``a(x) b(x) mod g(x)`` over GF(2)."""
    acc = 0
    a = poly_mod(a, g)
    while b:
        if b & 1:
            acc ^= a
        b >>= 1
        a = poly_mod(a << 1, g)
    return acc


def poly_gcd(a: int, b: int) -> int:
    """Greatest common divisor of two GF(2) polynomials (monic by construction)."""
    while b:
        a, b = b, poly_mod(a, b)
    return a


def x_pow_mod(e: int, g: int = CRC_POLY) -> int:
    """``x^e mod g(x)`` by square and multiply."""
    result, base = 1, poly_mod(2, g)
    while e:
        if e & 1:
            result = poly_mulmod(result, base, g)
        base = poly_mulmod(base, base, g)
        e >>= 1
    return result


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def is_primitive(g: int = CRC_POLY) -> bool:
    """True iff ``g`` is irreducible and ``x`` has order ``2^deg - 1`` modulo ``g``
    (Rabin's irreducibility test, then the order test over the prime factors)."""
    d = g.bit_length() - 1
    # irreducible iff x^(2^d) = x mod g and gcd(x^(2^(d/q)) - x, g) = 1 for primes q | d
    if x_pow_mod(1 << d, g) != 2:
        return False
    for q in _prime_factors(d):
        if poly_gcd(g, x_pow_mod(1 << (d // q), g) ^ 2) != 1:
            return False
    order = (1 << d) - 1
    return all(x_pow_mod(order // p, g) != 1 for p in _prime_factors(order))


def syndromes(n_bits: int, g: int = CRC_POLY) -> np.ndarray:
    """``syn[i] = x^(n_bits-1-i) mod g``: the CRC syndrome of an error at flit bit ``i``
    (as ``uint64``). A pattern is undetected iff it is non-empty and its syndromes XOR to 0."""
    out = np.zeros(n_bits, np.uint64)
    r = 1
    for i in range(n_bits - 1, -1, -1):
        out[i] = r
        r = poly_mod(r << 1, g)
    return out


def undetected(flit_error_positions, n_bits: int) -> bool:
    """True iff the flit error pattern (bit positions, CRC field included) is non-empty and
    a multiple of ``g``, i.e. the receiver's CRC check passes although the flit changed."""
    pos = sorted(set(int(p) for p in flit_error_positions))
    if not pos:
        return False
    if pos[0] < 0 or pos[-1] >= n_bits:
        raise ValueError(f"error positions must lie in 0..{n_bits - 1}")
    e = 0
    for p in pos:
        e |= 1 << (n_bits - 1 - p)
    return poly_mod(e) == 0


def line_pattern_syndromes(n_bits: int) -> tuple[np.ndarray, list[list[int]]]:
    """For every line error position ``j`` in ``[-58, n_bits)`` (the positions whose
    descrambled images reach the flit), the syndrome of its in-flit image and the image.
    Returns ``(syn[j + 58], images)``."""
    base = syndromes(n_bits)
    lo = -SCRAMBLER_TAPS[1]
    syn = np.zeros(n_bits - lo, np.uint64)
    images = []
    for j in range(lo, n_bits):
        img = line_to_flit_errors([j], n_bits)
        images.append(img)
        s = np.uint64(0)
        for p in img:
            s ^= base[p]
        syn[j - lo] = s
    return syn, images


# -- exhaustive low-weight search ---------------------------------------------------------------
@dataclass
class LowWeightSearch:
    """Result of :func:`min_undetected`: ``counts[k]`` undetected error sets of weight
    ``k`` (1..4, exhaustive), and one undetected weight-5 set if one was found."""
    n_positions: int
    counts: dict
    example5: list | None
    seconds: float


def _equal_runs(sorted_values: np.ndarray):
    """Every index pair ``(i, j)``, ``i < j``, of equal entries of a sorted array."""
    same = np.flatnonzero(sorted_values[1:] == sorted_values[:-1])
    if not len(same):
        return
    # runs of consecutive equal entries: start where the previous step was not equal
    starts = same[np.concatenate(([True], np.diff(same) != 1))]
    for st in starts:
        end = st + 1
        while end + 1 < len(sorted_values) and sorted_values[end + 1] == sorted_values[st]:
            end += 1
        for i in range(st, end + 1):
            for j in range(i + 1, end + 1):
                yield int(i), int(j)


def _pairs(syn: np.ndarray):
    m = len(syn)
    a, b = np.triu_indices(m, 1)
    return syn[a] ^ syn[b], a, b


def min_undetected(syn: np.ndarray, images=None, seed: int = 1,
                   triples: int = 200_000) -> LowWeightSearch:
    """Count the sets of 1..4 positions whose syndromes XOR to zero (exhaustive, meet in
    the middle over all pairs), then look for a weight-5 set by random triples against the
    pairs. With ``images`` (line errors), a set counts only if its in-flit pattern is
    non-empty (a set whose images cancel leaves the flit intact)."""
    import time
    t0 = time.time()

    def real(idx):
        if images is None:
            return True
        e: set[int] = set()
        for j in idx:
            e ^= set(images[j])
        return bool(e)

    m = len(syn)
    counts = {1: 0, 2: 0, 3: 0, 4: 0}
    counts[1] = sum(real([i]) for i in np.flatnonzero(syn == 0))
    order = np.argsort(syn, kind="stable")
    counts[2] = sum(real([int(order[i]), int(order[j])]) for i, j in _equal_runs(syn[order]))
    v, a, b = _pairs(syn)
    po = np.argsort(v, kind="stable")
    vs = v[po]
    # weight 3: syn[c] == syn[a] ^ syn[b], c not in {a, b}
    lo = np.searchsorted(vs, syn, "left")
    hi = np.searchsorted(vs, syn, "right")
    for c in np.flatnonzero(hi > lo):
        for k in po[lo[c]:hi[c]]:
            idx = {int(a[k]), int(b[k]), int(c)}
            if len(idx) == 3 and real(sorted(idx)):
                counts[3] += 1
    counts[3] //= 3
    # weight 4: two disjoint pairs with equal XOR
    seen = set()
    for i, j in _equal_runs(vs):
        k1, k2 = po[i], po[j]
        idx = frozenset((int(a[k1]), int(b[k1]), int(a[k2]), int(b[k2])))
        if len(idx) == 4 and idx not in seen and real(sorted(idx)):
            seen.add(idx)
    counts[4] = len(seen)
    example = None
    rng = np.random.default_rng(seed)
    done = 0
    while example is None and done < triples:
        n = min(50_000, triples - done)
        t = np.sort(rng.integers(0, m, (n, 3)), axis=1)
        ok = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2])
        t = t[ok]
        x = syn[t[:, 0]] ^ syn[t[:, 1]] ^ syn[t[:, 2]]
        lo = np.searchsorted(vs, x, "left")
        hi = np.searchsorted(vs, x, "right")
        for r in np.flatnonzero(hi > lo):
            for k in po[lo[r]:hi[r]]:
                idx = sorted({*map(int, t[r]), int(a[k]), int(b[k])})
                if len(idx) == 5 and real(idx):
                    example = idx
                    break
            if example is not None:
                break
        done += n
    return LowWeightSearch(m, counts, example, time.time() - t0)


def weight_fraction(syn: np.ndarray, weight: int = 5, samples: int = 1_000_000,
                    seed: int = 1) -> tuple[float, int]:
    """Estimated fraction of 5-sets of positions whose syndromes XOR to zero: ``samples``
    random triples looked up among all pairs. Returns ``(fraction, hits)``, the fraction
    being hits / samples x C(m,3) / C(5,3) / C(m,5) (each 5-set is found once per split
    into a triple and a disjoint pair)."""
    if weight != 5:
        raise ValueError(f"weight={weight}: only 5 is supported")
    m = len(syn)
    v, a, b = _pairs(syn)
    po = np.argsort(v, kind="stable")
    vs = v[po]
    rng = np.random.default_rng(seed)
    hits, drawn = 0, 0
    while drawn < samples:
        n = min(200_000, samples - drawn)
        t = np.sort(rng.integers(0, m, (n, 3)), axis=1)
        t = t[(t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2])]
        x = syn[t[:, 0]] ^ syn[t[:, 1]] ^ syn[t[:, 2]]
        lo = np.searchsorted(vs, x, "left")
        hi = np.searchsorted(vs, x, "right")
        for r in np.flatnonzero(hi > lo):
            for k in po[lo[r]:hi[r]]:
                if len({*map(int, t[r]), int(a[k]), int(b[k])}) == 5:
                    hits += 1
        drawn += len(t)
    frac = hits / drawn * math.comb(m, 3) / math.comb(5, 3) / math.comb(m, 5)
    return frac, hits


# -- probabilities ------------------------------------------------------------------------------
def _binom_pmf(n: int, k: int, p: float) -> float:
    if p <= 0:
        return 1.0 if k == 0 else 0.0
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p))


def p_undetected(ber: float, counts: dict, tl_per_dl: int = 4,
                 f_high: float = 2.0 ** -32, am_period: int = 64,
                 start_every: int = 16, link_reset: bool = True) -> dict:
    """Per-flit probability that a flit with errors passes the CRC, 64b/66b profile, at
    line BER ``ber`` with independent bit errors. ``counts[k]`` (k = 1..4) are the numbers
    of undetected sets of ``k`` line (payload) errors from the exhaustive search
    (:func:`min_undetected` over :func:`line_pattern_syndromes`). Terms (docs/crc.md):

    - ``payload``: over the ``m = n + 58`` scrambled payload bits whose descrambled images
      reach the flit, ``sum_{k<=4} counts[k] ber^k (1-ber)^(m-k)`` (each undetected set
      exactly) plus ``P(K >= 5) f_high``, ``K ~ Binomial(m, ber)``, taking the fraction of
      undetected patterns among those of 5 or more line errors as ``f_high = 2^-32``: the
      fraction of non-zero patterns that are multiples of a degree-32 generator, which a
      CRC approaches for weights at and above its Hamming distance (the sampled fraction at
      5 line errors is within a few per cent of it, :func:`weight_fraction`).
    - ``sync``: 0. A sync-header error of a data block (any change of its two bits) makes
      the receiver deliver a control word (``ERROR`` or another control block) instead of
      the block's 64 data bits; the row is not a clean data row, so
      :class:`fusionfabric.sim.chiplet.PhyRx` (and ``PcsToPhy``) marks that slot ``err``
      and the DL fails the flit whatever its CRC, or, at a flit boundary, ends the chain
      (nothing is delivered as a flit until the next START row).
    - ``start``: a damaged START row (or any damaged row) at a flit boundary ends the
      chain, so it no longer misframes flits. What is left are rows the PCS delivers as a
      *clean* row of the wrong kind, which no flag marks: (a) a data row whose lane 0 sync
      header has both bits flipped (01 -> 10) and whose first payload octet reads as the
      START type (``2^-8`` for uniform data) is a false START row: the flits that follow
      are misframed until the next real START row, ``(start_every - 1) / 2`` complete
      flits on average with back-to-back flits, so ``L ber^2 2^-8 (start_every - 1) / 2
      2^-32`` per flit (``L`` rows per flit); (b) a START row with the sync headers of
      both lanes flipped (4 line errors) reads as a clean data row that a chained flit
      begins with: ``start_every`` misframed flits per START row, ``ber^4 2^-32`` per
      flit. Each misframed flit passes with ``2^-32``.
    - ``marker``: an error in the 48 marker bits (M0..M2, M4..M6) or the sync header of
      either lane's alignment marker fails the receiver's marker-row check and drops the
      alignment; rows are lost. With ``link_reset`` (``PcsToPhy.i_link_up`` connected to
      the PCS receiver's ``o_link_up``) the adapter waits for a START row after the relock
      and nothing is misframed: 0. Without it (an estimate, upper end) the flits after the
      relock are misframed until the next START row, each passing with ``2^-32``:
      ``(marker rows per flit) x 100 ber x start_every x 2^-32`` per flit.
    """
    if not 0 <= ber < 1:
        raise ValueError(f"ber={ber} must be in [0, 1)")
    n = flit_bits(tl_per_dl)
    m = n + SCRAMBLER_TAPS[1]
    exact = sum(int(counts.get(k, 0)) * _binom_pmf(m, k, ber) / math.comb(m, k)
                for k in range(1, 5))
    p_ge5 = sum(_binom_pmf(m, k, ber) for k in range(5, min(m, 80) + 1))
    payload = exact + p_ge5 * f_high
    # sync-header errors of data blocks are flagged (err) or end the chain: never accepted
    sync = 0.0
    # rows delivered clean but of the wrong kind: a false START row (2 lane-0 sync errors,
    # START type octet) and a START row read as data (4 sync errors)
    L = dl_flit_slots(tl_per_dl)
    start = (L * ber ** 2 * 2.0 ** -8 * (start_every - 1) / 2 + ber ** 4) * 2.0 ** -32
    rows_per_flit = dl_flit_slots(tl_per_dl) + 1 / start_every
    marker = 0.0 if link_reset else (rows_per_flit / (am_period - 1) * 2 * (48 + 2) * ber
                                     * start_every * 2.0 ** -32)
    return {"payload": payload, "payload_exact": exact, "p_k_ge5": p_ge5, "sync": sync,
            "start": start, "marker": marker, "total": payload + sync + start + marker}


def p_undetected_rs544(pre_fec_ber: float, f_high: float = 2.0 ** -32) -> dict:
    """Per-flit estimate for the RS(544,514) profile at pre-FEC BER ``pre_fec_ber``: only a
    miscorrected codeword reaches the CRC unflagged (an uncorrectable one is flagged and
    its flit dropped). ``P(> 15 symbol errors) x 1/15!`` (the miscorrection fraction of a
    bounded-distance decoder, docs/fec.md) per codeword, a flit touching at most 2
    codewords, and ``f_high`` for the many-bit pattern a miscorrection leaves."""
    from fusionfabric.sim.fec_link import binomial_tail, symbol_error_prob
    p_unc = binomial_tail(544, symbol_error_prob(pre_fec_ber), 15)
    p_mis = p_unc / math.factorial(15)
    return {"p_uncorrectable": p_unc, "p_miscorrected": p_mis, "total": 2 * p_mis * f_high}


@dataclass
class FlitRate:
    flits_per_s: float
    note: str


def flit_rate_64b66b(lane_gbps: float = 400.0, tl_per_dl: int = 4, am_period: int = 64,
                     start_every: int = 16) -> FlitRate:
    """DL flits per second on one direction of the 2-lane 64b/66b link: every lane sends
    ``lane_gbps / 66`` blocks per second (one row of two blocks per slot); one row in
    ``am_period`` is a marker row; a flit is ``4 tl_per_dl + 1`` rows plus one START row
    per ``start_every`` flits."""
    rows = lane_gbps * 1e9 / 66 * (1 - 1 / am_period)
    per_flit = dl_flit_slots(tl_per_dl) + 1 / start_every
    return FlitRate(rows / per_flit, f"{N_LANES} lanes x {lane_gbps:g} Gb/s, 64b/66b, "
                    f"am_period {am_period}, a START row per {start_every} flits")


def flit_rate_rs544(lane_gbps: float = 400.0, tl_per_dl: int = 4,
                    start_every: int = 16) -> FlitRate:
    """DL flits per second with RS(544,514) and 256b/257b on two lanes of the same rate
    (markers neglected): each lane carries ``lane_gbps * 514/544 * 256/257`` Gb/s of
    64-bit words."""
    bits = N_LANES * lane_gbps * 1e9 * 514 / 544 * 256 / 257
    per_flit = (dl_flit_slots(tl_per_dl) + 1 / start_every) * SLOT_BITS
    return FlitRate(bits / per_flit, f"{N_LANES} lanes x {lane_gbps:g} Gb/s, "
                    f"256b/257b + RS(544,514), a START row per {start_every} flits")


# -- the numpy model chain: DL flits -> PhyTx -> PCS -> line -> Receiver -> PhyRx -> DL flits ---
class ModelChain:
    """DL flits sent through the project's numpy models of one link direction, with line
    bit errors: :class:`fusionfabric.sim.chiplet.PhyTx` rows, :func:`fusionfabric.sim.pcs.
    transmit` (2 lanes, markers every ``am_period`` rows), the line (66-bit blocks per
    lane), :class:`fusionfabric.sim.pcs.Receiver`, then the rows as
    :class:`fusionfabric.rtl.chiplet.phy.PcsToPhy` classifies them into
    :class:`fusionfabric.sim.chiplet.PhyRx`, and whole flits collected as the DL does, each
    with the ``err`` flag of its slots (:meth:`receive_flagged`); :meth:`accepted` keeps
    the flits the DL accepts (no ``err`` slot, CRC matching).

    ``link_reset`` (default True): PhyRx forgets its place while the receiver's link is
    down, as ``PcsToPhy`` does with its ``i_link_up`` connected; False: as ``PcsToPhy``
    with ``i_link_up`` left at 1 (the next START row alone restores the count).

    The flits are preceded by IDLE rows (``lead`` of them) so that the receiver gains block
    lock, marker lock and alignment first; its state just before row ``snap_row`` is kept,
    and :meth:`receive` replays from there with the given line bits flipped.
    """

    def __init__(self, flits: list[bytes], tl_per_dl: int = 4, start_every: int = 16,
                 am_period: int = 64, lead: int = 400, trail: int = 6,
                 link_reset: bool = True):
        import copy

        from fusionfabric.formats.pcs import BlockType, control_word
        from fusionfabric.sim import chiplet as C
        from fusionfabric.sim import pcs as P
        self._copy = copy.deepcopy
        self._C, self._P, self._BT = C, P, BlockType
        self.tl_per_dl = tl_per_dl
        self.link_reset = link_reset
        self.L = dl_flit_slots(tl_per_dl)
        self.flits = [bytes(f) for f in flits]
        idle = (control_word(BlockType.IDLE), True)
        tx = C.PhyTx(tl_per_dl, start_every)
        words = [None] * lead
        for f in self.flits:
            for k in range(self.L):
                words.append((int.from_bytes(f[16 * k:16 * k + 16], "little"), k == 0))
        words += [None] * trail
        rows, i = [], 0
        self.first_rows = []            # data-row index of each flit's first slot
        while i < len(words):
            row, used = tx.row(words[i])
            if row[0] == "data" and words[i][1]:
                self.first_rows.append(len(rows))
            rows.append(row)
            i += 1 if used or words[i] is None else 0
        data, ctrl = [], []
        for r in rows:
            if r[0] == "data":
                d = r[1]
                data += [d & (2 ** 64 - 1), d >> 64]
                ctrl += [False, False]
            elif r[0] == "start":
                data += [control_word(BlockType.START), idle[0]]
                ctrl += [True, True]
            else:
                data += [idle[0], idle[0]]
                ctrl += [True, True]
        self.rows = rows
        t = P.transmit(data, ctrl, N_LANES, am_period)
        self.blocks = [t.blocks(k) for k in range(N_LANES)]
        self.is_marker = t.is_marker
        #: output (line) row of every data row
        self.line_row = [int(r) for r in np.flatnonzero(~t.is_marker)]
        self.n_line_rows = len(self.is_marker)
        self.am_period = am_period
        self._rx0 = None
        self._snap = None

    def line_row_of_flit(self, flit: int, slot: int) -> int:
        """Line row (marker rows counted) of slot ``slot`` of flit ``flit``; a negative
        slot is a data row before the flit."""
        return self.line_row[self.first_rows[flit] + slot]

    def _classify(self, words) -> tuple:
        (d0, c0), (d1, c1) = words
        d = int(d0) | int(d1) << 64
        if c0 and (int(d0) & 0xFF) == self._BT.START:
            return ("start",)
        if c0 and c1 and (int(d0) & 0xFF) == self._BT.IDLE and (int(d1) & 0xFF) == self._BT.IDLE:
            return ("idle",)
        if not c0 and not c1:
            return ("data", d)
        return ("error", d)

    def _collect(self, rx, phy, out, cur):
        """One receiver output row into PhyRx and the DL's flit collector (a flit is its
        slots and whether any of them carried ``err``). While the receiver's link is down
        the DL drops the flit in progress and, with ``link_reset``, PhyRx forgets its place
        (``PcsToPhy.i_link_up`` connected)."""
        if not rx.link_up:
            if self.link_reset:
                phy.link_down()
            return None
        if not rx.out_valid:
            return cur
        w = phy.row(self._classify(rx.out_words))
        if w is None:
            return cur
        data, first, err = w
        if first:
            cur = ([data], err)
        elif cur is not None:
            cur = (cur[0] + [data], cur[1] or err)
        if cur is not None and len(cur[0]) == self.L:
            out.append((b"".join(int(s).to_bytes(16, "little") for s in cur[0]), cur[1]))
            cur = None
        return cur

    def _start(self, snap_row: int):
        if self._snap is None or self._snap[0] != snap_row:
            rx = self._P.Receiver(N_LANES, self.am_period, 1, 4096)
            phy = self._C.PhyRx(self.tl_per_dl)
            out, cur = [], None
            for r in range(snap_row):
                rx.step([self.blocks[k][r] for k in range(N_LANES)])
                cur = self._collect(rx, phy, out, cur)
            if not rx.link_up:
                raise RuntimeError("PCS receiver not aligned before the flits: raise lead")
            self._snap = (snap_row, rx, phy, out, cur)
        return self._copy(self._snap[1:])

    def receive_flagged(self, flips=(), snap_row: int | None = None) -> list[tuple[bytes, bool]]:
        """The complete flits the DL receives with line bits ``flips`` flipped, each with
        its ``err`` flag (a slot made from a damaged row: the DL fails the flit whatever its
        CRC): ``(flit, err)``. A flip is ``(line_row, lane, bit)``, bit 0..65 of the
        66-bit block (0, 1: sync header; 2 + j: payload bit j). Rows before ``snap_row``
        (default: two rows before the first flit's first slot) must carry no flip; the
        receiver's state there is computed once and reused."""
        if snap_row is None:
            snap_row = self.line_row_of_flit(0, 0) - 2
        flip = {}
        for (r, lane, bit) in flips:
            if r < snap_row:
                raise ValueError(f"flip in row {r} before the snapshot row {snap_row}")
            flip[(r, lane)] = flip.get((r, lane), 0) ^ (1 << bit)
        rx, phy, out, cur = self._start(snap_row)
        for r in range(snap_row, self.n_line_rows):
            rx.step([self.blocks[k][r] ^ flip.get((r, k), 0) for k in range(N_LANES)])
            cur = self._collect(rx, phy, out, cur)
        return out

    def receive(self, flips=(), snap_row: int | None = None) -> list[bytes]:
        """The complete flits of :meth:`receive_flagged`, without the flags."""
        return [f for f, _ in self.receive_flagged(flips, snap_row)]

    def accepted(self, flips=(), snap_row: int | None = None) -> list[bytes]:
        """The flits the DL accepts: no ``err`` slot and a matching CRC."""
        from fusionfabric.sim.chiplet import dl_parse
        return [f for f, err in self.receive_flagged(flips, snap_row)
                if not err and dl_parse(f, self.tl_per_dl)[0]]
