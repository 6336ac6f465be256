"""Parameters of the line primitives shared by their RTL and models: the CRC catalogue and
the CRC beat layouts, the scrambler polynomial, the PRBS polynomials and checker constants.

CRC algorithms are ``(width, poly, init, refin, refout, xorout)`` exactly as in the reveng
CRC catalogue (https://reveng.sourceforge.io/crc-catalogue/), with ``check`` the published
CRC of the ASCII bytes ``"123456789"``. The scrambler polynomial is that of IEEE 802.3
cl. 49.2.6; the PRBS polynomials are those of ITU-T O.150.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionfabric.formats.bitfields import Fields

__all__ = ["CrcAlgorithm", "ALGORITHMS", "get_algorithm", "in_fields", "out_fields",
           "POLY_CL49", "poly_taps", "PRBS_TAPS", "prbs_taps", "LOCK_BITS", "BLOCK_BITS",
           "ERRORS_MAX"]


# -- CRC ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrcAlgorithm:
    name: str
    catalogue: str
    width: int
    poly: int
    init: int
    refin: bool
    refout: bool
    xorout: int
    check: int


ALGORITHMS = {a.name: a for a in [
    CrcAlgorithm("crc32", "CRC-32/ISO-HDLC", 32, 0x04C11DB7, 0xFFFFFFFF, True, True,
                 0xFFFFFFFF, 0xCBF43926),
    CrcAlgorithm("crc32c", "CRC-32/ISCSI", 32, 0x1EDC6F41, 0xFFFFFFFF, True, True,
                 0xFFFFFFFF, 0xE3069283),
    CrcAlgorithm("crc16-arc", "CRC-16/ARC", 16, 0x8005, 0x0000, True, True, 0x0000, 0xBB3D),
    CrcAlgorithm("crc16-umts", "CRC-16/UMTS", 16, 0x8005, 0x0000, False, False, 0x0000,
                 0xFEE8),
]}


def get_algorithm(name: str) -> CrcAlgorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is not one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def _nb_width(data_width: int) -> int:
    return max(1, (data_width // 8 - 1).bit_length())


def in_fields(data_width: int) -> Fields:
    """CRC input beat layout: ``data``, ``first``, ``last``, ``n_bytes`` (valid bytes on a
    last beat; 0 means all ``data_width // 8``)."""
    return Fields([("data", data_width), ("first", 1), ("last", 1),
                   ("n_bytes", _nb_width(data_width))])


def out_fields(crc_width: int) -> Fields:
    """CRC output layout: ``crc`` and ``match`` (the frame ended with its own valid CRC)."""
    return Fields([("crc", crc_width), ("match", 1)])


# -- scrambler ---------------------------------------------------------------------------------
#: G(x) = 1 + x^39 + x^58 (IEEE 802.3 cl. 49.2.6, also cl. 82.2.5 and 107).
POLY_CL49 = (1 << 58) | (1 << 39) | 1


def poly_taps(polynomial: int) -> tuple[int, tuple[int, ...]]:
    """``(state_width, taps)`` of ``polynomial``: taps are the exponents > 0, ascending.

    Raises ``ValueError`` naming the polynomial if it lacks the constant term or has
    degree < 1.
    """
    polynomial = int(polynomial)
    if polynomial < 3 or not polynomial & 1:
        raise ValueError(f"polynomial={polynomial:#x} must have the term 1 and degree >= 1")
    taps = tuple(k for k in range(1, polynomial.bit_length()) if polynomial >> k & 1)
    return taps[-1], taps


# -- PRBS --------------------------------------------------------------------------------------
#: order -> (m, n): the polynomial x^n + x^m + 1 (ITU-T O.150).
PRBS_TAPS = {7: (6, 7), 15: (14, 15), 23: (18, 23), 31: (28, 31)}
#: Consecutive clean bits (rounded up to whole words) before the checker locks.
LOCK_BITS = 64
#: Bits per loss-of-lock block (rounded up to whole words).
BLOCK_BITS = 256
#: The checker's error counter saturates here.
ERRORS_MAX = (1 << 32) - 1


def prbs_taps(order: int) -> tuple[int, int]:
    if order not in PRBS_TAPS:
        raise ValueError(f"order={order!r} is not one of {', '.join(map(str, PRBS_TAPS))}")
    return PRBS_TAPS[order]
