"""cocotb test: one chiplet of a pair reset alone in the middle of traffic (a peer reset).

The DUT is :class:`fusionfabric.tb.chiplet.harness.ChipletPair` built with ``resets=True``
(``i_rst_a``/``i_rst_b``: that chiplet alone held in reset). Both accelerators send random
WRITE/READ/ATOMIC_ADD requests (each with a free tag) and posted MULTICAST/REDUCE messages,
and answer the peer's requests from :class:`fusionfabric.sim.chiplet.MemoryModel` in random
order, with random idle cycles and backpressure on every port. At cycle ``reset_at`` the
chiplet ``reset_side`` and its accelerator are reset for ``reset_cycles`` cycles: the
accelerator forgets its queues, outstanding tags and pending responses, starts a new
*life* and hands out tags from 0 again (so a response to its old life would alias a new
request if it got through).

Every message is recorded per sender and life; the verdict (docs/protocol.md, "Peer reset
and link reset"):

* the surviving side: delivered requests in order, each at most once, never a refused one,
  and the undelivered ones one contiguous run (the messages lost with the peer's state
  and the link reset); each non-posted request completed exactly once: OK only if
  delivered (and then equal to the completer's response), ERROR only if refused,
  TIMEOUT otherwise; none left without a completion (0 unreported);
* the reset side's old life: what was delivered is a prefix of what it sent, in order,
  once; none of its old requests is completed after the reset (the old responses are
  dropped, counted in ``stale_rsp`` or ``late_cpl``);
* the reset side's new life: exactly once, in order, OK completions equal to the responses
  its peer made for them (no response of the old life taken for a new request);
* both links ACTIVE again within ``retrain_bound`` cycles of the reset's end (measured:
  ``retrain_cycles``), ``fail_peer`` counted on the surviving side, no overflow, no credit
  error, and every request sent after the retrain delivered.

Writes the figures as JSON to ``stats_file`` if given.
"""

from __future__ import annotations

import json
from collections import deque

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from fusionfabric.formats.chiplet import (NON_POSTED, SLOT_BITS, STATUS, TL_HEADER, LinkState,
                                          Opcode, Status)
from fusionfabric.sim import chiplet as C
from fusionfabric.sim.chiplet import MemoryModel, Message
from fusionfabric.tb.common.tb import TB

NODE = {"a": 1, "b": 2}
PEER = {"a": "b", "b": "a"}


class _Life:
    """One life of one accelerator: what it sent, what of it was delivered, completions."""

    def __init__(self, side, index):
        self.side, self.index = side, index
        self.log = []                 # [msg, refused, deliveries, cycle]
        self.index_of = {}            # message -> position in log
        self.delivered = []           # log positions, in delivery order
        self.cpls = {}                # position -> [completion messages]
        self.expected_rsp = {}        # position -> the completer's response (OK)

    def sent(self, msg, refused, cycle):
        self.index_of.setdefault(msg, len(self.log))
        self.log.append([msg, refused, 0, cycle])


class _Side:
    def __init__(self, tb, name):
        self.tb, self.name, self.node = tb, name, NODE[name]
        self.lives = []
        self.new_life()
        self.mem = MemoryModel(self.node)

    def new_life(self):
        self.life = _Life(self.name, len(self.lives))
        self.lives.append(self.life)
        self.free_tags = deque(range(256))
        self.outstanding = {}         # tag -> log position (current life)
        self.beats = deque()
        self.cur = None
        self.first = False
        self.pend = []                # (request's life, request, response) owed by us
        self.rsp = deque()
        self.rx = {"o_req": [], "o_rsp": []}
        self.todo = 0


class PeerResetTB(TB):
    def __init__(self, dut):
        super().__init__(dut, stall_cycles=10 ** 9)
        a = self.args
        self.n = int(a.get("n", 40))                  # requests per side and life
        self.reset_side = a.get("reset_side", "b")
        self.reset_at = int(a.get("reset_at", 400))
        self.reset_cycles = int(a.get("reset_cycles", 8))
        self.idle = float(a.get("idle", 0.2))
        self.bp = float(a.get("backpressure", 0.2))
        self.posted = float(a.get("posted_fraction", 0.2))
        # cycles a completer holds each response before offering it (a slow accelerator:
        # its answers to the reset side's old requests then come after the link reset)
        self.rsp_delay = int(a.get("rsp_delay", 0))
        self.max_cycles = int(a.get("max_cycles", 20000))
        self.bound = a.get("retrain_bound")
        self.stats_file = a.get("stats_file")
        self.cycle = 0
        for s in ("i_err_ab", "i_err_ba", "i_drop_ab", "i_drop_ba", "i_dark_ab", "i_dark_ba",
                  "i_rst_a", "i_rst_b", "i_link_up_a", "i_link_up_b"):
            getattr(dut, s).value = 0
        for s in ("i_dark_lanes_ab", "i_dark_lanes_ba"):     # ChipletPcsPair only
            if hasattr(dut, s):
                getattr(dut, s).value = 0
        for side in "ab":
            for port in ("i_req", "i_rsp"):
                getattr(dut, f"{side}_{port}__valid").value = 0
            for port in ("o_req", "o_rsp"):
                getattr(dut, f"{side}_{port}__ready").value = 0

    def status(self, side):
        return STATUS.unpack(int(getattr(self.dut, f"o_status_{side}").value.to_unsigned()))

    def _new_request(self, x):
        rng = self.rng
        if rng.random() < self.posted or not x.free_tags:
            msg = C.random_message(rng, [Opcode.MULTICAST, Opcode.REDUCE],
                                   tag=int(rng.integers(256)), dest=NODE[PEER[x.name]])
        else:
            msg = C.random_message(rng, list(NON_POSTED), tag=x.free_tags.popleft(),
                                   dest=NODE[PEER[x.name]])
        return msg.with_src(x.node)

    def _find(self, src_side, msg):
        """The (life, position) that sent ``msg`` (newest life first), or None."""
        for life in reversed(self.sides[src_side].lives):
            pos = life.index_of.get(msg)
            if pos is not None:
                return life, pos
        return None

    async def run(self):
        dut, rng = self.dut, self.rng
        await self.reset()
        self.sides = {s: _Side(self, s) for s in "ab"}
        for s in "ab":
            self.sides[s].todo = self.n
        dut.i_link_up_a.value = 1
        dut.i_link_up_b.value = 1
        self.corrupt = []
        trace = {s: [] for s in "ab"}
        reset_end = self.reset_at + self.reset_cycles
        back = None                  # first cycle after reset_end with both ACTIVE
        detect = None                # first cycle the surviving side is FAILED
        survivor = PEER[self.reset_side]
        settle = None
        while True:
            await FallingEdge(self.clk)
            cyc = self.cycle
            rst = self.reset_at <= cyc < reset_end
            getattr(dut, f"i_rst_{self.reset_side}").value = int(rst)
            if cyc == self.reset_at:
                x = self.sides[self.reset_side]
                x.new_life()           # its accelerator is reset too
                x.todo = self.n
            st = {s: self.status(s) for s in "ab"}
            for s, x in self.sides.items():
                in_rst = rst and s == self.reset_side
                if not x.beats and x.todo and not in_rst and rng.random() >= self.idle:
                    x.cur = self._new_request(x)
                    x.todo -= 1
                    x.beats.extend(x.cur.beats())
                    x.first = True
                ready = [i for i, e in enumerate(x.pend) if e[3] <= cyc]
                if ready and not x.rsp and not in_rst and rng.random() < 0.5:
                    _, _, r, _ = x.pend.pop(ready[int(rng.integers(len(ready)))])
                    x.rsp.extend(r.beats())
                for name, q in (("i_req", x.beats), ("i_rsp", x.rsp)):
                    getattr(dut, f"{s}_{name}__valid").value = int(bool(q) and not in_rst)
                    if q:
                        getattr(dut, f"{s}_{name}__payload").value = q[0]
                for name in ("o_req", "o_rsp"):
                    getattr(dut, f"{s}_{name}__ready").value = int(
                        not in_rst and rng.random() >= self.bp)
            await ReadOnly()
            for s in "ab":
                trace[s].append(st[s]["state"])
            if detect is None and cyc >= self.reset_at and st[survivor]["state"] == LinkState.FAILED:
                detect = cyc
            if back is None and cyc >= reset_end and all(
                    self.status(s)["state"] == LinkState.ACTIVE for s in "ab"):
                back = cyc
            for s, x in self.sides.items():
                if rst and s == self.reset_side:
                    continue
                self._sample(s, x, st[s], cyc)
            self.cycle += 1
            idle = all(not x.todo and not x.beats and not x.rsp and not x.pend
                       and not x.outstanding for x in self.sides.values())
            if idle and back is not None and cyc > reset_end + 50 and all(
                    self.status(s)["state"] == LinkState.ACTIVE for s in "ab"):
                # nothing left to send or answer: let the last posted messages (which
                # nobody waits for) cross the link
                if settle is None:
                    settle = cyc + 300
                if cyc >= settle:
                    break
            else:
                settle = None
            if cyc >= self.max_cycles:
                raise AssertionError(f"peer reset run exceeded max_cycles={self.max_cycles} "
                                     f"(seed {self.seed}): {self._pending(st)}")
        await FallingEdge(self.clk)
        return self._verdict(detect, back, reset_end, trace)

    def _pending(self, st):
        return {s: {"todo": x.todo, "beats": len(x.beats), "rsp": len(x.rsp),
                    "pend": len(x.pend), "outstanding": sorted(x.outstanding)[:8],
                    "status": st[s]} for s, x in self.sides.items()}

    def _sample(self, s, x, st, cyc):
        dut = self.dut
        if x.beats and int(getattr(dut, f"{s}_i_req__ready").value):
            x.beats.popleft()
            if x.first:
                x.first = False
                refused = bool(st["failed"])
                x.life.sent(x.cur, refused, cyc)
                if x.cur.opcode in NON_POSTED:
                    x.outstanding[x.cur.tag] = len(x.life.log) - 1
        if x.rsp and int(getattr(dut, f"{s}_i_rsp__ready").value):
            x.rsp.popleft()
        for name in ("o_req", "o_rsp"):
            v = getattr(dut, f"{s}_{name}__valid").value
            if not v.is_resolvable:
                raise AssertionError(f"{s}_{name}__valid is {v} at cycle {cyc} (seed "
                                     f"{self.seed})")
            if not (int(getattr(dut, f"{s}_{name}__valid").value)
                    and int(getattr(dut, f"{s}_{name}__ready").value)):
                continue
            buf = x.rx[name]
            buf.append(int(getattr(dut, f"{s}_{name}__payload").value.to_unsigned()))
            f = TL_HEADER.unpack(buf[0] >> SLOT_BITS)
            if len(buf) < max(1, C.data_slots(f["opcode"], f["length"])):
                continue
            msg = Message.from_beats(buf)
            buf.clear()
            if name == "o_req":
                found = self._find(PEER[s], msg)
                if found is None:
                    self.corrupt.append((cyc, s, "request", msg))
                    continue
                life, pos = found
                life.log[pos][2] += 1
                life.delivered.append(pos)
                r = x.mem.respond(msg)
                if r is not None:
                    r = r.with_src(x.node)
                    life.expected_rsp[pos] = r
                    x.pend.append((life, pos, r, cyc + self.rsp_delay))
            else:
                pos = x.outstanding.pop(msg.tag, None)
                if pos is None:
                    self.corrupt.append((cyc, s, "completion for a tag not outstanding", msg))
                    continue
                x.life.cpls.setdefault(pos, []).append(msg)
                x.free_tags.append(msg.tag)

    def _check_life(self, life, one_gap):
        """Accounting of one life; raises AssertionError naming the seed on a violation."""
        seed = self.seed
        acc = {"sent": len(life.log), "refused": 0, "delivered": 0, "undelivered": 0,
               "undelivered_posted": 0, "ok": 0, "timeout": 0, "error": 0, "unreported": 0}
        order = life.delivered
        if order != sorted(order):
            raise AssertionError(f"seed {seed}: {life.side} life {life.index}: delivered out "
                                 f"of order {order[:20]}")
        gaps, last_delivered = [], True     # runs of undelivered accepted messages
        for pos, (msg, refused, ndel, _) in enumerate(life.log):
            if ndel > 1:
                raise AssertionError(f"seed {seed}: {life.side} life {life.index}: message "
                                     f"{pos} delivered {ndel} times")
            if refused:
                acc["refused"] += 1
                if ndel:
                    raise AssertionError(f"seed {seed}: refused message {pos} delivered")
                continue
            if ndel:
                acc["delivered"] += 1
            else:
                acc["undelivered"] += 1
                acc["undelivered_posted"] += msg.opcode not in NON_POSTED
                if last_delivered:
                    gaps.append(pos)
            last_delivered = bool(ndel)
        acc["gaps"] = len(gaps)
        if one_gap and len(gaps) > 1:
            raise AssertionError(f"seed {seed}: {life.side} life {life.index}: undelivered "
                                 f"messages in {len(gaps)} runs (starting at {gaps})")
        for pos, (msg, refused, ndel, _) in enumerate(life.log):
            if msg.opcode not in NON_POSTED:
                continue
            got = life.cpls.get(pos, [])
            if len(got) > 1:
                raise AssertionError(f"seed {seed}: tag {msg.tag} completed {len(got)} times")
            if not got:
                acc["unreported"] += 1
                continue
            cpl = got[0]
            st = Status(cpl.status)
            if st == Status.OK:
                if ndel != 1 or cpl != life.expected_rsp.get(pos):
                    raise AssertionError(f"seed {seed}: {life.side} life {life.index}: OK "
                                         f"completion of message {pos} (tag {msg.tag}, "
                                         f"delivered {ndel}) is not its response: {cpl}")
                acc["ok"] += 1
            elif st == Status.ERROR:
                if not refused:
                    raise AssertionError(f"seed {seed}: ERROR for a sent request {pos}")
                acc["error"] += 1
            elif st == Status.TIMEOUT:
                if refused:
                    raise AssertionError(f"seed {seed}: TIMEOUT for a refused request {pos}")
                acc["timeout"] += 1
            else:
                raise AssertionError(f"seed {seed}: unexpected status {st}")
        return acc

    def _verdict(self, detect, back, reset_end, trace):
        seed = self.seed
        assert not self.corrupt, f"seed {seed}: corrupt or unmatched: {self.corrupt[:3]}"
        survivor = PEER[self.reset_side]
        sv = self._check_life(self.sides[survivor].lives[0], one_gap=True)
        assert sv["unreported"] == 0, f"seed {seed}: {sv}"
        old = self.sides[self.reset_side].lives[0]
        old_acc = self._check_life(old, one_gap=False)
        # the old life's deliveries are a prefix of what it sent (then its reset)
        assert old.delivered == list(range(len(old.delivered))), \
            f"seed {seed}: old life delivered {old.delivered[:20]}"
        # (an old-life completion after the reset would have been matched against the new
        # life's tags above: unmatched, or not the new request's response, it fails there)
        new = self.sides[self.reset_side].lives[1]
        # the new life is a survivor too if a link reset came after it began (the corner
        # case of a reset within the first bring-up, docs/protocol.md)
        new_acc = self._check_life(new, one_gap=True)
        assert new_acc["unreported"] == 0 and new_acc["sent"] == self.n, \
            f"seed {seed}: new life {new_acc}"
        st = {s: self.status(s) for s in "ab"}
        for s in "ab":
            assert st[s]["state"] == LinkState.ACTIVE, f"seed {seed}: {s} {st[s]}"
            assert st[s]["overflow"] == 0 and st[s]["credit_err"] == 0, f"seed {seed}: {st[s]}"
            assert st[s]["bad_op"] == 0, f"seed {seed}: {st[s]}"
        for s in "ab":
            # no failure but peer resets on a clean channel
            assert st[s]["failures"] == st[s]["fail_peer"], f"seed {seed}: {s} {st[s]}"
        if LinkState.ACTIVE in trace[survivor][:self.reset_at]:
            # a survivor that was past its bring-up saw the peer reset
            assert st[survivor]["fail_peer"] >= 1, f"seed {seed}: {st[survivor]}"
        assert st[survivor]["cpl_timeouts"] == sv["timeout"], (st[survivor], sv, seed)
        assert st[survivor]["cpl_refused"] == sv["error"], (st[survivor], sv, seed)
        # the retrain: from the reset's end to both ACTIVE for good (the last cycle either
        # was not ACTIVE, + 1); every request sent after it is delivered, on both sides
        last_down = max((i for i in range(reset_end, len(trace["a"]))
                          if trace["a"][i] != LinkState.ACTIVE
                          or trace["b"][i] != LinkState.ACTIVE), default=reset_end - 1)
        back = last_down + 1
        for life in (self.sides[survivor].lives[0], new):
            late = [p for p, e in enumerate(life.log) if e[3] > back and e[2] != 1]
            assert not late, f"seed {seed}: {life.side} life {life.index}: sent after the " \
                             f"retrain and not delivered: {late}"
        link_resets = st["a"]["fail_peer"] + st["b"]["fail_peer"]
        if self.args.get("stale_rsp"):
            # old responses came after the link reset and were dropped at the survivor
            assert st[survivor]["stale_rsp"] >= 1, f"seed {seed}: {st[survivor]}"
        want = self.args.get("link_resets")
        if want is not None:
            assert link_resets == int(want), \
                f"seed {seed}: {link_resets} link resets, expected {want}"
        retrain = back - reset_end
        stats = {"seed": seed, "params": self.params, "reset_side": self.reset_side,
                 "reset_at": self.reset_at, "reset_cycles": self.reset_cycles,
                 "detect_cycles": None if detect is None else detect - reset_end,
                 "retrain_cycles": retrain, "cycles": self.cycle,
                 "survivor": sv, "old_life": old_acc, "new_life": new_acc,
                 "status": st, "duplicated": 0, "corrupted": 0,
                 "link_resets": {s: st[s]["fail_peer"] for s in "ab"},
                 "unreported": sv["unreported"],
                 # every state change after the reset: (cycle, side, state)
                 "transitions": [(c, s, LinkState(trace[s][c]).name) for s in "ab"
                                 for c in range(max(1, self.reset_at), len(trace[s]))
                                 if trace[s][c] != trace[s][c - 1]]}
        self.log.warning("peer reset stats: %s", stats)
        if self.stats_file:
            with open(self.stats_file, "w") as f:
                json.dump(stats, f, indent=1, default=str)
        if self.bound is not None:
            # one bound per link reset
            bound = int(self.bound) * max(1, link_resets)
            assert retrain <= bound, \
                f"seed {seed}: ACTIVE again {retrain} cycles after the reset, bound {bound}"
        return stats


@cocotb.test()
async def test_peer_reset(dut):
    tb = PeerResetTB(dut)
    await tb.run()
