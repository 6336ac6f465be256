"""iSLIP allocator (rtl/switch/islip.py) in the Amaranth simulator against the independent
integer-pointer reference sim.switch_ref.ISLIPReference, cycle by cycle."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.switch.islip import ISLIPAllocator, max_iterations
from fusionfabric.sim.switch_ref import ISLIPReference


def _run(n, iterations, cycles, density, seed):
    dut = ISLIPAllocator(n, iterations)
    ref = ISLIPReference(n, iterations)
    rng = np.random.default_rng(seed)
    seen_pairs = set()

    async def bench(ctx):
        for cyc in range(cycles):
            d = density if not isinstance(density, tuple) else rng.uniform(*density)
            req = rng.random((n, n)) < d
            for i in range(n):
                ctx.set(dut.i_req[i], int(sum(1 << o for o in range(n) if req[i][o])))
            got = []
            for i in range(n):
                v = ctx.get(dut.o_match[i])
                assert v & (v - 1) == 0, f"input {i} matched to several outputs {v:#x}"
                got.append(v.bit_length() - 1)
            want = ref.step(req)
            assert got == want, f"cycle {cyc}: match {got} != reference {want} (seed {seed})"
            for o in range(n):
                g = ctx.get(dut.o_grant[o])
                assert g == (1 << want.index(o) if o in want else 0)
            for i, o in enumerate(want):
                if o >= 0:
                    assert req[i][o]
                    seen_pairs.add((i, o))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen_pairs


@pytest.mark.parametrize("n,iterations", [(2, 1), (3, 1), (3, 2), (4, 1), (4, 2),
                                          (8, 1), (8, 3), (5, 3)],
                         ids=lambda v: str(v))
def test_islip_matches_reference(n, iterations):
    pairs = _run(n, iterations, cycles=300, density=(0.05, 1.0), seed=1000 + 10 * n + iterations)
    assert pairs == {(i, o) for i in range(n) for o in range(n)}


def test_islip_full_load_is_a_permutation():
    """Under full load, 1-iteration iSLIP desynchronizes its pointers and reaches a full
    match every cycle after a short warm-up (McKeown 1999, sec. IV)."""
    n = 4
    dut = ISLIPAllocator(n, 1)

    async def bench(ctx):
        for i in range(n):
            ctx.set(dut.i_req[i], (1 << n) - 1)
        full = 0
        for cyc in range(40):
            matched = sum(1 for i in range(n) if ctx.get(dut.o_match[i]))
            if cyc >= n:
                full += matched == n
            await ctx.tick()
        assert full == 40 - n

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_islip_rejects_bad_parameters():
    with pytest.raises(ValueError, match="iterations=4"):
        ISLIPAllocator(8, 4)
    with pytest.raises(ValueError, match="n_ports=1"):
        ISLIPAllocator(1, 1)
    assert max_iterations(72) == 7


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_round_robin_index_matches_reference(n):
    """The carry-free arbiter of the pipelined switch (binary pointer) and its pointer
    update against the paper's rule as ISLIPReference writes it: every request set of
    ``n`` bits (a random sample above 64) from every pointer."""
    from amaranth import Module, Signal

    from fusionfabric.rtl.switch.islip import next_pointer, round_robin_index

    ref = ISLIPReference(n, 1)
    m = Module()
    req = Signal(n)
    ptr = Signal(range(n))
    pick = Signal(n)
    nxt = Signal(range(n))
    m.d.comb += [pick.eq(round_robin_index(req, ptr, n)), nxt.eq(next_pointer(pick, n))]
    rng = np.random.default_rng(77 + n)
    sets = range(1 << n) if n <= 6 else rng.integers(0, 1 << n, 64)

    async def bench(ctx):
        for r in sets:
            for p in range(n):
                ctx.set(req, int(r))
                ctx.set(ptr, p)
                want = ref._rr([k for k in range(n) if (int(r) >> k) & 1], p)
                got = ctx.get(pick)
                assert got == (1 << want if want >= 0 else 0), \
                    f"n={n} req={int(r):#x} ptr={p}: {got:#x}, reference {want}"
                if want >= 0:
                    assert ctx.get(nxt) == (want + 1) % n

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
