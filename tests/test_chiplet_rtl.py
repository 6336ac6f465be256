"""Amaranth-simulator unit tests of the chiplet RTL against the numpy model (sim/chiplet.py).

The streams are driven by the shared Amaranth-simulator stream driver
(tb/common/amaranth_stream.py)."""

import zlib

import numpy as np
import pytest
from amaranth.lib import crc as acrc
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import BlockError, disown_failed, get_block
from fusionfabric.rtl.chiplet import Chiplet, DataLinkTx, TransactionTx
from fusionfabric.formats import chiplet as F
from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import Opcode
from fusionfabric.sim.chiplet import DLHeader
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender


def _run(dut, bench, cycles_s=1e-8):
    sim = Simulator(dut)
    sim.add_clock(cycles_s)
    sim.add_testbench(bench)
    sim.run()


def test_dl_crc_on_foundation_crc_matches_zlib_and_amaranth_lib_crc():
    """The DL's CRC (rtl.crc.Crc("crc32", 128), as dl_tx/dl_rx use it: one slot per beat,
    the trailer a partial last beat of 12 bytes) == zlib.crc32 == sim.chiplet.crc32 ==
    amaranth.lib.crc CRC32_ISO_HDLC over the same bytes; a whole DL flit from
    fusionfabric.sim.chiplet.dl_frame (CRC field included) gives ``match``, and one flipped bit does not."""
    from amaranth import Module
    from fusionfabric.rtl.crc import Crc
    m = Module()
    m.submodules.mine = mine = Crc("crc32", 128)
    m.submodules.ref = ref = acrc.catalog.CRC32_ISO_HDLC(8).create()
    rng = np.random.default_rng(3)
    cases = []
    for tl in (1, 2, 4):
        for vc in (0, 1):
            hdr = DLHeader(seq=int(rng.integers(1024)), ack=int(rng.integers(1024)),
                           credit0=int(rng.integers(4096)))
            cases.append(C.dl_frame([(vc, rng.bytes(64)) for _ in range(tl - vc)], hdr, tl))

    async def feed(ctx, data, n_last):
        words = [int.from_bytes(data[i:i + 16].ljust(16, b"\0"), "little")
                 for i in range(0, len(data), 16)]
        last = len(words) - 1
        await StreamSender(mine.i_data, [
            mine.in_fields.pack(data=w, first=i == 0, last=i == last,
                                n_bytes=n_last if i == last else 0)
            for i, w in enumerate(words)]).run(ctx)
        ctx.set(mine.o_crc.ready, 1)
        await ctx.delay(1e-10)
        assert ctx.get(mine.o_crc.valid)
        return ctx.get(mine.o_crc.payload.crc), ctx.get(mine.o_crc.payload.match)

    async def reference(ctx, data):
        ctx.set(ref.start, 1)
        await ctx.tick()
        ctx.set(ref.start, 0)
        for b in data:
            ctx.set(ref.data, b)
            ctx.set(ref.valid, 1)
            await ctx.tick()
        ctx.set(ref.valid, 0)
        return ctx.get(ref.crc)

    async def bench(ctx):
        for flit in cases:
            body = flit[:-4]                       # payload slots + 12 header bytes
            crc, _ = await feed(ctx, body, 12)
            assert crc == zlib.crc32(body) == C.crc32(body)
            assert crc == await reference(ctx, body)
            assert crc == int.from_bytes(flit[-4:], "little")
            _, match = await feed(ctx, flit, 0)
            assert match == 1
            bad = bytearray(flit)
            bad[int(rng.integers(len(bad)))] ^= 1 << int(rng.integers(8))
            _, match = await feed(ctx, bytes(bad), 0)
            assert match == 0

    _run(m, bench)


def _tx_capture(dut, tl_flits, cycles, ack=5, freed=(3, 7)):
    """Bring a DataLinkTx up (fake peer init flit), feed TL flits for ``cycles`` cycles
    (:class:`StreamSender`), capture every PHY word (:class:`StreamReceiver`, ``ready``
    high, run for the whole bring-up and feed) and return the whole PHY flits."""
    init_cycles = 3 + 2 * dut.params.flit_slots + 1
    phy = StreamReceiver(dut.o_phy, None, ready=lambda c: True,
                         max_cycles=init_cycles + cycles)
    tl = StreamSender(dut.i_tl, [F.TL_FLIT.pack(data=int.from_bytes(flit, "little"), vc=vc)
                                 for vc, flit in tl_flits], stop_after=cycles)

    async def bench(ctx):
        ctx.set(dut.i_link_up, 1)
        ctx.set(dut.i_rx_expected, ack)
        ctx.set(dut.i_freed0, freed[0])
        ctx.set(dut.i_freed1, freed[1])
        await ctx.tick().repeat(init_cycles - 1)
        # the peer's bring-up flit: init, has seen us, buffer sizes 16/16
        ctx.set(dut.i_rx_hdr.as_value(), F.DL_HEADER.pack(init=1, init_seen=1, fresh=1,
                                                          credit0=16, credit1=16))
        ctx.set(dut.i_rx_good, 1)
        await ctx.tick()
        # then a normal flit of the peer, ACTIVE: data flits go out only after one
        ctx.set(dut.i_rx_hdr.as_value(), F.DL_HEADER.pack(init_seen=1))
        await ctx.tick()
        ctx.set(dut.i_rx_good, 0)
        await tl.run(ctx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench, background=True)
    sim.add_testbench(phy.run)
    sim.run()
    flits, cur = [], None
    for w in map(F.PHY_WORD.unpack, phy.received):
        if w["first"]:
            cur = []
            flits.append(cur)
        if cur is not None:
            cur.append(w["data"])
    return [C.slots_to_flit(f) for f in flits if len(f) == dut.params.flit_slots]


@pytest.mark.parametrize("tl_per_dl", [2, 3])
def test_dl_tx_flit_bytes_match_model(tl_per_dl):
    rng = np.random.default_rng(tl_per_dl)
    msgs = [C.random_message(rng, [Opcode.WRITE, Opcode.READ], tag=i, dest=2)
            for i in range(4)]
    tls = C.pack_tl(msgs)
    resp = C.pack_tl([C.random_message(rng, [Opcode.READ_CPL], tag=9, dest=1)])
    stream_ = [(0, t) for t in tls] + [(1, t) for t in resp]
    dut = DataLinkTx(F.ChipletParams(tl_per_dl=tl_per_dl, replay_depth=8))
    flits = _tx_capture(dut, stream_, 80 + 16 * len(stream_))
    # the first flit on the wire is a bring-up control flit (sent before the peer's), marked
    # ``fresh``: the DL has not been ACTIVE since its reset
    assert flits[0] == C.dl_frame([], DLHeader(ack=5, init=1, fresh=1, credit0=16,
                                               credit1=16), tl_per_dl)
    data = [f for f in flits if C.dl_parse(f, tl_per_dl)[1].data]
    want, seq = [], 0
    for i in range(0, len(stream_), tl_per_dl):
        want.append(C.dl_frame(stream_[i:i + tl_per_dl],
                               DLHeader(seq=seq, ack=5, init_seen=1, credit0=3, credit1=7),
                               tl_per_dl))
        seq += 1
    # every copy on the wire (first sends and timer-driven replays: no ack ever comes
    # here) is the model's frame for its sequence number
    by_seq = {}
    for f in data:
        by_seq.setdefault(C.dl_parse(f, tl_per_dl)[1].seq, set()).add(f)
    assert sorted(by_seq) == list(range(len(want)))
    for q, frames in by_seq.items():
        assert frames == {want[q]}, f"seq {q}"
    # control flits between data flits are exact model frames too; bring-up flits are
    # ``fresh`` until the first normal flit (the DL is ACTIVE from then on)
    active = False
    for f in flits[1:]:
        ok, h, _ = C.dl_parse(f, tl_per_dl)
        assert ok
        active |= not h.init
        if h.init:
            assert f == C.dl_frame([], DLHeader(ack=5, init=1, init_seen=h.init_seen,
                                                fresh=int(not active), credit0=16,
                                                credit1=16), tl_per_dl)
        elif not h.data:
            assert f == C.dl_frame([], DLHeader(ack=5, init_seen=1, credit0=3, credit1=7),
                                   tl_per_dl)


def test_tl_tx_packs_like_model():
    rng = np.random.default_rng(11)
    msgs = [C.random_message(rng, tag=i, dest=2) for i in range(12)]
    dut = TransactionTx()
    want = C.pack_tl([m.with_src(0x5A) for m in msgs])
    beats = [b for m in msgs for b in m.beats()]
    req = StreamSender(dut.i_req, beats)
    tl = StreamReceiver(dut.o_tl, len(want), ready=lambda c: True,
                        max_cycles=len(beats) + 60, quiet_cycles=20)

    async def bench(ctx):
        ctx.set(dut.i_credit_ok, 3)
        ctx.set(dut.i_node_id, 0x5A)
        await tl.run(ctx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(req.run, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert [F.TL_FLIT.unpack(w)["data"].to_bytes(64, "little") for w in tl.received] == want


def test_block_parameter_errors_named():
    with pytest.raises(BlockError, match="replay_depth=6"):
        get_block("chiplet").build(replay_depth=6)
    with pytest.raises(BlockError, match="tl_per_dl=0"):
        get_block("chiplet").build(tl_per_dl=0)


def test_chiplet_params_one_object():
    # the keyword constructor checks its values once, as a ChipletParams, naming a bad one
    for kw, named in (({"rx_credits": "4"}, "rx_credits='4'"), ({"stamp_src": 0}, "stamp_src=0"),
                      ({"close_timeout": 0}, "close_timeout=0")):
        with pytest.raises(ValueError, match=named) as exc:
            Chiplet(**kw)
        disown_failed(exc.value)       # the half-built chiplet raises no UnusedElaboratable
    with pytest.raises(TypeError, match="params=") as exc:
        DataLinkTx({"tl_per_dl": 2})
    disown_failed(exc.value)
    with pytest.raises(TypeError, match="params="):
        Chiplet.from_params({"tl_per_dl": 2})
    # both data-link layers of an elaborated chiplet hold the chiplet's own object
    p = F.ChipletParams(tl_per_dl=1, replay_depth=2, rx_credits=3, replay_timeout=9,
                        close_timeout=5, stamp_src=False)
    c = Chiplet.from_params(p)
    assert c.params == p
    subs = {name: sub.origins[0] for sub, name, _ in Fragment.get(c, None).subfragments}
    assert subs["dl_tx"].params is c.params and subs["dl_rx"].params is c.params
    assert subs["tl_tx"].stamp_src is False
