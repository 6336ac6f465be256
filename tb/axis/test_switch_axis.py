"""cocotb tests of the ``switch-axis`` block (rtl/axis.py, docs/axis.md) with cocotbext-axi.

Every ``s_axis_<p>`` is driven by an unmodified ``AxiStreamSource`` and every ``m_axis_<p>``
read by an ``AxiStreamSink``, each bound with ``AxiStreamBus.from_prefix``. Seeded random
frames (random byte lengths, random ``tuser`` chunk, a few to a destination beyond the
ports, some one-beat MULTICAST frames to random groups) go between random ports with random idle cycles on the sources and random
``tready`` backpressure on the sinks. The expectation is kept by the test alone: per flow
(source port, destination port) the frames in the order they were queued. Each received
frame must be the next one of its flow (source from ``tid``, destination = the sink's
port), with its bytes (``tkeep``-compacted by the sink), ``tdest`` (the port, or the group
of a MULTICAST frame) and ``tuser``; a MULTICAST frame arrives once at each member; at the end every flow is empty, no sink holds an extra frame, and the switch's
``drop_dest`` counters count the beats of the frames sent to no port.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from fusionfabric.tb.common.env import make_rng
from fusionfabric.tb.common.tb import TB

UNICAST, MULTICAST = 0, 1   # tuser[1:0] = kind (fusionfabric.formats.switch.Kind)
STATS_WIDTH = 32
DROP_DEST_INDEX = 4   # o_stats fields: flits_in, flits_out, in_stalls, out_stalls, drop_dest


def _pause_gen(rng, p_pause: float):
    while True:
        yield bool(rng.random() < p_pause)


class SwitchAxisTB(TB):
    def __init__(self, dut):
        super().__init__(dut, stall_cycles=5_000)
        self.n = int(self.params.get("n_ports", 4))
        self.keep = bool(self.params.get("keep", True))
        self.width = int(self.params.get("data_width", 64))
        self.src = [AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_{p}"), dut.clk,
                                    dut.rst) for p in range(self.n)]
        self.snk = [AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis_{p}"), dut.clk,
                                  dut.rst) for p in range(self.n)]
        idle = float(self.args.get("idle", 0.3))
        backpressure = float(self.args.get("backpressure", 0.4))
        for p in range(self.n):
            self.src[p].set_pause_generator(_pause_gen(make_rng(100 + p), idle))
            self.snk[p].set_pause_generator(_pause_gen(make_rng(200 + p), backpressure))

    async def quiet_inputs(self):
        dut = self.dut
        dut.i_config__valid.value = 0

    async def write_groups(self, groups: dict[int, int]):
        """Group-table writes on ``i_config`` (always ready), one per cycle. The payload
        (docs/switch.md): group in bits 0-7, members from bit 8, valid at bit n + 23."""
        dut = self.dut
        for g, members in groups.items():
            await FallingEdge(self.clk)
            dut.i_config__payload.value = g | members << 8 | 1 << (self.n + 23)
            dut.i_config__valid.value = 1
        await FallingEdge(self.clk)
        dut.i_config__valid.value = 0
        await ClockCycles(self.clk, 2)


@cocotb.test()
async def test_random_frames(dut):
    tb = SwitchAxisTB(dut)
    await tb.quiet_inputs()
    await tb.reset()
    tb.start_watchdog()
    rng = tb.rng
    n, lanes = tb.n, tb.width // 8
    frames = int(tb.args.get("frames", 30))
    bad = float(tb.args.get("bad", 0.05))
    mc = float(tb.args.get("multicast", 0.1))
    full = (1 << n) - 1
    groups = {0: full, 1: 1 << (n - 1)}
    while len(groups) < 4:
        groups[len(groups)] = int(rng.integers(1, full + 1))
    await tb.write_groups(groups)
    expected = {(s, d): [] for s in range(n) for d in range(n)}
    dropped_beats = [0] * n
    total = 0
    for s in range(n):
        for k in range(frames):
            if tb.keep:
                length = int(rng.integers(1, 4 * lanes + 1))
            else:
                length = lanes * int(rng.integers(1, 5))
            payload = bytes(rng.integers(0, 256, length, dtype=int).tolist())
            chunk = int(rng.integers(0, 1 << 16))
            tuser = (chunk << 2) | UNICAST
            r = rng.random()
            if r < mc:
                # one beat to every member of a group
                payload = payload[:lanes]
                g = int(rng.integers(len(groups)))
                tuser = (chunk << 2) | MULTICAST
                for d in range(n):
                    if groups[g] >> d & 1:
                        expected[(s, d)].append((payload, tuser, g))
                        total += 1
                tb.src[s].send_nowait(AxiStreamFrame(payload, tdest=g, tuser=tuser))
                continue
            if r < mc + bad:
                dest = int(rng.integers(n, 256))      # no such port: dropped by the switch
                dropped_beats[s] += -(-length // lanes)
            else:
                dest = int(rng.integers(n))
                expected[(s, dest)].append((payload, tuser, dest))
                total += 1
            tb.src[s].send_nowait(AxiStreamFrame(payload, tdest=dest, tuser=tuser))

    received = 0
    done = Event()

    async def collect(d):
        nonlocal received
        while True:
            frame = await tb.snk[d].recv()
            tb.watchdog.kick(f"frame at port {d}")
            s = frame.tid
            assert isinstance(s, int) and 0 <= s < n, \
                f"seed {tb.seed}: port {d}: tid {frame.tid!r} is not one source port"
            flow = expected[(s, d)]
            assert flow, f"seed {tb.seed}: port {d}: unexpected frame from {s}: {frame}"
            want_data, want_user, want_dest = flow.pop(0)
            assert bytes(frame.tdata) == want_data, (
                f"seed {tb.seed}: flow {s}->{d}: bytes {bytes(frame.tdata).hex()} expected "
                f"{want_data.hex()} (out of order, lost or corrupted)")
            assert frame.tuser == want_user, (
                f"seed {tb.seed}: flow {s}->{d}: tuser {frame.tuser!r} expected {want_user}")
            assert frame.tdest == want_dest, (
                f"seed {tb.seed}: flow {s}->{d}: tdest {frame.tdest!r} expected {want_dest}")
            received += 1
            if received == total:
                done.set()

    for d in range(n):
        cocotb.start_soon(collect(d))
    await done.wait()
    for s in range(n):
        await tb.src[s].wait()
    await ClockCycles(dut.clk, 50)
    left = {k: len(v) for k, v in expected.items() if v}
    assert not left, f"seed {tb.seed}: frames never delivered per flow: {left}"
    extra = [d for d in range(n) if not tb.snk[d].empty()]
    assert not extra, f"seed {tb.seed}: extra frames at ports {extra}"
    await ReadOnly()
    for p in range(n):
        stats = int(getattr(dut, f"o_stats__{p}").value)
        drops = (stats >> (DROP_DEST_INDEX * STATS_WIDTH)) & ((1 << STATS_WIDTH) - 1)
        assert drops == dropped_beats[p], (
            f"seed {tb.seed}: port {p}: drop_dest {drops}, sent {dropped_beats[p]} beats "
            f"to no port")
    tb.log.info("seed %d: %d frames delivered, %s beats dropped", tb.seed, received,
                dropped_beats)
    await RisingEdge(dut.clk)
