"""``fusionfabric vectors scrambler|crc|prbs``: the JSON agrees with implementations written
independently here (zlib, bitwise CRCs, per-bit LFSRs), and bad parameters exit 2 with one
line naming the value."""

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fusionfabric.cli import main
from tests.test_primitives_models import (bits_word_list, lfsr_descramble_cl49, lfsr_prbs,
                                          lfsr_scramble_cl49, state_list, word_bits)


def vectors(capsys, *args):
    assert main(["vectors", *args]) == 0
    return json.loads(capsys.readouterr().out)


def crc_reflected(data, poly_reflected, init, xorout, width):
    """Bitwise LSB-first CRC (the reflected register form), written here."""
    reg = init
    for byte in data:
        reg ^= byte
        for _ in range(8):
            reg = (reg >> 1) ^ poly_reflected if reg & 1 else reg >> 1
    return reg ^ xorout


def crc_msb_first(data, poly, init, width):
    top, mask = 1 << (width - 1), (1 << width) - 1
    reg = init
    for byte in data:
        reg ^= byte << (width - 8)
        for _ in range(8):
            reg = ((reg << 1) ^ poly) & mask if reg & top else (reg << 1) & mask
    return reg


INDEPENDENT = {
    "crc32": zlib.crc32,
    "crc32c": lambda d: crc_reflected(d, 0x82F63B78, 0xFFFFFFFF, 0xFFFFFFFF, 32),
    "crc16-arc": lambda d: crc_reflected(d, 0xA001, 0, 0, 16),
    "crc16-umts": lambda d: crc_msb_first(d, 0x8005, 0, 16),
}


@pytest.mark.parametrize("algorithm", list(INDEPENDENT))
def test_crc_vectors_independent(capsys, algorithm):
    doc = vectors(capsys, "crc", "--set", f"algorithm={algorithm}", "--count", "12",
                  "--seed", "3", "--set", "max_bytes=300")
    assert doc["params"]["algorithm"] == algorithm and len(doc["vectors"]) == 12
    for v in doc["vectors"]:
        assert v["crc"] == INDEPENDENT[algorithm](bytes.fromhex(v["message"]))


@pytest.mark.parametrize("width", [1, 8, 64, 66, 128])
@pytest.mark.parametrize("desc", ["false", "true"])
def test_scrambler_vectors_independent(capsys, width, desc):
    doc = vectors(capsys, "scrambler", "--set", f"data_width={width}", "--set",
                  f"descrambler={desc}", "--count", "3")
    p = doc["params"]
    assert (p["data_width"], p["state_width"], p["taps"]) == (width, 58, [39, 58])
    fn = lfsr_descramble_cl49 if desc == "true" else lfsr_scramble_cl49
    for v in doc["vectors"]:
        out, after = fn(word_bits(v["in"], width), state_list(v["state"]))
        assert v["out"] == bits_word_list(out, width)
        assert state_list(v["state_after"]) == after


@pytest.mark.parametrize("order", [7, 15, 23, 31])
def test_prbs_vectors_independent(capsys, order):
    doc = vectors(capsys, "prbs", "--set", f"order={order}", "--set", "data_width=32",
                  "--count", "20")
    taps = doc["params"]["taps"]
    seed = doc["params"]["state"]
    assert seed == (1 << order) - 1
    want = lfsr_prbs(taps, 20 * 32, [(seed >> k) & 1 for k in range(order)])
    assert [v["data"] for v in doc["vectors"]] == bits_word_list(want, 32)


@pytest.mark.parametrize("args,needle", [
    (["crc", "--set", "algorithm=md5"], "algorithm='md5'"),
    (["crc", "--set", "max_bytes=x"], "max_bytes='x'"),
    (["crc", "--set", "colour=red"], "'colour'"),
    (["scrambler", "--set", "data_width=0"], "data_width=0"),
    (["scrambler", "--set", "polynomial=8"], "polynomial=0x8"),
    (["scrambler", "--set", "descrambler=maybe"], "descrambler='maybe'"),
    (["prbs", "--set", "order=9"], "order=9"),
    (["prbs", "--set", "state=0"], "state=0x0"),
])
def test_vectors_bad_params_exit_2_one_line(capsys, args, needle):
    assert main(["vectors", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], captured.err
    assert captured.out == ""


def test_vectors_bad_param_console_script():
    exe = Path(sys.executable).parent / "fusionfabric"
    proc = subprocess.run([str(exe), "vectors", "crc", "--set", "algorithm=md5"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "algorithm='md5'" in lines[0], proc.stderr
