"""MoE expert placement as one seeded property of the rack, its output-bound throughput and
the spread over placements (``sweep --placements K``).

References are independent of the code under test: the top-k inclusion law by brute-force
enumeration of every k-set, the hotspot and top-1 bounds by hand, destination shares
counted from generated traffic, and the hottest port's delivered rate in the cycle model.
"""

import copy
import itertools
import json

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.config import ConfigError, TrafficParams, load_config
from fusionfabric.sim.fabric.run import run_placements, run_sweep
from fusionfabric.sim.fabric.traffic import (dest_shares, make_generator, output_bound,
                                             placement, point_rng, topk_inclusion,
                                             zipf_weights)


def moe_cfg(n=8, loads="0.2,0.6", cycles=1500, extra=()):
    return load_config(None, [f"n_ports={n}", "pattern=moe_dispatch", f"loads={loads}",
                              f"cycles={cycles}", "seed=3", "zipf=1.2", *extra])


def test_placement_is_the_same_for_every_load_and_seed_index():
    t = TrafficParams(pattern="moe_dispatch", experts=24, zipf=0.8)
    gens = [make_generator(t, 8, load, point_rng(5, k, load), placement_seed=11)
            for load in (0.1, 0.5, 0.9) for k in (0, 1)]
    for g in gens[1:]:
        assert np.array_equal(g.port_of, gens[0].port_of)
    other = make_generator(t, 8, 0.5, point_rng(5, 0, 0.5), placement_seed=12)
    assert not np.array_equal(other.port_of, gens[0].port_of)
    # round-robin slots: every port holds experts / n_ports experts
    assert np.array_equal(np.bincount(gens[0].port_of, minlength=8), np.full(8, 3))


def test_default_placement_seed_is_the_run_seed_and_config_overrides_it():
    r = run_sweep(moe_cfg(cycles=200), progress=False)
    assert r["placement_seed"] == 3
    r = run_sweep(moe_cfg(cycles=200, extra=["traffic.placement_seed=40"]), progress=False)
    assert r["placement_seed"] == 40
    with pytest.raises(ConfigError, match="placement_seed=-2"):
        load_config(None, ["traffic.placement_seed=-2"])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_topk_inclusion_against_enumeration(k):
    w = zipf_weights(7, 1.1)
    ref = np.zeros(7)
    total = 0.0
    for s in itertools.combinations(range(7), k):
        p = float(np.prod(w[list(s)]))
        total += p
        ref[list(s)] += p
    ref /= total
    assert np.allclose(topk_inclusion(w, k), ref, rtol=1e-10)
    assert topk_inclusion(w, k).sum() == pytest.approx(k)


def test_dispatch_law_matches_generated_traffic():
    t = TrafficParams(pattern="moe_dispatch", experts=16, topk=2, zipf=1.0)
    g = make_generator(t, 8, 0.6, point_rng(2, 0, 0.6), placement_seed=7)
    d = np.concatenate([g.chunk(t0, 4096)[0] for t0 in range(0, 40_960, 4096)])
    counts = np.bincount(d[d >= 0], minlength=8) / (d >= 0).sum()
    src, out = dest_shares(t, 8, 7)
    law = out(src(1.0)) / 8                      # share of each output at equal sources
    assert np.abs(counts - law).max() < 0.01, (counts, law)


def test_output_bounds_by_hand():
    n = 72
    hot = TrafficParams(pattern="hotspot", hotspot_ports=4, hotspot_fraction=0.05)
    assert output_bound(hot, n) == pytest.approx(1 / (n * (0.05 / 4 + 0.95 / n)), rel=1e-9)
    assert output_bound(TrafficParams(pattern="uniform"), n) == pytest.approx(1.0)
    t1 = TrafficParams(pattern="moe_dispatch", experts=16, topk=1, zipf=1.2)
    port_w = np.bincount(placement(8, 16, 5), weights=zipf_weights(16, 1.2), minlength=8)
    assert output_bound(t1, 8, 5) == pytest.approx(1 / (8 * port_w.max()), rel=1e-9)
    assert output_bound(TrafficParams(pattern="trace", trace_file="x"), 8) is None


def test_hottest_port_saturates_at_the_output_bound():
    cfg = moe_cfg(n=8, cycles=3000, extra=["topk=1", "traffic.experts=16"])
    bound = output_bound(cfg.traffic, 8, 3)
    cfg.run.loads = f"{0.85 * bound:.4f},{min(1.0, 1.2 * bound):.4f}"
    r = run_sweep(cfg, progress=False)
    assert r["output_bound"] == pytest.approx(bound)
    below, above = r["points"]
    hot = int(np.argmax(np.bincount(placement(8, 16, 3), weights=zipf_weights(16, 1.2),
                                    minlength=8)))
    assert not below["saturated"], below
    assert below["per_port"]["accepted"][hot] < 0.95
    assert above["saturated"] and above["per_port"]["accepted"][hot] > 0.97, above


def test_run_placements_spread_and_reproduction():
    cfg = moe_cfg(n=8, loads="0.3,0.7", cycles=800, extra=["traffic.experts=24"])
    r = run_placements(cfg, 3, progress=False)
    assert [p["placement_seed"] for p in r["placements"]] == [3, 4, 5]
    acc = np.array([p["accepted"] for p in r["placements"]])
    for i, s in enumerate(r["spread"]):
        assert s["accepted_min"] == acc[:, i].min() and s["accepted_max"] == acc[:, i].max()
        assert s["accepted_median"] == float(np.median(acc[:, i]))
    one = copy.deepcopy(cfg)
    one.traffic.placement_seed = 4
    alone = run_sweep(one, progress=False)
    assert [p["accepted"] for p in alone["points"]] == r["placements"][1]["accepted"]
    assert r["placements"][1]["output_bound"] == pytest.approx(alone["output_bound"])
    with pytest.raises(ValueError, match="placements=0"):
        run_placements(cfg, 0)


def test_cli_placements(capsys):
    base = ["sweep", "--ports", "8", "--pattern", "moe_dispatch", "--loads", "0.3",
            "--cycles", "300", "--seed", "2", "--set", "traffic.experts=16",
            "--progress", "off"]
    assert main([*base, "--placements", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["placement_seed"] for p in doc["placements"]] == [2, 3]
    assert main([*base, "--placements", "2"]) == 0
    out = capsys.readouterr().out
    assert "acc_min" in out and "out_bound" in out
    assert main([*base]) == 0
    assert "output bound" in capsys.readouterr().out
    assert main([*base, "--placements", "0"]) == 2
    assert "--placements 0" in capsys.readouterr().err
