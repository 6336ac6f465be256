"""The board slice and the board build (docs/board.md).

cocotb (tb/board/test_slice.py, soak: about 8,000 cycles of the 2-endpoint fabric, which
Icarus runs at 40 to 100 cycles/s): the slice read only through its LEDs and UART line,
against the numpy BIST model, clean and with a planted data fault. The board flow: the board list, bad input (exit 2 with one line), the
files Amaranth writes for a board (design, LPF pins of the LEDs and UART, clock). The
full build to a bitstream is soak (about an hour).
"""

from __future__ import annotations

import json
import re

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
