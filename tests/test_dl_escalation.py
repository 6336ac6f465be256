"""Fault escalation of the chiplet link (docs/protocol.md, "Fault escalation").

Units (Amaranth simulator) against the model in ``fusionfabric.sim.chiplet``:
the port's completion timer (:class:`CompletionTimerModel`: which tag expires when, the
error completion's bytes, late completions dropped and counted), the refusal of requests
while the link is failed (per-opcode counts), and the data-link escalation
(``DataLinkTx``: FAILED after exactly ``replay_limit`` rewinds without progress or
``lost_after`` cycles without a good flit, silence for the hold-off, then retraining).
Link runs (:mod:`fusionfabric.tb.chiplet.escalation`, two chiplets back to back) check
the promises end to end with :class:`LinkLedger`: a permanently dark direction, a short
outage, an always-corrupting channel. They are soak runs (about 1 000 cycles of the pair,
two minutes each on the shared machine): ``pytest -m soak tests/test_dl_escalation.py``.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.formats import chiplet as F
from fusionfabric.formats.chiplet import LinkState, Opcode, Status
from fusionfabric.rtl.chiplet import CompletionTracker, DataLinkTx, TransactionTx
from fusionfabric.sim import chiplet as C
from fusionfabric.sim.chiplet import CompletionTimerModel, Message


def _sim(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _completion_for(req: Message, completer: int) -> Message:
    return C.MemoryModel(completer).respond(req).with_src(completer)


# -- completion timer ------------------------------------------------------------------------

def _run_tracker(timeout, issues, cpls, cycles, node=7):
    """Drive a CompletionTracker: ``issues`` = {cycle: (Message, refused)}, ``cpls`` =
    {cycle: Message} (offered from that cycle until taken, in order); ``o_rsp`` always
    ready. Returns [(first-beat cycle, Message)] seen on ``o_rsp`` and the counters."""
    dut = CompletionTracker(timeout)
    out, counters = [], {}

    async def bench(ctx):
        ctx.set(dut.i_node_id, node)
        ctx.set(dut.o_rsp.ready, 1)
        pend, beats, got, first = [], [], [], None
        for cyc in range(cycles):
            if cyc in issues:
                msg, refused = issues[cyc]
                ctx.set(dut.i_issue, 1)
                ctx.set(dut.i_issue_tag, msg.tag)
                ctx.set(dut.i_issue_op, msg.opcode)
                ctx.set(dut.i_issue_len, msg.length)
                ctx.set(dut.i_issue_refused, refused)
            else:
                ctx.set(dut.i_issue, 0)
            if cyc in cpls:
                pend.extend(cpls[cyc].beats())
            ctx.set(dut.i_cpl.valid, bool(pend))
            if pend:
                ctx.set(dut.i_cpl.payload.as_value(), pend[0])
            await ctx.delay(1e-10)
            if pend and ctx.get(dut.i_cpl.ready):
                pend.pop(0)
            if ctx.get(dut.o_rsp.valid):
                word = ctx.get(dut.o_rsp.payload.as_value())
                if not got:
                    first = cyc
                got.append(word)
                f = F.TL_HEADER.unpack(got[0] >> F.SLOT_BITS)
                if len(got) == max(1, C.data_slots(f["opcode"], f["length"])):
                    out.append((first, Message.from_beats(got)))
                    got = []
            await ctx.tick()
        for n in ("timeouts", "refused", "late"):
            counters[n] = ctx.get(getattr(dut, f"o_{n}"))

    _sim(dut, bench)
    return out, counters


def test_completion_timer_expiry_edge_is_the_model():
    """A completion offered in the very cycle the model says the scan expires its tag is
    delivered; one offered a cycle later is dropped (late) and the tag completes TIMEOUT,
    with the model's error completion offered ERR_LATENCY cycles after the expiry."""
    T = 300
    model = CompletionTimerModel(T)
    rng = np.random.default_rng(5)
    ra = C.random_message(rng, [Opcode.READ], tag=17, dest=3)
    rb = C.random_message(rng, [Opcode.WRITE], tag=200, dest=3)
    ka, kb = model.expiry(ra.tag, 4), model.expiry(rb.tag, 6)
    ca, cb = _completion_for(ra.with_src(7), 3), _completion_for(rb.with_src(7), 3)
    assert kb < ka
    out, cnt = _run_tracker(T, {4: (ra, False), 6: (rb, False)}, {ka: ca, kb + 1: cb},
                            ka + 40)
    want_err = C.error_completion(rb, 7, Status.TIMEOUT)
    assert out == [(kb + model.ERR_LATENCY, want_err), (ka, ca)], out
    assert cnt == {"timeouts": 1, "refused": 0, "late": 1}
    assert model.outcome(ra.tag, 4, ka) == "ok" and model.outcome(rb.tag, 6, kb + 1) == "timeout"


@pytest.mark.parametrize("seed", [1, 2])
def test_completion_timer_random_against_model(seed):
    """Random non-posted requests (some refused), completions early, late or never, every
    tag's outcome as the model decides it: OK completions delivered unchanged, TIMEOUT and
    ERROR completions exactly the model's, late ones dropped and counted, no tag completed
    twice, every error completion no later than the model's expiry + the queue wait."""
    T = 260
    model = CompletionTimerModel(T)
    rng = np.random.default_rng(seed)
    issues, cpls, plan = {}, {}, {}
    tags = rng.permutation(256)[:48]
    cyc = 3
    for tag in tags:
        cyc += int(rng.integers(1, 12))
        req = C.random_message(rng, [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD],
                               tag=int(tag), dest=3)
        refused = bool(rng.random() < 0.15)
        issues[cyc] = (req, refused)
        kind = "never" if refused else ["early", "late", "never"][int(rng.integers(3))]
        t_c = None
        if kind == "early":
            t_c = cyc + int(rng.integers(5, T - 80))
        elif kind == "late":
            t_c = model.expiry(int(tag), cyc) + int(rng.integers(30, 200))
        if t_c is not None:
            while t_c in cpls:
                t_c += 1
            cpls[t_c] = _completion_for(req.with_src(7), 3)
        plan[int(tag)] = (req, cyc, refused, t_c)
    end = max(model.expiry(t, c, r) for t, (_, c, r, _) in plan.items())
    end = max([end] + list(cpls)) + 200
    out, cnt = _run_tracker(T, issues, cpls, end)
    by_tag = {}
    for first, msg in out:
        assert msg.tag not in by_tag, f"seed {seed}: tag {msg.tag} completed twice"
        by_tag[msg.tag] = (first, msg)
    assert set(by_tag) == set(plan), f"seed {seed}"
    want = {"timeouts": 0, "refused": 0, "late": 0}
    for tag, (req, t_i, refused, t_c) in plan.items():
        first, msg = by_tag[tag]
        # early completions are offered T - 80 cycles before the earliest expiry, late ones
        # 30 after the expiry: outcome decided by the model with margin to spare
        oc = model.outcome(tag, t_i, t_c if t_c is not None and t_c < t_i + T - 60 else None,
                           refused)
        if oc == "ok":
            assert msg == cpls[t_c], f"seed {seed} tag {tag}"
            continue
        assert msg == C.error_completion(req, 7, model.status(oc)), f"seed {seed} tag {tag}"
        k = model.expiry(tag, t_i, refused)
        # waits at most for the messages queued before it (4-entry queue, <= 17 beats each)
        assert k + model.ERR_LATENCY <= first <= k + model.ERR_LATENCY + 5 * 17, \
            f"seed {seed} tag {tag}: error completion at {first}, expiry {k}"
        want["refused" if refused else "timeouts"] += 1
        want["late"] += t_c is not None
    assert cnt == want, f"seed {seed}"


# -- refusal at the port --------------------------------------------------------------------

def test_refused_requests_counted_per_opcode():
    """While ``i_refuse``: each request is taken whole and dropped (no TL flit), posted ones
    counted per opcode, non-posted ones reported on ``o_issue`` with ``refused``; after
    ``i_refuse`` falls the packer packs exactly the model's TL flits of the rest."""
    rng = np.random.default_rng(9)
    ops = [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST, Opcode.REDUCE,
           Opcode.RESULT]
    refused_msgs = [C.random_message(rng, ops, tag=i, dest=2) for i in range(14)]
    later = [C.random_message(rng, ops, tag=100 + i, dest=2) for i in range(4)]
    dut = TransactionTx()
    issued, tl = [], []

    async def bench(ctx):
        ctx.set(dut.i_credit_ok, 3)
        ctx.set(dut.i_node_id, 0x33)
        ctx.set(dut.o_tl.ready, 1)
        for phase, msgs in ((1, refused_msgs), (0, later)):
            ctx.set(dut.i_refuse, phase)
            beats = [b for m in msgs for b in m.beats()]
            while beats:
                ctx.set(dut.i_req.valid, 1)
                ctx.set(dut.i_req.payload.as_value(), beats[0])
                await ctx.delay(1e-10)
                if ctx.get(dut.o_issue):
                    issued.append((ctx.get(dut.o_issue_tag), ctx.get(dut.o_issue_refused)))
                if ctx.get(dut.o_tl.valid):
                    tl.append(ctx.get(dut.o_tl.payload.as_value()))
                if ctx.get(dut.i_req.ready):
                    beats.pop(0)
                await ctx.tick()
            ctx.set(dut.i_req.valid, 0)
        for _ in range(30):
            await ctx.delay(1e-10)
            if ctx.get(dut.o_tl.valid):
                tl.append(ctx.get(dut.o_tl.payload.as_value()))
            await ctx.tick()
        for n in ("multicast", "reduce", "result"):
            counts[n] = ctx.get(getattr(dut, f"o_failed_{n}"))

    counts = {}
    _sim(dut, bench)
    want = {n: sum(m.opcode == getattr(Opcode, n.upper()) for m in refused_msgs)
            for n in ("multicast", "reduce", "result")}
    assert counts == want
    np_ = [(m.tag, 1) for m in refused_msgs if m.opcode in F.NON_POSTED]
    np_ += [(m.tag, 0) for m in later if m.opcode in F.NON_POSTED]
    assert issued == np_
    assert [F.TL_FLIT.unpack(w)["data"].to_bytes(64, "little") for w in tl] == \
        C.pack_tl([m.with_src(0x33) for m in later])


# -- data-link escalation -----------------------------------------------------------------

def _dl_run(params, cycles, good_until, ack_progress=False):
    """A DataLinkTx whose fake peer brings it up (init flit at cycle 40) and then sends a
    good flit every 5 cycles until ``good_until`` (acking nothing: ``ack`` stays 0), while
    one TL flit waits to be sent. Returns per cycle (state, replays, status outputs)."""
    dut = DataLinkTx(params)
    trace = []

    async def bench(ctx):
        ctx.set(dut.i_link_up, 1)
        ctx.set(dut.o_phy.ready, 1)
        ctx.set(dut.i_tl.payload.as_value(), F.TL_FLIT.pack(data=0x1234, vc=0))
        fed = False
        for cyc in range(cycles):
            ctx.set(dut.i_tl.valid, cyc >= 45 and not fed)
            good = cyc == 40 or (40 < cyc < good_until and cyc % 5 == 0)
            ctx.set(dut.i_rx_good, good)
            ctx.set(dut.i_rx_hdr.as_value(),
                    F.DL_HEADER.pack(init=1, init_seen=1, fresh=1, credit0=16, credit1=16)
                    if cyc == 40 else F.DL_HEADER.pack(ack=0, init_seen=1))
            await ctx.delay(1e-10)
            trace.append((ctx.get(dut.o_state), ctx.get(dut.o_replays), ctx.get(dut.o_failed),
                          ctx.get(dut.o_fail_replay), ctx.get(dut.o_fail_lost),
                          ctx.get(dut.o_phy.valid)))
            fed |= cyc >= 45 and ctx.get(dut.i_tl.ready)
            await ctx.tick()

    _sim(dut, bench)
    return trace


def _first(trace, pred):
    return next(i for i, t in enumerate(trace) if pred(t))


def test_replay_limit_then_holdoff_then_retrain():
    """The peer keeps talking but never acks the data flit: replay_limit timer rewinds, one
    replay timeout apart, then FAILED at the next one due (within ``fail_bounds()['replay']``
    of the flit's first send); silent for the hold-off; then DOWN, INIT (bring-up flits)."""
    p = F.ChipletParams(tl_per_dl=1, replay_depth=4, replay_timeout=20, replay_limit=3,
                        link_timeout=1000, retrain_holdoff=30)
    tr = _dl_run(p, 260, good_until=10_000)
    active = _first(tr, lambda t: t[0] == LinkState.ACTIVE)
    failed = _first(tr, lambda t: t[0] == LinkState.FAILED)
    rewinds = [i for i in range(1, failed + 1) if tr[i][1] != tr[i - 1][1]]
    assert len(rewinds) == p.replay_limit and tr[failed][1] == p.replay_limit
    # rewinds one replay timeout apart; FAILED one more timeout after the last
    assert all(b - a == p.timeout for a, b in zip(rewinds, rewinds[1:]))
    assert failed - rewinds[-1] == p.timeout
    # the timer starts when the flit is first sent (hi moves; no ack ever comes here)
    first_send = rewinds[0] - p.timeout
    assert active < first_send
    assert failed - first_send == (p.replay_limit + 1) * p.timeout <= p.fail_bounds()["replay"]
    assert tr[failed][2:5] == (1, 1, 0)
    # silent while FAILED (the flit in progress at most finishes)
    assert not any(t[5] for t in tr[failed + p.flit_slots + 3:failed + p.holdoff])
    down = _first(tr[failed:], lambda t: t[0] != LinkState.FAILED) + failed
    assert down - failed == p.holdoff and tr[down][0] == LinkState.DOWN
    assert tr[down + 1][0] == LinkState.INIT and tr[down + 1][2] == 1   # still failed
    back = _first(tr[down:], lambda t: t[0] == LinkState.ACTIVE) + down
    assert tr[back][2] == 0            # ACTIVE again clears ``failed``


def test_link_lost_exactly_after_the_timeout():
    """No good flit for ``lost_after`` cycles (peer silent from cycle 100): FAILED by the
    link-lost cause exactly ``lost_after`` cycles after the last good flit, then every
    hold-off + lost_after cycles again while the peer stays silent."""
    p = F.ChipletParams(tl_per_dl=1, replay_depth=4, replay_timeout=500, link_timeout=70,
                        retrain_holdoff=25)
    tr = _dl_run(p, 400, good_until=100)
    last_good = 95
    fails = [i for i in range(1, len(tr)) if tr[i][0] == LinkState.FAILED
             and tr[i - 1][0] != LinkState.FAILED]
    assert fails[0] - (last_good + 1) == p.fail_bounds()["lost"]
    assert all(b - a == p.holdoff + p.lost_after for a, b in zip(fails, fails[1:]))
    assert len(fails) >= 2 and tr[-1][4] == len(fails) and tr[-1][3] == 0


# -- link runs (two chiplets) ----------------------------------------------------------------

#: Small flits and short timers so that a run takes about a thousand cycles.
LINK = dict(tl_per_dl=1, replay_depth=4, rx_credits=4, replay_timeout=30, replay_limit=3,
            link_timeout=200, retrain_holdoff=20, cpl_timeout=300)
LATENCY = 4


def _slack(p):
    """Flits in flight when a fault starts: one on the wire, one in each pipeline."""
    return 2 * p.flit_slots + 2 * LATENCY + 8


def _check_fail_times(res, p, start, seed):
    """Both sides FAILED within the documented bounds after the fault started: a side with
    unacknowledged flits by the replay limit (its acks stop progressing within a round trip
    of the fault), any side by the link-lost timeout at the latest."""
    fc = res["fail_cycles"]
    b = p.fail_bounds()
    for s in "ab":
        assert fc[s] and start < fc[s][0] <= start + max(b["replay"], b["lost"]) + _slack(p), \
            f"seed {seed}: {fc}"
        st = res[f"status_{s}"]
        if st["fail_replay"]:
            assert fc[s][0] <= start + b["replay"] + _slack(p), f"seed {seed}: {fc}"
        # while the fault lasts, it keeps failing and retrying (the bring-up never
        # completes): both sides hold unacknowledged flits, so each retry ends at the
        # link-lost timeout or the progress watchdog, whichever is shorter, after the
        # hold-off (here stall_after = 150 < lost_after = 200)
        period = p.holdoff + min(p.lost_after, p.stall_after)
        assert all(y - x == period for x, y in zip(fc[s][1:], fc[s][2:])), \
            f"seed {seed}: {fc}, period {period}"
        assert len(fc[s]) >= 2 and st["failed"] == 1
        assert st["failures"] == st["fail_replay"] + st["fail_lost"] == len(fc[s])


@pytest.mark.soak
@pytest.mark.parametrize("kind", ["dark", "corrupt"])
def test_dead_direction_fails_and_every_request_completes(kind):
    """A→B dark (nothing arrives) or corrupted (every flit fails its CRC) from cycle 150
    on: both sides FAILED within the bounds (B by the link-lost timeout, A by the replay
    limit), both keep retraining and failing; every request is delivered at most once and
    in order, nothing after a gap; every non-posted request completes exactly once (OK only
    if delivered, TIMEOUT otherwise); sent = delivered + refused + held. Completions are
    one beat here (no READ: see docs/protocol.md on a READ_CPL cut by the failure)."""
    from fusionfabric.tb.chiplet.escalation import run_fault_scenario
    p = F.ChipletParams(**LINK)
    seed, start = 3 if kind == "dark" else 4, 150
    res = run_fault_scenario(LINK, 16, seed, [("ab", kind, start, None)], 950,
                             latency=LATENCY,
                             nonposted=(Opcode.WRITE, Opcode.ATOMIC_ADD))
    _check_fail_times(res, p, start, seed)
    acc = {s: res["ledgers"][s].check() for s in "ab"}
    for s in "ab":
        st = res[f"status_{s}"]
        assert acc[s]["completions"]["timeout"] == st["cpl_timeouts"] >= 1, f"seed {seed}"
        assert acc[s]["completions"]["error"] == st["cpl_refused"]
        for op, k in acc[s]["refused_posted"].items():
            assert st[f"failed_{op}"] == k
    # A's requests after the fault never reached B: A's held tail is what A still holds
    assert acc["a"]["held"] >= 1


@pytest.mark.soak
def test_short_outage_retrains_and_delivers_everything_once():
    """A→B dark for 300 cycles (longer than the link-lost timeout): both sides fail,
    retrain after the outage, and every request and completion is delivered exactly once,
    in order (the accelerators hold new requests while ``failed`` is set, so nothing is
    refused); the replay buffers are empty at the end."""
    from fusionfabric.tb.chiplet.escalation import run_fault_scenario
    params = dict(LINK, cpl_timeout=3000)
    p = F.ChipletParams(**params)
    seed, start, length = 5, 120, 300
    res = run_fault_scenario(params, 10, seed, [("ab", "dark", start, start + length)], 1300,
                             latency=LATENCY, hold_while_failed=True)
    fc = res["fail_cycles"]
    assert fc["a"] and fc["b"], f"seed {seed}: {fc}"
    for s in "ab":
        acc = res["ledgers"][s].check()
        st = res[f"status_{s}"]
        assert acc["sent"] == 10 and acc["delivered"] == 10 and acc["held"] == 0, \
            f"seed {seed}: {acc}"
        assert acc["completions"]["timeout"] == acc["completions"]["error"] == 0
        assert st["state"] == LinkState.ACTIVE and st["failed"] == 0 and st["unacked"] == 0
        assert st["late_cpl"] == 0 and st["failures"] >= 1
        # back to ACTIVE within one link-lost period and a hold-off after the outage
        back = next(i for i in range(start + length, len(res["trace"][s]))
                    if res["trace"][s][i] == LinkState.ACTIVE)
        assert back <= start + length + p.lost_after + p.holdoff + _slack(p)
