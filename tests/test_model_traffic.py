"""Traffic generators: each pattern's defining property, seeded reproducibility."""

import math

import numpy as np
import pytest

from fusionfabric.sim.fabric.config import TrafficParams
from fusionfabric.sim.fabric.traffic import (expert_ports, make_generator, point_rng, transpose_map,
                                zipf_weights)


def gen(pattern, n=16, load=0.5, cycles=20_000, seed=1, **kw):
    t = TrafficParams(pattern=pattern, **kw)
    g = make_generator(t, n, load, point_rng(seed, 0, load))
    ds, ss = [], []
    for t0 in range(0, cycles, 4096):
        d, s = g.chunk(t0, min(4096, cycles - t0))
        ds.append(d)
        ss.append(s)
    return g, np.concatenate(ds), np.concatenate(ss)


def pairs(d):
    c, i = np.nonzero(d >= 0)
    return c, i, d[c, i]


@pytest.mark.parametrize("pattern", ["uniform", "permutation", "transpose", "hotspot",
                                     "bursty", "alltoall", "moe_dispatch", "ring"])
def test_offered_load_and_reproducibility(pattern):
    g, d, s = gen(pattern, load=0.4, packet_size=2)
    n = d.shape[1]
    assert abs(s.sum() / s.size - 0.4) < 0.02, (pattern, s.sum() / s.size)
    g2, d2, s2 = gen(pattern, load=0.4, packet_size=2)
    assert np.array_equal(d, d2) and np.array_equal(s, s2)
    _, d3, _ = gen(pattern, load=0.4, packet_size=2, seed=2)
    assert not np.array_equal(d, d3)
    assert d.max() < n and ((d >= 0) == (s > 0)).all()


def test_uniform_covers_all_outputs_evenly():
    _, d, _ = gen("uniform", n=8, load=1.0)
    counts = np.bincount(pairs(d)[2], minlength=8)
    expect = counts.sum() / 8
    chi2 = ((counts - expect) ** 2 / expect).sum()
    assert chi2 < 24.3          # 7 degrees of freedom, p = 0.001


def test_uniform_without_self():
    _, d, _ = gen("uniform", n=8, load=1.0, include_self=False)
    c, i, dst = pairs(d)
    assert not (dst == i).any() and len(set(dst.tolist())) == 8


def test_permutation_transpose_ring_are_permutations():
    for pat in ("permutation", "transpose", "ring"):
        _, d, _ = gen(pat, n=12, load=1.0, cycles=200)
        c, i, dst = pairs(d)
        mapping = {}
        for a, b in zip(i.tolist(), dst.tolist()):
            assert mapping.setdefault(a, b) == b, pat
        assert sorted(mapping.values()) == list(range(12)), pat
    tm = transpose_map(72)            # 8 x 9 matrix: (r, c) -> (c, r)
    assert sorted(tm.tolist()) == list(range(72))
    assert tm[1] == 8 and tm[9] == 1 and tm[0] == 0 and tm[71] == 71
    assert transpose_map(16).tolist() == [4 * (k % 4) + k // 4 for k in range(16)]


def test_hotspot_fraction():
    _, d, _ = gen("hotspot", n=16, load=0.5, hotspot_ports=2, hotspot_fraction=0.3)
    dst = pairs(d)[2]
    hot = np.isin(dst, [0, 1]).mean()
    assert abs(hot - (0.3 + 0.7 * 2 / 16)) < 0.01


def test_bursty_bursts_have_the_mean_length():
    _, d, _ = gen("bursty", n=4, load=0.5, cycles=100_000, burst_length=8.0)
    lengths = []
    for i in range(4):
        col = d[:, i]
        run = 0
        for k in range(1, col.size):
            if col[k] >= 0 and col[k] == col[k - 1]:
                run += 1
            elif col[k - 1] >= 0:
                lengths.append(run + 1)
                run = 0
    # back-to-back bursts to the same destination merge (prob 1/n): mean 8 * n/(n-1)-ish
    m = np.mean(lengths)
    assert 7.0 < m < 12.0, m


def test_alltoall_walks_every_other_port_in_order():
    _, d, _ = gen("alltoall", n=6, load=1.0, cycles=60)
    for i in range(6):
        seq = d[:, i][d[:, i] >= 0].tolist()
        assert seq[:10] == [(i + 1 + k % 5) % 6 for k in range(10)]


def test_moe_dispatch_zipf_popularity_and_distinct_topk():
    n, s = 16, 1.2
    g, d, _ = gen("moe_dispatch", n=n, load=1.0, cycles=20_000, zipf=s, topk=2)
    w = zipf_weights(n, s)
    assert abs(w[0] - 1 / sum(1 / k ** s for k in range(1, n + 1))) < 1e-12
    port_of = expert_ports(n, n, point_rng(1, 0, 1.0))
    counts = np.bincount(pairs(d)[2], minlength=n) / (d >= 0).sum()
    # the most popular expert's port gets the most packets, the least popular the fewest
    assert counts.argmax() == port_of[0] and counts.argmin() == port_of[-1]
    hot, cold = counts[port_of[0]], counts[port_of[-1]]
    assert hot > 5 * cold
    # each token's two packets (consecutive per source) go to distinct experts/ports
    for i in range(n):
        seq = d[:, i][d[:, i] >= 0]
        a, b = seq[0:-1:2], seq[1::2]
        m = min(a.size, b.size)
        assert (a[:m] != b[:m]).all()


def test_moe_combine_rates_follow_popularity():
    g, d, s = gen("moe_combine", n=8, load=0.3, zipf=1.0)
    rates = (s > 0).mean(axis=0)
    assert np.allclose(rates, g.p, atol=0.02)
    assert abs(g.offered - 0.3) < 1e-9 or g.offered < 0.3


def test_zipf_zero_is_uniform():
    assert np.allclose(zipf_weights(10, 0.0), 0.1)
    assert math.isclose(zipf_weights(3, 1.0)[0], 1 / (1 + 1 / 2 + 1 / 3))
