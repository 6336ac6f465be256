"""cocotb side of bench/switch_throughput.py: sweep the offered load of a TrafficHarness
and write the counters of each point as JSON (path in the test arguments)."""

from __future__ import annotations

import json

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB


@cocotb.test()
async def sweep(dut):
    tb = TB(dut, stall_cycles=10**9)
    a = tb.args
    out = []
    for load in a["loads"]:
        await FallingEdge(tb.clk)
        dut.i_measure.value = 0
        dut.i_load.value = int(round(load * 65536))
        await tb.reset()
        await ClockCycles(tb.clk, a["warmup"])
        await FallingEdge(tb.clk)
        dut.i_measure.value = 1
        await ClockCycles(tb.clk, a["cycles"])
        await FallingEdge(tb.clk)
        dut.i_measure.value = 0
        await ReadOnly()
        r = {k: to_int(getattr(dut, f"o_{k}").value)
             for k in ("offered", "accepted", "delivered", "lat_sum", "lat_max", "overflow")}
        r.update(load=load, cycles=a["cycles"])
        out.append(r)
    with open(a["out"], "w") as f:
        json.dump(out, f)
