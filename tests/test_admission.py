"""Per-destination admission (rtl/fabric/admission.py) against its register-level model
(sim/admission.py), cycle by cycle in the Amaranth simulator, and the model against a
plain count of flits in flight."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.formats.chiplet import PORT_BEAT, Opcode
from fusionfabric.rtl.fabric.admission import MAX_MSG_FLITS, DestAdmission
from fusionfabric.sim.admission import DestAdmissionModel
from fusionfabric.sim.chiplet import data_slots

CPL = {Opcode.WRITE: Opcode.WRITE_ACK, Opcode.READ: Opcode.READ_CPL,
       Opcode.ATOMIC_ADD: Opcode.ATOMIC_ACK}


def _requests(rng, count, n_dests):
    """Random requests: WRITE/READ/ATOMIC_ADD of every length code, some MULTICASTs, and
    destinations up to ``n_dests`` (one past the last)."""
    ops = [Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST]
    out = []
    for _ in range(count):
        op = ops[int(rng.choice(4, p=[0.5, 0.2, 0.2, 0.1]))]
        dest = int(rng.integers(n_dests + 1)) if rng.random() < 0.1 else \
            int(rng.integers(n_dests))
        out.append(dict(opcode=int(op), length=int(rng.integers(4)), dest=dest))
    return out


def _beats(fields):
    n = max(data_slots(fields["opcode"], fields["length"]), 1)
    head = {k: fields[k] for k in ("opcode", "length", "dest", "tag")}
    return [PORT_BEAT.pack(data=i, **head) for i in range(n)]


def _run(seed, n_dests, credits, count=160, p_ready=0.8, p_cpl=0.03):
    rng = np.random.default_rng([seed, 0])
    dut = DestAdmission(n_dests, credits)
    model = DestAdmissionModel(n_dests, credits)
    reqs = _requests(rng, count, n_dests)
    free_tags = list(range(256))
    state = dict(done=0, in_flight_max=0, gated=0)

    async def bench(ctx):
        pending = list(reqs)
        cur = []                     # beats of the request on offer
        cur_fields = None
        waiting = []                 # (fields) of taken non-posted requests, no completion
        cpl = []                     # beats of the completion on offer
        cpl_fields = None
        flight = [0] * (n_dests + 1)     # flits sent, not completed (plain count)
        cycle = 0
        while pending or cur or waiting or cpl:
            cycle += 1
            assert cycle < 50_000, f"stalled (seed {seed})"
            if not cur and pending:
                cur_fields = dict(pending.pop(0), tag=free_tags.pop(0))
                cur = _beats(cur_fields)
            if not cpl and waiting and rng.random() < p_cpl:
                f = waiting.pop(int(rng.integers(len(waiting))))
                cpl_fields = dict(opcode=int(CPL[f["opcode"]]), length=f["length"],
                                  dest=0, tag=f["tag"], req=f)
                cpl = _beats(cpl_fields)
            out_ready = bool(rng.random() < p_ready)
            rsp_ready = bool(rng.random() < p_ready)
            ctx.set(dut.i_req.valid, int(bool(cur)))
            ctx.set(dut.i_req.payload.as_value(), cur[0] if cur else 0)
            ctx.set(dut.o_req.ready, int(out_ready))
            ctx.set(dut.i_rsp.valid, int(bool(cpl)))
            ctx.set(dut.i_rsp.payload.as_value(), cpl[0] if cpl else 0)
            ctx.set(dut.o_rsp.ready, int(rsp_ready))
            # outputs of this cycle against the model
            want_dr = model.dest_ready()
            got_dr = ctx.get(dut.o_dest_ready)
            assert [bool(got_dr >> d & 1) for d in range(n_dests)] == want_dr, \
                f"o_dest_ready {got_dr:b} != {want_dr} in cycle {cycle} (seed {seed})"
            assert ctx.get(dut.o_req.valid) == int(bool(cur))
            assert ctx.get(dut.o_rsp.valid) == int(bool(cpl))
            ready = bool(ctx.get(dut.i_req.ready))
            if cur:
                want = model.req_ready(cur_fields["opcode"], cur_fields["length"],
                                       cur_fields["dest"], out_ready)
                assert ready == want, (f"i_req.ready {ready} != model {want} in cycle "
                                       f"{cycle} for {cur_fields} (seed {seed})")
                if out_ready and not ready:
                    state["gated"] += 1
                assert ctx.get(dut.o_req.payload.as_value()) == cur[0]
            await ctx.tick()
            taken = None
            if cur and ready:
                taken = cur_fields
                first = len(cur) == len(_beats(cur_fields))
                cur = cur[1:]
                if first and cur_fields["opcode"] in CPL:
                    waiting.append(cur_fields)
                    if cur_fields["dest"] < n_dests:
                        flight[cur_fields["dest"]] += 1 + data_slots(
                            cur_fields["opcode"], cur_fields["length"])
                if not cur:
                    if cur_fields["opcode"] not in CPL:
                        free_tags.append(cur_fields["tag"])
                    state["done"] += 1
            ctaken = None
            if cpl and rsp_ready:
                ctaken = cpl_fields
                if len(cpl) == len(_beats(cpl_fields)):
                    r = cpl_fields["req"]
                    if r["dest"] < n_dests:
                        flight[r["dest"]] -= 1 + data_slots(r["opcode"], r["length"])
                cpl = cpl[1:]
                if not cpl:
                    free_tags.append(cpl_fields["tag"])
            model.step(taken, ctaken)
            # the model's counts: the flits in flight, at most the credits
            assert all(0 <= c <= credits for c in model.count)
            state["in_flight_max"] = max(state["in_flight_max"], max(flight[:n_dests]))
        ctx.set(dut.i_req.valid, 0)
        ctx.set(dut.i_rsp.valid, 0)
        for _ in range(2):           # the last completion frees its flits
            await ctx.tick()
            model.step()
        assert ctx.get(dut.o_dest_ready) == (1 << n_dests) - 1, f"seed {seed}"
        state["bad"] = ctx.get(dut.o_bad_dest)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert state["done"] == count
    assert state["bad"] == model.bad_dest > 0, (state, seed)
    assert model.count == [0] * n_dests
    return state


@pytest.mark.parametrize("seed,n_dests,credits", [(1, 3, 40), (2, 4, MAX_MSG_FLITS),
                                                   (3, 1, 64)])
def test_admission_against_model(seed, n_dests, credits):
    st = _run(seed, n_dests, credits)
    # the case the unit is for: requests held back for want of credit, and the flits in
    # flight to a destination reaching the credits but never passing them
    assert st["gated"] > 0, f"no request waited for credit (seed {seed})"
    assert credits - MAX_MSG_FLITS < st["in_flight_max"] <= credits, (st, seed)


def test_model_counts_against_plain_count():
    """The model's count per destination is the flits sent minus the flits completed."""
    m = DestAdmissionModel(2, 100)
    m.step(dict(opcode=int(Opcode.WRITE), length=3, dest=1, tag=5))       # 17 flits
    for _ in range(15):
        m.step(dict(opcode=int(Opcode.WRITE), length=3, dest=1, tag=5))   # data beats
    m.step(dict(opcode=int(Opcode.READ), length=0, dest=0, tag=6))        # 1 flit
    assert m.count == [1, 17]
    assert m.req_ready(int(Opcode.WRITE), 3, 1, True) is True            # 34 <= 100
    m.step(cpl=dict(opcode=int(Opcode.WRITE_ACK), length=3, tag=5))
    assert m.count == [1, 17]                                            # frees at t+2
    m.step()
    assert m.count == [1, 0]


@pytest.mark.parametrize("kw", [dict(n_dests=0, credits=40), dict(n_dests=3, credits=16),
                                dict(n_dests=3, credits=4096), dict(n_dests=257,
                                                                    credits=40)])
def test_bad_parameters(kw):
    with pytest.raises(ValueError, match="must be an integer"):
        DestAdmission(**kw)
