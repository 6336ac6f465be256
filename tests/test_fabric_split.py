"""The fabric's split Verilog (rtl/fabric/split.py, docs/fabric.md "Split Verilog"): one
module per distinct endpoint path, one for the switch and one for its reduction units, a
top of instances; and the switch's own split (its reduction units as one module,
docs/switch.md "Reduction units").

References: the flat fabric's ports (its signature, ``port_map``) for the top's ports;
the endpoint list's own numbering for which module each endpoint instantiates and the
constants it is given (node id, first lane index, the lane generators' seeds from
``fusionfabric.rtl.fabric.fault``'s seed rule); Verilator's lint; and, in the soak, the
flat fabric itself: the same seeded heterogeneous run with bit errors on both, whose
records (every counter, the cycle counts, the memory read back) must be identical.
"""

import json
import re

import pytest

from fusionfabric.rtl.blocks import get_block
from fusionfabric.rtl.export import port_map
from fusionfabric.rtl.fabric.fabric import Fabric
from fusionfabric.rtl.fabric.fault import seed_values
from fusionfabric.rtl.fabric.split import link_variants


def _modules(text):
    return re.findall(r"^module\s+(\\\S+|\w+)", text, flags=re.M)


def _instances(text, top, module):
    """``{instance name: {port: connection text}}`` of ``module`` inside ``top``."""
    body = text[text.index(f"module {top}("):]
    body = body[:body.index("endmodule")]
    out = {}
    for inst, ports in re.findall(rf"^\s*{module}\s+(\S+)\s*\((.*?)\);", body,
                                  flags=re.M | re.S):
        out[inst] = dict(re.findall(r"\.(\w+)\(([^()]*)\)", ports))
    return out


def test_link_variants_group_by_lanes_and_kind():
    fab = Fabric(endpoints="accelerator:1x2,gpu:2x1,cpu:2x2,accelerator:1x1", mem_bytes=256)
    # endpoints 0, 1 and 5 are 1-lane accelerators, 2 a 2-lane gpu (built as one), 3-4 cpus
    assert link_variants(fab) == {(1, False): [0, 1, 5], (2, False): [2], (2, True): [3, 4]}


def test_split_verilog_structure_and_lint(tmp_path, capsys):
    """``generate fabric --split`` of two 1-lane accelerators with per-destination
    admission (the link module then holds a ``DestAdmission`` too, and the top maps its
    ``o_dest_ready``): one link module instanced twice with their constants, one reduction
    unit module instanced by the switch twice, the top's ports those of the flat fabric,
    the port map the flat fabric's, and no lint finding."""
    from fusionfabric.cli import main
    from fusionfabric.lint import lint_verilog, top_ports
    out = tmp_path / "fab.v"
    assert main(["generate", "fabric", "--split", "--set", "endpoints=accelerator:1x2",
                 "--set", "fault_seed=7", "--set", "depth=32", "--set", "dest_credits=20",
                 "--name", "fab", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    names = re.findall(r"^converting (\S+)$", err, flags=re.M)
    text = out.read_text()
    assert text.startswith("`timescale 1ns/1ps\n")
    assert names == ["fab_reduce_unit", "fab_switch", "fab_link_acc1", "fab"]
    mods = _modules(text)
    for name in names:
        assert mods.count(name) == 1, (name, mods)
    # every other module is a submodule of one of these, named under it
    assert all(m in names or m.split(".")[0].lstrip("\\") in names for m in mods), mods
    flat = port_map(Fabric(endpoints="accelerator:1x2", depth=32, dest_credits=20), "fab")
    assert {"o_dest_ready__0", "o_dest_ready__1"} <= {p["name"] for p in flat["ports"]}
    assert top_ports(text, "fab") == {p["name"] for p in flat["ports"]}
    assert json.loads(out.with_suffix(".ports.json").read_text())["ports"] == flat["ports"]
    links = _instances(text, "fab", "fab_link_acc1")
    assert sorted(links) == ["link0", "link1"], links
    for e, inst in enumerate(sorted(links)):
        ports = links[inst]
        # lanes of endpoint e: up then down, one lane each, so the first is 2 e
        assert ports["i_node_id"] == f"8'h{e:02x}", ports
        assert ports["i_lane_base"] == f"16'h{2 * e:04x}", ports
        for j in range(2):
            x, y = seed_values(7 * 1000003 + 2 * e + j)
            assert ports[f"i_seed_x__{j}"] == f"32'd{x}", ports
            assert ports[f"i_seed_y__{j}"] == f"32'd{y}", ports
        assert ports["o_flips__0"].startswith("o_flips__"), ports
        assert ports["o_dest_ready"] == f"o_dest_ready__{e}", ports
    assert len(_instances(text, "fab", "fab_switch")) == 1
    # the switch's reduction units: one module, one instance per port
    assert sorted(_instances(text, "fab_switch", "fab_reduce_unit")) == ["unit0", "unit1"]
    result = lint_verilog(text, "fab", block="fabric")
    assert result.findings == [], result.findings


def test_split_of_another_block_exits_2_with_one_line(capsys):
    from fusionfabric.cli import main
    assert main(["generate", "scrambler", "--split"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--split" in lines[0] and "'scrambler'" in lines[0], lines
    # a switch without reduction units has nothing to split off
    assert main(["generate", "switch", "--split"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--split" in lines[0] and "reduce=false" in lines[0], lines


def test_split_switch_structure_and_lint(tmp_path, capsys):
    """``generate switch --split --set reduce=true``: one reduction unit module, instanced
    once per port by the switch, the switch's own ports and port map, no lint finding."""
    from fusionfabric.cli import main
    from fusionfabric.lint import lint_verilog, top_ports
    out = tmp_path / "sw.v"
    sets = ["--set", "n_ports=3", "--set", "data_width=64", "--set", "reduce=true"]
    assert main(["generate", "switch", "--split", *sets, "--name", "sw", "-o", str(out)]) == 0
    names = re.findall(r"^converting (\S+)$", capsys.readouterr().err, flags=re.M)
    assert names == ["sw_reduce_unit", "sw"]
    text = out.read_text()
    assert text.startswith("`timescale 1ns/1ps\n")
    mods = _modules(text)
    assert mods.count("sw") == 1 and mods.count("sw_reduce_unit") == 1, mods
    assert sorted(_instances(text, "sw", "sw_reduce_unit")) == ["unit0", "unit1", "unit2"]
    flat = port_map(get_block("switch").build(n_ports=3, data_width=64, reduce=True), "sw")
    assert top_ports(text, "sw") == {p["name"] for p in flat["ports"]}
    assert json.loads(out.with_suffix(".ports.json").read_text())["ports"] == flat["ports"]
    result = lint_verilog(text, "sw", block="switch")
    assert result.findings == [], result.findings


@pytest.mark.soak
@pytest.mark.cocotb
def test_split_runs_as_the_flat_fabric_icarus(tmp_path):
    """The heterogeneous rack (a 1-lane and a 2-lane accelerator, a cpu) at BER 1e-5 on
    every lane: the split design's record equals the flat design's, counter for counter."""
    from fusionfabric.tb.common import runner
    params = get_block("fabric").resolve({"n_endpoints": 3,
                                          "endpoints": "accelerator:1x1,accelerator:2x1,"
                                                       "cpu:2x1", "mem_bytes": 2048})
    wp = {"n_elems": 32 * 4 * 3, "cpu_endpoints": [2], "mem_bytes": 2048, "mem_ops": 16}
    recs = {}
    for split in (False, True):
        out = tmp_path / f"result{int(split)}.json"
        runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", params, sim="icarus",
                   testcase="test_workload", split=split, seed=5,
                   name=f"split_equivalence_{int(split)}",
                   test_args={"workload": "hetero-rack", "seed": 5, "params": wp,
                              "faults": {"ber": 1e-5, "slip_lane": -1},
                              "result_file": str(out)})
        recs[split] = json.loads(out.read_text())
    flat, split = recs[False], recs[True]
    assert flat["bit_exact"] and split["bit_exact"], (flat["error"], split["error"])
    # the lanes' errors are in the comparison: bits flipped, CRC errors and replays
    assert min(flat["flips"], flat["crc_errors"], flat["replays"]) > 0, flat
    assert set(flat) == set(split)
    for key in sorted(flat):
        assert flat[key] == split[key], (key, flat[key], split[key], "seed 5")
