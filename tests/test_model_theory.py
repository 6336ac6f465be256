"""Known answers from switching theory for the fabric model (docs/model.md).

References: Karol, Hluchyj and Morgan, "Input versus output queueing on a space-division
packet switch", IEEE Trans. Commun. 1987 (FIFO input queueing saturates at 75 % for
n=2, 65.5 % for n=4, 61.8 % for n=8 and 2-sqrt(2) = 58.6 % as n grows, under uniform
Bernoulli traffic with destinations uniform over all n outputs); McKeown, "The iSLIP
scheduling algorithm for input-queued switches", IEEE/ACM ToN 1999 (VOQ + iSLIP
approaches 100 % under uniform traffic; more iterations and buffer raise throughput).

Tolerances: a saturation throughput measured over S cycles on n ports has a standard
error of roughly sqrt(p(1-p)/(n S)) times a correlation factor of a few (queue states are
correlated over tens of cycles); the bounds below are >= 5 such errors wide.
"""

import math

import pytest

from fusionfabric.sim.fabric.config import load_config
from fusionfabric.sim.fabric.run import run_sweep


def saturation(n, mode="voq", cycles=20_000, depth=16, iterations=0, seed=1):
    cfg = load_config(None, [f"n_ports={n}", f"mode={mode}", f"depth={depth}",
                             f"iterations={iterations}", f"cycles={cycles}",
                             "warmup=2000", "drain=0", "loads=1.0", f"seed={seed}",
                             "src_queue=64"])
    r = run_sweep(cfg, progress=False)
    return r["points"][0]["accepted"]


@pytest.mark.parametrize("n, theory", [(2, 0.75), (4, 0.655), (8, 0.618)],
                         ids=["fifo-2ports", "fifo-4ports", "fifo-8ports"])
def test_fifo_hol_saturation_matches_karol(n, theory):
    p = saturation(n, "fifo")
    se = math.sqrt(theory * (1 - theory) / (n * 20_000))
    assert abs(p - theory) < max(0.008, 8 * se), (n, p, theory)


def test_fifo_hol_saturation_large_n_tends_to_2_minus_sqrt2():
    p = saturation(72, "fifo", cycles=4000)
    # 2 - sqrt(2) = 0.5858 is the n -> infinity limit; finite n sits slightly above it
    assert 2 - math.sqrt(2) - 0.004 < p < 0.597, p


def test_voq_islip_beats_fifo_and_nears_full_throughput():
    fifo = saturation(8, "fifo")
    voq = saturation(8, "voq", depth=64, iterations=3)
    assert voq > fifo + 0.3
    assert voq > 0.97, voq


def test_islip_throughput_rises_with_iterations_and_buffer():
    """The trend of a published iSLIP behavioural-model table: at 8 ports, 1 -> 3 iterations and 4 -> 16 -> 64
    flits of buffer each raise the saturation throughput."""
    t = {(d, k): saturation(8, "voq", cycles=10_000, depth=d, iterations=k)
         for d in (4, 16, 64) for k in (1, 3)}
    for d in (4, 16, 64):
        assert t[(d, 3)] > t[(d, 1)] + 0.005, t
    for k in (1, 3):
        assert t[(4, k)] + 0.02 < t[(16, k)] < t[(64, k)], t
    assert t[(4, 1)] < 0.75 and t[(64, 3)] > 0.97, t


def test_islip_one_iteration_is_poor_at_72_ports():
    one = saturation(72, "voq", cycles=3000, depth=4, iterations=1)
    seven = saturation(72, "voq", cycles=3000, depth=4, iterations=7)
    assert one < 0.7 and seven > 0.9, (one, seven)
