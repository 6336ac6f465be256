"""cocotb testbench of the reduction unit (block ``reduce-unit``).

Every dtype × op as its own group (sizes cycling over 2, 3, 8 and n_ports), chunks
interleaved in a random arrival order, random idle on the sources and random backpressure
on the result sink; results checked bit for bit against :mod:`fusionfabric.sim.reduce` by a scoreboard
keyed by (group, chunk); duplicate and non-member contributions must be counted, never
summed; the open-chunk table runs full (held back, counted). Test arguments (runner
``test_args``): ``chunks`` per group, ``window`` (live chunks, ≤ n_chunks), ``duplicates``,
``nonmembers``, ``idle``, ``backpressure``, ``special``.
"""

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from fusionfabric.formats.switch import Dtype, Kind, Op
from fusionfabric.tb.common.env import tb_args
from fusionfabric.tb.common.coverage import cover_cross, cover_point, export_coverage
from fusionfabric.tb.common.scoreboard import KeyedScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource
from fusionfabric.tb.common.tb import TB
from fusionfabric.tb.reduce.traffic import make_traffic, random_groups, result_fields

sample_dtype = cover_point("reduce.dtype", bins=[d.name for d in Dtype])
sample_op = cover_point("reduce.op", bins=[o.name for o in Op])
sample_dtype_op = cover_cross("reduce.dtype_x_op", ["reduce.dtype", "reduce.op"],
                              [sample_dtype, sample_op])
sample_size = cover_point("reduce.group_size", bins=["2", "3", "8", "n_ports", "other"])
sample_full = cover_point("reduce.chunk_table_full", bins=[True, False])
sample_error = cover_point("reduce.error", bins=["duplicate", "nonmember"])
sample_mode = cover_point("reduce.mode_native", bins=[(0, 0), (0, 1), (1, 0), (1, 1)])


def size_label(k, n_ports):
    if k == n_ports:
        return "n_ports"
    return str(k) if k in (2, 3, 8) else "other"


class ReduceTB(TB):
    def __init__(self, dut):
        super().__init__(dut, stall_cycles=int(tb_args().get("stall_cycles", 3000)))
        a = self.args
        self.n_ports = int(self.params["n_ports"])
        self.data_width = int(self.params["data_width"])
        self.n_chunks = int(self.params["n_chunks"])
        self.cfg = StreamSource(dut, "i_config", self.clk)
        self.src = StreamSource(dut, "i_contrib", self.clk, self.rng,
                                idle=float(a.get("idle", 0.3)), watchdog=self.watchdog)
        self.snk = StreamSink(dut, "o_result", self.clk, self.rng,
                              backpressure=float(a.get("backpressure", 0.3)),
                              watchdog=self.watchdog)
        self.sb = KeyedScoreboard("reduce", self.seed, watchdog=self.watchdog)
        self.snk.on_beat.append(self.on_result)

    def on_result(self, word, cycle):
        f = result_fields(self.n_ports, self.data_width, word)
        assert f["kind"] == Kind.RESULT and f["first"] == 1 and f["last"] == 1, f
        self.sb.observe((f["dest"], f["chunk"]),
                        (f["data"], f["members"], f["mode"], f["root"]))

    def counter(self, name):
        return int(getattr(self.dut, name).value.to_unsigned())


def build_groups(tb):
    others = [k for k in range(2, tb.n_ports) if k not in (2, 3, 8)]
    other = int(tb.rng.choice(others)) if others else 2
    sizes_want = [2, 3, 8, tb.n_ports, other]
    sizes = [min(sizes_want[i % 5], tb.n_ports) for i in range(len(Dtype) * len(Op))]
    dts = [d for d in Dtype for _ in Op]
    ops = [o for _ in Dtype for o in Op]
    return random_groups(tb.rng, tb.n_ports, sizes, dts, ops)


@cocotb.test()
async def test_reduce(dut):
    tb = ReduceTB(dut)
    a = tb.args
    groups = build_groups(tb)
    window = min(int(a.get("window", tb.n_chunks)), tb.n_chunks)
    traffic = make_traffic(tb.rng, tb.n_ports, tb.data_width, groups,
                           int(a.get("chunks", 2)), window=window,
                           special=float(a.get("special", 0.15)),
                           duplicates=int(a.get("duplicates", 3)),
                           nonmembers=int(a.get("nonmembers", 3)))
    for key, item in traffic.expected.items():
        tb.sb.expect(key, item)
    for g in groups:
        sample_dtype_op(g.dtype.name, g.op.name)
        sample_size(size_label(len(g.members), tb.n_ports))
        sample_mode((int(g.mode), int(g.native)))
    await tb.reset()
    tb.start_watchdog()
    tb.cfg.send_many(traffic.configs)
    await tb.cfg.wait_idle()
    tb.src.send_many(traffic.flits)
    await tb.src.wait_idle()
    while tb.sb.pending:
        await FallingEdge(tb.clk)
    await tb.cycles(10)
    await ReadOnly()
    tb.sb.check_empty()
    got = {n: tb.counter(n) for n in ("o_contributions", "o_results", "o_duplicate",
                                      "o_nonmember", "o_invalid", "o_full_cycles")}
    assert got["o_contributions"] == traffic.n_contributions, got
    assert got["o_results"] == len(traffic.expected), got
    assert got["o_duplicate"] == traffic.n_duplicate, (got, traffic.n_duplicate)
    assert got["o_nonmember"] == traffic.n_nonmember, (got, traffic.n_nonmember)
    assert got["o_invalid"] == 0, got
    if traffic.n_duplicate:
        sample_error("duplicate")
    if traffic.n_nonmember:
        sample_error("nonmember")
    sample_full(got["o_full_cycles"] > 0)
    if int(a.get("expect_full", 0)):
        assert got["o_full_cycles"] > 0, "the open-chunk table never filled"
    tb.watchdog.stop()
    export_coverage()
    dut._log.info("reduce: %d chunks matched, counters %s, seed %d", tb.sb.matched, got,
                  tb.seed)
