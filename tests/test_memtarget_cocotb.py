"""cocotb regression of the memory target (block ``mem-target``, tb/memory/) on Icarus.

CI: the default size and the smallest with gaps and backpressure; Verilator and longer
runs are soak. The Amaranth-simulator tests (tests/test_memtarget.py) carry the bulk of
the random checking."""

import pytest

from fusionfabric.tb.common import runner

TB = "fusionfabric.tb.memory.test_memtarget"


def _case(mem_bytes, sim, requests, soak=False):
    return pytest.param(mem_bytes, sim, requests, marks=[pytest.mark.soak] if soak else [],
                        id=f"{mem_bytes}-{sim}-{requests}")


@pytest.mark.cocotb
@pytest.mark.parametrize("mem_bytes,sim,requests", [
    _case(1024, "icarus", 150),
    _case(64, "icarus", 60),
    _case(4096, "icarus", 1000, soak=True),
    _case(1024, "verilator", 1000, soak=True),
])
def test_memtarget_cocotb(mem_bytes, sim, requests):
    result = runner.run("mem-target", TB, {"mem_bytes": mem_bytes}, sim=sim,
                        test_args={"requests": requests, "idle": 0.3, "backpressure": 0.3})
    assert [t["status"] for t in result.tests] == ["passed"], result.tests


@pytest.mark.cocotb
def test_memtarget_cocotb_catches_planted_fault():
    """The same testbench fails a target built without write-to-read forwarding (back to
    back requests, no gaps: an ATOMIC_ADD or READ right after a write to its word)."""
    from fusionfabric.rtl.fabric.memory import MemTarget

    with pytest.raises(runner.CocotbFailure, match=r"mem-target: item #\d+ mismatch"):
        runner.run("mem-target", TB, {"mem_bytes": 1024},
                   component=MemTarget(1024, fault="no-forward"), sim="icarus", seed=1,
                   test_args={"requests": 150, "idle": 0.0, "backpressure": 0.0},
                   planted_fault=True)
