"""cocotb test of the ``chiplet-axis`` block (rtl/axis.py, docs/axis.md) with cocotbext-axi:
two wrapped chiplets back to back (tb/axis/harness.py), every AXI4-Stream interface driven
by an unmodified ``AxiStreamSource`` or read by an ``AxiStreamSink`` bound with
``AxiStreamBus.from_prefix``.

Each side is a requester and a completer. The requester sends seeded random WRITE, READ,
MULTICAST and REDUCE messages on ``s_axis_req`` (random lengths, tags, addresses, REDUCE
op/dtype/chunk, a garbage ``tid``); the peer's ``m_axis_req`` must deliver them in order,
each as one frame (``tlast`` on its last beat) with the same bytes and ``tuser``,
``tdest`` as sent and ``tid`` = the sender's node id. The completer answers each WRITE
with a WRITE_ACK and each READ with a READ_CPL of random data on ``s_axis_rsp``; the
requester's ``m_axis_rsp`` must deliver each exactly once, matched by tag. The ``tuser``
words are packed here by hand from the field table of docs/axis.md. A last phase sends
one MULTICAST split over two AXI frames: it arrives as one message and the sender's
framing counter counts the early ``tlast``. Sources idle and sinks apply ``tready``
backpressure at random.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, Event, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from fusionfabric.tb.common.env import make_rng, random_words
from fusionfabric.tb.common.tb import TB

NODE = {"a": 1, "b": 2}
PEER = {"a": "b", "b": "a"}
# tuser of the accelerator port (docs/axis.md): (field, width), LSB first
TUSER = (("opcode", 4), ("length", 2), ("status", 2), ("tag", 8), ("op", 2), ("dtype", 3),
         ("rsvd0", 3), ("chunk", 16), ("addr", 57), ("rsvd1", 15))
WRITE, READ, MULTICAST, REDUCE, READ_CPL, WRITE_ACK = 1, 2, 4, 5, 8, 9
ACTIVE = 2
BEAT = 16


def pack_tuser(**fields) -> int:
    word, pos = 0, 0
    for name, width in TUSER:
        value = fields.get(name, 0)
        assert 0 <= value < 1 << width, (name, value)
        word |= value << pos
        pos += width
    return word


def unpack_tuser(word: int) -> dict:
    out, pos = {}, 0
    for name, width in TUSER:
        out[name] = (word >> pos) & ((1 << width) - 1)
        pos += width
    return out


def _pause_gen(rng, p_pause: float):
    while True:
        yield bool(rng.random() < p_pause)


class PairTB(TB):
    def __init__(self, dut):
        super().__init__(dut, stall_cycles=20_000)
        idle = float(self.args.get("idle", 0.3))
        bp = float(self.args.get("backpressure", 0.3))
        self.src, self.snk = {}, {}
        k = 0
        for side in "ab":
            for kind in ("req", "rsp"):
                s = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"{side}_s_axis_{kind}"),
                                    dut.clk, dut.rst)
                r = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"{side}_m_axis_{kind}"),
                                  dut.clk, dut.rst)
                s.set_pause_generator(_pause_gen(make_rng(100 + k), idle))
                r.set_pause_generator(_pause_gen(make_rng(200 + k), bp))
                self.src[side, kind], self.snk[side, kind] = s, r
                k += 1

    async def state(self, side) -> int:
        await ReadOnly()
        v = int(getattr(self.dut, f"o_status_{side}").value) & 3
        await RisingEdge(self.clk)
        return v

    async def link_up(self):
        for side in "ab":
            getattr(self.dut, f"i_link_up_{side}").value = 1
        for _ in range(5000):
            if await self.state("a") == ACTIVE and await self.state("b") == ACTIVE:
                return
        raise AssertionError(f"seed {self.seed}: link not ACTIVE after 10,000 cycles")

    async def framing(self, side, kind) -> int:
        await ReadOnly()
        v = int(getattr(self.dut, f"{side}_o_axis_{kind}_framing").value)
        await RisingEdge(self.clk)
        return v


@cocotb.test()
async def test_requests_and_completions(dut):
    tb = PairTB(dut)
    for side in "ab":
        getattr(dut, f"i_link_up_{side}").value = 0
    await tb.reset()
    await tb.link_up()
    tb.start_watchdog()
    n = int(tb.args.get("n", 24))
    expect_req = {"a": [], "b": []}     # at side X's m_axis_req, in order
    expect_rsp = {"a": {}, "b": {}}     # at side X's m_axis_rsp, by tag
    pending = {"count": 0}
    done = Event()

    def add_pending(k):
        pending["count"] += k
        if pending["count"] == 0:
            done.set()

    for side in "ab":
        rng = make_rng(10 + (side == "b"))
        peer = PEER[side]
        for tag in range(n):
            op = int(rng.choice([WRITE, READ, MULTICAST, REDUCE]))
            length = int(rng.integers(0, 4))
            fields = dict(opcode=op, length=length, tag=tag,
                          addr=random_words(rng, 57, 1)[0])
            dest = NODE[peer]
            if op == MULTICAST:
                dest = int(rng.integers(0, 256))
            if op == REDUCE:
                dest = int(rng.integers(0, 256))
                fields.update(op=int(rng.integers(0, 3)), dtype=int(rng.integers(0, 5)),
                              chunk=int(rng.integers(0, 1 << 16)))
            if op == READ:
                data = bytes(BEAT)
            else:
                data = bytes(rng.integers(0, 256, 64 * (length + 1)).tolist())
            tuser = pack_tuser(**fields)
            tb.src[side, "req"].send_nowait(AxiStreamFrame(
                data, tdest=dest, tid=int(rng.integers(0, 256)), tuser=tuser))
            expect_req[peer].append((data, dest, NODE[side], tuser))
            add_pending(1)
            if op in (WRITE, READ):
                add_pending(1)      # its completion

    async def completer(side):
        rng = make_rng(20 + (side == "b"))
        while True:
            frame = await tb.snk[side, "req"].recv()
            tb.watchdog.kick(f"{side} request")
            assert expect_req[side], f"seed {tb.seed}: {side}: unexpected request {frame}"
            data, dest, src, tuser = expect_req[side].pop(0)
            got = (bytes(frame.tdata), frame.tdest, frame.tid, frame.tuser)
            assert got == (data, dest, src, tuser), (
                f"seed {tb.seed}: {side} m_axis_req: got tdata {got[0].hex()} tdest "
                f"{got[1]!r} tid {got[2]!r} tuser {unpack_tuser(got[3]) if isinstance(got[3], int) else got[3]}; "
                f"expected tdata {data.hex()} tdest {dest} tid {src} tuser {unpack_tuser(tuser)}")
            h = unpack_tuser(tuser)
            if h["opcode"] in (WRITE, READ):
                if h["opcode"] == WRITE:
                    rsp_op, rsp_data = WRITE_ACK, bytes(BEAT)
                else:
                    rsp_op = READ_CPL
                    rsp_data = bytes(rng.integers(0, 256, 64 * (h["length"] + 1)).tolist())
                rsp_user = pack_tuser(opcode=rsp_op, length=h["length"], tag=h["tag"])
                expect_rsp[PEER[side]][h["tag"]] = (rsp_data, src, NODE[side], rsp_user)
                await tb.src[side, "rsp"].send(AxiStreamFrame(
                    rsp_data, tdest=src, tid=int(rng.integers(0, 256)), tuser=rsp_user))
            add_pending(-1)

    async def requester(side):
        while True:
            frame = await tb.snk[side, "rsp"].recv()
            tb.watchdog.kick(f"{side} completion")
            tag = unpack_tuser(frame.tuser)["tag"] if isinstance(frame.tuser, int) else None
            assert tag in expect_rsp[side], (
                f"seed {tb.seed}: {side} m_axis_rsp: completion with tag {tag} not expected "
                f"(or twice): {frame}")
            data, dest, src, tuser = expect_rsp[side].pop(tag)
            got = (bytes(frame.tdata), frame.tdest, frame.tid, frame.tuser)
            assert got == (data, dest, src, tuser), (
                f"seed {tb.seed}: {side} m_axis_rsp tag {tag}: got tdata {got[0].hex()} "
                f"tdest {got[1]!r} tid {got[2]!r} tuser {unpack_tuser(got[3])}; expected "
                f"tdata {data.hex()} tdest {dest} tid {src} tuser {unpack_tuser(tuser)}")
            add_pending(-1)

    for side in "ab":
        cocotb.start_soon(completer(side))
        cocotb.start_soon(requester(side))
    await done.wait()
    await ClockCycles(dut.clk, 100)
    for side in "ab":
        assert not expect_req[side] and not expect_rsp[side], \
            f"seed {tb.seed}: {side}: undelivered {expect_req[side]} {expect_rsp[side]}"
        for kind in ("req", "rsp"):
            assert tb.snk[side, kind].empty(), f"seed {tb.seed}: extra frame at {side} {kind}"
            assert await tb.framing(side, kind) == 0, \
                f"seed {tb.seed}: {side} {kind}: framing errors counted on well-framed traffic"

    # one 64-byte MULTICAST (4 beats) sent as two AXI frames of 2 beats: tlast early once
    rng = make_rng(30)
    data = bytes(rng.integers(0, 256, 64).tolist())
    tuser = pack_tuser(opcode=MULTICAST, length=0, tag=7, addr=0x1234)
    expect_req["b"].append((data, 9, NODE["a"], tuser))
    add_pending(1)
    done.clear()
    for half in (data[:32], data[32:]):
        tb.src["a", "req"].send_nowait(AxiStreamFrame(half, tdest=9, tuser=tuser))
    await done.wait()
    assert await tb.framing("a", "req") == 1, \
        f"seed {tb.seed}: a req framing counter {await tb.framing('a', 'req')}, expected 1"
    for side in "ab":
        state = await tb.state(side)
        assert state == ACTIVE, f"seed {tb.seed}: {side} left ACTIVE (state {state})"
    tb.log.info("seed %d: %d requests each way and their completions delivered", tb.seed, n)
