"""Collectives on a two-tier Clos: the ranks are the Clos's endpoints, the ring and the
all-to-all are measured on the Clos's cycle kernel, the in-network all-reduce reduces at
the leaf, then at a spine, then multicasts down (sim/fabric/reduction.py, timing checked
there against a job-by-job simulation). Latency terms are summed here by hand from the
documented cycle counts; the two-tier reduction order is checked against a reference
written here with per-element Python loops."""

import ml_dtypes
import numpy as np
import pytest

from fusionfabric.formats.switch import Dtype, Op
from fusionfabric.sim import reduce as red
from fusionfabric.sim.fabric.collective import collective
from fusionfabric.sim.fabric.config import load_config
from fusionfabric.sim.fabric.reduction import clos_allreduce_cycles

LINK_NS, SW_NS = 26.3 + 5 + 42 + 4.9, 2.0           # docs/model.md defaults at 1 GHz


def clos(E=4, L=4, S=4, *extra):
    return load_config(None, ["topology.kind=clos", f"topology.radix={max(E + S, L)}",
                              f"topology.endpoints={E * L}",
                              f"topology.endpoints_per_leaf={E}", f"topology.spines={S}",
                              *extra])


def unit(k, ports):                                  # rtl/reduce/unit.py, by hand
    depth = max(1, (ports - 1).bit_length())
    return k + 5 + 5 * depth


def test_ranks_are_the_endpoints_and_latency_crosses_the_spines():
    c = clos()
    ring = collective(c, "allreduce", 1024, "ring", measure_cycles=600)
    assert ring["n_ports"] == 16 and ring["topology"]["leaves"] == 4
    cross = 4 * LINK_NS + 3 * SW_NS                 # endpoint-leaf-spine-leaf-endpoint
    assert ring["phys_latency_s"] == pytest.approx(2 * 15 * cross * 1e-9)
    a2a = collective(c, "alltoall", 1024, "ring", measure_cycles=600)
    assert a2a["phys_latency_s"] == pytest.approx(cross * 1e-9)
    sw = collective(c, "allreduce", 1024, "switch", measure_cycles=600)
    assert sw["unit_latency_leaf"] == unit(4, 8) and sw["unit_latency_spine"] == unit(4, 4)
    assert sw["phys_latency_s"] == pytest.approx(
        (4 * LINK_NS + 4 * SW_NS + unit(4, 8) + unit(4, 4)) * 1e-9)


def test_one_leaf_has_the_single_switch_latency():
    sw = collective(clos(8, 1, 2), "allreduce", 1024, "switch", measure_cycles=600)
    assert sw["unit_latency_spine"] == 0
    assert sw["phys_latency_s"] == pytest.approx((2 * LINK_NS + 2 * SW_NS + unit(8, 10))
                                                 * 1e-9)
    ring = collective(clos(8, 1, 2), "allreduce", 1024, "ring", measure_cycles=600)
    assert ring["phys_latency_s"] == pytest.approx(2 * 7 * (2 * LINK_NS + SW_NS) * 1e-9)


def test_in_network_allreduce_bus_bandwidth_and_oversubscription():
    """Large messages: every endpoint sends m flits and receives m results, so busbw is
    2(n-1)/n of the link; at oversubscription 2 each leaf uplink input must replicate
    twice the results, and the time doubles (the reduction itself does not care: the
    uplinks carry m/S flits each)."""
    big = 1 << 28
    full = collective(clos(8, 4, 8), "allreduce", big, "switch", measure_cycles=600)
    assert full["busbw_over_link"] == pytest.approx(2 * 31 / 32, rel=0.02)
    over = collective(clos(8, 4, 4), "allreduce", big, "switch", measure_cycles=600)
    assert over["topology"]["oversubscription"] == 2
    assert over["seconds"] / full["seconds"] == pytest.approx(2.0, rel=0.02)
    m = big // 16
    assert full["cycles"] == clos_allreduce_cycles(8, 4, 8, m, full["rho"], full["hop"],
                                                   full["hop2"], max_flits=(1 << 22) // 32)


def test_ring_rate_comes_from_the_clos_kernel():
    """Framing slots on the endpoint links lower the measured ring rate on the Clos as on
    one switch (every 4th cycle a framing slot: 3/4)."""
    r = collective(clos(4, 4, 4, "link.frame_period=4"), "allreduce", 1 << 30, "ring",
                   measure_cycles=800)
    assert r["rho"] == pytest.approx(0.75, abs=0.02)
    assert r["busbw_over_link"] == pytest.approx(0.75, abs=0.03)


def _ref_tree(values, add):
    """Balanced pairwise tree, level by level, odd last carried up (docs/reduction.md)."""
    while len(values) > 1:
        nxt = []
        for i in range(0, len(values) - 1, 2):
            nxt.append(add(values[i], values[i + 1]))
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def _ref_two_tier_bf16(bits, group):
    """Per element: each leaf sums its ranks in fp32 along the tree, rounds once to bf16
    (the partial's flit), the spine sums the partials in fp32 in leaf order and rounds."""
    k, n = bits.shape
    out = np.zeros(n, np.uint16)
    f32 = lambda b: np.float32(np.uint16(b).view(ml_dtypes.bfloat16))  # noqa: E731
    add = lambda a, b: np.float32(a + b)                                  # noqa: E731
    for e in range(n):
        partials = []
        for l0 in range(0, k, group):
            s = _ref_tree([f32(bits[r, e]) for r in range(l0, l0 + group)], add)
            partials.append(np.float32(ml_dtypes.bfloat16(s)))
        s = _ref_tree(partials, add)
        out[e] = np.array(ml_dtypes.bfloat16(s)).view(np.uint16)
    return out


@pytest.mark.parametrize("seed", [3, 17])
def test_two_tier_order_is_bit_exact_and_not_the_flat_tree(seed):
    rng = np.random.default_rng(seed)
    group, leaves = 8, 6
    vals = (rng.normal(0, 1, (group * leaves, 300)) * np.exp2(rng.integers(-6, 7, (
        group * leaves, 300)))).astype(ml_dtypes.bfloat16)
    bits = vals.view(np.uint16)
    got = red.reduce_bits_tiers(bits, Dtype.BF16, Op.SUM, group)
    assert np.array_equal(got, _ref_two_tier_bf16(bits, group)), f"seed {seed}"
    assert np.array_equal(got, red.reduce_bits_tiers(bits.copy(), Dtype.BF16, Op.SUM, group))
    flat = red.reduce_bits(bits, Dtype.BF16, Op.SUM)
    assert not np.array_equal(got, flat), f"seed {seed}: the leaf's rounding must show"
    assert np.array_equal(red.reduce_bits_tiers(bits, Dtype.BF16, Op.SUM, group * leaves),
                          flat)


def test_two_tier_exact_cases():
    """Integer SUM wraps modulo 2^32 in any order; small integers in fp32 add exactly."""
    rng = np.random.default_rng(5)
    ints = rng.integers(0, 1 << 32, (24, 200), dtype=np.uint64).astype(np.uint32)
    got = red.reduce_bits_tiers(ints, Dtype.INT32, Op.SUM, 6)
    assert np.array_equal(got, (ints.astype(np.uint64).sum(axis=0) % (1 << 32)).astype(
        np.uint32))
    small = rng.integers(-1000, 1000, (24, 200)).astype(np.float32)
    got = red.reduce_bits_tiers(small.view(np.uint32), Dtype.FP32, Op.SUM, 4)
    assert np.array_equal(got.view(np.float32), small.sum(axis=0))
    mx = red.reduce_bits_tiers(small.view(np.uint32), Dtype.FP32, Op.MAX, 4)
    assert np.array_equal(mx.view(np.float32), small.max(axis=0))
    with pytest.raises(ValueError, match="not whole leaves of 5"):
        red.reduce_bits_tiers(ints, Dtype.INT32, Op.SUM, 5)


def test_cli_names_the_clos_and_its_spine_path(capsys):
    from fusionfabric.cli import main

    rc = main(["collective", "allreduce", "--set", "topology.kind=clos", "--set",
               "topology.endpoints=16", "--set", "topology.endpoints_per_leaf=4", "--set",
               "topology.spines=4", "--set", "topology.radix=8", "--bytes", "1K,1M",
               "--algo", "ring,switch", "--dtype", "fp32"])
    out, err = capsys.readouterr()
    assert rc == 0 and "seed 1" in err
    assert "on 16 endpoints (Clos: 4 leaves x 4, 4 spines, adaptive routing)" in out
    assert f"across the spines (4 links, 3 switches) {4 * LINK_NS + 3 * SW_NS:g} ns" in out
    assert "elements x 16 ranks" in out
    assert len([l for l in out.splitlines() if l.split()[:1] in (["ring"], ["switch"])]) == 4
