"""pytest configuration: a closing table of every cocotb run with its simulator and seed."""

import json
import time
from fusionfabric.paths import build_root

_START = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    root = build_root()
    runs = []
    for f in root.glob("rtl/*/*/runs/*/summary.json"):
        if f.stat().st_mtime < _START:
            continue
        try:
            s = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        failed = sum(1 for t in s["tests"] if t["status"] != "passed")
        name = f.parent.name + (" (planted fault, failure expected)"
                                if s.get("planted_fault") else "")
        runs.append((s["block"], name, s["sim"], s["seed"], len(s["tests"]), failed))
    if not runs:
        return
    tr = terminalreporter
    tr.section(f"cocotb runs this session: {len(runs)} (rerun one with SEED=<seed> SIM=<sim>)")
    for block, run, sim, seed, n, nf in sorted(runs):
        tr.write_line(f"{block:<14} {sim:<9} seed {seed:>10}  {n - nf}/{n} passed  {run}")
