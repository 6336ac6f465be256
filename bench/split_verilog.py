"""Flat against split Verilog of the fabric: conversion wall time, peak memory and size,
side by side in one run (docs/fabric.md, "Split Verilog", quotes its output).

Each conversion runs in a fresh Python process (``Fabric(endpoints=LIST)``, then
``to_verilog`` for flat or ``split_verilog`` for split), so its peak resident memory is
its own: the larger of the Python process and the Yosys process Amaranth runs. The
reference is the flat conversion of the same list; a conversion past ``--timeout``
seconds is stopped and reported as such. Mode ``endpoints`` converts the split design
without its switch module: the endpoint side alone, to tell its cost from the switch's.

    python bench/split_verilog.py [--lists accelerator:2x8 ...] [--modes flat split endpoints]
        [--timeout 1800] [--lint] [--lint-modules] [--json out.json]

With ``--lint`` each complete design (flat, split) is also linted (``verilator --lint-only
-Wall``, ``fusionfabric.lint`` and its waivers): seconds, findings, waived warnings and the
peak memory of Verilator. With ``--lint-modules`` each link module and the reduction unit
module of a split design is linted on its own (cut from the text with the submodules named
under it), before the whole design.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
from fusionfabric.rtl.fabric.fabric import Fabric
from fusionfabric.rtl.export import to_verilog
from fusionfabric.rtl.fabric.split import link_variants, split_verilog
t = time.perf_counter()
fab = Fabric(endpoints=sys.argv[1])
mode = sys.argv[2]
text = (to_verilog(fab, "fabric") if mode == "flat"
        else split_verilog(fab, "fabric", with_switch=mode == "split"))
r = resource.getrusage
out = {"seconds": time.perf_counter() - t, "bytes": len(text),
       "lines": text.count("\n"), "modules": text.count("\nmodule "),
       "variants": len(link_variants(fab)),
       "peak_mb": max(r(resource.RUSAGE_SELF).ru_maxrss,
                      r(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024}
lint = sys.argv[3].split(",")
if "modules" in lint and mode != "flat":
    import re
    from fusionfabric.lint import lint_verilog
    # each module (with its submodules, named under it) apart from the switch and the top
    chunks = re.split(r"(?m)^(?=(?:\(\*.*\*\)\s*\n)*module )", text)
    tops = re.findall(r"(?m)^module (fabric_(?:link_\w+|reduce_unit))\(", text)
    out["module_lint"] = []
    for top in tops:
        sub = "".join(c for c in chunks
                      if re.match(rf"(?:\(\*.*\*\)\s*\n)*module \\?{top}[\s(.]", c))
        res = lint_verilog(sub, top, block="fabric")
        out["module_lint"].append({"module": top, "lines": sub.count("\n"),
                                   "seconds": res.seconds_lint,
                                   "findings": [str(w) for w in res.findings],
                                   "waived": len(res.waived)})
if "whole" in lint and mode != "endpoints":
    from fusionfabric.lint import lint_verilog
    res = lint_verilog(text, "fabric", block="fabric")
    out.update(lint_seconds=res.seconds_lint, findings=len(res.findings),
               waived=len(res.waived),
               lint_peak_mb=r(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
               first=[str(w) for w in res.findings[:3]])
print(json.dumps(out))
"""


def convert(endpoints: str, mode: str, timeout: float, lint: tuple = ()) -> dict:
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD, endpoints, mode,
                               ",".join(lint) or "-"],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"endpoints": endpoints, "mode": mode, "error": f"stopped after {timeout:g} s"}
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"endpoints": endpoints, "mode": mode, "wall": time.perf_counter() - t,
                "error": last[:160]}
    return {"endpoints": endpoints, "mode": mode, **json.loads(proc.stdout.splitlines()[-1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lists", nargs="+", default=["accelerator:2x8"],
                    help="endpoint lists (docs/fabric.md, 'Endpoint lists')")
    ap.add_argument("--modes", nargs="+", default=["flat", "split"],
                    choices=["flat", "split", "endpoints"],
                    help="endpoints: the split design without its switch module (the "
                         "endpoint side alone; not a complete design)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--lint", action="store_true",
                    help="also run verilator --lint-only -Wall on each complete design "
                         "(fusionfabric.lint, the waivers of docs/lint.md)")
    ap.add_argument("--lint-modules", action="store_true",
                    help="also lint each link module and the reduction unit module of a "
                         "split design on its own, cut from the text with its submodules")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.timeout <= 0:
        print(f"split_verilog: --timeout {args.timeout:g} must be positive", file=sys.stderr)
        return 2
    rows = []
    print(f"{'endpoints':32} {'mode':5} {'seconds':>8} {'peak GB':>8} {'MB':>7} "
          f"{'lines':>9} {'modules':>7}")
    for endpoints in args.lists:
        for mode in args.modes:
            r = convert(endpoints, mode, args.timeout,
                        ("whole",) * args.lint + ("modules",) * args.lint_modules)
            rows.append(r)
            if "error" in r:
                print(f"{endpoints:32} {mode:5} {r['error']}", flush=True)
                continue
            print(f"{endpoints:32} {mode:5} {r['seconds']:8.1f} {r['peak_mb'] / 1024:8.2f} "
                  f"{r['bytes'] / 1e6:7.1f} {r['lines']:9,} {r['modules']:7}", flush=True)
            for ml in r.get("module_lint", []):
                print(f"{'':32} lint {ml['module']} alone ({ml['lines']:,} lines): "
                      f"{ml['seconds']:.1f} s, {len(ml['findings'])} findings, "
                      f"{ml['waived']} waived"
                      + "".join(f"\n{'':34}{w}" for w in ml["findings"][:4]), flush=True)
            if "findings" in r:
                print(f"{'':32} lint: {r['lint_seconds']:.1f} s, {r['findings']} findings, "
                      f"{r['waived']} waived, peak {r['lint_peak_mb'] / 1024:.2f} GB"
                      + "".join(f"\n{'':34}{w}" for w in r["first"]), flush=True)
        got = {r["mode"]: r for r in rows[-len(args.modes):] if "error" not in r}
        if {"flat", "split"} <= set(got):
            f, s = got["flat"], got["split"]
            print(f"{endpoints:32} split/flat: time {s['seconds'] / f['seconds']:.2f}, "
                  f"memory {s['peak_mb'] / f['peak_mb']:.2f}, size {s['bytes'] / f['bytes']:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
