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

``dark_lane = [lane, at, 0]`` (an up lane, 3 or more endpoints): the lane goes dark for
good, :func:`dark_for_good` (its own arguments: ``clean_budget``, ``step``,
``watch_step``, ``phase_cycles``, ``min_rate_ratio``; docs/bist.md, "A lane dark for good").
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, Timer
from cocotb.utils import get_sim_time

from fusionfabric.rtl.fabric.fabric import FAULT, LINK_STATUS, lane_index
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
    dark = a.get("dark_lane")          # [lane, at, cycles]; cycles 0: dark for good
    if budget < 1:
        raise ValueError(f"budget={budget} must be >= 1 (0 would run forever)")
    if dark and int(dark[2]) == 0:
        await dark_for_good(dut, tb)
        return
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


# -- a lane dark for good -----------------------------------------------------------------------
def _counts(msgs: list, n: int, lo: int, hi: int) -> list:
    """``[s][d]``: messages ``lo .. hi-1`` of every generator, per destination."""
    out = [[0] * n for _ in range(n)]
    for s in range(n):
        for m in msgs[s][lo:hi]:
            out[s][m.dest] += 1
    return out


def _slots(ms) -> int:
    """Link slots of WRITE messages: a header slot plus one per data beat."""
    return sum(m.beats + 1 for m in ms)


def _link_load(msgs: list, n: int, lo: int, hi: int, senders, receivers) -> int:
    """The busiest link's slots for messages ``lo .. hi-1``: an up link carries every
    message of its sender (``senders``), a down link the ones to it from ``senders``
    (``receivers``)."""
    up = [_slots(msgs[s][lo:hi]) for s in senders]
    down = [sum(_slots([m for m in msgs[s][lo:hi] if m.dest == d]) for s in senders)
            for d in receivers]
    return max(up + down)


def _min_slots(lists: list, h: int) -> int | None:
    """The fewest slots ``h`` messages can have if they are a prefix of each of
    ``lists`` (per source, the messages not delivered, in order); None if there are fewer
    than ``h`` in all."""
    best = {0: 0}                       # messages taken -> fewest slots
    for ms in lists:
        pre = [0]
        for m in ms:
            pre.append(pre[-1] + m.beats + 1)
        nxt = {}
        for k, v in best.items():
            for j in range(len(pre)):
                if k + j <= h and v + pre[j] < nxt.get(k + j, 1 << 60):
                    nxt[k + j] = v + pre[j]
        best = nxt
    return best.get(h)


async def _wait_for(dut, cond, step, limit, what):
    """Poll ``cond()`` (in ReadOnly) every ``step`` cycles; the cycle it first holds. Fails
    after ``limit`` cycles with ``what()``, a description of what is still missing."""
    t0 = _cycle()
    while True:
        await Timer(step * PERIOD_NS, unit="ns")
        await ReadOnly()
        if cond():
            t = _cycle()
            await FallingEdge(dut.clk)
            return t
        if _cycle() - t0 >= limit:
            raise AssertionError(f"{what()} after {_cycle() - t0} cycles")


async def _watch_failed(dut, x, t_dark, step, limit, out):
    """Every ``step`` cycles: the first cycle each chiplet of endpoint ``x``'s link shows
    ``failed``, and its failure counters then."""
    while len(out) < 2 and _cycle() - t_dark < limit:
        await Timer(step * PERIOD_NS, unit="ns")
        await ReadOnly()
        for side in ("ep", "sw"):
            st = STATUS.unpack(_rd(dut, f"o_{side}_status", x))
            if side not in out and st["failed"]:
                out[side] = {"detect_cycles": _cycle() - t_dark,
                             **{k: st[k] for k in ("failures", "fail_lost", "fail_replay",
                                                   "fail_peer", "unacked")}}


async def dark_for_good(dut, tb):
    """``dark_lane = [lane, at, 0]``: an up lane of one endpoint dark for good.

    Three phases on one fabric, links up first; the generators' budget is raised from one
    phase to the next, so the message sequence is the model's throughout:

    A. ``clean_budget`` messages per generator, every link up: every pair's model count
       arrives; the cycles give the clean rate.
    B. ``budget`` more; ``at`` cycles in, ``lane`` goes dark for good. Ends when every pair
       of live endpoints has its model count, every generator is done and both chiplets of
       the dead link show ``failed``.
    C. ``clean_budget`` more, after the failure: the live pairs' rate against phase A's.

    Then the counters: live pairs exactly the model's messages; detection within
    ``ChipletParams.fail_bounds`` by the cause it predicts; the dead endpoint's messages
    and the messages to it delivered (a prefix, intact), refused (``cpl_refused``) or
    held (bounded by the link's buffers); live links never FAILED, no switch or bridge
    drop; nothing moves any more after the run."""
    from fusionfabric.formats.chiplet import SLOTS_PER_TL
    from fusionfabric.rtl.chiplet.tl_tx import FLIT_FIFO_DEPTH
    from fusionfabric.rtl.fabric.bist import FabricBist
    from fusionfabric.rtl.fabric.fabric import endpoint_lanes

    p, a = tb.params, tb.args
    fb = FabricBist(**p)
    n = fb.n_endpoints
    lanes = endpoint_lanes(p)
    lane, at = int(a["dark_lane"][0]), int(a["dark_lane"][1])
    where = [(e, d, k) for e in range(n) for d in range(2) for k in range(lanes[e])
             if lane_index(e, d, k, lanes=lanes) == lane]
    if not where or where[0][1] != 0:
        raise ValueError(f"dark_lane {lane} is not an up lane (endpoint -> switch)")
    x = where[0][0]
    live = [e for e in range(n) if e != x]
    if n < 3:
        raise ValueError(f"n_endpoints={n}: dark for good needs >= 3 (a live pair)")
    if p.get("fault", "none") != "none" or float(a.get("ber", 0)) or \
            int(a.get("slip_lane", -1)) >= 0:
        raise ValueError("dark for good runs without a planted fault, BER or slip")
    b1, b2 = int(a.get("clean_budget", 30)), int(a.get("budget", 40))
    bt = 2 * b1 + b2
    load, stall = int(a.get("load", 256)), int(a.get("stall", 0))
    step, settle = int(a.get("step", 20)), int(a.get("settle", 300))
    seed = int(p.get("bist_seed", 1))
    cp = fb.fabric.link_params[x]
    bounds = cp.fail_bounds()
    F = cp.flit_slots
    # spec: a dead direction is seen within the bound plus the flits in flight; here also
    # the PCS's lock loss and the watch's step (docs/bist.md, "A lane dark for good")
    slack = 2 * F + 200
    cause = "lost" if bounds["lost"] <= bounds["replay"] else "replay"
    t_fail = min(bounds["lost"], bounds["replay"])
    limit = int(a.get("phase_cycles", 30_000))
    log = (f"dark for good: n={n} lane={lane} (endpoint {x}) at={at} budgets {b1}/{b2}/{b1} "
           f"load={load} stall={stall} params={p} seed={tb.seed}")
    ref = port_traffic(n, bt, int(p.get("max_bytes", 256)), seed)
    msgs = ref["messages"]
    cnt_a, cnt_b, cnt_c = (_counts(msgs, n, 0, hi) for hi in (b1, b1 + b2, bt))

    def pairs_at(want, pairs):
        def ok():
            return all(_rd(dut, "o_chk_expected", d, s) == want[s][d] & SEQ_MASK
                       for s, d in pairs)
        return ok

    def gens_done():
        return _rd(dut, "o_gen_done") == (1 << n) - 1

    def missing(want, pairs):
        def what():
            short = {f"{s}->{d}": (_rd(dut, "o_chk_expected", d, s), want[s][d])
                     for s, d in pairs if _rd(dut, "o_chk_expected", d, s) != want[s][d]}
            st = {side: STATUS.unpack(_rd(dut, f"o_{side}_status", x))
                  for side in ("ep", "sw")}
            return (f"pairs short (got, model): {short}, generators done "
                    f"{_rd(dut, 'o_gen_done'):#x}, link {x} ep state {st['ep']['state']} "
                    f"failed {st['ep']['failed']}, sw state {st['sw']['state']} failed "
                    f"{st['sw']['failed']}: {log}")
        return what

    all_pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    live_pairs = [(s, d) for s in live for d in live if s != d]

    def control(budget):
        dut.i_bist.value = BIST_CONTROL.pack(enable=1, load=load, stall=stall, budget=budget)

    wall0 = time.perf_counter()
    up = await _links_up(dut, n)
    # A: clean
    t_a = _cycle()
    control(b1)
    t = await _wait_for(dut, lambda: gens_done() and pairs_at(cnt_a, all_pairs)(), step,
                        limit, missing(cnt_a, all_pairs))
    cyc_a = t - t_a
    # B: the lane goes dark for good
    t_b = _cycle()
    control(b1 + b2)
    if at > 0:
        await Timer(at * PERIOD_NS, unit="ns")
    await _fault_beat(dut, lane=lane, dark=1)
    t_dark = _cycle()                 # the lane went dark at the rising edge before
    dut._log.info("lane %d (endpoint %d up) dark for good at cycle %d", lane, x, t_dark)
    det = {}
    watch = cocotb.start_soon(_watch_failed(dut, x, t_dark, int(a.get("watch_step", 10)),
                                            limit, det))

    def both_failed():
        return all(STATUS.unpack(_rd(dut, f"o_{side}_status", x))["failed"]
                   for side in ("ep", "sw"))
    t = await _wait_for(dut, lambda: both_failed() and gens_done()
                        and pairs_at(cnt_b, live_pairs)(), step, limit,
                        missing(cnt_b, live_pairs))
    cyc_b = t - t_b
    await watch
    # C: the same amount of traffic after the failure
    t_c = _cycle()
    control(bt)
    t = await _wait_for(dut, lambda: gens_done() and pairs_at(cnt_c, live_pairs)(), step,
                        limit, missing(cnt_c, live_pairs))
    cyc_c = t - t_c
    wall = time.perf_counter() - wall0
    await Timer(settle * PERIOD_NS, unit="ns")
    await ReadOnly()
    c, h = read_counters(dut, n), read_health(dut, n)
    t_end = _cycle()
    await Timer(settle * PERIOD_NS, unit="ns")
    await ReadOnly()
    c2, h2 = read_counters(dut, n), read_health(dut, n)
    st_ep, st_sw = h["status"]["ep"][x], h["status"]["sw"][x]

    # accounting of the dead endpoint, from the counters and the model
    got_x = [c["expected"][d][x] for d in range(n)]           # delivered from x, per d
    p_x = sum(got_x)
    prefix_ok = _counts(msgs, n, 0, p_x)[x] == got_x
    refused_x = st_ep["cpl_refused"]
    held_x = bt - p_x - refused_x
    cap_tl = min(cp.replay_depth * cp.tl_per_dl, cp.rx_credits) + FLIT_FIFO_DEPTH + 1
    cap = cap_tl * SLOTS_PER_TL
    held_x_slots = _slots(msgs[x][p_x:p_x + max(0, held_x)])
    to_x = [c["expected"][x][s] for s in range(n)]
    want_to_x = sum(cnt_c[s][x] for s in live)
    refused_to_x = st_sw["cpl_refused"]
    held_to_x = want_to_x - sum(to_x) - refused_to_x
    undelivered = [[m for m in msgs[s][:bt] if m.dest == x][to_x[s]:] for s in live]
    held_to_x_slots = _min_slots(undelivered, held_to_x) if held_to_x >= 0 else None
    after_fail = sum(cnt_c[s][x] - cnt_b[s][x] for s in live)
    load_a = _link_load(msgs, n, 0, b1, range(n), range(n))
    load_c = _link_load(msgs, n, b1 + b2, bt, live, live)
    rate_ratio = (load_c / cyc_c) / (load_a / cyc_a)
    retry = cp.holdoff + min(bounds["lost"], bounds["stall"])   # one retry: lost or watchdog
    held_x_gauge = (st_ep["unacked"] * cp.tl_per_dl + FLIT_FIFO_DEPTH + 1) * SLOTS_PER_TL
    dark = {"endpoint": x, "lane": lane, "dark_at": t_dark - t_b, "bounds": bounds,
            "cause": cause, "detect": det, "links_up_cycles": up,
            "phase_cycles": {"clean": cyc_a, "fault": cyc_b, "after": cyc_c},
            "link_load_slots": {"clean": load_a, "after": load_c},
            "rate_ratio": round(rate_ratio, 4),
            "ep": {k: st_ep[k] for k in ("state", "failed", "failures", "fail_lost",
                                         "fail_replay", "fail_peer", "unacked",
                                         "cpl_refused", "failed_cpl")},
            "sw": {k: st_sw[k] for k in ("state", "failed", "failures", "fail_lost",
                                         "fail_replay", "fail_peer", "unacked",
                                         "cpl_refused", "failed_cpl")},
            "from_x": {"model": bt, "delivered": p_x, "refused": refused_x,
                       "held": held_x, "held_slots": held_x_slots,
                       "held_gauge_slots": held_x_gauge},
            "to_x": {"model": want_to_x, "delivered": sum(to_x), "refused": refused_to_x,
                     "held": held_to_x, "held_slots_min": held_to_x_slots},
            "held_capacity_slots": cap}
    dut._log.info("dark for good: %s, %.1f s: %s", json.dumps(dark), wall, log)
    if a.get("report"):
        with open(a["report"], "w") as fh:
            json.dump({"cycles": t - t_a, "wall_s": wall, "sim": tb.sim, "n_endpoints": n,
                       "beats": sum(c["chk_beats"]), "messages": sum(c["chk_messages"]),
                       "replays": h["replays"], "relocks": h["relocks"], "flips": h["flips"],
                       "counters": c, "link": h["link"], "dark": dark}, fh, indent=1)

    # every generator ran its whole budget (the dead endpoint's too: refused ones are taken)
    for s in range(n):
        assert c["gen_messages"][s] == bt and c["gen_beats"][s] == sum(ref["beats"][s]), \
            f"generator {s}: {c['gen_messages'][s]} messages, {c['gen_beats'][s]} beats: {log}"
        assert c["next_seq"][s] == [v & SEQ_MASK for v in ref["next_seq"][s]], \
            f"generator {s} next_seq {c['next_seq'][s]} != {ref['next_seq'][s]}: {log}"
    # (a) every live pair: exactly the model's messages, in order, intact; no checker error
    for s, d in live_pairs:
        assert c["expected"][d][s] == cnt_c[s][d], \
            f"{s} -> {d}: {c['expected'][d][s]} messages, model {cnt_c[s][d]}: {log}"
    for d in range(n):
        errs = tuple(c[k][d] for k in ("seq_errors", "data_errors", "unexpected", "rsp_beats"))
        assert errs == (0, 0, 0, 0), \
            f"checker {d}: seq/data errors, unexpected, rsp beats {errs}: {log}"
        # counted messages and beats = the model's for what each pair delivered (a prefix)
        pre = [[m for m in msgs[s][:bt] if m.dest == d][:c["expected"][d][s]]
               for s in range(n) if s != d]
        assert (c["chk_messages"][d], c["chk_beats"][d]) == \
            (sum(map(len, pre)), sum(m.beats for ms in pre for m in ms)), \
            f"checker {d}: {c['chk_messages'][d]} messages / {c['chk_beats'][d]} beats " \
            f"against the delivered prefixes {[len(v) for v in pre]}: {log}"
    # (b) detection: both sides FAILED within the bound, first by the predicted cause
    for side in ("ep", "sw"):
        assert side in det, f"{side} side of link {x} never FAILED: {log}"
        dd = det[side]
        assert t_fail - 2 * F <= dd["detect_cycles"] <= t_fail + slack, \
            f"{side} of {x} FAILED {dd['detect_cycles']} cycles after the dark, bound " \
            f"{t_fail} (+{slack}): {log}"
        assert dd["failures"] == 1 and dd[f"fail_{cause}"] == 1, \
            f"{side} of {x}: first failure {dd}, expected by '{cause}': {log}"
        st = h["status"][side][x]
        assert st["failed"] == 1 and st["state"] != LINK_ACTIVE, \
            f"{side} of {x} not failed at the end: {st}: {log}"
        # retries are rate-limited: one failure per hold-off + the shorter of the link-lost
        # timeout and the progress watchdog at most
        since = t_end - t_dark - dd["detect_cycles"]
        assert st["failures"] >= 1 and st["failures"] <= 2 + since // retry, \
            f"{side} of {x}: {st['failures']} failures in {since} cycles: {log}"
        assert st["overflow"] == st["credit_err"] == st["bad_op"] == 0, \
            f"{side} of {x}: {st}: {log}"
        assert st["failed_multicast"] == st["failed_reduce"] == st["failed_result"] == \
            st["failed_cpl"] == 0, f"{side} of {x}: refused non-WRITE messages {st}: {log}"
    # (c) the dead endpoint's messages: a delivered prefix, then held, then refused
    assert prefix_ok, \
        f"delivered from {x} {got_x} is not a prefix of its model sequence: {log}"
    assert 0 <= held_x and held_x_slots <= cap, \
        f"from {x}: {bt} = {p_x} delivered + {refused_x} refused + {held_x} held " \
        f"({held_x_slots} slots, the link holds {cap}): {log}"
    # tighter, from the dead link's own gauge: but for the first (whose head may wait in
    # the switch side's receive buffer), the held messages are in the unacknowledged
    # replay entries, the TL FIFO or the packer
    assert _slots(msgs[x][p_x + 1:p_x + max(0, held_x)]) <= held_x_gauge, \
        f"from {x}: {held_x} held messages do not fit {st_ep['unacked']} unacked replay " \
        f"entries + the TL FIFO ({held_x_gauge} slots): {log}"
    assert refused_x >= b1, \
        f"from {x}: {refused_x} refused, but its {b1} messages after the failure: {log}"
    for s in live:
        assert to_x[s] <= cnt_c[s][x], f"{s} -> {x}: {to_x[s]} > model {cnt_c[s][x]}: {log}"
    assert held_to_x_slots is not None and held_to_x_slots <= cap, \
        f"to {x}: {want_to_x} = {sum(to_x)} delivered + {refused_to_x} refused + " \
        f"{held_to_x} held (at least {held_to_x_slots} slots, the link holds {cap}): {log}"
    assert refused_to_x >= after_fail, \
        f"to {x}: {refused_to_x} refused, but {after_fail} sent after the failure: {log}"
    # (d) the rest of the fabric: live links never failed, no drops, rate kept
    for e in live:
        for side in ("ep", "sw"):
            st = h["status"][side][e]
            assert st["state"] == LINK_ACTIVE and st["failures"] == 0 and \
                st["cpl_refused"] == 0 and st["overflow"] == 0 and \
                st["credit_err"] == 0 and st["bad_op"] == 0, \
                f"endpoint {e} {side} chiplet status {st}: {log}"
    for e in range(n):
        s = h["switch"][e]
        assert s["drop_dest"] == s["drop_group"] == s["drop_kind"] == 0, \
            f"switch port {e} dropped flits: {s}: {log}"
        assert h["bridge_drops"][e] == 0, f"egress bridge {e} drops: {log}"
    min_ratio = float(a.get("min_rate_ratio", 0.9))
    assert rate_ratio >= min_ratio, \
        f"live pairs after the failure at {rate_ratio:.3f} of the clean rate " \
        f"({load_c} slots in {cyc_c} cycles against {load_a} in {cyc_a}): {log}"
    # nothing moves any more: no delivery, refusal or drop after the run
    for k in ("chk_messages", "chk_beats", "expected", "gen_messages"):
        assert c2[k] == c[k], f"{k} changed after the run: {c[k]} -> {c2[k]}: {log}"
    for side in ("ep", "sw"):
        assert h2["status"][side][x]["cpl_refused"] == h["status"][side][x]["cpl_refused"], \
            f"{side} of {x} still refusing after the run: {log}"
