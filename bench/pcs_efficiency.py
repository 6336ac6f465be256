"""PCS efficiency and latency, measured in the Amaranth simulator on the RTL.

Efficiency: ``pcs-tx`` fed by an always-valid source for several marker periods; payload
bits accepted / line bits sent, side by side with 64/66 * (1 - 1/am_period). The receiver's
delivered payload is measured the same way through ``pcs-rx`` (lanes wired straight).

With a gearbox (``--widths``: serdes_width 64/32) the same payload per line bit is expected
and the input rate drops to W/66 rows per cycle (the transmitter stalls ``ready``).

Latency: a marked row is followed from the transmitter's input handshake to ``o_lanes``
(TX: first and last bit of its blocks) and from the clock edge at which its last bit is
sampled on ``i_lanes`` to the edge at which it is on ``o_data`` (RX), at zero skew and with
lane 0 late by ``max_skew - 1`` blocks' worth of words.

Usage: ``python bench/pcs_efficiency.py [--lanes 4] [--periods 16,64,256,16384]
[--widths 66,64,32]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from fusionfabric.sim import pcs  # noqa: E402
from fusionfabric.tb.pcs.loopback import PcsLoopback  # noqa: E402


def measure_tx(n_lanes: int, am_period: int, cycles: int, width: int = 66) -> tuple[int, int]:
    """``pcs-tx`` alone with an always-valid source: (rows accepted, cycles)."""
    from fusionfabric.rtl.pcs import PcsTx

    dut = PcsTx(n_lanes, am_period, width)
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
            seed: int = 1, window: int = 0, width: int = 66) -> dict:
    """Loopback ``pcs-tx`` -> ``pcs-rx`` with W-bit lanes wired straight (lane 0 through a
    ``skew``-word delay). Edges are numbered from 0: a row taken at edge ``t`` is row ``r``
    (``r`` row cycles before it, markers included, plus 1 at W < 66: see ``PcsTx``); its lane bits ``[66r, 66r + 66)`` are in
    words ``66r // W`` .. ``(66r + 65) // W``; word ``i`` is on ``o_lanes`` after edge ``i``
    and sampled by the receiver at edge ``i + 1`` (plus the skew on lane 0)."""
    dut = PcsLoopback(n_lanes, am_period, max_skew, 19531, width)
    rng = np.random.default_rng(seed)
    res = {"accepted": 0, "line_rows": 0, "delivered": 0, "tx_first": [], "tx_last": [],
           "rx_lat": [], "e2e": [], "window": window}
    stamps = {}          # last word of a row -> (edge it was taken, row index)
    pipe = [[0] * n_lanes for _ in range(skew)]   # lane 0 delayed by `skew` cycles

    takes = pcs.tx_takes(width, cycles)

    async def bench(ctx):
        up_at = None
        # W < 66: the transmitter's row register starts out holding row 0 (the first marker
        # row), so the row encoded at its k-th row cycle is row k + 1
        rows = 0 if width == 66 else 1
        for t in range(cycles):
            data = [int(x) for x in rng.integers(0, 1 << 62, size=n_lanes)]
            ctx.set(dut.i_data.valid, 1)
            for k in range(n_lanes):
                ctx.set(dut.i_data.payload[k].data, data[k])
                ctx.set(dut.i_data.payload[k].ctrl, 0)
            accepted = ctx.get(dut.i_data.ready)
            tx_row = [ctx.get(dut.o_lanes[k]) for k in range(n_lanes)]
            pipe.append(tx_row)
            row_in = [pipe.pop(0)[0]] + tx_row[1:]
            for k in range(n_lanes):
                ctx.set(dut.i_lanes[k], row_in[k])
            await ctx.tick()          # edge t
            res["line_rows"] += 1
            if accepted:
                res["accepted"] += 1
                stamps[data[-1]] = (t, rows)
            rows += int(takes[t])     # this edge took a row (marker or data)
            if ctx.get(dut.o_link_up) and up_at is None:
                up_at = t
            if ctx.get(dut.o_data.valid):
                res.setdefault("first_valid", t)
                if t < res["first_valid"] + res["window"]:
                    res["delivered"] += 1
                last = ctx.get(dut.o_data.payload[n_lanes - 1].data)
                if last in stamps and t - stamps[last][0] < 1000:
                    t_acc, r = stamps[last]
                    first_word, last_word = 66 * r // width, (66 * r + 65) // width
                    res["e2e"].append(t - t_acc)
                    # taken in cycle t_acc; word i is on o_lanes in cycle i + 1
                    res["tx_first"].append(first_word + 1 - t_acc)
                    res["tx_last"].append(last_word + 1 - t_acc)
                    # the receiver samples the row's last bit (latest lane) at this edge
                    res["rx_lat"].append(t - (last_word + 1 + skew))
        res["up_at"] = up_at

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res


def _span(values) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}..{max(values)}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=4)
    ap.add_argument("--periods", default="16,64,256,16384")
    ap.add_argument("--widths", default="66,64,32")
    ap.add_argument("--max-skew", type=int, default=4)
    args = ap.parse_args(argv)
    periods = [int(p) for p in args.periods.split(",")]
    widths = [int(w) for w in args.widths.split(",")]
    print(f"PCS efficiency, measured on pcs-tx in the Amaranth simulator ({args.lanes} lanes, "
          f"always-valid source, whole marker periods from reset)")
    print(f"{'W':>3} {'am_period':>9} {'cycles':>7} {'payload/line':>12} "
          f"{'64/66*(1-1/P)':>14} {'rows/cycle':>10} {'W/66*(1-1/P)':>13} {'s':>6}")
    for W in widths:
        for P in periods:
            # whole marker periods and whole gearbox periods (33 cycles for W = 32/64)
            rows = P * max(1, 2048 // P)      # a multiple of 32: whole gearbox periods
            cycles = rows * 66 // W
            t0 = time.time()
            rows, cyc = measure_tx(args.lanes, P, cycles, W)
            eff = 64 * rows / (W * cyc)
            print(f"{W:>3} {P:>9} {cyc:>7} {eff:>12.6f} {64 / 66 * (1 - 1 / P):>14.6f} "
                  f"{rows / cyc:>10.6f} {W / 66 * (1 - 1 / P):>13.6f} {time.time() - t0:6.1f}")
    P = 16
    skew = max(0, args.max_skew - 1)
    print(f"\nloopback pcs-tx -> pcs-rx (lanes wired straight), am_period={P}, "
          f"max_skew={args.max_skew}, {args.lanes} lanes")
    for W in widths:
        window = 8 * P * 66 // W
        r0 = measure(args.lanes, P, args.max_skew, 500 * 66 // W + 100, window=window, width=W)
        r1 = measure(args.lanes, P, args.max_skew, 500 * 66 // W + 100, skew=skew * 66 // W,
                     width=W)
        print(f"  W={W}: RX delivered payload / line bits over {window} cycles from the first "
              f"row: {64 * 66 * r0['delivered'] / (66 * W * window):.6f} "
              f"(link up at cycle {r0['up_at']})")
        print(f"    end-to-end (TX input handshake edge -> RX o_data.valid): "
              f"{_span(r0['e2e'])} cycles; lane 0 {skew * 66 // W} words late: "
              f"{_span(r1['e2e'])}")
        print(f"    TX (row accepted in cycle t -> its first / last bit on o_lanes in cycle t+): "
              f"{_span(r0['tx_first'])} / {_span(r0['tx_last'])} cycles; RX (edge sampling "
              f"the row's last bit -> o_data.valid): {_span(r0['rx_lat'])} cycles "
              f"(with the skew: {_span(r1['rx_lat'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
