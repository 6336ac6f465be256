"""Shared command-line plumbing of ``fusionfabric sweep`` and ``collective`` (configuration
flags, sizes, messages)."""

from __future__ import annotations

import re
import sys

from fusionfabric.sim.fabric.config import ConfigError, load_config

__all__ = ["add_config_arguments", "build_config", "parse_bytes", "say"]


def add_config_arguments(p):
    p.add_argument("--config", metavar="FILE",
                   help="TOML file with [switch] [link] [traffic] [run] [phys] tables")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set switch.depth=32 (repeatable; "
                        "wins over --config and the flags)")
    p.add_argument("--ports", type=str, default=None, help="switch.n_ports")
    p.add_argument("--seed", type=str, default=None, help="run.seed (printed by every run)")


def build_config(args, flag_keys: dict[str, str]):
    """File, then the flags that were given (``flag_keys``: attribute -> config key), then
    ``--set``; every bad key or value raises :class:`~fusionfabric.cli.CliError`."""
    from fusionfabric.cli import CliError

    sets = []
    for attr, key in {"ports": "switch.n_ports", "seed": "run.seed", **flag_keys}.items():
        v = getattr(args, attr, None)
        if v is not None:
            sets.append(f"{key}={v}")
    try:
        return load_config(args.config, sets + list(args.set))
    except ConfigError as exc:
        raise CliError(str(exc)) from None


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_bytes(text: str) -> list[int]:
    """``"1M"``, ``"4096,1G"`` or ``"1K:1G"`` (powers of 2 from START to STOP)."""
    from fusionfabric.cli import CliError

    def one(tok):
        m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", tok)
        if not m or m.group(2).upper() not in _UNITS:
            raise CliError(f"--bytes {tok!r} is not a size like 4096, 64K, 1M or 1G")
        v = int(m.group(1)) * _UNITS[m.group(2).upper()]
        if v < 1:
            raise CliError(f"--bytes {tok!r} must be positive")
        return v

    text = str(text)
    if ":" in text:
        a, _, b = text.partition(":")
        lo, hi = one(a), one(b)
        if hi < lo:
            raise CliError(f"--bytes {text!r}: STOP is below START")
        out = [lo]
        while out[-1] * 2 <= hi:
            out.append(out[-1] * 2)
        return out
    return [one(t) for t in text.split(",") if t.strip()]


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
