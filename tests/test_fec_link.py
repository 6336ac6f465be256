"""The link model on top of FEC (fusionfabric.sim.fec_link) against hand-computed cases."""

import math

import numpy as np
import pytest

from fusionfabric.sim import fec
from fusionfabric.sim import fec_link as fl


def _clean(r):
    assert (r.lost, r.duplicated, r.corrupted) == (0, 0, 0), f"seed {r.seed}"


def test_ber0_straddle_is_the_format_bound_exactly():
    # 1 FEC lane: a marker codeword loses 1 block = 2 slots; period 5 codewords holds
    # 5 x 40 - 2 = 198 data slots = 11 groups of (START row + 17-slot flit of 4 TL flits).
    p = fl.LinkParams(tl_per_dl=4, start_every=1, replay_depth=32, n_lanes=1, am_period=5)
    r = fl.run(11 * 20, p)
    payload = 11 * 16 * 128 * 16 / 17          # per period: 11 flits x 16 slots, 16/17 data
    raw = 5 * 544 * 10                          # per period: 5 codewords
    assert r.goodput == pytest.approx(payload / raw, rel=1e-12)
    assert r.bound == pytest.approx(payload / raw, rel=1e-12)
    assert (r.replays, r.tx_control) == (0, 0)
    _clean(r)


def test_ber0_aligned_is_the_format_bound_exactly():
    # one codeword per flit (9 TL flits = 36 slots + trailer + 3 pad); every 4th of 4
    # codewords is a marker codeword carrying no flit
    p = fl.LinkParams(framing="aligned", cw_per_flit=1, am_period=4)
    r = fl.run(3 * 50, p)
    assert p.n_tl == 9
    expect = 36 * 128 * 16 / 17 * 3 / (4 * 5440)
    assert r.goodput == pytest.approx(expect, rel=1e-12)
    assert r.bound == pytest.approx(expect, rel=1e-12)
    _clean(r)


def test_default_bound_is_about_088():
    b = fl.format_bound(fl.LinkParams())["bound"]
    assert b == pytest.approx(256 / 257 * 514 / 544 * 256 / 272 * 128 / 129, rel=1e-3)
    assert 0.875 < b < 0.885


def test_planted_uncorrectable_replays_the_flits_it_carried_once():
    # tl_per_dl = 4 (17 slots), START row before flits 0, 16, 32...: flit k starts at data
    # slot 17 k + k // 16 + 1. 4 lanes: marker codeword 0 loses 4 slots, so data slot j is
    # at slot time j + 4. Codeword 10 is slot times 400..439 = data slots 396..435: flits
    # 23 (393..409), 24 (410..426), 25 (427..443); the next codeword's first block (data
    # slots 436, 437) is flit 25 too. The three arrive damaged and are dropped; go-back-N
    # restarts once, at flit 23.
    p = fl.LinkParams(tl_per_dl=4, replay_depth=16)
    r = fl.run(200, p, planted={10: "uncorrectable"})
    assert r.replay_from == [23]
    assert (r.replays, r.timeouts, r.fec_dropped, r.crc_dropped) == (1, 0, 3, 0)
    assert r.fwd["uncorrectable"] == 1
    _clean(r)
    base = fl.run(200, p)
    assert base.replays == 0 and r.tx_data > base.tx_data


def test_planted_miscorrection_is_caught_by_crc_and_replayed_once():
    p = fl.LinkParams(framing="aligned", cw_per_flit=1)
    r = fl.run(100, p, planted={7: "miscorrected"})
    # codeword 0 is a marker codeword, so codeword 7 carries flit 6; the first block of
    # codeword 8 (flit 7) is descrambled from wrong bits: both fail the CRC
    assert r.replay_from == [6]
    assert (r.replays, r.crc_dropped, r.fec_dropped, r.fwd["miscorrected"]) == (1, 2, 0, 1)
    _clean(r)


def test_lost_nak_recovers_by_timer():
    p = fl.LinkParams(framing="aligned", cw_per_flit=1)
    good = fl.run(100, p, planted={7: "uncorrectable"})
    assert good.timeouts == 0
    # the reverse flit that would carry the NAK: lose every reverse codeword for a while
    planted_rev = {c: "uncorrectable" for c in range(8, 16)}
    r = fl.run(100, p, planted={7: "uncorrectable"}, planted_rev=planted_rev)
    assert r.timeouts >= 1 and r.rev_lost >= 1
    _clean(r)


def test_binomial_tail_matches_a_direct_sum():
    for ber in (1e-5, 1e-4, 2.4e-4, 1e-3):
        ps = 1 - (1 - ber) ** 10
        direct = sum(math.comb(544, k) * ps ** k * (1 - ps) ** (544 - k)
                     for k in range(16, 545))
        assert fl.symbol_error_prob(ber) == pytest.approx(ps, rel=1e-12)
        assert fl.binomial_tail(544, ps, 15) == pytest.approx(direct, rel=1e-9)


def test_over_t_count_follows_the_binomial_tail():
    # at BER 3e-3 the mean is 16 symbol errors per codeword: about half are over t
    ch = fl.Channel(3e-3, 0, np.random.default_rng(5))
    ch.ensure(300)
    tail = fl.binomial_tail(544, fl.symbol_error_prob(3e-3), 15)
    sd = math.sqrt(ch.codewords * tail * (1 - tail))
    assert abs(ch.over_t - ch.codewords * tail) < 4 * sd, "seed 5"
    # bounded-distance decoding: over t is uncorrectable unless miscorrected
    assert ch.uncorrectable + ch.miscorrected == ch.over_t


def test_decoding_the_error_pattern_alone_equals_decoding_the_codeword():
    rng = np.random.default_rng(11)
    msg = rng.integers(0, 1024, size=(6, 514))
    cw = fec.encode(msg)
    err = np.zeros_like(cw)
    for i, n in enumerate((1, 5, 15, 16, 20, 30)):
        pos = rng.choice(544, n, replace=False)
        err[i, pos] = rng.integers(1, 1024, n)
    a = fec.decode_batch(cw ^ err)
    b = fec.decode_batch(err)
    assert (a.ok == b.ok).all() and (a.n_errors == b.n_errors).all()
    assert ((a.codewords ^ cw) == b.codewords).all()


@pytest.mark.parametrize("burst", [0, 160])
def test_exactly_once_at_ber_1e3(burst):
    seed = 4
    p = fl.LinkParams(framing="aligned", cw_per_flit=1)
    r = fl.run(300 if burst else 120, p, ber=1e-3, burst_len=burst, seed=seed)
    _clean(r)
    assert r.flits == (300 if burst else 120), f"seed {seed}"
    assert r.fwd["raw_bit_errors"] > 0
    if burst:
        assert r.replays >= 1, f"seed {seed}: the run should see replays"


def test_exactly_once_checker_catches_a_too_small_sequence_space(monkeypatch):
    # planted fault: 2-bit sequence numbers with a window of 8 flits wrap inside the window;
    # after a replay the receiver takes a wrong flit, and the content check must see it
    monkeypatch.setattr(fl, "SEQ_BITS", 2)
    p = fl.LinkParams(framing="aligned", cw_per_flit=1, replay_depth=16, rtt_codewords=10)
    r = fl.run(100, p, planted={7: "uncorrectable", 30: "uncorrectable"})
    assert r.duplicated + r.corrupted + r.lost > 0


@pytest.mark.parametrize("kw, name", [
    ({"replay_depth": 6}, "replay_depth"), ({"tl_per_dl": 0}, "tl_per_dl"),
    ({"tl_per_dl": 33}, "tl_per_dl"), ({"framing": "interleaved"}, "framing"),
    ({"start_every": 0}, "start_every"), ({"cw_per_flit": 9}, "cw_per_flit"),
    ({"rtt_codewords": -1.0}, "rtt_codewords"), ({"n_lanes": 3}, "n_lanes"),
    ({"am_period": 1}, "am_period"), ({"replay_timeout": -5}, "replay_timeout"),
])
def test_bad_params_name_the_value(kw, name):
    with pytest.raises(ValueError, match=name):
        fl.LinkParams(**kw)


def test_bad_run_arguments_name_the_value():
    with pytest.raises(ValueError, match="flits"):
        fl.run(0)
    with pytest.raises(ValueError, match="ber"):
        fl.run(10, ber=-1e-3)
    with pytest.raises(ValueError, match="burst_len"):
        fl.run(10, ber=1e-3, burst_len=-2)
    with pytest.raises(ValueError, match="planted"):
        fl.run(10, planted={3: "garbled"})
    with pytest.raises(TypeError, match="replay_depth"):
        fl.LinkParams(replay_depth=8.0)
