"""Port-map tables in the Markdown docs, generated from the port map JSON.

A doc marks each table with a pair of HTML comments; everything between them is generated::

    <!-- port-table switch i_port__0__payload -->
    | bits | field | width |
    ...
    <!-- /port-table -->

The opening comment names the block, the Verilog port and optionally parameters
(``KEY=VALUE``, as for ``fusionfabric generate --set``; the defaults otherwise). The table
is made from :func:`fusionfabric.rtl.export.port_map` of that block, i.e. the same JSON
that ``fusionfabric generate`` writes beside the Verilog: one row per field, least
significant first, with its bit range, name, width and, when a field is an enum, its
values. No Verilog is generated (only the component is built).

    python -m fusionfabric.portdoc docs/switch.md docs/protocol.md           # check (exit 1 if stale)
    python -m fusionfabric.portdoc --write docs/switch.md docs/protocol.md   # rewrite the tables
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["MARK", "render_table", "port_entry", "update", "disown", "DOCS", "main"]

#: The opening marker: block, port and optional KEY=VALUE parameters.
MARK = re.compile(r"<!-- port-table (?P<block>[\w-]+) (?P<port>\w+)(?P<sets>(?: [\w]+=\S+)*) -->\n"
                  r"(?P<body>.*?)"
                  r"<!-- /port-table -->", re.S)

#: The docs that hold port-map tables (relative to the repository root).
DOCS = ("docs/switch.md", "docs/protocol.md")


def disown(component) -> None:
    """Mark ``component`` and the subcomponents its constructor built as used: only the
    signature is read, so none is elaborated, and Amaranth would otherwise warn
    ``UnusedElaboratable`` for each when it is freed."""
    from amaranth._unused import MustUse

    seen: set[int] = set()

    def mark(obj, depth: int) -> None:
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if isinstance(obj, MustUse):
            obj._MustUse__used = True
            for value in vars(obj).values():
                mark(value, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                mark(value, depth + 1)
        elif isinstance(obj, dict):
            for value in obj.values():
                mark(value, depth + 1)

    mark(component, 0)


def port_entry(block: str, port: str, sets: list[str] | None = None) -> dict[str, Any]:
    """The port map entry of ``port`` of ``block`` built with ``sets`` (``KEY=VALUE``)."""
    from fusionfabric.rtl.blocks import get_block, parse_sets
    from fusionfabric.rtl.export import port_map

    b = get_block(block)
    params = b.resolve(parse_sets(b, sets or []))
    component = b.build(**params)
    pm = port_map(component, b.name.replace("-", "_"))
    disown(component)
    for p in pm["ports"]:
        if p["name"] == port:
            return p
    raise ValueError(f"block {block} has no port {port!r}")


def _bits(offset: int, width: int) -> str:
    return str(offset) if width == 1 else f"{offset}–{offset + width - 1}"


def render_table(entry: dict[str, Any]) -> str:
    """The Markdown table of a port map entry's fields (a port without fields: one row)."""
    fields = entry.get("fields") or [{"name": entry["name"], "offset": 0,
                                      "width": entry["width"],
                                      **({"enum": entry["enum"]} if "enum" in entry else {})}]
    with_enum = any("enum" in f for f in fields)
    head = "| bits | field | width |" + (" values |" if with_enum else "")
    rule = "|---|---|---|" + ("---|" if with_enum else "")
    rows = [head, rule]
    for f in sorted(fields, key=lambda f: (f["offset"], f["name"])):
        row = f"| {_bits(f['offset'], f['width'])} | `{f['name']}` | {f['width']}"
        row += " (signed) |" if f.get("signed") else " |"
        if with_enum:
            row += " " + ", ".join(f"{k} = {v}" for k, v in f.get("enum", {}).items()) + " |"
        rows.append(row)
    return "\n".join(rows) + "\n"


def update(text: str) -> str:
    """``text`` with every marked table regenerated."""
    def repl(m: re.Match) -> str:
        sets = m.group("sets").split()
        entry = port_entry(m.group("block"), m.group("port"), sets)
        opening = m.group(0)[:m.start("body") - m.start(0)]
        return opening + render_table(entry) + "<!-- /port-table -->"
    return MARK.sub(repl, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fusionfabric.portdoc",
                                 description="check or rewrite the port-map tables of docs")
    ap.add_argument("docs", nargs="*", help=f"Markdown files (default: {' '.join(DOCS)})")
    ap.add_argument("--write", action="store_true", help="rewrite stale tables in place")
    args = ap.parse_args(argv)
    stale = []
    for doc in args.docs or DOCS:
        path = Path(doc)
        text = path.read_text()
        new = update(text)
        if new != text:
            stale.append(doc)
            if args.write:
                path.write_text(new)
    if stale and not args.write:
        print(f"stale port-map tables in: {', '.join(stale)} "
              f"(python -m fusionfabric.portdoc --write)", file=sys.stderr)
        return 1
    for doc in stale:
        print(f"rewrote {doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
