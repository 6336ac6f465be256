"""``fusionfabric sweep`` / ``collective`` and the TOML configuration: outputs, and every
bad key or value reported in one line with the valid choices (exit status 2)."""

import csv
import io
import json

import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.config import ConfigError, load_config


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_sweep_json_csv_table_and_seed_line(capsys, tmp_path):
    base = ["sweep", "--ports", "8", "--pattern", "uniform", "--loads", "0.2:0.6:0.2",
            "--cycles", "600", "--seed", "9"]
    rc, out, err = run_cli(capsys, *base, "--json")
    assert rc == 0 and "seed 9" in err
    doc = json.loads(out)
    assert doc["seed"] == 9 and [p["load"] for p in doc["points"]] == [0.2, 0.4, 0.6]
    assert all(abs(p["accepted"] - p["load"]) < 0.05 for p in doc["points"])
    rc, out2, _ = run_cli(capsys, *base, "--json")
    assert json.loads(out2)["points"] == doc["points"]           # bit for bit
    rc, out, _ = run_cli(capsys, *base, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3 and float(rows[1]["offered"]) == pytest.approx(
        doc["points"][1]["offered"], rel=1e-5)
    plot = tmp_path / "s.png"
    rc, out, err = run_cli(capsys, *base, "--plot", str(plot))
    assert rc == 0 and plot.stat().st_size > 1000
    assert "rack aggregate 28.8 TB/s = 8 x 3.60 TB/s" in out


def test_config_file_and_set_overrides(capsys, tmp_path):
    f = tmp_path / "run.toml"
    f.write_text('[switch]\nn_ports = 6\nmode = "fifo"\n[run]\ncycles = 500\n'
                 'loads = "1.0"\nseed = 4\n')
    rc, out, err = run_cli(capsys, "sweep", "--config", str(f), "--set", "switch.n_ports=4",
                           "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["config"]["switch"]["n_ports"] == 4
    assert doc["config"]["switch"]["mode"] == "fifo" and doc["seed"] == 4


@pytest.mark.parametrize("argv, fragment", [
    (["sweep", "--pattern", "zigzag"], "not one of: uniform, permutation"),
    (["sweep", "--loads", "0.5:0.1:0.1"], "STOP is below START"),
    (["sweep", "--loads", "1.5"], "outside (0, 1]"),
    (["sweep", "--ports", "1"], "below the minimum 2"),
    (["sweep", "--ports", "eight"], "is not a valid int"),
    (["sweep", "--set", "switch.colour=red"], "keys of [switch]: n_ports"),
    (["sweep", "--set", "bogus=1"], "valid keys: switch.n_ports"),
    (["sweep", "--set", "nosuch.depth=1"], "sections: switch, link"),
    (["sweep", "--set", "depth"], "is not KEY=VALUE"),
    (["sweep", "--set", "mode=crossbar"], "not one of: voq, fifo"),
    (["sweep", "--set", "iterations=9"], "above the maximum"),
    (["sweep", "--ports", "4", "--set", "iterations=3"], "ceil(log2 n_ports)"),
    (["sweep", "--set", "run.engine=numpy"], "keys of [run]: cycles"),
    (["sweep", "--pattern", "trace"], "needs traffic.trace_file"),
    (["sweep", "--trace", "/nonexistent.csv", "--ports", "4"], "does not exist"),
    (["sweep", "--config", "/nonexistent.toml"], "does not exist"),
    (["collective", "allgather"], "not one of: allreduce, alltoall"),
    (["collective", "allreduce", "--algo", "tree"], "not one of: ring, switch"),
    (["collective", "alltoall", "--algo", "switch"], "allreduce only"),
    (["collective", "allreduce", "--bytes", "12Q"], "is not a size"),
    (["collective", "allreduce", "--dtype", "fp8"], "not one of: bf16"),
    (["collective", "allreduce", "--set", "phys.encoding=8b10b"], "none, 64b66b, 256b257b"),
])
def test_bad_input_is_one_line_with_the_choices(capsys, argv, fragment):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2
    lines = [l for l in err.splitlines() if l.startswith("fusionfabric: error")]
    assert len(lines) == 1 and fragment in lines[0], err
    assert "Traceback" not in err


def test_bad_toml_section_key_type_and_syntax(tmp_path):
    cases = {
        "[swich]\nn_ports = 4\n": "unknown section [swich]",
        "[switch]\nports = 4\n": "unknown key 'switch.ports'",
        "[switch]\nn_ports = \"four\"\n": "is not a valid int",
        "[link]\nlatency = -1\n": "below the minimum 0",
        "[switch\n": "not valid TOML",
        "n_ports = 4\n": "must be a table",
    }
    for text, fragment in cases.items():
        f = tmp_path / "c.toml"
        f.write_text(text)
        with pytest.raises(ConfigError, match=None) as ei:
            load_config(f)
        assert fragment in str(ei.value), (text, ei.value)


def test_trace_replay_csv_and_jsonl(capsys, tmp_path):
    csvf = tmp_path / "t.csv"
    csvf.write_text("cycle,source,destination,size\n0,0,1,2\n0,0,2,1\n5,3,0,4\n")
    jf = tmp_path / "t.jsonl"
    jf.write_text('{"cycle":0,"source":0,"destination":1,"size":2}\n'
                  '{"cycle":0,"source":0,"destination":2,"size":1}\n'
                  '{"cycle":5,"source":3,"destination":0,"size":4}\n')
    docs = []
    for f in (csvf, jf):
        rc, out, err = run_cli(capsys, "sweep", "--ports", "4", "--trace", str(f),
                               "--cycles", "40", "--set", "warmup=0", "--json")
        assert rc == 0, err
        docs.append(json.loads(out))
    assert docs[0]["points"] == docs[1]["points"]
    p = docs[0]["points"][0]
    assert p["packets"] == 3 and p["unfinished"] == 0
    assert p["per_port"]["accepted"][0] * 40 == 4           # four flits reached port 0
    bad = tmp_path / "bad.csv"
    bad.write_text("cycle,source,destination,size\n0,0,9,1\n")
    rc, out, err = run_cli(capsys, "sweep", "--ports", "4", "--trace", str(bad))
    assert rc == 2 and "bad.csv:2: destination=9 is outside 0..3" in err


def test_collective_output(capsys):
    rc, out, err = run_cli(capsys, "collective", "allreduce", "--ports", "8", "--bytes",
                           "1M", "--algo", "ring,switch", "--dtype", "bf16", "--json")
    assert rc == 0 and "seed" in err
    rows = json.loads(out)
    ring, sw = rows
    assert ring["busbw_factor"] == pytest.approx(2 * 7 / 8)
    assert sw["busbw_GBps"] > 1.6 * ring["busbw_GBps"]
    assert rows[0]["numerics"]["switch_tree_reproducible"]
