"""Amaranth-simulator unit tests of the primitives (scrambler, descrambler, CRC, PRBS)
against the numpy models, with random idle on the inputs and backpressure on the outputs."""

import zlib

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.rtl.crc import Crc
from fusionfabric.rtl.prbs import PrbsChecker, PrbsGenerator
from fusionfabric.rtl.scrambler import Descrambler, Scrambler
from fusionfabric.formats import primitives as fmt
from fusionfabric.sim import crc as mcrc
from fusionfabric.sim import prbs as mprbs
from fusionfabric.sim import scrambler as mscr
from fusionfabric.tb.common import amaranth_stream

WIDTHS = [1, 8, 32, 64, 66, 128]

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")


def rand_words(rng, width, n):
    nbytes = (width + 7) // 8
    return [int.from_bytes(rng.bytes(nbytes), "little") & ((1 << width) - 1) for _ in range(n)]


def run_stream(dut, i_name, o_name, beats, n_out, seed, idle=0.3, backpressure=0.3,
               max_cycles=100_000, probes=None):
    """Drive ``beats`` into stream ``i_name`` and collect ``n_out`` beats from ``o_name``
    (random idle and backpressure from ``seed``, named in any failure).

    ``probes``: an optional dict ``{name: signal}``; their values at the end are stored in it.
    """
    return amaranth_stream.run_stream(dut, i_name, o_name, beats, n_out, seed=seed, idle=idle,
                                      backpressure=backpressure, max_cycles=max_cycles,
                                      quiet_cycles=5, probes=probes)


# -- scrambler ------------------------------------------------------------------------------
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
@pytest.mark.parametrize("kind", ["scrambler", "descrambler"])
def test_scrambler_rtl_matches_model(kind, width):
    seed = [width, int(kind == "descrambler")]
    rng = np.random.default_rng(seed)
    init = int.from_bytes(rng.bytes(8), "little") & ((1 << 58) - 1)
    dut = (Descrambler if kind == "descrambler" else Scrambler)(width, init=init)
    n = max(24, 600 // width)
    words = rand_words(rng, width, n)
    fn = mscr.descramble if kind == "descrambler" else mscr.scramble
    want, _ = fn(words, width, init)
    assert run_stream(dut, "i_data", "o_data", words, n, seed) == want


@pytest.mark.parametrize("width", [1, 8, 64, 66], ids=lambda w: f"w{w}")
def test_descrambler_rtl_resyncs_within_58_bits(width):
    """A descrambler reset to a wrong state outputs the plain data from received bit 58 on."""
    rng = np.random.default_rng(width)
    for trial in range(3):
        tx_state = int.from_bytes(rng.bytes(8), "little") & ((1 << 58) - 1)
        rx_state = tx_state ^ (1 + int.from_bytes(rng.bytes(8), "little") % ((1 << 58) - 1))
        n = -(-200 // width)
        words = rand_words(rng, width, n)
        scrambled, _ = mscr.scramble(words, width, tx_state)
        got = run_stream(Descrambler(width, init=rx_state), "i_data", "o_data", scrambled, n,
                         [width, trial])
        got_bits = mscr.words_to_bits(got, width)
        want_bits = mscr.words_to_bits(words, width)
        assert (got_bits[58:] == want_bits[58:]).all()


def test_scrambler_attributes_and_errors():
    s = Scrambler()
    assert (s.state_width, s.taps, s.data_width) == (58, (39, 58), 64)
    with pytest.raises(ValueError, match="data_width=0"):
        Scrambler(0)
    with pytest.raises(ValueError, match="polynomial=0x400000000000000"):
        Scrambler(8, polynomial=1 << 58)
    with pytest.raises(BlockError, match="init"):
        get_block("descrambler").build(init=1 << 58)


def test_scrambler_custom_polynomial():
    poly = (1 << 7) | (1 << 6) | 1  # x^7 + x^6 + 1 (a PRBS7-style self-sync scrambler)
    rng = np.random.default_rng(5)
    words = rand_words(rng, 16, 40)
    want, _ = mscr.scramble(words, 16, 0, poly)
    assert run_stream(Scrambler(16, poly), "i_data", "o_data", words, 40, 5) == want


# -- CRC ------------------------------------------------------------------------------------
def crc_frames(dut, messages, seed, **kw):
    beats = [b for msg in messages for b in mcrc.frame_beats(msg, dut.data_width)]
    out = run_stream(dut, "i_data", "o_crc", beats, len(messages), seed, **kw)
    return [dut.out_fields.unpack(w) for w in out]


@pytest.mark.parametrize("algorithm", list(fmt.ALGORITHMS))
@pytest.mark.parametrize("width", [8, 32, 64, 128], ids=lambda w: f"w{w}")
def test_crc_rtl_matches_model(algorithm, width):
    seed = [width, len(algorithm)]
    rng = np.random.default_rng(seed)
    nb = width // 8
    lengths = [1, nb, nb + 1, 2 * nb, 2 * nb - 1, 9] + [int(x) for x in
                                                       rng.integers(1, 5 * nb + 2, 10)]
    messages = [b"123456789"] + [rng.bytes(n) for n in lengths]
    got = crc_frames(Crc(algorithm, width), messages, seed)
    alg = fmt.get_algorithm(algorithm)
    assert got[0]["crc"] == alg.check  # the catalogue check value, through the RTL
    assert [g["crc"] for g in got] == [mcrc.crc_bitwise(m, alg) for m in messages]
    assert not any(g["match"] for g in got[1:])


@pytest.mark.parametrize("width", [8, 64, 512], ids=lambda w: f"w{w}")
def test_crc32_rtl_matches_zlib_and_detects_codewords(width):
    rng = np.random.default_rng(width)
    count = 3 if width >= 512 else 5
    longest = {8: 120, 64: 300}.get(width, 700)
    messages = ([rng.bytes(int(n)) for n in rng.integers(1, longest, count)]
                + [rng.bytes(636)])
    dut = Crc("crc32", width)
    # Then the same frames with their CRC appended (little-endian, as Ethernet sends it),
    # which must match, and one corrupted codeword, which must not.
    coded = [m + zlib.crc32(m).to_bytes(4, "little") for m in messages]
    bad = bytearray(coded[0])
    bad[3] ^= 0x10
    frames = messages + coded + [bytes(bad)]
    got = crc_frames(dut, frames, width)
    assert [g["crc"] for g in got] == [zlib.crc32(m) for m in frames]
    assert [g["match"] for g in got] == [0] * len(messages) + [1] * len(coded) + [0]


def test_crc_framing_restart_and_abort():
    """A beat after last starts a frame without first; first in mid-frame restarts it."""
    rng = np.random.default_rng(3)
    dut = Crc("crc32", 32)
    f = dut.in_fields
    a, b = rng.bytes(8), rng.bytes(7)
    beats = mcrc.frame_beats(a, 32)
    # frame b sent without its first flag
    nofirst = [f.pack({**f.unpack(w), "first": 0}) for w in mcrc.frame_beats(b, 32)]
    # one beat of an abandoned frame, then frame a again
    abandoned = [f.pack(data=0x12345678, first=1, last=0)]
    probes = {"aborted": dut.o_aborted}
    out = run_stream(dut, "i_data", "o_crc", beats + nofirst + abandoned + beats, 3, 3,
                     probes=probes)
    assert [dut.out_fields.unpack(w)["crc"] for w in out] == [zlib.crc32(a), zlib.crc32(b),
                                                              zlib.crc32(a)]
    assert probes["aborted"] == 1


def test_crc_errors():
    with pytest.raises(ValueError, match="data_width=12"):
        Crc("crc32", 12)
    with pytest.raises(ValueError, match="algorithm='crc7'"):
        Crc("crc7", 8)
    with pytest.raises(BlockError, match="algorithm"):
        get_block("crc").build(algorithm="md5")


# -- PRBS -----------------------------------------------------------------------------------
@pytest.mark.parametrize("order", [7, 15, 23, 31])
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
def test_prbs_generator_rtl(order, width):
    n = max(16, 300 // width)
    dut = PrbsGenerator(order, width)
    rx = amaranth_stream.StreamReceiver(dut.o_data, n, seed=[order, width], backpressure=0.3)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(rx.run)
    sim.run()
    want, _ = mprbs.prbs_words(order, width, n)
    assert rx.received == want


def run_checker(dut, words, seed, idle=0.3):
    """Feed words (random idle from ``seed``); return (locked, errors) sampled after each
    word's handshake."""
    res = []
    tx = amaranth_stream.StreamSender(
        dut.i_data, words, seed=seed, idle=idle,
        on_beat=lambda ctx, _: res.append((ctx.get(dut.o_locked), ctx.get(dut.o_errors))))
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run)
    sim.run()
    assert tx.sent == list(words), f"checker did not take every word (seed {seed})"
    return res


@pytest.mark.parametrize("order", [7, 31])
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
def test_prbs_checker_rtl_counts_exact_errors(order, width):
    seed = [order, width, 1]
    rng = np.random.default_rng(seed)
    dut = PrbsChecker(order, width)
    start = int(rng.integers(1, 1 << order))
    pre = dut.lock_words + -(-order // width) + 2  # history fill + clean run to lock
    n = pre + max(40, 2000 // width)
    words, _ = mprbs.prbs_words(order, width, n, start)
    # Flip random bits after the preamble: single and multi-bit bursts, about 1 in 32 bits.
    total = n * width
    mask = np.zeros(total, dtype=np.uint8)
    for p in rng.choice(np.arange(pre * width, total), size=max(1, total // 64), replace=False):
        mask[p:p + int(rng.integers(1, 4))] = 1
    flips = int(mask.sum())
    bits = mscr.words_to_bits(words, width) ^ mask
    rx = mscr.bits_to_words(bits, width)
    model = mprbs.PrbsChecker(order, width)
    want = []
    for w in rx:
        model.step(w)
        want.append((int(model.locked), model.errors))
    got = run_checker(dut, rx, seed)
    assert got == want
    assert got[pre - 1][0] == 1 and all(lk for lk, _ in got[pre - 1:])
    assert got[-1][1] == flips  # each flipped bit counted exactly once


@pytest.mark.parametrize("width", [8, 64], ids=lambda w: f"w{w}")
def test_prbs_checker_rtl_loses_lock_on_wrong_pattern(width):
    rng = np.random.default_rng(width)
    dut = PrbsChecker(31, width)
    good, _ = mprbs.prbs_words(31, width, 40)
    junk = rand_words(rng, width, 4 * dut.block_words + 4)
    words = good + junk
    model = mprbs.PrbsChecker(31, width)
    want = []
    for w in words:
        model.step(w)
        want.append((int(model.locked), model.errors))
    got = run_checker(dut, words, width)
    assert got == want
    assert got[39][0] == 1 and got[-1][0] == 0


# -- the RTL's GF(2) matrices (rtl.hdl, from the recurrences) against the models' (probed
# -- from their bit-serial references): two independent derivations -------------------------
@pytest.mark.parametrize("width", [1, 7, 64, 66])
@pytest.mark.parametrize("descrambler", [False, True])
def test_hdl_scrambler_matrices_match_model(width, descrambler):
    from fusionfabric.rtl.hdl import shift_register_matrices
    n, taps = fmt.poly_taps(fmt.POLY_CL49)
    got = shift_register_matrices(n, taps, width, shift_in="in" if descrambler else "out")
    want = mscr.step_matrices(width, fmt.POLY_CL49, descrambler)
    for g, w in zip(got, want):
        assert (g == w).all()


@pytest.mark.parametrize("order", sorted(fmt.PRBS_TAPS))
def test_hdl_prbs_matrices_match_model(order):
    from fusionfabric.rtl.hdl import shift_register_matrices
    m, n = fmt.prbs_taps(order)
    os_, _, ns, _ = shift_register_matrices(n, (m, n), 40)
    g_out, g_next = mprbs.gen_matrices(order, 40)
    assert (os_ == g_out).all() and (ns == g_next).all()
    pred = shift_register_matrices(n, (m, n), 40, shift_in="in", xor_input=False)
    for g, w in zip(pred, mprbs.predict_matrices(order, 40)):
        assert (g == w).all()


@pytest.mark.parametrize("algorithm", sorted(fmt.ALGORITHMS))
def test_hdl_crc_advance_matches_model(algorithm):
    from fusionfabric.rtl.hdl import galois_step_matrix, gf2_power
    alg = fmt.get_algorithm(algorithm)
    for k in (1, 2, 4, 32):
        got = gf2_power(galois_step_matrix(alg.width, alg.poly), 8 * k)
        assert (got == mcrc.advance_matrix(alg, k)).all(), k


def test_hdl_matrix_comparison_catches_a_wrong_tap():
    """Planted fault: one tap moved gives different matrices, so the comparisons above
    can fail."""
    from fusionfabric.rtl.hdl import shift_register_matrices
    got = shift_register_matrices(58, (38, 58), 64)
    want = mscr.step_matrices(64, fmt.POLY_CL49)
    assert any((g != w).any() for g, w in zip(got, want))
