"""Amaranth-simulator tests of the RS(544,514) encoder and decoder against sim.fec.

Random codewords come from ``sim.fec.encode``; errors are planted at chosen positions and
the decoder's output beats (data, error strobes, flags) and counters are compared with
``sim.fec.decode``. The streams are driven by the shared Amaranth-simulator stream
driver (tb/common/amaranth_stream.py). Every random stream is seeded; a failure names
the seed.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.fec import RsDecoder, RsEncoder
from fusionfabric.rtl.fec.layouts import dec_out_fields, enc_out_fields, in_fields
from fusionfabric.sim import fec as model
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender

N, K, SB = model.N, model.K, model.M


def beats_of(cw, P):
    """The ``544 / P`` input beats of one codeword as ``(data, first)`` integers."""
    out = []
    for b in range(N // P):
        word = 0
        for k in range(P):
            word |= int(cw[b * P + k]) << (SB * k)
        out.append((word, int(b == 0)))
    return out


def symbols_of(word, P):
    return [(word >> (SB * k)) & ((1 << SB) - 1) for k in range(P)]


def run_decoder(dut, words, *, gaps=None, backpressure=None, seed=0):
    """Feed ``words`` (a list of 544-symbol arrays) and collect the output beats.

    The input goes through :class:`StreamSender` with ``gaps[i]`` idle cycles before
    codeword ``i``; the output through :class:`StreamReceiver`, ``ready`` low with
    probability ``backpressure`` (drawn from ``seed``, named in a stall). Returns (beats,
    state): ``state`` holds the first input and output cycles, the counters one cycle
    after the last beat and the cycles where input ready was low while valid.
    """
    P, B = dut.P, N // dut.P
    fin, fout = in_fields(P), dec_out_fields(P)
    feed = [fin.pack(data=d, first=f) for w in words for d, f in beats_of(w, P)]
    idle = [0] * len(feed)
    for i, g in enumerate(gaps or ()):
        idle[i * B] = g
    state = {"first_in": None, "stalls": 0, "counters": None}

    def on_cycle(ctx, valid, ready):
        state["stalls"] += bool(valid and not ready)

    def on_beat(ctx, word):
        if state["first_in"] is None:
            state["first_in"] = tx.cycles - 1

    tx = StreamSender(dut.i_data, feed, seed=seed, idle=idle, on_beat=on_beat,
                      on_cycle=on_cycle)
    rx = StreamReceiver(dut.o_data, len(feed), seed=seed, backpressure=backpressure or 0.0,
                        max_cycles=len(feed) + sum(idle) + 400 + 4 * len(feed))

    async def bench(ctx):
        await rx.run(ctx)
        await ctx.tick()
        state["counters"] = [ctx.get(s) for s in (dut.o_codewords, dut.o_corrected_codewords,
                                                  dut.o_corrected_symbols,
                                                  dut.o_uncorrectable)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run, background=True)
    sim.add_testbench(bench)
    sim.run()
    state["first_out"] = rx.cycles[0]
    return [fout.unpack(w) for w in rx.received], state


def check_decoded(dut, words, beats, seed):
    """Compare the output beats codeword by codeword with ``sim.fec.decode``."""
    P, B = dut.P, N // dut.P
    stats = [0, 0, 0, 0]
    for i, w in enumerate(words):
        ref = model.decode(np.asarray(w))
        got = beats[i * B:(i + 1) * B]
        assert [b["first"] for b in got] == [1] + [0] * (B - 1), f"seed {seed} cw {i}"
        assert [b["last"] for b in got] == [0] * (B - 1) + [1], f"seed {seed} cw {i}"
        last = got[-1]
        flagged = bool(last["uncorrectable"])
        if dut.bypass_correction:
            want_unc = bool(model.syndromes(np.asarray(w)).any())
            want_data, want_n = np.asarray(w), 0
        else:
            want_unc = not ref.ok
            want_data, want_n = ref.codeword, ref.n_errors
        shown_unc = want_unc and not dut.bypass_indication
        assert flagged == shown_unc, f"seed {seed} cw {i}: uncorrectable {flagged}, model {want_unc}"
        stats[0] += 1
        stats[3] += want_unc
        if want_unc:
            assert last["n_corrected"] == 0 and last["corrected"] == 0, f"seed {seed} cw {i}"
            continue
        data = np.array([s for b in got for s in symbols_of(b["data"], P)])
        assert np.array_equal(data, want_data), (
            f"seed {seed} cw {i}: symbols differ at {np.flatnonzero(data != want_data)[:10]}")
        strobe = np.array([(b["error"] >> k) & 1 for b in got for k in range(P)])
        assert np.array_equal(np.flatnonzero(strobe), np.flatnonzero(want_data != np.asarray(w))), \
            f"seed {seed} cw {i}: error strobes"
        assert last["n_corrected"] == want_n, f"seed {seed} cw {i}: n {last['n_corrected']} want {want_n}"
        assert last["corrected"] == int(want_n > 0)
        stats[1] += want_n > 0
        stats[2] += want_n
    return stats


def corrupt(cw, positions, rng):
    r = np.array(cw)
    r[positions] ^= rng.integers(1, 1 << SB, len(positions))
    return r


def random_words(rng, n_errors):
    msgs = rng.integers(0, 1 << SB, (len(n_errors), K))
    cws = model.encode(msgs)
    return [corrupt(cw, rng.choice(N, ne, replace=False), rng) for cw, ne in zip(cws, n_errors)]


@pytest.mark.parametrize("P,pipeline", [(4, False), (4, True),
                                        pytest.param(8, False, marks=pytest.mark.soak)])
def test_decoder_error_counts(P, pipeline):
    """0, 1, 15, 16 and 30 symbol errors back to back at full rate; checks the latency
    formula (544/P + 33, + 35 with ``pipeline``) and that ``ready`` never drops."""
    seed = 100 + P
    rng = np.random.default_rng(seed)
    words = random_words(rng, [0, 1, 15, 16, 30, 7])
    dut = RsDecoder(P, pipeline=pipeline)
    beats, st = run_decoder(dut, words, seed=seed)
    stats = check_decoded(dut, words, beats, seed)
    assert st["stalls"] == 0, f"seed {seed}: input stalled {st['stalls']} cycles"
    assert st["first_out"] - st["first_in"] == dut.latency == N // P + (35 if pipeline else 33)
    assert st["counters"] == stats, f"seed {seed}: counters {st['counters']} model {stats}"


def run_encoder(dut, msgs, *, gap=0, seed=0):
    """Feed each message as a 544-symbol frame (random filler in the parity positions)
    through :class:`StreamSender`, ``gap`` idle cycles between codewords, and take the
    output with :class:`StreamReceiver` (``ready`` high); return the output codewords and
    the stalls (cycles with input valid and ready low) and (first, last) flags."""
    P, B = dut.P, N // dut.P
    fin, fout = in_fields(P), enc_out_fields(P)
    rng = np.random.default_rng(seed)
    feed = []
    for msg in msgs:
        frame = np.concatenate([msg, rng.integers(0, 1 << SB, N - K)])
        feed += [fin.pack(data=d, first=f) for d, f in beats_of(frame, P)]
    idle = [gap if k and k % B == 0 else 0 for k in range(len(feed))]
    info = {"stalls": 0}

    def on_cycle(ctx, valid, ready):
        info["stalls"] += bool(valid and not ready)

    tx = StreamSender(dut.i_data, feed, seed=seed, idle=idle, on_cycle=on_cycle)
    rx = StreamReceiver(dut.o_data, len(feed), seed=seed, max_cycles=len(feed) + sum(idle) + 10)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run, background=True)
    sim.add_testbench(rx.run)
    sim.run()
    beats = [fout.unpack(w) for w in rx.received]
    info["flags"] = [(b["first"], b["last"]) for b in beats]
    flat = np.array([symbols_of(b["data"], P) for b in beats]).reshape(len(msgs), N)
    return flat, info


@pytest.mark.parametrize("P", [pytest.param(4, marks=pytest.mark.soak), 8, 17])
def test_encoder_matches_model(P):
    """Back-to-back codewords, then one after an idle gap: bit-exact with sim.fec.encode,
    no stall, first/last framing."""
    seed = 200 + P
    rng = np.random.default_rng(seed)
    msgs = rng.integers(0, 1 << SB, (3, K))
    dut = RsEncoder(P)
    got, info = run_encoder(dut, msgs, gap=3, seed=seed)
    want = model.encode(msgs)
    assert np.array_equal(got, want), f"seed {seed}: differs at {np.argwhere(got != want)[:5]}"
    assert info["stalls"] == 0
    B = N // P
    assert info["flags"] == ([(1, 0)] + [(0, 0)] * (B - 2) + [(0, 1)]) * len(msgs)


def test_encoder_planted_fault(monkeypatch):
    """An encoder generated from a generator with one wrong coefficient (patched where the
    RTL reads it, formats.fec) is caught by the same comparison with sim.fec.encode (the checker is seen to fail)."""
    seed = 7
    rng = np.random.default_rng(seed)
    msgs = rng.integers(0, 1 << SB, (1, K))
    want = model.encode(msgs)
    from fusionfabric.formats import fec as code
    bad = np.array(code.GENERATOR)
    bad[5] ^= 1
    monkeypatch.setattr(code, "GENERATOR", bad)          # the RTL's source of g(x)
    got, _ = run_encoder(RsEncoder(4), msgs, seed=seed)
    assert np.array_equal(got[:, :K], want[:, :K])       # the message passes unchanged
    assert not np.array_equal(got[:, K:], want[:, K:])   # the wrong parity is seen


@pytest.mark.parametrize("bad", [0, 3, 545, 100])
def test_bad_symbols_per_beat(bad):
    with pytest.raises(ValueError, match=f"P={bad} must divide 544"):
        RsDecoder(bad)
    with pytest.raises(ValueError, match=f"P={bad} must divide 544"):
        RsEncoder(bad)


@pytest.mark.parametrize("pipeline", [False, True])
def test_decoder_parity_bursts_gaps_backpressure(pipeline):
    """Errors only in the parity symbols, bursts across symbol and beat boundaries, idle
    gaps between codewords and random backpressure at the output, P = 4."""
    seed, P = 301, 4
    rng = np.random.default_rng(seed)
    cws = model.encode(rng.integers(0, 1 << SB, (4, K)))
    words = [corrupt(cws[0], rng.choice(np.arange(K, N), 15, replace=False), rng),
             corrupt(cws[1], np.arange(P - 1, P - 1 + 13), rng),      # burst over beats
             corrupt(cws[2], np.arange(K - 3, K + 12), rng),          # message into parity
             corrupt(cws[3], np.arange(2, 18), rng)]                  # 16: uncorrectable
    dut = RsDecoder(P, pipeline=pipeline)
    beats, st = run_decoder(dut, words, gaps=[0, 5, 0, 17], backpressure=0.2, seed=seed)
    stats = check_decoded(dut, words, beats, seed)
    assert st["counters"] == stats, f"seed {seed}: counters {st['counters']} model {stats}"


@pytest.mark.parametrize("P,pipeline", [(4, False), (32, False),
                                        pytest.param(34, True, marks=pytest.mark.soak)])
def test_decoder_first_and_last_beat_errors(P, pipeline):
    """Errors in the first beat of each codeword (the beat of the Chien load) and in the
    last beat, back to back at full rate, against sim.fec.decode; P = 32 has two solvers
    loaded in turn, P = 34 with ``pipeline`` three (soak: 28 s)."""
    seed = 500 + P
    rng = np.random.default_rng(seed)
    cws = model.encode(rng.integers(0, 1 << SB, (4, K)))
    words = [corrupt(cws[0], np.arange(P), rng) if P <= 15 else
             corrupt(cws[0], np.arange(0, P, 3)[:15], rng),
             corrupt(cws[1], [0, P - 1, N - P, N - 1], rng),
             corrupt(cws[2], [1, 2, 300], rng),
             cws[3]]
    dut = RsDecoder(P, pipeline=pipeline)
    assert dut.n_solvers == {4: 1, 32: 2, 34: 3}[P]
    beats, st = run_decoder(dut, words, seed=seed)
    stats = check_decoded(dut, words, beats, seed)
    assert st["stalls"] == 0, f"seed {seed}: input stalled {st['stalls']} cycles"
    assert st["counters"] == stats, f"seed {seed}: counters {st['counters']} model {stats}"
    assert stats[1] == 3 and stats[3] == 0, f"seed {seed}: {stats}"


@pytest.mark.parametrize("flag", ["bypass_correction", "bypass_indication"])
def test_decoder_bypass(flag):
    """Bypass correction: flag only, data unchanged, latency 544/P + 3. Bypass indication:
    corrected, never flagged, the counter still counts."""
    seed, P = 400 + len(flag), 8
    rng = np.random.default_rng(seed)
    words = random_words(rng, [0, 3, 16])
    dut = RsDecoder(P, **{flag: True})
    beats, st = run_decoder(dut, words, seed=seed)
    stats = check_decoded(dut, words, beats, seed)
    assert st["counters"] == stats, f"seed {seed}: counters {st['counters']} model {stats}"
    want = N // P + 3 if flag == "bypass_correction" else N // P + 33
    assert st["first_out"] - st["first_in"] == dut.latency == want
