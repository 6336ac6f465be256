"""cocotb regressions of the RS(544,514) decoder on Icarus and Verilator (tb/fec/).

Each case builds ``rs-decoder`` at one parameter set and checks random codewords with
0, 1, 15, 16 and 30 symbol errors (random and burst positions) against sim.fec.decode.
"""

import pytest

from fusionfabric.tb.common import runner

SOAK = pytest.mark.soak


def _case(P, sim, soak=False, **kw):
    extra = "".join(f"-{k}" for k, v in kw.items() if v is True)
    return pytest.param(P, sim, kw, marks=[SOAK] if soak else [], id=f"P{P}{extra}-{sim}")


CASES = [
    _case(8, "icarus"),
    _case(32, "icarus", soak=True),
    _case(8, "icarus", bypass_correction=True),
    _case(8, "icarus", bypass_indication=True, soak=True),
    _case(4, "verilator", soak=True),
    _case(8, "verilator", soak=True),
    _case(32, "verilator", soak=True),
    _case(8, "verilator", soak=True, pipeline=True),
]


@pytest.mark.cocotb
@pytest.mark.parametrize("P,sim,flags", CASES)
def test_rs_decoder_cocotb(P, sim, flags):
    result = runner.run("rs-decoder", "fusionfabric.tb.fec.test_rs", {"P": P, **flags},
                        sim=sim, vpi="top",
                        test_args={"codewords": 5, "idle": 0.1, "backpressure": 0.1})
    assert [t["status"] for t in result.tests] == ["passed"], result.tests
