"""Expressions shared by the PCS transmitter and receiver: BIP8, marker constants and
marker recognition (IEEE 802.3 cl. 82.2.7, 82.2.8). Layouts come from :mod:`fusionfabric.formats.pcs`."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Signal, Value

from fusionfabric.formats.pcs import MARKERS_100G, SYNC_CTRL

__all__ = ["bip8", "marker_id", "scramble64", "descramble64", "ID_BITS"]

#: Width of a marker lane id (Table 82-2 has 20 lanes).
ID_BITS = 5


def scramble64(c: Value, x: Value):
    """One 64-bit step of the cl. 49 scrambler, G(x) = 1 + x^39 + x^58, in word form.

    ``c`` is the history in chronological order (bit ``i`` = the output bit ``58 - i`` bits
    ago; bit 57 the newest; the bit reverse of the standard's ``s``). With ``S = c | out <<
    58``: ``out[j] = x[j] ^ S[j + 19] ^ S[j]``; no bit of ``out[0:39]`` depends on another
    one, nor does ``out[39:64]``, so two XORs of slices compute the step (the same formula
    as :func:`fusionfabric.sim.pcs.scramble`, which the tests check bit-serially). Returns ``(out,
    next_c)`` with ``next_c = out[6:64]``.
    """
    a = x[0:39] ^ c[19:58] ^ c[0:39]
    b = x[39:64] ^ a[0:25] ^ Cat(c[39:58], a[0:6])
    out = Cat(a, b)
    return out, out[6:64]


def descramble64(c: Value, y: Value):
    """One 64-bit step of the cl. 49 descrambler in word form: ``out[j] = y[j] ^ S[j + 19]
    ^ S[j]`` with ``S = c | y << 58`` (``c`` the last 58 received bits, chronological).
    Returns ``(out, next_c)``."""
    out = y ^ Cat(c[19:58], y[0:25]) ^ Cat(c, y[0:6])
    return out, y[6:64]


def bip8(block: Value) -> Value:
    """BIP8 of a 66-bit block per Table 82-4: octet XOR of the payload, sync bit 0 into BIP
    bit 3 and sync bit 1 into BIP bit 4."""
    acc = block[2:10]
    for k in range(1, 8):
        acc = acc ^ block[2 + 8 * k:10 + 8 * k]
    return acc ^ Cat(Const(0, 3), block[0], block[1], Const(0, 3))


def marker_id(m, block: Value, name: str):
    """``(is_marker, lane_id)`` signals for a 66-bit block: control header, octets 4..6 the
    complement of octets 0..2, and octets 0..2 one of Table 82-2's 20 lane values."""
    low, high = block[2:26], block[34:58]
    shape = (block[0:2] == SYNC_CTRL) & (high == ~low)
    hit = Signal(len(MARKERS_100G), name=f"{name}_hit")
    lane = Signal(ID_BITS, name=f"{name}_id")
    is_marker = Signal(name=f"{name}_is_marker")
    for k, (m0, m1, m2) in enumerate(MARKERS_100G):
        m.d.comb += hit[k].eq(low == (m0 | m1 << 8 | m2 << 16))
    for k in range(len(MARKERS_100G)):
        with m.If(hit[k]):
            m.d.comb += lane.eq(k)
    m.d.comb += is_marker.eq(shape & hit.any())
    return is_marker, lane
