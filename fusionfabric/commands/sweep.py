"""``fusionfabric sweep``: offered-load sweep of the cycle-level fabric model."""

from __future__ import annotations

import sys
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "sweep"
HELP = "sweep offered load on the cycle-level switch+link model (BookSim-style statistics)"

#: Speed of the model used for the run-time estimate: 107,040 sweep-point-cycles per
#: second, one load point alone on a 72-port uniform sweep with the numba kernel, measured
#: by ``bench/model_speed.py --cycles 20000`` on an idle machine. On the shared machine
#: under load the same bench measured 55,204 (README, "Cycle-level model at 72 ports"), so
#: the estimate can be short by 2x there; batches of points run faster.
POINT_CYCLES_PER_S = 107_040
#: Hard limit on a sweep's size: points x (warm-up + sample + drain) cycles. 10**10
#: point-cycles is about 26 hours at :data:`POINT_CYCLES_PER_S`.
MAX_POINT_CYCLES = 10**10


def add_arguments(p):
    from fusionfabric.commands._fabric_args import add_config_arguments

    add_config_arguments(p)
    p.add_argument("--pattern", default=None, help="traffic.pattern (uniform, permutation, "
                   "transpose, hotspot, bursty, alltoall, moe_dispatch, moe_combine, ring, "
                   "trace)")
    p.add_argument("--loads", default=None, help="run.loads: START:STOP:STEP or a,b,c")
    p.add_argument("--cycles", default=None, help="run.cycles: sample-period cycles")
    p.add_argument("--trace", default=None, help="traffic.trace_file (implies --pattern "
                   "trace): CSV or JSONL with cycle,source,destination,size")
    p.add_argument("--topology", default=None, help="topology.kind: crossbar (one switch) or "
                   "clos (two-tier leaf-spine; --set topology.radix=..., spines, routing...)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the full result as JSON")
    out.add_argument("--csv", action="store_true", help="print one CSV row per point")
    p.add_argument("--plot", metavar="FILE", help="write latency/throughput plots (png, "
                   "svg, pdf)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the JSON/CSV/table here")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar on stderr (auto: only on a terminal)")
    p.add_argument("--placements", type=int, default=1, metavar="K",
                   help="run K MoE expert placements (placement seeds s, s+1, ...; s = "
                   "traffic.placement_seed, default the run seed) and report the spread "
                   "of the accepted throughput per load")
    from fusionfabric.commands import _cluster
    _cluster.add_arguments(p)


def format_table(r) -> str:
    from fusionfabric.sim.fabric.phys import kind_report, rack_report

    cfg = r["config"]
    from fusionfabric.sim.fabric.config import PhysParams, load_config
    phys = PhysParams(**cfg["phys"])
    n = r.get("endpoints") or cfg["switch"]["n_ports"]
    lanes = None
    if cfg["link"].get("ports"):
        c = load_config(None, [f"link.ports={cfg['link']['ports']}",
                               f"switch.n_ports={n}", f"phys.lanes={phys.lanes}"])
        lanes = [l for _, l in c.port_table()]
    lines = [f"# {cfg['traffic']['pattern']} on {n} ports, mode {cfg['switch']['mode']}"
             + (" pipelined" if cfg['switch'].get('pipeline') else "") + ", "
             f"depth {cfg['switch']['depth']}, "
             + ("no iSLIP, " if cfg['switch']['mode'] == "crosspoint" else
                f"iSLIP iterations {r['iterations']}, ") +
             f"seed {r['seed']}, engine {r['engine']}",
             f"# sample {cfg['run']['cycles']} cycles after {r['window'][0]} warm-up; "
             f"{r['cycles_simulated']} cycles x {r['batch']} points in "
             f"{r['wall_seconds']:.2f} s = {r['point_cycles_per_second']:.0f} "
             f"point-cycles/s",
             *([] if "topology" not in r else [
                 "# clos: {leaves} leaves x {endpoints_per_leaf} endpoints + {spines} spines, "
                 "radix {radix}, oversubscription {oversubscription:g}, routing "
                 "{routing}".format(**r["topology"])]),
             f"{'load':>5} {'seed':>4} {'offered':>8} {'accepted':>8} {'lat_mean':>9} "
             f"{'p50':>6} {'p99':>6} {'max':>7} {'TB/s':>7} {'of agg':>6}  sat"]
    for p in r["points"]:
        rep = rack_report(phys, n, p["accepted"], cfg["phys"]["header_flits"],
                          cfg["traffic"]["packet_size"], port_lanes=lanes)
        lm = p["latency_mean"]
        lines.append(
            f"{p['load']:>5.2f} {p['seed']:>4} {p['offered']:>8.4f} {p['accepted']:>8.4f} "
            f"{(f'{lm:.2f}' if lm == lm else '-'):>9} {p['latency_p50']:>6.0f} "
            f"{p['latency_p99']:>6.0f} {str(p['latency_max']):>7} "
            f"{rep['achieved_TBps']:>7.1f} {100 * rep['fraction_of_aggregate']:>5.1f}%"
            f"  {'SAT' if p['saturated'] else ''}")
    rep = rack_report(phys, n, 1.0, port_lanes=lanes)
    if lanes is None:
        lines.append(f"# rack aggregate {rep['rack_aggregate_TBps']:.1f} TB/s = {n} x "
                     f"{rep['per_accelerator_TBps']:.2f} TB/s; TB/s column: payload moved, "
                     f"both directions, at the accepted throughput")
    else:
        lines.append(f"# rack aggregate {rep['rack_aggregate_TBps']:.1f} TB/s over "
                     f"{sum(lanes)} lanes ({cfg['link']['ports']}; "
                     f"{rep['per_accelerator_TBps']:.2f} TB/s per {phys.lanes}-lane port); "
                     f"TB/s column: payload moved, both directions")
        last = max(r["points"], key=lambda q: (q["seed"] == 0, q["load"]))
        for kind, k in kind_report(phys, last["per_kind"]).items():
            pk = last["per_kind"][kind]
            lines.append(f"# {kind}: {k['ports']} ports, {k['lanes']} lanes, "
                         f"{k['line_TBps']:.2f} TB/s = {100 * k['share_of_rack']:.1f} % of "
                         f"the rack; at load {last['load']:g}: moved {k['moved_TBps']:.2f} "
                         f"TB/s, sent {pk['sent_of_line']:.3f} and received "
                         f"{pk['received_of_line']:.3f} of its line rate")
    ob = r.get("output_bound")
    for seed, s in r["summary"].items():
        lines.append(f"# seed index {seed}: saturation throughput "
                     f"{s['saturation_throughput']:.4f}, first saturated load "
                     f"{s['saturation_load']}"
                     + (f", output bound {ob:.4f} (hottest output saturates; placement "
                        f"seed {r['placement_seed']})" if ob is not None else ""))
    return "\n".join(lines) + "\n"


def format_placements(r) -> str:
    cfg = r["config"]
    k = len(r["placements"])
    lines = [f"# {cfg['traffic']['pattern']} on {cfg['switch']['n_ports']} ports, {k} expert "
             f"placements (placement seeds {r['placements'][0]['placement_seed']}.."
             f"{r['placements'][-1]['placement_seed']}), seed {r['seed']}",
             f"{'load':>5} {'acc_min':>8} {'acc_med':>8} {'acc_max':>8}"]
    for s in r["spread"]:
        lines.append(f"{s['load']:>5.2f} {s['accepted_min']:>8.4f} "
                     f"{s['accepted_median']:>8.4f} {s['accepted_max']:>8.4f}")
    lines.append(f"{'placement':>9} {'out_bound':>9} {'sat_thru':>8}")
    for p in r["placements"]:
        ob = p["output_bound"]
        lines.append(f"{p['placement_seed']:>9} {(f'{ob:.4f}' if ob is not None else '-'):>9} "
                     f"{p['saturation_throughput']:>8.4f}")
    st, ob = r["saturation_throughput"], r["output_bound"]
    lines.append(f"# saturation throughput min/median/max {st['min']:.4f} / {st['median']:.4f} "
                 f"/ {st['max']:.4f}" + (f"; output bound {ob['min']:.4f} / {ob['median']:.4f} "
                                          f"/ {ob['max']:.4f}" if ob else ""))
    return "\n".join(lines) + "\n"


def run_size(cfg) -> tuple[int, int]:
    """``(points, cycles)`` of a sweep: batch points (loads x seeds) and the most cycles
    each may run (warm-up + sample + drain, the defaults resolved as run_sweep does)."""
    from fusionfabric.sim.fabric.config import ConfigError, parse_loads

    r = cfg.run
    try:
        points = len(parse_loads(r.loads)) * r.seeds
    except ConfigError as exc:
        from fusionfabric.cli import CliError
        raise CliError(f"sweep: {exc}") from None
    warm = r.warmup if r.warmup >= 0 else r.cycles // 4
    drain = r.drain if r.drain >= 0 else r.cycles
    return points, warm + r.cycles + drain


def check_size(cfg, placements: int = 1) -> float:
    """Refuse a sweep above :data:`MAX_POINT_CYCLES` (CliError naming the sizes and the
    estimate); print the estimated run time first if it is long. Returns the estimate.
    ``placements`` sweeps count as that many times the points."""
    from fusionfabric.commands._common import format_seconds, say_estimate

    points, cycles = run_size(cfg)
    points *= max(1, int(placements))
    total = points * cycles
    if cfg.topology.kind == "clos":   # a Clos point costs its switch ports / 72 points
        t = cfg.topology
        total = total * t.leaves * (t.endpoints_per_leaf + 2 * t.spines) // 72
    est = total / POINT_CYCLES_PER_S
    what = (f"{points} points x up to {cycles:,} cycles at {POINT_CYCLES_PER_S:,} "
            f"point-cycles/s, bench/model_speed.py")
    if total > MAX_POINT_CYCLES:
        raise CliError(f"sweep: {points} points x up to {cycles:,} cycles = {total:.3g} "
                       f"point-cycles is above the limit {MAX_POINT_CYCLES:.0e} (about "
                       f"{format_seconds(est)} at {POINT_CYCLES_PER_S:,} point-cycles/s); "
                       f"lower run.cycles, run.warmup, run.drain, the loads or run.seeds")
    say_estimate("sweep", est, what)
    return est


def run(args):
    from fusionfabric.commands._fabric_args import build_config, say
    from fusionfabric.sim.fabric.config import ConfigError
    from fusionfabric.sim.fabric.run import run_sweep
    from fusionfabric.sim.fabric.stats import to_csv, to_json
    from fusionfabric.sim.fabric.traffic import TrafficError

    flags = {"pattern": "traffic.pattern", "loads": "run.loads", "cycles": "run.cycles",
             "trace": "traffic.trace_file", "topology": "topology.kind"}
    if args.trace and not args.pattern:
        args.pattern = "trace"
    cfg = build_config(args, flags)
    from fusionfabric.commands._common import check_output, write_text
    if args.output:
        check_output(args.output, "-o")
    if args.plot:
        check_output(args.plot, "--plot", "plot")
    if args.placements < 1:
        raise CliError(f"sweep: --placements {args.placements} must be at least 1")
    if args.placements > 1 and (args.csv or args.plot):
        raise CliError("sweep: --placements K > 1 prints a table or --json (no --csv, --plot)")
    from fusionfabric.commands import _cluster
    _cluster.check(args)
    check_size(cfg, args.placements)
    say(f"fusionfabric sweep: seed {cfg.run.seed}")
    progress = {"auto": None, "on": True, "off": False}[args.progress]
    try:
        if _cluster.requested(args):      # point by point: Ray tasks and/or a results file
            r = _cluster.run(args, cfg, progress)
            if r is None:
                return 1
        elif args.placements > 1:
            from fusionfabric.sim.fabric.run import run_placements
            r = run_placements(cfg, args.placements, progress=progress)
        else:
            r = run_sweep(cfg, progress=progress)
            r.pop("fabric")
    except (ConfigError, TrafficError, ValueError) as exc:
        raise CliError(f"sweep: {exc}") from None
    if args.placements > 1:
        text = to_json(r) if args.json else format_placements(r)
    else:
        text = to_json(r) if args.json else to_csv(r) if args.csv else format_table(r)
    if args.output:
        write_text(Path(args.output), text)
        say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    if args.plot:
        from fusionfabric.sim.fabric.plot import plot_sweep

        t = cfg.topology
        where = (f"{cfg.endpoints} endpoints (Clos: {t.leaves} leaves x "
                 f"{t.endpoints_per_leaf}, {t.spines} spines, {t.routing} routing)"
                 if t.kind == "clos" else f"{cfg.endpoints} ports")
        plot_sweep([r], args.plot, title=f"{cfg.traffic.pattern}, {where}, seed "
                   f"{cfg.run.seed}")
        say(f"wrote {args.plot}")
    return 0
