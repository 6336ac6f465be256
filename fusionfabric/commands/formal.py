"""``fusionfabric formal``: prove a protocol promise of a block with SymbiYosys."""

from __future__ import annotations

from fusionfabric.cli import CliError

NAME = "formal"
HELP = ("prove a block's protocol properties with SymbiYosys (yowasp) and Yices; "
        "print PASS or FAIL with the counterexample trace")


def add_arguments(p):
    p.add_argument("block", nargs="?",
                   help="harness: trivial, islip, credits, pcs-lock, reduce (--list)")
    p.add_argument("--planted", metavar="BUG", default=None,
                   help="plant a bug in the design under test; the proof must FAIL")
    p.add_argument("--list", action="store_true", help="list harnesses and planted bugs")
    p.add_argument("--no-cover", action="store_true",
                   help="skip the cover (vacuity) task")
    p.add_argument("--timeout", type=float, default=3600, metavar="SEC",
                   help="time limit of the SymbiYosys run (default 3600 s)")


def run(args):
    from fusionfabric.formal.flow import HARNESSES, FormalError, _load_all, get_harness
    from fusionfabric.formal.flow import run as run_formal

    if args.list:
        _load_all()
        for h in HARNESSES.values():
            bound = f"prove k={h.depth}" if h.mode == "prove" else f"bmc {h.depth}"
            print(f"{h.name:10s} {bound:12s} {h.doc}")
            for bug, doc in h.planted.items():
                print(f"{'':10s}   --planted {bug}: {doc}")
        return 0
    if not args.block:
        raise CliError("formal: give a BLOCK (or --list)")
    if args.timeout <= 0:
        raise CliError(f"formal: --timeout {args.timeout:g} must be positive")
    try:
        get_harness(args.block)
        res = run_formal(args.block, args.planted, timeout=args.timeout,
                         cover=False if args.no_cover else None)
    except FormalError as exc:
        raise CliError(str(exc)) from None
    print(res.line())
    if res.status in ("PASS", "FAIL"):
        # FAIL with --planted is the expected outcome; the exit code says what was found
        return 0 if res.status == "PASS" else 1
    return 1
