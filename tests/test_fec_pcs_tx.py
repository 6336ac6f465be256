"""Amaranth-simulator tests of the FEC PCS transmitter against ``sim.fec_pcs.transmit``.

Random client words (data words, control words of the project block types with random
bodies, control words with unknown types) are offered with random valid gaps. The sent
word stream is rebuilt from the handshakes (a row at ``valid & ready``, an IDLE row at
``ready & ~valid``) and ``sim.fec_pcs.transmit`` of it must give exactly the symbols the
RTL put on its lanes, over at least two marker periods. Every stream is seeded; a failure
names the seed and the parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from fusionfabric.formats.pcs import BlockType, control_word
from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.fec.pcs_tx import FecPcsTx, plan
from fusionfabric.rtl.fec.transcode import scramble, transcode
from fusionfabric.sim import fec_pcs as model
from fusionfabric.sim import transcode as tc

IDLE = control_word(BlockType.IDLE)
TYPES = [int(t) for t in BlockType]


def random_words(rng, count):
    """``count`` words: ~half data, the rest control words of project types with random
    bodies and, one in eight, control words with a random (mostly unknown) type."""
    data = rng.integers(0, 1 << 63, size=count, dtype=np.uint64) * np.uint64(2) \
        + rng.integers(0, 2, size=count, dtype=np.uint64)
    ctrl = rng.random(count) < 0.5
    kind = rng.random(count)
    typ = np.where(kind < 0.875, rng.choice(TYPES, size=count),
                   rng.integers(0, 256, size=count)).astype(np.uint64)
    data = np.where(ctrl, (data & ~np.uint64(0xFF)) | typ, data)
    return data, ctrl


def run_tx(n_lanes, P, n_words, am_period, seed, periods=2, p_valid=0.7, idle_rerun=0):
    """Simulate ``periods`` marker periods; return (sent data, sent ctrl, lane symbols
    (n_lanes, T), dut, ready per cycle, ready per cycle of a rerun from reset with
    ``valid`` low for ``idle_rerun`` cycles)."""
    dut = FecPcsTx(n_lanes=n_lanes, symbols=P, n_words=n_words, am_period=am_period)
    B, S = dut.n_beats, dut.S
    cycles = dut.first_beat_cycle + periods * am_period * B
    rng = np.random.default_rng(seed)
    words_d, words_c = random_words(rng, cycles * n_words)
    valid = rng.random(cycles) < p_valid
    sent_d, sent_c = [], []
    got = [[] for _ in range(n_lanes)]
    ready_trace, rerun_trace = [], []
    rerun = [False]

    async def bench(ctx):
        if rerun[0]:
            ctx.set(dut.i_data.valid, 0)
            for t in range(idle_rerun):
                rerun_trace.append(ctx.get(dut.i_data.ready))
                await ctx.tick()
            return
        for t in range(cycles):
            ctx.set(dut.i_data.valid, int(valid[t]))
            for i in range(n_words):
                ctx.set(dut.i_data.payload[i].data, int(words_d[t * n_words + i]))
                ctx.set(dut.i_data.payload[i].ctrl, int(words_c[t * n_words + i]))
            ready = ctx.get(dut.i_data.ready)
            ready_trace.append(ready)
            if ready:
                for i in range(n_words):
                    if valid[t]:
                        sent_d.append(int(words_d[t * n_words + i]))
                        sent_c.append(bool(words_c[t * n_words + i]))
                    else:
                        sent_d.append(IDLE)
                        sent_c.append(True)
            if t >= dut.first_beat_cycle:
                for k in range(n_lanes):
                    w = ctx.get(dut.o_lanes[k])
                    got[k] += [(w >> (10 * j)) & 0x3FF for j in range(S)]
            await ctx.tick()
        dut.final_codewords = ctx.get(dut.o_codewords)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    if idle_rerun:
        rerun[0] = True
        sim.reset()
        sim.run()
    return (np.array(sent_d, dtype=np.uint64), np.array(sent_c, dtype=bool),
            np.array(got, dtype=np.int64), dut, ready_trace, rerun_trace)


def check_tx(n_lanes, P, n_words, am_period, seed, periods=2, idle_rerun=0):
    d, c, got, dut, ready, idle_ready = run_tx(n_lanes, P, n_words, am_period, seed, periods,
                                               idle_rerun=idle_rerun)
    want = model.transmit(d, c, n_lanes=n_lanes, am_period=am_period).lanes
    T = got.shape[1]
    ctx = f"seed={seed} n_lanes={n_lanes} P={P} n_words={n_words} am_period={am_period}"
    # every lane symbol sent is compared: `periods` whole marker periods of codewords
    assert T * n_lanes == periods * am_period * 544, ctx
    assert want.shape[1] >= T, ctx
    bad = np.argwhere(want[:, :T] != got)
    assert not bad.size, f"{ctx}: first mismatch (lane, symbol) {bad[0].tolist()}"
    assert dut.final_codewords == periods * am_period, ctx
    # ready follows the cycle count since reset alone: the same with valid low throughout
    assert ready[:idle_rerun] == idle_ready, ctx
    assert not idle_rerun or 0 < sum(idle_ready) < idle_rerun, ctx


# (n_lanes, P, n_words, am_period). The marker area takes 1, 1, 2 and 3 slots for 1, 2, 4
# and 8 lanes. The quick set is two designs (each elaborates an RS encoder, seconds of
# simulator compile): 8 lanes at P = 8 (start delay 0) and 2 lanes at P = 16 with 3 words
# per row (start delay 2, plan()). The soak set covers every lane count, P = 4, 8 and 16,
# n_words 1..4, marker periods 2..4 and start delays 0..2.
FAST = [(8, 8, 2, 2), (2, 16, 3, 2)]
SOAK = [(1, 8, 2, 2), (2, 8, 2, 3), (8, 8, 4, 2), (1, 8, 4, 3), (2, 8, 3, 2), (4, 8, 2, 4),
        (4, 8, 4, 3), (8, 8, 3, 4), (4, 16, 4, 2), (4, 16, 3, 3), (8, 16, 4, 2),
        (16, 16, 3, 2), (1, 16, 4, 2), (1, 4, 1, 2)]


def seed_of(n_lanes, P, n_words, am_period):
    return 1000 * n_lanes + 10 * P + n_words + 7 * am_period


@pytest.mark.parametrize("n_lanes,P,n_words,am_period", FAST)
def test_lanes_match_model(n_lanes, P, n_words, am_period):
    check_tx(n_lanes, P, n_words, am_period, seed_of(n_lanes, P, n_words, am_period),
             idle_rerun=120)


@pytest.mark.soak
@pytest.mark.parametrize("n_lanes,P,n_words,am_period", SOAK)
def test_lanes_match_model_soak(n_lanes, P, n_words, am_period):
    check_tx(n_lanes, P, n_words, am_period, seed_of(n_lanes, P, n_words, am_period),
             periods=3)


def test_transcode_and_scramble_match_model():
    """The combinational transcoder and the 257-bit scrambler against sim.transcode and
    sim.fec_pcs.scramble_bits, block by block from reset (seeded random words)."""
    rng = np.random.default_rng(77)
    nblk = 40
    d, c = random_words(rng, 4 * nblk)
    want_tc = tc.encode_words(d, c).reshape(nblk, 257)
    want_scr, _ = model.scramble_bits(want_tc.reshape(-1))
    want_scr = want_scr.reshape(nblk, 257)
    m = Module()
    words = [(Signal(64, name=f"d{i}"), Signal(name=f"c{i}")) for i in range(4)]
    state = Signal(58, init=(1 << 58) - 1)
    out_tc = transcode(m, words)
    out_scr, nxt = scramble(m, state, out_tc)
    m.d.sync += state.eq(nxt)

    def as_int(bits):
        return int("".join(str(int(b)) for b in bits[::-1]), 2)

    async def bench(ctx):
        for k in range(nblk):
            for i in range(4):
                ctx.set(words[i][0], int(d[4 * k + i]))
                ctx.set(words[i][1], int(c[4 * k + i]))
            assert ctx.get(out_tc) == as_int(want_tc[k]), f"block {k} transcode"
            assert ctx.get(out_scr) == as_int(want_scr[k]), f"block {k} scramble"
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("kwargs,name", [
    ({"n_lanes": 3}, "n_lanes=3"),
    ({"symbols": 7}, "symbols=7"),
    ({"n_lanes": 16, "symbols": 8}, "n_lanes=16"),
    ({"symbols": 16, "n_words": 2}, "n_words=2"),
    ({"n_words": 0}, "n_words=0"),
    ({"am_period": 1}, "am_period=1"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name) as info:
        FecPcsTx(**kwargs)
    disown_failed(info.value)


def test_plan_small():
    """The word buffer stays small for the usual rates (K blocks per cycle, C words, D
    start delay), and the quick set covers a start delay."""
    assert plan(2, 8, 2, 4096) == (1, 4, 0)
    assert plan(4, 16, 3, 4096) == (1, 10, 0)
    assert plan(2, 16, 3, 2) == (1, 10, 2)
    assert plan(1, 16, 4, 2) == (1, 8, 1)
