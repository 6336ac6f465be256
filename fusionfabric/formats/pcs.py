"""64b/66b PCS formats shared by the PCS RTL and its model (IEEE 802.3 cl. 49, cl. 82).

Sync headers, the client word, block, control and marker layouts, the fusionfabric control
block types, the 100GBASE-R alignment marker values, the block-lock and BER constants and
the parameter checks. The behaviour (scrambling, striping, lock, deskew) is specified in
:mod:`fusionfabric.sim.pcs`.
"""

from __future__ import annotations

from enum import IntEnum

from fusionfabric.formats.bitfields import Fields

__all__ = ["SYNC_DATA", "SYNC_CTRL", "WORD", "BLOCK", "CONTROL", "MARKER", "BlockType",
           "KNOWN_TYPES", "MARKERS_100G", "MAX_LANES", "SCRAMBLER_INIT", "LOCK_WINDOW",
           "LOCK_BAD", "AM_BAD_LIMIT", "HI_BER_LIMIT", "BER_WINDOW_10G", "M66", "SERDES_WIDTHS",
           "check_params", "check_serdes_width", "control_word", "marker_payload"]

#: Sync headers as integers, first transmitted bit in bit 0 (cl. 49.2.4.3).
SYNC_DATA = 2
SYNC_CTRL = 1

#: One word of the PCS client stream (the link layer's flits and idles).
WORD = Fields([("data", 64), ("ctrl", 1)])
#: One 66-bit block, bit 0 first on the wire.
BLOCK = Fields([("sync", 2), ("payload", 64)])
#: The payload of a control block: block type in the first octet.
CONTROL = Fields([("type", 8), ("body", 56)])
#: The payload of an alignment marker (cl. 82.2.7): octet 0 first on the wire.
MARKER = Fields([("m0", 8), ("m1", 8), ("m2", 8), ("bip3", 8),
                 ("m4", 8), ("m5", 8), ("m6", 8), ("bip7", 8)])


class BlockType(IntEnum):
    """Control block types of fusionfabric (first payload octet of a control block).

    Values follow the cl. 49 type-field code points so that any two differ in 4 bits.
    """
    #: Filler: sent whenever the client has no word; the receiver delivers it (the link
    #: layer ignores it). Body is zero.
    IDLE = 0x1E
    #: First word of a flit; the 56-bit body carries flit header bits.
    START = 0x33
    #: A 56-bit link-layer message (credits, acks) carried verbatim.
    MESSAGE = 0x4B
    #: Error: what the receiver delivers for a block with an invalid sync header or an
    #: unknown control type (each counted); a transmitter may send it to poison a flit.
    ERROR = 0x55


KNOWN_TYPES = tuple(int(t) for t in BlockType)

#: IEEE 802.3 Table 82-2 (100GBASE-R), = ITU-T G.709 Table E.2: (M0, M1, M2) per PCS lane.
MARKERS_100G = (
    (0xC1, 0x68, 0x21), (0x9D, 0x71, 0x8E), (0x59, 0x4B, 0xE8), (0x4D, 0x95, 0x7B),
    (0xF5, 0x07, 0x09), (0xDD, 0x14, 0xC2), (0x9A, 0x4A, 0x26), (0x7B, 0x45, 0x66),
    (0xA0, 0x24, 0x76), (0x68, 0xC9, 0xFB), (0xFD, 0x6C, 0x99), (0xB9, 0x91, 0x55),
    (0x5C, 0xB9, 0xB2), (0x1A, 0xF8, 0xBD), (0x83, 0xC7, 0xCA), (0x35, 0x36, 0xCD),
    (0xC4, 0x31, 0x4C), (0xAD, 0xD6, 0xB7), (0x5F, 0x66, 0x2A), (0xC0, 0xF0, 0xE5),
)
MAX_LANES = len(MARKERS_100G)

#: Scrambler state after reset (all ones), TX side.
SCRAMBLER_INIT = (1 << 58) - 1

# Block lock (cl. 49.2.13.2.2, Figure 49-12) and BER monitor (Figure 49-13) constants.
LOCK_WINDOW = 64   #: headers per sh_cnt window: 64 valid ones gain lock; while locked ...
LOCK_BAD = 16      #: ... this many invalid ones within a window lose lock (and slip)
AM_BAD_LIMIT = 4   #: consecutive bad markers that lose marker lock (cl. 82.2.18.3)
HI_BER_LIMIT = 16  #: invalid headers within one BER window that raise hi_ber
#: 125 us (cl. 49 BER window) at 10.3125 GBd, in 66-bit blocks: 125e-6 * 10.3125e9 / 66.
BER_WINDOW_10G = 19531

M66 = (1 << 66) - 1

#: SerDes word widths the PCS supports: 66 (one block per lane per cycle) or a gearbox.
SERDES_WIDTHS = (32, 64, 66)


def check_params(n_lanes: int = 4, am_period: int = 16384, max_skew: int | None = None,
                 ber_window: int | None = None) -> None:
    """Raise ``ValueError`` naming a bad PCS parameter (shared by model and RTL)."""
    if not isinstance(n_lanes, int) or not 1 <= n_lanes <= MAX_LANES:
        raise ValueError(f"n_lanes={n_lanes!r} must be an integer in 1..{MAX_LANES}")
    if not isinstance(am_period, int) or am_period < 2:
        raise ValueError(f"am_period={am_period!r} must be an integer >= 2")
    if max_skew is not None:
        if not isinstance(max_skew, int) or max_skew < 0:
            raise ValueError(f"max_skew={max_skew!r} must be a non-negative integer")
        if am_period < 2 * max_skew + 3:
            raise ValueError(f"am_period={am_period} must be >= 2*max_skew+3 = "
                             f"{2 * max_skew + 3} so that deskew is unambiguous")
    if ber_window is not None and (not isinstance(ber_window, int) or ber_window < 1):
        raise ValueError(f"ber_window={ber_window!r} must be a positive integer")


def check_serdes_width(serdes_width: int) -> None:
    """Raise ``ValueError`` unless ``serdes_width`` is one of :data:`SERDES_WIDTHS`."""
    if not isinstance(serdes_width, int) or serdes_width not in SERDES_WIDTHS:
        raise ValueError(f"serdes_width={serdes_width!r} must be one of {SERDES_WIDTHS}")


def control_word(kind: int, body: int = 0) -> int:
    """The 64-bit data of a control word of type ``kind``."""
    return CONTROL.pack(type=int(kind), body=int(body))


def marker_payload(lane: int, bip3: int) -> int:
    """The 64-bit payload of the alignment marker of PCS lane ``lane`` with ``bip3``."""
    m0, m1, m2 = MARKERS_100G[lane]
    return MARKER.pack(m0=m0, m1=m1, m2=m2, bip3=bip3, m4=m0 ^ 0xFF, m5=m1 ^ 0xFF,
                       m6=m2 ^ 0xFF, bip7=bip3 ^ 0xFF)
