"""``fusionfabric sweep --ray | --cluster ADDRESS | --resume FILE``: the command-line side
of :mod:`fusionfabric.sim.fabric.cluster` (options, their checks, failure report)."""

from __future__ import annotations

import os

from fusionfabric.cli import CliError

__all__ = ["add_arguments", "requested", "run", "default_timeout", "TEST_HOOK"]

#: Environment variable read by the tests only: a JSON failure hook
#: (:func:`fusionfabric.sim.fabric.cluster._apply_hook`) that makes one point fail.
TEST_HOOK = "FUSIONFABRIC_TEST_FAIL_POINT"


def add_arguments(p):
    g = p.add_argument_group("cluster (one task per point; results identical to the "
                             "in-process run)")
    where = g.add_mutually_exclusive_group()
    where.add_argument("--ray", action="store_true",
                       help="run the points as Ray tasks on a local Ray started here "
                       "(needs the [cluster] extra)")
    where.add_argument("--cluster", metavar="ADDRESS",
                       help="run the points as Ray tasks on the Ray cluster whose head is "
                       "at HOST:PORT (its GCS address, default port 6379)")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="--ray: CPUs of the local Ray (default: this machine's); "
                   "--cluster: at most N points at a time (default: the cluster's CPUs)")
    g.add_argument("--resume", metavar="FILE",
                   help="results file (JSON lines, one per finished point): points it "
                   "holds are not run again, new ones are appended as they finish")
    g.add_argument("--retries", type=int, default=2, metavar="N",
                   help="Ray retries of a point whose task raised or whose worker died "
                   "(default 2)")
    g.add_argument("--point-timeout", type=float, default=None, metavar="S",
                   help="seconds after which a point without a result is cancelled and "
                   "reported (default: 120 + 20 x its estimated run time)")


def requested(args) -> bool:
    return bool(args.ray or args.cluster or args.resume)


def default_timeout(cfg) -> float:
    """120 s + 20 x one point's estimated run time (the sweep's estimate rate)."""
    from fusionfabric.commands.sweep import POINT_CYCLES_PER_S, run_size

    _, cycles = run_size(cfg)
    return 120.0 + 20.0 * cycles / POINT_CYCLES_PER_S


def check(args) -> None:
    """The cluster options' own checks (CliError, one line)."""
    if args.workers is not None and args.workers < 1:
        raise CliError(f"sweep: --workers {args.workers} must be at least 1")
    if args.workers is not None and not (args.ray or args.cluster):
        raise CliError("sweep: --workers needs --ray or --cluster")
    if args.retries < 0:
        raise CliError(f"sweep: --retries {args.retries} must be 0 or more")
    if args.point_timeout is not None and not args.point_timeout > 0:
        raise CliError(f"sweep: --point-timeout {args.point_timeout} must be positive")
    if args.resume:
        from fusionfabric.commands._common import check_output
        check_output(args.resume, "--resume")


def run(args, cfg, progress):
    """Run the study; the result, or ``None`` after reporting failed points (exit 1)."""
    import sys

    from fusionfabric.sim.fabric.cluster import ClusterError, StudyFailed, run_study

    check(args)
    executor = "ray" if (args.ray or args.cluster) else "local"
    timeout = args.point_timeout or default_timeout(cfg)
    hook = None
    if os.environ.get(TEST_HOOK):     # tests only: make one point fail (cluster._apply_hook)
        import json
        hook = json.loads(os.environ[TEST_HOOK])
    try:
        return run_study(cfg, args.placements, executor=executor, results=args.resume,
                         address=args.cluster, workers=args.workers, retries=args.retries,
                         point_timeout=timeout, progress=progress, hook=hook)
    except ClusterError as exc:
        raise CliError(f"sweep: {exc}") from None
    except StudyFailed as exc:
        for f in exc.failures:
            print(f"fusionfabric sweep: {f}", file=sys.stderr)
        keep = (f"the {exc.done} finished points are in {args.resume}; rerun the same "
                f"command to run the rest" if args.resume else
                "rerun with --resume FILE to keep finished points across runs")
        print(f"fusionfabric sweep: {len(exc.failures)} of {exc.total} points failed; {keep}",
              file=sys.stderr, flush=True)
        return None
