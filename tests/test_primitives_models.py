"""Known-answer and property tests of the primitive models (sim/scrambler, sim/crc, sim/prbs)
against published values and implementations written independently here."""

import zlib

import numpy as np
import pytest

from fusionfabric.formats import primitives as fmt
from fusionfabric.rtl.hdl import gf2_inverse
from fusionfabric.sim import crc as mcrc
from fusionfabric.sim import prbs as mprbs
from fusionfabric.sim import scrambler as mscr

WIDTHS = [1, 8, 32, 64, 66, 128]


# -- independent references written here, from the standards' text ---------------------------
def lfsr_scramble_cl49(bits, s):
    """IEEE 802.3 cl. 49.2.6 as a list: s[0] newest; out = in ^ s[38] ^ s[57]."""
    s = list(s)
    out = []
    for b in bits:
        o = b ^ s[38] ^ s[57]
        out.append(o)
        s = [o] + s[:-1]
    return out, s


def lfsr_descramble_cl49(bits, s):
    s = list(s)
    out = []
    for b in bits:
        out.append(b ^ s[38] ^ s[57])
        s = [b] + s[:-1]
    return out, s


def state_list(state, n=58):
    return [(state >> k) & 1 for k in range(n)]


def word_bits(words, width):
    return [(w >> i) & 1 for w in words for i in range(width)]


def bits_word_list(bits, width):
    return [sum(b << i for i, b in enumerate(bits[k:k + width]))
            for k in range(0, len(bits), width)]


# -- scrambler ------------------------------------------------------------------------------
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
def test_scrambler_matches_cl49_definition(width):
    rng = np.random.default_rng(width)
    for _ in range(4):
        state = int(rng.integers(0, 1 << 58))
        words = [int.from_bytes(rng.bytes(17), "little") & ((1 << width) - 1)
                 for _ in range(max(4, 400 // width))]
        want_bits, want_s = lfsr_scramble_cl49(word_bits(words, width), state_list(state))
        got, after = mscr.scramble(words, width, state)
        assert got == bits_word_list(want_bits, width)
        assert state_list(after) == want_s
        ref_bits, ref_after = mscr.scramble_bits(word_bits(words, width), state)
        assert ref_bits == want_bits and ref_after == after
        back, back_after = mscr.descramble(got, width, state)
        assert back == words and back_after == after  # descrambler ends in the same state
        want_d, _ = lfsr_descramble_cl49(want_bits, state_list(state))
        assert want_d == word_bits(words, width)


@pytest.mark.parametrize("nbits", [5000, 40_000])
def test_scrambler_long_streams_match_per_bit(nbits):
    """Long streams exercise the squared-polynomial blocks of the fast version."""
    rng = np.random.default_rng(nbits)
    bits = rng.integers(0, 2, nbits).astype(np.uint8)
    state = int(rng.integers(0, 1 << 58))
    want, after = lfsr_scramble_cl49([int(b) for b in bits], state_list(state))
    got, got_after = mscr.scramble([int(b) for b in bits], 1, state)
    assert got == want and state_list(got_after) == after
    back, _ = mscr.descramble(got, 1, state)
    assert back == [int(b) for b in bits]


def test_scrambler_streams_continue():
    """Scrambling in pieces, carrying the state, equals scrambling in one go."""
    rng = np.random.default_rng(2)
    words = [int(x) for x in rng.integers(0, 1 << 62, 50)]
    whole, end = mscr.scramble(words, 64, 12345)
    a, mid = mscr.scramble(words[:17], 64, 12345)
    b, end2 = mscr.scramble(words[17:], 64, mid)
    assert a + b == whole and end2 == end
    d1, m1 = mscr.descramble(whole[:30], 64, 12345)
    d2, _ = mscr.descramble(whole[30:], 64, m1)
    assert d1 + d2 == words


def test_scrambler_zero_state_zero_data_is_zero():
    """Cl. 49: a zero state scrambles zeros to zeros (the scrambler is not a PRBS)."""
    out, st = mscr.scramble([0] * 10, 64, 0)
    assert out == [0] * 10 and st == 0


def test_scrambler_single_bit_impulse_response():
    """A lone 1 into a zero-state scrambler reappears 39 and 58 bits later (x^39, x^58)."""
    bits = [1] + [0] * 100
    out, _ = mscr.scramble_bits(bits, 0)
    ones = [i for i, b in enumerate(out) if b]
    assert ones[:4] == [0, 39, 58, 78]  # out[t] = in[t] ^ out[t-39] ^ out[t-58]
    # the descrambler of that output recovers the impulse
    back, _ = mscr.descramble_bits(out, 0)
    assert back == bits


def test_descrambler_resyncs_within_58_bits_from_any_state():
    """For many random (transmitter, receiver) state pairs and all widths: from received
    bit 58 on, the descrambler output equals the plain data."""
    rng = np.random.default_rng(58)
    for trial in range(300):
        width = WIDTHS[trial % len(WIDTHS)]
        tx = int(rng.integers(0, 1 << 58))
        rx = int(rng.integers(0, 1 << 58))
        n = -(-150 // width)
        words = [int.from_bytes(rng.bytes(17), "little") & ((1 << width) - 1)
                 for _ in range(n)]
        sent, _ = mscr.scramble(words, width, tx)
        got, _ = mscr.descramble(sent, width, rx)
        g = mscr.words_to_bits(got, width)
        w = mscr.words_to_bits(words, width)
        assert (g[58:] == w[58:]).all()
        if rx != tx:  # the wrong state does show in the first 58 bits
            assert (g[:58] != w[:58]).any()


def test_descrambler_error_multiplication():
    """One flipped line bit gives three errors, at 0, 39 and 58 bits later (cl. 49.2.10)."""
    rng = np.random.default_rng(1)
    words = [int(x) for x in rng.integers(0, 1 << 62, 4)]
    sent, _ = mscr.scramble(words, 64, 77)
    hit = sent[0] ^ (1 << 5)
    got, _ = mscr.descramble([hit] + sent[1:], 64, 77)
    diff = mscr.words_to_bits(got, 64) ^ mscr.words_to_bits(words, 64)
    assert list(np.nonzero(diff)[0]) == [5, 44, 63]


def test_step_matrices_match_model():
    rng = np.random.default_rng(4)
    for desc in (False, True):
        for width in (1, 66, 128):
            os_, od, ns, nd = mscr.step_matrices(width, descrambler=desc)
            state = int(rng.integers(0, 1 << 58))
            word = int.from_bytes(rng.bytes(17), "little") & ((1 << width) - 1)
            s = np.array(state_list(state), dtype=np.uint8)
            d = np.array(word_bits([word], width), dtype=np.uint8)
            out = (os_.astype(int) @ s + od.astype(int) @ d) % 2
            nxt = (ns.astype(int) @ s + nd.astype(int) @ d) % 2
            fn = mscr.descramble if desc else mscr.scramble
            want, after = fn([word], width, state)
            assert bits_word_list([int(x) for x in out], width) == want
            assert list(nxt) == state_list(after)


def test_scrambler_bad_params():
    with pytest.raises(ValueError, match="polynomial=0x8"):
        fmt.poly_taps(8)
    with pytest.raises(ValueError, match="data_width=0"):
        mscr.scramble([1], 0)
    with pytest.raises(ValueError, match="state="):
        mscr.scramble([1], 8, 1 << 58)


# -- CRC ------------------------------------------------------------------------------------
# Published check values ("123456789"), reveng CRC catalogue.
CHECKS = {"crc32": 0xCBF43926, "crc32c": 0xE3069283, "crc16-arc": 0xBB3D,
          "crc16-umts": 0xFEE8}


@pytest.mark.parametrize("name", list(CHECKS))
def test_crc_catalogue_check_values(name):
    assert mcrc.crc_bitwise(b"123456789", name) == CHECKS[name]
    assert mcrc.crc_table(b"123456789", name) == CHECKS[name]
    assert fmt.get_algorithm(name).check == CHECKS[name]


def test_crc32_matches_zlib():
    rng = np.random.default_rng(32)
    for length in [0, 1, 3, 4, 63, 64, 65, 636, 640, 1500]:
        msgs = rng.integers(0, 256, (8, length), dtype=np.uint8)
        got = mcrc.crc_batch(msgs, "crc32") if length else [mcrc.crc_table(b"", "crc32")] * 8
        assert [int(g) for g in got] == [zlib.crc32(bytes(m)) for m in msgs]


@pytest.mark.parametrize("name", list(CHECKS))
def test_crc_table_equals_bitwise(name):
    rng = np.random.default_rng(len(name))
    msgs = rng.integers(0, 256, (20, 33), dtype=np.uint8)
    assert [int(c) for c in mcrc.crc_batch(msgs, name)] == [
        mcrc.crc_bitwise(bytes(m), name) for m in msgs]


def test_crc_matches_amaranth_catalog():
    """Our parameter table equals amaranth.lib.crc.catalog (both from reveng), and the two
    implementations agree (the RTL relies on the catalog entries)."""
    from amaranth.lib.crc import catalog

    from fusionfabric.rtl.crc import CATALOG

    rng = np.random.default_rng(9)
    for name, cat in CATALOG.items():
        a, m = getattr(catalog, cat), fmt.get_algorithm(name)
        assert (a.crc_width, a.polynomial, a.initial_crc, a.reflect_input, a.reflect_output,
                a.xor_output) == (m.width, m.poly, m.init, m.refin, m.refout, m.xorout)
        msg = rng.bytes(21)
        assert a(8).compute(list(msg)) == mcrc.crc_table(msg, name)


def test_crc_advance_inverse():
    for name in CHECKS:
        mat = mcrc.advance_matrix(name, 3)
        inv = gf2_inverse(mat)
        eye = (mat.astype(int) @ inv.astype(int)) % 2
        assert (eye == np.eye(mat.shape[0], dtype=int)).all()


def test_crc_frame_beats():
    f = fmt.in_fields(32)
    beats = [f.unpack(b) for b in mcrc.frame_beats(bytes(range(1, 10)), 32)]
    assert [(b["first"], b["last"], b["n_bytes"]) for b in beats] == [(1, 0, 0), (0, 0, 0),
                                                                       (0, 1, 1)]
    assert beats[0]["data"] == 0x04030201 and beats[2]["data"] == 0x09
    with pytest.raises(ValueError, match="data_width=12"):
        mcrc.frame_beats(b"x", 12)
    with pytest.raises(ValueError, match="algorithm='crc99'"):
        fmt.get_algorithm("crc99")


# -- PRBS -----------------------------------------------------------------------------------
def lfsr_prbs(order_taps, nbits, seed_bits):
    """Textbook Fibonacci LFSR from O.150's description: the stages hold the last n bits;
    the new bit is the XOR of stages m and n."""
    m, n = order_taps
    reg = list(seed_bits)  # reg[0] = stage 1 = newest
    out = []
    for _ in range(nbits):
        b = reg[m - 1] ^ reg[n - 1]
        out.append(b)
        reg = [b] + reg[:-1]
    return out


@pytest.mark.parametrize("order", [7, 15, 23, 31])
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
def test_prbs_matches_lfsr(order, width):
    taps = {7: (6, 7), 15: (14, 15), 23: (18, 23), 31: (28, 31)}[order]  # ITU-T O.150
    rng = np.random.default_rng([order, width])
    seed = int(rng.integers(1, 1 << order))
    n = max(3, 300 // width)
    want = lfsr_prbs(taps, n * width, [(seed >> k) & 1 for k in range(order)])
    got, _ = mprbs.prbs_words(order, width, n, seed)
    assert got == bits_word_list(want, width)
    ref, _ = mprbs.prbs_bits_ref(order, n * width, seed)
    assert ref == want


@pytest.mark.parametrize("order", [7, 31])
def test_prbs_long_stream_matches_lfsr(order):
    """40,000 bits: the squared-polynomial blocks of the fast generator."""
    m, n = fmt.prbs_taps(order)
    want = lfsr_prbs((m, n), 40_000, [1] * n)
    got, _ = mprbs.prbs_words(order, 8, 5000)
    assert got == bits_word_list(want, 8)


def test_prbs7_first_bits_all_ones_seed():
    """PRBS7 (x^7 + x^6 + 1) from the all-ones state starts with six zeros, and each period
    holds 64 ones and 63 zeros with a longest run of 7 ones and 6 zeros (m-sequence
    properties)."""
    bits, _ = mprbs.prbs_bits_ref(7, 127 * 2)
    assert bits[:7] == [0, 0, 0, 0, 0, 0, 1]
    assert sum(bits[:127]) == 64 and bits[127:] == bits[:127]
    s = "".join(map(str, bits[:127] * 2))
    assert "1" * 7 in s and "1" * 8 not in s and "0" * 6 in s and "0" * 7 not in s


@pytest.mark.parametrize("order", [7, 15])
def test_prbs_maximal_period_exhaustive(order):
    """Walk every state: the all-ones state returns after exactly 2^n - 1 steps."""
    m, n = fmt.prbs_taps(order)
    mask = (1 << n) - 1
    start = state = mask
    seen = 0
    while True:
        b = ((state >> (n - 1)) ^ (state >> (m - 1))) & 1
        state = ((state << 1) | b) & mask
        seen += 1
        if state == start:
            break
    assert seen == 2 ** n - 1
    words, _ = mprbs.prbs_words(order, 1, 2 * (2 ** n - 1))
    assert words[:2 ** n - 1] == words[2 ** n - 1:]


def _polymulmod(a, b, p, n):
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a >> n & 1:
            a ^= p
    return r


def _xpow(e, p, n):
    result, base = 1, 2
    while e:
        if e & 1:
            result = _polymulmod(result, base, p, n)
        base = _polymulmod(base, base, p, n)
        e >>= 1
    return result


@pytest.mark.parametrize("order,factors", [(23, [47, 178481]), (31, [2 ** 31 - 1])])
def test_prbs_polynomial_is_primitive(order, factors):
    """x^n + x^m + 1 is primitive: x^(2^n - 1) = 1 and x^((2^n - 1)/q) != 1 for each prime
    factor q of 2^n - 1 (so the period is maximal without walking 2^31 states)."""
    m, n = fmt.prbs_taps(order)
    p = (1 << n) | (1 << m) | 1
    period = 2 ** n - 1
    assert np.prod(factors, dtype=object) == period
    assert _xpow(period, p, n) == 1
    for q in factors:
        assert _xpow(period // q, p, n) != 1


@pytest.mark.parametrize("width", [1, 8, 64, 66], ids=lambda w: f"w{w}")
def test_prbs_checker_model_counts_each_flip_once(width):
    rng = np.random.default_rng(width)
    for order in (7, 31):
        chk = mprbs.PrbsChecker(order, width)
        pre = chk.lock_words + -(-order // width) + 2
        n = pre + 3000 // width
        words, _ = mprbs.prbs_words(order, width, n, int(rng.integers(1, 1 << order)))
        bits = mscr.words_to_bits(words, width).copy()
        pos = rng.choice(np.arange(pre * width, n * width), size=n * width // 100,
                         replace=False)
        bits[pos] ^= 1
        for w in mscr.bits_to_words(bits, width):
            chk.step(w)
        assert chk.locked and chk.errors == len(pos)


def test_self_synchronizing_comparison_would_count_each_flip_three_times():
    """Why the locked checker uses its own LFSR: comparing against the prediction from the
    received bits counts an isolated flip at t, t+m and t+n."""
    m, n = fmt.prbs_taps(31)
    bits, _ = mprbs.prbs_bits_ref(31, 2000)
    rx = list(bits)
    flips = [300, 700, 1200]  # more than n apart
    for p in flips:
        rx[p] ^= 1
    hist = 0
    for b in bits[:n]:
        hist = (hist << 1 | b) & ((1 << n) - 1)
    pred, _ = mprbs.predict_bits_ref(31, rx[n:], hist)
    wrong = [i + n for i, (p_, r) in enumerate(zip(pred, rx[n:])) if p_ != r]
    assert wrong == sorted(p + d for p in flips for d in (0, m, n))
    chk = mprbs.PrbsChecker(31, 1)
    for b in rx:
        chk.step(b)
    assert chk.errors == len(flips)


def test_prbs_checker_model_no_lock_on_random_and_relock():
    rng = np.random.default_rng(0)
    chk = mprbs.PrbsChecker(31, 64)
    for w in rng.integers(0, 1 << 62, 200):
        chk.step(int(w))
        assert not chk.locked
    words, _ = mprbs.prbs_words(31, 64, 10)
    res = chk.run(words)
    assert res[-1] == (0, True)


def test_prbs_bad_params():
    with pytest.raises(ValueError, match="order=9"):
        fmt.prbs_taps(9)
    with pytest.raises(ValueError, match="state=0x0"):
        mprbs.prbs_words(7, 8, 1, 0)
