"""The demo workloads (sim/workloads.py) played on the pure-Python IdealNetwork: they
complete, their checks pass, and their checks fail when one delivered byte is corrupted."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from fusionfabric.formats.chiplet import Opcode
from fusionfabric.sim.chiplet import Message
from fusionfabric.sim.workloads import (AllReduceInNetwork, AllReduceRing, IdealNetwork, MoEAllToAll,
                           Region, WORKLOADS, make_workload, region_addr, result_granules,
                           result_message, ring_reference, split_addr)

BF16 = ml_dtypes.bfloat16

CASES = {
    "allreduce-switch": dict(n_elems=512),
    "allreduce-ring": dict(n_elems=768),
    "moe-alltoall": dict(tokens_per_endpoint=12, d_model=160),   # 320-byte rows: 2 pieces
    "hetero-rack": dict(n_elems=512, mem_bytes=2048),
}


def _run(name, n, seed, jitter=0, tamper=None, **extra):
    w = make_workload(name, n, seed, **{**CASES[name], **extra})
    cpus = getattr(w, "cpus", ())
    res = IdealNetwork(n, seed, jitter=jitter, tamper=tamper, cpu_endpoints=cpus,
                       mem_bytes=getattr(w, "mem_bytes", 4096)).run(w)
    return w, res


@pytest.mark.parametrize("n", [2, 3, 8], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_completes_and_is_bit_exact(name, n):
    if name == "hetero-rack" and n == 2:
        pytest.skip("hetero-rack needs 2 accelerators and a cpu")
    w, res = _run(name, n, seed=11, jitter=7)
    assert w.done()
    w.check()
    s = w.stats()
    assert s["seed"] == 11 and res["cycles"] > 0
    assert sum(s["tx_bytes"]) == s["bytes_moved"] > 0
    assert len(s["rx_bytes"]) == n


def _flip(opcode, nth=0, byte=1, mask=0x40):
    """Tamper hook: flip ``mask`` in data byte ``byte`` of the ``nth`` delivered message of
    ``opcode`` (bit 6 of byte 1 is a bf16's top exponent bit: values < 2 become huge)."""
    seen = [0]

    def tamper(i, dest, msg):
        if msg.opcode != opcode:
            return msg
        seen[0] += 1
        if seen[0] - 1 != nth:
            return msg
        data = bytearray(msg.data)
        data[byte] ^= mask
        return replace(msg, data=bytes(data))
    return tamper


@pytest.mark.parametrize("name,opcode,nth", [
    ("allreduce-switch", Opcode.RESULT, 5),
    ("allreduce-ring", Opcode.WRITE, 0),     # a reduce-scatter partial sum
    ("allreduce-ring", Opcode.WRITE, 40),    # late: an all-gather block
    ("moe-alltoall", Opcode.WRITE, 3),
])
def test_check_catches_one_corrupted_byte(name, opcode, nth):
    w, _ = _run(name, 4, seed=7, tamper=_flip(opcode, nth))
    with pytest.raises(AssertionError, match=r"seed 7"):
        w.check()


def test_check_catches_corrupted_contribution():
    w, _ = _run("allreduce-switch", 3, seed=2, tamper=None)
    w.check()
    # a REDUCE contribution never reaches an endpoint; corrupt one at the source instead
    w = AllReduceInNetwork(3, 2, n_elems=512)
    w.grads[1, 17] ^= 0x4000
    IdealNetwork(3, 2).run(w)
    with pytest.raises(AssertionError, match=r"element 17 .*seed 2"):
        w.check()


def test_in_network_reference_is_the_documented_tree():
    """Against an explicit fp32 tree written out for 8 members (independent of sim.reduce):
    ((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7)) in fp32, one RNE rounding to bf16."""
    w = AllReduceInNetwork(8, 3, n_elems=256)
    v = w.grads.view(BF16).astype(np.float32)
    tree = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
    assert np.array_equal(w.expected, tree.astype(BF16).view(np.uint16))
    w3 = AllReduceInNetwork(3, 3, n_elems=256)
    v = w3.grads.view(BF16).astype(np.float32)
    assert np.array_equal(w3.expected, ((v[0] + v[1]) + v[2]).astype(BF16).view(np.uint16))


def test_ring_reference_order():
    """Segment j = ((x[j] + x[j+1]) + x[j+2]) with a bf16 rounding after every add, checked
    element by element with Python scalars."""
    w = AllReduceRing(3, 4, n_elems=96 * 2)
    x = w.grads.view(BF16)
    seg = w.seg
    for i in (0, 5, seg + 3, 2 * seg + 7, 3 * seg - 1):
        j = i // seg
        acc = BF16(float(x[j, i]))
        for k in (1, 2):
            acc = BF16(float(acc) + float(x[(j + k) % 3, i]))
        assert w.expected[i] == np.array(acc, BF16).view(np.uint16)
    assert np.array_equal(ring_reference(w.grads), w.expected)


def test_gradients_look_like_gradients():
    w = AllReduceInNetwork(8, 1, n_elems=4096)
    v = w.grads.view(BF16).astype(np.float32)
    assert np.isfinite(v).all()
    assert 0.005 < np.mean(v == 0) < 0.05
    assert 0.4 < np.mean(v < 0) < 0.6
    assert np.max(np.abs(v)) < 1.0
    assert np.array_equal(w.grads, AllReduceRing(8, 1, n_elems=4096).grads)  # same data


def test_bytes_moved():
    n, m = 4, 512
    w, _ = _run("allreduce-switch", n, 1, n_elems=m)
    assert w.stats()["bytes_moved"] == n * m * 2                 # every gradient once
    assert w.stats()["rx_bytes"] == [m * 2] * n                   # every result once
    w, _ = _run("allreduce-ring", n, 1, n_elems=m)
    assert w.stats()["bytes_moved"] == 2 * (n - 1) * m * 2        # 2(n-1)/n per endpoint
    w, _ = _run("moe-alltoall", n, 1)
    remote = int(sum((w.experts[e] != e).sum() for e in range(n)))
    assert w.stats()["bytes_moved"] == 2 * remote * w.row_bytes   # dispatch + combine


def test_result_message_round_trip():
    for count in range(1, 5):
        gran = [(1000 + 7 * i, bytes([i]) * 16) for i in range(count)]
        m = result_message(3, gran)
        assert m.opcode == Opcode.RESULT and m.dest == 3 and m.status == count - 1
        assert m.chunk == 1000 and len(m.data) == 64
        for i in range(1, count):
            assert (m.addr >> (16 * (i - 1))) & 0xFFFF == 1000 + 7 * i
        assert result_granules(m) == gran
        assert Message.from_beats(m.beats()) == m
    with pytest.raises(ValueError, match="not 5"):
        result_message(0, [(0, bytes(16))] * 5)


def test_address_fields():
    a = region_addr(Region.MOE_COMBINE, 7, 12345, 1, 192)
    assert a < 1 << 57 and split_addr(a) == (Region.MOE_COMBINE, 7, 12345, 1, 192)
    with pytest.raises(ValueError, match="owner=256"):
        region_addr(1, 256)


def test_message_size():
    w = AllReduceInNetwork(3, 1, n_elems=512, message_bytes=64)
    msgs = w.start(0)
    assert {len(m.data) for m in msgs} == {64} and [m.chunk for m in msgs[:3]] == [0, 4, 8]
    w = AllReduceInNetwork(3, 1, n_elems=512, message_bytes=64)
    IdealNetwork(3, 1).run(w)
    w.check()
    with pytest.raises(ValueError, match="message_bytes=100"):
        AllReduceInNetwork(3, 1, message_bytes=100)


def test_window_keeps_units_below_their_table():
    # the default window fits a 2-slot table; a window of n * n_chunks trips the network's
    # contract check when the network's units have fewer slots than the workload assumed
    w = AllReduceInNetwork(4, 5, n_elems=1024, n_chunks=2)
    IdealNetwork(4, 5, n_chunks=2, jitter=30).run(w)
    w.check()
    w = AllReduceInNetwork(4, 5, n_elems=1024, n_chunks=8)
    with pytest.raises(AssertionError, match="n_chunks=2"):
        IdealNetwork(4, 5, n_chunks=2).run(w)


def test_protocol_errors_raise_with_seed():
    w = AllReduceInNetwork(2, 9, n_elems=64)
    w.start(0)
    m = result_message(0, [(0, bytes(16))])
    w.on_receive(0, m)
    with pytest.raises(AssertionError, match="delivered twice.*seed 9"):
        w.on_receive(0, m)
    with pytest.raises(AssertionError, match="unexpected WRITE_ACK|not outstanding"):
        w.on_receive(1, Message(Opcode.WRITE_ACK, tag=3, dest=1, src=0))
    r = AllReduceRing(2, 9, n_elems=64)
    with pytest.raises(AssertionError, match="unknown region 9"):
        r.on_receive(1, Message(Opcode.WRITE, 0, dest=1, src=0, addr=9 << 52,
                                data=bytes(64)))


def test_moe_router_skew_and_routing():
    flat = MoEAllToAll(8, 3, tokens_per_endpoint=256, skew=0.0)
    hot = MoEAllToAll(8, 3, tokens_per_endpoint=256, skew=2.0)
    assert hot.expert_load().max() > 2 * flat.expert_load().max()
    assert flat.expert_load().sum() == hot.expert_load().sum() == 8 * 256 * 2
    for w in (flat, hot):                       # top-2: two distinct experts per token
        assert (w.experts[:, :, 0] != w.experts[:, :, 1]).all()
        g = w.gates.view(BF16).astype(np.float32)
        assert np.allclose(g.sum(axis=2), 1.0, atol=1e-2) and (g[:, :, 0] >= g[:, :, 1]).all()
    one = MoEAllToAll(4, 3, tokens_per_endpoint=8, top_k=1)
    IdealNetwork(4, 3).run(one)
    one.check()


def test_without_acks():
    for name in ("allreduce-ring", "moe-alltoall"):
        w, _ = _run(name, 3, 6, acks=False)
        w.check()
        assert sum(w.stats()["rx_messages"]) == sum(w.stats()["tx_messages"])


def test_many_writes_wait_for_tags():
    """More than 256 WRITEs outstanding from one endpoint: the rest wait for acks."""
    w = AllReduceRing(2, 1, n_elems=2 * 128 * 300)   # 300 writes of segment 0 at once
    assert len(w.start(0)) == 256
    IdealNetwork(2, 1).run(AllReduceRing(2, 1, n_elems=2 * 128 * 300))


def test_deterministic():
    a, ra = _run("moe-alltoall", 4, 21, jitter=3)
    b, rb = _run("moe-alltoall", 4, 21, jitter=3)
    c, _ = _run("moe-alltoall", 4, 22, jitter=3)
    assert ra == rb and a.stats() == b.stats()
    assert not np.array_equal(a.expected, c.expected)


@pytest.mark.parametrize("call,match", [
    (lambda: AllReduceInNetwork(8, 1, n_elems=100), "n_elems=100"),
    (lambda: AllReduceRing(8, 1, n_elems=320), "n_elems=320"),
    (lambda: AllReduceInNetwork(1, 1), "n_endpoints=1"),
    (lambda: AllReduceInNetwork(4, 1, window=2), "window=2"),
    (lambda: MoEAllToAll(4, 1, d_model=100), "d_model=100"),
    (lambda: MoEAllToAll(4, 1, top_k=5), "top_k=5"),
    (lambda: MoEAllToAll(4, 1, skew=-1), "skew=-1"),
    (lambda: make_workload("bogus", 4, 1), "'bogus'"),
    (lambda: IdealNetwork(4, 1, jitter=-1), "jitter=-1"),
])
def test_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_result_record():
    from fusionfabric.sim.workloads import result_record
    w, res = _run("allreduce-ring", 3, 2)
    rec = result_record(w, res["cycles"], replays=4, relocks=1, crc_errors=9)
    assert rec["bit_exact"] and rec["error"] is None and rec["done"]
    assert (rec["replays"], rec["relocks"], rec["crc_errors"]) == (4, 1, 9)
    w.result[1, 3] ^= 1
    rec = result_record(w, res["cycles"])
    assert not rec["bit_exact"] and "endpoint 1: element 3" in rec["error"]
    fresh = make_workload("allreduce-ring", 3, 2, **CASES["allreduce-ring"])
    rec = result_record(fresh, 0)
    assert not rec["bit_exact"] and "never arrived" in rec["error"]


# -- hetero-rack: accelerators all-reduce while a cpu endpoint serves memory ------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cpus", [None, (0, 4)], ids=["last", "two"])
def test_hetero_rack_memory_matches_the_target_model(seed, cpus):
    """Every completion is checked as it arrives; the final contents the workload reads
    back (its reference is built from its own scripts) must also equal the memory of the
    target model that served the requests, and the counts must agree."""
    from fusionfabric.sim.workloads import HeteroRack
    w = HeteroRack(6, seed, cpu_endpoints=cpus, mem_bytes=2048, n_elems=512, mem_ops=30)
    net = IdealNetwork(6, seed, jitter=5, cpu_endpoints=w.cpus, mem_bytes=2048)
    net.run(w)
    w.check()
    ops = {"reads": 0, "writes": 0, "atomics": 0, "errors": 0, "dropped": 0}
    for c in w.cpus:
        assert np.array_equal(net.memories[c].mem, w.readback[c])
        for k in ops:
            ops[k] += net.memories[c].counts[k]
    m = w.stats()["memory"]
    readback_reads = len(w.cpus) * (2048 // 256)
    assert ops == {"reads": m["reads"] + readback_reads, "writes": m["writes"],
                   "atomics": m["atomics"], "errors": m["errors"], "dropped": 0}
    assert w.target_counts == ops
    assert min(m["reads"], m["writes"], m["atomics"], m["errors"]) > 0
    # the contended counters: every accelerator added to them
    adders = {a for a in w.accels for msg, *_ in w.script[a] if msg.opcode == Opcode.ATOMIC_ADD}
    assert len(adders) == len(w.accels)


def test_hetero_rack_atomic_sum_is_exact():
    """The shared counters equal the sum of every addend, computed here from the requests
    the accelerators sent (int64 then modulo 2**32), not from the workload's reference."""
    from fusionfabric.sim.workloads import HeteroRack, SHARED_BYTES
    w = HeteroRack(5, 9, mem_bytes=2048, n_elems=512, mem_ops=40)
    IdealNetwork(5, 9, jitter=3, cpu_endpoints=w.cpus, mem_bytes=2048).run(w)
    w.check()
    total = np.zeros(2048 // 4, np.int64)
    for a in w.accels:
        for msg, *_ in w.script[a]:
            if msg.opcode == Opcode.ATOMIC_ADD:
                lanes = np.frombuffer(msg.data, "<i4").astype(np.int64)
                total[msg.addr // 4:msg.addr // 4 + lanes.size] += lanes
    top = (2048 - SHARED_BYTES) // 4
    got = w.readback[4].view("<u4")[top:].astype(np.int64)
    assert np.array_equal(got, total[top:] & 0xFFFFFFFF)
    assert total[top:].any()


def _tamper_first(opcode, change):
    seen = [False]

    def tamper(i, dest, msg):
        if msg.opcode != opcode or seen[0]:
            return msg
        seen[0] = True
        return change(msg)
    return tamper


@pytest.mark.parametrize("opcode, change, match", [
    (Opcode.READ_CPL, lambda m: replace(m, data=bytes([m.data[0] ^ 1]) + m.data[1:]),
     "byte 0 is"),
    (Opcode.WRITE_ACK, lambda m: replace(m, status=1 - m.status), "status"),
    (Opcode.ATOMIC_ADD, lambda m: replace(m, data=bytes([m.data[0] ^ 1]) + m.data[1:]),
     "(readback READ .* byte|final memory byte)"),
    (Opcode.WRITE, lambda m: replace(m, addr=m.addr + 16), "(byte .* is|final memory|status)"),
])
def test_hetero_rack_catches_a_wrong_completion_or_memory(opcode, change, match):
    from fusionfabric.sim.workloads import HeteroRack
    w = HeteroRack(4, 3, mem_bytes=1024, n_elems=512, mem_ops=20)
    net = IdealNetwork(4, 3, cpu_endpoints=w.cpus, mem_bytes=1024,
                       tamper=_tamper_first(opcode, change))
    with pytest.raises(AssertionError, match=f"{match}.*seed 3"):
        net.run(w)
        w.check()


@pytest.mark.parametrize("kw, match", [
    ({"cpu_endpoints": (0, 1)}, "leaves 1 accelerator"),
    ({"cpu_endpoints": (3,)}, "cpu_endpoints=\\(3,\\)"),
    ({"mem_bytes": 512}, "region of 256 bytes"),
    ({"mem_bytes": 1000}, "mem_bytes"),
    ({"mem_ops": 0}, "mem_ops=0"),
])
def test_hetero_rack_bad_parameters(kw, match):
    from fusionfabric.sim.workloads import HeteroRack
    with pytest.raises(ValueError, match=match):
        HeteroRack(3, 1, **kw)
