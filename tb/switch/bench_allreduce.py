"""cocotb side of the all-reduce comparison in bench/switch_throughput.py: run the
in-network and the ring all-reduce on one AllReduceHarness build, write the cycle counts."""

from __future__ import annotations

import json

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB


@cocotb.test()
async def allreduce(dut):
    tb = TB(dut, stall_cycles=10**9)
    out = {}
    for algo, name in ((0, "in_network"), (1, "ring")):
        await FallingEdge(tb.clk)
        dut.i_algo.value = algo
        await tb.reset()
        waited = 0
        while True:
            await ClockCycles(tb.clk, 64)
            waited += 64
            await ReadOnly()
            if to_int(dut.o_done.value) or waited > tb.args["timeout"]:
                break
        out[name] = {k: to_int(getattr(dut, f"o_{k}").value)
                     for k in ("done", "cycles", "bad", "results")}
    with open(tb.args["out"], "w") as f:
        json.dump(out, f)
