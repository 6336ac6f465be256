"""Amaranth-simulator tests of the PCS RTL: the block-lock FSM against hand-derived
expectations (IEEE 802.3 Figure 49-12/49-13 semantics), pcs-tx block for block against
sim.pcs.transmit, pcs-rx register for register against sim.pcs.Receiver."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.rtl.pcs import BlockLock, PcsRx, PcsTx
from fusionfabric.sim import pcs
from fusionfabric.tb.common.lanes import LaneChannel
from fusionfabric.tb.pcs.harness import (channel_inputs, compare_rx_amaranth, compare_tx_amaranth,
                            tx_lane_rows, word_rows)

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")


def _stream(rng, headers, lead_bits=1, follow_slips=False):
    """A bit stream of ``lead_bits`` zeros then one 66-bit block per header value (random
    payload), cut into 66-bit chunks. ``follow_slips``: one extra bit after each block with
    an invalid header, so that a receiver that slips one bit at each of them (hunting) keeps
    testing the headers given here."""
    bits, pos = 0, lead_bits
    for h in headers:
        payload = int(rng.integers(0, 1 << 62)) << 2 | int(rng.integers(0, 4))
        bits |= (h | payload << 2) << pos
        pos += 66 + (follow_slips and h in (0, 3))
    n = -(-pos // 66) + 1
    return [(bits >> (66 * t)) & ((1 << 66) - 1) for t in range(n)]


def _run_lock(headers, ber_window=19531, follow_slips=False, cls=BlockLock):
    """Run BlockLock on blocks with the given sync headers, one bit late (the reset state
    makes the first block invalid, which slips the offset to 1); return per-cycle
    (lock, offset, slips, hi_ber) after each edge."""
    dut = cls(ber_window)
    chunks = _stream(np.random.default_rng(0), headers, follow_slips=follow_slips)
    out = []

    async def bench(ctx):
        for c in chunks:
            ctx.set(dut.i_chunk, c)
            await ctx.tick()
            out.append((ctx.get(dut.o_lock), ctx.get(dut.o_offset), ctx.get(dut.o_slips),
                        ctx.get(dut.o_hi_ber)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_lock_after_64_valid_headers():
    out = _run_lock([2, 1] * 40)
    # cycle 0 tests the all-zero reset block: invalid, unlocked -> SLIP to offset 1
    assert out[0][1:3] == (1, 1)
    # blocks 0..63 of the stream are tested in cycles 1..64: lock after the 64th
    assert [o[0] for o in out[:64]] == [0] * 64
    assert out[64][0] == 1 and out[64][2] == 1


def test_invalid_header_while_hunting_slips():
    heads = [2] * 63 + [0] + [1] * 70
    out = _run_lock(heads)
    # 63 valid then one invalid: no lock, slip to offset 2 (wrong alignment from then on)
    assert all(o[0] == 0 for o in out[:70])
    assert out[64][1] == 2 and out[64][2] == 2


def test_lose_lock_after_16_invalid_in_64():
    good = [2] * 64
    w1 = [0 if i < 15 else 2 for i in range(64)]          # 15 bad: keep lock
    w2 = [3 if i % 2 == 0 and i < 32 else 1 for i in range(64)]   # 16 bad: lose at the 16th
    out = _run_lock(good + w1 + w2)
    assert out[64][0] == 1
    base = 64 + 64
    assert all(o[0] == 1 for o in out[64:base + 1])         # window 1 survives with 15 bad
    sixteenth = base + 30 + 1                               # 16th bad header of window 2
    assert all(o[0] == 1 for o in out[base + 1:sixteenth])
    assert out[sixteenth][0] == 0 and out[sixteenth][1] == 2 and out[sixteenth][2] == 2


def _hunting_headers(seed, n_bad=10):
    """Valid headers with one invalid header after every 20 to 40 valid ones (seeded):
    never the 64 consecutive valid headers that lock needs."""
    rng = np.random.default_rng(seed)
    heads = []
    for _ in range(n_bad):
        heads += [int(h) for h in rng.choice([1, 2], int(rng.integers(20, 41)))]
        heads.append(int(rng.choice([0, 3])))
    return heads + [2] * int(rng.integers(20, 41))


def _check_hunting(out, heads, seed):
    """Lock never rises; every invalid header slips one bit (block k is tested in cycle
    k + 1, after the reset block's slip)."""
    bad = 1                                  # the reset block of cycle 0
    for k, h in enumerate(heads):
        bad += h in (0, 3)
        lock, offset, slips, _ = out[k + 1]
        assert lock == 0, f"lock rose at block {k} (seed {seed})"
        assert (offset, slips) == (bad, bad), f"block {k}: (offset, slips) = " \
            f"{(offset, slips)}, want {(bad, bad)} (seed {seed})"


class _LockKeepsGoodCount(BlockLock):
    """Planted fault: a slip while hunting leaves the count of headers (``sh_cnt``) as it
    was instead of clearing it, so valid headers add up across invalid ones."""

    def elaborate(self, platform):
        from fusionfabric.rtl.pcs import lock as lock_mod
        made, real = {}, lock_mod.Signal

        def signal(*args, src_loc_at=0, **kw):
            sig = real(*args, src_loc_at=src_loc_at + 1, **kw)
            made[sig.name] = sig
            return sig

        lock_mod.Signal = signal
        try:
            m = super().elaborate(platform)
        finally:
            lock_mod.Signal = real
        sh_cnt, valid = made["sh_cnt"], made["valid"]
        with m.If(~valid & ~self.o_lock):
            m.d.sync += sh_cnt.eq(sh_cnt)     # the later assignment wins
        return m


@pytest.mark.parametrize("seed", [1, 2])
def test_window_with_some_bad_headers_does_not_lock(seed):
    """While hunting, an invalid header every 20-40 blocks (fewer than the 64 consecutive
    valid headers of LOCK_WINDOW) slips one bit each time and restarts the count: no lock.
    Clean headers after that still lock."""
    heads = _hunting_headers(seed)
    out = _run_lock(heads, follow_slips=True)
    _check_hunting(out, heads, seed)
    last_bad = max(k for k, h in enumerate(heads) if h in (0, 3))
    out = _run_lock(heads + [2] * 64, follow_slips=True)
    lock = [o[0] for o in out]
    assert lock.index(1) == last_bad + 1 + 64, f"seed {seed}"   # 64 valid after the last


def test_hunting_check_catches_a_lock_that_keeps_its_count():
    """Planted fault: a lock that does not clear its header count at a slip locks on the
    same stream, and the check above fails."""
    heads = _hunting_headers(1)
    _check_hunting(_run_lock(heads, follow_slips=True), heads, 1)
    with pytest.raises(AssertionError, match=r"lock rose at block \d+ \(seed 1\)"):
        _check_hunting(_run_lock(heads, follow_slips=True, cls=_LockKeepsGoodCount), heads, 1)


def test_hi_ber_flag():
    good = [2] * 64
    eight_bad = [0 if i < 8 else 2 for i in range(64)]
    heads = good + eight_bad + eight_bad + [2] * 200
    out = _run_lock(heads, ber_window=160)
    lock_at = 64
    assert out[lock_at][0] == 1
    # the BER window starts the cycle after lock; the 16th bad header is block 64+64+7
    sixteenth = 64 + 64 + 7 + 1
    assert out[sixteenth - 1][3] == 0 and out[sixteenth][3] == 1
    assert all(o[0] == 1 for o in out[lock_at:])      # 8 per lock window keeps lock
    # first BER window ends at lock_at + 160: it had 16 -> stays high; the next window
    # (clean) ends 160 later and clears the flag
    assert out[lock_at + 160][3] == 1
    assert out[lock_at + 320 - 1][3] == 1 and out[lock_at + 320][3] == 0


@pytest.mark.parametrize("n_lanes,am_period,width", [(1, 4, 66), (3, 7, 66), (4, 16, 66),
                                                    (1, 4, 32), (3, 7, 64), (4, 16, 32)],
                         ids=lambda v: str(v))
def test_tx_matches_model(n_lanes, am_period, width):
    words = compare_tx_amaranth(PcsTx(n_lanes, am_period, width),
                                np.random.default_rng(n_lanes), 120)
    assert words >= 119


RX_CASES = {
    "1lane": dict(n=1, P=16, S=2, events=lambda rng, n: {200: lambda c: c.slip(0, 5)}),
    "2lanes-skew-swap-slip": dict(n=2, P=16, S=3, skew=[0, 2], perm=[1, 0],
                                  events=lambda rng, n: {300: lambda c: c.slip(1, 40)}),
    "3lanes-errors-hold": dict(n=3, P=20, S=2, skew=[1, 0, 0], perm=[2, 0, 1],
                               events=lambda rng, n: {250: lambda c: c.set_ber(3e-3),
                                                      330: lambda c: c.set_ber(0),
                                                      400: lambda c: c.hold(1, 0),
                                                      470: lambda c: c.hold(1, None)}),
}


RX_CASES.update({
    # bit errors long enough that marker rows fail the check while the link is up
    # (realign one cycle after the marker row), and it must come back
    "3lanes-ber-realign": dict(n=3, P=20, S=2, skew=[1, 0, 0], perm=[2, 0, 1], realign=True,
                               events=lambda rng, n: {250: lambda c: c.set_ber(3e-3),
                                                      480: lambda c: c.set_ber(0)}),
    "1lane-w32-slip": dict(n=1, P=16, S=2, width=32,
                           events=lambda rng, n: {500: lambda c: c.slip(0, 5)}),
    "3lanes-w64-skew-perm-slip": dict(n=3, P=16, S=3, width=64, skew=[0, 2, 1],
                                      perm=[2, 0, 1],
                                      events=lambda rng, n: {330: lambda c: c.slip(1, -40)}),
    "2lanes-w32-errors-hold": dict(n=2, P=20, S=3, width=32, skew=[3, 0], perm=[1, 0],
                                   events=lambda rng, n: {520: lambda c: c.set_ber(3e-3),
                                                          640: lambda c: c.set_ber(0),
                                                          700: lambda c: c.hold(1, 0),
                                                          800: lambda c: c.hold(1, None)}),
})


@pytest.mark.parametrize("case", list(RX_CASES))
def test_rx_matches_model_every_cycle(case):
    c = RX_CASES[case]
    n, P, S, W = c["n"], c["P"], c["S"], c.get("width", 66)
    rng = np.random.default_rng(sum(map(ord, case)))
    words, rows = tx_lane_rows(rng, n, P, 620 if W == 66 else 1280 * W // 66)
    rows = word_rows(rows, W)
    ch = LaneChannel(n, W, rng, slack=1 if W == 66 else 3)
    for k, s in enumerate(c.get("skew", [])):
        ch.skew(k, s)
    if "perm" in c:
        ch.permute(c["perm"])
    events = c["events"](rng, n)
    inputs = channel_inputs(rng, rows, ch, events)
    model = pcs.make_receiver(n, P, S, 64, W)
    trace = compare_rx_amaranth(PcsRx(n, P, S, 64, W), model, inputs)
    assert sum(t["valid"] for t in trace) > 100        # data flowed
    assert trace[-1]["link_up"] == 1                    # and came back after the faults
    if c.get("realign"):   # a failed marker-row check while the link was up
        assert any(b["align_failures"] > a["align_failures"] and a["link_up"]
                   for a, b in zip(trace, trace[1:]))
    # the rows delivered after the last link-up and the last fault are the sent words
    last_up = max(t for t, x in enumerate(trace) if not x["link_up"]) + 1
    start = max(last_up, max(events) + 100)
    got = [w for x in trace[start:] if x["valid"] for w in x["words"]]
    assert len(got) >= 20 * n
    j = next(i for i, w in enumerate(got) if w[1] == 0)    # a data word (random, unique)
    i0 = words.index(got[j]) - j
    assert got == words[i0:i0 + len(got)], f"{case}: delivered words out of order"


def test_blocks_registered_and_validated():
    assert get_block("pcs-tx").build(n_lanes=2, am_period=8).n_lanes == 2
    assert get_block("pcs-rx").build(n_lanes=2, am_period=16, max_skew=2).max_skew == 2
    with pytest.raises(BlockError, match="max_skew"):
        get_block("pcs-rx").build(n_lanes=2, am_period=8, max_skew=4)
    with pytest.raises(BlockError, match="serdes_width"):
        get_block("pcs-tx").build(serdes_width=48)
    with pytest.raises(BlockError, match="serdes_width"):
        get_block("pcs-rx").build(serdes_width=40)
    assert get_block("pcs-tx").build(serdes_width=32).serdes_width == 32
    assert get_block("pcs-rx").build(n_lanes=2, serdes_width=64).serdes_width == 64
    with pytest.raises(ValueError, match="serdes_width=65"):
        PcsRx(2, 16, 2, 64, 65)
    with pytest.raises(ValueError, match="n_lanes=21"):
        PcsTx(21, 8)


@pytest.mark.parametrize("descrambler", [False, True], ids=["scramble", "descramble"])
def test_word_level_step_matches_shared_scrambler(descrambler):
    """fusionfabric.rtl.pcs.common's word-level 64-bit (de)scrambler step against the project's scrambler
    model (sim.scrambler, cl. 49.2.6), on random words and states."""
    from amaranth.hdl import Module, Signal

    from fusionfabric.rtl.pcs.common import descramble64, scramble64
    from fusionfabric.sim import scrambler

    def rev58(x):
        return int(f"{x:058b}"[::-1], 2)

    m = Module()
    c, x = Signal(58), Signal(64)
    out_s, nxt_s = Signal(64), Signal(58)
    out, nxt = (descramble64 if descrambler else scramble64)(c, x)
    m.d.comb += [out_s.eq(out), nxt_s.eq(nxt)]
    rng = np.random.default_rng(3)
    fn = scrambler.descramble if descrambler else scrambler.scramble

    async def bench(ctx):
        for _ in range(200):
            state = int.from_bytes(rng.bytes(8), "little") & ((1 << 58) - 1)
            word = int.from_bytes(rng.bytes(8), "little")
            ctx.set(c, rev58(state))     # the RTL keeps the history in time order
            ctx.set(x, word)
            (want,), want_state = fn([word], 64, state)
            assert ctx.get(out_s) == want
            assert ctx.get(nxt_s) == rev58(want_state)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


# -- gearboxes (serdes_width 32/64) ---------------------------------------------------------
def _rand66(rng):
    return int.from_bytes(rng.bytes(9), "little") & ((1 << 66) - 1)


@pytest.mark.parametrize("width", [32, 64])
def test_tx_gearbox_matches_serialize(width):
    """TxGearbox on random blocks: the take pattern is sim.pcs.tx_takes and the words are
    sim.pcs.serialize of the blocks taken, word for word."""
    from fusionfabric.rtl.pcs import TxGearbox

    n, cycles = 3, 300
    dut = TxGearbox(n, width)
    rng = np.random.default_rng([width, 1])
    taken, got, takes = [[] for _ in range(n)], [], []

    async def bench(ctx):
        for _ in range(cycles):
            blocks = [_rand66(rng) for _ in range(n)]
            for k in range(n):
                ctx.set(dut.i_blocks[k], blocks[k])
            take = ctx.get(dut.o_take)
            takes.append(take)
            if take:
                for k in range(n):
                    taken[k].append(blocks[k])
            await ctx.tick()
            got.append([ctx.get(dut.o_lanes[k]) for k in range(n)])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert takes == list(pcs.tx_takes(width, cycles))
    assert abs(sum(takes) - cycles * width / 66) <= 1
    words = [pcs.serialize(taken[k], width) for k in range(n)]
    assert len(words[0]) >= cycles
    for t in range(cycles):
        assert got[t] == [words[k][t] for k in range(n)], f"W={width} cycle {t}"


@pytest.mark.parametrize("width", [32, 64])
def test_rx_gearbox_chunks(width):
    """RxGearbox on a random word stream: the i-th chunk is stream bits [66i, 66i + 66),
    registered one cycle after its last bit arrived (sim.pcs.RxGearbox, cycle for cycle)."""
    from fusionfabric.rtl.pcs import RxGearbox

    n, cycles = 2, 300
    dut = RxGearbox(n, width)
    model = pcs.RxGearbox(n, width)
    rng = np.random.default_rng([width, 2])
    stream = [0] * n
    chunks = [[] for _ in range(n)]

    async def bench(ctx):
        for t in range(cycles):
            words = [int.from_bytes(rng.bytes(8), "little") & ((1 << width) - 1)
                     for _ in range(n)]
            for k in range(n):
                ctx.set(dut.i_lanes[k], words[k])
                stream[k] |= words[k] << (t * width)
            await ctx.tick()
            model.step(words)
            assert ctx.get(dut.o_valid) == model.valid
            if model.valid:
                for k in range(n):
                    assert ctx.get(dut.o_chunks[k]) == model.chunk[k]
                    chunks[k].append(model.chunk[k])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for k in range(n):
        assert len(chunks[k]) == cycles * width // 66
        for i, c in enumerate(chunks[k]):
            assert c == (stream[k] >> (66 * i)) & ((1 << 66) - 1), f"lane {k} chunk {i}"


@pytest.mark.parametrize("width", [32, 64])
def test_gearbox_block_lock_all_slips(width):
    """RxGearbox + BlockLock (clock-enabled by the gearbox) on 66 lanes of valid blocks,
    lane k starting k bits late: every lane locks at offset k and delivers its blocks in
    order. Then lane k slips k more bits (1..65; lane 0 none): every slipped lane loses lock,
    relocks at offset 2k mod 66 and delivers its blocks in order again."""
    from amaranth.hdl import EnableInserter, Module, Signal

    from fusionfabric.rtl.pcs import RxGearbox

    n = 66
    rng = np.random.default_rng([width, 3])
    n_blocks = 700
    blocks = [[(2 if rng.random() < 0.7 else 1) | (_rand66(rng) >> 2) << 2
               for _ in range(n_blocks)] for _ in range(n)]
    slip_at = 330     # block index before which lane k gets k more bits
    streams = []
    for k in range(n):
        s, pos = 0, k                       # k leading random bits
        s |= int(rng.integers(0, 1 << 62)) & ((1 << k) - 1)
        for i, b in enumerate(blocks[k]):
            if i == slip_at:
                s |= (int.from_bytes(rng.bytes(9), "little") & ((1 << k) - 1)) << pos
                pos += k
            s |= b << pos
            pos += 66
        streams.append(s)
    cycles = n_blocks * 66 // width - 4
    m = Module()
    gb = m.submodules.gb = RxGearbox(n, width)
    locks = []
    for k in range(n):
        bl = EnableInserter(gb.o_valid)(BlockLock(10_000))
        m.submodules[f"lock{k}"] = bl
        m.d.comb += bl.i_chunk.eq(gb.o_chunks[k])
        locks.append(bl)
    stepped = Signal()
    m.d.sync += stepped.eq(gb.o_valid)
    seen = [[[], []] for _ in range(n)]     # per lane, per phase: (offset, block) while ok
    lock_trace = [[] for _ in range(n)]
    mask = (1 << width) - 1

    async def bench(ctx):
        for t in range(cycles):
            for k in range(n):
                ctx.set(gb.i_lanes[k], (streams[k] >> (t * width)) & mask)
            await ctx.tick()
            if not ctx.get(stepped):
                continue
            for k in range(n):
                lk = ctx.get(locks[k].o_lock)
                lock_trace[k].append(lk)
                if ctx.get(locks[k].o_ok) and lk:    # (not the block that lost lock)
                    phase = 0 if t * width < (slip_at - 20) * 66 else 1
                    seen[k][phase].append((ctx.get(locks[k].o_offset),
                                           ctx.get(locks[k].o_block)))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    def in_order(k, pairs, offset):
        assert pairs, f"W={width} lane {k}: never locked"
        # the last lock episode: the offset and an in-order run of the lane's blocks
        assert pairs[-1][0] == offset, f"W={width} lane {k}: offset {pairs[-1][0]} != {offset}"
        run = [b for o, b in pairs if o == offset]
        i0 = blocks[k].index(run[-1]) - len(run) + 1
        assert run == blocks[k][i0:i0 + len(run)], f"W={width} lane {k}: blocks out of order"

    for k in range(n):
        in_order(k, seen[k][0], k)
        in_order(k, seen[k][1], (2 * k) % 66)
        tr = np.array(lock_trace[k])
        mid = slip_at - 25
        if k:
            assert (tr[mid:] == 0).any(), f"W={width} lane {k}: slip of {k} bits kept lock"
        else:
            assert (tr[250:] == 1).all()    # lane 0 hunts through all 66 offsets first
        assert tr[-1] == 1
