"""Simulated cycles per second of the fabric BIST counters-only cocotb test versus the
native simulator and versus the per-cycle-Python fabric test, side by side in one run.

The design is the fabric at ``n_endpoints`` = 2 (default parameters, block ``fabric``),
with the BIST generator and checker on every accelerator port (block ``fabric-bist``) for
the first two rows:

``native``
    ``fabric-bist`` with no cocotb: a generated Verilog ``initial`` testbench (clock,
    reset, ``i_bist`` = enable, load 256, budget B, then ``$display`` of the counters)
    on Icarus, run for exactly the cycles the ``counters`` row simulated. Start-up (vvp
    loading the design) is measured with a 10-cycle run and subtracted.
``counters``
    tb/fabric/test_bist.py::test_bist on the same design and budget: configure, start,
    ``Timer`` waits between counter polls, read and check the counters against the
    model (no Python per cycle).
``python``
    tb/fabric/test_fabric.py::test_traffic on block ``fabric``: every accelerator port
    driven and checked from Python every cycle (``StreamSource``/``StreamSink``,
    scoreboards, a memory model answering READ/WRITE/ATOMIC_ADD), ``messages`` per
    endpoint.

Rates are simulated clock cycles per wall-clock second over each run's whole simulation
(reset, link bring-up and traffic; for the cocotb rows from cocotb's JUnit record: test
wall time and simulated time), so builds and start-up are excluded. ``payload B/s`` is
payload bytes delivered to accelerator ports per wall second (BIST: 16 per beat checked;
``python``: ``bytes_moved`` of its results file, requests and read data). The traffic of the
``python`` row is different (mixed opcodes with completions, random idle and
backpressure), so compare the cycles/s column; bytes/s shows what each run gets done.

Usage::

    .venv/bin/python bench/fabric_bist_speed.py                 # Icarus, 2 endpoints
    .venv/bin/python bench/fabric_bist_speed.py --budget 400 --messages 40
    .venv/bin/python bench/fabric_bist_speed.py --verilator     # adds the Verilator rows
    .venv/bin/python bench/fabric_bist_speed.py --verilator --no-icarus --repeat 3

The machine is shared: figures vary with load; ratios measured in one run are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionfabric import toolchain  # noqa: E402
from fusionfabric.tb.common import runner  # noqa: E402

OUT = runner.BUILD_ROOT / "bench" / "fabric_bist_speed"
PERIOD_NS = 10
LOAD = 256


def _junit(xml_path: Path) -> tuple[float, int]:
    """(wall seconds, simulated cycles) of the single testcase in a cocotb results file."""
    case = next(ET.parse(xml_path).getroot().iter("testcase"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return float(case.get("time")), int(float(props["sim_time_duration"])) // PERIOD_NS


def _tb_verilog(n: int) -> str:
    """A plain Verilog testbench around the fabric-bist top (benchmark only, never RTL)."""
    from fusionfabric.rtl.fabric.fabric import FAULT
    from fusionfabric.rtl.switch.group_table import config_layout
    from fusionfabric.formats.bist import BIST_CONTROL
    cfg_w, fault_w = config_layout(n).size, FAULT.width
    decl, conns, sums, errs = [], [], [], []
    for e in range(n):
        for k in ("chk_beats", "seq_errors", "data_errors", "unexpected"):
            decl.append(f"  wire [31:0] {k}{e};")
            conns.append(f".o_{k}__{e}({k}{e})")
        sums.append(f"chk_beats{e}")
        errs += [f"seq_errors{e}", f"data_errors{e}", f"unexpected{e}"]
    w = BIST_CONTROL.width
    return "\n".join([
        "`timescale 1ns/1ps",
        "module tb;",
        "  reg clk = 0, rst = 1;",
        f"  reg [{w - 1}:0] bist = 0;",
        "  integer cycles, budget;",
        *decl,
        "  top dut(.clk(clk), .rst(rst), .i_bist(bist), .i_config__valid(1'b0),",
        f"          .i_config__payload({cfg_w}'d0), .i_fault__valid(1'b0),",
        f"          .i_fault__payload({fault_w}'d0),",
        f"          {', '.join(conns)});",
        "  always #5 clk = ~clk;",
        "  initial begin",
        "    if (!$value$plusargs(\"cycles=%d\", cycles)) cycles = 1000;",
        "    if (!$value$plusargs(\"budget=%d\", budget)) budget = 100;",
        "    repeat (4) @(negedge clk);",
        "    rst = 0;",
        "    @(negedge clk);",
        "    bist = {budget[31:0], 8'd0, 9'd" + str(LOAD) + ", 1'b1};",
        "    repeat (cycles) @(negedge clk);",
        f"    $display(\"BEATS %0d ERRORS %0d\", {' + '.join(sums)}, {' + '.join(errs)});",
        "    $finish;",
        "  end",
        "endmodule",
        ""])


def native_icarus(n: int, budget: int, cycles: int) -> dict:
    build_dir, _ = runner.build_verilog("fabric-bist", {"n_endpoints": n})
    d = OUT / "native-icarus"
    d.mkdir(parents=True, exist_ok=True)
    (d / "tb.v").write_text(_tb_verilog(n))
    toolchain.setup("icarus")
    exe = d / "tb.vvp"
    subprocess.run(["iverilog", "-g2012", "-s", "tb", "-o", str(exe), str(d / "tb.v"),
                    str(build_dir / "top.v")], check=True)

    def once(c):
        t0 = time.perf_counter()
        out = subprocess.run(["vvp", "-n", str(exe), f"+cycles={c}", f"+budget={budget}"],
                             check=True, capture_output=True, text=True).stdout
        wall = time.perf_counter() - t0
        line = next(x for x in out.splitlines() if x.startswith("BEATS"))
        _, beats, _, errors = line.split()
        return wall, int(beats), int(errors)

    w0, _, _ = once(10)
    w1, beats, errors = once(cycles)
    if errors:
        raise SystemExit(f"native icarus: {errors} BIST errors")
    return {"cycles": cycles - 10, "wall_s": w1 - w0, "bytes": 16 * beats,
            "note": f"{cycles}-cycle run less a 10-cycle run ({w0:.2f} s start-up)"}


def _verilator_main(n: int) -> str:
    """A C++ main toggling the clock of the Verilated fabric-bist (no cocotb)."""
    # Verilator spells a "__" in a port name "___05F"
    beats = " + ".join(f"(unsigned long)t->o_chk_beats___05F{e}" for e in range(n))
    errs = " + ".join(f"(unsigned long)t->o_{k}___05F{e}" for e in range(n)
                      for k in ("seq_errors", "data_errors", "unexpected"))
    return f"""#include "Vtop.h"
#include "verilated.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
int main(int argc, char** argv) {{
    long cycles = 1000, budget = 100;
    for (int i = 1; i < argc; i++) {{
        if (!strncmp(argv[i], "+cycles=", 8)) cycles = atol(argv[i] + 8);
        if (!strncmp(argv[i], "+budget=", 8)) budget = atol(argv[i] + 8);
    }}
    Verilated::commandArgs(argc, argv);
    Vtop* t = new Vtop;
    t->clk = 0; t->rst = 1; t->i_bist = 0;
    t->i_config___05Fvalid = 0; t->i_config___05Fpayload = 0;
    t->i_fault___05Fvalid = 0; t->i_fault___05Fpayload = 0;
    t->eval();
    for (int i = 0; i < 4; i++) {{ t->clk = 1; t->eval(); t->clk = 0; t->eval(); }}
    t->rst = 0;
    t->clk = 1; t->eval(); t->clk = 0; t->eval();
    t->i_bist = ((unsigned long)budget << 18) | ({LOAD}UL << 1) | 1UL;
    for (long i = 0; i < cycles; i++) {{ t->clk = 1; t->eval(); t->clk = 0; t->eval(); }}
    printf("BEATS %lu ERRORS %lu\\n", {beats}, {errs});
    t->final();
    delete t;
    return 0;
}}
"""


def native_verilator(n: int, budget: int, cycles: int, opt: str = "O0") -> dict:
    """C++ main on the Verilated model; ``opt`` "O0" compiles the C++ like the runner's
    ``vpi="top"`` builds (``runner.VERILATOR_TOP_OPT``), "Os" with Verilator's
    default."""
    build_dir, _ = runner.build_verilog("fabric-bist", {"n_endpoints": n})
    d = OUT / f"native-verilator-{opt}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "main.cpp").write_text(_verilator_main(n))
    toolchain.setup("verilator")
    obj = d / "obj"
    subprocess.run(["verilator", "--cc", "--exe", "--build", *runner.VERILATOR_BUILD_ARGS,
                    "--top-module", "top", "-Mdir", str(obj), "-j", "2", "-o", "Vnative",
                    str(d / "main.cpp"), str(build_dir / "top.v")]
                   + (["-MAKEFLAGS", f"OPT_FAST={runner.VERILATOR_TOP_OPT} "
                                     f"OPT_SLOW={runner.VERILATOR_TOP_OPT}"]
                      if opt == "O0" else []),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exe = str(obj / "Vnative")

    def once(c):
        t0 = time.perf_counter()
        out = subprocess.run([exe, f"+cycles={c}", f"+budget={budget}"], check=True,
                             capture_output=True, text=True).stdout
        wall = time.perf_counter() - t0
        _, beats, _, errors = next(x for x in out.splitlines()
                                   if x.startswith("BEATS")).split()
        return wall, int(beats), int(errors)

    w0, _, _ = once(10)
    w1, beats, errors = once(cycles)
    if errors:
        raise SystemExit(f"native verilator: {errors} BIST errors")
    return {"cycles": cycles - 10, "wall_s": w1 - w0, "bytes": 16 * beats,
            "note": f"C++ main, -{opt}; {cycles}-cycle run less a 10-cycle run"}


SEED = 1          # cocotb seed of every run (--seed): reproducible rows


def counters(n: int, budget: int, sim: str) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    report = OUT / f"counters-{sim}.json"
    report.unlink(missing_ok=True)
    kw = {"vpi": "top"} if sim == "verilator" else {}
    res = runner.run("fabric-bist", "fusionfabric.tb.fabric.test_bist", {"n_endpoints": n}, sim=sim,
                     testcase="test_bist", test_args={"budget": budget, "load": LOAD,
                                                      "poll": 500, "report": str(report)},
                     name=f"bench-counters-{n}", seed=SEED, **kw)
    wall, cycles = _junit(res.results_xml)
    rep = json.loads(report.read_text())
    return {"cycles": cycles, "wall_s": wall, "bytes": 16 * rep["beats"],
            "inner": rep, "note": f"budget {budget} per endpoint"}


def python_traffic(n: int, messages: int, sim: str) -> dict:
    """The per-cycle-Python row; a failing run (it is another test's regression) is
    reported, not timed."""
    try:
        return _python_traffic(n, messages, sim)
    except runner.CocotbFailure as exc:
        print(f"python {sim}: FAILED: {exc}", file=sys.stderr)
        return {"failed": str(exc).splitlines()[0], "note": f"{messages} messages: FAILED"}


def _python_traffic(n: int, messages: int, sim: str) -> dict:
    kw = {"vpi": "top"} if sim == "verilator" else {}
    res = runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", {"n_endpoints": n}, sim=sim,
                     testcase="test_traffic", test_args={"messages": messages},
                     name=f"bench-traffic-{n}", seed=SEED, **kw)
    wall, cycles = _junit(res.results_xml)
    rep = json.loads((res.test_dir / "fabric_results.json").read_text())
    return {"cycles": cycles, "wall_s": wall, "bytes": rep["bytes_moved"],
            "note": f"{messages} messages per endpoint"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoints", type=int, default=2)
    ap.add_argument("--budget", type=int, default=200,
                    help="BIST messages per generator (counters and native rows)")
    ap.add_argument("--messages", type=int, default=30,
                    help="messages per endpoint of the per-cycle Python test")
    ap.add_argument("--repeat", type=int, default=2,
                    help="counters/native pairs to run (the machine's load drifts)")
    ap.add_argument("--verilator", action="store_true",
                    help="also the three rows on Verilator (three C++ builds)")
    ap.add_argument("--budget-verilator", type=int, default=5000)
    ap.add_argument("--messages-verilator", type=int, default=100)
    ap.add_argument("--no-icarus", action="store_true", help="only the Verilator rows")
    ap.add_argument("--seed", type=int, default=SEED, help="cocotb seed of the runs")
    a = ap.parse_args(argv)
    globals()["SEED"] = a.seed
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    n = a.endpoints
    rows = []
    pairs = []
    if not a.no_icarus:
        for k in range(a.repeat):
            # the native run simulates exactly as many cycles as the cocotb test did
            c = counters(n, a.budget, "icarus")
            print(f"counters: {c}", file=sys.stderr)
            nat = native_icarus(n, a.budget, c["cycles"])
            print(f"native: {nat}", file=sys.stderr)
            rows += [("icarus", "native", nat), ("icarus", "counters", c)]
            pairs.append(("icarus", (c["cycles"] / c["wall_s"]) / (nat["cycles"] / nat["wall_s"])))
        py = python_traffic(n, a.messages, "icarus")
        print(f"python: {py}", file=sys.stderr)
        rows.append(("icarus", "python", py))
    if a.verilator:
        for k in range(a.repeat):
            c = counters(n, a.budget_verilator, "verilator")
            print(f"verilator counters: {c}", file=sys.stderr)
            nat = native_verilator(n, a.budget_verilator, c["cycles"])
            print(f"verilator native: {nat}", file=sys.stderr)
            nos = native_verilator(n, a.budget_verilator, c["cycles"], opt="Os")
            print(f"verilator native -Os: {nos}", file=sys.stderr)
            py = python_traffic(n, a.messages_verilator, "verilator")
            print(f"verilator python: {py}", file=sys.stderr)
            rows += [("verilator", "native", nat), ("verilator", "native-Os", nos),
                     ("verilator", "counters", c), ("verilator", "python", py)]
            pairs.append(("verilator", (c["cycles"] / c["wall_s"])
                          / (nat["cycles"] / nat["wall_s"])))
    base = {}
    for sim in ("icarus", "verilator"):
        nat = [r["cycles"] / r["wall_s"] for s_, name, r in rows if (s_, name) == (sim, "native")]
        if nat:
            base[sim] = sum(nat) / len(nat)
    print(f"\nFabric BIST speed: {n} endpoints, block fabric-bist (BIST load {LOAD}/256, "
          f"budget {a.budget}) vs fabric test_traffic ({a.messages} messages per endpoint); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'sim':<10} {'test':<9} {'cycles':>8} {'wall s':>8} {'cycles/s':>9} "
          f"{'vs native':>9} {'payload B/s':>12}  note")
    rates = {}
    for sim, name, r in rows:
        if "failed" in r:
            print(f"{sim:<10} {name:<9} FAILED ({r['failed']})")
            continue
        rate = r["cycles"] / r["wall_s"]
        rates.setdefault((sim, name), []).append(rate)
        vs = f"{rate / base[sim]:>9.3f}"
        print(f"{sim:<10} {name:<9} {r['cycles']:>8} {r['wall_s']:>8.2f} {rate:>9,.1f} "
              f"{vs} {r['bytes'] / r['wall_s']:>12,.0f}  {r['note']}")
    mean = {k: sum(v) / len(v) for k, v in rates.items()}
    nan = float("nan")
    for sim in base:
        ps = [x for s_, x in pairs if s_ == sim]
        print(f"{sim}: counters-only / native = {', '.join(f'{x:.3f}' for x in ps)} "
              f"(each pair run back to back); counters-only / per-cycle Python = "
              f"{mean[(sim, 'counters')] / mean.get((sim, 'python'), nan):.2f}x (mean cycles/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
