"""fusionfabric.rtl.bist in Amaranth's simulator: the generator's flits equal the sim.bist model bit for
bit, and the checker counts zero errors on clean traffic and exactly the injected ones."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.bist import TrafficCheck, TrafficGen
from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.sim.bist import TrafficCheckModel, TrafficGenModel
from fusionfabric.formats.switch import switch_flit
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _collect(dut, n_flits, load, ready_prob, seed, budget=0, quiet=0):
    """Run ``dut`` (a TrafficGen) with StreamReceiver (ready low with probability
    ``1 - ready_prob``, from ``seed``) for ``n_flits`` flits, then ``quiet`` cycles with
    ready high in which no flit may come; return (flits, final counters), ``info["cycles"]``
    being the cycle after the last flit."""
    rx = StreamReceiver(dut.o_flit, n_flits, seed=seed, backpressure=1.0 - ready_prob,
                        max_cycles=50 * n_flits + 200, quiet_cycles=quiet)
    info = {}

    async def bench(ctx):
        ctx.set(dut.i_load, load)
        ctx.set(dut.i_budget, budget)
        ctx.set(dut.i_enable, 1)
        await rx.run(ctx)
        ctx.set(dut.o_flit.ready, 0)
        await ctx.tick()
        info["cycles"] = rx.cycles[-1] + 1 if rx.cycles else 0
        info["flits"] = ctx.get(dut.o_flits)
        info["packets"] = ctx.get(dut.o_packets)
        info["next_seq"] = [ctx.get(dut.o_next_seq[i]) for i in range(dut.n_ports)]
        info["started"] = ctx.get(dut.o_started)
        info["done"] = ctx.get(dut.o_done)

    _run(dut, bench)
    return rx.received, info


GEN_CASES = {
    "w64-p4-uniform": dict(data_width=64, n_ports=4, port=1, max_len=4, seed=7),
    "w40-p3-len1": dict(data_width=40, n_ports=3, port=2, max_len=1, seed=1),
    "w100-p5-perm": dict(data_width=100, n_ports=5, port=4, max_len=9,
                         pattern="permutation", offset=3, seed=0xDEADBEEF),
    "w64-p1": dict(data_width=64, n_ports=1, port=0, max_len=256, seed=2),
}


@pytest.mark.parametrize("params", GEN_CASES.values(), ids=GEN_CASES.keys())
def test_generator_matches_model(params):
    n = 150
    got, info = _collect(TrafficGen(**params), n, load=160, ready_prob=0.7, seed=11)
    assert len(got) == n
    model = TrafficGenModel(**params)
    want = []
    while len(want) < n:
        want += model.flits(1)
    assert got == want[:n]
    # the counters (read one cycle after the last handshake) agree with the flits seen
    lay = switch_flit(params["data_width"])
    lasts = sum(lay.unpack(w)["last"] for w in got)
    assert info["flits"] == n and info["packets"] == lasts


def test_generator_line_rate_and_budget():
    params = dict(data_width=64, n_ports=4, port=0, max_len=5, seed=3)
    model = TrafficGenModel(**params)
    pkts = model.packets(20)
    total = sum(p.length for p in pkts)
    got, info = _collect(TrafficGen(**params), total, load=256, ready_prob=1.0, seed=0,
                         budget=20)
    # first flit valid the cycle after enable, then one flit per cycle, no bubbles
    assert info["cycles"] == total + 1
    assert got == model.flits_of(pkts)
    assert info["done"] == 1 and info["started"] == 20 and info["packets"] == 20
    assert info["next_seq"] == model.next_seq


def test_generator_load_zero_sends_nothing():
    got, info = _collect(TrafficGen(data_width=64), 0, load=0, ready_prob=1.0, seed=0,
                         quiet=250)
    assert got == [] and info["started"] == 0


def _feed_checker(dut, words, stall, idle, seed):
    """Drive ``words`` into a TrafficCheck with StreamSender (an idle cycle before a word
    with probability ``idle``, from ``seed``); return its counters and the cycles with
    valid high and ready low (``"stalled"``)."""
    out = {"stalled": 0}

    def on_cycle(ctx, valid, ready):
        out["stalled"] += bool(valid and not ready)

    tx = StreamSender(dut.i_flit, words, seed=seed, idle=idle, on_cycle=on_cycle)

    async def bench(ctx):
        ctx.set(dut.i_stall, stall)
        await tx.run(ctx)
        # the last handshake completes at the edge ending cycle t; two more edges put us
        # in cycle t+3, the documented latency of the counters (t+2 would miss it)
        await ctx.tick().repeat(2)
        for name in ("packets", "flits", "seq_errors", "data_errors", "framing_errors"):
            out[name] = ctx.get(getattr(dut, "o_" + name))
        out["expected"] = [ctx.get(dut.o_expected[i]) for i in range(dut.n_ports)]

    _run(dut, bench)
    return out


N_PORTS, PORT, W = 4, 2, 64


def _packets():
    gens = [TrafficGenModel(W, N_PORTS, s, max_len=4, seed=21) for s in range(N_PORTS)]
    queues = [[g.flits_of([p]) for p in g.packets(40) if p.dest == PORT] for g in gens]
    rng = np.random.default_rng(4)
    out = []
    while any(queues):
        live = [q for q in queues if q]
        out.append(live[rng.integers(len(live))].pop(0))
    return out, gens


LAY = switch_flit(W)


def _drop(ps):
    ps.pop(5)


def _dup(ps):
    ps.insert(6, list(ps[5]))


def _flip(ps):
    ps[7][-1] ^= 1 << 50


def _lose_last(ps):
    ps[8][-1] &= ~(1 << LAY.offsets["last"])


def _lose_first(ps):
    ps[9][0] &= ~(1 << LAY.offsets["first"])


INJECT = {  # name: (mutation, (seq, data, framing) errors it must produce)
    "clean": (None, (0, 0, 0)),
    "drop": (_drop, (1, 0, 0)),
    "duplicate": (_dup, (1, 0, 0)),
    "flip-bit": (_flip, (0, 1, 0)),
    "lose-last": (_lose_last, (0, 0, 1)),
    "lose-first": (_lose_first, (0, 0, 1)),
}


@pytest.mark.parametrize("stall", [0, 100], ids=["always-ready", "stall100"])
@pytest.mark.parametrize("case", INJECT, ids=INJECT.keys())
def test_checker_counts_exactly_the_injected_errors(case, stall):
    mutate, want = INJECT[case]
    packets, gens = _packets()
    packets = [list(p) for p in packets]
    if mutate:
        mutate(packets)
    words = [w for p in packets for w in p]
    got = _feed_checker(TrafficCheck(W, N_PORTS, PORT, seed=5), words, stall, 0.2, seed=9)
    assert (got["seq_errors"], got["data_errors"], got["framing_errors"]) == want
    assert got["flits"] == len(words)
    model = TrafficCheckModel(W, N_PORTS, PORT).feed(words)
    assert (got["packets"], got["expected"]) == (model.packets, model.expected)
    if case == "clean":
        assert got["expected"] == [g.next_seq[PORT] for g in gens]
        assert got["packets"] == len(packets)
    if stall:
        assert got["stalled"] > 0   # backpressure was really exercised


def test_registry_errors_name_the_value():
    with pytest.raises(BlockError, match="data_width=32"):
        get_block("bist-gen").build(data_width=32)
    with pytest.raises(BlockError, match="port=4"):
        get_block("bist-check").build(n_ports=4, port=4)
    with pytest.raises(BlockError, match="pattern='zipf'"):
        get_block("bist-gen").build(pattern="zipf")


# -- the RTL's GF(2) matrices (derived from the recurrence) against the model's (probed) ------
@pytest.mark.parametrize("k", [0, 1, 8, 31, 62])
def test_advance_matrix_matches_model(k):
    from fusionfabric.rtl.bist import advance_matrix as rtl_advance
    from fusionfabric.sim.bist import advance_matrix as model_advance
    assert np.array_equal(rtl_advance(k), model_advance(k))


@pytest.mark.parametrize("data_width", [40, 41, 64, 71, 128, 256])
def test_filler_matrix_matches_model(data_width):
    from fusionfabric.rtl.bist import filler_matrix as rtl_filler
    from fusionfabric.sim.bist import filler_matrix as model_filler
    m_rtl, c_rtl = rtl_filler(data_width)
    m_model, c_model = model_filler(data_width)
    assert m_rtl.shape == m_model.shape and np.array_equal(m_rtl, m_model)
    assert c_rtl == c_model


def test_matrix_comparison_catches_a_wrong_tap():
    """Planted fault: the recurrence with tap 27 instead of 28 must not match the model."""
    from fusionfabric.formats.bist import LFSR_ORDER
    from fusionfabric.rtl.hdl import shift_register_matrices
    from fusionfabric.sim.bist import advance_matrix as model_advance
    wrong = shift_register_matrices(LFSR_ORDER, (LFSR_ORDER, 27), 8, xor_input=False)[2]
    assert not np.array_equal(wrong, model_advance(8))
