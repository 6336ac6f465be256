"""Amaranth-simulator driver for the reduction unit (shared by tests/test_reduce_unit.py and
bench/reduce_unit.py): feeds a :class:`~tb.reduce.traffic.Traffic` with optional random idle
and backpressure and returns the results, the counters and per-beat cycle numbers."""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from fusionfabric.tb.reduce.traffic import result_fields

__all__ = ["simulate"]


def simulate(dut, traffic, *, idle=0.0, backpressure=0.0, seed=0, max_cycles=20_000):
    """Run ``traffic`` through ``dut``; returns (results by key, counters, stats)."""
    rng = np.random.default_rng(seed)
    got = {}
    stats = {"accept_cycles": [], "result_cycles": []}
    done = {"src": False}

    async def source(ctx):
        for w in traffic.configs:
            ctx.set(dut.i_config.valid, 1)
            ctx.set(dut.i_config.payload.as_value(), w)
            await ctx.tick()
        ctx.set(dut.i_config.valid, 0)
        cycle = len(traffic.configs)
        for w in traffic.flits:
            while idle and rng.random() < idle:
                ctx.set(dut.i_contrib.valid, 0)
                await ctx.tick()
                cycle += 1
            ctx.set(dut.i_contrib.valid, 1)
            ctx.set(dut.i_contrib.payload.as_value(), w)
            while True:
                ready = ctx.get(dut.i_contrib.ready)
                await ctx.tick()
                cycle += 1
                if ready:
                    stats["accept_cycles"].append(cycle)
                    break
                assert cycle < max_cycles, "source stalled"
        ctx.set(dut.i_contrib.valid, 0)
        done["src"] = True

    async def sink(ctx):
        cycle = 0
        while len(got) < len(traffic.expected) or not done["src"]:
            ready = not (backpressure and rng.random() < backpressure)
            ctx.set(dut.o_result.ready, int(ready))
            valid = ctx.get(dut.o_result.valid)
            word = ctx.get(dut.o_result.payload.as_value())
            await ctx.tick()
            cycle += 1
            assert cycle < max_cycles, f"only {len(got)} of {len(traffic.expected)} results"
            if valid and ready:
                f = result_fields(dut.n_ports, dut.data_width, word)
                key = (f["dest"], f["chunk"])
                assert key not in got, f"second result for {key}"
                got[key] = f
                stats["result_cycles"].append(cycle)
        for _ in range(8):       # nothing more may come
            ctx.set(dut.o_result.ready, 1)
            assert not ctx.get(dut.o_result.valid), "extra result"
            await ctx.tick()
        for name in ("o_contributions", "o_results", "o_duplicate", "o_nonmember",
                     "o_invalid", "o_full_cycles", "o_config_drops"):
            stats[name] = ctx.get(getattr(dut, name))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return got, stats
