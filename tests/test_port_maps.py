"""Port maps (``.ports.json``): the bit fields of every layout-shaped port, and the docs'
tables made from them.

The JSON is checked against the layouts themselves, through Amaranth's own packing and
unpacking, not by walking the layout a second time: a seeded random raw value is viewed
through the layout (``data.Const``) and every field the JSON lists must read back as the
JSON's bit slice of that value; the other way, seeded random field values are packed with
the layout's ``const()`` and every JSON slice of the packed word must give the field value.
Struct and array fields must tile the port (no gap, no overlap, the port's full width), so
a field left out of the JSON fails too.
"""

import enum as pyenum
import json
import random

import pytest
from amaranth.hdl import Shape
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.cli import main
from fusionfabric.portdoc import DOCS, MARK, disown, port_entry, render_table
from fusionfabric.rtl.blocks import all_blocks
from fusionfabric.rtl.export import port_map

#: Blocks whose ports cover struct, nested struct, array-of-struct and per-element layouts.
BLOCKS = ("switch", "chiplet", "pcs-tx", "rs-decoder", "fec-pcs-tx", "fabric-bist")


def _layout_ports(component):
    """``(verilog name, declared layout)`` of every flattened port whose shape is a layout."""
    for path, member, _ in component.signature.flatten(component):
        if isinstance(member.shape, data.Layout):
            yield "__".join(str(p) for p in path), member.shape


def _read(view, path):
    """The field at ``path`` of a ``data.Const``, through the layout's own accessors."""
    for key in path:
        view = view[key] if isinstance(key, int) else getattr(view, key)
    assert not isinstance(view, data.Const), f"{path} is not a leaf"
    return view.value if isinstance(view, pyenum.Enum) else int(view)


def _nest(fields, values):
    """Nested dict/list initializer for ``layout.const`` from leaf paths and values."""
    root: dict = {}
    for f, v in zip(fields, values):
        node = root
        for key in f["path"][:-1]:
            node = node.setdefault(key, {})
        node[f["path"][-1]] = v
    return _listify(root)


def _listify(node):
    if not isinstance(node, dict):
        return node
    if node and all(isinstance(k, int) for k in node):
        return [_listify(node[i]) for i in range(len(node))]
    return {k: _listify(v) for k, v in node.items()}


def _signed_slice(word, f):
    v = (word >> f["offset"]) & ((1 << f["width"]) - 1)
    if f.get("signed") and v >> (f["width"] - 1):
        v -= 1 << f["width"]
    return v


def check_port(layout, entry, rng, draws=8):
    width = Shape.cast(layout).width
    assert entry["width"] == width
    fields = entry["fields"]
    assert fields, entry["name"]
    if isinstance(layout, (data.StructLayout, data.ArrayLayout)):
        covered = sorted((f["offset"], f["width"]) for f in fields)
        pos = 0
        for off, w in covered:
            assert off == pos, f"{entry['name']}: gap or overlap at bit {pos} (field at {off})"
            pos += w
        assert pos == width, f"{entry['name']}: fields cover {pos} of {width} bits"
    for _ in range(draws):
        # layout -> JSON: view a random raw value, read every field back
        raw = rng.getrandbits(width)
        for f in fields:        # an enum field must hold one of its members to be read
            if "enum" in f:
                mask = ((1 << f["width"]) - 1) << f["offset"]
                raw = raw & ~mask | rng.choice(list(f["enum"].values())) << f["offset"]
        view = data.Const(layout, raw)
        for f in fields:
            assert _read(view, f["path"]) == _signed_slice(raw, f), (entry["name"], f["name"])
        # JSON -> layout: pack random field values with the layout's const() (a union
        # takes one member's initializer only: its fields overlap by design)
        if isinstance(layout, data.UnionLayout):
            continue
        values = []
        for f in fields:
            v = rng.getrandbits(f["width"])
            if "enum" in f:
                v = rng.choice(list(f["enum"].values()))
            elif f.get("signed") and v >> (f["width"] - 1):
                v -= 1 << f["width"]
            values.append(v)
        init = _nest(fields, values)
        word = layout.const(init).as_bits()
        for f, v in zip(fields, values):
            assert _signed_slice(word, f) == v, (entry["name"], f["name"])


@pytest.mark.parametrize("name", BLOCKS)
def test_port_map_fields_match_layouts(name):
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    block = all_blocks()[name]
    component = block.build(**block.ci_params)
    disown(component)  # only the signature is read (no Verilog)
    pm = {p["name"]: p for p in port_map(component, "top")["ports"]}
    layouts = list(_layout_ports(component))
    assert layouts, f"{name} has no layout-shaped port"
    for vname, layout in layouts:
        entry = pm[vname]
        assert "fields" in entry, f"{name}: {vname} has a layout but no fields (seed {seed})"
        try:
            check_port(layout, entry, rng)
        except AssertionError as exc:
            raise AssertionError(f"{name} {vname}, seed {seed}: {exc}") from None
    # ports without a layout list no fields
    for vname, entry in pm.items():
        if vname not in dict(layouts):
            assert "fields" not in entry, vname


class _Code(enum.Enum, shape=3):
    IDLE = 0
    RUN = 5


class _PyKind(pyenum.IntEnum):
    A = 0
    B = 2


class _Shapes(wiring.Component):
    """Test-only: enum, signed, union, array-of-struct and nested layouts on ports."""

    def __init__(self):
        inner = data.StructLayout({"code": _Code, "kind": _PyKind, "delta": data.signed(5)})
        super().__init__({
            "i_word": In(data.StructLayout({"tag": 3, "items": data.ArrayLayout(inner, 3),
                                            "flag": 1})),
            "o_either": Out(data.UnionLayout({"a": 6, "b": data.StructLayout({"x": 2,
                                                                                "y": 4})})),
            "o_code": Out(_Code),
            "o_plain": Out(7),
        })

    def elaborate(self, platform):
        from amaranth import Module
        m = Module()
        m.d.comb += [self.o_either.as_value().eq(self.i_word.as_value()[:6]),
                     self.o_plain.eq(self.i_word.as_value()[6:13])]
        return m


def test_enum_signed_union_and_nested_fields():
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    c = _Shapes()
    disown(c)
    pm = {p["name"]: p for p in port_map(c, "shapes")["ports"]}
    for vname, layout in _layout_ports(c):
        check_port(layout, pm[vname], rng)
    word = {f["name"]: f for f in pm["i_word"]["fields"]}
    assert word["items[1].code"]["enum"] == {"IDLE": 0, "RUN": 5}
    assert word["items[2].kind"]["enum"] == {"A": 0, "B": 2}
    assert word["items[0].delta"].get("signed") is True
    assert word["items[0].delta"]["path"] == ["items", 0, "delta"]
    assert pm["i_word"]["layout"] == "struct" and pm["o_either"]["layout"] == "union"
    assert pm["o_code"]["enum"] == {"IDLE": 0, "RUN": 5} and "fields" not in pm["o_code"]
    assert "fields" not in pm["o_plain"] and "enum" not in pm["o_plain"]
    either = {f["name"]: f["offset"] for f in pm["o_either"]["fields"]}
    assert either == {"a": 0, "b.x": 0, "b.y": 2}


def test_cli_writes_the_fields(tmp_path, capsys):
    """The file ``generate`` writes holds the same entries as ``port_map``."""
    out = tmp_path / "sw.v"
    assert main(["generate", "switch", "--set", "n_ports=3", "-o", str(out)]) == 0
    capsys.readouterr()
    written = json.loads(out.with_suffix(".ports.json").read_text())
    block = all_blocks()["switch"]
    component = block.build(n_ports=3)
    disown(component)
    direct = port_map(component, "switch")
    assert written["ports"] == json.loads(json.dumps(direct["ports"]))
    assert written["timescale"] == "1ns/1ps"
    flit = {f["name"]: f for f in written["ports"][2]["fields"]}
    assert written["ports"][2]["name"] == "i_port__0__payload"
    assert flit["first"]["offset"] == 64 and flit["chunk"]["width"] == 16


@pytest.mark.parametrize("doc", DOCS)
def test_doc_tables_match_the_port_map(doc):
    """Every marked table in the doc is the table of the port map entry it names."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / doc).read_text()
    marks = list(MARK.finditer(text))
    assert marks, f"{doc} has no port-table"
    for m in marks:
        entry = port_entry(m.group("block"), m.group("port"), m.group("sets").split())
        assert m.group("body") == render_table(entry), (
            f"{doc}: table of {m.group('block')} {m.group('port')} is stale; run "
            f"python -m fusionfabric.portdoc --write")
        # and the table's rows are the JSON's fields, independently of render_table
        rows = [r for r in m.group("body").splitlines()[2:]]
        names = [r.split("|")[2].strip().strip("`") for r in rows]
        assert names == [f["name"] for f in sorted(entry["fields"],
                                                    key=lambda f: (f["offset"], f["name"]))]
        for r, f in zip(rows, sorted(entry["fields"], key=lambda f: (f["offset"], f["name"]))):
            bits = r.split("|")[1].strip()
            lo, _, hi = bits.partition("–")
            assert int(lo) == f["offset"] and int(hi or lo) == f["offset"] + f["width"] - 1
