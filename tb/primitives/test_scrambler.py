"""cocotb tests of the ``scrambler`` and ``descrambler`` blocks against fusionfabric.sim.scrambler.

The runner names the block in ``FF_BLOCK``; the same module tests both. Test arguments:
``words`` (stream length), ``trials`` (resync trials, descrambler only).
"""

import os

import cocotb
import numpy as np

from fusionfabric.sim import scrambler as model
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.env import random_words
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource
from fusionfabric.tb.common.tb import TB

sample_width = cover_point("scrambler.data_width", bins=[1, 8, 32, 64, 66, 128])
sample_kind = cover_point("scrambler.kind", bins=["scrambler", "descrambler"])
sample_gap = cover_point("scrambler.cycles_between_beats", bins=["0", "1", "2+"],
                         xf=lambda g: "0" if g <= 1 else ("1" if g == 2 else "2+"))
sample_resync = cover_point("scrambler.resync_after_garbage_words",
                            bins=["1", "2-3", "4+"],
                            xf=lambda n: "1" if n == 1 else ("2-3" if n <= 3 else "4+"))


class ScramblerTB(TB):
    def __init__(self, dut, idle=0.3, backpressure=0.3):
        super().__init__(dut, stall_cycles=2000)
        self.kind = os.environ.get("FF_BLOCK", "scrambler")
        self.width = int(self.params["data_width"])
        self.poly = int(self.params["polynomial"])
        self.init = int(self.params["init"])
        self.src = StreamSource(dut, "i_data", self.clk, self.rng, idle=idle,
                                watchdog=self.watchdog)
        self.snk = StreamSink(dut, "o_data", self.clk, self.rng, backpressure=backpressure,
                              watchdog=self.watchdog)
        sample_width(self.width)
        sample_kind(self.kind)
        last = [None]

        def on_beat(word, cycle):
            if last[0] is not None:
                sample_gap(cycle - last[0])
            last[0] = cycle

        self.snk.on_beat.append(on_beat)


@cocotb.test()
async def test_stream_matches_model(dut):
    """Random words with idle and backpressure; every output word equals the model's."""
    tb = ScramblerTB(dut)
    sb = InOrderScoreboard(f"{tb.kind}", tb.seed, watchdog=tb.watchdog)
    tb.snk.on_beat.append(sb.observe)
    await tb.reset()
    tb.start_watchdog()
    n = int(tb.args.get("words", 300))
    words = random_words(tb.rng, tb.width, n)
    fn = model.descramble if tb.kind == "descrambler" else model.scramble
    want, _ = fn(words, tb.width, tb.init, tb.poly)
    sb.expect_many(want)
    tb.src.send_many(words)
    await tb.src.wait_idle()
    await tb.snk.wait_count(n)
    await tb.cycles(5)
    sb.check_empty()
    export_coverage()


@cocotb.test()
async def test_descrambler_resyncs_within_state_width(dut):
    """Garbage words leave the descrambler in an arbitrary state; a scrambled stream from a
    transmitter in another random state then descrambles to the plain data from its 58th
    bit on, in every trial (the scrambler block skips this test)."""
    tb = ScramblerTB(dut)
    if tb.kind != "descrambler":
        export_coverage()
        return
    await tb.reset()
    tb.start_watchdog()
    n_state = model.poly_taps(tb.poly)[0]
    rng = tb.rng
    trials = int(tb.args.get("trials", 40))
    sent_plain = []  # (plain words or None for garbage)
    for _ in range(trials):
        n_garbage = int(rng.integers(1, 6))
        sample_resync(n_garbage)
        garbage = random_words(rng, tb.width, n_garbage)
        tx_state = int.from_bytes(rng.bytes(8), "little") & ((1 << n_state) - 1)
        n = -(-(n_state + 64) // tb.width)
        plain = random_words(rng, tb.width, n)
        line, _ = model.scramble(plain, tb.width, tx_state, tb.poly)
        tb.src.send_many(garbage + line)
        sent_plain.append((len(garbage), plain))
    total = sum(g + len(p) for g, p in sent_plain)
    await tb.src.wait_idle()
    await tb.snk.wait_count(total)
    out = list(tb.snk.queue)
    pos = 0
    for k, (g, plain) in enumerate(sent_plain):
        pos += g
        got = model.words_to_bits(out[pos:pos + len(plain)], tb.width)
        want = model.words_to_bits(plain, tb.width)
        bad = np.nonzero(got[n_state:] != want[n_state:])[0]
        assert not len(bad), (f"trial {k}: output differs from the plain data at bit "
                              f"{n_state + int(bad[0])} (>= {n_state}); seed {tb.seed}")
        pos += len(plain)
    export_coverage()
