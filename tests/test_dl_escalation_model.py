"""``DataLinkTx``'s fault escalation against :class:`DlEscalationModel`, cycle by cycle.

A fake peer (a seeded random trace reacting to what the DUT shows) drives ``DataLinkTx`` in
the Amaranth simulator: link drops of random length, talk with and without ack progress,
bursts of NAKs, silences shorter and longer than the link-lost timeout, bring-up flits while
the DUT is ACTIVE, stray flits while the link is down. Small parameters make FAILED and
retraining frequent. The model gets the same inputs; the one thing it takes from the DUT is
when a new data flit went out (read off the wire: the trailer's ``data`` bit and sequence
number), since the send path is outside its scope. Every cycle the DUT's ``o_state``,
``o_failed``, ``o_failures``, ``o_fail_replay``, ``o_fail_lost``, ``o_replays`` and
``o_timeouts`` must equal the model's (and ``o_fail_peer`` stay 0). Scripted peers aim at
the rules a random trace rarely decides: both causes due in one cycle, a failure in the
cycle the link drops, the link-lost timer's start, a NAK outside the window, the timer
restart at a NAK, the rewind count across a link drop and a failure, a flit while DOWN; and
a PHY flapping faster than the replay timeout (no rewind at all: the progress watchdog
fails the DL).
"""

import functools

import numpy as np
import pytest
from amaranth import Cat
from amaranth.sim import Simulator

from fusionfabric.formats import chiplet as F
from fusionfabric.formats.chiplet import SEQ_BITS, LinkState
from fusionfabric.rtl.chiplet import DataLinkTx
from fusionfabric.sim.chiplet import DlEscalationModel

#: a data flit's first slot is on ``o_phy`` this many cycles after the sender picks it
PICK_TO_FIRST = 2
MOD = 1 << SEQ_BITS
CREDITS = 1024            # buffer size the fake peer advertises (never the limit here)


def _random_params(rng):
    return F.ChipletParams(tl_per_dl=1, replay_depth=4, rx_credits=16,
                           replay_timeout=int(rng.integers(10, 41)),
                           replay_limit=int(rng.integers(1, 5)),
                           link_timeout=int(rng.integers(50, 301)),
                           retrain_holdoff=int(rng.integers(10, 61)))


class _Peer:
    """The far side, one decision per cycle from what the DUT shows (state, wire).

    Phases: ``talk`` (a flit every flit time, acks progressing), ``stall`` (no ack progress:
    the replay timer fires), ``nak`` (mostly NAKs), ``silent`` (nothing, link up: shorter or
    longer than the link-lost timeout), ``drop`` (``link_up`` low, a rare stray flit). In
    some phases no TL flit is offered, so everything gets acknowledged."""

    PHASES = ("talk", "stall", "nak", "silent", "drop")
    WEIGHTS = (0.35, 0.2, 0.15, 0.15, 0.15)

    def __init__(self, rng, p):
        self.rng, self.p = rng, p
        self.flit = p.flit_slots
        self.phase, self.left = "drop", int(rng.integers(1, 20))   # link comes up later
        self.seen_hi = 0          # one past the highest sequence seen on the wire
        self.ack = 0              # the peer's cumulative ack
        self.taken = 0            # TL flits the DUT took (the peer frees them at once)
        self.was_active = False   # the DUT has been ACTIVE (its flits are not fresh now)
        self.next_flit = 0
        self.feed = True          # TL flits are offered to the DUT in this phase
        self.gen = 0              # the generation of the DUT's last trailer on the wire

    def on_send(self, pick):
        """A new data flit was picked in cycle ``pick`` (seen on the wire now)."""

    def _plain(self, state, ack):
        """The scripted peers' flit: bring-up (with ``init_seen``) unless the DUT is ACTIVE,
        else a normal flit returning every credit; no NAK."""
        if state != LinkState.ACTIVE:
            return dict(init=1, init_seen=1, fresh=int(not self.was_active), ack=ack,
                        credit0=CREDITS, credit1=CREDITS, gen_seen=self.gen)
        return dict(ack=ack, credit0=self.taken, gen_seen=self.gen)

    def _next_phase(self):
        r = self.rng
        self.phase = str(r.choice(self.PHASES, p=self.WEIGHTS))
        self.feed = r.random() < 0.7
        if self.phase == "silent":
            L = self.p.lost_after
            self.left = int(r.integers(1, L) if r.random() < 0.5 else r.integers(L, 2 * L))
        elif self.phase == "drop":
            self.left = int(r.integers(1, 300))
        else:
            self.left = int(r.integers(20, 250))
        self.next_flit = int(r.integers(self.flit))

    def _header(self, state):
        r = self.rng
        prog, nak = {"talk": (0.6, 0.05), "stall": (0.0, 0.0), "nak": (0.2, 0.9),
                     "drop": (0.3, 0.3)}[self.phase]
        if r.random() < prog and self.seen_hi > self.ack:
            self.ack = int(r.integers(self.ack + 1, self.seen_hi + 1))
        ack = int(r.integers(MOD)) if r.random() < 0.03 else self.ack % MOD
        if not self.was_active:
            init = r.random() < 0.85
        else:
            init = r.random() < (0.7 if state == LinkState.INIT else 0.1)
        # now and then the generation of an older trailer (a flit delayed past a drop)
        gen = (self.gen - int(r.integers(1, 4)) if r.random() < 0.1 else self.gen)
        h = dict(init=int(init), init_seen=int(r.random() < 0.75), ack=ack,
                 nak=int(r.random() < nak), gen_seen=gen % (1 << F.GEN_BITS))
        if init:       # while the DUT is fresh, now and then an old-life flit it ignores
            h.update(fresh=int(not self.was_active and r.random() < 0.9), credit0=CREDITS,
                     credit1=CREDITS)
        else:
            h.update(credit0=self.taken % (1 << F.CREDIT_BITS))
        return h

    def cycle(self, cyc, state):
        """(link_up, good, header fields) for this cycle."""
        self.was_active |= state == LinkState.ACTIVE
        if self.left == 0:
            self._next_phase()
        self.left -= 1
        if self.phase == "drop":
            return 0, self.rng.random() < 0.02, self._header(state)
        if self.phase == "silent" or (cyc - self.next_flit) % self.flit:
            return 1, False, None
        if self.rng.random() < 0.1:           # a flit lost on the way (bad CRC)
            return 1, False, None
        return 1, True, self._header(state)


_OUT = (("state", 2), ("failed", 1), ("failures", 16), ("fail_replay", 16),
        ("fail_lost", 16), ("replays", 16), ("timeouts", 16), ("fail_peer", 16),
        ("phy_valid", 1), ("phy_first", 1), ("phy_hdr", 96), ("credit_ok", 1))


def _fields(word):
    out = {}
    for name, w in _OUT:
        out[name] = word & ((1 << w) - 1)
        word >>= w
    return out


@functools.lru_cache(maxsize=None)
def _run(seed, cycles, peer_cls=None):
    """Drive a ``DataLinkTx`` with the seeded peer (``peer_cls``: :class:`_Peer` with
    random params, or a scripted peer with its own ``PARAMS``) for ``cycles`` (plus a tail
    for the last flit on the wire). Returns the params, the per-cycle inputs (keyword
    arguments of :meth:`DlEscalationModel.step`, ``new_send`` included) and the per-cycle
    DUT outputs."""
    rng = np.random.default_rng(seed)
    if peer_cls is None:
        p = _random_params(rng)
        peer = _Peer(rng, p)
    else:
        p = peer_cls.PARAMS
        peer = peer_cls(rng, p)
    dut = DataLinkTx(p)
    ins, outs = [], []
    slots = 4 * p.tl_per_dl
    total = cycles + PICK_TO_FIRST + slots + 1

    async def bench(ctx):
        o = Cat(dut.o_state, dut.o_failed, dut.o_failures, dut.o_fail_replay,
                dut.o_fail_lost, dut.o_replays, dut.o_timeouts, dut.o_fail_peer,
                dut.o_phy.valid, dut.o_phy.payload.first, dut.o_phy.payload.data[:96],
                dut.o_credit_ok[0])
        ctx.set(dut.o_phy.ready, 1)
        ctx.set(dut.i_tl.payload.as_value(), F.TL_FLIT.pack(data=seed, vc=0))
        tl_valid, first_at = False, None
        for cyc in range(total):
            out = _fields(ctx.get(o))
            outs.append(out)
            # the wire: a data flit with the next new sequence number was picked
            if out["phy_valid"] and out["phy_first"]:
                first_at = cyc
            elif out["phy_valid"] and first_at is not None and cyc - first_at == slots:
                h = F.DL_HEADER.unpack(out["phy_hdr"])
                peer.gen = h["gen"]
                if h["data"] and h["seq"] == peer.seen_hi % MOD:
                    peer.seen_hi += 1
                    ins[first_at - PICK_TO_FIRST]["new_send"] = True
                    peer.on_send(first_at - PICK_TO_FIRST)
            link_up, good, h = peer.cycle(cyc, out["state"])
            ctx.set(dut.i_link_up, link_up)
            ctx.set(dut.i_rx_good, good)
            if h is not None:
                ctx.set(dut.i_rx_hdr.as_value(), F.DL_HEADER.pack(**h))
            h = h or {}
            ins.append(dict(link_up=link_up, good=good, init=bool(h.get("init")),
                            init_seen=bool(h.get("init_seen")), fresh=bool(h.get("fresh")),
                            ack=h.get("ack", 0), nak=bool(h.get("nak")),
                            gen_seen=h.get("gen_seen", 0), new_send=False))
            tl_valid = tl_valid or (peer.feed and out["credit_ok"] and rng.random() < 0.6)
            ctx.set(dut.i_tl.valid, tl_valid)
            if tl_valid and ctx.get(dut.i_tl.ready):
                tl_valid = False
                peer.taken += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return p, ins[:cycles], outs[:cycles]


def _diverge(model, ins, outs):
    """First cycle where the model's outputs differ from the DUT's: (cycle, {field: (dut,
    model)}), or None."""
    for cyc, (i, o) in enumerate(zip(ins, outs)):
        want = model.outputs()
        diff = {k: (o[k], int(want[k])) for k in want if o[k] != want[k]}
        if o["fail_peer"]:
            diff["fail_peer"] = (o["fail_peer"], 0)
        if diff:
            return cyc, diff
        model.step(**i)
    return None


def _check(seed, cycles, peer_cls=None):
    """Run and compare; on a difference fail with the seed, the cycle, the differing
    fields, the params and the inputs of the cycles before. Returns the run."""
    p, ins, outs = _run(seed, cycles, peer_cls)
    d = _diverge(DlEscalationModel(p), ins, outs)
    if d is not None:
        cyc, diff = d
        recent = [(c, {k: v for k, v in ins[c].items() if v})
                  for c in range(max(0, cyc - 6), cyc + 1)]
        pytest.fail(f"seed {seed}: cycle {cyc}: (DUT, model) {diff}; params {p}; "
                    f"inputs before: {recent}")
    return p, ins, outs


#: CI seed: failures by each cause, retrains, stray flits while DOWN, NAKs with progress
CI_RUNS = [(6, 1000)]


@pytest.mark.parametrize("seed,cycles", CI_RUNS)
def test_escalation_matches_model(seed, cycles):
    """Every cycle: state, ``failed``, the failure counters and the rewinds as the model
    predicts; the trace covers both causes and a retrain to ACTIVE after a failure."""
    p, ins, outs = _check(seed, cycles)
    last = outs[-1]
    assert last["fail_replay"] >= 1 and last["fail_lost"] >= 1, f"seed {seed}: {last}"
    retrains = sum(1 for a, b in zip(outs, outs[1:])
                   if a["failed"] and b["state"] == LinkState.ACTIVE)
    assert retrains >= 1, f"seed {seed}: no retrain to ACTIVE after a failure"


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 112))
def test_escalation_matches_model_soak(seed):
    _check(seed, 6000)


#: the scripted peers' seed (their TL feed is random) and parameters
SCRIPTED_SEED = "seed 0"
SCRIPTED = F.ChipletParams(tl_per_dl=1, replay_depth=4, rx_credits=16, replay_timeout=40,
                           replay_limit=1, link_timeout=60, retrain_holdoff=20)


class _Corners(_Peer):
    """A scripted peer aiming at two corners of the escalation path.

    1. One data flit, never acked, the peer talking (no NAK) until the cycle that makes the
       replay limit's next rewind and the link-lost timeout fall due in the same cycle, then
       silent: one failure, counted by the replay limit.
    2. After the retrain, everything acked, then silence, and ``link_up`` low from the very
       cycle the link-lost timer fires, for three hold-offs: FAILED wins over the link drop,
       the hold-off ends in DOWN and the DL stays there while the PHY is down; then the link
       comes back and the DL retrains."""

    PARAMS = SCRIPTED

    def __init__(self, rng, p):
        super().__init__(rng, p)
        self.seg = 1
        self.last_good = None     # 1: the last flit before the silence; 2: the last in ACTIVE
        self.seg2_from = self.drop = None
        self.feed = False

    def on_send(self, pick):
        if self.last_good is None:
            self.last_good = pick + (self.p.replay_limit + 1) * self.p.timeout \
                - self.p.lost_after

    def cycle(self, cyc, state):
        self.was_active |= state == LinkState.ACTIVE
        self.feed = self.seg == 1 and self.was_active and self.taken == 0
        if self.seg == 1 and state == LinkState.FAILED:
            self.seg = 2
        if self.seg == 2 and self.seg2_from is None and state == LinkState.ACTIVE:
            self.seg2_from = cyc
        if self.seg2_from is not None and self.drop is None and cyc > self.seg2_from + 20:
            self.drop = self.last_good + self.p.lost_after
        link_up = int(cyc >= 5 and not (self.drop is not None
                                        and self.drop <= cyc < self.drop + 3 * self.p.holdoff))
        if self.seg == 1:
            talk = self.last_good is None or cyc <= self.last_good
            due = cyc % self.flit == 0 or cyc == self.last_good
        else:
            talk = state != LinkState.FAILED and (self.drop is None or cyc > self.drop)
            due = cyc % self.flit == 0
        if not (link_up and talk and due):
            return link_up, False, None
        if self.seg == 2 and state == LinkState.ACTIVE and self.drop is None:
            self.last_good = cyc
        return link_up, True, self._plain(state, int(self.seg2_from is not None))


def test_corners_match_model():
    """The scripted corners (:class:`_Corners`), every cycle as the model predicts: the
    first failure is one, by the replay limit, in the cycle both causes fall due; the second
    is by the link-lost timer in the cycle ``link_up`` drops; the hold-off then ends in DOWN
    and the DL stays there until the link is back, then retrains."""
    p, ins, outs = _check(0, 360, _Corners)
    fails = [c for c in range(1, len(outs)) if outs[c]["failures"] > outs[c - 1]["failures"]]
    assert len(fails) == 2, f"seed 0: failures at {fails}"
    a, b = fails
    pick = next(c for c, i in enumerate(ins) if i["new_send"])
    last_good = max(c for c in range(a) if ins[c]["good"])
    at = f"seed 0: failures at {fails}, data flit picked at {pick}, last good {last_good}"
    assert a == pick + 1 + (p.replay_limit + 1) * p.timeout == last_good + 1 + p.lost_after, at
    assert (outs[a]["fail_replay"], outs[a]["fail_lost"]) == (1, 0), at
    assert (outs[b]["fail_replay"], outs[b]["fail_lost"]) == (1, 1), at
    assert ins[b - 1]["link_up"] == 0 and ins[b - 2]["link_up"] == 1, at
    assert outs[b + p.holdoff]["state"] == LinkState.DOWN, at
    assert outs[b + p.holdoff + 5]["state"] == LinkState.DOWN, at      # the PHY is still down
    assert outs[-1]["state"] == LinkState.ACTIVE and outs[-1]["failed"] == 0, at


class _Flap(_Peer):
    """A PHY that drops for 2 cycles every ``timeout - 10`` cycles while the peer keeps
    sending good flits (bring-up flits in INIT) and never acks the one data flit."""

    PARAMS = SCRIPTED

    def __init__(self, rng, p):
        super().__init__(rng, p)
        self.sent_at = None

    def on_send(self, pick):
        if self.sent_at is None:
            self.sent_at = pick

    def cycle(self, cyc, state):
        self.was_active |= state == LinkState.ACTIVE
        self.feed = self.was_active and self.taken == 0
        period = self.p.timeout - 10
        link_up = int(cyc >= 5 and (self.sent_at is None
                                    or (cyc - self.sent_at) % period >= 2))
        if not link_up or cyc % self.flit:
            return link_up, False, None
        return link_up, True, self._plain(state, 0)


def test_flapping_phy_fails_by_the_progress_watchdog():
    """The replay timer restarts at each bring-up and the link-lost timer at each good flit
    while ACTIVE, so with the PHY dropping more often than every replay timeout and the
    peer's flits good but never acking, neither fires: no rewind is ever made. The progress
    watchdog fails the DL (counted as ``fail_replay``) exactly ``fail_bounds()['stall']``
    cycles after the cycle following the data flit's pick, through the drops; after the
    hold-off and retrain it fails again, one watchdog period after leaving FAILED (the
    model and the DUT agree every cycle)."""
    p, ins, outs = _check(0, 400, _Flap)
    pick = next(c for c, i in enumerate(ins) if i["new_send"])
    assert not any(i["ack"] for i in ins), SCRIPTED_SEED
    drops = sum(1 for a, b in zip(ins[:pick + p.stall_after], ins[1:pick + p.stall_after])
                if a["link_up"] and not b["link_up"])
    assert drops >= 2, f"{SCRIPTED_SEED}: {drops} drops before the watchdog"
    fails = [c for c in range(1, len(outs))
             if outs[c]["state"] == LinkState.FAILED != outs[c - 1]["state"]]
    assert fails and fails[0] - (pick + 1) == p.fail_bounds()["stall"], \
        f"{SCRIPTED_SEED}: FAILED at {fails}, pick {pick}, stall {p.stall_after}"
    last = outs[-1]
    assert last["replays"] == 0 and last["fail_lost"] == 0, f"{SCRIPTED_SEED}: {last}"
    assert last["fail_replay"] == last["failures"] == len(fails) >= 2, \
        f"{SCRIPTED_SEED}: {last}, FAILED at {fails}"


class _Rules(_Peer):
    """A scripted peer whose run tells apart the rules the spec leaves implicit (each one
    changed in the model makes the comparison fail here):

    0. The link comes up and nothing arrives: FAILED by the link-lost timer, counted from
       the cycle after ``link_up`` was first high.
    1. Bring-up, one data flit, never acked: one timer rewind; a NAK whose ``ack`` lies
       outside the window (not a rewind); a NAK (the second rewind, which restarts the
       timer); FAILED one replay timeout after that NAK.
    2. Retrain: the first timer rewind is the first of a new count (entering FAILED cleared
       it); the link drops for 3 cycles and comes back: the count survives, so one more
       rewind and then FAILED.
    3. Retrain, then the link drops and a good flit acking the data flit arrives while
       DOWN: not taken, so the flit stays unacknowledged and the replay limit fails again.
    4. Retrain and everything acked: ACTIVE to the end."""

    PARAMS = F.ChipletParams(tl_per_dl=1, replay_depth=4, rx_credits=16, replay_timeout=30,
                             replay_limit=2, link_timeout=120, retrain_holdoff=20)

    def __init__(self, rng, p):
        super().__init__(rng, p)
        self.fails = 0
        self.prev = LinkState.DOWN
        self.special = {}         # cycle: header of a flit sent then, whatever the cadence
        self.low = set()          # cycles with ``link_up`` low (from cycle 5 on)
        self.dark = False         # step 3 scheduled
        self.feed = False

    def on_send(self, pick):
        if self.fails == 1 and not self.special:
            T = self.p.timeout
            self.special = {pick + T + 5: dict(ack=5, nak=1, credit0=self.taken),
                            pick + T + 10: dict(ack=0, nak=1, credit0=self.taken)}

    def cycle(self, cyc, state):
        T = self.p.timeout
        self.was_active |= state == LinkState.ACTIVE
        self.fails += state == LinkState.FAILED and self.prev != LinkState.FAILED
        entered = state == LinkState.ACTIVE and self.prev != LinkState.ACTIVE
        if entered and self.fails == 2 and not self.low:     # 2: after the first rewind
            self.low = set(range(cyc + T + 5, cyc + T + 8))
        elif entered and self.fails == 3 and not self.dark:  # 3: an acking flit while DOWN
            self.dark = True
            self.low = set(range(cyc + 5, cyc + 10))
            self.special = {cyc + 7: dict(ack=1, credit0=self.taken)}
        self.prev = state
        self.feed = self.was_active and self.taken == 0
        link_up = int(cyc >= 5 and cyc not in self.low)
        if self.fails == 0 or state == LinkState.FAILED:
            return link_up, False, None
        if cyc in self.special:
            return link_up, True, self.special[cyc]
        if not link_up or cyc % self.flit:
            return link_up, False, None
        return link_up, True, self._plain(state, int(self.fails >= 4))


def test_implicit_rules_match_model():
    """The scripted run of :class:`_Rules`, every cycle as the model predicts, with the
    failures it aims at: link lost first, then three by the replay limit, then ACTIVE."""
    p, ins, outs = _check(0, 540, _Rules)
    fails = [c for c in range(1, len(outs)) if outs[c]["failures"] > outs[c - 1]["failures"]]
    at = f"seed 0: failures at {fails}"
    assert len(fails) == 4 and fails[0] == 6 + p.lost_after, at
    assert [outs[c]["fail_lost"] for c in fails] == [1, 1, 1, 1], at
    assert outs[-1]["state"] == LinkState.ACTIVE and outs[-1]["failed"] == 0, at


class _Stale(_Peer):
    """A scripted peer whose normal flits come with a stale ``gen_seen`` (flits of its
    own sent before it heard the DUT's current generation: delayed past a failure).

    0. Fresh bring-up flits without ``init_seen``: the DUT learns the sizes, never goes
       ACTIVE, and fails by the link-lost timer (its generation becomes 1).
    1. After the retrain (DUT fresh, in INIT): normal flits, in window, with
       ``gen_seen`` 0: ignored, the DUT stays in INIT. Then one bring-up flit with
       ``init_seen`` and the current generation: ACTIVE, still without ``peer_active``.
    2. Normal flits with ``gen_seen`` 0 while TL flits are offered: taken (acks), but no
       data flit goes out; then normal flits with the current generation acking every data
       flit seen: data flows."""

    PARAMS = SCRIPTED

    def __init__(self, rng, p):
        super().__init__(rng, p)
        self.retrain = self.active = None     # cycles: INIT after the failure, ACTIVE
        self.fails_seen = False               # the DUT has been FAILED
        self.feed = False

    def cycle(self, cyc, state):
        self.was_active |= state == LinkState.ACTIVE
        if self.retrain is None and state == LinkState.INIT and self.fails_seen:
            self.retrain = cyc
        if self.active is None and state == LinkState.ACTIVE:
            self.active = cyc
        self.fails_seen |= state == LinkState.FAILED
        link_up = int(cyc >= 5)
        self.feed = self.active is not None
        if not link_up or state == LinkState.FAILED or cyc % self.flit:
            return link_up, False, None
        if self.retrain is None:                                    # 0
            return link_up, True, dict(init=1, fresh=1, credit0=CREDITS, credit1=CREDITS,
                                       gen_seen=self.gen)
        if self.active is None:                                     # 1
            if cyc < self.retrain + 8 * self.flit:
                return link_up, True, dict(ack=0, gen_seen=0)
            return link_up, True, dict(init=1, init_seen=1, fresh=1, credit0=CREDITS,
                                       credit1=CREDITS, gen_seen=self.gen)
        stale = cyc < self.active + 12 * self.flit                 # 2
        return link_up, True, dict(ack=0 if stale else self.seen_hi % MOD,
                                   credit0=self.taken,
                                   gen_seen=0 if stale else self.gen)


def test_stale_generation_is_not_taken_for_an_active_peer():
    """:class:`_Stale`, every cycle as the model predicts: a fresh DL ignores normal flits
    whose ``gen_seen`` is not its generation, and an ACTIVE DL sends no data flit until a
    flit without ``fresh`` shows the peer heard its current generation (``peer_active``)."""
    p, ins, outs = _check(0, 360, _Stale)
    fails = [c for c in range(1, len(outs)) if outs[c]["failures"] > outs[c - 1]["failures"]]
    at = f"seed 0: failures at {fails}"
    assert len(fails) == 1 and outs[fails[0]]["fail_lost"] == 1, at
    stale_fresh = [c for c, i in enumerate(ins) if c > fails[0] and i["good"]
                   and not i["init"] and outs[c]["state"] == LinkState.INIT]
    assert len(stale_fresh) >= 4, f"{at}: stale normal flits in INIT at {stale_fresh}"
    active = next(c for c, o in enumerate(outs) if o["state"] == LinkState.ACTIVE)
    assert ins[active - 1]["init"] and ins[active - 1]["init_seen"], at
    current = next(c for c, i in enumerate(ins) if c > active and i["good"]
                   and not i["init"] and i["gen_seen"] == 1)
    stale_active = [c for c, i in enumerate(ins) if active < c < current and i["good"]]
    assert len(stale_active) >= 10, f"{at}: stale normal flits while ACTIVE {stale_active}"
    sends = [c for c, i in enumerate(ins) if i["new_send"]]
    assert sends and sends[0] > current, f"{at}: data flits picked at {sends[:3]}, " \
        f"first flit with the current generation at {current}"
    assert outs[-1]["state"] == LinkState.ACTIVE, at


# -- the comparison can fail ---------------------------------------------------------------

def _first_change(outs, name):
    return next(c for c, o in enumerate(outs) if o[name])


def test_planted_replay_limit_off_by_one_diverges():
    """A model allowing one more rewind than the DUT differs first in the cycle the DUT
    shows its first replay-limit failure (the model shows the extra rewind instead)."""
    seed, cycles = CI_RUNS[0]
    p, ins, outs = _check(seed, cycles)
    cyc, diff = _diverge(DlEscalationModel(p, replay_limit=p.replay_limit + 1), ins, outs)
    want = _first_change(outs, "fail_replay")
    assert cyc == want, f"seed {seed}: diverged at {cyc} {diff}, first replay failure {want}"
    assert diff["state"] == (LinkState.FAILED, LinkState.ACTIVE), f"seed {seed}: {diff}"
    assert diff["replays"][1] == diff["replays"][0] + 1, f"seed {seed}: {diff}"


def test_planted_holdoff_off_by_one_diverges():
    """A model holding FAILED one cycle longer differs first where the DUT leaves its first
    FAILED: exactly ``retrain_holdoff`` cycles after entering it."""
    seed, cycles = CI_RUNS[0]
    p, ins, outs = _check(seed, cycles)
    cyc, diff = _diverge(DlEscalationModel(p, retrain_holdoff=p.holdoff + 1), ins, outs)
    want = _first_change(outs, "failures") + p.holdoff
    assert cyc == want, f"seed {seed}: diverged at {cyc} {diff}, expected {want}"
    assert diff == {"state": (LinkState.DOWN, LinkState.FAILED)}, f"seed {seed}: {diff}"


# -- the model on its own ------------------------------------------------------------------

@pytest.mark.parametrize("kw,match", [
    (dict(params="x"), "must be a ChipletParams"),
    (dict(replay_limit=0), "replay_limit=0 must be in 1..255"),
    (dict(link_timeout=-1), "link_timeout=-1"),
    (dict(retrain_holdoff=1 << 16), "retrain_holdoff=65536"),
    (dict(replay_timeout=1.5), "replay_timeout=1.5 must be an int"),
    (dict(holdoff=3), "unknown ChipletParams field 'holdoff'"),
])
def test_model_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        DlEscalationModel(**kw)
    assert "\n" not in str(e.value)


def test_model_out_of_scope_inputs():
    m = DlEscalationModel(F.ChipletParams(tl_per_dl=1))
    with pytest.raises(ValueError, match="data flits go out only while ACTIVE"):
        m.step(1, new_send=True)
    m.step(1)                                       # DOWN -> INIT
    m.step(1, True, init=True, init_seen=True, fresh=True)
    assert m.outputs()["state"] == LinkState.ACTIVE
    with pytest.raises(ValueError, match="peer reset or refresh"):
        m.step(1, True, init=True, fresh=True)


def _bring_up(m):
    m.step(1)
    m.step(1, True, init=True, init_seen=True, fresh=True)
    assert m.outputs()["state"] == LinkState.ACTIVE


@pytest.mark.parametrize("tl_per_dl", [1, 4, 32])
def test_model_derived_parameters_and_fail_bounds(tl_per_dl):
    """0 derives the timeouts as the spec's table says (T = 8F + 64, 16 T, T), the same as
    ``ChipletParams``; the model's detection times against ``fail_bounds()``: the replay
    limit fails ``(replay_limit + 1) T`` cycles after the cycle following the first send
    (within the bound), the link-lost timeout exactly ``lost`` cycles after the cycle
    following the last good flit, and FAILED lasts exactly the hold-off."""
    p = F.ChipletParams(tl_per_dl=tl_per_dl, replay_limit=2)
    m = DlEscalationModel(p)
    T = 8 * (4 * tl_per_dl + 1) + 64
    assert (m.timeout, m.lost_after, m.holdoff) == (T, 16 * T, T)
    assert (m.timeout, m.lost_after, m.holdoff) == (p.timeout, p.lost_after, p.holdoff)
    assert m.stall_after == 4 * T == p.stall_after == p.fail_bounds()["stall"]
    # the figures the spec quotes for the defaults (replay_limit 16)
    d = DlEscalationModel(tl_per_dl=tl_per_dl)
    assert (d.replay_limit + 1) * d.timeout == {1: 1768, 4: 3400, 32: 18632}[tl_per_dl]
    assert tl_per_dl != 4 or d.lost_after == 3200
    b = p.fail_bounds()
    # replay limit: the peer keeps talking (no link loss) and never acks
    _bring_up(m)
    m.step(1, new_send=True)                      # cycle 2: the only data flit
    cyc = 3
    while m.outputs()["state"] != LinkState.FAILED:
        m.step(1, good=cyc % 5 == 0)
        cyc += 1
    assert cyc - 3 == 3 * T <= b["replay"]
    assert (m.outputs()["fail_replay"], m.outputs()["replays"]) == (1, 2)
    # link lost: the peer goes silent
    m = DlEscalationModel(p)
    _bring_up(m)
    m.step(1, True)                               # cycle 2: the last good flit
    last_good, cyc = 2, 3
    while m.outputs()["state"] != LinkState.FAILED:
        m.step(1)
        cyc += 1
    assert cyc - (last_good + 1) == b["lost"] and m.outputs()["fail_lost"] == 1
    failed_at = cyc
    while m.outputs()["state"] == LinkState.FAILED:
        m.step(0)
        cyc += 1
    assert cyc - failed_at == m.holdoff and m.outputs()["state"] == LinkState.DOWN
