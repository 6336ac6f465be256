"""Chiplet link goodput, latency and replay-buffer depth (issue 4, "Performance").

Prints, side by side from one run:

1. the overhead breakdown of 256-byte writes as a fraction of the raw lane bit rate
   (64b/66b, alignment markers, DL header + CRC, TL header), for several DL flit sizes;
2. measured goodput of the RTL link pair (cocotb, Icarus by default) streaming 256-byte
   writes one way at BER 0 and 1e-5, at the slot level and scaled to the lane rate;
3. request→delivery latency (first request on an empty link, and loaded);
4. the replay-buffer depth needed for full rate at a given round trip (derived), and
   measured goodput against depth with a long channel.

Usage: ``python bench/link_goodput.py [--sim icarus|verilator] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.chiplet import SLOT_BYTES, dl_flit_slots  # noqa: E402

PCS_6466 = 64 / 66
MARKERS = 16383 / 16384        # one alignment marker per 16384 blocks per lane (cl. 82)


def breakdown(tl_per_dl: int, payload: int = 256):
    slots_msg = 1 + payload // SLOT_BYTES          # header slot + data slots
    tl = payload / (slots_msg * SLOT_BYTES)
    dl = 4 * tl_per_dl / dl_flit_slots(tl_per_dl)
    total = tl * dl * PCS_6466 * MARKERS
    return {"tl_per_dl": tl_per_dl, "tl_header": tl, "dl_header_crc": dl,
            "pcs_64b66b": PCS_6466, "markers": MARKERS, "goodput": total}


def run_link(sim, params, args, seed=1):
    from tb.chiplet.harness import ChipletPair
    from tb.common import runner

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "stats.json"
        a = dict(args, stats_file=str(f), report_only=True, stall=200_000)
        latency = a.pop("latency", 4)
        runner.run("chiplet-pair", "tb.chiplet.test_link", dict(params, latency=latency),
                   component=ChipletPair(latency=latency, **params), sim=sim, seed=seed,
                   test_args=a, name="bench-" + "-".join(f"{k}{v}" for k, v in
                                                      sorted(dict(params, **args).items())
                                                      if k != "stats_file"))
        return json.loads(f.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="icarus", choices=["icarus", "verilator"])
    ap.add_argument("--quick", action="store_true", help="fewer transactions")
    opt = ap.parse_args(argv)
    n = 40 if opt.quick else 120

    print("== 1. Overhead of 256-byte writes, fraction of the raw lane bit rate")
    print(f"{'tl_per_dl':>9} {'DL flit B':>9} {'TL hdr':>7} {'DL hdr+CRC':>10} "
          f"{'64b/66b':>8} {'markers':>8} {'goodput':>8}")
    for t in (1, 2, 4, 8, 16, 32):
        b = breakdown(t)
        print(f"{t:>9} {dl_flit_slots(t) * 16:>9} {b['tl_header']:>7.4f} "
              f"{b['dl_header_crc']:>10.4f} {b['pcs_64b66b']:>8.4f} {b['markers']:>8.5f} "
              f"{b['goodput']:>8.4f}")
    print("(TL header: 16 B per 256 B = 256/272 = 94.12 %, as NVLink 1; >= 90 % overall "
          "needs tl_per_dl >= 32 with 64b/66b.)")

    print("\n== 2. Measured: 256-byte writes one way, no idle, no backpressure "
          f"({opt.sim})")
    stream = {"n": n, "only_writes": True, "fixed_length": 3, "one_way": True,
              "idle": 0.0, "backpressure": 0.0, "posted_fraction": 0.0}
    rows = []
    for tl, credits, ber in ((4, 16, 0.0), (4, 64, 0.0), (4, 64, 1e-5), (16, 64, 0.0),
                             (16, 64, 1e-5)):
        s = run_link(opt.sim, {"tl_per_dl": tl, "replay_depth": 8, "rx_credits": credits},
                     dict(stream, ber=ber))
        frac = s["goodput_bytes_per_cycle"] / 16
        b = breakdown(tl)
        rows.append((tl, credits, ber, s, frac, frac * PCS_6466 * MARKERS, b["goodput"]))
    print(f"{'tl_per_dl':>9} {'credits':>7} {'BER':>6} {'delivered':>9} {'lost/dup/bad':>12} "
          f"{'replays':>7} {'slot goodput':>12} {'lane goodput':>12} {'ideal':>6}")
    for tl, credits, ber, s, frac, lane, ideal in rows:
        print(f"{tl:>9} {credits:>7} {ber:>6g} {s['delivered']:>9} "
              f"{s['lost']}/{s['duplicates']}/{s['corrupt']:>8} {s['replays']:>7} "
              f"{frac:>12.4f} {lane:>12.4f} {ideal:>6.4f}")
    print("(slot goodput: payload bytes per cycle / 16 from the first request accepted to the "
          "last delivered; lane goodput: times 64/66 and markers; ideal: section 1. "
          "rx_credits=16 (the default) is credit-bound here: the credit loop is ~2 flits + "
          "channel + commit.)")

    print("\n== 3. Latency, request first beat accepted -> first beat delivered (cycles)")
    lat = rows[1][3]["latency_cycles"]
    print(f"first write of the run (empty link; tl_per_dl=4, channel 4 cycles): {lat['min']}")
    print(f"loaded (256-byte writes at full rate, tl_per_dl=4, 64 credits): "
          f"mean {rows[1][3]['latency_cycles']['mean']:.1f} "
          f"max {rows[1][3]['latency_cycles']['max']} (queueing behind earlier writes)")

    print("\n== 4. Replay-buffer depth for full rate")
    chan = 64
    tl = 4
    F = dl_flit_slots(tl)
    rtt = 2 * chan + 3 + 1 + F          # both channels, TX pipeline, RX check, ACK's flit
    need = math.ceil((rtt + 2 * F) / F)
    print(f"flit time F = {F} cycles; channel {chan} cycles each way; RTT ~ 2*{chan} + 3 "
          f"(TX pipeline) + 1 (RX check) + F (ACK rides the next trailer) = {rtt} cycles")
    print(f"an entry is held from its send start to its ACK: F + RTT = {F + rtt} cycles, "
          f"so full rate needs depth >= ceil((RTT + 2F)/F) = {need} (plus one being filled)")
    print(f"{'replay_depth':>12} {'slot goodput':>12}   (rx_credits=128 so credits do not bind)")
    for depth in (2, 4, 8, 16):
        s = run_link(opt.sim, {"tl_per_dl": tl, "replay_depth": depth, "rx_credits": 128},
                     dict(stream, n=n, latency=chan))
        print(f"{depth:>12} {s['goodput_bytes_per_cycle'] / 16:>12.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
