"""The heterogeneous rack on the RTL fabric: accelerators all-reduce bf16 through the
switch while cpu endpoints (memory targets behind their chiplets) serve READ, WRITE and
contended ATOMIC_ADD from every accelerator at once (workload ``hetero-rack``,
sim/workloads.py; cocotb ``tb/fabric/test_fabric.py::test_workload``).

References: the all-reduce against fusionfabric.sim.reduce; every completion against the
workload's script (READ after WRITE returns the written bytes, out-of-range requests
complete with ERROR and zeros); the whole memory read back at the end against the
reference built from the scripts (each region's writes, the shared counters the exact
sum of every addend); the targets' own counters (``o_mem_status``) against the checked
completions.
"""

import json

import pytest

from fusionfabric.rtl.blocks import get_block
from fusionfabric.tb.common import runner

pytestmark = pytest.mark.cocotb


def _endpoint_list(n, cpus):
    """``accelerator:2xA,cpu:2x1,...``: endpoints in port order, the cpus at ``cpus``."""
    items = []
    for e in range(n):
        kind = "cpu" if e in cpus else "accelerator"
        if items and items[-1][0] == kind:
            items[-1][1] += 1
        else:
            items.append([kind, 1])
    return ",".join(f"{k}:2x{c}" for k, c in items)


def _run(tmp_path, n, cpus, sim="icarus", faults=None, mem_bytes=2048, mem_ops=16,
         seed=1):
    # the fabric block's endpoint list builds the memory targets (docs/fabric.md)
    params = get_block("fabric").resolve({"n_endpoints": n, "mem_bytes": mem_bytes,
                                           "endpoints": _endpoint_list(n, cpus)})
    out = tmp_path / "result.json"
    wp = {"n_elems": 32 * 4 * n, "cpu_endpoints": list(cpus), "mem_bytes": mem_bytes,
          "mem_ops": mem_ops}
    try:
        runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params, sim=sim,
                   testcase="test_workload", vpi="top",
                   test_args={"workload": "hetero-rack", "seed": seed, "params": wp,
                              "faults": faults, "result_file": str(out)})
    finally:
        rec = json.loads(out.read_text()) if out.exists() else None
    assert rec is not None and rec["bit_exact"], rec and rec["error"]
    return rec


def test_hetero_rack_icarus(tmp_path):
    """Two accelerators and a cpu (endpoint 2)."""
    rec = _run(tmp_path, 3, [2])
    mem = rec["stats"]["memory"]
    assert min(mem["reads"], mem["writes"], mem["atomics"], mem["errors"]) > 0
    assert rec["memory_targets"]["2"]["dropped"] == 0
    assert rec["stats"]["kinds"] == ["accelerator", "accelerator", "cpu"]


@pytest.mark.soak
def test_hetero_rack_two_cpus_with_bit_errors(tmp_path):
    """Three accelerators and two cpus (endpoints 1 and 4) at BER 1e-5 on every lane:
    replays, and still every completion and byte of memory exact."""
    rec = _run(tmp_path, 5, [1, 4], faults={"ber": 1e-5, "slip_lane": -1}, mem_ops=30,
               mem_bytes=4096, seed=2)
    assert set(rec["memory_targets"]) == {"1", "4"}
