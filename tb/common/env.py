"""What the runner hands a testbench: block parameters, test arguments, seed, simulator."""

from __future__ import annotations

import json
import os

import numpy as np

__all__ = ["tb_params", "tb_args", "seed", "make_rng", "sim_name", "random_words"]


def tb_params() -> dict:
    """The block parameters the Verilog was built with (JSON from the runner)."""
    return json.loads(os.environ.get("FF_PARAMS", "{}"))


def tb_args() -> dict:
    """Extra test arguments (traffic sizes, error rates, ...) from the runner."""
    return json.loads(os.environ.get("FF_ARGS", "{}"))


def sim_name() -> str:
    return os.environ.get("FF_SIM", "unknown")


def seed() -> int:
    """cocotb's random seed for this run (``cocotb.RANDOM_SEED``)."""
    import cocotb

    return int(cocotb.RANDOM_SEED)


def make_rng(stream: int = 0) -> np.random.Generator:
    """An independent generator per ``stream``, all derived from the run's seed."""
    return np.random.default_rng([seed(), stream])


def random_words(rng: np.random.Generator, width: int, n: int) -> list[int]:
    """``n`` uniform random unsigned integers of ``width`` bits (any width) from ``rng``."""
    if width <= 0:
        raise ValueError(f"width={width} must be positive")
    chunks = (width + 63) // 64
    raw = rng.integers(0, 1 << 63, size=(n, chunks), dtype=np.int64).astype(object)
    raw2 = rng.integers(0, 2, size=(n, chunks), dtype=np.int64).astype(object)
    mask = (1 << width) - 1
    out = []
    for row, top in zip(raw, raw2):
        w = 0
        for c, t in zip(row, top):
            w = (w << 64) | (int(t) << 63) | int(c)
        out.append(w & mask)
    return out
