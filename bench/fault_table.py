"""How every kind of lane fault ends: the fault table of README.md and docs/protocol.md.

One row per fault, each from one RTL run on Icarus (cocotb):

* bit errors at BER 1e-6, 1e-5, 1e-4, 1e-3 and solid bursts of 1 to 32 bits: the chiplet
  link through the real PCS (``fusionfabric.tb.chiplet.harness.ChipletPcsPair``, 2 lanes,
  ``tb/chiplet/test_link``): random WRITE/READ/ATOMIC_ADD and posted messages both ways,
  every one checked against its expectation (scoreboards: lost, duplicated, corrupted);
* a peer reset in traffic: the same link through the PCS, chiplet B (and its accelerator)
  reset alone for 8 cycles in the middle of random traffic both ways
  (``tb/chiplet/test_peer_reset``, short timers: ``tests/test_chiplet_peer_reset.PARAMS``),
  with the cycles from the end of the reset to both chiplets ACTIVE again; "0 unreported":
  every request of the surviving side delivered once or completed with TIMEOUT/ERROR;
* a 1-bit slip, a short dark lane and a dark lane for good: the fabric
  (``tb/fabric/test_fabric``; 2 endpoints, 3 for the permanent one), with the cycles from
  the fault to the PCS relock / the link ACTIVE again / both chiplets FAILED.

"0 unreported": every message that was not delivered completed with an error status at
its sender (``fusionfabric.tb.fabric.fabric_tb.FabricLedger``).

Usage: ``python bench/fault_table.py [--seed N] [--rows ber,burst,reset,slip,dark,dead]
[--json FILE]``. About 10 minutes on one core. Bad arguments exit 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROWS = ("ber", "burst", "reset", "slip", "dark", "dead")
BERS = (1e-6, 1e-5, 1e-4, 1e-3)
#: messages per side of the link runs
LINK_N = 40
#: chiplet parameters of the BER 1e-3 row
HIGH_BER_PARAMS = {"tl_per_dl": 1, "replay_limit": 64}
#: the permanent dark lane's fabric (tests/test_fabric_cocotb.py DEAD_PARAMS)
DEAD_PARAMS = {"n_endpoints": 3, "link_timeout": 1000, "cpl_timeout": 6000}


def _link(seed: int, tmp: Path, name: str, params=None, **args) -> dict:
    from fusionfabric.tb.chiplet.harness import ChipletPcsPair
    from fusionfabric.tb.common import runner

    stats = tmp / f"{name}.json"
    try:
        res = runner.run("chiplet-pcs-pair", "fusionfabric.tb.chiplet.test_link",
                         dict(params or {}), sim="icarus",
                         component=ChipletPcsPair(**(params or {})), seed=seed,
                         name=f"fault-{name}",
                         test_args={"n": LINK_N, "pcs": True, "stats_file": str(stats),
                                    "stall": 200_000, **args})
        ok = bool(res.tests) and not res.failed
    except runner.CocotbFailure as exc:
        print(f"fault_table: {name}: {str(exc).splitlines()[0]}", file=sys.stderr)
        ok = False
    st = json.loads(stats.read_text()) if stats.exists() else {}
    return {"passed": ok, "lost": st.get("lost"), "duplicated": st.get("duplicates"),
            "corrupted": st.get("corrupt"), "delivered": st.get("delivered"),
            "replays": st.get("replays"), "crc_errors": st.get("crc_errors"),
            "flits_hit": st.get("flits_hit"), "bursts": st.get("bursts"), "seed": seed}


def _peer_reset(seed: int, tmp: Path) -> dict:
    from fusionfabric.tb.chiplet.harness import ChipletPcsPair
    from fusionfabric.tb.common import runner
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_chiplet_peer_reset import PARAMS, retrain_bound

    stats = tmp / "reset.json"
    try:
        res = runner.run("chiplet-pcs-pair-reset", "fusionfabric.tb.chiplet.test_peer_reset",
                         PARAMS, sim="icarus", seed=seed, name="fault-reset",
                         component=ChipletPcsPair(resets=True, **PARAMS),
                         test_args={"n": LINK_N, "reset_side": "b", "reset_at": 600,
                                    "stats_file": str(stats),
                                    "retrain_bound": retrain_bound(PARAMS, latency=20)})
        ok = bool(res.tests) and not res.failed
    except runner.CocotbFailure as exc:
        print(f"fault_table: reset: {str(exc).splitlines()[0]}", file=sys.stderr)
        ok = False
    st = json.loads(stats.read_text()) if stats.exists() else {}
    sv = st.get("survivor") or {}
    return {"passed": ok, "retrain": st.get("retrain_cycles"),
            "detect_cycles": st.get("detect_cycles"), "link_resets": st.get("link_resets"),
            "lost": (f"{sv.get('unreported')} unreported ({sv.get('undelivered')} "
                     f"undelivered: {sv.get('undelivered_posted')} posted, "
                     f"{sv.get('timeout')} TIMEOUT; {sv.get('refused')} refused: "
                     f"{sv.get('error')} ERROR)" if sv else None),
            "duplicated": st.get("duplicated"), "corrupted": st.get("corrupted"),
            "delivered": sv.get("delivered"),
            "discarded": ((st.get("status") or {}).get("a") or {}).get("discarded")}


def _fabric(seed: int, params: dict, testcase: str, name: str, **args) -> dict:
    from fusionfabric.tb.common import runner

    try:
        res = runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params,
                         sim="icarus", seed=seed, testcase=testcase, name=f"fault-{name}",
                         vpi="top", test_args={"stall_cycles": 20_000, **args})
        ok = bool(res.tests) and not res.failed
        path = res.test_dir / "fabric_results.json"
        rec = json.loads(path.read_text()) if path.exists() else {}
    except runner.CocotbFailure as exc:
        print(f"fault_table: {name}: {str(exc).splitlines()[0]}", file=sys.stderr)
        ok, rec = False, {}
    rec["passed"] = ok
    return rec


def run_rows(rows, seed: int) -> list[dict]:
    from tqdm import tqdm

    out = []
    plan = []
    if "ber" in rows:
        plan += [("ber", b) for b in BERS]
    plan += [(r, None) for r in ("burst", "reset", "slip", "dark", "dead") if r in rows]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for kind, val in tqdm(plan, desc="fault runs", disable=not sys.stderr.isatty()):
            t0 = time.perf_counter()
            if kind == "ber":
                # at 1e-3 a 2,176-bit DL flit survives 1 time in 9: short flits and a
                # higher replay limit (the defaults fail the link there, by design)
                params = HIGH_BER_PARAMS if val >= 1e-3 else None
                r = _link(seed, tmp, f"ber{val:g}", params, ber=val)
                label = f"BER {val:g}" + (" (`tl_per_dl` 1, `replay_limit` 64)"
                                          if params else "")
                row = {"fault": label, "expected": "delivered", "detect": "-", **r}
            elif kind == "burst":
                r = _link(seed, tmp, "burst", lane_bursts=[1, 32, 2e-3])
                row = {"fault": "bursts of 1 to 32 bits", "expected": "delivered",
                       "detect": "-", **r}
            elif kind == "reset":
                r = _peer_reset(seed, tmp)
                row = {"fault": "peer reset in traffic", "expected": "retrain, delivered",
                       "detect": f"both ACTIVE {r['retrain']} after the reset "
                                 f"(FAILED after {r['detect_cycles']})", **r}
            elif kind == "slip":
                rec = _fabric(seed, {"n_endpoints": 2}, "test_faults", "slip",
                              granules=16, messages=6, ber=1e-6, slip_lane=1, slip_at=200)
                sl = rec.get("slip") or {}
                row = {"fault": "1-bit slip", "expected": "relock, delivered",
                       "detect": (f"lock lost {sl.get('loss')}, relocked {sl.get('relock')}, "
                                  f"link active {sl.get('active')}"),
                       **_sb(rec), "passed": rec["passed"]}
            elif kind == "dark":
                rec = _fabric(seed, {"n_endpoints": 2}, "test_dark_lane", "dark",
                              messages=10, dark_cycles=1000, dark_at=200)
                row = {"fault": "dark lane, 1,000 cycles", "expected": "retrain, delivered",
                       "detect": f"link active {rec.get('retrain_cycles')} after the lane is lit",
                       **_sb(rec), "passed": rec["passed"]}
            else:
                rec = _fabric(seed, DEAD_PARAMS, "test_dark_lane", "dead", messages=12,
                              dark_cycles=0)
                led = rec.get("ledger") or {}
                row = {"fault": "dark lane for good",
                       "expected": "link failed, requests completed with error",
                       "detect": (f"both ends FAILED {rec.get('detect_cycles')} "
                                  f"(link_timeout {DEAD_PARAMS['link_timeout']})"),
                       "lost": (f"{led.get('unreported')} unreported "
                                f"({led.get('undelivered')} undelivered: "
                                f"{led.get('error')} ERROR, {led.get('timeout')} TIMEOUT)"
                                if led else None),
                       "duplicated": 0 if rec.get("passed") else None,
                       "corrupted": 0 if rec.get("passed") else None,
                       "rate_ratio": rec.get("rate_ratio"), "passed": rec["passed"]}
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            row["seed"] = seed
            out.append(row)
    return out


def _sb(rec: dict) -> dict:
    sb = rec.get("scoreboard") or {}
    return {"lost": sb.get("lost"), "duplicated": sb.get("duplicates"),
            "corrupted": sb.get("corrupt"), "delivered": sb.get("delivered")}


def table(rows: list[dict]) -> str:
    head = ("fault", "outcome", "detection (cycles)", "lost", "duplicated", "corrupted",
            "test passed")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in (
            r["fault"], r["expected"], r["detect"], r.get("lost"), r.get("duplicated"),
            r.get("corrupted"), "yes" if r["passed"] else "NO")) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", default="1")
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--json", default=None, help="also write the rows as JSON to this file")
    a = p.parse_args(argv)
    try:
        seed = int(a.seed)
        if not 0 <= seed < 2**32:
            raise ValueError
    except ValueError:
        print(f"fault_table: --seed {a.seed!r} must be an integer in 0 .. 2**32 - 1",
              file=sys.stderr)
        return 2
    rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad or not rows:
        print(f"fault_table: --rows {a.rows!r}: {bad[0] if bad else 'empty'!r} is not one of "
              f"{', '.join(ROWS)}", file=sys.stderr)
        return 2
    if a.json is not None:
        from fusionfabric.commands._common import check_output
        from fusionfabric.cli import CliError
        try:
            check_output(a.json, "--json", "file")
        except CliError as exc:
            print(f"fault_table: {exc}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    res = run_rows(rows, seed)
    print(f"fault table: RTL on Icarus, seed {seed} "
          f"(rerun: python bench/fault_table.py --seed {seed})")
    print()
    print(table(res))
    print()
    for r in res:
        if r.get("rate_ratio") is not None:
            print(f"{r['fault']}: live endpoints' traffic after the failure at "
                  f"{r['rate_ratio']:.3f} of its rate before the fault (same messages)")
    print(f"{len(res)} runs in {time.perf_counter() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    return 0 if all(r["passed"] for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
