"""Reduction unit throughput and latency, measured in RTL simulation (Amaranth simulator).

All-reduce traffic: every member contributes to each chunk; ``window`` chunks are live at
once (members interleaved randomly across them), contributions back to back (no idle, no
backpressure). Prints accepted contributions per cycle, table-full cycles and the
idle-pipeline latency next to the documented formula, for several table sizes, side by
side in one run. ``--options`` instead measures the area and speed options of the
8-port 64-bit unit (``n_chunks`` 8, two live chunks): the whole run's and the sustained
rate (second half, table full) and the latency of an 8-member chunk.

    .venv/bin/python bench/reduce_unit.py [--chunks 48] [--seed 1]
    .venv/bin/python bench/reduce_unit.py --options --chunks 40
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fusionfabric.rtl.reduce.unit import ReductionUnit
from fusionfabric.formats.switch import Dtype, Op
from fusionfabric.tb.reduce.amaranth_sim import simulate
from fusionfabric.tb.reduce.traffic import make_traffic, random_groups


def measure(n_ports, data_width, n_chunks, window, dtype, chunks, seed):
    rng = np.random.default_rng(seed)
    dut = ReductionUnit(n_ports=n_ports, data_width=data_width, n_chunks=n_chunks,
                        n_groups=2)
    groups = random_groups(rng, n_ports, [n_ports], [dtype], [Op.SUM], native=False)
    t = make_traffic(rng, n_ports, data_width, groups, chunks, window=window)
    got, st = simulate(dut, t, seed=seed)
    assert len(got) == chunks and all(
        got[k]["data"] == v[0] for k, v in t.expected.items()), "wrong result"
    acc = st["accept_cycles"]
    rate = (len(acc) - 1) / (acc[-1] - acc[0])
    one = make_traffic(rng, n_ports, data_width, groups, 1, window=1, chunk_base=9999)
    _, s1 = simulate(ReductionUnit(n_ports=n_ports, data_width=data_width,
                                   n_chunks=n_chunks, n_groups=2), one, seed=seed)
    lat = s1["result_cycles"][0] - s1["accept_cycles"][-1]
    return rate, st["o_full_cycles"], lat, dut.latency(n_ports)


#: (label, ReductionUnit options, dtype of the traffic) for ``--options``
OPTIONS = [
    ("defaults", {}, Dtype.BF16),
    ("dtypes=bf16,fp32", {"dtypes": "bf16,fp32"}, Dtype.BF16),
    ("dtypes=fp32", {"dtypes": "fp32"}, Dtype.FP32),
    ("add_stages=5", {"add_stages": 5}, Dtype.BF16),
    ("cycles_per_flit=2", {"cycles_per_flit": 2}, Dtype.BF16),
    ("cycles_per_flit=4", {"cycles_per_flit": 4}, Dtype.BF16),
    ("pipeline=true,add_stages=7", {"pipeline": True, "add_stages": 7}, Dtype.BF16),
]


def measure_options(chunks, seed):
    print(f"reduce-unit options, 8 ports, 64 bits, n_chunks 8, window 2, {chunks} chunks, "
          f"seed {seed}")
    print(f"{'setting':<28} {'contrib/cycle':>13} {'sustained':>9} {'latency k=8':>11}"
          f" {'documented':>10}")
    for label, kw, dt in OPTIONS:
        rng = np.random.default_rng(seed)
        make = lambda: ReductionUnit(n_ports=8, data_width=64, n_chunks=8, n_groups=2, **kw)
        groups = random_groups(rng, 8, [8], [dt], [Op.SUM], native=False)
        t = make_traffic(rng, 8, 64, groups, chunks, window=2)
        got, st = simulate(make(), t, seed=seed)
        assert all(got[k]["data"] == v[0] for k, v in t.expected.items()), \
            f"{label}: wrong result (seed {seed})"
        acc = st["accept_cycles"]
        half = acc[len(acc) // 2:]
        one = make_traffic(rng, 8, 64, groups, 1, window=1, chunk_base=9999)
        unit = make()
        _, s1 = simulate(unit, one, seed=seed)
        lat = s1["result_cycles"][0] - s1["accept_cycles"][-1]
        print(f"{label:<28} {(len(acc) - 1) / (acc[-1] - acc[0]):>13.3f}"
              f" {(len(half) - 1) / (half[-1] - half[0]):>9.3f} {lat:>11} {unit.latency(8):>10}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--options", action="store_true",
                    help="measure the area and speed options instead of the table sizes")
    args = ap.parse_args()
    if args.options:
        measure_options(args.chunks, args.seed)
        return
    rows = [
        # n_ports, data_width, n_chunks, window, dtype
        (8, 64, 8, 1, Dtype.BF16),
        (8, 64, 8, 2, Dtype.BF16),
        (8, 64, 8, 4, Dtype.FP32),
        (8, 64, 8, 6, Dtype.FP32),
        (8, 64, 8, 8, Dtype.FP32),
        (8, 64, 4, 2, Dtype.FP32),
        (8, 64, 2, 1, Dtype.FP32),
        (8, 64, 1, 1, Dtype.FP32),
        (4, 32, 4, 2, Dtype.INT32),
        (16, 32, 8, 4, Dtype.FP16),
    ]
    print(f"reduce-unit, all-reduce traffic, {args.chunks} chunks per row, seed {args.seed}")
    print(f"{'ports':>5} {'width':>5} {'n_chunks':>8} {'window':>6} {'dtype':>6}"
          f" {'contrib/cycle':>13} {'full cycles':>11} {'latency':>7} {'documented':>10}"
          f" {'sim s':>6}")
    for n_ports, dw, nc, win, dt in rows:
        t0 = time.time()
        rate, full, lat, doc = measure(n_ports, dw, nc, win, dt, args.chunks, args.seed)
        print(f"{n_ports:>5} {dw:>5} {nc:>8} {win:>6} {dt.name:>6} {rate:>13.3f} {full:>11}"
              f" {lat:>7} {doc:>10} {time.time() - t0:>6.1f}")


if __name__ == "__main__":
    main()
