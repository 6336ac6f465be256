"""cocotb side of bench/sim_speed.py: each test times its own main loop (wall clock, build and
start-up excluded) and writes ``{"cycles": n, "seconds": s}`` to ``args["out"]``.

Every variant also checks its result, so the speed is that of a design doing the right thing:
the scrambler output is scoreboarded against :func:`fusionfabric.sim.scrambler.scramble`, each CRC against
:func:`fusionfabric.sim.crc.crc_table`, and the PRBS checker must count exactly the injected errors.
"""

import json
import time

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer

from fusionfabric.tb.common.tb import TB
from fusionfabric.tb.common.env import random_words
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int


def _save(tb, cycles, seconds, **extra):
    with open(tb.args["out"], "w") as f:
        json.dump({"cycles": int(cycles), "seconds": seconds, **extra}, f)


@cocotb.test()
async def scrambler_stream(dut):
    """Per-cycle Python: stream source, stream sink and an in-order scoreboard."""
    from fusionfabric.sim.scrambler import scramble

    tb = TB(dut, stall_cycles=1000)
    width = tb.params["data_width"]
    n = int(tb.args["words"])
    words = random_words(tb.rng, width, n)
    sb = InOrderScoreboard("scrambler", seed=tb.seed)
    sb.expect_many(scramble(words, width, tb.params["init"], tb.params["polynomial"])[0])
    src = StreamSource(dut, "i_data", tb.clk, tb.rng)
    snk = StreamSink(dut, "o_data", tb.clk, tb.rng, keep=False)
    snk.on_beat.append(lambda w, c: sb.observe(w))
    await tb.reset()
    t0, c0 = time.perf_counter(), snk.cycle
    src.send_many(words)
    await snk.wait_count(n)
    dt, cycles = time.perf_counter() - t0, snk.cycle - c0
    sb.check_empty()
    _save(tb, cycles, dt)


@cocotb.test()
async def crc_stream(dut):
    """Per-cycle Python: framed beats in, one CRC per frame out, checked against the model."""
    import numpy as np

    from fusionfabric.formats.primitives import out_fields
    from fusionfabric.sim.crc import crc_table, frame_beats

    tb = TB(dut, stall_cycles=1000)
    width, alg = tb.params["data_width"], tb.params["algorithm"]
    n_frames, frame_bytes = int(tb.args["frames"]), int(tb.args["frame_bytes"])
    fout = out_fields(32 if alg.startswith("crc32") else 16)
    sb = InOrderScoreboard("crc", seed=tb.seed)
    src = StreamSource(dut, "i_data", tb.clk, tb.rng)
    snk = StreamSink(dut, "o_crc", tb.clk, tb.rng, keep=False)
    snk.on_beat.append(lambda w, c: sb.observe(fout.unpack(w)["crc"]))
    await tb.reset()
    t0, c0 = time.perf_counter(), snk.cycle
    for _ in range(n_frames):
        msg = bytes(tb.rng.integers(0, 256, frame_bytes, dtype=np.uint8))
        sb.expect(crc_table(msg, alg))
        src.send_many(frame_beats(msg, width))
    await snk.wait_count(n_frames)
    dt, cycles = time.perf_counter() - t0, snk.cycle - c0
    sb.check_empty()
    _save(tb, cycles, dt)


async def _prbs_common(dut):
    tb = TB(dut, stall_cycles=10**9)
    dut.i_inject.value = 0
    await tb.reset()
    await ClockCycles(tb.clk, 8)  # lock takes ceil(64 / data_width) + 2 words
    await FallingEdge(tb.clk)
    assert int(dut.o_locked.value) == 1, "PRBS checker did not lock"
    return tb


@cocotb.test()
async def prbs_free_running(dut):
    """No per-cycle Python: inject a few errors, let the pair run, read the counters.

    The clock is cocotb's (toggled by the simulator through the GPI, no Python per edge);
    the test sleeps on one Timer per quarter of the run.
    """
    tb = await _prbs_common(dut)
    n = int(tb.args["cycles"])
    w0 = to_int(dut.o_words.value)
    injected = 0
    t0 = time.perf_counter()
    for _ in range(4):  # four single-cycle injections, spread over the run
        dut.i_inject.value = 1
        await FallingEdge(tb.clk)
        dut.i_inject.value = 0
        injected += 1
        # Timer, not ClockCycles: ClockCycles wakes Python at every edge
        await Timer(10 * (n // 4), unit="ns")
        await FallingEdge(tb.clk)
    dt = time.perf_counter() - t0
    await ReadOnly()
    cycles = to_int(dut.o_words.value) - w0
    assert to_int(dut.o_errors.value) == injected, (to_int(dut.o_errors.value), injected)
    assert int(dut.o_locked.value) == 1
    await RisingEdge(tb.clk)
    _save(tb, cycles, dt)


@cocotb.test()
async def prbs_per_cycle(dut):
    """The same pair with a Python coroutine that drives and checks every cycle."""
    tb = await _prbs_common(dut)
    n = int(tb.args["cycles"])
    injected, w0 = 0, to_int(dut.o_words.value)
    inject = tb.rng.random(n) < 1e-3
    t0 = time.perf_counter()
    for i in range(n):
        dut.i_inject.value = int(inject[i])
        await ReadOnly()
        # the checker's count lags the link by one registered cycle
        errs = to_int(dut.o_errors.value)
        assert errs == injected, (i, errs, injected)
        injected += int(inject[i])
        await FallingEdge(tb.clk)
    dut.i_inject.value = 0
    await FallingEdge(tb.clk)
    dt = time.perf_counter() - t0
    await ReadOnly()
    assert to_int(dut.o_errors.value) == injected
    cycles = to_int(dut.o_words.value) - w0
    await RisingEdge(tb.clk)
    _save(tb, cycles, dt)
