"""``fusionfabric vectors``: golden-model test vectors as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "vectors"
HELP = "write golden-model test vectors for a block as JSON"

#: Most vectors per run: each is a JSON object of up to a few kB, so 100,000 is some
#: hundreds of MB of JSON; beyond that is a mistake, not a test set.
MAX_COUNT = 100_000


def add_arguments(p):
    p.add_argument("block", help="block name (scrambler, crc, prbs, ...)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--count", type=int, default=8, help="number of vectors (default 8, at most 100000)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="generator parameter (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    # Convenience flags some generators take; passed on as params when given.
    for flag in ("dtype", "op", "members", "kind"):
        p.add_argument(f"--{flag}", default=None, help=argparse_help(flag))


def argparse_help(flag):
    return f"shorthand for --set {flag}=VALUE where the generator takes it"


def run(args):
    from fusionfabric.sim.vectors import all_vectors

    gens = all_vectors()
    if args.block not in gens:
        raise CliError(f"vectors: unknown block {args.block!r} (known: {', '.join(gens)})")
    if args.count < 1:
        raise CliError(f"--count {args.count} must be at least 1")
    if args.seed < 0:
        raise CliError(f"--seed {args.seed} must be non-negative")
    if args.count > MAX_COUNT:
        raise CliError(f"--count {args.count} is above the limit {MAX_COUNT:,}")
    if args.output:
        from fusionfabric.commands._common import check_output
        check_output(args.output, "-o")
    params = {}
    for item in args.set:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise CliError(f"--set {item!r} is not KEY=VALUE")
        params[key.strip()] = val.strip()
    for flag in ("dtype", "op", "members", "kind"):
        if getattr(args, flag) is not None:
            params[flag] = getattr(args, flag)
    try:
        result = gens[args.block](params, args.seed, args.count)
    except (ValueError, KeyError) as exc:
        raise CliError(f"vectors {args.block}: {exc}") from None
    doc = {"block": args.block, "params": result["params"], "seed": args.seed,
           "vectors": result["vectors"]}
    text = json.dumps(doc, indent=1) + "\n"
    if args.output:
        from fusionfabric.commands._common import write_text
        write_text(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0
