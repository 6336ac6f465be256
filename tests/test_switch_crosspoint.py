"""The crosspoint-buffered switch (``CrosspointSwitch``) in the Amaranth simulator:
the documented idle latency, line rate through one output and the output-buffer depth it
needs, the buffering between an input and a stopped output, and round-robin service.
The functional regressions (every traffic pattern, multicast, drops, counters, packet
contiguity) are the cocotb cases in tests/test_switch_cocotb.py."""

import pytest
from amaranth import ClockDomain, Module
from amaranth.sim import Simulator

from fusionfabric.rtl.switch.crosspoint_switch import CrosspointSwitch
from fusionfabric.formats.switch import GROUP_BITS, Kind, group_entry, switch_flit
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender

#: handshake in cycle t -> o_port valid in t + LATENCY (docs/switch.md)
LATENCY = 10
#: the smallest out_depth (output credits) and depth (crosspoint credits) that sustain
#: one flit per cycle from one input to one output
FULL_RATE_OUT_DEPTH = 7
FULL_RATE_DEPTH = 8


def _run(dut, sends, cycles, ready=lambda o, c: True, groups=(), latency=LATENCY):
    """Write ``groups`` ((group, members) pairs) into the group table, then send
    ``sends[i]`` (lists of (dest, data, last) or (dest, data, last, kind)) into input i
    with a :class:`StreamSender` as fast as it is taken, and take from output o with a
    :class:`StreamReceiver` whose ``ready`` follows ``ready(o, cycle)``; return (accept
    cycles per input, [(cycle, src, data, last)] per output), cycles counted from the
    first one after the table writes. Each output must deliver the flits addressed to it
    (a unicast flit to its ``dest``, a multicast one to every member of group ``dest``)
    within ``cycles``, and nothing more: for ``2 * latency`` cycles (``latency``: the
    design's idle latency) after its last flit, or, an output that gets none, for all
    ``cycles``."""
    n = dut.n_ports
    flit = switch_flit(dut.data_width)
    entry = group_entry(n)
    table = dict(groups)
    words = [[] for _ in range(n)]
    count = [0] * n
    for i in range(n):
        for item in sends[i]:
            dest, data, last, kind = (*item, Kind.UNICAST)[:4]
            words[i].append(flit.pack(data=data, first=1, last=last, kind=kind, dest=dest))
            for o in range(n):
                count[o] += (table[dest] >> o & 1 if kind == Kind.MULTICAST else o == dest)
    accepted = [[] for _ in range(n)]

    def took(i):
        return lambda ctx, word: accepted[i].append(senders[i].cycles - 1)

    senders = [StreamSender(dut.i_port[i], words[i], on_beat=took(i)) for i in range(n)]
    receivers = [StreamReceiver(dut.o_port[o], count[o], ready=lambda c, o=o: ready(o, c),
                                max_cycles=cycles,
                                quiet_cycles=2 * latency if count[o] else cycles)
                 for o in range(n)]

    async def config(ctx):
        for g, members in groups:
            ctx.set(dut.i_config.payload.as_value(),
                    g | entry.pack(members=members, valid=1) << GROUP_BITS)
            ctx.set(dut.i_config.valid, 1)
            await ctx.tick()
        ctx.set(dut.i_config.valid, 0)

    def after_config(run):
        async def bench(ctx):
            for _ in groups:
                await ctx.tick()
            await run(ctx)
        return bench

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(config)
    for tx in senders:
        sim.add_testbench(after_config(tx.run), background=True)
    for rx in receivers:
        sim.add_testbench(after_config(rx.run))
    sim.run()
    out = [[(c, *(lambda f: (f["src"], f["data"], f["last"]))(flit.unpack(w)))
            for c, w in zip(rx.cycles, rx.received)] for rx in receivers]
    return accepted, out


def _switch(**kw):
    return CrosspointSwitch(**{"n_ports": 4, "data_width": 16, "depth": 16, "out_depth": 8,
                               **kw})


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
    RAM) + 2 (input stage) + 1 (input register) flits, then stalls; input 1 still reaches output 1; released,
    output 0 delivers everything in order."""
    dut = _switch(depth=depth, out_depth=out_depth)
    hold = 120
    flits = [(0, k, 1) for k in range(40)]
    # (12 flits: at depth 1 a crosspoint passes one flit per credit round trip, 7 cycles)
    acc, out = _run(dut, [flits, [(1, k, 1) for k in range(12)], [], []], 400,
                    ready=lambda o, c: o != 0 or c >= hold)
    cap = out_depth + depth + 3
    assert sum(c < hold for c in acc[0]) == cap
    assert len(out[1]) == 12 and out[1][-1][0] < hold
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


def test_crosspoint_multicast_written_at_once():
    """A multicast flit is written into all its members' crosspoints in one cycle: input 0
    streams 30 flits to a group of three outputs at one flit per cycle. With one member
    stopped, input 0 stalls once that member's output buffer and crosspoint are full and
    its two entries and the input register hold the next flits (out_depth + depth + 3
    flits taken), and the other members have received exactly the out_depth + depth
    flits the stopped one holds, none of the three waiting; released, every member gets
    all 30 in order."""
    flits = [(0, k, 1, Kind.MULTICAST) for k in range(30)]
    acc, out = _run(_switch(), [flits, [], [], []], 120, groups=[(0, 0b1110)])
    assert acc[0] == list(range(acc[0][0], acc[0][0] + 30))
    for o in (1, 2, 3):
        assert [(s, d) for _, s, d, _ in out[o]] == [(0, k) for k in range(30)]
    depth, out_depth, hold = 4, 5, 80
    acc, out = _run(_switch(depth=depth, out_depth=out_depth), [flits, [], [], []], 200,
                    ready=lambda o, c: o != 3 or c >= hold, groups=[(0, 0b1110)])
    cap = out_depth + depth + 3
    assert sum(c < hold for c in acc[0]) == cap
    for o in (1, 2):
        assert [d for c, _, d, _ in out[o] if c < hold] == list(range(out_depth + depth))
    for o in (1, 2, 3):
        assert [d for _, _, d, _ in out[o]] == list(range(30))


def test_crosspoint_one_cycle_reset_in_traffic():
    """A one-cycle reset while every input streams (rows writing their crosspoints in the
    reset cycle): nothing sent before it comes out afterwards, and every flit sent after
    it arrives exactly once, in order. (A crosspoint write register without reset once
    wrote one stale slot after such a reset, and its output then lost a flit.)"""
    # Driven cycle by cycle, not through StreamSender/StreamReceiver: the reset, the
    # inputs' valid windows and which beats count as sent all follow the cycle number.
    n, reset_at = 4, 40
    dut = _switch()
    m = Module()
    m.submodules.dut = dut
    m.domains.sync = cd = ClockDomain()
    flit = switch_flit(dut.data_width)
    sent = [[] for _ in range(n)]
    got = [[] for _ in range(n)]

    async def bench(ctx):
        for o in range(n):
            ctx.set(dut.o_port[o].ready, 1)
        for cyc in range(200):
            ctx.set(cd.rst, int(cyc == reset_at))
            # before the reset, through it, and again after it: input i to output i + 1
            on = cyc <= reset_at or 60 <= cyc < 120
            for i in range(n):
                port = dut.i_port[i]
                data = (int(cyc > reset_at) << 12) | cyc
                ctx.set(port.payload.as_value(), flit.pack(
                    data=data, first=1, last=1, kind=Kind.UNICAST, dest=(i + 1) % n))
                ctx.set(port.valid, int(on))
                if cyc > reset_at and on and ctx.get(port.ready):
                    sent[(i + 1) % n].append(data)
            if cyc > reset_at:
                for o in range(n):
                    p = dut.o_port[o]
                    if ctx.get(p.valid) and ctx.get(p.ready):
                        got[o].append(flit.unpack(ctx.get(p.payload.as_value()))["data"])
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for o in range(n):
        assert len(sent[o]) == 60
        assert got[o] == sent[o], f"output {o}"
