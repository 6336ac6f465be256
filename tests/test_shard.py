"""``make test SHARD=i/N`` (fusionfabric/shard.py, pytest-split): bad values exit 2 with
one line; the shards of a set of tests partition it (every test in exactly one shard);
the stored durations name real test files."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fusionfabric.shard import DURATIONS, main, shard_args

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("bad", ["x", "0/3", "4/3", "1/0", "1/2/3", "-1/2", "1 of 2"])
def test_bad_shard_exits_2(capsys, bad):
    assert main([bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and repr(bad) in err, err


def test_no_shard_is_the_whole_suite(capsys):
    assert main([""]) == 0 and capsys.readouterr().out.strip() == ""
    assert main([]) == 0


def test_missing_durations_named(tmp_path):
    with pytest.raises(ValueError, match="no stored durations"):
        shard_args("1/2", tmp_path / "none.json")


def _collect(extra):
    files = ["tests/test_board_uart.py", "tests/test_shard.py", "tests/test_bitfields.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *files, *extra], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if "::" in ln]


def test_shards_partition_the_tests():
    whole = _collect([])
    n = 3
    shards = [_collect(shard_args(f"{i}/{n}")) for i in range(1, n + 1)]
    assert all(shards), "an empty shard"
    flat = [t for s in shards for t in s]
    assert sorted(flat) == sorted(whole), "a test in no shard or in two"


def test_stored_durations_name_real_tests():
    doc = json.loads(DURATIONS.read_text())
    assert len(doc) > 1000      # every CI test, those under 5 ms at 0.0
    files = {k.split("::")[0] for k in doc}
    assert all((ROOT / f).is_file() for f in files), sorted(f for f in files
                                                            if not (ROOT / f).is_file())
    assert all(isinstance(v, float) and v >= 0 for v in doc.values())
