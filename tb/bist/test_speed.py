"""The two reference tests of bench/bist_speed.py (not part of the regression).

``test_wait_only`` (on the BIST harness): configure, enable with no budget, one ``Timer``
of ``cycles`` cycles, read the checker counters: the cocotb floor, what the simulator
costs with cocotb attached but idle.

``test_python_scoreboard`` (on the bare switch, the same parameters as the harness's
switch): the conventional per-cycle-Python test of the same traffic: one
:class:`StreamSource` per input fed with :class:`fusionfabric.sim.bist.TrafficGenModel` packets (idle
1 - load/256), one :class:`StreamSink` per output (backpressure stall/256), a
:class:`KeyedScoreboard` per (source, destination).

Both write ``{"cycles", "wall_s", "flits"}`` to ``test_args["report"]``.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, Timer
from cocotb.utils import get_sim_time

from fusionfabric.sim.bist import TrafficGenModel
from fusionfabric.formats.switch import switch_flit
from fusionfabric.tb.common.env import make_rng
from fusionfabric.tb.common.scoreboard import KeyedScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

PERIOD_NS = 10


def _report(args, **values):
    if args.get("report"):
        with open(args["report"], "w") as f:
            json.dump(values, f)


@cocotb.test()
async def test_wait_only(dut):
    tb = TB(dut)
    n = int(tb.params["n_ports"])
    a = tb.args
    cycles = int(a.get("cycles", 100_000))
    await FallingEdge(tb.clk)
    dut.i_enable.value = 0
    dut.i_load.value = int(a.get("load", 200))
    dut.i_stall.value = int(a.get("stall", 40))
    dut.i_budget.value = 0
    await tb.reset()
    await FallingEdge(tb.clk)
    wall0 = time.perf_counter()
    dut.i_enable.value = 1
    await Timer(cycles * PERIOD_NS, unit="ns")
    await ReadOnly()
    wall = time.perf_counter() - wall0
    flits = sum(to_int(getattr(dut, f"o_chk_flits__{d}").value) for d in range(n))
    errors = sum(to_int(getattr(dut, f"o_{k}__{d}").value) for d in range(n)
                 for k in ("seq_errors", "data_errors", "framing_errors"))
    assert errors == 0, f"{errors} BIST errors (seed {tb.seed})"
    assert flits > cycles // 4, f"only {flits} flits in {cycles} cycles"
    _report(a, cycles=cycles, wall_s=wall, flits=flits)


@cocotb.test()
async def test_python_scoreboard(dut):
    tb = TB(dut, stall_cycles=5000)
    p = tb.params
    n, width = int(p["n_ports"]), int(p["data_width"])
    a = tb.args
    budget, max_len = int(a.get("budget", 100)), int(a.get("max_len", 4))
    idle = 1.0 - int(a.get("load", 200)) / 256
    backpressure = int(a.get("stall", 40)) / 256
    lay = switch_flit(width)
    sb = KeyedScoreboard("switch", tb.seed, watchdog=tb.watchdog)
    srcs = [StreamSource(dut, f"i_port__{s}", tb.clk, make_rng(1 + s), idle=idle,
                         watchdog=tb.watchdog) for s in range(n)]
    sinks = [StreamSink(dut, f"o_port__{d}", tb.clk, make_rng(100 + d),
                        backpressure=backpressure, watchdog=tb.watchdog, keep=False)
             for d in range(n)]
    total, per_dest, queued = 0, [0] * n, []
    for s in range(n):
        words = TrafficGenModel(width, n, s, max_len, seed=int(a.get("seed", 1))).flits(budget)
        for w in words:
            f = lay.unpack(w)
            sb.expect((s, f["dest"]), w)
            per_dest[f["dest"]] += 1
        queued.append(words)
        total += len(words)

    def on_beat(word, cycle):
        f = lay.unpack(word)
        sb.observe((f["src"], f["dest"]), word)

    for snk in sinks:
        snk.on_beat.append(on_beat)
    dut.i_config__valid.value = 0
    await tb.reset()
    tb.start_watchdog()
    for src, words in zip(srcs, queued):
        src.send_many(words)
    t0, wall0 = get_sim_time("ns"), time.perf_counter()
    for d, snk in enumerate(sinks):
        await snk.wait_count(per_dest[d])
    wall = time.perf_counter() - wall0
    cycles = int((get_sim_time("ns") - t0) // PERIOD_NS)
    sb.check_empty()
    _report(a, cycles=cycles, wall_s=wall, flits=total)
