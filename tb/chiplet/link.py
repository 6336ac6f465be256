"""Link testbench kit: traffic, responders, fault injection and a counting scoreboard.

Used by :mod:`fusionfabric.tb.chiplet.test_link` (cocotb tests) and by ``fusionfabric link`` (through
the same cocotb module with ``stats_file`` set). The DUT is ``fusionfabric.tb.chiplet.harness.ChipletPair``.
"""

from __future__ import annotations

import json
import time
from collections import deque

import cocotb
from cocotb.triggers import ClockCycles, Event, FallingEdge, First, ReadOnly, RisingEdge, Timer

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import (POSTED as POSTED_OPS, SLOT_BITS, SLOT_BYTES, STATUS,
                                          TL_HEADER, Opcode, Status)
from fusionfabric.sim.chiplet import LinkLedger, MemoryModel, Message
from fusionfabric.tb.common.scoreboard import ScoreboardError
from fusionfabric.tb.common.stream import StreamSink, StreamSource
from fusionfabric.tb.common.tb import TB

NODE = {"a": 1, "b": 2}
POSTED = (Opcode.MULTICAST, Opcode.REDUCE)


class LinkScoreboard:
    """Per-(source, destination) in-order check that counts instead of stopping.

    ``observe`` classifies each delivered message: in order and intact; a duplicate of one
    already delivered; or corrupt/out of order. ``strict`` raises on the first problem
    (tests); otherwise the counts are reported (``fusionfabric link``).
    """

    def __init__(self, name, seed, strict=True, watchdog=None):
        self.name, self.seed, self.strict, self.watchdog = name, seed, strict, watchdog
        self.queues: dict = {}
        self.done: dict = {}
        self.delivered = self.duplicates = self.corrupt = 0

    def expect(self, key, item):
        self.queues.setdefault(key, deque()).append(item)

    def _fail(self, msg):
        if self.strict:
            raise ScoreboardError(f"{self.name}: {msg} (seed {self.seed})")

    def observe(self, key, item):
        q = self.queues.get(key)
        seen = self.done.setdefault(key, deque(maxlen=256))
        if q and q[0] == item:
            q.popleft()
            seen.append(item)
            self.delivered += 1
            if self.watchdog:
                self.watchdog.kick(f"{self.name}[{key}] #{self.delivered}")
        elif item in seen:
            self.duplicates += 1
            self._fail(f"[{key}] duplicate delivery {item}")
        else:
            self.corrupt += 1
            self._fail(f"[{key}] got {item}, expected {q[0] if q else 'nothing'}")

    @property
    def pending(self):
        return sum(len(q) for q in self.queues.values())

    def check_empty(self):
        if self.pending:
            left = {k: len(q) for k, q in self.queues.items() if q}
            raise ScoreboardError(f"{self.name}: {self.pending} never delivered {left} "
                                  f"(seed {self.seed})")


class Assembler:
    """Port beats → Messages (header fields on every beat)."""

    def __init__(self, handler):
        self.beats = []
        self.first_cycle = 0
        self.handler = handler

    def __call__(self, word, cycle):
        if not self.beats:
            self.first_cycle = cycle
        self.beats.append(word)
        f = TL_HEADER.unpack(self.beats[0] >> SLOT_BITS)
        if len(self.beats) == max(1, C.data_slots(f["opcode"], f["length"])):
            msg = Message.from_beats(self.beats)
            self.beats = []
            self.handler(msg, self.first_cycle)


class Side:
    """One chiplet's accelerator: requester (tags), completer (memory), four ports."""

    def __init__(self, tb, name):
        self.tb, self.name = tb, name
        self.node = NODE[name]
        self.peer = NODE["b" if name == "a" else "a"]
        rng, dut, clk, wd = tb.rng, tb.dut, tb.clk, tb.watchdog
        idle, bp = tb.idle, tb.backpressure
        self.req_src = StreamSource(dut, f"{name}_i_req", clk, rng, idle, wd)
        self.rsp_src = StreamSource(dut, f"{name}_i_rsp", clk, rng, idle, wd)
        self.req_sink = StreamSink(dut, f"{name}_o_req", clk, rng, bp, wd, keep=False)
        self.rsp_sink = StreamSink(dut, f"{name}_o_rsp", clk, rng, bp, wd, keep=False)
        self.req_sink.on_beat.append(Assembler(self.on_request))
        self.rsp_sink.on_beat.append(Assembler(self.on_completion))
        self.req_src.on_send.append(self.on_req_beat)
        self.mem = MemoryModel(self.node)
        self.free_tags = deque(range(256))
        self.outstanding: dict[int, Message] = {}
        self.tag_freed = Event()
        self.pending_rsp: list[Message] = []
        # responses to requests whose requester already got a TIMEOUT completion: sent
        # (the chiplet must drop them, ``late_cpl``), never expected
        self.late_rsp: set[int] = set()          # id() of such entries of pending_rsp
        self.timed_out: dict[int, Message] = {}  # tag -> request (with src), not delivered
        self.ledger = LinkLedger()
        self.msgs_queued: deque[Message] = deque()   # requests queued on i_req, in order
        self.refused = {"posted": 0, "nonposted": 0}
        self.error_cpls = {"error": 0, "timeout": 0}
        self.sent = 0
        self.bytes_delivered = 0
        self.first_beat_cycles = deque()
        self._beats_left = 0
        self.done = False

    # requests out
    def on_req_beat(self, word, cycle):
        if self.tb.t_first is None:
            self.tb.t_first = cycle
        if self._beats_left == 0:
            f = TL_HEADER.unpack(word >> SLOT_BITS)
            self._beats_left = max(1, C.data_slots(f["opcode"], f["length"]))
            msg = self.msgs_queued.popleft()
            # refused: the port's ``failed`` status was set in the cycle the header was
            # taken (sampled by LinkTB.watch_link); never delivered, never expected
            refused = bool(self.tb.failed_now[self.name])
            self.ledger.sent(msg, refused)
            if refused:
                self.refused["posted" if msg.opcode in POSTED_OPS else "nonposted"] += 1
                q = self.tb.sb_req.queues.get((self.node, self.peer))
                if q is not None and msg in q:
                    q.remove(msg)
            else:
                self.first_beat_cycles.append(cycle)
        self._beats_left -= 1

    async def requester(self, n):
        tb = self.tb
        for i in range(n):
            nonposted = tb.rng.random() >= tb.posted_fraction
            if nonposted:
                while not self.free_tags:
                    self.tag_freed.clear()
                    await self.tag_freed.wait()
                tag = self.free_tags.popleft()
                ops = [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD]
            else:
                tag = int(tb.rng.integers(256))
                ops = list(POSTED)
            if tb.only_writes:
                ops = [Opcode.WRITE]
            msg = C.random_message(tb.rng, ops, tag=tag, dest=self.peer)
            if tb.fixed_length is not None:
                msg = Message(msg.opcode, tb.fixed_length, msg.tag, msg.dest, 0, msg.addr,
                              data=tb.rng.bytes(C.data_slots(msg.opcode, tb.fixed_length) * SLOT_BYTES))
            if nonposted:
                self.outstanding[tag] = msg
            tb.sample_msg(msg)
            tb.sb_req.expect((self.node, self.peer), msg.with_src(self.node))
            self.msgs_queued.append(msg.with_src(self.node))
            self.req_src.send_many(msg.beats())
            self.sent += 1
            # keep the source queue topped up (never let it drain: a drained queue is a
            # bubble on i_req, and a bubble at a message boundary closes the TL flit)
            while len(self.req_src.queue) > 64:
                await FallingEdge(tb.clk)
        await self.req_src.wait_idle()
        self.done = True

    # requests in (we are the completer)
    def on_request(self, msg, cycle):
        self.tb.sb_req.observe((msg.src, self.node), msg)
        requester = self.tb.side(msg.src)
        requester.ledger.delivered(msg)
        late = requester.timed_out.get(msg.tag) == msg
        if late:
            del requester.timed_out[msg.tag]
        self.tb.t_last = cycle
        if self.first_beat_cycles_peer():
            self.tb.latency.append(cycle - self.tb.side(msg.src).first_beat_cycles.popleft())
        if msg.opcode in (Opcode.WRITE, Opcode.MULTICAST, Opcode.REDUCE, Opcode.ATOMIC_ADD):
            self.tb.bytes[msg.src] += len(msg.data)
            self.tb.deliveries.append((cycle, len(msg.data)))
        rsp = self.mem.respond(msg)
        if rsp is not None:
            self.pending_rsp.append(rsp)
            if late:
                self.late_rsp.add(id(rsp))

    def first_beat_cycles_peer(self):
        return bool(self.tb.side(self.peer).first_beat_cycles)

    async def responder(self):
        tb = self.tb
        while True:
            if self.pending_rsp:
                # out of order: any pending response may go next
                i = int(tb.rng.integers(len(self.pending_rsp)))
                raw = self.pending_rsp.pop(i)
                rsp = raw.with_src(self.node)
                if id(raw) in self.late_rsp:
                    self.late_rsp.discard(id(raw))
                    tb.late_sent += 1
                else:
                    tb.sb_cpl.expect((rsp.dest, rsp.tag), rsp)
                self.rsp_src.send_many(rsp.beats())
                if len(self.rsp_src.queue) > 32:
                    await self.rsp_src.wait_idle()
            await FallingEdge(tb.clk)

    # completions in
    def on_completion(self, msg, cycle):
        tb = self.tb
        if msg.tag not in self.outstanding:
            tb.sb_cpl.corrupt += 1
            tb.sb_cpl._fail(f"completion for tag {msg.tag} not outstanding at node {self.node}")
            return
        self.ledger.completed(msg)
        if msg.src == self.node and msg.status in (Status.ERROR, Status.TIMEOUT):
            # made by our own chiplet: ERROR for a refused request, TIMEOUT when no
            # completion came within cpl_timeout (docs/protocol.md, "Fault escalation")
            self.on_error_completion(msg)
        else:
            tb.sb_cpl.observe((self.node, msg.tag), msg)
        del self.outstanding[msg.tag]
        self.free_tags.append(msg.tag)
        self.tag_freed.set()


    def on_error_completion(self, msg):
        tb = self.tb
        tb.watchdog.kick(f"error completion tag {msg.tag} at node {self.node}")
        if msg.status == Status.ERROR:
            self.error_cpls["error"] += 1
            return
        self.error_cpls["timeout"] += 1
        req = self.outstanding[msg.tag].with_src(self.node)
        q = tb.sb_cpl.queues.get((self.node, msg.tag))
        if q:                       # the completer already answered: that answer is late
            q.popleft()
            tb.late_sent += 1
            return
        peer = tb.side(self.peer)
        for r in peer.pending_rsp:  # delivered, answer not yet sent: it will be late
            if r.dest == self.node and r.tag == msg.tag and id(r) not in peer.late_rsp:
                peer.late_rsp.add(id(r))
                return
        self.timed_out[msg.tag] = req          # not delivered (yet)


class LinkTB(TB):
    def __init__(self, dut, strict=True):
        super().__init__(dut, stall_cycles=int(tb_arg(dut, "stall", 20000)))
        a = self.args
        self.strict = strict
        self.n = int(a.get("n", 200))
        self.ber = float(a.get("ber", 0.0))
        self.burst = int(a.get("burst", 0))
        self.first_flips = bool(a.get("first_flips", False))
        self.drop_rate = float(a.get("drop_rate", 0.0))
        self.dark_events = int(a.get("dark_events", 0))
        self.link_drops = int(a.get("link_drops", 0))
        self.idle = float(a.get("idle", 0.2))
        self.backpressure = float(a.get("backpressure", 0.2))
        self.posted_fraction = float(a.get("posted_fraction", 0.2))
        self.only_writes = bool(a.get("only_writes", False))
        self.fixed_length = a.get("fixed_length")
        self.one_way = bool(a.get("one_way", False))
        self.pause = a.get("pause")          # [sink name, start cycle, cycles]
        self.stats_file = a.get("stats_file")
        self.pcs = bool(a.get("pcs", False))   # DUT is tb.chiplet.harness.ChipletPcsPair
        # PCS only: solid bursts of lo..hi bits on one 66-bit lane from a random bit offset
        # (crossing into the next block), ``rate`` bursts per cycle per direction
        self.lane_bursts = a.get("lane_bursts")          # [lo, hi, rate]
        # the lanes of one direction dark (zeros) for ``cycles`` cycles from cycle
        # ``start`` (``cycles`` None: for good); ``lanes``: those lanes of the direction
        # only (default both)
        self.dark_lane = a.get("dark_lane")   # [start, cycles(, d(, lanes))]
        # B's link up 40 cycles after A's, then a PHY drop of both sides for ``cycles``
        # cycles at the first cycle one side is ACTIVE and the other not yet (inside the
        # first bring-up); the cycle and states then are kept in ``bringup_drop_states``
        self.bringup_drop = a.get("bringup_drop")        # cycles
        self.bringup_drop_states = None
        if self.lane_bursts is not None:
            lo, hi, rate = self.lane_bursts
            if not (self.pcs and 1 <= int(lo) <= int(hi) <= 64 and 0 < float(rate) < 1):
                raise ValueError(f"lane_bursts={self.lane_bursts!r} needs pcs and "
                                 f"[lo, hi, rate] with 1 <= lo <= hi <= 64, 0 < rate < 1")
        if self.dark_lane is not None:
            dl = list(self.dark_lane)
            if not 2 <= len(dl) <= 4 or int(dl[0]) < 0 \
                    or (dl[1] is not None and int(dl[1]) < 1) \
                    or (len(dl) >= 3 and dl[2] not in ("ab", "ba")) \
                    or (len(dl) == 4 and dl[3] is not None
                        and not (self.pcs and dl[3] and set(dl[3]) <= {0, 1})):
                raise ValueError(f"dark_lane={self.dark_lane!r} is not [start >= 0, "
                                 f"cycles >= 1 or None(, 'ab' | 'ba'(, lanes))]")
        self.permanent_dark = self.dark_lane is not None and self.dark_lane[1] is None
        self.dark_from = None          # cycle the dark lane went dark
        self.failed_now = {"a": 0, "b": 0}     # STATUS.failed, sampled every cycle
        self.first_failed = {"a": None, "b": None}   # first cycle in FAILED (state 3)
        self.late_sent = 0             # late answers handed to a completer's i_rsp
        self.stopped = False           # ended at max_cycles (report_only)
        self.t_end = None              # cycle the traffic ended (or the bound stopped it)
        self.progress_file = a.get("progress_file")
        self.link_events = {"link_downs": 0, "link_recoveries": 0, "pcs_lock_losses": 0,
                            "pcs_relocks": 0, "dark_cycles": 0, "bursts": 0,
                            "burst_bits": 0}
        # start the traffic only once both chiplets are ACTIVE (goodput/latency benches)
        self.start_after_link = bool(a.get("start_after_link", False))
        self.deliveries = []                   # (cycle, payload bytes) per delivered request
        # hard limit on the run, in cycles: past it the test fails with a dump of what is
        # still pending (instead of running on; 0: no limit)
        self.max_cycles = int(a.get("max_cycles", 0))
        self.sb_req = LinkScoreboard("requests", self.seed, strict, self.watchdog)
        self.sb_cpl = LinkScoreboard("completions", self.seed, strict, self.watchdog)
        self.latency = []
        self.t_first = self.t_last = None   # first request beat sent, last request delivered
        self.bytes = {1: 0, 2: 0}
        self.samplers = []
        self.cycle = 0
        for s in ("i_err_ab", "i_err_ba", "i_drop_ab", "i_drop_ba", "i_dark_ab", "i_dark_ba"):
            getattr(dut, s).value = 0
        for s in ("i_dark_lanes_ab", "i_dark_lanes_ba"):     # ChipletPcsPair only
            if hasattr(dut, s):
                getattr(dut, s).value = 0
        dut.i_link_up_a.value = 0
        dut.i_link_up_b.value = 0
        for side in ("a", "b"):
            for port in ("i_req", "i_rsp"):
                getattr(dut, f"{side}_{port}__valid").value = 0
            for port in ("o_req", "o_rsp"):
                getattr(dut, f"{side}_{port}__ready").value = 0

    def side(self, node):
        return self.sides[0] if node == NODE["a"] else self.sides[1]

    def sample_msg(self, msg):
        for fn in self.samplers:
            fn(msg)

    def status(self, side):
        return STATUS.unpack(int(getattr(self.dut, f"o_status_{side}").value.to_unsigned()))

    async def count_cycles(self):
        while True:
            await RisingEdge(self.clk)
            self.cycle += 1

    async def faults(self, d):
        """Bit errors at ``ber`` on the 128 data bits (and the ``first`` bit if
        ``first_flips``), as single flips or bursts of up to ``burst`` bits in a word."""
        nbits = SLOT_BITS + 1 if self.first_flips else SLOT_BITS
        if self.pcs:
            nbits = 132       # two 66-bit lane blocks per cycle (sync headers included)
        p_word = 1.0 - (1.0 - self.ber) ** nbits if self.ber > 0 else 0.0
        if self.lane_bursts is not None:
            return await self.lane_burst_faults(d)
        p_drop = self.drop_rate
        rng = self.rng_faults
        err = getattr(self.dut, f"i_err_{d}")
        drop = getattr(self.dut, f"i_drop_{d}")
        p_any = p_word + p_drop
        if p_any <= 0:
            return
        while True:
            gap = int(rng.geometric(min(1.0, p_any)))
            await Timer(10 * max(1, gap - 1), unit="ns")
            await FallingEdge(self.clk)
            if self.faults_off:
                return
            if rng.random() < p_drop / p_any:
                drop.value = 1
                await FallingEdge(self.clk)
                drop.value = 0
                continue
            if self.burst:
                length = int(rng.integers(1, self.burst + 1))
                pos = int(rng.integers(0, nbits - length + 1))
                inner = int(rng.integers(0, 1 << max(0, length - 2))) if length > 2 else 0
                pat = (1 | (inner << 1) | (1 << (length - 1))) if length > 1 else 1
                mask = pat << pos
            else:
                k = 1 + int(rng.binomial(nbits - 1, self.ber))
                mask = 0
                for b in rng.choice(nbits, size=k, replace=False):
                    mask |= 1 << int(b)
            err.value = mask
            await FallingEdge(self.clk)
            err.value = 0

    async def lane_burst_faults(self, d):
        """Solid bursts of ``lo..hi`` bits on one lane of direction ``d``, starting at a
        random bit of a 66-bit block and running on into the next block when they pass
        bit 65 (:func:`fusionfabric.sim.faults.burst_span`); ``rate`` per cycle."""
        from fusionfabric.sim.faults import LANE_BITS, burst_span
        lo, hi, rate = int(self.lane_bursts[0]), int(self.lane_bursts[1]), \
            float(self.lane_bursts[2])
        rng = self.rng_faults
        err = getattr(self.dut, f"i_err_{d}")
        while True:
            gap = int(rng.geometric(rate))
            await Timer(10 * max(1, gap - 1), unit="ns")
            await FallingEdge(self.clk)
            if self.faults_off:
                return
            length = int(rng.integers(lo, hi + 1))
            pos = int(rng.integers(0, LANE_BITS))
            lane = int(rng.integers(0, 2))
            first, carry = burst_span(pos, length)
            self.link_events["bursts"] += 1
            self.link_events["burst_bits"] += length
            err.value = first << (LANE_BITS * lane)
            await FallingEdge(self.clk)
            err.value = carry << (LANE_BITS * lane)
            await FallingEdge(self.clk)
            err.value = 0

    async def dark_lane_event(self):
        """The lanes of one direction (or the ones listed) carry zeros (no valid sync
        header) for ``cycles`` cycles from cycle ``start``; ``cycles`` None: for good."""
        start, cycles = int(self.dark_lane[0]), self.dark_lane[1]
        d = self.dark_lane[2] if len(self.dark_lane) >= 3 else "ab"
        lanes = self.dark_lane[3] if len(self.dark_lane) == 4 else None
        while self.cycle < start:
            await FallingEdge(self.clk)
        if lanes is None:
            dark, on = getattr(self.dut, f"i_dark_{d}"), 1
        else:
            dark, on = getattr(self.dut, f"i_dark_lanes_{d}"), sum(1 << k for k in lanes)
        dark.value = on
        self.dark_from = self.cycle
        if cycles is None:
            return
        for _ in range(int(cycles)):
            await FallingEdge(self.clk)
        dark.value = 0
        self.link_events["dark_cycles"] += int(cycles)

    async def watch_link(self):
        """Count link downs (a chiplet leaves ACTIVE) and recoveries (it is ACTIVE again
        after a down) and, through the PCS, losses and regains of receiver lock; the first
        bring-up counts as neither."""
        prev = {}
        pending = {}
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            st = {s: self.status(s) for s in "ab"}
            for s in "ab":
                self.failed_now[s] = st[s]["failed"]
                if st[s]["state"] == 3 and self.first_failed[s] is None:
                    self.first_failed[s] = self.cycle
            now = {s: st[s]["state"] == 2 for s in "ab"}
            if self.pcs:
                now.update({"pcs_" + s: bool(int(getattr(self.dut, f"o_pcs_up_{s}").value))
                            for s in "ab"})
            for key, up in now.items():
                down_key, up_key = (("pcs_lock_losses", "pcs_relocks") if key.startswith("pcs")
                                    else ("link_downs", "link_recoveries"))
                if prev.get(key) and not up:
                    self.link_events[down_key] += 1
                    pending[key] = True
                elif up and pending.get(key):
                    self.link_events[up_key] += 1
                    pending[key] = False
                prev[key] = up

    async def outages(self):
        """``dark_events`` silent outages (link_up stays high) and ``link_drops`` PHY
        drops (link_up low, both directions dark), spread over the run."""
        rng = self.rng_faults
        events = ["dark"] * self.dark_events + ["drop"] * self.link_drops
        rng.shuffle(events)
        for ev in events:
            await Timer(10 * int(rng.integers(300, 1500)), unit="ns")
            await FallingEdge(self.clk)
            length = int(rng.integers(20, 400))
            d = ["ab", "ba"][int(rng.integers(2))]
            if ev == "dark":
                getattr(self.dut, f"i_dark_{d}").value = 1
                await Timer(10 * length, unit="ns")
                await FallingEdge(self.clk)
                getattr(self.dut, f"i_dark_{d}").value = 0
            else:
                busy = any(not s.done for s in self.sides)
                self.dut.i_dark_ab.value = 1
                self.dut.i_dark_ba.value = 1
                side = ["a", "b", "ab"][int(rng.integers(3))]
                for s in side:
                    getattr(self.dut, f"i_link_up_{s}").value = 0
                await Timer(10 * length, unit="ns")
                await FallingEdge(self.clk)
                self.dut.i_dark_ab.value = 0
                self.dut.i_dark_ba.value = 0
                await Timer(10 * int(rng.integers(1, 20)), unit="ns")
                await FallingEdge(self.clk)
                for s in side:
                    getattr(self.dut, f"i_link_up_{s}").value = 1
                for fn in self.on_bringup:
                    fn(busy)

    async def drop_in_bringup(self, cycles):
        # B comes up 40 cycles after A, so that A hears B's first bring-up flit after
        # having sent its own: B goes ACTIVE a round trip before A
        self.dut.i_link_up_b.value = 0
        await Timer(10 * 40, unit="ns")
        await FallingEdge(self.clk)
        self.dut.i_link_up_b.value = 1
        while True:
            await FallingEdge(self.clk)
            st = tuple(self.status(s)["state"] for s in "ab")
            if sorted(st) == [1, 2]:            # one ACTIVE, the other in INIT
                break
        self.bringup_drop_states = (self.cycle, st)
        for s in "ab":
            getattr(self.dut, f"i_link_up_{s}").value = 0
        self.dut.i_dark_ab.value = 1
        self.dut.i_dark_ba.value = 1
        await Timer(10 * cycles, unit="ns")
        await FallingEdge(self.clk)
        self.dut.i_dark_ab.value = 0
        self.dut.i_dark_ba.value = 0
        for s in "ab":
            getattr(self.dut, f"i_link_up_{s}").value = 1

    def pending_report(self):
        """What is still outstanding: scoreboard queues, sources, tags, DUT status."""
        out = {"cycle": self.cycle,
               "requests_pending": {str(k): len(q) for k, q in self.sb_req.queues.items() if q},
               "completions_pending": {str(k): len(q) for k, q in self.sb_cpl.queues.items()
                                       if q}}
        for s in self.sides:
            out[s.name] = {"sent": s.sent, "done": s.done, "req_queue": len(s.req_src.queue),
                           "rsp_queue": len(s.rsp_src.queue), "pending_rsp": len(s.pending_rsp),
                           "outstanding_tags": sorted(s.outstanding)[:16],
                           "status": self.status(s.name)}
        return out

    async def budget(self):
        """Once ``max_cycles`` cycles have passed: strict, fail with
        :meth:`pending_report`; otherwise (``fusionfabric link``) return, setting
        ``stopped`` (the run then ends with its report)."""
        while self.cycle < self.max_cycles:
            await ClockCycles(self.clk, self.max_cycles - self.cycle)
        if not self.strict:
            self.stopped = True
            return
        await ReadOnly()
        raise ScoreboardError(f"link run exceeded max_cycles={self.max_cycles} (seed "
                              f"{self.seed}): {self.pending_report()}")

    def finished(self, reqs) -> bool:
        """Every request sent and every non-posted one completed, and: everything
        delivered and answered, or (a dark lane for good) a chiplet failed."""
        if not all(r.done() for r in reqs) or any(s.outstanding for s in self.sides):
            return False
        if not (self.sb_req.pending or self.sb_cpl.pending
                or any(s.pending_rsp or s.rsp_src.queue for s in self.sides)):
            return True
        return (self.permanent_dark and self.dark_from is not None
                and any(self.failed_now.values()))

    async def wait_done(self, reqs):
        last = 0.0
        while not self.finished(reqs):
            if self.progress_file and time.monotonic() - last > 0.5:
                last = time.monotonic()
                with open(self.progress_file, "w") as f:
                    json.dump({"delivered": self.sb_req.delivered, "cycle": self.cycle}, f)
            await Timer(10 * 64, unit="ns")

    async def pauser(self):
        name, start, cycles = self.pause
        sink = {"a_o_req": self.sides[0].req_sink, "a_o_rsp": self.sides[0].rsp_sink,
                "b_o_req": self.sides[1].req_sink, "b_o_rsp": self.sides[1].rsp_sink}[name]
        await Timer(10 * int(start), unit="ns")
        sink.paused = True
        await Timer(10 * int(cycles), unit="ns")
        sink.paused = False

    async def run(self):
        import numpy as np
        self.rng_faults = np.random.default_rng([self.seed, 7])
        self.faults_off = False
        self.on_bringup = []
        await self.reset()
        self.sides = [Side(self, "a"), Side(self, "b")]
        cocotb.start_soon(self.count_cycles())
        self.dut.i_link_up_a.value = 1
        self.dut.i_link_up_b.value = 1
        self.start_watchdog()
        for s in self.sides:
            cocotb.start_soon(s.responder())
        for d in ("ab", "ba"):
            cocotb.start_soon(self.faults(d))
        outages = cocotb.start_soon(self.outages())
        if self.bringup_drop:
            cocotb.start_soon(self.drop_in_bringup(int(self.bringup_drop)))
        dark_lane = cocotb.start_soon(self.dark_lane_event()) if self.dark_lane else None
        cocotb.start_soon(self.watch_link())
        if self.pause:
            cocotb.start_soon(self.pauser())
        budget = cocotb.start_soon(self.budget()) if self.max_cycles else None
        if self.start_after_link:
            while not all(self.status(s)["state"] == 2 for s in "ab"):
                await FallingEdge(self.clk)
                await ReadOnly()
            await FallingEdge(self.clk)
        t0 = self.cycle
        reqs = [cocotb.start_soon(self.sides[0].requester(self.n))]
        if not self.one_way:
            reqs.append(cocotb.start_soon(self.sides[1].requester(self.n)))
        waiter = cocotb.start_soon(self.wait_done(reqs))
        if budget is not None and not self.strict:
            await First(waiter.complete, budget.complete)
        else:
            await waiter
        t1 = self.t_end = self.cycle
        self.watchdog.stop()
        if self.stopped:
            # the bound: stop the traffic where it is, report what happened so far
            for task in (waiter, outages, *reqs):
                if not task.done():
                    task.cancel()
        elif budget is not None:
            budget.cancel()
        if not self.stopped:
            await outages
            if dark_lane is not None and not self.permanent_dark:
                await dark_lane
        self.faults_off = True      # no new errors: every hit flit gets checked below
        await Timer(10 * 400, unit="ns")   # let in-flight control flits and counters settle
        # a link drop near the end of the traffic may still be retraining (PCS relock and
        # DL bring-up take several hundred cycles): give it up to 5,000 cycles (not for a
        # lane dark for good, nor after the bound)
        for _ in range(0 if self.stopped or self.permanent_dark else 5000):
            await FallingEdge(self.clk)
            await ReadOnly()
            if all(self.status(s)["state"] == 2 for s in "ab"):
                break
        return self.report(t1 - t0)

    def report(self, cycles):
        sa, sb = self.status("a"), self.status("b")
        hits = {d: int(getattr(self.dut, f"o_hit_{d}").value.to_unsigned()) for d in ("ab", "ba")}
        words = {d: int(getattr(self.dut, f"o_words_{d}").value.to_unsigned())
                 for d in ("ab", "ba")}
        lat = sorted(self.latency)
        payload = self.bytes[1] + self.bytes[2]
        # goodput over the traffic window: first request beat accepted .. last delivered
        window = (self.t_last - self.t_first + 1) if self.t_first is not None and \
            self.t_last is not None else cycles
        # steady state: bytes delivered between the deliveries at 10 % and 90 % of the run
        # (ramp-up and drain left out)
        steady = None
        if len(self.deliveries) >= 20:
            dl = sorted(self.deliveries)
            i0, i1 = len(dl) // 10, len(dl) * 9 // 10
            span = dl[i1][0] - dl[i0][0]
            if span > 0:
                steady = sum(b for _, b in dl[i0 + 1:i1 + 1]) / span
        starts = {d: int(getattr(self.dut, f"o_starts_{d}").value.to_unsigned())
                  for d in ("ab", "ba")} if self.pcs else None
        # flits hit by bit errors and flits cut by drops, apart (ChipletPair's channel)
        apart = {}
        if hasattr(self.dut, "o_err_flits_ab"):
            for key, sig in (("flits_hit_err", "o_err_flits"), ("flits_cut", "o_lost_flits")):
                apart[key] = sum(int(getattr(self.dut, f"{sig}_{d}").value.to_unsigned())
                                 for d in ("ab", "ba"))
        if self.dark_from is not None and self.permanent_dark:
            self.link_events["dark_cycles"] = self.cycle - self.dark_from
        # the senders' accounting (LinkLedger: delivered in order, refused never, one
        # completion per non-posted request); a broken promise is reported, not raised
        ledgers, ledger_error = {}, None
        for side in self.sides:
            if self.stopped:        # cut short: completions may still be due
                break
            try:
                ledgers[side.name] = side.ledger.check()
            except AssertionError as exc:
                ledger_error = f"side {side.name}: {exc}"
        held = {"posted": 0, "nonposted": 0}
        for side in self.sides:
            # accepted, not delivered: the tail still in the link's buffers
            accepted = [m for m, refused, _ in side.ledger.log if not refused]
            for m in accepted[len(side.ledger.delivered_msgs):]:
                held["posted" if m.opcode in POSTED_OPS else "nonposted"] += 1
        # non-posted requests taken by the port (refused or not) without a completion;
        # requests the port never took (it stalled) are ``not_taken``
        unanswered = not_taken = 0
        for side in self.sides:
            log = side.ledger.log
            unanswered += (sum(1 for m, _, _ in log if m.opcode not in POSTED_OPS)
                           - sum(len(v) for v in side.ledger.cpls.values()))
            not_taken += side.sent - len(log)
        stats = {
            "steady_bytes_per_cycle": steady,
            "start_rows": starts,
            "seed": self.seed, "sim": self.sim, "params": self.params, "ber": self.ber,
            "sent": sum(s.sent for s in self.sides),
            "delivered": self.sb_req.delivered,
            "completions": self.sb_cpl.delivered,
            "duplicates": self.sb_req.duplicates + self.sb_cpl.duplicates,
            "corrupt": self.sb_req.corrupt + self.sb_cpl.corrupt,
            # lost: expected, never delivered; a lane dark for good: the held tail is
            # accounted (above), the rest is lost
            "lost": (self.sb_req.pending - (held["posted"] + held["nonposted"]
                                            if self.permanent_dark and not self.stopped
                                            else 0)) + self.sb_cpl.pending,
            "replays": sa["replays"] + sb["replays"],
            "timeouts": sa["timeouts"] + sb["timeouts"],
            "crc_errors": sa["crc_err"] + sb["crc_err"],
            "flits_hit": hits["ab"] + hits["ba"],
            "cycles": cycles,
            "payload_bytes": payload,
            "window_cycles": window,
            "goodput_bytes_per_cycle": payload / max(1, window),
            "goodput_fraction_of_slot_rate": payload / max(1, window) / (16 * (1 if self.one_way else 2)),
            "latency_cycles": {"min": lat[0] if lat else None,
                               "mean": sum(lat) / len(lat) if lat else None,
                               "p99": lat[int(0.99 * (len(lat) - 1))] if lat else None,
                               "max": lat[-1] if lat else None},
            "status_a": sa, "status_b": sb, "hits": hits, "words": words,
            "pcs": self.pcs, **self.link_events, **apart,
            # fault escalation, as the accelerators saw it (independent of the STATUS
            # counters): requests refused while failed (the port's ``failed`` set when
            # the header was taken), ERROR and TIMEOUT completions made by the own chiplet,
            # requests accepted but not delivered (held by the link), non-posted requests
            # with no completion at all (unreported), late answers the completers sent
            "refused_seen": {k: sum(s.refused[k] for s in self.sides)
                             for k in ("posted", "nonposted")},
            "error_cpls_seen": {k: sum(s.error_cpls[k] for s in self.sides)
                                for k in ("error", "timeout")},
            "held": held, "unreported": unanswered, "not_taken": not_taken,
            "late_answers": self.late_sent,
            "ledger": ledgers, "ledger_error": ledger_error,
            "first_failed": dict(self.first_failed), "dark_from": self.dark_from,
            "dark_permanent": self.permanent_dark,
            "failed_at_end": {s: int((sa, sb)[i]["failed"]) for i, s in enumerate("ab")},
            "stopped_at_max_cycles": self.stopped, "end_cycle": self.t_end,
        }
        if self.stats_file:
            with open(self.stats_file, "w") as f:
                json.dump(stats, f, indent=1)
        return stats


def tb_arg(dut, key, default):
    from fusionfabric.tb.common.env import tb_args
    return tb_args().get(key, default)
