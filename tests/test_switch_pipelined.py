"""The pipelined VOQ switch (``PipelinedSwitch``) in the Amaranth simulator: the
documented idle latency and the output credit loop that sets the ``out_depth`` one stream
needs for line rate. The functional regressions are the cocotb cases in
tests/test_switch_cocotb.py; its cycle-exact model is in tests/test_model_exact.py."""

import pytest

from fusionfabric.rtl.switch.pipelined import PipelinedSwitch

from .test_switch_crosspoint import _run

#: handshake in cycle t -> o_port valid in t + LATENCY (docs/switch.md)
LATENCY = 12
#: the smallest out_depth that sustains one flit per cycle from one input to one output
FULL_RATE_OUT_DEPTH = 10
#: cycles between two matches on one credit once the output has run out of credits
STARVED_LOOP = 11


def _stream(out_depth, n):
    """``n`` flits from input 0 to output 3, the output always ready: the cycles at which
    they leave, checked for order and completeness."""
    dut = PipelinedSwitch(n_ports=4, data_width=16, depth=64, out_depth=out_depth,
                          iterations=1)
    acc, out = _run(dut, [[(3, k, 1) for k in range(n)], [], [], []], 40 * n,
                    latency=LATENCY)
    assert [d for _, _, d, _ in out[3]] == list(range(n))
    assert out[3][0][0] - acc[0][0] == LATENCY
    return [c for c, *_ in out[3]]


@pytest.mark.parametrize("out_depth", [FULL_RATE_OUT_DEPTH, FULL_RATE_OUT_DEPTH - 1])
def test_pipelined_line_rate_needs_credits(out_depth):
    """60 flits leave in 60 cycles with the documented out_depth, with bubbles with one
    credit less."""
    cycles = _stream(out_depth, 60)
    span = cycles[-1] - cycles[0] + 1
    if out_depth >= FULL_RATE_OUT_DEPTH:
        assert span == 60, f"out_depth {out_depth}: 60 flits over {span} cycles"
    else:
        assert span > 60, f"out_depth {out_depth}: line rate with too few credits"


def test_pipelined_starved_credit_loop():
    """With one credit every flit waits for the previous one's credit: one flit per
    STARVED_LOOP cycles."""
    cycles = _stream(1, 8)
    assert {b - a for a, b in zip(cycles, cycles[1:])} == {STARVED_LOOP}
