"""Simulated cycles per second of the BIST counters-only cocotb test versus the alternatives.

The design under test is the 4-port switch (``rtl/switch``, VOQ, depth 4). Four ways of
running the same traffic (uniform destinations, 1..4-flit packets, offered load 200/256,
receiver backpressure 40/256), side by side in one run, on Icarus and Verilator:

``native``
    The BIST harness (tb/bist/harness.py: Amaranth generators → switch → checkers)
    with no cocotb at all: on Icarus a generated Verilog ``initial`` block (clock, reset,
    enable, run N cycles, ``$display`` the counters), on Verilator a generated C++
    ``main`` that toggles the clock and evaluates.
``native-pub`` (Verilator only)
    The same C++ ``main``, the model built with ``--public-flat-rw`` as cocotb builds it
    (every signal kept and visible): separates the cost of that build flag from the cost
    of cocotb's scheduler. Rate from two runs (N/10 and N cycles),
    so start-up time cancels.
``wait-only``
    The harness under cocotb: configure, one ``Timer`` of N cycles, read counters
    (tb/bist/test_speed.py::test_wait_only): the cocotb floor.
``counters``
    The regression test tb/bist/test_bist.py::test_bist_counters: configure, start, poll
    the counters every 5,000 cycles until every generator is done and the network is
    drained, check exactly-once delivery from the counters.
``python``
    The bare switch with per-cycle Python: StreamSource per input with
    ``fusionfabric.sim.bist.TrafficGenModel`` packets, StreamSink per output, KeyedScoreboard
    (tb/bist/test_speed.py::test_python_scoreboard).

Rates are simulated clock cycles per wall-clock second of the simulation proper (the
cocotb tests time themselves from enable to the last check; build and start-up are
excluded). ``flits/s`` is flits checked per second (native: delivered to the checkers);
the ``python`` row simulates only the switch (its checking runs in Python), the other
rows simulate the switch plus 4 generators and 4 checkers. Usage::

    .venv/bin/python bench/bist_speed.py                  # both simulators
    .venv/bin/python bench/bist_speed.py --sims icarus --cycles-icarus 50000

The machine is shared: figures vary with load, ratios measured in one run are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusionfabric.tb.bist.harness import BistHarness  # noqa: E402
from fusionfabric import toolchain  # noqa: E402
from fusionfabric.tb.common import runner  # noqa: E402

HARNESS = dict(n_ports=4, max_len=4, seed=1)          # = tests/test_bist_cocotb.py p4 case
SWITCH = dict(n_ports=4, data_width=64, depth=4, mode="voq", out_depth=4)
LOAD, STALL = 200, 40
OUT = runner.BUILD_ROOT / "bench" / "bist_speed"


def _tb_verilog(n: int) -> str:
    """A plain Verilog testbench around the harness top (benchmark only, never RTL)."""
    conns = [".clk(clk)", ".rst(rst)", ".i_enable(en)", ".i_budget(32'd0)",
             f".i_load(9'd{LOAD})", f".i_stall(8'd{STALL})"]
    decl, sums, errs = [], [], []
    for d in range(n):
        for k in ("chk_flits", "seq_errors", "data_errors", "framing_errors"):
            decl.append(f"  wire [31:0] {k}{d};")
            conns.append(f".o_{k}__{d}({k}{d})")
        sums.append(f"chk_flits{d}")
        errs += [f"seq_errors{d}", f"data_errors{d}", f"framing_errors{d}"]
    return "\n".join([
        "`timescale 1ns/1ps",
        "module tb;",
        "  reg clk = 0, rst = 1, en = 0;",
        "  integer cycles;",
        *decl,
        f"  top dut({', '.join(conns)});",
        "  always #5 clk = ~clk;",
        "  initial begin",
        "    if (!$value$plusargs(\"cycles=%d\", cycles)) cycles = 10000;",
        "    repeat (4) @(negedge clk);",
        "    rst = 0; en = 1;",
        "    repeat (cycles) @(negedge clk);",
        f"    $display(\"FLITS %0d ERRORS %0d\", {' + '.join(sums)}, {' + '.join(errs)});",
        "    $finish;",
        "  end",
        "endmodule",
        ""])


def _native_build(sim: str, top_v: Path, n: int, public: bool = False) -> list[str]:
    d = OUT / (f"native-{sim}" + ("-public" if public else ""))
    d.mkdir(parents=True, exist_ok=True)
    tb_v = d / "tb.v"
    tb_v.write_text(_tb_verilog(n))
    toolchain.setup(sim)
    if sim == "icarus":
        exe = d / "tb.vvp"
        subprocess.run(["iverilog", "-g2012", "-s", "tb", "-o", str(exe), str(tb_v),
                        str(top_v)], check=True)
        return ["vvp", "-n", str(exe)]
    obj = d / "obj"
    main_cpp = d / "main.cpp"
    main_cpp.write_text(_verilator_main(n))
    subprocess.run(["verilator", "--cc", "--exe", "--build", "-Wno-fatal", "--x-assign",
                    "unique", "--x-initial", "unique", "--top-module", "top", "-Mdir",
                    str(obj), "-j", "2", "-o", "Vnative", str(main_cpp), str(top_v)]
                   + (["--public-flat-rw"] if public else []),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [str(obj / "Vnative")]


def _verilator_main(n: int) -> str:
    """A C++ main toggling the clock of the Verilated harness (Verilator's native speed)."""
    # Verilator spells a "__" in a port name "___05F"
    flits = " + ".join(f"(unsigned long)t->o_chk_flits___05F{d}" for d in range(n))
    errs = " + ".join(f"(unsigned long)t->o_{k}___05F{d}" for d in range(n)
                      for k in ("seq_errors", "data_errors", "framing_errors"))
    return f"""#include "Vtop.h"
#include "verilated.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
int main(int argc, char** argv) {{
    long cycles = 10000;
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "+cycles=", 8)) cycles = atol(argv[i] + 8);
    Verilated::commandArgs(argc, argv);
    Vtop* t = new Vtop;
    t->clk = 0; t->rst = 1; t->i_enable = 0; t->i_budget = 0;
    t->i_load = {LOAD}; t->i_stall = {STALL};
    t->eval();
    for (int i = 0; i < 4; i++) {{ t->clk = 1; t->eval(); t->clk = 0; t->eval(); }}
    t->rst = 0; t->i_enable = 1;
    for (long i = 0; i < cycles; i++) {{ t->clk = 1; t->eval(); t->clk = 0; t->eval(); }}
    printf("FLITS %lu ERRORS %lu\\n", {flits}, {errs});
    t->final();
    delete t;
    return 0;
}}
"""


def _native_run(cmd: list[str], cycles: int) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd + [f"+cycles={cycles}"], check=True, capture_output=True,
                         text=True).stdout
    wall = time.perf_counter() - t0
    line = next(l for l in out.splitlines() if l.startswith("FLITS"))
    _, flits, _, errors = line.split()
    return wall, int(flits), int(errors)


def native(sim: str, cycles: int, public: bool = False) -> dict:
    build_dir, _ = runner.build_verilog("bist-harness", HARNESS,
                                        component=BistHarness(**HARNESS))
    cmd = _native_build(sim, build_dir / "top.v", HARNESS["n_ports"], public)
    short = max(1000, cycles // 10)
    w1, f1, _ = _native_run(cmd, short)
    w2, f2, errors = _native_run(cmd, cycles)
    if errors:
        raise SystemExit(f"native {sim}: {errors} BIST errors")
    return {"cycles": cycles - short, "wall_s": w2 - w1, "flits": f2 - f1,
            "note": f"difference of {cycles} and {short} cycle runs"}


def _cocotb(sim: str, block: str, module: str, testcase: str, params: dict, component,
            args: dict) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    report = OUT / f"{testcase}-{sim}.json"
    report.unlink(missing_ok=True)
    runner.run(block, module, params, component=component, sim=sim, testcase=testcase,
               test_args={**args, "report": str(report)}, name=f"bench-{testcase}")
    return json.loads(report.read_text())


def measure(sim: str, cycles: int, py_budget: int) -> dict[str, dict]:
    res = {}
    res["native"] = native(sim, cycles)
    print(f"[{sim}] native: {res['native']}", file=sys.stderr)
    if sim == "verilator":
        res["native-pub"] = native(sim, cycles, public=True)
        print(f"[{sim}] native-pub: {res['native-pub']}", file=sys.stderr)
    res["wait-only"] = _cocotb(sim, "bist-harness", "fusionfabric.tb.bist.test_speed", "test_wait_only",
                               HARNESS, BistHarness(**HARNESS),
                               dict(cycles=cycles, load=LOAD, stall=STALL))
    # about 4 cycles per packet per generator at this load: budget for ~`cycles` cycles
    res["counters"] = _cocotb(sim, "bist-harness", "fusionfabric.tb.bist.test_bist", "test_bist_counters",
                              HARNESS, BistHarness(**HARNESS),
                              dict(budget=max(50, cycles // 4), load=LOAD, stall=STALL,
                                   poll=5000))
    print(f"[{sim}] wait-only: {res['wait-only']}\n[{sim}] counters: {res['counters']}",
          file=sys.stderr)
    from fusionfabric.rtl.blocks import get_block
    res["python"] = _cocotb(sim, "switch", "fusionfabric.tb.bist.test_speed", "test_python_scoreboard",
                            SWITCH, get_block("switch").build(**SWITCH),
                            dict(budget=py_budget, max_len=HARNESS["max_len"], load=LOAD,
                                 stall=STALL, seed=HARNESS["seed"]))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", nargs="+", default=["icarus", "verilator"])
    ap.add_argument("--cycles-icarus", type=int, default=10_000)
    ap.add_argument("--cycles-verilator", type=int, default=1_000_000)
    ap.add_argument("--python-budget-icarus", type=int, default=300,
                    help="packets per source for the per-cycle Python test")
    ap.add_argument("--python-budget-verilator", type=int, default=3000)
    a = ap.parse_args(argv)
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    rows = []
    for sim in a.sims:
        cycles = getattr(a, f"cycles_{sim}")
        budget = getattr(a, f"python_budget_{sim}")
        res = measure(sim, cycles, budget)
        base = res["native"]["cycles"] / res["native"]["wall_s"]
        for name in ("native", "native-pub", "wait-only", "counters", "python"):
            if name not in res:
                continue
            r = res[name]
            rate = r["cycles"] / r["wall_s"]
            rows.append((sim, name, r["cycles"], r["flits"], r["wall_s"], rate, rate / base,
                         r["flits"] / r["wall_s"]))
    print(f"\nBIST speed: 4-port switch, load {LOAD}/256, stall {STALL}/256, "
          f"uniform 1..{HARNESS['max_len']}-flit packets; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'sim':<10} {'test':<10} {'cycles':>10} {'flits':>10} {'wall s':>8} "
          f"{'cycles/s':>11} {'vs native':>9} {'flits/s':>11}")
    for sim, name, cyc, flits, wall, rate, ratio, fps in rows:
        print(f"{sim:<10} {name:<10} {cyc:>10} {flits:>10} {wall:>8.2f} {rate:>11,.0f} "
              f"{ratio:>9.3f} {fps:>11,.0f}")
    for sim in a.sims:
        r = {name: rate for s, name, _, _, _, rate, _, _ in rows if s == sim}
        print(f"{sim}: counters-only / per-cycle Python = {r['counters'] / r['python']:.1f}x; "
              f"counters-only / native = {r['counters'] / r['native']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
