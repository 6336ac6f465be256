"""The memory target of ``cpu`` endpoints (rtl/fabric/memory.py) against its numpy model
(sim/memory.py), in the Amaranth simulator.

Seeded random request streams (WRITE, READ, ATOMIC_ADD, beats of opcodes the target does
not serve, runs of back-to-back atomics to one address and to overlapping words, reads
right after writes, misaligned and out-of-range addresses, header fields changed on the
beats after a message's first) go in with random gaps; the completions come out under
random backpressure and must equal the model's beat by beat; then the whole memory and
the counters must equal the model's. The model is written from docs/fabric.md ("Memory
target"), not from the RTL; the request beats are built with ``fusionfabric.sim.chiplet.Message``
(the port format). A target built without write-to-read forwarding (the planted fault
``no-forward``) must fail the same checks.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.formats.chiplet import LENGTHS, PORT_BEAT, Opcode, Status
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.rtl.blocks import BlockError, disown_failed, get_block
from fusionfabric.rtl.fabric.memory import MemTarget
from fusionfabric.sim.chiplet import Message
from fusionfabric.sim.memory import MemTargetModel, request_beats
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender

NODE = 0x2A


# -- the simulation -------------------------------------------------------------------------

def simulate(dut, beats, n_out, seed, idle, backpressure, max_cycles=100_000):
    """Send ``beats``, take ``n_out`` completion beats; returns (completion beats, cycles
    of the receiver, memory bytes, status dict)."""
    sender = StreamSender(dut.i_req, beats, seed=[seed, 0], idle=idle)
    receiver = StreamReceiver(dut.o_rsp, n_out, seed=[seed, 1], backpressure=backpressure,
                              max_cycles=max_cycles, quiet_cycles=20)
    result = {}

    async def main(ctx):
        ctx.set(dut.i_node_id, NODE)
        await receiver.run(ctx)
        assert len(sender.sent) == len(beats), f"{len(sender.sent)} of {len(beats)} taken"
        words = [ctx.get(dut.mem.data[i]) for i in range(dut.words)]
        result["mem"] = b"".join(int(w).to_bytes(16, "little") for w in words)
        result["status"] = MEM_STATUS.unpack(ctx.get(dut.o_status.as_value()))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(sender.run, background=True)
    sim.add_testbench(main)
    sim.run()
    return receiver.received, receiver.cycles, result["mem"], result["status"]


def _show(word):
    f = PORT_BEAT.unpack(word)
    return (f"{Opcode(f['opcode']).name} len={f['length']} st={f['status']} tag={f['tag']} "
            f"dest={f['dest']} src={f['src']} data={f['data']:#x}")


def check_against_model(mem_bytes, seed, n_requests, idle, backpressure, fault="none"):
    beats, kinds = request_beats(np.random.default_rng(seed), mem_bytes, n_requests)
    model = MemTargetModel(mem_bytes, node=NODE)
    want = model.run_beats(beats)
    dut = MemTarget(mem_bytes, fault=fault)
    got, _, mem, status = simulate(dut, beats, len(want), seed, idle, backpressure)
    tag = f"(seed {seed}, mem_bytes {mem_bytes}, idle {idle}, backpressure {backpressure})"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"completion beat {i}: got {_show(g)}, expected {_show(w)} {tag}"
    assert mem == model.mem.tobytes(), f"final memory differs {tag}"
    assert status == model.counts, f"counters {status} != model {model.counts} {tag}"
    return kinds, model


CASES = [
    # mem_bytes, seed, requests, idle, backpressure
    pytest.param(1024, 11, 300, 0.0, 0.0, id="1k-back-to-back"),
    pytest.param(1024, 12, 300, 0.3, 0.3, id="1k-gaps-backpressure"),
    pytest.param(1024, 13, 300, 0.0, 0.6, id="1k-heavy-backpressure"),
    pytest.param(256, 14, 200, 0.5, 0.0, id="256-gaps"),
    pytest.param(64, 15, 100, 0.2, 0.2, id="64-smallest"),
    pytest.param(4096, 16, 200, 0.1, 0.1, id="4k-default-size"),
]


@pytest.mark.parametrize("mem_bytes,seed,n,idle,bp", CASES)
def test_random_requests_match_model(mem_bytes, seed, n, idle, bp):
    kinds, model = check_against_model(mem_bytes, seed, n, idle, bp)
    # the stream exercised what it is meant to
    assert {"WRITE", "READ", "ATOMIC_ADD"} <= set(kinds)
    assert model.counts["errors"] > 0 and model.counts["dropped"] > 0
    assert model.counts["atomics"] > 0 and model.counts["reads"] > 0


def test_back_to_back_atomics_one_address_sum():
    """64 ATOMIC_ADDs of 256 bytes to one address, no gaps, no backpressure: every lane
    holds the wrapped sum of its 64 addends (computed here with Python ints, not the
    model), and every completion is an OK ATOMIC_ACK with the request's tag."""
    rng = np.random.default_rng(21)
    addends = rng.integers(-(1 << 31), 1 << 31, (64, 64), dtype=np.int64)
    msgs = [Message(Opcode.ATOMIC_ADD, 3, k, 0, 7, 256, data=a.astype("<i4").tobytes())
            for k, a in enumerate(addends)]
    beats = [b for m in msgs for b in m.beats()]
    got, cycles, mem, status = simulate(MemTarget(1024), beats, 64, 21, 0.0, 0.0)
    for k, g in enumerate(got):
        f = PORT_BEAT.unpack(g)
        assert (f["opcode"], f["status"], f["tag"], f["dest"], f["src"], f["length"]) == (
            Opcode.ATOMIC_ACK, Status.OK, k, 7, NODE, 3), _show(g)
    sums = [sum(int(x) for x in addends[:, lane]) % (1 << 32) for lane in range(64)]
    lanes = [int.from_bytes(mem[256 + 4 * i:260 + 4 * i], "little") for i in range(64)]
    assert lanes == sums
    assert mem[:256] == bytes(256) and mem[512:] == bytes(512)
    assert status["atomics"] == 64 and status["errors"] == 0
    # one beat per cycle in (1,024 beats in cycles 0..1023), each ack the cycle after
    # its request's last beat: no stall for the read-modify-write
    assert cycles == [16 * (k + 1) for k in range(64)], cycles[:4]


@pytest.mark.soak
@pytest.mark.parametrize("mem_bytes", [64, 256, 1024, 65536])
def test_random_requests_soak(mem_bytes):
    """Ten seeds of 2,000 requests per size, gaps and backpressure drawn per seed."""
    rng = np.random.default_rng(mem_bytes)
    for seed in rng.integers(1 << 31, size=10):
        idle, bp = (float(x) for x in rng.choice([0.0, 0.2, 0.5], 2))
        check_against_model(mem_bytes, int(seed), 2000, idle, bp)


def test_planted_no_forward_fault_is_caught():
    """Without write-to-read forwarding the back-to-back stream fails the model check."""
    with pytest.raises(AssertionError, match="differs|completion beat|counters"):
        check_against_model(1024, 11, 150, 0.0, 0.0, fault="no-forward")


def test_latency_and_throughput():
    """Measured figures of docs/fabric.md: a completion's first beat is valid the cycle
    after the request's last beat is taken; a READ_CPL streams one beat per cycle; back
    to back 256-byte READs keep ``o_rsp`` busy every cycle."""
    dut = MemTarget(1024)
    reads = [Message(Opcode.READ, 3, k, 0, 1, 0).beats()[0] for k in range(4)]
    write = Message(Opcode.WRITE, 0, 9, 0, 1, 64, data=bytes(range(64))).beats()
    beats = write + reads
    got, cycles, _, _ = simulate(dut, beats, 1 + 4 * 16, 1, 0.0, 0.0)
    assert [PORT_BEAT.unpack(g)["opcode"] for g in got] == [Opcode.WRITE_ACK] + [
        Opcode.READ_CPL] * 64
    # write beats taken at cycles 0..3, the ack at 4; reads taken from 4 on, back to back
    assert cycles[0] == 4, cycles[:3]
    assert cycles[1:] == list(range(5, 5 + 64)), cycles[1:6]


def test_block_registered_and_checks_size():
    block = get_block("mem-target")
    assert block.defaults == {"mem_bytes": 4096}
    for bad in (-1, 0, 48, 96, 1 << 21):
        with pytest.raises(BlockError, match=f"mem_bytes={bad}"):
            block.build(mem_bytes=bad)
    with pytest.raises(ValueError, match="fault='x'") as exc:
        MemTarget(64, fault="x")
    disown_failed(exc.value)


def test_model_rules_by_hand():
    """The model's own rules on hand-worked requests (bytes written out here)."""
    m = MemTargetModel(128, node=3)
    w = Message(Opcode.WRITE, 0, 5, 0, 9, 64, data=bytes(range(64)))
    a = Message(Opcode.ATOMIC_ADD, 0, 6, 0, 9, 64,
                data=(b"\xff\xff\xff\xff" + b"\x01\x00\x00\x00" * 15))
    r = Message(Opcode.READ, 0, 7, 0, 9, 64)
    oob = Message(Opcode.WRITE, 0, 8, 0, 9, 80, data=bytes([0xEE] * 64))   # 80 + 64 > 128
    odd = Message(Opcode.READ, 0, 1, 0, 9, 4)                              # misaligned
    mc = Message(Opcode.MULTICAST, 0, 0, 1, 9, 0, data=bytes(64))
    out = m.run_beats(w.beats() + a.beats() + r.beats() + oob.beats() + odd.beats()
                      + mc.beats())
    f = [PORT_BEAT.unpack(x) for x in out]
    assert [(x["opcode"], x["status"], x["tag"], x["dest"], x["src"]) for x in f] == (
        [(Opcode.WRITE_ACK, 0, 5, 9, 3), (Opcode.ATOMIC_ACK, 0, 6, 9, 3)]
        + [(Opcode.READ_CPL, 0, 7, 9, 3)] * 4 + [(Opcode.WRITE_ACK, 1, 8, 9, 3)]
        + [(Opcode.READ_CPL, 1, 1, 9, 3)] * 4)
    want = bytearray(range(64))
    want[0:4] = (0x03020100 - 1).to_bytes(4, "little")      # + 0xffffffff wraps
    for i in range(1, 16):
        v = int.from_bytes(want[4 * i:4 * i + 4], "little") + 1
        want[4 * i:4 * i + 4] = v.to_bytes(4, "little")
    got = b"".join((x["data"]).to_bytes(16, "little") for x in f[2:6])
    assert got == bytes(want)
    assert all(x["data"] == 0 for x in f[7:])
    # the out-of-range write (80..143) left both halves as they were
    assert m.mem[:64].tobytes() == bytes(64) and m.mem[64:].tobytes() == bytes(want)
    assert m.counts == {"reads": 1, "writes": 1, "atomics": 1, "errors": 2, "dropped": 4}
