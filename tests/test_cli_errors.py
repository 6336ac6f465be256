"""The command line is honest about failures.

* Output paths: every ``-o``/``--plot``/``--out``/``--json`` is checked before work starts
  (path under a file, unwritable directory, a directory given as a file, a plot suffix
  matplotlib cannot write): exit 2, one line naming the path, and the work never runs.
* Run sizes: an absurd sweep is refused with its estimate; a long one prints its estimate
  before it starts.
* ``synth``: Yosys or nextpnr failing (stand-in tools run through the real subprocess
  path, failing at once) exits 1 with the tool's last error line from its own log, and
  nothing is saved or reused.
* ``link``: BER refused by flit survival unless ``--force``, ``--max-cycles`` ends the run
  with the report and exit 1, progress bar, and the event counts add up.
"""

import json
import re
import sys
from pathlib import Path

import pytest

from fusionfabric import synth as flow
from fusionfabric.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _one_error(capsys, *needles):
    err = capsys.readouterr().err
    lines = [l for l in err.strip().splitlines() if l.startswith("fusionfabric: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


class _Ran(Exception):
    """Raised by stand-ins of the work a command must not start."""


def _forbid(*_a, **_k):
    raise _Ran("the work started")


# ---- output paths ------------------------------------------------------------------------

@pytest.fixture
def afile(tmp_path):
    f = tmp_path / "afile.txt"
    f.write_text("x")
    return f


def _bad_paths(afile):
    """(argv, path named in the error) for every output option."""
    under = str(afile / "sub" / "x.json")
    return [
        (["generate", "crc", "-o", str(afile / "x.v")], str(afile)),
        (["vectors", "crc", "-o", under], str(afile)),
        (["vectors", "crc", "-o", str(afile.parent)], str(afile.parent)),
        (["vectors", "crc", "-o", "/proc/ff-no-such/x.json"], "/proc"),
        (["sweep", "--ports", "4", "--loads", "0.5", "--cycles", "100", "-o", under],
         str(afile)),
        (["sweep", "--ports", "4", "--loads", "0.5", "--cycles", "100", "--plot",
          str(afile.parent / "p.xyz")], ".xyz"),
        (["sweep", "--ports", "4", "--loads", "0.5", "--cycles", "100", "--plot",
          str(afile.parent / "plot")], "without a suffix"),
        (["collective", "allreduce", "--ports", "4", "--bytes", "4096", "-o", under],
         str(afile)),
        (["collective", "allreduce", "--ports", "4", "--bytes", "4096", "--plot",
          str(afile.parent / "c.docx")], ".docx"),
        (["demo", "--engine", "ideal", "--endpoints", "2", "--elems", "64", "--out",
          str(afile)], str(afile)),
        (["demo", "--engine", "ideal", "--endpoints", "2", "--elems", "64", "--out",
          "/proc/ff-no-such"], "/proc"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_bad_output_path_exits_2_before_work(case, afile, capsys, monkeypatch):
    import fusionfabric.commands.demo as demo
    import fusionfabric.rtl.export as export
    import fusionfabric.sim.fabric.collective as coll
    import fusionfabric.sim.fabric.run as run
    import fusionfabric.sim.vectors as vec

    monkeypatch.setattr(run, "run_sweep", _forbid)
    monkeypatch.setattr(coll, "collective", _forbid)
    monkeypatch.setattr(export, "to_verilog", _forbid)
    monkeypatch.setattr(vec, "all_vectors", lambda: {"crc": _forbid})
    monkeypatch.setattr(demo, "_run_ideal", _forbid)
    argv, named = _bad_paths(afile)[case]
    assert main(argv) == 2
    _one_error(capsys, named)


def test_output_under_missing_directories_is_created(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "v.json"
    assert main(["vectors", "crc", "--count", "2", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["block"] == "crc"


def test_plot_suffixes_are_matplotlibs(tmp_path):
    """Every suffix matplotlib's canvas lists is accepted, any other is not."""
    from matplotlib.figure import Figure

    from fusionfabric.cli import CliError
    from fusionfabric.commands._common import check_output

    for suffix in Figure().canvas.get_supported_filetypes():
        check_output(tmp_path / f"p.{suffix}", "--plot", "plot")
    for suffix in ("txt", "docx", "png2"):
        with pytest.raises(CliError, match=re.escape(f".{suffix}")):
            check_output(tmp_path / f"p.{suffix}", "--plot", "plot")


def test_synth_json_path_checked_before_tools(afile, capsys, monkeypatch):
    import fusionfabric.extras as extras
    monkeypatch.setattr(extras, "require", lambda *a: None)
    monkeypatch.setattr(flow, "check_tools", _forbid)
    assert main(["synth", "crc", "--json", str(afile / "r.json")]) == 2
    _one_error(capsys, str(afile))


def test_regress_out_checked_before_generation(afile, capsys, monkeypatch):
    import fusionfabric.commands.regress as regress
    import fusionfabric.extras as extras
    monkeypatch.setattr(extras, "require", lambda *a: None)
    monkeypatch.setattr(regress, "_generate", _forbid)
    monkeypatch.chdir(ROOT)
    assert main(["regress", "--no-regress", "--out", str(afile)]) == 2
    _one_error(capsys, str(afile))


# ---- run sizes ------------------------------------------------------------------------------

def test_absurd_sweep_is_refused_with_an_estimate(capsys, monkeypatch):
    import fusionfabric.sim.fabric.run as run
    monkeypatch.setattr(run, "run_sweep", _forbid)
    assert main(["sweep", "--cycles", "1000000000000"]) == 2
    line = _one_error(capsys, "point-cycles", "limit")
    assert re.search(r"about [0-9.e+]+ years", line), line


def test_long_sweep_prints_its_estimate_first(capsys, monkeypatch):
    """1 point x (warm-up 1e6/4 + 1e6 + drain 1e6) cycles at the documented rate."""
    import fusionfabric.commands.sweep as sweep
    import fusionfabric.sim.fabric.run as run
    monkeypatch.setattr(run, "run_sweep", _forbid)
    with pytest.raises(_Ran):
        main(["sweep", "--ports", "4", "--loads", "0.5", "--cycles", "1000000"])
    err = capsys.readouterr().err
    seconds = 2_250_000 / sweep.POINT_CYCLES_PER_S
    assert f"estimated run time about {seconds:.0f} s" in err, err
    assert "bench/model_speed.py" in err


@pytest.mark.parametrize("argv", [["vectors", "crc", "--count", "100001"],
                                  ["link", "--max-cycles", "0"],
                                  ["link", "--max-cycles", "1000000001"],
                                  ["link", "--max-cycles", "x"],
                                  ["link", "--transactions", "100001"]])
def test_size_limits(argv, capsys):
    assert main(argv) == 2
    _one_error(capsys, argv[-2])


# ---- synth: tool failures -------------------------------------------------------------------

FAKE_TOOL = r'''
import json, pathlib, re, sys
tool, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
log = pathlib.Path(args[args.index("-l") + 1])
if tool == "yosys":
    if mode == "yosys":
        log.write_text("1. Executing Verilog-2005 frontend\nERROR: planted yosys error in the log\n")
        print("console: yosys stopped", file=sys.stderr)
        sys.exit(1)
    top = re.search(r"-top (\w+)", args[args.index("-p") + 1]).group(1)
    pathlib.Path(top + ".json").write_text("{}")
    pathlib.Path("stat.json").write_text(json.dumps({"creator": "Yosys 0 (fake)",
        "design": {"num_cells_by_type": {"LUT4": 3, "TRELLIS_FF": 2}}}))
    log.write_text("ok\n")
    sys.exit(0)
if mode == "pnr":
    log.write_text("Info: Routing..\nERROR: planted route failure of net 'x'\n1 warning, 1 error\n")
    sys.exit(1)
pathlib.Path("report.json").write_text(json.dumps({"fmax": {"clk": {"achieved": 99.0}}}))
sys.exit(0)
'''


@pytest.fixture
def fake_flow(tmp_path, monkeypatch):
    """Stand-in Yosys/nextpnr scripts run by the real ``_run``; ``state['mode']``: 'yosys'
    (Yosys fails), 'pnr' (nextpnr fails) or 'ok'. Counts nextpnr runs."""
    import fusionfabric.extras as extras
    script = tmp_path / "fake_tool.py"
    script.write_text(FAKE_TOOL)
    state = {"mode": "ok", "runs": 0}
    real_run = flow._run

    def run(cmd, cwd, log, what, timeout):
        state["runs"] += 1
        return real_run(cmd, cwd, log, what, timeout)

    monkeypatch.setattr(flow, "_run", run)
    monkeypatch.setattr(flow, "check_tools", lambda target: (
        [sys.executable, str(script), "yosys", state["mode"]],
        [sys.executable, str(script), "pnr", state["mode"]]))
    monkeypatch.setattr(extras, "require", lambda *a: None)
    monkeypatch.setattr(flow, "_root", lambda: tmp_path / "synth")
    return state


def test_synth_yosys_failure_exits_1_with_the_log_line(fake_flow, tmp_path, capsys):
    fake_flow["mode"] = "yosys"
    js = tmp_path / "out.json"
    assert main(["synth", "crc", "--set", "data_width=8", "--json", str(js)]) == 1
    err = capsys.readouterr().err
    assert "ERROR: planted yosys error in the log" in err and "yosys.log" in err, err
    assert "nothing saved" in err and not js.exists()
    assert not list((tmp_path / "synth").glob("**/result.json"))
    assert not (tmp_path / "synth" / "crc-ecp5.json").exists()


def test_synth_pnr_failure_exits_1_and_is_not_saved(fake_flow, tmp_path, capsys):
    fake_flow["mode"] = "pnr"
    argv = ["synth", "crc", "--set", "data_width=8"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "ERROR: planted route failure of net 'x'" in err and "nextpnr.log" in err, err
    assert "1 warning, 1 error" not in err
    assert "(saved)" not in out and "pnr-failed" in err
    assert not list((tmp_path / "synth").glob("**/result.json"))
    failed = list((tmp_path / "synth").glob("**/failed.json"))
    assert len(failed) == 1 and json.loads(failed[0].read_text())["status"] == "pnr-failed"
    # the failure is not reused: the tools run again (Yosys + nextpnr = 2 runs each time)
    assert main(argv) == 1
    assert fake_flow["runs"] == 4 and "(saved)" not in capsys.readouterr().out
    # once the tools work, the result is saved and then reused
    fake_flow["mode"] = "ok"
    assert main(argv) == 0 and main(argv) == 0
    assert fake_flow["runs"] == 6 and "(saved)" in capsys.readouterr().out


def test_a_saved_tool_failure_of_an_older_flow_is_not_reused(fake_flow, tmp_path, capsys):
    fake_flow["mode"] = "ok"
    assert main(["synth", "crc", "--set", "data_width=8"]) == 0
    (saved,) = (tmp_path / "synth").glob("**/result.json")
    doc = json.loads(saved.read_text())
    for status, note in (("pnr-failed", "nextpnr failed: x"),
                         ("no-fit", "does not fit: nextpnr failed: too many"),
                         ("yosys-aborted", "aborted")):
        saved.write_text(json.dumps({**doc, "status": status, "note": note}))
        runs = fake_flow["runs"]
        assert main(["synth", "crc", "--set", "data_width=8"]) == 0
        assert fake_flow["runs"] == runs + 2, status
    capsys.readouterr()


# ---- link -----------------------------------------------------------------------------------

def _survival_threshold(tl_per_dl):
    """The BER at which a DL flit (4 x tl_per_dl + 1 slots of 128 bits) survives 1e-3."""
    bits = (4 * tl_per_dl + 1) * 128
    return 1 - 1e-3 ** (1 / bits)


@pytest.mark.parametrize("tl", [2, 8])
def test_link_ber_refused_by_flit_survival(tl, capsys, monkeypatch):
    from fusionfabric.tb.chiplet import amaranth_link
    monkeypatch.setattr(amaranth_link, "run_amaranth_link", _forbid)
    ber = _survival_threshold(tl)
    argv = ["link", "--set", f"tl_per_dl={tl}", "--progress", "off"]
    assert main(argv + ["--ber", f"{ber * 1.01:.6g}"]) == 2
    line = _one_error(capsys, "probability", "--force", f"{(4 * tl + 1) * 128} bits")
    p = float(re.search(r"probability ([0-9.e-]+)", line).group(1))
    assert 0.9e-3 < p < 1e-3
    with pytest.raises(_Ran):          # --force, or a BER just below: the run starts
        main(argv + ["--ber", f"{ber * 1.01:.6g}", "--force"])
    with pytest.raises(_Ran):
        main(argv + ["--ber", f"{ber * 0.99:.6g}"])


def test_link_long_run_prints_its_estimate(capsys, monkeypatch):
    from fusionfabric.commands import link
    from fusionfabric.tb.chiplet import amaranth_link
    monkeypatch.setattr(amaranth_link, "run_amaranth_link", _forbid)
    with pytest.raises(_Ran):
        main(["link", "--transactions", "100000", "--progress", "off"])
    err = capsys.readouterr().err
    cycles = link.FIXED_CYCLES + link.CYCLES_PER_TRANSACTION * 100_000
    assert f"about {cycles:,} cycles at 36 cycles/s" in err, err
    assert "estimated run time about" in err


def test_link_max_cycles_report_and_counts(capsys):
    """One real (Amaranth) run at BER 2e-4, bounded at 150 cycles: the report, a line
    naming the bound, exit 1, the progress bar (forced on) counting requests. The event
    counts add up even so (the channel's errors stop at the bound and the flits in flight
    arrive before the counters are read): with bit errors only, every DL flit the channel
    hit fails CRC at a receiver and none is delivered corrupt (hit = CRC errors +
    undetected, undetected = 0)."""
    assert main(["link", "--transactions", "20", "--seed", "1", "--ber", "2e-4",
                 "--max-cycles", "150", "--progress", "on", "--json"]) == 1
    out, err = capsys.readouterr()
    stats = json.loads(out[out.index("{"):])
    assert stats["stopped_at_max_cycles"] and stats["cycles"] == 150
    assert stats["delivered"] < 20, stats["delivered"]
    assert "stopped at --max-cycles 150" in err and "req" in err, err
    ev = stats["events"]
    assert set(ev) >= {"flits_hit_by_bit_errors", "crc_errors", "flits_discarded",
                       "replays", "flits_resent", "undetected"}
    assert ev["flits_hit_by_bit_errors"] > 0, f"seed 1 saw no error: {ev}"
    assert ev["flits_hit_by_bit_errors"] == ev["crc_errors"] + ev["undetected"], ev
    assert ev["undetected"] == 0 and stats["corrupt"] == stats["duplicates"] == 0


@pytest.mark.cocotb
def test_link_max_cycles_report_on_icarus(capsys):
    """The same bound on the cocotb testbench (Icarus, 250 cycles): the testbench stops
    the traffic at exactly the bound and still writes its counts, so the command prints
    the full report, the bound's line and exits 1; the progress bar (forced on) shows the
    cycle the testbench reached (read from its progress file). With bit errors only, the
    channel's count of flits hit equals the receivers' CRC errors plus undetected ones."""
    assert main(["link", "--sim", "icarus", "--transactions", "24", "--seed", "1",
                 "--ber", "2e-4", "--max-cycles", "250", "--progress", "on",
                 "--json"]) == 1
    out, err = capsys.readouterr()
    stats = json.loads(out[out.index("{"):])
    assert stats["stopped_at_max_cycles"] and stats["end_cycle"] == 250, stats["end_cycle"]
    # cut short: some request or completion still outstanding at the bound
    assert stats["sent"] == 24 and stats["lost"] > 0, stats["lost"]
    assert "stopped at --max-cycles 250" in err and "no counts" not in err, err
    assert re.search(r"req.*cycle \d", err), err
    ev = stats["events"]
    assert ev["flits_hit_by_bit_errors"] > 0, f"seed 1 saw no error: {ev}"
    assert ev["flits_hit_by_bit_errors"] == ev["crc_errors"] + ev["undetected"], ev
    assert ev["undetected"] == 0 and stats["corrupt"] == stats["duplicates"] == 0


def test_link_report_lines_name_what_they_count():
    """The labels: a drop is never counted as a plain bit-error hit; through the PCS the
    hit counter counts cycles, not flits."""
    from fusionfabric.commands.link import events
    base = {"flits_hit": 5, "crc_errors": 3, "replays": 1, "timeouts": 0, "corrupt": 0,
            "status_a": {"seq_err": 1, "dup": 0, "frame_err": 0, "tx_replayed": 2},
            "status_b": {"seq_err": 0, "dup": 1, "frame_err": 1, "tx_replayed": 0}}
    plain = {k: (label, v) for k, label, v in events(base, "icarus", 0)}
    assert plain["flits_hit_by_bit_errors"] == ("DL flits hit by bit errors", 5)
    assert plain["flits_discarded"][1] == 2 and plain["frame_errors"][1] == 1
    assert plain["flits_resent"][1] == 2
    drops = {k: label for k, label, _ in events({**base, "link_downs": 1,
                                                 "link_recoveries": 1}, "icarus", 2)}
    assert "flits_hit_by_bit_errors" not in drops and "link drops" in drops[
        "flits_hit_or_dropped"]
    # the channel's counts apart (tb.chiplet.harness.ChipletPair): hit and cut, each a line
    apart = {k: (label, v) for k, label, v in events(
        {**base, "flits_hit_err": 4, "flits_cut": 2}, "icarus", 1)}
    assert apart["flits_hit_by_bit_errors"] == ("DL flits hit by bit errors", 4)
    assert apart["flits_cut_by_drops"][1] == 2 and "drops" in apart["flits_cut_by_drops"][0]
    assert "flits_hit_or_dropped" not in apart
    # failures, completion timeouts and refusals: one line each, summed over both sides
    fail = {"failures": 3, "fail_replay": 1, "fail_lost": 2, "cpl_timeouts": 5,
            "cpl_refused": 7, "failed_multicast": 1, "failed_reduce": 2, "late_cpl": 1}
    other = {"failures": 1, "fail_replay": 0, "fail_lost": 1, "cpl_timeouts": 0,
             "cpl_refused": 4, "failed_result": 3, "late_cpl": 0}
    ev = {k: (label, v) for k, label, v in events(
        {**base, "status_a": {**base["status_a"], **fail},
         "status_b": {**base["status_b"], **other}}, "icarus", 0)}
    want = {"link_failures": 4, "fail_replay": 1, "fail_lost": 3, "cpl_timeouts": 5,
            "refused_nonposted": 11, "refused_posted": 6, "late_completions": 1}
    assert {k: ev[k][1] for k in want} == want
    assert "replay limit" in ev["fail_replay"][0] and "link lost" in ev["fail_lost"][0]
    assert "TIMEOUT" in ev["cpl_timeouts"][0] and "ERROR" in ev["refused_nonposted"][0]
    assert len({label for label, _ in ev.values()}) == len(ev)     # no two alike
    pcs = {k: label for k, label, _ in events({**base, "pcs": True, "pcs_lock_losses": 1,
                                               "pcs_relocks": 1}, "icarus", 0)}
    assert "cycles" in pcs["cycles_with_bit_errors"] and "pcs_relocks" in pcs


@pytest.mark.parametrize("argv,match", [
    (["--seed", "x"], "--seed 'x' must be an integer"),
    (["--seed", "-1"], "--seed '-1' must be an integer"),
    (["--rows", "ber,restart"], "--rows 'ber,restart': 'restart' is not one of"),
    (["--rows", ","], "--rows ',': 'empty'"),
    (["--json", "/proc/no/such/dir/x.json"], "--json"),
])
def test_fault_table_bad_arguments_exit_2(argv, match):
    """bench/fault_table.py: one line naming the bad value, exit 2, before any run."""
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fault_table.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and match in lines[0], proc.stderr
