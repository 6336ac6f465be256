"""Idle-fabric latencies of the RTL fabric (Amaranth simulator, 2 endpoints, defaults).

Prints, in cycles: link-up time after reset; a 64-byte WRITE from endpoint 0 (first beat
accepted on ``i_req[0]``) to its first beat on ``o_req[1]``; the WRITE_ACK back (response
offered on ``i_rsp[1]`` → first beat on ``o_rsp[0]``); an all-reduce of one 64-byte REDUCE
per endpoint (last REDUCE beat accepted → first RESULT beat on each ``o_req``).
Usage: ``.venv/bin/python bench/fabric_latency.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from amaranth.sim import Simulator  # noqa: E402

from fusionfabric.rtl.fabric import Fabric  # noqa: E402
from fusionfabric.rtl.switch.group_table import config_layout  # noqa: E402
from fusionfabric.formats.bitfields import Fields  # noqa: E402
from fusionfabric.formats.chiplet import Opcode  # noqa: E402
from fusionfabric.sim.chiplet import Message  # noqa: E402
from fusionfabric.formats.switch import Dtype, Mode, Op, group_entry  # noqa: E402


def main():
    n = 2
    f = Fabric(n_endpoints=n)
    out = {}

    async def send(ctx, port, beats):
        """Offer beats; return the cycle of the first and last handshakes."""
        t0 = t1 = None
        for b in beats:
            ctx.set(port.payload.as_value(), b)
            ctx.set(port.valid, 1)
            while True:
                _, _, rdy = await ctx.tick().sample(port.ready)
                out["t"] += 1
                if rdy:
                    break
            t0 = out["t"] - 1 if t0 is None else t0
            t1 = out["t"] - 1
        ctx.set(port.valid, 0)
        return t0, t1

    async def wait_valid(ctx, port, limit=2000):
        for _ in range(limit):
            _, _, v = await ctx.tick().sample(port.valid)
            out["t"] += 1
            if v:
                return out["t"] - 1
        raise AssertionError("timeout")

    async def tb(ctx):
        out["t"] = 0
        for e in range(n):
            for p in (f.o_req[e], f.o_rsp[e]):
                ctx.set(p.ready, 1)
        while not all(ctx.get(f.o_ep_status[e].state) == 2 and
                      ctx.get(f.o_sw_status[e].state) == 2 for e in range(n)):
            await ctx.tick()
            out["t"] += 1
        out["link_up"] = out["t"]
        for _ in range(50):
            await ctx.tick()
            out["t"] += 1
        w = Message(Opcode.WRITE, 0, 7, dest=1, src=0, addr=0x100, data=bytes(range(64)))
        t0, _ = await send(ctx, f.i_req[0], w.beats())
        out["write"] = await wait_valid(ctx, f.o_req[1]) - t0
        for _ in range(100):
            await ctx.tick()
            out["t"] += 1
        ack = Message(Opcode.WRITE_ACK, 0, 7, dest=0, src=1)
        t0, _ = await send(ctx, f.i_rsp[1], ack.beats())
        out["ack"] = await wait_valid(ctx, f.o_rsp[0]) - t0
        # group 0: bf16 sum over both endpoints
        entry = group_entry(n).pack(members=3, op=Op.SUM, dtype=Dtype.BF16,
                                    mode=Mode.ALLREDUCE, root=0, native=0, valid=1)
        cfg = Fields([("group", 8), ("entry", group_entry(n).width)])
        ctx.set(f.i_config.payload.as_value(), cfg.pack(group=0, entry=entry))
        ctx.set(f.i_config.valid, 1)
        await ctx.tick()
        ctx.set(f.i_config.valid, 0)
        for _ in range(100):
            await ctx.tick()
            out["t"] += 1
        r0 = Message(Opcode.REDUCE, 0, 0, dest=0, src=0, op=0, dtype=Dtype.BF16, chunk=0,
                     data=bytes(64))
        r1 = Message(Opcode.REDUCE, 0, 0, dest=0, src=1, op=0, dtype=Dtype.BF16, chunk=0,
                     data=bytes(64))
        await send(ctx, f.i_req[0], r0.beats())
        _, t1 = await send(ctx, f.i_req[1], r1.beats())
        out["reduce"] = await wait_valid(ctx, f.o_req[0]) - t1

    sim = Simulator(f)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    print(f"fabric, 2 endpoints, default parameters (Amaranth simulator)")
    print(f"  links up after reset:                       {out['link_up']} cycles")
    print(f"  64-byte WRITE, first beat in -> first out:  {out['write']} cycles")
    print(f"  WRITE_ACK, response in -> first beat out:    {out['ack']} cycles")
    print(f"  REDUCE (2 x 64 B), last beat in -> RESULT:   {out['reduce']} cycles")


if __name__ == "__main__":
    main()
