"""Cyclic redundancy checks (Williams / reveng model), pure numpy, independent of Amaranth.

An algorithm is ``(width, poly, init, refin, refout, xorout)`` exactly as in the reveng CRC
catalogue (https://reveng.sourceforge.io/crc-catalogue/), with ``check`` the published CRC of
the ASCII bytes ``"123456789"``:

================  ======================  =====  ======  ======  ==========  ==========
name              reveng name             width  poly    init    refin/out   check
================  ======================  =====  ======  ======  ==========  ==========
``crc32``         CRC-32/ISO-HDLC         32     04C11DB7 FFFFFFFF  yes      CBF43926
``crc32c``        CRC-32/ISCSI            32     1EDC6F41 FFFFFFFF  yes      E3069283
``crc16-arc``     CRC-16/ARC              16     8005    0000    yes         BB3D
``crc16-umts``    CRC-16/UMTS (BUYPASS)   16     8005    0000    no          FEE8
================  ======================  =====  ======  ======  ==========  ==========

(``xorout`` is FFFFFFFF for the two CRC-32s and 0 for the two CRC-16s.) The two CRC-16s use
x^16 + x^15 + x^2 + 1 with initial value 0, the UCIe die-to-die CRC polynomial; they differ
only in bit order.

Message bytes are processed in order; with ``refin`` each byte is taken least significant
bit first, otherwise most significant bit first. In a ``data_width``-bit word, byte ``i``
occupies bits ``8i .. 8i+7`` (:func:`pack_words`), for every algorithm.

Implementations: :func:`crc_bitwise` (per bit, the textbook register), :func:`crc_table`
(byte table, vectorized over a batch of equal-length messages), and :func:`advance_matrix`
(the GF(2) matrix that moves the raw register over ``k`` zero bytes, probed from the
bitwise register; the RTL derives its own from the polynomial and the tests compare the two).
The catalogue itself is :mod:`fusionfabric.formats.primitives`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fusionfabric.formats.primitives import CrcAlgorithm, get_algorithm, in_fields

__all__ = ["crc_bitwise", "crc_table", "crc_batch", "advance_matrix", "pack_words",
           "frame_beats", "VECTORS"]


def _reflect(value: int, width: int) -> int:
    out = 0
    for i in range(width):
        out |= ((value >> i) & 1) << (width - 1 - i)
    return out


# -- per-bit reference ----------------------------------------------------------------------
def _raw_update(reg: int, data: bytes, alg: CrcAlgorithm) -> int:
    """The raw (unreflected, MSB = x^(width-1)) register after ``data``."""
    top = 1 << (alg.width - 1)
    mask = (1 << alg.width) - 1
    for byte in data:
        if alg.refin:
            byte = _reflect(byte, 8)
        for i in range(7, -1, -1):
            fb = bool(reg & top) ^ bool((byte >> i) & 1)
            reg = (reg << 1) & mask
            if fb:
                reg ^= alg.poly
    return reg


def _finish(reg: int, alg: CrcAlgorithm) -> int:
    if alg.refout:
        reg = _reflect(reg, alg.width)
    return reg ^ alg.xorout


def crc_bitwise(message: bytes, algorithm: str | CrcAlgorithm) -> int:
    """CRC of ``message`` computed one bit at a time."""
    alg = get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    return _finish(_raw_update(alg.init, bytes(message), alg), alg)


# -- table driven, vectorized over a batch ---------------------------------------------------
_TABLES: dict[str, np.ndarray] = {}


def _table(alg: CrcAlgorithm) -> np.ndarray:
    if alg.name not in _TABLES:
        t = np.zeros(256, dtype=np.uint64)
        if alg.refin:
            rpoly = _reflect(alg.poly, alg.width)
            for b in range(256):
                reg = b
                for _ in range(8):
                    reg = (reg >> 1) ^ rpoly if reg & 1 else reg >> 1
                t[b] = reg
        else:
            top = 1 << (alg.width - 1)
            mask = (1 << alg.width) - 1
            for b in range(256):
                reg = b << (alg.width - 8)
                for _ in range(8):
                    reg = ((reg << 1) ^ alg.poly) & mask if reg & top else (reg << 1) & mask
                t[b] = reg
        _TABLES[alg.name] = t
    return _TABLES[alg.name]


def crc_batch(messages: np.ndarray, algorithm: str | CrcAlgorithm) -> np.ndarray:
    """CRCs of a batch of equal-length messages (``uint8`` array ``(batch, length)``)."""
    alg = get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    msgs = np.atleast_2d(np.asarray(messages, dtype=np.uint8))
    table = _table(alg)
    w = np.uint64(alg.width)
    mask = np.uint64((1 << alg.width) - 1)
    if alg.refin:
        reg = np.full(msgs.shape[0], _reflect(alg.init, alg.width), dtype=np.uint64)
        for col in msgs.T:
            reg = table[(reg ^ col.astype(np.uint64)) & np.uint64(0xFF)] ^ (reg >> np.uint64(8))
        if not alg.refout:
            reg = np.array([_reflect(int(r), alg.width) for r in reg], dtype=np.uint64)
    else:
        reg = np.full(msgs.shape[0], alg.init, dtype=np.uint64)
        for col in msgs.T:
            idx = ((reg >> (w - np.uint64(8))) ^ col.astype(np.uint64)) & np.uint64(0xFF)
            reg = (table[idx] ^ (reg << np.uint64(8))) & mask
        if alg.refout:
            reg = np.array([_reflect(int(r), alg.width) for r in reg], dtype=np.uint64)
    return reg ^ np.uint64(alg.xorout)


def crc_table(message: bytes, algorithm: str | CrcAlgorithm) -> int:
    """CRC of one message, table driven."""
    return int(crc_batch(np.frombuffer(bytes(message), dtype=np.uint8)[None, :],
                         algorithm)[0])


# -- linear algebra -------------------------------------------------------------
def advance_matrix(algorithm: str | CrcAlgorithm, n_bytes: int) -> np.ndarray:
    """``(width, width)`` GF(2) matrix moving the raw register over ``n_bytes`` zero bytes
    (column ``j`` is the register reached from ``1 << j``), probed from the bitwise model."""
    alg = get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    mat = np.zeros((alg.width, alg.width), dtype=np.uint8)
    zeros = bytes(n_bytes)
    for j in range(alg.width):
        reg = _raw_update(1 << j, zeros, alg)
        mat[:, j] = [(reg >> i) & 1 for i in range(alg.width)]
    return mat


# -- framing shared with the RTL ------------------------------------------------------------
def pack_words(message: bytes, data_width: int) -> list[int]:
    """Bytes into ``data_width``-bit words, byte ``i`` of a word in bits ``8i..8i+7``; the
    last word is zero-padded."""
    nb = data_width // 8
    message = bytes(message)
    return [int.from_bytes(message[i:i + nb].ljust(nb, b"\0"), "little")
            for i in range(0, max(len(message), 1), nb)]


def frame_beats(message: bytes, data_width: int) -> list[int]:
    """The packed input beats (see :func:`in_fields`) of one frame carrying ``message``."""
    if data_width % 8 or data_width < 8:
        raise ValueError(f"data_width={data_width} must be a positive multiple of 8")
    if not len(message):
        raise ValueError("a frame carries at least one byte")
    nb = data_width // 8
    f = in_fields(data_width)
    words = pack_words(message, data_width)
    tail = len(message) - (len(words) - 1) * nb
    out = []
    for i, w in enumerate(words):
        last = i == len(words) - 1
        out.append(f.pack(data=w, first=int(i == 0), last=int(last),
                          n_bytes=(tail % nb) if last else 0))
    return out


# -- vectors --------------------------------------------------------------------------------
def _vectors_crc(params: dict, seed: int, count: int) -> dict:
    known = {"algorithm", "min_bytes", "max_bytes"}
    for key in params:
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(known))})")
    alg = get_algorithm(params.get("algorithm", "crc32"))
    lens = {}
    for key, default in (("min_bytes", "1"), ("max_bytes", "64")):
        try:
            lens[key] = int(params.get(key, default), 0)
        except ValueError:
            raise ValueError(f"{key}={params[key]!r} is not an integer") from None
    if not 0 <= lens["min_bytes"] <= lens["max_bytes"]:
        raise ValueError(f"min_bytes={lens['min_bytes']} and max_bytes={lens['max_bytes']} "
                         "must satisfy 0 <= min_bytes <= max_bytes")
    rng = np.random.default_rng(seed)
    vectors = [{"message": b"123456789".hex(), "crc": crc_table(b"123456789", alg)}]
    for _ in range(count - 1):
        n = int(rng.integers(lens["min_bytes"], lens["max_bytes"] + 1))
        msg = rng.bytes(n)
        vectors.append({"message": msg.hex(), "crc": crc_table(msg, alg)})
    return {"params": {"algorithm": alg.name, "catalogue": alg.catalogue, "width": alg.width,
                       "poly": alg.poly, "init": alg.init, "refin": alg.refin,
                       "refout": alg.refout, "xorout": alg.xorout, **lens},
            "vectors": vectors}


VECTORS = {"crc": _vectors_crc}
