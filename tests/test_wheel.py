"""The wheel, as a user gets it: a non-editable build installed into a fresh venv, run
from outside the checkout.

Checks what the install promises (fusionfabric/extras.py): the base install has
``generate``, ``vectors``, ``sweep`` and ``collective``; ``synth`` needs ``[fpga]`` and
``link`` needs ``[dev]``, each refused with one line and exit status 2; the only top-level
package in site-packages is ``fusionfabric`` (no ``rtl``, ``sim`` or ``tb`` that would
shadow a user's own). One build and one venv serve every check (about 2 min, mostly
installing numpy, numba, amaranth and matplotlib from the package index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", "*.egg-info",
                              ".pytest_cache", "*.fst", "*.vcd")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin dir, work dir outside the checkout, site-packages) of a fresh install."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)     # a clean copy: the build never writes here
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
                    str(src)], check=True, capture_output=True, text=True)
    wheels = list(dist.glob("fusionfabric-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheels[0])],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], check=True, capture_output=True,
                               text=True).stdout.strip())
    work = tmp / "user"
    work.mkdir()
    return env_dir / "bin", work, site


def _cli(installed, *argv):
    bindir, work, _ = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FF_BUILD")}
    return subprocess.run([str(bindir / "fusionfabric"), *argv], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)


def test_one_top_level_package(installed):
    _, _, site = installed
    for name in ("rtl", "sim", "tb", "tests", "bench"):
        assert not (site / name).exists(), f"site-packages/{name} installed"
    assert (site / "fusionfabric" / "rtl" / "blocks.py").is_file()
    assert (site / "fusionfabric" / "sim" / "pcs.py").is_file()
    top = next(site.glob("fusionfabric-*.dist-info")) / "top_level.txt"
    assert top.read_text().split() == ["fusionfabric"]


def test_base_commands_work_outside_the_checkout(installed):
    _, work, _ = installed
    r = _cli(installed, "generate", "crc", "-o", "out/crc.v")
    assert r.returncode == 0, r.stderr
    text = (work / "out" / "crc.v").read_text()
    assert "module crc" in text and str(ROOT) not in text
    assert json.loads((work / "out" / "crc.ports.json").read_text())["ports"]

    r = _cli(installed, "vectors", "flit", "--count", "2", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["vectors"]) == 2

    r = _cli(installed, "sweep", "--ports", "4", "--loads", "0.5", "--cycles", "300",
             "--seed", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["points"][0]["load"] == 0.5

    r = _cli(installed, "collective", "allreduce", "--ports", "4", "--bytes", "4K")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("argv, extra", [(["synth", "crc"], "fpga"),
                                         (["link"], "dev"),
                                         (["demo", "--endpoints", "2"], "dev")])
def test_missing_extra_is_one_line_exit_2(installed, argv, extra):
    r = _cli(installed, *argv)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"[{extra}]" in lines[0] and "Traceback" not in r.stderr
