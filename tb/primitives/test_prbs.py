"""cocotb tests of the ``prbs-gen`` and ``prbs-check`` blocks against fusionfabric.sim.prbs.

The runner names the block in ``FF_BLOCK``. Generator: the words taken under random
backpressure equal the model's. Checker: a clean preamble locks it, then random single-bit
and burst errors are injected; after every word the lock flag and the error counter equal
the model's, and at the end the counter equals the number of flipped bits exactly.
Test arguments: ``words``.
"""

import os

import cocotb

from fusionfabric.sim import prbs as model
from fusionfabric.sim.scrambler import bits_to_words, words_to_bits
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

sample_order = cover_point("prbs.order", bins=[7, 15, 23, 31])
sample_width = cover_point("prbs.data_width", bins=[1, 8, 32, 64, 66, 128])
sample_word_errors = cover_point("prbs.errors_per_word", bins=["0", "1", "2", "3+"],
                                 xf=lambda e: str(e) if e < 3 else "3+")
sample_burst = cover_point("prbs.burst_length", bins=[1, 2, 3])


@cocotb.test()
async def test_prbs(dut):
    tb = TB(dut, stall_cycles=2000)
    order = int(tb.params["order"])
    width = int(tb.params["data_width"])
    sample_order(order)
    sample_width(width)
    n = int(tb.args.get("words", max(64, 4000 // width)))
    if os.environ.get("FF_BLOCK") == "prbs-gen":
        await run_generator(tb, order, width, n)
    else:
        await run_checker(tb, order, width, n)
    export_coverage()


async def run_generator(tb, order, width, n):
    snk = StreamSink(tb.dut, "o_data", tb.clk, tb.rng, backpressure=0.4, watchdog=tb.watchdog)
    sb = InOrderScoreboard("prbs-gen", tb.seed, watchdog=tb.watchdog)
    want, _ = model.prbs_words(order, width, n)
    sb.expect_many(want)
    snk.on_beat.append(lambda w, c: sb.observe(w) if sb.pending else None)
    await tb.reset()
    tb.start_watchdog()
    await snk.wait_count(n)
    sb.check_empty()


async def run_checker(tb, order, width, n):
    dut = tb.dut
    chk = model.PrbsChecker(order, width)
    pre = chk.lock_words + -(-order // width) + 2  # history fill + clean run (documented)
    rng = tb.rng
    start = int(rng.integers(1, 1 << order))
    words, _ = model.prbs_words(order, width, pre + n, start)
    total = (pre + n) * width
    mask = words_to_bits([0] * (pre + n), width)
    # about one flipped bit per 40: single bits and bursts of 2-3, all after the preamble
    for p in rng.choice(range(pre * width, total), size=max(1, total // 80), replace=False):
        burst = int(rng.integers(1, 4))
        sample_burst(burst)
        mask[p:p + burst] = 1
    flips = int(mask.sum())
    rx = bits_to_words(words_to_bits(words, width) ^ mask, width)
    expected = []
    for w in rx:
        counted, locked = chk.step(w)
        sample_word_errors(counted)
        expected.append((int(locked), chk.errors))
    sb = InOrderScoreboard("prbs-check", tb.seed, watchdog=tb.watchdog,
                           fmt=lambda x: f"(locked={x[0]}, errors={x[1]})")
    sb.expect_many(expected)
    src = StreamSource(dut, "i_data", tb.clk, rng, idle=0.3, watchdog=tb.watchdog)
    # Outputs are registered: at the falling edge after a word's handshake they show it.
    src.on_send.append(lambda w, c: sb.observe((to_int(dut.o_locked.value),
                                                to_int(dut.o_errors.value))))
    await tb.reset()
    tb.start_watchdog()
    src.send_many(rx)
    await src.wait_idle()
    await tb.cycles(3)
    sb.check_empty()
    got = to_int(dut.o_errors.value)
    assert got == flips, f"error counter {got} != {flips} flipped bits (seed {tb.seed})"
    assert to_int(dut.o_locked.value) == 1
