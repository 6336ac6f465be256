"""The import layers of docs/architecture.md, checked on the source (AST, no imports run):

- ``fusionfabric.formats`` is a leaf: nothing of ours (``rtl``, ``sim``, ``tb``, the CLI);
- the RTL (``rtl/``) never imports a golden model or a testbench, nor cocotb;
- the golden models (``sim/``) are pure numpy: no amaranth, cocotb, RTL or testbench.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("fusionfabric.rtl", "fusionfabric.sim", "fusionfabric.tb", "fusionfabric.cli",
        "fusionfabric.commands")
RULES = {
    "fusionfabric/formats": OURS + ("cocotb",),
    "rtl": ("fusionfabric.sim", "fusionfabric.tb", "fusionfabric.cli",
            "fusionfabric.commands", "cocotb"),
    "sim": ("fusionfabric.rtl", "fusionfabric.tb", "fusionfabric.cli",
            "fusionfabric.commands", "amaranth", "cocotb"),
}


def banned_imports(source: str, banned: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of a module in ``banned`` (or below it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if any(name == b or name.startswith(b + ".") for b in banned):
                found.append((node.lineno, name))
                break
    return found


@pytest.mark.parametrize("folder", sorted(RULES))
def test_layer(folder):
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}"
           for path in sorted((ROOT / folder).rglob("*.py"))
           for line, name in banned_imports(path.read_text(), RULES[folder])]
    assert not bad, "imports across layers:\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "from fusionfabric.sim.fec import GENERATOR\n",
    "import fusionfabric.sim.pcs as pcs\n",
    "def f():\n    from fusionfabric import sim\n",
    "from fusionfabric.tb.common import runner\n",
])
def test_the_check_sees_a_crossing(source):
    assert banned_imports(source, RULES["rtl"]), source


def test_the_check_lets_formats_through():
    assert not banned_imports("from fusionfabric.formats.fec import N\n"
                              "from fusionfabric.rtl.hdl import eq\n", RULES["rtl"])
