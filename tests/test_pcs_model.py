"""Known-answer and property tests of the PCS golden model (sim/pcs.py) and of the lane
fault channel (tb/common/lanes.py).

Independent references used here: published values typed into tests/facts.py with their
sources; marker values from the cited source (enjoy-digital/liteeth test/model/pcs_100g.py,
which reproduces IEEE 802.3 Table 82-2 / ITU-T G.709 Table E.2); BIP bit sets written out
from Table 82-4; the bit-serial scrambler reference of sim.scrambler; hand-built blocks.
"""

import numpy as np
import pytest

from fusionfabric.sim import pcs
from fusionfabric.tb.common.lanes import LaneChannel
from fusionfabric.tb.pcs.harness import channel_inputs, tx_lane_rows
from tests import facts
# The cited source's table, as it is printed there (lower-case tuples, lanes 0..19).
LITEETH_TABLE_82_2 = """
    (0xc1, 0x68, 0x21), (0x9d, 0x71, 0x8e), (0x59, 0x4b, 0xe8), (0x4d, 0x95, 0x7b),
    (0xf5, 0x07, 0x09), (0xdd, 0x14, 0xc2), (0x9a, 0x4a, 0x26), (0x7b, 0x45, 0x66),
    (0xa0, 0x24, 0x76), (0x68, 0xc9, 0xfb), (0xfd, 0x6c, 0x99), (0xb9, 0x91, 0x55),
    (0x5c, 0xb9, 0xb2), (0x1a, 0xf8, 0xbd), (0x83, 0xc7, 0xca), (0x35, 0x36, 0xcd),
    (0xc4, 0x31, 0x4c), (0xad, 0xd6, 0xb7), (0x5f, 0x66, 0x2a), (0xc0, 0xf0, 0xe5),
"""


def _triples(text):
    import re
    return [tuple(int(x, 16) for x in t) for t in
            re.findall(r"\(0x(\w\w), 0x(\w\w), 0x(\w\w)\)", text)]


def test_marker_values_match_facts():
    """Table 82-2's lane 0 (tests/facts.py) against the model's table."""
    assert " ".join(f"{b:02X}" for b in pcs.MARKERS_100G[0]) == facts.MARKER_100G_LANE0


def test_marker_values_match_cited_source():
    assert list(pcs.MARKERS_100G) == _triples(LITEETH_TABLE_82_2)
    assert len(set(pcs.MARKERS_100G)) == 20


def test_published_constants():
    """The model's sync headers and lock thresholds against the published numbers."""
    assert (pcs.SYNC_DATA, pcs.SYNC_CTRL) == (facts.SYNC_DATA, facts.SYNC_CTRL)
    assert pcs.LOCK_WINDOW == facts.LOCK_WINDOW == facts.LOCK_GOOD_HEADERS
    assert pcs.LOCK_BAD == facts.LOCK_BAD_HEADERS
    assert pcs.AM_BAD_LIMIT == facts.AM_INVALID_TO_LOSE_LOCK


@pytest.mark.parametrize("n_bad", [1, facts.AM_INVALID_TO_LOSE_LOCK - 1,
                                   facts.AM_INVALID_TO_LOSE_LOCK])
def test_marker_lock_lost_after_4_consecutive_bad_markers(n_bad):
    """Figure 82-11: a locked lane keeps marker lock through 3 consecutive invalid markers
    and loses it at the 4th (the number typed into tests/facts.py, not the model's
    constant). The markers are broken in M0 with the control header intact, so block lock
    holds; the other lane sees clean markers throughout."""
    rng = np.random.default_rng(40 + n_bad)
    n, P, S = 2, 16, 2
    _, rows = tx_lane_rows(rng, n, P, 40 * P)
    first_bad = 20 * P                           # a marker row, long after lock
    bad_rows = [first_bad + i * P for i in range(n_bad)]
    rows = [list(r) for r in rows]
    for r in bad_rows:
        assert pcs.marker_id(rows[r][0]) == 0
        rows[r][0] ^= 1 << 2                     # bit 0 of M0
    rx = pcs.Receiver(n, P, S, 1000)
    am = np.array([rx.step(row) or list(rx.am_lock) for row in rows])
    assert am[first_bad - 1].tolist() == [1, 1], "lanes not marker-locked before the test"
    locked = int(np.argmax(am[:, 1] == 1))
    assert am[locked:, 1].all(), "the clean lane lost marker lock"
    lane0 = am[:, 0]
    if n_bad < facts.AM_INVALID_TO_LOSE_LOCK:
        assert lane0[first_bad - 1:].all(), f"lost after {n_bad} bad markers"
    else:
        last = bad_rows[-1]
        assert lane0[first_bad - 1:last].all(), "lost before the 4th bad marker"
        lost = last + int(np.argmax(lane0[last:] == 0))
        assert lane0[lost] == 0 and lost - last <= 3, (last, lost)
        assert lane0[-1] == 1, "lane 0 did not relock on the clean markers that follow"


def _bip_table_82_4(block: int) -> int:
    """BIP8 written from Table 82-4: bit i covers block bits 2+i+8k, bit 3 also bit 0 and
    bit 4 also bit 1 (bit 0 of the block is the first sync bit on the wire)."""
    cover = {i: [2 + i + 8 * k for k in range(8)] for i in range(8)}
    cover[3].insert(0, 0)
    cover[4].insert(0, 1)
    # spot-check against the table's first entries (as listed in Table 82-4)
    assert cover[0][:3] == [2, 10, 18] and cover[3][:3] == [0, 5, 13] and cover[4][:3] == [1, 6, 14]
    out = 0
    for i, bits in cover.items():
        out |= (sum((block >> b) & 1 for b in bits) & 1) << i
    return out


def test_bip8_table_82_4():
    rng = np.random.default_rng(5)
    blocks = [int.from_bytes(rng.bytes(9), "little") & ((1 << 66) - 1) for _ in range(300)]
    blocks += [1, 2, 3, 1 << 65, (1 << 66) - 1]
    got = pcs.bip8([b & 3 for b in blocks], [b >> 2 for b in blocks])
    assert [int(x) for x in got] == [_bip_table_82_4(b) for b in blocks]


def test_marker_format():
    p = pcs.marker_payload(1, 0x5A)
    octets = p.to_bytes(8, "little")   # octet 0 is first on the wire
    assert octets == bytes([0x9D, 0x71, 0x8E, 0x5A, 0x62, 0x8E, 0x71, 0xA5])
    assert pcs.marker_id(1 | p << 2) == 1
    assert pcs.marker_id(2 | p << 2) is None          # data header
    assert pcs.marker_id(1 | (p ^ (1 << 40)) << 2) is None   # ~M1 broken


def scramble_bits(bits, state):
    """cl. 49.2.6 per bit (tests/facts.py): out = in ^ s[38] ^ s[57]; out shifts into s[0]."""
    out = []
    for b in bits:
        o = b ^ (state >> 38 & 1) ^ (state >> 57 & 1)
        out.append(o)
        state = ((state << 1) | o) & ((1 << 58) - 1)
    return out, state


def descramble_bits(bits, state):
    """The same taps on the received bits: the received bit shifts into s[0]."""
    out = []
    for b in bits:
        out.append(b ^ (state >> 38 & 1) ^ (state >> 57 & 1))
        state = ((state << 1) | b) & ((1 << 58) - 1)
    return out, state


def test_scrambler_against_bit_serial_reference():
    rng = np.random.default_rng(9)
    words = [int.from_bytes(rng.bytes(8), "little") for _ in range(40)]
    state = int.from_bytes(rng.bytes(8), "little") & ((1 << 58) - 1)
    bits = [(w >> i) & 1 for w in words for i in range(64)]
    ref, ref_state = scramble_bits(bits, state)
    got, got_state = pcs.scramble(words, state)
    assert [(w >> i) & 1 for w in got for i in range(64)] == ref and got_state == ref_state
    dref, dref_state = descramble_bits(ref, 12345)
    back, back_state = pcs.descramble(got, 12345)
    assert [(w >> i) & 1 for w in back for i in range(64)] == dref
    assert back_state == dref_state and back[1:] == words[1:]


def _serial_scramble_payloads(payloads, state=pcs.SCRAMBLER_INIT):
    bits = [(int(p) >> i) & 1 for p in payloads for i in range(64)]
    out, _ = scramble_bits(bits, state)
    return [sum(b << i for i, b in enumerate(out[64 * k:64 * k + 64]))
            for k in range(len(payloads))]


@pytest.mark.parametrize("n_lanes,am_period", [(1, 5), (3, 4), (4, 16)])
def test_transmit_against_serial_reference(n_lanes, am_period):
    rng = np.random.default_rng(n_lanes)
    n_rows = 3 * am_period + 2
    data, ctrl = pcs.random_rows(rng, n_rows, n_lanes)
    tx = pcs.transmit(data, ctrl, n_lanes, am_period)
    scr = _serial_scramble_payloads(data)
    rows = tx.sync.shape[1]
    d = 0
    bip = [0] * n_lanes
    for r in range(rows):
        if r % am_period == 0:
            assert tx.is_marker[r]
            for k in range(n_lanes):
                block = int(tx.sync[k, r]) | int(tx.payload[k, r]) << 2
                m0, m1, m2 = pcs.MARKERS_100G[k]
                assert block & 3 == 1
                assert (block >> 2).to_bytes(8, "little") == bytes(
                    [m0, m1, m2, bip[k], m0 ^ 255, m1 ^ 255, m2 ^ 255, bip[k] ^ 255])
                bip[k] = _bip_table_82_4(block)      # the next BIP includes this marker
            continue
        for k in range(n_lanes):
            block = int(tx.sync[k, r]) | int(tx.payload[k, r]) << 2
            assert block & 3 == (1 if ctrl[d] else 2)
            assert block >> 2 == scr[d]
            bip[k] ^= _bip_table_82_4(block)
            d += 1
    assert d == data.size


def test_decode_known_sequence():
    """Hand-built words → transmit → descramble by the serial reference → decode."""
    words = [(0x0123456789ABCDEF, 0), (pcs.control_word(pcs.BlockType.START, 0xABCDE), 1),
             (0xFFFFFFFFFFFFFFFF, 0), (pcs.control_word(pcs.BlockType.IDLE), 1),
             (pcs.control_word(pcs.BlockType.MESSAGE, 0x12345678), 1), (0, 0)]
    tx = pcs.transmit([w for w, _ in words], [c for _, c in words], 1, 100)
    blocks = tx.blocks(0)[1:]   # row 0 is the marker
    bits = [(b >> (2 + i)) & 1 for b in blocks for i in range(64)]
    plain, _ = descramble_bits(bits, 0)
    for k, (w, c) in enumerate(words):
        got = sum(b << i for i, b in enumerate(plain[64 * k:64 * k + 64]))
        if k == 0:
            continue   # the descrambler needs 58 bits of history first
        assert got == w
        assert pcs.decode(blocks[k] & 3, got) == (w, c, False)
    assert pcs.decode(0, 5) == (int(pcs.BlockType.ERROR), 1, True)
    assert pcs.decode(3, 5) == (int(pcs.BlockType.ERROR), 1, True)
    assert pcs.decode(1, 0x77) == (int(pcs.BlockType.ERROR), 1, True)


def _rows_of(words, n):
    return [tuple(words[i:i + n]) for i in range(0, len(words), n)]


def _assert_contiguous(got, want):
    """``got`` (delivered rows) is a contiguous run of ``want`` (sent rows), located by its
    first row that is not all IDLE (random data rows are unique)."""
    idle = (pcs.control_word(pcs.BlockType.IDLE), 1)
    i = next(i for i, row in enumerate(got) if any(w != idle for w in row))
    start = want.index(got[i]) - i
    assert start >= 0
    assert got == want[start:start + len(got)]


@pytest.mark.parametrize("n_lanes", [1, 2, 4, 8])
def test_receiver_skew_and_permutation(n_lanes):
    rng = np.random.default_rng(10 + n_lanes)
    P, S = 32, 4
    words, rows = tx_lane_rows(rng, n_lanes, P, 700)
    ch = LaneChannel(n_lanes, 66, rng, slack=1)
    for k in range(n_lanes):
        ch.skew(k, int(rng.integers(0, S)))      # sub-block offsets may add one cycle
        ch.slip(k, int(rng.integers(1, 66)))
    ch.permute(list(rng.permutation(n_lanes)))
    rx = pcs.Receiver(n_lanes, P, S, 1000)
    got = []
    for row in channel_inputs(rng, rows, ch):
        rx.step(row)
        if rx.out_valid:
            got.append(tuple(rx.out_words))
    want = _rows_of(words, n_lanes)
    assert got, "link never came up"
    _assert_contiguous(got, want)
    assert len(got) > len(want) // 2
    assert rx.decode_errors == 0 and rx.bip_errors == [0] * n_lanes


@pytest.mark.parametrize("k", [1, 13, 33, 65, -7])
def test_receiver_slip_relock(k):
    """A slip of k bits on a locked lane loses block lock within 64 + 64 blocks and the lane
    relocks within 64 + 4*66 blocks (documented bounds); the link comes back and delivers
    the input rows exactly after it."""
    rng = np.random.default_rng(100 + k)
    n, P, S = 4, 32, 3
    words, rows = tx_lane_rows(rng, n, P, 1400)
    ch = LaneChannel(n, 66, rng, slack=2)
    at = 600
    rx = pcs.Receiver(n, P, S, 1000)
    lock, up, got = [], [], []
    for t, row in enumerate(channel_inputs(rng, rows, ch, {at: lambda c: c.slip(2, k)})):
        rx.step(row)
        lock.append(rx.lock[2])
        up.append(rx.link_up)
        got.append(tuple(rx.out_words) if rx.out_valid else None)
    lock, up = np.array(lock), np.array(up)
    assert lock[at - 1] == 1 and up[at - 1] == 1
    lost = at + int(np.argmax(lock[at:] == 0))
    assert lock[lost] == 0 and lost - at <= 128
    back = lost + int(np.argmax(lock[lost:] == 1))
    assert lock[back] == 1 and back - lost <= 64 + 4 * 66
    assert up[-1] == 1
    relink = back + int(np.argmax(up[back:] == 1))
    want = _rows_of(words, n)
    after = [g for g in got[relink:] if g is not None]
    _assert_contiguous(after, want)
    before = [g for g in got[:at] if g is not None]
    _assert_contiguous(before, want)


def test_receiver_lane_held_constant():
    rng = np.random.default_rng(7)
    n, P, S = 4, 32, 3
    words, rows = tx_lane_rows(rng, n, P, 600)
    for value in (0, (1 << 66) - 1, 0x2AAAAAAAAAAAAAAAA & ((1 << 66) - 1)):
        ch = LaneChannel(n, 66, rng)
        ch.hold(1, value)
        rx = pcs.Receiver(n, P, S, 1000)
        for row in channel_inputs(rng, rows, ch):
            rx.step(row)
            assert not rx.out_valid and not rx.link_up
        assert rx.am_lock[1] == 0
        assert rx.lock[0] == rx.lock[2] == rx.lock[3] == 1


def test_bip_errors_predicted_from_flip_log():
    """Random bit errors: the receiver's BIP counters equal an independent prediction from
    the channel's flip log (Table 82-4 bit mapping, window from marker to marker)."""
    rng = np.random.default_rng(11)
    n, P, S = 2, 64, 3
    words, rows = tx_lane_rows(rng, n, P, 3000)
    ch = LaneChannel(n, 66, rng, slack=1)
    rx = pcs.Receiver(n, P, S, 100000)
    locked_from = None
    inputs = []
    for t, row in enumerate(rows):
        if t == 600:
            ch.set_ber(2e-4)
            locked_from = t
        inputs.append(ch.push(row))
    for row in inputs:
        rx.step(row)
    assert all(rx.am_lock)
    # predict: tx bit index b of lane k → row b // 66 (lane delay slack 1 is the same for
    # all), bit b % 66 → BIP bit (bit 0 → 3, bit 1 → 4, else (bit-2) % 8)
    for k in range(n):
        per_marker = {}
        for lane, b in ch.flips:
            if lane != k:
                continue
            r, bit = divmod(b, 66)
            bip_bit = 3 if bit == 0 else 4 if bit == 1 else (bit - 2) % 8
            if r % P == 0 and 26 <= bit < 34:
                m = r            # an error in the received BIP3 field of marker r
                per_marker[m] = per_marker.get(m, 0) ^ (1 << (bit - 26))
            # the block belongs to the window checked at the next marker (incl. a marker)
            m = (r // P + 1) * P
            per_marker[m] = per_marker.get(m, 0) ^ (1 << bip_bit)
        last_marker = (len(rows) - 3) // P * P
        predicted = sum(1 for m, v in per_marker.items() if v and m <= last_marker)
        assert rx.bip_errors[k] == predicted, (k, rx.bip_errors[k], predicted)
    assert sum(rx.bip_errors) > 3
    assert locked_from is not None


def test_lane_channel_faults():
    rng = np.random.default_rng(1)
    ch = LaneChannel(2, 8, rng, slack=1)
    assert ch.push([0xAB, 0xCD]) == [0, 0]          # one word of slack
    assert ch.push([0x12, 0x34]) == [0xAB, 0xCD]
    ch.slip(0, -4)                                  # lane 0 four bits early
    assert ch.push([0x56, 0x78])[0] == (0x12 >> 4) | ((0x56 & 0xF) << 4)
    ch.permute([1, 0])
    out = ch.push([0x9A, 0xBC])
    assert out[1] == (0x56 >> 4) | ((0x9A & 0xF) << 4) and out[0] == 0x78
    ch.hold(0, 0x55)
    assert ch.push([0, 0])[0] == 0x55
    ch.burst(1, 3)
    ch.push([0, 0])
    assert ch.flips == [(1, 40), (1, 41), (1, 42)]   # 5 words of 8 bits sent before
    with pytest.raises(ValueError, match="perm"):
        ch.permute([0, 0])
    with pytest.raises(ValueError, match="slack"):
        ch.slip(0, -100)
    with pytest.raises(ValueError, match="lane=5"):
        ch.skew(5, 1)


def test_bad_parameters_named():
    with pytest.raises(ValueError, match="n_lanes=0"):
        pcs.check_params(0, 16)
    with pytest.raises(ValueError, match="am_period=8"):
        pcs.check_params(2, 8, max_skew=3)
    with pytest.raises(ValueError, match="ber_window=0"):
        pcs.Receiver(2, 16, 1, 0)


def test_vectors_pcs():
    from fusionfabric.sim.vectors import all_vectors
    out = all_vectors()["pcs"]({"n_lanes": "2", "am_period": "4", "rows": "6"}, 3, 2)
    v = out["vectors"][0]
    assert len(v["words"]) == 12 and len(v["lanes"]) == 2
    assert v["marker_rows"] == [0, 4]   # M D D D M D D D
    first = int(v["lanes"][1][0], 16)
    assert pcs.marker_id(first) == 1
    with pytest.raises(ValueError, match="rows=0"):
        all_vectors()["pcs"]({"rows": "0"}, 1, 1)
    with pytest.raises(ValueError, match="'bogus'"):
        all_vectors()["pcs"]({"bogus": "1"}, 1, 1)


def test_slip_every_amount_relocks():
    """Every slip amount 1..65 (inserted) and -1..-65 (deleted) on a 1-lane link: lock lost
    within 128 blocks, regained within 64 + 4*66 blocks, the link back up."""
    worst = {"lose": 0, "relock": 0}
    for k in list(range(1, 66)) + list(range(-65, 0)):
        rng = np.random.default_rng(1000 + k)
        words, rows = tx_lane_rows(rng, 1, 16, 900)
        ch = LaneChannel(1, 66, rng, slack=2)
        rx = pcs.Receiver(1, 16, 2, 1000)
        at = 300
        lock, up = [], []
        for row in channel_inputs(rng, rows, ch, {at: lambda c, k=k: c.slip(0, k)}):
            rx.step(row)
            lock.append(rx.lock[0])
            up.append(rx.link_up)
        lock = np.array(lock)
        assert lock[at - 1] == 1 and up[at - 1] == 1
        lost = at + int(np.argmax(lock[at:] == 0))
        back = lost + int(np.argmax(lock[lost:] == 1))
        assert lock[lost] == 0 and lost - at <= 128, k
        assert lock[back] == 1 and back - lost <= 64 + 4 * 66, k
        assert up[-1] == 1, k
        worst["lose"] = max(worst["lose"], lost - at)
        worst["relock"] = max(worst["relock"], back - lost)
    assert worst["relock"] > 64     # the hunt really had to move


# -- gearbox model ----------------------------------------------------------------------------
@pytest.mark.parametrize("width", [32, 64, 66])
def test_serialize_is_the_bit_stream_cut_in_words(width):
    """serialize against a character-level reference: the lane's blocks written as bit
    strings (bit 0 first), concatenated, cut every W characters."""
    rng = np.random.default_rng(width)
    blocks = [int.from_bytes(rng.bytes(9), "little") & ((1 << 66) - 1) for _ in range(37)]
    text = "".join(format(b, "066b")[::-1] for b in blocks)
    want = [int(text[i:i + width][::-1], 2) for i in range(0, len(text) - width + 1, width)]
    assert pcs.serialize(blocks, width) == want


@pytest.mark.parametrize("width", [32, 64, 66])
def test_tx_takes_rate_and_no_underflow(width):
    """Takes: exactly W rows per 66 line words over a gearbox period, and the bits taken
    never fall behind the bits sent (the gearbox always has W bits to send)."""
    takes = pcs.tx_takes(width, 660)
    assert takes.sum() == 660 * width // 66
    taken = np.cumsum(takes) * 66
    sent = np.arange(1, 661) * width
    assert (taken >= sent).all() and (taken - sent < 66 + width).all()


def test_gearbox_receiver_delivers_the_stream():
    """Model loopback through the gearboxes: transmit, serialize to 32 bits, skew a lane by
    a few words plus bits, GearboxReceiver delivers the sent words in order."""
    rng = np.random.default_rng(11)
    n, P, S, W = 3, 16, 3, 32
    words, rows = tx_lane_rows(rng, n, P, 500)
    lanes = [pcs.serialize([r[k] for r in rows], W) for k in range(n)]
    ch = LaneChannel(n, W, rng, slack=1)
    ch.skew(2, 2)
    ch.slip(1, 23)
    ch.permute([1, 2, 0])
    rx = pcs.make_receiver(n, P, S, 1000, W)
    out = rx.run([ch.push(list(w)) for w in zip(*lanes)])
    got = out["words"]
    assert out["link_up"][-1] == 1 and len(got) > 200 * n
    j = next(i for i, w in enumerate(got) if w[1] == 0)
    i0 = words.index(got[j]) - j
    assert got == words[i0:i0 + len(got)]


def test_serdes_width_checked():
    with pytest.raises(ValueError, match="serdes_width=48"):
        pcs.tx_takes(48, 10)
    with pytest.raises(ValueError, match="serdes_width=66 has no gearbox"):
        pcs.GearboxReceiver(2, 16, 2, 100, 66)
