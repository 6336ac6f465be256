"""One saturated flow on the RTL fabric against the link's TL credits (``rx_credits``).

The fabric ``gpu:2x2,accelerator:1x1`` (``fusionfabric.tb.fabric.flows.MIXED``): endpoint
0 sends WRITEs back to back (random lengths 64..256 bytes, seeded) to endpoint 1, both on
2-lane links, with no idle and no backpressure at the ports. For each ``rx_credits`` the
fabric is built and run once (cocotb ``test_flows`` on Icarus, every request and
completion checked), with the same seed and window; the figures are switch port 0's
flits per cycle taken from its link and the flow's delivered bytes per cycle, each beside
its ratio to the first setting of the list (the reference, measured in the same run).
``--replay-depth`` runs the same comparison on the replay buffer instead.

    python bench/rtl_flow_credits.py [--credits 16,32,64] [--replay-depth 8,16]
        [--cycles 1600] [--warm 400] [--seed 3738409151]
"""

from __future__ import annotations

import argparse
import sys
import time

from fusionfabric.tb.fabric.flows import MIXED, run_flows

FLOW = (0, 1, 1.0)


def _ints(text: str) -> list[int] | None:
    """``text`` as a list of positive integers, or None."""
    try:
        vals = [int(v) for v in text.split(",")]
    except ValueError:
        return None
    return vals if min(vals) >= 1 else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--credits", default="16,32,64", help="rx_credits values (first: reference)")
    ap.add_argument("--replay-depth", default="", help="replay_depth values, run after the "
                    "credits at the default rx_credits (first: reference)")
    ap.add_argument("--cycles", type=int, default=1600, help="traffic cycles per run")
    ap.add_argument("--warm", type=int, default=400, help="cycles before the window")
    ap.add_argument("--seed", type=int, default=3738409151, help="cocotb seed of every run")
    a = ap.parse_args(argv)
    if not 0 <= a.warm < a.cycles:
        print(f"rtl_flow_credits: error: --warm {a.warm} must be in 0..{a.cycles - 1}",
              file=sys.stderr)
        return 2
    sets = []
    for flag, key, text in (("--credits", "rx_credits", a.credits),
                            ("--replay-depth", "replay_depth", a.replay_depth)):
        vals = _ints(text) if text or key == "rx_credits" else []
        if vals is None:
            print(f"rtl_flow_credits: error: {flag} {text!r} must be a comma-separated list "
                  f"of positive integers", file=sys.stderr)
            return 2
        sets += [(key, v) for v in vals]
    print(f"# RTL flow {FLOW[0]}->{FLOW[1]} saturated on fabric endpoints={MIXED}; seed "
          f"{a.seed}, window {a.warm}..{a.cycles} cycles, Icarus")
    print(f"{'setting':>18} {'port 0 flits/cycle':>19} {'ratio':>6} {'flow B/cycle':>13} "
          f"{'ratio':>6} {'wall s':>7}")
    ref = {}
    for key, val in sets:
        t = time.time()
        rec = run_flows([list(FLOW)], a.cycles, a.warm, seed=a.seed,
                        name=f"rtl-flow-{key}-{val}", params={key: val})
        flits = float(rec["ports"][FLOW[0]]["flits_in_per_cycle"])
        moved = next(float(f["bytes_per_cycle"]) for f in rec["flows"]
                     if (f["src"], f["dest"]) == FLOW[:2])
        ref.setdefault(key, (flits, moved))
        r0, r1 = ref[key]
        print(f"{key + ' ' + str(val):>18} {flits:19.3f} {flits / r0:6.3f} {moved:13.2f} "
              f"{moved / r1:6.3f} {time.time() - t:7.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
