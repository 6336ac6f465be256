"""cocotb test of a fabric with a ``cpu`` endpoint: a memory target behind its chiplet
(``Fabric(cpu_endpoints=...)``, docs/fabric.md "Memory target (cpu endpoints)").

Endpoint 0 (an accelerator) sends a seeded random stream of WRITE, READ and ATOMIC_ADD
requests (``fusionfabric.sim.memory.request_beats`` without the opcodes the target does
not serve: back-to-back atomics, READ after WRITE, out-of-range and misaligned
addresses) to cpu endpoint 1 across the fabric, then READs of the whole memory. Its
completions on ``o_rsp[0]`` must equal ``fusionfabric.sim.memory.MemTargetModel``'s, in
order (one source, one destination: the fabric keeps them in order and the target
completes in order); the target's counters (``o_mem_status``) must equal the model's;
``o_req`` of both endpoints stays idle. Parameters: ``n_endpoints`` 2, ``cpu_endpoints``
[1], ``mem_bytes``. Test arguments: ``requests``, ``stall_cycles``.
"""

import cocotb

from fusionfabric.formats.chiplet import LENGTHS, PORT_BEAT, STATUS, Opcode
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.sim.chiplet import Message
from fusionfabric.sim.memory import MemTargetModel, request_beats
from fusionfabric.tb.common.env import tb_args
from fusionfabric.tb.common.scoreboard import InOrderScoreboard
from fusionfabric.tb.common.stream import StreamSink, StreamSource, to_int
from fusionfabric.tb.common.tb import TB

LINK_ACTIVE = 2
REQUESTER, CPU = 0, 1


def _fmt(word):
    f = PORT_BEAT.unpack(word)
    return (f"{Opcode(f['opcode']).name} len={f['length']} st={f['status']} tag={f['tag']} "
            f"dest={f['dest']} src={f['src']} data={f['data']:#x}")


@cocotb.test()
async def test_cpu_endpoint(dut):
    tb = TB(dut, stall_cycles=int(tb_args().get("stall_cycles", 5000)))
    n = int(tb.params["n_endpoints"])
    assert list(tb.params["cpu_endpoints"]) == [CPU], tb.params
    mem_bytes = int(tb.params["mem_bytes"])
    # idle inputs carry zeros, not X (Icarus, docs/fabric.md)
    for name in ("i_config", "i_fault"):
        getattr(dut, f"{name}__payload").value = 0
        getattr(dut, f"{name}__valid").value = 0
    for e in range(n):
        for name in ("i_req", "i_rsp"):
            getattr(dut, f"{name}__{e}__payload").value = 0
            getattr(dut, f"{name}__{e}__valid").value = 0
    src = StreamSource(dut, f"i_req__{REQUESTER}", tb.clk, tb.rng, idle=0.2,
                       watchdog=tb.watchdog)
    sb = InOrderScoreboard("cpu completions", tb.seed, fmt=_fmt, watchdog=tb.watchdog)
    sinks = []
    for e in range(n):
        rsp = StreamSink(dut, f"o_rsp__{e}", tb.clk, tb.rng, backpressure=0.2,
                         watchdog=tb.watchdog)
        req = StreamSink(dut, f"o_req__{e}", tb.clk, tb.rng, watchdog=tb.watchdog)
        if e == REQUESTER:
            rsp.on_beat.append(lambda word, cycle: sb.observe(word))
        else:
            rsp.on_beat.append(lambda word, cycle, e=e: _unexpected(tb, "o_rsp", e, word))
        req.on_beat.append(lambda word, cycle, e=e: _unexpected(tb, "o_req", e, word))
        sinks += [rsp, req]
    await tb.reset()
    tb.start_watchdog()
    for t in range(5000):
        await tb.cycles(1)
        states = [STATUS.unpack(to_int(getattr(dut, f"o_{s}_status__{e}").value))["state"]
                  for e in range(n) for s in ("ep", "sw")]
        if all(s == LINK_ACTIVE for s in states):
            break
    else:
        raise AssertionError(f"links not up after 5000 cycles: {states} (seed {tb.seed})")
    tb.watchdog.kick("links up")
    t_up = t

    beats, kinds = request_beats(tb.rng, mem_bytes, int(tb.args.get("requests", 100)),
                                 unserved=False)
    chunk = min(256, mem_bytes)
    for k, addr in enumerate(range(0, mem_bytes, chunk)):
        beats += Message(Opcode.READ, LENGTHS.index(chunk), k & 0xFF, 0, 0, addr).beats()
    # to the cpu endpoint; ``src`` is stamped by the requester's chiplet (node 0)
    beats = [PORT_BEAT.pack({**PORT_BEAT.unpack(b), "dest": CPU, "src": REQUESTER})
             for b in beats]
    model = MemTargetModel(mem_bytes, node=CPU)
    sb.expect_many(model.run_beats(beats))
    src.send_many(beats)
    cycles = 0
    while sb.pending:
        await tb.cycles(1)
        cycles += 1
    await tb.cycles(20)
    sb.check_empty()
    status = MEM_STATUS.unpack(to_int(dut.o_mem_status__0.value))
    assert status == model.counts, f"target counters {status} != model {model.counts} " \
                                   f"(seed {tb.seed})"
    for e in range(n):
        for s in ("ep", "sw"):
            st = STATUS.unpack(to_int(getattr(dut, f"o_{s}_status__{e}").value))
            assert st["overflow"] == 0 and st["credit_err"] == 0 and st["bad_op"] == 0, (e, s, st)
            assert st["cpl_timeouts"] == 0 and st["late_cpl"] == 0, (e, s, st)
    tb.log.info("links up after %d cycles; %d requests (%d beats), %d completion beats in "
                "%d cycles; target counters %s", t_up, len(kinds) + mem_bytes // chunk,
                len(beats), sb.matched, cycles, status)


def _unexpected(tb, port, e, word):
    raise AssertionError(f"{port}[{e}] got a beat, none expected: {_fmt(word)} "
                         f"(seed {tb.seed})")
