"""Verilog export shared by the CLI, the cocotb runner helper and the FPGA flow.

Output is deterministic: ``emit_src=False`` keeps host paths out of the text, so the same
block and parameters give byte-identical Verilog on every machine.

``to_verilog`` writes no `` `timescale`` unless asked (``timescale="1ns/1ps"``): the cocotb
runner and the lint pass the time scale at build time instead, and ``fusionfabric generate``
asks for one (default ``1ns/1ps``) so that the file drops into a flow where other modules
carry one (Icarus and Verilator both want every module or none to have a time scale).

``port_map`` describes the top module's ports from the component's signature, including
the bit fields of every port whose shape is a data layout (``amaranth.lib.data`` struct,
union and array layouts, which ``fusionfabric.formats`` ``Fields`` become) or an enum.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import enum
import re

from amaranth import ClockSignal, Instance, ResetSignal
from amaranth.back import verilog
from amaranth.hdl import Shape, ShapeCastable, Value
from amaranth.lib import data, wiring

__all__ = ["to_verilog", "port_map", "shape_fields", "check_timescale", "timescale_line",
           "config_hash", "instance_ports", "ModuleInstance", "TIMESCALE_DEFAULT"]

#: The time scale ``fusionfabric generate`` writes unless told otherwise (that of the cocotb
#: runner, ``tb/common/runner.py``).
TIMESCALE_DEFAULT = "1ns/1ps"

_TIME_UNITS = ("s", "ms", "us", "ns", "ps", "fs")
_TIME_RE = re.compile(r"\s*(1|10|100)\s*(s|ms|us|ns|ps|fs)\s*")


def _time_exponent(text: str, what: str, whole: str) -> tuple[str, int]:
    m = _TIME_RE.fullmatch(text)
    if not m:
        raise ValueError(f"timescale {whole!r}: {what} {text.strip()!r} is not 1, 10 or 100 "
                         f"followed by one of {', '.join(_TIME_UNITS)}")
    digits, unit = m.groups()
    return f"{digits}{unit}", (len(digits) - 1) - 3 * _TIME_UNITS.index(unit)


def check_timescale(text: str) -> str:
    """``"UNIT/PRECISION"`` checked and normalized (``"1 ns / 1 ps"`` -> ``"1ns/1ps"``).

    Each part is 1, 10 or 100 followed by s, ms, us, ns, ps or fs (IEEE 1364-2005 19.8), and
    the precision is at least as fine as the unit. Raises ``ValueError`` naming the value.
    """
    whole = str(text)
    unit, sep, prec = whole.partition("/")
    if not sep:
        raise ValueError(f"timescale {whole!r} is not UNIT/PRECISION (e.g. 1ns/1ps)")
    u, ue = _time_exponent(unit, "unit", whole)
    p, pe = _time_exponent(prec, "precision", whole)
    if pe > ue:
        raise ValueError(f"timescale {whole!r}: precision {p} is coarser than the unit {u}")
    return f"{u}/{p}"


def to_verilog(component: wiring.Component, name: str = "top", *,
               timescale: str | None = None) -> str:
    """Verilog-2005 text of ``component`` with top module ``name``.

    With ``timescale`` (``"1ns/1ps"``, checked by :func:`check_timescale`) the text starts
    with that `` `timescale`` directive; without, it has none.
    """
    return timescale_line(timescale) + verilog.convert(component, name=name, emit_src=False)


def timescale_line(timescale: str | None) -> str:
    """The `` `timescale`` line a Verilog text starts with (checked by
    :func:`check_timescale`), or ``""`` for None."""
    return f"`timescale {check_timescale(timescale)}\n" if timescale is not None else ""


def instance_ports(component: wiring.Component, value_of) -> dict:
    """``Instance`` keyword ports for the module that :func:`to_verilog` writes of
    ``component``: ``i_``/``o_`` plus the Verilog port name (the signature path joined by
    ``__``), each bound to ``value_of(path, member)``."""
    ports = {}
    for path, member, _ in component.signature.flatten(component):
        kind = "i_" if member.flow == wiring.In else "o_"
        ports[kind + "__".join(str(p) for p in path)] = Value.cast(value_of(path, member))
    return ports


class ModuleInstance(wiring.Component):
    """A stand-in for ``component`` that elaborates to an ``Instance`` of the module
    ``name``: the module that ``to_verilog(component, name)`` writes, whose text the user
    of the stand-in supplies. Same signature as ``component``, so it takes the
    component's place in a design; ``component`` itself is never elaborated here.
    ``clk``/``rst`` are those of the ``sync`` domain."""

    def __init__(self, component: wiring.Component, name: str):
        component._MustUse__silence = True
        self.module = name
        super().__init__(dict(component.signature.members))

    def elaborate(self, platform):
        # the Instance itself, not a Module holding it: no wrapper module in the Verilog
        mine = {path: value for path, _, value in self.signature.flatten(self)}
        return Instance(self.module, i_clk=ClockSignal(), i_rst=ResetSignal(),
                        **instance_ports(self, lambda path, _: mine[path]))


def _flow(member) -> str:
    return "input" if member.flow == wiring.In else "output"


def _enum_values(shape) -> dict[str, int] | None:
    if isinstance(shape, enum.EnumMeta):
        return {m.name: int(m.value) for m in shape}
    return None


def _leaf(shape, path: list, offset: int) -> dict[str, Any]:
    cast = Shape.cast(shape)
    entry: dict[str, Any] = {
        "name": "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip("."),
        "path": list(path),
        "offset": offset,
        "width": cast.width,
    }
    if cast.signed:
        entry["signed"] = True
    values = _enum_values(shape)
    if values is not None:
        entry["enum"] = values
    return entry


def shape_fields(shape, path: tuple = (), offset: int = 0) -> list[dict[str, Any]]:
    """The leaf fields of a data layout, walked from the layout itself.

    ``shape`` is a ``data.Layout`` (struct, union, array or flexible: every field's offset
    and shape come from iterating it) or any shape-castable. Returns one dict per leaf,
    least significant first for structs: ``name`` (``"entry.members"``, ``"[2].data"``),
    ``path`` (the keys: names and array indices), ``offset`` (bit position in the whole
    value), ``width``, ``signed`` (only when true) and ``enum`` (``{member: value}``, only
    for an ``enum.Enum`` shape, including ``amaranth.lib.enum``). A shape that is not a
    layout is one leaf with an empty path.
    """
    if isinstance(shape, data.Layout):
        out: list[dict[str, Any]] = []
        for key, field in shape:
            out += shape_fields(field.shape, (*path, key), offset + field.offset)
        return out
    return [_leaf(shape, list(path), offset)]


def _layout_kind(shape) -> str | None:
    for kind, cls in (("struct", data.StructLayout), ("union", data.UnionLayout),
                      ("array", data.ArrayLayout), ("flexible", data.FlexibleLayout)):
        if isinstance(shape, cls):
            return kind
    return None


def port_map(component: wiring.Component, name: str = "top") -> dict[str, Any]:
    """JSON-ready description of the top module's ports, from the component's signature.

    Each port lists its Verilog name (the signature path joined by ``__``, as Amaranth
    names it), direction, width and signature path. ``clk``/``rst`` of the ``sync``
    domain are listed first. A port whose declared shape is a data layout (a stream
    payload, a status word, a configuration entry) also lists ``layout`` (``"struct"``,
    ``"union"``, ``"array"`` or ``"flexible"``) and ``fields`` (:func:`shape_fields`); a
    port whose shape is an enum lists ``enum``.
    """
    ports = [
        {"name": "clk", "direction": "input", "width": 1, "path": ["clk"]},
        {"name": "rst", "direction": "input", "width": 1, "path": ["rst"]},
    ]
    for path, member, value in component.signature.flatten(component):
        port: dict[str, Any] = {
            "name": "__".join(str(p) for p in path),
            "direction": _flow(member),
            "width": Value.cast(value).shape().width,
            "path": [p if isinstance(p, int) else str(p) for p in path],
        }
        shape = member.shape
        kind = _layout_kind(shape)
        if kind is not None:
            port["layout"] = kind
            port["fields"] = shape_fields(shape)
        elif isinstance(shape, ShapeCastable) or isinstance(shape, enum.EnumMeta):
            values = _enum_values(shape)
            if values is not None:
                port["enum"] = values
        ports.append(port)
    return {"top": name, "ports": ports}


def config_hash(block: str, params: dict[str, Any], text: str = "") -> str:
    """A short stable hash of a block, its parameters and (optionally) its Verilog text."""
    h = hashlib.sha256()
    h.update(block.encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(text.encode())
    return h.hexdigest()[:12]
