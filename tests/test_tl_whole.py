"""Whole messages at the transaction layer (docs/protocol.md, "Fault escalation"):

* the TL packer (``TransactionTx``) takes a message's header only when its flit FIFO has
  room for every TL flit the message completes, so with the link gone (no flit ever taken)
  no message is left half taken: the port stops at a message boundary, and once refusing
  it takes and drops every later message whole, requests and, on the switch side
  (``stamp_src=False``), responses;
* the switch side's receiver (``TransactionRx(whole=True)``) passes a message on only once
  all its slots are in the receive buffer.

The references are the message formats of :mod:`fusionfabric.sim.chiplet` (beats, slot
counts, TL packing), not the RTL."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.formats.chiplet import Opcode
from fusionfabric.rtl.chiplet.tl_rx import TransactionRx
from fusionfabric.rtl.chiplet.tl_tx import FLIT_FIFO_DEPTH, TransactionTx
from fusionfabric.sim import chiplet as C

REQ = [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST, Opcode.REDUCE]
RSP = [Opcode.READ_CPL, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK]


def _sim(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _slots(msg) -> int:
    return 1 + C.data_slots(msg.opcode, msg.length)


@pytest.mark.parametrize("vc,stamp_src", [(0, True), (0, False), (1, False)])
@pytest.mark.parametrize("seed", [1, 2])
def test_dead_link_stops_at_a_boundary_then_refuses_whole(vc, stamp_src, seed):
    """No TL flit is ever taken (a dead link). Messages are offered back to back until the
    port stalls: it must stall on a header, with every taken message whole, and the flits
    those messages filled must fit the FIFO. Then ``i_refuse`` rises: every later message
    is taken whole and dropped (counted per kind), none packed."""
    rng = np.random.default_rng(seed)
    msgs = [C.random_message(rng, REQ if vc == 0 else RSP, tag=i, dest=3) for i in range(60)]
    dut = TransactionTx(stamp_src=stamp_src)
    port = dut.i_req if vc == 0 else dut.i_rsp
    res = {}

    async def bench(ctx):
        ctx.set(dut.i_credit_ok, 3)
        ctx.set(dut.i_node_id, 0x21)
        ctx.set(dut.o_tl.ready, 0)
        beats = [(i, b) for i, m in enumerate(msgs) for b in m.beats()]
        taken, idle, t = [], 0, 0
        ctx.set(port.valid, 1)
        while idle < 50 and beats:                       # until the port stalls for good
            ctx.set(port.payload.as_value(), beats[0][1])
            await ctx.delay(1e-10)
            if ctx.get(port.ready):
                taken.append(beats.pop(0)[0])
                idle = 0
            else:
                idle += 1
            await ctx.tick()
        res["taken"] = taken
        res["stalled_at"] = beats[0][0] if beats else None
        res["first_beat"] = bool(beats) and (not taken or taken[-1] != beats[0][0])
        ctx.set(dut.i_refuse, 1)
        n_refused = len(beats)
        for _ in range(4 * n_refused + 50):
            if not beats:
                break
            ctx.set(port.payload.as_value(), beats[0][1])
            await ctx.delay(1e-10)
            if ctx.get(port.ready):
                beats.pop(0)
            await ctx.tick()
        ctx.set(port.valid, 0)
        res["left"] = len(beats)
        for _ in range(5):
            await ctx.tick()
        res["failed"] = {n: ctx.get(getattr(dut, f"o_failed_{n}"))
                         for n in ("multicast", "reduce", "result", "cpl")}

    _sim(dut, bench)
    taken = res["taken"]
    assert res["stalled_at"] is not None, "the port never stalled with no flit taken"
    assert res["first_beat"], f"stalled inside message {res['stalled_at']} (seed {seed})"
    done = sorted(set(taken))
    # every taken message whole (its beats all taken)
    for i in done:
        assert taken.count(i) == len(msgs[i].beats()), (i, seed)
    # messages back to back fill TL flits without padding: the taken ones complete
    # slots // 4 flits, which fit the FIFO, and the stalled one would not have
    slots = sum(_slots(msgs[i]) for i in done)
    assert slots // 4 <= FLIT_FIFO_DEPTH < (slots + _slots(msgs[res["stalled_at"]])) // 4, \
        (slots, seed)
    refused = msgs[res["stalled_at"]:]
    if vc == 0 or not stamp_src:
        assert res["left"] == 0, f"{res['left']} beats not taken while refusing (seed {seed})"
        if vc == 0:
            for n in ("multicast", "reduce"):
                assert res["failed"][n] == sum(m.opcode == getattr(Opcode, n.upper())
                                               for m in refused)
        else:
            assert res["failed"]["cpl"] == len(refused)


def test_endpoint_responses_wait_for_the_link():
    """With ``stamp_src`` (an endpoint) responses are never refused: the response port
    stays stalled at its boundary while ``i_refuse`` is high."""
    rng = np.random.default_rng(5)
    msgs = [C.random_message(rng, RSP, tag=i, dest=3) for i in range(40)]
    dut = TransactionTx(stamp_src=True)
    out = {}

    async def bench(ctx):
        ctx.set(dut.i_credit_ok, 3)
        ctx.set(dut.o_tl.ready, 0)
        ctx.set(dut.i_refuse, 1)
        beats = [b for m in msgs for b in m.beats()]
        ctx.set(dut.i_rsp.valid, 1)
        n = 0
        for _ in range(400):
            ctx.set(dut.i_rsp.payload.as_value(), beats[n])
            await ctx.delay(1e-10)
            n += ctx.get(dut.i_rsp.ready)
            await ctx.tick()
        out["n"] = n
        out["cpl"] = ctx.get(dut.o_failed_cpl)

    _sim(dut, bench)
    assert out["cpl"] == 0 and 0 < out["n"] < sum(len(m.beats()) for m in msgs)


@pytest.mark.parametrize("whole", [False, True])
def test_receiver_waits_for_the_whole_message(whole):
    """Slots of one 17-slot WRITE arrive in the receive buffer in two steps (4, then 13):
    with ``whole`` no beat leaves before the last slot is in; without, the first data beat
    leaves at once (cut-through). The beats equal the message's beats either way."""
    rng = np.random.default_rng(3)
    msg = C.random_message(rng, [Opcode.WRITE], tag=7, dest=1)
    while C.data_slots(msg.opcode, msg.length) != 16:
        msg = C.random_message(rng, [Opcode.WRITE], tag=7, dest=1)
    slots = [int.from_bytes(t[16 * i:16 * i + 16], "little")
             for t in C.pack_tl([msg]) for i in range(4)]
    dut = TransactionRx(whole=whole)
    got = []

    async def bench(ctx):
        ctx.set(dut.o_beat.ready, 1)
        buf = list(slots[:4])
        for cyc in range(60):
            if cyc == 20:
                buf += slots[4:]                         # the second DL flit commits
            ctx.set(dut.i_slot.valid, bool(buf))
            ctx.set(dut.i_slot.payload, buf[0] if buf else 0)
            ctx.set(dut.i_avail, len(buf))
            await ctx.delay(1e-10)
            if ctx.get(dut.o_beat.valid):
                got.append((cyc, ctx.get(dut.o_beat.payload.as_value())))
            if buf and ctx.get(dut.i_slot.ready):
                buf.pop(0)
            await ctx.tick()

    _sim(dut, bench)
    assert [b for _, b in got] == msg.beats()
    if whole:
        assert got[0][0] >= 20
    else:
        assert got[0][0] < 20
