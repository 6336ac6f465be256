"""Counters-only cocotb test of the fabric BIST (block ``fabric-bist``, rtl/fabric/bist.py).

The test only configures, starts, waits and reads counters: the clock is cocotb's (C)
clock, and between counter polls the test sleeps in one ``Timer`` of ``poll`` cycles, so
no Python runs per cycle. The reference is :func:`fusionfabric.sim.bist.port_traffic` (the numpy model
of every generator's message sequence): per (source, destination) the number of
messages, beats and the final sequence number, from which each checker's counters
follow; errors must be zero, or exactly what the planted fault (block parameter
``fault``) implies.

Test arguments (``test_args``): ``budget`` (messages per generator, default 40),
``load`` (0..256, default 256), ``stall`` (checker backpressure /256, default 0),
``poll`` (cycles between polls, default 1000), ``max_cycles``, ``ber`` (bit error rate set
on every lane once all links are up, 0 = none), ``slip_lane`` (``fusionfabric.rtl.fabric.lane_index``;
-1 = none) and ``slip_at`` (cycles after enable, default 1500), ``settle`` (cycles waited
after the run to prove nothing more arrives, default 300), ``report`` (JSON file:
cycles, wall time, counters; for bench/fabric_bist_speed.py).

The run ends at the first poll that finds every generator done and every beat the model
predicts counted by the checkers.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, Timer
from cocotb.utils import get_sim_time

from fusionfabric.rtl.fabric.fabric import FAULT, LINK_STATUS
from fusionfabric.rtl.fabric.fault import ber_threshold
from fusionfabric.formats.bist import BIST_CONTROL, BIST_SEQ_BITS
from fusionfabric.sim.bist import port_traffic
from fusionfabric.formats.bitfields import Fields
from fusionfabric.formats.chiplet import STATUS
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB
from fusionfabric.tb.fabric.fabric_tb import LINK_ACTIVE, SWITCH_STATS

PERIOD_NS = 10
SEQ_MASK = (1 << BIST_SEQ_BITS) - 1


def _rd(dut, name, *idx) -> int:
    return to_int(getattr(dut, name + "".join(f"__{i}" for i in idx)).value)


def read_counters(dut, n: int) -> dict:
    c = {k: [_rd(dut, "o_" + k, e) for e in range(n)]
         for k in ("gen_messages", "gen_beats", "chk_messages", "chk_beats", "seq_errors",
                   "data_errors", "unexpected", "rsp_beats")}
    c["gen_done"] = _rd(dut, "o_gen_done")
    c["next_seq"] = [[_rd(dut, "o_gen_next_seq", s, d) for d in range(n)] for s in range(n)]
    c["expected"] = [[_rd(dut, "o_chk_expected", d, s) for s in range(n)] for d in range(n)]
    return c


def read_health(dut, n: int) -> dict:
    st = {side: [STATUS.unpack(_rd(dut, f"o_{side}_status", e)) for e in range(n)]
          for side in ("ep", "sw")}
    link = [LINK_STATUS.unpack(_rd(dut, "o_link", e)) for e in range(n)]
    sw = Fields([(s, 32) for s in SWITCH_STATS])
    return {"status": st, "link": link,
            "switch": [sw.unpack(_rd(dut, "o_stats", e)) for e in range(n)],
            "bridge_drops": [_rd(dut, "o_bridge_drops", e) for e in range(n)],
            "flips": sum(_rd(dut, "o_flips", k) for k in range(4 * n)),
            "replays": sum(s["replays"] for side in st.values() for s in side),
            "relocks": sum(x["up_drops"] + x["down_drops"] for x in link)}


def _cycle() -> int:
    return int(get_sim_time(unit="ns")) // PERIOD_NS


async def _fault_beat(dut, **fields):
    """One beat on the always-ready ``i_fault`` stream."""
    await FallingEdge(dut.clk)
    dut.i_fault__payload.value = FAULT.pack(**{"lane": 0, "all": 0, "threshold": 0,
                                               "dark": 0, "slip": 0, **fields})
    dut.i_fault__valid.value = 1
    await FallingEdge(dut.clk)
    dut.i_fault__valid.value = 0


async def _links_up(dut, n, poll=50, limit=20_000) -> int:
    t0 = _cycle()
    while _cycle() - t0 < limit:
        await Timer(poll * PERIOD_NS, unit="ns")
        await ReadOnly()
        if all(STATUS.unpack(_rd(dut, f"o_{side}_status", e))["state"] == LINK_ACTIVE
               for e in range(n) for side in ("ep", "sw")):
            await FallingEdge(dut.clk)
            return _cycle() - t0
    raise AssertionError(f"links not up after {limit} cycles")


async def _faults(dut, n, ber, slip_lane, slip_at, t_enable, log, dark=None):
    """BER on every lane once the links are up; a slip ``slip_at`` cycles after enable;
    ``dark = [lane, at, cycles]``: that lane dark for ``cycles`` cycles from ``at`` cycles
    after enable."""
    threshold = 0
    if ber:
        await _links_up(dut, n)
        threshold = ber_threshold(ber)
        await _fault_beat(dut, all=1, threshold=threshold)
        log.info("BER %g on every lane from cycle %d", ber, _cycle())
    if slip_lane is not None and slip_lane >= 0:
        wait = t_enable + slip_at - _cycle()
        if wait > 0:
            await Timer(wait * PERIOD_NS, unit="ns")
        await _fault_beat(dut, lane=slip_lane, threshold=threshold, slip=1)
        log.info("slip of 1 bit on lane %d at cycle %d", slip_lane, _cycle())
    if dark:
        lane, at, cycles = (int(v) for v in dark)
        wait = t_enable + at - _cycle()
        if wait > 0:
            await Timer(wait * PERIOD_NS, unit="ns")
        await _fault_beat(dut, lane=lane, threshold=threshold, dark=1)
        log.info("lane %d dark for %d cycles from cycle %d", lane, cycles, _cycle())
        await Timer(cycles * PERIOD_NS, unit="ns")
        await _fault_beat(dut, lane=lane, threshold=threshold, dark=0)


def expected_errors(p: dict, ref: dict, n: int) -> dict:
    """Per checker ``(seq_errors, data_errors)`` the planted fault must cause."""
    want = {d: [0, 0] for d in range(n)}
    fault, at = p.get("fault", "none"), int(p.get("fault_at", 0))
    if fault != "none":
        msg = ref["messages"][0][at]       # generator 0's message number ``at``
        if fault == "flip":
            want[msg.dest][1] = msg.beats     # bit 100 of every beat of it
        else:                                 # "skip": one gap in 0 → dest's sequence
            want[msg.dest][0] = 1
    return {d: tuple(v) for d, v in want.items()}


@cocotb.test()
async def test_bist(dut):
    """Configure, start, wait, read: every generator's messages arrive exactly once, in
    order, intact (or with exactly the planted fault's errors); optional lane faults are
    repaired by the links (replays, relocks) without a single BIST error."""
    tb = TB(dut)
    p, a = tb.params, tb.args
    n = int(p.get("n_endpoints", 8))
    budget, load, stall = int(a.get("budget", 40)), int(a.get("load", 256)), \
        int(a.get("stall", 0))
    poll, max_cycles = int(a.get("poll", 1000)), int(a.get("max_cycles", 2_000_000))
    ber, slip_lane = float(a.get("ber", 0)), int(a.get("slip_lane", -1))
    slip_at, settle = int(a.get("slip_at", 1500)), int(a.get("settle", 300))
    dark = a.get("dark_lane")          # [lane, at, cycles]
    if budget < 1:
        raise ValueError(f"budget={budget} must be >= 1 (0 would run forever)")
    # the reference: every generator's message sequence from the numpy model
    faults = {0: (p.get("fault", "none"), int(p.get("fault_at", 0)))}
    ref = port_traffic(n, budget, int(p.get("max_bytes", 256)), int(p.get("bist_seed", 1)),
                       faults)
    total_beats = sum(map(sum, ref["beats"]))
    log = f"n={n} budget={budget} load={load} stall={stall} ber={ber} slip={slip_lane} " \
          f"params={p} seed={tb.seed}"

    for name in ("i_bist", "i_config__valid", "i_config__payload", "i_fault__valid",
                 "i_fault__payload"):
        getattr(dut, name).value = 0
    await tb.reset()
    await FallingEdge(tb.clk)
    wall0 = time.perf_counter()
    t_enable = _cycle()
    dut.i_bist.value = BIST_CONTROL.pack(enable=1, load=load, stall=stall, budget=budget)
    if ber or slip_lane >= 0 or dark:
        cocotb.start_soon(_faults(dut, n, ber, slip_lane, slip_at, t_enable, dut._log,
                                  dark))

    last, last_change = -1, t_enable
    while True:
        await Timer(poll * PERIOD_NS, unit="ns")
        await ReadOnly()
        now = _cycle()
        done = _rd(dut, "o_gen_done") == (1 << n) - 1
        got = sum(_rd(dut, "o_chk_beats", d) for d in range(n))
        if done and got >= total_beats:
            break
        if got != last:
            last, last_change = got, now
        assert now - last_change < max(5 * poll, 5000), (
            f"no progress: {got} of {total_beats} beats checked, none in "
            f"{now - last_change} cycles ({now - t_enable} in): {log}")
        assert now - t_enable < max_cycles, f"not finished after {max_cycles} cycles: {log}"
        await FallingEdge(tb.clk)
    cycles = _cycle() - t_enable
    wall = time.perf_counter() - wall0
    await Timer(settle * PERIOD_NS, unit="ns")      # anything duplicated would show now
    await ReadOnly()
    c = read_counters(dut, n)
    h = read_health(dut, n)
    dut._log.info("BIST: %d cycles, %.2f s, %d beats, replays %d, relocks %d, flips %d: %s",
                  cycles, wall, sum(c["chk_beats"]), h["replays"], h["relocks"], h["flips"],
                  log)
    if a.get("report"):
        with open(a["report"], "w") as fh:
            json.dump({"cycles": cycles, "wall_s": wall, "sim": tb.sim, "n_endpoints": n,
                       "beats": sum(c["chk_beats"]), "messages": sum(c["chk_messages"]),
                       "replays": h["replays"], "relocks": h["relocks"], "flips": h["flips"],
                       "counters": c, "link": h["link"]}, fh, indent=1)

    # generators against the model
    for s in range(n):
        assert c["gen_messages"][s] == budget, f"generator {s}: {c['gen_messages'][s]}: {log}"
        assert c["gen_beats"][s] == sum(ref["beats"][s]), f"generator {s} beats: {log}"
        assert c["next_seq"][s] == [x & SEQ_MASK for x in ref["next_seq"][s]], \
            f"generator {s} next_seq {c['next_seq'][s]} != {ref['next_seq'][s]}: {log}"
    # checkers against the model (not against the generators' counters)
    want_err = expected_errors(p, ref, n)
    for d in range(n):
        msgs = sum(ref["count"][s][d] for s in range(n))
        beats = sum(ref["beats"][s][d] for s in range(n))
        assert (c["chk_messages"][d], c["chk_beats"][d]) == (msgs, beats), (
            f"checker {d}: {c['chk_messages'][d]} messages / {c['chk_beats'][d]} beats, "
            f"model {msgs} / {beats}: {log}")
        for s in range(n):
            assert c["expected"][d][s] == ref["next_seq"][s][d] & SEQ_MASK, (
                f"{s} → {d}: checker expects {c['expected'][d][s]} next, the model sent "
                f"{ref['count'][s][d]} messages ending at {ref['next_seq'][s][d]}: {log}")
        got_err = (c["seq_errors"][d], c["data_errors"][d])
        assert got_err == want_err[d], \
            f"checker {d}: (seq, data) errors {got_err}, expected {want_err[d]}: {log}"
        assert c["unexpected"][d] == 0 and c["rsp_beats"][d] == 0, \
            f"checker {d}: unexpected {c['unexpected'][d]}, rsp beats {c['rsp_beats'][d]}"
    # the fabric under it
    for e in range(n):
        for side in ("ep", "sw"):
            st = h["status"][side][e]
            assert st["state"] == LINK_ACTIVE and st["overflow"] == 0 \
                and st["credit_err"] == 0 and st["bad_op"] == 0, \
                f"endpoint {e} {side} chiplet status {st}: {log}"
        s = h["switch"][e]
        assert s["drop_dest"] == 0 and s["drop_group"] == 0 and s["drop_kind"] == 0, \
            f"switch port {e} dropped flits: {s}: {log}"
        assert h["bridge_drops"][e] == 0, f"egress bridge {e} drops: {log}"
    if ber:
        assert h["replays"] > 0, f"no replays at BER {ber}: {log}"
    if slip_lane >= 0:
        assert h["relocks"] >= 1, f"no relock after the slip on lane {slip_lane}: {log}"
    if dark:
        # the dark lane shows in the health counters: its direction's PCS lost lock and
        # relocked, and the link retrained without FAILED
        e, d = int(dark[0]) // 4, (int(dark[0]) // 2) % 2
        drops = h["link"][e][("up_drops", "down_drops")[d]]
        assert drops >= 1, f"no lock loss on endpoint {e} after the dark lane: {h['link'][e]}"
        for side in ("ep", "sw"):
            assert h["status"][side][e]["failures"] == 0, f"{side} of {e} FAILED: {log}"
