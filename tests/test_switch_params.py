"""Switch parameters: validation errors name the bad value; the factory builds the design
that ``mode`` and ``pipeline`` name; the registered block builds."""

import pytest

from fusionfabric.rtl.blocks import BlockError, get_block
from fusionfabric.rtl.switch.crosspoint_switch import CrosspointSwitch
from fusionfabric.rtl.switch.fifo_switch import FifoSwitch
from fusionfabric.rtl.switch.ingress import Ingress
from fusionfabric.rtl.switch.output import OutputSide
from fusionfabric.rtl.switch.pipelined import PipelinedSwitch
from fusionfabric.rtl.switch.top import Switch
from fusionfabric.rtl.switch.voq_switch import VoqSwitch


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
    ({"reduce_pipeline": True}, "reduce_pipeline=True set the reduction units: they need "
                                "reduce=True"),
    ({"reduce_add_stages": 7, "mode": "crosspoint"}, "reduce_add_stages=7 and"),
    ({"reduce": True, "reduce_add_stages": 8}, "reduce_add_stages=8 must be 4, 5, 6 or 7"),
    ({"reduce": True, "reduce_add_stages": True}, "reduce_add_stages=True"),
    ({"reduce": True, "reduce_pipeline": 1}, "reduce_pipeline=1 must be True or False"),
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


@pytest.mark.parametrize("mode, pipeline", [("voq", False), ("voq", True),
                                            ("fifo", False), ("crosspoint", False)])
def test_switch_passes_the_unit_options_to_its_reduction_units(mode, pipeline):
    """``reduce_add_stages`` and ``reduce_pipeline`` reach every design's units, whose
    result latency then follows ``sim.reduce.unit_latency`` with the same options."""
    from fusionfabric.sim.reduce import unit_latency
    sw = Switch(n_ports=4, mode=mode, pipeline=pipeline, reduce=True, reduce_add_stages=7,
                reduce_pipeline=True)
    unit = sw.reduction_unit()
    assert (unit.add_stages, unit.pipeline) == (7, True)
    assert unit.latency(4) == unit_latency(4, 4, add_stages=7, pipeline=True)
    default = Switch(n_ports=4, mode=mode, pipeline=pipeline, reduce=True).reduction_unit()
    assert (default.add_stages, default.pipeline) == (4, False)


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


@pytest.mark.parametrize("kw,cls", [
    ({}, VoqSwitch),
    ({"mode": "fifo"}, FifoSwitch),
    ({"pipeline": True}, PipelinedSwitch),
    ({"mode": "crosspoint"}, CrosspointSwitch),
], ids=["voq", "fifo", "pipelined", "crosspoint"])
def test_switch_factory_picks_the_design(kw, cls):
    """``Switch`` is a factory: each mode/pipeline pair is its own component, and the
    design keeps every parameter readable as an attribute."""
    sw = Switch(n_ports=3, depth=4, out_depth=8, n_groups=5, **kw)
    assert type(sw) is cls
    assert (sw.n_ports, sw.depth, sw.out_depth, sw.n_groups) == (3, 4, 8, 5)
    assert sw.mode == kw.get("mode", "voq") and sw.pipeline == kw.get("pipeline", False)


@pytest.mark.parametrize("cls,kw,needle", [
    (VoqSwitch, {"iterations": 4, "n_ports": 8}, "iterations=4"),
    (FifoSwitch, {"iterations": 3, "n_ports": 3}, "iterations=3"),
    (PipelinedSwitch, {"iterations": 2}, "iterations=2"),
    (CrosspointSwitch, {"depth": 5}, "depth=5"),
    (VoqSwitch, {"reduce": "yes"}, "reduce=.yes."),
    (FifoSwitch, {"n_ports": 257}, "n_ports=257"),
])
def test_designs_reject(cls, kw, needle):
    """Each design's own constructor checks its parameters (the factory is not needed)."""
    with pytest.raises(ValueError, match=needle):
        cls(**kw)


def test_crosspoint_switch_takes_no_iterations():
    with pytest.raises(TypeError, match="iterations"):
        CrosspointSwitch(iterations=1)


@pytest.mark.parametrize("part", [Ingress, OutputSide])
def test_shared_parts_need_a_switch(part):
    with pytest.raises(TypeError, match="switch="):
        part(object())
