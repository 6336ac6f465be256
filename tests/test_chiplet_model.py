"""Known-answer and property tests of the chiplet golden model (sim/chiplet.py)."""

import zlib

import numpy as np
import pytest

from fusionfabric.formats import chiplet as F
from fusionfabric.sim import chiplet as C
from fusionfabric.formats.chiplet import ChipletParams, Opcode
from fusionfabric.sim.chiplet import DLHeader, Message


def test_crc32_check_value():
    # CRC-32/ISO-HDLC catalogue check value (Greg Cook's CRC catalogue, "123456789")
    assert C.crc32(b"123456789") == 0xCBF43926


def test_dl_frame_crc_is_catalogue_crc_and_residue():
    body = b"123456789"
    # the framing routine appends CRC-32 little-endian; a good codeword has the ISO-HDLC
    # residue: crc32 over the whole codeword equals 0x2144DF1C (catalogue 'residue' xored)
    code = body + C.crc32(body).to_bytes(4, "little")
    assert zlib.crc32(code) == 0x2144DF1C


def test_tl_header_bit_positions_by_hand():
    # hand-worked: opcode in bits 0-3, length 4-5, status 6-7, tag 8-15, dest 16-23,
    # src 24-31, op 32-33, dtype 34-36, chunk 40-55, addr 56-112
    h = Message(Opcode.READ, length=3, tag=0xA5, dest=0x12, src=0x34, addr=(1 << 56) | 1).header()
    assert h & 0xF == 2
    assert (h >> 4) & 3 == 3
    assert (h >> 8) & 0xFF == 0xA5
    assert (h >> 16) & 0xFF == 0x12
    assert (h >> 24) & 0xFF == 0x34
    assert (h >> 56) & ((1 << 57) - 1) == (1 << 56) | 1
    assert h >> 113 == 0
    r = Message(Opcode.REDUCE, length=0, op=2, dtype=4, chunk=0xBEEF, data=bytes(64)).header()
    assert (r >> 32) & 3 == 2 and (r >> 34) & 7 == 4 and (r >> 40) & 0xFFFF == 0xBEEF


def test_dl_header_bit_positions_by_hand():
    h = DLHeader(seq=0x3FF, data=1, n_tl=5, vc=0x80000001, ack=0x155, nak=1, init=0,
                 init_seen=1, credit0=0xABC, credit1=0x123).pack()
    assert h & 0x3FF == 0x3FF                    # seq bits 0-9
    assert (h >> 10) & 1 == 1                    # data bit 10
    assert (h >> 11) & 0x3F == 5                 # n_tl bits 11-16
    assert (h >> 17) & 0xFFFFFFFF == 0x80000001  # vc bits 17-48
    assert (h >> 49) & 0x3FF == 0x155            # ack bits 49-58
    assert (h >> 59) & 1 == 1                    # nak 59
    assert (h >> 60) & 1 == 0                    # init 60
    assert (h >> 61) & 1 == 1                    # init_seen 61
    assert (h >> 62) & 0xFFF == 0xABC            # credit0 62-73
    assert (h >> 74) & 0xFFF == 0x123            # credit1 74-85


@pytest.mark.parametrize("tl_per_dl", [1, 4, 7, 32])
def test_dl_frame_roundtrip_and_layout(tl_per_dl):
    rng = np.random.default_rng(tl_per_dl)
    msgs = [C.random_message(rng) for _ in range(3)]
    tls = C.pack_tl(msgs)[:tl_per_dl]
    flit = C.dl_frame([(0, t) for t in tls], DLHeader(seq=7, ack=3, credit0=9), tl_per_dl)
    assert len(flit) == 16 * (4 * tl_per_dl + 1)
    ok, h, got = C.dl_parse(flit, tl_per_dl)
    assert ok and h.seq == 7 and h.ack == 3 and h.credit0 == 9 and h.data == 1
    assert h.n_tl == len(tls) and [t for _, t in got] == tls
    # independent check of the CRC placement: zlib over everything before the last 4 bytes
    assert int.from_bytes(flit[-4:], "little") == zlib.crc32(flit[:-4])
    bad = bytearray(flit)
    bad[5] ^= 0x10
    assert not C.dl_parse(bytes(bad), tl_per_dl)[0]


def test_pack_unpack_messages():
    rng = np.random.default_rng(5)
    for vc_ops in ([Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST,
                    Opcode.REDUCE], [Opcode.READ_CPL, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK]):
        msgs = [C.random_message(rng, vc_ops, tag=i) for i in range(40)]
        flits = C.pack_tl(msgs)
        assert all(len(f) == 64 for f in flits)
        assert C.unpack_tl(flits) == msgs
        # slots: one header + length/16 data slots per data-carrying message
        nslots = sum(1 + C.data_slots(m.opcode, m.length) for m in msgs)
        assert len(flits) == -(-nslots // 4)


def test_256B_write_is_17_slots():
    m = Message(Opcode.WRITE, length=3, data=bytes(256))
    assert len(C.message_slots(m)) == 17
    assert len(m.beats()) == 16
    assert Message.from_beats(m.beats()) == m


def test_bad_values_named():
    with pytest.raises(ValueError, match="length 100"):
        C.length_code(100)
    with pytest.raises(ValueError, match="tl_per_dl=33"):
        ChipletParams(tl_per_dl=33)
    with pytest.raises(ValueError, match="replay_depth=6"):
        ChipletParams(replay_depth=6)
    with pytest.raises(ValueError, match="needs 64 data bytes"):
        Message(Opcode.WRITE, length=0, data=b"")


@pytest.mark.parametrize("kw,named", [
    ({"rx_credits": 0}, "rx_credits=0"), ({"rx_credits": 1025}, "rx_credits=1025"),
    ({"replay_timeout": -1}, "replay_timeout=-1"),
    ({"replay_timeout": 65536}, "replay_timeout=65536"),
    ({"close_timeout": 0}, "close_timeout=0"), ({"close_timeout": 256}, "close_timeout=256"),
    ({"replay_depth": 128}, "replay_depth=128"), ({"tl_per_dl": 0}, "tl_per_dl=0"),
    ({"rx_credits": True}, "rx_credits=True"), ({"tl_per_dl": 4.0}, "tl_per_dl=4.0"),
    ({"close_timeout": "8"}, "close_timeout='8'"), ({"stamp_src": 1}, "stamp_src=1"),
])
def test_chiplet_params_bad_value_named(kw, named):
    with pytest.raises(ValueError, match=named):
        ChipletParams(**kw)


def test_chiplet_params_limits_accepted():
    # the edges of every documented range (formats.chiplet.ChipletParams) are legal
    lo = ChipletParams(tl_per_dl=1, replay_depth=2, rx_credits=1, replay_timeout=0,
                       close_timeout=1, stamp_src=False)
    hi = ChipletParams(tl_per_dl=32, replay_depth=64, rx_credits=1024, replay_timeout=65535,
                       close_timeout=255)
    assert (lo.flit_slots, hi.flit_slots) == (5, 129)
    # timeout 0 derives 8 DL flit times + 64 cycles (docs/protocol.md), else is taken as given
    assert (lo.timeout, hi.timeout) == (8 * 5 + 64, 65535)


def _rank_gf2(vals):
    vals = [int(v) for v in vals]
    rank = 0
    for bit in range(31, -1, -1):
        piv = next((i for i in range(rank, len(vals)) if (vals[i] >> bit) & 1), None)
        if piv is None:
            continue
        vals[rank], vals[piv] = vals[piv], vals[rank]
        for i in range(len(vals)):
            if i != rank and (vals[i] >> bit) & 1:
                vals[i] ^= vals[rank]
        rank += 1
    return rank


@pytest.mark.parametrize("tl_per_dl", [4])
def test_every_1_2_3_bit_error_and_32_bit_burst_detected(tl_per_dl):
    """Exhaustive over a whole DL flit (by linearity of the CRC):

    * 1-bit: every syndrome non-zero;
    * 2-bit: all syndromes distinct;
    * 3-bit: no syndrome equals the XOR of two others (all pairs checked against the set);
    * bursts <= 32 bits: the 32 syndromes of every 32-bit window are linearly independent,
      so no non-zero pattern inside any window cancels.
    """
    n_bits = F.dl_flit_slots(tl_per_dl) * 128
    syn = C.crc_syndromes(n_bits)
    assert np.all(syn != 0)
    assert len(np.unique(syn)) == n_bits
    s_sorted = np.sort(syn)
    for i in range(n_bits - 1):
        x = syn[i] ^ syn[i + 1:]
        pos = np.searchsorted(s_sorted, x)
        pos[pos == n_bits] = 0
        assert not np.any(s_sorted[pos] == x), f"3-bit error with bit {i} undetected"
    for start in range(0, n_bits - 31):
        assert _rank_gf2(syn[start:start + 32]) == 32, f"burst at {start} undetected"
