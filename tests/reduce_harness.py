"""Amaranth-simulator harnesses for the reduction arithmetic units (used by tests/test_reduce_*).

:func:`run_parallel` puts ``n`` copies of a unit side by side behind wide ports so that one
simulator step checks ``n`` vectors; :func:`run_pipelined` streams one vector set per cycle
through a pipelined unit and realigns the outputs by its documented latency.
"""

from __future__ import annotations

from amaranth import Elaboratable, Module, Signal
from amaranth.sim import Simulator


def _pack(values, width):
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & ((1 << width) - 1)) << (width * i)
    return word


def _unpack(word, width, n):
    return [(word >> (width * i)) & ((1 << width) - 1) for i in range(n)]


class _Parallel(Elaboratable):
    """n copies of ``make()``; ``ports`` maps port name → width; ``consts`` fixed inputs."""

    def __init__(self, make, n, ins, outs, consts=None, en=False):
        self.make, self.n, self.ins, self.outs = make, n, ins, outs
        self.consts = consts or {}
        self.en = en
        self.sig = {p: Signal(w * n, name=p) for p, w in {**ins, **outs}.items()}

    def elaborate(self, platform):
        m = Module()
        for i in range(self.n):
            u = m.submodules[f"u{i}"] = self.make()
            for p, w in self.ins.items():
                m.d.comb += getattr(u, p).eq(self.sig[p][w * i:w * i + w])
            for p, w in self.outs.items():
                m.d.comb += self.sig[p][w * i:w * i + w].eq(getattr(u, p))
            for p, v in self.consts.items():
                m.d.comb += getattr(u, p).eq(v)
            if self.en:
                m.d.comb += u.en.eq(1)
        return m


def run_parallel(make, ins: dict, outs: dict, vectors: dict, consts=None, n=64):
    """Evaluate a combinational unit on ``vectors`` (port → list of ints); returns
    port → list of outputs."""
    count = len(next(iter(vectors.values())))
    h = _Parallel(make, n, ins, outs, consts)
    results = {p: [] for p in outs}

    async def bench(ctx):
        for base in range(0, count, n):
            k = min(n, count - base)
            for p, w in ins.items():
                ctx.set(h.sig[p], _pack(vectors[p][base:base + k], w))
            for p, w in outs.items():
                results[p].extend(_unpack(ctx.get(h.sig[p]), w, n)[:k])

    sim = Simulator(h)
    sim.add_testbench(bench)
    sim.run()
    return results


def run_pipelined(make, latency, ins: dict, outs: dict, vectors: dict, consts=None, n=8):
    """Stream ``vectors`` through ``n`` copies of a pipelined unit with ``en`` high; output
    of the set sent in cycle t is read ``latency`` cycles later."""
    count = len(next(iter(vectors.values())))
    h = _Parallel(make, n, ins, outs, consts, en=True)
    results = {p: [] for p in outs}
    steps = (count + n - 1) // n

    async def bench(ctx):
        for t in range(steps + latency):
            base = t * n
            if t < steps:
                k = min(n, count - base)
                for p, w in ins.items():
                    ctx.set(h.sig[p], _pack(vectors[p][base:base + k], w))
            await ctx.tick()
            if t >= latency - 1 and t - (latency - 1) < steps:
                b0 = (t - (latency - 1)) * n
                k = min(n, count - b0)
                for p, w in outs.items():
                    results[p].extend(_unpack(ctx.get(h.sig[p]), w, n)[:k])

    sim = Simulator(h)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results
