"""Counters-only cocotb test of the BIST harness (tb/bist/harness.py): configure, start,
wait, read counters. No Python runs per cycle: the clock is cocotb's C clock and the test
sleeps in long ``Timer`` waits between counter polls.

Test arguments (``test_args``): ``load`` (0..256), ``stall`` (0..255), ``budget`` (packets
per generator), ``poll`` (cycles between polls), ``max_cycles``, ``fault`` (the harness's
planted fault: the expected error counts at checker 0), ``report`` (a JSON file that
receives cycles and wall time, for bench/bist_speed.py). The run ends at the first poll
that finds every generator done and no flit checked since the previous poll.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, Timer

from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB

PERIOD_NS = 10
sample_load = cover_point("bist.load", bins=["low", "mid", "full"],
                          xf=lambda x: "full" if x >= 256 else "mid" if x >= 128 else "low")
sample_stall = cover_point("bist.stall", bins=["none", "some"],
                           xf=lambda x: "none" if x == 0 else "some")

#: fault → expected (seq, data, framing) errors at checker 0 and packets lost there
FAULT_ERRORS = {"none": ((0, 0, 0), 0), "drop": ((1, 0, 0), 1), "flip": ((0, 1, 0), 0),
                "last": ((0, 0, 1), 0)}


def _read(dut, name, *idx):
    h = getattr(dut, name + "".join(f"__{i}" for i in idx))
    return to_int(h.value)


def read_counters(dut, n):
    c = {"gen_packets": [_read(dut, "o_gen_packets", s) for s in range(n)],
         "gen_flits": [_read(dut, "o_gen_flits", s) for s in range(n)],
         "gen_done": to_int(dut.o_gen_done.value)}
    for k in ("chk_packets", "chk_flits", "seq_errors", "data_errors", "framing_errors"):
        c[k] = [_read(dut, "o_" + k, d) for d in range(n)]
    c["next_seq"] = [[_read(dut, "o_gen_next_seq", s, d) for d in range(n)] for s in range(n)]
    c["expected"] = [[_read(dut, "o_chk_expected", d, s) for s in range(n)] for d in range(n)]
    return c


@cocotb.test()
async def test_bist_counters(dut):
    tb = TB(dut)
    n = int(tb.params["n_ports"])
    a = tb.args
    load, stall = int(a.get("load", 200)), int(a.get("stall", 40))
    budget, poll = int(a.get("budget", 200)), int(a.get("poll", 2000))
    max_cycles = int(a.get("max_cycles", 2_000_000))
    fault = tb.params.get("fault", "none")
    sample_load(load)
    sample_stall(stall)

    await FallingEdge(tb.clk)
    dut.i_enable.value = 0
    dut.i_load.value = load
    dut.i_stall.value = stall
    dut.i_budget.value = budget
    await tb.reset()
    await FallingEdge(tb.clk)
    wall0 = time.perf_counter()
    dut.i_enable.value = 1
    cycles, last_flits = 0, -1
    while True:
        await Timer(poll * PERIOD_NS, unit="ns")
        cycles += poll
        await ReadOnly()
        done = to_int(dut.o_gen_done.value) == (1 << n) - 1
        got = sum(_read(dut, "o_chk_flits", d) for d in range(n))
        if done and got == last_flits:       # generators finished, nothing moved: drained
            break
        assert got != last_flits, (
            f"no progress: {got} flits checked, no change in {poll} cycles, "
            f"{cycles} cycles in (seed {tb.seed})")
        assert cycles < max_cycles, f"not finished after {cycles} cycles (seed {tb.seed})"
        last_flits = got
        await FallingEdge(tb.clk)
    wall = time.perf_counter() - wall0
    c = read_counters(dut, n)
    await FallingEdge(tb.clk)

    (want_err, lost), errors = FAULT_ERRORS[fault], {}
    for d in range(n):
        errors[d] = (c["seq_errors"][d], c["data_errors"][d], c["framing_errors"][d])
    log = (f"n={n} load={load} stall={stall} budget={budget} cycles={cycles} "
           f"flits={sum(c['chk_flits'])} errors={errors} seed={tb.seed}")
    dut._log.info(log)
    assert errors[0] == want_err, f"checker 0 errors {errors[0]} != {want_err}: {log}"
    for d in range(1, n):
        assert errors[d] == (0, 0, 0), f"checker {d} errors {errors[d]}: {log}"
    assert c["gen_packets"] == [budget] * n, log
    assert sum(c["chk_packets"]) == n * budget - lost, log
    for s in range(n):
        for d in range(n):
            if fault == "none":
                assert c["expected"][d][s] == c["next_seq"][s][d], (
                    f"source {s} → {d}: checker expects {c['expected'][d][s]}, generator "
                    f"sent {c['next_seq'][s][d]}: {log}")
    if a.get("report"):
        with open(a["report"], "w") as f:
            json.dump({"cycles": cycles, "wall_s": wall, "flits": sum(c["chk_flits"]),
                       "sim": tb.sim, "n_ports": n}, f)
    export_coverage()
