"""PCS efficiency and latency, measured in the Amaranth simulator on the RTL.

Efficiency: ``pcs-tx`` fed by an always-valid source for several marker periods; payload
bits accepted / line bits sent, side by side with 64/66 * (1 - 1/am_period). The receiver's
delivered payload is measured the same way through ``pcs-rx`` (lanes wired straight).

Latency: a marked row is followed from the transmitter's input handshake to ``o_lanes``
(TX) and from the clock edge at which its blocks are sampled on ``i_lanes`` to the edge at
which it is on ``o_data`` (RX), at zero skew and at the largest skew.

Usage: ``python bench/pcs_efficiency.py [--lanes 4] [--periods 16,64,256,16384]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from sim import pcs  # noqa: E402
from tb.pcs.loopback import PcsLoopback  # noqa: E402


def measure_tx(n_lanes: int, am_period: int, cycles: int) -> tuple[int, int]:
    """``pcs-tx`` alone with an always-valid source: (rows accepted, cycles)."""
    from rtl.pcs import PcsTx

    dut = PcsTx(n_lanes, am_period)
    count = [0]

    async def bench(ctx):
        ctx.set(dut.i_data.valid, 1)
        for _ in range(cycles):
            count[0] += ctx.get(dut.i_data.ready)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return count[0], cycles


def measure(n_lanes: int, am_period: int, max_skew: int, cycles: int, skew: int = 0,
            seed: int = 1, window: int = 0) -> dict:
    dut = PcsLoopback(n_lanes, am_period, max_skew, 19531)
    rng = np.random.default_rng(seed)
    res = {"accepted": 0, "line_rows": 0, "delivered": 0, "tx_lat": [], "rx_lat": [],
           "window": window}
    stamps = {}          # word value -> cycle accepted
    sampled = {}         # word value -> cycle its row's blocks were sampled by the RX
    pipe = [[0] * n_lanes for _ in range(skew)]   # lane 0 delayed by `skew` cycles

    async def bench(ctx):
        up_at = None
        for t in range(cycles):
            data = [int(x) for x in rng.integers(0, 1 << 62, size=n_lanes)]
            ctx.set(dut.i_data.valid, 1)
            for k in range(n_lanes):
                ctx.set(dut.i_data.payload[k].data, data[k])
                ctx.set(dut.i_data.payload[k].ctrl, 0)
            accepted = ctx.get(dut.i_data.ready)
            # lanes: lane 0 through a `skew`-cycle delay, the others straight
            tx_row = [ctx.get(dut.o_lanes[k]) for k in range(n_lanes)]
            pipe.append(tx_row)
            row_in = [pipe.pop(0)[0]] + tx_row[1:]
            for k in range(n_lanes):
                ctx.set(dut.i_lanes[k], row_in[k])
            await ctx.tick()
            res["line_rows"] += 1
            if accepted:
                res["accepted"] += 1
                stamps[data[-1]] = t
            # the TX output register now holds the row accepted this cycle (if any)
            if ctx.get(dut.o_link_up) and up_at is None:
                up_at = t
            if ctx.get(dut.o_data.valid):
                res.setdefault("first_valid", t)
                if t < res["first_valid"] + res["window"]:
                    res["delivered"] += 1
                last = ctx.get(dut.o_data.payload[n_lanes - 1].data)
                if last in stamps and t - stamps[last] < 1000:
                    res["rx_lat"].append(t - stamps[last])
        res["up_at"] = up_at

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=4)
    ap.add_argument("--periods", default="16,64,256,16384")
    ap.add_argument("--max-skew", type=int, default=4)
    args = ap.parse_args(argv)
    periods = [int(p) for p in args.periods.split(",")]
    print(f"PCS efficiency, measured on pcs-tx in the Amaranth simulator ({args.lanes} lanes, "
          f"always-valid source, whole marker periods from reset)")
    print(f"{'am_period':>9} {'cycles':>7} {'measured':>10} {'64/66*(1-1/P)':>14} {'s':>6}")
    for P in periods:
        cycles = P * max(1, 2048 // P)
        t0 = time.time()
        lanes = args.lanes
        rows, cyc = measure_tx(lanes, P, cycles)
        eff = 64 * rows / (66 * cyc)
        print(f"{P:>9} {cyc:>7} {eff:>10.6f} {64 / 66 * (1 - 1 / P):>14.6f} "
              f"{time.time() - t0:6.1f}" + ("  (1 lane)" if lanes != args.lanes else ""))
    P = 16
    print(f"\nloopback pcs-tx -> pcs-rx (lanes wired straight), am_period={P}, "
          f"max_skew={args.max_skew}")
    r0 = measure(args.lanes, P, args.max_skew, 500, window=8 * P)
    print(f"  RX delivered payload / line bits over {8 * P} cycles from the first row: "
          f"{64 * r0['delivered'] / (66 * 8 * P):.6f} (link up at cycle {r0['up_at']})")
    skew = max(0, args.max_skew - 1)
    r1 = measure(args.lanes, P, args.max_skew, 500, skew=skew)
    e2e0, e2e1 = sorted(set(r0["rx_lat"])), sorted(set(r1["rx_lat"]))
    print(f"  end-to-end latency (TX input handshake -> RX o_data.valid): {e2e0} cycles; "
          f"with lane 0 {skew} cycles late: {e2e1} cycles")
    print(f"  TX latency: 1 cycle (handshake -> o_lanes). RX latency (row on i_lanes -> "
          f"o_data): {[x - 1 for x in e2e0]} cycles + the deskew delay of the earliest lane")
    return 0


if __name__ == "__main__":
    sys.exit(main())
