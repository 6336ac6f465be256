"""cocotb tests of the switch (rtl/switch/: the design the `switch` block builds): uniform, permutation and hotspot traffic
with idle and backpressure, multicast exactly-once, drops, credits conserved."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles

from fusionfabric.formats.switch import Kind
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.env import random_words, tb_args, tb_params
from fusionfabric.tb.switch.switch_tb import SwitchTB

_N = int(tb_params().get("n_ports", 4))
sample_pair = cover_point("switch.pair", bins=[(i, o) for i in range(_N) for o in range(_N)])
sample_fanout = cover_point("switch.multicast_fanout", bins=list(range(1, _N + 1)))
sample_pattern = cover_point("switch.pattern", bins=["uniform", "permutation", "hotspot"])


def _cover(tb):
    tb.on_deliver.append(lambda s, o, f: sample_pair((s, o)))


def _groups(tb, rng):
    """A few random groups (at least a singleton, a full group, one without port 0)."""
    n = tb.n
    full = (1 << n) - 1
    sets = [full, 1 << (n - 1), full & ~1]
    while len(sets) < min(6, int(tb.params["n_groups"]) - 1):
        sets.append(int(rng.integers(1, full + 1)))
    for g, members in enumerate(sets):
        tb.write_group(g, members)
    return list(range(len(sets)))


async def _traffic(dut, pattern):
    a = tb_args()
    tb = SwitchTB(dut, idle=a.get("idle", 0.3), backpressure=a.get("backpressure", 0.3))
    _cover(tb)
    sample_pattern(pattern)
    await tb.reset()
    tb.start_watchdog()
    rng = tb.rng
    n = tb.n
    groups = _groups(tb, rng)
    await tb.config_done()
    perm = rng.permutation(n)
    packets = int(a.get("packets", 40))
    mc_frac = float(a.get("multicast", 0.1))
    bad_frac = float(a.get("bad", 0.03))
    for i in range(n):
        for _ in range(packets):
            r = rng.random()
            if r < bad_frac:
                which = int(rng.integers(3))
                if which == 0:
                    tb.send(i, Kind.UNICAST, int(rng.integers(n, 256)), 1)
                elif which == 1:
                    tb.send(i, Kind.MULTICAST, int(rng.integers(len(groups), 256)), 2)
                else:
                    tb.send(i, int(rng.choice([Kind.REDUCE, Kind.RESULT])),
                            int(rng.integers(n)), 3)
                continue
            if r < bad_frac + mc_frac:
                g = int(rng.choice(groups))
                t = tb.send(i, Kind.MULTICAST, g, random_words(rng, tb.flit.widths["data"], 1)[0],
                            src_garbage=int(rng.integers(256)))
                sample_fanout(len(t))
                continue
            if pattern == "uniform":
                d = int(rng.integers(n))
            elif pattern == "permutation":
                d = int(perm[i])
            else:
                d = 0 if rng.random() < 0.5 else int(rng.integers(n))
            length = int(rng.integers(1, 5))
            for k, w in enumerate(random_words(rng, tb.flit.widths["data"], length)):
                tb.send(i, Kind.UNICAST, d, w, first=int(k == 0), last=int(k == length - 1),
                        src_garbage=int(rng.integers(256)))
    await tb.drain()
    await tb.check_end()
    export_coverage()


@cocotb.test()
async def test_uniform(dut):
    await _traffic(dut, "uniform")


@cocotb.test()
async def test_permutation(dut):
    await _traffic(dut, "permutation")


@cocotb.test()
async def test_hotspot(dut):
    await _traffic(dut, "hotspot")


@cocotb.test()
async def test_multicast_exactly_once(dut):
    """Every non-empty member set (up to 8 ports; a sample above) from every source."""
    tb = SwitchTB(dut, idle=0.2, backpressure=0.4)
    _cover(tb)
    await tb.reset()
    tb.start_watchdog()
    n = tb.n
    full = (1 << n) - 1
    n_groups = int(tb.params["n_groups"])
    sets = list(range(1, full + 1))
    if len(sets) > 24:
        sets = [full, 1, 1 << (n - 1)] + [int(x) for x in tb.rng.integers(1, full + 1, 21)]
    for base in range(0, len(sets), n_groups):
        batch = sets[base:base + n_groups]
        for g, members in enumerate(batch):
            tb.write_group(g, members)
        await tb.config_done()
        for i in range(n):
            for g in range(len(batch)):
                t = tb.send(i, Kind.MULTICAST, g, ((i << 8) | (base + g)) & 0xFFFF)
                sample_fanout(len(t))
        await tb.drain()
        tb.sb.check_empty()
    # invalidate one group: its flits are dropped and counted
    tb.write_group(0, full, valid=0)
    await tb.config_done()
    tb.send(0, Kind.MULTICAST, 0, 7)
    await tb.drain()
    await tb.check_end()
    export_coverage()


@cocotb.test()
async def test_output_stall(dut):
    """One output stops for a while: its credits run out, others keep flowing, nothing is
    lost, and the stall is counted."""
    tb = SwitchTB(dut, idle=0.1, backpressure=0.0)
    _cover(tb)
    await tb.reset()
    tb.start_watchdog()
    n = tb.n
    tb.snk[0].paused = True
    for k in range(30):
        for i in range(n):
            tb.send(i, Kind.UNICAST, (i + k) % n, k)
    await ClockCycles(tb.clk, 300)
    stalls = await tb.read("o_credit__0")
    assert stalls == 0, f"output 0 paused: {stalls} credits left, expected 0"
    tb.snk[0].paused = False
    await tb.drain()
    await tb.check_end()
    # a configuration write to a group beyond the table is dropped and counted
    tb.write_group(200, 1)
    await tb.config_done()
    assert await tb.read("o_config_drops") == 1
    export_coverage()
