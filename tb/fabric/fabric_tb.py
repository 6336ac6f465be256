"""Fabric testbench kit: one accelerator model per endpoint (requester with tags, completer
with memory, RESULT receiver), group configuration, fault control, status and the results
JSON. Used by :mod:`fusionfabric.tb.fabric.test_fabric`; the DUT is block ``fabric``."""

from __future__ import annotations

import json
import os
from collections import deque

from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly

from fusionfabric.rtl.fabric.fabric import (FAULT, FEC_STATUS, LINK_STATUS, endpoint_lanes,
                                            lane_bits, lane_index)
from fusionfabric.rtl.fabric.fault import ber_threshold
from fusionfabric.sim import chiplet as C
from fusionfabric.formats.bitfields import Fields
from fusionfabric.formats.chiplet import NON_POSTED, STATUS, Opcode, Status
from fusionfabric.sim.chiplet import MemoryModel, Message
from fusionfabric.formats.switch import GROUP_BITS, group_entry
from fusionfabric.tb.chiplet.link import Assembler, LinkScoreboard
from fusionfabric.tb.common.scoreboard import ScoreboardError
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

SWITCH_STATS = ("flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
                "drop_kind")
UNIT_STATS = ("contributions", "results", "duplicate", "nonmember", "invalid",
              "full_cycles", "result_drops")
LINK_ACTIVE = 2


def result_chunks(msg: Message) -> list[int]:
    """The chunk ids of a RESULT message's valid beats (docs/fabric.md)."""
    count = msg.status + 1
    ids = [msg.chunk] + [(msg.addr >> (16 * i)) & 0xFFFF for i in range(3)]
    return ids[:count]


def result_items(msg: Message) -> list[tuple[int, int]]:
    """``[(chunk, 128-bit result word), ...]`` of a RESULT message."""
    chunks = result_chunks(msg)
    return [(c, int.from_bytes(msg.data[16 * i:16 * i + 16], "little"))
            for i, c in enumerate(chunks)]


class FabricLedger:
    """What happened to every non-posted request on a fabric with a failed endpoint.

    The strict scoreboards expect every request delivered and every completion OK; with a
    dead endpoint some are neither. The ledger keeps, per (source, destination), the
    requests in the order sent, and checks as they happen:

    * a delivery is the next request sent on its (source, destination) pair, intact: the
      delivered requests of a pair are always a prefix of the sent ones (nothing lost
      before a delivered one, duplicated, reordered or corrupted);
    * each request gets exactly one completion at its source: OK only if delivered, and
      then equal to the completer's response; ERROR (refused by a failed chiplet) only if
      not delivered; TIMEOUT (the requester's completion timer) either way;
    * a request whose source and destination are both outside ``dead`` is delivered and
      completes OK.

    :meth:`check` (at the end) adds: no request still outstanding, every pair of live
    endpoints delivered in full; it returns the accounting.
    """

    def __init__(self, dead, seed, report=None):
        self.dead = set(dead)
        self.seed = seed
        self.report = report          # callable: what is pending, appended to a failure
        self.pairs: dict[tuple[int, int], list[dict]] = {}
        self.n_delivered: dict[tuple[int, int], int] = {}
        self.outstanding: dict[tuple[int, int], dict] = {}
        self.counts = {"sent": 0, "delivered": 0, "ok": 0, "error": 0, "timeout": 0}
        self.by_source: dict[int, dict] = {}

    def _fail(self, msg):
        extra = f"\n{self.report()}" if self.report else ""
        raise ScoreboardError(f"ledger: {msg} (seed {self.seed}){extra}")

    def live(self, src, dest) -> bool:
        return src not in self.dead and dest not in self.dead

    def sent(self, msg: Message):
        entry = {"msg": msg, "delivered": 0, "rsp": None, "cpl": None}
        self.pairs.setdefault((msg.src, msg.dest), []).append(entry)
        if (msg.src, msg.tag) in self.outstanding:
            self._fail(f"tag {msg.tag} of endpoint {msg.src} reused while outstanding")
        self.outstanding[(msg.src, msg.tag)] = entry
        self.counts["sent"] += 1

    def delivered(self, dest: int, msg: Message):
        key = (msg.src, dest)
        i = self.n_delivered.get(key, 0)
        sent = self.pairs.get(key, [])
        if i >= len(sent):
            self._fail(f"{msg} delivered at {dest}: nothing more was sent on {key} "
                       "(duplicate)")
        if sent[i]["msg"] != msg:
            self._fail(f"delivery {i} on {key}: got {msg}, expected {sent[i]['msg']} "
                       "(lost, reordered or corrupt)")
        sent[i]["delivered"] = 1
        self.n_delivered[key] = i + 1
        self.counts["delivered"] += 1

    def response(self, rsp: Message):
        entry = self.outstanding.get((rsp.dest, rsp.tag))
        if entry is None or not entry["delivered"]:
            self._fail(f"response {rsp} for no delivered request")
        entry["rsp"] = rsp

    def completed(self, src: int, cpl: Message):
        entry = self.outstanding.pop((src, cpl.tag), None)
        if entry is None:
            self._fail(f"completion {cpl} at {src}: tag {cpl.tag} not outstanding")
        req = entry["msg"]
        st = Status(cpl.status)
        if st == Status.OK:
            if not entry["delivered"] or cpl != entry["rsp"]:
                self._fail(f"OK completion {cpl} for {req}: delivered "
                           f"{entry['delivered']}, response {entry['rsp']}")
        elif st == Status.ERROR:
            if entry["delivered"]:
                self._fail(f"ERROR completion for {req}, which was delivered")
        elif st != Status.TIMEOUT:
            self._fail(f"completion {cpl} for {req}: status {st.name}")
        if st != Status.OK and self.live(req.src, req.dest):
            self._fail(f"{st.name} completion for {req} between live endpoints")
        entry["cpl"] = cpl
        name = st.name.lower()
        self.counts[name] += 1
        per = self.by_source.setdefault(src, {"ok": 0, "error": 0, "timeout": 0})
        per[name] += 1

    @property
    def open(self) -> int:
        return len(self.outstanding)

    @property
    def open_live(self) -> int:
        """Requests between live endpoints not yet completed."""
        return sum(1 for e in self.outstanding.values()
                   if self.live(e["msg"].src, e["msg"].dest))

    def check(self) -> dict:
        if self.outstanding:
            self._fail(f"{len(self.outstanding)} requests never completed: "
                       f"{[str(e['msg']) for e in list(self.outstanding.values())[:4]]}")
        for (src, dest), sent in self.pairs.items():
            n = self.n_delivered.get((src, dest), 0)
            if self.live(src, dest) and n != len(sent):
                self._fail(f"{len(sent) - n} of {len(sent)} requests {src}->{dest} "
                           "never delivered between live endpoints")
        c = self.counts
        undelivered = c["sent"] - c["delivered"]
        # every request not delivered was reported back to its sender
        reported = sum(1 for sent in self.pairs.values() for e in sent
                       if not e["delivered"] and e["cpl"] is not None
                       and e["cpl"].status != Status.OK)
        assert reported == undelivered, (reported, undelivered)
        return {**c, "undelivered": undelivered, "unreported": undelivered - reported,
                "by_source": {str(k): v for k, v in sorted(self.by_source.items())}}


class Endpoint:
    """Accelerator ``e``: sends requests (tags for non-posted ones), completes requests
    from its memory, collects completions and RESULT messages."""

    def __init__(self, tb, e):
        self.tb, self.e = tb, e
        dut, clk, wd = tb.dut, tb.clk, tb.watchdog
        self.req_src = StreamSource(dut, f"i_req__{e}", clk, tb.rng_for(10 + e), tb.idle, wd)
        self.rsp_src = StreamSource(dut, f"i_rsp__{e}", clk, tb.rng_for(20 + e), tb.idle, wd)
        self.req_sink = StreamSink(dut, f"o_req__{e}", clk, tb.rng_for(30 + e),
                                   tb.backpressure, wd, keep=False)
        self.rsp_sink = StreamSink(dut, f"o_rsp__{e}", clk, tb.rng_for(40 + e),
                                   tb.backpressure, wd, keep=False)
        self.req_sink.on_beat.append(Assembler(self.on_request))
        self.rsp_sink.on_beat.append(Assembler(self.on_completion))
        self.mem = MemoryModel(e)
        self.free_tags = deque(range(256))
        self.tag_freed = Event()
        self.outstanding: dict[int, tuple[Message, int]] = {}
        self.pending_rsp: list[Message] = []
        self.sent_msgs = 0
        self.sent_bytes = 0          # payload bytes of requests sent
        self.recv_bytes = 0          # payload bytes delivered to this endpoint
        self.results = 0
        self.latency: list[int] = []
        self.on_result = None        # callback(e, msg, cycle)
        self.on_message = None       # callback(e, msg, cycle) for every delivered request
        self.handler = None          # callback(e, msg, cycle): takes every message instead

    # -- sending -------------------------------------------------------------------------
    async def send(self, msg: Message, nonposted: bool | None = None):
        """Queue ``msg`` (allocating a tag for WRITE/READ/ATOMIC_ADD)."""
        tb = self.tb
        if nonposted is None:
            nonposted = msg.opcode in NON_POSTED
        if nonposted:
            while not self.free_tags:
                self.tag_freed.clear()
                await self.tag_freed.wait()
            tag = self.free_tags.popleft()
            msg = Message(msg.opcode, msg.length, tag, msg.dest, self.e, msg.addr,
                          msg.status, msg.op, msg.dtype, msg.chunk, msg.data)
            self.outstanding[tag] = (msg, tb.cycle())
        else:
            msg = msg.with_src(self.e)
        if tb.ledger is not None:
            tb.ledger.sent(msg)
        else:
            tb.expect_delivery(msg)
        self.req_src.send_many(msg.beats())
        self.sent_msgs += 1
        self.sent_bytes += len(msg.data)
        if len(self.req_src.queue) > 64:
            await self.req_src.wait_idle()

    # -- receiving -----------------------------------------------------------------------
    def on_request(self, msg: Message, cycle: int):
        tb = self.tb
        if self.handler:
            self.handler(self.e, msg, cycle)
            return
        if msg.opcode == Opcode.RESULT:
            self.results += 1
            self.recv_bytes += 16 * len(result_chunks(msg))
            tb.watchdog.kick(f"endpoint {self.e} RESULT")
            if self.on_result:
                self.on_result(self.e, msg, cycle)
            return
        if tb.ledger is not None:
            tb.ledger.delivered(self.e, msg)
        else:
            tb.sb_req.observe((msg.src, self.e), msg)
        self.recv_bytes += len(msg.data)
        if self.on_message:
            self.on_message(self.e, msg, cycle)
        rsp = self.mem.respond(msg)
        if rsp is not None:
            self.pending_rsp.append(rsp)

    async def responder(self):
        tb = self.tb
        while True:
            if self.pending_rsp:
                i = int(tb.rng.integers(len(self.pending_rsp)))
                rsp = self.pending_rsp.pop(i).with_src(self.e)
                if tb.ledger is not None:
                    tb.ledger.response(rsp)
                else:
                    tb.sb_cpl.expect((rsp.dest, rsp.tag), rsp)
                self.rsp_src.send_many(rsp.beats())
                if len(self.rsp_src.queue) > 32:
                    await self.rsp_src.wait_idle()
            await FallingEdge(tb.clk)

    def on_completion(self, msg: Message, cycle: int):
        tb = self.tb
        if self.handler:
            self.handler(self.e, msg, cycle)
            return
        if msg.tag not in self.outstanding:
            raise ScoreboardError(f"endpoint {self.e}: completion for tag {msg.tag} not "
                                  f"outstanding (seed {tb.seed})")
        if tb.ledger is not None:
            tb.ledger.completed(self.e, msg)
        else:
            tb.sb_cpl.observe((self.e, msg.tag), msg)
        req, t0 = self.outstanding.pop(msg.tag)
        self.latency.append(cycle - t0)
        if msg.opcode == Opcode.READ_CPL and msg.status == Status.OK:
            self.recv_bytes += len(msg.data)
        self.free_tags.append(msg.tag)
        self.tag_freed.set()

    @property
    def idle(self) -> bool:
        return (not self.outstanding and not self.pending_rsp and self.req_src.idle_now
                and self.rsp_src.idle_now)


def fec_totals(endpoints: list[dict]) -> dict:
    """FEC counters summed over both directions of every endpoint: ``codewords``,
    ``corrected_codewords``, ``corrected_symbols``, ``uncorrectable``."""
    keys = ("codewords", "corrected_codewords", "corrected_symbols", "uncorrectable")
    return {k: sum(int(x["fec"][f"{d}_{k}"]) for x in endpoints for d in ("up", "down"))
            for k in keys}


class FabricTB(TB):
    """The whole fabric: endpoints, configuration, faults, status, results file."""

    def __init__(self, dut, idle=0.0, backpressure=0.0, stall_cycles=20_000):
        super().__init__(dut, stall_cycles=stall_cycles)
        p = self.params
        self.n = int(p.get("n_endpoints", 8))
        self.n_lanes = int(p.get("n_lanes", 2))
        #: Lanes per direction of each endpoint (the endpoint list, else n_lanes each).
        self.lanes = endpoint_lanes({"n_endpoints": self.n, **p})
        self.lane_profile = str(p.get("lane_profile", "64b66b"))
        #: Bits per cycle of one lane (the LaneFault width the BER is set for).
        self.lane_bits = lane_bits(self.lane_profile, int(p.get("fec_symbols", 8)),
                                   2 if self.lane_profile == "rs544" else self.n_lanes)
        self.idle, self.backpressure = idle, backpressure
        self.entry = group_entry(self.n)
        self.cfg = Fields([("group", GROUP_BITS), ("entry", self.entry.width)])
        self.groups: dict[int, dict] = {}
        self.sb_req = LinkScoreboard("requests", self.seed, watchdog=self.watchdog)
        self.sb_cpl = LinkScoreboard("completions", self.seed, watchdog=self.watchdog)
        #: A :class:`FabricLedger` instead of the strict scoreboards (dead endpoints).
        self.ledger: FabricLedger | None = None
        #: A :class:`fusionfabric.tb.fabric.hits.HitMonitor` (``count_hits``), else None.
        self.hits = None
        self._cycle = 0
        self.eps = [Endpoint(self, e) for e in range(self.n)]
        self.config = StreamSource(dut, "i_config", self.clk)
        self.fault = StreamSource(dut, "i_fault", self.clk)
        # idle inputs carry zeros, not X: Icarus propagates an X payload into the PCS
        # scrambler state through the chiplet even while valid is low
        for src in [self.config, self.fault] + [s for ep in self.eps
                                                 for s in (ep.req_src, ep.rsp_src)]:
            src.payload.value = 0
        self.t_start = 0
        self.t_up = 0
        self.watchdog.report = self.stall_report

    def stall_report(self) -> str:
        """What is still pending: scoreboards, every endpoint's queues and the status ports."""
        lines = [f"requests pending {self.sb_req.pending} "
                 f"{ {k: [str(m) for m in q] for k, q in self.sb_req.queues.items() if q} }",
                 f"completions pending {self.sb_cpl.pending} "
                 f"{ {k: [str(m) for m in q] for k, q in self.sb_cpl.queues.items() if q} }"]
        for e, ep in enumerate(self.eps):
            lines.append(
                f"endpoint {e}: outstanding tags {sorted(ep.outstanding)}, pending_rsp "
                f"{len(ep.pending_rsp)}, req_src queue {len(ep.req_src.queue)} "
                f"busy {ep.req_src._current is not None}, rsp_src queue "
                f"{len(ep.rsp_src.queue)} busy {ep.rsp_src._current is not None}, "
                f"partial req msg {len(ep.req_sink.on_beat[0].beats)} beats, partial rsp msg "
                f"{len(ep.rsp_sink.on_beat[0].beats)} beats")
            for side in ("ep", "sw"):
                lines.append(f"  {side} chiplet {self.status(e, side)}")
            lines.append(f"  switch {self.switch_stats(e)} bridge drops "
                         f"{to_int(getattr(self.dut, f'o_bridge_drops__{e}').value)}")
            for nm in ("i_req", "i_rsp", "o_req", "o_rsp"):
                v = getattr(self.dut, f"{nm}__{e}__valid").value
                r = getattr(self.dut, f"{nm}__{e}__ready").value
                lines.append(f"  {nm}[{e}] valid={v} ready={r}")
        lines.append(self._peek_internals())
        return "\n".join(lines)

    def _peek_internals(self) -> str:
        """Internal state (Icarus, or Verilator with every signal public); "" otherwise."""
        names = [f"switch.{x}{i}" for x in ("lock_in", "lock_v", "credit", "done", "target")
                 for i in range(2 * self.n)]
        names += [f"switch.i_port__{i}__{x}" for i in range(self.n) for x in ("valid", "ready")]
        names += [f"switch.o_port__{i}__valid" for i in range(self.n)]
        for e in range(self.n):
            names += [f"egress{e}.reasm.{x}" for x in ("full", "ridx", "o_beat__valid",
                                                       "i_flit__ready")]
            names += [f"egress{e}.reasm.wbuf{i}" for i in range(self.n)]
            names += [f"egress{e}.reasm.widx{i}" for i in range(self.n)]
            names += [f"egress{e}.i_flit__ready", f"egress{e}.o_req__ready",
                      f"egress{e}.o_rsp__ready", f"egress{e}.o_req__valid",
                      f"egress{e}.o_rsp__valid"]
            names += [f"ingress{e}.{x}" for x in ("active", "cur", "hdr_done", "k",
                                                 "i_req__valid", "i_rsp__valid",
                                                 "o_flit__ready")]
        out = []
        for nm in names:
            h = self.dut
            try:
                for part in nm.split("."):
                    h = getattr(h, part)
                out.append(f"{nm}={h.value}")
            except Exception:
                out.append(f"{nm}=?")
        return "internals: " + " ".join(out)

    @staticmethod
    def args_of() -> dict:
        from fusionfabric.tb.common.env import tb_args
        return tb_args()

    def results_path(self) -> str:
        return (self.args.get("result_file") or os.environ.get("FF_RESULTS")
                or "fabric_results.json")

    def write_results(self, record: dict):
        with open(self.results_path(), "w") as fh:
            json.dump(record, fh, indent=1, default=int)

    def run_seed(self) -> int:
        """The runner's seed (``SEED=`` reruns it)."""
        return int(os.environ.get("COCOTB_RANDOM_SEED") or os.environ.get("RANDOM_SEED")
                   or self.seed)

    def rng_for(self, stream):
        from fusionfabric.tb.common.env import make_rng
        return make_rng(stream)

    def cycle(self) -> int:
        return self.eps[0].req_src.cycle if self.eps else 0

    # -- expectations ---------------------------------------------------------------------
    def expect_delivery(self, msg: Message):
        if msg.opcode in (Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD):
            self.sb_req.expect((msg.src, msg.dest), msg)
        elif msg.opcode == Opcode.MULTICAST:
            g = self.groups.get(msg.dest)
            if not g or not g["valid"]:
                raise ValueError(f"MULTICAST to unconfigured group {msg.dest}")
            for member in range(self.n):
                if g["members"] >> member & 1:
                    self.sb_req.expect((msg.src, member), msg)
        # REDUCE: checked through the RESULT messages by the caller

    # -- configuration --------------------------------------------------------------------
    def write_group(self, group, members, valid=1, **fields):
        entry = self.entry.pack(members=members, valid=valid, **fields)
        self.config.send(self.cfg.pack(group=group, entry=entry))
        self.groups[group] = {"members": members, "valid": valid, **fields}

    def write_entry(self, group: int, entry: int):
        """Write a packed ``group_entry`` (e.g. from a workload's ``config_writes``)."""
        self.config.send(self.cfg.pack(group=group, entry=entry))
        f = self.entry.unpack(entry)
        self.groups[group] = f

    async def config_done(self):
        await self.config.wait_idle()
        await ClockCycles(self.clk, 2)

    def set_fault(self, lane=0, threshold=0, dark=0, slip=0, all_lanes=False):
        self.fault.send(FAULT.pack(lane=lane, all=int(all_lanes), threshold=threshold,
                                   dark=dark, slip=slip))

    def ber_threshold(self, ber: float) -> int:
        """``i_fault.threshold`` for bit error rate ``ber`` on this fabric's lanes."""
        return ber_threshold(float(ber), self.lane_bits)

    def lane(self, endpoint, direction, k):
        return lane_index(endpoint, direction, k, lanes=self.lanes)

    def lane_owner(self, idx: int) -> tuple[int, int]:
        """``(endpoint, direction)`` of lane index ``idx`` (:meth:`lane`)."""
        for e, k in enumerate(self.lanes):
            if idx < 2 * k:
                return e, idx // k
            idx -= 2 * k
        raise ValueError(f"lane {idx} is not a lane of this fabric")

    # -- status -----------------------------------------------------------------------------
    async def sample(self):
        await FallingEdge(self.clk)
        await ReadOnly()

    def status(self, e, side="ep"):
        return STATUS.unpack(to_int(getattr(self.dut, f"o_{side}_status__{e}").value))

    def link(self, e):
        return LINK_STATUS.unpack(to_int(getattr(self.dut, f"o_link__{e}").value))

    def fec(self, e) -> dict | None:
        """Endpoint ``e``'s FEC receiver counters (:data:`FEC_STATUS`), None on 64b/66b."""
        if self.lane_profile != "rs544":
            return None
        return FEC_STATUS.unpack(to_int(getattr(self.dut, f"o_fec__{e}").value))

    def switch_stats(self, e):
        lay = Fields([(s, 32) for s in SWITCH_STATS])
        return lay.unpack(to_int(getattr(self.dut, f"o_stats__{e}").value))

    def unit_stats(self, e):
        lay = Fields([(s, 32) for s in UNIT_STATS])
        return lay.unpack(to_int(getattr(self.dut, f"o_unit_stats__{e}").value))

    def flips(self, idx):
        return to_int(getattr(self.dut, f"o_flips__{idx}").value)

    async def wait_links_up(self, limit=5000):
        if self.lane_profile == "rs544":   # FEC lock: two marker periods, then the decoder
            p = self.params
            limit += 4 * int(p.get("fec_am_period", 8)) * 544 // int(p.get("fec_symbols", 8))
        for t in range(limit):
            await self.sample()
            if all(self.status(e, s)["state"] == LINK_ACTIVE
                   for e in range(self.n) for s in ("ep", "sw")):
                self.watchdog.kick("links up")
                return t
        states = {(e, s): self.status(e, s)["state"] for e in range(self.n)
                  for s in ("ep", "sw")}
        links = {e: self.link(e) for e in range(self.n)}
        raise AssertionError(f"links not up after {limit} cycles: chiplet states {states}, "
                             f"PCS {links} (seed {self.seed})")

    async def wait_quiet(self, limit=200_000, extra=None):
        """Wait until every endpoint is idle and nothing is pending in the scoreboards."""
        for _ in range(limit):
            await FallingEdge(self.clk)
            if (all(ep.idle for ep in self.eps) and not self.sb_req.pending
                    and not self.sb_cpl.pending and (extra is None or extra())):
                return
        raise AssertionError(f"fabric not quiet after {limit} cycles: requests pending "
                             f"{self.sb_req.pending}, completions {self.sb_cpl.pending} "
                             f"(seed {self.seed})")

    async def check_clean(self):
        """No overflow or credit error anywhere; every link still active."""
        await self.sample()
        for e in range(self.n):
            for side in ("ep", "sw"):
                st = self.status(e, side)
                assert st["overflow"] == 0 and st["credit_err"] == 0 and st["bad_op"] == 0, \
                    f"endpoint {e} {side} chiplet status {st} (seed {self.seed})"
                assert st["state"] == LINK_ACTIVE, \
                    f"endpoint {e} {side} link not active: {st} (seed {self.seed})"
            s = self.switch_stats(e)
            assert s["drop_dest"] == 0 and s["drop_group"] == 0 and s["drop_kind"] == 0, \
                f"switch port {e} dropped flits: {s} (seed {self.seed})"
            assert to_int(getattr(self.dut, f"o_bridge_drops__{e}").value) == 0

    # -- results file --------------------------------------------------------------------------
    async def report(self, workload: str, cycles: int, extra: dict | None = None,
                     write: bool = True) -> dict:
        await self.sample()
        eps = []
        for e, ep in enumerate(self.eps):
            st_ep, st_sw, link = self.status(e, "ep"), self.status(e, "sw"), self.link(e)
            eps.append({
                "endpoint": e,
                "sent_messages": ep.sent_msgs,
                "sent_bytes": ep.sent_bytes,
                "received_bytes": ep.recv_bytes,
                "results": ep.results,
                "goodput_bytes_per_cycle": round(ep.recv_bytes / max(1, cycles), 4),
                "mean_completion_latency": (round(sum(ep.latency) / len(ep.latency), 1)
                                            if ep.latency else None),
                "replays": st_ep["replays"] + st_sw["replays"],
                "crc_errors": st_ep["crc_err"] + st_sw["crc_err"],
                "relocks": link["up_drops"] + link["down_drops"],
                "flips": sum(self.flips(self.lane(e, d, k)) for d in (0, 1)
                             for k in range(self.lanes[e])),
                "chiplet_ep": st_ep, "chiplet_sw": st_sw, "link": link,
                **({"fec": self.fec(e)} if self.lane_profile == "rs544" else {}),
                "switch": self.switch_stats(e), "unit": self.unit_stats(e),
            })
        out = {"workload": workload, "n_endpoints": self.n, "seed": self.run_seed(),
               "sim": self.sim, "cycles": cycles, "link_up_cycles": self.t_up,
               "bytes_moved": sum(x["received_bytes"] for x in eps),
               "replays": sum(x["replays"] for x in eps),
               "relocks": sum(x["relocks"] for x in eps),
               "lane_profile": self.lane_profile,
               # the strict scoreboards (unused while a ledger runs: its accounting instead)
               "scoreboard": {"delivered": self.sb_req.delivered + self.sb_cpl.delivered,
                              "duplicates": self.sb_req.duplicates + self.sb_cpl.duplicates,
                              "corrupt": self.sb_req.corrupt + self.sb_cpl.corrupt,
                              "lost": self.sb_req.pending + self.sb_cpl.pending},
               **({"fec": fec_totals(eps)} if self.lane_profile == "rs544" else {}),
               "endpoints": eps}
        if extra:
            out.update(extra)
        if write and self.hits is not None:
            out["hits"] = self.hits.result()
        if write:
            self.write_results(out)
        return out
