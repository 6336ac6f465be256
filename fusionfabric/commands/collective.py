"""``fusionfabric collective``: all-reduce / all-to-all time and NCCL-style bandwidth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "collective"
HELP = "all-reduce or all-to-all on the fabric: ring or in-switch reduction, algbw/busbw"

OPS = ("allreduce", "alltoall")
ALGOS = ("ring", "switch")


def add_arguments(p):
    from fusionfabric.commands._fabric_args import add_config_arguments

    p.add_argument("op", help="allreduce or alltoall")
    add_config_arguments(p)
    p.add_argument("--bytes", default="1G", help="message size per rank: 4096, 64K, 1M, "
                   "1G, a list a,b or a power-of-2 range 1K:1G (default 1G)")
    p.add_argument("--algo", default="ring", help="ring or switch, or a list ring,switch")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32, int32 or uint32: also "
                   "check the reduction numerics (sim.reduce)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="bus bandwidth vs message size plot")
    p.add_argument("-o", "--output", metavar="FILE", help="write the output here")


def where(cfg, short: bool = False) -> str:
    """``72 ports``, or the Clos: ``1024 endpoints (Clos: 32 leaves x 32, 32 spines,
    adaptive routing)`` (``short``: without the routing)."""
    t = cfg.topology
    if t.kind != "clos":
        return f"{cfg.switch.n_ports} ports"
    tail = "" if short else f", {t.routing} routing"
    return (f"{t.endpoints} endpoints (Clos: {t.leaves} leaves x {t.endpoints_per_leaf}, "
            f"{t.spines} spines{tail})")


def run(args):
    from fusionfabric.commands._fabric_args import build_config, parse_bytes, say
    from fusionfabric.sim.fabric.collective import DTYPES, collective

    if args.op not in OPS:
        raise CliError(f"collective {args.op!r} is not one of: {', '.join(OPS)}")
    algos = [a.strip() for a in str(args.algo).split(",") if a.strip()]
    for a in algos:
        if a not in ALGOS:
            raise CliError(f"--algo {a!r} is not one of: {', '.join(ALGOS)}")
    if args.op == "alltoall" and "switch" in algos:
        raise CliError("--algo switch applies to allreduce only (valid for alltoall: ring)")
    if args.dtype is not None and args.dtype not in DTYPES:
        raise CliError(f"--dtype {args.dtype!r} is not one of: {', '.join(DTYPES)}")
    sizes = parse_bytes(args.bytes)
    from fusionfabric.commands._common import check_output, write_text
    if args.output:
        check_output(args.output, "-o")
    if args.plot:
        check_output(args.plot, "--plot", "plot")
    cfg = build_config(args, {})
    say(f"fusionfabric collective: seed {cfg.run.seed}")
    rows = []
    for algo in algos:
        for size in sizes:
            try:
                rows.append(collective(cfg, args.op, size, algo, args.dtype))
            except ValueError as exc:
                raise CliError(f"collective: {exc}") from None
    if args.json:
        text = json.dumps(rows, indent=1) + "\n"
    else:
        lines = [f"# {args.op} on {where(cfg)}, link "
                 f"{rows[0]['link_GBps_per_direction']:.0f} GB/s per direction payload, "
                 f"seed {cfg.run.seed}",
                 f"{'algo':>6} {'bytes':>12} {'time_us':>10} {'algbw_GB/s':>11} "
                 f"{'busbw_GB/s':>11} {'busbw/link':>10} {'lat_us':>8}"]
        for r in rows:
            lines.append(f"{r['algo']:>6} {r['bytes']:>12} {r['seconds'] * 1e6:>10.3f} "
                         f"{r['algbw_GBps']:>11.4g} {r['busbw_GBps']:>11.4g} "
                         f"{r['busbw_over_link']:>10.3f} {r['phys_latency_s'] * 1e6:>8.3f}")
        h = rows[0]["hop_latency_ns"]
        lines.append(f"# time_us includes lat_us, the physical latencies: per link SerDes "
                     f"{h['serdes_ns']:g} + PCS {h['pcs_ns']:g} + FEC {h['fec_ns']:g} + cable "
                     f"{h['cable_ns']:g} ns, switch {h['switch_ns']:g} ns at "
                     f"{h['clock_ghz']:g} GHz; path {h['path_ns']:g} ns"
                     + (f", across the spines (4 links, 3 switches) "
                        f"{4 * h['link_ns'] + 3 * h['switch_ns']:g} ns"
                        if cfg.topology.kind == "clos" and cfg.topology.leaves > 1 else "")
                     + " (docs/model.md)")
        for r in rows:
            if "numerics" in r:
                nm = r["numerics"]
                lines.append(f"# numerics ({nm['dtype']}, {nm['elements']} elements x "
                             f"{cfg.endpoints} "
                             f"ranks): switch tree reproducible "
                             f"{nm['switch_tree_reproducible']}, ring vs switch max "
                             f"{nm['ring_vs_switch_max_ulps']} ulp")
                break
        text = "\n".join(lines) + "\n"
    if args.output:
        write_text(Path(args.output), text)
        say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    if args.plot:
        from fusionfabric.sim.fabric.plot import plot_collective

        plot_collective(rows, args.plot, title=f"{args.op}, {where(cfg, short=True)}")
        say(f"wrote {args.plot}")
    return 0
