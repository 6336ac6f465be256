"""The crosspoint-buffered switch (``Switch(mode="crosspoint")``) in the Amaranth simulator:
the documented idle latency, line rate through one output and the output-buffer depth it
needs, the buffering between an input and a stopped output, and round-robin service.
The functional regressions (every traffic pattern, multicast, drops, counters, packet
contiguity) are the cocotb cases in tests/test_switch_cocotb.py."""

import pytest
from amaranth.sim import Simulator

from rtl.switch.top import Switch
from sim.layouts import Kind, switch_flit

#: handshake in cycle t -> o_port valid in t + LATENCY (docs/switch.md)
LATENCY = 8
#: the smallest out_depth (output credits) and depth (crosspoint credits) that sustain
#: one flit per cycle from one input to one output
FULL_RATE_OUT_DEPTH = 5
FULL_RATE_DEPTH = 8


def _run(dut, sends, cycles, ready=lambda o, c: True):
    """Drive ``sends[i]`` (lists of (dest, data, last)) into input i as fast as it is taken,
    return (accept cycles per input, [(cycle, src, data, last)] per output)."""
    n = dut.n_ports
    flit = switch_flit(dut.data_width)
    accepted = [[] for _ in range(n)]
    out = [[] for _ in range(n)]

    async def bench(ctx):
        pos = [0] * n
        for cyc in range(cycles):
            for i in range(n):
                port = dut.i_port[i]
                if pos[i] < len(sends[i]):
                    dest, data, last = sends[i][pos[i]]
                    ctx.set(port.payload.as_value(), flit.pack(
                        data=data, first=1, last=last, kind=Kind.UNICAST, dest=dest))
                    ctx.set(port.valid, 1)
                else:
                    ctx.set(port.valid, 0)
            for o in range(n):
                ctx.set(dut.o_port[o].ready, int(ready(o, cyc)))
            took = [ctx.get(dut.i_port[i].valid) and ctx.get(dut.i_port[i].ready)
                    for i in range(n)]
            for o in range(n):
                p = dut.o_port[o]
                if ctx.get(p.valid) and ctx.get(p.ready):
                    f = flit.unpack(ctx.get(p.payload.as_value()))
                    out[o].append((cyc, f["src"], f["data"], f["last"]))
            for i in range(n):
                if took[i]:
                    accepted[i].append(cyc)
                    pos[i] += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return accepted, out


def _switch(**kw):
    return Switch(**{"n_ports": 4, "data_width": 16, "mode": "crosspoint", "depth": 16,
                     "out_depth": 8, **kw})


def test_crosspoint_idle_latency():
    dut = _switch()
    sends = [[], [(2, 0x1234, 1)], [], []]
    acc, out = _run(dut, sends, 20)
    assert len(out[2]) == 1 and out[2][0][1:] == (1, 0x1234, 1)
    assert out[2][0][0] - acc[1][0] == LATENCY
    assert not any(out[o] for o in (0, 1, 3))


@pytest.mark.parametrize("depth,out_depth", [
    (FULL_RATE_DEPTH, FULL_RATE_OUT_DEPTH), (16, FULL_RATE_OUT_DEPTH - 1),
    (FULL_RATE_DEPTH // 2, 16)])
def test_crosspoint_line_rate_needs_credits(depth, out_depth):
    """One input streams to one output that is always ready: one flit per cycle with the
    documented output buffer and crosspoint depth, bubbles with less of either (the two
    credit loops)."""
    dut = _switch(depth=depth, out_depth=out_depth)
    flits = [(3, k, 1) for k in range(60)]
    acc, out = _run(dut, [flits, [], [], []], 400)
    got = out[3]
    assert [d for _, _, d, _ in got] == list(range(60))
    span = got[-1][0] - got[0][0] + 1
    if out_depth >= FULL_RATE_OUT_DEPTH and depth >= FULL_RATE_DEPTH:
        assert span == 60, f"depth {depth}, out_depth {out_depth}: 60 flits over {span} cycles"
    else:
        assert span > 60, f"depth {depth}, out_depth {out_depth}: line rate with too few credits"


@pytest.mark.parametrize("depth,out_depth", [(16, 8), (4, 5), (1, 2)])
def test_crosspoint_buffering_behind_a_stopped_output(depth, out_depth):
    """Output 0 stopped: input 0 gets rid of out_depth (output buffer) + depth (crosspoint
    RAM) + 2 (crosspoint head slots) + 2 (input stage) flits, then stalls; input 1 still reaches
    output 1; released, output 0 delivers everything in order."""
    dut = _switch(depth=depth, out_depth=out_depth)
    hold = 120
    flits = [(0, k, 1) for k in range(40)]
    acc, out = _run(dut, [flits, [(1, k, 1) for k in range(20)], [], []], 400,
                    ready=lambda o, c: o != 0 or c >= hold)
    cap = out_depth + depth + 2 + 2
    assert sum(c < hold for c in acc[0]) == cap
    assert len(out[1]) == 20 and out[1][-1][0] < hold
    assert [d for _, _, d, _ in out[0]] == list(range(40))


def test_crosspoint_round_robin_all_to_one():
    """Four inputs stream to output 0: it delivers one flit per cycle, taking the inputs in
    turn (each gets a quarter of every 4-cycle window once running)."""
    dut = _switch()
    sends = [[(0, (i << 8) | k, 1) for k in range(30)] for i in range(4)]
    acc, out = _run(dut, sends, 200)
    got = out[0]
    assert len(got) == 120
    assert got[-1][0] - got[0][0] + 1 == 120
    srcs = [s for _, s, _, _ in got]
    for w in range(0, 120, 4):
        assert sorted(srcs[w:w + 4]) == [0, 1, 2, 3], f"window {w}: {srcs[w:w + 4]}"
    for i in range(4):
        assert [d & 0xFF for _, s, d, _ in got if s == i] == list(range(30))
