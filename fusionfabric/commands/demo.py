"""``fusionfabric demo``: the fabric's main job (docs/demo.md).

Runs the workloads of :mod:`fusionfabric.sim.workloads` on the 8-endpoint fabric in RTL simulation
(``tb/fabric``, Verilator by default): a bf16 all-reduce through the switch's reduction
units and the same one as a ring, both bit-exact against numpy in their documented
orders, and a skewed MoE all-to-all; once on clean lanes and once with bit errors on every
lane plus a slip on one lane mid-run. Then the FEC run: the fabric with
``lane_profile="rs544"`` (``--fec-endpoints``, default 2) plays ``--fec-workloads`` at
``--fec-ber`` (default 1e-4, beyond what the 64b/66b lanes survive). Prints a table (bytes
moved, cycles, goodput per port, reduction speedup over the ring, replays, relocks, FEC
corrected and uncorrectable codewords, bit-exact, seed), writes ``demo.json`` and plots
under ``--out``. Exit status 1 if any run is not bit-exact.

``--engine ideal`` plays the same workloads on :class:`fusionfabric.sim.workloads.IdealNetwork`
(pure Python, loss-free links of one slot per cycle), for a quick look without RTL.

The fabric testbench (``fusionfabric.tb.fabric.test_fabric.test_workload``) gets ``test_args =
{workload, seed, params, faults, result_file}`` (``faults``: None or ``{"ber": float,
"slip_lane": int, "slip_at": int}``, lane -1 = no slip; the FEC run's also has
``"lanes": "rs544"``, and its fabric parameters ``lane_profile="rs544"``) and writes a JSON object to
``result_file`` (``fusionfabric.tb.fabric.fabric_tb.FabricTB.write_results``) with ``cycles``,
``replays`` and ``relocks`` (summed over every link), ``fec`` (rs544 only: FEC counters summed over every
link, ``fusionfabric.tb.fabric.fabric_tb.fec_totals``), ``endpoints`` (per port:
``sent_bytes``, ``received_bytes``, ``crc_errors``, ``flips``, ...) and, from
:func:`fusionfabric.sim.workloads.result_record`, ``bit_exact``, ``error`` and ``stats``. A missing
``bit_exact`` counts as True only if the cocotb test passed. With ``--count-hits`` (Icarus,
64b/66b lanes of 2 per direction) the 64b/66b fault runs' ``test_args`` also have
``"count_hits": 1`` and their records ``hits`` (:mod:`fusionfabric.tb.fabric.hits`); the demo
prints the DL flits hit, cut and undetected errors summed over the link directions, and
exits 1 unless CRC errors on hit flits = flits hit and undetected = 0. docs/demo.md.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "demo"
HELP = ("the fabric demo: in-network vs ring bf16 all-reduce and an MoE all-to-all on the "
        "RTL fabric, bit-exact, with and without lane faults")

SIMS = ("verilator", "icarus", "amaranth")
ENGINES = ("rtl", "ideal")
#: The fabric block and its cocotb module (tb/fabric), the test that plays one workload.
BLOCK = "fabric"
TB_MODULE = "fusionfabric.tb.fabric.test_fabric"
TB_TESTCASE = "test_workload"
#: Amaranth-simulator runner of the same testbench: ``fn(params, test_args, seed, waves)``
#: returns the results dict (or writes ``test_args["result_file"]``).
AMARANTH_RUNNER = ("fusionfabric.tb.fabric.amaranth_fabric", "run_workload")
SLOT_BYTES = 16

# display name, workload name in fusionfabric.sim.workloads
WORKLOAD_ORDER = ("allreduce-switch", "allreduce-ring", "moe-alltoall")
#: The FEC run's fabric size and workloads (docs/demo.md, "The FEC run").
FEC_ENDPOINTS = 2
FEC_WORKLOADS = ("allreduce-switch", "moe-alltoall")
#: The heterogeneous run (docs/demo.md, "The heterogeneous run"): its workload and the
#: memory of each cpu endpoint.
HETERO_WORKLOAD = "hetero-rack"
HETERO_MEM_BYTES = 4096


def add_arguments(p):
    p.add_argument("--sim", default="verilator",
                   help="RTL simulator: verilator (default), icarus or amaranth")
    p.add_argument("--engine", default="rtl",
                   help="rtl (the fabric in simulation, default) or ideal (fusionfabric.sim.workloads."
                        "IdealNetwork: pure Python, no faults, seconds)")
    p.add_argument("--endpoints", default="8", help="endpoints = switch ports (default 8)")
    p.add_argument("--elems", default="4096",
                   help="bf16 gradients per endpoint for the all-reduces: a multiple of "
                        "32 x endpoints (default 4096 = 8 KiB)")
    p.add_argument("--reduce-bytes", default="256",
                   help="bytes per REDUCE message of the in-network all-reduce: 64, 128, "
                        "192 or 256 (default 256)")
    p.add_argument("--tokens", default="64", help="MoE tokens per endpoint (default 64)")
    p.add_argument("--d-model", default="128",
                   help="MoE token width in bf16, a multiple of 32 (default 128 = 256 B)")
    p.add_argument("--skew", default="1.2",
                   help="MoE expert popularity exponent, 0 = uniform (default 1.2)")
    p.add_argument("--top-k", default="2", help="MoE experts per token (default 2)")
    p.add_argument("--workloads", default=",".join(WORKLOAD_ORDER),
                   help=f"comma list of {', '.join(WORKLOAD_ORDER)} (default all)")
    p.add_argument("--seed", default="1", help="seed of data, routing and faults (default 1)")
    f = p.add_mutually_exclusive_group()
    f.add_argument("--faults", dest="faults", action="store_const", const="only",
                   help="only the runs with injected lane faults")
    f.add_argument("--no-faults", dest="faults", action="store_const", const="none",
                   help="only the clean runs")
    p.set_defaults(faults="both")
    p.add_argument("--ber", default="1e-5",
                   help="bit-error rate on every lane in the fault runs (default 1e-5)")
    p.add_argument("--slip", default="1",
                   help="lane slipped by one bit mid-run in the fault runs (lane index of "
                        "fusionfabric.rtl.fabric.lane_index; -1: none; default 1)")
    p.add_argument("--fec-ber", default="1e-4",
                   help="bit-error rate of the FEC run: the fabric with lane_profile=rs544 "
                        "(256b/257b + RS(544,514), docs/fec.md); 'none' skips it "
                        "(default 1e-4)")
    p.add_argument("--fec-endpoints", default=str(FEC_ENDPOINTS),
                   help=f"endpoints of the FEC run's fabric (default {FEC_ENDPOINTS}, or "
                        "--endpoints if fewer: each FEC link adds an RS encoder and "
                        "decoder to the simulated design)")
    p.add_argument("--fec-workloads", default=",".join(FEC_WORKLOADS),
                   help=f"workloads of the FEC run (default {','.join(FEC_WORKLOADS)})")
    p.add_argument("--hetero-cpus", default="auto",
                   help="cpu endpoints (memory targets, the last ones) of the heterogeneous "
                        "run: the other endpoints all-reduce while they serve READ, WRITE "
                        "and ATOMIC_ADD; 0 skips it (default auto: 1, and 0 on --sim "
                        "amaranth, whose runner builds no memory target, and with fewer than 3 endpoints)")
    p.add_argument("--slip-at", default=None,
                   help="cycle after the traffic starts at which the lane slips (default: "
                        "half the workload's cycles on the ideal network, i.e. mid-run)")
    p.add_argument("--dark-lane", default=None, metavar="LANE[:START[:CYCLES]]",
                   help="in the fault runs, lane LANE (endpoint e, direction d (0 up, 1 "
                        "down), lane k: LANE = (2e + d) * 2 + k) dark for CYCLES cycles "
                        "(default 1000) from cycle START after the traffic starts (default: "
                        "mid-run, as --slip-at)")
    p.add_argument("--count-hits", action="store_true",
                   help="in the fault runs, the fabric testbench's flit accounting "
                        "(count_hits=1; --sim icarus, 64b/66b lanes of 2 per direction): "
                        "prints DL flits hit by bit errors, cut and undetected errors, and "
                        "fails unless CRC errors on hit flits = flits hit and none is "
                        "undetected (docs/demo.md)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="fabric parameter (n_chunks, am_period, rx_credits, ...)")
    p.add_argument("--waves", action="store_true", help="write FST traces (RTL runs)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", default="build/demo",
                   help="directory for demo.json, plots and results (default build/demo)")


# -- argument checking -------------------------------------------------------------------------
def _num(text, name, kind, lo, hi):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise CliError(f"--{name} {text!r} is not a valid "
                       f"{'integer' if kind is int else 'number'}") from None
    if isinstance(v, float) and not math.isfinite(v) or not lo <= v <= hi:
        raise CliError(f"--{name} {text!r} must be in {lo} .. {hi}")
    return v


def _dark_lane(text, n: int) -> list:
    """``LANE[:START[:CYCLES]]`` as ``[lane, start or None, cycles]``."""
    parts = str(text).split(":")
    if not 1 <= len(parts) <= 3 or any(not x.strip() for x in parts):
        raise CliError(f"--dark-lane {text!r} is not LANE[:START[:CYCLES]]")
    try:
        vals = [int(x) for x in parts]
    except ValueError:
        raise CliError(f"--dark-lane {text!r} is not LANE[:START[:CYCLES]] (integers)") \
            from None
    lane = vals[0]
    start = vals[1] if len(vals) > 1 else None
    cycles = vals[2] if len(vals) > 2 else 1000
    if not 0 <= lane < 4 * n:
        raise CliError(f"--dark-lane {text!r}: LANE {lane} must be in 0 .. {4 * n - 1} "
                       f"({n} endpoints, 2 directions, 2 lanes)")
    if start is not None and not 0 <= start <= 10**8:
        raise CliError(f"--dark-lane {text!r}: START {start} must be in 0 .. 100000000")
    if not 1 <= cycles <= 10**6:
        raise CliError(f"--dark-lane {text!r}: CYCLES {cycles} must be in 1 .. 1000000")
    return [lane, start, cycles]


def _fabric_params(args, n: int) -> dict:
    """The fabric block's parameters (``--set`` on top of the defaults). The ideal engine
    needs only ``n_chunks`` (default 16, the fabric's) and does not import the RTL."""
    if args.engine == "ideal":
        params = {"n_chunks": 16}
        for item in args.set:
            key, sep, text = item.partition("=")
            if key.strip() != "n_chunks" or not sep:
                raise CliError(f"--set {item!r}: only n_chunks=N applies to --engine ideal")
            params["n_chunks"] = _num(text, "set n_chunks", int, 1, 64)
        return params
    from fusionfabric.rtl.blocks import BlockError, get_block, parse_sets

    try:
        block = get_block(BLOCK)
    except (BlockError, KeyError):
        raise CliError(f"the RTL fabric (block {BLOCK!r}) is not available; "
                       f"use --engine ideal") from None
    sets = parse_sets(block, args.set)
    if "n_endpoints" in sets:
        raise CliError("use --endpoints, not --set n_endpoints")
    return block.resolve({**sets, "n_endpoints": n})


def _workload_params(args, n: int, n_chunks: int) -> dict[str, dict]:
    elems = _num(args.elems, "elems", int, 32, 1 << 19)
    if elems % (32 * n):
        raise CliError(f"--elems {elems} must be a multiple of 32 x endpoints = {32 * n} "
                       f"(the ring cuts it into {n} segments of 64-byte messages)")
    tokens = _num(args.tokens, "tokens", int, 1, 1 << 16)
    d_model = _num(args.d_model, "d-model", int, 32, 4096)
    if d_model % 32:
        raise CliError(f"--d-model {d_model} must be a multiple of 32 (64-byte messages)")
    skew = _num(args.skew, "skew", float, 0.0, 10.0)
    top_k = _num(args.top_k, "top-k", int, 1, min(n, 15))
    rbytes = _num(args.reduce_bytes, "reduce-bytes", int, 64, 256)
    if rbytes % 64:
        raise CliError(f"--reduce-bytes {rbytes} is not 64, 128, 192 or 256")
    return {"allreduce-switch": {"n_elems": elems, "n_chunks": n_chunks,
                                 "message_bytes": rbytes},
            "allreduce-ring": {"n_elems": elems},
            "moe-alltoall": {"tokens_per_endpoint": tokens, "d_model": d_model,
                             "skew": skew, "top_k": top_k}}


# -- running ---------------------------------------------------------------------------------------
def _run_ideal(name, n, seed, wparams, n_chunks) -> dict:
    from fusionfabric.sim.workloads import IdealNetwork, make_workload

    w = make_workload(name, n, seed, **wparams)
    t0 = time.perf_counter()
    res = IdealNetwork(n, seed, n_chunks=n_chunks, cpu_endpoints=getattr(w, "cpus", ()),
                       mem_bytes=getattr(w, "mem_bytes", HETERO_MEM_BYTES)).run(w)
    error = None
    try:
        w.check()
    except AssertionError as exc:
        error = str(exc)
    return {"cycles": res["cycles"], "bit_exact": error is None, "error": error,
            "stats": w.stats(), "replays": 0, "relocks": 0, "crc_errors": 0,
            "wall_s": time.perf_counter() - t0}


def _run_rtl(args, name, n, seed, wparams, params, faults, out: Path,
             count_hits: bool = False) -> dict:
    kind = "clean" if not faults else ("fec" if faults.get("lanes") == "rs544" else "faults")
    tag = f"{name}-{kind}-n{n}-s{seed}"
    result_file = (out / "runs" / f"{tag}.json").resolve()
    result_file.parent.mkdir(parents=True, exist_ok=True)
    if result_file.exists():
        result_file.unlink()
    test_args = {"workload": name, "seed": seed, "params": wparams,
                 "faults": faults, "result_file": str(result_file)}
    if count_hits:
        test_args["count_hits"] = 1
    t0 = time.perf_counter()
    failure = None
    if args.sim == "amaranth":
        import importlib
        try:
            mod = importlib.import_module(AMARANTH_RUNNER[0])
            fn = getattr(mod, AMARANTH_RUNNER[1])
        except (ImportError, AttributeError):
            raise CliError(f"--sim amaranth needs {AMARANTH_RUNNER[0]}.{AMARANTH_RUNNER[1]}, "
                           f"which is not available; use --sim verilator or icarus") from None
        try:
            res = fn(params, test_args, seed, args.waves)
        except AssertionError as exc:
            res, failure = None, str(exc)
        if res is not None and not result_file.exists():
            result_file.write_text(json.dumps(res, default=str))
    else:
        from fusionfabric.tb.common import runner
        try:
            r = runner.run(BLOCK, TB_MODULE, params, sim=args.sim, seed=seed,
                           testcase=TB_TESTCASE, test_args=test_args, waves=args.waves,
                           name=f"demo-{tag}", vpi="top")
            if args.waves:
                print(f"  waves: {r.test_dir}", file=sys.stderr)
        except runner.CocotbFailure as exc:
            failure = str(exc)
    if not result_file.exists():
        return {"cycles": None, "bit_exact": False, "stats": None, "replays": None,
                "relocks": None, "wall_s": time.perf_counter() - t0,
                "error": failure or f"the testbench wrote no {result_file}"}
    res = _normalize(json.loads(result_file.read_text()), failure)
    if count_hits:
        res["hit_counts"] = hit_counts(res)
    res["wall_s"] = time.perf_counter() - t0
    return res


#: The flit accounting's counters the demo prints (``--count-hits``), summed over the link
#: directions of a record's ``hits``: key, label.
HIT_COUNTS = (("flits_hit", "DL flits hit by bit errors"),
              ("flits_cut", "DL flits cut (never received whole; replayed)"),
              ("undetected", "undetected errors (hit flits passing CRC)"))


def hit_counts(res: dict) -> dict | None:
    """``flits_hit``, ``crc_err_on_hit``, ``flits_cut`` and ``undetected`` of the record's
    ``hits`` (tb/fabric/hits.py: its ``total``, the link directions summed), or None
    without them."""
    hits = res.get("hits")
    total = hits.get("total") if isinstance(hits, dict) else None
    keys = ("flits_hit", "crc_err_on_hit", "flits_cut", "undetected")
    if not isinstance(total, dict) or not all(k in total for k in keys):
        return None
    return {k: int(total[k]) for k in keys}


def hit_failure(r: dict) -> str | None:
    """The one-line failure of a run with the flit accounting (``hit_counts`` in it), or
    None: CRC errors on hit flits must equal flits hit, and none may be undetected."""
    if "hit_counts" not in r:
        return None
    where = f"flit accounting, {r['workload']} ({_fmt_faults(r['faults'])})"
    h = r["hit_counts"]
    if h is None:
        return f"{where}: the results record has no hits (seed {r['seed']})"
    bad = []
    if h["crc_err_on_hit"] != h["flits_hit"]:
        bad.append(f"CRC errors on hit flits {h['crc_err_on_hit']:,} != DL flits hit "
                   f"{h['flits_hit']:,}")
    if h["undetected"]:
        bad.append(f"{h['undetected']:,} undetected errors")
    return f"{where}: {'; '.join(bad)} (seed {r['seed']})" if bad else None


def _normalize(res: dict, failure: str | None) -> dict:
    """Fill the demo's keys from a testbench results record: per-port ``tx_bytes``/
    ``rx_bytes`` and sums of ``crc_errors``/``flips`` from ``endpoints``; ``bit_exact``
    False whenever the cocotb test failed."""
    eps = res.get("endpoints") or []
    if eps and "tx_bytes" not in res:
        res["tx_bytes"] = [int(x.get("sent_bytes", 0)) for x in eps]
        res["rx_bytes"] = [int(x.get("received_bytes", 0)) for x in eps]
    for key in ("crc_errors", "flips"):
        if key not in res and eps and all(key in x for x in eps):
            res[key] = sum(int(x[key]) for x in eps)
    if not res.get("stats") and "tx_bytes" in res:
        res["stats"] = {"bytes_moved": sum(res["tx_bytes"]), "tx_bytes": res["tx_bytes"],
                        "rx_bytes": res["rx_bytes"]}
    if eps and all("chiplet_ep" in x for x in eps):
        res["events"] = _events(eps)
    res.setdefault("error", None)
    res["bit_exact"] = bool(res.get("bit_exact", True)) and failure is None
    if failure and not res["error"]:
        res["error"] = failure
    return res


#: The link events of a fault run, one entry per kind (summed over both chiplets of every
#: link; docs/demo.md): name, chiplet STATUS field.
EVENTS = (("CRC errors", "crc_err"), ("replays", "replays"), ("replay timeouts", "timeouts"),
          ("failures", "failures"), ("replay-limit failures", "fail_replay"),
          ("link-lost failures", "fail_lost"), ("completion timeouts", "cpl_timeouts"),
          ("refused requests", "cpl_refused"))
#: What each event counts, for the report's one line per kind.
EVENT_LABELS = {
    "bit flips": "bits flipped on the lanes (fault injectors, every lane)",
    "relocks": "PCS relocks (a link's receiver lost and regained lock)",
    "CRC errors": "DL flits failing CRC (both chiplets of every link)",
    "replays": "replays (go-back-N rewinds)",
    "replay timeouts": "replays started by the replay timer",
    "failures": "link failures (entries into FAILED)",
    "replay-limit failures": "link failures: replay limit",
    "link-lost failures": "link failures: link lost",
    "completion timeouts": "completion timeouts (TIMEOUT completions made)",
    "refused requests": "non-posted requests refused while failed (ERROR completions)",
}
#: Why "bit flips" and "CRC errors" differ (docs/demo.md, "Bit flips and CRC errors").
FLIPS_NOTE = ("bit flips count bits, CRC errors count DL flits, and they need not match: "
              "two flips in one flit fail it once; a flip outside a flit (START or "
              "alignment-marker row) or one that ends a chain of flits (the flits until the "
              "next START row are lost, replayed, not CRC errors) fails no CRC; the "
              "descrambler copies a flip 39 and 58 bits on, into the lane's next block, "
              "which may be the next flit's; a slip or realignment fails flits without a "
              "flip; FEC lanes correct flips before the CRC (docs/demo.md)")


def _events(eps: list[dict]) -> dict:
    """Bit flips injected, PCS relocks (link drops) and the chiplets' event counters."""
    out = {"bit flips": sum(int(x.get("flips", 0)) for x in eps),
           "relocks": sum(int(x["link"]["up_drops"]) + int(x["link"]["down_drops"])
                          for x in eps if "link" in x)}
    for name, key in EVENTS:
        out[name] = sum(int(x[side][key]) for x in eps for side in ("chiplet_ep", "chiplet_sw"))
    return out


def _goodput(res: dict, n: int) -> dict:
    """Payload goodput per port as a fraction of one slot (16 B) per cycle and direction."""
    cycles = res.get("cycles")
    stats = res.get("stats") or {}
    tx = res.get("tx_bytes") or stats.get("tx_bytes")
    rx = res.get("rx_bytes") or stats.get("rx_bytes")
    if not cycles or tx is None or rx is None:
        return {"tx": None, "rx": None}
    return {"tx": [b / (cycles * SLOT_BYTES) for b in tx],
            "rx": [b / (cycles * SLOT_BYTES) for b in rx]}


def run(args):
    if args.engine not in ENGINES:
        raise CliError(f"--engine {args.engine!r} is not one of {', '.join(ENGINES)}")
    if args.sim not in SIMS:
        raise CliError(f"--sim {args.sim!r} is not one of {', '.join(SIMS)}")
    if args.count_hits and (args.engine != "rtl" or args.sim != "icarus"):
        raise CliError("--count-hits needs the RTL fabric on --sim icarus (the flit "
                       "accounting reads the chiplets' internal signals), not "
                       + ("--engine ideal" if args.engine != "rtl" else f"--sim {args.sim}"))
    if args.engine == "rtl" and args.sim != "amaranth":
        from fusionfabric.extras import require

        require("dev", "demo --engine rtl")
    n = _num(args.endpoints, "endpoints", int, 2, 128)
    seed = _num(args.seed, "seed", int, 0, 2**32 - 1)
    ber = _num(args.ber, "ber", float, 0.0, 1e-2)
    slip = _num(args.slip, "slip", int, -1, 4 * n - 1)
    slip_at = None if args.slip_at is None else _num(args.slip_at, "slip-at", int, 0, 10**8)
    names = [s.strip() for s in str(args.workloads).split(",") if s.strip()]
    for s in names:
        if s not in WORKLOAD_ORDER:
            raise CliError(f"--workloads: {s!r} is not one of {', '.join(WORKLOAD_ORDER)}")
    if not names:
        raise CliError("--workloads is empty")
    if args.engine == "ideal":
        if args.faults == "only":
            raise CliError("--faults needs the RTL fabric (--engine rtl): the ideal network "
                           "has no lanes")
        if args.waves:
            raise CliError("--waves needs the RTL fabric (--engine rtl)")
        passes = [None]
    else:
        fault = {"ber": ber, "slip_lane": slip}
        passes = {"both": [None, fault], "none": [None], "only": [fault]}[args.faults]
    if args.engine == "ideal" and args.slip_at is not None:
        raise CliError("--slip-at needs the RTL fabric (--engine rtl)")
    dark = None
    if args.dark_lane is not None:
        dark = _dark_lane(args.dark_lane, n)
        if args.engine == "ideal" or args.faults == "none":
            raise CliError("--dark-lane needs the fault runs of the RTL fabric (--engine rtl, "
                           "not --no-faults)")
        for f in passes:
            if f is not None:
                f["dark_lane"] = dark
    fec_ber = None if str(args.fec_ber).strip().lower() == "none" else \
        _num(args.fec_ber, "fec-ber", float, 0.0, 1e-2)
    n_fec = min(n, _num(args.fec_endpoints, "fec-endpoints", int, 2, 128))
    fec_names = [s.strip() for s in str(args.fec_workloads).split(",") if s.strip()]
    for s in fec_names:
        if s not in WORKLOAD_ORDER:
            raise CliError(f"--fec-workloads: {s!r} is not one of {', '.join(WORKLOAD_ORDER)}")
    params = _fabric_params(args, n)
    if args.count_hits:
        if args.faults == "none":
            raise CliError("--count-hits needs the fault runs (not --no-faults)")
        from fusionfabric.rtl.fabric.fabric import endpoint_lanes
        profile = params.get("lane_profile", "64b66b")
        lanes = endpoint_lanes(params)
        if profile != "64b66b" or any(k != 2 for k in lanes):
            raise CliError(f"--count-hits needs 64b/66b lanes, 2 per direction (here "
                           f"lane_profile={profile}, lanes per direction "
                           f"{','.join(str(k) for k in sorted(set(lanes)))})")
    n_chunks = int(params.get("n_chunks", 16))
    wparams = _workload_params(args, n, n_chunks)
    runs = [(faults, name, n, params, wparams[name]) for faults in passes for name in names]
    if args.engine == "rtl" and args.faults != "none" and fec_ber is not None and fec_names:
        if params.get("lane_profile") == "rs544":
            raise CliError("--set lane_profile=rs544: every run is then on FEC lanes; give "
                           "--fec-ber none")
        fec_params = _fabric_params(args, n_fec)
        fec_params["lane_profile"] = "rs544"
        from fusionfabric.portdoc import disown
        from fusionfabric.rtl.fabric import Fabric
        try:
            disown(Fabric(**fec_params))      # checks the FEC parameters; never elaborated
        except ValueError as exc:
            raise CliError(f"FEC run: {exc}") from None
        fec_w = _workload_params(args, n_fec, n_chunks)
        fault = {"ber": fec_ber, "slip_lane": -1, "lanes": "rs544"}
        runs += [(fault, name, n_fec, fec_params, fec_w[name]) for name in fec_names]
    hetero = str(args.hetero_cpus).strip().lower()
    n_cpus = ((0 if (args.engine == "rtl" and args.sim == "amaranth") or n < 3 else 1)
              if hetero == "auto" else _num(args.hetero_cpus, "hetero-cpus", int, 0, n - 2))
    if n_cpus and args.engine == "rtl" and args.sim == "amaranth":
        raise CliError("--hetero-cpus: the amaranth runner builds no memory target; use "
                       "--sim verilator or icarus, or --hetero-cpus 0")
    if n_cpus and args.faults != "only":
        cpus = list(range(n - n_cpus, n))
        hp = {"n_elems": wparams["allreduce-switch"]["n_elems"], "n_chunks": n_chunks,
              "message_bytes": wparams["allreduce-switch"]["message_bytes"],
              "cpu_endpoints": cpus, "mem_bytes": HETERO_MEM_BYTES}
        hparams = dict(params, endpoints=f"accelerator:2x{n - n_cpus},cpu:2x{n_cpus}",
                       mem_bytes=HETERO_MEM_BYTES) if args.engine == "rtl" else params
        runs.append((None, HETERO_WORKLOAD, n, hparams, hp))
    # build each workload once here: bad combinations end as CliError before any run
    from fusionfabric.sim.workloads import make_workload
    for _, name, n_run, _, wp in runs:
        try:
            make_workload(name, n_run, seed, **wp)
        except ValueError as exc:
            raise CliError(f"{name}: {exc}") from None
    from fusionfabric.commands._common import check_output
    out = check_output(args.out, "--out", "dir").absolute()
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.time()
    rows = []
    ideal: dict[tuple[str, int], int] = {}   # cycles on the ideal network, for comparison
    for faults, name, n_run, fparams, wp in runs:
        if not args.json:
            print(f"running {name} ({_fmt_faults(faults)}, {n_run} endpoints, "
                  f"{args.engine if args.engine == 'ideal' else args.sim}, seed {seed}) "
                  f"...", file=sys.stderr, flush=True)
        if args.engine == "ideal":
            res = _run_ideal(name, n_run, seed, wp, n_chunks)
        else:
            if (name, n_run) not in ideal:
                ideal[name, n_run] = _run_ideal(name, n_run, seed, wp, n_chunks)["cycles"]
            if faults and faults["slip_lane"] >= 0:
                # mid-run: the RTL is slower than the ideal network
                at = max(1, ideal[name, n_run] // 2) if slip_at is None else slip_at
                faults = {**faults, "slip_at": at}
            if faults and faults.get("dark_lane") and faults["dark_lane"][1] is None:
                lane, _, cycles = faults["dark_lane"]
                faults = {**faults, "dark_lane": [lane, max(1, ideal[name, n_run] // 2),
                                                  cycles]}
            hits = bool(args.count_hits and faults and faults.get("lanes") != "rs544")
            res = _run_rtl(args, name, n_run, seed, wp, fparams, faults, out, hits)
            res["ideal_cycles"] = ideal[name, n_run]
        res.update(workload=name, faults=faults, seed=seed, params=wp, endpoints=n_run,
                   goodput=_goodput(res, n_run))
        rows.append(res)
    _speedups(rows)
    report = {"engine": args.engine, "sim": args.sim if args.engine == "rtl" else None,
              "endpoints": n, "seed": seed, "fabric_params": params,
              "runs": rows, "wall_s": time.time() - t0,
              "all_bit_exact": all(r["bit_exact"] for r in rows)}
    hit_fails = [f for f in map(hit_failure, rows) if f]
    if args.count_hits:
        report["hit_failures"] = hit_fails
    (out / "demo.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    plots = _plots(rows, n, out)
    report["plots"] = [str(p) for p in plots]
    if args.json:
        print(json.dumps(report, indent=1, default=str))
        for f in hit_fails:
            print(f, file=sys.stderr)
    else:
        _table(report, out, plots)
    return 0 if report["all_bit_exact"] and not hit_fails else 1


def _fault_key(f):
    """Fault settings without ``slip_at`` and the dark lane's start (mid-run differs per
    workload)."""
    return None if not f else (f["ber"], f["slip_lane"], f.get("lanes", "64b66b"),
                               tuple(f["dark_lane"][::2]) if f.get("dark_lane") else None)


def _speedups(rows):
    """Reduction speedup = ring cycles / in-network cycles, per fault setting."""
    for r in rows:
        r["speedup"] = None
        if r["workload"] != "allreduce-switch" or not r.get("cycles"):
            continue
        ring = [x for x in rows if x["workload"] == "allreduce-ring"
                and _fault_key(x["faults"]) == _fault_key(r["faults"]) and x.get("cycles")]
        if ring:
            r["speedup"] = ring[0]["cycles"] / r["cycles"]


def _fmt_faults(f):
    if not f:
        return "clean"
    s = ("rs544 FEC, " if f.get("lanes") == "rs544" else "") + f"ber {f['ber']:g}"
    s += f" + slip lane {f['slip_lane']}" if f.get("slip_lane", -1) >= 0 else ""
    if f.get("dark_lane"):
        s += f" + lane {f['dark_lane'][0]} dark {f['dark_lane'][2]:,} cycles"
    return s


def _brief(error: str, limit: int = 400) -> str:
    """The first line of an error and the first failing test's message (the full text is
    in demo.json)."""
    lines = [l for l in str(error).splitlines() if l.strip()]
    keep = lines[:1] + [l.strip() for l in lines[1:] if ": failure: " in l or
                        ": error: " in l][:1]
    text = "\n  ".join(keep)
    return text if len(text) <= limit else text[:limit] + " ..."


def _table(report, out: Path, plots):
    head = ("workload", "lanes", "ports", "bytes moved", "cycles",
            "goodput/port rx mean (max)", "speedup", "replays", "CRC errors", "relocks",
            "FEC corrected cw (symbols)", "uncorrectable", "bit-exact", "seed")
    lines = []
    for r in report["runs"]:
        g = r["goodput"]["rx"]
        gp = f"{100 * sum(g) / len(g):.1f}% ({100 * max(g):.1f}%)" if g else "-"
        st = r.get("stats") or {}
        fec = r.get("fec") or {}
        lines.append((r["workload"], _fmt_faults(r["faults"]),
                      str(r.get("endpoints", report["endpoints"])),
                      f"{st['bytes_moved']:,}" if st else "-",
                      f"{r['cycles']:,}" if r.get("cycles") else "-", gp,
                      f"{r['speedup']:.2f}x" if r.get("speedup") else "",
                      "-" if r.get("replays") is None else str(r["replays"]),
                      "-" if r.get("crc_errors") is None else str(r["crc_errors"]),
                      "-" if r.get("relocks") is None else str(r["relocks"]),
                      (f"{fec['corrected_codewords']:,} ({fec['corrected_symbols']:,})"
                       if fec else ""),
                      f"{fec['uncorrectable']:,}" if fec else "",
                      "yes" if r["bit_exact"] else ("NO" if st else "run failed"),
                      str(r["seed"])))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    where = ("ideal network (fusionfabric.sim.workloads.IdealNetwork)" if report["engine"] == "ideal"
             else f"RTL fabric on {report['sim']}")
    print(f"fusionfabric demo: {report['endpoints']} endpoints, {where}, seed {report['seed']}")
    print()
    print("  ".join(h.ljust(w) if i < 2 else h.rjust(w)
                    for i, (h, w) in enumerate(zip(head, widths))))
    for l in lines:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(l, widths))))
    print()
    print("goodput/port: payload bytes delivered to each accelerator per cycle, as a fraction "
          "of one 16-byte slot per cycle; speedup: ring cycles / in-network cycles; FEC: "
          "codewords with corrected symbols (symbols corrected) and uncorrectable codewords, "
          "summed over both directions of every link (rs544 lanes carry 80 raw bits per "
          "cycle per direction, so a port takes at most 0.59 slots per cycle)")
    evs = [r for r in report["runs"] if r.get("faults") and r.get("events")]
    for r in report["runs"]:
        if not r.get("faults") or not (r.get("events") or r.get("hit_counts")):
            continue
        print(f"events, {r['workload']} ({_fmt_faults(r['faults'])}):")
        items = [(EVENT_LABELS.get(k, k), v) for k, v in (r.get("events") or {}).items()]
        items += [(label, r["hit_counts"][k]) for k, label in HIT_COUNTS
                  if r.get("hit_counts")]
        w = max(len(label) for label, _ in items)
        for label, v in items:
            print(f"  {label:<{w}}  {v:>9,}")
    if evs:
        print(FLIPS_NOTE)
    for r in report["runs"]:
        line = _kind_line(r)
        if line:
            print(line)
    for r in report["runs"]:
        if r.get("error"):
            print(f"{r['workload']} ({_fmt_faults(r['faults'])}): {_brief(r['error'])}")
    hit_fails = report.get("hit_failures") or []
    for f in hit_fails:
        print(f)
    print(f"wrote {out / 'demo.json'}" + "".join(f", {p}" for p in plots))
    print(f"demo finished in {report['wall_s']:.0f} s; "
          + ("every run bit-exact" if report["all_bit_exact"] else "SOME RUNS NOT BIT-EXACT")
          + ("; FLIT ACCOUNTING FAILED" if hit_fails else ""))


def kind_goodput(r: dict) -> dict | None:
    """Goodput per endpoint kind of a run whose workload names the kinds (hetero-rack):
    ``{kind: {"ports", "rx", "tx"}}`` with the mean received and sent payload per port as a
    fraction of one 16-byte slot per cycle, or None."""
    kinds = (r.get("stats") or {}).get("kinds")
    g = r.get("goodput") or {}
    if not kinds or not g.get("rx"):
        return None
    out: dict = {}
    for p, k in enumerate(kinds):
        d = out.setdefault(k, {"ports": 0, "rx": 0.0, "tx": 0.0})
        d["ports"] += 1
        d["rx"] += g["rx"][p]
        d["tx"] += g["tx"][p]
    for d in out.values():
        d["rx"] /= d["ports"]
        d["tx"] /= d["ports"]
    return out


def _kind_line(r: dict) -> str | None:
    kg = kind_goodput(r)
    if kg is None:
        return None
    mem = (r.get("stats") or {}).get("memory") or {}
    parts = [f"{k} x{d['ports']}: rx {100 * d['rx']:.1f}%, tx {100 * d['tx']:.1f}%"
             for k, d in kg.items()]
    return (f"goodput per kind, {r['workload']} ({_fmt_faults(r['faults'])}): "
            + "; ".join(parts)
            + (f"; memory requests completed: {mem['reads']} READ, {mem['writes']} WRITE, "
               f"{mem['atomics']} ATOMIC_ADD, {mem['errors']} ERROR (out of range), "
               f"{mem['readback_bytes']:,} bytes read back" if mem else ""))


def _plots(rows, n, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    paths = []
    good = [r for r in rows if r["goodput"]["rx"]]
    if good:
        fig, ax = plt.subplots(figsize=(max(6, min(16, 1.2 * n)), 4.8))
        width = 0.8 / len(good)
        x = np.arange(n)
        for i, r in enumerate(good):
            vals = [100 * v for v in r["goodput"]["rx"]]
            vals += [float("nan")] * (n - len(vals))     # a smaller fabric (the FEC run)
            ax.bar(x + i * width, vals, width,
                   label=f"{r['workload']} ({_fmt_faults(r['faults'])})")
        ax.set_xticks(x + 0.4 - width / 2, [str(p) for p in range(n)])
        ax.set_xlabel("port (endpoint)")
        ax.set_ylabel("goodput received (% of 16 B/cycle)")
        ax.set_title("payload goodput per port")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=min(3, len(good)), loc="upper center",
                  bbox_to_anchor=(0.5, -0.18))
        fig.tight_layout()
        p = out / "goodput_per_port.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    timed = [r for r in rows if r.get("cycles")]
    if timed:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [f"{r['workload']}\n{_fmt_faults(r['faults'])}" for r in timed]
        colors = ["tab:red" if r["faults"] else "tab:blue" for r in timed]
        ax.bar(range(len(timed)), [r["cycles"] for r in timed], color=colors)
        ax.set_xticks(range(len(timed)), labels, fontsize=7)
        ax.set_ylabel("cycles")
        ax.set_title("cycles per workload (blue clean, red with lane faults)")
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        p = out / "cycles.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
