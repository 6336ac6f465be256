"""A fabric with ``cpu`` endpoints (``Fabric(cpu_endpoints=...)``): a memory target behind
each cpu endpoint's chiplet (docs/fabric.md, "Memory target (cpu endpoints)").

CI: the construction rules and the wiring (cheap: no Verilog). Soak: requests across a
2-endpoint fabric on Icarus against the numpy model (tb/fabric/test_cpu.py; the fabric's
Verilog build alone takes about 20 s)."""

import pytest
from amaranth.lib.wiring import Out

from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.fabric.fabric import Fabric
from fusionfabric.rtl.fabric.memory import MemTarget
from fusionfabric.portdoc import disown


def test_cpu_endpoints_get_a_memory_target():
    fab = Fabric(n_endpoints=3, cpu_endpoints=(2, 0), mem_bytes=256)
    try:
        assert fab.signature.members["o_mem_status"] == Out(MEM_STATUS.layout()).array(2)
        assert sorted(fab.mem_targets) == [0, 2]
        assert all(isinstance(t, MemTarget) and t.mem_bytes == 256
                   for t in fab.mem_targets.values())
        m = fab.elaborate(None)            # the top level only (submodules not elaborated)
        subs = {name: entry[0] for name, entry in m._named_submodules.items()}
        # nothing of this module is simulated or converted: no UnusedElaboratable later
        for sub in [*subs.values(), *(e[0] for e in m._anon_submodules), m]:
            disown(sub)
        assert subs["mem0"] is fab.mem_targets[0] and subs["mem2"] is fab.mem_targets[2]
        assert "mem1" not in subs
    finally:
        disown(fab)


def test_no_cpu_endpoint_no_status_port():
    fab = Fabric(n_endpoints=2)
    try:
        assert "o_mem_status" not in fab.signature.members and fab.mem_targets == {}
    finally:
        disown(fab)


@pytest.mark.parametrize("kw,needle", [
    ({"cpu_endpoints": (2,)}, "cpu_endpoints entry 2"),
    ({"cpu_endpoints": (-1,)}, "cpu_endpoints entry -1"),
    ({"cpu_endpoints": (1, 1)}, "twice"),
    ({"cpu_endpoints": (1,), "mem_bytes": 100}, "mem_bytes=100"),
])
def test_bad_cpu_endpoints(kw, needle):
    with pytest.raises(ValueError, match=needle) as info:
        Fabric(n_endpoints=2, **kw)
    disown_failed(info.value)


def test_fabric_kwargs_from_an_endpoint_list():
    assert fabric_kwargs(parse_endpoints("accelerator:2x2,cpu:2x1,gpu:2x1")) == {
        "n_endpoints": 4, "cpu_endpoints": (2,), "endpoint_lanes": (2, 2, 2, 2)}
    assert fabric_kwargs(parse_endpoints("cpu:2x2,accelerator:1x1")) == {
        "n_endpoints": 3, "cpu_endpoints": (0, 1), "endpoint_lanes": (2, 2, 1)}
    with pytest.raises(ValueError, match=r"lanes=4 in endpoint item 'gpu:4x1'.*1 or 2 "
                       "lanes"):
        fabric_kwargs(parse_endpoints("accelerator:2x2,gpu:4x1"))
    with pytest.raises(ValueError, match=r"lanes=1 in endpoint item 'cpu:1x1'.*rs544.*2 "
                       "lanes per direction only"):
        fabric_kwargs(parse_endpoints("accelerator:2x2,cpu:1x1", lane_profile="rs544"),
                      "rs544")


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_cpu_endpoint_icarus():
    from fusionfabric.tb.common import runner

    params = {"n_endpoints": 2, "cpu_endpoints": [1], "mem_bytes": 1024}
    comp = Fabric(n_endpoints=2, cpu_endpoints=(1,), mem_bytes=1024)
    result = runner.run("fabric-cpu", "fusionfabric.tb.fabric.test_cpu", params,
                        component=comp, sim="icarus",
                        test_args={"requests": 120, "stall_cycles": 5000})
    assert [t["status"] for t in result.tests] == ["passed"], result.tests


def test_endpoint_list_as_a_block_parameter():
    from fusionfabric.rtl.blocks import get_block
    fab = get_block("fabric").build(endpoints="cpu:2x1,accelerator:2x2,cpu:2x1",
                                    mem_bytes=256)
    assert fab.n_endpoints == 4 and fab.cpu_endpoints == (0, 3)
    assert {c: t.mem_bytes for c, t in fab.mem_targets.items()} == {0: 256, 3: 256}
    disown(fab)


@pytest.mark.parametrize("sets, needle", [
    (["endpoints=accelerator:2x2,cpu:4x1"], "lanes=4 in endpoint item 'cpu:4x1'"),
    (["endpoints=accelerator:2x2,dsp:2x1"], "endpoint kind 'dsp'"),
    (["endpoints=accelerator:2x200"], "more than the switch's 128 ports"),
    (["endpoints=accelerator:2x3", "n_endpoints=4"], "lists 3 endpoints but n_endpoints=4"),
    (["endpoints=accelerator:2x2,cpu:2x1", "mem_bytes=100"], "mem_bytes=100"),
])
def test_bad_endpoint_list_exits_2_with_one_line(sets, needle, tmp_path, capsys):
    from fusionfabric.cli import main
    argv = ["generate", "fabric", "-o", str(tmp_path / "f.v")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
