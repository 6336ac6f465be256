"""Registry of golden-model test-vector generators for ``fusionfabric vectors``.

A ``sim`` module that can emit vectors declares a module-level ``VECTORS`` dict mapping a
block name to ``fn(params: dict[str, str], seed: int, count: int) -> dict``. The returned
dict holds ``params`` (typed, complete) and ``vectors`` (a JSON-serializable list); the
command adds ``block`` and ``seed``. A generator raises ``ValueError`` naming a bad value.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["all_vectors"]


def all_vectors() -> dict:
    from fusionfabric import sim

    found = {}
    for info in pkgutil.walk_packages(sim.__path__, prefix="fusionfabric.sim."):
        if info.name == "fusionfabric.sim.vectors":
            continue
        module = importlib.import_module(info.name)
        for name, fn in getattr(module, "VECTORS", {}).items():
            if name in found:
                raise RuntimeError(f"vectors {name!r} declared twice ({info.name})")
            found[name] = fn
    return dict(sorted(found.items()))
