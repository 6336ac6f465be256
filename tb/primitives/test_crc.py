"""cocotb tests of the ``crc`` block against sim.crc (and zlib for CRC-32).

Frames of random length (1 byte to several beats, partial and full last beats), the
catalogue check message, and codewords (a message followed by its own CRC, which must
raise ``match``), with random idle on the input and backpressure on the result.
Test arguments: ``frames``.
"""

import zlib

import cocotb

from fusionfabric.formats import primitives as fmt
from fusionfabric.sim import crc as model
from fusionfabric.tb.common.coverage import cover_cross, cover_point, export_coverage
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource
from fusionfabric.tb.common.tb import TB

sample_width = cover_point("crc.data_width", bins=[8, 16, 32, 64, 128, 256, 512])
sample_alg = cover_point("crc.algorithm", bins=list(fmt.ALGORITHMS))
sample_beats = cover_point("crc.frame_beats", bins=["1", "2", "3-4", "5+"],
                           xf=lambda n: "1" if n == 1 else "2" if n == 2 else
                           "3-4" if n <= 4 else "5+")
sample_tail = cover_point("crc.last_beat", bins=["full", "partial"])
sample_flags = cover_point("crc.first_last", bins=["first+last", "first", "middle", "last"])
sample_match = cover_point("crc.match", bins=[0, 1])
sample_cross = cover_cross("crc.beats_x_tail", ["crc.frame_beats", "crc.last_beat"])


def expected_match(msg: bytes, alg) -> int:
    """1 if ``msg`` ends with the CRC of what precedes it (sent LSB first when reflected)."""
    k = alg.width // 8
    if len(msg) <= k:
        return 0
    order = "little" if alg.refout else "big"
    return int(model.crc_table(msg[:-k], alg) == int.from_bytes(msg[-k:], order))


@cocotb.test()
async def test_frames_match_model(dut):
    tb = TB(dut, stall_cycles=3000)
    alg = fmt.get_algorithm(tb.params["algorithm"])
    width = int(tb.params["data_width"])
    nb = width // 8
    fin = fmt.in_fields(width)
    fout = fmt.out_fields(alg.width)
    sample_width(width)
    sample_alg(alg.name)
    src = StreamSource(dut, "i_data", tb.clk, tb.rng, idle=0.3, watchdog=tb.watchdog)
    snk = StreamSink(dut, "o_crc", tb.clk, tb.rng, backpressure=0.3, watchdog=tb.watchdog)
    sb = InOrderScoreboard("crc", tb.seed, watchdog=tb.watchdog,
                           fmt=lambda x: f"(crc={x[0]:#x}, match={x[1]})")

    def on_beat(word, cycle):
        f = fout.unpack(word)
        sample_match(f["match"])
        sb.observe((f["crc"], f["match"]))

    snk.on_beat.append(on_beat)
    await tb.reset()
    tb.start_watchdog()
    rng = tb.rng
    messages = [b"123456789"]
    for _ in range(int(tb.args.get("frames", 60))):
        kind = rng.random()
        n = int(rng.integers(1, 5 * nb + 3))
        msg = rng.bytes(n)
        if kind < 0.25:  # a codeword: the message followed by its own CRC
            order = "little" if alg.refout else "big"
            msg = msg + model.crc_table(msg, alg).to_bytes(alg.width // 8, order)
        messages.append(msg)
    for msg in messages:
        want = model.crc_table(msg, alg)
        if alg.name == "crc32":
            assert want == zlib.crc32(msg)
        sb.expect((want, expected_match(msg, alg)))
        beats = model.frame_beats(msg, width)
        sample_beats(len(beats))
        tail = "full" if len(msg) % nb == 0 else "partial"
        sample_tail(tail)
        sample_cross("1" if len(beats) == 1 else "2" if len(beats) == 2 else
                     "3-4" if len(beats) <= 4 else "5+", tail)
        for b in beats:
            f = fin.unpack(b)
            sample_flags({(1, 1): "first+last", (1, 0): "first", (0, 0): "middle",
                          (0, 1): "last"}[(f["first"], f["last"])])
        src.send_many(beats)
    assert sb.expected[0][0] == alg.check  # "123456789" gives the catalogue check value
    await src.wait_idle()
    await snk.wait_count(len(messages))
    await tb.cycles(5)
    sb.check_empty()
    assert int(dut.o_aborted.value.to_unsigned()) == 0
    export_coverage()
