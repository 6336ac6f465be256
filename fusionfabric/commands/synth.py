"""``fusionfabric synth``: LUTs, flip-flops, block RAM and Fmax of a block on an FPGA.

Exit status: 0 when every row has its figures (status ``ok``); 1 when any row has not: a
tool failed (Yosys or nextpnr stopped with an error: its last error line is printed on
stderr, from the tool's own log), timed out, or the design does not fit; 2 for a user
error (bad block, parameter, target, device, path). A row whose tool failed is shown in the
table but saved nowhere: not in ``result.json``, ``<label>-<target>.json`` or ``--json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "synth"
HELP = "synthesize, place and route a block with Yosys + nextpnr (yowasp); print LUT/FF/BRAM/Fmax"


def add_arguments(p):
    p.add_argument("block", nargs="?", help="block name (see 'generate --list')")
    p.add_argument("--all", action="store_true",
                   help="every registered block at its defaults, one table")
    p.add_argument("--report", action="store_true",
                   help="the main blocks at the compared sizes (fusionfabric.synth.REPORT_SETS)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter (repeatable)")
    p.add_argument("--target", default="ecp5", help="ecp5 (default) or ice40")
    p.add_argument("--device", default=None,
                   help="device: ecp5 12k/25k/45k/85k (default 85k, CABGA381); "
                        "ice40 hx8k (default, CT256), up5k, ...")
    p.add_argument("--package", default=None, help="package (default per device)")
    p.add_argument("--freq", type=float, default=None, metavar="MHZ",
                   help="timing target handed to nextpnr (default 150 ecp5, 100 ice40)")
    p.add_argument("--seed", type=int, default=None,
                   help="placement seed (default 1; with --report, each row's own, "
                        "fusionfabric.synth.REPORT_SETS)")
    p.add_argument("--timeout", type=float, default=None, metavar="SEC",
                   help="time limit of each nextpnr run (default 1200 s); a run that "
                        "times out gives a row with the Yosys figures and nextpnr's last "
                        "Fmax estimate")
    p.add_argument("--yosys-timeout", type=float, default=None, metavar="SEC",
                   help="time limit of each Yosys run (default 1800 s)")
    p.add_argument("--force", action="store_true",
                   help="run the tools even if this configuration's result is saved "
                        "(build/synth/<block>-<hash>-.../result.json)")
    p.add_argument("--json", metavar="FILE", help="also write the result(s) to FILE")
    p.add_argument("--late", type=float, default=None, metavar="MHZ",
                   help="also list the registers whose inputs miss MHZ (one BLOCK), "
                        "grouped, latest first")


def run(args):
    from fusionfabric.extras import require

    require("fpga", "synth")
    from fusionfabric.rtl.blocks import all_blocks, get_block, parse_sets
    from fusionfabric.synth import (REPORT_SETS, SynthError, ToolError, check_tools,
                                    format_table, synth)

    many = args.all or args.report
    if (args.all + args.report + bool(args.block)) != 1:
        raise CliError("synth: give one BLOCK, --all or --report")
    if many and args.set:
        raise CliError("synth: --set needs one BLOCK")
    if many and args.late is not None:
        raise CliError("synth: --late needs one BLOCK")
    if args.late is not None:
        from fusionfabric.synth import SynthError, late_period_ns
        try:
            late_period_ns(args.late)     # before the tools run, not after
        except SynthError as exc:
            raise CliError(f"synth: {exc}") from None
    if args.json:
        from fusionfabric.commands._common import check_output
        check_output(args.json, "--json")
    try:
        check_tools(args.target)
    except SynthError as exc:
        raise CliError(str(exc)) from None
    seed = 1 if args.seed is None else args.seed
    jobs = []
    if args.all:
        jobs = [(b.name, {}, seed, args.freq) for b in all_blocks().values()]
    elif args.report:
        jobs = [(row[0], dict(row[1]), row[2] if len(row) > 2 and args.seed is None
                 else seed, row[3] if len(row) > 3 and args.freq is None else args.freq)
                for row in REPORT_SETS if row[0] in all_blocks()]
    else:
        block = get_block(args.block)
        jobs = [(block.name, parse_sets(block, args.set), seed, args.freq)]
    rows, results, problems = [], [], []
    for name, params, row_seed, row_freq in jobs:
        try:
            r = synth(name, params, args.target, device=args.device, package=args.package,
                      freq_mhz=row_freq, seed=row_seed, pnr_timeout=args.timeout,
                      yosys_timeout=args.yosys_timeout, force=args.force)
        except ToolError as exc:
            rows.append((name, f"failed: {exc}"))
            problems.append(f"synth {name}: {exc}")
            continue
        except SynthError as exc:      # not a tool run: bad device, frequency, install
            if not many:
                raise CliError(str(exc)) from None
            rows.append((name, f"failed: {exc}"))
            problems.append(f"synth {name}: {exc}")
            continue
        rows.append(r)
        if not r.tool_error:
            results.append(r.to_dict())
        if r.status != "ok":
            problems.append(f"synth {name}: {r.status}: "
                            f"{r.tool_error or r.note}")
        if many:
            what = f"Fmax {r.fmax_mhz} MHz" if r.status == "ok" else r.note
            print(f"synth {name}: {r.lut4} LUT4, {r.ff} FF, {r.bram} BRAM, {what}",
                  file=sys.stderr, flush=True)
    print(format_table(rows))
    if args.late is not None and results and rows[0].status == "ok":
        _print_late(rows[0], args.late)
    for line in problems:
        print(line, file=sys.stderr)
    from fusionfabric.synth import _root
    if results:
        label = "all" if args.all else "report" if args.report else jobs[0][0]
        out = _root() / f"{label}-{args.target}.json"
        doc = results if many else results[0]
        out.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(doc, indent=1, default=str) + "\n"
        out.write_text(text)
        if args.json:
            from fusionfabric.commands._common import write_text
            write_text(Path(args.json), text)
        print(f"saved {out}" + (f" and {args.json}" if args.json else "")
              + (f" ({len(results)} of {len(jobs)} rows; failed tool runs are not saved)"
                 if len(results) < len(jobs) else ""), file=sys.stderr)
    else:
        print("nothing saved: " + ("the tool run failed" if not many else
                                   "every tool run failed"), file=sys.stderr)
    return 1 if problems else 0


def _print_late(res, mhz: float) -> None:
    from fusionfabric.synth import SynthError, late_registers
    report = Path(res.build_dir) / "report.json"
    if res.status != "ok" or not report.exists():
        raise CliError(f"synth --late: no routed design to check ({res.status})")
    try:
        late = late_registers(json.loads(report.read_text()), mhz)
    except SynthError as exc:
        raise CliError(f"synth --late: {exc}") from None
    total = sum(g["count"] for g in late)
    print(f"\nregister inputs later than {1000 / mhz:.2f} ns ({mhz:g} MHz): {total}")
    for g in late[:40]:
        print(f"  {g['count']:6d} {g['input']:4s} {g['worst_ns']:7.2f} ns  {g['register']}")
    if len(late) > 40:
        print(f"  ... {len(late) - 40} more groups ({report})")
