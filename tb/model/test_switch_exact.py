"""Cycle-exact differential test: the switch RTL against the fabric model (sim/fabric).

One coroutine plays every port, cycle by cycle, with the stream timing discipline of
tb/common/stream.py (drive at the falling edge, sample after ReadOnly). Input i offers
the flits of its trace packets back to back from each packet's cycle on (the model's
source-queue rule, link latency 0); output o is ready per the shared ready pattern.
With ``port_lanes`` (ports of different rates) input i starts to offer a flit and output
o is ready only in the link slots of its port's rate (the model's ``link.ports``); an
offered flit stays valid until it is taken.
Every ``o_port`` handshake is logged as ``(cycle, out, src, seq, flit)``; the model runs
the same trace (:func:`fusionfabric.sim.fabric.exact.run_trace`) and the two logs must be equal; the
first diverging departure is printed with its cycle. The per-port counters (``o_stats``)
and the final credits are compared with the model's too.

Cycle 0 is the first cycle after reset and the group-table writes (idle cycles change no
state: iSLIP pointers move only on matches).

With ``reduce=True`` a trace packet may carry a sixth field, its first chunk (flit ``f`` of a
REDUCE packet is a contribution to chunk ``chunk + f`` of group ``dest``), and a group may
be a dict ``{"members", "mode", "root", "op", "dtype"}`` (the reduction fields of its
entry). A RESULT departure is logged as ``(cycle, out, unit, RESULT_TAG | group << 16 |
chunk, 0)``; its data is checked against ``fusionfabric.sim.reduce.reduce_flits`` over the
first contribution of every member to that chunk (member rank order), and the units'
counters (``o_unit_stats``) and credits (``o_unit_credit``) against the model's.

``planted_faults`` (a list of parameter overrides): after the comparison, the model runs
again with each override and must diverge from the same RTL departure log (a fault
caught without a second RTL simulation).
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from fusionfabric.formats.bitfields import Fields
from fusionfabric.sim.fabric.config import SwitchParams
from fusionfabric.sim.fabric.exact import first_divergence, run_trace
from fusionfabric.sim.fabric.kernel import RESULT_TAG, S
from fusionfabric.sim.reduce import reduce_flits
from fusionfabric.formats.switch import GROUP_BITS, Kind, group_entry, switch_flit
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB

STATS = ("flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
         "drop_kind")
UNIT_STATS = ("contributions", "results", "duplicate", "nonmember", "invalid",
              "full_cycles", "result_drops")


def _data(src, seq, flit):
    return (seq & 0xFFFFFFFF) | (flit << 32) | (src << 44)


@cocotb.test()
async def test_exact(dut):
    tb = TB(dut, stall_cycles=1 << 30)
    p, a = tb.params, tb.args
    n = int(p["n_ports"])
    flit = switch_flit(int(p["data_width"]))
    packets = [tuple(x) for x in a["packets"]]
    cycles = int(a["cycles"])
    groups = {int(g): (dict(m) if isinstance(m, dict) else list(m))
              for g, m in a.get("groups", {}).items()}
    reduce = bool(p.get("reduce", False))
    ready = (np.asarray(a["ready"], dtype=bool) if a.get("ready") is not None else None)
    # ports of different rates: port p has lanes[p] of a full port's R lanes and moves a
    # flit each way only at the cycles t where floor((t + 1) * l / R) > floor(t * l / R)
    lanes = a.get("port_lanes")
    R = int(a.get("full_lanes") or (max(lanes) if lanes else 1))

    def slot(port, t):
        if not lanes:
            return True
        ln = int(lanes[port])
        return (t + 1) * ln // R > t * ln // R

    # the model, on the same trace (it has the default reduction unit only)
    if p.get("reduce_pipeline") or int(p.get("reduce_add_stages", 4)) != 4:
        raise ValueError(f"reduce_add_stages={p.get('reduce_add_stages')!r}, reduce_pipeline="
                         f"{p.get('reduce_pipeline')!r}: the cycle-level model has the "
                         f"default reduction unit only (4, False)")
    sw = SwitchParams(n_ports=n, data_width=int(p["data_width"]), depth=int(p["depth"]),
                      iterations=int(p["iterations"]), mode=p["mode"],
                      out_depth=int(p["out_depth"]), n_groups=int(p["n_groups"]),
                      pipeline=bool(p.get("pipeline", False)), reduce=reduce,
                      n_chunks=int(p.get("n_chunks", 16)))
    for key, value in a.get("model_override", {}).items():   # planted faults only
        setattr(sw, key, value)
    fabs = []
    want = run_trace(sw, packets, cycles, ready=ready, groups=groups, fabric_out=fabs,
                     port_lanes=lanes, full_lanes=R if lanes else None)

    # per-source queues of flit words, in the model's order (same-cycle: next cycles)
    queues = [[] for _ in range(n)]
    last = {}
    seqs = [0] * n
    contrib = {}        # (group, chunk, member) -> data of its first contribution
    for pk in sorted(packets, key=lambda q: (q[1], q[0])):
        cyc, src, dest, size, kind = pk[:5]
        chunk0 = int(pk[5]) if len(pk) > 5 and kind >= 2 else 0
        c = max(int(cyc), last.get(src, -1) + 1)
        last[src] = c
        for f in range(size):
            ch = chunk0 + f if kind >= 2 else 0
            d = _data(src, seqs[src], f)
            word = flit.pack(data=d, first=int(f == 0),
                             last=int(f == size - 1), kind=kind, dest=dest, src=0, chunk=ch)
            queues[src].append((c, word))
            if kind == Kind.REDUCE:
                contrib.setdefault((dest, ch, src), d)
        seqs[src] += 1
    heads = [0] * n
    # a flit offered in a link slot stays valid until taken (the stream rule; the model's
    # receive FIFO holds it); the next may follow in a later slot
    shown = [False] * n

    for name in ("i_config__valid",):
        getattr(dut, name).value = 0
    for i in range(n):
        getattr(dut, f"i_port__{i}__valid").value = 0
    for o in range(n):
        getattr(dut, f"o_port__{o}__ready").value = 0
    await tb.reset()
    entry = group_entry(n)
    cfg = Fields([("group", GROUP_BITS), ("entry", entry.width)])
    for g, spec in groups.items():
        await FallingEdge(tb.clk)
        red = spec if isinstance(spec, dict) else {"members": spec}
        mask = 0
        for m in red["members"]:
            mask |= 1 << m
        dut.i_config__payload.value = cfg.pack(group=g, entry=entry.pack(
            members=mask, valid=1, mode=int(red.get("mode", 0)), root=int(red.get("root", 0)),
            op=int(red.get("op", 0)), dtype=int(red.get("dtype", 0))))
        dut.i_config__valid.value = 1
    await FallingEdge(tb.clk)
    dut.i_config__valid.value = 0

    ivalid = [getattr(dut, f"i_port__{i}__valid") for i in range(n)]
    ipay = [getattr(dut, f"i_port__{i}__payload") for i in range(n)]
    iready = [getattr(dut, f"i_port__{i}__ready") for i in range(n)]
    ovalid = [getattr(dut, f"o_port__{o}__valid") for o in range(n)]
    opay = [getattr(dut, f"o_port__{o}__payload") for o in range(n)]
    oready = [getattr(dut, f"o_port__{o}__ready") for o in range(n)]
    got = []
    results = []
    t_wall = time.perf_counter()
    for t in range(cycles):
        if t:
            await FallingEdge(tb.clk)
        for i in range(n):
            q, h = queues[i], heads[i]
            if h < len(q) and q[h][0] <= t and (shown[i] or slot(i, t)):
                shown[i] = True
                ipay[i].value = q[h][1]
                ivalid[i].value = 1
            else:
                ivalid[i].value = 0
        ordy = [(ready is None or bool(ready[t, o])) and slot(o, t) for o in range(n)]
        for o in range(n):
            oready[o].value = int(ordy[o])
        await ReadOnly()
        for i in range(n):
            if shown[i] and to_int(iready[i].value):
                heads[i] += 1
                shown[i] = False
        for o in range(n):
            if to_int(ovalid[o].value) and ordy[o]:
                f = flit.unpack(to_int(opay[o].value))
                d = f["data"]
                if f["kind"] == Kind.RESULT:
                    got.append((t, o, f["src"], RESULT_TAG | f["dest"] << 16 | f["chunk"], 0))
                    results.append((t, o, f["dest"], f["chunk"], d))
                else:
                    got.append((t, o, f["src"], d & 0xFFFFFFFF, (d >> 32) & 0xFFF))
    wall = time.perf_counter() - t_wall
    got.sort(key=lambda r: (r[0], r[1]))
    tb.log.warning("RTL %d ports: %d cycles in %.2f s = %.0f cycles/s; %d departures",
                   n, cycles, wall, cycles / wall, len(got))
    rate_file = a.get("rate_file")
    if rate_file:
        import json
        with open(rate_file, "w") as fh:
            json.dump({"n_ports": n, "cycles": cycles, "wall": wall}, fh)

    div = first_divergence(got, want)
    if div is not None:
        k, r, m = div
        cyc = (r or m)[0]
        raise AssertionError(
            f"RTL and model diverge at departure #{k}, cycle {cyc}: RTL {r} vs model {m} "
            f"(rows are cycle, out, src, seq, flit); {len(got)} RTL vs {len(want)} model "
            f"departures; seed {tb.seed}")
    # planted faults checked against the same RTL log: each model variant must diverge
    for fault in a.get("planted_faults", []):
        swf = SwitchParams(**{**sw.__dict__, **fault})
        bad = run_trace(swf, packets, cycles, ready=ready, groups=groups, port_lanes=lanes,
                        full_lanes=R if lanes else None)
        fdiv = first_divergence(got, bad)
        assert fdiv is not None, f"planted fault {fault} does not diverge from the RTL"
        tb.log.warning("planted fault %s: RTL and model diverge at departure #%d, cycle "
                       "%d: RTL %s vs model %s", fault, fdiv[0], (fdiv[1] or fdiv[2])[0],
                       fdiv[1], fdiv[2])
    # counters and credits
    await FallingEdge(tb.clk)
    await ReadOnly()
    lay = Fields([(s, 32) for s in STATS])
    fab = fabs[0]
    st = fab.s["st"][0]
    for port in range(n):
        c = lay.unpack(to_int(getattr(dut, f"o_stats__{port}").value))
        for name in STATS:
            m = int(st[port, S[name]]) & 0xFFFFFFFF
            assert c[name] == m, (f"port {port} {name}: RTL {c[name]} vs model {m} "
                                  f"(seed {tb.seed})")
        cr = to_int(getattr(dut, f"o_credit__{port}").value)
        assert cr == int(fab.s["credit"][0, port]), (port, cr, fab.s["credit"][0, port])
    if reduce:
        ulay = Fields([(s, 32) for s in UNIT_STATS])
        ust = fab.rstate.ust[0]
        for u in range(n):
            c = ulay.unpack(to_int(getattr(dut, f"o_unit_stats__{u}").value))
            for k, name in enumerate(UNIT_STATS):
                m = int(ust[u, k]) & 0xFFFFFFFF
                assert c[name] == m, (f"unit {u} {name}: RTL {c[name]} vs model {m} "
                                      f"(seed {tb.seed})")
            cr = to_int(getattr(dut, f"o_unit_credit__{u}").value)
            assert cr == int(fab.s["credit"][0, n + u]), (u, cr, fab.s["credit"][0, n + u])
        # result data: the golden model over each member's first contribution, rank order
        width = int(p["data_width"])
        for t, o, g, ch, d in results:
            red = groups[g] if isinstance(groups[g], dict) else {"members": groups[g]}
            words = [contrib[(g, ch, m)] for m in sorted(red["members"])]
            want_d = reduce_flits(words, width, int(red.get("dtype", 0)),
                                  int(red.get("op", 0)))
            assert d == want_d, (f"result of group {g} chunk {ch} at cycle {t}, output {o}: "
                                 f"data {d:#x} vs golden {want_d:#x}")
        tb.log.warning("%d result departures checked against sim/reduce.py", len(results))
    assert got, "no departures at all: the trace exercised nothing"
