"""Flip and flit accounting on the RTL fabric: every flipped bit placed, every DL flit
intact, hit or cut, every CRC error put on the flit it checked (tb/fabric/hits.py).

Runs ``test_workload`` (Icarus, ``count_hits=1``) at bit error rates without slips and
prints, summed over every link direction: flips and where they landed, DL flits hit,
CRC errors, flits cut, flits damaged twice, undetected errors. docs/demo.md, section
"Bit flips and CRC errors", quotes its output.

    python bench/flip_accounting.py [--endpoints 2] [--ber 1e-5 1e-4] [--seed 1]
        [--workload moe-alltoall] [--tokens 16] [--d-model 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from fusionfabric.tb.common import runner

TB = "fusionfabric.tb.fabric.test_fabric"


def run_one(n: int, ber: float, seed: int, workload: str, wparams: dict,
            out_dir: Path) -> dict:
    """One workload run with the accounting; the results record (``hits`` in it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rf = (out_dir / f"flips-{workload}-n{n}-ber{ber:g}-s{seed}.json").resolve()
    if rf.exists():
        rf.unlink()
    args = {"workload": workload, "seed": seed, "params": wparams,
            "faults": {"ber": ber, "slip_lane": -1}, "count_hits": 1,
            "result_file": str(rf), "hits_dump": str(rf.with_suffix(".pkl"))}
    t0 = time.perf_counter()
    try:
        runner.run("fabric", TB, {"n_endpoints": n}, sim="icarus", seed=seed,
                   testcase="test_workload", test_args=args, vpi="top",
                   name=f"flip-accounting-n{n}-ber{ber:g}-s{seed}")
    except runner.CocotbFailure as exc:
        if not rf.exists():
            raise SystemExit(f"run failed (seed {seed}, BER {ber}): {exc}")
        print(f"warning: the run failed (seed {seed}): {exc}", file=sys.stderr)
    rec = json.loads(rf.read_text())
    rec["wall_s"] = round(time.perf_counter() - t0, 1)
    return rec


def _eff(key):
    return lambda r, t: t["flips_by_effect"].get(key, 0)


def _place(key):
    return lambda r, t: t["flips_by_place"].get(key, 0)


def _tot(key):
    return lambda r, t: t[key]


ROWS = (("bits flipped (injectors' o_flips)", lambda r, t: r["flips"]),
        ("  recorded by the monitor", _tot("flips")),
        ("  in a DL flit's slot row", _place("flit")),
        ("    of a flit received hit", _eff("flit_hit")),
        ("    of a flit cut", _eff("flit_cut")),
        ("    of a flit received intact", _eff("flit_intact")),
        ("    of a flit in flight at the end", _eff("flit_in_flight")),
        ("  in a START row", _place("start")),
        ("  in an IDLE row", _place("idle")),
        ("  in an alignment-marker row", _place("am")),
        ("    the receiver realigned", _eff("am_realign")),
        ("  in a data row outside a flit", _place("outside")),
        ("  not placed", _place("unknown")),
        ("  in a sync header", _tot("flips_sync_header")),
        ("  copied into the next flit (descrambler)", _tot("flips_spilling_into_next_flit")),
        ("DL flits sent", _tot("tx_flits")),
        ("DL flits received intact", _tot("flits_intact")),
        ("DL flits hit by bit errors", _tot("flits_hit")),
        ("  by a flip or its copy", _tot("flits_hit_by_flip")),
        ("  in a realignment", _tot("flits_hit_in_relock")),
        ("  unexplained", _tot("flits_hit_unexplained")),
        ("  carrying 1 flip (or copy)", lambda r, t: t["hit_flits_by_flips"].get("1", 0)),
        ("  carrying 2", lambda r, t: t["hit_flits_by_flips"].get("2", 0)),
        ("  carrying 3 or more", lambda r, t: sum(v for k, v in t["hit_flits_by_flips"].items()
                                                  if int(k) >= 3)),
        ("DL flits cut (never received whole)", _tot("flits_cut")),
        ("  chain ended by a damaged row", _tot("flits_cut_chain")),
        ("  in a realignment", _tot("flits_cut_relock")),
        ("  unexplained", _tot("flits_cut_unexplained")),
        ("DL flits in flight at the end", _tot("flits_in_flight")),
        ("DL flits failing CRC (crc_err)", _tot("crc_err")),
        ("  on a hit flit", _tot("crc_err_on_hit")),
        ("  on an intact flit", _tot("crc_err_on_intact")),
        ("  on any other received flit", lambda r, t: (
            t["crc_err_on_unmatched"] + t["crc_err_in_flight"] + t["crc_err_before_window"])),
        ("  on no received flit", _tot("crc_err_unattributed")),
        ("undetected (hit, CRC passed)", _tot("undetected")),
        ("relocks (receiver link drops)", _tot("link_drops")),
        ("cycles", lambda r, t: r["cycles"]),
        ("bit-exact", lambda r, t: "yes" if r["bit_exact"] else "NO"))


def table(recs: list[dict]) -> str:
    head = ["", *[f"BER {r['_ber']:g}" for r in recs]]
    rows = [head]
    for label, f in ROWS:
        rows.append([label, *[f"{f(r, r['hits']['total']):,}" if not isinstance(
            f(r, r['hits']['total']), str) else f(r, r['hits']['total']) for r in recs]])
    w0 = max(len(r[0]) for r in rows)
    ws = [max(len(r[i]) for r in rows) for i in range(1, len(head))]
    return "\n".join(r[0].ljust(w0) + "".join("  " + c.rjust(w) for c, w in zip(r[1:], ws))
                     for r in rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--endpoints", type=int, default=2)
    p.add_argument("--ber", type=float, nargs="+", default=[1e-5, 1e-4])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workload", default="moe-alltoall")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--elems", type=int, default=512)
    p.add_argument("--json", default=None, help="write the records here")
    p.add_argument("--out", default="build/flip_accounting")
    a = p.parse_args(argv)
    wparams = ({"tokens_per_endpoint": a.tokens, "d_model": a.d_model}
               if a.workload == "moe-alltoall" else {"n_elems": a.elems})
    recs = []
    for ber in a.ber:
        rec = run_one(a.endpoints, ber, a.seed, a.workload, wparams, Path(a.out))
        rec["_ber"] = ber
        recs.append(rec)
        print(f"BER {ber:g}: {rec['wall_s']} s", file=sys.stderr)
    cmd = "python bench/flip_accounting.py " + " ".join(argv if argv is not None
                                                         else sys.argv[1:])
    print(f"{a.workload}, {a.endpoints} endpoints, Icarus, seed {a.seed} "
          f"(command: {cmd.strip()})")
    print(table(recs))
    print("wall: " + ", ".join(f"BER {r['_ber']:g} {r['wall_s']} s" for r in recs))
    for r in recs:
        h = r["hits"]
        print(f"BER {r['_ber']:g}: o_flips vs monitor mismatches {h['o_flips_mismatch']}, "
              f"model check {h['model']}, latencies "
              f"{sorted({x for d in h['directions'] for x in d['latencies']})}")
    if a.json:
        Path(a.json).write_text(json.dumps(recs, indent=1, default=int))


if __name__ == "__main__":
    main()
