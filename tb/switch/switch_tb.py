"""Switch testbench kit: drivers per port, the per-(source, destination) scoreboard,
packet-contiguity checker, group-table writes, counter and credit checks."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from fusionfabric.formats.bitfields import Fields
from fusionfabric.formats.switch import GROUP_BITS, Kind, group_entry, switch_flit
from fusionfabric.sim.switch_ref import route
from fusionfabric.tb.common.scoreboard import KeyedScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB as _TB

STATS = ("flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
         "drop_kind")


class SwitchTB(_TB):
    def __init__(self, dut, idle=0.0, backpressure=0.0, stall_cycles=5000):
        super().__init__(dut, stall_cycles=stall_cycles)
        p = self.params
        self.n = int(p["n_ports"])
        self.flit = switch_flit(int(p["data_width"]))
        self.entry = group_entry(self.n)
        self.cfg = Fields([("group", GROUP_BITS), ("entry", self.entry.width)])
        self.groups: dict[int, dict] = {}
        self.sb = KeyedScoreboard("switch", seed=self.seed, watchdog=self.watchdog,
                                  fmt=self._fmt)
        self.src = [StreamSource(dut, f"i_port__{i}", self.clk, rng=self._rng(1 + i),
                                 idle=idle, watchdog=self.watchdog) for i in range(self.n)]
        self.snk = [StreamSink(dut, f"o_port__{o}", self.clk, rng=self._rng(100 + o),
                               backpressure=backpressure, watchdog=self.watchdog)
                    for o in range(self.n)]
        self.config = StreamSource(dut, "i_config", self.clk)
        self.expected_drops = {c: [0] * self.n for c in ("drop_dest", "drop_group",
                                                         "drop_kind")}
        self.expected_in = [0] * self.n
        self.delivered = [0] * self.n
        self.open_pkt: list[int | None] = [None] * self.n
        self.on_deliver = []
        self.on_result = None       # RESULT flits go here instead of the scoreboard
        self.reduce = bool(p.get("reduce", False))
        for o, s in enumerate(self.snk):
            s.keep = False
            s.on_beat.append(lambda w, c, o=o: self._observe(o, w, c))

    def _rng(self, k):
        from fusionfabric.tb.common.env import make_rng
        return make_rng(k)

    def _fmt(self, w):
        f = self.flit.unpack(w)
        return (f"{{src {f['src']} dest {f['dest']} kind {f['kind']} first {f['first']} "
                f"last {f['last']} data {f['data']:#x}}}")

    def _observe(self, o, word, cycle):
        f = self.flit.unpack(word)
        if f["kind"] == Kind.UNICAST:
            owner = self.open_pkt[o]
            if owner is not None and owner != f["src"]:
                raise AssertionError(
                    f"output {o}: flit from input {f['src']} inside the open packet of input "
                    f"{owner} (seed {self.seed})")
            self.open_pkt[o] = None if f["last"] else f["src"]
        self.delivered[o] += 1
        if f["kind"] == Kind.RESULT and self.on_result is not None:
            self.on_result(o, f, word)
            return
        self.sb.observe((f["src"], o), word)
        for cb in self.on_deliver:
            cb(f["src"], o, f)

    # -- configuration ------------------------------------------------------------------
    def write_group(self, group, members, valid=1, **fields):
        entry = self.entry.pack(members=members, valid=valid, **fields)
        self.config.send(self.cfg.pack(group=group, entry=entry))
        if group < int(self.params["n_groups"]):
            self.groups[group] = {"members": members, "valid": valid}

    async def config_done(self):
        await self.config.wait_idle()
        await ClockCycles(self.clk, 2)

    # -- traffic ------------------------------------------------------------------------
    def send(self, i, kind, dest, data, first=1, last=1, src_garbage=0, chunk=0):
        """Queue one flit on input i and record what must come out (or the drop)."""
        word = self.flit.pack(data=data, first=first, last=last, kind=kind, dest=dest,
                              src=src_garbage, chunk=chunk)
        targets, drop = route(kind, dest, self.n, self.groups, self.reduce)
        out = self.flit.pack(data=data, first=first, last=last, kind=kind, dest=dest,
                             src=i, chunk=chunk)
        if drop:
            self.expected_drops[drop][i] += 1
        else:
            self.expected_in[i] += 1
        for t in targets:
            self.sb.expect((i, t), out)
        self.src[i].send(word)
        return targets

    async def drain(self, timeout=200_000):
        for s in self.src:
            await s.wait_idle()
        n = 0
        while self.sb.pending and n < timeout:
            await ClockCycles(self.clk, 16)
            n += 16
        await ClockCycles(self.clk, 8)

    async def read(self, name):
        await FallingEdge(self.clk)
        await ReadOnly()
        return to_int(getattr(self.dut, name).value)

    async def check_end(self):
        """Scoreboard empty, credits back to out_depth, counters equal the traffic."""
        self.sb.check_empty()
        await FallingEdge(self.clk)
        await ReadOnly()
        out_depth = int(self.params["out_depth"])
        names = [f"o_credit__{o}" for o in range(self.n)]
        if self.reduce:
            names += [f"o_unit_credit__{u}" for u in range(self.n)]
        for name in names:
            c = to_int(getattr(self.dut, name).value)
            assert c == out_depth, f"{name}: {c} credits at the end, not {out_depth} " \
                                   f"(seed {self.seed})"
        stat = Fields([(s, 32) for s in STATS])
        for p in range(self.n):
            st = stat.unpack(to_int(getattr(self.dut, f"o_stats__{p}").value))
            assert st["flits_in"] == self.expected_in[p], \
                f"port {p}: flits_in {st['flits_in']} != {self.expected_in[p]}"
            assert st["flits_out"] == self.delivered[p], \
                f"port {p}: flits_out {st['flits_out']} != {self.delivered[p]}"
            for c, counts in self.expected_drops.items():
                assert st[c] == counts[p], f"port {p}: {c} {st[c]} != {counts[p]}"
        self.watchdog.stop()
