"""cocotb tests: two chiplets back to back through a fault channel (tb.chiplet.harness.ChipletPair).

One traffic test driven by the runner's ``test_args`` (error rate, bursts, outages, link
drops, pauses; see :class:`fusionfabric.tb.chiplet.link.LinkTB`) plus its checks: exactly-once,
in-order per (source, destination), intact data, every completion matched to its tag,
and counters consistent with the injected faults.
"""

from __future__ import annotations

import cocotb

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import Opcode
from fusionfabric.tb.chiplet.link import LinkTB
from fusionfabric.tb.common.coverage import cover_cross, cover_point, export_coverage

_OPS = [o.name for o in (Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST,
                         Opcode.REDUCE)]
_op = cover_point("chiplet.opcode", bins=_OPS)
_len = cover_point("chiplet.length", bins=list(C.LENGTHS))
_op_len = cover_cross("chiplet.opcode_x_length", ["chiplet.opcode", "chiplet.length"],
                      [_op, _len])
_replay_pos = cover_point("chiplet.replay_from_position", bins=list(range(8)))
_credit = cover_point("chiplet.credit_exhausted", bins=["vc0_requests", "vc1_responses"])
_bringup = cover_point("chiplet.bringup_during_traffic", bins=[True])


async def _watch(tb):
    """Sample replay positions and credit exhaustion from the status/ports."""
    from cocotb.triggers import FallingEdge, ReadOnly
    last = {"a": 0, "b": 0}
    stall = {"a_i_req": 0, "b_i_rsp": 0, "a_i_rsp": 0, "b_i_req": 0}
    while True:
        await FallingEdge(tb.clk)
        await ReadOnly()
        if tb.cycle % 4 == 0:
            for s in ("a", "b"):
                st = tb.status(s)
                if st["seq_err"] != last.get(s + "se", 0):
                    last[s + "se"] = st["seq_err"]
                    tb.log.warning("cycle %d side %s seq_err status %s", tb.cycle, s, st)
                if st["replays"] != last[s]:
                    last[s] = st["replays"]
                    if tb.params.get("replay_depth", 8) == 8:
                        _replay_pos(st["replay_pos"])
        for name in stall:
            v = getattr(tb.dut, f"{name}__valid").value
            r = getattr(tb.dut, f"{name}__ready").value
            if int(v) and not int(r):
                stall[name] += 1
                if stall[name] == 200:   # > a DL round trip without room: credits exhausted
                    _credit("vc0_requests" if name.endswith("req") else "vc1_responses")
            else:
                stall[name] = 0


@cocotb.test()
async def test_traffic(dut):
    from fusionfabric.tb.common.env import tb_args
    report_only = bool(tb_args().get("report_only", False))   # fusionfabric link
    tb = LinkTB(dut, strict=not report_only)
    tb.samplers.append(lambda m: _op_len(Opcode(m.opcode).name, C.LENGTHS[m.length]))
    cocotb.start_soon(_watch(tb))
    tb_bringups = []

    async def go():
        return await tb.run()

    tb.on_bringup = []
    task = cocotb.start_soon(go())
    # run() resets on_bringup; hook after it starts
    from cocotb.triggers import Timer
    await Timer(10, unit="ns")
    tb.on_bringup.append(lambda busy: (_bringup(True) if busy else None,
                                       tb_bringups.append(busy)))
    stats = await task
    export_coverage()
    if report_only:
        return
    tb.sb_req.check_empty()
    tb.sb_cpl.check_empty()
    sa, sb = stats["status_a"], stats["status_b"]
    tb.log.warning("link stats: %s", {k: stats[k] for k in (
        "sent", "delivered", "completions", "duplicates", "corrupt", "lost", "replays",
        "timeouts", "crc_errors", "flits_hit", "cycles", "latency_cycles", "status_a",
        "status_b", "link_downs", "link_recoveries", "pcs_lock_losses", "pcs_relocks",
        "dark_cycles", "bursts", "burst_bits")})
    assert stats["duplicates"] == 0 and stats["corrupt"] == 0 and stats["lost"] == 0, stats
    for s, st in (("a", sa), ("b", sb)):
        assert st["overflow"] == 0, f"{s}: receive buffer overflow {st} (seed {tb.seed})"
        assert st["credit_err"] == 0, f"{s}: credit return out of range {st} (seed {tb.seed})"
        assert st["bad_op"] == 0, f"{s}: dropped accelerator beats {st} (seed {tb.seed})"
        assert st["state"] == 2, f"{s}: link not active at the end {st} (seed {tb.seed})"
    if tb.dark_lane and tb.dark_lane[1] is not None:
        # the dark lane is seen as link down (PCS lock lost, a chiplet leaves ACTIVE) and
        # every loss of lock is followed by a relock
        ev = tb.link_events
        assert ev["dark_cycles"] == int(tb.dark_lane[1]), (ev, tb.seed)
        assert ev["pcs_lock_losses"] >= 1 and ev["link_downs"] >= 1, (ev, tb.seed)
        assert ev["pcs_relocks"] == ev["pcs_lock_losses"], (ev, tb.seed)
        assert ev["link_recoveries"] == ev["link_downs"], (ev, tb.seed)
    if tb.bringup_drop:
        # the drop came inside the first bring-up, one side ACTIVE and the other in INIT
        assert tb.bringup_drop_states is not None, tb.seed
        tb.log.warning("bring-up drop at cycle %d, states (a, b) %s", *tb.bringup_drop_states)
    if tb.lane_bursts is not None:
        assert tb.link_events["bursts"] >= 4, (tb.link_events, tb.seed)
    pure_bit_errors = not (tb.first_flips or tb.drop_rate or tb.dark_events or tb.link_drops
                           or tb.bringup_drop
                           or tb.pcs)
    if pure_bit_errors:
        # every flit hit by an injected error is detected by the CRC, exactly once
        assert sb["crc_err"] == stats["hits"]["ab"], (sb, stats["hits"], tb.seed)
        assert sa["crc_err"] == stats["hits"]["ba"], (sa, stats["hits"], tb.seed)
        assert sa["frame_err"] == sb["frame_err"] == 0
        # NAK-driven replays need an error episode at the receiver, which needs an error
        for tx, rx in ((sa, sb), (sb, sa)):
            assert tx["replays"] - tx["timeouts"] <= rx["crc_err"] + rx["seq_err"], (tx, rx)
        if stats["hits"]["ab"] == 0 and stats["hits"]["ba"] == 0:
            assert stats["replays"] == 0 and sa["dup"] == sb["dup"] == 0, stats
