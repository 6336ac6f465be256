"""``fusionfabric regress``: every block's Verilog and cocotb regressions in one table.

Generates the Verilog of every registered block, runs every block's cocotb regression on
one simulator, and prints a summary table (block, Verilog size, cocotb runs, passed,
seeds). Exit status is non-zero if any regression fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "regress"
HELP = "generate every block's Verilog, run the cocotb regressions, print a summary"



def add_arguments(p):
    p.add_argument("--sim", default="icarus",
                   help="icarus (default: every block has Icarus regressions) or verilator")
    p.add_argument("--jobs", default="auto", help="pytest-xdist workers (default auto)")
    p.add_argument("--out", default="build/verilog", help="where to write the Verilog")
    p.add_argument("--no-regress", action="store_true", help="only generate the Verilog")


def _generate(out: Path) -> list[dict]:
    from fusionfabric.rtl.blocks import all_blocks
    from fusionfabric.rtl.export import port_map, to_verilog

    rows = []
    out.mkdir(parents=True, exist_ok=True)
    for block in all_blocks().values():
        t0 = time.perf_counter()
        top = block.name.replace("-", "_")
        component = block.build()
        text = to_verilog(component, top)
        ports = port_map(component, top)
        ports.update(block=block.name, params=block.defaults)
        (out / f"{top}.v").write_text(text)
        (out / f"{top}.ports.json").write_text(json.dumps(ports, indent=2) + "\n")
        rows.append({"block": block.name, "lines": text.count("\n"),
                     "ports": len(ports["ports"]), "seconds": time.perf_counter() - t0})
    return rows


def _collect(start: float, sim: str) -> dict[str, dict]:
    from fusionfabric.paths import build_root

    per_block: dict[str, dict] = {}
    for f in build_root().glob(f"rtl/*/{sim}*/runs/*/summary.json"):
        if f.stat().st_mtime < start:
            continue
        s = json.loads(f.read_text())
        if s.get("planted_fault"):
            continue  # a checker's own test, meant to fail
        row = per_block.setdefault(s["block"], {"runs": 0, "tests": 0, "passed": 0,
                                                "seeds": []})
        row["runs"] += 1
        row["tests"] += len(s["tests"])
        row["passed"] += sum(1 for t in s["tests"] if t["status"] == "passed")
        row["seeds"].append(s["seed"])
    return per_block


def run(args):
    from fusionfabric.extras import require

    require("dev", "regress")
    tests = Path.cwd() / "tests"
    if not (tests / "conftest.py").is_file():
        raise CliError(f"regress runs the test suite of a checkout: no tests/conftest.py in {Path.cwd()}")
    if args.sim not in ("icarus", "verilator"):
        raise CliError(f"--sim {args.sim!r} is not icarus or verilator")
    from fusionfabric.commands._common import check_output
    check_output(args.out, "--out", "dir")
    t0 = time.time()
    rows = _generate(Path(args.out).absolute())
    print(f"generated Verilog for {len(rows)} blocks in {args.out}/")
    status = 0
    per_block: dict[str, dict] = {}
    if not args.no_regress:
        start = time.time()
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "cocotb and not soak", "-k",
               args.sim, "-n", str(args.jobs), "-p", "no:cacheprovider", str(tests)]
        print("running:", " ".join(cmd[2:]), flush=True)
        env = dict(os.environ, SIM=args.sim)
        proc = subprocess.run(cmd, cwd=Path.cwd(), env=env, capture_output=True, text=True)
        tail = [l for l in proc.stdout.splitlines() if l.strip()][-1:] or ["(no output)"]
        print("pytest:", tail[0])
        if proc.returncode != 0:
            status = 1
            sys.stdout.write("\n".join(l for l in proc.stdout.splitlines()
                                       if l.startswith(("FAILED", "ERROR"))) + "\n")
        per_block = _collect(start, args.sim)
    print()
    print(f"{'block':<14} {'verilog lines':>13} {'ports':>5}   {'cocotb runs':>11} "
          f"{'tests':>5} {'passed':>6}  seeds ({args.sim})")
    names = [r["block"] for r in rows] + sorted(set(per_block) - {r["block"] for r in rows})
    by_name = {r["block"]: r for r in rows}
    for name in names:
        r = by_name.get(name, {"lines": "-", "ports": "-"})
        b = per_block.get(name, {"runs": 0, "tests": 0, "passed": 0, "seeds": []})
        seeds = ", ".join(map(str, sorted(b["seeds"])[:3])) + (" ..." if len(b["seeds"]) > 3
                                                                else "")
        print(f"{name:<14} {r['lines']!s:>13} {r['ports']!s:>5}   {b['runs']:>11} "
              f"{b['tests']:>5} {b['passed']:>6}  {seeds}")
    print("(rows without Verilog are test harnesses: pcs-loopback drives pcs-tx -> lanes -> "
          "pcs-rx, chiplet-pair two chiplets, bist-harness bist-gen -> switch -> bist-check)")
    print(f"\nregress finished in {time.time() - t0:.0f} s; "
          f"{'all regressions passed' if status == 0 else 'SOME REGRESSIONS FAILED'}")
    return status
