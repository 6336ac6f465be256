"""Bit-level numpy model of the lane fault injector (``rtl/fabric/fault.py``, ``LaneFault``).

The model is written from the injector's specification (docs/fabric.md, "Lane fault
injector"), not from its RTL, so the Amaranth simulation of ``LaneFault`` can be checked
against it bit for bit. Lanes are 66-bit 64b/66b blocks (or the W-bit words of a FEC lane), one per cycle, bit 0
first on the wire; a block is a row of a ``(cycles, W)`` boolean array.

Error events: two Marsaglia xorshift32 generators (shifts 13, 17, 5; G. Marsaglia,
"Xorshift RNGs", J. Stat. Softw. 8(14), 2003) ``x`` and ``y`` step once per cycle; an event
fires when the stepped ``x <= threshold`` and starts at bit ``pos = (y >> 16) * 66 >> 16``.
An event inverts ``L = max(1, burst_len)`` consecutive wire bits from ``pos`` on (single
flips without bursts); the bits past 65 hit the next block. Overlapping bursts invert a bit
once. Then the slip window, ``latency`` cable stages, and the dark gate (zeros: sync header
``00``, invalid per IEEE 802.3 clause 49.2.4.3).

:func:`burst_span` splits one burst into the masks of the block it starts in and the next
one; the chiplet link testbench uses it to place bursts on its lanes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LANE_BITS", "MAX_BURST", "injector_seed", "generator_streams", "error_masks",
           "dark_gate", "run_injector", "burst_span", "bits_to_ints", "ints_to_bits",
           "parse_dark_lane"]

LANE_BITS = 66
MAX_BURST = 64
_M32 = np.uint32(0xFFFF_FFFF)


def _xs(x: np.uint32) -> np.uint32:
    x = np.uint32(x)
    x ^= np.uint32(x << np.uint32(13))
    x ^= np.uint32(x >> np.uint32(17))
    x ^= np.uint32(x << np.uint32(5))
    return x


def injector_seed(seed: int, salt: int) -> int:
    """Initial state of generator ``salt`` (1: ``x``, 2: ``y``) for injector ``seed``:
    ``(seed · 0x9E3779B1 + salt · 0x85EBCA6B + 0x1234567) mod 2^32``, then four xorshift32
    steps (a zero state is replaced by 1 before each step and at the end)."""
    v = (int(seed) * 0x9E3779B1 + int(salt) * 0x85EBCA6B + 0x1234567) & 0xFFFF_FFFF
    x = np.uint32(v)
    for _ in range(4):
        x = _xs(x if x else np.uint32(1))
    return int(x) or 1


def generator_streams(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The stepped ``x`` and ``y`` values of cycles ``0 .. n-1`` (uint32 arrays)."""
    xs = np.empty(n, dtype=np.uint32)
    ys = np.empty(n, dtype=np.uint32)
    x, y = np.uint32(injector_seed(seed, 1)), np.uint32(injector_seed(seed, 2))
    with np.errstate(over="ignore"):
        for t in range(n):
            x, y = _xs(x), _xs(y)
            xs[t], ys[t] = x, y
    return xs, ys


def _per_cycle(v, n, name, dtype=np.int64):
    a = np.asarray(v, dtype=dtype)
    if a.ndim == 0:
        a = np.full(n, a, dtype=dtype)
    if a.shape != (n,):
        raise ValueError(f"{name} has shape {a.shape}, expected ({n},)")
    return a


def error_masks(seed: int, n: int, threshold, burst_len=0, bursts: bool = True,
                width: int = LANE_BITS):
    """Error mask of each block, ``(n, width)`` bool: events from ``threshold`` (scalar or
    per cycle), each ``max(1, burst_len)`` bits long (``bursts=False``: one bit, as the
    injector built without burst logic). ``width`` is the lane's bits per cycle (66 for a
    64b/66b block, 10 S for a FEC lane of S symbols); an event starts at
    ``pos = (y >> 16) * width >> 16``."""
    xs, ys = generator_streams(seed, n)
    thr = _per_cycle(threshold, n, "threshold")
    blen = _per_cycle(burst_len, n, "burst_len")
    longest = min(MAX_BURST, width)
    if np.any((blen < 0) | (blen > longest)):
        raise ValueError(f"burst_len must be in 0..{longest}")
    fire = xs.astype(np.int64) <= thr
    pos = ((ys >> np.uint32(16)).astype(np.int64) * width) >> 16
    length = np.maximum(blen, 1) if bursts else np.ones(n, dtype=np.int64)
    span = np.zeros((n + 1, 2 * width), dtype=bool)
    idx = np.arange(2 * width)
    span[:n] = fire[:, None] & (idx[None, :] >= pos[:, None]) & \
        (idx[None, :] < (pos + length)[:, None])
    err = span[:n, :width].copy()
    err[1:] |= span[:n - 1, width:]
    return err


def dark_gate(n: int, dark=0, dark_start=0, dark_cycles=0) -> np.ndarray:
    """Cycles the output is dark, ``(n,)`` bool: ``dark`` high, or within ``N`` cycles
    after a ``dark_start`` strobe with ``dark_cycles = N`` (from the next cycle on)."""
    dk = _per_cycle(dark, n, "dark").astype(bool)
    st = _per_cycle(dark_start, n, "dark_start").astype(bool)
    nc = _per_cycle(dark_cycles, n, "dark_cycles")
    out = np.zeros(n, dtype=bool)
    remain = 0
    for t in range(n):
        out[t] = dk[t] or remain != 0
        remain = int(nc[t]) if st[t] else max(0, remain - 1)
    return out


def run_injector(blocks, seed: int, threshold=0, burst_len=0, bursts: bool = True,
                 latency: int = 0, slip_bits=None, dark=0, dark_start=0, dark_cycles=0):
    """The injector's output blocks ``(n, W)`` bool and its ``o_flips`` counter per cycle.

    ``blocks`` is ``(n, W)`` bool (input of each cycle; W = 66 for 64b/66b blocks, the
    lane width of the injector); ``slip_bits`` per cycle (0: no strobe, ``k``: a strobe
    adding ``k`` bits)."""
    blocks = np.asarray(blocks, dtype=bool)
    n, width = blocks.shape
    err = error_masks(seed, n, threshold, burst_len, bursts, width)
    cur = blocks ^ err
    slips = _per_cycle(0 if slip_bits is None else slip_bits, n, "slip_bits")
    slipped = np.zeros_like(cur)
    prev = np.zeros(width, dtype=bool)
    offset = 0
    for t in range(n):
        window = np.concatenate([prev, cur[t]])
        slipped[t] = window[width - offset:2 * width - offset]
        prev = cur[t]
        if slips[t]:
            offset = (offset + int(slips[t])) % width
    out = np.zeros_like(cur)
    out[latency:] = slipped[:n - latency] if latency else slipped
    out[dark_gate(n, dark, dark_start, dark_cycles)] = False
    per = err.sum(axis=1)
    flips = np.minimum(np.concatenate([[0], np.cumsum(per)[:-1]]), 0xFFFF_FFFF)
    return out, flips


def burst_span(pos: int, length: int) -> tuple[int, int]:
    """Masks (as ints, bit 0 first on the wire) of a ``length``-bit burst starting at bit
    ``pos`` of a 66-bit block: the part in that block and the part in the next."""
    if not 0 <= pos < LANE_BITS:
        raise ValueError(f"pos={pos} is not in 0..{LANE_BITS - 1}")
    if not 1 <= length <= MAX_BURST:
        raise ValueError(f"length={length} is not in 1..{MAX_BURST}")
    m = ((1 << length) - 1) << pos
    return m & ((1 << LANE_BITS) - 1), m >> LANE_BITS


def bits_to_ints(bits) -> list[int]:
    """Rows of a ``(n, w)`` bool array as ints (column 0 = bit 0)."""
    w = np.asarray(bits, dtype=bool)
    weights = [1 << i for i in range(w.shape[1])]
    return [sum(wt for wt, b in zip(weights, row) if b) for row in w.tolist()]


def ints_to_bits(values, width: int = LANE_BITS) -> np.ndarray:
    """Ints as a ``(n, width)`` bool array (column 0 = bit 0)."""
    return np.array([[(int(v) >> i) & 1 for i in range(width)] for v in values], dtype=bool)


def parse_dark_lane(text: str) -> tuple[int, int]:
    """``"START:CYCLES"`` (integers, START ≥ 0, CYCLES ≥ 1) as a pair."""
    parts = str(text).split(":")
    if len(parts) != 2:
        raise ValueError(f"dark lane {text!r} is not START:CYCLES")
    try:
        start, cycles = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"dark lane {text!r} is not START:CYCLES (integers)") from None
    if start < 0 or cycles < 1:
        raise ValueError(f"dark lane {text!r} needs START >= 0 and CYCLES >= 1")
    return start, cycles
