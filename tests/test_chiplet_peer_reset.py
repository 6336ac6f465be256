"""A chiplet reset alone in the middle of traffic (docs/protocol.md, "Peer reset and link
reset"): the cocotb test tb/chiplet/test_peer_reset.py on Icarus, two chiplets back to back
(:class:`fusionfabric.tb.chiplet.harness.ChipletPair` with ``resets=True``).

The run's verdict is the testbench's: the surviving side's requests each delivered at most
once, in order, the undelivered ones one contiguous run, every non-posted one completed
exactly once (OK only if delivered, with the completer's response; TIMEOUT or ERROR
otherwise: none unreported); the reset side's old life a delivered prefix and no old
response taken for a new request; its new life exactly once; both sides ACTIVE again
within :func:`retrain_bound` cycles of the reset's end.
"""

import pytest

from fusionfabric.formats.chiplet import ChipletParams
from fusionfabric.tb.chiplet.harness import ChipletPair
from fusionfabric.tb.common import runner

#: Small DL flits and short timers so that a run is a few thousand cycles; ``rx_credits``
#: 8 >= 5, so the receivers deliver whole messages.
PARAMS = dict(tl_per_dl=1, replay_depth=4, rx_credits=8, replay_timeout=30, replay_limit=3,
              link_timeout=300, retrain_holdoff=20, cpl_timeout=600)
LATENCY = 4


def retrain_bound(params: dict, latency: int = LATENCY, drain: int = 17) -> int:
    """Cycles from the end of the peer's reset to both sides ACTIVE again (docs/protocol.md,
    "Peer reset and link reset"): the reset side's first bring-up flit (``F`` + 3 pipeline
    cycles) reaches the survivor (channel ``latency`` + 2 for the check), which is FAILED
    after finishing its flit in progress (``F``); it holds off (``holdoff``), walks out the
    replay buffer (``replay_depth`` cycles, in parallel) and waits for its receiver to
    finish the message in progress (``drain``: at most 17 beats, stretched by the
    accelerator's backpressure); then DOWN, INIT (2), and the bring-up: its bring-up flit
    (``F`` + 3, waiting up to ``F`` for the flit in progress), the peer's answer with
    ``init_seen`` (up to ``2F`` + 3), its first normal flit (up to ``2F`` + 3), each
    crossing the channel (``latency`` + 2)."""
    p = ChipletParams(**params)
    F = p.flit_slots
    detect = F + 3 + latency + 2 + F
    back = p.holdoff + max(p.replay_depth, 4 * drain) + 2 + (2 * F + 3) * 3 + 3 * (latency + 2)
    return detect + back


def _run(seed, name, pcs=False, **args):
    from fusionfabric.tb.chiplet.harness import ChipletPcsPair
    if pcs:
        comp = ChipletPcsPair(resets=True, **PARAMS)
        bound = retrain_bound(PARAMS, latency=20)    # lanes 4 + PCS and adapters
    else:
        comp = ChipletPair(latency=LATENCY, resets=True, **PARAMS)
        bound = retrain_bound(PARAMS)
    return runner.run("chiplet-pcs-pair-reset" if pcs else "chiplet-pair-reset",
                      "fusionfabric.tb.chiplet.test_peer_reset", PARAMS, sim="icarus",
                      seed=seed, name=name, component=comp,
                      test_args={"retrain_bound": bound, **args})


@pytest.mark.cocotb
def test_peer_reset_in_traffic():
    """Chiplet B reset alone for 8 cycles at cycle 300 of random two-way traffic (30
    requests per side and life, 20 % posted, 20 % idle and backpressure): one link reset
    (by A), both ACTIVE again within the bound."""
    result = _run(1, "peer-reset-b", n=30, reset_side="b", reset_at=300, link_resets=1)
    assert result.tests and not result.failed


@pytest.mark.cocotb
def test_peer_reset_in_first_bring_up_converges():
    """The corner case (docs/protocol.md): B reset for one cycle at cycle 18. A goes ACTIVE
    on a bring-up flit of B's old life; B's new life takes A's fresh bring-up flits and
    normal flits (ack 0, no credits, generation 0) and goes ACTIVE with ``peer_active``; A,
    without ``peer_active``, refreshes on B's fresh flits with ``init_seen`` = 0 (generation
    1); B takes A's fresh flits for a peer reset (link reset); A ignores B's normal flits
    (``gen_seen`` 0) and comes up with B's new life: one link reset, both ACTIVE again
    within the bound, the verdict holds for both sides."""
    result = _run(1, "peer-reset-b-bringup", n=20, reset_side="b", reset_at=18,
                  reset_cycles=1, link_resets=1)
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("seed", [7, 8])
def test_peer_reset_slow_completer(seed):
    """A's accelerator holds every response 200 cycles: its answers to B's old requests
    come after the link reset and are dropped (``stale_rsp``), and B's new requests reuse
    their tags (held on A's ``o_req`` until the old answer is gone); no old answer is taken
    for a new request (the verdict's completion check)."""
    result = _run(seed, f"peer-reset-slow-{seed}", n=40, reset_side="b", reset_at=400,
                  rsp_delay=200, stale_rsp=True)
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_peer_reset_catches_planted_stale(monkeypatch):
    """The verdict catches a completer side that forgets which responses are stale: with
    TransactionTx's ``stale`` vector held at 0 (planted after the RTL's own update, last
    assignment wins), an old response of A reaches B as the completion of a new request
    with the same tag (seed 7 of the slow-completer run)."""
    from fusionfabric.rtl.chiplet import tl_tx

    orig = tl_tx.TransactionTx.elaborate

    def planted(self, platform):
        m = orig(self, platform)
        if self.stamp_src:
            m.d.sync += self._stale.eq(0)
        return m

    monkeypatch.setattr(tl_tx.TransactionTx, "elaborate", planted)
    with pytest.raises(runner.CocotbFailure, match="is not its response"):
        runner.run("chiplet-pair-reset-planted", "fusionfabric.tb.chiplet.test_peer_reset",
                   PARAMS, sim="icarus", seed=7, name="peer-reset-planted-stale",
                   component=ChipletPair(latency=LATENCY, resets=True, **PARAMS),
                   planted_fault=True,
                   test_args={"n": 40, "reset_side": "b", "reset_at": 400, "rsp_delay": 200,
                              "retrain_bound": retrain_bound(PARAMS)})


@pytest.mark.cocotb
@pytest.mark.soak
@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("seed,reset_at", [(2, 150), (3, 450), (4, 900), (5, 10), (6, 22)])
def test_peer_reset_soak(side, seed, reset_at):
    """Either side reset at other times (during the first bring-up, at its end, in traffic)
    with other seeds, 40 requests per side and life."""
    result = _run(seed, f"peer-reset-{side}-{seed}-{reset_at}", n=40, reset_side=side,
                  reset_at=reset_at)
    assert result.tests and not result.failed


@pytest.mark.cocotb
@pytest.mark.soak
def test_peer_reset_through_pcs():
    """The same through the 2-lane PCS (ChipletPcsPair: the chiplet alone is reset, its PCS
    keeps its lock), B reset at cycle 600 (bench/fault_table.py's row)."""
    result = _run(1, "peer-reset-pcs", pcs=True, n=40, reset_side="b", reset_at=600)
    assert result.tests and not result.failed
