"""cocotb regressions of the primitives on Icarus and Verilator (tb/primitives/).

All edge widths run on Icarus; Verilator gets a few (it costs a C++ build per parameter
set). Ids name the block, its parameters and the simulator.
"""

import pytest

from fusionfabric.tb.common import runner

SOAK = pytest.mark.soak


def _case(*values, soak=False):
    """One parameter set; ``soak=True`` moves it out of CI (``-m soak`` runs it)."""
    return pytest.param(*values, marks=[SOAK] if soak else [],
                        id="-".join(str(v) for v in values))


# CI: edge widths on Icarus; the Verilator runs are soak (a Verilator build takes ~20-60 s
# here; tests/test_kit.py runs the kit on Verilator in CI).
SCRAMBLER_CASES = (
    [_case("scrambler", w, "icarus") for w in (1, 128)]
    + [_case("scrambler", 66, "icarus", soak=True)]
    + [_case("descrambler", w, "icarus") for w in (1, 32, 66, 128)]
    + [_case("descrambler", w, "icarus", soak=True) for w in (8, 64)]
    + [_case("descrambler", 66, "verilator", soak=True),
       _case("scrambler", 64, "verilator", soak=True),
       _case("descrambler", 1, "verilator", soak=True)]
)

CRC_CASES = [
    _case("crc32", 8, "icarus"), _case("crc32c", 32, "icarus"),
    _case("crc16-arc", 16, "icarus"), _case("crc16-umts", 128, "icarus"),
    _case("crc32", 512, "icarus"), _case("crc32", 64, "icarus", soak=True),
    _case("crc32", 64, "verilator", soak=True), _case("crc16-umts", 8, "verilator", soak=True),
]

PRBS_CASES = [
    _case("prbs-gen", 7, 1, "icarus"), _case("prbs-gen", 31, 64, "icarus"),
    _case("prbs-gen", 15, 128, "icarus"), _case("prbs-gen", 23, 66, "icarus", soak=True),
    _case("prbs-check", 7, 1, "icarus"), _case("prbs-check", 31, 8, "icarus"),
    _case("prbs-check", 23, 66, "icarus"), _case("prbs-check", 15, 128, "icarus"),
    _case("prbs-check", 31, 64, "icarus", soak=True),
    _case("prbs-check", 31, 1, "verilator", soak=True),
    _case("prbs-gen", 31, 64, "verilator", soak=True),
    _case("prbs-check", 7, 66, "verilator", soak=True),
]


def _ok(result, n):
    assert [t["status"] for t in result.tests] == ["passed"] * n, result.tests


@pytest.mark.cocotb
@pytest.mark.parametrize("block,width,sim", SCRAMBLER_CASES)
def test_scrambler_cocotb(block, width, sim):
    init = 0x2AAAAAAAAAAAAAA ^ width  # a non-trivial reset state
    result = runner.run(block, "fusionfabric.tb.primitives.test_scrambler",
                        {"data_width": width, "init": init}, sim=sim,
                        test_args={"words": max(40, 3000 // width), "trials": 30})
    _ok(result, 2)


@pytest.mark.cocotb
@pytest.mark.parametrize("algorithm,width,sim", CRC_CASES)
def test_crc_cocotb(algorithm, width, sim):
    result = runner.run("crc", "fusionfabric.tb.primitives.test_crc",
                        {"algorithm": algorithm, "data_width": width}, sim=sim,
                        test_args={"frames": 20 if width >= 256 else 80})
    _ok(result, 1)


@pytest.mark.cocotb
@pytest.mark.parametrize("block,order,width,sim", PRBS_CASES)
def test_prbs_cocotb(block, order, width, sim):
    result = runner.run(block, "fusionfabric.tb.primitives.test_prbs",
                        {"order": order, "data_width": width}, sim=sim)
    _ok(result, 1)
