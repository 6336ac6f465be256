"""Fault-escalation runs of two chiplets back to back on the Amaranth simulator.

:func:`run_fault_scenario` drives :class:`fusionfabric.tb.chiplet.harness.ChipletPair`:
both sides send ``n`` random requests (each non-posted one with its own tag), each
completer answers from :class:`fusionfabric.sim.chiplet.MemoryModel` in random order, and a
fault schedule darkens or corrupts a direction for a span of cycles. Every request taken
on ``i_req`` (refused or not, by the ``failed`` status of that cycle), every delivery and
every completion goes into a :class:`fusionfabric.sim.chiplet.LinkLedger` per sender, whose
``check`` is the verdict. The state of both data links is recorded every cycle.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from fusionfabric.formats.chiplet import NON_POSTED, SLOT_BITS, STATUS, TL_HEADER, LinkState, Opcode
from fusionfabric.sim import chiplet as C
from fusionfabric.sim.chiplet import LinkLedger, MemoryModel, Message

NODE = {"a": 1, "b": 2}

__all__ = ["run_fault_scenario", "NODE"]


def run_fault_scenario(params: dict, n: int, seed: int, faults: list, cycles: int,
                       latency: int = 4, hold_while_failed: bool = False,
                       idle: float = 0.3, nonposted=NON_POSTED) -> dict:
    """Run ``cycles`` cycles and return the ledgers' accounting, the state traces and the
    final status of both sides.

    ``faults``: ``(direction, kind, start, end)`` with direction ``"ab"``/``"ba"``, kind
    ``"dark"`` (nothing passes) or ``"corrupt"`` (bit 0 of every word flipped: every flit
    fails its CRC), active for cycles ``start <= c < end`` (``end`` None: to the end).
    ``hold_while_failed``: the accelerators offer no new request while their chiplet's
    ``failed`` status is set (so none is refused). ``nonposted``: the non-posted opcodes
    drawn (without READ every completion is one beat).
    """
    from amaranth.sim import Simulator

    from fusionfabric.tb.chiplet.harness import ChipletPair

    dut = ChipletPair(latency=latency, **params)
    rng = np.random.default_rng(seed)
    ledgers = {s: LinkLedger() for s in "ab"}
    trace = {s: [] for s in "ab"}
    res = {}

    def requests(side):
        out, tag = [], 0
        for _ in range(n):
            if rng.random() < 0.3:
                msg = C.random_message(rng, [Opcode.MULTICAST, Opcode.REDUCE],
                                       tag=int(rng.integers(256)), dest=NODE[side] ^ 3)
            else:
                msg = C.random_message(rng, list(nonposted), tag=tag, dest=NODE[side] ^ 3)
                tag += 1
            out.append(msg)
        return out

    async def bench(ctx):
        sd = {s: dict(todo=deque(requests(s)), beats=deque(), cur=None, mem=MemoryModel(NODE[s]),
                      pend=[], rsp=deque(), rx={"o_req": [], "o_rsp": []}) for s in "ab"}
        ctx.set(dut.i_link_up_a, 1)
        ctx.set(dut.i_link_up_b, 1)
        for s in "ab":
            ctx.set(getattr(dut, f"{s}_o_req").ready, 1)
            ctx.set(getattr(dut, f"{s}_o_rsp").ready, 1)
        for cyc in range(cycles):
            for d in ("ab", "ba"):
                dark = corrupt = False
                for fd, kind, start, end in faults:
                    if fd == d and start <= cyc and (end is None or cyc < end):
                        dark |= kind == "dark"
                        corrupt |= kind == "corrupt"
                ctx.set(getattr(dut, f"i_dark_{d}"), dark)
                ctx.set(getattr(dut, f"i_err_{d}"), int(corrupt))
            failed = {s: ctx.get(getattr(dut, f"o_status_{s}").failed) for s in "ab"}
            for s, x in sd.items():
                if not x["beats"] and x["todo"] and rng.random() >= idle \
                        and not (hold_while_failed and failed[s]):
                    x["cur"] = x["todo"].popleft()
                    x["beats"].extend(x["cur"].beats())
                    x["first"] = True
                if x["pend"] and not x["rsp"] and rng.random() < 0.5:
                    r = x["pend"].pop(int(rng.integers(len(x["pend"])))).with_src(NODE[s])
                    x["rsp"].extend(r.beats())
                for name, q in (("i_req", x["beats"]), ("i_rsp", x["rsp"])):
                    port = getattr(dut, f"{s}_{name}")
                    ctx.set(port.valid, bool(q))
                    if q:
                        ctx.set(port.payload.as_value(), q[0])
            await ctx.delay(1e-10)
            for s, x in sd.items():
                trace[s].append(ctx.get(getattr(dut, f"o_status_{s}").state))
                if x["beats"] and ctx.get(getattr(dut, f"{s}_i_req").ready):
                    x["beats"].popleft()
                    if x["first"]:
                        ledgers[s].sent(x["cur"].with_src(NODE[s]), bool(failed[s]))
                        x["first"] = False
                if x["rsp"] and ctx.get(getattr(dut, f"{s}_i_rsp").ready):
                    x["rsp"].popleft()
                for name in ("o_req", "o_rsp"):
                    port = getattr(dut, f"{s}_{name}")
                    if not ctx.get(port.valid):
                        continue
                    buf = x["rx"][name]
                    buf.append(ctx.get(port.payload.as_value()))
                    f = TL_HEADER.unpack(buf[0] >> SLOT_BITS)
                    if len(buf) < max(1, C.data_slots(f["opcode"], f["length"])):
                        continue
                    msg = Message.from_beats(buf)
                    buf.clear()
                    if name == "o_req":
                        ledgers["a" if msg.src == NODE["a"] else "b"].delivered(msg)
                        r = x["mem"].respond(msg)
                        if r is not None:
                            x["pend"].append(r)
                    else:
                        ledgers[s].completed(msg)
            await ctx.tick()
        for s in "ab":
            res[f"status_{s}"] = STATUS.unpack(ctx.get(getattr(dut, f"o_status_{s}").as_value()))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    res["trace"] = trace
    res["ledgers"] = ledgers
    res["fail_cycles"] = {s: [i for i in range(1, len(t)) if t[i] == LinkState.FAILED
                              and t[i - 1] != LinkState.FAILED] for s, t in trace.items()}
    return res
