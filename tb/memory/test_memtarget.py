"""cocotb test of the ``mem-target`` block (docs/fabric.md, "Memory target") against
``fusionfabric.sim.memory.MemTargetModel``.

A seeded random request stream (``fusionfabric.sim.memory.request_beats``: WRITE, READ,
ATOMIC_ADD, back-to-back atomics, READ after WRITE, beats not served, out-of-range and
misaligned addresses) goes into ``i_req`` with random idle cycles; ``o_rsp`` is taken
under random backpressure and every completion beat must equal the model's, in order.
At the end: the counters on ``o_status`` equal the model's, and READs of the whole memory
through the port return the model's bytes. Test arguments: ``requests``, ``idle``,
``backpressure``.
"""

import cocotb

from fusionfabric.formats.chiplet import LENGTHS, PORT_BEAT, Opcode
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.sim.chiplet import Message
from fusionfabric.sim.memory import MemTargetModel, request_beats
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

NODE = 0x5C

sample_cpl = cover_point("mem.completion", bins=["READ_CPL", "WRITE_ACK", "ATOMIC_ACK"])
sample_status = cover_point("mem.status", bins=[0, 1])


def _fmt(word):
    f = PORT_BEAT.unpack(word)
    return (f"{Opcode(f['opcode']).name} len={f['length']} st={f['status']} tag={f['tag']} "
            f"dest={f['dest']} src={f['src']} data={f['data']:#x}")


@cocotb.test()
async def test_requests_match_model(dut):
    tb = TB(dut, stall_cycles=2000)
    mem_bytes = int(tb.params["mem_bytes"])
    n = int(tb.args.get("requests", 100))
    dut.i_node_id.value = NODE
    src = StreamSource(dut, "i_req", tb.clk, tb.rng, idle=float(tb.args.get("idle", 0.3)),
                       watchdog=tb.watchdog)
    snk = StreamSink(dut, "o_rsp", tb.clk, tb.rng,
                     backpressure=float(tb.args.get("backpressure", 0.3)),
                     watchdog=tb.watchdog)
    sb = InOrderScoreboard("mem-target", tb.seed, fmt=_fmt, watchdog=tb.watchdog)

    def on_beat(word, cycle):
        f = PORT_BEAT.unpack(word)
        sample_cpl(Opcode(f["opcode"]).name)
        sample_status(f["status"])
        sb.observe(word)

    snk.on_beat.append(on_beat)
    await tb.reset()
    tb.start_watchdog()

    model = MemTargetModel(mem_bytes, node=NODE)
    beats, _ = request_beats(tb.rng, mem_bytes, n)
    # then read the whole memory back through the port, 256 bytes (or less) at a time
    chunk = min(256, mem_bytes)
    for k, addr in enumerate(range(0, mem_bytes, chunk)):
        beats += Message(Opcode.READ, LENGTHS.index(chunk), k & 0xFF, 0, 1, addr).beats()
    sb.expect_many(model.run_beats(beats))
    src.send_many(beats)
    await src.wait_idle()
    while sb.pending:
        await tb.cycles(1)
    await tb.cycles(10)
    sb.check_empty()
    status = MEM_STATUS.unpack(to_int(dut.o_status.value))
    assert status == model.counts, f"counters {status} != model {model.counts} (seed {tb.seed})"
    tb.log.info("%d request beats, %d completion beats, counters %s", len(beats),
                sb.matched, status)
    export_coverage()
