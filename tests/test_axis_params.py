"""The AXI4-Stream wrappers (rtl/axis.py, docs/axis.md): port names a bus finder binds by
prefix, and bad parameters refused with one line naming the value."""

import json

import pytest

from fusionfabric.cli import main
from fusionfabric.portdoc import disown
from fusionfabric.rtl.blocks import all_blocks
from fusionfabric.rtl.export import port_map


def _ports(block, **params):
    component = all_blocks()[block].build(**params)
    disown(component)   # only the signature is read
    return {p["name"]: p for p in port_map(component, "top")["ports"]}


def test_switch_axis_ports():
    ports = _ports("switch-axis", n_ports=3, data_width=32)
    for p in range(3):
        s = {n[len(f"s_axis_{p}_"):] for n in ports if n.startswith(f"s_axis_{p}_")}
        m = {n[len(f"m_axis_{p}_"):] for n in ports if n.startswith(f"m_axis_{p}_")}
        assert s == {"tdata", "tkeep", "tlast", "tvalid", "tready", "tdest", "tuser"}
        assert m == s | {"tid"}
        for sig, width in (("tdata", 32), ("tkeep", 4), ("tdest", 8), ("tuser", 18)):
            assert ports[f"s_axis_{p}_{sig}"]["width"] == width
            assert ports[f"s_axis_{p}_{sig}"]["direction"] == "input"
            assert ports[f"m_axis_{p}_{sig}"]["direction"] == "output"
        assert ports[f"s_axis_{p}_tready"]["direction"] == "output"
        assert ports[f"m_axis_{p}_tready"]["direction"] == "input"
    # no lib.stream switch port is left at the top
    assert not [n for n in ports if n.startswith(("i_port", "o_port"))]
    assert "i_config__payload" in ports and "o_stats__2" in ports
    # keep=False: no tkeep input (it would be unused), tkeep output still there
    ports = _ports("switch-axis", n_ports=2, keep=False)
    assert "s_axis_0_tkeep" not in ports and ports["m_axis_0_tkeep"]["width"] == 8


def test_chiplet_axis_ports():
    ports = _ports("chiplet-axis")
    for prefix in ("s_axis_req", "m_axis_req", "s_axis_rsp", "m_axis_rsp"):
        sigs = {n[len(prefix) + 1:] for n in ports if n.startswith(prefix + "_")}
        want = {"tdata", "tlast", "tvalid", "tready", "tdest", "tid", "tuser"}
        assert sigs == (want | {"tkeep"} if prefix.startswith("m_") else want), prefix
        assert ports[f"{prefix}_tdata"]["width"] == 128
        assert ports[f"{prefix}_tuser"]["width"] == 112
    assert {"o_axis_req_framing", "o_axis_rsp_framing", "o_phy__payload", "i_node_id",
            "o_status"} <= set(ports)


@pytest.mark.parametrize("block,sets,needles", [
    ("switch-axis", ["data_width=12"], ["data_width=12"]),
    ("switch-axis", ["reduce=1"], ["keep=True", "reduce=True"]),
    ("switch-axis", ["n_ports=1"], ["n_ports=1"]),
    ("chiplet-axis", ["tl_per_dl=0"], ["tl_per_dl", "0"]),
])
def test_bad_parameters(tmp_path, capsys, block, sets, needles):
    argv = ["generate", block, "-o", str(tmp_path / "x.v")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [l for l in err.strip().splitlines() if l.startswith("fusionfabric: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not (tmp_path / "x.v").exists()


def test_generate_writes_the_ports(tmp_path, capsys):
    out = tmp_path / "sw.v"
    assert main(["generate", "switch-axis", "--set", "n_ports=4", "-o", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    for name in ("s_axis_3_tdata", "m_axis_0_tid", "m_axis_2_tkeep", "s_axis_1_tready"):
        assert name in text
    written = json.loads(out.with_suffix(".ports.json").read_text())
    assert {p["name"] for p in written["ports"]} >= {"s_axis_0_tlast", "m_axis_3_tuser"}
