"""``fusionfabric link``: run the RTL link pair (two chiplets, fault channel) and report.

Before the run: a bit-error rate at which a DL flit crosses the channel intact less than
once in :data:`MIN_SURVIVAL` tries is refused unless ``--force`` (survival =
``(1 - BER) ** bits``, ``bits`` = the flit's slots x 128 data bits, or x 132 lane bits
through the 64b/66b PCS; with ``--lane-burst``, ``(1 - bursts per cycle) ** slots``); a
run estimated to take long prints its estimate (:data:`RATE_CYCLES_PER_S`; with a lane
dark for good, up to the failure and the last completion timeout).

During the run: a progress bar of requests delivered on stderr when it is a terminal
(``--progress``; on Icarus and Verilator the testbench writes its count to a file the
command reads). ``--max-cycles`` bounds the run; reaching it stops the traffic, and the
run ends with the report of the counts so far, a line saying so, and exit status 1.

``--dark-lane LANE:START[:CYCLES]`` (through the PCS): lane 0 or 1 of A->B, 2 or 3 of
B->A, or ``ab``/``ba`` for both lanes of a direction, dark from cycle START for CYCLES
cycles, or for good without CYCLES. For good, the link fails, and the run ends once every
request has been taken by its port and every non-posted one has its completion (OK,
ERROR when refused, TIMEOUT from the completion timer) while a chiplet is FAILED.

The report prints one line per kind of event, each counted where it happens:

* faults injected on the channel: DL flits hit by bit errors and, apart, DL flits cut by
  link drops (the channel harness counts each flit once per kind; a flit both hit and
  cut is in both); through the PCS: cycles with an injected error, not flits;
* at the receivers: DL flits failing CRC, good-CRC data flits discarded out of
  sequence or as duplicates (go-back-N), flits cut short (framing);
* PCS lock losses and relocks, link downs and recoveries;
* at the senders: replays (go-back-N rewinds, of which replay-timer time-outs) and data
  flits sent again;
* fault escalation, summed over both chiplets' STATUS: link failures, of which by the
  replay limit and by the link-lost timeout; completion timeouts; non-posted requests
  refused while failed (ERROR completions); posted requests refused; late completions
  dropped;
* at the accelerators: messages delivered corrupt (errors the CRC missed), duplicated,
  lost; when the link failed, the testbench's own counts: requests refused at the
  ports, ERROR and TIMEOUT completions seen, requests held in the link, unreported
  requests (taken, no completion), and its sender ledger's verdict.

With bit errors only, every hit flit fails CRC: ``flits hit = CRC errors`` (and no
message delivered corrupt); with drops, ``CRC errors <= hit <= CRC errors + cut``.
Exit status 1 if anything was lost, duplicated, corrupted or unreported, if the link is
FAILED at the end, or at the bound.
"""

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

#: A BER whose DL flit survives less often than this is refused without ``--force``.
MIN_SURVIVAL = 1e-3
#: Simulated cycles per second of the link pair, for the run-time estimate. amaranth: 36,
#: measured here as the difference of ``fusionfabric link --transactions 100`` and
#: ``--transactions 20`` (BER 1e-5, seed 1: 871 - 290 cycles in 27.4 - 11.2 s) on the
#: shared 2-core machine. icarus: the low end of the 15-130 cycles/s docs/protocol.md
#: gives for the chiplet pair on Icarus on the same machine, 40. verilator: not measured
#: apart; the cocotb testbench's per-cycle Python dominates, so the Icarus figure is used.
RATE_CYCLES_PER_S = {"amaranth": 36.0, "icarus": 40.0, "verilator": 40.0}
#: Cycles of a run: about this many per transaction (871 cycles for 100, 290 for 20 at
#: BER 1e-5; more with replays) plus the fixed part (bring-up, drain, 300 settling).
CYCLES_PER_TRANSACTION = 8
FIXED_CYCLES = 450
#: --max-cycles: default max(400000, 1000 x transactions); at most 10**9.
MAX_CYCLES_LIMIT = 10**9


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
    p.add_argument("--dark-lane", default=None, metavar="LANE:START[:CYCLES]",
                   help="through the 64b/66b PCS: lane LANE (0, 1: the A->B lanes; 2, 3: "
                        "the B->A lanes; ab or ba: both lanes of that direction) carries "
                        "zeros for CYCLES cycles from cycle START (link down, relock), "
                        "without CYCLES for good (the link fails; the run ends once every "
                        "request is delivered, refused or completed with TIMEOUT); needs "
                        "--sim icarus or verilator")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="chiplet parameter (tl_per_dl, replay_depth, rx_credits, ...)")
    p.add_argument("--max-cycles", default=None, metavar="N",
                   help="end the run after N cycles with the report and exit status 1 "
                        "(default: the larger of 400000 and 1000 x transactions)")
    p.add_argument("--force", action="store_true",
                   help="run even at a BER at which a DL flit survives less than once "
                        "in 1000 tries")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar of requests delivered on stderr (auto: only on a "
                        "terminal)")
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


#: --dark-lane LANE: (direction, lanes of that direction; None = both)
DARK_LANES = {"0": ("ab", [0]), "1": ("ab", [1]), "2": ("ba", [0]), "3": ("ba", [1]),
              "ab": ("ab", None), "ba": ("ba", None)}


def parse_dark_lane(text: str) -> list:
    """``LANE:START[:CYCLES]`` as the testbench's ``[start, cycles or None, direction,
    lanes or None]`` (``None`` cycles: dark for good)."""
    parts = str(text).split(":")
    if len(parts) not in (2, 3):
        raise CliError(f"--dark-lane {text!r} is not LANE:START[:CYCLES]")
    lane = parts[0].strip().lower()
    if lane not in DARK_LANES:
        raise CliError(f"--dark-lane {text!r}: LANE {parts[0]!r} is not 0, 1 (A->B), "
                       f"2, 3 (B->A), ab or ba")
    start = _num(parts[1], "dark-lane", int, 0, 10**8)
    cycles = _num(parts[2], "dark-lane", int, 1, 1_000_000) if len(parts) == 3 else None
    d, lanes = DARK_LANES[lane]
    return [start, cycles, d, lanes]


def describe_dark_lane(dl: list) -> str:
    """``[start, cycles, direction, lanes]`` in words."""
    start, cycles, d, lanes = dl
    where = ("A->B" if d == "ab" else "B->A") + (
        " lanes 0 and 1" if lanes is None else f" lane {lanes[0]}")
    return (f"{where} dark from cycle {start:,} "
            + ("for good" if cycles is None else f"for {cycles:,} cycles"))


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
        dark_lane = parse_dark_lane(args.dark_lane)
    pcs = lane_bursts is not None or dark_lane is not None
    max_cycles = (max(400_000, 1000 * n) if args.max_cycles is None else
                  _num(args.max_cycles, "max-cycles", int, 1, MAX_CYCLES_LIMIT))
    block = get_block("chiplet")
    params = block.resolve(parse_sets(block, args.set))
    from fusionfabric.formats.chiplet import ChipletParams
    try:
        ChipletParams(**params)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--set: {exc}") from None
    if args.sim == "amaranth" and (burst or drops or pcs):
        raise CliError("--burst, --link-drops, --lane-burst and --dark-lane need "
                       "--sim icarus or verilator")
    if dark_lane is not None and dark_lane[1] is None:
        # for good: every non-posted request must end in a completion, whole
        if not params["cpl_timeout"]:
            raise CliError(f"--dark-lane {args.dark_lane!r} (for good) needs cpl_timeout "
                           f"> 0: without the completion timer a request sent into the "
                           f"dead link never completes")
        if params["rx_credits"] < 5:
            raise CliError(f"--dark-lane {args.dark_lane!r} (for good) needs rx_credits "
                           f">= 5 (got {params['rx_credits']}): below that a completion "
                           f"cut by the failed link holds the port (docs/protocol.md, "
                           f"\"Fault escalation\")")
    _check_survival(args, ber, params, pcs, lane_bursts)
    _say_estimate(args.sim, n, max_cycles, params, dark_lane)
    progress = {"auto": sys.stderr.isatty(), "on": True, "off": False}[args.progress]
    if args.sim == "amaranth":
        from fusionfabric.tb.chiplet import amaranth_link
        with _request_bar(amaranth_link, 2 * ((n + 1) // 2), progress):
            stats = amaranth_link.run_amaranth_link(params, (n + 1) // 2, ber, seed,
                                                    max_cycles=max_cycles)
        # the loop ends when everything is done or at max_cycles; a run that needed every
        # allowed cycle counts as bounded (never a silent cut)
        stats["max_cycles"] = max_cycles
        stats["stopped_at_max_cycles"] = stats["cycles"] >= max_cycles
        return _print(args, stats, params, ber, seed, n)
    with tempfile.TemporaryDirectory() as tmp:
        stats_file = Path(tmp) / "stats.json"
        progress_file = Path(tmp) / "progress.json"
        test_args = {"n": (n + 1) // 2, "ber": ber, "burst": burst, "link_drops": drops,
                     "stats_file": str(stats_file), "report_only": True,
                     "max_cycles": max_cycles,
                     "progress_file": str(progress_file) if progress else None,
                     "stall": 200_000 + ((dark_lane[1] or 0) if dark_lane else 0)}
        if pcs:
            from fusionfabric.tb.chiplet.harness import ChipletPcsPair
            test_args.update(pcs=True, lane_bursts=lane_bursts, dark_lane=dark_lane)
            block_name, component = "chiplet-pcs-pair", ChipletPcsPair(**params)
        else:
            block_name, component = "chiplet-pair", ChipletPair(**params)
        try:
            with _file_bar(progress_file, 2 * ((n + 1) // 2), progress):
                runner.run(block_name, "fusionfabric.tb.chiplet.test_link", params,
                           component=component,
                           sim=args.sim, seed=seed, test_args=test_args,
                           name=f"cli-ber{ber:g}-n{n}-s{seed}")
        except runner.CocotbFailure as exc:
            print(str(exc), file=sys.stderr)
            return 1
        stats = json.loads(stats_file.read_text())
    # the testbench stops at the bound and reports the counts so far
    # (tb.chiplet.link.LinkTB.budget)
    stats["max_cycles"] = max_cycles
    stats["stopped_at_max_cycles"] = bool(stats.get("stopped_at_max_cycles"))
    if dark_lane is not None:
        stats["dark_lane"] = describe_dark_lane(dark_lane)
    return _print(args, stats, params, ber, seed, n)


def flit_survival(ber: float, params: dict, pcs: bool = False,
                  lane_bursts: list | None = None) -> tuple[float, int]:
    """``(probability a DL flit crosses the channel unhit, its bits on the wire)``.

    A DL flit is ``dl_flit_slots(tl_per_dl)`` slots; the channel flips data bits (128 per
    slot) at ``ber``, through the PCS lane bits (2 x 66 per slot, sync headers
    included); with ``lane_bursts`` = ``[lo, hi, rate]`` a slot is hit with probability
    ``rate`` (bursts per cycle)."""
    from fusionfabric.formats.chiplet import SLOT_BITS, dl_flit_slots

    slots = dl_flit_slots(int(params["tl_per_dl"]))
    bits = slots * (132 if pcs else SLOT_BITS)
    if lane_bursts is not None:
        return (1.0 - float(lane_bursts[2])) ** slots, bits
    return (1.0 - ber) ** bits, bits


def _check_survival(args, ber, params, pcs, lane_bursts) -> None:
    p, bits = flit_survival(ber, params, pcs, lane_bursts)
    if p < MIN_SURVIVAL and not args.force:
        raise CliError(f"--ber {args.ber}: a DL flit ({bits} bits on the wire) survives "
                       f"with probability {p:.3g} < {MIN_SURVIVAL:g}, so the link would "
                       f"do little but replay; --force runs it anyway")


def estimate_seconds(sim: str, n: int, max_cycles: int) -> tuple[float, int]:
    """``(seconds, cycles)``: the run-time estimate of ``n`` transactions (see
    :data:`RATE_CYCLES_PER_S`), the cycles capped at ``max_cycles``."""
    cycles = min(max_cycles, FIXED_CYCLES + CYCLES_PER_TRANSACTION * n)
    return cycles / RATE_CYCLES_PER_S[sim], cycles


def _say_estimate(sim, n, max_cycles, params=None, dark_lane=None) -> None:
    from fusionfabric.commands._common import say_estimate
    s, cycles = estimate_seconds(sim, n, max_cycles)
    if dark_lane is not None and dark_lane[1] is None and params is not None:
        # for good: the run lasts until the failure and the last completion timeout
        from fusionfabric.formats.chiplet import ChipletParams
        b = ChipletParams(**params).fail_bounds()
        cycles = min(max_cycles, max(cycles, dark_lane[0] + max(b["replay"], b["lost"])
                                     + b["cpl"] + 400))
        s = cycles / RATE_CYCLES_PER_S[sim]
    say_estimate("link", s, f"about {cycles:,} cycles at {RATE_CYCLES_PER_S[sim]:g} "
                            f"cycles/s on {sim}, without the simulator build")


class _file_bar:
    """A tqdm bar of requests delivered while a cocotb simulator runs: the testbench
    writes ``{"delivered", "cycle"}`` to ``path`` about twice a second
    (``progress_file``), a thread here reads it."""

    def __init__(self, path: Path, total: int, enabled: bool):
        self.path, self.total, self.enabled = path, total, enabled
        self.bar = self.thread = None

    def __enter__(self):
        if not self.enabled:
            return self
        import threading

        from tqdm import tqdm
        self.bar = tqdm(total=self.total, unit="req", file=sys.stderr, leave=False)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while not self.stop.wait(0.5):
            try:
                doc = json.loads(self.path.read_text())
            except (OSError, ValueError):
                continue
            self.bar.n = min(self.total, int(doc.get("delivered", 0)))
            self.bar.set_postfix_str(f"cycle {int(doc.get('cycle', 0)):,}", refresh=False)
            self.bar.refresh()

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
        if self.bar is not None:
            self.bar.close()
        return False


class _request_bar:
    """A tqdm bar of requests delivered while the Amaranth link runs.

    ``run_amaranth_link`` takes no progress callback, so the bar counts the deliveries
    its scoreboard sees: the module's scoreboard class is replaced for the run by a
    subclass whose ``observe`` of the first board built (requests) moves the bar. Without
    that class (another version of the testbench) the run goes on without a bar."""

    def __init__(self, mod, total: int, enabled: bool):
        self.mod, self.total, self.enabled = mod, total, enabled
        self.bar = self.saved = None

    def __enter__(self):
        base = getattr(self.mod, "_Board", None)
        if not self.enabled or base is None:
            return self
        from tqdm import tqdm
        bar = self.bar = tqdm(total=self.total, unit="req", file=sys.stderr, leave=False)
        first = []

        class Board(base):
            def __init__(self):
                super().__init__()
                first.append(self)

            def observe(self, key, item):
                before = self.delivered
                super().observe(key, item)
                if self is first[0] and self.delivered > before:
                    bar.update(1)

        self.saved = base
        self.mod._Board = Board
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.mod._Board = self.saved
        if self.bar is not None:
            self.bar.close()
        return False


def events(stats: dict, sim: str, link_drops: int) -> list[tuple[str, str, int]]:
    """One ``(key, label, count)`` per kind of event of a run's ``stats`` (see the module
    docstring); labels say what each counter counts."""
    sa, sb = stats.get("status_a") or {}, stats.get("status_b") or {}

    def both(key):
        return int(sa.get(key, 0)) + int(sb.get(key, 0))

    if stats.get("pcs"):
        out = [("cycles_with_bit_errors", "cycles with bit errors injected (PCS lanes)",
                int(stats["flits_hit"]))]
    elif "flits_hit_err" in stats:
        # the channel counts flits hit by bit errors and flits cut by drops apart
        out = [("flits_hit_by_bit_errors", "DL flits hit by bit errors",
                int(stats["flits_hit_err"]))]
        if link_drops or stats.get("flits_cut"):
            out.append(("flits_cut_by_drops", "DL flits cut by link drops (words lost)",
                        int(stats["flits_cut"])))
    elif link_drops:
        out = [("flits_hit_or_dropped", "DL flits hit by bit errors or lost in link drops",
                int(stats["flits_hit"]))]
    else:
        out = [("flits_hit_by_bit_errors", "DL flits hit by bit errors",
                int(stats["flits_hit"]))]
    out += [("crc_errors", "DL flits failing CRC (receivers)", int(stats["crc_errors"])),
            ("flits_discarded", "good-CRC DL flits discarded (out of sequence or duplicate)",
             both("seq_err") + both("dup")),
            ("frame_errors", "DL flits cut short (framing errors)", both("frame_err"))]
    if stats.get("pcs"):
        out += [("pcs_lock_losses", "PCS lock losses (events)", int(stats["pcs_lock_losses"])),
                ("pcs_relocks", "PCS relocks", int(stats["pcs_relocks"]))]
    if "link_downs" in stats:
        out += [("link_downs", "link downs (a chiplet left ACTIVE)", int(stats["link_downs"])),
                ("link_recoveries", "link recoveries", int(stats["link_recoveries"]))]
    out += [("replays", "replays (go-back-N rewinds)", int(stats["replays"])),
            ("replay_timeouts", "replays started by the replay timer", int(stats["timeouts"])),
            ("flits_resent", "data DL flits sent again", both("tx_replayed")),
            ("link_failures", "link failures (entries into FAILED)", both("failures")),
            ("fail_replay", "link failures: replay limit (rewinds without progress)",
             both("fail_replay")),
            ("fail_lost", "link failures: link lost (no good flit for link_timeout)",
             both("fail_lost")),
            ("cpl_timeouts", "completion timeouts (TIMEOUT completions made)",
             both("cpl_timeouts")),
            ("refused_nonposted", "non-posted requests refused while failed (ERROR "
             "completions made)", both("cpl_refused")),
            ("refused_posted", "posted requests refused while failed (dropped, counted)",
             both("failed_multicast") + both("failed_reduce") + both("failed_result")),
            ("late_completions", "late completions dropped (tag no longer outstanding)",
             both("late_cpl")),
            ("undetected", "messages delivered corrupt (errors the CRC missed)",
             int(stats["corrupt"]))]
    return out


def _fate_rows(stats: dict) -> list[tuple[str, object]]:
    """What the accelerators saw of a failed link (the cocotb testbench's own counts,
    apart from the chiplets' STATUS counters): rows for the report, none without a
    failure."""
    if "refused_seen" not in stats:
        return []
    failed = stats.get("failed_at_end") or {}
    ff = stats.get("first_failed") or {}
    rs, ec, held = stats["refused_seen"], stats["error_cpls_seen"], stats["held"]
    if not (any(failed.values()) or any(v is not None for v in ff.values())
            or stats.get("dark_permanent")):
        return []
    sides = [s for s in "ab" if failed.get(s)]
    state = (f"FAILED ({' and '.join(sides)})" if sides else "ACTIVE")
    rows = [("link at the end", state)]
    start = stats.get("dark_from")
    when = [f"{s} at cycle {ff[s]:,}" + (f" ({ff[s] - start:,} after the dark lane)"
                                        if start is not None else "")
            for s in "ab" if ff.get(s) is not None]
    if when:
        rows.append(("first FAILED", ", ".join(when)))
    rows += [
        ("refused at the ports", f"{rs['posted']} posted, {rs['nonposted']} non-posted"),
        ("ERROR / TIMEOUT completions seen", f"{ec['error']} / {ec['timeout']}"),
        ("held in the link", f"{held['posted']} posted, {held['nonposted']} non-posted "
                             f"(accepted, not delivered)"),
        ("unreported", f"{stats['unreported']} (non-posted requests taken, no "
                       f"completion)"),
        *([("not taken by the port", f"{stats['not_taken']} (the port stalled)")]
          if stats.get("not_taken") else []),
        ("sender accounting", stats["ledger_error"] or
         ("not checked (stopped at the bound)" if stats.get("stopped_at_max_cycles") else
          "sent = delivered + refused + held on both sides; each non-posted request "
          "completed once")),
    ]
    return rows


def _print(args, stats, params, ber, seed, n):
    stats["requested"] = n
    drops = int(getattr(args, "link_drops", 0) or 0)
    ev = events(stats, args.sim, drops)
    stats["events"] = {k: v for k, _, v in ev}
    bounded = bool(stats.get("stopped_at_max_cycles"))
    fate = _fate_rows(stats)
    failed_at_end = any((stats.get("failed_at_end") or {}).values())
    if args.json:
        print(json.dumps(stats, indent=1))
    else:
        lat = stats["latency_cycles"]
        rows = [
            ("simulator / seed", f"{args.sim} / {seed}"),
            ("parameters", ", ".join(f"{k}={v}" for k, v in params.items())),
            ("bit-error rate", f"{ber:g}"),
            *([("dark lane", stats["dark_lane"])] if stats.get("dark_lane") else []),
            ("requests sent", stats["sent"]),
            ("requests delivered", stats["delivered"]),
            ("completions matched", stats["completions"]),
            ("duplicates", stats["duplicates"]),
            ("corrupt", stats["corrupt"]),
            ("lost", stats["lost"]),
            *fate,
            *([("bursts injected (bits)", f"{stats['bursts']} ({stats['burst_bits']})")]
              if stats.get("bursts") else []),
            *([("dark-lane cycles", stats["dark_cycles"])] if stats.get("dark_cycles") else []),
            *[(label, v) for _, label, v in ev],
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
    if bounded:
        print(f"fusionfabric link: stopped at --max-cycles {stats['max_cycles']} before every "
              f"transaction completed ({stats['delivered']} of {stats['sent']} requests "
              f"delivered; seed {seed})", file=sys.stderr)
        return 1
    bad = (stats["duplicates"] + stats["corrupt"] + stats["lost"]
           + int(stats.get("unreported") or 0) + bool(stats.get("ledger_error")))
    if failed_at_end and not args.json:
        print(f"fusionfabric link: the link is FAILED at the end (seed {seed}); "
              f"{stats['delivered']} of {stats['sent']} requests delivered, "
              f"{stats.get('unreported', 0)} unreported", file=sys.stderr)
    return 0 if bad == 0 and not failed_at_end else 1
