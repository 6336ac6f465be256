"""RS(544,514) model (fusionfabric.sim.fec) against independent references.

References: a carry-less shift-and-add GF(2^10) multiply written here; ``galois`` 0.4.11
(``ReedSolomon(1023, 993, c=0)`` shortened by 479 leading zeros, the same code as
RS(544,514) because GF(2^10) has no 544th roots of unity) and ``reedsolo`` 1.7
(``RSCodec(30, nsize=1023, c_exp=10, prim=0x409, fcr=0, generator=2)``, shortened the same
way). No published RS(544,514) codeword was found in public text, so there is no
known-answer vector; the two libraries agree with each other here (``test_references_agree``).
"""

import numpy as np
import pytest

from fusionfabric.sim import fec

galois = pytest.importorskip("galois")
reedsolo = pytest.importorskip("reedsolo")

SEED = 20240611
PAD = 1023 - fec.N          # 479 implied zeros


def _rng(stream):
    return np.random.default_rng([SEED, stream])


def _clmul_mod(a, b):
    """Shift-and-add product modulo x^10 + x^3 + 1, vectorized, independent of the tables."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    acc = np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
    for k in range(10):
        acc ^= np.where((b >> k) & 1, a << k, 0)
    for k in range(18, 9, -1):                     # reduce degrees 18..10
        acc ^= np.where((acc >> k) & 1, 0x409 << (k - 10), 0)
    return acc


@pytest.fixture(scope="module")
def rs_galois():
    gf = galois.GF(2**10, irreducible_poly="x^10+x^3+1")
    return gf, galois.ReedSolomon(1023, 993, field=gf, c=0)


@pytest.fixture(scope="module")
def rs_reedsolo():
    return reedsolo.RSCodec(30, nsize=1023, c_exp=10, prim=0x409, fcr=0, generator=2)


def _g_encode(rs, msg):
    gf, code = rs
    full = np.concatenate([np.zeros((msg.shape[0], PAD), np.int64), msg], axis=1)
    return np.array(code.encode(gf(full)))[:, PAD:].astype(np.int64)


def _g_decode(rs, r):
    gf, code = rs
    full = np.concatenate([np.zeros((r.shape[0], PAD), np.int64), r], axis=1)
    dec, nerr = code.decode(gf(full), output="codeword", errors=True)
    return np.array(dec)[:, PAD:].astype(np.int64), np.array(nerr)


def _corrupt(rng, cw, nerr, positions=None):
    r = cw.copy()
    pos = rng.choice(fec.N, nerr, replace=False) if positions is None else np.asarray(positions)
    r[pos] ^= rng.integers(1, 1024, len(pos))
    return r, np.sort(pos)


# -- field ---------------------------------------------------------------------------------
def test_constants():
    assert (fec.M, fec.N, fec.K, fec.NPAR, fec.T, fec.PRIM_POLY, fec.FIRST_ROOT) == \
        (10, 544, 514, 30, 15, 0x409, 0)


def test_prim_poly_irreducible_by_brute_force():
    # no polynomial of degree 1..5 divides p(x): remainder by long division, carry-less
    def mod(a, d):
        while a.bit_length() >= d.bit_length():
            a ^= d << (a.bit_length() - d.bit_length())
        return a
    assert all(mod(fec.PRIM_POLY, d) != 0 for d in range(2, 64))


def test_prim_poly_primitive_alpha_order_1023():
    x, seen = 1, []
    for _ in range(1023):
        seen.append(x)
        x = int(_clmul_mod(x, 2))
    assert x == 1 and len(set(seen)) == 1023            # order exactly 1023
    assert fec.EXP[:1023].tolist() == seen
    assert fec.gf_pow(2, 1023) == 1
    assert all(fec.gf_pow(2, 1023 // p) != 1 for p in (3, 11, 31))   # 1023 = 3 * 11 * 31


def test_field_axioms_all_elements():
    a = np.arange(1024)[:, None]
    b = np.arange(1024)[None, :]
    table = fec.gf_mul(a, b)
    assert (table == _clmul_mod(a, b)).all()             # whole multiplication table
    assert (table == table.T).all()
    assert (table[1] == np.arange(1024)).all() and (table[0] == 0).all()
    nz = np.arange(1, 1024)
    assert (fec.gf_mul(nz, fec.gf_inv(nz)) == 1).all()
    rng = _rng(1)
    x, y, z = rng.integers(0, 1024, (3, 20000))
    assert (fec.gf_mul(fec.gf_mul(x, y), z) == fec.gf_mul(x, fec.gf_mul(y, z))).all()
    assert (fec.gf_mul(x, y ^ z) == fec.gf_mul(x, y) ^ fec.gf_mul(x, z)).all()
    with pytest.raises(ZeroDivisionError):
        fec.gf_inv(0)


def test_generator(rs_galois):
    _, code = rs_galois
    assert fec.GENERATOR.tolist() == np.array(code.generator_poly.coeffs).tolist()
    for i in range(30):                                  # roots alpha^0 .. alpha^29
        x = int(fec.EXP[i])
        acc = 0
        for c in fec.GENERATOR:                          # Horner with the reference multiply
            acc = int(_clmul_mod(acc, x)) ^ int(c)
        assert acc == 0, i


# -- encoder -------------------------------------------------------------------------------
def test_encode_matches_galois_batch(rs_galois):
    msg = _rng(2).integers(0, 1024, (40, fec.K))
    cw = fec.encode(msg)
    assert cw.shape == (40, fec.N) and (cw[:, :fec.K] == msg).all()
    assert (cw == _g_encode(rs_galois, msg)).all()
    assert (fec.encode(msg[3]) == cw[3]).all()           # single word = batch row
    assert not fec.syndromes(cw).any()


def test_references_agree(rs_galois, rs_reedsolo):
    msg = _rng(3).integers(0, 1024, (3, fec.K))
    g = _g_encode(rs_galois, msg)
    for row, ref in zip(msg, g):
        out = np.array(list(rs_reedsolo.encode([0] * PAD + row.tolist())))[PAD:]
        assert (out == ref).all() and (fec.encode(row) == ref).all()


def test_comparison_catches_a_wrong_code():
    """Planted fault: the same comparison against galois fails for first root 1."""
    gf = galois.GF(2**10, irreducible_poly="x^10+x^3+1")
    other = (gf, galois.ReedSolomon(1023, 993, field=gf, c=1))
    msg = _rng(4).integers(0, 1024, (4, fec.K))
    assert not (fec.encode(msg) == _g_encode(other, msg)).all()
    assert fec.syndromes(_g_encode(other, msg)).any()


def test_symbol_bits():
    assert fec.symbol_bits([1, 0x200]).tolist() == [1] + [0] * 9 + [0] * 9 + [1]
    s = _rng(5).integers(0, 1024, (3, 544))
    assert (fec.bits_symbols(fec.symbol_bits(s)) == s).all()


# -- decoder -------------------------------------------------------------------------------
def test_decode_matches_galois(rs_galois):
    """One batch (galois compiles its decoder once per process): 0, 1, 7 and 15 errors."""
    rng = _rng(10)
    nerr = np.repeat([0, 1, 7, 15], 4)
    cw = fec.encode(rng.integers(0, 1024, (nerr.size, fec.K)))
    rx = np.stack([_corrupt(rng, c, n)[0] for c, n in zip(cw, nerr)])
    ref, ref_n = _g_decode(rs_galois, rx)
    res = fec.decode_batch(rx)
    assert res.ok.all() and (res.codewords == cw).all() and (res.codewords == ref).all()
    assert (res.n_errors == nerr).all() and (ref_n == nerr).all()


def test_decode_single_and_positions():
    rng = _rng(20)
    cw = fec.encode(rng.integers(0, 1024, fec.K))
    rx, pos = _corrupt(rng, cw, 15)
    res = fec.decode(rx)
    assert res.ok and res.n_errors == 15
    assert res.positions.tolist() == pos.tolist() and (res.codeword == cw).all()


def test_decode_reedsolo(rs_reedsolo):
    rng = _rng(21)
    cw = fec.encode(rng.integers(0, 1024, fec.K))
    rx, pos = _corrupt(rng, cw, 15)
    _, full, errata = rs_reedsolo.decode([0] * PAD + rx.tolist())
    assert (np.array(list(full))[PAD:] == fec.decode(rx).codeword).all()
    assert sorted(np.array(list(errata)) - PAD) == pos.tolist()


def test_errors_in_parity_only():
    rng = _rng(22)
    cw = fec.encode(rng.integers(0, 1024, (4, fec.K)))
    for c in cw:
        rx, pos = _corrupt(rng, c, 15, rng.choice(np.arange(fec.K, fec.N), 15, replace=False))
        res = fec.decode(rx)
        assert res.ok and (res.codeword == c).all() and (res.positions >= fec.K).all()


@pytest.mark.parametrize("start_bit", [0, 9, 5283])
def test_bit_burst_across_symbols(rs_reedsolo, start_bit):
    """A burst of 141 wrong bits from bit 9 touches 15 symbols: corrected; 142 bits from
    bit 9 touch 16 symbols: not corrected (reedsolo agrees)."""
    rng = _rng(30 + start_bit)
    cw = fec.encode(rng.integers(0, 1024, fec.K))
    bits = fec.symbol_bits(cw)
    start = start_bit
    n_ok = 15 * 10 - (start % 10) if start % 10 else 150
    for length, expect in ((n_ok, True), (n_ok + 1, False)):
        b = bits.copy()
        b[start:start + length] ^= 1
        rx = fec.bits_symbols(b)
        nsym = np.count_nonzero(rx != cw)
        assert nsym == (15 if expect else 16)
        res = fec.decode(rx)
        try:
            ref_ok = bool(rs_reedsolo.decode([0] * PAD + rx.tolist()))
        except reedsolo.ReedSolomonError:
            ref_ok = False
        assert res.ok == expect == ref_ok
        if expect:
            assert (res.codeword == cw).all()


def test_locator_is_product_of_error_locators():
    """BM's Lambda equals prod (1 - X_k x), X_k = alpha^(543 - pos), built here directly."""
    rng = _rng(40)
    cw = fec.encode(rng.integers(0, 1024, fec.K))
    for nerr in (1, 2, 9, 15):
        rx, pos = _corrupt(rng, cw, nerr)
        lam, om = fec.berlekamp_massey(fec.syndromes(rx))
        ref = np.array([1])
        for p in pos:
            x = int(fec.EXP[(543 - p) % 1023])
            nxt = np.zeros(len(ref) + 1, np.int64)
            nxt[:-1] ^= ref
            nxt[1:] ^= _clmul_mod(ref, x)
            ref = nxt
        assert lam.tolist() == ref.tolist()
        assert fec.chien(lam).tolist() == pos.tolist()
        assert (fec.forney(lam, om, pos) == (rx ^ cw)[pos]).all()


def test_every_pattern_up_to_t_corrected():
    rng = _rng(50)
    cw = fec.encode(rng.integers(0, 1024, (150, fec.K)))
    nerr = rng.integers(1, fec.T + 1, 150)
    rx = np.stack([_corrupt(rng, c, n)[0] for c, n in zip(cw, nerr)])
    res = fec.decode_batch(rx)
    bad = np.flatnonzero(~res.ok | (res.codewords != cw).any(axis=1))
    assert bad.size == 0, f"seed {SEED}: rows {bad[:5]} not corrected"
    assert (res.n_errors == nerr).all()


@pytest.mark.parametrize("nerr", [16, 30, 100])
def test_beyond_t_never_crashes(nerr):
    rng = _rng(60 + nerr)
    cw = fec.encode(rng.integers(0, 1024, (30, fec.K)))
    rx = np.stack([_corrupt(rng, c, nerr)[0] for c in cw])
    res = fec.decode_batch(rx)
    # not ok: input returned unchanged; ok: a miscorrection to another codeword
    assert (res.codewords[~res.ok] == rx[~res.ok]).all()
    assert not fec.syndromes(res.codewords[res.ok]).any()
    assert (res.codewords[res.ok] != cw[res.ok]).any(axis=1).all()
    assert (res.n_errors[res.ok] <= fec.T).all()


def test_bad_input():
    with pytest.raises(ValueError, match="1024"):
        fec.encode(np.full(fec.K, 1024))
    with pytest.raises(ValueError, match="514"):
        fec.encode(np.zeros(513, np.int64))
    with pytest.raises(ValueError, match="544"):
        fec.decode(np.zeros(543, np.int64))
    with pytest.raises(TypeError):
        fec.syndromes(np.zeros(544, float))
    with pytest.raises(ValueError, match="multiple of 10"):
        fec.bits_symbols(np.zeros(15, np.uint8))
