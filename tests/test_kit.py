"""Self-test of the verification kit (tb/common): the pipeline, the failure paths, the kit
pieces that need no simulator."""

import json

import pytest

from fusionfabric.tb.common import runner
from fusionfabric.tb.common.scoreboard import InOrderScoreboard, KeyedScoreboard, ScoreboardError
from tests.kit_dut import KitIncrement

SIMS = ["icarus", "verilator"]


@pytest.mark.cocotb
@pytest.mark.parametrize("sim,width", [
    pytest.param(sim, w, id=f"w{w}-{sim}",
                 # Verilator builds: one width in CI, the edge widths in the soak set
                 marks=[pytest.mark.soak] if sim == "verilator" and w != 16 else [])
    for w in (1, 16, 70) for sim in SIMS])
def test_kit_passes(sim, width):
    params = {"width": width}
    result = runner.run("kit", "fusionfabric.tb.kit.test_kit", params,
                        component=KitIncrement(**params), sim=sim, test_args={"count": 200})
    assert [t["status"] for t in result.tests] == ["passed"]
    summary = json.loads((result.test_dir / "summary.json").read_text())
    assert summary["seed"] == result.seed and summary["sim"] == sim
    assert (result.test_dir / "coverage.yml").exists()


@pytest.mark.cocotb
# Verilator: soak (CI runs the kit on Verilator in test_kit_passes and test_kit_waves)
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.soak)])
def test_kit_reports_mismatch_with_seed(sim):
    params = {"width": 16, "fault": "corrupt"}
    with pytest.raises(runner.CocotbFailure) as info:
        runner.run("kit", "fusionfabric.tb.kit.test_kit", params, component=KitIncrement(**params),
                   sim=sim, seed=12345, planted_fault=True)
    text = str(info.value)
    assert "seed 12345" in text and "SEED=12345" in text
    assert "kit: item #36 mismatch" in text  # the 37th word is the planted corruption


@pytest.mark.cocotb
def test_kit_watchdog_fires():
    params = {"width": 16, "fault": "stall"}
    with pytest.raises(runner.CocotbFailure) as info:
        runner.run("kit", "fusionfabric.tb.kit.test_kit", params, component=KitIncrement(**params),
                   sim="icarus", test_args={"stall_cycles": 100},
                   planted_fault=True)
    assert "no progress for 100 cycles" in str(info.value)
    assert "kit stall report: " in str(info.value)   # the watchdog's report hook


def test_build_dir_keyed_by_params(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    a, _ = runner.build_verilog("kit", {"width": 8}, component=KitIncrement(8))
    b, _ = runner.build_verilog("kit", {"width": 8}, component=KitIncrement(8))
    c, _ = runner.build_verilog("kit", {"width": 9}, component=KitIncrement(9))
    assert a == b and a != c
    assert "module top" in (a / "top.v").read_text()


def test_registry_verilog_is_shared_across_processes_until_a_source_changes(tmp_path,
                                                                           monkeypatch):
    """A registry block's Verilog, converted once under a build root, is found again by a
    process that has not converted it (this process's memo cleared, the block's factory
    made to fail); a different source key converts afresh, into the same directory when
    the text is the same."""
    from fusionfabric.rtl.blocks import get_block
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(runner, "_BUILT", {})
    first, _ = runner.build_verilog("crc", {"data_width": 16})
    text = (first / "top.v").read_text()
    assert "module top" in text

    block = get_block("crc")
    calls = []

    def counted(**params):
        calls.append(params)
        return build(**params)
    build = block.build
    monkeypatch.setattr(type(block), "build", lambda self, **p: counted(**p))
    runner._BUILT.clear()
    again, _ = runner.build_verilog("crc", {"data_width": 16})
    assert again == first and calls == []
    other, _ = runner.build_verilog("crc", {"data_width": 32})
    assert other != first and len(calls) == 1

    runner._BUILT.clear()
    monkeypatch.setattr(runner, "source_key", lambda: "edited")
    fresh, _ = runner.build_verilog("crc", {"data_width": 16})
    assert len(calls) == 2 and fresh == first and (fresh / "top.v").read_text() == text


def test_inorder_scoreboard():
    sb = InOrderScoreboard("sb", seed=7)
    sb.expect_many([1, 2, 3])
    sb.observe(1)
    with pytest.raises(ScoreboardError, match=r"item #1 mismatch: got 0x5, expected 0x2 \(seed 7\)"):
        sb.observe(5)
    with pytest.raises(ScoreboardError, match="1 expected items never arrived"):
        sb.check_empty()
    with pytest.raises(ScoreboardError, match="unexpected"):
        InOrderScoreboard().observe(1)


def test_keyed_scoreboard():
    sb = KeyedScoreboard("xbar", seed=3)
    sb.expect((0, 1), "a")
    sb.expect((0, 1), "b")
    sb.expect((2, 1), "c")
    sb.observe((2, 1), "c")  # other keys may interleave
    sb.observe((0, 1), "a")
    with pytest.raises(ScoreboardError, match=r"xbar\[\(0, 1\)\]: item #1 mismatch"):
        sb.observe((0, 1), "c")
    with pytest.raises(ScoreboardError, match=r"unexpected"):
        sb.observe((3, 3), "z")
    empty = KeyedScoreboard()
    empty.check_empty()
    sb2 = KeyedScoreboard(seed=1)
    sb2.expect((1, 2), 9)
    with pytest.raises(ScoreboardError, match=r"\(1, 2\): 1"):
        sb2.check_empty()


@pytest.mark.cocotb
@pytest.mark.parametrize("sim", SIMS)
def test_kit_waves(sim):
    result = runner.run("kit", "fusionfabric.tb.kit.test_kit", {"width": 8}, component=KitIncrement(8),
                        sim=sim, waves=True, test_args={"count": 20})
    sim_dir = result.test_dir.parents[1]
    assert sim_dir.name == f"{sim}-waves"
    assert list(sim_dir.rglob("*.fst")), f"no FST trace under {sim_dir}"


def test_verilator_opt_level(monkeypatch):
    """FF_VERILATOR_OPT: -O0 by default, any -O level accepted, anything else named."""
    monkeypatch.delenv("FF_VERILATOR_OPT", raising=False)
    assert runner._top_opt() == "-O0"
    monkeypatch.setenv("FF_VERILATOR_OPT", "-Os")
    assert runner._top_opt() == "-Os"
    monkeypatch.setenv("FF_VERILATOR_OPT", "fast")
    with pytest.raises(ValueError, match="FF_VERILATOR_OPT='fast'"):
        runner._top_opt()
    with pytest.raises(ValueError, match="vpi='some'"):
        runner.run("kit", "fusionfabric.tb.kit.test_kit", vpi="some")


# -- the Amaranth-simulator stream driver (tb/common/amaranth_stream.py) --------------------
STREAM_CASES = {"full-rate": (0.0, 0.0), "idle": (0.4, 0.0), "backpressure": (0.0, 0.4),
                "idle-and-backpressure": (0.3, 0.3)}


def _words(seed, n=200, width=16):
    import numpy as np
    return [int(x) for x in np.random.default_rng(seed).integers(0, 1 << width, n)]


@pytest.mark.parametrize("idle,backpressure", STREAM_CASES.values(), ids=STREAM_CASES.keys())
def test_amaranth_stream_passes(idle, backpressure):
    """The registered +1 stage, against a reference written here: every word + 1, in
    order; at full rate one beat per cycle, with idle or backpressure fewer."""
    from fusionfabric.tb.common.amaranth_stream import (StreamReceiver, StreamSender,
                                                        run_stream)
    words = _words(1)
    got = run_stream(KitIncrement(16), "i_data", "o_data", words, len(words), seed=7,
                     idle=idle, backpressure=backpressure)
    assert got == [(w + 1) & 0xFFFF for w in words]
    # the same seed gives the same cycles; the beat cycles show the rate
    from amaranth.sim import Simulator
    dut = KitIncrement(16)
    tx = StreamSender(dut.i_data, words, seed=[7, 0], idle=idle)
    rx = StreamReceiver(dut.o_data, len(words), seed=[7, 1], backpressure=backpressure)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run, background=True)
    sim.add_testbench(rx.run)
    sim.run()
    assert rx.received == got and tx.sent == words
    span = rx.cycles[-1] - rx.cycles[0] + 1
    if idle == backpressure == 0:
        assert span == len(words)
    else:
        assert span > len(words) * (1 + max(idle, backpressure) / 2)


@pytest.mark.parametrize("fault,backpressure,error", [
    ("corrupt", 0.0, "mismatch"), ("stall", 0.0, "stalled"), ("drop", 0.3, "stalled")])
def test_amaranth_stream_sees_planted_faults(fault, backpressure, error):
    """Planted bugs in the +1 stage are caught: a corrupted word (compare), a stage that
    stops taking words (the receiver's stall check, seed in the message), and a stage that
    ignores ready (words lost, so the receiver starves) — only under backpressure."""
    from fusionfabric.tb.common.amaranth_stream import StreamStall, run_stream
    words = _words(2, 120)
    want = [(w + 1) & 0xFFFF for w in words]
    if error == "stalled":
        with pytest.raises(StreamStall, match=r"stalled: \d+ of 120 beats .*\(seed 5\)"):
            run_stream(KitIncrement(16, fault=fault), "i_data", "o_data", words, len(words),
                       seed=5, backpressure=backpressure, max_cycles=2000)
    else:
        got = run_stream(KitIncrement(16, fault=fault), "i_data", "o_data", words,
                         len(words), seed=5)
        assert got != want and sum(g != w for g, w in zip(got, want)) == 3  # words 37, 74, 111
    if fault == "drop":   # at full rate the bug does not show: backpressure is what finds it
        assert run_stream(KitIncrement(16, fault=fault), "i_data", "o_data", words,
                          len(words), seed=5) == want


def test_amaranth_stream_bad_arguments():
    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender
    dut = KitIncrement(16)
    with pytest.raises(ValueError, match=r"idle=1\.0 must be in \[0, 1\)"):
        StreamSender(dut.i_data, [1], idle=1.0)
    with pytest.raises(ValueError, match=r"backpressure=-0\.1"):
        StreamReceiver(dut.o_data, 1, backpressure=-0.1)
    with pytest.raises(ValueError, match="count=-1"):
        StreamReceiver(dut.o_data, -1)
    with pytest.raises(TypeError, match="not None"):
        StreamSender(dut.i_data, [1], seed=None)


def test_amaranth_stream_on_beat_sees_state_after_the_edge():
    """``on_beat`` runs right after the edge that took a beat: at full rate the registered
    +1 stage then shows that word + 1 on its output; the receiver's hook sees each beat
    in order. Planted fault: a stage that corrupts word 37 shows it in the sender's hook."""
    from amaranth.sim import Simulator

    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender
    words = _words(3, 60)

    def run(fault):
        dut = KitIncrement(16, fault=fault)
        seen_tx, seen_rx = [], []
        tx = StreamSender(dut.i_data, words, seed=[3, 0],
                          on_beat=lambda ctx, w: seen_tx.append(
                              (w, ctx.get(dut.o_data.valid), ctx.get(dut.o_data.payload))))
        rx = StreamReceiver(dut.o_data, len(words), seed=[3, 1],
                            on_beat=lambda ctx, w: seen_rx.append(w))
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tx.run, background=True)
        sim.add_testbench(rx.run)
        sim.run()
        return seen_tx, seen_rx, rx.received

    seen_tx, seen_rx, got = run("none")
    assert seen_tx == [(w, 1, (w + 1) & 0xFFFF) for w in words]
    assert seen_rx == got == [(w + 1) & 0xFFFF for w in words]
    bad_tx, _, _ = run("corrupt")
    assert bad_tx != seen_tx


def test_amaranth_stream_on_cycle_sees_every_edge():
    """``on_cycle(ctx, valid, ready)`` runs after every edge with the values sampled there.
    The sender's and the receiver's logs, edge by edge, must obey the +1 stage's ready
    rule written here (input ready exactly when the output register is empty or being
    taken: ``ready_in == (not valid_out) or ready_out``), count one beat per word, and
    count as many idle cycles as the sender's seeded idle draws. Planted fault: the stage
    that ignores ready breaks the rule in a cycle the check names (only with
    backpressure). ``stop_after`` ends the sender after that many edges."""
    from amaranth.sim import Simulator

    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender, StreamStall
    words = _words(4, 80)

    def run(fault, stop_after=None):
        dut = KitIncrement(16, fault=fault)
        tx_log, rx_log = [], []
        tx = StreamSender(dut.i_data, words, seed=[4, 0], idle=0.3, stop_after=stop_after,
                          on_cycle=lambda ctx, v, r: tx_log.append((v, r)))
        rx = StreamReceiver(dut.o_data, len(words) if stop_after is None else 0,
                            seed=[4, 1], backpressure=0.3, max_cycles=400,
                            on_cycle=lambda ctx, v, r: rx_log.append((v, r)))
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tx.run, background=stop_after is None)
        sim.add_testbench(rx.run, background=stop_after is not None)
        try:
            sim.run()
        except StreamStall:       # the stage that drops words starves the receiver
            assert fault == "drop"
        return tx, rx, tx_log, rx_log

    def rule_breaks(tx_log, rx_log):
        return [t for t, ((_, r_in), (v_out, r_out)) in enumerate(zip(tx_log, rx_log))
                if r_in != int((not v_out) or r_out)]

    tx, rx, tx_log, rx_log = run("none")
    assert len(tx_log) == tx.cycles and rx.cycles[-1] + 1 == len(rx_log)
    assert [t for t, (v, r) in enumerate(rx_log) if v and r] == rx.cycles
    assert sum(v and r for v, r in tx_log) == len(words)
    assert sum(v and r for v, r in rx_log) == len(words)
    import numpy as np
    draws = np.random.default_rng([4, 0])
    idles = 0
    for _ in words:
        while draws.random() < 0.3:
            idles += 1
    assert sum(not v for v, _ in tx_log) == idles
    assert rule_breaks(tx_log, rx_log) == []
    _, _, bad_tx, bad_rx = run("drop")
    assert rule_breaks(bad_tx, bad_rx), "the ready rule check missed a stage that ignores ready"
    tx, _, tx_log, _ = run("none", stop_after=25)
    assert len(tx_log) == tx.cycles == 25
    assert tx.sent == words[:len(tx.sent)] and len(tx.sent) == sum(v and r for v, r in tx_log)


def test_amaranth_stream_ready_schedule_and_idle_schedule():
    """A fixed ``ready`` schedule (a callable or a sequence) and fixed idle counts give
    exact beat cycles. Reference written here from the +1 stage's rule (one register,
    input ready when it is empty or being emptied): with the sender at full rate the
    output holds a word from cycle 1 on, so beat k leaves in the k-th cycle >= 1 with
    ``ready`` high, and the sender's words go in at cycle 0 and then with each beat out;
    with ``ready`` always high, word i goes in after ``sum(idle[:i + 1])`` idle cycles and
    comes out one cycle later. Planted fault: the stage that ignores ``ready`` loses words
    under the schedule, and the receiver's stall check names the seed."""
    from amaranth.sim import Simulator

    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender, StreamStall
    words = _words(6, 40)

    def run(fault, *, ready=None, idle=0.0, max_cycles=1000):
        dut = KitIncrement(16, fault=fault)
        took, ready_log = [], []
        tx = StreamSender(dut.i_data, words, seed=[6, 0], idle=idle,
                          on_beat=lambda ctx, w: took.append(tx.cycles - 1))
        rx = StreamReceiver(dut.o_data, len(words), seed=[6, 1], ready=ready,
                            max_cycles=max_cycles, quiet_cycles=4,
                            on_cycle=lambda ctx, v, r: ready_log.append(r))
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tx.run, background=True)
        sim.add_testbench(rx.run)
        sim.run()
        return took, rx, ready_log

    def every_third(cycle):
        return cycle % 3 != 1

    want = [t for t in range(1, 200) if every_third(t)][:len(words)]
    for ready in (every_third, [every_third(t) for t in range(100)]):
        took, rx, ready_log = run("none", ready=ready)
        assert rx.received == [(w + 1) & 0xFFFF for w in words]
        assert rx.cycles == want
        assert took == [0] + want[:-1]
        assert ready_log == [int(every_third(t)) for t in range(len(ready_log))]
    idle = [2, 0, 0, 3, 1] * 8
    took, rx, _ = run("none", idle=idle)
    starts = [sum(idle[:i + 1]) + i for i in range(len(words))]
    assert took == starts and rx.cycles == [t + 1 for t in starts]
    with pytest.raises(StreamStall, match=r"stalled: \d+ of 40 beats .*\(seed \[6, 1\]\)"):
        run("drop", ready=every_third, max_cycles=300)
    took, rx, _ = run("drop", ready=lambda c: True)       # full rate hides the bug
    assert rx.received == [(w + 1) & 0xFFFF for w in words]


def test_amaranth_stream_schedule_bad_arguments():
    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender
    dut = KitIncrement(16)
    with pytest.raises(ValueError, match="backpressure=0.2 and a ready schedule"):
        StreamReceiver(dut.o_data, 1, backpressure=0.2, ready=[1, 0])
    with pytest.raises(TypeError, match="ready=5 must be a callable"):
        StreamReceiver(dut.o_data, 1, ready=5)
    with pytest.raises(ValueError, match="idle count -1 must be >= 0"):
        StreamSender(dut.i_data, [1, 2], idle=[0, -1])
    with pytest.raises(TypeError, match="idle=None must be a probability"):
        StreamSender(dut.i_data, [1], idle=None)


def test_amaranth_stream_receiver_without_count():
    """``count=None`` takes every beat offered during ``max_cycles`` cycles and ends then,
    with no stall error. Reference written here from the +1 stage's rule: with ``ready``
    high and the sender at full rate, word i comes out at cycle i + 1, so a 30-cycle run
    sees exactly the first 29 words + 1; an 80-cycle run sees all 40 and nothing more.
    Planted fault: the corrupting stage differs in word 37."""
    from amaranth.sim import Simulator

    from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender
    words = _words(8, 40)

    def run(fault, cycles):
        dut = KitIncrement(16, fault=fault)
        tx = StreamSender(dut.i_data, words, seed=[8, 0])
        rx = StreamReceiver(dut.o_data, None, seed=[8, 1], max_cycles=cycles)
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tx.run, background=True)
        sim.add_testbench(rx.run)
        sim.run()
        return rx

    want = [(w + 1) & 0xFFFF for w in words]
    rx = run("none", 30)
    assert rx.received == want[:29] and rx.cycles == list(range(1, 30))
    assert run("none", 80).received == want
    assert run("corrupt", 80).received != want


def test_amaranth_stream_sender_on_a_port_without_ready():
    """A port with ``valid`` and ``payload`` and no ``ready`` takes a beat in every cycle
    ``valid`` is high. Reference written here: a register that copies the payload when
    valid is high shows word i one edge after it is sent, and word i goes in after
    ``sum(idle[:i + 1])`` idle cycles; the sender's hooks see exactly that."""
    from types import SimpleNamespace

    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from fusionfabric.tb.common.amaranth_stream import StreamSender
    words = _words(9, 30)
    idle = [1, 0, 2] * 10
    port = SimpleNamespace(valid=Signal(), payload=Signal(16))
    reg, count = Signal(16), Signal(8)
    m = Module()
    with m.If(port.valid):
        m.d.sync += [reg.eq(port.payload), count.eq(count + 1)]
    seen, idle_edges = [], []
    tx = StreamSender(port, words, idle=idle,
                      on_beat=lambda ctx, w: seen.append((w, ctx.get(reg), tx.cycles - 1)),
                      on_cycle=lambda ctx, v, r: idle_edges.append(tx.cycles - 1)
                      if not v else None)
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tx.run)
    sim.run()
    starts = [sum(idle[:i + 1]) + i for i in range(len(words))]
    assert seen == [(w, w, t) for w, t in zip(words, starts)]
    assert len(idle_edges) == sum(idle) and tx.sent == words
