"""``fusionfabric demo`` (sim/commands/demo.py): table, JSON, plots and errors through the
ideal-network engine, and the RTL path's plumbing through a stand-in runner. The RTL
fabric runs themselves are the fabric testbench's (tb/fabric) and the lead's."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fusionfabric.formats.chiplet import Opcode
from fusionfabric.cli import main
from fusionfabric.commands import demo

FAST = ["--endpoints", "4", "--elems", "256", "--tokens", "8", "--d-model", "64"]


def _demo(capsys, tmp_path, *extra):
    rc = main(["demo", "--engine", "ideal", "--out", str(tmp_path), *FAST, *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_ideal_table_json_and_plots(capsys, tmp_path):
    rc, out, _ = _demo(capsys, tmp_path, "--seed", "5")
    assert rc == 0, out
    for word in ("workload", "bytes moved", "cycles", "goodput/port", "speedup", "replays",
                 "relocks", "bit-exact", "seed", "allreduce-switch", "allreduce-ring",
                 "moe-alltoall", "every run bit-exact"):
        assert word in out
    report = json.loads((tmp_path / "demo.json").read_text())
    assert report["seed"] == 5 and report["endpoints"] == 4 and report["all_bit_exact"]
    runs = {r["workload"]: r for r in report["runs"]}
    assert set(runs) == {"allreduce-switch", "allreduce-ring", "moe-alltoall", "hetero-rack"}
    het = runs["hetero-rack"]                     # endpoint 3 a cpu, 0-2 accelerators
    assert het["bit_exact"] and het["stats"]["kinds"] == ["accelerator"] * 3 + ["cpu"]
    assert "goodput per kind, hetero-rack (clean): accelerator x3: rx " in out
    assert "; cpu x1: rx " in out
    sw, ring = runs["allreduce-switch"], runs["allreduce-ring"]
    assert sw["speedup"] == pytest.approx(ring["cycles"] / sw["cycles"])
    assert f"{sw['speedup']:.2f}x" in out
    assert sw["stats"]["bytes_moved"] == 4 * 256 * 2
    assert len(sw["goodput"]["rx"]) == 4
    assert sw["goodput"]["rx"][0] == pytest.approx(256 * 2 / (sw["cycles"] * 16))
    for png in ("goodput_per_port.png", "cycles.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_json_output_and_subset(capsys, tmp_path):
    rc, out, _ = _demo(capsys, tmp_path, "--json", "--workloads", "moe-alltoall",
                       "--skew", "0", "--top-k", "1", "--hetero-cpus", "0")
    assert rc == 0
    report = json.loads(out)
    [run] = report["runs"]
    assert run["workload"] == "moe-alltoall" and run["bit_exact"]
    assert run["params"] == {"tokens_per_endpoint": 8, "d_model": 64, "skew": 0.0,
                             "top_k": 1}
    assert run["speedup"] is None


def test_mismatch_exits_1_and_names_the_seed(capsys, tmp_path, monkeypatch):
    import fusionfabric.sim.workloads as wl

    class Corrupting(wl.IdealNetwork):
        def __init__(self, *a, **kw):
            def tamper(i, dest, msg):
                if msg.opcode == Opcode.RESULT and i == 3:
                    data = bytearray(msg.data)
                    data[1] ^= 0x40
                    return replace(msg, data=bytes(data))
                return msg
            super().__init__(*a, tamper=tamper, **kw)

    monkeypatch.setattr(wl, "IdealNetwork", Corrupting)
    rc, out, _ = _demo(capsys, tmp_path, "--seed", "9", "--workloads",
                       "allreduce-switch,allreduce-ring")
    assert rc == 1
    assert "NO" in out and "SOME RUNS NOT BIT-EXACT" in out
    assert "allreduce-switch: endpoint" in out and "(seed 9)" in out


def _stand_in_params(args, n):
    """The fabric block's parameters without importing the RTL (only what the demo uses)."""
    sets = dict(item.split("=") for item in args.set)
    return {"n_endpoints": n, "n_chunks": int(sets.get("n_chunks", 16))}


def test_fabric_params_come_from_the_block():
    from fusionfabric.rtl.blocks import all_blocks, get_block

    if "fabric" not in all_blocks():
        pytest.skip("the fabric block is not registered")
    args = demo_args("--set", "n_chunks=4", "--set", "rx_credits=32", "--endpoints", "4")
    p = demo._fabric_params(args, 4)
    assert p == get_block("fabric").resolve({"n_endpoints": 4, "n_chunks": 4,
                                             "rx_credits": 32})
    with pytest.raises(demo.CliError, match="--endpoints"):
        demo._fabric_params(demo_args("--set", "n_endpoints=3"), 8)


def demo_args(*argv):
    from fusionfabric.cli import build_parser
    return build_parser().parse_args(["demo", *argv])


def test_rtl_path_through_a_stand_in_runner(capsys, tmp_path, monkeypatch):
    """The demo hands the fabric testbench the workload, seed, parameters, faults and a
    result file, and reads the schema back (here a runner that plays the workload on the
    ideal network and writes that file, as the testbench does)."""
    from fusionfabric.sim.workloads import IdealNetwork, make_workload, result_record
    from fusionfabric.tb.common import runner

    calls = []

    def fake_run(block, module, params, *, sim, seed, testcase, test_args, waves, name,
                 vpi="all"):
        calls.append(dict(block=block, module=module, params=params, sim=sim, seed=seed,
                          testcase=testcase, test_args=test_args, waves=waves, vpi=vpi))
        w = make_workload(test_args["workload"], params["n_endpoints"], test_args["seed"],
                          **test_args["params"])
        res = IdealNetwork(params["n_endpoints"], seed).run(w)
        faults = test_args["faults"]
        with open(test_args["result_file"], "w") as f:
            json.dump(result_record(w, res["cycles"], replays=3 if faults else 0,
                                    relocks=1 if faults else 0), f)
        return None

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "4",
               "--ber", "1e-4", "--slip", "2", "--set", "n_chunks=4",
               "--workloads", "allreduce-switch,allreduce-ring", "--fec-ber", "none",
               "--hetero-cpus", "0"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert len(calls) == 4                        # 2 workloads x (clean, faults)
    c = calls[-1]
    assert c["block"] == "fabric" and c["module"] == "fusionfabric.tb.fabric.test_fabric"
    assert c["vpi"] == "top"          # the Verilator build that fits the 8-endpoint fabric
    assert c["sim"] == "icarus" and c["seed"] == 4 and c["waves"] is False
    assert c["params"]["n_endpoints"] == 4 and c["params"]["n_chunks"] == 4
    slip_at = c["test_args"]["faults"].pop("slip_at")
    assert c["test_args"]["faults"] == {"ber": 1e-4, "slip_lane": 2}
    # mid-run: half the ring's cycles on the ideal network (the RTL is slower)
    ring = make_workload("allreduce-ring", 4, 4, n_elems=256)
    assert slip_at == IdealNetwork(4, 4, n_chunks=4).run(ring)["cycles"] // 2
    assert calls[0]["test_args"]["faults"] is None
    assert c["test_args"]["params"] == {"n_elems": 256}
    assert calls[0]["test_args"]["params"] == {"n_elems": 256, "n_chunks": 4,
                                               "message_bytes": 256}
    assert "ber 0.0001 + slip lane 2" in out and "RTL fabric on icarus" in out
    report = json.loads((tmp_path / "demo.json").read_text())
    assert [r["replays"] for r in report["runs"]] == [0, 0, 3, 3]
    assert [r["relocks"] for r in report["runs"]] == [0, 0, 1, 1]
    runs = report["runs"]                        # speedup also between the fault runs
    assert runs[2]["speedup"] == pytest.approx(runs[3]["cycles"] / runs[2]["cycles"])
    assert report["runs"][3]["ideal_cycles"] == 2 * slip_at or \
        report["runs"][3]["ideal_cycles"] == 2 * slip_at + 1


def test_fec_run_through_a_stand_in_runner(capsys, tmp_path, monkeypatch):
    """The FEC run: a smaller fabric with ``lane_profile="rs544"`` at ``--fec-ber``, no
    slip, its own workloads; the FEC counters of the record reach the table and JSON."""
    from fusionfabric.sim.workloads import IdealNetwork, make_workload, result_record
    from fusionfabric.tb.common import runner

    calls = []

    def fake_run(block, module, params, *, sim, seed, testcase, test_args, waves, name,
                 vpi="all"):
        calls.append(dict(params=params, test_args=test_args))
        n = params["n_endpoints"]
        w = make_workload(test_args["workload"], n, test_args["seed"], **test_args["params"])
        res = IdealNetwork(n, seed).run(w)
        fec = ({"codewords": 900, "corrected_codewords": 41 + len(calls),
                "corrected_symbols": 44, "uncorrectable": 0}
               if params.get("lane_profile") == "rs544" else None)
        with open(test_args["result_file"], "w") as f:
            json.dump(result_record(w, res["cycles"], **({"fec": fec} if fec else {})), f)

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)
    rc = main(["demo", "--sim", "verilator", "--out", str(tmp_path), *FAST, "--seed", "2",
               "--no-faults", "--workloads", "allreduce-ring", "--hetero-cpus", "0"])
    out, _ = capsys.readouterr()
    assert rc == 0 and len(calls) == 1          # --no-faults: no FEC run either
    calls.clear()
    rc = main(["demo", "--sim", "verilator", "--out", str(tmp_path), *FAST, "--seed", "2",
               "--faults", "--workloads", "allreduce-ring", "--fec-ber", "2e-4",
               "--fec-workloads", "moe-alltoall", "--hetero-cpus", "0"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert len(calls) == 2
    fec = calls[1]
    assert fec["params"]["lane_profile"] == "rs544" and fec["params"]["n_endpoints"] == 2
    assert fec["test_args"]["faults"] == {"ber": 2e-4, "slip_lane": -1, "lanes": "rs544"}
    assert fec["test_args"]["workload"] == "moe-alltoall"
    assert "lane_profile" not in calls[0]["params"]
    report = json.loads((tmp_path / "demo.json").read_text())
    r = report["runs"][1]
    assert r["endpoints"] == 2 and len(r["goodput"]["rx"]) == 2
    assert r["fec"]["corrected_codewords"] == 43
    assert "rs544 FEC, ber 0.0002" in out and "43 (44)" in out


def test_dark_lane_through_a_stand_in_runner(capsys, tmp_path, monkeypatch):
    """``--dark-lane LANE[:START[:CYCLES]]`` reaches the fault runs only (mid-run start by
    default, as the slip), and each fault run prints one line per kind of link event
    under its heading, each the sum of the testbench's per-endpoint chiplet and PCS
    counters (the stand-in's own numbers, summed here by hand)."""
    from fusionfabric.formats.chiplet import STATUS
    from fusionfabric.rtl.fabric.fabric import LINK_STATUS
    from fusionfabric.sim.workloads import IdealNetwork, make_workload, result_record
    from fusionfabric.tb.common import runner

    calls = []
    zero = STATUS.unpack(0)

    def fake_run(block, module, params, *, sim, seed, testcase, test_args, waves, name,
                 vpi="all"):
        calls.append(test_args)
        n = params["n_endpoints"]
        w = make_workload(test_args["workload"], n, test_args["seed"], **test_args["params"])
        res = IdealNetwork(n, seed).run(w)
        eps = [{"flips": 5 * e, "crc_errors": e, "link": {**LINK_STATUS.unpack(0),
                                                           "up_drops": e, "down_drops": 1},
                "chiplet_ep": {**zero, "crc_err": e, "replays": 2, "timeouts": 1},
                "chiplet_sw": {**zero, "crc_err": 1, "replays": e, "failures": 1,
                               "fail_lost": 1}} for e in range(n)]
        with open(test_args["result_file"], "w") as f:
            json.dump({**result_record(w, res["cycles"]), "endpoints": eps}, f)

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "3",
               "--workloads", "allreduce-ring", "--fec-ber", "none", "--slip", "-1",
               "--dark-lane", "6", "--hetero-cpus", "0"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    clean, fault = calls
    assert clean["faults"] is None
    lane, start, cycles = fault["faults"]["dark_lane"]
    ring = make_workload("allreduce-ring", 4, 3, n_elems=256)
    assert (lane, cycles) == (6, 1000)
    assert start == IdealNetwork(4, 3, n_chunks=4).run(ring)["cycles"] // 2
    # one line per kind under the run's heading, each the sum over the 4 endpoints'
    # records: flips 0+5+10+15, relocks (0+1)+(1+1)+(2+1)+(3+1), CRC errors (e + 1),
    # replays 2 + e, replay timeouts 1 each, failures and link-lost failures 1 each
    lines = out.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith("events, allreduce-ring")]
    assert len(head) == 1 and "lane 6 dark 1,000 cycles" in lines[head[0]], out
    block = []
    for l in lines[head[0] + 1:]:
        if not l.startswith("  "):
            break
        label, value = l.strip().rsplit(None, 1)
        block.append((label, int(value.replace(",", ""))))
    want = {"bits flipped": sum(5 * e for e in range(4)),
            "PCS relocks": sum(e + 1 for e in range(4)),
            "DL flits failing CRC": sum(e + 1 for e in range(4)),
            "replays (go-back-N": sum(2 + e for e in range(4)),
            "replays started by the replay timer": 4,
            "link failures (entries": 4, "link failures: replay limit": 0,
            "link failures: link lost": 4, "completion timeouts": 0,
            "non-posted requests refused": 0}
    assert len(block) == len(want) == len(demo.EVENTS) + 2, block
    for prefix, count in want.items():
        got = [v for label, v in block if label.startswith(prefix)]
        assert got == [count], (prefix, block)
    # the note on bits against flits follows the blocks
    assert demo.FLIPS_NOTE in lines, out
    calls.clear()
    main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--faults",
          "--workloads", "allreduce-ring", "--fec-ber", "none", "--dark-lane", "1:70:300"])
    assert calls[0]["faults"]["dark_lane"] == [1, 70, 300]


def test_rtl_path_missing_result_file(capsys, tmp_path, monkeypatch):
    from fusionfabric.tb.common import runner

    def failing_run(*a, **kw):
        raise runner.CocotbFailure("cocotb tb.fabric.test_fabric failed (seed 4)\n"
                                   "  test_workload: failure: links not up " + "x" * 2000 +
                                   "\nTraceback (most recent call last):\n  more")

    monkeypatch.setattr(runner, "run", failing_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "4",
               "--no-faults", "--workloads", "allreduce-ring"])
    out, _ = capsys.readouterr()
    assert rc == 1 and "failed (seed 4)" in out and "run failed" in out
    assert "links not up" in out and "Traceback" not in out and "x" * 500 not in out
    report = json.loads((tmp_path / "demo.json").read_text())
    assert "Traceback" in report["runs"][0]["error"]          # the full text is kept


@pytest.mark.parametrize("argv,match", [
    (["--elems", "100"], "--elems 100 must be a multiple of 32 x endpoints = 128"),
    (["--elems", "lots"], "--elems 'lots' is not a valid integer"),
    (["--endpoints", "1"], "--endpoints '1' must be in 2 .. 128"),
    (["--sim", "modelsim"], "--sim 'modelsim'"),
    (["--engine", "spice"], "--engine 'spice'"),
    (["--workloads", "allreduce,moe-alltoall"], "'allreduce'"),
    (["--seed", "-3"], "--seed '-3'"),
    (["--ber", "often"], "--ber 'often'"),
    (["--skew", "11"], "--skew '11'"),
    (["--d-model", "100"], "--d-model 100 must be a multiple of 32"),
    (["--top-k", "5"], "--top-k '5' must be in 1 .. 4"),
    (["--slip", "16"], "--slip '16' must be in -1 .. 15"),
    (["--faults"], "--faults needs the RTL fabric"),
    (["--waves"], "--waves needs the RTL fabric"),
    (["--slip-at", "100"], "--slip-at needs the RTL fabric"),
    (["--reduce-bytes", "100"], "--reduce-bytes 100 is not 64, 128, 192 or 256"),
    (["--set", "am_period=3"], "only n_chunks=N applies to --engine ideal"),
    (["--faults", "--no-faults"], "not allowed with argument"),
    (["--fec-ber", "often"], "--fec-ber 'often'"),
    (["--fec-ber", "0.5"], "--fec-ber '0.5' must be in"),
    (["--fec-endpoints", "1"], "--fec-endpoints '1' must be in 2 .. 128"),
    (["--fec-workloads", "ring"], "--fec-workloads: 'ring'"),
    (["--dark-lane", "16"], "--dark-lane '16': LANE 16 must be in 0 .. 15"),
    (["--dark-lane", "3:x"], "--dark-lane '3:x' is not LANE[:START[:CYCLES]] (integers)"),
    (["--dark-lane", "3:10:0"], "--dark-lane '3:10:0': CYCLES 0 must be in 1 .. 1000000"),
    (["--dark-lane", "3:-1"], "--dark-lane '3:-1': START -1 must be in"),
    (["--dark-lane", "3::5"], "--dark-lane '3::5' is not LANE[:START[:CYCLES]]"),
    (["--dark-lane", "3"], "--dark-lane needs the fault runs of the RTL fabric"),
])
def test_bad_values_exit_2(capsys, tmp_path, argv, match):
    rc, out, err = _demo(capsys, tmp_path, *argv)
    assert rc == 2
    assert match in err and "Traceback" not in err
    assert not (tmp_path / "demo.json").exists()


def test_regress_command_keeps_the_old_demo():
    from fusionfabric.cli import build_parser

    args = build_parser().parse_args(["regress", "--no-regress", "--sim", "icarus"])
    assert args.command == "regress" and args.no_regress


def test_testbench_report_schema_is_read(capsys, tmp_path, monkeypatch):
    """A record in the shape of tb/fabric's FabricTB.report (per-endpoint counters, no
    ``stats``): bytes, goodput, CRC errors and flips come from ``endpoints``."""
    from fusionfabric.tb.common import runner

    def fake_run(block, module, params, *, test_args, **kw):
        eps = [{"endpoint": e, "sent_bytes": 512, "received_bytes": 512 + 64 * e,
                "crc_errors": e, "flips": 2 * e} for e in range(4)]
        rec = {"workload": test_args["workload"], "cycles": 1000, "replays": 5,
               "relocks": 2, "endpoints": eps}
        with open(test_args["result_file"], "w") as f:
            json.dump(rec, f)

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)
    rc = main(["demo", "--sim", "verilator", "--out", str(tmp_path), *FAST, "--faults",
               "--slip-at", "300", "--workloads", "allreduce-ring", "--fec-ber", "none",
               "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    [r] = json.loads(out)["runs"]
    assert r["faults"] == {"ber": 1e-5, "slip_lane": 1, "slip_at": 300}
    assert r["bit_exact"] and r["stats"]["bytes_moved"] == 2048
    assert (r["crc_errors"], r["flips"], r["replays"], r["relocks"]) == (6, 12, 5, 2)
    assert r["goodput"]["rx"] == [pytest.approx((512 + 64 * e) / 16000) for e in range(4)]


@pytest.mark.soak
@pytest.mark.cocotb
def test_demo_on_the_rtl_fabric(capsys, tmp_path):
    """The whole demo on a 2-endpoint RTL fabric (Icarus), clean and with faults: every
    workload bit-exact, the fault runs show replays and a relock. Minutes, hence soak."""
    rc = main(["demo", "--sim", "icarus", "--endpoints", "2", "--elems", "1024",
               "--tokens", "8", "--d-model", "64", "--ber", "1e-4", "--seed", "3",
               "--fec-ber", "none", "--out", str(tmp_path), "--json"])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    assert rc == 0, [r["error"] for r in report["runs"]]
    assert all(r["bit_exact"] for r in report["runs"]) and len(report["runs"]) == 6
    faulty = [r for r in report["runs"] if r["faults"]]
    assert sum(r["replays"] for r in faulty) > 0
    assert all(r["relocks"] >= 1 for r in faulty if r["cycles"] > r["faults"]["slip_at"])


def _ideal_runner(monkeypatch, calls, hits=None):
    """A stand-in for the RTL runner: the ideal network runs the workload (the cpus served
    by the memory target model) and writes its results record, with ``hits`` added when
    the testbench is asked for ``count_hits``; each call's params and test args go to
    ``calls``."""
    from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
    from fusionfabric.sim.workloads import IdealNetwork, make_workload, result_record
    from fusionfabric.tb.common import runner

    def fake_run(block, module, params, *, sim, seed, testcase, test_args, waves, name,
                 vpi="all"):
        calls.append(dict(params=params, test_args=test_args))
        n = params["n_endpoints"]
        cpus = (fabric_kwargs(parse_endpoints(params["endpoints"]))["cpu_endpoints"]
                if params.get("endpoints") else ())
        w = make_workload(test_args["workload"], n, test_args["seed"], **test_args["params"])
        res = IdealNetwork(n, seed, cpu_endpoints=cpus,
                           mem_bytes=params.get("mem_bytes", 4096)).run(w)
        rec = result_record(w, res["cycles"])
        if test_args.get("count_hits"):
            rec["hits"] = hits
        with open(test_args["result_file"], "w") as f:
            json.dump(rec, f)

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(demo, "_fabric_params", _stand_in_params)


def test_hetero_run_through_a_stand_in_runner(capsys, tmp_path, monkeypatch):
    """The heterogeneous run: the same fabric with its last endpoints as cpus (the
    ``endpoints`` block parameter), a clean run of hetero-rack; the per-kind goodput line
    comes from its record. The stand-in serves the cpus with the memory target model."""
    calls = []
    _ideal_runner(monkeypatch, calls)
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "3",
               "--no-faults", "--workloads", "allreduce-switch", "--hetero-cpus", "2"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert len(calls) == 2
    het = calls[1]
    assert het["params"]["endpoints"] == "accelerator:2x2,cpu:2x2"
    assert het["params"]["n_endpoints"] == 4 and het["params"]["mem_bytes"] == 4096
    assert het["test_args"]["workload"] == "hetero-rack" and het["test_args"]["faults"] is None
    assert het["test_args"]["params"]["cpu_endpoints"] == [2, 3]
    assert "endpoints" not in calls[0]["params"]
    assert "goodput per kind, hetero-rack (clean): accelerator x2: rx " in out
    assert "; cpu x2: rx " in out and "ATOMIC_ADD" in out
    for bad in ("3", "-1", "x"):
        assert main(["demo", "--engine", "ideal", "--out", str(tmp_path), *FAST,
                     "--hetero-cpus", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "hetero-cpus" in err[0], err


def _hits_record(flits_hit, crc_on_hit, cut, undetected, n_dirs=4):
    """A results record's ``hits`` in the shape of tb/fabric/hits.py: per link direction
    counters (direction d gets d-th share), and their ``total``."""
    dirs = [{"direction": f"{'up' if d % 2 == 0 else 'down'}{d // 2}", "flits_hit": 0,
             "crc_err_on_hit": 0, "flits_cut": 0, "undetected": 0} for d in range(n_dirs)]
    for key, v in (("flits_hit", flits_hit), ("crc_err_on_hit", crc_on_hit),
                   ("flits_cut", cut), ("undetected", undetected)):
        for d in range(n_dirs):                 # spread v over the directions
            dirs[d][key] = v // n_dirs + (1 if d < v % n_dirs else 0)
    total = {k: sum(x[k] for x in dirs) for k in ("flits_hit", "crc_err_on_hit",
                                                  "flits_cut", "undetected")}
    return {"directions": dirs, "total": total}


def _block(out, heading):
    lines = out.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith(heading)]
    assert len(head) == 1, out
    block = {}
    for l in lines[head[0] + 1:]:
        if not l.startswith("  "):
            break
        label, value = l.strip().rsplit(None, 1)
        block[label] = int(value.replace(",", ""))
    return block


def test_count_hits_through_a_stand_in_runner(capsys, tmp_path, monkeypatch):
    """``--count-hits``: ``count_hits=1`` reaches the testbench in the 64b/66b fault runs
    only (not the clean, FEC or heterogeneous runs); each prints the DL flits hit, cut and
    undetected errors summed over the link directions of its record's ``hits``."""
    calls = []
    _ideal_runner(monkeypatch, calls, _hits_record(117, 117, 30, 0))
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "4",
               "--workloads", "allreduce-ring", "--fec-ber", "1e-4", "--fec-workloads",
               "allreduce-ring", "--hetero-cpus", "1", "--count-hits"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    kinds = [("fec" if (c["test_args"]["faults"] or {}).get("lanes") == "rs544" else
              "faults" if c["test_args"]["faults"] else "clean", c["test_args"]["workload"])
             for c in calls]
    assert kinds == [("clean", "allreduce-ring"), ("faults", "allreduce-ring"),
                     ("fec", "allreduce-ring"), ("clean", "hetero-rack")]
    assert [c["test_args"].get("count_hits") for c in calls] == [None, 1, None, None]
    block = _block(out, "events, allreduce-ring (ber 1e-05 + slip lane 1)")
    assert block == {"DL flits hit by bit errors": 117,
                     "DL flits cut (never received whole; replayed)": 30,
                     "undetected errors (hit flits passing CRC)": 0}, out
    assert "FLIT ACCOUNTING" not in out and "every run bit-exact" in out
    report = json.loads((tmp_path / "demo.json").read_text())
    assert report["hit_failures"] == []
    assert report["runs"][1]["hit_counts"] == {"flits_hit": 117, "crc_err_on_hit": 117,
                                               "flits_cut": 30, "undetected": 0}
    assert all("hit_counts" not in r for i, r in enumerate(report["runs"]) if i != 1)
    # without --count-hits: no count_hits, no lines, no keys
    calls.clear()
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "4",
               "--workloads", "allreduce-ring", "--fec-ber", "none", "--hetero-cpus", "0"])
    out, _ = capsys.readouterr()
    assert rc == 0 and all("count_hits" not in c["test_args"] for c in calls)
    assert "DL flits hit" not in out and "events," not in out
    report = json.loads((tmp_path / "demo.json").read_text())
    assert "hit_failures" not in report and all("hit_counts" not in r
                                                 for r in report["runs"])


@pytest.mark.parametrize("hits,why", [
    (_hits_record(117, 115, 30, 0), "CRC errors on hit flits 115 != DL flits hit 117"),
    (_hits_record(117, 117, 30, 2), "2 undetected errors"),
    (None, "no hits"),
])
def test_count_hits_identity_failure_exits_1(capsys, tmp_path, monkeypatch, hits, why):
    """A record whose flits hit and CRC errors on them differ, or with an undetected
    error (or without ``hits``), fails the demo with one line naming the run and seed."""
    calls = []
    _ideal_runner(monkeypatch, calls, hits)
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "7",
               "--faults", "--workloads", "moe-alltoall", "--fec-ber", "none",
               "--count-hits"])
    out, _ = capsys.readouterr()
    assert rc == 1, out
    fails = [l for l in out.splitlines() if l.startswith("flit accounting, ")]
    assert len(fails) == 1, out
    assert fails[0].startswith("flit accounting, moe-alltoall (ber 1e-05 + slip lane 1): ")
    assert why in fails[0] and fails[0].endswith("(seed 7)")
    assert "FLIT ACCOUNTING FAILED" in out.splitlines()[-1]
    # --json: the JSON on stdout, the failure line on stderr, exit 1
    rc = main(["demo", "--sim", "icarus", "--out", str(tmp_path), *FAST, "--seed", "7",
               "--faults", "--workloads", "moe-alltoall", "--fec-ber", "none",
               "--count-hits", "--json"])
    out, err = capsys.readouterr()
    assert rc == 1 and json.loads(out)["hit_failures"] == fails
    assert err.strip().splitlines()[-1] == fails[0]


@pytest.mark.parametrize("argv,match", [
    (["--sim", "verilator"], "--count-hits needs the RTL fabric on --sim icarus "
                             "(the flit accounting reads the chiplets' internal signals), "
                             "not --sim verilator"),
    (["--sim", "amaranth"], "not --sim amaranth"),
    (["--engine", "ideal", "--sim", "icarus"], "not --engine ideal"),
    (["--sim", "icarus", "--no-faults"], "--count-hits needs the fault runs"),
    (["--sim", "icarus", "--set", "lane_profile=rs544"],
     "--count-hits needs 64b/66b lanes, 2 per direction (here lane_profile=rs544"),
    (["--sim", "icarus", "--set", "n_lanes=4"],
     "--count-hits needs 64b/66b lanes, 2 per direction (here lane_profile=64b66b, "
     "lanes per direction 4)"),
])
def test_count_hits_bad_setups_exit_2(capsys, tmp_path, monkeypatch, argv, match):
    """``--count-hits`` off Icarus, off the RTL engine, without fault runs or off 64b/66b
    lanes of 2: status 2 and one line, before any simulation."""
    from fusionfabric.tb.common import runner

    def no_run(*a, **kw):
        raise AssertionError("a simulation started")

    def params(args, n):          # the stand-in's, plus the lane parameters of --set
        sets = dict(item.split("=") for item in args.set)
        p = _stand_in_params(args, n)
        p.update({k: sets[k] for k in ("lane_profile",) if k in sets})
        p.update({k: int(sets[k]) for k in ("n_lanes",) if k in sets})
        return p

    monkeypatch.setattr(runner, "run", no_run)
    monkeypatch.setattr(demo, "_fabric_params", params)
    rc = main(["demo", "--out", str(tmp_path), *FAST, "--fec-ber", "none", "--count-hits",
               *argv])
    _, err = capsys.readouterr()
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], err
    assert not (tmp_path / "demo.json").exists()
