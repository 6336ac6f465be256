"""The ``fusionfabric`` command line: generate/--list/vectors and their error paths.

Every user error ends with exit status 2 and exactly one line on stderr naming the bad value,
never a traceback. Generation is deterministic (byte-identical Verilog and port map from two
processes with different hash seeds) and the JSON port map agrees with the ports the Verilog
declares. Blocks are discovered at collection time, so blocks added later are covered too.
A test-only block (the kit's incrementer) is added to the registry in-process so that the
error paths are exercised even before any rtl block exists.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fusionfabric.rtl import blocks as rtl_blocks
from fusionfabric.rtl.blocks import Block, Param, all_blocks
from fusionfabric.cli import main

ROOT = Path(__file__).resolve().parents[1]
BLOCK_NAMES = list(all_blocks())


@pytest.fixture
def kit_block(monkeypatch):
    """The registry plus a test block ``kit-increment`` (int width, str fault with choices)."""
    from tests.kit_dut import KitIncrement

    block = Block("kit-increment", KitIncrement, doc="test-only incrementer",
                  params=[Param("width", int, 16, "word width"),
                          Param("fault", str, "none", "planted bug",
                                choices=("none", "corrupt", "stall"))])
    monkeypatch.setattr(rtl_blocks, "_CACHE", {**all_blocks(), block.name: block})
    return block


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str, *needles: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith("fusionfabric: error:"), lines[0]
    for n in needles:
        assert n in lines[0], f"{n!r} not named in: {lines[0]}"
    return lines[0]


# ---- generate --list -------------------------------------------------------------------

def test_list_shows_every_block_and_parameter(capsys, kit_block):
    code, out, _ = _run(capsys, "generate", "--list")
    assert code == 0
    for block in all_blocks().values():
        assert re.search(rf"^{re.escape(block.name)}: ", out, re.M), block.name
        for p in block.params:
            assert re.search(rf"^    {re.escape(p.name)} \({p.type.__name__}, default "
                             rf"{re.escape(repr(p.default))}\)", out, re.M), \
                f"{block.name}.{p.name} missing from --list"


# ---- error paths: exit 2, one line, names the value -------------------------------------

def test_unknown_block(capsys, kit_block):
    code, _, err = _run(capsys, "generate", "no-such-block")
    assert code == 2
    _one_line_error(err, "no-such-block")


def test_no_block_and_no_list(capsys):
    code, _, err = _run(capsys, "generate")
    assert code == 2
    _one_line_error(err, "--list")


def test_unknown_parameter(capsys, kit_block):
    code, _, err = _run(capsys, "generate", "kit-increment", "--set", "widht=8")
    assert code == 2
    _one_line_error(err, "widht", "width")  # names the bad key and lists the valid ones


def test_set_without_equals(capsys, kit_block):
    code, _, err = _run(capsys, "generate", "kit-increment", "--set", "width")
    assert code == 2
    _one_line_error(err, "width")


@pytest.mark.parametrize("text", ["abc", "8.5", ""], ids=["word", "float", "empty"])
def test_bad_int_value(capsys, kit_block, text):
    code, _, err = _run(capsys, "generate", "kit-increment", "--set", f"width={text}")
    assert code == 2
    _one_line_error(err, "width", repr(text), "int")


def test_bad_choice(capsys, kit_block):
    code, _, err = _run(capsys, "generate", "kit-increment", "--set", "fault=sometimes")
    assert code == 2
    _one_line_error(err, "sometimes", "none, corrupt, stall")


@pytest.mark.parametrize("top", ["1top", "a-b", "x y", "top;"])
def test_bad_name(capsys, kit_block, top):
    code, _, err = _run(capsys, "generate", "kit-increment", "--name", top)
    assert code == 2
    _one_line_error(err, repr(top))


def test_unknown_subcommand(capsys):
    code, _, err = _run(capsys, "frobnicate")
    assert code == 2
    _one_line_error(err, "frobnicate")


def test_unknown_option(capsys, kit_block):
    code, _, err = _run(capsys, "generate", "kit-increment", "--colour", "red")
    assert code == 2
    _one_line_error(err, "--colour")


def _int_params():
    out = []
    for name, block in all_blocks().items():
        for p in block.params:
            if p.type is int and not p.choices:
                out.append(pytest.param(name, p.name, id=f"{name}-{p.name}"))
    return out


@pytest.mark.parametrize("name,param", _int_params())
def test_registered_block_rejects_negative_int(capsys, name, param):
    """A factory rejects a negative size with a ValueError naming it: exit 2, one line."""
    code, _, err = _run(capsys, "generate", name, "--set", f"{param}=-1")
    assert code == 2, f"{name} accepted {param}=-1"
    _one_line_error(err, name)
    assert param in err or "-1" in err, f"the error does not name {param} or -1: {err}"


def test_error_from_the_installed_entry_point():
    """The console script itself: exit 2, one line, no traceback (a real process)."""
    exe = Path(sys.executable).parent / "fusionfabric"
    proc = subprocess.run([str(exe), "generate", "no-such-block"], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2
    _one_line_error(proc.stderr, "no-such-block")
    assert proc.stdout == ""


# ---- generate output ---------------------------------------------------------------------

def test_generate_writes_verilog_and_port_map(tmp_path, capsys, kit_block):
    out = tmp_path / "sub" / "kit.v"
    code, stdout, _ = _run(capsys, "generate", "kit-increment", "--set", "width=12",
                           "--name", "my_top", "-o", str(out))
    assert code == 0 and stdout == ""
    text = out.read_text()
    assert re.search(r"^module my_top\(", text, re.M)
    ports = json.loads(out.with_suffix(".ports.json").read_text())
    assert ports["top"] == "my_top" and ports["block"] == "kit-increment"
    assert ports["params"] == {"width": 12, "fault": "none"}
    assert _verilog_ports(text, "my_top")["i_data__payload"] == ("input", 12)


def test_generate_to_stdout(capsys, kit_block):
    code, out, _ = _run(capsys, "generate", "kit-increment")
    assert code == 0
    assert re.search(r"^module kit_increment\(", out, re.M)


_DECL = re.compile(r"^\s*(input|output|inout)\s+(?:\[(\d+):(\d+)\]\s+)?\\?(\S+?)\s*;", re.M)


def _verilog_ports(text: str, top: str) -> dict[str, tuple[str, int]]:
    """``{name: (direction, width)}`` of module ``top``, parsed from the Verilog text."""
    m = re.search(rf"^module {re.escape(top)}\((.*?)\);", text, re.M | re.S)
    assert m, f"module {top} not found"
    header = {p.strip().lstrip("\\") for p in m.group(1).split(",")}
    body = text[m.end():text.find("endmodule", m.end())]
    ports = {}
    for d, hi, lo, name in _DECL.findall(body):
        ports[name] = (d, int(hi) - int(lo) + 1 if hi else 1)
    assert set(ports) == header, "header and declarations disagree"
    return ports


@pytest.mark.parametrize("name", [
    # the fabric's Verilog is the slow part: the fabric and the blocks that contain it soak
    pytest.param(n, marks=[pytest.mark.soak] if n in ("fabric", "fabric-bist", "board-slice")
                 else [])
    for n in BLOCK_NAMES + ["kit-increment"]])
def test_port_map_matches_verilog(tmp_path, capsys, kit_block, name):
    out = tmp_path / "b.v"
    block = all_blocks().get(name, kit_block)
    sets = [a for k, v in block.ci_params.items() for a in ("--set", f"{k}={v}")]
    code, _, err = _run(capsys, "generate", name, "-o", str(out), *sets)
    assert code == 0, err
    top = name.replace("-", "_")
    verilog = _verilog_ports(out.read_text(), top)
    pm = json.loads(out.with_suffix(".ports.json").read_text())
    assert pm["top"] == top
    mapped = {p["name"]: (p["direction"], p["width"]) for p in pm["ports"]}
    assert len(mapped) == len(pm["ports"]), "duplicate port names in the port map"
    assert mapped == verilog
    assert pm["params"] == block.resolve(block.ci_params)


_GEN_ALL = """
import sys
from fusionfabric.rtl import blocks as rtl_blocks
from fusionfabric.rtl.blocks import Block, Param, all_blocks
from fusionfabric.cli import main
from tests.kit_dut import KitIncrement
kit = Block("kit-increment", KitIncrement, params=[Param("width", int, 16)])
rtl_blocks._CACHE = {**all_blocks(), kit.name: kit}
out = sys.argv[1]
skip = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else set()
for name, block in all_blocks().items():
    if name in skip:
        continue
    sets = [a for k, v in block.ci_params.items() for a in ("--set", f"{k}={v}")]
    assert main(["generate", name, "-o", f"{out}/{name}.v", *sets]) == 0, name
"""


#: Blocks generated twice only in the soak variant: the fabric, the fabric BIST and the
#: board slice (each contains the fabric) and the FEC receiver and RS decoder, whose
#: generation takes most of the CI variant's time; every other block in CI.
CONTAINED = ("fabric", "fabric-bist", "fec-pcs-rx", "rs-decoder", "board-slice")


@pytest.mark.parametrize("skip", [
    pytest.param(CONTAINED, id="ci"),
    pytest.param((), id="every-block", marks=pytest.mark.soak)])
def test_generate_is_deterministic(tmp_path, skip):
    """Two processes with different hash seeds write byte-identical files for every block
    (CI: every block not contained in another one)."""
    dirs, procs = [], []
    for seed in ("1", "12345"):  # both at once: one per core
        d = tmp_path / f"run{seed}"
        d.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed}
        procs.append(subprocess.Popen([sys.executable, "-c", _GEN_ALL, str(d), ",".join(skip)],
                                      cwd=ROOT,
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
        dirs.append(d)
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-2000:]
    files = sorted(p.name for p in dirs[0].iterdir())
    assert files == sorted(p.name for p in dirs[1].iterdir())
    assert len(files) == 2 * (len(BLOCK_NAMES) + 1 - len(skip))
    for f in files:
        assert (dirs[0] / f).read_bytes() == (dirs[1] / f).read_bytes(), f"{f} differs"
        assert str(ROOT) not in (dirs[0] / f).read_text(), f"{f} contains a host path"


# ---- vectors -----------------------------------------------------------------------------

def _vector_names():
    from fusionfabric.sim.vectors import all_vectors

    return list(all_vectors())


def test_vectors_unknown_block(capsys):
    code, _, err = _run(capsys, "vectors", "no-such-gen")
    assert code == 2
    _one_line_error(err, "no-such-gen")


@pytest.mark.parametrize("argv,needle", [(["--count", "0"], "0"), (["--seed", "-3"], "-3"),
                                         (["--count", "x"], "'x'"),
                                         (["--set", "novalue"], "novalue")],
                         ids=["count0", "negative-seed", "count-not-int", "set-no-equals"])
def test_vectors_bad_arguments(capsys, argv, needle):
    names = _vector_names()
    if not names:
        pytest.skip("no vector generator registered yet")
    code, _, err = _run(capsys, "vectors", names[0], *argv)
    assert code == 2
    _one_line_error(err, needle)


@pytest.mark.parametrize("name", _vector_names())
def test_vectors_document_and_determinism(tmp_path, capsys, name):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for f in (a, b):
        code, _, err = _run(capsys, "vectors", name, "--seed", "7", "--count", "3", "-o", str(f))
        assert code == 0, err
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["block"] == name and doc["seed"] == 7
    assert isinstance(doc["params"], dict) and len(doc["vectors"]) == 3
