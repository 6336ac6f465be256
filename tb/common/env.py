"""What the runner hands a testbench: block parameters, test arguments, seed, simulator."""

from __future__ import annotations

import json
import os

import numpy as np

__all__ = ["tb_params", "tb_args", "seed", "make_rng", "sim_name"]


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
