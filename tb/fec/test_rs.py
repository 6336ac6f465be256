"""cocotb test of ``rs-decoder`` against sim.fec.decode.

Random codewords from ``sim.fec.encode`` with planted symbol errors (counts cycle through
the test argument ``errors``, default 0, 1, 15, 16, 30, plus bursts across beat
boundaries), fed with random idle cycles on the input (``idle``) and random backpressure
on the output (``backpressure``). Every output codeword is checked against the model:
symbols, error strobes, ``n_corrected`` and the flags on the last beat; the counters at
the end. Test arguments: ``codewords``, ``errors``, ``idle``, ``backpressure``.
"""

import cocotb
import numpy as np

from fusionfabric.rtl.fec.layouts import dec_out_fields, in_fields
from fusionfabric.sim import fec as model
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

N, K, SB = model.N, model.K, model.M


def _pack_beats(cw, P, fin):
    return [fin.pack(data=sum(int(cw[b * P + k]) << (SB * k) for k in range(P)),
                     first=int(b == 0)) for b in range(N // P)]


def _errors(rng, count, burst):
    """``count`` error positions: random, or (``burst``) one contiguous run at a random
    start, so it crosses symbol and beat boundaries."""
    if burst:
        start = int(rng.integers(0, N - count + 1))
        return np.arange(start, start + count)
    return rng.choice(N, count, replace=False)


@cocotb.test()
async def test_decode_against_model(dut):
    tb = TB(dut, stall_cycles=2000)
    P = int(tb.params.get("P", 8))
    bypass_corr = bool(tb.params.get("bypass_correction", False))
    bypass_ind = bool(tb.params.get("bypass_indication", False))
    fin, fout = in_fields(P), dec_out_fields(P)
    rng = tb.rng
    n_cw = int(tb.args.get("codewords", 10))
    counts = list(tb.args.get("errors", [0, 1, 15, 16, 30]))
    src = StreamSource(dut, "i_data", tb.clk, rng, idle=float(tb.args.get("idle", 0.0)),
                       watchdog=tb.watchdog)
    snk = StreamSink(dut, "o_data", tb.clk, rng,
                     backpressure=float(tb.args.get("backpressure", 0.0)),
                     watchdog=tb.watchdog)
    await tb.reset()
    tb.start_watchdog()
    msgs = rng.integers(0, 1 << SB, (n_cw, K))
    sent = []
    for i, cw in enumerate(model.encode(msgs)):
        count = counts[i % len(counts)]
        burst = (i // len(counts)) % 2 == 1
        r = cw.copy()
        pos = _errors(rng, count, burst)
        r[pos] ^= rng.integers(1, 1 << SB, len(pos))
        sent.append(r)
        src.send_many(_pack_beats(r, P, fin))
    B = N // P
    await snk.wait_count(n_cw * B)
    await tb.cycles(3)
    beats = [fout.unpack(w) for w in snk.queue]
    totals = [0, 0, 0, 0]
    for i, r in enumerate(sent):
        got = beats[i * B:(i + 1) * B]
        where = f"seed {tb.seed} codeword {i} ({counts[i % len(counts)]} errors)"
        assert [b["first"] for b in got] == [1] + [0] * (B - 1), where
        assert [b["last"] for b in got] == [0] * (B - 1) + [1], where
        ref = model.decode(r)
        if bypass_corr:
            unc, want, n_fix = bool(model.syndromes(r).any()), r, 0
        else:
            unc, want, n_fix = not ref.ok, ref.codeword, ref.n_errors
        assert got[-1]["uncorrectable"] == int(unc and not bypass_ind), where
        totals[0] += 1
        totals[3] += unc
        if unc:
            assert got[-1]["n_corrected"] == 0, where
            continue
        data = np.array([(b["data"] >> (SB * k)) & 0x3FF for b in got for k in range(P)])
        assert np.array_equal(data, want), \
            f"{where}: symbols differ at {np.flatnonzero(data != want)[:8]}"
        strobe = np.array([(b["error"] >> k) & 1 for b in got for k in range(P)])
        assert np.array_equal(np.flatnonzero(strobe), np.flatnonzero(want != r)), where
        assert got[-1]["n_corrected"] == n_fix, where
        assert got[-1]["corrected"] == int(n_fix > 0), where
        totals[1] += n_fix > 0
        totals[2] += n_fix
    counters = [to_int(getattr(dut, n).value) for n in
                ("o_codewords", "o_corrected_codewords", "o_corrected_symbols",
                 "o_uncorrectable")]
    assert counters == totals, f"seed {tb.seed}: counters {counters}, model {totals}"
    assert len(snk.queue) == n_cw * B, f"seed {tb.seed}: extra output beats"
