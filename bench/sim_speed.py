"""Simulated cycles per second of the primitives: Amaranth's simulator, cocotb + Icarus and
cocotb + Verilator, side by side in one run.

Two kinds of testbench, to show what per-cycle Python costs:

* **per-cycle Python**: a stream source and sink (fusionfabric.tb.common) feed the scrambler / CRC and a
  scoreboard checks every word against the numpy model; for the PRBS pair, a coroutine
  drives the error-injection input and checks the error counter every cycle;
* **free-running**: a PRBS generator wired to a PRBS checker in RTL (tb/speed/harness.py);
  the testbench injects four errors, lets the design run, and reads the counters at the
  end (the checker must have counted exactly four).

Every variant checks its results, so the figure is the speed of a design doing the right
thing. Times are wall clock of the main loop only (build, start-up and reset excluded), on
whatever else the machine is running: compare the ratios within one run.

    .venv/bin/python bench/sim_speed.py            # default sizes (a few minutes)
    .venv/bin/python bench/sim_speed.py --quick    # 5x fewer cycles
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH = 64


# -- Amaranth's simulator ----------------------------------------------------------------------

def amaranth_scrambler(n_words: int) -> tuple[int, float]:
    import numpy as np
    from amaranth.sim import Simulator

    from fusionfabric.rtl.blocks import get_block
    from fusionfabric.sim.scrambler import scramble

    b = get_block("scrambler")
    params = b.resolve({"data_width": WIDTH})
    dut = b.build(**params)
    rng = np.random.default_rng(1)
    words = [int(x) for x in rng.integers(0, 2**63, n_words)]
    expect = scramble(words, WIDTH, params["init"], params["polynomial"])[0]
    got: list[int] = []
    box = {}

    async def bench(ctx):
        ctx.set(dut.o_data.ready, 1)
        t0 = time.perf_counter()
        cycles = 0
        i = 0
        while len(got) < n_words:
            if i < n_words:
                ctx.set(dut.i_data.payload, words[i])
                ctx.set(dut.i_data.valid, 1)
            else:
                ctx.set(dut.i_data.valid, 0)
            _, _, in_ready, out_valid, out_payload = await ctx.tick().sample(
                dut.i_data.ready, dut.o_data.valid, dut.o_data.payload)
            if i < n_words and in_ready:
                i += 1
            if out_valid:
                got.append(int(out_payload))
            cycles += 1
        box["t"] = (cycles, time.perf_counter() - t0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == expect, "Amaranth sim: scrambler output differs from the model"
    return box["t"]


def amaranth_prbs(n_cycles: int, per_cycle: bool) -> tuple[int, float]:
    from amaranth.sim import Simulator

    from fusionfabric.tb.speed.harness import PrbsPair

    dut = PrbsPair(31, WIDTH)
    box = {}

    async def bench(ctx):
        await ctx.tick().repeat(8)
        assert ctx.get(dut.o_locked)
        w0 = ctx.get(dut.o_words)
        t0 = time.perf_counter()
        injected = 0
        if per_cycle:
            for i in range(n_cycles):
                inj = int(i % 997 == 5)
                ctx.set(dut.i_inject, inj)
                assert ctx.get(dut.o_errors) == injected
                injected += inj
                await ctx.tick()
        else:
            for _ in range(4):
                ctx.set(dut.i_inject, 1)
                await ctx.tick()
                ctx.set(dut.i_inject, 0)
                injected += 1
                await ctx.tick().repeat(n_cycles // 4)
        ctx.set(dut.i_inject, 0)
        await ctx.tick()
        dt = time.perf_counter() - t0
        assert ctx.get(dut.o_errors) == injected, (ctx.get(dut.o_errors), injected)
        box["t"] = (ctx.get(dut.o_words) - w0, dt)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return box["t"]


# -- cocotb ------------------------------------------------------------------------------------

def cocotb_run(sim: str, testcase: str, args: dict, block: str, params: dict,
               component=None) -> tuple[int, float]:
    from fusionfabric.tb.common.runner import run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speed.json"
        run(block, "fusionfabric.tb.speed.test_speed", params, component=component, sim=sim,
            testcase=testcase, test_args={**args, "out": str(out)}, seed=1,
            name=f"speed-{testcase}")
        r = json.loads(out.read_text())
    return r["cycles"], r["seconds"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5x fewer cycles")
    ap.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    args = ap.parse_args(argv)
    k = 5 if args.quick else 1
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")

    from fusionfabric.rtl.blocks import all_blocks
    from fusionfabric.tb.speed.harness import PrbsPair

    blocks = all_blocks()
    rows = []  # (design, testbench, simulator, cycles, seconds)

    def record(design, kind, simname, fn):
        t0 = time.perf_counter()
        try:
            cycles, secs = fn()
        except Exception as exc:  # keep the table going; say what failed
            print(f"  {design} {kind} {simname}: FAILED {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:200]}", file=sys.stderr)
            return
        rows.append((design, kind, simname, cycles, secs))
        print(f"  {design:<22} {kind:<18} {simname:<10} {cycles:>9} cycles "
              f"{secs:8.2f} s  ({time.perf_counter() - t0:.1f} s with build)", file=sys.stderr)

    sw = {"data_width": WIDTH}
    if "scrambler" in blocks:
        sp = blocks["scrambler"].resolve(sw)
        record("scrambler 64b", "per-cycle Python", "amaranth",
               lambda: amaranth_scrambler(2000 // k))
        for simname, n in (("icarus", 10000 // k), ("verilator", 20000 // k)):
            record("scrambler 64b", "per-cycle Python", simname,
                   lambda s=simname, n=n: cocotb_run(s, "scrambler_stream", {"words": n},
                                                     "scrambler", sp))
    if "crc" in blocks:
        cp = blocks["crc"].resolve(sw)
        for simname, n in (("icarus", 1000 // k), ("verilator", 2000 // k)):
            record("crc32 64b", "per-cycle Python", simname,
                   lambda s=simname, n=n: cocotb_run(
                       s, "crc_stream", {"frames": n, "frame_bytes": 64}, "crc", cp))
    if "prbs-gen" in blocks and "prbs-check" in blocks:
        pair = PrbsPair(31, WIDTH)
        record("prbs31 gen+check 64b", "per-cycle Python", "amaranth",
               lambda: amaranth_prbs(2000 // k, True))
        record("prbs31 gen+check 64b", "free-running", "amaranth",
               lambda: amaranth_prbs(4000 // k, False))
        for simname, n_pc, n_fr in (("icarus", 10000 // k, 40000 // k),
                                    ("verilator", 20000 // k, 2000000 // k)):
            record("prbs31 gen+check 64b", "per-cycle Python", simname,
                   lambda s=simname, n=n_pc: cocotb_run(s, "prbs_per_cycle", {"cycles": n},
                                                        "prbs-pair", {}, component=pair))
            record("prbs31 gen+check 64b", "free-running", simname,
                   lambda s=simname, n=n_fr: cocotb_run(s, "prbs_free_running",
                                                        {"cycles": n}, "prbs-pair", {},
                                                        component=PrbsPair(31, WIDTH)))

    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(
            [dict(zip(("design", "testbench", "simulator", "cycles", "seconds"), r))
             for r in rows], indent=1) + "\n")
    return 0


def print_table(rows) -> None:
    base = {}
    for d, kind, s, c, t in rows:
        if s == "amaranth":
            base[(d, kind)] = c / t
    fr_ref = {}
    for d, kind, s, c, t in rows:
        if kind == "per-cycle Python":
            fr_ref[(d, s)] = c / t
    print(f"\n{'design':<22} {'testbench':<18} {'simulator':<10} {'cycles':>9} {'seconds':>8} "
          f"{'cycles/s':>11} {'vs amaranth':>11} {'vs per-cycle':>12}")
    print("-" * 108)
    for d, kind, s, c, t in rows:
        rate = c / t
        va = f"{rate / base[(d, kind)]:10.1f}x" if (d, kind) in base else f"{'':>11}"
        vp = (f"{rate / fr_ref[(d, s)]:11.1f}x" if kind == "free-running" and (d, s) in fr_ref
              else f"{'':>12}")
        print(f"{d:<22} {kind:<18} {s:<10} {c:>9} {t:>8.2f} {rate:>11,.0f} {va} {vp}")
    print("\nvs amaranth: same design and testbench kind under Amaranth's simulator; "
          "vs per-cycle: the free-running pair against the same pair with a Python "
          "coroutine every cycle, same simulator.")


if __name__ == "__main__":
    sys.exit(main())
