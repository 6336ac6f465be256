"""Chiplet link goodput, latency and replay-buffer depth (docs/protocol.md, "Performance").

Prints, side by side from one run:

1. the bound: overhead factors of 256-byte writes against the raw lane bit rate
   (TL header, DL header + CRC, START rows, 64b/66b, alignment markers) per DL flit size,
   with a START row before every flit (``start_every = 1``) and with
   back-to-back flits delimited by position (``start_every = 16``);
2. measured goodput of the RTL link through the real PCS (``fusionfabric.tb.chiplet.harness.
   ChipletPcsPair``: chiplet → PhyToPcs → PcsTx, 2 lanes → lanes → PcsRx → PcsToPhy →
   chiplet; cocotb, Icarus by default) streaming 256-byte writes one way at BER 0 and
   1e-5, as a fraction of the raw lane bit rate (2 lanes × 66 bits per cycle): over the
   whole traffic window, and in steady state (between the deliveries at 10 % and 90 % of
   the run, so ramp-up and drain are left out); START rows counted in the harness;
3. request→delivery latency (first request on an idle, active link; and loaded);
4. the replay-buffer depth needed for full rate at a given round trip (derived
   ``ceil((RTT + 2F) / F)``), and measured goodput against depth with a long channel.

Usage: ``python bench/link_goodput.py [--sim icarus|verilator] [--quick] [--only 1,2,3,4]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fusionfabric.formats.chiplet import SLOT_BYTES, dl_flit_slots  # noqa: E402

PCS_6466 = 64 / 66
#: Marker period of the measured runs (rows). 802.3 cl. 82 uses 16384; 1024 keeps the
#: bring-up (marker lock at the second marker, alignment at the third) short in simulation
#: and costs 0.1 % (so the measurement is, if anything, pessimistic).
AM_PERIOD = 1024
LANE_BITS = 2 * 66          # raw bits per cycle on the two lanes


def breakdown(tl_per_dl: int, start_every: int = 16, am_period: int = AM_PERIOD,
              payload: int = 256):
    """Factors of the format bound for back-to-back ``payload``-byte writes."""
    slots_msg = 1 + payload // SLOT_BYTES          # header slot + data slots
    tl = payload / (slots_msg * SLOT_BYTES)
    F = dl_flit_slots(tl_per_dl)
    dl = 4 * tl_per_dl / F
    start = F * start_every / (F * start_every + 1)  # one START row per start_every flits
    markers = 1 - 1 / am_period
    total = tl * dl * start * PCS_6466 * markers
    return {"tl_per_dl": tl_per_dl, "tl_header": tl, "dl_header_crc": dl, "start": start,
            "pcs_64b66b": PCS_6466, "markers": markers, "goodput": total}


STREAM = {"only_writes": True, "fixed_length": 3, "one_way": True, "idle": 0.0,
          "backpressure": 0.0, "posted_fraction": 0.0, "start_after_link": True}


def run_link(sim, params, args, seed=1, pcs=False, am_period=AM_PERIOD, start_every=16):
    from fusionfabric.tb.chiplet.harness import ChipletPair, ChipletPcsPair
    from fusionfabric.tb.common import runner

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "stats.json"
        a = dict(args, stats_file=str(f), report_only=True, stall=200_000, pcs=pcs)
        latency = a.pop("latency", 4)
        if pcs:
            comp = ChipletPcsPair(latency=latency, am_period=am_period,
                                  start_every=start_every, **params)
            label = dict(params, latency=latency, am_period=am_period,
                         start_every=start_every)
            block = "chiplet-pcs-pair"
        else:
            comp = ChipletPair(latency=latency, **params)
            label = dict(params, latency=latency)
            block = "chiplet-pair"
        name = "bench-" + "-".join(f"{k}{v}" for k, v in sorted(dict(label, **args).items())
                                   if k not in ("stats_file",) and not isinstance(v, bool))
        t0 = time.time()
        runner.run(block, "fusionfabric.tb.chiplet.test_link", label, component=comp, sim=sim, seed=seed,
                   test_args=a, name=name)
        s = json.loads(f.read_text())
        s["wall_s"] = time.time() - t0
        return s


def lane_fraction(bytes_per_cycle):
    return None if bytes_per_cycle is None else bytes_per_cycle * 8 / LANE_BITS


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="icarus", choices=["icarus", "verilator"])
    ap.add_argument("--quick", action="store_true", help="fewer transactions")
    ap.add_argument("--only", default="1,2,3,4", help="sections to run (default all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--configs", default=None,
                    help="section 2 rows as tl_per_dl:replay_depth:rx_credits:start_every:BER,"
                         "... (default: the table in docs/protocol.md)")
    ap.add_argument("--depths", default="2,4,8,16", help="section 4 replay depths")
    opt = ap.parse_args(argv)
    only = {int(x) for x in opt.only.split(",")}
    n = 100 if opt.quick else 300

    if 1 in only:
        print("== 1. Bound: 256-byte writes back to back, fraction of the raw lane bit rate "
              f"(2 lanes x 66 bits; markers every {AM_PERIOD} rows)")
        print(f"{'tl_per_dl':>9} {'DL flit B':>9} {'TL hdr':>7} {'DL hdr+CRC':>10} "
              f"{'64b/66b':>8} {'markers':>8} {'START K=1':>9} {'bound K=1':>9} "
              f"{'START K=16':>10} {'bound K=16':>10}")
        for t in (1, 2, 4, 8, 16, 20, 24, 32):
            b1, b16 = breakdown(t, 1), breakdown(t, 16)
            print(f"{t:>9} {dl_flit_slots(t) * 16:>9} {b16['tl_header']:>7.4f} "
                  f"{b16['dl_header_crc']:>10.4f} {b16['pcs_64b66b']:>8.4f} "
                  f"{b16['markers']:>8.5f} {b1['start']:>9.4f} {b1['goodput']:>9.4f} "
                  f"{b16['start']:>10.4f} {b16['goodput']:>10.4f}")
        need = next(t for t in range(1, 33) if breakdown(t, 16)["goodput"] >= 0.90)
        print(f"(TL header 256/272 = 94.12 %, as NVLink 1, times 64/66 leaves 0.9127: >= 0.90 "
              f"needs DL hdr+CRC x START x markers >= 0.9861, i.e. tl_per_dl >= {need} with "
              "START rows only every 16 flits; with a START row per flit no tl_per_dl "
              "reaches it.)")

    rows = []
    if 2 in only or 3 in only:
        print(f"\n== 2. Measured through the PCS: 256-byte writes one way, no idle, no "
              f"backpressure, traffic after bring-up ({opt.sim}, {n} writes, seed {opt.seed})")
        configs = [
            # (tl_per_dl, replay_depth, rx_credits, start_every, BER)
            (4, 8, 64, 1, 0.0),
            (4, 8, 64, 16, 0.0),
            (32, 8, 256, 16, 0.0),
            (32, 8, 256, 16, 1e-5),
            (8, 8, 128, 16, 1e-5),
        ]
        if opt.quick:
            configs = configs[1:4]
        if opt.configs:
            configs = [tuple(f(x) for f, x in zip((int, int, int, int, float), c.split(":")))
                       for c in opt.configs.split(",")]
        print(f"{'tl_per_dl':>9} {'depth':>5} {'credits':>7} {'K':>3} {'BER':>6} "
              f"{'delivered':>9} {'lost/dup/bad':>12} {'replays':>7} {'START/flit':>10} "
              f"{'lane goodput':>12} {'steady':>7} {'bound':>6} {'wall s':>6}", flush=True)
        for tl, depth, credits, K, ber in configs:
            s = run_link(opt.sim, {"tl_per_dl": tl, "replay_depth": depth,
                                   "rx_credits": credits},
                         dict(STREAM, n=n, ber=ber), seed=opt.seed, pcs=True, start_every=K)
            rows.append((tl, depth, credits, K, ber, s))
            words = s["words"]["ab"]
            starts = s["start_rows"]["ab"]
            per_flit = starts / max(1, words / dl_flit_slots(tl))
            lane = lane_fraction(s["goodput_bytes_per_cycle"])
            steady = lane_fraction(s["steady_bytes_per_cycle"])
            bad = f"{s['lost']}/{s['duplicates']}/{s['corrupt']}"
            print(f"{tl:>9} {depth:>5} {credits:>7} {K:>3} {ber:>6g} {s['delivered']:>9} "
                  f"{bad:>12} {s['replays']:>7} {per_flit:>10.4f} {lane:>12.4f} "
                  f"{steady if steady is not None else float('nan'):>7.4f} "
                  f"{breakdown(tl, K)['goodput']:>6.4f} {s['wall_s']:>6.0f}", flush=True)
        print("(lane goodput: payload bits / (cycles x 132) from the first request accepted to "
              "the last delivered; steady: between the deliveries at 10 % and 90 % of the run; "
              "START/flit: START rows per DL flit sent A->B over the whole run, bring-up "
              "included; bound: section 1.)")

    if 3 in only and rows:
        print("\n== 3. Latency, request first beat accepted -> first beat delivered (cycles, "
              "through the PCS, channel 4 cycles)")
        for tl, depth, credits, K, ber, s in rows:
            if ber:
                continue
            lat = s["latency_cycles"]
            print(f"tl_per_dl={tl:<2} K={K:<2}: first write on the idle active link "
                  f"{lat['min']}, loaded (writes at full rate) mean {lat['mean']:.1f} "
                  f"max {lat['max']}")

    if 4 in only:
        print("\n== 4. Replay-buffer depth for full rate (ChipletPair, no PCS, slot level)")
        chan = 64
        tl = 4
        F = dl_flit_slots(tl)
        rtt = 2 * chan + 3 + 1 + F          # both channels, TX pipeline, RX check, ACK's flit
        need = math.ceil((rtt + 2 * F) / F)
        print(f"flit time F = {F} cycles; channel {chan} cycles each way; RTT ~ 2*{chan} + 3 "
              f"(TX pipeline) + 1 (RX check) + F (ACK rides the next trailer) = {rtt} cycles")
        print(f"an entry is held from its fill start to its ACK: about 2F + RTT = "
              f"{2 * F + rtt} cycles, so full rate needs depth >= ceil((RTT + 2F)/F) = {need}")
        bound = breakdown(tl)["tl_header"] * breakdown(tl)["dl_header_crc"]
        print(f"{'replay_depth':>12} {'derived rate':>12} {'slot goodput':>12} "
              f"{'steady':>7}   (rx_credits=128 so credits do not bind; slot bound "
              f"{bound:.4f})", flush=True)
        for depth in (int(x) for x in opt.depths.split(",")):
            s = run_link(opt.sim, {"tl_per_dl": tl, "replay_depth": depth, "rx_credits": 128},
                         dict(STREAM, n=n, latency=chan), seed=opt.seed)
            derived = bound * min(1.0, depth / ((rtt + 2 * F) / F))
            st = (s["steady_bytes_per_cycle"] or float("nan")) / 16
            print(f"{depth:>12} {derived:>12.4f} {s['goodput_bytes_per_cycle'] / 16:>12.4f} "
                  f"{st:>7.4f}", flush=True)
        print("(derived rate: the slot bound times depth / ((RTT + 2F) / F), capped at 1: "
              "with fewer entries than a round trip of flits the sender waits for ACKs.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
