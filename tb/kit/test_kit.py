"""cocotb self-test of fusionfabric.tb.common on a tiny incrementing stream stage (tests/kit_dut.py)."""

import cocotb

from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.env import random_words
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource
from fusionfabric.tb.common.tb import TB

sample_low_bits = cover_point("kit.word_low_bits", bins=list(range(4)), xf=lambda w: w & 3)


@cocotb.test()
async def test_increment(dut):
    tb = TB(dut, stall_cycles=int(TB_ARGS().get("stall_cycles", 500)))
    n = int(tb.args.get("count", 300))
    width = int(tb.params["width"])
    mask = (1 << width) - 1
    src = StreamSource(dut, "i_data", tb.clk, tb.rng, idle=0.3, watchdog=tb.watchdog)
    snk = StreamSink(dut, "o_data", tb.clk, tb.rng, backpressure=0.3, watchdog=tb.watchdog)
    sb = InOrderScoreboard("kit", tb.seed)

    def on_beat(word, cycle):
        sample_low_bits(word)
        sb.observe(word)

    snk.on_beat.append(on_beat)
    tb.watchdog.report = lambda: f"kit stall report: {sb.matched} of {n} matched"
    await tb.reset()
    tb.start_watchdog()
    words = random_words(tb.rng, width, n)
    sb.expect_many([(w + 1) & mask for w in words])
    src.send_many(words)
    await src.wait_idle()
    await snk.wait_count(n)
    await tb.cycles(5)
    sb.check_empty()
    export_coverage()
    dut._log.info("kit: %d words matched, seed %d", sb.matched, tb.seed)


def TB_ARGS():
    from fusionfabric.tb.common.env import tb_args
    return tb_args()
