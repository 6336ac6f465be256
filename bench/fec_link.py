"""The chiplet link on top of the FEC profile: goodput, replays and post-FEC BER (docs/fec.md).

Runs the numpy link model :mod:`fusionfabric.sim.fec_link` (DL flits of 256-byte writes in
RS(544,514) codewords, go-back-N replay) and prints:

1. the framing choice: DL flits straddling codewords (``tl_per_dl = 32``, a START row every
   16 flits) against DL flits aligned to codewords (1 codeword, 9 TL flits; 3 codewords,
   29 TL flits), at BER 2.4e-4 and 1e-3, random errors and bursts;
2. for the chosen framing, at raw BER 0, 1e-6, 1e-5, 1e-4, 2.4e-4 and 1e-3, random errors
   and bursts: goodput as a fraction of the raw lane rate, the format bound, their ratio,
   replays, uncorrectable codewords, post-FEC BER, lost / duplicated / corrupted, seed;
3. BER 1e-5 random over at least 10^6 DL flits: replays, and codewords with more than 15
   symbol errors, counted and from the binomial tail;
4. the latency the FEC adds.

Usage: ``python bench/fec_link.py [--seed S] [--flits N] [--long-flits N] [--burst-len L]
[--only 1,2,3,4]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fusionfabric.sim import fec, fec_link as fl  # noqa: E402

BERS = (0.0, 1e-6, 1e-5, 1e-4, 2.4e-4, 1e-3)
FRAMINGS = {
    "straddle n=32": fl.LinkParams(tl_per_dl=32, framing="straddle"),
    "aligned 1 cw, n=9": fl.LinkParams(framing="aligned", cw_per_flit=1),
    "aligned 3 cw, n=29": fl.LinkParams(framing="aligned", cw_per_flit=3),
}
#: Symbols per cycle of the RTL decoder per FEC lane count (docs/fec.md, "Choosing P").
P_FOR_LANES = {1: 8, 4: 32, 8: 68}
DECODER_CYCLES = 33
CLOCK_GHZ = 1.0


def row(label, r, t):
    bad = f"{r.lost}/{r.duplicated}/{r.corrupted}"
    burst = f"burst {r.burst_len}" if r.burst_len else "random"
    return (f"{label:<20} {r.ber:>7g} {burst:>9} {r.flits:>9,} {r.goodput:>8.4f} "
            f"{r.bound:>7.4f} {r.goodput / r.bound:>7.4f} {r.replays:>7} ({r.timeouts:>3}) "
            f"{r.fwd['uncorrectable']:>6} {r.fwd['miscorrected']:>5} {r.post_fec_ber:>9.2e} "
            f"{bad:>8} {r.seed:>5} {t:>6.0f}")


HEAD = (f"{'framing':<20} {'BER':>7} {'errors':>9} {'DL flits':>9} {'goodput':>8} "
        f"{'bound':>7} {'ratio':>7} {'replays':>7} {'(tmo)':>5} {'uncorr':>6} {'misc':>5} "
        f"{'post-FEC':>9} {'l/d/c':>8} {'seed':>5} {'wall s':>6}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flits", type=int, default=3000, help="DL flits per point (sections 1, 2)")
    ap.add_argument("--long-flits", type=int, default=1_000_000,
                    help="DL flits of the BER 1e-5 run (section 3)")
    ap.add_argument("--burst-len", type=int, default=64, help="burst length in bits")
    ap.add_argument("--only", default="1,2,3,4")
    opt = ap.parse_args(argv)
    for name in ("flits", "long_flits", "burst_len"):
        if getattr(opt, name) < 1:
            print(f"--{name.replace('_', '-')}={getattr(opt, name)} must be >= 1",
                  file=sys.stderr)
            return 2
    only = {int(x) for x in opt.only.split(",")}
    L, seed = opt.burst_len, opt.seed
    chosen = FRAMINGS["straddle n=32"]

    print("Link on FEC: 256-byte writes streamed one way; lane RS(544,514) + 256b/257b, "
          f"{chosen.n_lanes} FEC lanes, markers every {chosen.am_period} codewords; "
          f"replay_depth {chosen.replay_depth}, round trip {chosen.rtt_codewords:.2f} "
          f"codewords + flits, replay timer 8F + 64; bursts: solid, {L} bits; seed {seed}")
    b = fl.format_bound(chosen)
    print("format bound (straddle, tl_per_dl = 32): " + " x ".join(
        f"{k} {v:.5f}" for k, v in b.items() if k != "bound") + f" = {b['bound']:.4f}")

    if 1 in only:
        print(f"\n== 1. Framing: straddling against codeword-aligned DL flits ({opt.flits:,} "
              "DL flits per point)")
        print(HEAD)
        for ber in (2.4e-4, 1e-3):
            for burst in (0, L):
                for label, p in FRAMINGS.items():
                    t0 = time.time()
                    r = fl.run(opt.flits, p, ber=ber, burst_len=burst, seed=seed)
                    print(row(label, r, time.time() - t0), flush=True)

    if 2 in only:
        print(f"\n== 2. Chosen framing (straddle, tl_per_dl = 32) at every BER "
              f"({opt.flits:,} DL flits per point)")
        print(HEAD)
        for ber in BERS:
            for burst in ((0, L) if ber else (0,)):
                t0 = time.time()
                r = fl.run(opt.flits, chosen, ber=ber, burst_len=burst, seed=seed)
                print(row("straddle n=32", r, time.time() - t0), flush=True)

    if 3 in only:
        print(f"\n== 3. BER 1e-5, random errors, {opt.long_flits:,} DL flits (straddle, "
              "tl_per_dl = 32)")
        t0 = time.time()
        r = fl.run(opt.long_flits, chosen, ber=1e-5, seed=seed)
        print(HEAD)
        print(row("straddle n=32", r, time.time() - t0))
        ps = fl.symbol_error_prob(1e-5)
        for d, c in (("forward", r.fwd), ("reverse", r.rev)):
            tail = fl.binomial_tail(fec.N, ps, fec.T)
            print(f"{d}: {c['codewords']:,} codewords, {c['decoded']:,} hit and decoded, "
                  f"{c['corrected']:,} corrected, {c['uncorrectable']} uncorrectable, "
                  f"{c['miscorrected']} miscorrected; codewords with > {fec.T} symbol "
                  f"errors: counted {c['over_t']}, binomial tail "
                  f"P(X > {fec.T}) = {tail:.3e} x {c['codewords']:,} = "
                  f"{tail * c['codewords']:.3e} expected")
        print(f"replays {r.replays} (timeouts {r.timeouts}); target: no replay caused by "
              "random errors at 1e-5")

    if 4 in only:
        print(f"\n== 4. Latency the FEC adds (RTL decoder: 544/P cycles to take a codeword + "
              f"{DECODER_CYCLES}; clock {CLOCK_GHZ:g} GHz assumed, the decoder's Fmax is "
              "not measured)")
        for lanes, P in P_FOR_LANES.items():
            cyc = fec.N // P + DECODER_CYCLES
            print(f"{lanes} x 66-bit lanes: P = {P}: {fec.N // P} + {DECODER_CYCLES} = {cyc} "
                  f"cycles = {cyc / CLOCK_GHZ:.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
