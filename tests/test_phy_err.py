"""PCS-flagged damage fails DL flits deterministically (PHY word ``err``, docs/protocol.md
"PHY mapping and the PCS", docs/crc.md).

References: the row framing model sim.chiplet.PhyRx (for PcsToPhy, row by row), and
sim.chiplet.dl_frame / dl_parse (zlib CRC-32) for flits whose CRC is built to match. The
end-to-end cases run the RTL chain PhyToPcs -> PcsTx -> 2 lanes (a line bit flipped) ->
PcsRx -> PcsToPhy -> DataLinkRx in the Amaranth simulator: a sync-header error, a damaged
START row after a flit, and an alignment-marker error (PcsToPhy.i_link_up connected or
not).
"""

import numpy as np
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fusionfabric.formats import chiplet as F
from fusionfabric.formats.pcs import BlockType, control_word
from fusionfabric.rtl.chiplet import PcsToPhy, PhyToPcs
from fusionfabric.rtl.chiplet.dl_rx import DataLinkRx
from fusionfabric.rtl.pcs import PcsRx, PcsTx
from fusionfabric.sim import chiplet as C

TL = 4
L = F.dl_flit_slots(TL)                      # 17
M64 = 2 ** 64 - 1
ERROR_WORD = control_word(BlockType.ERROR)
IDLE_WORD = control_word(BlockType.IDLE)
START_WORD = control_word(BlockType.START)


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _slots(flit: bytes) -> list[int]:
    return [int.from_bytes(flit[16 * k:16 * k + 16], "little") for k in range(len(flit) // 16)]


def _flit(rng, seq, tls=None):
    tls = tls or [(int(rng.integers(0, 2)), rng.bytes(64)) for _ in range(TL)]
    return C.dl_frame(tls, C.DLHeader(seq=seq), TL)


# -- PcsToPhy against PhyRx, err included ---------------------------------------------------

def _kind(row):
    """Independent classification of a raw row ((d0, c0), (d1, c1)) into PhyRx's kinds."""
    (d0, c0), (d1, c1) = row
    if c0 and d0 & 0xFF == BlockType.START:
        return "start"
    if c0 and c1 and d0 & 0xFF == BlockType.IDLE and d1 & 0xFF == BlockType.IDLE:
        return "idle"
    return "data" if not c0 and not c1 else "error"


def test_pcs_to_phy_err_and_chain_end_match_model():
    """Rows of START-framed and chained flits with damage everywhere, at flit boundaries
    too: an ERROR or other control block (MESSAGE) in one lane or both, IDLE rows inside
    flits, lost rows. Every cycle the RTL delivers PhyRx's word one cycle later: data,
    ``first`` and ``err``."""
    seed = 41
    rng = np.random.default_rng(seed)
    rows, bounds = [], []                        # bounds: the row after a flit's last slot
    for f in range(80):
        if rng.random() < 0.4 or f == 0:
            rows.append(((START_WORD, 1), (IDLE_WORD, 1)))
        for _ in range(L):
            d = int.from_bytes(rng.bytes(16), "little")
            rows.append(((d & M64, 0), (d >> 64, 0)))
        bounds.append(len(rows))
        while rng.random() < 0.2:
            rows.append(((IDLE_WORD, 1), (IDLE_WORD, 1)))
    rows.append(((IDLE_WORD, 1), (IDLE_WORD, 1)))
    for _ in range(60):
        # half the damage at or next to a flit boundary, half anywhere
        j = (int(rng.choice(bounds)) + int(rng.integers(-1, 2)) if rng.random() < 0.5
             else int(rng.integers(len(rows))))
        (d0, c0), (d1, c1) = rows[j]
        what = int(rng.integers(4))
        if what == 0:
            rows[j] = ((ERROR_WORD, 1), (d1, c1))
        elif what == 1:
            rows[j] = ((d0, c0), (ERROR_WORD, 1))
        elif what == 2:
            rows[j] = ((control_word(BlockType.MESSAGE, 5), 1), (d1, c1))
        else:
            rows[j] = ((IDLE_WORD, 1), (IDLE_WORD, 1))
    dut = PcsToPhy(TL)
    model = C.PhyRx(TL)
    counts = {"err": 0, "first": 0, "words": 0}

    async def bench(ctx):
        i = 0
        while i < len(rows):
            row = None
            if rng.random() > 0.15:                      # else a cycle without a row
                row = rows[i]
                i += 1
            ctx.set(dut.i_row.valid, row is not None)
            if row is not None:
                for k in range(2):
                    ctx.set(dut.i_row.payload[k].data, row[k][0])
                    ctx.set(dut.i_row.payload[k].ctrl, row[k][1])
            await ctx.tick()
            want = None
            if row is not None:
                w = model.row((_kind(row), row[0][0] | row[1][0] << 64))
                want = None if w is None else (w[0], bool(w[1]), bool(w[2]))
            if want is None:
                assert not ctx.get(dut.o_word.valid), (seed, i)
                continue
            got = (ctx.get(dut.o_word.payload.data), bool(ctx.get(dut.o_word.payload.first)),
                   bool(ctx.get(dut.o_word.payload.err)))
            assert ctx.get(dut.o_word.valid), (seed, i)
            assert got == want, (seed, i, got, want)
            counts["err"] += want[2]
            counts["first"] += want[1]
            counts["words"] += 1

    _run(dut, bench)
    assert counts["err"] > 10 and counts["first"] > 40, (seed, counts)


# -- DataLinkRx: err fails a flit whose CRC matches -----------------------------------------

def test_dl_rx_counts_a_flit_with_err_as_crc_error():
    """Flit seq 0, flit seq 1 (a valid codeword) with ``err`` on one slot, then seq 1 again
    without it: the second is counted in crc_err and NAKed, not committed; the replay is
    accepted. Every flit passes dl_parse (zlib)."""
    seed = 42
    rng = np.random.default_rng(seed)
    flits = [_flit(rng, 0), _flit(rng, 1)]
    assert all(C.dl_parse(f, TL)[0] for f in flits)
    dut = DataLinkRx(F.ChipletParams(tl_per_dl=TL))
    sent = [(flits[0], None), (flits[1], int(rng.integers(L))), (flits[1], None)]
    seen = {"good": 0, "nak": 0}

    async def bench(ctx):
        ctx.set(dut.i_link_up, 1)
        ctx.set(dut.o_slot0.ready, 1)
        ctx.set(dut.o_slot1.ready, 1)
        for f, bad in sent:
            for k, s in enumerate(_slots(f)):
                ctx.set(dut.i_phy.valid, 1)
                ctx.set(dut.i_phy.payload.data, s)
                ctx.set(dut.i_phy.payload.first, k == 0)
                ctx.set(dut.i_phy.payload.err, k == bad)
                await ctx.tick()
                seen["good"] += ctx.get(dut.o_good)
            ctx.set(dut.i_phy.valid, 0)
            for _ in range(3):
                await ctx.tick()
                seen["good"] += ctx.get(dut.o_good)
                seen["nak"] += ctx.get(dut.o_nak)
                ctx.set(dut.i_nak_sent, ctx.get(dut.o_nak))
            ctx.set(dut.i_nak_sent, 0)
        for _ in range(L + 8):
            await ctx.tick()
        seen.update(crc_err=ctx.get(dut.o_crc_err), rx_flits=ctx.get(dut.o_rx_flits),
                    frame_err=ctx.get(dut.o_frame_err), expected=ctx.get(dut.o_expected))

    _run(dut, bench)
    assert seen == {"good": 2, "nak": 1, "crc_err": 1, "rx_flits": 2, "frame_err": 0,
                    "expected": 2}, (seed, sent[1][1], seen)


# -- end to end through the 64b/66b PCS -----------------------------------------------------

class _Chain(wiring.Component):
    """One link direction of RTL: PhyToPcs -> PcsTx (2 lanes) -> lanes XOR ``i_flip``
    (lane 0 in bits 0..65) -> PcsRx -> PcsToPhy -> DataLinkRx (link up = PcsRx's, and
    PcsToPhy's too if ``link_reset``)."""

    def __init__(self, start_every, link_reset=True):
        self.link_reset = link_reset
        self.txad = PhyToPcs(TL, start_every)
        self.tx = PcsTx(n_lanes=2, am_period=16)
        self.rx = PcsRx(n_lanes=2, am_period=16, max_skew=1, ber_window=4096)
        self.rxad = PcsToPhy(TL)
        self.dl = DataLinkRx(F.ChipletParams(tl_per_dl=TL))
        super().__init__({"i_flip": In(132), "o_link_up": Out(1)})

    def elaborate(self, platform):
        m = Module()
        for n in ("txad", "tx", "rx", "rxad", "dl"):
            m.submodules[n] = getattr(self, n)
        wiring.connect(m, self.txad.o_row, self.tx.i_data)
        for k in range(2):
            m.d.comb += self.rx.i_lanes[k].eq(self.tx.o_lanes[k] ^ self.i_flip[66 * k:66 * k + 66])
        m.d.comb += [self.rxad.i_row.valid.eq(self.rx.o_data.valid),
                     self.rxad.i_row.payload.eq(self.rx.o_data.payload),
                     self.dl.i_link_up.eq(self.rx.o_link_up),
                     self.dl.i_nak_sent.eq(self.dl.o_nak),
                     self.dl.o_slot0.ready.eq(1), self.dl.o_slot1.ready.eq(1),
                     self.o_link_up.eq(self.rx.o_link_up)]
        if self.link_reset:
            m.d.comb += self.rxad.i_link_up.eq(self.rx.o_link_up)
        wiring.connect(m, self.rxad.o_word, self.dl.i_phy)
        return m


def _through_pcs(flits, start_every, target, flip, link_reset=True):
    """Send ``flits`` back to back once the PCS is up; flip line bits ``flip`` (a 132-bit
    mask) in the cycle the block of ``target`` leaves the transmitter, once: ``target`` is
    ``(flit, slot)`` for a data row, ``(flit, "start")`` for the START row before that
    flit, ``(flit, "marker")`` for the first marker row sent while that flit is offered.
    Returns the rows PcsRx delivered, the words PcsToPhy delivered ``(data, first, err)``
    (and ``None`` for a cycle with the PCS link down), the DL counters and the cycles with
    the link down."""
    dut = _Chain(start_every, link_reset)
    words = [(s, k == 0, f) for f, fl in enumerate(flits) for k, s in enumerate(_slots(fl))]
    out = {"rows": [], "words": [], "good": 0, "down": 0}

    async def bench(ctx):
        for _ in range(2000):
            await ctx.tick()
            if ctx.get(dut.o_link_up):
                break
        assert ctx.get(dut.o_link_up), "PCS did not come up"
        i, fired = 0, False
        for _ in range(len(words) * 2 + 200):
            if i < len(words):
                ctx.set(dut.txad.i_word.valid, 1)
                ctx.set(dut.txad.i_word.payload.data, words[i][0])
                ctx.set(dut.txad.i_word.payload.first, words[i][1])
            else:
                ctx.set(dut.txad.i_word.valid, 0)
            await ctx.delay(1e-10)
            row_out = ctx.get(dut.txad.o_row.valid) and ctx.get(dut.txad.o_row.ready)
            took = i < len(words) and row_out and ctx.get(dut.txad.i_word.ready)
            here = None
            if row_out and i < len(words):
                here = (words[i][2], "start") if not took else (words[i][2], i - _first(words, i))
            elif i < len(words) and not ctx.get(dut.tx.i_data.ready):
                here = (words[i][2], "marker")
            await ctx.tick()
            # the row of the cycle before is on the lanes now (PcsTx latency 1)
            hit = here == target and not fired
            fired |= hit
            ctx.set(dut.i_flip, flip if hit else 0)
            if not ctx.get(dut.o_link_up):
                out["down"] += 1
                out["words"].append(None)
            if ctx.get(dut.rxad.i_row.valid):
                r = dut.rxad.i_row.payload
                out["rows"].append(tuple((ctx.get(r[k].data), ctx.get(r[k].ctrl))
                                         for k in range(2)))
            if ctx.get(dut.rxad.o_word.valid):
                w = dut.rxad.o_word.payload
                out["words"].append((ctx.get(w.data), bool(ctx.get(w.first)),
                                     bool(ctx.get(w.err))))
            out["good"] += ctx.get(dut.dl.o_good)
            if took:
                i += 1
        d = dut.dl
        out.update(crc_err=ctx.get(d.o_crc_err), rx_flits=ctx.get(d.o_rx_flits),
                   frame_err=ctx.get(d.o_frame_err), seq_err=ctx.get(d.o_seq_err))

    _run(dut, bench)
    return out


def _first(words, i):
    while not words[i][1]:
        i -= 1
    return i


def _flits_of(words):
    """Whole flits the DL collects from ``(data, first, err)`` words (``None``: link down,
    the flit in progress is dropped): ``(bytes, err)``."""
    out, cur = [], None
    for w in words:
        if w is None:
            cur = None
            continue
        d, first, err = w
        if first:
            cur = [[d], err]
        elif cur is not None:
            cur[0].append(d)
            cur[1] |= err
        if cur is not None and len(cur[0]) == L:
            out.append((C.slots_to_flit(cur[0]), cur[1]))
            cur = None
    return out


def test_sync_header_error_fails_a_flit_whose_crc_matches():
    """One sync-header bit of lane 0 flipped on the line in slot 5 of flit 1 (chained after
    flit 0): the PCS delivers the ERROR word there, and the data was built so that the flit
    with the ERROR word in it is a CRC-32 codeword (dl_parse accepts it). PcsToPhy marks
    the slot ``err`` and the DL counts the flit in crc_err; the replay of flit 1 that
    follows is accepted."""
    seed = 43
    rng = np.random.default_rng(seed)
    slot, lane = 5, 0
    n = 8 * 16 * L
    lo = 128 * slot + 64 * lane
    e = 0x1_04C1_1DB7 << (n - 1 - (lo + 63))           # g(x) inside the word's powers
    word_err = sum(1 << (n - 1 - k - lo) for k in range(e.bit_length()) if e >> k & 1)
    tl = bytearray(rng.bytes(64))
    off = 16 * slot + 8 * lane - 64                     # slot 5 is in TL flit 1
    tl[off:off + 8] = (ERROR_WORD ^ word_err).to_bytes(8, "little")
    tls = [(0, rng.bytes(64)), (1, bytes(tl)), (0, rng.bytes(64)), (1, rng.bytes(64))]
    f0, f1 = _flit(rng, 0), _flit(rng, 1, tls)
    out = _through_pcs([f0, f1, f1], 16, (1, slot), 1 << 0)
    got = _flits_of(out["words"])
    assert [f for f, _ in got][0::2] == [f0, f1] and len(got) == 3, f"seed {seed}"
    damaged, err = got[1]
    assert err and not got[0][1] and not got[2][1], f"seed {seed}"
    lo_b = 16 * slot + 8 * lane
    assert int.from_bytes(damaged[lo_b:lo_b + 8], "little") == ERROR_WORD, f"seed {seed}"
    assert damaged != f1 and C.dl_parse(damaged, TL)[0], f"seed {seed}: CRC should match"
    assert (out["crc_err"], out["rx_flits"], out["good"], out["frame_err"]) == (1, 2, 2, 0), \
        (seed, out["crc_err"], out["rx_flits"], out["good"], out["frame_err"])


def test_damaged_start_row_after_a_flit_misframes_nothing():
    """A START row before every flit (start_every = 1). One line error in the type octet
    of lane 0 of the START row that follows flit 0 makes the PCS deliver an ERROR word
    there; flit 1 was built so that that row and flit 1's first 16 slots form a CRC-32
    codeword (the misframed flit a chained reading would have produced, and the CRC would
    have accepted). PcsToPhy ends the chain there: no word with ``first`` until the next
    START row, the DL sees no flit for flit 1 (no good flit, no CRC error), and flit 2
    after its START row is accepted."""
    seed = 44
    rng = np.random.default_rng(seed)
    x = ERROR_WORD | IDLE_WORD << 64                     # the damaged START row, as delivered
    body = rng.bytes(16 * 15 + 12)
    misframed = x.to_bytes(16, "little") + body
    misframed += C.crc32(misframed).to_bytes(4, "little")
    assert C.dl_parse(misframed, TL)[0]
    first16 = misframed[16:]                             # flit 1's slots 0..15
    tls = [(0, first16[64 * j:64 * j + 64]) for j in range(TL)]
    f0, f1, f2 = _flit(rng, 0), _flit(rng, 1, tls), _flit(rng, 1)
    assert f1[:16 * 16] == first16
    out = _through_pcs([f0, f1, f2], 1, (1, "start"), 1 << (2 + 3))
    starts = [i for i, r in enumerate(out["rows"]) if r[0] == (START_WORD, 1)]
    damaged = [r for r in out["rows"] if r == ((ERROR_WORD, 1), (IDLE_WORD, 1))]
    assert len(starts) == 2 and len(damaged) == 1, f"seed {seed}: {len(starts)} START rows"
    assert out["down"] == 0, f"seed {seed}"
    firsts = [w for w in out["words"] if w[1]]
    assert [w[0] for w in firsts] == [_slots(f0)[0], _slots(f2)[0]], f"seed {seed}"
    assert not any(w[2] for w in out["words"]), f"seed {seed}"
    assert _flits_of(out["words"]) == [(f0, False), (f2, False)], f"seed {seed}"
    assert (out["good"], out["crc_err"], out["rx_flits"], out["frame_err"]) == (2, 0, 2, 0), \
        (seed, out["good"], out["crc_err"], out["rx_flits"], out["frame_err"])


def test_marker_error_realignment_misframes_nothing():
    """One line error in M0 of lane 0's alignment marker while flit 2 is sent: the PCS
    receiver drops the alignment (link down), rows are lost, and it realigns
    (``start_every = 8``). With
    ``PcsToPhy.i_link_up`` connected the adapter waits for a START row after the relock:
    every flit the DL then receives is one that was sent, none reaches the CRC misframed
    (crc_err 0), and the flits after the next START row arrive. With it left unconnected
    (the same run, the adapter relying on the next START row alone) a misframed flit
    reaches the DL and fails its CRC: what the connection prevents."""
    seed = 45
    rng = np.random.default_rng(seed)
    flits = [_flit(rng, k) for k in range(14)]
    got = {}
    for reset in (True, False):
        out = _through_pcs(flits, 8, (2, "marker"), 1 << 2, link_reset=reset)
        assert out["down"] > 0, f"seed {seed}: the link did not go down"
        got[reset] = (_flits_of(out["words"]), out)
    fl, out = got[True]
    assert all(f in flits and not err for f, err in fl), f"seed {seed}"
    idx = [flits.index(f) for f, _ in fl]
    assert idx == sorted(idx) and idx[-1] == len(flits) - 1 and len(idx) >= 6, (seed, idx)
    assert (out["crc_err"], out["frame_err"]) == (0, 0), (seed, out["crc_err"])
    fl, out = got[False]
    assert any(f not in flits for f, _ in fl), f"seed {seed}: no misframed flit without reset"
    assert out["crc_err"] >= 1, f"seed {seed}"
