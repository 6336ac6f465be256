"""``fusionfabric link`` end to end (one short Icarus run) and its parameter errors."""

import json

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
])
def test_link_bad_parameters(argv, word, capsys):
    assert main(["link"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


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


def test_vectors_flit_match_model(capsys):
    from fusionfabric.sim import chiplet as C
    assert main(["vectors", "flit", "--count", "3", "--seed", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for v in doc["vectors"]:
        flit = bytes.fromhex(v["dl_flit"])
        ok, h, tls = C.dl_parse(flit, 4)
        assert ok and [t.hex() for _, t in tls] == v["tl_flits"]
    assert main(["vectors", "flit", "--set", "tl_per_dl=0"]) == 2
