"""cocotb tests of the switch with its reduction units (``reduce=True``): all-reduce and
reduce-to-root through the crossbar, bit-exact against sim.reduce, every member gets each
result exactly once, unicast traffic mixed in, duplicates counted, credits conserved."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from fusionfabric.formats.bitfields import Fields
from fusionfabric.formats.switch import Dtype, Kind, Mode, Op
from fusionfabric.sim.reduce import random_bits, reduce_flits, pack_flit, elements_per_flit
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.env import random_words, tb_params
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.switch.switch_tb import SwitchTB

_N = int(tb_params().get("n_ports", 4))
sample_group = cover_point("switch.reduce.group_size", bins=list(range(2, _N + 1)))
sample_mode = cover_point("switch.reduce.mode", bins=["allreduce", "reduce"])
sample_unit = cover_point("switch.reduce.unit", bins=list(range(_N)))

UNIT_STATS = ("contributions", "results", "duplicate", "nonmember", "invalid",
              "full_cycles", "result_drops")


class ResultChecker:
    """Expected result flits per (output, group, chunk); each must arrive exactly once."""

    def __init__(self, tb):
        self.tb = tb
        self.expected: dict[tuple, int] = {}
        self.got = 0
        tb.on_result = self.observe

    def expect(self, o, word, group, chunk):
        key = (o, group, chunk)
        assert key not in self.expected
        self.expected[key] = word

    def observe(self, o, f, word):
        key = (o, f["dest"], f["chunk"])
        if key not in self.expected:
            raise AssertionError(f"output {o}: unexpected or repeated result for group "
                                 f"{f['dest']} chunk {f['chunk']} (seed {self.tb.seed})")
        want = self.expected.pop(key)
        if want != word:
            raise AssertionError(f"output {o}: result group {f['dest']} chunk {f['chunk']}: "
                                 f"got {self.tb._fmt(word)}, expected {self.tb._fmt(want)} "
                                 f"(seed {self.tb.seed})")
        self.got += 1
        self.tb.watchdog.kick("result")


async def _unit_stats(tb):
    lay = Fields([(s, 32) for s in UNIT_STATS])
    await FallingEdge(tb.clk)
    await ReadOnly()
    return [lay.unpack(to_int(getattr(tb.dut, f"o_unit_stats__{u}").value))
            for u in range(tb.n)]


@cocotb.test()
async def test_reduce_through_switch(dut):
    tb = SwitchTB(dut, idle=0.2, backpressure=0.2, stall_cycles=20000)
    await tb.reset()
    tb.start_watchdog()
    rng = tb.rng
    n = tb.n
    dw = tb.flit.widths["data"]
    rc = ResultChecker(tb)
    full = (1 << n) - 1
    # (group, members, mode, root, dtype, op)
    cases = [(0, full, Mode.ALLREDUCE, 0, Dtype.INT32, Op.SUM),
             (1, full & ~1 if n > 2 else full, Mode.REDUCE, n - 1, Dtype.FP32, Op.SUM),
             (2, 0b101 if n >= 3 else 0b11, Mode.ALLREDUCE, 0, Dtype.BF16, Op.MAX),
             (3, full, Mode.REDUCE, 0, Dtype.FP16, Op.MIN)]
    for g, members, mode, root, dtype, op in cases:
        tb.write_group(g, members, op=op, dtype=dtype, mode=mode, root=root)
    await tb.config_done()

    # Every chunk of the test fits in the units' open-chunk tables at once (see
    # docs/switch.md: senders must bound their chunks in flight), so any order is safe.
    chunks_per_group = int(tb.args.get("chunks", 3))
    sends = {i: [] for i in range(n)}
    total = 0
    for g, members, mode, root, dtype, op in cases:
        ranks = [p for p in range(n) if members >> p & 1]
        sample_group(len(ranks))
        sample_mode("allreduce" if mode == Mode.ALLREDUCE else "reduce")
        for k in range(chunks_per_group):
            chunk = 100 * g + k
            sample_unit(chunk % n)
            per = elements_per_flit(dw, dtype)
            words = [pack_flit(random_bits(rng, dtype, (per,)), dtype) for _ in ranks]
            res = reduce_flits(words, dw, dtype, op)
            out = tb.flit.pack(data=res, first=1, last=1, kind=Kind.RESULT, dest=g,
                               src=chunk % n, chunk=chunk)
            for o in (ranks if mode == Mode.ALLREDUCE else [root]):
                rc.expect(o, out, g, chunk)
            for p, w in zip(ranks, words):
                sends[p].append((g, chunk, w))
                total += 1
    # every member sends its contributions in its own random order, mixed with unicast
    for i in range(n):
        order = rng.permutation(len(sends[i]))
        for j in order:
            g, chunk, w = sends[i][j]
            tb.send(i, Kind.REDUCE, g, w, chunk=chunk)
            if rng.random() < 0.3:
                tb.send(i, Kind.UNICAST, int(rng.integers(n)), random_words(rng, dw, 1)[0])
    await tb.drain()
    n_wait = 0
    while rc.expected and n_wait < 20000:
        await ClockCycles(tb.clk, 16)
        n_wait += 16
    assert not rc.expected, f"{len(rc.expected)} results never arrived, e.g. " \
                            f"{list(rc.expected)[:4]} (seed {tb.seed})"
    await ClockCycles(tb.clk, 8)
    await tb.check_end()
    stats = await _unit_stats(tb)
    assert sum(s["contributions"] for s in stats) == total
    assert sum(s["results"] for s in stats) == len(cases) * chunks_per_group
    for u, s in enumerate(stats):
        assert s["duplicate"] == s["nonmember"] == s["invalid"] == s["result_drops"] == 0, \
            f"unit {u}: {s}"
    export_coverage()


@cocotb.test()
async def test_reduce_duplicate_counted(dut):
    """A second contribution of a member to an open chunk is dropped and counted; the
    chunk still completes with the first one."""
    tb = SwitchTB(dut, stall_cycles=20000)
    await tb.reset()
    tb.start_watchdog()
    n = tb.n
    dw = tb.flit.widths["data"]
    rc = ResultChecker(tb)
    full = (1 << n) - 1
    tb.write_group(5, full, op=Op.SUM, dtype=Dtype.UINT32, mode=Mode.ALLREDUCE)
    await tb.config_done()
    chunk = 7
    words = [pack_flit([p + 1] * (dw // 32), Dtype.UINT32) for p in range(n)]
    tb.send(0, Kind.REDUCE, 5, words[0], chunk=chunk)
    tb.send(0, Kind.REDUCE, 5, pack_flit([1000] * (dw // 32), Dtype.UINT32), chunk=chunk)
    await tb.drain()
    await ClockCycles(tb.clk, 30)
    res = reduce_flits(words, dw, Dtype.UINT32, Op.SUM)
    for o in range(n):
        rc.expect(o, tb.flit.pack(data=res, first=1, last=1, kind=Kind.RESULT, dest=5,
                                  src=chunk % n, chunk=chunk), 5, chunk)
    for p in range(1, n):
        tb.send(p, Kind.REDUCE, 5, words[p], chunk=chunk)
    await tb.drain()
    while rc.expected:
        await ClockCycles(tb.clk, 16)
    await ClockCycles(tb.clk, 8)
    await tb.check_end()
    stats = await _unit_stats(tb)
    assert stats[chunk % n]["duplicate"] == 1
    assert sum(s["results"] for s in stats) == 1
    export_coverage()
