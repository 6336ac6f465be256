"""Throughput of the primitive models (sim/scrambler, sim/crc, sim/prbs), measured side by
side in one run: the fast word versions against the per-bit references, and the CRC table
against zlib. Prints Mbit/s and the ratios; no figure is asserted anywhere.

    .venv/bin/python bench/primitives_models.py [--bits N]
"""

import argparse
import time
import zlib

import numpy as np

from fusionfabric.sim import crc, prbs, scrambler


def rate(fn, bits, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return bits / best / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=1 << 20, help="stream length in bits")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    width = 64
    n = args.bits // width
    words = [int(x) for x in rng.integers(0, 1 << 63, n)]
    small = words[: max(1, n // 64)]
    rows = []
    fast = rate(lambda: scrambler.scramble(words, width, 1), n * width)
    ref_bits = scrambler.words_to_bits(small, width)
    ref = rate(lambda: scrambler.scramble_bits(ref_bits, 1), len(small) * width)
    rows.append(("scramble (squared-poly blocks)", fast, "per-bit reference", ref))
    fast = rate(lambda: scrambler.descramble(words, width, 1), n * width)
    ref = rate(lambda: scrambler.descramble_bits(ref_bits, 1), len(small) * width)
    rows.append(("descramble (vectorized FIR)", fast, "per-bit reference", ref))
    nbytes = args.bits // 8
    batch = rng.integers(0, 256, (nbytes // 640, 640), dtype=np.uint8)
    flat = [bytes(r) for r in batch]
    fast = rate(lambda: crc.crc_batch(batch, "crc32"), batch.size * 8)
    z = rate(lambda: [zlib.crc32(m) for m in flat], batch.size * 8)
    rows.append(("crc32 table, batch of 640 B", fast, "zlib.crc32", z))
    fast = rate(lambda: prbs.prbs_words(31, width, n), n * width)
    ref = rate(lambda: prbs.prbs_bits_ref(31, len(small) * width), len(small) * width)
    rows.append(("prbs31 words (squared-poly)", fast, "per-bit reference", ref))
    print(f"{'model':<32} {'Mbit/s':>9}   {'versus':<20} {'Mbit/s':>9} {'ratio':>7}")
    for name, a, other, b in rows:
        print(f"{name:<32} {a:9.2f}   {other:<20} {b:9.2f} {a / b:8.2f}x")


if __name__ == "__main__":
    main()
