"""Play a :mod:`fusionfabric.sim.workloads` workload on the RTL fabric in the Amaranth simulator (no
Verilog build; slow: tens of cycles per second at 2 endpoints). ``fusionfabric demo
--sim amaranth`` calls :func:`run_workload`; the results record is the one of
``fusionfabric.tb.fabric.test_fabric.test_workload`` (without the per-endpoint counters)."""

from __future__ import annotations

import json
from collections import deque

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import SLOT_BITS, STATUS, TL_HEADER, Opcode
from fusionfabric.sim.chiplet import Message

__all__ = ["run_workload"]


def run_workload(params: dict, test_args: dict, seed: int, waves: bool = False,
                 max_cycles: int = 200_000) -> dict:
    from amaranth.sim import Simulator

    from fusionfabric.rtl.blocks import get_block
    from fusionfabric.rtl.fabric.fabric import FAULT, LINK_STATUS
    from fusionfabric.rtl.fabric.fault import ber_threshold
    from fusionfabric.formats.bitfields import Fields
    from fusionfabric.formats.switch import group_entry
    from fusionfabric.sim.workloads import make_workload, result_record

    block = get_block("fabric")
    fab = block.build(**block.resolve(params))
    n = fab.n_endpoints
    w = make_workload(test_args["workload"], n, int(test_args.get("seed", seed)),
                      **dict(test_args.get("params") or {}))
    faults = test_args.get("faults") or None
    cfg = Fields([("group", 8), ("entry", group_entry(n).width)])
    tx_q = {(e, k): deque() for e in range(n) for k in ("req", "rsp")}
    tx = [0] * n
    rx = [0] * n
    out = {}

    def queue(e, msgs):
        for m in msgs:
            k = "rsp" if m.opcode >= Opcode.READ_CPL else "req"
            tx[e] += len(m.data) if m.opcode != Opcode.RESULT else 0
            tx_q[(e, k)].extend(m.beats())

    async def tb(ctx):
        for e in range(n):
            ctx.set(fab.o_req[e].ready, 1)
            ctx.set(fab.o_rsp[e].ready, 1)
        for d in w.config_writes():
            d = dict(d)
            g = d.pop("group")
            ctx.set(fab.i_config.payload.as_value(),
                    cfg.pack(group=g, entry=group_entry(n).pack(**d)))
            ctx.set(fab.i_config.valid, 1)
            await ctx.tick()
        ctx.set(fab.i_config.valid, 0)
        t = 0
        while not all(ctx.get(fab.o_ep_status[e].state) == 2 and
                      ctx.get(fab.o_sw_status[e].state) == 2 for e in range(n)):
            await ctx.tick()
            t += 1
            if t > 5000:
                raise AssertionError("fabric links not up after 5000 cycles")
        out["link_up"] = t
        if faults and faults.get("ber"):
            ctx.set(fab.i_fault.payload.as_value(), FAULT.pack(
                all=1, threshold=ber_threshold(float(faults["ber"]), fab.lane_bits)))
            ctx.set(fab.i_fault.valid, 1)
            await ctx.tick()
            ctx.set(fab.i_fault.valid, 0)
        slip_lane = int((faults or {}).get("slip_lane", -1))
        slip_at = int((faults or {}).get("slip_at", 1000))
        asm = {(e, k): [] for e in range(n) for k in ("req", "rsp")}
        for e in range(n):
            queue(e, w.start(e))
        cyc = 0
        while not w.done() and cyc < max_cycles:
            if cyc == slip_at and slip_lane >= 0:
                ctx.set(fab.i_fault.payload.as_value(), FAULT.pack(
                    lane=slip_lane, slip=int(faults.get("slip_bits", 1)),
                    threshold=ber_threshold(float(faults.get("ber", 0)), fab.lane_bits)))
                ctx.set(fab.i_fault.valid, 1)
            elif cyc == slip_at + 1:
                ctx.set(fab.i_fault.valid, 0)
            ports = []
            for e in range(n):
                for k in ("req", "rsp"):
                    p = getattr(fab, f"i_{k}")[e]
                    q = tx_q[(e, k)]
                    if q:
                        ctx.set(p.payload.as_value(), q[0])
                        ctx.set(p.valid, 1)
                    else:
                        ctx.set(p.valid, 0)
                    ports += [p.ready, getattr(fab, f"o_{k}")[e].valid,
                              getattr(fab, f"o_{k}")[e].payload.as_value()]
            _, _, *vals = await ctx.tick().sample(*ports)
            cyc += 1
            i = 0
            for e in range(n):
                for k in ("req", "rsp"):
                    rdy, ov, op = vals[i:i + 3]
                    i += 3
                    if rdy and tx_q[(e, k)]:
                        tx_q[(e, k)].popleft()
                    if ov:
                        beats = asm[(e, k)]
                        beats.append(op)
                        f = TL_HEADER.unpack(beats[0] >> SLOT_BITS)
                        if len(beats) == max(1, C.data_slots(f["opcode"], f["length"])):
                            msg = Message.from_beats(beats)
                            asm[(e, k)] = []
                            rx[e] += (len(msg.data) if msg.opcode != Opcode.RESULT
                                      else 16 * (msg.status + 1))
                            queue(e, w.on_receive(e, msg))
        out["cycles"] = cyc
        st = [(STATUS.unpack(ctx.get(fab.o_ep_status[e].as_value())),
               STATUS.unpack(ctx.get(fab.o_sw_status[e].as_value())),
               LINK_STATUS.unpack(ctx.get(fab.o_link[e].as_value()))) for e in range(n)]
        out["replays"] = sum(a["replays"] + b["replays"] for a, b, _ in st)
        out["crc_errors"] = sum(a["crc_err"] + b["crc_err"] for a, b, _ in st)
        out["relocks"] = sum(c["up_drops"] + c["down_drops"] for _, _, c in st)

    sim = Simulator(fab)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    if waves:
        with sim.write_vcd("fabric.vcd"):
            sim.run()
    else:
        sim.run()
    rec = result_record(w, out["cycles"], replays=out["replays"], relocks=out["relocks"],
                        crc_errors=out["crc_errors"], tx_bytes=tx, rx_bytes=rx,
                        sim="amaranth", link_up_cycles=out["link_up"])
    if test_args.get("result_file"):
        with open(test_args["result_file"], "w") as fh:
            json.dump(rec, fh, indent=1, default=int)
    return rec
