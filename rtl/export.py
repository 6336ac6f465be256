"""Verilog export shared by the CLI, the cocotb runner helper and the FPGA flow.

Output is deterministic: ``emit_src=False`` keeps host paths out of the text, so the same
block and parameters give byte-identical Verilog on every machine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from amaranth.back import verilog
from amaranth.hdl import Value
from amaranth.lib import wiring

__all__ = ["to_verilog", "port_map", "config_hash"]


def to_verilog(component: wiring.Component, name: str = "top") -> str:
    """Verilog-2005 text of ``component`` with top module ``name``."""
    return verilog.convert(component, name=name, emit_src=False)


def _flow(member) -> str:
    return "input" if member.flow == wiring.In else "output"


def port_map(component: wiring.Component, name: str = "top") -> dict[str, Any]:
    """JSON-ready description of the top module's ports, from the component's signature.

    Each port lists its Verilog name (the signature path joined by ``__``, as Amaranth
    names it), direction, width and signature path. ``clk``/``rst`` of the ``sync``
    domain are listed first.
    """
    ports = [
        {"name": "clk", "direction": "input", "width": 1, "path": ["clk"]},
        {"name": "rst", "direction": "input", "width": 1, "path": ["rst"]},
    ]
    for path, member, value in component.signature.flatten(component):
        ports.append({
            "name": "__".join(str(p) for p in path),
            "direction": _flow(member),
            "width": Value.cast(value).shape().width,
            "path": [p if isinstance(p, int) else str(p) for p in path],
        })
    return {"top": name, "ports": ports}


def config_hash(block: str, params: dict[str, Any], text: str = "") -> str:
    """A short stable hash of a block, its parameters and (optionally) its Verilog text."""
    h = hashlib.sha256()
    h.update(block.encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(text.encode())
    return h.hexdigest()[:12]
