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
    block = get_block("chiplet")
    params = block.resolve(parse_sets(block, args.set))
    from fusionfabric.formats.chiplet import ChipletParams
    try:
        ChipletParams(**params)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--set: {exc}") from None
    if args.sim == "amaranth":
        if burst or drops:
            raise CliError("--burst and --link-drops need --sim icarus or verilator")
        from fusionfabric.tb.chiplet.amaranth_link import run_amaranth_link
        stats = run_amaranth_link(params, (n + 1) // 2, ber, seed)
        return _print(args, stats, params, ber, seed, n)
    with tempfile.TemporaryDirectory() as tmp:
        stats_file = Path(tmp) / "stats.json"
        test_args = {"n": (n + 1) // 2, "ber": ber, "burst": burst, "link_drops": drops,
                     "stats_file": str(stats_file), "report_only": True,
                     "stall": 200_000}
        try:
            runner.run("chiplet-pair", "fusionfabric.tb.chiplet.test_link", params,
                       component=ChipletPair(**params),
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
            ("CRC errors detected", stats["crc_errors"]),
            ("replays (of which timeouts)", f"{stats['replays']} ({stats['timeouts']})"),
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
