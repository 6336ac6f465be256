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
    (["--sim", "icarus", "--dark-lane", "100"], "--dark-lane '100'"),
    (["--sim", "icarus", "--dark-lane", "4:500"], "LANE '4'"),
    (["--sim", "icarus", "--dark-lane", "x:5"], "LANE 'x'"),
    (["--sim", "icarus", "--dark-lane", "0:x"], "--dark-lane 'x'"),
    (["--sim", "icarus", "--dark-lane", "0:100:0"], "--dark-lane '0'"),
    (["--sim", "icarus", "--dark-lane", "1:-5:10"], "--dark-lane '-5'"),
    (["--sim", "icarus", "--dark-lane", "ab:5:2000000"], "--dark-lane '2000000'"),
    (["--sim", "icarus", "--dark-lane", "0:1:2:3"], "--dark-lane '0:1:2:3'"),
    (["--dark-lane", "0:100:50"], "--dark-lane"),
    (["--sim", "icarus", "--dark-lane", "0:600", "--set", "cpl_timeout=0"], "cpl_timeout"),
    (["--sim", "icarus", "--dark-lane", "ba:600", "--set", "rx_credits=4"], "rx_credits"),
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
    """BER 1e-4 and one link drop (Icarus): nothing lost, and the channel's counts of
    flits hit by bit errors and flits cut by the drop, kept apart, bracket the receivers'
    CRC errors: every hit flit that arrives whole fails CRC and nothing else does, so
    CRC errors <= hit <= CRC errors + cut."""
    assert main(["link", "--ber", "1e-4", "--transactions", "24", "--seed", "5",
                 "--sim", "icarus", "--link-drops", "1", "--json"]) == 0
    out = capsys.readouterr().out
    stats = json.loads(out[out.index("{"):])
    assert stats["sent"] == stats["delivered"] == 24
    assert stats["duplicates"] == stats["corrupt"] == stats["lost"] == 0
    ev = stats["events"]
    assert "flits_hit_or_dropped" not in ev
    hit, cut, crc = (ev["flits_hit_by_bit_errors"], ev["flits_cut_by_drops"],
                     ev["crc_errors"])
    assert hit > 0 and cut > 0, ev
    assert crc <= hit <= crc + cut, ev
    assert ev["undetected"] == 0
    # the channel's any-fault counter: each flit once, whether hit, cut or both
    assert max(hit, cut) <= stats["flits_hit"] <= hit + cut, (stats["flits_hit"], ev)
    # the drop takes the link down; it comes back (both sides ACTIVE at the end)
    assert ev["link_downs"] >= 1 and ev["link_recoveries"] == ev["link_downs"], ev
    assert stats["status_a"]["state"] == stats["status_b"]["state"] == 2


def _rows(out):
    return dict(re.split(r"\s{2,}", ln.strip(), maxsplit=1) for ln in out.splitlines()
                if "  " in ln)


def _counts_add_up(stats):
    """Invariants of every run's counters, per side (docs/protocol.md): the replay timer's
    rewinds are among the replays, every failure has one cause (no peer resets here)."""
    for s in ("status_a", "status_b"):
        st = stats[s]
        assert st["replays"] >= st["timeouts"], st
        assert st["failures"] == st["fail_replay"] + st["fail_lost"] + st["fail_peer"], st
        assert st["fail_peer"] == 0, st
    ev = stats["events"]
    assert ev["replays"] >= ev["replay_timeouts"], ev
    assert ev["link_failures"] == ev["fail_replay"] + ev["fail_lost"], ev


@pytest.mark.cocotb
def test_link_dark_lane_reports_drops_and_relocks(capsys):
    """A->B lane 1 dark for 1,500 cycles through the PCS (with lane bursts): the report
    shows the lock loss and the relock on their own lines, nothing is lost, and the counts
    add up: relocks = lock losses and recoveries = downs (both chiplets ACTIVE again at
    the end), replays >= replay-timer replays, no failure (1,500 cycles is inside
    link_timeout), no completion timeout, nothing refused, and the testbench's own count
    of error completions (0) agrees with the chiplets'."""
    argv = ["link", "--transactions", "24", "--seed", "3", "--sim", "icarus",
            "--dark-lane", "1:500:1500", "--ber", "1e-5", "--lane-burst", "11:64"]
    assert main(argv + ["--json"]) == 0
    out = capsys.readouterr().out
    stats = json.loads(out[out.index("{"):])
    assert stats["sent"] == stats["delivered"] == 24
    assert stats["lost"] == stats["duplicates"] == stats["corrupt"] == 0
    assert stats["dark_cycles"] == 1500 and stats["dark_lane"].startswith("A->B lane 1 ")
    ev = stats["events"]
    assert ev["pcs_lock_losses"] >= 1 and ev["pcs_relocks"] == ev["pcs_lock_losses"], ev
    assert ev["link_downs"] >= 1 and ev["link_recoveries"] == ev["link_downs"], ev
    assert stats["status_a"]["state"] == stats["status_b"]["state"] == 2
    _counts_add_up(stats)
    assert ev["link_failures"] == ev["cpl_timeouts"] == 0, ev
    assert ev["refused_nonposted"] == ev["refused_posted"] == 0, ev
    assert stats["error_cpls_seen"] == {"error": 0, "timeout": 0}
    assert stats["refused_seen"] == {"posted": 0, "nonposted": 0}
    assert stats["unreported"] == 0 and stats["ledger_error"] is None


@pytest.mark.cocotb
def test_link_dark_lane_for_good_ends_in_a_report(capsys):
    """A->B lane 0 dark for good from cycle 560 (replay_limit 2, link_timeout 300,
    cpl_timeout 600 to keep it short): the run ends by itself with the link FAILED on both
    sides within the documented bound, exit status 1, and every request accounted for.
    The testbench's own counts (refusals by the port's failed status when a header was
    taken, ERROR and TIMEOUT completions seen at the ports) equal the chiplets' STATUS
    counters; its sender ledger holds (sent = delivered + refused + held, one completion
    per non-posted request); 0 unreported."""
    from fusionfabric.formats.chiplet import ChipletParams, dl_flit_slots

    sets = {"replay_limit": 2, "link_timeout": 300, "cpl_timeout": 600}
    argv = ["link", "--transactions", "40", "--seed", "4", "--sim", "icarus",
            "--dark-lane", "0:560"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    assert main(argv + ["--json"]) == 1
    out = capsys.readouterr().out
    stats = json.loads(out[out.index("{"):])
    sa, sb = stats["status_a"], stats["status_b"]
    # failed stays set through the retries (FAILED, then DOWN and INIT again: the state
    # at the end is any of them, never ACTIVE)
    assert sa["failed"] == sb["failed"] == 1 and 2 not in (sa["state"], sb["state"])
    assert stats["failed_at_end"] == {"a": 1, "b": 1}
    assert not stats["stopped_at_max_cycles"] and stats["dark_permanent"]
    # detection within max((replay_limit + 1) T, link_timeout) plus the flits in flight
    b = ChipletParams(**sets).fail_bounds()
    slack = 2 * dl_flit_slots(4) + 2 * 20 + 8
    for s in "ab":
        assert 0 < stats["first_failed"][s] - stats["dark_from"] <= \
            max(b["replay"], b["lost"]) + slack, stats["first_failed"]
    # every kind of outcome happened, and nothing is unaccounted for
    rs, ec, held = stats["refused_seen"], stats["error_cpls_seen"], stats["held"]
    assert stats["delivered"] > 0 and rs["posted"] > 0 and rs["nonposted"] > 0, stats
    assert ec["timeout"] > 0, ec
    assert stats["unreported"] == stats["not_taken"] == 0 and stats["ledger_error"] is None
    assert stats["lost"] == stats["duplicates"] == stats["corrupt"] == 0
    # the testbench's counts against the chiplets' counters
    assert ec["error"] == rs["nonposted"] == sa["cpl_refused"] + sb["cpl_refused"]
    assert ec["timeout"] == sa["cpl_timeouts"] + sb["cpl_timeouts"]
    assert rs["posted"] == sum(st[k] for st in (sa, sb)
                               for k in ("failed_multicast", "failed_reduce", "failed_result"))
    ev = stats["events"]
    assert ev["cpl_timeouts"] == ec["timeout"] and ev["refused_nonposted"] == ec["error"]
    assert ev["refused_posted"] == rs["posted"]
    # the ledgers: every request sent is delivered, refused or held
    led = stats["ledger"]
    assert sum(x["sent"] for x in led.values()) == stats["sent"] == 40
    assert sum(x["delivered"] for x in led.values()) == stats["delivered"]
    assert sum(x["refused"] for x in led.values()) == rs["posted"] + rs["nonposted"]
    assert sum(x["held"] for x in led.values()) == held["posted"] + held["nonposted"]
    for x in led.values():
        assert x["sent"] == x["delivered"] + x["refused"] + x["held"], x
    _counts_add_up(stats)
    assert ev["link_failures"] >= 2 and ev["link_recoveries"] == 0, ev


def test_vectors_flit_match_model(capsys):
    from fusionfabric.sim import chiplet as C
    assert main(["vectors", "flit", "--count", "3", "--seed", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for v in doc["vectors"]:
        flit = bytes.fromhex(v["dl_flit"])
        ok, h, tls = C.dl_parse(flit, 4)
        assert ok and [t.hex() for _, t in tls] == v["tl_flits"]
    assert main(["vectors", "flit", "--set", "tl_per_dl=0"]) == 2
