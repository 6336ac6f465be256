"""``fusionfabric link`` end to end (one short Icarus run) and its parameter errors."""

import json
import re

import pytest

from fusionfabric.cli import main


@pytest.mark.parametrize("argv,word", [
    (["--ber", "2"], "--ber"),
    (["--ber", "nan"], "--ber"),
    (["--transactions", "0"], "--transactions"),
    (["--transactions", "x"], "--transactions"),
    (["--sim", "modelsim"], "--sim"),
    (["--seed", "-1"], "--seed"),
    (["--set", "replay_depth=6"], "replay_depth=6"),
    (["--set", "bogus=1"], "bogus"),
    (["--burst", "8"], "--burst"),
    (["--sim", "icarus", "--dark-lane", "100"], "--dark-lane"),
    (["--sim", "icarus", "--dark-lane", "x:5"], "--dark-lane"),
    (["--sim", "icarus", "--dark-lane", "100:0"], "--dark-lane"),
    (["--sim", "icarus", "--dark-lane", "-5:10"], "--dark-lane"),
    (["--sim", "icarus", "--dark-lane", "5:2000000"], "--dark-lane"),
    (["--dark-lane", "100:50"], "--dark-lane"),
    (["--sim", "icarus", "--ber", "1e-4", "--lane-burst", "0:64"], "--lane-burst"),
    (["--sim", "icarus", "--ber", "1e-4", "--lane-burst", "11:65"], "--lane-burst"),
    (["--sim", "icarus", "--ber", "1e-4", "--lane-burst", "40:11"], "--lane-burst"),
    (["--sim", "icarus", "--ber", "1e-4", "--lane-burst", "11"], "--lane-burst"),
    (["--sim", "icarus", "--lane-burst", "11:64"], "--lane-burst"),
    (["--sim", "icarus", "--ber", "1e-2", "--lane-burst", "1:1"], "--lane-burst"),
    (["--sim", "icarus", "--ber", "1e-4", "--burst", "8", "--lane-burst", "11:64"],
     "--lane-burst"),
])
def test_link_bad_parameters(argv, word, capsys):
    assert main(["link"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


@pytest.mark.soak
def test_link_amaranth_reports_zero_loss_at_1e_4(capsys):
    assert main(["link", "--ber", "1e-4", "--transactions", "30", "--seed", "5",
                 "--json"]) == 0
    out = capsys.readouterr().out
    stats = json.loads(out[out.index("{"):])
    assert stats["sim"] == "amaranth"
    assert stats["sent"] == stats["delivered"] == 30
    assert stats["duplicates"] == stats["corrupt"] == stats["lost"] == 0
    assert stats["crc_errors"] == stats["flits_hit"]


@pytest.mark.cocotb
def test_link_runs_and_reports_zero_loss_at_1e_4(capsys):
    assert main(["link", "--ber", "1e-4", "--transactions", "24", "--seed", "5",
                 "--sim", "icarus", "--json"]) == 0
    out = capsys.readouterr().out
    stats = json.loads(out[out.index("{"):])
    assert stats["sent"] == stats["delivered"] == 24
    assert stats["duplicates"] == stats["corrupt"] == stats["lost"] == 0
    assert stats["crc_errors"] == stats["flits_hit"]


@pytest.mark.cocotb
def test_link_dark_lane_reports_drops_and_relocks(capsys):
    """A dark A->B lane through the PCS: the report shows the lock loss and the relock on
    their own lines, and nothing lost."""
    assert main(["link", "--transactions", "24", "--seed", "3", "--sim", "icarus",
                 "--dark-lane", "500:2000", "--ber", "1e-5", "--lane-burst", "11:64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = dict(re.split(r"\s{2,}", ln.strip(), maxsplit=1) for ln in lines if "  " in ln)
    assert row["lost"] == row["duplicates"] == row["corrupt"] == "0", lines
    assert row["dark-lane cycles"] == "2000", lines
    losses = int(row["PCS lock losses (events)"])
    assert losses >= 1 and int(row["PCS relocks"]) == losses, lines
    assert int(row["link downs (a chiplet left ACTIVE)"]) >= 1, lines


def test_vectors_flit_match_model(capsys):
    from fusionfabric.sim import chiplet as C
    assert main(["vectors", "flit", "--count", "3", "--seed", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for v in doc["vectors"]:
        flit = bytes.fromhex(v["dl_flit"])
        ok, h, tls = C.dl_parse(flit, 4)
        assert ok and [t.hex() for _, t in tls] == v["tl_flits"]
    assert main(["vectors", "flit", "--set", "tl_per_dl=0"]) == 2
