"""256b/257b transcoder and the FEC PCS profile model (fusionfabric.sim.transcode, .fec_pcs).

The transcoder examples are built here bit by bit from the text of IEEE 802.3 cl. 91.5.2.5
(header bit, four flags = second sync bit of each block, payloads bit 0 first, the first
control block without bits 4..7 of its block type field), not from the model.
"""

import numpy as np
import pytest

from fusionfabric.sim import fec
from fusionfabric.sim import fec_pcs as fp
from fusionfabric.sim import transcode as tc
from fusionfabric.sim.pcs import SYNC_CTRL, SYNC_DATA, BlockType, control_word

SEED = 7031
TYPES = [int(t) for t in BlockType]


def _rng(stream):
    return np.random.default_rng([SEED, stream])


def _bits(value, n=64):
    return [(int(value) >> i) & 1 for i in range(n)]


def _random_words(rng, n, p_ctrl=0.25):
    ctrl = rng.random(n) < p_ctrl
    data = rng.integers(0, 2**63, n, dtype=np.uint64) << np.uint64(1)
    data |= rng.integers(0, 2, n).astype(np.uint64)
    body = data & ~np.uint64(0xFF)
    data = np.where(ctrl, body | rng.choice(TYPES, n).astype(np.uint64), data)
    return data, ctrl


# -- transcoder: hand-derived examples -----------------------------------------------------
def test_all_data_block():
    d = [0x1, 0x0123456789ABCDEF, 0, 1 << 63]
    expect = [1] + sum((_bits(w) for w in d), [])
    out = tc.encode([SYNC_DATA] * 4, np.array(d, np.uint64))
    assert out.shape == (1, 257) and out[0].tolist() == expect


def test_one_control_block_in_third_place():
    d0, d1, d3 = 0xFFFF0000FFFF0000, 0x5, 0x8000000000000001
    c2 = control_word(BlockType.IDLE, 0xABCDEF)            # type 0x1E, body in bits 8..63
    expect = [0] + [1, 1, 0, 1] + _bits(d0) + _bits(d1) \
        + _bits(c2, 4) + _bits(c2 >> 8, 56) + _bits(d3)
    assert len(expect) == 257
    out = tc.encode([SYNC_DATA, SYNC_DATA, SYNC_CTRL, SYNC_DATA],
                    np.array([d0, d1, c2, d3], np.uint64))
    assert out[0].tolist() == expect
    s, p, e = tc.decode(out)
    assert s[0].tolist() == [2, 2, 1, 2] and p[0].tolist() == [d0, d1, c2, d3]
    assert not e.any()


def test_two_control_blocks_first_compressed_second_whole():
    c0 = control_word(BlockType.START, 0x12345678)          # type 0x33
    c3 = control_word(BlockType.MESSAGE, 0xFEDCBA)          # type 0x4B, carried whole
    d1, d2 = 0x0F0F, 0xF0F0 << 40
    expect = [0] + [0, 1, 1, 0] + _bits(c0, 4) + _bits(c0 >> 8, 56) + _bits(d1) \
        + _bits(d2) + _bits(c3)
    out = tc.encode([SYNC_CTRL, SYNC_DATA, SYNC_DATA, SYNC_CTRL],
                    np.array([c0, d1, d2, c3], np.uint64))
    assert out[0].tolist() == expect
    assert tc.decode(out)[1][0].tolist() == [c0, d1, d2, c3]


def test_decoder_marks_invalid_blocks():
    good = tc.encode([SYNC_CTRL] * 4, np.array([control_word(BlockType.IDLE)] * 4, np.uint64))
    no_ctrl = good.copy()
    no_ctrl[0, 1:5] = 1                                    # header 0 but all flags "data"
    bad_nib = good.copy()
    bad_nib[0, 5:9] = 0                                    # type nibble 0: no known type
    s, p, e = tc.decode(np.concatenate([good, no_ctrl, bad_nib]))
    assert e.tolist() == [[False] * 4, [True] * 4, [True] * 4]
    assert (p[1:] == control_word(BlockType.ERROR)).all() and (s[1:] == SYNC_CTRL).all()


def test_encoder_turns_bad_sync_and_unknown_first_type_into_error_blocks():
    err = control_word(BlockType.ERROR)
    out = tc.encode([0, SYNC_DATA, 3, SYNC_DATA], np.array([7, 8, 9, 10], np.uint64))
    s, p, e = tc.decode(out)
    assert p[0].tolist() == [err, 8, err, 10] and s[0].tolist() == [1, 2, 1, 2]
    out = tc.encode([SYNC_DATA, SYNC_CTRL, SYNC_DATA, SYNC_DATA],
                    np.array([1, 0x77, 3, 4], np.uint64))     # 0x77: not a project type
    assert tc.decode(out)[1][0].tolist() == [1, err, 3, 4]


def test_transcoder_round_trip_random_mixes():
    for stream, p_ctrl in enumerate((0.0, 0.05, 0.5, 1.0)):
        data, ctrl = _random_words(_rng(stream), 4000, p_ctrl)
        d, c, e = tc.decode_words(tc.encode_words(data.reshape(10, 400), ctrl.reshape(10, 400)))
        assert (d.reshape(-1) == data).all() and (c.reshape(-1) == ctrl).all() and not e.any()


# -- FEC PCS profile -------------------------------------------------------------------------
def _loop(n_lanes, am_period, periods, rng):
    n_words = fp.words_per_period(n_lanes, am_period) * periods + 37
    data, ctrl = _random_words(rng, n_words)
    tx = fp.transmit(data, ctrl, n_lanes, am_period)
    pad = tx.n_words - n_words
    data = np.r_[data, np.full(pad, control_word(BlockType.IDLE), np.uint64)]
    ctrl = np.r_[ctrl, np.ones(pad, bool)]
    return tx, data, ctrl


def _expect(rx, data, ctrl, n_lanes, am_period, period=1):
    off = fp.lock_offset_words(n_lanes, am_period, period)
    m = rx.data.size
    assert m > 0 and off + m <= data.size
    good = ~rx.error
    assert (rx.data[good] == data[off:off + m][good]).all()
    assert (rx.ctrl[good] == ctrl[off:off + m][good]).all()
    return off


@pytest.mark.parametrize("n_lanes", [1, 2, 4, 8, 16])
def test_clean_loopback(n_lanes):
    tx, data, ctrl = _loop(n_lanes, 3, 3, _rng(100 + n_lanes))
    assert tx.lanes.shape == (n_lanes, tx.codewords.shape[0] * fec.N // n_lanes)
    assert not fec.syndromes(tx.codewords).any()
    rx = fp.receive(list(tx.lanes), n_lanes, 3)
    c = rx.counters
    assert c.aligned and c.lanes_locked == n_lanes and c.lane_map.tolist() == list(range(n_lanes))
    assert c.codewords == tx.codewords.shape[0] - 3
    assert c.corrected_codewords == c.uncorrectable_codewords == c.corrected_symbols == 0
    assert not rx.error.any()
    _expect(rx, data, ctrl, n_lanes, 3)
    # every word after the lock point comes out
    assert rx.data.size == data.size - fp.lock_offset_words(n_lanes, 3)


def test_errors_up_to_t_counted_per_lane():
    n, am = 4, 3
    rng = _rng(200)
    tx, data, ctrl = _loop(n, am, 3, rng)
    cw = tx.codewords.copy()
    nerr = rng.integers(0, fec.T + 1, cw.shape[0])
    per_lane = np.zeros(n, np.int64)
    for i in range(am, cw.shape[0]):                       # the receiver starts at period 1
        pos = rng.choice(fec.N, nerr[i], replace=False)
        cw[i, pos] ^= rng.integers(1, 1024, nerr[i])
        np.add.at(per_lane, pos % n, 1)
    lanes = [cw[:, k::n].reshape(-1) for k in range(n)]
    rx = fp.receive(lanes, n, am)
    c = rx.counters
    assert c.uncorrectable_codewords == 0 and not rx.error.any()
    assert c.corrected_symbols == nerr[am:].sum() == per_lane.sum()
    assert c.symbol_errors_per_lane.tolist() == per_lane.tolist()
    assert c.corrected_codewords == np.count_nonzero(nerr[am:])
    _expect(rx, data, ctrl, n, am)


def test_uncorrectable_codeword_marks_its_blocks():
    n, am = 2, 4
    rng = _rng(300)
    tx, data, ctrl = _loop(n, am, 3, rng)
    cw = tx.codewords.copy()
    bad = am + 5                                           # a data codeword of period 1
    pos = rng.choice(fec.N, 40, replace=False)
    cw[bad, pos] ^= rng.integers(1, 1024, 40)
    rx = fp.receive([cw[:, k::n].reshape(-1) for k in range(n)], n, am)
    assert rx.counters.uncorrectable_codewords == 1 and not rx.ok[5]
    # its 20 blocks and the next one (descrambler) come out as error words, nothing else
    assert rx.error.sum() == 4 * (fp.BLOCKS_PER_CW + 1)
    idx = np.flatnonzero(rx.error)
    assert idx[-1] - idx[0] + 1 == idx.size                # one contiguous run
    assert (rx.data[rx.error] == control_word(BlockType.ERROR)).all() and rx.ctrl[rx.error].all()
    _expect(rx, data, ctrl, n, am)


def test_skew_and_lane_swap():
    n, am = 8, 3
    rng = _rng(400)
    tx, data, ctrl = _loop(n, am, 3, rng)
    skew = np.array([0, 13, 5, 68, 1, 30, 2, 7])
    perm = rng.permutation(n)
    lanes = [np.r_[rng.integers(0, 1024, skew[k]), tx.lanes[k]] for k in range(n)]
    phys = [lanes[perm[p]] for p in range(n)]
    rx = fp.receive(phys, n, am)
    c = rx.counters
    assert c.aligned and c.lane_map.tolist() == perm.tolist()
    assert c.skew.tolist() == (skew[perm] - skew.min()).tolist()
    _expect(rx, data, ctrl, n, am)
    rx2 = fp.receive(phys, n, am, max_skew=50)             # 68 - 0 > 50: no alignment
    assert not rx2.counters.aligned and rx2.data.size == 0


def test_garbage_lanes_deliver_nothing():
    n, am = 4, 3
    rng = _rng(500)
    tx, _, _ = _loop(n, am, 2, rng)
    lanes = list(tx.lanes)
    lanes[2] = rng.integers(0, 1024, lanes[2].size)
    rx = fp.receive(lanes, n, am)
    assert rx.data.size == 0 and not rx.counters.aligned and rx.counters.lanes_locked == 3
    assert rx.counters.lane_map[2] == -1
    rx = fp.receive([rng.integers(0, 1024, 50) for _ in range(n)], n, am)
    assert rx.data.size == 0 and rx.counters.lanes_locked == 0
    rx = fp.receive([lanes[0], lanes[0], lanes[1], lanes[3]], n, am)   # lane id twice
    assert rx.data.size == 0 and not rx.counters.aligned


def test_lock_on_a_later_marker_when_the_first_is_hit():
    n, am = 2, 3
    rng = _rng(600)
    tx, data, ctrl = _loop(n, am, 4, rng)
    lanes = [lane.copy() for lane in tx.lanes]
    lanes[1][:fp.AM_SYMBOLS] ^= 0x3FF                      # lane 1's first marker destroyed
    rx = fp.receive(lanes, n, am)
    assert rx.counters.aligned
    _expect(rx, data, ctrl, n, am, period=2)


def test_bad_parameters():
    with pytest.raises(ValueError, match="n_lanes=3"):
        fp.transmit(np.zeros(4, np.uint64), np.zeros(4, bool), 3, 4)
    with pytest.raises(ValueError, match="am_period=1"):
        fp.receive([np.zeros(10, np.int64)] * 2, 2, 1)
    with pytest.raises(ValueError, match="max_skew=-1"):
        fp.receive([np.zeros(10, np.int64)] * 2, 2, 4, max_skew=-1)
    with pytest.raises(ValueError, match="1024"):
        fp.receive([np.full(10, 1024)] * 2, 2, 4)
