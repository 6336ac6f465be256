"""cocotb tests of the whole fabric (block ``fabric``, docs/fabric.md).

Interface for callers (``fusionfabric demo`` and the pytest wrappers)
--------------------------------------------------------------------
``fusionfabric.tb.common.runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params, sim=..., seed=...,
testcase=<one of the tests below>, test_args=...)``; ``params`` are the ``fabric`` block's
(``n_endpoints``, ``n_chunks``, ``am_period``, ...).

``test_workload`` plays a :mod:`fusionfabric.sim.workloads` workload on every endpoint. ``test_args``:

``workload`` (str)
    a key of ``fusionfabric.sim.workloads.WORKLOADS`` (``allreduce-switch``, ``allreduce-ring``,
    ``moe-alltoall``, ``hetero-rack``).
``seed`` (int, default: the run's seed)
    the workload's data seed.
``params`` (dict)
    keyword arguments of the workload class.
``faults`` (None or dict)
    ``{"ber": float, "slip_lane": int, "slip_at": int, "slip_bits": int, "dark_lane":
    [lane, start, cycles]}``: bit error rate on every lane (set once all links are up;
    ``fusionfabric.rtl.fabric.fault.ber_threshold``), a one-shot slip of ``slip_bits``
    (default 1) bits on lane ``slip_lane`` (``fusionfabric.rtl.fabric.lane_index``; -1 =
    none) ``slip_at`` cycles (default 1000) after the traffic starts, and (optional) lane
    ``lane`` dark for ``cycles`` cycles from ``start`` cycles after the traffic starts.
With cpu endpoints among the parameters (``endpoints`` or ``cpu_endpoints``: a fabric
built with memory targets, the
``hetero-rack`` workload), the record also has ``memory_targets``: each target's
``o_mem_status`` counters, whose sums must equal the workload's ``target_counts``.
``result_file`` (str, default ``fabric_results.json`` in the run directory)
    written at the end with :func:`fusionfabric.sim.workloads.result_record` plus ``crc_errors``,
    ``flips``, ``slips`` (PCS bit slips after the links first came up: relock hunting),
    ``link_up_cycles``, ``sim`` and ``endpoints`` (per endpoint:
    chiplet status of both link ends, PCS link status, switch and reduction-unit
    counters, ``tx_bytes``/``rx_bytes`` measured at its accelerator port, goodput in
    bytes per cycle). ``cycles`` counts from the first message offered to ``done()``.
    The file is written before the test fails on a mismatch.

``count_hits`` (any test, Icarus, 64b/66b lanes of 2; default 0)
    1: a per-cycle monitor (:mod:`fusionfabric.tb.fabric.hits`) accounts for every
    DL flit and every flipped bit per link direction; the record gains ``hits``.

``test_flows`` runs saturated WRITE flows between endpoints (``flows``, ``cycles``,
``warm``) and records their rates (``fusionfabric.tb.fabric.flows``).

``test_traffic``, ``test_allreduce``, ``test_faults`` are the testbench's own checks
(random unicast/multicast with completions; bf16 SUM all-reduce bit-exact against
:mod:`fusionfabric.sim.reduce`; both under lane bit errors and a slip). Their ``test_args``:
``messages`` (per endpoint), ``granules`` (16-byte reduction granules per endpoint),
``ber``, ``slip_lane``, ``idle``, ``backpressure``; they write the same kind of results file
(:meth:`fusionfabric.tb.fabric.fabric_tb.FabricTB.report`).
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import Opcode
from fusionfabric.sim.chiplet import Message
from fusionfabric.formats.switch import Dtype, Mode, Op
from fusionfabric.sim.reduce import pack_flit, random_bits, reduce_flits
from fusionfabric.tb.common.coverage import cover_point
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.fabric.fabric_tb import LINK_ACTIVE, FabricLedger, FabricTB, result_items

sample_op = cover_point("fabric.opcode", bins=["WRITE", "READ", "ATOMIC_ADD", "MULTICAST",
                                               "REDUCE", "RESULT"])


async def _start(tb, faults=None):
    await tb.reset()
    tb.start_watchdog()
    if tb.hits is not None:
        tb.hits.start()
    tb.t_up = await tb.wait_links_up()
    if tb.hits is not None:
        tb.hits.open_window()
    tb.slips0 = sum(tb.link(e)["up_slips"] + tb.link(e)["down_slips"] for e in range(tb.n))
    if faults and faults.get("ber"):
        tb.set_fault(threshold=tb.ber_threshold(faults["ber"]), all_lanes=True)
        await ClockCycles(tb.clk, 2)


async def _slip_later(tb, lane, delay, bits=1):
    """A slip of ``bits`` bits on ``lane`` after ``delay`` cycles; then ``tb.slip_times``
    gets the cycles from the slip to the PCS losing lock (``loss``), to its relock
    (``relock``) and to both chiplets of that link ACTIVE again (``active``); None where
    it did not happen within the link-lost timeout."""
    if lane is None or lane < 0:
        return
    await ClockCycles(tb.clk, int(delay))
    tb.set_fault(lane=int(lane), threshold=tb.threshold, slip=int(bits))
    tb.log.info("slip of %d bits on lane %d", bits, lane)
    e, d = tb.lane_owner(lane)
    key = ("up", "down")[d]
    t0 = tb.cycle()
    drops0 = tb.link(e)[f"{key}_drops"]
    times = {"lane": lane, "loss": None, "relock": None, "active": None}
    tb.slip_times = times
    for _ in range(5000):
        await tb.sample()
        link = tb.link(e)
        if times["loss"] is None and link[f"{key}_drops"] != drops0:
            times["loss"] = tb.cycle() - t0
        if times["loss"] is not None and times["relock"] is None and link[f"{key}_link"]:
            times["relock"] = tb.cycle() - t0
        if times["relock"] is not None and all(
                tb.status(e, sd)["state"] == LINK_ACTIVE for sd in ("ep", "sw")):
            times["active"] = tb.cycle() - t0
            return


async def _dark_later(tb, lane, delay, cycles):
    """Lane ``lane`` dark for ``cycles`` cycles from ``delay`` cycles on (its bit error
    threshold kept)."""
    await ClockCycles(tb.clk, delay)
    tb.set_fault(lane=lane, threshold=tb.threshold, dark=1)
    tb.log.info("lane %d dark for %d cycles", lane, cycles)
    await ClockCycles(tb.clk, cycles)
    tb.set_fault(lane=lane, threshold=tb.threshold, dark=0)


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
    if args.get("count_hits"):
        from fusionfabric.tb.fabric.hits import HitMonitor
        tb.hits = HitMonitor(tb)
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
    res = await tb.report("faults", cycles, extra={"slip": getattr(tb, "slip_times", None)})
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
        if faults.get("dark_lane"):
            cocotb.start_soon(_dark_later(tb, *[int(v) for v in faults["dark_lane"]]))
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
    if getattr(w, "cpus", None):
        # a memory target's traffic stays inside the fabric: count what it served
        for c in w.cpus:
            tx[c], rx[c] = w.served_tx[c], w.served_rx[c]
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
    cpus = list(tb.params.get("cpu_endpoints") or [])
    if tb.params.get("endpoints"):
        from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
        cpus = list(fabric_kwargs(parse_endpoints(tb.params["endpoints"]))["cpu_endpoints"])
    if cpus:
        # the memory targets' own counters (o_mem_status, in cpu_endpoints order) against
        # what the workload's checked completions add up to
        from fusionfabric.formats.memory import MEM_STATUS
        got = [MEM_STATUS.unpack(to_int(getattr(dut, f"o_mem_status__{k}").value))
               for k in range(len(cpus))]
        rec["memory_targets"] = {str(c): g for c, g in zip(cpus, got)}
        want = getattr(w, "target_counts", None)
        if want is not None and rec["bit_exact"]:
            total = {k: sum(int(g[k]) for g in got) for k in want}
            if total != want:
                rec["bit_exact"] = False
                rec["error"] = (f"memory target counters {total} != the workload's {want} "
                                f"(seed {wseed})")
    if tb.hits is not None:
        rec["hits"] = tb.hits.result()
    tb.write_results(rec)
    assert rec["bit_exact"], rec["error"]



# -- rates: saturated flows between endpoints of different lane counts ----------------------
@cocotb.test()
async def test_flows(dut):
    """Saturated WRITE flows (``test_args["flows"]`` = ``[[src, dest, weight], ...]``):
    every source with a flow sends back to back, each message to one of its flows'
    destinations drawn by weight (seeded), for ``cycles`` cycles; then the fabric drains and
    every request and completion is checked (delivered once, in order, intact; completions
    against ``MemoryModel``). Measured in the window ``[warm, cycles)`` after the traffic
    starts: each flow's delivered payload bytes per cycle (at the destination's ``o_req``)
    and each switch port's ``flits_in``/``flits_out`` per cycle. The results file has
    ``flows`` (``src``, ``dest``, ``bytes_per_cycle``), ``ports`` (``lanes``,
    ``flits_in_per_cycle``, ``flits_out_per_cycle``) and ``window``. On a fabric with
    ``dest_credits`` each flow draws from its own message stream, and a source's next
    message comes from a flow whose ``o_dest_ready`` bit is high (by weight among those),
    once its previous message's first beat has been taken."""
    tb = _new_tb(dut)
    args = tb.args
    flows = [tuple(int(v) for v in f[:2]) + (float(f[2]) if len(f) > 2 else 1.0,)
             for f in args.get("flows", [[0, 1, 1.0]])]
    cycles = int(args.get("cycles", 2000))
    warm = int(args.get("warm", cycles // 4))
    for src, dest, w in flows:
        assert 0 <= src < tb.n and 0 <= dest < tb.n and src != dest and w > 0, \
            f"flow {src}->{dest} weight {w} is not a flow of this {tb.n}-endpoint fabric"
    await _start(tb)
    for ep in tb.eps:
        cocotb.start_soon(ep.responder())
    t0 = tb.cycle()
    got: dict[tuple[int, int], int] = {}

    def on_message(e, msg, cycle):
        if t0 + warm <= cycle < t0 + cycles:
            got[(msg.src, e)] = got.get((msg.src, e), 0) + len(msg.data)

    for ep in tb.eps:
        ep.on_message = on_message

    admission = int(tb.params.get("dest_credits", 0)) > 0

    async def source(src, mine):
        rng = tb.rng_for(200 + src)
        p = [w for _, w in mine]
        p = [w / sum(p) for w in p]
        while tb.cycle() < t0 + cycles:
            dest = mine[int(rng.choice(len(mine), p=p))][0]
            await tb.eps[src].send(C.random_message(rng, [Opcode.WRITE], dest=dest))

    async def admitted_source(src, mine):
        # per-destination queues: each flow has its own message stream; once the previous
        # message's first beat is taken, the next message comes from a flow whose
        # destination has credit (o_dest_ready), drawn by weight among those
        ep = tb.eps[src]
        pick = tb.rng_for(200 + src)
        streams = [tb.rng_for(300 + 16 * src + i) for i in range(len(mine))]
        ready_sig = getattr(tb.dut, f"o_dest_ready__{src}")
        started = -1                 # beats queued before the last message's first beat
        while tb.cycle() < t0 + cycles:
            await FallingEdge(tb.clk)
            if ep.req_src.sent <= started:
                continue
            ready = to_int(ready_sig.value)
            ok = [i for i, (d, _) in enumerate(mine) if ready >> d & 1]
            if not ok:
                continue
            w = np.array([mine[i][1] for i in ok], float)
            i = ok[int(pick.choice(len(ok), p=w / w.sum()))]
            src_q = ep.req_src
            started = src_q.sent + len(src_q.queue) + (src_q._current is not None)
            await ep.send(C.random_message(streams[i], [Opcode.WRITE], dest=mine[i][0]))

    async def snapshot_at(t):
        while tb.cycle() < t:
            await FallingEdge(tb.clk)
        await tb.sample()
        return [tb.switch_stats(e) for e in range(tb.n)]

    srcs = sorted({f[0] for f in flows})
    run = admitted_source if admission else source
    tasks = [cocotb.start_soon(run(s_, [(d, w) for s0, d, w in flows if s0 == s_]))
             for s_ in srcs]
    first = await snapshot_at(t0 + warm)
    last = await snapshot_at(t0 + cycles)
    for t in tasks:
        await t
    await tb.wait_quiet()
    tb.sb_req.check_empty()
    tb.sb_cpl.check_empty()
    await tb.check_clean()
    span = cycles - warm
    extra = {
        "window": [warm, cycles],
        "flows": [{"src": a, "dest": b, "weight": w,
                   "bytes_per_cycle": got.get((a, b), 0) / span} for a, b, w in flows],
        "ports": [{"port": e, "lanes": tb.lanes[e],
                   "flits_in_per_cycle": (last[e]["flits_in"] - first[e]["flits_in"]) / span,
                   "flits_out_per_cycle": (last[e]["flits_out"] - first[e]["flits_out"])
                   / span} for e in range(tb.n)]}
    res = await tb.report("flows", tb.cycle() - t0, extra=extra)
    tb.log.info("flows: %s ports: %s (seed %d)", extra["flows"], extra["ports"], tb.seed)
    assert res["replays"] == 0, f"replays on clean lanes (seed {tb.seed}): {res['replays']}"


# -- dark lanes: an endpoint's up lanes dark for a while, or for good ---------------------------
async def _pair_traffic(tb, senders, dests, n_msgs, stream, opcodes):
    """Each endpoint of ``senders`` sends ``n_msgs`` random ``opcodes`` requests to random
    other endpoints of ``dests``; the same ``stream`` draws the same messages."""
    async def one(e):
        rng = tb.rng_for(stream + e)
        others = [d for d in dests if d != e]
        for _ in range(n_msgs):
            dest = others[int(rng.integers(len(others)))]
            msg = C.random_message(rng, opcodes, dest=dest)
            sample_op(Opcode(msg.opcode).name)
            await tb.eps[e].send(msg)
    tasks = [cocotb.start_soon(one(e)) for e in senders]
    for t in tasks:
        await t


def _set_dark(tb, e, dark):
    for k in range(tb.lanes[e]):
        tb.set_fault(lane=tb.lane(e, 0, k), threshold=tb.threshold, dark=int(dark))


async def _wait_state(tb, e, pred, limit):
    """Cycles until ``pred(ep status, sw status)`` holds for endpoint ``e`` (at most
    ``limit``, else None)."""
    for t in range(limit):
        await tb.sample()
        if pred(tb.status(e, "ep"), tb.status(e, "sw")):
            return t
    return None


def _fabric_chiplet_params(tb):
    from fusionfabric.rtl.fabric.fabric import Fabric
    return Fabric(**tb.params).chiplet_params


@cocotb.test()
async def test_dark_lane(dut):
    """Endpoint ``dark_endpoint``'s up lanes (endpoint → switch) go dark in traffic.

    ``dark_cycles`` > 0 (shorter than the link-lost timeout): the switch-side PCS loses
    lock, both chiplets of that link go down and retrain when the lanes are lit again,
    nothing goes FAILED, and every request and completion (random WRITE/READ/ATOMIC_ADD and
    MULTICASTs, all endpoints) is delivered exactly once, in order, intact.

    ``dark_cycles`` = 0 (dark for good): both chiplets of the dead link reach FAILED
    within :meth:`ChipletParams.fail_bounds`; every request to or from the dead endpoint
    completes exactly once (OK if it was delivered, ERROR if refused, TIMEOUT), none is
    delivered twice or corrupted, every undelivered one is reported to its sender
    (:class:`FabricLedger`); the other endpoints' traffic is delivered in full, at the
    rate of the same traffic before the fault (``rate_ratio``, checked by the caller), and
    no switch credit or lock stays pinned by the dead port (their traffic drains through
    it: refused). Only one-beat completions (WRITE, ATOMIC_ADD) here: docs/protocol.md,
    "Limits"."""
    tb = _new_tb(dut)
    args = tb.args
    x = int(args.get("dark_endpoint", tb.n - 1))
    dark_cycles = int(args.get("dark_cycles", 1000))
    dark_at = int(args.get("dark_at", 300))
    n_msgs = int(args.get("messages", 12))
    cp = _fabric_chiplet_params(tb)
    bounds = cp.fail_bounds()
    await _start(tb)
    t0 = tb.cycle()
    ep_drops0 = tb.link(x)["up_drops"]
    out = {"dark_endpoint": x, "dark_cycles": dark_cycles, "bounds": bounds}
    if dark_cycles > 0:
        if dark_cycles + 500 >= bounds["lost"]:
            raise ValueError(f"dark_cycles={dark_cycles} is not well below the link-lost "
                             f"timeout ({bounds['lost']} cycles)")

        async def outage():
            await ClockCycles(tb.clk, dark_at)
            _set_dark(tb, x, True)
            tb.log.info("endpoint %d up lanes dark for %d cycles", x, dark_cycles)
            await ClockCycles(tb.clk, dark_cycles)
            _set_dark(tb, x, False)
            t_lit = tb.cycle()
            up = await _wait_state(tb, x, lambda a, b: a["state"] == b["state"] == LINK_ACTIVE,
                                   bounds["lost"])
            assert up is not None, f"link {x} not active again (seed {tb.seed})"
            out["retrain_cycles"] = tb.cycle() - t_lit
            out["dark_lit_at"] = t_lit - t0
        task = cocotb.start_soon(outage())
        await _traffic(tb, n_msgs)
        await task
        await tb.wait_quiet()
        tb.sb_req.check_empty()
        tb.sb_cpl.check_empty()
        res = await tb.report("dark-lane", tb.cycle() - t0, extra=out)
        await tb.check_clean()
        e_x = res["endpoints"][x]
        assert e_x["link"]["up_drops"] > ep_drops0, f"no lock loss at endpoint {x}: {e_x}"
        for side in ("chiplet_ep", "chiplet_sw"):
            assert e_x[side]["failures"] == 0, f"{side} of {x} went FAILED: {e_x[side]}"
        return

    # dark for good
    ops = [Opcode.WRITE, Opcode.ATOMIC_ADD]
    live = [e for e in range(tb.n) if e != x]
    tb.ledger = FabricLedger([x], tb.seed, report=tb.stall_report)
    tb.watchdog.cycles = max(tb.watchdog.cycles, bounds["cpl"] + 5000)
    for ep in tb.eps:
        cocotb.start_soon(ep.responder())
    # the rate of the live endpoints' traffic with every link up
    t1 = tb.cycle()
    await _pair_traffic(tb, live, live, n_msgs, 700, ops)
    await _wait_live(tb)
    base = tb.cycle() - t1
    # traffic to and from the dead endpoint; its lanes go dark once it has handed its last
    # request to its port (so its port is at a message boundary: docs/protocol.md, "Limits")
    mixed = cocotb.start_soon(_pair_traffic(tb, live, range(tb.n), n_msgs, 800, ops))
    await _pair_traffic(tb, [x], range(tb.n), n_msgs, 800, ops)
    await tb.eps[x].req_src.wait_idle()
    _set_dark(tb, x, True)
    t_dark = tb.cycle()
    failed = await _wait_state(tb, x, lambda a, b: a["failed"] and b["failed"],
                               2 * max(bounds["replay"], bounds["lost"]))
    assert failed is not None, f"link {x} not FAILED (seed {tb.seed})"
    out["detect_cycles"] = tb.cycle() - t_dark
    await mixed
    # the same live traffic again, with requests from and to the dead endpoint in between
    t2 = tb.cycle()
    probes = [cocotb.start_soon(_pair_traffic(tb, live, [x], 2, 900, ops)),
              cocotb.start_soon(_pair_traffic(tb, [x], live, 2, 900, ops))]
    await _pair_traffic(tb, live, live, n_msgs, 700, ops)
    await _wait_live(tb)
    after = tb.cycle() - t2
    for t in probes:
        await t
    await _wait_ledger(tb, limit=bounds["cpl"] + 5000)
    acct = tb.ledger.check()
    out.update(ledger=acct, base_cycles=base, after_cycles=after,
               rate_ratio=round(base / max(1, after), 4))
    # the ports' own counters account for every error completion (ERROR: refused at the
    # requester's own port; a request refused by the dead port's switch-side chiplet, which
    # has no completion tracker, is counted there and times out at its requester)
    await tb.sample()
    timeouts = sum(tb.status(e, "ep")["cpl_timeouts"] for e in range(tb.n))
    refused = sum(tb.status(e, "ep")["cpl_refused"] for e in range(tb.n))
    out.update(refused_at_switch=tb.status(x, "sw")["cpl_refused"],
               responses_refused_at_switch=tb.status(x, "sw").get("failed_cpl"))
    res = await tb.report("dark-lane", tb.cycle() - t0, extra=out)
    st_ep, st_sw = res["endpoints"][x]["chiplet_ep"], res["endpoints"][x]["chiplet_sw"]
    assert st_ep["state"] != LINK_ACTIVE and st_sw["state"] != LINK_ACTIVE
    assert acct["timeout"] == timeouts and acct["error"] == refused, \
        f"ledger {acct} vs counters: timeouts {timeouts}, refused {refused} (seed {tb.seed})"
    # the live links and the switch are clean
    for e in live:
        for side in ("ep", "sw"):
            st = tb.status(e, side)
            assert st["state"] == LINK_ACTIVE and st["failures"] == 0, (e, side, st)
        s = tb.switch_stats(e)
        assert s["drop_dest"] == s["drop_group"] == s["drop_kind"] == 0, (e, s)


async def _wait_until(tb, done, what, limit=200_000):
    """Until ``done()`` holds (checked at each falling edge); fails after ``limit`` cycles
    with ``what()``, a description of what is still open."""
    for _ in range(limit):
        await FallingEdge(tb.clk)
        if done():
            return
    raise AssertionError(f"{what()} after {limit} cycles (seed {tb.seed})")


async def _wait_ledger(tb, limit=200_000):
    """Until every request in the ledger completed and every request queue drained."""
    await _wait_until(tb, lambda: not tb.ledger.open and all(ep.req_src.idle_now
                                                               for ep in tb.eps),
                      lambda: f"{tb.ledger.open} requests still open", limit)


async def _wait_live(tb, limit=200_000):
    """Until no request between two live endpoints is outstanding."""
    await _wait_until(tb, lambda: not tb.ledger.open_live,
                      lambda: f"{tb.ledger.open_live} requests between live endpoints "
                              "still open", limit)
