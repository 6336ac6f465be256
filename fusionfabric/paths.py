"""Where generated files go.

Every build product (Verilog, simulator builds, synthesis runs, bench results) lives under
one build root: ``$FF_BUILD`` when set, else ``build/`` in the current directory. Nothing is
derived from where the package is installed, so an installed wheel and a checkout behave
the same.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "build_root"]

#: The environment variable that names the build root.
ENV = "FF_BUILD"


def build_root() -> Path:
    """The build root: ``$FF_BUILD``, or ``./build`` of the current directory (absolute)."""
    value = os.environ.get(ENV, "").strip()
    return (Path(value) if value else Path.cwd() / "build").absolute()
