"""Fabric BIST (rtl/fabric/bist.py, block ``fabric-bist``).

Amaranth-simulator unit tests: the port generator's beats equal ``fusionfabric.sim.bist.PortGenModel``
bit for bit (also with its planted faults), and the port checker's counters equal
``fusionfabric.sim.bist.PortCheckModel`` on clean traffic and on traffic with injected drops,
duplicates, flipped bits, wrong destinations, non-WRITE messages and response beats.

cocotb (tb/fabric/test_bist.py, counters only): two endpoints on Icarus in CI with lane
faults (BER on every lane + a slip); the planted data flip and skip, a lane dark for a
while and one dark for good (3 endpoints), 4/8 endpoints and Verilator are soak.
"""

import json

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.rtl.fabric.bist import FabricBist, PortTrafficCheck, PortTrafficGen
from fusionfabric.formats.bist import PORT_FLIP_BIT
from fusionfabric.sim.bist import PortCheckModel, PortGenModel, port_traffic
from fusionfabric.formats.chiplet import PORT_BEAT, Opcode
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _collect(dut, n_beats, load, ready_prob, seed, budget=0, quiet=0):
    """Take ``n_beats`` request beats with StreamReceiver (ready low with probability
    ``1 - ready_prob``, from ``seed``), then ``quiet`` cycles with ready high in which no
    beat may come; ``info["cycles"]`` is the cycle after the last beat."""
    rx = StreamReceiver(dut.o_req, n_beats, seed=seed, backpressure=1.0 - ready_prob,
                        max_cycles=50 * n_beats + 200, quiet_cycles=quiet)
    info = {}

    async def bench(ctx):
        ctx.set(dut.i_load, load)
        ctx.set(dut.i_budget, budget)
        ctx.set(dut.i_enable, 1)
        await rx.run(ctx)
        ctx.set(dut.o_req.ready, 0)
        for _ in range(3):
            await ctx.tick()
        info.update(cycles=rx.cycles[-1] + 1 if rx.cycles else 0, beats=ctx.get(dut.o_beats),
                    messages=ctx.get(dut.o_messages), started=ctx.get(dut.o_started),
                    done=ctx.get(dut.o_done),
                    next_seq=[ctx.get(dut.o_next_seq[i]) for i in range(dut.n_endpoints)])

    _run(dut, bench)
    return rx.received, info


GEN_CASES = {
    "n2-e0-256B": dict(n_endpoints=2, endpoint=0, max_bytes=256, seed=1),
    "n5-e4-128B": dict(n_endpoints=5, endpoint=4, max_bytes=128, seed=0xDEADBEEF),
    "n8-e3-64B": dict(n_endpoints=8, endpoint=3, max_bytes=64, seed=7),
    "n3-e1-flip": dict(n_endpoints=3, endpoint=1, max_bytes=192, seed=2, fault="flip",
                       fault_at=2),
    "n3-e1-skip": dict(n_endpoints=3, endpoint=1, max_bytes=192, seed=2, fault="skip",
                       fault_at=1),
}


@pytest.mark.parametrize("params", GEN_CASES.values(), ids=GEN_CASES.keys())
def test_port_generator_matches_model(params):
    budget = 12
    model = PortGenModel(**params)
    msgs = model.messages(budget)
    want = model.beats_of(msgs)
    got, info = _collect(PortTrafficGen(**params), len(want), load=170, ready_prob=0.7,
                         seed=11, budget=budget, quiet=200)
    assert got == want                        # every beat, and nothing past the budget
    assert info["beats"] == len(want) and info["messages"] == budget
    assert info["started"] == budget and info["done"] == 1
    assert info["next_seq"] == model.next_seq
    # destinations: every other endpoint, never itself
    assert all(m.dest != params["endpoint"] for m in msgs)
    if params.get("fault") == "flip":
        # exactly the beats of message fault_at differ from the clean generator's, in bit 100
        clean = dict(params, fault="none", fault_at=0)
        cm = PortGenModel(**clean)
        ref = cm.beats_of(cm.messages(budget))
        diff = [a ^ b for a, b in zip(got, ref) if a != b]
        assert diff == [1 << PORT_FLIP_BIT] * msgs[params["fault_at"]].beats


def test_port_generator_line_rate():
    """At load 256 and ready always high, messages follow back to back (one beat per
    cycle) once the first is decided (one cycle)."""
    params = dict(n_endpoints=4, endpoint=2, max_bytes=256, seed=5)
    want = PortGenModel(**params).beats_of(PortGenModel(**params).messages(6))
    got, info = _collect(PortTrafficGen(**params), len(want), load=256, ready_prob=1.0,
                         seed=1, budget=6)
    assert got == want and info["cycles"] == len(want) + 1


def _check_run(params, beats, rsp_beats=0, stall=0, seed=3):
    """Feed ``beats`` (PORT_BEAT words) into a PortTrafficCheck with StreamSender (an idle
    cycle before a beat with probability 0.2, from ``seed``) and ``rsp_beats`` response
    beats in the first cycles; return its counters."""
    dut = PortTrafficCheck(**params)
    tx = StreamSender(dut.i_req, beats, seed=seed, idle=0.2,
                      stop_after=20 * len(beats) + 100)
    rsp_left = [rsp_beats]
    out = {}

    async def responses(ctx):
        while rsp_left[0]:
            ctx.set(dut.i_rsp.valid, 1)
            await ctx.tick()
            rsp_left[0] -= 1
        ctx.set(dut.i_rsp.valid, 0)

    async def bench(ctx):
        ctx.set(dut.i_stall, stall)
        await tx.run(ctx)
        assert len(tx.sent) == len(beats), \
            f"checker stalled: {len(tx.sent)} of {len(beats)} beats (seed {seed})"
        while rsp_left[0]:
            await ctx.tick()
        for _ in range(3):                    # documented latency to the counters
            await ctx.tick()
        for name in ("messages", "beats", "seq_errors", "data_errors", "unexpected",
                     "rsp_beats"):
            out[name] = ctx.get(getattr(dut, f"o_{name}"))
        out["expected"] = [ctx.get(dut.o_expected[s]) for s in range(dut.n_endpoints)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(responses, background=True)
    sim.add_testbench(bench)
    sim.run()
    return out


def _traffic_to(n, dest, per_source, seed=1):
    """Per source, the beats of its messages to ``dest`` (model), as message lists."""
    out = {}
    for s in range(n):
        if s == dest:
            continue
        g = PortGenModel(n, s, 256, seed)
        msgs = [m for m in g.messages(per_source) if m.dest == dest]
        out[s] = [g.beats_of([m]) for m in msgs]
    return out


def _interleave(per_src, rng):
    """Messages of all sources, interleaved at message granularity, order kept per source."""
    queues = {s: list(v) for s, v in per_src.items()}
    out = []
    while any(queues.values()):
        s = rng.choice([k for k, v in queues.items() if v])
        out.append(queues[s].pop(0))
    return out


def _flat(msgs):
    return [w for m in msgs for w in m]


def _model(n, dest, msgs, rsp=0):
    m = PortCheckModel(n, dest)
    m.feed(_flat(msgs))
    return dict(m.feed_rsp(rsp))


def test_port_checker_clean():
    n, dest = 4, 2
    rng = np.random.default_rng(5)
    msgs = _interleave(_traffic_to(n, dest, 15), rng)
    got = _check_run(dict(n_endpoints=n, endpoint=dest), _flat(msgs), stall=60)
    want = _model(n, dest, msgs)
    assert got == want
    assert got["seq_errors"] == got["data_errors"] == got["unexpected"] == 0
    # the model's own count: expected[s] = messages sent from s to dest
    for s in range(n):
        if s != dest:
            gen = PortGenModel(n, s, 256, 1)
            gen.messages(15)
            assert got["expected"][s] == gen.next_seq[dest]


def _with_src_data(word, **fields):
    f = PORT_BEAT.unpack(word)
    f.update(fields)
    return PORT_BEAT.pack(**f)


def test_port_checker_counts_injected_errors():
    """Drop, duplicate, swap, a flipped bit, a wrong destination, a READ and response beats:
    the RTL counts exactly what the model's rules count, and every class is non-zero."""
    n, dest = 3, 1
    rng = np.random.default_rng(9)
    msgs = _interleave(_traffic_to(n, dest, 20), rng)
    assert len(msgs) >= 12
    msgs = [list(m) for m in msgs]
    del msgs[3]                                        # a lost message
    msgs.insert(6, list(msgs[5]))                      # a duplicate
    msgs[8] = [w ^ (1 << 77) if k == 1 else w for k, w in enumerate(msgs[8])]  # a flip
    msgs[9] = [_with_src_data(w, dest=0) for w in msgs[9]]           # misrouted
    read = PORT_BEAT.pack(data=0, opcode=int(Opcode.READ), length=0, status=0, tag=1,
                          dest=dest, src=0, op=0, dtype=0, rsvd0=0, chunk=0, addr=5,
                          rsvd1=0)
    msgs.insert(10, [read])                            # a non-WRITE message
    got = _check_run(dict(n_endpoints=n, endpoint=dest), _flat(msgs), rsp_beats=5)
    want = _model(n, dest, msgs, rsp=5)
    assert got == want
    assert want["seq_errors"] >= 2 and want["data_errors"] == 1 + len(msgs[9])
    assert want["unexpected"] == 1 and want["rsp_beats"] == 5


def test_port_checker_sees_planted_faults():
    """Generator with a planted flip / skip straight into the checker (2 endpoints):
    exactly the beats of the flipped message are data errors; the skip is one sequence
    error; the model predicts both."""
    for fault, at in (("flip", 4), ("skip", 3)):
        g = PortGenModel(2, 0, 256, 1, fault, at)
        msgs = g.messages(8)
        beats = g.beats_of(msgs)
        got = _check_run(dict(n_endpoints=2, endpoint=1), beats, stall=30)
        if fault == "flip":
            assert (got["seq_errors"], got["data_errors"]) == (0, msgs[at].beats)
        else:
            assert (got["seq_errors"], got["data_errors"]) == (1, 0)
        assert got["expected"][0] == g.next_seq[1]
        assert got["messages"] == 8 and got["beats"] == len(beats)


def test_flip_bit_is_in_the_checked_word():
    assert 40 <= PORT_FLIP_BIT < 128


@pytest.mark.parametrize("kwargs, bad", [
    (dict(n_endpoints=1), "n_endpoints"),
    (dict(n_endpoints=4, endpoint=4), "endpoint"),
    (dict(max_bytes=100), "max_bytes"),
    (dict(seed=-1), "seed"),
    (dict(fault="drop"), "fault"),
])
def test_port_generator_rejects_bad_parameters(kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        PortTrafficGen(**kwargs)


def test_fabric_bist_block():
    b = get_block("fabric-bist")
    assert b.ci_params == {"n_endpoints": 2}
    fb = b.build(n_endpoints=3, latency=2, max_bytes=128)
    assert isinstance(fb, FabricBist) and fb.fabric.latency == 2
    assert len(fb.gens) == 3 and fb.gens[0].max_bytes == 128
    with pytest.raises(BlockError, match="fault"):
        b.build(fault="drop")
    with pytest.raises(BlockError, match="n_endpoints"):
        b.build(n_endpoints=1)
    from fusionfabric.rtl.switch.top import CrosspointSwitch, VoqSwitch
    assert isinstance(fb.fabric.switch, VoqSwitch)
    assert isinstance(b.build(switch_mode="crosspoint").fabric.switch, CrosspointSwitch)
    for bad in ("xbar", "fifo"):
        with pytest.raises(BlockError, match="switch_mode"):
            b.build(switch_mode=bad)
    with pytest.raises(BlockError, match="iterations"):
        b.build(switch_mode="crosspoint", iterations=2)


def test_port_traffic_reference():
    """port_traffic sums the model per (source, destination); nothing to oneself."""
    ref = port_traffic(4, 50, 256, 1)
    for s in range(4):
        assert ref["count"][s][s] == 0 and sum(ref["count"][s]) == 50
        assert ref["next_seq"][s] == ref["count"][s]


# -- cocotb: tb/fabric/test_bist.py -------------------------------------------------------------
TB = "fusionfabric.tb.fabric.test_bist"


def _cocotb(params, args, sim="icarus", tmp_path=None, name=None):
    from fusionfabric.tb.common import runner
    report = tmp_path / "bist.json"
    # the test reads top-level ports only: Verilator needs no VPI below the top
    kw = {"vpi": "top"} if sim == "verilator" else {}
    result = runner.run("fabric-bist", TB, params, sim=sim, testcase="test_bist",
                        test_args={**args, "report": str(report)}, name=name, **kw)
    assert result.tests and not result.failed
    return json.loads(report.read_text())


@pytest.mark.cocotb
def test_fabric_bist_faults_icarus(tmp_path):
    """2 endpoints on the crosspoint-buffered switch (``switch_mode="crosspoint"``, the
    board slice's switch; the fabric tests in tests/test_fabric_cocotb.py run the default
    VOQ switch), BER 2e-5 on every lane and a one-bit slip: zero BIST errors, every
    message delivered exactly once (counts from the model), replays and a relock."""
    res = _cocotb({"n_endpoints": 2, "switch_mode": "crosspoint"},
                  {"budget": 30, "load": 200, "stall": 40, "ber": 2e-5, "slip_lane": 1,
                   "slip_at": 600}, tmp_path=tmp_path)
    assert res["replays"] > 0 and res["relocks"] >= 1 and res["flips"] > 0


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_bist_dark_lane_icarus(tmp_path):
    """2 endpoints, endpoint 1's up lane 0 (lane 4) dark for 800 cycles mid-run: zero BIST
    errors, every message exactly once, and the health counters show the lock loss on that
    direction and no FAILED link."""
    res = _cocotb({"n_endpoints": 2}, {"budget": 30, "load": 200, "stall": 40,
                                       "dark_lane": [4, 500, 800]}, tmp_path=tmp_path)
    assert res["relocks"] >= 1 and res["link"][1]["up_drops"] >= 1, res["link"]


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_bist_planted_flip_icarus(tmp_path):
    """Generator 0 flips bit 100 of every beat of its message 3: the checker at that
    message's destination counts exactly its beats as data errors (the test asserts the
    model's count, so a checker that cannot fail fails this test). The checker's response
    to planted faults is also checked in CI without the fabric
    (``test_port_checker_sees_planted_faults``)."""
    res = _cocotb({"n_endpoints": 2, "fault": "flip", "fault_at": 3}, {"budget": 10},
                  tmp_path=tmp_path)
    ref = port_traffic(2, 10, 256, 1, {0: ("flip", 3)})
    m = ref["messages"][0][3]
    assert res["counters"]["data_errors"][m.dest] == m.beats > 0


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_bist_planted_skip_icarus(tmp_path):
    res = _cocotb({"n_endpoints": 2, "fault": "skip", "fault_at": 5}, {"budget": 10},
                  tmp_path=tmp_path)
    assert sum(res["counters"]["seq_errors"]) == 1


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("n", [4, 8])
def test_fabric_bist_soak_icarus(n, tmp_path):
    _cocotb({"n_endpoints": n}, {"budget": 200, "load": 200, "stall": 20, "ber": 1e-5,
                                 "slip_lane": 1, "slip_at": 2000}, tmp_path=tmp_path)


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("n", [2, 8])
def test_fabric_bist_soak_verilator(n, tmp_path):
    _cocotb({"n_endpoints": n}, {"budget": 2000, "load": 256, "ber": 1e-5, "slip_lane": 1,
                                 "slip_at": 5000}, sim="verilator", tmp_path=tmp_path)


#: Three endpoints, so that a live pair remains; a link-lost timeout of 1,000 cycles (as the
#: fabric's own dead-lane test) keeps the run short; no completion timer: the BIST's WRITEs
#: are never acknowledged, and without the timer a refused WRITE is counted exactly once in
#: ``cpl_refused`` (with it, each would become an ERROR completion per tag, and the BIST's
#: tags repeat across destinations).
DARK_PARAMS = {"n_endpoints": 3, "link_timeout": 1000, "cpl_timeout": 0}


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_bist_dark_for_good_icarus(tmp_path):
    """Endpoint 2's up lane 0 (lane 8) dark for good in traffic, between a clean phase and
    a phase after the failure (tb/fabric/test_bist.py ``dark_for_good``): live pairs get
    exactly the model's messages; both chiplets of link 2 FAILED by the link-lost timeout
    within ``fail_bounds``; endpoint 2's messages and those to it delivered (a prefix),
    refused (``cpl_refused``) or held within the link's buffers; no live link FAILED, no
    drop, the live pairs' rate after the failure >= 0.9 of the clean rate."""
    from fusionfabric.rtl.fabric.fabric import lane_index
    lane = lane_index(2, 0, 0)
    res = _cocotb(DARK_PARAMS, {"budget": 40, "clean_budget": 30, "load": 256,
                                "dark_lane": [lane, 200, 0]}, tmp_path=tmp_path)
    dark = res["dark"]
    assert dark["endpoint"] == 2 and dark["cause"] == "lost", dark
    for side in ("ep", "sw"):
        d = dark["detect"][side]
        assert d["fail_lost"] == 1 and d["detect_cycles"] <= dark["bounds"]["lost"] + 234, d
    assert dark["from_x"]["refused"] >= 30 and dark["to_x"]["refused"] >= 1, dark
    assert dark["rate_ratio"] >= 0.9, dark
