"""The clause-49 (10GBASE-R) profile of the PCS: the model against published block formats
(IEEE 802.3 Figure 49-7, typed in below, and the independent tables and Ethernet frame
builder of cocotbext-eth), and the RTL (``pcs-cl49-tx`` / ``pcs-cl49-rx``) against the model
in the Amaranth simulator: seeded random Ethernet-like traffic with every terminate position,
both start lanes, ordered sets, error vectors, bad blocks, a bit slip and relock."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from amaranth.sim import Simulator

from fusionfabric.formats.pcs_cl49 import (ERROR_VECTOR, IDLE_VECTOR, LF_VECTOR, XGMII,
                                           check_cl49_params, vector)
from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.pcs import Cl49Rx, Cl49Tx
from fusionfabric.sim import pcs, pcs_cl49 as model

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

# XGMII characters as printed in IEEE 802.3 Table 46-3 (typed in, not read from the package)
I, S, T, E, Q, FSIG = 0x07, 0xFB, 0xFD, 0xFE, 0x9C, 0x5C


def _vec(octets, flags):
    return vector(octets, flags)


# -- known answers: Figure 49-7 read by hand --------------------------------------------------
# Each row: 8 XGMII octets (lane 0 first), their control flags, the expected 64-bit block
# payload (octet 0 = block type; 7-bit codes packed LSB first from bit 8) and sync (2 data,
# 1 control). The payloads are written out from the figure's field positions.
KNOWN = [
    # all /I/: type 0x1E, eight /I/ codes 0x00
    ([I] * 8, [1] * 8, 0x000000000000001E, 1),
    # /S/ in lane 0 + preamble + SFD: type 0x78, D1..D7
    ([S, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0xD5], [1] + [0] * 7, 0xD55555555555_5578, 1),
    # four /I/ then /S/ in lane 4: type 0x33, C0..C3 = 0, 4 zero bits, D5..D7
    ([I, I, I, I, S, 0x55, 0x55, 0x55], [1] * 5 + [0] * 3, 0x555555_0000000033, 1),
    # local fault ordered set (9C 00 00 01) then four /I/: type 0x4B, D1..D3, O0 = 0, C4..C7
    ([Q, 0, 0, 1, I, I, I, I], [1, 0, 0, 0, 1, 1, 1, 1], 0x000000000100004B, 1),
    # /T/ in lane 0, then /I/: type 0x87, all codes 0
    ([T, I, I, I, I, I, I, I], [1] * 8, 0x0000000000000087, 1),
    # D0 D1 D2 /T/ /I/...: type 0xB4, D0..D2 in octets 1..3, rest 0
    ([0x11, 0x22, 0x33, T, I, I, I, I], [0, 0, 0, 1, 1, 1, 1, 1], 0x0000000033221_1B4, 1),
    # D0..D6 /T/: type 0xFF, D0..D6 in octets 1..7
    ([1, 2, 3, 4, 5, 6, 7, T], [0] * 7 + [1], 0x07060504030201FF, 1),
    # /T/ in lane 1 followed by /E/ codes 0x1E: type 0x99, D0, 6 pad bits, C2..C7 = 0x1E
    ([0xAB, T, E, E, E, E, E, E], [0, 1, 1, 1, 1, 1, 1, 1],
     0x99 | 0xAB << 8 | sum(0x1E << (8 + 7 * k) for k in range(2, 8)), 1),
    # two sequence ordered sets: type 0x55, O0 = O4 = 0
    ([Q, 1, 2, 3, Q, 4, 5, 6], [1, 0, 0, 0, 1, 0, 0, 0], 0x06050400_03020155, 1),
    # /Fsig/ in lane 0 then /S/ in lane 4: type 0x66, O0 = 0xF
    ([FSIG, 1, 2, 3, S, 0x55, 0x55, 0x55], [1, 0, 0, 0, 1, 0, 0, 0], 0x5555550F03020166, 1),
    # data
    ([1, 2, 3, 4, 5, 6, 7, 8], [0] * 8, 0x0807060504030201, 2),
    # /E/ among /I/ is not a valid C vector: EBLOCK_T, eight /E/ codes 0x1E
    ([I, I, E, I, I, I, I, I], [1] * 8, 0x1E | sum(0x1E << (8 + 7 * k) for k in range(8)), 1),
]


@pytest.mark.parametrize("row", range(len(KNOWN)))
def test_encode_known_answers(row):
    octets, flags, payload, sync = KNOWN[row]
    d, c = _vec(octets, flags)
    # after a vector that makes each of them legal: /T/ blocks follow data, others idle
    prev = (0x0101010101010101, 0) if T in octets or not any(flags) else IDLE_VECTOR
    s, p, _, _ = model.encode([prev[0], d], [prev[1], c])
    assert (int(s[1]), int(p[1])) == (sync, payload), f"row {row}: {int(p[1]):#018x}"
    if not (row == len(KNOWN) - 1):
        assert model.decode_block(sync, payload) == (d, c)


def test_constants_match_cocotbext_eth():
    """The block type fields, the XGMII <-> 7-bit code table, the O codes and the
    terminate lanes agree with cocotbext-eth's constants (an independent transcription of
    Figure 49-7 and Table 49-1)."""
    ce = pytest.importorskip("cocotbext.eth.constants")
    from fusionfabric.formats import pcs_cl49 as f
    for t in ce.BaseRBlockType:
        assert int(f.BlockType[t.name]) == int(t), t.name
    assert {int(k): int(v) for k, v in ce.xgmii_ctrl_to_baser_mapping.items()} == \
        f.XGMII_TO_CODE
    assert {int(k): int(v) for k, v in ce.block_type_term_lane_mapping.items()} == \
        {t: k for k, t in enumerate(f.TERMINATE)}
    assert (int(ce.BaseRO.SEQ_OS), int(ce.BaseRO.SIG_OS)) == (f.OCode.SEQ, f.OCode.SIG)
    for name in ("IDLE", "START", "TERM", "ERROR", "SEQ_OS", "SIG_OS"):
        ours = {"TERM": "TERMINATE"}.get(name, name)
        assert int(ce.XgmiiCtrl[name]) == int(f.Xgmii[ours])


# -- traffic ----------------------------------------------------------------------------------
def _frames_to_vectors(frames, rng, os_rate=0.0, p_err=0.0):
    """XGMII vectors carrying ``frames`` (bytes from preamble to FCS): /S/ replaces the first
    preamble octet, in lane 0 or 4 (random, and wherever the idle gap ends); /T/ after the
    last octet; 8..20 /I/ between frames (so /T/ and /S/ never share a vector; plus the
    idles that put /S/ on lane 0/4), sometimes a sequence or signal ordered set starting a
    new vector in lane 0 or 4. ``p_err``: probability that
    a vector is replaced by a random one (a bad vector for the encoder)."""
    octs, flags = [I] * 16, [1] * 16
    for fr in frames:
        if rng.random() < os_rate:
            pad = -len(octs) % 8 + 4 * int(rng.integers(0, 2))
            octs += [I] * pad
            flags += [1] * pad
            octs += [int(rng.choice([Q, FSIG])), *rng.integers(0, 256, 3).tolist()]
            flags += [1, 0, 0, 0]
        gap = int(rng.integers(8, 21))
        octs += [I] * gap
        flags += [1] * gap
        while len(octs) % 4:
            octs.append(I), flags.append(1)
        octs += [S, *fr[1:], T]
        flags += [1] + [0] * (len(fr) - 1) + [1]
    octs += [I] * 24
    flags += [1] * 24
    while len(octs) % 8:
        octs.append(I), flags.append(1)
    vecs = [_vec(octs[i:i + 8], flags[i:i + 8]) for i in range(0, len(octs), 8)]
    for i in range(len(vecs)):
        if rng.random() < p_err:
            vecs[i] = (int(rng.integers(0, 1 << 63)) * 2 + 1, int(rng.integers(0, 256)))
    return vecs


def _random_frames(rng, n):
    """Preamble, SFD, 46..60 payload octets and the FCS (zlib CRC-32, little endian): every
    frame length mod 8, so /T/ falls in every lane."""
    out = []
    for _ in range(n):
        body = bytes(rng.integers(0, 256, int(rng.integers(60, 76))).tolist())
        out.append(b"\x55" * 7 + b"\xd5" + body + zlib.crc32(body).to_bytes(4, "little"))
    return out


def _parse(vectors):
    """Frames on an XGMII vector stream: octets from /S/ to /T/; a frame with any control
    octet in between (/E/) is returned as ``None``."""
    frames, cur, bad = [], None, False
    for d, c in vectors:
        for k in range(8):
            o, f = (d >> 8 * k) & 0xFF, (c >> k) & 1
            if f and o == S:
                cur, bad = bytearray([0x55]), False
            elif cur is not None and f and o == T:
                frames.append(None if bad else bytes(cur))
                cur = None
            elif cur is not None:
                bad |= bool(f)
                cur.append(o)
    return frames


def test_ethernet_frames_against_cocotbext_eth():
    """Real Ethernet frames built by cocotbext-eth (XgmiiFrame.from_payload: preamble, SFD,
    padding to 60 octets, FCS): encoded and decoded by the model, every block type seen is
    a start, terminate, idle, ordered-set or data block, every /T/ position occurs, and the
    decoded frames pass cocotbext-eth's FCS check with the payload sent."""
    eth = pytest.importorskip("cocotbext.eth")
    seed = 49
    rng = np.random.default_rng(seed)
    payloads = [bytes(rng.integers(0, 256, int(n)).tolist()) for n in rng.integers(20, 90, 48)]
    frames = [bytes(eth.XgmiiFrame.from_payload(p).data) for p in payloads]
    vecs = _frames_to_vectors(frames, rng, os_rate=0.3)
    sync, pay, _, err = model.encode([v[0] for v in vecs], [v[1] for v in vecs])
    assert err == 0
    types = {int(p) & 0xFF for s, p in zip(sync, pay) if s == 1}
    assert {0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF, 0x78, 0x33, 0x1E} <= types, seed
    assert types <= {0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF, 0x78, 0x33, 0x66,
                     0x1E, 0x4B, 0x2D, 0x55}
    # through the line: scramble, descramble, decode
    blocks, _, _, _ = model.transmit([v[0] for v in vecs], [v[1] for v in vecs])
    rx_pay, _ = pcs.descramble([b >> 2 for b in blocks], pcs.SCRAMBLER_INIT)
    out, _, derr = model.decode([b & 3 for b in blocks], rx_pay,
                                last=(1, model.EBLOCK_T))
    assert derr == 0 and out == vecs
    got = _parse(out)
    assert len(got) == len(payloads)
    for p, g in zip(payloads, got):
        fr = eth.XgmiiFrame(bytearray(g), [0] * len(g))
        assert fr.check_fcs(), seed
        assert bytes(fr.get_payload())[:len(p)] == p


def test_decode_error_rules():
    """Receive state machine: data without a start, a start inside a frame, a terminate
    not followed by S or C, a bad type and a bad sync header all deliver /E/ vectors."""
    fr = _random_frames(np.random.default_rng(5), 3)
    vecs = _frames_to_vectors(fr, np.random.default_rng(6))
    sync, pay, _, _ = model.encode([v[0] for v in vecs], [v[1] for v in vecs])
    sync, pay = list(map(int, sync)), list(map(int, pay))
    start = next(i for i, p in enumerate(pay) if sync[i] == 1 and p & 0xFF in (0x78, 0x33))
    term = next(i for i in range(start, len(pay)) if sync[i] == 1 and (pay[i] & 0xFF) in
                (0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF))
    cases = {
        "bad sync": (start + 1, lambda s, p: (0, p)),
        "bad type": (start + 1, lambda s, p: (1, (p & ~0xFF) | 0x12)),
        "drop start": (start, lambda s, p: (1, 0x1E)),
        "T then D": (term + 1, lambda s, p: (2, p)),
    }
    for name, (i, fn) in cases.items():
        s2, p2 = list(sync), list(pay)
        s2[i], p2[i] = fn(s2[i], p2[i])
        out, _, errs = model.decode(s2, p2, last=(1, 0x1E))
        assert errs >= 1, name
        bad = [k for k, v in enumerate(out) if v == ERROR_VECTOR]
        if name == "T then D":
            assert term in bad, name       # the terminate is not followed by S or C
        else:
            assert i in bad or i + 1 in bad, name
        assert out[:start] == vecs[:start], name


# -- RTL against the model --------------------------------------------------------------------
def _traffic(seed, n_frames=10, p_err=0.03):
    rng = np.random.default_rng(seed)
    return _frames_to_vectors(_random_frames(rng, n_frames), rng, os_rate=0.3, p_err=p_err)


def _run_tx(vecs, width, seed):
    """Run Cl49Tx with ``vecs`` offered with random valid gaps; returns (line words after
    each edge, accepted vectors in row cycles incl. the idles sent in empty row cycles,
    encode_errors)."""
    dut = Cl49Tx(width)
    rng = np.random.default_rng(seed)
    sent, words = [], []
    state = {"err": 0}

    async def bench(ctx):
        i = 0
        while i < len(vecs):
            valid = rng.random() < 0.85
            ctx.set(dut.i_xgmii.valid, valid)
            ctx.set(dut.i_xgmii.payload.data, vecs[i][0])
            ctx.set(dut.i_xgmii.payload.ctrl, vecs[i][1])
            ready = ctx.get(dut.i_xgmii.ready)
            if ready:
                if valid:
                    sent.append(vecs[i])
                    i += 1
                else:
                    sent.append(IDLE_VECTOR)
            await ctx.tick()
            words.append(ctx.get(dut.o_lane))
        state["err"] = ctx.get(dut.o_encode_errors)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return words, sent, state["err"]


@pytest.mark.parametrize("width", [66, 64, 32])
def test_tx_matches_model(width):
    seed = 1000 + width
    vecs = _traffic(seed)
    words, sent, err = _run_tx(vecs, width, seed)
    blocks, _, _, merr = model.transmit([v[0] for v in sent], [v[1] for v in sent])
    want = pcs.serialize(blocks, width)
    n = min(len(want), len(words))
    assert n > len(sent) * width // 66 - 3
    for t in range(n):
        assert words[t] == want[t], f"seed {seed} W={width}: word {t}"
    assert err == merr and merr > 0, seed


def _line(blocks, width, lead_bits=0, slip_at=None, slip_bits=0, flips=()):
    """The line bit stream of ``blocks`` with ``lead_bits`` junk bits in front, bit errors
    at ``flips`` (bit positions) and, from block ``slip_at`` on, ``slip_bits`` bits dropped
    (a slip), cut into W-bit words."""
    bits = 0
    for k, b in enumerate(blocks):
        bits |= b << (66 * k)
    total = 66 * len(blocks)
    for pos in flips:
        bits ^= 1 << pos
    if slip_at is not None:
        cut = 66 * slip_at
        bits = (bits & ((1 << cut) - 1)) | ((bits >> (cut + slip_bits)) << cut)
        total -= slip_bits
    bits = (bits << lead_bits) | 0x2AAAAAAAAAAA & ((1 << lead_bits) - 1)
    total += lead_bits
    return [(bits >> (width * i)) & ((1 << width) - 1) for i in range(total // width)]


def _run_rx(words, width, ber_window, seed, with_ber=False):
    """Run Cl49Rx and the model side by side; assert equality after every edge; return the
    delivered vectors and the per-cycle lock trace."""
    dut = Cl49Rx(ber_window, width)
    m = model.make_receiver(ber_window, width)
    out, locks = [], []

    async def bench(ctx):
        for t, w in enumerate(words):
            ctx.set(dut.i_lane, w)
            await ctx.tick()
            m.step(w)
            got = (ctx.get(dut.o_xgmii.valid), ctx.get(dut.o_block_lock), ctx.get(dut.o_hi_ber),
                   ctx.get(dut.o_slips), ctx.get(dut.o_decode_errors))
            want = (m.out_valid, m.lock, m.hi_ber, m.slips, m.decode_errors)
            assert got == want, f"seed {seed} W={width} cycle {t}: {got} != {want}"
            if m.out_valid:
                v = ctx.get(dut.o_xgmii.payload)
                assert (v.data, v.ctrl) == (m.out_data, m.out_ctrl), \
                    f"seed {seed} W={width} cycle {t}: vector"
                out.append((m.out_data, m.out_ctrl))
            locks.append((m.lock, m.hi_ber) if with_ber else m.lock)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, locks


def _contains(seq, sub):
    n = len(sub)
    return any(seq[i:i + n] == sub for i in range(len(seq) - n + 1))


@pytest.mark.parametrize("width", [66, 64, 32])
def test_rx_matches_model_with_slip(width):
    """Frames after a lead of 23 junk bits: the receiver hunts, locks, delivers the sent
    vectors (bad vectors of the transmitter arrive as its /E/ blocks); then 9 bits slip:
    lock is lost, regained, and the vectors after it are delivered again. Every cycle the
    RTL's ports equal the model's registers."""
    seed = 2000 + width
    vecs = [IDLE_VECTOR] * 300 + _traffic(seed, n_frames=8, p_err=0.0)
    n0 = len(vecs)
    vecs += [IDLE_VECTOR] * 400 + _traffic(seed + 1, n_frames=6, p_err=0.0)
    blocks, _, _, _ = model.transmit([v[0] for v in vecs], [v[1] for v in vecs])
    words = _line(blocks, width, lead_bits=23, slip_at=n0 + 40, slip_bits=9)
    out, locks = _run_rx(words, width, 512, seed)
    assert out[0] == LF_VECTOR
    assert any(v == 1 for v in locks), f"seed {seed}: never locked"
    first = locks.index(1)
    assert 0 in locks[first:], f"seed {seed}: lock not lost after the slip"
    lost = first + locks[first:].index(0)
    assert any(v == 1 for v in locks[lost:]), f"seed {seed}: no relock"
    # the first traffic and the traffic after the relock, in order, somewhere in the output
    assert _contains(out, vecs[300:n0 - 8]), seed
    assert _contains(out, vecs[n0 + 400:-8]), seed


def test_rx_bad_blocks_and_hi_ber():
    """Bit errors in sync headers and block type fields: /E/ vectors and decode errors
    counted like the model; then one bad header every 16 blocks (4 per 64-header lock
    window: lock kept; 16 per 256-block BER window) raises hi_ber, which delivers LBLOCK_R
    while block lock holds, and clears after the errors stop."""
    seed = 3001
    rng = np.random.default_rng(seed)
    traffic = _traffic(seed, n_frames=12, p_err=0.05)
    n = 400 + len(traffic)
    vecs = [IDLE_VECTOR] * 400 + traffic + [IDLE_VECTOR] * 1200
    blocks, _, _, _ = model.transmit([v[0] for v in vecs], [v[1] for v in vecs])
    flips = [66 * int(k) + int(rng.integers(0, 10)) for k in rng.integers(420, n - 10, 12)]
    flips += [66 * k for k in range(n + 20, n + 420, 16)]
    words = _line(blocks, 66, flips=flips)
    out, trace = _run_rx(words, 66, 256, seed, with_ber=True)
    locks = [t[0] for t in trace]
    hi = [t[1] for t in trace]
    assert locks[400] == 1 and all(locks[400:]), seed
    assert ERROR_VECTOR in out[400:n], seed
    rise = hi.index(1)
    assert n < rise < n + 420 and hi[-1] == 0, seed
    assert out[rise + 3] == LF_VECTOR, seed             # hi_ber: LBLOCK_R


def test_parameters_rejected():
    for bad in (0, 65, "66", None):
        with pytest.raises(ValueError, match=f"serdes_width={bad!r}") as exc:
            Cl49Tx(bad)
        disown_failed(exc.value)
    with pytest.raises(ValueError, match="ber_window=0") as exc:
        Cl49Rx(0)
    disown_failed(exc.value)
    with pytest.raises(ValueError, match="serdes_width=16"):
        model.make_receiver(100, 16)
    with pytest.raises(ValueError):
        check_cl49_params(66, -1)
    assert XGMII.pack(data=1, ctrl=2) == 1 | 2 << 64
