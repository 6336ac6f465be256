"""Amaranth-simulator driver for the reduction unit (shared by tests/test_reduce_unit.py and
bench/reduce_unit.py): feeds a :class:`~tb.reduce.traffic.Traffic` with optional random idle
and backpressure and returns the results, the counters and per-beat cycle numbers."""

from __future__ import annotations

from amaranth.sim import Simulator

from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender
from fusionfabric.tb.reduce.traffic import result_fields

__all__ = ["simulate"]


def simulate(dut, traffic, *, idle=0.0, backpressure=0.0, seed=0, max_cycles=20_000,
             n_results=None, reuse=False):
    """Run ``traffic`` through ``dut``; returns (results by key, counters, stats).

    The contributions go through a :class:`~fusionfabric.tb.common.amaranth_stream.StreamSender`
    (idle from ``[seed, 0]``), the results through a
    :class:`~fusionfabric.tb.common.amaranth_stream.StreamReceiver` (backpressure from
    ``[seed, 1]``); failures name ``seed``. ``stats["accept_cycles"]`` and
    ``stats["result_cycles"]`` count clock edges from the start of the run, the beat's
    edge included. ``n_results`` results are awaited (default: one per expected key);
    with ``reuse`` a (group, chunk) may give several results, listed in arrival order.
    """
    got = {}
    stats = {"accept_cycles": [], "result_cycles": []}
    n_cfg = len(traffic.configs)

    def accepted(ctx, _word):
        stats["accept_cycles"].append(n_cfg + tx.cycles)

    def result(ctx, word):
        f = result_fields(dut.n_ports, dut.data_width, word)
        key = (f["dest"], f["chunk"])
        if reuse:
            got.setdefault(key, []).append(f)
        else:
            assert key not in got, f"second result for {key} (seed {seed})"
            got[key] = f
        stats["result_cycles"].append(rx.cycles[-1] + 1)

    tx = StreamSender(dut.i_contrib, traffic.flits, seed=[seed, 0], idle=idle,
                      on_beat=accepted)
    tx.seed = seed
    rx = StreamReceiver(dut.o_result, n_results or len(traffic.expected), seed=[seed, 1],
                        backpressure=backpressure, max_cycles=max_cycles, on_beat=result)
    rx.seed = seed
    done = {"src": False}

    async def source(ctx):
        for w in traffic.configs:
            ctx.set(dut.i_config.valid, 1)
            ctx.set(dut.i_config.payload.as_value(), w)
            await ctx.tick()
        ctx.set(dut.i_config.valid, 0)
        await tx.run(ctx)
        done["src"] = True

    async def sink(ctx):
        await rx.run(ctx)
        quiet = 0
        while quiet < 8 or not done["src"]:     # nothing more may come
            _, _, valid = await ctx.tick().sample(dut.o_result.valid)
            assert not valid, f"extra result (seed {seed})"
            quiet += 1
        for name in ("o_contributions", "o_results", "o_duplicate", "o_nonmember",
                     "o_invalid", "o_full_cycles", "o_config_drops"):
            stats[name] = ctx.get(getattr(dut, name))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return got, stats
