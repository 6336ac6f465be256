"""Clause-49 (10GBASE-R) profile of the 64b/66b PCS: XGMII characters, 7-bit control codes,
block type fields, the fault and error vectors, and the parameter checks shared by
:mod:`fusionfabric.sim.pcs_cl49` and :mod:`fusionfabric.rtl.pcs.cl49`.

Client side (XGMII-style, cl. 46): one **vector** per block, 64 data bits and 8 control
flags; octet ``k`` (lane ``k``) is ``data[8k:8k+8]`` with flag ``ctrl[k]``; octet 0 is the
first on the wire. Line side: one lane of 66-bit blocks (sync header in bits 1:0 with the
first transmitted bit in bit 0, payload bit 0 = block bit 2 first), no alignment markers.

Block formats (IEEE 802.3 Figure 49-7), payload octet 0 = block type field, then, for the
control characters, 7-bit codes packed LSB first: code of XGMII lane ``k`` at payload bits
``8 + 7k .. 14 + 7k``; 4-bit O codes at bits 32..35 (lane 0) and 36..39 (lane 4); data
octets of lanes 1..3 in payload octets 1..3 and of lanes 5..7 in octets 5..7; a
terminate block ``T_k`` carries data octets ``D0..D(k-1)`` in payload octets ``1..k`` and
the codes of lanes ``k+1..7`` at their usual positions (the bits in between are 0).
"""

from __future__ import annotations

from enum import IntEnum

from fusionfabric.formats.bitfields import Fields

__all__ = ["XGMII", "Xgmii", "Code", "BlockType", "OCode", "XGMII_TO_CODE", "CODE_TO_XGMII",
           "TERMINATE", "START_TYPES", "ORDERED_SET_TYPES", "CONTROL_TYPES", "LF_SEQUENCE",
           "IDLE_VECTOR", "ERROR_VECTOR", "LF_VECTOR", "SERDES_WIDTHS", "check_cl49_params",
           "vector", "code_field"]

#: One XGMII-style client vector: 64 data bits (octet k = lane k, octet 0 first on the wire)
#: and one control flag per octet.
XGMII = Fields([("data", 64), ("ctrl", 8)])


class Xgmii(IntEnum):
    """XGMII control characters (IEEE 802.3 Table 46-3)."""
    IDLE = 0x07      #: /I/
    LPI = 0x06       #: /LI/ (low-power idle, cl. 78)
    START = 0xFB     #: /S/, lane 0 or 4 only
    TERMINATE = 0xFD  #: /T/
    ERROR = 0xFE     #: /E/
    SEQ_OS = 0x9C    #: /O/ sequence ordered set (lane 0 or 4, then 3 data octets)
    SIG_OS = 0x5C    #: /Fsig/ signal ordered set
    RES0 = 0x1C
    RES1 = 0x3C
    RES2 = 0x7C
    RES3 = 0xBC
    RES4 = 0xDC
    RES5 = 0xF7


class Code(IntEnum):
    """7-bit clause-49 control codes (IEEE 802.3 Table 49-1)."""
    IDLE = 0x00
    LPI = 0x06
    ERROR = 0x1E
    RES0 = 0x2D
    RES1 = 0x33
    RES2 = 0x4B
    RES3 = 0x55
    RES4 = 0x66
    RES5 = 0x78


#: XGMII control character -> 7-bit code for the characters carried as codes (Table 49-1).
XGMII_TO_CODE = {int(Xgmii[c.name]): int(c) for c in Code}
CODE_TO_XGMII = {v: k for k, v in XGMII_TO_CODE.items()}


class OCode(IntEnum):
    """4-bit O codes of an ordered set (Table 49-1)."""
    SEQ = 0x0   #: /Q/ (XGMII 0x9C)
    SIG = 0xF   #: /Fsig/ (XGMII 0x5C)


class BlockType(IntEnum):
    """Block type fields of Figure 49-7 (lanes of the vector in the comment, lane 0 right)."""
    CTRL = 0x1E      #: C7 C6 C5 C4 C3 C2 C1 C0
    OS_4 = 0x2D      #: D7 D6 D5 O4 C3 C2 C1 C0
    START_4 = 0x33   #: D7 D6 D5 S4 C3 C2 C1 C0
    OS_START = 0x66  #: D7 D6 D5 S4 D3 D2 D1 O0
    OS_04 = 0x55     #: D7 D6 D5 O4 D3 D2 D1 O0
    START_0 = 0x78   #: D7 D6 D5 D4 D3 D2 D1 S0
    OS_0 = 0x4B      #: C7 C6 C5 C4 D3 D2 D1 O0
    TERM_0 = 0x87    #: C7 C6 C5 C4 C3 C2 C1 T0
    TERM_1 = 0x99    #: C7 C6 C5 C4 C3 C2 T1 D0
    TERM_2 = 0xAA
    TERM_3 = 0xB4
    TERM_4 = 0xCC
    TERM_5 = 0xD2
    TERM_6 = 0xE1
    TERM_7 = 0xFF    #: T7 D6 D5 D4 D3 D2 D1 D0


#: Terminate block type for /T/ in lane k.
TERMINATE = (0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF)
START_TYPES = (0x33, 0x66, 0x78)
ORDERED_SET_TYPES = (0x2D, 0x4B, 0x55)
CONTROL_TYPES = (0x1E,) + ORDERED_SET_TYPES

#: The local-fault sequence ordered set's three data octets (cl. 46.3.4): 0x00 0x00 0x01.
LF_SEQUENCE = (0x00, 0x00, 0x01)


def vector(octets, ctrl) -> tuple[int, int]:
    """``(data, ctrl)`` of a vector from 8 octets (lane 0 first) and 8 control flags."""
    return (sum(int(o) << 8 * k for k, o in enumerate(octets)),
            sum(int(bool(c)) << k for k, c in enumerate(ctrl)))


#: Eight /I/; eight /E/ (EBLOCK_R); a local-fault ordered set in lanes 0..3 and /I/ in
#: lanes 4..7 (LBLOCK_R, what the receiver delivers while not locked or with hi_ber).
IDLE_VECTOR = vector([Xgmii.IDLE] * 8, [1] * 8)
ERROR_VECTOR = vector([Xgmii.ERROR] * 8, [1] * 8)
LF_VECTOR = vector([Xgmii.SEQ_OS, *LF_SEQUENCE] + [Xgmii.IDLE] * 4, [1, 0, 0, 0, 1, 1, 1, 1])


def code_field(lane: int) -> tuple[int, int]:
    """``(lo, hi)`` payload bit slice of the 7-bit code of XGMII lane ``lane``."""
    return 8 + 7 * lane, 15 + 7 * lane


#: SerDes widths of the clause-49 profile (66: one block per cycle; 32/64: gearbox).
SERDES_WIDTHS = (32, 64, 66)


def check_cl49_params(serdes_width: int = 66, ber_window: int | None = None) -> None:
    """Raise ``ValueError`` naming a bad clause-49 PCS parameter."""
    if not isinstance(serdes_width, int) or serdes_width not in SERDES_WIDTHS:
        raise ValueError(f"serdes_width={serdes_width!r} must be one of {SERDES_WIDTHS}")
    if ber_window is not None and (not isinstance(ber_window, int) or ber_window < 1):
        raise ValueError(f"ber_window={ber_window!r} must be a positive integer")
