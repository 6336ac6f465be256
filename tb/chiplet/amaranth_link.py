"""The link-pair traffic test on the Amaranth simulator (``fusionfabric link --sim amaranth``).

A compact twin of :mod:`fusionfabric.tb.chiplet.link` for the Python simulator: both sides send random
requests (non-posted ones hold a tag until their completion), each completer answers from
:class:`fusionfabric.sim.chiplet.MemoryModel` in random order, bit errors hit the channel at ``ber``
(data bits), and a counting scoreboard checks exactly-once, in-order per (source,
destination), intact delivery and tag matching. Returns the same report keys.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import SLOT_BITS, STATUS, TL_HEADER, Opcode
from fusionfabric.sim.chiplet import MemoryModel, Message

NODE = {"a": 1, "b": 2}


class _Board:
    def __init__(self):
        self.q, self.done = {}, {}
        self.delivered = self.duplicates = self.corrupt = 0

    def expect(self, key, item):
        self.q.setdefault(key, deque()).append(item)

    def observe(self, key, item):
        q = self.q.get(key)
        seen = self.done.setdefault(key, deque(maxlen=256))
        if q and q[0] == item:
            seen.append(q.popleft())
            self.delivered += 1
        elif item in seen:
            self.duplicates += 1
        else:
            self.corrupt += 1

    @property
    def pending(self):
        return sum(len(v) for v in self.q.values())


def run_amaranth_link(params: dict, n: int, ber: float, seed: int, max_cycles: int = 400_000):
    from amaranth.sim import Simulator

    from fusionfabric.tb.chiplet.harness import ChipletPair

    dut = ChipletPair(**params)
    rng = np.random.default_rng(seed)
    frng = np.random.default_rng([seed, 7])
    req_b, cpl_b = _Board(), _Board()
    res = {}
    p_word = 1.0 - (1.0 - ber) ** SLOT_BITS if ber > 0 else 0.0

    async def bench(ctx):
        sides = {}
        for s in ("a", "b"):
            sides[s] = dict(node=NODE[s], peer=NODE["b" if s == "a" else "a"], left=n,
                            free=deque(range(256)), out={}, mem=MemoryModel(NODE[s]),
                            req=deque(), rsp=deque(), pend=[], rx_req=[], rx_rsp=[],
                            sent=0, t0={})
        ctx.set(dut.i_link_up_a, 1)
        ctx.set(dut.i_link_up_b, 1)
        for s in ("a", "b"):
            ctx.set(getattr(dut, f"{s}_o_req").ready, 1)
            ctx.set(getattr(dut, f"{s}_o_rsp").ready, 1)
        hits = {"ab": 0, "ba": 0}
        payload = 0
        lat = []
        t_first = t_last = None
        next_err = {d: int(frng.geometric(p_word)) if p_word else None for d in ("ab", "ba")}
        cyc = 0
        while cyc < max_cycles:
            cyc += 1
            busy = False
            for s, sd in sides.items():
                # new requests
                if sd["left"] and len(sd["req"]) < 32:
                    nonposted = rng.random() >= 0.2
                    if not nonposted or sd["free"]:
                        tag = sd["free"].popleft() if nonposted else int(rng.integers(256))
                        ops = ([Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD] if nonposted
                               else [Opcode.MULTICAST, Opcode.REDUCE])
                        msg = C.random_message(rng, ops, tag=tag, dest=sd["peer"])
                        if nonposted:
                            sd["out"][tag] = msg
                        req_b.expect((sd["node"], sd["peer"]), msg.with_src(sd["node"]))
                        beats = msg.beats()
                        sd["req"].extend((b, i == 0) for i, b in enumerate(beats))
                        sd["left"] -= 1
                # responses, out of order
                if sd["pend"] and rng.random() < 0.5:
                    r = sd["pend"].pop(int(rng.integers(len(sd["pend"])))).with_src(sd["node"])
                    cpl_b.expect((r.dest, r.tag), r)
                    sd["rsp"].extend((b, False) for b in r.beats())
                for name, q in (("i_req", sd["req"]), ("i_rsp", sd["rsp"])):
                    port = getattr(dut, f"{s}_{name}")
                    ctx.set(port.valid, bool(q))
                    if q:
                        ctx.set(port.payload.as_value(), q[0][0])
                busy |= bool(sd["left"] or sd["req"] or sd["rsp"] or sd["pend"] or sd["out"])
            for d in ("ab", "ba"):
                err = getattr(dut, f"i_err_{d}")
                if next_err[d] is not None:
                    next_err[d] -= 1
                    if next_err[d] == 0:
                        ctx.set(err, 1 << int(frng.integers(SLOT_BITS)))
                        next_err[d] = int(frng.geometric(p_word))
                    else:
                        ctx.set(err, 0)
            await ctx.delay(1e-10)
            for s, sd in sides.items():
                for name, q in (("i_req", sd["req"]), ("i_rsp", sd["rsp"])):
                    port = getattr(dut, f"{s}_{name}")
                    if q and ctx.get(port.ready):
                        word, first = q.popleft()
                        if name == "i_req" and first:
                            sd["t0"].setdefault(sd["peer"], deque()).append(cyc)
                            t_first = cyc if t_first is None else t_first
                for name, buf in (("o_req", sd["rx_req"]), ("o_rsp", sd["rx_rsp"])):
                    port = getattr(dut, f"{s}_{name}")
                    if ctx.get(port.valid):
                        buf.append(ctx.get(port.payload.as_value()))
                        f = TL_HEADER.unpack(buf[0] >> SLOT_BITS)
                        if len(buf) < max(1, C.data_slots(f["opcode"], f["length"])):
                            continue
                        msg = Message.from_beats(buf)
                        buf.clear()
                        if name == "o_req":
                            req_b.observe((msg.src, sd["node"]), msg)
                            src_side = sides["a" if msg.src == NODE["a"] else "b"]
                            q0 = src_side["t0"].get(sd["node"])
                            if q0:
                                lat.append(cyc - q0.popleft())
                            t_last = cyc
                            if msg.opcode != Opcode.READ:
                                payload += len(msg.data)
                            r = sd["mem"].respond(msg)
                            if r is not None:
                                sd["pend"].append(r)
                        else:
                            if msg.tag in sd["out"]:
                                cpl_b.observe((sd["node"], msg.tag), msg)
                                del sd["out"][msg.tag]
                                sd["free"].append(msg.tag)
                            else:
                                cpl_b.corrupt += 1
            await ctx.tick()
            if not busy and not req_b.pending and not cpl_b.pending:
                break
        for d in ("ab", "ba"):
            ctx.set(getattr(dut, f"i_err_{d}"), 0)
        await ctx.tick().repeat(300)
        sa = STATUS.unpack(ctx.get(dut.o_status_a.as_value()))
        sb = STATUS.unpack(ctx.get(dut.o_status_b.as_value()))
        err_flits = cut_flits = 0
        for d in ("ab", "ba"):
            hits[d] = ctx.get(getattr(dut, f"o_hit_{d}"))
            err_flits += ctx.get(getattr(dut, f"o_err_flits_{d}"))
            cut_flits += ctx.get(getattr(dut, f"o_lost_flits_{d}"))
        lat.sort()
        window = (t_last - t_first + 1) if t_first and t_last else cyc
        res.update({
            "seed": seed, "sim": "amaranth", "params": params, "ber": ber,
            "sent": 2 * n, "delivered": req_b.delivered, "completions": cpl_b.delivered,
            "duplicates": req_b.duplicates + cpl_b.duplicates,
            "corrupt": req_b.corrupt + cpl_b.corrupt, "lost": req_b.pending + cpl_b.pending,
            "replays": sa["replays"] + sb["replays"], "timeouts": sa["timeouts"] + sb["timeouts"],
            "crc_errors": sa["crc_err"] + sb["crc_err"], "flits_hit": hits["ab"] + hits["ba"],
            "cycles": cyc, "window_cycles": window, "payload_bytes": payload,
            "goodput_bytes_per_cycle": payload / max(1, window),
            "goodput_fraction_of_slot_rate": payload / max(1, window) / 32,
            "latency_cycles": {"min": lat[0] if lat else None,
                               "mean": sum(lat) / len(lat) if lat else None,
                               "p99": lat[int(0.99 * (len(lat) - 1))] if lat else None,
                               "max": lat[-1] if lat else None},
            "status_a": sa, "status_b": sb, "hits": hits,
            "flits_hit_err": err_flits, "flits_cut": cut_flits,
        })

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res
