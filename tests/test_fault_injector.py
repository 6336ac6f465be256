"""LaneFault (rtl/fabric/fault.py) against the numpy model sim/faults.py, bit for bit.

The injector runs in the Amaranth simulator with random blocks, a high event rate, burst
lengths up to 64 bits (crossing 10-bit symbol and 66-bit block boundaries), slips, the
``i_dark`` level and timed dark-lane strobes (one restarted while running); every output
block, the flip counter and ``o_dark`` must equal the model's. The same recorded run is
then compared with models given a planted difference (burst one bit short, dark one
cycle short, one more cable stage, another seed), and the comparison must fail each time.
"""

import numpy as np
import pytest
from amaranth import ClockDomain, Module
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.fabric.fault import LaneFault, seed_values
from fusionfabric.sim import faults as F

N = 600
SEED = 20240611


def _stimulus(seed, n=N, max_burst=64, width=F.LANE_BITS):
    rng = np.random.default_rng(seed)
    s = {
        "blocks": rng.integers(0, 2, size=(n, width)).astype(bool),
        # about one event every 6 blocks
        "threshold": np.full(n, (1 << 32) // 6, dtype=np.int64),
        "burst_len": (rng.integers(11, max_burst + 1, n) if max_burst else np.zeros(n, int)),
        "slip_bits": np.zeros(n, dtype=np.int64),
        "dark": np.zeros(n, dtype=np.int64),
        "dark_start": np.zeros(n, dtype=np.int64),
        "dark_cycles": rng.integers(0, 1 << 20, n),     # ignored without a strobe
    }
    if max_burst:
        s["burst_len"][rng.integers(0, n, 20)] = rng.integers(0, 11, 20)  # 0..10 too
    s["threshold"][300:340] = 0                       # a quiet stretch
    s["slip_bits"][[120, 410]] = [7, width - 1]
    s["dark"][200:205] = 1
    for t, cycles in ((150, 30), (450, 40), (470, 9), (560, 0), (565, 3)):
        s["dark_start"][t], s["dark_cycles"][t] = 1, cycles   # 470 restarts, 560 ends
    return s


def _simulate(dut, s, timed=True, seeds=None, before=None):
    """``seeds``: ``(x, y)`` for a ``seed_ports`` injector, held on its ports through a
    reset cycle that precedes the stimulus; ``before``: an async function of the
    testbench context run first (no reset)."""
    n = len(s["blocks"])
    blocks = F.bits_to_ints(s["blocks"])
    rec = {"out": [], "flips": [], "dark": []}
    top = dut
    if seeds is not None:
        top = Module()
        top.domains.sync = cd = ClockDomain()
        top.submodules.dut = dut

    async def tb(ctx):
        if before is not None:
            await before(ctx)
        if seeds is not None:
            ctx.set(dut.i_seed_x, seeds[0])
            ctx.set(dut.i_seed_y, seeds[1])
            ctx.set(cd.rst, 1)
            await ctx.tick()
            ctx.set(cd.rst, 0)
        for t in range(n):
            ctx.set(dut.i_lane, blocks[t])
            ctx.set(dut.i_threshold, int(s["threshold"][t]))
            if hasattr(dut, "i_burst_len"):
                ctx.set(dut.i_burst_len, int(s["burst_len"][t]))
            ctx.set(dut.i_slip_valid, int(s["slip_bits"][t] != 0))
            ctx.set(dut.i_slip_bits, int(s["slip_bits"][t]))
            ctx.set(dut.i_dark, int(s["dark"][t]))
            if timed:
                ctx.set(dut.i_dark_start, int(s["dark_start"][t]))
                ctx.set(dut.i_dark_cycles, int(s["dark_cycles"][t]))
                rec["dark"].append(ctx.get(dut.o_dark))
            rec["out"].append(ctx.get(dut.o_lane))
            rec["flips"].append(ctx.get(dut.o_flips))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return rec


def _mismatch(rec, s, **model):
    """The first cycle where the recording differs from the model, or None."""
    out, flips = F.run_injector(s["blocks"], threshold=s["threshold"],
                                burst_len=s["burst_len"], slip_bits=s["slip_bits"],
                                dark=s["dark"], dark_start=s["dark_start"],
                                dark_cycles=s["dark_cycles"], **model)
    want = F.bits_to_ints(out)
    for t, (got, exp) in enumerate(zip(rec["out"], want)):
        if got != exp:
            return f"cycle {t}: o_lane {got:#019x}, model {exp:#019x}"
    for t, (got, exp) in enumerate(zip(rec["flips"], flips)):
        if got != int(exp):
            return f"cycle {t}: o_flips {got}, model {int(exp)}"
    return None


@pytest.fixture(scope="module")
def burst_run():
    s = _stimulus(SEED)
    dut = LaneFault(seed=11, latency=3, max_burst=64, dark_timer=True)
    return s, _simulate(dut, s)


def test_bursts_and_dark_lane_match_model(burst_run):
    s, rec = burst_run
    bad = _mismatch(rec, s, seed=11, latency=3)
    assert bad is None, f"{bad} (stimulus seed {SEED})"
    gate = F.dark_gate(N, 0, s["dark_start"], s["dark_cycles"])
    assert rec["dark"] == [int(g) for g in gate], f"o_dark differs (stimulus seed {SEED})"


def test_stimulus_covers_the_burst_shapes(burst_run):
    """The run has bursts that cross a block boundary, long and short ones, and dark
    stretches of the intended lengths (so the bit-exact check above covers them)."""
    s, _ = burst_run
    xs, ys = F.generator_streams(11, N)
    fire = xs.astype(np.int64) <= s["threshold"]
    pos = ((ys >> np.uint32(16)).astype(np.int64) * 66) >> 16
    length = np.maximum(s["burst_len"], 1)
    crossing = fire & (pos + length > 66)
    assert crossing.sum() >= 10 and (fire & (length >= 60)).any() and \
        (fire & (length <= 10)).any(), f"stimulus seed {SEED}"
    gate = F.dark_gate(N, 0, s["dark_start"], s["dark_cycles"])
    # 150 → 151..180; 450 restarted at 470 → 451..479; 560 ends it; 565 → 566..568
    runs = np.flatnonzero(np.diff(np.concatenate([[0], gate.astype(int), [0]])))
    assert runs.reshape(-1, 2).tolist() == [[151, 181], [451, 480], [566, 569]]


def test_dark_output_has_no_valid_sync_header(burst_run):
    s, rec = burst_run
    gate = F.dark_gate(N, s["dark"], s["dark_start"], s["dark_cycles"])
    for t in np.flatnonzero(gate):
        assert rec["out"][t] & 0b11 not in (0b01, 0b10), f"cycle {t}"


@pytest.mark.parametrize("plant", [
    {"seed": 11, "latency": 3, "burst_len": "short"},
    {"seed": 11, "latency": 3, "dark_cycles": "short"},
    {"seed": 11, "latency": 4},
    {"seed": 12, "latency": 3},
])
def test_planted_model_faults_are_caught(burst_run, plant):
    """The comparison is trusted because it fails on each planted difference."""
    s, rec = burst_run
    s = dict(s)
    plant = dict(plant)
    if plant.pop("burst_len", None):
        s["burst_len"] = np.maximum(s["burst_len"] - 1, 0)
    if plant.pop("dark_cycles", None):
        s["dark_cycles"] = np.maximum(s["dark_cycles"] - 1, 0)
    assert _mismatch(rec, s, **plant) is not None


def test_without_bursts_single_flips_match_model():
    """The injector built without the new features (the fabric's) is the model with
    single-bit events."""
    s = _stimulus(SEED + 1, max_burst=0)
    dut = LaneFault(seed=5, latency=2)
    rec = _simulate(dut, s, timed=False)
    s["dark_start"][:] = 0
    bad = _mismatch(rec, s, seed=5, latency=2, bursts=False)
    assert bad is None, f"{bad} (stimulus seed {SEED + 1})"


def test_seed_ports_match_the_model_after_a_reset():
    """With ``seed_ports`` (one module for lanes of different seeds, the split fabric) the
    generators load ``seed_values(seed)`` in reset and then run as the model of ``seed``;
    the pair of another seed does not."""
    s = _stimulus(SEED + 3, max_burst=0)
    s["dark_start"][:] = 0
    rec = _simulate(LaneFault(latency=2, seed_ports=True), s, timed=False,
                    seeds=seed_values(11))
    bad = _mismatch(rec, s, seed=11, latency=2, bursts=False)
    assert bad is None, f"{bad} (stimulus seed {SEED + 3})"
    other = _simulate(LaneFault(latency=2, seed_ports=True), s, timed=False,
                      seeds=seed_values(12))
    assert _mismatch(other, s, seed=11, latency=2, bursts=False) is not None


def test_seed_ports_before_any_reset_run_as_the_module_seed():
    """A flow that never resets a ``seed_ports`` injector sees defined generators: they
    start from its own ``seed``'s values (the ports, holding another seed's pair, are
    loaded only during a reset)."""
    s = _stimulus(SEED + 4, max_burst=0)
    s["dark_start"][:] = 0
    dut = LaneFault(seed=5, latency=2, seed_ports=True)
    async def hold_other_seed(ctx):
        ctx.set(dut.i_seed_x, seed_values(12)[0])
        ctx.set(dut.i_seed_y, seed_values(12)[1])

    rec = _simulate(dut, s, timed=False, before=hold_other_seed)
    bad = _mismatch(rec, s, seed=5, latency=2, bursts=False)
    assert bad is None, f"{bad} (stimulus seed {SEED + 4})"


def test_fec_lane_width_matches_model():
    """A 40-bit lane (a FEC lane of 4 symbols): bursts up to the lane width cross symbol
    and word boundaries, slips wrap at 40 bits; bit-exact with the model at width 40."""
    s = _stimulus(SEED + 2, max_burst=40, width=40)
    dut = LaneFault(seed=7, latency=1, max_burst=40, dark_timer=True, width=40)
    rec = _simulate(dut, s)
    bad = _mismatch(rec, s, seed=7, latency=1)
    assert bad is None, f"{bad} (stimulus seed {SEED + 2})"
    assert F.error_masks(7, N, s["threshold"], s["burst_len"], width=40)[:, :].any(axis=0).all()
    assert _mismatch(rec, s, seed=7, latency=0) is not None


def test_xorshift32_known_answer():
    """Marsaglia, "Xorshift RNGs" (J. Stat. Softw. 8(14), 2003): xor32 from
    y = 2463534242 returns 723471715 first."""
    assert int(F._xs(np.uint32(2463534242))) == 723471715


def test_burst_span():
    assert F.burst_span(60, 11) == (((1 << 6) - 1) << 60, (1 << 5) - 1)
    assert F.burst_span(0, 64) == ((1 << 64) - 1, 0)
    assert F.burst_span(65, 64) == (1 << 65, (1 << 63) - 1)
    with pytest.raises(ValueError, match="length=65"):
        F.burst_span(0, 65)
    with pytest.raises(ValueError, match="pos=66"):
        F.burst_span(66, 1)


@pytest.mark.parametrize("kw,exc,word", [
    ({"max_burst": 65}, ValueError, "max_burst=65"),
    ({"max_burst": -1}, ValueError, "max_burst=-1"),
    ({"max_burst": 2.5}, ValueError, "max_burst=2.5"),
    ({"dark_timer": 1}, TypeError, "dark_timer=1"),
    ({"latency": -2}, ValueError, "latency=-2"),
    ({"width": 7}, ValueError, "width=7"),
    ({"width": 40, "max_burst": 41}, ValueError, "max_burst=41"),
    ({"seed_ports": 1}, TypeError, "seed_ports=1"),
])
def test_bad_parameters(kw, exc, word):
    with pytest.raises(exc, match=word) as info:
        LaneFault(**kw)
    disown_failed(info.value)     # no UnusedElaboratable warning from the rejected object


@pytest.mark.parametrize("text", ["5", "a:3", "10:0", "-1:5", "1:2:3"])
def test_parse_dark_lane_rejects(text):
    with pytest.raises(ValueError, match="dark lane"):
        F.parse_dark_lane(text)
    assert F.parse_dark_lane("1000:3000") == (1000, 3000)
