"""DL CRC detection behind the 64b/66b PCS (sim/crc_detection.py, docs/crc.md).

References: the numpy model chain (sim.chiplet.PhyTx/PhyRx, sim.pcs.transmit/Receiver),
sim.pcs.descramble, sim.chiplet.crc32 / dl_parse (zlib) and galois (GF(2) polynomials),
and Koopman's published Hamming distance of CRC-32/IEEE (5 at this flit length).
"""

import math

import numpy as np
import pytest

from fusionfabric.formats.pcs import SCRAMBLER_INIT, BlockType, control_word
from fusionfabric.sim import chiplet as C
from fusionfabric.sim import crc_detection as D
from fusionfabric.sim import pcs as P

N = D.flit_bits(4)          # 2176
L = 17                      # slots per flit at tl_per_dl = 4
ERROR_WORD = control_word(BlockType.ERROR)


def _flit(rng):
    tls = [(int(rng.integers(0, 2)), rng.bytes(64)) for _ in range(4)]
    return C.dl_frame(tls, C.DLHeader(seq=int(rng.integers(0, 1024)),
                                      ack=int(rng.integers(0, 1024))), 4)


def _diff_bits(a: bytes, b: bytes) -> list[int]:
    x = np.frombuffer(bytes(p ^ q for p, q in zip(a, b)), np.uint8)
    return [int(i) for i in np.flatnonzero(np.unpackbits(x, bitorder="little"))]


def _line_flip(chain, flit, pos):
    """(line_row, lane, bit) of payload stream position ``pos`` relative to ``flit``."""
    row, r = divmod(pos, 128)
    lane, bit = divmod(r, 64)
    return (chain.line_row_of_flit(flit, row), lane, 2 + bit)


@pytest.fixture(scope="module")
def line_search():
    syn, images = D.line_pattern_syndromes(N)
    return D.min_undetected(syn, images, seed=1), images


def test_every_single_line_error_through_the_model_chain():
    """Every one of the 18 x 2 x 66 line bits that reach flit 1 (its 17 rows and the row
    before it), flipped alone: the DL accepts no flit other than the two sent; payload
    flips hit exactly the flit bits of the descrambler triplet and set no ``err``; a sync
    flip replaces that lane's 64 bits by the ERROR word and marks the flit ``err``, or, in
    the first row of the chained flit 1, ends the chain so that flit 1 is not delivered."""
    seed = 11
    rng = np.random.default_rng(seed)
    sent = [_flit(rng), _flit(rng)]
    chain = D.ModelChain(sent)
    assert chain.receive_flagged() == [(f, False) for f in sent], f"seed {seed}: clean run"
    rows = [chain.line_row_of_flit(1, s) for s in range(-1, L)]
    assert not any(chain.is_marker[r] for r in rows), "a marker row inside the span"
    assert chain.rows[chain.first_rows[1] - 1][0] == "data", "flit 1 is not chained"
    snap = rows[0] - 1
    for s, r in zip(range(-1, L), rows):
        for lane in range(2):
            for bit in range(66):
                got = chain.receive_flagged([(r, lane, bit)], snap_row=snap)
                ctx = f"seed {seed}, slot {s}, lane {lane}, bit {bit}"
                for f, err in got:
                    assert f in sent or err or not C.dl_parse(f, 4)[0], f"undetected: {ctx}"
                if bit >= 2:
                    assert len(got) == 2 and not got[0][1] and not got[1][1], ctx
                    pos = D.flit_bit(s, lane, bit - 2)
                    assert _diff_bits(got[1][0], sent[1]) == D.line_to_flit_errors([pos], N), ctx
                elif s == 0:
                    assert got == [(sent[0], False)], ctx
                else:
                    k, slot = (0, L - 1) if s < 0 else (1, s)
                    assert len(got) == 2 and got[k][1] and not got[1 - k][1], ctx
                    lo = 16 * slot + 8 * lane
                    assert int.from_bytes(got[k][0][lo:lo + 8], "little") == ERROR_WORD, ctx
                    assert chain.accepted([(r, lane, bit)], snap_row=snap) == [sent[1 - k]], ctx


def test_random_two_to_four_line_errors_detected(line_search):
    """Random sets of 2..4 payload line errors over the flit span: detected by the
    polynomial check (5,000 sets) and, through the model chain, by dl_parse (60 sets),
    whose received error pattern equals the descrambler image."""
    seed = 12
    rng = np.random.default_rng(seed)
    for _ in range(5000):
        k = int(rng.integers(2, 5))
        js = sorted(set(int(j) for j in rng.integers(-58, N, k)))
        e = D.line_to_flit_errors(js, N)
        if e:
            assert not D.undetected(e, N) or len(js) == 4, f"seed {seed}: {js}"
            if len(js) == 4 and D.undetected(e, N):
                assert frozenset(j + 58 for j in js) in _weight4_sets(line_search)
    sent = [_flit(rng), _flit(rng)]
    chain = D.ModelChain(sent)
    for _ in range(60):
        k = int(rng.integers(2, 5))
        js = sorted(set(int(j) for j in rng.integers(-58, N, k)))
        got = chain.receive([_line_flip(chain, 1, j) for j in js],
                            snap_row=chain.line_row_of_flit(1, -1) - 1)
        assert _diff_bits(got[1], sent[1]) == D.line_to_flit_errors(js, N), f"seed {seed} {js}"
        assert not C.dl_parse(got[1], 4)[0], f"seed {seed}: {js} undetected"


def _weight4_sets(line_search):
    """Undetected 4-sets of line positions (index j + 58), found here independently of
    min_undetected: np.unique over the XOR of every pair of syndromes, then every two
    disjoint pairs in a group of equal values."""
    syn, _ = D.line_pattern_syndromes(N)
    i, j = np.triu_indices(len(syn), 1)
    vals, inv, cnt = np.unique(syn[i] ^ syn[j], return_inverse=True, return_counts=True)
    out = set()
    for g in np.flatnonzero(cnt > 1):
        members = np.flatnonzero(inv == g)
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                s = frozenset((int(i[members[x]]), int(j[members[x]]),
                               int(i[members[y]]), int(j[members[y]])))
                if len(s) == 4:
                    out.add(s)
    return out


def test_polynomial_check_agrees_with_crc32():
    """undetected() (polynomial remainder) against sim.chiplet.crc32 through dl_parse:
    random patterns of 1..60 bits (detected by both), and multiples of g placed at random
    shifts (undetected by both)."""
    seed = 13
    rng = np.random.default_rng(seed)
    flit = _flit(rng)

    def parse_ok(err):
        bits = np.zeros(N, np.uint8)
        bits[err] = 1
        e = np.packbits(bits, bitorder="little").tobytes()
        return C.dl_parse(bytes(p ^ q for p, q in zip(flit, e)), 4)[0]

    for _ in range(300):
        err = sorted(set(int(i) for i in rng.integers(0, N, int(rng.integers(1, 61)))))
        assert D.undetected(err, N) == parse_ok(err), f"seed {seed}: {err}"
    for _ in range(100):
        q = int(rng.integers(1, 1 << 40))
        e = 0
        for k in range(q.bit_length()):          # e = q(x) g(x), carry-less
            if q >> k & 1:
                e ^= D.CRC_POLY << k
        shift = int(rng.integers(0, N - e.bit_length() + 1))
        err = sorted(N - 1 - (k + shift) for k in range(e.bit_length()) if e >> k & 1)
        assert D.undetected(err, N) and parse_ok(err), f"seed {seed}: q={q:#x} shift={shift}"


def test_descrambler_error_triplet():
    """A line error at stream position t changes sim.pcs.descramble's output at exactly
    t, t+39 and t+58 (within the stream), for single and multiple errors."""
    seed = 14
    rng = np.random.default_rng(seed)
    words = [int(w) for w in rng.integers(0, 2 ** 63, 40, dtype=np.uint64) * 2
             + rng.integers(0, 2, 40, dtype=np.uint64)]
    scr, _ = P.scramble(words)
    clean, _ = P.descramble(scr, SCRAMBLER_INIT)
    assert clean == words
    nbits = 64 * len(words)
    cases = [[0], [63], [64], [nbits - 1], [nbits - 40]] + \
        [sorted(set(int(t) for t in rng.integers(0, nbits, int(rng.integers(1, 6)))))
         for _ in range(200)]
    for ts in cases:
        bad = list(scr)
        for t in ts:
            bad[t // 64] ^= 1 << (t % 64)
        out, _ = P.descramble(bad, SCRAMBLER_INIT)
        got = [i for i in range(nbits) if (out[i // 64] ^ words[i // 64]) >> (i % 64) & 1]
        want = [p for p in D.descrambled_errors(ts) if p < nbits]
        assert got == want, f"seed {seed}: line errors {ts}"


def test_remainders_gcd_and_order_against_galois():
    galois = pytest.importorskip("galois")
    GF2 = galois.GF(2)
    g = galois.Poly.Int(D.CRC_POLY, field=GF2)
    x = galois.Poly([1, 0], field=GF2)
    seed = 15
    rng = np.random.default_rng(seed)
    syn = D.syndromes(N)
    for i in rng.integers(0, N, 12):
        assert int(pow(x, N - 1 - int(i), g)) == int(syn[i]), f"seed {seed}: bit {i}"
    t = galois.Poly.Int(D.T_POLY, field=GF2)
    assert int(galois.gcd(g, t)) == D.poly_gcd(D.CRC_POLY, D.T_POLY) == 1
    assert g.is_irreducible() and g.is_primitive() and D.is_primitive()
    # x has order 2^32 - 1 mod g, so x^k != 1 for 0 < k < 2^32 - 1: no pair of errors
    # (x^a (x^k + 1)) at any distance below 2^32 - 1 is a multiple of g.
    assert int(pow(x, 2 ** 32 - 1, g)) == 1


def test_flit_hamming_distance_is_5_at_2176_bits():
    """Exhaustive over every set of 1..4 flit bits (meet in the middle): none is a multiple
    of g, and a weight-5 multiple exists (checked with galois): HD = 5 at 2176 bits, as
    Koopman's table for CRC-32/IEEE 802.3 gives (HD 5 from 301 to 2974 bits)."""
    galois = pytest.importorskip("galois")
    res = D.min_undetected(D.syndromes(N), seed=16)
    assert res.counts == {1: 0, 2: 0, 3: 0, 4: 0}
    assert res.example5 is not None, "seed 16: no weight-5 multiple found"
    e = sum(1 << (N - 1 - p) for p in res.example5)
    g = galois.Poly.Int(D.CRC_POLY, field=galois.GF(2))
    assert int(galois.Poly.Int(e, field=galois.GF(2)) % g) == 0


def test_line_error_minimum_and_the_flit_edge(line_search):
    """Exhaustive over every set of 1..4 line (payload) errors that reach the flit: none
    of 1..3 goes undetected; the undetected 4-sets all have one error in the 39 payload
    bits just before the flit (the edge where the triplet is cut to two), and one of them
    goes through the model chain undetected (dl_parse accepts a changed flit)."""
    galois = pytest.importorskip("galois")
    res, images = line_search
    assert res.counts[1] == res.counts[2] == res.counts[3] == 0
    sets = _weight4_sets(line_search)
    assert res.counts[4] == len(sets) == 39
    g = galois.Poly.Int(D.CRC_POLY, field=galois.GF(2))
    for s in sets:
        js = sorted(j - 58 for j in s)
        assert -39 <= js[0] <= -1 and js[1] >= 0
        e = D.line_to_flit_errors(js, N)
        assert int(galois.Poly.Int(sum(1 << (N - 1 - p) for p in e),
                                   field=galois.GF(2)) % g) == 0
    assert res.example5 is not None, "seed 1: no undetected 5-set of line errors found"
    seed = 17
    rng = np.random.default_rng(seed)
    sent = [_flit(rng), _flit(rng)]
    chain = D.ModelChain(sent)
    js = sorted(j - 58 for j in sorted(sets, key=min)[int(rng.integers(0, 39))])
    got = chain.receive([_line_flip(chain, 1, j) for j in js])
    assert got[1] != sent[1] and C.dl_parse(got[1], 4)[0], f"seed {seed}: {js}"


def test_sync_error_is_flagged_even_when_the_crc_passes():
    """A sync-header error makes the receiver deliver the ERROR word for that block: with
    the data word chosen so that data ^ ERROR is g(x) shifted into the word, the damaged
    flit passes the CRC, but its slot carries ``err`` and the DL does not accept it."""
    seed = 18
    rng = np.random.default_rng(seed)
    slot, lane = 5, 0
    lo = 128 * slot + 64 * lane                       # first flit bit of the word
    exp_lo = N - 1 - (lo + 63)                        # lowest power in the word
    e = D.CRC_POLY << exp_lo
    word_err = sum(1 << (N - 1 - k - lo) for k in range(e.bit_length()) if e >> k & 1)
    data = ERROR_WORD ^ word_err
    tl = bytearray(rng.bytes(64))
    off = 16 * slot + 8 * lane - 64                   # slot 5 is in TL flit 1
    tl[off:off + 8] = data.to_bytes(8, "little")
    tls = [(0, rng.bytes(64)), (1, bytes(tl)), (0, rng.bytes(64)), (1, rng.bytes(64))]
    target = C.dl_frame(tls, C.DLHeader(seq=7), 4)
    sent = [_flit(rng), target]
    chain = D.ModelChain(sent)
    flip = [(chain.line_row_of_flit(1, slot), lane, 0)]
    got = chain.receive_flagged(flip)
    assert got[1][0] != target and C.dl_parse(got[1][0], 4)[0], f"seed {seed}: CRC passes"
    assert got[1][1] and not got[0][1], f"seed {seed}: err flag"
    assert chain.accepted(flip) == [sent[0]], f"seed {seed}"


def test_damaged_row_at_a_flit_boundary_ends_the_chain():
    """With a START row before every flit (start_every = 1), one payload error in the type
    octet of the START row that follows flit 0 makes it a damaged row: the receiver ends
    the chain there, so flit 1's rows reach the DL outside any flit (no misframed flit);
    the same for a sync error in the first row of a chained flit (start_every = 16)."""
    seed = 19
    rng = np.random.default_rng(seed)
    sent = [_flit(rng), _flit(rng)]
    chain = D.ModelChain(sent, start_every=1)
    start_row = chain.line_row_of_flit(1, 0) - 1
    assert chain.rows[chain.first_rows[1] - 1] == ("start",)
    assert chain.receive() == sent, f"seed {seed}: clean run"
    assert chain.receive_flagged([(start_row, 0, 2 + 3)]) == [(sent[0], False)], f"seed {seed}"
    chain = D.ModelChain(sent, start_every=16)
    assert chain.rows[chain.first_rows[1] - 1][0] == "data"
    got = chain.receive_flagged([(chain.line_row_of_flit(1, 0), 1, 1)])
    assert got == [(sent[0], False)], f"seed {seed}"


def test_false_start_row_misframes_unflagged():
    """The residual route of the ``start`` term: a data row whose lane 0 first octet is the
    START type, with both bits of lane 0's sync header flipped (2 line errors), reads as a
    clean START row; the following flit is misframed (its rows from the next one on), no
    slot carries ``err``, and only the CRC rejects it."""
    seed = 20
    rng = np.random.default_rng(seed)
    slot = 6
    tls = [(0, rng.bytes(64)) for _ in range(4)]
    tl = bytearray(tls[slot // 4][1])
    tl[16 * (slot % 4)] = int(BlockType.START)
    tls[slot // 4] = (0, bytes(tl))
    sent = [_flit(rng), C.dl_frame(tls, C.DLHeader(seq=3), 4), _flit(rng)]
    chain = D.ModelChain(sent)
    assert chain.receive() == sent, f"seed {seed}: clean run"
    r = chain.line_row_of_flit(1, slot)
    got = chain.receive_flagged([(r, 0, 0), (r, 0, 1)])
    mis = sent[1][16 * (slot + 1):] + sent[2][:16 * (slot + 1)]
    assert got == [(sent[0], False), (mis, False)], f"seed {seed}"
    assert not C.dl_parse(mis, 4)[0], f"seed {seed}"


def test_marker_error_misframes_nothing_with_the_link_reset():
    """One error in M0 of lane 0's alignment marker while flit 2 goes out: the receiver
    drops the alignment and rows are lost. With PhyRx forgetting its place while the link
    is down (``PcsToPhy.i_link_up`` connected) every flit delivered afterwards is one that
    was sent, in order, from the next START row on; without it a misframed flit, with no
    slot flagged, reaches the DL (only its CRC rejects it)."""
    seed = 21
    rng = np.random.default_rng(seed)
    sent = [C.dl_frame([(0, rng.bytes(64)) for _ in range(4)], C.DLHeader(seq=k), 4)
            for k in range(30)]
    got = {}
    for reset in (True, False):
        chain = D.ModelChain(sent, start_every=8, link_reset=reset)
        mk = next(r for r in range(chain.line_row_of_flit(2, 0), chain.n_line_rows)
                  if chain.is_marker[r])
        got[reset] = chain.receive_flagged([(mk, 0, 2)])
    idx = [sent.index(f) for f, err in got[True] if f in sent and not err]
    assert len(idx) == len(got[True]) and idx == sorted(idx), f"seed {seed}: {idx}"
    assert idx[:2] == [0, 1] and idx[-1] == 29 and len(idx) >= 20, f"seed {seed}: {idx}"
    bad = [f for f, err in got[False] if f not in sent]
    assert bad and not any(err for f, err in got[False]), f"seed {seed}"
    assert not any(C.dl_parse(f, 4)[0] for f in bad), f"seed {seed}"


def test_p_undetected_terms(line_search):
    """The payload term equals the binomial sum written out independently at 1e-4, and the
    sync term is 0 (flagged) and the START term is the false START row and the START row
    read as data: 17 x BER^2 x 2^-8 x 7.5 + BER^4, times 2^-32; the marker term is 0 with
    the link reset and (rows per flit / 63) x 100 BER x 16 x 2^-32 without it."""
    res, _ = line_search
    ber = 1e-4
    m = N + 58
    p = D.p_undetected(ber, res.counts)
    want = 39 * ber ** 4 * (1 - ber) ** (m - 4) + 2.0 ** -32 * (
        1 - sum(math.comb(m, k) * ber ** k * (1 - ber) ** (m - k) for k in range(5)))
    assert p["payload"] == pytest.approx(want, rel=1e-9)
    assert p["sync"] == 0 and p["marker"] == 0
    assert p["start"] == pytest.approx((17 * ber ** 2 / 256 * 7.5 + ber ** 4) * 2.0 ** -32)
    q = D.p_undetected(ber, res.counts, link_reset=False)
    assert q["marker"] == pytest.approx((17 + 1 / 16) / 63 * 100 * ber * 16 * 2.0 ** -32)
