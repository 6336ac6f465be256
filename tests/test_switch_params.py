"""Switch parameters: validation errors name the bad value; the registered block builds."""

import pytest

from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.rtl.switch.top import Switch


@pytest.mark.parametrize("kw,needle", [
    ({"n_ports": 1}, "n_ports=1"),
    ({"n_ports": 300}, "n_ports=300"),
    ({"depth": 3}, "depth=3"),
    ({"iterations": 3, "n_ports": 4}, "iterations=3"),
    ({"mode": "crossbar"}, "mode='crossbar'"),
    ({"out_depth": 0}, "out_depth=0"),
    ({"n_groups": 0}, "n_groups=0"),
    ({"data_width": 0}, "data_width=0"),
    ({"reduce": True, "data_width": 48}, "reduce=True needs data_width"),
    ({"n_chunks": 0}, "n_chunks=0"),
    ({"pipeline": True, "mode": "fifo"}, "pipeline=True needs mode='voq'"),
    ({"pipeline": 2}, "pipeline=2"),
    ({"pipeline": True, "mode": "crosspoint"}, "pipeline=True needs mode='voq'"),
    ({"mode": "crosspoint", "iterations": 2}, "iterations=2: mode='crosspoint'"),
    ({"mode": "crosspoint", "depth": 6}, "depth=6"),
])
def test_switch_rejects(kw, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        Switch(**kw)


def test_switch_block_defaults():
    b = get_block("switch")
    sw = b.build(n_ports=3)
    assert (sw.n_ports, sw.iterations, sw.mode) == (3, 2, "voq")
    with pytest.raises(BlockError, match="mode"):
        b.build(mode="x")


def test_switch_pipeline_defaults():
    """The pipelined variant runs one iSLIP round per cycle unless told otherwise."""
    b = get_block("switch")
    assert b.build(n_ports=8, pipeline=True).iterations == 1
    with pytest.raises(ValueError, match="iterations=2"):
        b.build(n_ports=8, pipeline=True, iterations=2)
    assert b.build(n_ports=8).iterations == 3 and not b.build(n_ports=8).pipeline


def test_switch_crosspoint_has_no_islip():
    """The crosspoint variant has no matching: iterations 0, no allocator in the design
    (the default variant's Verilog has the module, the crosspoint variant's does not)."""
    from amaranth.back import verilog

    b = get_block("switch")
    sw = b.build(n_ports=4, mode="crosspoint")
    assert (sw.mode, sw.iterations, sw.pipeline) == ("crosspoint", 0, False)

    def has_alloc(dut):
        text = verilog.convert(dut, emit_src=False, name="switch")
        return any(line.startswith("module \\switch.alloc ") for line in text.splitlines())
    assert has_alloc(b.build(n_ports=4)) and not has_alloc(sw)
