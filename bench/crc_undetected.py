"""Undetected DL flits behind the 64b/66b PCS: P_ud per flit and mean time between them.

Runs the exhaustive low-weight search of fusionfabric.sim.crc_detection (every set of 1..4
flit-bit errors, and of 1..4 line errors through the descrambler, that reaches one
tl_per_dl = 4 flit), samples the undetected fraction of 5-error patterns, then prints
P_ud per flit and the mean time between undetected flits at each line BER for the 64b/66b
profile, and for the RS(544,514) profile (docs/crc.md explains every term).

    .venv/bin/python bench/crc_undetected.py [--ber 1e-12,1e-9,1e-6,1e-5,1e-4]
        [--lane-gbps 400] [--am-period 64] [--start-every 16]
        [--samples 2000000] [--seed 1]
"""

import argparse
import math
import sys
import time

from fusionfabric.sim import crc_detection as D

YEAR = 365.25 * 86400


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"crc_undetected.py: {message}", file=sys.stderr)
        sys.exit(2)


def _bad(msg):
    print(f"crc_undetected.py: {msg}", file=sys.stderr)
    sys.exit(2)


def _bers(text):
    try:
        out = [float(b) for b in text.split(",")]
    except ValueError:
        _bad(f"--ber {text!r}: not a comma-separated list of numbers")
    for b in out:
        if not 0 < b < 1:
            _bad(f"--ber {b!r}: each BER must be in (0, 1)")
    return out


def _mtbu(p, rate):
    if p <= 0:
        return "never"
    s = 1 / (p * rate)
    return f"{s:.3g} s" if s < YEAR else f"{s / YEAR:.3g} y"


def main():
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--ber", default="1e-12,1e-9,1e-6,1e-5,1e-4",
                    help="line BERs of the 64b/66b profile, comma-separated")
    ap.add_argument("--lane-gbps", type=float, default=400.0,
                    help="signalling rate per lane (sim/fabric/config.py PhysParams.lane_gbps)")
    ap.add_argument("--am-period", type=int, default=64, help="rows per marker period")
    ap.add_argument("--start-every", type=int, default=16, help="flits per START row")
    ap.add_argument("--samples", type=int, default=2_000_000,
                    help="random triples for the 5-error fraction")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    bers = _bers(a.ber)
    if not a.lane_gbps > 0:
        _bad(f"--lane-gbps {a.lane_gbps}: must be positive")
    if a.am_period < 2:
        _bad(f"--am-period {a.am_period}: must be at least 2")
    if not 1 <= a.start_every <= 4096:
        _bad(f"--start-every {a.start_every}: must be in 1..4096")
    if a.samples < 1000:
        _bad(f"--samples {a.samples}: must be at least 1000")

    n = D.flit_bits(4)
    print(f"DL flit: tl_per_dl 4, {n} bits with the CRC; CRC-32 g = {D.CRC_POLY:#x}, "
          f"primitive: {D.is_primitive()}; scrambler 1 + x^39 + x^58, "
          f"gcd(g, x^58 + x^19 + 1) = {D.poly_gcd(D.CRC_POLY, D.T_POLY)}")
    flit = D.min_undetected(D.syndromes(n), seed=a.seed)
    print(f"flit-bit errors, exhaustive 1..4 over {flit.n_positions} bits: undetected "
          f"{flit.counts}; a 5-bit one: {flit.example5} ({flit.seconds:.1f} s)")
    syn, images = D.line_pattern_syndromes(n)
    line = D.min_undetected(syn, images, seed=a.seed)
    k_min = min([k for k, c in line.counts.items() if c] or [5])
    print(f"line errors, exhaustive 1..4 over the {line.n_positions} payload bits that "
          f"reach the flit: undetected {line.counts}; k_min = {k_min}; a 5-error one at "
          f"{[j - D.SCRAMBLER_TAPS[1] for j in line.example5]} ({line.seconds:.1f} s)")
    t0 = time.time()
    f5, hits = D.weight_fraction(syn, 5, a.samples, seed=a.seed)
    print(f"5 line errors: undetected fraction {f5:.3e} = {f5 * 2 ** 32:.3f} x 2^-32 "
          f"({hits} hits in {a.samples} triples, seed {a.seed}, "
          f"+-{100 / math.sqrt(max(hits, 1)):.0f} %, {time.time() - t0:.1f} s)")

    rate = D.flit_rate_64b66b(a.lane_gbps, 4, a.am_period, a.start_every)
    print(f"\n64b/66b profile: {rate.flits_per_s:.4g} flits/s ({rate.note})")
    print(f"{'line BER':>9} {'P(K>=5)':>9} {'payload':>9} {'sync':>9} {'START':>9} "
          f"{'marker':>9} {'P_ud/flit':>9} {'mean time between':>18}")
    for b in bers:
        p = D.p_undetected(b, line.counts, 4, am_period=a.am_period,
                           start_every=a.start_every)
        print(f"{b:>9.0e} {p['p_k_ge5']:>9.2e} {p['payload']:>9.2e} {p['sync']:>9.2e} "
              f"{p['start']:>9.2e} {p['marker']:>9.2e} {p['total']:>9.2e} "
              f"{_mtbu(p['total'], rate.flits_per_s):>18}")
    print("sync: 0, flagged by PcsToPhy (err) or the chain ends; START: false START rows "
          "and START rows read as data only (a damaged START row ends the chain); marker: "
          "0, PcsToPhy waits for a START row after a realignment (i_link_up connected)")
    print("payload only (the scrambled data bits; what the CRC's distance covers):")
    for b in bers:
        p = D.p_undetected(b, line.counts, 4)
        print(f"{b:>9.0e} P_ud {p['payload']:.2e}, mean time between "
              f"{_mtbu(p['payload'], rate.flits_per_s)}")
    print("PcsToPhy.i_link_up left unconnected (misframed flits after a realignment reach "
          "the CRC; marker term an estimate, upper end):")
    for b in bers:
        p = D.p_undetected(b, line.counts, 4, am_period=a.am_period,
                           start_every=a.start_every, link_reset=False)
        print(f"{b:>9.0e} marker {p['marker']:.2e}, P_ud {p['total']:.2e}, mean time "
              f"between {_mtbu(p['total'], rate.flits_per_s)}")

    rate2 = D.flit_rate_rs544(a.lane_gbps, 4, a.start_every)
    print(f"\nrs544 profile: {rate2.flits_per_s:.4g} flits/s ({rate2.note})")
    print(f"{'pre-FEC BER':>11} {'P(>15 sym)':>10} {'miscorr.':>9} {'P_ud/flit':>9} "
          f"{'mean time between':>18}")
    for b in (2.4e-4, 1e-3):
        p = D.p_undetected_rs544(b)
        print(f"{b:>11.1e} {p['p_uncorrectable']:>10.2e} {p['p_miscorrected']:>9.2e} "
              f"{p['total']:>9.2e} {_mtbu(p['total'], rate2.flits_per_s):>18}")
    post = 7.5e-6
    p = D.p_undetected(post, line.counts, 4)
    print(f"post-FEC BER {post:g} (docs/fec.md, 1e-3 with 64-bit bursts) taken as "
          f"independent unflagged bit errors, payload term: P_ud {p['payload']:.2e}, "
          f"mean time between {_mtbu(p['payload'], rate2.flits_per_s)}")


if __name__ == "__main__":
    main()
