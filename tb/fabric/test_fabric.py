"""cocotb tests of the whole fabric (block ``fabric``, docs/fabric.md).

Interface for callers (``fusionfabric demo`` and the pytest wrappers)
--------------------------------------------------------------------
``fusionfabric.tb.common.runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params, sim=..., seed=...,
testcase=<one of the tests below>, test_args=...)``; ``params`` are the ``fabric`` block's
(``n_endpoints``, ``n_chunks``, ``am_period``, ...).

``test_workload`` plays a :mod:`fusionfabric.sim.workloads` workload on every endpoint. ``test_args``:

``workload`` (str)
    a key of ``fusionfabric.sim.workloads.WORKLOADS`` (``allreduce-switch``, ``allreduce-ring``,
    ``moe-alltoall``).
``seed`` (int, default: the run's seed)
    the workload's data seed.
``params`` (dict)
    keyword arguments of the workload class.
``faults`` (None or dict)
    ``{"ber": float, "slip_lane": int, "slip_at": int, "slip_bits": int}``: bit error rate
    on every lane (set once all links are up; ``fusionfabric.rtl.fabric.fault.ber_threshold``), and a
    one-shot slip of ``slip_bits`` (default 1) bits on lane ``slip_lane``
    (``fusionfabric.rtl.fabric.lane_index``; -1 = none) ``slip_at`` cycles (default 1000) after the
    traffic starts.
``result_file`` (str, default ``fabric_results.json`` in the run directory)
    written at the end with :func:`fusionfabric.sim.workloads.result_record` plus ``crc_errors``,
    ``flips``, ``slips`` (PCS bit slips after the links first came up: relock hunting),
    ``link_up_cycles``, ``sim`` and ``endpoints`` (per endpoint:
    chiplet status of both link ends, PCS link status, switch and reduction-unit
    counters, ``tx_bytes``/``rx_bytes`` measured at its accelerator port, goodput in
    bytes per cycle). ``cycles`` counts from the first message offered to ``done()``.
    The file is written before the test fails on a mismatch.

``test_traffic``, ``test_allreduce``, ``test_faults`` are the testbench's own checks
(random unicast/multicast with completions; bf16 SUM all-reduce bit-exact against
:mod:`fusionfabric.sim.reduce`; both under lane bit errors and a slip). Their ``test_args``:
``messages`` (per endpoint), ``granules`` (16-byte reduction granules per endpoint),
``ber``, ``slip_lane``, ``idle``, ``backpressure``; they write the same kind of results file
(:meth:`fusionfabric.tb.fabric.fabric_tb.FabricTB.report`).
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import Opcode
from fusionfabric.sim.chiplet import Message
from fusionfabric.formats.switch import Dtype, Mode, Op
from fusionfabric.sim.reduce import pack_flit, random_bits, reduce_flits
from fusionfabric.tb.common.coverage import cover_point
from fusionfabric.tb.fabric.fabric_tb import FabricTB, result_items

sample_op = cover_point("fabric.opcode", bins=["WRITE", "READ", "ATOMIC_ADD", "MULTICAST",
                                               "REDUCE", "RESULT"])


async def _start(tb, faults=None):
    await tb.reset()
    tb.start_watchdog()
    tb.t_up = await tb.wait_links_up()
    tb.slips0 = sum(tb.link(e)["up_slips"] + tb.link(e)["down_slips"] for e in range(tb.n))
    if faults and faults.get("ber"):
        tb.set_fault(threshold=tb.ber_threshold(faults["ber"]), all_lanes=True)
        await ClockCycles(tb.clk, 2)


async def _slip_later(tb, lane, delay, bits=1):
    if lane is None or lane < 0:
        return
    await ClockCycles(tb.clk, int(delay))
    tb.set_fault(lane=int(lane), threshold=tb.threshold, slip=int(bits))
    tb.log.info("slip of %d bits on lane %d", bits, lane)


# -- own traffic --------------------------------------------------------------------------
async def _requester(tb, e, n_msgs, mcast_group):
    ep = tb.eps[e]
    rng = tb.rng_for(100 + e)
    for _ in range(n_msgs):
        if mcast_group is not None and rng.random() < 0.1:
            msg = C.random_message(rng, [Opcode.MULTICAST], dest=mcast_group)
        else:
            dest = int(rng.integers(tb.n - 1))
            dest += dest >= e                       # another endpoint
            msg = C.random_message(rng, [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD],
                                   dest=dest)
        sample_op(Opcode(msg.opcode).name)
        await ep.send(msg)


async def _traffic(tb, n_msgs):
    members = (1 << tb.n) - 1
    tb.write_group(1, members, op=0, dtype=0, mode=0, root=0, native=0)
    await tb.config_done()
    for ep in tb.eps:
        cocotb.start_soon(ep.responder())
    tasks = [cocotb.start_soon(_requester(tb, e, n_msgs, 1)) for e in range(tb.n)]
    for t in tasks:
        await t


class AllReduce:
    """bf16 SUM all-reduce of ``granules`` 16-byte granules per endpoint through group
    ``group``: REDUCE messages of ``beats`` granules, a window of ``window`` granules ahead
    of the lowest result not yet received; results checked against fusionfabric.sim.reduce."""

    def __init__(self, tb, granules, group=0, beats=4, window=None, dtype=Dtype.BF16,
                 op=Op.SUM):
        self.tb, self.g, self.group, self.beats = tb, granules, group, beats
        self.window = window or 4 * tb.n
        self.dtype, self.op = dtype, op
        rng = tb.rng_for(500)
        per = 128 // 16
        bits = random_bits(rng, dtype, (tb.n, granules, per))
        self.words = [[pack_flit(bits[p, c], dtype) for c in range(granules)]
                      for p in range(tb.n)]
        self.expected = [reduce_flits([self.words[p][c] for p in range(tb.n)], 128, dtype, op)
                         for c in range(granules)]
        self.got = [dict() for _ in range(tb.n)]
        self.next_missing = [0] * tb.n
        for ep in tb.eps:
            ep.on_result = self.on_result

    def on_result(self, e, msg, cycle):
        sample_op("RESULT")
        for c, word in result_items(msg):
            if c in self.got[e]:
                raise AssertionError(f"endpoint {e}: result for granule {c} delivered twice "
                                     f"(seed {self.tb.seed})")
            if c >= self.g or word != self.expected[c]:
                raise AssertionError(
                    f"endpoint {e}: granule {c}: got {word:#034x}, expected "
                    f"{self.expected[c] if c < self.g else None:#034x} (seed {self.tb.seed})")
            self.got[e][c] = word
        while self.next_missing[e] in self.got[e]:
            self.next_missing[e] += 1

    async def sender(self, e):
        tb, ep = self.tb, self.tb.eps[e]
        for c0 in range(0, self.g, self.beats):
            k = min(self.beats, self.g - c0)
            k = 4 if k < 4 else k - k % 4           # messages are 64..256 bytes
            while c0 + k > self.next_missing[e] + self.window:
                await FallingEdge(tb.clk)
            data = b"".join(self.words[e][c].to_bytes(16, "little") for c in range(c0, c0 + k))
            msg = Message(Opcode.REDUCE, C.length_code(16 * k), 0, self.group, e,
                          op=int(self.op), dtype=int(self.dtype), chunk=c0, data=data)
            sample_op("REDUCE")
            await ep.send(msg, nonposted=False)

    def done(self):
        return all(len(x) == self.g for x in self.got)

    async def run(self):
        tb = self.tb
        tb.write_group(self.group, (1 << tb.n) - 1, op=int(self.op), dtype=int(self.dtype),
                       mode=int(Mode.ALLREDUCE), root=0, native=0)
        await tb.config_done()
        tasks = [cocotb.start_soon(self.sender(e)) for e in range(tb.n)]
        for t in tasks:
            await t
        while not self.done():
            await FallingEdge(tb.clk)


def _new_tb(dut):
    args = FabricTB.args_of()
    tb = FabricTB(dut, idle=float(args.get("idle", 0.1)),
                  backpressure=float(args.get("backpressure", 0.1)),
                  stall_cycles=int(args.get("stall_cycles", 20_000)))
    tb.threshold = 0
    return tb


@cocotb.test()
async def test_traffic(dut):
    """Random WRITE/READ/ATOMIC_ADD between endpoints and MULTICASTs to every endpoint;
    every request delivered once, in order per (source, destination), intact; every
    completion matched to its tag."""
    tb = _new_tb(dut)
    await _start(tb)
    t0 = tb.cycle()
    await _traffic(tb, int(tb.args.get("messages", 30)))
    await tb.wait_quiet()
    cycles = tb.cycle() - t0
    tb.sb_req.check_empty()
    tb.sb_cpl.check_empty()
    await tb.check_clean()
    await tb.report("traffic", cycles)


@cocotb.test()
async def test_allreduce(dut):
    """bf16 SUM all-reduce through the reduction units, bit-exact against fusionfabric.sim.reduce;
    each endpoint receives each granule's result exactly once."""
    tb = _new_tb(dut)
    await _start(tb)
    t0 = tb.cycle()
    ar = AllReduce(tb, int(tb.args.get("granules", 32)))
    await ar.run()
    cycles = tb.cycle() - t0
    await ClockCycles(tb.clk, 50)
    await tb.check_clean()
    await tb.report("allreduce", cycles)


@cocotb.test()
async def test_faults(dut):
    """Traffic and an all-reduce with bit errors on every lane and a slip on one lane:
    results still exact; replays and a relock counted."""
    tb = _new_tb(dut)
    ber = float(tb.args.get("ber", 2e-5))
    lane = int(tb.args.get("slip_lane", 1))
    await _start(tb, {"ber": ber})
    tb.threshold = tb.ber_threshold(ber)
    t0 = tb.cycle()
    cocotb.start_soon(_slip_later(tb, lane, int(tb.args.get("slip_at", 400))))
    ar = AllReduce(tb, int(tb.args.get("granules", 32)))
    tr = cocotb.start_soon(_traffic(tb, int(tb.args.get("messages", 20))))
    await ar.run()
    await tr
    await tb.wait_quiet()
    cycles = tb.cycle() - t0
    tb.sb_req.check_empty()
    tb.sb_cpl.check_empty()
    res = await tb.report("faults", cycles)
    await tb.check_clean()
    assert res["replays"] > 0, f"no replays at BER {ber} (seed {tb.seed}): {res}"
    if lane >= 0:
        assert res["relocks"] >= 1, f"no relock after the slip (seed {tb.seed})"


# -- workloads of fusionfabric.sim.workloads ----------------------------------------------------
@cocotb.test()
async def test_workload(dut):
    """Play ``test_args["workload"]`` (fusionfabric.sim.workloads) on every endpoint; write the
    results record; fail if it is not bit-exact."""
    from fusionfabric.sim.workloads import make_workload, result_record

    tb = _new_tb(dut)
    args = tb.args
    name = args.get("workload", "allreduce-switch")
    wseed = int(args.get("seed", tb.run_seed()))
    w = make_workload(name, tb.n, wseed, **dict(args.get("params") or {}))
    faults = args.get("faults") or None
    await _start(tb, faults)
    for d in w.config_writes():           # after reset (a reset clears the group table)
        d = dict(d)
        g = d.pop("group")
        tb.write_entry(g, tb.entry.pack(**d))
    await tb.config_done()
    if faults:
        tb.threshold = tb.ber_threshold(faults.get("ber", 0))
        cocotb.start_soon(_slip_later(tb, int(faults.get("slip_lane", -1)),
                                      int(faults.get("slip_at", 1000)),
                                      int(faults.get("slip_bits", 1))))
    tx = [0] * tb.n
    rx = [0] * tb.n

    def send(e, msgs):
        ep = tb.eps[e]
        for m in msgs:
            tx[e] += len(m.data) if m.opcode != Opcode.RESULT else 0
            src = ep.rsp_src if m.opcode >= Opcode.READ_CPL else ep.req_src
            src.send_many(m.beats())

    def handler(e, msg, cycle):
        rx[e] += len(msg.data) if msg.opcode != Opcode.RESULT else 16 * (msg.status + 1)
        tb.watchdog.kick(f"endpoint {e} got {Opcode(msg.opcode).name}")
        send(e, w.on_receive(e, msg))

    for ep in tb.eps:
        ep.handler = handler
    t0 = tb.cycle()
    for e in range(tb.n):
        send(e, w.start(e))
    limit = int(args.get("max_cycles", 2_000_000))
    while not w.done():
        await FallingEdge(tb.clk)
        if tb.cycle() - t0 > limit:
            break
    cycles = tb.cycle() - t0
    status = await tb.report(name, cycles, write=False)
    eps = status["endpoints"]
    rec = result_record(
        w, cycles, replays=status["replays"], relocks=status["relocks"],
        crc_errors=sum(x["crc_errors"] for x in eps), flips=sum(x["flips"] for x in eps),
        slips=sum(x["link"]["up_slips"] + x["link"]["down_slips"] for x in eps) - tb.slips0,
        tx_bytes=tx, rx_bytes=rx, sim=tb.sim, link_up_cycles=tb.t_up,
        lane_profile=tb.lane_profile, **({"fec": status["fec"]} if "fec" in status else {}),
        endpoints=[{**x, "tx_bytes": tx[i], "rx_bytes": rx[i],
                    "goodput_bytes_per_cycle": round(rx[i] / max(1, cycles), 4)}
                   for i, x in enumerate(eps)])
    tb.write_results(rec)
    assert rec["bit_exact"], rec["error"]

