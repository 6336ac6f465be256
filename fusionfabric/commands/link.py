"""``fusionfabric link``: run the RTL link pair (two chiplets, fault channel) and report."""

from __future__ import annotations

import json
import math
import secrets
import sys
import tempfile
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "link"
HELP = "run two chiplets back to back through a bit-error channel; report loss and goodput"

SIMS = ("amaranth", "icarus", "verilator")


def add_arguments(p):
    p.add_argument("--ber", default="0", help="bit-error rate on the channel (0 .. 1e-2)")
    p.add_argument("--transactions", default="200",
                   help="requests in total, half from each side (1 .. 100000)")
    p.add_argument("--seed", default=None, help="random seed (default: fresh, printed)")
    p.add_argument("--sim", default="amaranth",
                   help="simulator: amaranth (Python, no build; default), or icarus / "
                        "verilator (the cocotb testbench, with bursts and link drops)")
    p.add_argument("--burst", default="0",
                   help="errors as bursts of up to this many bits (0: single flips)")
    p.add_argument("--link-drops", default="0", help="PHY link drops during the run")
    p.add_argument("--lane-burst", default=None, metavar="LO:HI",
                   help="through the 64b/66b PCS: errors as solid bursts of LO..HI bits "
                        "(1..64) on one lane from a random bit offset, as many as make "
                        "--ber flipped bits (needs --sim icarus or verilator)")
    p.add_argument("--dark-lane", default=None, metavar="START:CYCLES",
                   help="through the 64b/66b PCS: the A->B lanes carry zeros for CYCLES "
                        "cycles from cycle START (link down, relock; needs --sim icarus "
                        "or verilator)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="chiplet parameter (tl_per_dl, replay_depth, rx_credits, ...)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")


def _num(text, name, kind, lo, hi):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise CliError(f"--{name} {text!r} is not a valid {kind.__name__}") from None
    if isinstance(v, float) and not math.isfinite(v) or not lo <= v <= hi:
        raise CliError(f"--{name} {text!r} must be in {lo} .. {hi}")
    return v


def _range(text, name):
    parts = str(text).split(":")
    if len(parts) != 2:
        raise CliError(f"--{name} {text!r} is not LO:HI")
    lo = _num(parts[0], name, int, 1, 64)
    hi = _num(parts[1], name, int, 1, 64)
    if lo > hi:
        raise CliError(f"--{name} {text!r}: LO must be <= HI")
    return lo, hi


def run(args):
    from fusionfabric.extras import require

    require("dev", "link")
    from fusionfabric.rtl.blocks import get_block, parse_sets
    from fusionfabric.tb.chiplet.harness import ChipletPair
    from fusionfabric.tb.common import runner

    ber = _num(args.ber, "ber", float, 0.0, 1e-2)
    n = _num(args.transactions, "transactions", int, 1, 100_000)
    burst = _num(args.burst, "burst", int, 0, 128)
    drops = _num(args.link_drops, "link-drops", int, 0, 100)
    seed = secrets.randbits(31) if args.seed is None else _num(args.seed, "seed", int, 0,
                                                                 2**32 - 1)
    if args.sim not in SIMS:
        raise CliError(f"--sim {args.sim!r} is not one of {', '.join(SIMS)}")
    lane_bursts = dark_lane = None
    if args.lane_burst is not None:
        lo, hi = _range(args.lane_burst, "lane-burst")
        if burst:
            raise CliError("--burst and --lane-burst exclude each other")
        if ber <= 0:
            raise CliError("--lane-burst needs --ber > 0 (the rate of flipped bits)")
        rate = ber * 132 / ((lo + hi) / 2)     # bursts per cycle on 2 lanes x 66 bits
        if rate >= 0.5:
            raise CliError(f"--ber {args.ber} with --lane-burst {args.lane_burst} gives "
                           f"{rate:.2g} bursts per cycle; must be < 0.5")
        lane_bursts = [lo, hi, rate]
    if args.dark_lane is not None:
        from fusionfabric.sim.faults import parse_dark_lane
        try:
            dark_lane = list(parse_dark_lane(args.dark_lane))
        except ValueError as exc:
            raise CliError(f"--dark-lane: {exc}") from None
        if dark_lane[1] > 1_000_000:
            raise CliError(f"--dark-lane {args.dark_lane!r}: CYCLES must be <= 1000000")
    pcs = lane_bursts is not None or dark_lane is not None
    block = get_block("chiplet")
    params = block.resolve(parse_sets(block, args.set))
    from fusionfabric.formats.chiplet import ChipletParams
    try:
        ChipletParams(**params)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--set: {exc}") from None
    if args.sim == "amaranth":
        if burst or drops or pcs:
            raise CliError("--burst, --link-drops, --lane-burst and --dark-lane need "
                           "--sim icarus or verilator")
        from fusionfabric.tb.chiplet.amaranth_link import run_amaranth_link
        stats = run_amaranth_link(params, (n + 1) // 2, ber, seed)
        return _print(args, stats, params, ber, seed, n)
    with tempfile.TemporaryDirectory() as tmp:
        stats_file = Path(tmp) / "stats.json"
        test_args = {"n": (n + 1) // 2, "ber": ber, "burst": burst, "link_drops": drops,
                     "stats_file": str(stats_file), "report_only": True,
                     "stall": 200_000 + (dark_lane[1] if dark_lane else 0)}
        if pcs:
            from fusionfabric.tb.chiplet.harness import ChipletPcsPair
            test_args.update(pcs=True, lane_bursts=lane_bursts, dark_lane=dark_lane)
            block_name, component = "chiplet-pcs-pair", ChipletPcsPair(**params)
        else:
            block_name, component = "chiplet-pair", ChipletPair(**params)
        try:
            runner.run(block_name, "fusionfabric.tb.chiplet.test_link", params,
                       component=component,
                       sim=args.sim, seed=seed, test_args=test_args,
                       name=f"cli-ber{ber:g}-n{n}-s{seed}")
        except runner.CocotbFailure as exc:
            print(str(exc), file=sys.stderr)
            return 1
        stats = json.loads(stats_file.read_text())
    return _print(args, stats, params, ber, seed, n)


def _print(args, stats, params, ber, seed, n):
    stats["requested"] = n
    if args.json:
        print(json.dumps(stats, indent=1))
    else:
        lat = stats["latency_cycles"]
        rows = [
            ("simulator / seed", f"{args.sim} / {seed}"),
            ("parameters", ", ".join(f"{k}={v}" for k, v in params.items())),
            ("bit-error rate", f"{ber:g}"),
            ("requests sent", stats["sent"]),
            ("requests delivered", stats["delivered"]),
            ("completions matched", stats["completions"]),
            ("duplicates", stats["duplicates"]),
            ("corrupt", stats["corrupt"]),
            ("lost", stats["lost"]),
            ("flits hit by errors", stats["flits_hit"]),
            *([("bursts injected (bits)", f"{stats['bursts']} ({stats['burst_bits']})")]
              if stats.get("bursts") else []),
            *([("dark-lane cycles", stats["dark_cycles"])] if stats.get("dark_cycles") else []),
            *([("PCS lock losses (flits dropped, replayed)", stats["pcs_lock_losses"]),
               ("PCS relocks", stats["pcs_relocks"])] if stats.get("pcs") else []),
            ("CRC errors detected", stats["crc_errors"]),
            ("replays (of which timeouts)", f"{stats['replays']} ({stats['timeouts']})"),
            ("link downs (chiplet left ACTIVE)", stats.get("link_downs", "n/a")),
            ("link recoveries", stats.get("link_recoveries", "n/a")),
            ("cycles", stats["cycles"]),
            ("goodput", f"{stats['goodput_bytes_per_cycle']:.2f} B/cycle both ways "
                        f"({100 * stats['goodput_fraction_of_slot_rate']:.1f}% of 2 x 16 B)"),
            ("latency request->delivery",
             f"min {lat['min']} mean {lat['mean']:.1f} p99 {lat['p99']} max {lat['max']} "
             "cycles" if lat["min"] is not None else "n/a"),
        ]
        w = max(len(r[0]) for r in rows)
        for k, v in rows:
            print(f"{k:<{w}}  {v}")
    bad = stats["duplicates"] + stats["corrupt"] + stats["lost"]
    return 0 if bad == 0 else 1
