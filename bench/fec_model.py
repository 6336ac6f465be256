"""RS(544,514) model (fusionfabric.sim.fec): miscorrection rate beyond t and model speed.

For each error count above t = 15, ``--trials`` random codewords get that many symbol errors
(random distinct positions, random non-zero values) and are decoded: the decoder either
reports failure (ok=False) or miscorrects (ok=True and a codeword other than the one sent).
With zero miscorrections seen, the 95 % upper bound on the rate is 3 / trials (rule of
three). Then it times encode and decode_batch. Every figure names its seed and sample size.

    .venv/bin/python bench/fec_model.py [--trials N] [--seed S] [--errors 16,17,20,30]
"""

import argparse
import time

import numpy as np

from fusionfabric.sim import fec


def corrupt(rng, cw, nerr):
    rx = cw.copy()
    for row in rx:
        pos = rng.choice(fec.N, nerr, replace=False)
        row[pos] ^= rng.integers(1, 1024, nerr)
    return rx


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000, help="codewords per error count")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--errors", default="16,17,20,30", help="error counts, comma-separated")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"RS(544,514) model, seed {args.seed}, {args.trials} codewords per row")
    print(f"{'errors':>6} {'failures':>9} {'miscorrections':>15} {'rate':>10} "
          f"{'95% bound':>10}")
    for nerr in (int(e) for e in args.errors.split(",")):
        cw = fec.encode(rng.integers(0, 1024, (args.trials, fec.K)))
        res = fec.decode_batch(corrupt(rng, cw, nerr))
        mis = int((res.ok & (res.codewords != cw).any(axis=1)).sum())
        fail = int((~res.ok).sum())
        bound = 3 / args.trials if mis == 0 else float("nan")
        print(f"{nerr:>6} {fail:>9} {mis:>15} {mis / args.trials:>10.2e} {bound:>10.1e}")
    n = 500
    msg = rng.integers(0, 1024, (n, fec.K))
    t = time.perf_counter()
    cw = fec.encode(msg)
    enc = n / (time.perf_counter() - t)
    rows = [("encode", enc)]
    for nerr in (0, 1, 15):
        rx = corrupt(rng, cw, nerr) if nerr else cw
        t = time.perf_counter()
        fec.decode_batch(rx)
        rows.append((f"decode_batch, {nerr} errors", n / (time.perf_counter() - t)))
    print(f"\nspeed ({n} codewords, seed {args.seed}):")
    for name, cps in rows:
        print(f"  {name:<26} {cps:>9,.0f} codewords/s  {cps * fec.K * fec.M / 1e6:>7.1f} "
              "Mbit/s of message")


if __name__ == "__main__":
    main()
